"""The run driver of ``claims verify``: the selected parts, each reused from the cache or evaluated, on N lanes.

Every observation the cache holds is reused first, in this process. The parts left run longest first (by the
seconds the last report gave them): one at a time here, or on ``lanes`` worker processes forked from this one, each
asking for the next part when it is done (pytest-xdist's load scheduling, without pytest). A lane is only a place to
call :func:`claims_harness._running.engine.evaluate`: the check inside still runs in its own supervised worker and
the implementation in its own host (each lane starts its own), so a part's time limit, crash or hang is the
engine's to report, and a lane that dies costs only the part it was running (an error row saying so), the next
part going to a new lane. What a lane sends back is its evidence as JSON. No library schedules calls of forked
workers that keep their state and report one result at a time (``concurrent.futures``' pools lose every pending
task with a broken worker; pytest-xdist needs a pytest session), hence this module.

Ctrl-C (or SIGTERM) ends the run: the lanes are ended and the parts not reported are named as such.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
import re
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from claims_harness._claims.loading import Catalogue
from claims_harness._claims.results_file import check_seconds, results_if_readable
from claims_harness._running.engine import Outcome, Part, evaluate, keywords, never_reported
from claims_harness._running.options import RunOptions
from claims_harness._running.processes import (
    TIMED_OUT,
    describe_exit,
    die_with_parent,
    forking,
    interrupt_on_termination,
    kill_group,
    limit_memory,
    redirect_output,
)
from claims_harness._running.remote import close_hosts
from claims_harness.errors import ClaimsError

# A check never timed before is assumed to take this long, by kind (the experiments' smoke runs take 5-30 s, the
# properties' a few seconds, the others about one).
UNTIMED_SECONDS = {"experiment": 30.0, "property": 3.0}
# How long an ended lane has to leave before it is killed.
_LEAVE_SECONDS = 10.0


@dataclass
class Run:
    """What the driver found: each part's outcome by key (None: it never reported), and why the run is not whole."""

    outcomes: dict[str, Outcome | None]
    ran: int
    interrupted: bool = False


def last_seconds(report_dir: Path) -> dict[tuple[str, int], float]:
    """(claim, check index) -> the seconds the results file in ``report_dir`` gives the check (a reused one's are
    those of the run that made it); empty without a readable file."""
    return check_seconds(results_if_readable(report_dir))


def lanes_asked(asked: str | None) -> int:
    """How many lanes ``-n`` asks for: a number, or 'auto' (every core); 1 without it."""
    if asked is None:
        return 1
    if asked in ("auto", "logical"):
        return os.cpu_count() or 1
    try:
        return max(1, int(asked))
    except ValueError:
        raise ClaimsError(f"-n {asked!r} is not a number of processes: give a number, e.g. -n 2, or -n auto") from None


def expected_seconds(part: Part, seconds: dict[tuple[str, int], float]) -> float:
    """How long ``part`` is expected to take: what ``seconds`` (the last report's) gives it, else its kind's guess."""
    if part.entry is None or part.entry.claim is None or part.index is None:
        return 0.0
    kind = part.entry.claim.checks[part.index].kind
    return seconds.get((part.entry.id, part.index), UNTIMED_SECONDS.get(kind, 1.0))


def longest_first(parts: Sequence[Part], seconds: dict[tuple[str, int], float]) -> list[Part]:
    """``parts``, the longest expected first, those expected alike in their order: handing the longest out first
    (longest-processing-time-first scheduling) evens the lanes out, where the long experiments late in the claim
    files would keep the run waiting on one lane while the others idle."""
    return sorted(parts, key=partial(expected_seconds, seconds=seconds), reverse=True)


def reused(parts: Sequence[Part], catalogue: Catalogue, options: RunOptions) -> dict[str, Outcome | None]:
    """Each part's outcome as the cache holds it (None: not cached), in this process; nothing runs."""
    return {part.key: evaluate(part, catalogue, options, reuse_only=True) for part in parts}


def drive(parts: Sequence[Part], catalogue: Catalogue, options: RunOptions, lanes: int,
          seconds: dict[tuple[str, int], float], said: Callable[[str], None]) -> Run:
    """Each part's outcome: reused where the cache holds it, else evaluated, longest first, on ``lanes`` processes.

    ``said`` is told one line per part evaluated (never per skipped check), with what is left and an estimate of
    the time it takes, from ``seconds`` (the last report's) and the lanes.
    """
    outcomes = reused(parts, catalogue, options)
    to_run = longest_first([part for part in parts if outcomes[part.key] is None], seconds)
    progress = _Progress(to_run, partial(expected_seconds, seconds=seconds), max(1, min(lanes, len(to_run))), said)

    def ended(number: int, outcome: Outcome) -> None:
        outcomes[to_run[number].key] = outcome
        progress.ended(to_run[number], outcome)

    try:
        evaluate_each([(part, options) for part in to_run], catalogue, progress.lanes, ended,
                      lambda number: progress.started(to_run[number]))
    except KeyboardInterrupt:
        return Run(outcomes, len(to_run), interrupted=True)
    return Run(outcomes, len(to_run))


def evaluate_each(tasks: Sequence[tuple[Part, RunOptions]], catalogue: Catalogue, lanes: int,
                  ended: Callable[[int, Outcome], None], started: Callable[[int], None] = lambda number: None
                  ) -> None:
    """Evaluate each (part, options) in turn: in this process with one lane, else on ``lanes`` lanes (a lane that
    dies costs only its task, an error row saying how it died). ``started``/``ended`` are told each task's number
    as it starts and ends. Ctrl-C or SIGTERM raises KeyboardInterrupt here, the lanes, their checks' workers and
    the implementation's hosts ended."""
    undo = interrupt_on_termination()
    try:
        if lanes == 1:
            for number, (part, options) in enumerate(tasks):
                started(number)
                ended(number, evaluate(part, catalogue, options))
            return

        def work(number: int) -> list[Any]:
            outcome = evaluate(tasks[number][0], catalogue, tasks[number][1])
            return [outcome.evidence, outcome.status, outcome.message]

        def done(number: int, end: LaneEnd) -> None:
            if end.value is not None:
                ended(number, Outcome(*end.value))
                return
            # The lane runs no code of the implementation's: its own death is not blamed on it.
            part, options = tasks[number]
            why = "its result never reached the report: " + (
                f"the process running it died ({end.why})" if end.died else f"evaluating it raised\n{end.why}")
            ended(number, Outcome(never_reported(part, catalogue, options, why), "error", why))

        on_lanes(len(tasks), work, lanes, done, started)
    finally:
        undo()
        close_hosts()


class _Progress:
    """The line said as each part ends: its status, how many are left, the estimate, and what still runs."""

    def __init__(self, to_run: list[Part], expected: Callable[[Part], float], lanes: int,
                 said: Callable[[str], None]):
        self.left = {part.key: expected(part) for part in to_run}
        self.total = len(to_run)
        self.lanes = lanes
        self.running: dict[str, float] = {}
        self.said = said

    def started(self, part: Part) -> None:
        self.running[part.key] = time.monotonic()

    def ended(self, part: Part, outcome: Outcome) -> None:
        self.running.pop(part.key, None)
        self.left.pop(part.key, None)
        if outcome.status == "skipped":
            return
        done = self.total - len(self.left)
        now = time.monotonic()
        # What is still expected of the running parts, then of the queue, spread over the lanes.
        remaining = sum(max(0.0, self.left[key] - (now - began)) for key, began in self.running.items())
        remaining += sum(seconds for key, seconds in self.left.items() if key not in self.running)
        line = f"claims verify: [{done}/{self.total}] {part.key} {outcome.status}"
        if self.left:
            line += f" | about {_clock(remaining / self.lanes)} left"
            if len(self.left) == len(self.running):  # the queue is empty: say what the wait is for
                line += " | running: " + ", ".join(sorted(self.running))
        self.said(line)


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}:{seconds:02d}"


@dataclass(frozen=True)
class LaneEnd:
    """How a task ended on a lane: what ``work`` returned (JSON), or (``value`` None) why there is none: the
    traceback of what it raised, or (``died``) how its lane ended: an exit status, a signal, :data:`TIMED_OUT`."""

    value: Any
    why: str
    seconds: float
    died: bool = False


def on_lanes(count: int, work: Callable[[int], Any], lanes: int, done: Callable[[int, LaneEnd], None],
             started: Callable[[int], None] = lambda number: None, *,
             limit_of: Callable[[int], float] | None = None, fresh: bool = False) -> None:
    """``work(number)`` for each number below ``count``, in that order, on ``lanes`` processes forked from this
    one, the next task to whichever lane is free: the one scheduler of many tasks (checks, audit runs, mutants).

    A lane is a process group of its own, killed with this process. ``work`` returns JSON-ready data; ``done``
    is called as each task ends, in the order they end. A lane that dies, or that is still on a task
    ``limit_of(number)`` seconds after it began, is killed with all it started and the task's end says so; a new
    lane takes the tasks left. With ``fresh`` each lane runs one task only (what a task leaves behind, a mutant's
    trampoline state, reaches no other task), its output discarded and its address space limited as a check's
    worker's is: such a task may run the implementation in the lane itself (the mutants do). A lane that only
    evaluates checks leaves that to the workers and hosts it starts, as a run in one process does.
    """
    waiting = list(reversed(range(count)))
    running: dict[Connection, _Lane] = {}
    try:
        while waiting or any(lane.number is not None for lane in running.values()):
            while waiting and len(running) < lanes:
                lane = _Lane(work, fresh)
                running[lane.connection] = lane
            for lane in list(running.values()):
                if lane.number is None and waiting:
                    number = waiting[-1]
                    if not lane.give(number, limit_of(number) if limit_of else None):
                        del running[lane.connection]  # it died idle: a new lane takes the task
                        lane.end()
                        continue
                    started(waiting.pop())
            owners = {handle: lane for lane in running.values() for handle in (lane.connection, lane.process.sentinel)}
            deadline = min((lane.deadline for lane in running.values() if lane.number is not None), default=math.inf)
            ready = wait(list(owners), timeout=max(0.0, min(deadline - time.monotonic(), 1.0)))
            for lane in list(running.values()):
                # What a lane started holds its handles open: that it exited is asked too.
                if lane.number is None or not (lane.connection in ready or lane.process.sentinel in ready
                                               or time.monotonic() > lane.deadline or not lane.process.is_alive()):
                    continue
                number, end = lane.number, lane.answer()
                if end is None or fresh:
                    del running[lane.connection]
                    end = end or lane.death()
                    lane.end()
                done(number, end)
    finally:
        for lane in running.values():
            lane.end()


class _Lane:
    """One lane: a process forked from this one that runs ``work`` on the task numbers it is given, one at a
    time."""

    def __init__(self, work: Callable[[int], Any], fresh: bool):
        self.connection, theirs = multiprocessing.Pipe(duplex=True)
        self.number: int | None = None
        self.began = self.deadline = math.inf
        with forking() as started:
            # Not a daemon: the checks it runs fork workers, whose seeds may run in a pool of their own.
            self.process = multiprocessing.get_context("fork").Process(target=_lane_main, args=(work, theirs, fresh))
            self.process.start()
            started.append(self.process)
        theirs.close()

    def give(self, number: int, limit: float | None) -> bool:
        """Send it task ``number``, to be done within ``limit`` seconds (None: no limit); False when it is gone."""
        try:
            self.connection.send_bytes(json.dumps(number).encode())
        except OSError:
            return False
        self.number, self.began = number, time.monotonic()
        self.deadline = math.inf if limit is None else self.began + limit
        return True

    def answer(self) -> LaneEnd | None:
        """How the task given ended, or None when the lane died or ran past the limit before answering."""
        try:
            if not self.connection.poll(0):
                return None
            number, value, error = json.loads(self.connection.recv_bytes())
        except (EOFError, OSError, ValueError):
            return None
        assert number == self.number, (number, self.number)
        self.number = None
        return LaneEnd(value, error, time.monotonic() - self.began)

    def death(self) -> LaneEnd:
        """The end of a task whose lane died, or was still on it past its limit (the lane is then killed)."""
        seconds = time.monotonic() - self.began
        if time.monotonic() > self.deadline and self.process.is_alive():
            kill_group(self.process)
            return LaneEnd(None, TIMED_OUT, seconds, died=True)
        self.process.join(5)
        code = self.process.exitcode
        how = f"exit status {code}" if code is not None and code > 0 else describe_exit(code)
        return LaneEnd(None, how, seconds, died=True)

    def end(self) -> None:
        """Ask the lane to leave, then end it: everything it started ends with it."""
        if self.process.is_alive():
            if self.number is None:
                with contextlib.suppress(OSError):
                    self.connection.send_bytes(b"null")
            else:  # busy: interrupted, as Ctrl-C would (it ends the check's worker and its server on the way out)
                os.kill(self.process.pid, signal.SIGTERM)
            self.process.join(_LEAVE_SECONDS)
        kill_group(self.process)
        self.connection.close()


def _lane_main(work: Callable[[int], Any], connection: Connection, fresh: bool) -> None:
    os.setpgrp()
    die_with_parent()
    if fresh:  # a mutant's lane runs the implementation itself: bounded as a check's worker is, and quiet
        limit_memory()
        redirect_output(os.open(os.devnull, os.O_WRONLY))
    try:
        while (number := json.loads(connection.recv_bytes())) is not None:
            try:
                value, error = work(number), ""
            except Exception:  # the task's end, not the lane's
                value, error = None, traceback.format_exc(limit=-8)
            connection.send_bytes(json.dumps([number, value, error]).encode())
    except (KeyboardInterrupt, EOFError, OSError):
        pass
    finally:
        close_hosts()


def selected(parts: Sequence[Part], catalogue: Catalogue, expression: str) -> list[Part]:
    """The parts whose names match ``expression``, as pytest's ``-k`` reads it: words joined by ``and``, ``or``,
    ``not`` and parentheses, a word matching a part when it is part of (case aside) the claim file's, claim's or
    check's name, the check's kind or verifier, a function the check uses, or an alias of the claim.

    Raises:
      ClaimsError: the expression cannot be read (naming where), or it matches no part.
    """
    if not expression.strip():
        return list(parts)
    matches = _Expression(expression)
    chosen = [part for part in parts if matches(keywords(part, catalogue))]
    if not chosen:
        raise ClaimsError(f"-k {expression!r} matches no check of the {len(parts)} in {catalogue.root}: 'claims list' "
                          "shows the claims' ids, 'claims verifiers' the verifiers and the functions they use")
    return chosen


class _Expression:
    """A ``-k`` expression, read once (a recursive descent over its words: pytest's own reader is private)."""

    def __init__(self, text: str):
        self.text = text
        self.words = re.findall(r"\(|\)|[^\s()]+", text)

    def __call__(self, names: Sequence[str]) -> bool:
        self.names = [name.lower() for name in names]
        self.at = 0
        found = self._any()
        if self.at != len(self.words):
            self._refuse(f"'{self.words[self.at]}' where the expression should end")
        return found

    def _any(self) -> bool:
        found = self._all()
        while self._next_is("or"):
            found = self._all() or found
        return found

    def _all(self) -> bool:
        found = self._one()
        while self._next_is("and"):
            found = self._one() and found
        return found

    def _one(self) -> bool:
        if self._next_is("not"):
            return not self._one()
        if self._next_is("("):
            found = self._any()
            if not self._next_is(")"):
                self._refuse("a '(' that is not closed")
            return found
        if self.at == len(self.words) or self.words[self.at] in ("and", "or", ")"):
            self._refuse("a word missing" + (f" before '{self.words[self.at]}'" if self.at < len(self.words) else
                                              " at the end"))
        word = self.words[self.at].lower()
        self.at += 1
        return any(word in name for name in self.names)

    def _next_is(self, word: str) -> bool:
        if self.at < len(self.words) and self.words[self.at] == word:
            self.at += 1
            return True
        return False

    def _refuse(self, what: str) -> None:
        raise ClaimsError(f"-k {self.text!r} cannot be read: {what}; write words joined by 'and', 'or', 'not' and "
                          "parentheses, e.g. -k \"gae_advantages or (baselines and not experiment)\"")

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
import multiprocessing
import os
import re
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from claims_harness._claims.course import RESULTS_FILE
from claims_harness._claims.errors import ClaimsError
from claims_harness._claims.loading import Catalogue
from claims_harness._running.engine import Outcome, Part, evaluate, keywords, never_reported
from claims_harness._running.processes import describe_exit, interrupt_on_termination, quiet_stdio
from claims_harness._running.remote import close_hosts
from claims_harness._running.runner import RunOptions

# A check never timed before is assumed to take this long, by kind (the experiments' smoke runs take 5-30 s).
UNTIMED_SECONDS = {"experiment": 30.0}
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
    try:
        results = json.loads((report_dir / RESULTS_FILE).read_text(encoding="utf-8"))
        return {(row["id"], index): float(check["seconds"]) for row in results["claims"]
                for index, check in enumerate(row["checks"])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def drive(parts: Sequence[Part], catalogue: Catalogue, options: RunOptions, lanes: int,
          seconds: dict[tuple[str, int], float], said: Callable[[str], None]) -> Run:
    """Each part's outcome: reused where the cache holds it, else evaluated, longest first, on ``lanes`` processes.

    ``said`` is told one line per part evaluated (never per skipped check), with what is left and an estimate of
    the time it takes, from ``seconds`` (the last report's) and the lanes.
    """
    outcomes: dict[str, Outcome | None] = {part.key: evaluate(part, catalogue, options, reuse_only=True)
                                           for part in parts}

    def expected(part: Part) -> float:
        if part.entry is None or part.entry.claim is None or part.index is None:
            return 0.0
        kind = part.entry.claim.checks[part.index].kind
        return seconds.get((part.entry.id, part.index), UNTIMED_SECONDS.get(kind, 1.0))

    to_run = sorted((part for part in parts if outcomes[part.key] is None), key=expected, reverse=True)
    progress = _Progress(to_run, expected, max(1, min(lanes, len(to_run))), said)
    undo = interrupt_on_termination()
    try:
        if progress.lanes == 1:
            for part in to_run:
                progress.started(part)
                outcomes[part.key] = evaluate(part, catalogue, options)
                progress.ended(part, outcomes[part.key])
        else:
            _on_lanes(to_run, catalogue, options, progress, outcomes)
    except KeyboardInterrupt:
        return Run(outcomes, len(to_run), interrupted=True)
    finally:
        undo()
        close_hosts()
    return Run(outcomes, len(to_run))


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

    def ended(self, part: Part, outcome: Outcome | None) -> None:
        self.running.pop(part.key, None)
        self.left.pop(part.key, None)
        status = outcome.status if outcome is not None else "error"
        if status == "skipped":
            return
        done = self.total - len(self.left)
        now = time.monotonic()
        # What is still expected of the running parts, then of the queue, spread over the lanes.
        remaining = sum(max(0.0, self.left[key] - (now - began)) for key, began in self.running.items())
        remaining += sum(seconds for key, seconds in self.left.items() if key not in self.running)
        line = f"claims verify: [{done}/{self.total}] {part.key} {status}"
        if self.left:
            line += f" | about {_clock(remaining / self.lanes)} left"
            if len(self.left) == len(self.running):  # the queue is empty: say what the wait is for
                line += " | running: " + ", ".join(sorted(self.running))
        self.said(line)


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}:{seconds:02d}"


def _on_lanes(to_run: list[Part], catalogue: Catalogue, options: RunOptions, progress: _Progress,
              outcomes: dict[str, Outcome | None]) -> None:
    """Evaluate ``to_run`` on ``progress.lanes`` forked processes, the next part to whichever lane is free."""
    waiting = list(reversed(range(len(to_run))))
    lanes: dict[Connection, _Lane] = {}
    try:
        while waiting or any(lane.number is not None for lane in lanes.values()):
            while waiting and len(lanes) < progress.lanes:
                lane = _Lane(to_run, catalogue, options)
                lanes[lane.connection] = lane
            for lane in list(lanes.values()):
                if lane.number is None and waiting:
                    if not lane.give(waiting[-1]):  # it died idle: a new lane takes the part
                        del lanes[lane.connection]
                        lane.end()
                        continue
                    progress.started(to_run[waiting.pop()])
            owners = {handle: lane for lane in lanes.values() for handle in (lane.connection, lane.process.sentinel)}
            for ready in wait(list(owners)):
                lane = owners[ready]
                if lane.connection not in lanes or lane.number is None:  # ended already, by its other handle
                    continue
                number = lane.number
                part = to_run[number]
                outcome = lane.answer()
                if outcome is None:  # the lane died: this part is its only loss
                    del lanes[lane.connection]
                    outcome = lane.death(part, catalogue, options)
                outcomes[part.key] = outcome
                progress.ended(part, outcome)
    finally:
        for lane in lanes.values():
            lane.end()


class _Lane:
    """One lane: a process forked from this one that evaluates the parts it is given, one at a time."""

    def __init__(self, parts: list[Part], catalogue: Catalogue, options: RunOptions):
        self.connection, theirs = multiprocessing.Pipe(duplex=True)
        self.number: int | None = None
        with quiet_stdio():
            # Not a daemon: the checks it runs fork workers, whose seeds may run in a pool of their own.
            self.process = multiprocessing.get_context("fork").Process(
                target=_lane_main, args=(parts, catalogue, options, theirs))
            self.process.start()
        theirs.close()

    def give(self, number: int) -> bool:
        """Send it part ``number``; False when it is gone."""
        try:
            self.connection.send_bytes(json.dumps(number).encode())
        except OSError:
            return False
        self.number = number
        return True

    def answer(self) -> Outcome | None:
        """The outcome of the part given, or None when the lane died first."""
        try:
            number, evidence, status, message = json.loads(self.connection.recv_bytes())
        except (EOFError, OSError, ValueError):
            return None
        assert number == self.number, (number, self.number)
        self.number = None
        return Outcome(evidence, status, message)

    def death(self, part: Part, catalogue: Catalogue, options: RunOptions) -> Outcome:
        self.process.join(5)
        self.end()
        code = self.process.exitcode
        # The lane runs no code of the implementation's: an exit status of its own is not blamed on it.
        how = f"exit status {code}" if code is not None and code > 0 else describe_exit(code)
        why = f"its result never reached the report: the process running it died ({how})"
        return Outcome(never_reported(part, catalogue, options, why), "error", why)

    def end(self) -> None:
        """Ask the lane to leave, then end it: its checks' workers and its host end with it."""
        if self.process.is_alive():
            if self.number is None:
                with contextlib.suppress(OSError):
                    self.connection.send_bytes(b"null")
            else:  # busy: interrupted, as Ctrl-C would (it ends the check's worker and its server on the way out)
                os.kill(self.process.pid, signal.SIGTERM)
            self.process.join(_LEAVE_SECONDS)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self.connection.close()


def _lane_main(parts: list[Part], catalogue: Catalogue, options: RunOptions, connection: Connection) -> None:
    try:
        while (number := json.loads(connection.recv_bytes())) is not None:
            outcome = evaluate(parts[number], catalogue, options)
            connection.send_bytes(json.dumps([number, outcome.evidence, outcome.status, outcome.message]).encode())
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

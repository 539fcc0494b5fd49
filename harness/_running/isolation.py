"""The implementation under test runs in a supervised worker process, never in the process that judges.

A student's implementation may crash the interpreter (``os._exit``, a segfault in an extension),
block forever, cancel the alarm that limits a check, swallow the exception that alarm raises, or
allocate without bound, and whatever it does at import (set environment variables, rebind a
function of NumPy or of the harness) stays in the process that imported it. None of that may cost
more than the check's own row, or reach a verdict. So every check's verifier runs in a worker, and
the judging process never imports the implementation: a check that calls it runs in a worker forked
from a :class:`Zygote`, a process forked from the judge that imported the implementation once (so
no check pays for the import, and the claims and verifiers are already loaded); a check that calls
none runs in a worker forked from the judge itself. Each worker is in a process group of its own
(so a kill reaches the seed pools it starts, and a terminal's Ctrl-C reaches only the supervisor),
with an address-space limit, and dies with its parent. The supervisor waits for the answer with a
hard limit of its own, from outside: past it, the group is killed and the check is an ``error``
saying why; a worker that dies is an ``error`` naming the exit status or signal. The next check gets
a new worker. Only plain data comes back (``harness._running.plain_data``). No library does this for
one call with a result (``concurrent.futures`` cannot kill a hung task, a broken pool takes every
pending task with it, and multiprocessing's forkserver would import the claims and verifiers anew
in its server), hence this module.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import wait
from typing import Any

from harness._claims.errors import ClaimsError
from harness._running.plain_data import NotPlain, plain_loads
from harness._running.processes import (
    Answer,
    CheckCrashed,
    Process,
    describe_exit,
    kill_group,
    open_descriptors,
    quiet_stdio,
    serve,
)
from harness._running.zygote import Zygote

# How long past its stated limit a check may take before the supervisor kills it: enough for the
# worker's own alarm to fire and the answer to come back (as long as the limit, from 2 s up to 10 s).
GRACE_SECONDS = (2.0, 10.0)


def run_isolated(call: Callable[[], Any], limit: float, what: str, zygote: Zygote | None = None) -> Any:
    """``call()`` in a new worker process; its value, or the exception it raised re-raised as ClaimsError.

    Args:
      call: what to run; forked from this process it need not pickle, from ``zygote`` it must (its value
        must pickle either way, on the way back).
      limit: the check's stated time limit in seconds; the worker is killed a grace period (``GRACE_SECONDS``) after it.
      what: the check, as messages name it ("claim 'x' check 2").
      zygote: the process to fork the worker from; None for this one.

    Raises:
      CheckCrashed: the worker died, or ran past the limit and was killed.
      ClaimsError: ``call`` raised: the same ClaimsError, or one holding the worker's traceback of any other error.
    """
    grace = min(max(limit, GRACE_SECONDS[0]), GRACE_SECONDS[1])
    (ended,) = run_each_isolated([call], _call, lambda task: limit + grace, workers=1, zygote=zygote)
    tail = f"; its last output:\n{ended.output}" if ended.output else ""
    if ended.answer is None and ended.exit == TIMED_OUT:
        raise CheckCrashed(f"{what} ran past its time limit of {limit:g} s and did not stop when told to (the "
                           "implementation blocks the alarm, swallows its exception or waits in native code); "
                           f"its process was killed after {limit + grace:g} s" + tail)
    if ended.answer is None:
        raise CheckCrashed(f"{what}: the process running it died ({ended.exit}); the implementation crashed the "
                           "interpreter, or it was killed from outside" + tail)
    if ended.answer.exception is not None:
        raise ended.answer.exception
    if ended.answer.error is not None:
        raise ClaimsError(f"{what}: {ended.answer.error}" if ended.answer.error.startswith(_UNREADABLE)
                          else ended.answer.error)
    return ended.answer.value


def _call(task: Callable[[], Any]) -> Any:
    return task()


TIMED_OUT = "killed past its time limit"
_UNREADABLE = "the worker's answer cannot be read back"


@dataclass(frozen=True)
class Ended:
    """How a worker ended: its answer, or (``answer`` None) why there is none; its time, the end of its output."""

    answer: Answer | None
    exit: str
    seconds: float
    output: str


def run_each_isolated(tasks: Sequence[Any], call: Callable[[Any], Any], limit_of: Callable[[Any], float],
                      workers: int, done: Callable[[int, Ended], None] | None = None,
                      zygote: Zygote | None = None) -> list[Ended]:
    """``call(task)`` for each task, each in a worker of its own (forked from ``zygote`` if given, else from this
    process), ``workers`` at a time: how each ended.

    The one supervisor of worker processes: a check's (through :func:`run_isolated`) and the mutants'.
    A worker still running ``limit_of(task)`` seconds after it started is killed (``exit`` is
    :data:`TIMED_OUT`); one that dies without answering has ``exit`` naming its exit status or signal.
    ``done(number, ended)`` is called as each ends, in the order they end.
    """
    ended: dict[int, Ended] = {}
    waiting = list(reversed(range(len(tasks))))
    running: dict[int, _Worker] = {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                number = waiting.pop()
                running[number] = _Worker(partial(call, tasks[number]), limit_of(tasks[number]), zygote)
            deadline = min(worker.deadline for worker in running.values())
            handles = [handle for worker in running.values() for handle in (worker.reader, worker.process.sentinel)
                       if handle is not None]
            ready = wait(handles, timeout=max(0.0, min(deadline - time.monotonic(), 1.0)))
            for number, worker in list(running.items()):
                # A worker's own children (a seed pool) hold its answer pipe open: that it exited is asked too.
                if worker.reader in ready or worker.process.sentinel in ready or time.monotonic() > worker.deadline \
                        or not worker.process.is_alive():
                    ended[number] = worker.end()
                    del running[number]
                    if done:
                        done(number, ended[number])
    finally:
        for worker in running.values():
            worker.end()
    return [ended[number] for number in range(len(tasks))]


class _Worker:
    """One worker process, forked to run one call, and the means to collect or end it."""

    def __init__(self, call: Callable[[], Any], limit: float, zygote: Zygote | None = None):
        self.reader, writer = multiprocessing.Pipe(duplex=False)
        self.output = tempfile.TemporaryFile(prefix="claims-worker-")  # noqa: SIM115 (closed in end())
        self.process: Process
        try:
            if zygote is not None:
                self.process = zygote.fork(call, writer, self.output)
            else:
                with quiet_stdio():
                    # Not a daemon: a check's seeds may run in a process pool of the worker's own.
                    self.process = multiprocessing.get_context("fork").Process(
                        target=serve, args=(call, writer, self.output.fileno(), open_descriptors()))
                    self.process.start()
        except BaseException:
            self.reader.close()
            self.output.close()
            raise
        finally:
            writer.close()
        self.started = time.monotonic()
        self.deadline = self.started + limit

    def end(self) -> Ended:
        """The answer if it came, else why not; the worker and everything it started are killed."""
        answer = None
        try:
            # A worker that has exited may still have its answer in the pipe; one that is alive has sent it or is late.
            if self.reader.poll(0):
                answer = plain_loads(self.reader.recv_bytes())
        except (EOFError, OSError):
            pass  # the worker died while (or instead of) sending its answer
        except NotPlain as error:
            answer = Answer(error=f"the check's answer holds {error}: only plain data (numbers, strings, arrays, "
                                  "Fractions and containers of them) crosses back from its worker")
        except Exception as error:  # an answer that does not unpickle here
            answer = Answer(error=f"{_UNREADABLE} ({error})")
        seconds = time.monotonic() - self.started
        if answer is None and time.monotonic() <= self.deadline:
            self.process.join(5)  # it closed the pipe in exiting: wait for its exit status
        timed_out = answer is None and self.process.is_alive()
        kill_group(self.process)
        exit = "" if answer is not None else TIMED_OUT if timed_out else describe_exit(self.process.exitcode)
        output = _tail(self.output)
        self.reader.close()
        self.output.close()
        return Ended(answer, exit, seconds, output)


def _tail(output: Any, limit: int = 2000) -> str:
    """The end of what the worker printed, for the error row."""
    try:
        output.seek(0)
        return output.read().decode("utf-8", "replace").strip()[-limit:]
    except (OSError, ValueError):
        return ""

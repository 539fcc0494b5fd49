"""The verifier runs in a supervised worker process; the implementation under test in a process of its own.

A student's implementation may crash the interpreter (``os._exit``, a segfault in an extension),
block forever, cancel the alarm that limits a check, swallow the exception that alarm raises, or
allocate without bound, and whatever it does at import (set environment variables, rebind a
function of NumPy or of the harness) stays in the process that imported it. None of that may cost
more than the check's own row, or reach a verdict. So the judging process never imports the
implementation, and no verifier runs where it was imported: every check's verifier runs in a worker
forked from the judge, and a check that calls the implementation gets, from the implementation's
host (``claims_harness._running.remote``), a server process that answers its calls as data; the worker
holds the one end of that connection. Each worker is in a process group of its own (so a kill
reaches the seed pools it starts, and a terminal's Ctrl-C reaches only the supervisor), with an
address-space limit, and dies with its parent. The supervisor waits for the answer with a hard
limit of its own, from outside: past it, the group is killed and the check is an ``error`` saying
why; a worker that dies is an ``error`` naming the exit status or signal; the server is ended with
the worker, and whatever it started with it. The next check gets a new worker and a new server.
The answer is data (``claims_harness._running.wire``). No library does this for one call with a result
(``concurrent.futures`` cannot kill a hung task, a broken pool takes every pending task with it, and
multiprocessing's forkserver would import the claims and verifiers anew in its server), hence this
module. Many tasks on several processes are the run driver's (``claims_harness._running.driver.on_lanes``).
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection, wait
from typing import Any

from claims_harness._running.processes import (
    TIMED_OUT,
    Answer,
    Process,
    describe_exit,
    forking,
    kill_group,
    open_descriptors,
    serve,
)
from claims_harness.errors import CheckCrashed, ClaimsError, NotData

# What starts a check's server, given the descriptor its output goes to: the worker's end of the connection, and
# what ends the server and says how it had ended, when that was on its own ('' else); it is told whether the worker
# saw the server's end (its exit status is then waited for, not raced by the kill).
StartServer = Callable[[int], tuple[Connection, Callable[[bool], str]]]

# How long past its stated limit a check may take before the supervisor kills it: enough for the
# worker's own alarm to fire and the answer to come back (as long as the limit, from 2 s up to 10 s).
GRACE_SECONDS = (2.0, 10.0)


def run_isolated(call: Callable[..., Any], limit: float, what: str, server: StartServer | None = None) -> Any:
    """``call()`` in a new worker process; its value, or the exception it raised re-raised as ClaimsError.

    Args:
      call: what to run (forked from this process, it need not pickle; its value must be data, on the way back).
      limit: the check's stated time limit in seconds; the worker is killed a grace period (``GRACE_SECONDS``) after it.
      what: the check, as messages name it ("claim 'x' check 2").
      server: starts the implementation's server for this check; ``call`` then gets the worker's end of the
        connection to it, ``call(connection)``.

    Raises:
      CheckCrashed: the worker died, or ran past the limit and was killed.
      ClaimsError: ``call`` raised: the same ClaimsError, or one holding the worker's traceback of any other error.
    """
    grace = min(max(limit, GRACE_SECONDS[0]), GRACE_SECONDS[1])
    ended = _supervised(call, limit + grace, server)
    tail = (f"; the implementation's process {ended.server_exit}" if ended.server_exit else "") + \
        (f"; its last output:\n{ended.output}" if ended.output else "")
    if ended.answer is None and ended.exit == TIMED_OUT:
        raise CheckCrashed(f"{what} ran past its time limit of {limit:g} s and did not stop when told to (the "
                           "implementation blocks the alarm, swallows its exception or waits in native code); "
                           f"its process was killed after {limit + grace:g} s" + tail)
    if ended.answer is None:
        raise CheckCrashed(f"{what}: the process running it died ({ended.exit}); the implementation crashed the "
                           "interpreter, or it was killed from outside" + tail)
    if ended.answer.exception is not None:
        error = ended.answer.exception
        if ended.server_exit and isinstance(error, CheckCrashed):
            error.args = (f"{error.args[0] if error.args else error}: the implementation's process "
                          f"{ended.server_exit}",)
        raise error
    if ended.answer.error is not None:
        raise ClaimsError(f"{what}: {ended.answer.error}" if ended.answer.error.startswith(_UNREADABLE)
                          else ended.answer.error)
    return ended.answer.value


_UNREADABLE = "the worker's answer cannot be read back"


@dataclass(frozen=True)
class Ended:
    """How a worker ended: its answer, or (``answer`` None) why there is none; its time, the end of its output; how
    the implementation's server had ended on its own, if it had (``''`` else)."""

    answer: Answer | None
    exit: str
    seconds: float
    output: str
    server_exit: str = ""


def _supervised(call: Callable[..., Any], limit: float, server: StartServer | None) -> Ended:
    """``call()`` (``call(connection)`` with ``server``) in a worker forked from this process, and how it ended: its
    answer, or ``exit`` naming its exit status or signal, or :data:`TIMED_OUT` when it was still running ``limit``
    seconds after it started and so was killed."""
    worker = _Worker(call, limit, server)
    try:
        while True:
            # A worker's own children (a seed pool) hold its answer pipe open: that it exited is asked too.
            ready = wait([worker.reader, worker.process.sentinel],
                         timeout=max(0.0, min(worker.deadline - time.monotonic(), 1.0)))
            if ready or time.monotonic() > worker.deadline or not worker.process.is_alive():
                return worker.end()
    except BaseException:
        worker.end()
        raise


class _Worker:
    """One worker process, forked to run one call, and the means to collect or end it (and its server)."""

    def __init__(self, call: Callable[..., Any], limit: float, server: StartServer | None = None):
        self.reader, writer = multiprocessing.Pipe(duplex=False)
        self.output = tempfile.TemporaryFile(prefix="claims-worker-")  # noqa: SIM115 (closed in end())
        self.end_server: Callable[[bool], str] = lambda crashed: ""
        connection = None
        try:
            if server is not None:
                connection, self.end_server = server(self.output.fileno())
                call = partial(call, connection)
            keep = frozenset({connection.fileno()}) if connection is not None else frozenset()
            with forking() as started:
                # Not a daemon: a check's seeds may run in a process pool of the worker's own.
                self.process: Process = multiprocessing.get_context("fork").Process(
                    target=serve, args=(call, writer, self.output.fileno(), open_descriptors(), keep))
                self.process.start()
                started.append(self.process)
        except BaseException:
            self.reader.close()
            self.output.close()
            self.end_server(False)
            raise
        finally:
            writer.close()
            if connection is not None:
                connection.close()  # the worker's alone: its end of the check's conversation with the implementation
        self.started = time.monotonic()
        self.deadline = self.started + limit

    def end(self) -> Ended:
        """The answer if it came, else why not; the worker, the server and everything they started are killed."""
        answer = None
        try:
            # A worker that has exited may still have its answer in the pipe; one that is alive has sent it or is late.
            if self.reader.poll(0):
                answer = Answer.decoded(self.reader.recv_bytes())
        except (EOFError, OSError):
            pass  # the worker died while (or instead of) sending its answer
        except NotData as error:
            answer = Answer(error=f"{_UNREADABLE} ({error})")
        seconds = time.monotonic() - self.started
        if answer is None and time.monotonic() <= self.deadline:
            self.process.join(5)  # it closed the pipe in exiting: wait for its exit status
        timed_out = answer is None and self.process.is_alive()
        kill_group(self.process)
        server_exit = self.end_server(answer is not None and isinstance(answer.exception, CheckCrashed))
        exit = "" if answer is not None else TIMED_OUT if timed_out else describe_exit(self.process.exitcode)
        output = _tail(self.output)
        self.reader.close()
        self.output.close()
        return Ended(answer, exit, seconds, output, server_exit)


def _tail(output: Any, limit: int = 2000) -> str:
    """The end of what the worker printed, for the error row."""
    try:
        output.seek(0)
        return output.read().decode("utf-8", "replace").strip()[-limit:]
    except (OSError, ValueError):
        return ""

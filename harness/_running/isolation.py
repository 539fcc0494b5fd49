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

import contextlib
import ctypes
import faulthandler
import importlib
import multiprocessing
import os
import pickle
import resource
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any

from harness._claims.errors import ClaimsError
from harness._running.plain_data import NotPlain, plain_loads

# How long past its stated limit a check may take before the supervisor kills it: enough for the
# worker's own alarm to fire and the answer to come back (as long as the limit, from 2 s up to 10 s).
GRACE_SECONDS = (2.0, 10.0)
# The worker's address space: half the machine's memory, so that a runaway allocation fails in the
# worker (MemoryError, an error row) instead of swapping the machine or calling the OOM killer.
_MEMORY_FRACTION = 0.5


class CheckCrashed(ClaimsError):
    """The process running a check died, or was killed for running past the check's time limit."""


@dataclass(frozen=True)
class Answer:
    """What a worker sends back: the value, or the text of the exception the call raised."""

    __plain_data__ = True  # it may cross from a worker to the judge (harness._running.plain_data)

    value: Any = None
    error: str | None = None
    # A harness error the call raised, as plain data: its class's module and name, its args and attributes (an
    # exception's own pickle may name any reducer a library installed, tblib's for one, and is not read).
    raised: tuple[str, str, tuple, dict] | None = None

    @property
    def exception(self) -> ClaimsError | None:
        """The harness error the call raised, rebuilt here, or None."""
        if self.raised is None:
            return None
        module, name, args, attributes = self.raised
        kind = getattr(importlib.import_module(module), name, None)
        if not (isinstance(kind, type) and issubclass(kind, ClaimsError)):
            return ClaimsError(f"the check raised {module}.{name}{args!r}")
        error = kind.__new__(kind)
        error.args = tuple(args)
        error.__dict__.update(attributes)
        return error


_IN_WORKER = False


def in_worker() -> bool:
    """Whether this process is a check's worker: a fresh fork with one thread, which may itself fork safely."""
    return _IN_WORKER


def supported() -> bool:
    """Whether checks can run in a forked worker here (POSIX); elsewhere they run in the checking process."""
    return "fork" in multiprocessing.get_all_start_methods() and hasattr(os, "setpgrp")


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
        self.process: multiprocessing.process.BaseProcess | _ForkedByZygote
        try:
            if zygote is not None:
                self.process = zygote.fork(call, writer, self.output)
            else:
                with _quiet_stdio():
                    # Not a daemon: a check's seeds may run in a process pool of the worker's own.
                    self.process = multiprocessing.get_context("fork").Process(
                        target=_serve, args=(call, writer, self.output.fileno(), _open_descriptors()))
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
        _kill_group(self.process)
        exit = "" if answer is not None else TIMED_OUT if timed_out else _describe_exit(self.process.exitcode)
        output = _tail(self.output)
        self.reader.close()
        self.output.close()
        return Ended(answer, exit, seconds, output)


class Zygote:
    """A process that prepared once (imported the implementation under test) and forks each check's worker from
    itself, so that the process that judges never imports it, and no check pays for the import.

    It is forked from the judge, with everything the judge has loaded; ``prepare()`` runs in it once. A request
    carries the call (pickled: a check's claim, verifier and options are plain enough) and the worker's two
    descriptors (its answer pipe and its output), passed over a Unix socket; the zygote forks the worker and
    sends back its pid, and later, on request, how it exited (it is the worker's parent, so only it can tell).
    What the zygote sends is read as plain data: the implementation runs in it.
    """

    def __init__(self, prepare: Callable[[], None], what: str, limit: float):
        self.what = what
        self._connection, theirs = multiprocessing.Pipe(duplex=True)
        with _quiet_stdio():
            # Not a daemon: the workers it forks are its children, and may start seed pools of their own.
            self.process = multiprocessing.get_context("fork").Process(
                target=_zygote, args=(prepare, theirs, _open_descriptors()))
            self.process.start()
        theirs.close()
        try:
            ready = self._receive(limit)
        except CheckCrashed:
            self.close()
            raise
        if not isinstance(ready, Answer):
            self.close()
            raise CheckCrashed(f"{what}: the process that imports it answered {type(ready).__name__}")
        if ready.exception is not None or ready.error is not None:
            self.close()
            raise ready.exception or ClaimsError(f"{what}: {ready.error}")

    @property
    def alive(self) -> bool:
        return not self._connection.closed and self.process.is_alive()

    def fork(self, call: Callable[[], Any], writer: Connection, output: Any) -> _ForkedByZygote:
        """A worker forked from the zygote, running ``call()`` and answering on ``writer``, printing to ``output``."""
        try:
            payload = pickle.dumps(("fork", pickle.dumps(call)))
        except Exception as error:
            raise ClaimsError(f"{self.what}: the check cannot be handed to its worker ({error})") from None
        try:
            self._connection.send_bytes(payload)
            for descriptor in (writer.fileno(), output.fileno()):
                send_handle(self._connection, descriptor, self.process.pid)
        except OSError:
            self._receive(_REPLY_SECONDS)  # why it died, as CheckCrashed
            raise
        pid = self._receive(_REPLY_SECONDS)
        if not isinstance(pid, int):
            self.close()
            raise CheckCrashed(f"{self.what}: the process that forks the checks' workers answered {pid!r}")
        return _ForkedByZygote(self, pid)

    def exit_status(self, pid: int, wait: float) -> int | None:
        """The exit code (negative: the signal) of the worker ``pid``, waiting up to ``wait`` s; None if it runs."""
        try:
            self._connection.send_bytes(pickle.dumps(("exit", pid, wait)))
            code = self._receive(wait + _REPLY_SECONDS)
        except (OSError, CheckCrashed):  # the zygote is gone, and its workers with it
            return None
        return code if isinstance(code, int) else None

    def _receive(self, limit: float) -> Any:
        try:
            if self._connection.poll(limit):
                return plain_loads(self._connection.recv_bytes())
        except (EOFError, OSError):
            self.process.join(5)
            self.close()
            raise CheckCrashed(f"{self.what}: the process that imported it died "
                               f"({_describe_exit(self.process.exitcode)})") from None
        except NotPlain as error:
            self.close()
            raise CheckCrashed(f"{self.what}: the process that imported it answered {error}") from None
        self.close()
        raise CheckCrashed(f"{self.what}: the process that imported it did not answer within {limit:g} s; it was "
                           "killed")

    def close(self) -> None:
        """End the zygote; the workers it forked die with it (``PR_SET_PDEATHSIG``)."""
        self._connection.close()
        _kill_group(self.process)


# How long the zygote may take to fork a worker or to say how one exited: it does nothing else.
_REPLY_SECONDS = 30.0


class _ForkedByZygote:
    """A worker forked by a :class:`Zygote`: what the supervisor uses of a multiprocessing Process."""

    sentinel = None  # its death shows as the end of its answer pipe, which only it holds

    def __init__(self, zygote: Zygote, pid: int):
        self._zygote, self.pid = zygote, pid
        self.exitcode: int | None = None

    def join(self, timeout: float | None = None) -> None:
        if self.exitcode is None:
            self.exitcode = self._zygote.exit_status(self.pid, timeout or 0.0)

    def is_alive(self) -> bool:
        self.join(0)
        return self.exitcode is None and self._zygote.alive

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


def _zygote(prepare: Callable[[], None], connection: Connection, judges: frozenset[int]) -> None:
    """The zygote: prepare once, then fork a worker per request until the judge closes the connection.

    ``judges`` are the descriptors the judge had open when it forked this process (pytest-xdist's channel
    to its controller, the judge's files): closed before the implementation is imported, so that neither
    its import nor any check forked from here can write to them. What the import itself opens stays open.
    """
    os.setpgrp()
    _die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_WRONLY)
    _redirect_output(null)
    _close(judges - {0, 1, 2, connection.fileno()})
    try:
        prepare()
        ready = Answer()
    except BaseException as error:
        ready = _answer_to(error)
    connection.send_bytes(pickle.dumps(ready))
    while ready.error is None and ready.raised is None:
        try:
            request = pickle.loads(connection.recv_bytes())  # from the judge
            if request[0] == "fork":
                writer, output = recv_handle(connection), recv_handle(connection)
                pid = os.fork()
                if pid == 0:
                    connection.close()
                    _serve(partial(_unpickled, request[1]), Connection(writer, readable=False), output)
                os.close(writer)
                os.close(output)
                connection.send_bytes(pickle.dumps(pid))
            else:
                connection.send_bytes(pickle.dumps(_exit_code(*request[1:])))
        except (EOFError, OSError):
            break
    os._exit(0)


def _unpickled(payload: bytes) -> Any:
    return pickle.loads(payload)()


def _exit_code(pid: int, wait: float) -> int | None:
    """As multiprocessing reports it: the exit status, or minus the signal; None while ``pid`` runs."""
    deadline = time.monotonic() + wait
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {"SIGSEGV": ": a segmentation fault", "SIGKILL": ": killed, e.g. out of memory",
                "SIGABRT": ": aborted"}.get(name, "")
        return f"killed by {name}{hint}"
    return f"exit status {code}, e.g. os._exit({code}) in the implementation"


def _tail(output: Any, limit: int = 2000) -> str:
    """The end of what the worker printed, for the error row."""
    try:
        output.seek(0)
        return output.read().decode("utf-8", "replace").strip()[-limit:]
    except (OSError, ValueError):
        return ""


def _serve(call: Callable[[], Any], writer: Connection, output_fd: int, judges: frozenset[int] = frozenset()
           ) -> None:
    """The worker: run ``call`` once and send the answer; never returns normally into the parent's code.

    ``judges`` are the descriptors the judge had open when it forked this worker: closed first, so that the
    implementation cannot write to pytest-xdist's channel or to the judge's files (the zygote's workers
    inherit none: the zygote closed them).
    """
    global _IN_WORKER
    _IN_WORKER = True
    os.setpgrp()
    _die_with_parent()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the supervisor's handler is not the worker's
    _redirect_output(output_fd)
    _close(judges - {0, 1, 2, writer.fileno(), output_fd})
    _limit_memory()
    try:
        answer = Answer(value=call())
    except BaseException as error:  # everything, even SystemExit, is the check's error, not the worker's end
        answer = _answer_to(error)
    try:
        data = pickle.dumps(answer)
    except Exception as error:
        data = pickle.dumps(Answer(error=str(answer.exception)) if answer.exception is not None else Answer(
            error=f"the check's result cannot be sent back from its worker ({error}); a verifier returns plain "
                  "values: numbers, strings, lists, mappings, arrays"))
    try:
        writer.send_bytes(data)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _redirect_output(descriptor: int) -> None:
    """Standard output and error (and a crash's traceback, when faulthandler is on) go to ``descriptor``."""
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    # Fresh text streams over the new descriptors: a lock another thread held at the fork stays behind.
    sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
    if faulthandler.is_enabled():  # pytest's writes to a copy of its own stderr, which is not this process's
        faulthandler.enable(file=sys.stderr)


def _close(descriptors: frozenset[int]) -> None:
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            os.close(descriptor)


def _open_descriptors() -> frozenset[int]:
    """This process's open file descriptors (from Linux's /proc; elsewhere none are known)."""
    try:
        return frozenset(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:
        return frozenset()


def _answer_to(error: BaseException) -> Answer:
    """The answer of a call that raised ``error``: a harness error as plain data (its type says what happened), any
    other as its traceback's text."""
    if isinstance(error, ClaimsError):
        return Answer(raised=(type(error).__module__, type(error).__qualname__, error.args, dict(vars(error))))
    return Answer(error=traceback.format_exc(limit=-8))


def _die_with_parent() -> None:
    """Have the kernel kill this worker when the process that started it dies, however it dies (Linux only):
    a supervisor killed outright (SIGKILL, the OOM killer) must not leave a hung check running for ever."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return


_PR_SET_PDEATHSIG = 1


def interrupt_on_termination() -> Callable[[], None]:
    """From now on, SIGTERM (what CI and job schedulers send) stops this process as Ctrl-C does: the run ends
    with its report labelled interrupted, and every worker is killed on the way out. Returns what undoes it.
    A handler someone else installed is left alone."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"terminated (signal {signum})")

    signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _limit_memory() -> None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return
    cap = int(pages * size * _MEMORY_FRACTION)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _kill_group(process: multiprocessing.process.BaseProcess | _ForkedByZygote) -> None:
    """Kill the worker and everything it started (its seed pools share its process group)."""
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    # Before its os.setpgrp() the worker is in this process's group: kill it alone.
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.join(5)


@contextlib.contextmanager
def _quiet_stdio() -> Iterator[None]:
    """Flush this process's streams before forking, so the worker does not print them a second time."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    yield

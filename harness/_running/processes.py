"""A check's worker process from the inside, and the means to end one from the outside.

A worker starts apart from the process that forked it (:func:`start_apart`: a process group of its own,
killed with its parent, its output to a file of the supervisor's, none of the judge's descriptors), runs
one call (:func:`serve`) under an address-space limit, and sends back an :class:`Answer` as data
(``claims_harness._running.wire``).
The supervisor (``claims_harness._running.isolation``) forks workers; the implementation's host
(``claims_harness._running.server``) starts apart the same way.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import importlib
import multiprocessing
import os
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Protocol

from claims_harness._claims.course import ENGINE
from claims_harness._running.wire import decode, encode
from claims_harness.errors import ClaimsError, NotData

# How a process is said to have ended when it was killed for running past its time limit.
TIMED_OUT = "killed past its time limit"

# The worker's address space: half the machine's memory, so that a runaway allocation fails in the
# worker (MemoryError, an error row) instead of swapping the machine or calling the OOM killer.
_MEMORY_FRACTION = 0.5


@dataclass(frozen=True)
class Answer:
    """What a worker sends back: the value, or the text of the exception the call raised."""

    value: Any = None
    error: str | None = None
    # A harness error the call raised, as data: its class's module and name, its args and attributes.
    raised: tuple[str, str, tuple, dict] | None = None

    @property
    def exception(self) -> ClaimsError | None:
        """The harness error the call raised, rebuilt here, or None."""
        if self.raised is None:
            return None
        module, name, args, attributes = self.raised
        kind = getattr(importlib.import_module(module), name, None) if module.startswith(f"{ENGINE}.") else None
        if not (isinstance(kind, type) and issubclass(kind, ClaimsError)):
            return ClaimsError(f"the check raised {module}.{name}{args!r}")
        error = kind.__new__(kind)
        error.args = tuple(args)
        error.__dict__.update(attributes)
        return error

    def encoded(self) -> bytes:
        """The answer as a message of data (``claims_harness._running.wire``); one saying why, if it holds what is not
        data."""
        try:
            return encode((self.value, self.error, self.raised), records=judge_records().values())
        except NotData as error:
            if self.raised is not None:
                return encode((None, f"{self.raised[1]}: {self.raised[2]}", None))
            return encode((None, f"the check's result cannot be sent back from its worker ({error}); a verifier "
                                 "returns data: numbers, strings, arrays, Fractions, and lists, tuples and mappings "
                                 "of them", None))

    @staticmethod
    def decoded(data: bytes) -> Answer:
        """The answer a worker sent; NotData for bytes that are no answer."""
        found = decode(data, known=judge_records())
        if not (isinstance(found, tuple) and len(found) == 3):
            raise NotData(f"an answer of the wrong shape: {str(found)[:80]}")
        value, error, raised = found
        if not (error is None or isinstance(error, str)) or not (raised is None or _is_raised(raised)):
            raise NotData("an answer whose error is not text")
        return Answer(value, error, raised)


def _is_raised(raised: Any) -> bool:
    return (isinstance(raised, tuple) and len(raised) == 4 and isinstance(raised[0], str)
            and isinstance(raised[1], str) and isinstance(raised[2], tuple) and isinstance(raised[3], dict))


def judge_records() -> dict[str, type]:
    """The harness's own frozen dataclasses a worker's answer or the cache may hold, by the name they cross under."""
    from claims_harness._claims.plain import Declined, Rounded
    from claims_harness._running.implementation import Provenance
    from claims_harness.stats import MeanEstimate

    return {f"{kind.__module__}.{kind.__qualname__}": kind for kind in (Declined, Provenance, MeanEstimate, Rounded)}


def answer_to(error: BaseException) -> Answer:
    """The answer of a call that raised ``error``: a harness error as data (its type says what happened), any
    other as its traceback's text."""
    if isinstance(error, ClaimsError):
        attributes = {key: value for key, value in vars(error).items() if not key.startswith("__")}
        return Answer(raised=(type(error).__module__, type(error).__qualname__, tuple(error.args), attributes))
    return Answer(error=traceback.format_exc(limit=-8))


_IN_WORKER = False


def in_worker() -> bool:
    """Whether this process is a check's worker: a fresh fork with one thread, which may itself fork safely."""
    return _IN_WORKER


def supported() -> bool:
    """Whether checks can run in a forked worker here (POSIX); elsewhere they run in the checking process."""
    return "fork" in multiprocessing.get_all_start_methods() and hasattr(os, "setpgrp")


def start_apart(output: int, judges: frozenset[int], keep: frozenset[int]) -> None:
    """Begin a forked process's life apart from the judge: a process group of its own (a kill reaches all it
    starts), killed with its parent, and :func:`leave_the_judge`."""
    os.setpgrp()
    die_with_parent()
    leave_the_judge(output, judges, keep)


def leave_the_judge(output: int, judges: frozenset[int], keep: frozenset[int]) -> None:
    """SIGTERM's default action, output to ``output``, and ``judges`` (the descriptors the judge had open when it
    forked this process: pytest-xdist's channel to its controller, the judge's files) closed, but for the standard
    three and ``keep``, so that nothing run here can write to them."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the supervisor's handler is not the worker's
    redirect_output(output)
    for descriptor in judges - {0, 1, 2, output, *keep}:
        with contextlib.suppress(OSError):
            os.close(descriptor)


def serve(call: Callable[[], Any], writer: Connection, output: int, judges: frozenset[int] = frozenset(),
          keep: frozenset[int] = frozenset()) -> None:
    """The worker: start apart, run ``call`` once and send the answer on ``writer``; never returns into the
    parent's code. ``keep`` are descriptors of the judge's it may use (its connection to the implementation)."""
    global _IN_WORKER
    _IN_WORKER = True
    start_apart(output, judges, keep=frozenset({writer.fileno(), *keep}))
    limit_memory()
    try:
        answer = Answer(value=call())
    except BaseException as error:  # everything, even SystemExit, is the check's error, not the worker's end
        answer = answer_to(error)
    try:
        writer.send_bytes(answer.encoded())
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def redirect_output(descriptor: int) -> None:
    """Standard output and error (and a crash's traceback, when faulthandler is on) go to ``descriptor``."""
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    # Fresh text streams over the new descriptors: a lock another thread held at the fork stays behind.
    sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
    if faulthandler.is_enabled():  # pytest's writes to a copy of its own stderr, which is not this process's
        faulthandler.enable(file=sys.stderr)


def open_descriptors() -> frozenset[int]:
    """This process's open file descriptors (from Linux's /proc; elsewhere none are known)."""
    try:
        return frozenset(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:
        return frozenset()


def die_with_parent() -> None:
    """Have the kernel kill this worker when the process that started it dies, however it dies (Linux only):
    a supervisor killed outright (SIGKILL, the OOM killer) must not leave a hung check running for ever."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return


_PR_SET_PDEATHSIG = 1


def limit_memory() -> None:
    """An address-space limit of half the machine's memory: a runaway allocation fails here, as MemoryError."""
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


class Process(Protocol):
    """What the supervisor uses of a worker: a multiprocessing Process."""

    pid: int | None
    exitcode: int | None

    def join(self, timeout: float | None = None) -> None: ...
    def is_alive(self) -> bool: ...
    def kill(self) -> None: ...


class ForkedProcess:
    """A process forked with ``os.fork`` to run ``target(*args)`` (which ends it with ``os._exit``), not
    multiprocessing's: a daemonic process (a Dask worker's) may start one, and it inherits every descriptor."""

    def __init__(self, target: Callable[..., Any], *args: Any):
        self.exitcode: int | None = None
        self.pid: int | None = os.fork()
        if self.pid == 0:
            try:
                target(*args)
            finally:
                os._exit(1)

    def join(self, timeout: float | None = None) -> None:
        if self.exitcode is None and self.pid is not None:
            self.exitcode = exit_code(self.pid, timeout or 0.0)

    def is_alive(self) -> bool:
        self.join(0)
        return self.exitcode is None

    def kill(self) -> None:
        if self.exitcode is None and self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def kill_group(process: Process) -> None:
    """Kill the worker and everything it started (its seed pools share its process group)."""
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    # Before its os.setpgrp() the worker is in this process's group: kill it alone.
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.join(5)


def exit_code(pid: int, wait: float) -> int | None:
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


def describe_exit(code: int | None) -> str:
    """An exit code, as an error row says it."""
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


# The signals that end a run (Ctrl-C, and SIGTERM once interrupt_on_termination has made it one), held while the
# judge forks; the handlers they had, for the child to take back at once (None: not forking).
_ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_HANDLERS_BEFORE_THE_FORK: dict[int, Any] | None = None


@contextlib.contextmanager
def forking() -> Iterator[list[Process]]:
    """Around a fork of the judge: its streams flushed first, so that the child does not print them a second time,
    and a Ctrl-C or SIGTERM that arrives meanwhile delivered once the fork has returned. The caller adds the process
    it started to the list it is given: a signal delivered so ends that process too (:func:`kill_group`).

    ``os.fork`` runs other libraries' at-fork callbacks in this process (logging's releases its lock), and Python
    runs a signal's handler in the main thread between any two bytecodes: a KeyboardInterrupt raised inside such a
    callback is reported as unraisable and dropped, and the run went on as if no one had pressed Ctrl-C (seen on
    Python 3.12, whose fork also warns about threads in that window). So the signals are only recorded here, and
    raised again, with the judge's own handlers, when the fork is done; the child takes those handlers back as it
    starts (:func:`_child_takes_back_the_handlers`). Outside the main thread no handler can be set: nothing is held.
    """
    global _HANDLERS_BEFORE_THE_FORK
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    started: list[Process] = []
    if threading.current_thread() is not threading.main_thread():
        yield started
        return
    arrived: list[int] = []
    # A handler installed from C (None) cannot be put back: such a signal is left as it is.
    before = {number: handler for number in _ENDING_SIGNALS if (handler := signal.getsignal(number)) is not None}
    _HANDLERS_BEFORE_THE_FORK = before
    for number in before:
        signal.signal(number, lambda signum, frame: arrived.append(signum))
    try:
        yield started
    finally:
        _HANDLERS_BEFORE_THE_FORK = None
        for number, handler in before.items():
            signal.signal(number, handler)
        try:
            for number in dict.fromkeys(arrived):
                signal.raise_signal(number)
        except BaseException:
            for process in started:
                kill_group(process)
            raise


def _child_takes_back_the_handlers() -> None:
    global _HANDLERS_BEFORE_THE_FORK
    if _HANDLERS_BEFORE_THE_FORK is not None and threading.current_thread() is threading.main_thread():
        for number, handler in _HANDLERS_BEFORE_THE_FORK.items():
            signal.signal(number, handler)
    # The child never leaves the fork's ``with``: its own forks (a seed pool) keep the handlers it sets itself.
    _HANDLERS_BEFORE_THE_FORK = None


os.register_at_fork(after_in_child=_child_takes_back_the_handlers)

"""The zygote: a process that imported the implementation under test once, and forks each check's worker.

The judge never imports the implementation (``harness._running.isolation`` says why); a check that calls
it runs in a worker forked from here, so no check pays for the import and the claims and verifiers are
already loaded. The zygote is the workers' parent, so it alone can say how one exited; it does so on
request. Everything it sends is read as plain data, since the implementation's import ran in it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable
from functools import partial
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any

from harness._claims.errors import ClaimsError
from harness._running.plain_data import NotPlain, plain_loads
from harness._running.processes import (
    Answer,
    CheckCrashed,
    answer_to,
    describe_exit,
    exit_code,
    kill_group,
    open_descriptors,
    quiet_stdio,
    serve,
    start_apart,
)


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
        with quiet_stdio():
            # Not a daemon: the workers it forks are its children, and may start seed pools of their own.
            self.process = multiprocessing.get_context("fork").Process(
                target=_zygote, args=(prepare, theirs, open_descriptors()))
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
                               f"({describe_exit(self.process.exitcode)})") from None
        except NotPlain as error:
            self.close()
            raise CheckCrashed(f"{self.what}: the process that imported it answered {error}") from None
        self.close()
        raise CheckCrashed(f"{self.what}: the process that imported it did not answer within {limit:g} s; it was "
                           "killed")

    def close(self) -> None:
        """End the zygote; the workers it forked die with it (``PR_SET_PDEATHSIG``)."""
        self._connection.close()
        kill_group(self.process)


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
    start_apart(os.open(os.devnull, os.O_WRONLY), judges, keep=frozenset({connection.fileno()}))
    try:
        prepare()
        ready = Answer()
    except BaseException as error:
        ready = answer_to(error)
    connection.send_bytes(pickle.dumps(ready))
    while ready.error is None and ready.raised is None:
        try:
            request = pickle.loads(connection.recv_bytes())  # from the judge
            if request[0] == "fork":
                writer, output = recv_handle(connection), recv_handle(connection)
                pid = os.fork()
                if pid == 0:
                    connection.close()
                    serve(partial(_unpickled, request[1]), Connection(writer, readable=False), output)
                os.close(writer)
                os.close(output)
                connection.send_bytes(pickle.dumps(pid))
            else:
                connection.send_bytes(pickle.dumps(exit_code(*request[1:])))
        except (EOFError, OSError):
            break
    os._exit(0)


def _unpickled(payload: bytes) -> Any:
    return pickle.loads(payload)()

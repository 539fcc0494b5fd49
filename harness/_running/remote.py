"""The implementation under test as the judge sees it: a host process to start, and a module whose calls cross as data.

The judge never imports the implementation, and its verifiers never run where it was imported. Each
judging process starts one :class:`ImplementationHost` per implementation (the host imports it, contained:
``claims_harness._running.sandbox``); each check that calls it gets a server of its own from the host, and the
verifier, running in a worker forked from the judge, reaches it through a :class:`RemoteImplementation`:
every call is a message of data (``claims_harness._running.wire``) and so is every answer. What the
implementation returns that is not data (an environment, a figure) stays in its process; a
:class:`RemoteObject` stands for it here. An exception it raised is raised here as the builtin exception
it is (or RuntimeError), with its traceback as a note, and the harness's own errors as themselves
(``claims_harness._running.protocol``).
"""

from __future__ import annotations

import atexit
import inspect
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from multiprocessing.reduction import send_handle
from pathlib import Path
from types import ModuleType
from typing import Any

from claims_harness._claims.course import find_root, load_course
from claims_harness._claims.formats import PYTEST_FLAG
from claims_harness._running.implementation import Provenance, contract_functions, reference_implementation
from claims_harness._running.processes import ForkedProcess, describe_exit, forking, kill_group, open_descriptors
from claims_harness._running.protocol import rebuilt_error, signature_from
from claims_harness._running.sandbox import Containment
from claims_harness._running.server import ImplementationServer, host_main, readonly_paths
from claims_harness._running.wire import IMPLEMENTATION, Handle, decode, encode
from claims_harness.errors import CheckCrashed, ClaimsError, ImplementationError, NotData

# How long the host may take to import the implementation, and to fork a server or end one (it does nothing else).
IMPORT_SECONDS, REPLY_SECONDS = 120.0, 30.0


class ImplementationHost:
    """The implementation's host process (``claims_harness._running.server.host_main``), from the judge's side.

    Started from this process: it imports the implementation, contained, and then forks a server per check
    (:meth:`serve`) and ends it (:meth:`end`), killing whatever the server started. Whatever it sends is read
    as data. :attr:`containment` says what held (a PID namespace, a read-only project).
    """

    def __init__(self, impl: str, directory: str, limit: float = IMPORT_SECONDS):
        self.impl = impl
        self.what = f"importing the implementation '{impl}'"
        root = find_root(Path.cwd())
        course = load_course(root) if root is not None else None
        readonly = readonly_paths(course.root) if course is not None else []
        hidden = [str(course.cache)] if course is not None else []
        self._connection, theirs = multiprocessing.Pipe(duplex=True)
        with forking() as started:
            self.process = ForkedProcess(host_main, impl, directory, theirs, open_descriptors(), readonly, hidden)
            started.append(self.process)
        theirs.close()
        kind, value = self._receive(limit)
        if kind == "raised":
            self.close()
            raise rebuilt_error(value)
        self.containment = Containment(**value)

    @property
    def alive(self) -> bool:
        return not self._connection.closed and self.process.is_alive()

    def serve(self, output: int, from_reference: tuple[str, ...] = ()) -> tuple[Connection, int]:
        """A server of its own for a check: the check's end of its connection, and the server's process id (in the
        host's namespace: only the host uses it). ``output`` is the descriptor its output goes to; the functions
        ``from_reference`` are served as the course's reference defines them (to tell which function of a failing
        check is wrong on its own: ``claims_harness._running.runner``)."""
        mine, theirs = multiprocessing.Pipe(duplex=True)
        reference = reference_implementation() if from_reference else ""
        try:
            self._connection.send_bytes(encode(("serve", list(from_reference), reference)))
            for descriptor in (theirs.fileno(), output):
                send_handle(self._connection, descriptor, self.process.pid)
            kind, pid = self._receive(REPLY_SECONDS)
        except OSError:
            mine.close()
            self._receive(REPLY_SECONDS)  # why it died, as CheckCrashed
            raise
        finally:
            theirs.close()
        return mine, int(pid)

    def end(self, pid: int, ending: bool = False) -> int | None:
        """End the server ``pid`` and everything it started; its exit code (negative: the signal), if it had exited on
        its own before. ``ending``: its check saw it end, so its exit status is waited for a moment."""
        try:
            self._connection.send_bytes(encode(("end", pid, ending)))
            _, code = self._receive(REPLY_SECONDS)
        except (OSError, CheckCrashed):
            return None
        return code if isinstance(code, int) else None

    def _receive(self, limit: float) -> tuple[str, Any]:
        try:
            if self._connection.poll(limit):
                answer = decode(self._connection.recv_bytes())
                if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], str):
                    return answer
                raise NotData(f"an answer of the wrong shape: {str(answer)[:80]}")
        except (EOFError, OSError):
            self.process.join(5)
            self.close()
            raise CheckCrashed(f"{self.what}: the implementation's process died "
                               f"({describe_exit(self.process.exitcode)})") from None
        except NotData as error:
            self.close()
            raise CheckCrashed(f"{self.what}: the implementation's process answered {error}") from None
        self.close()
        raise CheckCrashed(f"{self.what}: the implementation's process did not answer within {limit:g} s; it was "
                           "killed")

    def close(self) -> None:
        """End the host: its namespace, every server and whatever they started die with it."""
        self._connection.close()
        kill_group(self.process)


_HOSTS: dict[tuple[int, str, str, tuple[str, ...]], ImplementationHost] = {}


def implementation_host(impl: str, directory: str) -> ImplementationHost:
    """The host of ``impl``, looked for in ``directory`` first, for this process (one per run; a new one after it
    died; a process forked from this one starts its own).

    Raises:
      ClaimsError: it cannot be imported (``UnimportableImplementation``), or its process died.
    """
    key = (os.getpid(), impl, directory, tuple(sys.path))
    host = _HOSTS.get(key)
    if host is None or not host.alive:
        if not _HOSTS:
            atexit.register(close_hosts)  # before multiprocessing's own, which would wait for them
        host = _HOSTS[key] = ImplementationHost(impl, directory)
    return host


def close_hosts() -> None:
    """End every host of this process: at the end of a run (an implementation edited since is imported anew)."""
    for key in [key for key in _HOSTS if key[0] == os.getpid()]:
        _HOSTS.pop(key).close()


def server_starter(impl: str, directory: str, from_reference: tuple[str, ...] = ()
                   ) -> Callable[[int], tuple[Connection, Callable[[], str]]]:
    """What starts a check's server (``claims_harness._running.isolation.StartServer``): the worker's end of the
    connection, and what ends the server, saying how it had ended when it ended on its own (``from_reference``:
    :meth:`ImplementationHost.serve`)."""
    def start(output: int) -> tuple[Connection, Callable[[], str]]:
        host = implementation_host(impl, directory)
        connection, pid = host.serve(output, from_reference)

        def end(crashed: bool) -> str:
            code = host.end(pid, crashed)
            return "" if code is None else f"had ended: {describe_exit(code)}"

        return connection, end

    return start


# The connection of each thread of this process to its server, once made: a Dask worker runs seeds in threads, and
# one conversation cannot be shared.
_CONNECTED: dict[tuple[int, int], RemoteImplementation] = {}


def connect(channel: Any, impl: str) -> RemoteImplementation:
    """The implementation, reached through ``channel`` (a check's connection to its server), for this thread."""
    remote = RemoteImplementation(channel, impl)
    _CONNECTED[remote._owner] = remote
    return remote


def in_process(module: ModuleType) -> RemoteImplementation:
    """The course's own ``module`` called in this process (for the course's own code only: ``claims mutants``, where
    mutmut records which functions a check reaches in the process that calls them, and the harness's own tests of
    what crosses). Every request and answer is still a message of data, so the verifier sees the implementation
    exactly as it does across processes."""
    server = ImplementationServer(module)
    remote = connect(_AnsweredAtOnce(server.answer), module.__name__)
    server._connection = _AnsweredAtOnce(remote.reply_to)  # a callback the server sends is answered here at once
    return remote


def implementation_here(impl: str, directory: str) -> RemoteImplementation:
    """The implementation as this process reaches it: through the check's connection in the check's worker; in a
    process forked since (a seed's process in a pool) or elsewhere (a Dask worker), through a server of a host of its
    own, started on first use."""
    connected = _CONNECTED.get((os.getpid(), threading.get_ident()))
    if connected is not None and connected.__name__ == impl:
        return connected
    with _STARTING:  # one conversation with the host at a time, and one host per process
        connection, _ = implementation_host(impl, directory).serve(2)
    return connect(connection, impl)


_STARTING = threading.Lock()


class _AnsweredAtOnce:
    """One end of a conversation within this process (:func:`in_process`): what is sent is answered at once by
    ``answer``, and that answer is what is received next."""

    def __init__(self, answer: Callable[[bytes], bytes]):
        self._answer = answer
        self._answers: list[bytes] = []

    def send_bytes(self, data: bytes) -> None:
        self._answers.append(self._answer(data))

    def recv_bytes(self) -> bytes:
        return self._answers.pop(0)

    def close(self) -> None:
        self._answers.clear()


class RemoteImplementation:
    """The implementation under test, reached through one check's server: a stand-in for its module."""

    def __init__(self, connection: Any, name: str):
        self._connection = connection
        self.__name__ = name
        # A process forked from this one (a seed pool), or another thread (a Dask worker's), needs a server of its own.
        self._owner = (os.getpid(), threading.get_ident())
        self._described: dict[str, dict[str, Any]] = {}
        self._functions: dict[str, RemoteFunction] = {}
        self._callbacks: dict[int, Callable[..., Any]] = {}
        self._died = ""  # why the implementation's process cannot answer any more, once it died

    def request(self, *request: Any) -> Any:
        """Send ``request``, return the answer's value, or raise what the implementation raised. While it is answered,
        the implementation may call back a function the request handed it (a progress callback)."""
        if (os.getpid(), threading.get_ident()) != self._owner:
            raise ClaimsError("a check's connection to its implementation was used from another process or thread; "
                              "give the seeds' function run.impl, which has a server of its own")
        if self._died:  # a verifier that caught the first CheckCrashed gets it again at its next call
            raise CheckCrashed(self._died)
        try:
            message = encode(request, handle=self._handle_of)
        except NotData as error:
            raise ClaimsError(f"the verifier passed the implementation {error}; pass data") from None
        try:
            self._connection.send_bytes(message)
            while True:
                data = self._connection.recv_bytes()
                kind, value = self._decoded(data)[:2]
                if kind != "callback":
                    break
                self._connection.send_bytes(self.reply_to(data))
        except (EOFError, OSError):
            self._died = (f"the implementation's process ('{self.__name__}') died while answering a call to "
                          f"{request[2] if request[0] == 'call' else request[0]}")
            raise CheckCrashed(self._died) from None
        if kind == "raised":
            raise rebuilt_error(value)
        return value

    def _decoded(self, data: bytes) -> tuple[Any, ...]:
        try:
            message = decode(data, handles=self._proxy)
        except NotData as error:
            raise ClaimsError(f"the implementation's process answered what is not data ({error})") from None
        if not (isinstance(message, tuple) and len(message) >= 2 and isinstance(message[0], str)):
            raise ClaimsError(f"the implementation's process answered {str(message)[:80]}, not an answer")
        return message

    def reply_to(self, data: bytes) -> bytes:
        """The reply to the implementation's call of a function the verifier handed it (a progress callback), or of a
        public method of an object it handed it (operations that record the calls of a training loop)."""
        try:
            _, number, name, args, kwargs = self._decoded(data)
            target = self._callbacks[number]
            if name is not None:
                if not isinstance(name, str) or name.startswith("_"):
                    raise AttributeError(f"{name!r}: only the public methods of the verifier's object may be called")
                target = getattr(target, name)
            return encode(("ok", target(*args, **kwargs)), handle=self._handle_of)
        except ClaimsError:  # the check's time limit, say: the check ends here, and its server with it
            raise
        except Exception as error:
            return encode(("raised", f"{type(error).__name__}: {error}"))

    def _handle_of(self, value: Any) -> Handle | None:
        if isinstance(value, RemoteObject):
            return value._handle
        if value is self or getattr(value, "__dict__", {}).get("_module") is self:
            return Handle(0, IMPLEMENTATION)  # the implementation's module itself (``ops=ctx.impl``)
        # A function of the verifier's, or an object with methods, handed to the implementation: called back here.
        if callable(value) or any(callable(getattr(type(value), name, None)) for name in dir(type(value))
                                  if not name.startswith("_")):
            number = -1 - len(self._callbacks)
            self._callbacks[number] = value
            return Handle(number, "callback" if callable(value) else "object")
        return None

    def _proxy(self, handle: Handle) -> Any:
        if handle.id == 0:
            return self
        return RemoteObject(self, handle)

    def describe(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """What the implementation has of ``names``: each one's existence, kind and whether it is a stub."""
        wanted = [name for name in names if name not in self._described]
        if wanted:
            for found in self.request("describe", wanted):
                self._described[found["name"]] = found
        return {name: self._described[name] for name in names}

    def function(self, name: str) -> RemoteFunction:
        if name not in self._functions:
            self._functions[name] = RemoteFunction(self, name)
        return self._functions[name]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.function(name)

    def __reduce__(self) -> Any:
        raise ClaimsError(f"the implementation '{self.__name__}' cannot be sent to another process; a seed's function "
                          "gets run.impl, which reaches it there")

    def __deepcopy__(self, memo: dict[int, Any]) -> RemoteImplementation:
        return self  # a reference to the implementation's process: a copy is the same reference


class RemoteFunction:
    """A function (or class) of the implementation's module: calling it is a call in its process."""

    def __init__(self, remote: RemoteImplementation, name: str, guarded: bool = True):
        self._remote, self.__name__, self.__qualname__ = remote, name, name
        self.__module__ = remote.__name__
        self.guarded = guarded

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._remote.request("call", None, self.__name__, args, kwargs, self.guarded)

    @property
    def __signature__(self) -> inspect.Signature:
        return signature_from(self._remote.describe([self.__name__])[self.__name__].get("parameters", []))

    def __repr__(self) -> str:
        return f"<{self.__module__}.{self.__name__} in the implementation's process>"

    def __reduce__(self) -> Any:
        raise ClaimsError(f"{self!r} cannot be sent to another process; a seed's function gets run.impl, which "
                          "reaches it there")


class RemoteObject:
    """An object of the implementation's process that is not data (an environment, a figure): its attributes are
    read there, its methods called there."""

    __slots__ = ("_remote", "_handle")

    def __init__(self, remote: RemoteImplementation, handle: Handle):
        object.__setattr__(self, "_remote", remote)
        object.__setattr__(self, "_handle", handle)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._remote.request("attribute", self._handle, name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._remote.request("assign", self._handle, name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._remote.request("call", self._handle, None, args, kwargs, False)

    def __repr__(self) -> str:
        return f"<{self._handle.kind} in the implementation's process>"

    def __deepcopy__(self, memo: dict[int, Any]) -> RemoteObject:
        return self  # a reference to an object of the implementation's process: a copy is the same reference

    def __reduce__(self) -> Any:
        raise ClaimsError(f"{self!r} cannot be sent to another process; it is reached through one check's server")

    def svg(self) -> bytes:
        """A matplotlib figure of the implementation's, drawn there as SVG."""
        return self._remote.request("figure", self._handle)

    def drawing(self) -> list[dict[str, list[Any]]]:
        """What a matplotlib figure of the implementation's draws, as data: per axes, each line's (x, y) points
        (``"lines"``) and the vertices of each collection drawn in data coordinates (``"filled"``)."""
        return self._remote.request("drawing", self._handle)


def check_implementation(name: str, directory: str | None = None, *, allow_reference: bool = False,
                         flag: str = PYTEST_FLAG, functions: Iterable[str] | None = None) -> Provenance | None:
    """Import the implementation ``name`` (in its own process: its host) and refuse one that would silently test
    someone else's functions.

    Args:
      name: the module under test (``--impl``).
      directory: where it is looked for first (where the run started; by default the working directory).
      allow_reference: the run was told to take functions the module does not define as they are.
      flag: the option that allows it, for the message.
      functions: the functions the run may call (default: every contract function).

    Returns:
      None for the reference itself; else where the module's contract functions are defined.

    Raises:
      ImplementationError: the module cannot be imported (``UnimportableImplementation``), or it offers functions
        defined outside its package and neither it nor the run said that is meant.
    """
    host = implementation_host(name, directory or os.getcwd())
    reference = reference_implementation()
    if name.partition(".")[0] == reference.partition(".")[0]:
        return None
    connection, pid = host.serve(2)
    try:
        found = RemoteImplementation(connection, name).request(
            "provenance", list(contract_functions() if functions is None else functions), reference)
    finally:
        connection.close()
        host.end(pid)
    try:
        checked = Provenance(**{str(field): _as_data(value) for field, value in found.items()})
    except (AttributeError, TypeError) as error:
        raise ClaimsError(f"the implementation's process answered no provenance ({error})") from None
    if checked.borrowed and not (allow_reference or checked.declared):
        raise ImplementationError(checked.refusal(flag))
    return checked


def _as_data(value: Any) -> Any:
    """A field of the provenance as the judge's own types: names as strings, tuples of them, a mapping of them."""
    if isinstance(value, dict):
        return {str(key): tuple(map(str, names)) for key, names in value.items()}
    if isinstance(value, tuple | list):
        return tuple(map(str, value))
    return value if isinstance(value, bool | str) else str(value)

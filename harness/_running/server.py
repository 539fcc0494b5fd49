"""The implementation under test in a process of its own: it answers calls that arrive as data, with data.

The judge's verifiers never share a process with the implementation (``claims_harness._running.remote`` is
their side). The implementation's process is a *host* (:func:`host_main`): forked from the judge,
contained (``claims_harness._running.sandbox``: a PID and a mount namespace where the machine allows it,
the project read-only, no capabilities), it imports the implementation once and forks, for each
check that calls it, a *server* that answers that check's calls (:class:`ImplementationServer`)
until the check ends, when the host kills it and whatever it started. Requests and answers are
messages of ``claims_harness._running.wire``: a call names a function and carries its arguments as data;
the answer is the result as data (an object that is not data, an environment say, stays here and a
:class:`~claims_harness._running.wire.Handle` to it crosses), or the exception as its type's name, message
and traceback text (``claims_harness._running.protocol``).

What the contract asks of a result is checked here, where the function ran: an argument changed
in place, a result that only pretends to be data, a float narrower than float64, a keyword the
function does not take, the framework it is written in (``claims_harness._running.frameworks``).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import inspect
import io
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from claims_harness._claims.plain import plain
from claims_harness._running import sandbox
from claims_harness._running.frameworks import call_implementation, computes_in_torch, torch_gradient
from claims_harness._running.implementation import import_implementation, is_stub, provenance
from claims_harness._running.processes import exit_code, leave_the_judge, limit_memory, redirect_output
from claims_harness._running.protocol import describe_error, parameters_of, signature_of
from claims_harness._running.wire import Handle, Record, decode, encode
from claims_harness.errors import ClaimsError, ImplementationError, NotData, NotPlainData, Unsupported

# What a check may ask of its server (``ImplementationServer``'s methods of these names, with a leading underscore).
REQUESTS = frozenset({"describe", "call", "calls", "attribute", "assign", "gradient", "figure", "drawing",
                      "provenance"})
# How long the host waits for the exit status of a server whose check saw its connection close.
ENDING_SECONDS = 2.0


def refuse_declined(function: Callable[..., Any], name: str, kwargs: dict[str, Any]) -> None:
    """Raise :class:`Unsupported` when ``function`` takes none of some keyword of the call: verifiers pass only the
    contract's optional features by keyword (``carry=``, ``normalize=``), and an implementation may leave them out."""
    if not kwargs:
        return
    try:
        parameters = signature_of(function).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    declined = [keyword for keyword in kwargs if keyword not in parameters
                or parameters[keyword].kind is inspect.Parameter.POSITIONAL_ONLY]
    if declined:
        raise Unsupported(f"unsupported call: {name} takes no {', '.join(f'{k}=' for k in declined)} (an optional "
                          "feature of the contract, docs/implementation-contract.md); what needs it is not checked")


def _state(value: Any, seen: set[int]) -> Any:
    """What a call must leave as it was of ``value``: each array's contents, and the identity and order of
    everything a container, a dict or a dataclass holds, to any depth (a cycle is followed once)."""
    if isinstance(value, np.ndarray):
        return ("array", id(value), value.shape, value.dtype.str, value.tobytes())
    if id(value) in seen:
        return ("seen", id(value))
    if isinstance(value, (tuple, list)):
        seen.add(id(value))
        return (type(value), id(value), tuple(_state(item, seen) for item in value))
    if isinstance(value, dict):
        seen.add(id(value))
        return (dict, id(value), tuple((key, _state(item, seen)) for key, item in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        seen.add(id(value))
        return (type(value), id(value), tuple((name, _state(getattr(value, name), seen))
                                              for name in (field.name for field in dataclasses.fields(value))))
    return (type(value), id(value))


def _bound(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        bound = signature_of(function).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {f"[{index}]": value for index, value in enumerate(args)} | kwargs
    return {repr(name) if not name.startswith("[") else name: value for name, value in bound.items()}


def call_checked(implementation: str, contract_name: str, function: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any], guarded: bool) -> Any:
    """``plain(function(*args, **kwargs))``, refused if it changed an argument in place (``guarded``), declined a
    keyword, or returned what only pretends to be data. A refusal names the contract function (``error.function``):
    the error is that function's alone, and the scoreboard blames it, not every function the check uses."""
    name = f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', None) or repr(function)}"
    try:
        refuse_declined(function, name, kwargs)
        before = {key: (value, _state(value, set())) for key, value in _bound(function, args, kwargs).items()} \
            if guarded else {}
        returned = call_implementation(function, name, args, kwargs)
        try:
            result = plain(returned)
        except NotPlainData as error:
            raise ImplementationError(
                f"{name} returned {error}, not plain data: a contract function returns NumPy arrays of numbers, "
                "Python or NumPy numbers, Fractions, strings, or tuples, lists, dicts and dataclasses of them "
                "(docs/implementation-contract.md)") from None
        for argument, (value, state) in before.items():
            if _state(value, set()) != state:
                raise ImplementationError(
                    f"implementation '{implementation}': {contract_name} changed its argument {argument} in place. "
                    "The verifiers compute what they expect from the values they passed, so every function must "
                    "leave its inputs as they were, arrays, dict entries and fields alike "
                    "(docs/implementation-contract.md): compute on a copy, e.g. np.array(x, dtype=float)")
        return result
    except ImplementationError as error:
        if getattr(error, "function", None) is None:
            error.function = contract_name
        raise


# --------------------------------------------------------------------------- the server


class ImplementationServer:
    """Answers one check's requests about the implementation ``module``: each a message of ``wire``, each answer one.

    Requests: ``("describe", names)``, ``("call", target, name, args, kwargs, guarded)`` (``target`` a Handle or
    None for the module; ``name`` None calls the target itself), ``("calls", name, arguments)`` (the module's
    function ``name`` once per ``(args, kwargs)`` of ``arguments``, each answer ``("ok", value)`` or ``("raised",
    description)``: many calls in one message), ``("attribute", target, name)``,
    ``("assign", target, name, value)``, ``("gradient", name, args, wrt, step, held, tied)``, ``("figure", target)``
    (an SVG of a matplotlib figure), ``("drawing", target)`` (what it draws, as data),
    ``("provenance", functions, reference)``. Answers: ``("ok", value)`` or
    ``("raised", description)``; while a call runs, ``("callback", id, method, args, kwargs)`` calls a function of
    the verifier's it was handed (or a method of its object).
    """

    def __init__(self, module: ModuleType):
        self.module = module
        self._objects: dict[int, Any] = {0: module}
        self._ids: dict[int, int] = {id(module): 0}
        self._types: dict[tuple[str, tuple[str, ...]], type] = {}
        self._torch_code: dict[str, bool] = {}  # function name -> whether it is PyTorch code (computes_in_torch)
        self._connection: Any = None

    def handle(self, value: Any) -> Handle:
        """A handle to ``value``, which stays here (kept alive as long as the server)."""
        number = self._ids.get(id(value))
        if number is None:
            number = self._ids[id(value)] = len(self._objects)
            self._objects[number] = value
        kind = type(value)
        return Handle(number, "implementation" if value is self.module else f"{kind.__module__}.{kind.__qualname__}")

    def _resolve(self, handle: Handle) -> Any:
        if handle.id < 0:  # a function or an object of the verifier's: calling it (or its methods) is a call there
            return functools.partial(self._call_back, handle, None) if handle.kind == "callback" \
                else _VerifierObject(functools.partial(self._call_back, handle))
        if handle.id not in self._objects:
            raise ClaimsError(f"no object {handle.id} ({handle.kind}) in the implementation's process")
        return self._objects[handle.id]

    def serve(self, connection: Any) -> None:
        """Answer requests until the check's end of ``connection`` closes."""
        self._connection = connection
        while True:
            try:
                data = connection.recv_bytes()
            except (EOFError, OSError):
                return
            connection.send_bytes(self.answer(data))

    def answer(self, data: bytes) -> bytes:
        """The answer to one request: ``("ok", value)`` or ``("raised", description)``, as a message."""
        try:
            request = self._materialised(decode(data, handles=self._resolve))
            if not (isinstance(request, tuple) and request and request[0] in REQUESTS):
                raise ClaimsError(f"no such request: {str(request)[:80]}")
            value = ("ok", getattr(self, f"_{request[0]}")(*request[1:]))
            return encode(value, handle=self.handle)
        except BaseException as error:  # everything the implementation raises is the check's, never the server's end
            return encode(("raised", describe_error(error, self.module.__name__)))

    def _call_back(self, handle: Handle, method: str | None, *args: Any, **kwargs: Any) -> Any:
        """Call the verifier's function ``handle`` (a progress callback handed to a training loop), or its object's
        ``method``, where it is, with data, and return what it returns. What the verifier asks meanwhile (the callback
        may call the implementation) is answered first."""
        self._connection.send_bytes(encode(("callback", handle.id, method, args, kwargs), handle=self.handle))
        while True:
            data = self._connection.recv_bytes()
            message = decode(data, handles=self._resolve)
            if message[0] not in ("ok", "raised"):
                self._connection.send_bytes(self.answer(data))
                continue
            if message[0] == "raised":
                raise RuntimeError(f"the verifier's {handle.kind} raised {message[1]}")
            return message[1]

    def _describe(self, names: list[str]) -> list[dict[str, Any]]:
        found = []
        for name in names:
            value = getattr(self.module, name, None)
            found.append({"name": name, "exists": callable(value), "is_class": isinstance(value, type),
                          "stub": is_stub(value), "parameters": parameters_of(value)})
        return found

    def _provenance(self, functions: list[str], reference: str) -> dict[str, Any]:
        """Where each of ``functions`` the implementation offers is defined
        (``claims_harness._running.implementation``), as the fields of its :class:`Provenance`."""
        try:
            imported = import_implementation(reference) if reference != self.module.__name__ else self.module
        except ClaimsError:  # without the reference, only the modules' names can tell
            imported = None
        return dataclasses.asdict(provenance(self.module, functions, imported, reference))

    def _call(self, target: Any, name: str | None, args: tuple[Any, ...], kwargs: dict[str, Any],
              guarded: bool) -> Any:
        owner = self.module if target is None else target  # a handle in the request is its object here
        function = owner if name is None else getattr(owner, name)
        if isinstance(function, type) or owner is not self.module:
            return plain(function(*args, **kwargs))  # a class built, a method of an object of the implementation's
        return call_checked(self.module.__name__, name or getattr(function, "__name__", "?"), function, args, kwargs,
                            guarded)

    def _calls(self, name: str, arguments: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[tuple[str, Any]]:
        answers = []
        for args, kwargs in arguments:
            try:
                answers.append(("ok", self._call(None, name, args, kwargs, False)))
            except Exception as error:
                answers.append(("raised", describe_error(error, self.module.__name__)))
        return answers

    def _assign(self, target: Any, name: str, value: Any) -> None:
        if target is self.module:
            raise ClaimsError("a verifier may not rebind a name of the implementation's module")
        setattr(target, name, value)

    def _attribute(self, target: Any, name: str) -> Any:
        value = getattr(target, name)
        return value if not callable(value) else self.handle(value)

    def _gradient(self, name: str, args: tuple[Any, ...], wrt: int, step: float, held: tuple[int, ...],
                  tied: tuple[int, ...]) -> tuple[np.ndarray, dict[int, float]]:
        """The gradient of the loss ``name(*args)`` with respect to ``args[wrt]``: by the implementation's own autograd
        for PyTorch (and what reached its constants, by position), by central differences with ``step`` else."""
        function = getattr(self.module, name)
        if name not in self._torch_code:  # a trial call, once per function: its library does not change
            self._torch_code[name] = computes_in_torch(function, name, args)
        if self._torch_code[name]:
            return torch_gradient(function, name, args, wrt, held, tied)
        x = np.asarray(args[wrt], dtype=float)
        gradient = np.zeros(x.shape)
        for index in np.ndindex(x.shape):
            shift = np.zeros(x.shape)
            shift[index] = step
            values = [float(np.asarray(call_checked(self.module.__name__, name, function,
                                                    (*args[:wrt], moved, *args[wrt + 1:]), {}, True)).reshape(()))
                      for moved in (x + shift, x - shift)]
            gradient[index] = (values[0] - values[1]) / (2 * step)
        return gradient, {}

    def _figure(self, figure: Any) -> bytes:
        """The matplotlib ``figure`` as SVG, byte for byte the same for the same drawing."""
        import matplotlib

        buffer = io.BytesIO()
        with matplotlib.rc_context({"svg.hashsalt": "claims", "svg.fonttype": "none"}):
            figure.savefig(buffer, format="svg", metadata={"Date": None})
        return buffer.getvalue()

    def _drawing(self, figure: Any) -> list[dict[str, list[np.ndarray]]]:
        """What the matplotlib ``figure`` draws, as data: for each of its axes, the (x, y) points of each line, and the
        vertices of each collection drawn in data coordinates (a filled band's outline)."""
        return [{"lines": [np.asarray(line.get_xydata(), dtype=float) for line in axes.lines],
                 "filled": [np.concatenate([np.asarray(path.vertices, dtype=float) for path in collection.get_paths()])
                            for collection in axes.collections
                            if collection.get_paths() and collection.get_transform() == axes.transData]}
                for axes in figure.axes]

    def _materialised(self, value: Any) -> Any:
        """``value`` with each :class:`Record` built as the type it names, where that is the implementation's own named
        tuple or dataclass, else as a named tuple of its fields (what the judge's verifiers pass: an MDP's arrays)."""
        if isinstance(value, Record):
            fields = {name: self._materialised(item) for name, item in value._asdict().items()}
            return self._type_of(value._type, tuple(fields), value._is_tuple)(**fields)
        if isinstance(value, tuple):
            return tuple(self._materialised(item) for item in value)
        if isinstance(value, list):
            return [self._materialised(item) for item in value]
        if isinstance(value, dict):
            return {key: self._materialised(item) for key, item in value.items()}
        return value

    def _type_of(self, name: str, fields: tuple[str, ...], is_tuple: bool) -> type:
        module_name, _, qualname = name.rpartition(".")
        if module_name in sys.modules:  # a type the implementation loaded (its own, or the reference's it builds on)
            found = getattr(sys.modules[module_name], qualname, None)
            if isinstance(found, type) and (dataclasses.is_dataclass(found) or hasattr(found, "_fields")):
                return found
        key = (name, fields)
        if key not in self._types:
            self._types[key] = collections.namedtuple(qualname.replace(".", "_") or "Record", fields)
        return self._types[key]


class _VerifierObject:
    """An object of the verifier's handed to the implementation (operations that record a loop's calls): each public
    method is called in the verifier's process."""

    def __init__(self, call_back: Callable[..., Any]):
        self._call_back = call_back

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        return functools.partial(self._call_back, name)


# --------------------------------------------------------------------------- the host


def host_main(impl: str, directory: str, connection: Connection, judges: frozenset[int], readonly: list[str],
              hidden: list[str]) -> None:
    """The implementation's host: contained, with ``directory`` (where the run started) first on its own import path
    only, it imports ``impl``, says whether that worked and how it is contained, then, per request of the judge,
    forks a server for a check on the connection it is handed, or ends one and says how it had ended.

    Never returns into the judge's code.
    """
    leave_the_judge(os.open(os.devnull, os.O_WRONLY), judges, keep=frozenset({connection.fileno()}))
    containment = sandbox.enter([Path(path) for path in readonly], [Path(path) for path in hidden])
    _quiet_home()
    sys.path.insert(0, directory)
    with contextlib.suppress(OSError):
        os.chdir(directory)
    try:
        module = import_implementation(impl)
        ready: tuple[Any, ...] = ("ready", dataclasses.asdict(containment))
    except BaseException as error:
        module, ready = None, ("raised", describe_error(error, impl))
    _reopen_standard_streams()
    connection.send_bytes(encode(ready))
    servers: set[int] = set()  # the process ids of the servers running
    while module is not None:
        try:
            request = decode(connection.recv_bytes())
        except (EOFError, OSError, NotData):
            break
        kind = request[0]
        if kind == "serve":
            channel, output = recv_handle(connection), recv_handle(connection)
            pid = os.fork()
            if pid == 0:
                _serve_check(module, channel, output, connection, tuple(request[1]), str(request[2]))
            os.close(channel)
            os.close(output)
            servers.add(pid)
            connection.send_bytes(encode(("ok", pid)))
        elif kind == "end":
            pid, ending = int(request[1]), bool(request[2])
            # Before the kill: had it ended on its own? (A server whose connection closed may still be exiting.)
            ended_alone = exit_code(pid, ENDING_SECONDS if ending else 0.0)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # what it started, in its group
            if ended_alone is None:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)  # reaped: no zombie left behind
            servers.discard(pid)
            sandbox.kill_strays(servers)
            connection.send_bytes(encode(("ok", ended_alone)))
    sandbox.kill_strays(set())
    os._exit(0)


def _serve_check(module: ModuleType, channel: int, output: int, host: Connection, from_reference: tuple[str, ...],
                 reference: str) -> None:
    """A server: a process group of its own, its output to the check's, then the check's requests until it ends; the
    functions ``from_reference`` are the reference's (:func:`with_reference_functions`)."""
    host.close()
    os.setpgid(0, 0)
    redirect_output(output)
    limit_memory()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        if from_reference:
            module = with_reference_functions(module, import_implementation(reference), from_reference)
        ImplementationServer(module).serve(Connection(channel))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def with_reference_functions(module: ModuleType, reference: ModuleType, names: tuple[str, ...]) -> ModuleType:
    """``module`` as a check sees it with the functions ``names`` taken from ``reference``: the implementation's own
    module is left as it is (its functions still call their own neighbours), only what the check reaches by name
    changes."""
    mixed = ModuleType(module.__name__, module.__doc__)
    mixed.__dict__.update({name: value for name, value in vars(module).items() if name not in ("__name__", "__doc__")})
    for name in names:
        setattr(mixed, name, getattr(reference, name))
    return mixed


def _reopen_standard_streams() -> None:
    """Descriptors 0 to 2 open again (on /dev/null) if the implementation closed them at import: otherwise the next
    descriptors the host receives would take their numbers, and a server's output would be sent over its channel."""
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != descriptor:
                os.dup2(null, descriptor)
                os.close(null)


def _quiet_home() -> None:
    """A home of the implementation's own: caches and configuration it writes go to a fresh directory, not the
    judge's (which is read-only to it where the machine allows)."""
    home = tempfile.mkdtemp(prefix="claims-implementation-")
    for variable in ("HOME", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "TORCH_HOME"):
        os.environ[variable] = home


def readonly_paths(project: Path) -> list[str]:
    """What the implementation may read but not write: the project, the judge's import path (where it is not a
    temporary directory) and the home directory (a user's site-packages is on the judge's import path next time)."""
    temporary = Path(tempfile.gettempdir()).resolve()
    others = [Path(entry).resolve() for entry in sys.path if entry]
    # The temporary directory stays writable (the implementation's home is there), and so does a path that holds it;
    # a project inside it (a test's, a student's scratch copy) is read-only all the same.
    return [str(path) for path in [project.resolve(), *others, Path.home().resolve()]
            if path.is_dir() and not (path == temporary or path in temporary.parents)]

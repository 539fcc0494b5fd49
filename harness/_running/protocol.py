"""What the implementation's process and the judge tell each other beyond plain values, written once for both ends.

An exception the implementation raised crosses as a description (:func:`describe_error`, in its process) and is
raised on the judge's side as the builtin exception it is, or as the harness's own error (:func:`rebuilt_error`);
a stub's NotImplementedError says which function is not written yet (:func:`stubs_as_not_implemented_yet`). A
function's parameters cross as data (:func:`parameters_of`) and are its stand-in's signature on the judge's side
(:func:`signature_from`). The server (``claims_harness._running.server``) writes these; the judge's side reads
them (``claims_harness._running.remote``, and ``claims_harness._running.runner`` for a stub).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import traceback
from collections.abc import Iterator
from typing import Any

import claims_harness.errors as errors
from claims_harness._claims.course import ENGINE
from claims_harness._running.implementation import raised_in
from claims_harness.errors import NotImplementedYet

# The exceptions an implementation's error is raised as on the judge's side: a builtin by its name (the most
# specific one of its class's bases), any other as RuntimeError; the harness's own by their names.
BUILTIN_ERRORS = frozenset(name for name, value in vars(builtins).items()
                           if isinstance(value, type) and issubclass(value, Exception))
HARNESS_ERRORS = frozenset({"ImplementationError", "Unsupported", "Inexpressible", "UnimportableImplementation"})


def describe_error(error: BaseException, implementation: str) -> dict[str, Any]:
    """An exception as data: its type's name, the most specific builtin exception it is, its message and traceback,
    the harness error's attributes, and the stub that raised it (a function of the implementation whose own code
    raised NotImplementedError)."""
    kind = type(error)
    builtin = next((base.__name__ for base in kind.__mro__ if base.__name__ in BUILTIN_ERRORS
                    and getattr(builtins, base.__name__) is base), "RuntimeError")
    harness = kind.__name__ if kind.__module__.startswith(f"{ENGINE}.") and kind.__name__ in HARNESS_ERRORS else None
    attributes = {key: value for key, value in vars(error).items() if isinstance(value, str | int | float | bool)} \
        if harness else {}
    return {"type": f"{kind.__module__}.{kind.__qualname__}", "builtin": builtin, "harness": harness,
            "message": str(error), "attributes": attributes,
            "traceback": "".join(traceback.format_exception(error, limit=-8)),
            "stub": raised_in(error, implementation) if isinstance(error, NotImplementedError) else None}


def rebuilt_error(description: dict[str, Any]) -> BaseException:
    """The exception the implementation raised, as this process raises it: a harness error as itself, a builtin one
    by its name (the most specific builtin exception its type derives from), its traceback as a note."""
    harness = description.get("harness")
    message = str(description.get("message", ""))
    if harness in HARNESS_ERRORS:
        error: BaseException = getattr(errors, harness)(message)
        error.__dict__.update(description.get("attributes") or {})
    else:
        name = description.get("builtin")
        kind = getattr(builtins, name) if name in BUILTIN_ERRORS else RuntimeError
        error = kind(message)
        if description.get("type") not in (f"builtins.{name}", None):
            error.add_note(f"(raised as {description['type']} in the implementation's process)")
    if description.get("stub"):
        error.stub = description["stub"]  # a function of the implementation that is still to be written
    traceback_text = str(description.get("traceback") or "").rstrip()
    if traceback_text:
        error.add_note(f"in the implementation's process:\n{traceback_text}")
    return error


@contextlib.contextmanager
def stubs_as_not_implemented_yet() -> Iterator[None]:
    """Inside, a NotImplementedError that a stub of the implementation raised (:func:`rebuilt_error` names the stub)
    comes out as the harness says it, NotImplementedYet naming the stub; any other passes as it is."""
    try:
        yield
    except NotImplementedError as error:
        stub = getattr(error, "stub", None)
        if not stub:
            raise
        raise NotImplementedYet([stub]) from None


@functools.lru_cache(maxsize=1024)
def signature_of(function: Any) -> inspect.Signature:
    """``inspect.signature(function)``, worked out once per function: a check calls the same few again and again."""
    return inspect.signature(function)


def parameters_of(function: Any) -> list[tuple[str, int, bool]]:
    """A function's parameters as data: each one's name, kind and whether it has a default."""
    try:
        parameters = signature_of(function).parameters.values()
    except (TypeError, ValueError):
        return []
    return [(parameter.name, int(parameter.kind), parameter.default is not inspect.Parameter.empty)
            for parameter in parameters]


def signature_from(parameters: list[tuple[str, int, bool]]) -> inspect.Signature:
    """The signature :func:`parameters_of` describes (a default shows as None: only that there is one crosses)."""
    return inspect.Signature([inspect.Parameter(name, inspect._ParameterKind(kind),
                                                default=None if has_default else inspect.Parameter.empty)
                              for name, kind, has_default in parameters])

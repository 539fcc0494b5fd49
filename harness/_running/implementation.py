"""The implementation under test, checked once before any claim runs: it imports, and it is what gets tested.

``pytest claims/`` (at session start) and ``claims verify`` (before it writes anything) both call
``claims_harness._running.remote.check_implementation``, which asks the implementation's own process for
its :func:`provenance`. An implementation that cannot be imported is one error naming the module
and why. For any implementation other than the reference, every contract function it offers
(a function some verifier declares in ``uses=``) must be defined in its own package: a function
that is the reference's own object, or comes from another package, would be checked in its place
and pass for code the author never wrote. That is an error unless the author says it is meant: with
``--claims-allow-reference`` (``claims verify --claims-allow-reference``) or, in the module itself,
``__claims_reference_fallback__ = True``, as every module that starts from ``from impl import *``
and replaces a few functions does (``examples/``, ``zoo/``, ``tests/fixtures/``).
"""

from __future__ import annotations

import dis
import importlib
import importlib.util
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache, partial
from types import CodeType, ModuleType
from typing import Any

from claims_harness._claims.course import find_course
from claims_harness._claims.formats import FALLBACK_ATTRIBUTE
from claims_harness._running.frameworks import INSTALL_HINT
from claims_harness.errors import ImplementationError, UnimportableImplementation


def import_implementation(name: str) -> ModuleType:
    """The module ``name``; an :class:`UnimportableImplementation` naming it and the cause if it cannot be imported."""
    try:
        return importlib.import_module(name)
    except (Exception, SystemExit) as error:
        raise UnimportableImplementation(f"cannot import the implementation '{name}': {_cause(name, error)}; "
                                  "pass an importable module with --claims-impl (claims verify --claims-impl) or "
                                  "CLAIMS_IMPL") from None


def _cause(name: str, error: BaseException) -> str:
    if isinstance(error, ModuleNotFoundError) and error.name and f"{name}.".startswith(f"{error.name}."):
        return (f"{error} (looked for in the working directory and on sys.path: run from the directory that holds "
                "it, put that directory on PYTHONPATH, or install it)")
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, ModuleNotFoundError) and error.name == "torch":
        text += f" (the implementation is written in PyTorch: {INSTALL_HINT})"
    frames = traceback.extract_tb(error.__traceback__)
    if frames and not isinstance(error, SyntaxError):  # a SyntaxError names its file and line itself
        text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return text


def is_stub(function: Any) -> bool:
    """Whether ``function`` is still to be written: its body is only a docstring and ``raise NotImplementedError``
    (with a message or none, as long as it is a constant).

    That is the shape of every function ``claims exercises`` writes; a check that needs one is
    skipped as "not implemented yet" rather than run into the error.
    """
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    return _stub_code(code)


# What a stub's bytecode may hold besides loading NotImplementedError, its message and raising it: the
# interpreter's bookkeeping, which differs from one Python version to the next.
_BOOKKEEPING = frozenset({"RESUME", "NOP", "CACHE", "PUSH_NULL", "PRECALL", "KW_NAMES", "EXTENDED_ARG",
                          "LOAD_CONST", "CALL", "CALL_FUNCTION", "CALL_KW"})


@cache
def _stub_code(code: CodeType) -> bool:
    """Whether ``code`` only raises NotImplementedError (with constant arguments), read from its bytecode: the source
    may be gone or edited since, and a docstring is no instruction."""
    instructions = [instruction for instruction in dis.get_instructions(code)
                    if instruction.opname not in _BOOKKEEPING]
    return (len(instructions) == 2 and instructions[0].opname in ("LOAD_GLOBAL", "LOAD_NAME")
            and instructions[0].argval == "NotImplementedError" and instructions[1].opname == "RAISE_VARARGS")


def raised_in(error: BaseException, module: str) -> str | None:
    """The function of ``module``'s package whose own code raised ``error``, if the raising frame is there.

    Only the innermost frame counts: a stub raises NotImplementedError itself, while one raised by a
    library the implementation calls (scipy's ``lfilter`` on an object array, say) is the
    implementation's error, not a function it has yet to write.
    """
    traceback_ = error.__traceback__
    if traceback_ is None:
        return None
    while traceback_.tb_next is not None:
        traceback_ = traceback_.tb_next
    frame_module = traceback_.tb_frame.f_globals.get("__name__", "")
    if isinstance(frame_module, str) and _package(frame_module) == _package(module):
        return traceback_.tb_frame.f_code.co_name
    return None


def contract_functions() -> tuple[str, ...]:
    """Every function of an implementation that some registered verifier declares in ``uses=``."""
    from claims_harness._claims.registry import registered

    return tuple(dict.fromkeys(name for verifier in registered().values() for name in verifier.uses))


@dataclass(frozen=True)
class Provenance:
    """Where the contract functions an implementation offers are defined.

    Attributes:
      impl: the module's name.
      own: the functions defined in the module's own (top-level) package.
      borrowed: defining module -> the functions defined there instead: the reference's own objects,
        or another package's.
      declared: the module sets ``__claims_reference_fallback__ = True``.
      offered: every contract function the module offers, in the contract's order.
      as_reference: those that are the reference's function of the same name: what a run with
        fallbacks takes as given; every other one (its own, or a stand-in such as another
        function of the reference bound to this name) is under test.
    """


    impl: str
    own: tuple[str, ...]
    borrowed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    declared: bool = False
    offered: tuple[str, ...] = ()
    as_reference: tuple[str, ...] = ()

    @property
    def borrowed_count(self) -> int:
        return sum(len(names) for names in self.borrowed.values())

    def refusal(self, flag: str) -> str:
        """The error of a run whose implementation borrows functions without saying so: one line per defining module."""
        package = _package(self.impl)
        offered = len(self.own) + self.borrowed_count
        lines = [f"implementation '{self.impl}': {self.borrowed_count} of the {offered} contract functions it offers "
                 f"are not defined in '{package}', so the claims would test them, not your code:"]
        for module, names in self.borrowed.items():
            whose = " (the reference's own)" if _in_reference(module) else ""
            lines.append(f"  {module}{whose}: {', '.join(names)}")
        lines.append(f"Define them in '{package}' (a copy of impl/ made with cp -r is yours as a whole: its files "
                     "import each other relatively), or, to use them as given for the functions you have not "
                     f"written, pass {flag} or set {FALLBACK_ATTRIBUTE} = True in the module "
                     "(docs/implementation-contract.md)")
        return "\n".join(lines)

    def summary(self) -> str:
        """One line for the start of a run that uses reference fallbacks."""
        how = f"{FALLBACK_ATTRIBUTE} = True" if self.declared else "allowed on the command line"
        tested = [name for name in self.offered if name not in self.as_reference]
        given = (f"{len(self.as_reference)} other contract functions are the reference's, taken as given"
                 if self.as_reference else "no function is the reference's")
        return f"implementation '{self.impl}': under test: {', '.join(tested) or 'none'}; {given} ({how})"


def provenance(module: ModuleType, functions: Iterable[str], reference: ModuleType | None = None,
               reference_name: str | None = None) -> Provenance:
    """Where each of ``functions`` that ``module`` offers is defined (functions it lacks are left out); borrowed
    functions of the reference (``reference``, or named ``reference_name``; the course's by default) first."""
    reference_package = _package(reference.__name__ if reference is not None else
                                 reference_name or reference_implementation())
    package = _package(module.__name__)
    own: list[str] = []
    borrowed: dict[str, list[str]] = {}
    offered: list[str] = []
    as_reference: list[str] = []
    for name in functions:
        function = getattr(module, name, None)
        if function is None:
            continue
        offered.append(name)
        defined_in = _defining_module(function)
        if reference is not None and function is getattr(reference, name, None):
            as_reference.append(name)
            borrowed.setdefault(defined_in or reference.__name__, []).append(name)
        elif defined_in is not None and _package(defined_in) != package:
            borrowed.setdefault(defined_in, []).append(name)
        else:
            own.append(name)
    declared = getattr(module, FALLBACK_ATTRIBUTE, False)
    if not isinstance(declared, bool):
        raise ImplementationError(f"implementation '{module.__name__}': {FALLBACK_ATTRIBUTE} is {declared!r}; "
                                  "set it to True (the functions it does not define are taken as they are) or "
                                  "leave it out")
    ordered = sorted(borrowed, key=lambda defined_in: (_package(defined_in) != reference_package, defined_in))
    return Provenance(module.__name__, tuple(own), {key: tuple(borrowed[key]) for key in ordered}, declared,
                      tuple(offered), tuple(as_reference))


def _defining_module(function: Any) -> str | None:
    while isinstance(function, partial):
        function = function.func
    function = getattr(function, "__wrapped__", function)
    module = getattr(function, "__module__", None)
    return module if isinstance(module, str) else None


def _package(module: str) -> str:
    return module.partition(".")[0]


def _in_reference(module: str) -> bool:
    return _package(module) == _package(reference_implementation())


def reference_implementation() -> str:
    """The course's reference implementation (``implementation`` in ``[tool.claims]``)."""
    return find_course().implementation


def reference_directory() -> str:
    """Where the reference implementation is imported from: the course root, never the directory a run started in
    (which may hold a module of that name of the student's)."""
    return str(find_course().root)

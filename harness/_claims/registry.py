"""Verifiers are plain functions registered under a stable name; claim files name only these."""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from claims_harness._claims.course import Course, find_course, use_packages_of
from claims_harness._claims.schema import KINDS
from claims_harness.errors import RegistryError, did_you_mean


class NoParams(BaseModel):
    """A verifier that takes no parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Verifier:
    """A registered check function and what it needs."""

    name: str
    function: Callable[..., Mapping[str, Any]]
    kinds: tuple[str, ...]
    uses: tuple[str, ...]
    params: type[BaseModel]
    file: str
    line: int
    in_floats: Callable[..., Mapping[str, Any]] | None = None

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


_REGISTRY: dict[str, Verifier] = {}


def verifier(
    name: str | None = None, *, kind: str | tuple[str, ...], uses: tuple[str, ...] = (),
    params: type[BaseModel] = NoParams, in_floats: Callable[..., Mapping[str, Any]] | None = None,
) -> Callable[[Callable[..., Mapping[str, Any]]], Callable[..., Mapping[str, Any]]]:
    """Register a verifier under ``name``.

    Args:
      name: the stable dotted name claim files use; by default the module's last name and the function's,
        ``module.function`` (``@verifier(kind="exact")`` on ``gae.weights_exact`` in ``verifiers/gae.py`` is
        ``gae.weights_exact``). Give one only to keep a name a claim file uses when the function moves.
      kind: the kind of check its computation is (``claims_harness._claims.schema.KINDS``: 'symbolic' for a
        sympy proof, 'experiment' for training runs, ...); a check of another kind that names it
        is refused when claims load, so a proof is never counted as an experiment. An exact
        computation that also serves as a counterexample's witness names both kinds.
      uses: the functions of the implementation under test that the verifier calls; it may
        call no others, and an implementation lacking one makes the check an error.
      params: a pydantic model of the verifier's parameters, validated when claims load.
      in_floats: the verifier's float twin, for a verifier that hands the implementation fractions: the same
        observations computed from the implementation's float64 answers, each number a
        :class:`~claims_harness._claims.plain.Rounded` with its derived rounding bound (or exact where float64 holds it
        exactly). It runs, in place of the verifier, when the implementation declines exact arithmetic (PyTorch,
        JAX, ``__claims_exact_arithmetic__ = False``), so that such code is judged on the same statement.

    Raises:
      RegistryError: when ``kind`` names no kind of check, or ``name`` is another function's.
    """
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    unknown = [each for each in kinds if each not in KINDS]
    if not kinds or unknown:
        raise RegistryError(f"verifier '{name or '(named after its function)'}': kind "
                            f"{', '.join(map(repr, unknown)) or 'missing'} is not one of "
                            f"{', '.join(KINDS)}{did_you_mean(unknown[0], KINDS) if unknown else ''}")

    def register(function: Callable[..., Mapping[str, Any]]) -> Callable[..., Mapping[str, Any]]:
        registered_as = name or f"{function.__module__.rpartition('.')[2]}.{function.__name__}"
        # Names, not identities: re-importing a module (pytester, reload) registers the same function again.
        known = _REGISTRY.get(registered_as)
        if known and _identity(known.function) != _identity(function):
            raise RegistryError(f"verifier name '{registered_as}' is registered twice: "
                                f"{_REGISTRY[registered_as].location} and {function.__module__}; rename one of them")
        line = inspect.unwrap(function).__code__.co_firstlineno  # the decorator's line, as getsourcelines says
        # The module path, not the absolute file, keeps reports identical across checkouts.
        file = function.__module__.replace(".", "/") + ".py"
        _REGISTRY[registered_as] = Verifier(registered_as, function, kinds, tuple(uses), params, file, line, in_floats)
        return function

    return register


def _identity(function: Callable[..., Any]) -> tuple[str, str, int]:
    return function.__module__, function.__qualname__, function.__code__.co_firstlineno


@contextlib.contextmanager
def packages_of(course: Course) -> Iterator[None]:
    """:func:`use_packages_of` for the block (a command called in a longer-lived process), the course's verifier
    package imported from the course root: not a package of that name found earlier on the import path, nor a copy
    imported before (a program that ran another course), so that neither the checks nor the cache keys come from
    another copy. The import path, the modules and the registry are left as they were found."""
    root, there = str(course.root), str(course.root) in sys.path
    use_packages_of(course)
    package = course.verifiers
    local = next((path for path in (course.root / package / "__init__.py", course.root / f"{package}.py")
                  if path.is_file()), None)
    imported = getattr(sys.modules.get(package), "__file__", None)
    if local is None or (imported is not None and Path(imported).resolve() == local.resolve()):
        finder, aside = None, {}
    else:
        finder = _FromCourse(package, root)
        sys.meta_path.insert(0, finder)
        aside = {name: sys.modules.pop(name) for name in list(sys.modules) if _within(name, package)}
    saved = dict(_REGISTRY)
    try:
        yield
    finally:
        if not there and root in sys.path:
            sys.path.remove(root)
        if finder is not None:
            sys.meta_path.remove(finder)
            for name in [name for name in sys.modules if _within(name, package)]:
                del sys.modules[name]
            sys.modules.update(aside)
            _REGISTRY.clear()
            _REGISTRY.update(saved)


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


class _FromCourse(importlib.abc.MetaPathFinder):
    """Finds ``package`` in the course root alone (its submodules then come from its own ``__path__``)."""

    def __init__(self, package: str, root: str):
        self.package, self.root = package, root

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.PathFinder.find_spec(name, [self.root]) if name == self.package else None


def registered(package: str | None = None) -> Mapping[str, Verifier]:
    """Every registered verifier, after importing ``package`` (default: the verifier package of the course here)."""
    if package is None:
        course = find_course()
        use_packages_of(course)
        package = course.verifiers
    importlib.import_module(package)
    return _REGISTRY


def lookup(name: str) -> Verifier:
    verifiers = registered()
    if name not in verifiers:
        raise RegistryError(f"unknown verifier '{name}'{did_you_mean(name, verifiers)}")
    return verifiers[name]


"""Verifiers are plain functions registered under a stable name; claim files name only these."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from claims_harness._claims.course import find_course, use_packages_of
from claims_harness._claims.errors import RegistryError, did_you_mean
from claims_harness._claims.schema import KINDS


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
    name: str, *, kind: str | tuple[str, ...], uses: tuple[str, ...] = (), params: type[BaseModel] = NoParams,
    in_floats: Callable[..., Mapping[str, Any]] | None = None,
) -> Callable[[Callable[..., Mapping[str, Any]]], Callable[..., Mapping[str, Any]]]:
    """Register a verifier under ``name``.

    Args:
      name: the stable dotted name claim files use, ``module.what_it_checks``.
      kind: the kind of check its computation is (``claims_harness._claims.schema.KINDS``: 'symbolic' for a
        sympy proof, 'experiment' for training runs, ...); a check of another kind that names it
        is refused when claims load, so a proof is never counted as an experiment. An exact
        computation that also serves as a counterexample's witness names both kinds.
      uses: the functions of the implementation under test that the verifier calls; it may
        call no others, and an implementation lacking one makes the check an error.
      params: a pydantic model of the verifier's parameters, validated when claims load.
      in_floats: the verifier's float twin, for a verifier that hands the implementation fractions: the same
        observations computed from the implementation's float64 answers, each number a
        :class:`~claims_harness._claims.expect.Rounded` with its derived rounding bound (or exact where float64 holds it
        exactly). It runs, in place of the verifier, when the implementation declines exact arithmetic (PyTorch,
        JAX, ``__claims_exact_arithmetic__ = False``), so that such code is judged on the same statement.

    Raises:
      RegistryError: when ``kind`` names no kind of check, or ``name`` is another function's.
    """
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    unknown = [each for each in kinds if each not in KINDS]
    if not kinds or unknown:
        raise RegistryError(f"verifier '{name}': kind {', '.join(map(repr, unknown)) or 'missing'} is not one of "
                            f"{', '.join(KINDS)}{did_you_mean(unknown[0], KINDS) if unknown else ''}")

    def register(function: Callable[..., Mapping[str, Any]]) -> Callable[..., Mapping[str, Any]]:
        # Names, not identities: re-importing a module (pytester, reload) registers the same function again.
        known = _REGISTRY.get(name)
        if known and _identity(known.function) != _identity(function):
            raise RegistryError(f"verifier name '{name}' is registered twice: {_REGISTRY[name].location} "
                                f"and {function.__module__}; rename one of them")
        line = inspect.unwrap(function).__code__.co_firstlineno  # the decorator's line, as getsourcelines says
        # The module path, not the absolute file, keeps reports identical across checkouts.
        file = function.__module__.replace(".", "/") + ".py"
        _REGISTRY[name] = Verifier(name, function, kinds, tuple(uses), params, file, line, in_floats)
        return function

    return register


def _identity(function: Callable[..., Any]) -> tuple[str, str, int]:
    return function.__module__, function.__qualname__, function.__code__.co_firstlineno


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


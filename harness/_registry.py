"""Verifiers are plain functions registered under a stable name; claim files name only these."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from harness._errors import RegistryError, did_you_mean

VERIFIER_PACKAGE = "verifiers"


class NoParams(BaseModel):
    """A verifier that takes no parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Verifier:
    """A registered check function and what it needs."""

    name: str
    function: Callable[..., Mapping[str, Any]]
    uses: tuple[str, ...]
    params: type[BaseModel]
    file: str
    line: int

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


_REGISTRY: dict[str, Verifier] = {}


def verifier(
    name: str, *, uses: tuple[str, ...] = (), params: type[BaseModel] = NoParams
) -> Callable[[Callable[..., Mapping[str, Any]]], Callable[..., Mapping[str, Any]]]:
    """Register a verifier under ``name``.

    Args:
      name: the stable dotted name claim files use, ``module.what_it_checks``.
      uses: the functions of the implementation under test that the verifier calls; it may
        call no others, and an implementation lacking one makes the check an error.
      params: a pydantic model of the verifier's parameters, validated when claims load.
    """

    def register(function: Callable[..., Mapping[str, Any]]) -> Callable[..., Mapping[str, Any]]:
        # Names, not identities: re-importing a module (pytester, reload) registers the same function again.
        known = _REGISTRY.get(name)
        if known and _identity(known.function) != _identity(function):
            raise RegistryError(f"verifier name '{name}' is registered twice: {_REGISTRY[name].location} "
                                f"and {function.__module__}; rename one of them")
        _, line = inspect.getsourcelines(function)
        # The module path, not the absolute file, keeps reports identical across checkouts.
        file = function.__module__.replace(".", "/") + ".py"
        _REGISTRY[name] = Verifier(name, function, tuple(uses), params, file, line)
        return function

    return register


def _identity(function: Callable[..., Any]) -> tuple[str, str, int]:
    return function.__module__, function.__qualname__, function.__code__.co_firstlineno


def registered() -> Mapping[str, Verifier]:
    """Every registered verifier, after importing the project's verifier package."""
    importlib.import_module(VERIFIER_PACKAGE)
    return _REGISTRY


def lookup(name: str) -> Verifier:
    verifiers = registered()
    if name not in verifiers:
        raise RegistryError(f"unknown verifier '{name}'{did_you_mean(name, verifiers)}")
    return verifiers[name]


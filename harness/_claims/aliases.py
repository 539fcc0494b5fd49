"""Other names for contract functions: a course's own exercise names, and how each relates to the contract.

A course may ask its students for functions under names of its own (a syllabus's ``ppo_clip_loss``
where the contract has ``ppo_clip_objective``). The course says so in ``[tool.claims.aliases]``:
``alias = {function = "contract_function", relation = "..."}``, with one of :data:`RELATIONS`. An
implementation that lacks the contract function but offers the alias is checked through it, by
the relation; the reference, and any module that defines the contract function itself, is not
affected. Each relation is written here by hand because it is the documented meaning of a name,
not something a library could know; none evaluates anything from the configuration.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness._claims.errors import ImplementationError

RELATIONS = {
    "same": "the alias is the contract function under another name",
    "negated_mean": "the alias is a loss: minus the mean over samples of the contract function's per-sample values "
                    "(the contract's value of each sample is minus the loss of that sample alone)",
    "baseline": "the alias is a baseline b: the contract function of (x, ...) is x - b(x, ...)",
}


@dataclass(frozen=True)
class Alias:
    """``name`` may stand in for the contract function ``function``, related to it by ``relation``."""

    name: str
    function: str
    relation: str

    def describe(self) -> str:
        return f"{self.name} for {self.function} ({self.relation}: {RELATIONS[self.relation]})"


def parse_aliases(table: Any, where: str) -> tuple[Alias, ...]:
    """The aliases of ``[tool.claims.aliases]``; one error naming the entry and the fix for anything else."""
    if table is None:
        return ()
    if not isinstance(table, Mapping):
        raise ImplementationError(f"{where}: aliases must be a table of name = {{function = ..., relation = ...}}")
    aliases = []
    for name, entry in table.items():
        if not name.isidentifier() or not isinstance(entry, Mapping) or set(entry) != {"function", "relation"} \
                or not isinstance(entry["function"], str) or not entry["function"].isidentifier():
            raise ImplementationError(f"{where}: aliases.{name}: expected {{function = \"<contract function>\", "
                                      f"relation = \"<one of {', '.join(RELATIONS)}>\"}}, got {entry!r}")
        if entry["relation"] not in RELATIONS:
            raise ImplementationError(f"{where}: aliases.{name}: unknown relation {entry['relation']!r}; "
                                      f"use one of {', '.join(RELATIONS)}")
        aliases.append(Alias(name, entry["function"], entry["relation"]))
    return tuple(aliases)


def resolve(module: Any, name: str, aliases: tuple[Alias, ...]) -> Any:
    """``module``'s function ``name``: its own, else the first alias it offers, adapted by the relation; else None."""
    own = getattr(module, name, None)
    if own is not None:
        return own
    for alias in aliases:
        offered = getattr(module, alias.name, None)
        if alias.function == name and callable(offered):
            return _ADAPTERS[alias.relation](offered, name)
    return None


def _adapter(alias: Callable[..., Any], name: str, call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(alias)
    def adapted(*args: Any, **kwargs: Any) -> Any:
        return call(*args, **kwargs)

    adapted.__name__ = adapted.__qualname__ = name
    return adapted


def _same(alias: Callable[..., Any], name: str) -> Callable[..., Any]:
    return _adapter(alias, name, alias)


def _baseline(alias: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(x: Any, *args: Any, **kwargs: Any) -> Any:
        # No cast: an exact input (fractions in an object array) stays exact.
        return np.asarray(x) - np.asarray(alias(x, *args, **kwargs))

    return _adapter(alias, name, call)


def _negated_mean(alias: Callable[..., Any], name: str) -> Callable[..., Any]:
    signature = inspect.signature(alias)

    def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        samples = {key: np.asarray(value) for key, value in bound.arguments.items()
                   if isinstance(value, np.ndarray | list | tuple) and np.ndim(value) >= 1}
        if not samples:
            return -np.asarray(alias(*args, **kwargs), dtype=float)
        shape = np.broadcast_shapes(*(value.shape for value in samples.values()))
        values = []
        for index in np.ndindex(shape):
            one = {key: np.array([np.broadcast_to(value, shape)[index]], dtype=value.dtype)
                   for key, value in samples.items()}
            values.append(-_scalar(alias(**(bound.arguments | one))))
        # No cast: exact inputs (fractions in object arrays) give exact values.
        per_sample = np.array(values).reshape(shape)
        # The loss of the whole batch must be the mean of the samples' (and not, say, their sum): within the
        # rounding of a mean of n terms, n u sum|x| / n with u the unit roundoff, for the mean and for the loss.
        whole = _scalar(alias(*args, **kwargs))
        n = per_sample.size
        rounding = 4 * n * np.finfo(float).eps * float(np.abs(per_sample).mean()) if n else 0.0
        if n and not abs(whole + per_sample.mean()) <= rounding:
            raise ImplementationError(f"{alias.__name__} (standing in for {name}) gives {whole!r} for the batch, "
                                      f"but minus the mean of its single-sample values is {-per_sample.mean()!r}: "
                                      "a loss is minus the mean of the per-sample objective (not its sum)")
        return per_sample

    return _adapter(alias, name, call)


def _scalar(value: Any) -> Any:
    """A loss's one number, as it is (a float, or a fraction of an exact computation)."""
    array = np.asarray(value)
    if array.size != 1:
        raise ImplementationError(f"a loss returns one number; this one returned shape {array.shape}")
    return array.reshape(()).item()


_ADAPTERS = {"same": _same, "negated_mean": _negated_mean, "baseline": _baseline}

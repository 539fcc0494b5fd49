"""Examples of a property drawn straight from its Hypothesis strategies with a NumPy generator.

Hypothesis spends one to fifty milliseconds an example on its engine (the choice sequence, the
strategies' validation, the bookkeeping its shrinker needs), far more than most properties of the
course spend on the implementation. A passing property needs no shrinker, so the harness draws
its examples here instead, in microseconds, and hands the strategies to Hypothesis only once a
drawn example has failed, to shrink it (``harness._running.property``). No library draws from a
Hypothesis strategy without its engine (``strategy.example()`` runs the engine and warns that it
is not for tests), hence this module.

It reads the strategies' own descriptions (their bounds, elements, sizes and functions), which
are attributes of Hypothesis' strategy classes rather than its public API; a strategy of a kind
it does not know raises :class:`CannotDraw`, and the property then runs under Hypothesis as a
whole, as slowly as before but as correctly. ``tests/test_draws.py`` checks that every property
of the course is drawn here with the Hypothesis this project installs.

Like Hypothesis, the draws lean towards the edges of each strategy, where mistakes live: a bound,
zero, one, the smallest and largest size, a float just inside a bound, a constant array.
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import ArrayStrategy


def _internal(module: str, *names: str) -> list[type]:
    """Hypothesis' strategy classes ``names`` from ``hypothesis.strategies._internal.<module>``.

    A class a release does not have there becomes a placeholder that no strategy is an instance of,
    so that strategies of its kind run under Hypothesis' engine (slower, as correct) instead of
    breaking the import: these modules are private, and any release may move them.
    """
    try:
        found = importlib.import_module(f"hypothesis.strategies._internal.{module}")
    except ImportError:
        found = None
    return [getattr(found, name, None) or type(f"Missing{name}", (), {}) for name in names]


ListStrategy, TupleStrategy, UniqueListStrategy, UniqueSampledListStrategy = _internal(
    "collections", "ListStrategy", "TupleStrategy", "UniqueListStrategy", "UniqueSampledListStrategy")
BuildsStrategy, CompositeStrategy, PermutationStrategy = _internal(
    "core", "BuildsStrategy", "CompositeStrategy", "PermutationStrategy")
(DeferredStrategy,) = _internal("deferred", "DeferredStrategy")
(FlatMapStrategy,) = _internal("flatmapped", "FlatMapStrategy")
(LazyStrategy,) = _internal("lazy", "LazyStrategy")
(BooleansStrategy,) = _internal("misc", "BooleansStrategy")
FloatStrategy, IntegersStrategy = _internal("numbers", "FloatStrategy", "IntegersStrategy")
FilteredStrategy, MappedStrategy, OneOfStrategy, SampledFromStrategy = _internal(
    "strategies", "FilteredStrategy", "MappedStrategy", "OneOfStrategy", "SampledFromStrategy")

__all__ = ["CannotDraw", "Rejected", "draw"]

# The share of draws that take an edge value (a bound, 0, ±1, a float next to a bound) instead of a
# spread one, and the share of arrays and lists filled with one repeated value.
EDGE_SHARE = 0.15
CONSTANT_SHARE = 0.1
# How often a filter is tried before the example is given up (Hypothesis gives up after about as many).
FILTER_TRIES = 100
# Unbounded integers are drawn at magnitudes up to 2**BITS (Hypothesis leans as heavily to small ones).
BITS = 64


class CannotDraw(Exception):
    """A strategy this module does not know how to draw from; the property runs under Hypothesis instead."""


class Rejected(Exception):
    """The example was rejected (a filter that never held, ``assume(False)``): draw another one."""


def draw(strategy: st.SearchStrategy[Any], rng: np.random.Generator) -> Any:
    """One value of ``strategy``, drawn with ``rng``.

    Raises:
      CannotDraw: the strategy, or one inside it, is of a kind this module does not know.
      Rejected: a filter inside it did not hold in FILTER_TRIES tries.
    """
    while isinstance(strategy, (LazyStrategy, DeferredStrategy)):
        strategy = strategy.wrapped_strategy
    kind = type(strategy)
    drawer = _DRAWERS.get(kind)
    if drawer is None:
        raise CannotDraw(f"no direct draw for {kind.__module__}.{kind.__qualname__}: {strategy!r}")
    try:
        return drawer(strategy, rng)
    except (AttributeError, TypeError, ValueError) as error:
        # A strategy whose private description this release keeps otherwise (or a function inside it that
        # raised): Hypothesis' engine draws it, and says what any error of the function's own is.
        raise CannotDraw(f"cannot draw {strategy!r} directly ({type(error).__name__}: {error})") from error


def _edge(rng: np.random.Generator) -> bool:
    return rng.random() < EDGE_SHARE


def _integers(strategy: IntegersStrategy, rng: np.random.Generator) -> int:
    low, high = strategy.start, strategy.end
    if low is None or high is None:
        magnitude = int(rng.integers(0, 2 ** int(rng.integers(1, BITS))))
        value = magnitude if rng.random() < 0.5 else -magnitude
        low = -math.inf if low is None else low
        high = math.inf if high is None else high
        return int(min(max(value, low), high))
    if _edge(rng):
        edges = [low, high] + [value for value in (0, 1, -1) if low <= value <= high]
        return int(edges[rng.integers(len(edges))])
    if high - low < 2**62:
        return low + int(rng.integers(0, high - low + 1))
    return low + int(rng.random() * (high - low))


def _floats(strategy: FloatStrategy, rng: np.random.Generator) -> float:
    low, high = strategy.min_value, strategy.max_value
    tiny = strategy.smallest_nonzero_magnitude
    if _edge(rng) or strategy.allow_nan and rng.random() < 0.01:
        edges = [low, high, np.nextafter(low, math.inf), np.nextafter(high, -math.inf), 0.0, -0.0, 1.0, -1.0, 0.5,
                 tiny, -tiny]
        if strategy.allow_nan:
            edges.append(math.nan)
        edges = [value for value in edges if math.isnan(value) or low <= value <= high]
        value = float(edges[rng.integers(len(edges))])
    else:
        largest = float(np.finfo(float).max)
        finite_low, finite_high = max(low, -largest), min(high, largest)
        if rng.random() < 0.5 and finite_high - finite_low < math.inf:
            value = finite_low + rng.random() * (finite_high - finite_low)
        else:
            value = _log_spread(finite_low, finite_high, tiny, rng)
        value = float(min(max(value, finite_low), finite_high))
    if value != 0 and abs(value) < tiny:
        value = 0.0 if low <= 0.0 <= high else math.copysign(tiny, value)
    return value


def _log_spread(low: float, high: float, tiny: float, rng: np.random.Generator) -> float:
    """A value of [low, high] whose magnitude is spread evenly over orders of magnitude (small as likely as large)."""
    negative = high <= 0 or (low < 0 and rng.random() < 0.5)
    smallest, largest = (max(-high, 0.0), -low) if negative else (max(low, 0.0), high)
    if largest <= 0:
        return 0.0
    # Magnitudes past 2**40 only now and then, so that an unbounded float is not almost always astronomical.
    top = math.log2(largest) if rng.random() < 0.1 else min(math.log2(largest), 40.0)
    bottom = min(math.log2(max(smallest, tiny, 2.0**-40)), top)
    magnitude = min(2.0 ** rng.uniform(bottom, top), largest)
    return -magnitude if negative else magnitude


def _size(strategy: ListStrategy, rng: np.random.Generator) -> int:
    low = strategy.min_size
    high = strategy.max_size if strategy.max_size < math.inf else max(low, int(2 * strategy.average_size) + 1)
    if _edge(rng):
        return low if rng.random() < 0.5 else int(high)
    return int(rng.integers(low, int(high) + 1))


def _lists(strategy: ListStrategy, rng: np.random.Generator) -> list[Any]:
    size = _size(strategy, rng)
    if size and rng.random() < CONSTANT_SHARE:
        value = draw(strategy.element_strategy, rng)
        return [value] * size
    return [draw(strategy.element_strategy, rng) for _ in range(size)]


def _unique_lists(strategy: UniqueListStrategy, rng: np.random.Generator) -> list[Any]:
    size = _size(strategy, rng)
    values: list[Any] = []
    seen: list[set[Any]] = [set() for _ in strategy.keys]
    for _ in range(FILTER_TRIES * max(size, 1)):
        if len(values) == size:
            return values
        value = draw(strategy.element_strategy, rng)
        keys = [key(value) for key in strategy.keys]
        if all(k not in keys_seen for k, keys_seen in zip(keys, seen, strict=True)):
            values.append(value)
            for k, keys_seen in zip(keys, seen, strict=True):
                keys_seen.add(k)
    if len(values) >= strategy.min_size:
        return values
    raise Rejected(f"no {strategy.min_size} distinct values of {strategy.element_strategy!r}")


def _sampled(strategy: SampledFromStrategy, rng: np.random.Generator) -> Any:
    for _ in range(FILTER_TRIES):
        value = strategy.elements[rng.integers(len(strategy.elements))]
        for how, function, *_ in getattr(strategy, "_transformations", ()):  # 6.160 kept no location
            if how == "map":
                value = function(value)
            elif how == "filter":
                if not function(value):
                    break
            else:
                raise CannotDraw(f"sampled_from transformation {how!r}")
        else:
            return value
    raise Rejected(f"no element of {strategy!r} passed its filter")


def _filtered(strategy: FilteredStrategy, rng: np.random.Generator) -> Any:
    for _ in range(FILTER_TRIES):
        value = draw(strategy.filtered_strategy, rng)
        if all(condition(value) for condition in strategy.flat_conditions):
            return value
    raise Rejected(f"{strategy!r}: the filter did not hold in {FILTER_TRIES} tries")


def _arrays(strategy: ArrayStrategy, rng: np.random.Generator) -> np.ndarray:
    if strategy.unique:
        raise CannotDraw("arrays with unique=True")
    size = strategy.array_size
    if size and rng.random() < CONSTANT_SHARE:
        return np.full(strategy.shape, draw(strategy.element_strategy, rng), dtype=strategy.dtype)
    values = [draw(strategy.element_strategy, rng) for _ in range(size)]
    return np.array(values, dtype=strategy.dtype).reshape(strategy.shape)


def _composite(strategy: CompositeStrategy, rng: np.random.Generator) -> Any:
    return strategy.definition(lambda inner: draw(inner, rng), *strategy.args, **strategy.kwargs)


_DRAWERS: dict[type, Any] = {
    IntegersStrategy: _integers,
    FloatStrategy: _floats,
    BooleansStrategy: lambda strategy, rng: bool(rng.random() < 0.5),
    ListStrategy: _lists,
    UniqueListStrategy: _unique_lists,
    UniqueSampledListStrategy: _unique_lists,
    TupleStrategy: lambda strategy, rng: tuple(draw(inner, rng) for inner in strategy.element_strategies),
    OneOfStrategy: lambda strategy, rng: draw(
        strategy.original_strategies[rng.integers(len(strategy.original_strategies))], rng),
    MappedStrategy: lambda strategy, rng: strategy.pack(draw(strategy.mapped_strategy, rng)),
    FlatMapStrategy: lambda strategy, rng: draw(strategy.expand(draw(strategy.base, rng)), rng),
    FilteredStrategy: _filtered,
    BuildsStrategy: lambda strategy, rng: strategy.target(
        *(draw(inner, rng) for inner in strategy.args), **{k: draw(v, rng) for k, v in strategy.kwargs.items()}),
    PermutationStrategy: lambda strategy, rng: [strategy.values[i] for i in rng.permutation(len(strategy.values))],
    CompositeStrategy: _composite,
    ArrayStrategy: _arrays,
}
# sampled_from and just are the same class family; every subclass of it draws alike.
for _kind in (SampledFromStrategy, *SampledFromStrategy.__subclasses__()):
    _DRAWERS[_kind] = _sampled

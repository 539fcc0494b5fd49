"""Examples of a property drawn straight from its strategies with a NumPy generator.

Hypothesis spends one to fifty milliseconds an example on its engine (the choice sequence, the
strategies' validation, the bookkeeping its shrinker needs), far more than most properties of the
course spend on the implementation. A passing property needs no shrinker, so the harness draws
its examples here instead, in microseconds, and hands the strategies to Hypothesis only once a
drawn example has failed, to shrink it (``claims_harness._running.property``). This is written by hand
because no library draws from a Hypothesis strategy without its engine (``strategy.example()`` runs
the engine and warns that it is not for tests), and Hypothesis' public API exposes no description of
a strategy (its bounds, elements, sizes and functions) that a drawer could read.

So the properties' strategies are the harness's own descriptions (:mod:`claims_harness.strategies`, whose
functions mirror Hypothesis'), and this module reads their attributes: nothing of Hypothesis. A
Hypothesis strategy inside one raises :class:`CannotDraw`, and the property then runs under
Hypothesis as a whole, as slowly as before but as correctly. ``tests/test_draws.py`` checks that
every property of the course is drawn here.

Like Hypothesis, the draws lean towards the edges of each strategy, where mistakes live: a bound,
zero, one, the smallest and largest size, a float just inside a bound, a constant array.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from claims_harness._strategy_base import Filtered, FlatMapped, Mapped, Rejected
from claims_harness.strategies import (
    Arrays,
    Booleans,
    Builds,
    Composite,
    Floats,
    Fractions,
    Integers,
    Just,
    Lists,
    OneOf,
    Permutations,
    SampledFrom,
    SearchStrategy,
    Tuples,
    is_hypothesis_strategy,
)

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
    """A strategy this module does not draw from (a Hypothesis strategy); the property runs under Hypothesis instead."""


def draw(strategy: SearchStrategy[Any], rng: np.random.Generator) -> Any:
    """One value of ``strategy``, drawn with ``rng``.

    Raises:
      CannotDraw: the strategy, or one inside it, is Hypothesis' rather than a description of
        :mod:`claims_harness.strategies`, or a function inside it raised a TypeError or ValueError (Hypothesis'
        engine then draws it, and reports any error of the function's own).
      Rejected: a filter inside it did not hold in FILTER_TRIES tries.
    """
    drawer = _DRAWERS.get(type(strategy))
    if drawer is None:
        if is_hypothesis_strategy(strategy):
            raise CannotDraw(f"a Hypothesis strategy, which only Hypothesis' engine draws from: {strategy!r}")
        raise CannotDraw(f"not a strategy of claims_harness.strategies: {strategy!r}")
    try:
        return drawer(strategy, rng)
    except (TypeError, ValueError) as error:
        raise CannotDraw(f"cannot draw {strategy!r} directly ({type(error).__name__}: {error})") from error


def _edge(rng: np.random.Generator) -> bool:
    return rng.random() < EDGE_SHARE


def _integers(strategy: Integers, rng: np.random.Generator) -> int:
    return _integer(strategy.min_value, strategy.max_value, rng)


def _integer(low: int | None, high: int | None, rng: np.random.Generator) -> int:
    if low is None or high is None:
        magnitude = int(rng.integers(0, 2 ** int(rng.integers(1, BITS))))
        value = magnitude if rng.random() < 0.5 else -magnitude
        return int(min(max(value, -math.inf if low is None else low), math.inf if high is None else high))
    if _edge(rng):
        edges = [low, high] + [value for value in (0, 1, -1) if low <= value <= high]
        return int(edges[rng.integers(len(edges))])
    if high - low < 2**62:
        return low + int(rng.integers(0, high - low + 1))
    return low + int(rng.random() * (high - low))


def _floats(strategy: Floats, rng: np.random.Generator) -> float:
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


def _fractions(strategy: Fractions, rng: np.random.Generator) -> Fraction:
    """As Hypothesis' ``fractions`` builds them: a denominator, then a numerator within the bounds over it."""
    low, high, most = strategy.min_value, strategy.max_value, strategy.max_denominator
    if low is not None and low == high:
        return low
    denominator = _integer(1, most, rng)
    least_numerator = most_numerator = None
    if low is None and high is not None:
        most_numerator = denominator * high.numerator
        denominator *= high.denominator
    elif high is None and low is not None:
        least_numerator = denominator * low.numerator
        denominator *= low.denominator
    elif low is not None and high is not None:
        lowest, highest = low.numerator * high.denominator, high.numerator * low.denominator
        scale = low.denominator * high.denominator
        common = math.gcd(scale, math.gcd(lowest, highest))
        least_numerator, most_numerator = denominator * lowest // common, denominator * highest // common
        denominator *= scale // common
    value = Fraction(_integer(least_numerator, most_numerator, rng), denominator)
    return value if most is None else value.limit_denominator(most)


def _size(strategy: Lists, rng: np.random.Generator) -> int:
    low = strategy.min_size
    high = strategy.max_size if strategy.max_size < math.inf else max(low, int(2 * strategy.average_size) + 1)
    if _edge(rng):
        return low if rng.random() < 0.5 else int(high)
    return int(rng.integers(low, int(high) + 1))


def _lists(strategy: Lists, rng: np.random.Generator) -> list[Any]:
    if strategy.max_size == 0:
        return []
    if strategy.keys is not None:
        return _unique_lists(strategy, rng)
    size = _size(strategy, rng)
    if size and rng.random() < CONSTANT_SHARE:
        value = draw(strategy.elements, rng)
        return [value] * size
    return [draw(strategy.elements, rng) for _ in range(size)]


def _unique_lists(strategy: Lists, rng: np.random.Generator) -> list[Any]:
    size = _size(strategy, rng)
    values: list[Any] = []
    seen: list[set[Any]] = [set() for _ in strategy.keys]
    for _ in range(FILTER_TRIES * max(size, 1)):
        if len(values) == size:
            return values
        value = draw(strategy.elements, rng)
        keys = [key(value) for key in strategy.keys]
        if all(k not in keys_seen for k, keys_seen in zip(keys, seen, strict=True)):
            values.append(value)
            for k, keys_seen in zip(keys, seen, strict=True):
                keys_seen.add(k)
    if len(values) >= strategy.min_size:
        return values
    raise Rejected(f"no {strategy.min_size} distinct values of {strategy.elements!r}")


def _sampled(strategy: SampledFrom, rng: np.random.Generator) -> Any:
    if not strategy.elements:
        raise Rejected(f"{strategy!r} has no elements")
    return strategy.elements[rng.integers(len(strategy.elements))]


def _filtered(strategy: Filtered, rng: np.random.Generator) -> Any:
    for _ in range(FILTER_TRIES):
        value = draw(strategy.base, rng)
        if all(condition(value) for condition in strategy.conditions):
            return value
    raise Rejected(f"{strategy!r}: the filter did not hold in {FILTER_TRIES} tries")


def _arrays(strategy: Arrays, rng: np.random.Generator) -> np.ndarray:
    size = strategy.size
    if strategy.unique:
        values = _distinct(strategy, rng)
    elif size and rng.random() < CONSTANT_SHARE:
        constant = draw(strategy.elements if strategy.fill is None else strategy.fill, rng)
        return np.full(strategy.shape, constant, dtype=strategy.dtype)
    else:
        values = [draw(strategy.elements, rng) for _ in range(size)]
    return np.array(values, dtype=strategy.dtype).reshape(strategy.shape)


def _distinct(strategy: Arrays, rng: np.random.Generator) -> list[Any]:
    values: list[Any] = []
    seen: set[Any] = set()
    for _ in range(FILTER_TRIES * max(strategy.size, 1)):
        if len(values) == strategy.size:
            return values
        value = draw(strategy.elements, rng)
        if value not in seen:
            seen.add(value)
            values.append(value)
    raise Rejected(f"no {strategy.size} distinct values of {strategy.elements!r}")


def _composite(strategy: Composite, rng: np.random.Generator) -> Any:
    return strategy.definition(lambda inner: draw(inner, rng), *strategy.args, **strategy.kwargs)


_DRAWERS: dict[type, Any] = {
    Integers: _integers,
    Floats: _floats,
    Fractions: _fractions,
    Booleans: lambda strategy, rng: bool(rng.random() < 0.5),
    Just: lambda strategy, rng: strategy.value,
    SampledFrom: _sampled,
    Permutations: lambda strategy, rng: [strategy.values[i] for i in rng.permutation(len(strategy.values))],
    OneOf: lambda strategy, rng: draw(strategy.options[rng.integers(len(strategy.options))], rng),
    Tuples: lambda strategy, rng: tuple(draw(part, rng) for part in strategy.parts),
    Lists: _lists,
    Arrays: _arrays,
    Builds: lambda strategy, rng: strategy.target(
        *(draw(arg, rng) for arg in strategy.args), **{name: draw(v, rng) for name, v in strategy.kwargs.items()}),
    Composite: _composite,
    Mapped: lambda strategy, rng: strategy.pack(draw(strategy.base, rng)),
    Filtered: _filtered,
    FlatMapped: lambda strategy, rng: draw(strategy.expand(draw(strategy.base, rng)), rng),
}

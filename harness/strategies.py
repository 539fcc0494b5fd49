"""The strategies a property's examples are drawn from: Hypothesis' vocabulary, as descriptions the harness owns.

A verifier writes ``from claims_harness import strategies as st`` and builds a property's inputs as it would
with Hypothesis: ``st.integers(0, 9)``, ``st.lists(...)``, ``st.tuples(...)``, ``.map``, ``.filter``,
``.flatmap``, ``@st.composite``, and ``st.arrays`` for ``hypothesis.extra.numpy.arrays``. The functions
take the arguments of Hypothesis' of the same names. What they return is a plain description
(:class:`SearchStrategy`): its bounds, sizes, parts and functions are its own attributes, so that
``claims_harness._running.draws`` draws the examples from it directly, in microseconds, and
:func:`claims_harness.check_property` hands Hypothesis the same strategy, built through Hypothesis' public
API (:meth:`SearchStrategy.as_hypothesis`), only to shrink a failure. What every description shares (the class
:class:`SearchStrategy`, ``.map``, ``.filter``, ``.flatmap``, the building) is ``claims_harness._strategy_base``.

A Hypothesis strategy may stand wherever a description does (Hypothesis' own ``text()``, say, which
this vocabulary does not have): the property then runs under Hypothesis' engine as a whole, slower
and as correct. Hypothesis itself is imported only then, or to shrink: a passing property never loads it.
"""

from __future__ import annotations

import functools
import math
import operator
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

from claims_harness._strategy_base import (
    Call,
    SearchStrategy,
    as_hypothesis,
    hypothesis_strategies,
    is_hypothesis_strategy,
    rejecting,
)

__all__ = [
    "DrawFn",
    "SearchStrategy",
    "arrays",
    "booleans",
    "builds",
    "composite",
    "floats",
    "fractions",
    "integers",
    "just",
    "lists",
    "none",
    "one_of",
    "permutations",
    "sampled_from",
    "tuples",
]

T = TypeVar("T")

# What a composite strategy's function receives: it draws one value of the strategy it is handed.
DrawFn = Callable[["SearchStrategy[T]"], T]

SMALLEST_SUBNORMAL = 5e-324
SMALLEST_NORMAL = 2.2250738585072014e-308
LARGEST = sys.float_info.max


def _strategy(value: Any, name: str) -> Any:
    if isinstance(value, SearchStrategy) or is_hypothesis_strategy(value):
        return value
    raise TypeError(f"{name}={value!r} is not a strategy: build it with claims_harness.strategies (st.just(x) for a "
                    "fixed value)")


def _integer(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}={value!r} is not an integer") from None


# --------------------------------------------------------------------------- numbers


class Integers(SearchStrategy[int]):
    """``integers(min_value, max_value)``: either bound may be None (unbounded)."""

    __slots__ = ("min_value", "max_value")

    def _call(self) -> Call:
        return "integers", (), {"min_value": self.min_value, "max_value": self.max_value}


def integers(min_value: int | None = None, max_value: int | None = None) -> SearchStrategy[int]:
    """Integers from ``min_value`` to ``max_value``, both included (Hypothesis' ``integers``)."""
    low, high = _integer(min_value, "min_value"), _integer(max_value, "max_value")
    if low is not None and high is not None and low > high:
        raise ValueError(f"integers: min_value={low} is greater than max_value={high}")
    return Integers(low, high)


class Floats(SearchStrategy[float]):
    """``floats(...)``: ``min_value`` and ``max_value`` are the finite or infinite bounds every value lies in
    (exclusions applied), ``allow_nan`` whether NaN is a value, and ``smallest_nonzero_magnitude`` the least
    magnitude of a nonzero value (the smallest normal float when subnormals are excluded), as Hypothesis
    resolves its arguments; ``arguments`` are the arguments as given."""

    __slots__ = ("min_value", "max_value", "allow_nan", "smallest_nonzero_magnitude", "arguments")

    def _call(self) -> Call:
        return "floats", (), self.arguments


def _next_up(value: float, allow_subnormal: bool) -> float:
    value = 0.0 if value == 0 and math.copysign(1.0, value) < 0 else math.nextafter(value, math.inf)
    if not allow_subnormal and 0 < abs(value) < SMALLEST_NORMAL:
        return 0.0 if value < 0 else SMALLEST_NORMAL
    return value


def _next_down(value: float, allow_subnormal: bool) -> float:
    return -_next_up(-value, allow_subnormal)


def floats(min_value: float | None = None, max_value: float | None = None, *, allow_nan: bool | None = None,
           allow_infinity: bool | None = None, allow_subnormal: bool | None = None, exclude_min: bool = False,
           exclude_max: bool = False) -> SearchStrategy[float]:
    """64-bit floats, as Hypothesis' ``floats``: its arguments and defaults (NaN and the infinities only where a
    bound is missing; subnormals wherever the bounds admit them)."""
    arguments = {key: value for key, value in (
        ("min_value", min_value), ("max_value", max_value), ("allow_nan", allow_nan),
        ("allow_infinity", allow_infinity), ("allow_subnormal", allow_subnormal),
        ("exclude_min", bool(exclude_min) or None), ("exclude_max", bool(exclude_max) or None)) if value is not None}
    if allow_nan is None:
        allow_nan = min_value is None and max_value is None
    elif allow_nan and (min_value is not None or max_value is not None):
        raise ValueError(f"floats: cannot have allow_nan=True with a bound ({arguments})")
    for name, bound in (("min_value", min_value), ("max_value", max_value)):
        if bound is not None and (float(bound) != bound or math.isnan(float(bound))):
            raise ValueError(f"floats: {name}={bound!r} is not exactly a 64-bit float")
    low = -math.inf if min_value is None else float(min_value)
    high = math.inf if max_value is None else float(max_value)
    if (exclude_min and (min_value is None or low == math.inf)
            or exclude_max and (max_value is None or high == -math.inf)):
        raise ValueError(f"floats: cannot exclude a missing or infinite bound ({arguments})")
    subnormal = allow_subnormal is None or allow_subnormal
    if exclude_min:
        low = _next_up(low, subnormal)
    if exclude_max:
        high = _next_down(high, subnormal)
    if low > high or low == high == 0 and math.copysign(1, high) < 0 < math.copysign(1, low):
        raise ValueError(f"floats: there are no floats between the bounds ({arguments})")
    bounded = -math.inf < low and high < math.inf
    if allow_infinity is None:
        allow_infinity = not bounded
    elif allow_infinity and bounded:
        raise ValueError(f"floats: cannot have allow_infinity=True with both bounds ({arguments})")
    if allow_subnormal is None:
        allow_subnormal = low < SMALLEST_NORMAL and high > -SMALLEST_NORMAL
    elif allow_subnormal and (low >= SMALLEST_NORMAL or high <= -SMALLEST_NORMAL):
        raise ValueError(f"floats: allow_subnormal=True, but the bounds exclude every subnormal ({arguments})")
    if not allow_infinity:
        low, high = max(low, -LARGEST), min(high, LARGEST)
    return Floats(low, high, bool(allow_nan), SMALLEST_SUBNORMAL if allow_subnormal else SMALLEST_NORMAL, arguments)


class Fractions(SearchStrategy[Fraction]):
    """``fractions(min_value, max_value, max_denominator)``: bounds as Fractions or None, the denominator's bound or
    None."""

    __slots__ = ("min_value", "max_value", "max_denominator")

    def _call(self) -> Call:
        return "fractions", (), {"min_value": self.min_value, "max_value": self.max_value,
                                 "max_denominator": self.max_denominator}


def fractions(min_value: Any = None, max_value: Any = None, *, max_denominator: int | None = None
              ) -> SearchStrategy[Fraction]:
    """Fractions from ``min_value`` to ``max_value`` (anything ``Fraction()`` takes), denominators at most
    ``max_denominator`` (Hypothesis' ``fractions``)."""
    low = None if min_value is None else Fraction(min_value)
    high = None if max_value is None else Fraction(max_value)
    if low is not None and high is not None and low > high:
        raise ValueError(f"fractions: min_value={low} is greater than max_value={high}")
    denominator = _integer(max_denominator, "max_denominator")
    if denominator is not None:
        if denominator < 1:
            raise ValueError(f"fractions: max_denominator={denominator} must be at least 1")
        for name, bound in (("min_value", low), ("max_value", high)):
            if bound is not None and bound.denominator > denominator:
                raise ValueError(f"fractions: {name}={bound} has a denominator greater than {max_denominator=}")
    return Fractions(low, high, denominator)


class Booleans(SearchStrategy[bool]):
    """``booleans()``."""

    __slots__ = ()

    def _call(self) -> Call:
        return "booleans", (), {}


def booleans() -> SearchStrategy[bool]:
    """True or False."""
    return Booleans()


# --------------------------------------------------------------------------- fixed values and choices


class Just(SearchStrategy[T]):
    """``just(value)``: always ``value``."""

    __slots__ = ("value",)

    def _call(self) -> Call:
        return "just", (self.value,), {}

    def _build(self) -> Any:
        return hypothesis_strategies().just(self.value)  # as it is, even a description: a strategy of strategies


def just(value: T) -> SearchStrategy[T]:
    """Always ``value``."""
    return Just(value)


def none() -> SearchStrategy[None]:
    """Always None."""
    return Just(None)


class SampledFrom(SearchStrategy[T]):
    """``sampled_from(elements)``: one of ``elements`` (a tuple)."""

    __slots__ = ("elements",)

    def _call(self) -> Call:
        return "sampled_from", (list(self.elements),), {}


def sampled_from(elements: Iterable[T]) -> SearchStrategy[T]:
    """One of ``elements``, each as likely."""
    return SampledFrom(tuple(elements))


class Permutations(SearchStrategy[list[T]]):
    """``permutations(values)``: ``values`` (a tuple) in any order, as a list."""

    __slots__ = ("values",)

    def _call(self) -> Call:
        return "permutations", (list(self.values),), {}


def permutations(values: Sequence[T]) -> SearchStrategy[list[T]]:
    """The values of ``values`` in any order."""
    return Permutations(tuple(values))


class OneOf(SearchStrategy[Any]):
    """``one_of(*options)``: a value of one of ``options`` (a tuple of strategies), each as likely."""

    __slots__ = ("options",)

    def _call(self) -> Call:
        return "one_of", self.options, {}


def one_of(*options: Any) -> SearchStrategy[Any]:
    """A value of one of ``options`` (strategies, or one iterable of them)."""
    if len(options) == 1 and not isinstance(options[0], SearchStrategy) and not is_hypothesis_strategy(options[0]):
        options = tuple(options[0])
    return OneOf(tuple(_strategy(option, "one_of") for option in options))


# --------------------------------------------------------------------------- collections


class Tuples(SearchStrategy[tuple[Any, ...]]):
    """``tuples(*parts)``: one value of each of ``parts``."""

    __slots__ = ("parts",)

    def _call(self) -> Call:
        return "tuples", self.parts, {}


def tuples(*parts: Any) -> SearchStrategy[tuple[Any, ...]]:
    """A tuple of one value of each of ``parts``."""
    return Tuples(tuple(_strategy(part, "tuples") for part in parts))


def _identity(value: T) -> T:
    return value


class Lists(SearchStrategy[list[Any]]):
    """``lists(elements, ...)``: ``min_size`` to ``max_size`` (``math.inf`` when unbounded) values of ``elements``;
    ``keys`` None, or the functions whose values must differ between any two elements (``unique``, ``unique_by``);
    ``arguments`` as given; ``average_size`` the size an unbounded list is drawn around (Hypothesis')."""

    __slots__ = ("elements", "min_size", "max_size", "keys", "arguments", "average_size")

    def _call(self) -> Call:
        return "lists", (), {"elements": self.elements, **self.arguments}


def lists(elements: Any, *, min_size: int = 0, max_size: int | None = None,
          unique_by: Callable[[Any], Hashable] | tuple[Callable[[Any], Hashable], ...] | None = None,
          unique: bool = False) -> SearchStrategy[list[Any]]:
    """Lists of ``min_size`` to ``max_size`` values of ``elements``, all different when ``unique`` (or different in
    each of the ``unique_by`` keys), as Hypothesis' ``lists``."""
    elements = _strategy(elements, "elements")
    low, high = _integer(min_size, "min_size"), _integer(max_size, "max_size")
    if low < 0 or high is not None and high < low:
        raise ValueError(f"lists: sizes from {min_size} to {max_size}")
    arguments: dict[str, Any] = {key: value for key, value in (
        ("min_size", low or None), ("max_size", high), ("unique_by", unique_by)) if value is not None}
    if unique:
        arguments["unique"] = True
    if unique and unique_by is not None:
        raise ValueError("lists: pass unique=True or unique_by, not both")
    keys = (_identity,) if unique else (unique_by,) if callable(unique_by) else unique_by
    if keys is not None and (not keys or not all(map(callable, keys))):
        raise TypeError(f"lists: unique_by={unique_by!r} is not a function or a tuple of functions")
    if keys is not None and isinstance(elements, SampledFrom):
        if low > len(elements.elements):
            raise ValueError(f"lists: {low} distinct values of {len(elements.elements)} elements")
        high = len(elements.elements) if high is None else min(high, len(elements.elements))
    high = math.inf if high is None else high
    return Lists(elements, low, high, keys, arguments, min(max(low * 2, low + 5), 0.5 * (low + high)))


class Arrays(SearchStrategy[np.ndarray]):
    """``arrays(dtype, shape, elements=..., fill=..., unique=...)``: an array of ``dtype`` (a NumPy dtype) and
    ``shape`` (a tuple of ints) whose entries are values of ``elements``; ``fill`` None or the strategy of a value
    an array may be filled with; ``size`` the number of entries."""

    __slots__ = ("dtype", "shape", "elements", "fill", "unique", "size")

    def _call(self) -> Call:
        return "arrays", (), {"dtype": self.dtype, "shape": self.shape, "elements": self.elements, "fill": self.fill,
                              "unique": self.unique}

    def _build(self) -> Any:
        from hypothesis.extra.numpy import arrays as hypothesis_arrays  # not in hypothesis.strategies

        return hypothesis_arrays(self.dtype, self.shape, elements=as_hypothesis(self.elements),
                                 fill=as_hypothesis(self.fill), unique=self.unique)


def arrays(dtype: Any, shape: int | tuple[int, ...] | SearchStrategy[Any], *, elements: Any = None, fill: Any = None,
           unique: bool = False) -> SearchStrategy[np.ndarray]:
    """NumPy arrays of ``dtype`` and ``shape`` (an int, a tuple, or a strategy of either) with entries drawn from
    ``elements``, as ``hypothesis.extra.numpy.arrays``. Without ``elements`` (or with a mapping of ``from_dtype``'s
    arguments) the entries are Hypothesis' ``from_dtype(dtype)``, and the property runs under Hypothesis."""
    if isinstance(dtype, SearchStrategy) or is_hypothesis_strategy(dtype):
        return _flatmap_of(dtype, lambda d: arrays(d, shape, elements=elements, fill=fill, unique=unique))
    if isinstance(shape, SearchStrategy) or is_hypothesis_strategy(shape):
        return _flatmap_of(shape, lambda s: arrays(dtype, s, elements=elements, fill=fill, unique=unique))
    dtype = np.dtype(dtype)
    if elements is None or isinstance(elements, Mapping):
        from hypothesis.extra.numpy import from_dtype

        elements = from_dtype(dtype, **(elements or {}))
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if not all(isinstance(length, int) and length >= 0 for length in shape):
        raise TypeError(f"arrays: shape={shape!r} is not a tuple of sizes")
    return Arrays(dtype, shape, _strategy(elements, "elements"), None if fill is None else _strategy(fill, "fill"),
                  bool(unique), math.prod(shape))


def _flatmap_of(base: Any, expand: Callable[[Any], Any]) -> Any:
    if isinstance(base, SearchStrategy):
        return base.flatmap(expand)
    return base.flatmap(lambda value: as_hypothesis(expand(value)))  # a Hypothesis strategy of dtypes or shapes


# --------------------------------------------------------------------------- built values


class Builds(SearchStrategy[Any]):
    """``builds(target, *args, **kwargs)``: ``target`` called with one value of each strategy of ``args`` (a tuple)
    and ``kwargs`` (a dict)."""

    __slots__ = ("target", "args", "kwargs")

    def _call(self) -> Call:
        return "builds", (self.target, *self.args), self.kwargs

    def __repr__(self) -> str:
        parts = [getattr(self.target, "__qualname__", repr(self.target)), *map(repr, self.args),
                 *(f"{name}={value!r}" for name, value in self.kwargs.items())]
        return f"builds({', '.join(parts)})"


def builds(target: Callable[..., T], *args: Any, **kwargs: Any) -> SearchStrategy[T]:
    """``target(*args, **kwargs)`` with a value of each strategy passed in its place (every argument a strategy)."""
    if not callable(target):
        raise TypeError(f"builds: target={target!r} is not callable")
    return Builds(target, tuple(_strategy(arg, "builds") for arg in args),
                  {name: _strategy(value, name) for name, value in kwargs.items()})


class Composite(SearchStrategy[Any]):
    """A strategy made by ``@composite``: ``definition(draw, *args, **kwargs)``."""

    __slots__ = ("definition", "args", "kwargs")

    def _call(self) -> Call:
        return self.definition.__qualname__, self.args, self.kwargs

    def _build(self) -> Any:
        definition, args, kwargs = rejecting(self.definition), self.args, self.kwargs

        @hypothesis_strategies().composite
        def composite(draw: Callable[[Any], Any]) -> Any:
            return definition(lambda inner: draw(as_hypothesis(inner)), *args, **kwargs)

        return composite()


def composite(definition: Callable[..., T]) -> Callable[..., SearchStrategy[T]]:
    """Decorates ``definition(draw, *args, **kwargs)``, a function that draws values of other strategies with
    ``draw`` and returns one example: the decorated function takes ``*args, **kwargs`` and returns its strategy."""

    @functools.wraps(definition)
    def strategy(*args: Any, **kwargs: Any) -> SearchStrategy[T]:
        return Composite(definition, args, kwargs)

    return strategy


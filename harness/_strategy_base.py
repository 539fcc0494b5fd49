"""What every strategy of :mod:`claims_harness.strategies` is: a description (:class:`SearchStrategy`), transformed
with ``.map``, ``.filter`` and ``.flatmap``, and built as the same Hypothesis strategy through Hypothesis' public API.

``claims_harness._running.draws`` reads the descriptions' attributes to draw examples; the Hypothesis strategy
(:meth:`SearchStrategy.as_hypothesis`) only shrinks a failure, so Hypothesis is imported only then (or for a property
that runs under it): a passing property never loads it. Like ``strategies``, this module imports nothing of the harness.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

__all__ = [
    "Call",
    "Filtered",
    "FlatMapped",
    "Mapped",
    "Rejected",
    "SearchStrategy",
    "as_hypothesis",
    "hypothesis_strategies",
    "is_hypothesis_strategy",
    "rejecting",
]

T = TypeVar("T")
U = TypeVar("U")

# A call of a function: its name, its positional and its keyword arguments.
Call = tuple[str, Sequence[Any], Mapping[str, Any]]


class SearchStrategy(Generic[T]):
    """A description of the values a property draws; build one with the functions of ``claims_harness.strategies``.

    Each subclass holds what ``claims_harness._running.draws`` reads: the attributes its docstring documents, its
    ``__slots__``, which its constructor takes in that order. Most stand for a call of Hypothesis' function of the same
    name (:meth:`_call`), which is their repr and builds their Hypothesis strategy (:meth:`as_hypothesis`).
    """

    __slots__ = ("_hypothesis",)

    def __init__(self, *attributes: Any) -> None:
        for name, value in zip(self.__slots__, attributes, strict=True):
            setattr(self, name, value)

    def map(self, pack: Callable[[T], U]) -> SearchStrategy[U]:
        """The values of this strategy passed through ``pack``."""
        return Mapped(self, pack)

    def filter(self, condition: Callable[[T], Any]) -> SearchStrategy[T]:
        """The values of this strategy for which ``condition`` holds."""
        return Filtered(self, (condition,))

    def flatmap(self, expand: Callable[[T], SearchStrategy[U]]) -> SearchStrategy[U]:
        """A value of the strategy ``expand`` returns for a value of this one."""
        return FlatMapped(self, expand)

    def as_hypothesis(self) -> Any:
        """The same strategy as Hypothesis' (a ``hypothesis.strategies.SearchStrategy``), built once."""
        try:
            return self._hypothesis
        except AttributeError:
            self._hypothesis = self._build()
            return self._hypothesis

    def _call(self) -> Call:
        """The call this description stands for, with the descriptions among its arguments as they are: a function
        of ``hypothesis.strategies``, which builds the Hypothesis strategy unless the subclass builds it otherwise."""
        raise NotImplementedError

    def _build(self) -> Any:
        name, args, kwargs = self._call()
        return getattr(hypothesis_strategies(), name)(*map(as_hypothesis, args),
                                                      **{key: as_hypothesis(value) for key, value in kwargs.items()})

    def __repr__(self) -> str:
        name, args, kwargs = self._call()
        return f"{name}({', '.join([*map(repr, args), *(f'{key}={value!r}' for key, value in kwargs.items())])})"


def is_hypothesis_strategy(value: object) -> bool:
    """Whether ``value`` is a Hypothesis strategy (never true while Hypothesis is not imported: nothing made one)."""
    module = sys.modules.get("hypothesis.strategies")
    return module is not None and isinstance(value, module.SearchStrategy)


def as_hypothesis(strategy: Any) -> Any:
    """``strategy`` as Hypothesis' own: a description built through Hypothesis' public API, Hypothesis' own as it is."""
    return strategy.as_hypothesis() if isinstance(strategy, SearchStrategy) else strategy


class Rejected(Exception):
    """The example was rejected (a filter that never held, ``assume(False)``): draw another one."""


def hypothesis_strategies() -> Any:
    """The module ``hypothesis.strategies``."""
    import hypothesis.strategies  # here: only shrinking, or a property that runs under Hypothesis, needs it

    return hypothesis.strategies


def rejecting(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, with the harness's rejection (``claims_harness.assume`` inside it) turned into Hypothesis'."""
    from hypothesis import reject

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Rejected:
            reject()

    return wrapped


class Mapped(SearchStrategy[Any]):
    """``base.map(pack)``."""

    __slots__ = ("base", "pack")

    def _build(self) -> Any:
        return self.base.as_hypothesis().map(rejecting(self.pack))

    def __repr__(self) -> str:
        return f"{self.base!r}.map({getattr(self.pack, '__qualname__', self.pack)})"


class Filtered(SearchStrategy[Any]):
    """``base.filter(condition)...``: the values of ``base`` for which every one of ``conditions`` holds."""

    __slots__ = ("base", "conditions")

    def filter(self, condition: Callable[[Any], Any]) -> SearchStrategy[Any]:
        return Filtered(self.base, (*self.conditions, condition))

    def _build(self) -> Any:
        strategy = self.base.as_hypothesis()
        for condition in self.conditions:
            strategy = strategy.filter(condition)
        return strategy

    def __repr__(self) -> str:
        return repr(self.base) + "".join(f".filter({getattr(c, '__qualname__', c)})" for c in self.conditions)


class FlatMapped(SearchStrategy[Any]):
    """``base.flatmap(expand)``."""

    __slots__ = ("base", "expand")

    def _build(self) -> Any:
        expand = rejecting(self.expand)
        return self.base.as_hypothesis().flatmap(lambda value: as_hypothesis(expand(value)))

    def __repr__(self) -> str:
        return f"{self.base!r}.flatmap({getattr(self.expand, '__qualname__', self.expand)})"

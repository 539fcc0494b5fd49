"""What a running check's witnesses and drawn examples reached along the course's scope dimensions.

A verifier calls :func:`reach` with the values it actually used, once per witness or drawn example
(``reach(discount=gamma, states=P.shape[0])``); the runner records them while the verifier runs and
puts the counts beside its observations (``REACHED_KEY``), so they are cached, compared and
reported with them. Classification into the course's declared values happens here, in the worker,
from the values themselves: a sympy symbol counts for every value its assumptions allow.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from claims_harness._claims.scope import Dimension
from claims_harness.errors import ClaimsError, VerifierError, did_you_mean

# The observation under which a check's reached values travel (a verifier may not report it itself).
REACHED_KEY = "scope_reached"


class ScopeRecord:
    """The values of each dimension the examples of one check reached, with how many examples reached each."""

    def __init__(self, dimensions: Sequence[Dimension]):
        self._dimensions = {dimension.name: dimension for dimension in dimensions}
        self._counts: dict[str, dict[str, int]] = {}

    def add(self, used: dict[str, Any]) -> None:
        for name, value in used.items():
            dimension = self._dimensions.get(name)
            if dimension is None:
                raise VerifierError(f"reach({name}=...): '{name}' is not a scope dimension of the course"
                                    f"{did_you_mean(name, self._dimensions)}; its dimensions are "
                                    f"{', '.join(self._dimensions)} ([tool.claims.scope] in pyproject.toml)")
            try:
                names = dimension.classify(value)
            except ClaimsError as error:
                raise VerifierError(f"reach({name}=...): {error}") from None
            counts = self._counts.setdefault(name, {})
            for value_name in names:
                counts[value_name] = counts.get(value_name, 0) + 1

    def as_data(self) -> dict[str, dict[str, int]]:
        return {name: dict(counts) for name, counts in self._counts.items()}

    def restore(self, data: dict[str, dict[str, int]]) -> None:
        self._counts = {name: dict(counts) for name, counts in data.items()}


_ACTIVE: list[ScopeRecord] = []


@contextlib.contextmanager
def recording(dimensions: Sequence[Dimension]) -> Iterator[ScopeRecord]:
    """Record every :func:`reach` made inside the block; with no dimensions declared, :func:`reach` records nothing."""
    record = ScopeRecord(dimensions)
    if dimensions:
        _ACTIVE.append(record)
    try:
        yield record
    finally:
        if dimensions:
            _ACTIVE.remove(record)


def reach(**used: Any) -> None:
    """Record that the current witness or drawn example of the running check used these values.

    Call it with the very values the check computes with, once per witness or example (a property's
    example, a table's row, a counterexample's MDP): ``reach(discount=gamma, actions=n_actions,
    states=n_states)``. A value is a number, a sympy expression (its assumptions say which values it
    stands for: ``Symbol('gamma', positive=True)`` is every γ > 0), the name of a declared value
    (``transitions="stochastic"``), or a list or array of these. The report compares what the checks of
    a statement reached with the scope the statement claims. Outside a running check (a helper
    called from a test) it does nothing.

    Raises:
      VerifierError: for a dimension the course does not declare, or a value that is not one of its values.
    """
    if _ACTIVE:
        _ACTIVE[-1].add(used)


def mark() -> dict[str, dict[str, int]] | None:
    """What the running check has reached so far: :func:`rewind` to it when the example that follows is discarded."""
    return _ACTIVE[-1].as_data() if _ACTIVE else None


def rewind(marked: dict[str, dict[str, int]] | None) -> None:
    """Forget what was reached since :func:`mark`: a property's example discarded by ``assume()`` reached nothing."""
    if _ACTIVE and marked is not None:
        _ACTIVE[-1].restore(marked)

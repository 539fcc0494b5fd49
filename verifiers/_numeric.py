"""Shared numeric helpers for verifiers that compare floating-point results: the one comparison
(:func:`assert_close`) and the rounding bound it is given (:func:`rounding_bound`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

import numpy as np

EPS = float(np.finfo(np.float64).eps)


def as_written(value: float) -> Fraction:
    """The exact rational a claim file's number stands for: ``0.35`` is 7/20, not the nearest double.

    ``repr`` gives the shortest decimal that round-trips, i.e. the number as the claim wrote it.
    """
    return Fraction(repr(value))


def largest(values: Iterable[Any], default: Any = None) -> Any:
    """The largest of ``values``, or NaN when any is NaN: Python's ``max`` keeps NaN only when it comes first.

    Works on floats, NumPy scalars and Fractions alike (an exact value stays exact); ``default`` for
    none (else ``ValueError``, as ``max``).
    """
    return _extreme(values, default, max)


def smallest(values: Iterable[Any], default: Any = None) -> Any:
    """The smallest of ``values``, or NaN when any is NaN (:func:`largest`)."""
    return _extreme(values, default, min)


def largest_magnitude(values: Iterable[Any], default: Any = None) -> Any:
    """max |v| over ``values`` (any array's entries, flattened), NaN when any is NaN (:func:`largest`)."""
    if isinstance(values, np.ndarray):
        values = values.flat
    return largest((abs(value) for value in values), default)


def _extreme(values: Iterable[Any], default: Any, pick: Callable[..., Any]) -> Any:
    items = list(values.flat if isinstance(values, np.ndarray) else values)
    if any(item != item for item in items):  # NaN is the one value unequal to itself
        return float("nan")
    if not items and default is not None:
        return default
    return pick(items)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, shifted by the largest logit: the verifiers' own, not the implementation's."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(logits: np.ndarray) -> np.ndarray:
    """softmax along the last axis, shifted by the largest logit so that no exponential overflows."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    """The cosine of the angle between two arrays taken as flat vectors."""
    u, v = np.ravel(u), np.ravel(v)
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def rounding_bound(operations: int, magnitude: float) -> float:
    """A bound on float64 rounding error after ``operations`` steps on numbers of ``magnitude``.

    Each addition or multiplication rounds with relative error at most eps/2 (IEEE 754), so a
    chain of k of them on terms bounded by M is off by at most about k * eps * M; doubling it
    leaves room for the reference computation's own rounding.
    """
    return 2.0 * max(operations, 1) * EPS * max(magnitude, 1.0)


def assert_close(actual: Any, expected: Any, bound: Any, what: str) -> None:
    """Fail unless every entry of ``actual`` is within ``bound`` of ``expected``: the verifiers' one comparison.

    ``expected`` and ``bound`` broadcast to the shape of ``actual``, never the other way: an implementation's
    result of the wrong shape fails here rather than being broadcast into agreement. NaN is never close. The
    ``AssertionError`` names ``what`` was compared, the worst entry, both values, the gap and the bound, so a
    failing check explains itself without pytest's assert rewriting (and, inside a property, fails its example).
    """
    actual = np.asarray(actual, dtype=float)
    try:
        expected, bound = (np.broadcast_to(np.asarray(value, dtype=float), actual.shape) for value in (expected, bound))
    except ValueError:
        raise AssertionError(f"{what}: the result has shape {actual.shape}, the reference "
                             f"{np.shape(expected)}") from None
    gap = np.abs(actual - expected)
    close = gap <= bound  # False where either side is NaN
    if close.all():
        return
    worst = np.unravel_index(int(np.argmax(np.where(np.isnan(gap), np.inf, gap - bound))), actual.shape)
    where = f" at {tuple(int(i) for i in worst)}" if actual.shape else ""
    raise AssertionError(f"{what}{where}: {float(actual[worst])!r} against {float(expected[worst])!r}, off by "
                         f"{gap[worst]:.3g}, more than the bound {bound[worst]:.3g} ({int((~close).sum())} of "
                         f"{close.size} entries off)")


def central_difference(function: Callable[[np.ndarray], Any], x: np.ndarray, step: float) -> np.ndarray:
    """(f(x + h e_i) - f(x - h e_i)) / 2h for every coordinate i of x: the reference for analytic gradients.

    A function with array values (one per draw, one per trajectory) gives one difference per value, indexed
    ``[..., *i]``: the values' axes first, then those of x.
    """
    differences = []
    for index in np.ndindex(x.shape):
        shift = np.zeros_like(x, dtype=float)
        shift[index] = step
        differences.append((function(x + shift) - function(x - shift)) / (2 * step))
    stacked = np.array(differences, dtype=float)
    return np.moveaxis(stacked, 0, -1).reshape(stacked.shape[1:] + x.shape)

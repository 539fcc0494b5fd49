"""Exact rational arrays that verifiers build, so that their identities are checked with ``==``.

A claim's numbers as exact rationals (:func:`as_fraction`, :func:`as_fractions`); drawn integers over a common
denominator (:func:`over`); probability rows from integer weights (:func:`probability_rows`); the softmax score e_a - π
(:func:`softmax_score`, :func:`softmax_scores`); and random exact distributions and MDPs, drawn from a generator
(:func:`exact_distribution`, :func:`random_exact_mdp`) or built from a strategy's integers (:func:`exact_mdp`); the
solution of a linear system over the rationals (:func:`exact_solve`). Every entry is a :class:`fractions.Fraction`,
in an object array (a list for :func:`exact_distribution`).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike
from sympy import QQ
from sympy.polys.matrices import DomainMatrix

from verifiers._numeric import as_written

_fraction = np.vectorize(Fraction, otypes=[object])


def as_fraction(value: float | str) -> Fraction:
    """A claim's number exactly: a decimal as written (0.35 is 7/20: :func:`as_written`), a string such as '1/3'
    as the fraction it spells."""
    return Fraction(value) if isinstance(value, str) else as_written(value)


def as_fractions(values: ArrayLike) -> np.ndarray:
    """A claim's numbers (of any shape) as exact rationals, each by :func:`as_fraction`."""
    return np.vectorize(as_fraction, otypes=[object])(np.array(values, dtype=object))


def over(numerators: ArrayLike, denominator: int) -> np.ndarray:
    """Every integer of ``numerators`` (of any shape) divided by ``denominator``: drawn eighths over 8."""
    return _fraction(np.array(numerators, dtype=int), denominator)


def probability_rows(weights: ArrayLike) -> np.ndarray:
    """Integer weights to exact probabilities along the last axis; an all-zero row puts its mass on index 0."""
    weights = np.array(weights, dtype=int)
    weights[..., 0] += weights.sum(axis=-1) == 0
    return _fraction(weights, weights.sum(axis=-1, keepdims=True))


def softmax_score(pi: Sequence[Fraction], action: int) -> np.ndarray:
    """∇_z log π(action) = e_action - π for a softmax with probabilities π (logits log π), exactly."""
    return np.array([Fraction(int(action == k)) - pi[k] for k in range(len(pi))], dtype=object)


def softmax_scores(pi: Sequence[Fraction]) -> np.ndarray:
    """Row a is the score e_a - π of action a (:func:`softmax_score`)."""
    return np.array([softmax_score(pi, a) for a in range(len(pi))], dtype=object)


def exact_distribution(rng: np.random.Generator, size: int, zeros: bool, top: int) -> list[Fraction]:
    """A random probability vector of ``size`` fractions: integer weights below ``top`` (zero allowed when
    ``zeros``), one of them set to 1 if all are zero, divided by their sum."""
    weights = rng.integers(0 if zeros else 1, top, size)
    if weights.sum() == 0:
        weights[rng.integers(size)] = 1
    return [Fraction(int(w), int(weights.sum())) for w in weights]


def random_exact_mdp(rng: np.random.Generator, n_states: int, n_actions: int, top: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """P, R, ρ and a policy table π drawn from ``rng``, in that order: transition rows and ρ of integer weights below
    ``top`` (zeros allowed), rewards in quarters of [-2, 2], and a positive π (:func:`exact_distribution`)."""
    P = np.array([[exact_distribution(rng, n_states, True, top) for _ in range(n_actions)] for _ in range(n_states)],
                 dtype=object)
    R = over(rng.integers(-8, 9, (n_states, n_actions)), 4)
    rho = np.array(exact_distribution(rng, n_states, True, top), dtype=object)
    pi = np.array([exact_distribution(rng, n_actions, False, top) for _ in range(n_states)], dtype=object)
    return P, R, rho, pi


def exact_mdp(n_states: int, n_actions: int, drawn: tuple) -> dict[str, object]:
    """A discounted MDP from drawn integers ``(moves, reward_eighths, policy, gamma_sixteenths)``.

    P[s, a, :] are the weights ``moves`` normalised, R the rewards in eighths, π the weights ``policy``
    normalised, γ in sixteenths; ``moves``, ``reward_eighths`` and ``policy`` may be flat or nested lists,
    read in row-major order.
    """
    moves, reward_eighths, policy, gamma_sixteenths = drawn
    return {"P": probability_rows(np.reshape(moves, (n_states, n_actions, n_states))),
            "R": over(reward_eighths, 8).reshape(n_states, n_actions),
            "pi": probability_rows(np.reshape(policy, (n_states, n_actions))),
            "gamma": Fraction(gamma_sixteenths, 16)}


def exact_solve(matrix: ArrayLike, rhs: Sequence[Fraction | int]) -> np.ndarray:
    """x with ``matrix @ x = rhs`` over the rationals, independently of impl: sympy's ``DomainMatrix`` over QQ, about
    eight times faster than ``sympy.Matrix``, whose entries are symbolic expressions (properties solve one a draw)."""
    size = len(rhs)

    def rational(x: Fraction | int) -> object:
        x = Fraction(x)
        return QQ(x.numerator, x.denominator)

    system = DomainMatrix([[rational(x) for x in row] for row in matrix], (size, size), QQ)
    solution = system.lu_solve(DomainMatrix([[rational(x)] for x in rhs], (size, 1), QQ))
    return np.array([Fraction(int(x.numerator), int(x.denominator)) for x in solution.to_list_flat()], dtype=object)

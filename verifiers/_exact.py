"""Exact rational arrays that verifiers build, so that their identities are checked with ``==``.

A claim's numbers as exact rationals (:func:`as_fraction`, :func:`as_fractions`); drawn integers over a common
denominator (:func:`over`); probabilities from integer weights (:func:`probability_rows` along the last axis,
:func:`distribution_from_weights` for one list); the softmax score e_a - π (:func:`softmax_score`,
:func:`softmax_scores`); random exact distributions and MDPs, drawn from a generator (:func:`exact_distribution`,
:func:`random_exact_mdp`), built from a strategy's integers (:func:`exact_mdp`) or drawn as a strategy with a policy
and a horizon (:func:`exact_mdps`, tables as :class:`MDPTables`); the solution of a linear system over the
rationals (:func:`exact_solve`); and a policy's exact evaluation, the one every verifier uses: V^π
(:func:`exact_policy_values`, terminal states worth 0), Q from a V (:func:`exact_action_values`) and the discounted
visitation (:func:`exact_discounted_visitation`). Every entry is a :class:`fractions.Fraction`, in an object array
(a list for :func:`exact_distribution` and :func:`distribution_from_weights`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from sympy import QQ
from sympy.polys.matrices import DomainMatrix

from claims_harness import strategies as st
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


def distribution_from_weights(weights: Sequence[int]) -> list[Fraction]:
    """Integer weights to exact probabilities; all-zero weights give the uniform distribution."""
    total = sum(weights)
    return [Fraction(w, total) for w in weights] if total else [Fraction(1, len(weights))] * len(weights)


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


@functools.cache
def discounted_exact_mdps(n_states: int, n_actions: int) -> st.SearchStrategy[dict[str, object]]:
    """A strategy of :func:`exact_mdp`'s MDPs of one size: transition rows of integer weights 0-3 (a row of zeros
    moves to state 0), rewards in eighths of [-5, 5], policy rows of weights 0-3 and γ in sixteenths up to 15/16."""
    pairs = n_states * n_actions
    weights = st.lists(st.integers(0, 3), min_size=pairs * n_states, max_size=pairs * n_states)
    eighths = st.lists(st.integers(-40, 40), min_size=pairs, max_size=pairs)
    policy = st.lists(st.integers(0, 3), min_size=pairs, max_size=pairs)
    gamma_sixteenths = st.integers(0, 15)
    return st.tuples(weights, eighths, policy, gamma_sixteenths).map(functools.partial(exact_mdp, n_states, n_actions))


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


class MDPTables(NamedTuple):
    """The four arrays ``impl.TabularMDP`` documents (floats or exact fractions); the implementation reads only
    these attributes. ``P_alt`` is the dynamics a policy-dependent environment mixes in, or None."""

    P: np.ndarray
    R: np.ndarray
    rho: np.ndarray
    P_alt: np.ndarray | None = None


@st.composite
def exact_mdps(draw: st.DrawFn, most_trajectories: int | None = None) -> tuple[MDPTables, np.ndarray, int]:
    """An MDP of up to 3 states and 3 actions with exact transition rows and ρ (zeros allowed), rewards in
    quarters of [-2, 2], a positive exact policy table and a horizon of 1 to 3 (at most 2,187 trajectories);
    with ``most_trajectories``, the horizon is at most the longest (and at least 1) whose S^(T+1) A^T
    trajectories stay within it."""
    n_states, n_actions = draw(st.sampled_from([(1, 2), (2, 2), (2, 3), (3, 2), (3, 3)]))
    if most_trajectories is None:
        longest = 3 if n_states * n_actions <= 6 else 2
    else:
        longest = max([1] + [h for h in (2, 3) if n_states ** (h + 1) * n_actions**h <= most_trajectories])
    horizon = draw(st.integers(1, longest))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    P, R, rho, pi = random_exact_mdp(rng, n_states, n_actions, 6)
    return MDPTables(P, R, rho), pi, horizon


def terminal_states(P: np.ndarray, R: np.ndarray) -> list[int]:
    """The states every action keeps in place with reward 0: an episode's end, whose value is 0 for every γ."""
    return [s for s in range(len(R)) if all(P[s, a, s] == 1 and R[s, a] == 0 for a in range(R.shape[1]))]


def exact_policy_values(P: np.ndarray, R: np.ndarray, pi: np.ndarray, gamma: Fraction) -> np.ndarray:
    """V^π from (I - γ P_π) V = R_π over the rationals, independently of impl.

    The rows of ``P[s, a, s2]`` may sum to less than 1 (the rest ends the episode), and a last column past the
    S states (an episode's end) is ignored. A terminal state (:func:`terminal_states`) is worth 0 and the system is
    solved on the others, so that an episodic MDP has its values at γ = 1 too, where I - P_π is singular on the
    terminal; for γ < 1 that is the same solution, exactly.
    """
    P = P[:, :, :len(R)]
    ends = terminal_states(P, R)
    live = [s for s in range(len(R)) if s not in ends]
    values = np.array([Fraction(0)] * len(R), dtype=object)
    if live:
        transition = (pi[:, :, None] * P).sum(axis=1)[np.ix_(live, live)]
        reward = (pi * R).sum(axis=1)[live]
        values[live] = exact_solve(np.eye(len(live), dtype=int).astype(object) - gamma * transition, reward)
    return values


def exact_action_values(P: np.ndarray, R: np.ndarray, values: np.ndarray, gamma: Fraction) -> np.ndarray:
    """Q_V(s, a) = R(s, a) + γ Σ_{s2} P(s2|s, a) V(s2) in exact arithmetic (a column past the S states: no value)."""
    return R + gamma * (P[:, :, :len(values)] * values).sum(axis=-1)


def exact_discounted_visitation(P: np.ndarray, pi: np.ndarray, rho: np.ndarray, gamma: Fraction) -> np.ndarray:
    """d(s) = Σ_t γ^t Pr(s_t = s) from s_0 ~ ρ: the solution of (I - γ P_π)^T d = ρ over the rationals."""
    n_states = len(rho)
    transition = (pi[:, :, None] * P[:, :, :n_states]).sum(axis=1)
    return exact_solve((np.eye(n_states, dtype=int).astype(object) - gamma * transition).T, rho)

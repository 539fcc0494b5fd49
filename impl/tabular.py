"""Tabular values, the Bellman operators and value iteration (week-16 syllabus, step 1; lesson 4.3).

Arrays follow the syllabus's convention: ``P[s, a, s2]`` is the probability of moving from s to
s2 under action a, ``R[s, a]`` the expected reward of taking a in s, ``gamma`` the discount,
``pi[s, a]`` a stochastic policy and ``v[s]`` a value function. A true terminal state is an
absorbing state with zero reward, so its value is 0 under every policy.

Object arrays of ``fractions.Fraction`` stay exact everywhere: the linear solve eliminates in
exact arithmetic for them, and the other functions use only +, *, max and comparisons.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def action_values(P: ArrayLike, R: ArrayLike, v: ArrayLike, gamma: float) -> np.ndarray:
    """Q_v(s, a) = R(s, a) + γ Σ_{s2} P(s2 | s, a) v(s2), the one-step lookahead on v.

    Args:
      P: transition probabilities, shape [S, A, S].
      R: expected rewards, shape [S, A].
      v: a value function, shape [S].
      gamma: the discount γ.

    Returns:
      action values, shape [S, A].
    """
    P, R, v = map(np.asarray, (P, R, v))
    return R + gamma * (P * v).sum(axis=-1)


def bellman_optimality_operator(P: ArrayLike, R: ArrayLike, v: ArrayLike, gamma: float) -> np.ndarray:
    """(T v)(s) = max_a [R(s, a) + γ Σ_{s2} P(s2 | s, a) v(s2)].

    A γ-contraction in the max norm (Bellman 1957; Puterman 1994, thm. 6.2.3), so for γ < 1
    repeated application converges to the optimal value V* from any start.

    Returns:
      the backed-up values, shape [S].
    """
    return action_values(P, R, v, gamma).max(axis=-1)


def bellman_expectation_operator(P: ArrayLike, R: ArrayLike, pi: ArrayLike, v: ArrayLike, gamma: float
                                 ) -> np.ndarray:
    """(T^π v)(s) = Σ_a π(a | s) [R(s, a) + γ Σ_{s2} P(s2 | s, a) v(s2)]; its fixed point is V^π.

    Args:
      pi: the policy, shape [S, A], rows summing to one.
    """
    return (np.asarray(pi) * action_values(P, R, v, gamma)).sum(axis=-1)


def greedy_policy(P: ArrayLike, R: ArrayLike, v: ArrayLike, gamma: float) -> np.ndarray:
    """π(s) = argmax_a Q_v(s, a), ties to the lowest action index.

    Returns:
      one action index per state, shape [S].
    """
    return np.argmax(action_values(P, R, v, gamma), axis=-1)


def value_iteration(P: ArrayLike, R: ArrayLike, gamma: float, n_iterations: int, v_0: ArrayLike | None = None
                    ) -> np.ndarray:
    """V_k = T V_{k-1}, k = 1..n_iterations, from V_0 (zeros by default); returns V_n.

    Each iteration substitutes the previous values into the right-hand side of the Bellman
    optimality equation (syllabus week 16, step 1). The error to V* shrinks at least by γ per
    iteration in the max norm.

    Args:
      P, R, gamma: the MDP, as in :func:`action_values`.
      n_iterations: how many backups to apply, >= 0.
      v_0: the starting values, shape [S]; zeros of R's dtype by default.
    """
    R = np.asarray(R)
    v = np.zeros(R.shape[0], dtype=R.dtype) if v_0 is None else np.asarray(v_0)
    for _ in range(n_iterations):
        v = bellman_optimality_operator(P, R, v, gamma)
    return v


def policy_state_values(P: ArrayLike, R: ArrayLike, pi: ArrayLike, gamma: float) -> np.ndarray:
    """V^π, the solution of (I - γ P_π) V = R_π with P_π(s, s2) = Σ_a π(a|s) P(s2|s, a).

    The Bellman expectation equation is linear in V, so one linear solve gives V^π exactly
    (Sutton & Barto 2018, eq. 4.4). Needs I - γ P_π invertible, which γ < 1 guarantees.

    Args:
      P, R: the MDP, as in :func:`action_values`.
      pi: the policy, shape [S, A].
      gamma: the discount γ.

    Returns:
      V^π, shape [S].
    """
    P, R, pi = map(np.asarray, (P, R, pi))
    transition_pi = (pi[:, :, None] * P).sum(axis=1)
    reward_pi = (pi * R).sum(axis=1)
    system = np.eye(len(reward_pi), dtype=int) - gamma * transition_pi
    return _solve(system, reward_pi)


def policy_action_values(P: ArrayLike, R: ArrayLike, pi: ArrayLike, gamma: float) -> np.ndarray:
    """Q^π(s, a) = R(s, a) + γ Σ_{s2} P(s2 | s, a) V^π(s2).

    Returns:
      Q^π, shape [S, A]; Σ_a π(a|s) Q^π(s, a) = V^π(s).
    """
    return action_values(P, R, policy_state_values(P, R, pi, gamma), gamma)


def _solve(system: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """x with system @ x = rhs: LAPACK for floats, Gauss-Jordan elimination for exact objects."""
    if system.dtype != object and rhs.dtype != object:
        return np.linalg.solve(system.astype(float), rhs.astype(float))
    augmented = np.column_stack([system, rhs]).astype(object)
    size = len(rhs)
    for column in range(size):
        nonzero = np.flatnonzero(augmented[column:, column] != 0)
        if nonzero.size == 0:
            raise np.linalg.LinAlgError("singular system: I - γ P_π is not invertible")
        pivot = column + nonzero[0]
        augmented[[column, pivot]] = augmented[[pivot, column]]
        augmented[column] = augmented[column] / augmented[column, column]
        others = np.arange(size) != column
        augmented[others] -= np.outer(augmented[others, column], augmented[column])
    return augmented[:, -1]

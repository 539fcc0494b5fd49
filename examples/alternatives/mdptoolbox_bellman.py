"""Bellman operators and value iteration in pymdptoolbox's idiom: a correct alternative to ``impl``'s.

Written from scratch after the structure of pymdptoolbox's ``MDP._bellmanOperator`` and
``ValueIteration``; every other function comes from ``impl``. It must pass every claim whose
verifiers call the functions below (``tests/test_correct_alternatives.py``).

- **Transitions one matrix per action.** pymdptoolbox stores P as [A, S, S] and R as [A, S] and
  backs up all states at once, Q[a] = R[a] + γ P[a] @ V; here the contract's P [S, A, S] and
  R [S, A] are read in that layout with one ``einsum`` (``"sat,t->as"``) instead of
  ``impl``'s broadcast-and-sum, and Q is action-major until it is returned.
- **max and argmax over the action axis**, axis 0 of the action-major Q; ``argmax`` keeps the
  first maximum, the lowest action index the contract asks for on ties.
- **The policy's backup as one contraction**, (T^π V)(s) = Σ_a π(s, a) Q(a, s), an ``einsum``.
- **A fixed number of sweeps**: ``value_iteration`` applies the operator n times, as
  ``ValueIteration`` does with ``max_iter`` when its stopping test is not reached; the
  contract's function has no stopping test.

``einsum``, ``max`` and ``argmax`` work on object arrays of ``Fraction``, so the exact checks get
exact values, as the contract requires of the tabular Bellman functions.
"""

import numpy as np

from impl import *  # noqa: F403  (everything not defined below is the reference)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def _bellman_backup(P, R, v, gamma):
    """Q[a, s] = R[s, a] + γ Σ_t P[s, a, t] v[t], action-major as pymdptoolbox keeps it."""
    P, R, v = np.asarray(P), np.asarray(R), np.asarray(v)
    return R.T + gamma * np.einsum("sat,t->as", P, v)


def action_values(P, R, v, gamma):
    """The one-step lookahead Q_v, returned state-major [S, A] as the contract has it."""
    return _bellman_backup(P, R, v, gamma).T


def bellman_optimality_operator(P, R, v, gamma):
    """max over the action axis of the backup."""
    return _bellman_backup(P, R, v, gamma).max(axis=0)


def bellman_expectation_operator(P, R, pi, v, gamma):
    """Σ_a π(s, a) Q(a, s), one contraction."""
    return np.einsum("sa,as->s", np.asarray(pi), _bellman_backup(P, R, v, gamma))


def greedy_policy(P, R, v, gamma):
    """argmax over the action axis of the backup; the first maximum on ties."""
    return _bellman_backup(P, R, v, gamma).argmax(axis=0)


def value_iteration(P, R, gamma, n_iterations, v_0=None):
    """n sweeps of the optimality backup from V_0 (zeros of R's dtype by default)."""
    R = np.asarray(R)
    v = np.zeros(R.shape[0], dtype=R.dtype) if v_0 is None else np.asarray(v_0)
    for _ in range(n_iterations):
        v = bellman_optimality_operator(P, R, v, gamma)
    return v

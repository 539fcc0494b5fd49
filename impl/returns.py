"""Discounted returns and the per-step weights of REINFORCE.

Indexing follows the arrays a rollout stores, one entry per decision t in [0, T): ``r_t[t]`` is
the reward that followed action a_t, which the module writes r_{t+1}. Time is the first axis;
any further axes (trajectories, environments) are carried along. The functions use only + and *,
so object arrays of ``fractions.Fraction`` (with a Fraction or integer ``gamma``) stay exact.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def discounted_returns(r_t: ArrayLike, gamma: float) -> np.ndarray:
    """Reward-to-go G_t = Σ_{k=t}^{T-1} γ^{k-t} r_{k+1}, by the recursion G_t = r_{t+1} + γ G_{t+1}.

    Module step 4.1.4 (the syllabus writes the same sum as G_t = Σ_k γ^k r_{t+k}, indexing each
    reward by the step that earned it). The episode ends after the last entry: G_{T-1} = r_T.

    Args:
      r_t: rewards r_{t+1} for t in [0, T), shape [T] or [T, B], T >= 1.
      gamma: the discount γ in [0, 1].

    Returns:
      G_t for t in [0, T), shaped like ``r_t``.
    """
    r_t = np.asarray(r_t)
    returns = [None] * len(r_t)
    carried = 0
    for t in range(len(r_t) - 1, -1, -1):
        carried = r_t[t] + gamma * carried
        returns[t] = carried
    return np.array(returns)


def discounted_objective_weights(r_t: ArrayLike, gamma: float) -> np.ndarray:
    """w_t = γ^t G_t, the weight of ∇log π(a_t|s_t) in the gradient of the literal discounted objective.

    Module step 4.1.4: for J(θ) = E[Σ_{t=0}^{T-1} γ^t r_{t+1}] the direct derivation weights the
    score of step t by γ^t G_t. Dropping γ^t (weighting by G_t alone, :func:`discounted_returns`)
    is the common textbook form; over a finite horizon it is the gradient of a different objective.

    Args:
      r_t: rewards r_{t+1} for t in [0, T), shape [T] or [T, B], T >= 1.
      gamma: the discount γ in [0, 1].

    Returns:
      γ^t G_t for t in [0, T), shaped like ``r_t``.
    """
    returns = discounted_returns(r_t, gamma)
    weights = [None] * len(returns)
    discount = 1
    for t in range(len(returns)):
        weights[t] = discount * returns[t]
        discount = discount * gamma
    return np.array(weights)


def full_return_weights(r_t: ArrayLike, gamma: float) -> np.ndarray:
    """w_t = R(τ) = Σ_{k=0}^{T-1} γ^k r_{k+1} for every t: the whole trajectory's return at each step.

    Module step 4.1.3: ∇J = E[R(τ) Σ_t ∇log π(a_t|s_t)]. It has the same expectation as the
    weights γ^t G_t of :func:`discounted_objective_weights` (the rewards before t multiply a score
    whose conditional mean is zero, step 4.1.4) and a larger variance in general.

    Args:
      r_t: rewards r_{t+1} for t in [0, T), shape [T] or [T, B], T >= 1.
      gamma: the discount γ in [0, 1].

    Returns:
      R(τ) repeated over t, shaped like ``r_t``.
    """
    returns = discounted_returns(r_t, gamma)
    return np.array([returns[0]] * len(returns))

"""Baselines (lesson 4.2): a state baseline, the optimal scalar one, and group baselines for several answers.

Groups lie along the last axis: ``r_i`` has shape [..., G], one reward per answer; actions lie
along the last axis of ``pi_a`` and ``q_a``. Every function but the std-normalised one uses only
+, -, * and /, so object arrays of ``fractions.Fraction`` stay exact.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def group_centered_advantages(r_i: ArrayLike) -> np.ndarray:
    """A_i = R_i - mean_j R_j, the group mean as baseline (module step 4.2.3).

    The mean contains R_i itself, so this is not an action-independent baseline: under
    independent answers the estimator's expectation is (G - 1)/G times the gradient.

    Args:
      r_i: rewards of each group's G answers, shape [..., G], G >= 1.

    Returns:
      advantages shaped like ``r_i``; they sum to zero within each group, and are exactly zero
      for a group of equal rewards, in floating point too.
    """
    # Centring the differences from each group's first reward changes nothing in exact arithmetic
    # and makes a group of equal float rewards give exact zeros, not rounding noise.
    shifted = _differences_from_first(r_i)
    return shifted - shifted.sum(axis=-1, keepdims=True) / shifted.shape[-1]


def leave_one_out_advantages(r_i: ArrayLike) -> np.ndarray:
    """A_i = R_i - (1/(G-1)) Σ_{j≠i} R_j, the leave-one-out baseline of RLOO.

    Ahmadian et al. (2024), "Back to Basics", section 3 (RLOO, after Kool et al., 2019); module
    step 4.2.4. The baseline excludes the answer it is compared with, so with independent
    answers it does not depend on that answer's action and the estimator stays unbiased.

    Args:
      r_i: rewards of each group's G answers, shape [..., G], G >= 2.

    Returns:
      advantages shaped like ``r_i``; exactly zero for a group of equal rewards.
    """
    shifted = _differences_from_first(r_i)
    group_size = shifted.shape[-1]
    if group_size < 2:
        raise ValueError(f"leave-one-out needs at least 2 answers per group, got G = {group_size}")
    others = shifted.sum(axis=-1, keepdims=True) - shifted
    return shifted - others / (group_size - 1)


def _differences_from_first(r_i: ArrayLike) -> np.ndarray:
    """R_i - R_1 per group: both group baselines are invariant to shifting a group's rewards."""
    r_i = np.asarray(r_i)
    return r_i - r_i[..., :1]


def baseline_advantages(g_t: ArrayLike, b_t: ArrayLike) -> np.ndarray:
    """A_t = G_t - b(s_t), a return minus a baseline that ignores the action a_t (module step 4.2.1).

    Sutton et al. (2000), section 2; Williams (1992) calls b the reinforcement baseline. As long as
    b(s_t) does not depend on a_t, E[b(s_t) ∇ log π(a_t|s_t) | s_t] = b(s_t) ∇ Σ_a π(a|s_t) = 0, so the
    expected gradient is unchanged. The three usual choices are one function of b_t's shape: no
    baseline is b_t = 0, a constant baseline is a scalar b_t, and a state-dependent baseline gives
    b(s_t) for every step, e.g. V(s_t), which makes A_t a Monte Carlo estimate of the advantage
    Q(s_t, a_t) - V(s_t).

    Args:
      g_t: returns (or rewards, or action values Q(s, a)) for t in [0, T), shape [T, ...].
      b_t: the baseline, broadcastable to ``g_t``: a scalar, or b(s_t) per step.

    Returns:
      advantages shaped like ``g_t``. Exact for object arrays of fractions.
    """
    return np.asarray(g_t) - np.asarray(b_t)


def group_normalized_advantages(r_i: ArrayLike, eps: float) -> np.ndarray:
    """A_i = (R_i - mean R) / (std R + eps): group centring and scaling (module step 4.2.3).

    The group-relative advantage of GRPO with outcome supervision, Shao et al. (2024),
    "DeepSeekMath", section 4.1. The std is the population std of the group, sqrt(mean_i (R_i - mean R)^2):
    the group is the whole population being standardised, so without the guard a non-constant group
    would have mean-square advantage exactly 1, and G = 1 needs no special case. The paper does not say which
    std it means; the sample std (ddof = 1, the default of ``torch.std``) only multiplies these
    advantages by sqrt((G-1)/G), a constant for a fixed G. Dividing by a random, reward-dependent
    scale makes the estimator's expectation no longer a fixed multiple of the gradient, so this is
    not a plain control variate.

    A group of equal rewards has exactly zero centred rewards (see
    :func:`group_centered_advantages`), hence std 0, and the eps guard divides 0 by eps, never 0
    by 0: its advantages are exactly zero.

    Args:
      r_i: rewards of each group's G answers, shape [..., G], G >= 1.
      eps: the guard added to the std, > 0.

    Returns:
      float advantages shaped like ``r_i`` (the square root makes the result inexact even for
      fractions).
    """
    if not eps > 0:
        raise ValueError(f"eps must be > 0 so that a group of equal rewards gives 0/eps, got {eps!r}")
    r_i = np.asarray(r_i, dtype=float)
    centered = group_centered_advantages(r_i)
    std = np.sqrt((centered * centered).sum(axis=-1, keepdims=True) / r_i.shape[-1])
    return centered / (std + eps)


def state_value_from_q(pi_a: ArrayLike, q_a: ArrayLike) -> np.ndarray:
    """V^π(s) = E_{a~π}[Q^π(s, a)] = Σ_a π(a|s) Q^π(s, a) at one state (module step 4.2.1).

    Args:
      pi_a: action probabilities π(a|s), shape [..., K].
      q_a: action values Q^π(s, a), shape [..., K].

    Returns:
      V^π(s), shape [...]. Exact for object arrays of fractions.
    """
    pi_a, q_a = np.asarray(pi_a), np.asarray(q_a)
    return (pi_a * q_a).sum(axis=-1)


def optimal_scalar_baseline(pi_a: ArrayLike, q_a: ArrayLike, score_a: ArrayLike) -> np.ndarray:
    """b* = E[Q(s,A) ||g(A)||^2] / E[||g(A)||^2], g(A) = ∇_θ log π(A|s) (module step 4.2.2).

    The scalar b that minimises the second moment E||(Q(s,A) - b) g(A)||^2 of the single-action
    gradient estimate at one state: the moment is a quadratic in b with curvature 2 E||g||^2 > 0.
    It equals V^π(s) = E[Q] only when ||g(A)||^2 is uncorrelated with Q, e.g. constant across
    actions. The squared norm is taken in the coordinates of ``score_a``, so b* depends on the
    parameterisation: for a softmax policy and its logits, g(a) = e_a - π.

    Args:
      pi_a: action probabilities π(a|s), shape [..., K].
      q_a: action values Q(s, a), shape [..., K].
      score_a: the score g(a) of every action, shape [..., K, P]; E||g||^2 must be > 0.

    Returns:
      b*, shape [...]. Exact for object arrays of fractions.
    """
    pi_a, q_a, score_a = np.asarray(pi_a), np.asarray(q_a), np.asarray(score_a)
    weight_a = pi_a * (score_a * score_a).sum(axis=-1)
    return (weight_a * q_a).sum(axis=-1) / weight_a.sum(axis=-1)

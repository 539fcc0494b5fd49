"""Probability ratios, the local and clipped surrogates of PPO, their diagnostics and the PPO loss.

Schulman et al. (2017), "Proximal Policy Optimization Algorithms", eqs. 6, 7 and 9; module
lesson 4.4. Per-sample functions return one term per sample t in [0, N); the objectives are
their means over the batch. The surrogates, their gradients and ``clip_active`` use only
+ - * / and comparisons: they accept numpy object arrays of ``fractions.Fraction`` and stay exact.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .policies import log_softmax, softmax


def probability_ratios(log_pi_t: ArrayLike, log_pi_old_t: ArrayLike) -> np.ndarray:
    """r_t(θ) = π_θ(a_t|s_t) / π_old(a_t|s_t) = exp(log π_θ(a_t|s_t) - log π_old(a_t|s_t))  (step 4.4.1).

    Args:
      log_pi_t: log π_θ(a_t|s_t) of the stored actions, any shape.
      log_pi_old_t: log π_old(a_t|s_t), stored when the rollout was collected, same shape.
    """
    return np.exp(np.asarray(log_pi_t, dtype=float) - np.asarray(log_pi_old_t, dtype=float))


def surrogate_objective(ratio_t: ArrayLike, advantage_t: ArrayLike) -> np.ndarray:
    """r_t Â_t per sample; the local surrogate L^PG of step 4.4.1 is its mean (Kakade and Langford, 2002).

    At θ = θ_old every r_t is 1, so its gradient (:func:`surrogate_objective_grad`) is the
    REINFORCE weight Â_t on each ∇ log π_θ(a_t|s_t).

    Args:
      ratio_t: r_t for t in [0, N).
      advantage_t: Â_t, estimated under π_old and held fixed, shape [N].

    Returns:
      the per-sample surrogate, shape [N].
    """
    return np.asarray(ratio_t) * np.asarray(advantage_t)


def surrogate_objective_grad(ratio_t: ArrayLike, advantage_t: ArrayLike) -> np.ndarray:
    """∂/∂ log π_θ(a_t|s_t) of the per-sample surrogate: r_t Â_t, since ∂r_t/∂ log π_θ(a_t|s_t) = r_t.

    Divide by N for the gradient of the mean L^PG.

    Args:
      ratio_t, advantage_t: as in :func:`surrogate_objective`.

    Returns:
      the derivative per sample, shape [N].
    """
    return np.asarray(ratio_t) * np.asarray(advantage_t)


def _clip(ratio_t: np.ndarray, epsilon: object) -> np.ndarray:
    return np.minimum(np.maximum(ratio_t, 1 - epsilon), 1 + epsilon)


def ppo_clip_objective(ratio_t: ArrayLike, advantage_t: ArrayLike, epsilon: object) -> np.ndarray:
    """min(r_t Â_t, clip(r_t, 1-ε, 1+ε) Â_t) per sample; L^CLIP is its mean (PPO eq. 7, step 4.4.3).

    Args:
      ratio_t: r_t, shape [N].
      advantage_t: Â_t, shape [N].
      epsilon: the clipping parameter ε in (0, 1).

    Returns:
      the per-sample clipped surrogate, shape [N].
    """
    ratio_t, advantage_t = np.asarray(ratio_t), np.asarray(advantage_t)
    return np.minimum(ratio_t * advantage_t, _clip(ratio_t, epsilon) * advantage_t)


def clip_active(ratio_t: ArrayLike, advantage_t: ArrayLike, epsilon: object) -> np.ndarray:
    """True where the clipped branch is strictly the minimum, so the term is flat in r_t.

    That is Â_t > 0 with r_t > 1+ε, or Â_t < 0 with r_t < 1-ε: the two plateaus of step 4.4.3.
    At r_t = 1±ε exactly both branches are equal and the unclipped one is taken.
    """
    ratio_t, advantage_t = np.asarray(ratio_t), np.asarray(advantage_t)
    return _clip(ratio_t, epsilon) * advantage_t < ratio_t * advantage_t


def ppo_clip_objective_grad(ratio_t: ArrayLike, advantage_t: ArrayLike, epsilon: object) -> np.ndarray:
    """∂/∂ log π_θ(a_t|s_t) of the per-sample clipped surrogate: r_t Â_t, or 0 where clipping is active.

    Since ∂r_t/∂ log π_θ(a_t|s_t) = r_t, the unclipped branch contributes r_t Â_t; the clipped
    branch is constant in θ. Divide by N for the gradient of the mean L^CLIP.

    Args:
      ratio_t, advantage_t, epsilon: as in :func:`ppo_clip_objective`.

    Returns:
      the derivative per sample, shape [N].
    """
    ratio_t, advantage_t = np.asarray(ratio_t), np.asarray(advantage_t)
    return np.where(clip_active(ratio_t, advantage_t, epsilon), 0 * advantage_t, ratio_t * advantage_t)


class ClipDiagnostics(NamedTuple):
    """Two different clipping statistics of one batch (step 4.4.4).

    ``outside_fraction`` counts ratios outside [1-ε, 1+ε] whatever the advantage's sign;
    ``active_fraction`` counts samples whose clipped branch is the minimum. Because of the min
    they differ: a ratio outside the interval on the side that the advantage penalises is not
    clipped.
    """

    outside_fraction: object
    active_fraction: object


def ratio_clip_diagnostics(ratio_t: ArrayLike, advantage_t: ArrayLike, epsilon: object) -> ClipDiagnostics:
    """The fraction of ratios outside [1-ε, 1+ε] and the fraction where clipping is active.

    Args:
      ratio_t, advantage_t, epsilon: as in :func:`ppo_clip_objective`.
    """
    ratio_t = np.asarray(ratio_t)
    outside = (ratio_t < 1 - epsilon) | (ratio_t > 1 + epsilon)
    active = clip_active(ratio_t, advantage_t, epsilon)
    n = ratio_t.shape[0]
    return ClipDiagnostics(outside.sum() / n, active.sum() / n)


def categorical_entropy(logits: ArrayLike) -> np.ndarray:
    """H(π) = -Σ_a π(a) log π(a) for π = softmax(logits), along the last axis.

    Args:
      logits: shape [..., K].

    Returns:
      the entropy, shape [...].
    """
    return -(softmax(logits) * log_softmax(logits)).sum(axis=-1)


def categorical_entropy_grad(logits: ArrayLike) -> np.ndarray:
    """∂H/∂z_k = -π_k (log π_k + H) for π = softmax(z), shape [..., K]."""
    probabilities, log_probabilities = softmax(logits), log_softmax(logits)
    entropy = -(probabilities * log_probabilities).sum(axis=-1, keepdims=True)
    return -probabilities * (log_probabilities + entropy)


def squared_error_value_loss(v_t: ArrayLike, target_t: ArrayLike) -> object:
    """L_V = (1/N) Σ_t ½ (V(s_t) - V̂_t)², the critic's regression loss (step 4.3.3's targets V̂_t).

    Its gradient with respect to V(s_t) is (V(s_t) - V̂_t) / N.
    """
    error_t = np.asarray(v_t) - np.asarray(target_t)
    return (error_t * error_t).sum() / (2 * error_t.shape[0])


def ppo_total_loss(clip_objective: object, value_loss: object, entropy: object, value_coef: object,
                   entropy_coef: object) -> object:
    """L = -L^CLIP + c_V L_V - c_H H, the quantity minimised (PPO eq. 9 with its sign flipped, step 4.4.4).

    Args:
      clip_objective: L^CLIP, the batch mean of :func:`ppo_clip_objective`.
      value_loss: L_V, e.g. :func:`squared_error_value_loss`.
      entropy: H, the batch mean of :func:`categorical_entropy`.
      value_coef: c_V >= 0.
      entropy_coef: c_H >= 0.
    """
    return -clip_objective + value_coef * value_loss - entropy_coef * entropy

"""PPO objectives on token sequences, with the averaging unit named, and KL penalty placement.

Per-token arrays are shaped [B, T] and indexed like :func:`impl.sequence.token_log_probs`; the
mask is :func:`impl.sequence.response_mask`. Every objective is to be maximised and returns its
value and its gradient with respect to ``log_pi_t`` (the current policy's token log-probabilities);
``log_pi_old_t`` and advantages are constants (module step 4.5.1).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .policies import log_softmax, softmax

AGGREGATIONS = ("token_mean", "answer_mean", "answer_sum")


def aggregation_weights(mask_t: ArrayLike, aggregation: str) -> np.ndarray:
    """The weight of each token in a batch objective Σ_{b,t} w_bt ℓ_bt, for a named averaging unit.

    - ``token_mean``: mean over all answer tokens of the batch, w = m / Σ_{b,t} m;
    - ``answer_mean``: mean within each answer, then over answers, w = m / (B Σ_t m_b);
    - ``answer_sum``: sum within each answer, then mean over answers, w = m / B.

    They weight short and long answers differently (module step 4.5.1) and agree only when every
    answer has the same length (up to the factor T between ``answer_sum`` and the others).

    Args:
      mask_t: shape [B, T].
      aggregation: one of ``AGGREGATIONS``.
    """
    mask_t = np.asarray(mask_t, dtype=float)
    answers = mask_t.shape[0]
    if aggregation == "token_mean":
        return mask_t / mask_t.sum()
    if aggregation == "answer_mean":
        lengths = mask_t.sum(axis=-1, keepdims=True)
        return mask_t / (answers * np.maximum(lengths, 1.0))
    if aggregation == "answer_sum":
        return mask_t / answers
    raise ValueError(f"unknown aggregation '{aggregation}'; name one of {', '.join(AGGREGATIONS)}")


def token_clipped_surrogate(log_pi_t: ArrayLike, log_pi_old_t: ArrayLike, a_t: ArrayLike, mask_t: ArrayLike,
                            epsilon: float, aggregation: str) -> tuple[float, np.ndarray]:
    """Σ w_t min(r_t A_t, clip(r_t, 1-ε, 1+ε) A_t) with r_t = exp(log π_t - log π_old,t).

    Schulman et al. (2017), eq. 7, applied per token with one advantage per answer broadcast to
    its tokens (module step 4.5.1); the weights w come from :func:`aggregation_weights`. Each token
    ratio is clipped on its own: this is a local surrogate, not the ratio of whole answers.

    Args:
      log_pi_t, log_pi_old_t: shape [B, T].
      a_t: advantages, shape [B, T] or [B, 1] (one per answer).
      mask_t: shape [B, T].
      epsilon: the clip range ε.
      aggregation: the averaging unit, one of ``AGGREGATIONS``.

    Returns:
      (objective, gradient with respect to log_pi_t). Where the clipped branch is strictly the
      minimum the token's gradient is 0; otherwise it is w r A.
    """
    weights = aggregation_weights(mask_t, aggregation)
    log_pi_t = np.asarray(log_pi_t, dtype=float)
    ratio = np.exp(np.where(weights > 0, log_pi_t - np.asarray(log_pi_old_t, dtype=float), 0.0))
    a_t = np.broadcast_to(np.asarray(a_t, dtype=float), ratio.shape)
    unclipped = ratio * a_t
    clipped = np.clip(ratio, 1 - epsilon, 1 + epsilon) * a_t
    active = unclipped <= clipped
    objective = float((weights * np.minimum(unclipped, clipped)).sum())
    return objective, np.where(active, weights * unclipped, 0.0)


def sequence_clipped_surrogate(log_pi_t: ArrayLike, log_pi_old_t: ArrayLike, a: ArrayLike, mask_t: ArrayLike,
                               epsilon: float) -> tuple[float, np.ndarray]:
    """(1/B) Σ_b min(ρ_b A_b, clip(ρ_b, 1-ε, 1+ε) A_b) with ρ_b = Π_t r_bt, the whole answer's ratio.

    The contrast of module step 4.5.1: clipping the product of the token ratios, not each factor.

    Args:
      log_pi_t, log_pi_old_t, mask_t: shape [B, T].
      a: one advantage per answer, shape [B].
      epsilon: the clip range ε.

    Returns:
      (objective, gradient with respect to log_pi_t).
    """
    mask_t = np.asarray(mask_t, dtype=float)
    a = np.asarray(a, dtype=float)
    log_ratio = mask_t * np.where(mask_t > 0, np.asarray(log_pi_t, dtype=float) - np.asarray(log_pi_old_t), 0.0)
    ratio = np.exp(log_ratio.sum(axis=-1))
    unclipped = ratio * a
    clipped = np.clip(ratio, 1 - epsilon, 1 + epsilon) * a
    active = unclipped <= clipped
    answers = mask_t.shape[0]
    objective = float(np.minimum(unclipped, clipped).sum() / answers)
    return objective, np.where(active, unclipped / answers, 0.0)[:, None] * mask_t


def kl_penalized_rewards(r: ArrayLike, log_pi_t: ArrayLike, log_ref_t: ArrayLike, mask_t: ArrayLike,
                         beta: float) -> np.ndarray:
    """R - β Σ_t m_t (log π_t - log π_ref,t): the KL penalty placed in the reward, gradient stopped.

    The returned rewards are constants for the optimiser: the penalty then reaches the gradient
    only through the score-function term, E[(R - β k) ∇ log π] (module steps 4.1.2 and 4.5.1).
    Use either this or :func:`kl_penalty_loss`, not both: each alone carries the KL gradient.

    Args:
      r: rewards per answer, shape [B].
      log_pi_t, log_ref_t: log-probabilities of the sampled tokens under the policy and the
        reference, shape [B, T].
      mask_t: shape [B, T].
      beta: the penalty coefficient.
    """
    mask_t = np.asarray(mask_t, dtype=float)
    log_ratio = mask_t * np.where(mask_t > 0, np.asarray(log_pi_t) - np.asarray(log_ref_t), 0.0)
    return np.asarray(r, dtype=float) - beta * log_ratio.sum(axis=-1)


def kl_penalty_loss(logits_t: ArrayLike, ref_logits_t: ArrayLike, mask_t: ArrayLike, beta: float,
                    aggregation: str) -> tuple[float, np.ndarray]:
    """β Σ w_t KL(π(·|ctx_t) || π_ref(·|ctx_t)), the KL penalty placed in the loss, with its own derivative.

    The KL of each masked position is computed exactly over the vocabulary, so its gradient is the
    full gradient of the penalty at the visited contexts: ∂KL/∂z_j = π_j (log(π_j/π_ref,j) - KL).
    A loss to be minimised, next to the surrogates above which are maximised.

    Args:
      logits_t, ref_logits_t: the logits that score each token, shape [B, T, V].
      mask_t: shape [B, T].
      beta: the penalty coefficient.
      aggregation: the averaging unit, one of ``AGGREGATIONS``.

    Returns:
      (penalty, gradient with respect to logits_t).
    """
    weights = aggregation_weights(mask_t, aggregation)
    log_pi = log_softmax(logits_t)
    log_ratio = log_pi - log_softmax(ref_logits_t)
    pi = softmax(logits_t)
    kl = (pi * log_ratio).sum(axis=-1)
    gradient = pi * (log_ratio - kl[..., None])
    return float(beta * (weights * kl).sum()), beta * weights[..., None] * gradient

"""The week-16 exercise as a training codebase writes it: scalar losses over a batch of tokens.

A loss module of an LLM trainer (nanoGPT-style) takes per-token log-probabilities ``logp`` of the
sampled tokens, shape [B, T], a mask of the tokens that count (1 for a response token, 0 for the
prompt and padding), and returns the one number the optimiser minimises: minus the objective's
mean over the masked tokens of the whole batch, Σ mask x / Σ mask (a token-level mean; a mean per
sequence first would weight short answers more). An advantage is per token [B, T] or per sequence
[B], then shared by the sequence's tokens (step 4.5.3). Held-fixed inputs (``logp_old``, ``adv``)
are constants of the loss: its gradient is with respect to ``logp`` only.

Williams (1992) for REINFORCE; Schulman et al. (2017), eqs. 6 and 7, for the surrogate and the
clipped objective; Ahmadian et al. (2024) for RLOO. Module steps 4.2.3-4.2.4, 4.4.1-4.4.4 and the
syllabus's week16/step-4.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _masked_mean(x_bt: np.ndarray, mask: ArrayLike | None) -> float:
    """Σ mask x / Σ mask over the whole batch (x may be boolean: a share of tokens); the plain mean without a mask."""
    if mask is None:
        return float(x_bt.mean())
    mask_bt = np.asarray(mask)
    if mask_bt.shape != x_bt.shape:
        raise ValueError(f"mask has shape {mask_bt.shape}, the log-probabilities {x_bt.shape}")
    tokens = mask_bt.sum()
    if tokens == 0:
        raise ValueError("the mask selects no token: the mean over masked tokens is undefined")
    return float((mask_bt * x_bt).sum() / tokens)


def _per_token(adv: ArrayLike, logp_bt: np.ndarray) -> np.ndarray:
    """The advantage of every token: [B, T] as given, or [B] shared by each sequence's tokens."""
    adv_b = np.asarray(adv)
    if adv_b.shape == logp_bt.shape:
        return adv_b
    if adv_b.shape == (len(logp_bt),):
        return adv_b[:, None]
    raise ValueError(f"adv has shape {adv_b.shape}: expected {logp_bt.shape} (per token) or "
                     f"{logp_bt.shape[:-1]} (per sequence)")


def reinforce_loss(logp: ArrayLike, adv: ArrayLike, mask: ArrayLike | None = None) -> float:
    """L = -Σ mask Â log π(y_t) / Σ mask: REINFORCE as a loss (lesson 4.1, week16/step-1).

    Its gradient -mask Â / Σ mask on each log π(y_t) is the SFT (cross-entropy) gradient of the
    sampled tokens, each weighted by its advantage.

    Args:
      logp: log π_θ(y_t | prefix) of the sampled tokens, shape [B, T].
      adv: Â, per token [B, T] or per sequence [B]; a constant of the loss.
      mask: 1 for the tokens that count, 0 elsewhere, shape [B, T]; None counts every token.
    """
    logp_bt = np.asarray(logp)
    return -_masked_mean(_per_token(adv, logp_bt) * logp_bt, mask)


def surrogate_loss(logp: ArrayLike, logp_old: ArrayLike, adv: ArrayLike, mask: ArrayLike | None = None) -> float:
    """L = -Σ mask r_t Â / Σ mask with r_t = exp(logp - logp_old): the local surrogate L^PG as a loss (step 4.4.1).

    Its gradient on each log π is -mask r_t Â / Σ mask; at logp = logp_old every r_t is 1 and it is
    :func:`reinforce_loss`'s, the syllabus's key test.

    Args:
      logp: as in :func:`reinforce_loss`.
      logp_old: log π_old of the same tokens, stored at sampling, shape [B, T]; a constant of the loss.
      adv, mask: as in :func:`reinforce_loss`.
    """
    logp_bt = np.asarray(logp)
    ratio_bt = np.exp(logp_bt - np.asarray(logp_old))
    return -_masked_mean(ratio_bt * _per_token(adv, logp_bt), mask)


def ppo_clip_loss(logp: ArrayLike, logp_old: ArrayLike, adv: ArrayLike, eps: float = 0.2,
                  mask: ArrayLike | None = None) -> float:
    """L = -Σ mask min(r_t Â, clip(r_t, 1-ε, 1+ε) Â) / Σ mask: PPO's clipped objective as a loss (lesson 4.4).

    Args:
      logp, logp_old, adv, mask: as in :func:`surrogate_loss`.
      eps: the clip range ε, 0 < ε < 1.
    """
    logp_bt = np.asarray(logp)
    ratio_bt = np.exp(logp_bt - np.asarray(logp_old))
    adv_bt = _per_token(adv, logp_bt)
    clipped_bt = np.clip(ratio_bt, 1 - eps, 1 + eps)
    return -_masked_mean(np.minimum(ratio_bt * adv_bt, clipped_bt * adv_bt), mask)


def clip_diagnostics(logp: ArrayLike, logp_old: ArrayLike, adv: ArrayLike, eps: float = 0.2,
                     mask: ArrayLike | None = None) -> dict[str, float]:
    """The two clip statistics of a batch of tokens (step 4.4.3), over the masked tokens.

    Returns:
      ``outside_fraction``: the share of tokens whose ratio lies outside [1-ε, 1+ε], whatever Â's sign;
      ``active_fraction``: the share whose clipped branch is strictly the minimum (Â > 0 with r > 1+ε, or
      Â < 0 with r < 1-ε), the tokens that get no gradient. Because of the min the two differ.
    """
    logp_bt = np.asarray(logp)
    ratio_bt = np.exp(logp_bt - np.asarray(logp_old))
    adv_bt = _per_token(adv, logp_bt)
    outside_bt = (ratio_bt < 1 - eps) | (ratio_bt > 1 + eps)
    active_bt = ((adv_bt > 0) & (ratio_bt > 1 + eps)) | ((adv_bt < 0) & (ratio_bt < 1 - eps))
    return {"outside_fraction": _masked_mean(outside_bt, mask), "active_fraction": _masked_mean(active_bt, mask)}


def mean_baseline(rewards: ArrayLike) -> np.ndarray:
    """b_i = (1/G) Σ_j R_j: each answer's baseline is its group's mean reward, own reward included (step 4.2.3).

    Args:
      rewards: the rewards of each group's G answers, shape [..., G], G >= 1.

    Returns:
      the baseline of every answer, shaped like ``rewards``.
    """
    r_i = np.asarray(rewards)
    return np.broadcast_to(r_i.mean(axis=-1, keepdims=True), r_i.shape).copy()


def rloo_baseline(rewards: ArrayLike) -> np.ndarray:
    """b_i = (1/(G-1)) Σ_{j≠i} R_j: the mean reward of the group's other answers, RLOO's baseline (step 4.2.4).

    Args:
      rewards: the rewards of each group's G answers, shape [..., G], G >= 2.

    Returns:
      the baseline of every answer, shaped like ``rewards``.
    """
    r_i = np.asarray(rewards)
    group_size = r_i.shape[-1]
    if group_size < 2:
        raise ValueError(f"leave-one-out needs at least 2 answers per group, got G = {group_size}")
    return (r_i.sum(axis=-1, keepdims=True) - r_i) / (group_size - 1)

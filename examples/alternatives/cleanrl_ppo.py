"""PPO's loss terms and diagnostics in CleanRL's idiom: a correct alternative to ``impl``'s PPO functions.

Written from scratch after the update step of CleanRL's ``ppo.py`` (one file, PyTorch), with
numpy in place of torch; every other function comes from ``impl``. It must pass every claim whose
verifiers call the functions below, the PPO training runs included
(``tests/test_correct_alternatives.py``). CleanRL writes the same quantities as ``impl`` another way:

- **The clipped objective as a loss.** ``pg_loss1 = -A * ratio``, ``pg_loss2 = -A * clamp(ratio)``,
  and the loss is their elementwise maximum; the objective is that maximum negated back. Its
  gradient is the one autograd gives ``torch.max``: the gradient of the larger branch, the mean
  of the two at a tie, and a clamp whose gradient is the ratio's inside [1-ε, 1+ε] and 0 outside.
- **Diagnostics from the log-ratio.** ``old_approx_kl = (-logratio).mean()`` is k1 and
  ``approx_kl = ((ratio - 1) - logratio).mean()`` is k3 with ``ratio = exp(logratio)`` (not
  ``expm1``); ``clipfrac = (|ratio - 1| > ε).mean()`` is the fraction of ratios outside the clip
  range, the contract's ``outside_fraction``. CleanRL has no statistic for where clipping is
  active; here it is where ``pg_loss2 > pg_loss1``, the samples whose clamped branch the max picks.
- **Entropy from normalised logits**, as ``torch.distributions.Categorical`` computes it:
  logits minus their logsumexp (max subtracted first), then -Σ p log p.
- **The loss sum in CleanRL's order:** ``pg_loss - ent_coef * entropy + vf_coef * v_loss``, and
  ``v_loss = 0.5 * ((v - target) ** 2).mean()`` (the unclipped value loss).

- **Advantages normalised with the sample std**: ``(A - A.mean()) / (A.std() + 1e-8)`` with
  torch's default, ddof = 1, where ``impl`` takes the population std.

Comparisons, products and sums keep object arrays of ``Fraction`` exact where the contract
requires it (the surrogates and their gradients). CleanRL's GAE is not here: its single done flag
drops the bootstrap at a truncation, the bug ``zoo.zeroed_truncation_bootstrap`` keeps.
"""

import numpy as np

from impl import *  # noqa: F403  (everything not defined below is the reference)
from impl import ClipDiagnostics, __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def _pg_losses(ratio_t, advantage_t, epsilon):
    """CleanRL's two policy-loss branches: the unclipped and the clamped one, each negated."""
    ratio, advantage = np.asarray(ratio_t), np.asarray(advantage_t)
    return -advantage * ratio, -advantage * np.clip(ratio, 1 - epsilon, 1 + epsilon)


def ppo_clip_objective(ratio_t, advantage_t, epsilon):
    """-max(pg_loss1, pg_loss2) per sample: the clipped surrogate negated back from CleanRL's loss."""
    pg_loss1, pg_loss2 = _pg_losses(ratio_t, advantage_t, epsilon)
    return -np.maximum(pg_loss1, pg_loss2)


def ppo_clip_objective_grad(ratio_t, advantage_t, epsilon):
    """d(-max(pg_loss1, pg_loss2))/d log π per sample, as autograd differentiates max and clamp."""
    ratio, advantage = np.asarray(ratio_t), np.asarray(advantage_t)
    pg_loss1, pg_loss2 = _pg_losses(ratio, advantage, epsilon)
    unclipped_grad = ratio * advantage  # dr/dlog π = r
    inside = (ratio >= 1 - epsilon) & (ratio <= 1 + epsilon)
    clipped_grad = np.where(inside, ratio * advantage, 0 * advantage)
    return np.where(pg_loss1 > pg_loss2, unclipped_grad,
                    np.where(pg_loss2 > pg_loss1, clipped_grad, (unclipped_grad + clipped_grad) / 2))


def ratio_clip_diagnostics(ratio_t, advantage_t, epsilon):
    """CleanRL's clipfrac as the outside fraction; the active fraction where the clamped loss is the max."""
    ratio = np.asarray(ratio_t)
    pg_loss1, pg_loss2 = _pg_losses(ratio, advantage_t, epsilon)
    clipfrac = (np.abs(ratio - 1) > epsilon).mean()
    return ClipDiagnostics(clipfrac, (pg_loss2 > pg_loss1).mean())


def kl_k1(log_ratio):
    """old_approx_kl's per-sample term: -logratio."""
    return -np.asarray(log_ratio, dtype=float)


def kl_k3(log_ratio):
    """approx_kl's per-sample term: (ratio - 1) - logratio, with ratio = exp(logratio)."""
    logratio = np.asarray(log_ratio, dtype=float)
    ratio = np.exp(logratio)
    return (ratio - 1) - logratio


def categorical_entropy(logits):
    """-Σ p log p from logits normalised by their logsumexp, as ``Categorical(logits=...).entropy()``."""
    logits = np.asarray(logits, dtype=float)
    top = logits.max(axis=-1, keepdims=True)
    normalized = logits - (top + np.log(np.exp(logits - top).sum(axis=-1, keepdims=True)))
    probs = np.exp(normalized)
    return -(normalized * probs).sum(axis=-1)


def squared_error_value_loss(v_t, target_t):
    """v_loss = 0.5 * ((newvalue - returns) ** 2).mean()."""
    return 0.5 * ((np.asarray(v_t) - np.asarray(target_t)) ** 2).mean()


def ppo_total_loss(clip_objective, value_loss, entropy, value_coef, entropy_coef):
    """loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef, with pg_loss = -L^CLIP."""
    pg_loss = -clip_objective
    return pg_loss - entropy_coef * entropy + value_loss * value_coef


def normalize_advantages(advantage_t, eps=1e-8):
    """(A - A.mean()) / (A.std() + eps) with torch.std's default, the sample std (ddof = 1)."""
    advantages = np.asarray(advantage_t, dtype=float)
    return (advantages - advantages.mean()) / (advantages.std(ddof=1) + eps)

"""The week-16 exercise's loss module in NumPy, written as a student might (einsum, np.where), not as impl does.

The syllabus (week16/step-4) asks for ``reinforce_loss``, ``mean_baseline``, ``rloo_baseline``,
``surrogate_loss``, ``ppo_clip_loss`` and ``clip_diagnostics`` (and ``value_iteration`` for the trainer,
the reference's here): the contract's signatures (docs/implementation-contract.md, "The week-16
exercise"). The harness takes the losses' gradients itself, by central differences, and runs the
syllabus's key test on them:

    pytest claims/ --claims-impl examples.syllabus_rl -k "reinforce_loss or surrogate_loss or ppo_clip_loss"
"""

import numpy as np

from impl import *  # noqa: F403  (every function the exercise does not ask for)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def _tokens(logp, adv, mask):
    logp = np.asarray(logp, dtype=float)
    adv = np.asarray(adv, dtype=float)
    adv = adv.reshape(adv.shape + (1,) * (logp.ndim - adv.ndim))
    mask = np.ones_like(logp) if mask is None else np.asarray(mask, dtype=float)
    return logp, adv, mask


def reinforce_loss(logp, adv, mask=None):
    logp, adv, mask = _tokens(logp, adv, mask)
    return -np.einsum("bt,bt->", mask, adv * logp) / mask.sum()


def surrogate_loss(logp, logp_old, adv, mask=None):
    logp, adv, mask = _tokens(logp, adv, mask)
    return -np.einsum("bt,bt->", mask, np.exp(logp - np.asarray(logp_old)) * adv) / mask.sum()


def ppo_clip_loss(logp, logp_old, adv, eps=0.2, mask=None):
    logp, adv, mask = _tokens(logp, adv, mask)
    ratio = np.exp(logp - np.asarray(logp_old))
    clipped = np.where(adv >= 0, np.minimum(ratio, 1 + eps), np.maximum(ratio, 1 - eps))
    return -np.einsum("bt,bt->", mask, clipped * adv) / mask.sum()


def clip_diagnostics(logp, logp_old, adv, eps=0.2, mask=None):
    logp, adv, mask = _tokens(logp, adv, mask)
    ratio = np.exp(logp - np.asarray(logp_old))
    outside = np.abs(ratio - 1) > eps
    active = np.where(adv > 0, ratio > 1 + eps, np.where(adv < 0, ratio < 1 - eps, False))
    tokens = mask.sum()
    return {"outside_fraction": (mask * outside).sum() / tokens, "active_fraction": (mask * active).sum() / tokens}


def mean_baseline(rewards):
    rewards = np.asarray(rewards, dtype=float)
    return np.repeat(rewards.mean(axis=-1, keepdims=True), rewards.shape[-1], axis=-1)


def rloo_baseline(rewards):
    rewards = np.asarray(rewards, dtype=float)
    return (rewards.sum(axis=-1, keepdims=True) - rewards) / (rewards.shape[-1] - 1)

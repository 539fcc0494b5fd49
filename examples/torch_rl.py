"""The week-16 exercise's seven functions in PyTorch, as a trainer's loss module writes them.

``reinforce_loss``, ``surrogate_loss``, ``ppo_clip_loss`` and ``clip_diagnostics`` take per-token
log-probabilities ``logp`` [B, T] with a mask; ``mean_baseline`` and ``rloo_baseline`` take a
group's rewards [..., G]; ``value_iteration`` is the trainer's tabular warm-up. The module imports
torch, so the harness calls these functions with ``torch.float64`` tensors and takes the losses'
gradients by autograd on this code's own graph (docs/implementation-contract.md); what the exercise
does not ask for is the NumPy reference's, on purpose. Needs the extra: ``pip install -e '.[torch]'``.

    pytest claims/ --claims-impl examples.torch_rl -k "reinforce_loss or surrogate_loss or ppo_clip_loss"
"""

import torch

from impl import *  # noqa: F403  (every function the exercise does not ask for)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def _masked_mean(x, mask):
    if mask is None:
        return x.mean()
    return (x * mask).sum() / mask.sum()


def _per_token(adv, logp):
    return adv if adv.dim() == logp.dim() else adv.unsqueeze(-1)


def reinforce_loss(logp, adv, mask=None):
    return -_masked_mean(_per_token(adv.detach(), logp) * logp, mask)


def surrogate_loss(logp, logp_old, adv, mask=None):
    ratio = torch.exp(logp - logp_old.detach())
    return -_masked_mean(ratio * _per_token(adv.detach(), logp), mask)


def ppo_clip_loss(logp, logp_old, adv, eps=0.2, mask=None):
    ratio = torch.exp(logp - logp_old.detach())
    adv = _per_token(adv.detach(), logp)
    return -_masked_mean(torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv), mask)


@torch.no_grad()
def clip_diagnostics(logp, logp_old, adv, eps=0.2, mask=None):
    ratio = torch.exp(logp - logp_old)
    adv = _per_token(adv, logp)
    outside = ((ratio < 1 - eps) | (ratio > 1 + eps)).to(logp.dtype)
    active = (((adv > 0) & (ratio > 1 + eps)) | ((adv < 0) & (ratio < 1 - eps))).to(logp.dtype)
    return {"outside_fraction": _masked_mean(outside, mask), "active_fraction": _masked_mean(active, mask)}


def mean_baseline(rewards):
    return rewards.mean(dim=-1, keepdim=True).expand_as(rewards)


def rloo_baseline(rewards):
    return (rewards.sum(dim=-1, keepdim=True) - rewards) / (rewards.shape[-1] - 1)


def value_iteration(P, R, gamma, n_iterations, v_0=None):
    v = torch.zeros(R.shape[0], dtype=R.dtype) if v_0 is None else torch.as_tensor(v_0, dtype=R.dtype)
    for _ in range(n_iterations):
        v = (R + gamma * (P * v).sum(dim=-1)).max(dim=-1).values
    return v

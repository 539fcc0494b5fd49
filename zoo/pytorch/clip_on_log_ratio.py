"""Pitfall: PPO's clip applied to the log-ratio instead of the ratio (module step 4.4.2).

``ppo_clip_loss`` clamps logp - logp_old to [-ε, ε] and exponentiates: the band becomes [e^-ε, e^ε]
(0.819 to 1.221 for ε = 0.2), lopsided around 1, instead of [1 - ε, 1 + ε].
"""

import torch

from examples.torch_rl import *  # noqa: F403
from examples.torch_rl import __all__, _masked_mean, _per_token  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is examples.torch_rl's, on purpose


def ppo_clip_loss(logp, logp_old, adv, eps=0.2, mask=None):
    log_ratio = logp - logp_old.detach()
    adv = _per_token(adv.detach(), logp)
    clipped = torch.exp(torch.clamp(log_ratio, -eps, eps)) * adv
    return -_masked_mean(torch.minimum(torch.exp(log_ratio) * adv, clipped), mask)

"""Pitfall: the clipped loss averaged over every token, padding included (module step 4.5.1).

``ppo_clip_loss`` takes ``.mean()`` over the [B, T] batch and never reads the mask: padded positions
count in the denominator and their (meaningless) log-probabilities get a gradient.
"""

import torch

from examples.torch_rl import *  # noqa: F403
from examples.torch_rl import __all__, _per_token  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is examples.torch_rl's, on purpose


def ppo_clip_loss(logp, logp_old, adv, eps=0.2, mask=None):
    ratio = torch.exp(logp - logp_old.detach())
    adv = _per_token(adv.detach(), logp)
    return -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()

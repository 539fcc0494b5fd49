"""Pitfall: logp_old left attached to the graph in the ratio (module step 4.4.1).

``surrogate_loss`` computes exp(logp - logp_old) without detaching logp_old. When logp_old came out of
the same forward pass (a trainer's first epoch, θ = θ_old), the ratio is exp(0) whatever θ is, and the
surrogate's gradient vanishes: the syllabus's key test fails.
"""

import torch

from examples.torch_rl import *  # noqa: F403
from examples.torch_rl import __all__, _masked_mean, _per_token  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is examples.torch_rl's, on purpose


def surrogate_loss(logp, logp_old, adv, mask=None):
    return -_masked_mean(torch.exp(logp - logp_old) * _per_token(adv.detach(), logp), mask)

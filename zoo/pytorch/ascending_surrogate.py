"""Pitfall: the sign of the surrogate loss flipped, so the optimiser ascends it (module step 4.4.1).

``surrogate_loss`` returns the surrogate objective itself instead of its negation: minimising it makes
every token with a positive advantage less likely. Its gradient at θ_old is minus REINFORCE's.
"""

import torch

from examples.torch_rl import *  # noqa: F403
from examples.torch_rl import __all__, _masked_mean, _per_token  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is examples.torch_rl's, on purpose


def surrogate_loss(logp, logp_old, adv, mask=None):
    return _masked_mean(torch.exp(logp - logp_old.detach()) * _per_token(adv.detach(), logp), mask)

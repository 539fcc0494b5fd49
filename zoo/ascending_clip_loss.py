"""Pitfall: the sign of PPO's loss flipped, so the optimiser ascends it (module step 4.4.2).

``ppo_clip_loss`` returns the clipped objective itself instead of its negation: minimising it lowers
the probability of every token with a positive advantage. At θ = θ_old its gradient is minus
REINFORCE's, and the key test fails.
"""

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def ppo_clip_loss(logp, logp_old, adv, eps=0.2, mask=None):
    return -impl.ppo_clip_loss(logp, logp_old, adv, eps, mask)

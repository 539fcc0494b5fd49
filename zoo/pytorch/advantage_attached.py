"""Pitfall: the advantage not detached, so the policy loss trains the critic (module step 4.3.1).

``reinforce_loss`` multiplies logp by an advantage that still carries the critic's graph: the gradient
of -Â log π reaches Â, and through it the value head, which then learns to make advantages large
instead of accurate. The loss's value is right; only the graph shows the bug.
"""

import torch  # noqa: F401  (a PyTorch module: the harness hands it tensors)

from examples.torch_rl import *  # noqa: F403
from examples.torch_rl import __all__, _masked_mean, _per_token  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is examples.torch_rl's, on purpose


def reinforce_loss(logp, adv, mask=None):
    return -_masked_mean(_per_token(adv, logp) * logp, mask)

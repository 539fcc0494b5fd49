"""Pitfall: the REINFORCE loss averaged over every token, padding and prompt included (module step 4.5.1).

``reinforce_loss`` takes the plain mean of -Â logp over the [B, T] batch and never reads the mask: the
padded positions count in the denominator and in the gradient, so the update of a batch of short answers
depends on how much padding it carries.
"""

import numpy as np

from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def reinforce_loss(logp, adv, mask=None):
    logp, adv = np.asarray(logp), np.asarray(adv)
    adv = adv if adv.shape == logp.shape else adv[:, None]
    return float(-(adv * logp).mean())

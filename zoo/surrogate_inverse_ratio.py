"""Pitfall: a surrogate loss whose gradient is Â / r, right only at θ_old (module step 4.4.1).

``surrogate_loss`` is written as the masked mean of Â exp(logp_old - logp) = Â / r: its gradient with
respect to logp is -Â / r per token, which is REINFORCE's -Â at θ = θ_old, so the syllabus's key test
taken only at θ_old passes, and the ratio-weighted -r Â it must be everywhere else is missed.
"""

import numpy as np

from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def surrogate_loss(logp, logp_old, adv, mask=None):
    logp, logp_old, adv = np.asarray(logp), np.asarray(logp_old), np.asarray(adv)
    adv = adv if adv.shape == logp.shape else adv[:, None]
    mask = np.ones(logp.shape) if mask is None else np.asarray(mask)
    return float((mask * adv * np.exp(logp_old - logp)).sum() / mask.sum())

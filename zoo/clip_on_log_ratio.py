"""Pitfall: PPO's clip applied to the log-ratio instead of the ratio (module step 4.4.2).

``ppo_clip_loss`` clips logp - logp_old to [-ε, ε] and exponentiates: its plateaus start at e^-ε and
e^ε, not at 1 - ε and 1 + ε, so the band is lopsided (0.819 to 1.221 for ε = 0.2) and the loss differs
from min(r Â, clip(r, 1-ε, 1+ε) Â) on every token between the two edges.
"""

import numpy as np

from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def ppo_clip_loss(logp, logp_old, adv, eps=0.2, mask=None):
    logp, logp_old, adv = np.asarray(logp), np.asarray(logp_old), np.asarray(adv)
    adv = adv if adv.shape == logp.shape else adv[:, None]
    mask = np.ones(logp.shape) if mask is None else np.asarray(mask)
    log_ratio = logp - logp_old
    objective = np.minimum(np.exp(log_ratio) * adv, np.exp(np.clip(log_ratio, -eps, eps)) * adv)
    return float(-(mask * objective).sum() / mask.sum())

"""Pitfall: an action-dependent baseline (module step 4.2.1).

``baseline_advantages`` subtracts the baseline of the state *after* the action, b(s_{t+1}), an
off-by-one in the array of values: A_t = G_t - b_{t+1}, with b_T = 0 after the last step. The
next state depends on a_t, so the baseline does too and the estimator is biased. A scalar
(constant) baseline has nothing to shift and is subtracted as it is.
"""

import numpy as np

from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def baseline_advantages(g_t, b_t):
    g_t, b_t = np.asarray(g_t), np.asarray(b_t)
    if b_t.ndim == 0:
        return g_t - b_t
    b_next = np.zeros_like(b_t)
    b_next[:-1] = b_t[1:]
    return g_t - b_next

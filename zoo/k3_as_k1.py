"""Pitfall: k1 = -log r reported as the non-negative KL diagnostic k3 (module step 4.4.4).

``kl_k3`` returns -log r instead of (r - 1) - log r. Both are unbiased for KL(π_old || π), but k1
is negative whenever r > 1, so a batch mean can be negative and the diagnostic is noisier.
"""

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def kl_k3(log_ratio):
    return impl.kl_k1(log_ratio)

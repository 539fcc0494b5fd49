"""Pitfall: the group mean used where the leave-one-out baseline is claimed (module step 4.2.4).

``leave_one_out_advantages`` returns R_i - mean_j R_j, the mean including R_i itself, instead of
R_i - (1/(G-1)) Σ_{j≠i} R_j. The two are collinear (a factor G/(G-1) apart), so only checks of the
scale or of the estimator's expectation, which shrinks to (G-1)/G of the gradient, can tell.
"""

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def leave_one_out_advantages(r_i):
    return impl.group_centered_advantages(r_i)

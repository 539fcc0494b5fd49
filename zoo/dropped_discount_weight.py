"""Pitfall: γ^t dropped from the gradient of the literal discounted objective (module step 4.1.4).

``discounted_objective_weights`` returns the reward-to-go G_t instead of γ^t G_t. Over a finite
horizon that is the gradient of a different objective, and its direction can differ.
"""

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def discounted_objective_weights(r_t, gamma):
    return impl.discounted_returns(r_t, gamma)

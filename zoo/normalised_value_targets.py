"""Pitfall: value targets built from normalised advantages (module step 4.3.3).

``value_targets`` returns V_old(s_t) + normalise(Â)_t instead of V_old(s_t) + Â_t: the actor's
step-size choice then moves what the critic learns, and the critic no longer regresses on the
λ-return.
"""

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def value_targets(v_old_t, advantage_t):
    return impl.value_targets(v_old_t, impl.normalize_advantages(advantage_t))

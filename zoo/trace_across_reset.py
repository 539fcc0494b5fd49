"""Pitfall: the GAE recursion carried across episode resets (module steps 4.3.3 and 4.3.4).

``gae_advantages`` runs Â_t = δ_t + γλ Â_{t+1} through the whole buffer, ignoring ``trace_cut_t``:
only the bootstrap inside δ_t is masked (by ``terminated_t``). After every termination, truncation
or buffer edge, the next episode's TD errors flow back into the previous episode's advantages.
"""

import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    never_cut = np.zeros(np.shape(trace_cut_t), dtype=int)
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, never_cut, gamma, lambda_, carry=carry)

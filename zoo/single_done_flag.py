"""Pitfall: one ``done`` flag, ``terminated``, used as both GAE's bootstrap mask and its trace cut (module step 4.3.4).

``gae_advantages`` ignores ``trace_cut_t`` and stops the recursion only where ``terminated_t`` is
set, the single flag of a loop that reads ``done = terminated``: at a time-limit truncation the
bootstrap is kept (rightly) but the recursion runs on into the next episode, whose rewards and
values leak into the truncated episode's advantages. The end of the array still cuts the trace.
"""

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, terminated_t, gamma, lambda_, carry=carry)

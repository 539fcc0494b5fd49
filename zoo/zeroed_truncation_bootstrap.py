"""Pitfall: the bootstrap zeroed at a time-limit truncation (module step 4.3.4).

``gae_advantages`` drops V(s_{t+1}) wherever the trace is cut inside the array, as a loop does that
feeds ``done = terminated or truncated`` to the bootstrap mask: a truncated episode is scored as
if it had ended, and its value targets are biased towards zero. The trace is cut correctly, and
the array's last step keeps its bootstrap. (Inside the array the function cannot tell a
truncation from a buffer edge, so an interior buffer edge loses its bootstrap too.)

This is CleanRL's idiom (``ppo.py``: ``next_done = np.logical_or(terminations, truncations)``,
then ``nextnonterminal = 1.0 - dones[t + 1]`` both zeroes ``values[t + 1]`` and stops the
recursion, with ``next_value`` and ``next_done`` at the buffer's last row), mapped onto the
contract's arguments: every cut inside the array is a reset, and the last row bootstraps unless
it terminated (there the contract cannot tell a truncation from a buffer edge). It is the
incorrect half of a documented pair; the correct half, Stable-Baselines3's idiom, which folds
γ·V(final observation) into the truncated step's reward before cutting with one flag, is
``examples.alternatives.sb3_gae`` (``examples/README.md``, ``tests/test_gae_alternatives.py``).
"""

import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    reset_t = np.asarray(trace_cut_t) != 0
    reset_t[-1:] = False
    done_t = (np.asarray(terminated_t) != 0) | reset_t
    return impl.gae_advantages(r_t, v_t, v_tp1, done_t.astype(int), trace_cut_t, gamma, lambda_, carry=carry)

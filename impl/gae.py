"""Temporal-difference errors and generalized advantage estimation (GAE).

Indexing follows the arrays a rollout buffer stores, one entry per transition t in [0, T):
``r_t`` is the reward that followed action a_t (the module writes it r_{t+1}), ``v_t`` is
V(s_t) and ``v_tp1`` is V(s_{t+1}), the value of the observation that followed a_t. At a
time-limit truncation that observation is the last one before ``reset()``, which is why
``v_tp1`` is its own argument and not ``v_t`` shifted by one.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def td_errors(r_t: ArrayLike, v_t: ArrayLike, v_tp1: ArrayLike, terminated_t: ArrayLike, gamma: float
              ) -> np.ndarray:
    """δ_t = r_t + γ (1 - terminated_t) V(s_{t+1}) - V(s_t)  (module step 4.3.4).

    Args:
      r_t: rewards for t in [0, T), shape [T, ...].
      v_t: V(s_t) for t in [0, T).
      v_tp1: V(s_{t+1}) for t in [0, T).
      terminated_t: 1 where s_{t+1} is a true terminal state (no continuation, no bootstrap).
      gamma: the discount γ.

    Returns:
      the TD errors, shape [T, ...].
    """
    r_t, v_t, v_tp1, terminated_t = map(np.asarray, (r_t, v_t, v_tp1, terminated_t))
    return r_t + gamma * (1 - terminated_t) * v_tp1 - v_t


def gae_advantages(r_t: ArrayLike, v_t: ArrayLike, v_tp1: ArrayLike, terminated_t: ArrayLike,
                   trace_cut_t: ArrayLike, gamma: float, lambda_: float) -> np.ndarray:
    """Â_t = δ_t + γ λ (1 - trace_cut_t) Â_{t+1}, with separate bootstrap and trace masks.

    Schulman et al. (2016), "High-Dimensional Continuous Control Using Generalized Advantage
    Estimation", eq. 16, written as the backward recursion of module step 4.3.3 with the two
    masks of step 4.3.4: ``terminated_t`` stops the bootstrap inside δ_t, ``trace_cut_t`` stops
    the recursion. Equivalently Â_t = Σ_{l=0}^{L_t-1} (γλ)^l δ_{t+l} over the uncut fragment.

    Args:
      r_t, v_t, v_tp1, terminated_t: as in :func:`td_errors`, shape [T] or [T, n_envs].
      trace_cut_t: 1 where Â_{t+1} is not part of this trace: before a reset (termination or
        truncation) and where a fragment ends. The end of the array always cuts the trace.
      gamma: the discount γ.
      lambda_: the GAE parameter λ in [0, 1].

    Returns:
      advantages shaped like ``r_t``.
    """
    delta_t = td_errors(r_t, v_t, v_tp1, terminated_t, gamma)
    continue_t = gamma * lambda_ * (1 - np.asarray(trace_cut_t))
    advantage_t = np.empty_like(delta_t)
    carried = delta_t[0] * 0
    for t in range(delta_t.shape[0] - 1, -1, -1):
        carried = delta_t[t] + continue_t[t] * carried
        advantage_t[t] = carried
    return advantage_t

"""Temporal-difference errors, n-step estimates and generalized advantage estimation (GAE).

Indexing follows the arrays a rollout buffer stores, one entry per transition t in [0, T):
``r_t`` is the reward that followed action a_t (the module writes it r_{t+1}), ``v_t`` is
V(s_t) and ``v_tp1`` is V(s_{t+1}), the value of the observation that followed a_t. At a
time-limit truncation that observation is the last one before ``reset()``, which is why
``v_tp1`` is its own argument and not ``v_t`` shifted by one.

Two masks keep apart the questions a single ``done`` flag mixes (module step 4.3.4):
``terminated_t`` says s_{t+1} is a true terminal state, so nothing is bootstrapped from it;
``trace_cut_t`` says transition t+1 is not part of this trace (a reset follows, or the local
buffer ends there), so the recursion stops. The end of the array cuts the trace too, unless
the advantage that follows it is passed in (``carry``, the streaming form).

Arrays are shaped [T] or [T, n_envs] (any trailing shape), time first. Object arrays of
``fractions.Fraction`` stay exact in every function here: only +, -, * and / are used on them.
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


def n_step_advantages(r_t: ArrayLike, v_t: ArrayLike, v_tp1: ArrayLike, terminated_t: ArrayLike,
                      trace_cut_t: ArrayLike, gamma: float, n: int) -> np.ndarray:
    """Â_t^(n) = Σ_{l=0}^{n-1} γ^l r_{t+l} + γ^n V(s_{t+n}) - V(s_t), stopped at the fragment's end.

    Module step 4.3.2 (with the module's r_{t+l+1} written r_{t+l}); Sutton & Barto's n-step
    return minus the value. Where the fragment that contains t ends at K < t + n - 1 (a
    ``trace_cut_t`` or the end of the array), the sum stops at K and the tail is
    γ^{K-t+1} (1 - terminated_K) V(s_{K+1}): n = 1 is the TD error, and an n that reaches a
    true terminal gives the Monte Carlo return minus V(s_t).

    Args:
      r_t, v_t, v_tp1, terminated_t, trace_cut_t: as in :func:`gae_advantages`.
      gamma: the discount γ.
      n: the horizon, n >= 1.

    Returns:
      the n-step advantage estimates, shaped like ``r_t``.
    """
    if n < 1:
        raise ValueError(f"the horizon n must be at least 1, got {n}")
    r_t, v_t, v_tp1, terminated_t = map(np.asarray, (r_t, v_t, v_tp1, terminated_t))
    length = r_t.shape[0]
    ends_here = np.asarray(trace_cut_t) != 0
    ends_here[-1:] = True
    exact = object in (r_t.dtype, v_t.dtype, v_tp1.dtype)
    estimate = (-v_t).astype(object if exact else float)
    # inside[t]: step t + lag still belongs to the fragment of step t.
    inside = np.ones(r_t.shape, dtype=bool)
    for lag in range(min(n, length)):
        kept = slice(0, length - lag)
        later = slice(lag, length)
        stops = inside[kept] & (ends_here[later] | (lag == n - 1))
        tail = gamma ** (lag + 1) * (1 - terminated_t[later]) * v_tp1[later]
        estimate[kept] = (estimate[kept] + np.where(inside[kept], gamma**lag * r_t[later], 0)
                          + np.where(stops, tail, 0))
        inside[kept] &= ~ends_here[later]
    return estimate


def gae_advantages(r_t: ArrayLike, v_t: ArrayLike, v_tp1: ArrayLike, terminated_t: ArrayLike,
                   trace_cut_t: ArrayLike, gamma: float, lambda_: float, *, carry: ArrayLike | None = None
                   ) -> np.ndarray:
    """Â_t = δ_t + γ λ (1 - trace_cut_t) Â_{t+1}, with separate bootstrap and trace masks.

    Schulman et al. (2016), "High-Dimensional Continuous Control Using Generalized Advantage
    Estimation", eq. 16, written as the backward recursion of module step 4.3.3 with the two
    masks of step 4.3.4: ``terminated_t`` stops the bootstrap inside δ_t, ``trace_cut_t`` stops
    the recursion. Equivalently Â_t = Σ_{l=0}^{L_t-1} (γλ)^l δ_{t+l} over the uncut fragment.

    Streaming: a long trajectory split into consecutive buffers can be processed from its last
    buffer to its first, passing ``carry=`` the first advantage of the buffer after this one
    and leaving this buffer's last ``trace_cut_t`` at 0 where the episode goes on. The pieces
    then equal GAE over the unsplit trajectory; without ``carry`` (a batch) the trace is cut
    at the buffer's end and the tail is bootstrapped from V(s_T) inside δ_{T-1} only.

    Args:
      r_t, v_t, v_tp1, terminated_t: as in :func:`td_errors`, shape [T] or [T, n_envs].
      trace_cut_t: 1 where Â_{t+1} is not part of this trace: before a reset (termination or
        truncation) and where a fragment ends; any nonzero value cuts. A rollout's masks
        satisfy: ``terminated_t`` implies ``trace_cut_t``, and where ``trace_cut_t`` is 0
        (t < T-1) ``v_tp1[t]`` is the next row's ``v_t[t+1]``; the claims draw inputs from
        that domain, so an implementation may rely on it.
      gamma: the discount γ.
      lambda_: the GAE parameter λ in [0, 1].
      carry: Â_T, the advantage of the transition after the last one, shape [] or [n_envs];
        used only where ``trace_cut_t`` of the last transition is 0. Default: the trace ends.

    Returns:
      advantages shaped like ``r_t``, exact for Fractions. One step of the recursion at a time,
      every environment at once: at the course's buffer sizes GAE is a negligible share of any
      experiment (docs/performance.md measured it), so the reference is the recursion as written.
    """
    delta_t = td_errors(r_t, v_t, v_tp1, terminated_t, gamma)
    # 1 - trace_cut_t as integers keeps Fractions exact and makes any nonzero value a cut.
    continue_t = gamma * lambda_ * (1 - (np.asarray(trace_cut_t) != 0).astype(int))
    advantage_tp1 = 0 if carry is None else np.asarray(carry)
    advantages = []
    for t in reversed(range(delta_t.shape[0])):
        advantage_tp1 = delta_t[t] + continue_t[t] * advantage_tp1
        advantages.append(advantage_tp1)
    return np.array(advantages[::-1]).reshape(delta_t.shape)


def value_targets(v_old_t: ArrayLike, advantage_t: ArrayLike) -> np.ndarray:
    """V̂_t = V_old(s_t) + Â_t, the critic's regression target (module step 4.3.3).

    The target uses the advantages as estimated, never normalised ones: normalisation is a
    choice about the actor's step size and must not move what the critic learns.
    """
    return np.asarray(v_old_t) + np.asarray(advantage_t)


def normalize_advantages(advantage_t: ArrayLike, eps: float = 1e-8) -> np.ndarray:
    """(Â - mean Â) / (std Â + eps) over the whole batch, as a new array.

    A common per-batch rescaling of the actor's coefficients; it leaves ``advantage_t`` itself
    untouched, so value targets built from it are unaffected.

    Args:
      advantage_t: advantages, any shape; statistics are over all entries.
      eps: keeps the division finite for a batch of equal advantages.
    """
    advantage_t = np.asarray(advantage_t, dtype=float)
    return (advantage_t - advantage_t.mean()) / (advantage_t.std() + eps)

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

# Steps per block when discounted suffix sums are evaluated at a few points: the points cost a
# window of this many steps each, the whole buffer one matrix product and a filter over blocks.
_BLOCK = 16


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
      advantages shaped like ``r_t``: exact for Fractions; for floats, within rounding of the
      step-by-step loop (one vectorized filter, see :func:`_fragment_filter` for the bound).
    """
    delta_t = td_errors(r_t, v_t, v_tp1, terminated_t, gamma)
    if delta_t.dtype != object:
        delta_t = delta_t.astype(float, copy=False)
    cut_t = np.asarray(trace_cut_t) != 0
    if carry is not None:
        delta_t[-1] = delta_t[-1] + gamma * lambda_ * (1 - cut_t[-1]) * np.asarray(carry)
    if delta_t.dtype == object or delta_t.shape[0] == 0:
        return _backward_recursion(delta_t, cut_t, gamma * lambda_)
    return _fragment_filter(delta_t, cut_t, gamma * lambda_)


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


def _backward_recursion(x_t: np.ndarray, cut_t: np.ndarray, discount: float) -> np.ndarray:
    """y_t = x_t + discount (1 - cut_t) y_{t+1}, y_T = 0, one step at a time (exact for Fractions)."""
    continue_t = discount * (1 - cut_t.astype(int))
    y_t = np.empty_like(x_t)
    carried = x_t[0] * 0 if len(x_t) else 0
    for t in range(x_t.shape[0] - 1, -1, -1):
        carried = x_t[t] + continue_t[t] * carried
        y_t[t] = carried
    return y_t


def _fragment_filter(x_t: np.ndarray, cut_t: np.ndarray, discount: float) -> np.ndarray:
    """The same recursion for floats, as one ``scipy.signal.lfilter`` pass with the cuts folded into its input.

    ``lfilter`` runs y_t = x_t + discount y_{t+1} with no cuts. Cutting the trace after step e
    means the recursion must not carry discount * y_{e+1} into step e; subtracting exactly that
    from x_e cancels it. y_{e+1} is the discounted sum over the fragment that starts at e+1,
    F_{e+1} - discount^{e'-e} F_{e'+1} with e' that fragment's last step and F the cut-free
    discounted suffix sums, which :func:`_discounted_suffix_sums` evaluates at the few points
    after cuts. ``x_t`` is overwritten.

    The result differs from the step-by-step loop only by rounding, but that rounding scales with
    the cut-free sums: per step at most about 4 T eps max_t Σ_{s>=t} discount^{s-t} |x_s| over
    the rest of the column (T steps), which at discount = 1 is the column's whole absolute sum.
    A NaN reaches every earlier step of its column, as in the loop, where 0 * NaN is NaN.
    """
    length = x_t.shape[0]
    columns = x_t.reshape(length, -1)
    n_columns = columns.shape[1]
    end, column = np.divmod(np.flatnonzero(cut_t.reshape(length, -1)[:-1]), n_columns)
    if end.size:
        by_column = np.lexsort((end, column))
        end, column = end[by_column], column[by_column]
        fragment_end = np.empty_like(end)
        fragment_end[:-1] = end[1:]
        last_cut_of_column = np.ones(end.size, dtype=bool)
        last_cut_of_column[:-1] = column[1:] != column[:-1]
        fragment_end[last_cut_of_column] = length - 1
        suffix = _discounted_suffix_sums(columns, discount, np.concatenate([end + 1, fragment_end + 1]),
                                         np.concatenate([column, column]))
        following_fragment = suffix[:end.size] - discount ** (fragment_end - end) * suffix[end.size:]
        columns[end, column] -= discount * following_fragment
    return _first_order_filter(columns[::-1], discount)[::-1].reshape(x_t.shape)


def _discounted_suffix_sums(x_t: np.ndarray, discount: float, at_t: np.ndarray, at_column: np.ndarray) -> np.ndarray:
    """F_p = Σ_{s=p}^{T-1} discount^{s-p} x_{s, c} at the points (p, c) of a [T, n] array, p in [0, T], without cuts.

    The discounted sum of every block of ``_BLOCK`` steps is one matrix product; a short
    ``lfilter`` over the blocks turns them into F at every block's first step; F_p is then the
    rest of p's block (its steps dotted with the discounts) plus the discounted F of the next block.
    """
    length, n_columns = x_t.shape
    full_blocks, remainder = divmod(length, _BLOCK)
    n_blocks = full_blocks + (remainder > 0)
    powers = discount ** np.arange(_BLOCK)
    block_sums = np.empty((n_blocks, n_columns))
    block_sums[:full_blocks] = np.matmul(powers, x_t[:full_blocks * _BLOCK].reshape(full_blocks, _BLOCK, n_columns))
    if remainder:
        block_sums[full_blocks] = powers[:remainder] @ x_t[full_blocks * _BLOCK:]
    at_block_start = np.zeros((n_blocks + 2, n_columns))
    at_block_start[:n_blocks] = _first_order_filter(block_sums[::-1], discount**_BLOCK)[::-1]
    block = at_t // _BLOCK
    rest_of_block = np.minimum((block + 1) * _BLOCK, length) - at_t
    # Row r holds the first r discounts and zeros after them, so steps past the block (or past T) weigh nothing.
    truncated_powers = np.where(np.arange(_BLOCK) < np.arange(_BLOCK + 1)[:, None], powers, 0.0)
    steps = np.minimum(at_t[:, None] + np.arange(_BLOCK), length - 1)
    within_block = np.einsum("ij,ij->i", x_t[steps, at_column[:, None]], truncated_powers[rest_of_block])
    return within_block + discount**rest_of_block * at_block_start[block + 1, at_column]


def _first_order_filter(x_t: np.ndarray, discount: float) -> np.ndarray:
    """y_t = x_t + discount y_{t-1} down axis 0, from y_{-1} = 0: ``lfilter([1], [1, -discount], x_t, axis=0)``.

    scipy.signal is imported at the first call, not with this module: importing it takes about a
    second (it brings scipy.stats along), which every user of the package would pay at ``import
    impl`` whether or not anything computes an advantage.
    """
    from scipy.signal import lfilter

    return lfilter([1.0], [1.0, -discount], x_t, axis=0)

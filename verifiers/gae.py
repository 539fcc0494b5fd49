"""TD errors, n-step estimates and GAE with two masks (module lesson 4.3, steps 4.3.2-4.3.4; week 16 step 1).

Random rollout buffers here are built from *events*, the rows of the module's table in step
4.3.4: after each transition the episode goes on (ordinary), reaches a true terminal
(terminated), is cut by a time limit and reset (truncated), or the buffer stops while the
episode goes on (buffer edge). The references are computed from the events, never from the
masks impl receives, so they also check that the masks say what the table says.

Every buffer handed to impl is one a rollout can store: a termination also cuts the trace (a
reset follows it), and where the trace goes on, V(s_{t+1}) is the next row's V(s_t). A correct
GAE may rely on both, as Stable-Baselines3's does (``examples/alternatives/sb3_gae.py``).

Also: how large a long target's variance gets, and that a random next state alone makes it noisy where a
deterministic one does not (4.3.2); where the bootstrapped tail at a rollout's edge weighs most (4.3.3: short
buffers, long episodes); and, from the week-16 syllabus, the value head's regression target (its fixed point
is V^π of the sampling policy, and V* is not one unless that policy is optimal) and λ, which mixes horizons
without pricing the future (with the exact V^π, GAE's mean given (s_t, a_t) is A^π(s_t, a_t) for every λ).
Those MDPs are exact and random, with V^π by sympy's solve and V* by policy iteration (``verifiers.tabular``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field

from claims_harness import Context, Declined, NoParams, Unsupported, assume, check_property, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, discounted_exact_mdps, exact_action_values, exact_policy_values, over
from verifiers._numeric import as_written, assert_close, largest_magnitude, rounding_bound
from verifiers._reach import reach_mdp
from verifiers.actor_critic import (
    Chain,
    _chain_estimates,
    _chain_paths,
    _mean_and_variance,
    chain_critic,
    chain_values,
    reach_chain,
)
from verifiers.tabular import episodic_mdps_any_discount, exact_optimal_values, reach_tabular

ORDINARY, TERMINATED, TRUNCATED, BUFFER_EDGE = "ordinary", "terminated", "truncated", "buffer_edge"
EVENTS = (ORDINARY, TERMINATED, TRUNCATED, BUFFER_EDGE)
# The harness's bound on the epsilon normalize_advantages adds to the standard deviation, which is
# there only to keep the division finite (Stable-Baselines3 and CleanRL add 1e-8).
STABILISER_AT_MOST = 1e-5


def reach_buffer(gamma: object, length: int) -> None:
    """What a buffer witness reached: its discount, and its length as the horizon of the trajectory it holds.

    Its values V(s_t) are drawn numbers, a critic's, never V^π of an environment: the advantages
    computed from them are estimates.
    """
    reach(discount=gamma, horizon=length, advantages="estimated")


@verifier(kind="symbolic")
def telescoping_symbolic(ctx: Context) -> dict[str, object]:
    """Σ_{l=0}^{n} γ^l δ_{t+l} = Σ_{l=0}^{n} γ^l r_{t+l+1} + γ^{n+1} V_{t+n+1} - V_t, by induction on n.

    The horizon n, the start t and γ are symbols, so zero residuals in the base case (n = 0)
    and in the inductive step (n -> n + 1) prove the identity for every segment length. The
    partial reward sum is an opaque symbol P_n with P_{n+1} = P_n + γ^{n+1} r_{t+n+2}.
    """
    gamma, partial_rewards = sp.symbols("gamma P_n")
    n, t = sp.symbols("n t", integer=True, nonnegative=True)
    r, v = sp.IndexedBase("r"), sp.IndexedBase("V")

    def delta(k: sp.Expr) -> sp.Expr:
        return r[k + 1] + gamma * v[k + 1] - v[k]

    def right_side(horizon: sp.Expr, rewards: sp.Expr) -> sp.Expr:
        return rewards + gamma ** (horizon + 1) * v[t + horizon + 1] - v[t]

    # γ carries no assumption, so the proof speaks for γ = 1 and γ < 1; the segment has n + 1 steps, n >= 0.
    reach(discount=gamma, horizon=n + 1)
    base = delta(t) - right_side(0, r[t + 1])
    next_rewards = partial_rewards + gamma ** (n + 1) * r[t + n + 2]
    step = (right_side(n + 1, next_rewards) - right_side(n, partial_rewards)) - gamma ** (n + 1) * delta(t + n + 1)
    return {"base_case_residual": sp.simplify(sp.expand(base)),
            "inductive_step_residual": sp.simplify(sp.expand(step))}


_values = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)
_segments = st.integers(min_value=1, max_value=40).flatmap(
    lambda length: st.tuples(
        st.arrays(np.float64, length, elements=_values),
        st.arrays(np.float64, length + 1, elements=_values),
        st.booleans(),
        st.booleans(),
        st.floats(min_value=0.0, max_value=1.0),
    ))


@verifier(kind="property", uses=("gae_advantages",))
@given(_segments)
def telescoping_property(ctx: Context, segment: tuple[np.ndarray, np.ndarray, bool, bool, float]) -> None:
    """impl's GAE with λ = 1 on a random uncut segment equals the discounted rewards plus
    γ^{K-t+1} V(s_{K+1}) minus V(s_t); at a true terminal the tail is 0.

    The segment's last step cuts the trace at a terminal (a reset follows it) and, drawn at random,
    at a buffer edge; without the cut the end of the array ends the segment all the same.
    """
    rewards, values, terminal, edge_marked, gamma = segment
    length = len(rewards)
    reach_buffer(gamma, length)
    terminated, trace_cut = np.zeros(length), np.zeros(length)
    terminated[-1] = float(terminal)
    trace_cut[-1] = float(terminal or edge_marked)
    advantages = ctx.impl.gae_advantages(rewards, values[:-1], values[1:], terminated, trace_cut, gamma, 1.0)
    tail = 0.0 if terminal else values[-1]
    for t in range(length):
        discounts = gamma ** np.arange(length - t)
        expected = discounts @ rewards[t:] + gamma ** (length - t) * tail - values[t]
        bound = rounding_bound(4 * length, np.abs(rewards).sum() + np.abs(values).sum())
        assert_close(advantages[t], expected, bound, f"the λ = 1 advantage at step {t}")


# Buffers built from events ------------------------------------------------------------------


def masks(events: Sequence[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """terminated_t and trace_cut_t for events of any shape, as the table of step 4.3.4 sets them.

    A termination cuts the trace as well: a reset follows it, and the text sets trace_cut to 1
    before every reset. These are the only mask pairs a rollout stores.
    """
    events = np.asarray(events)
    return (events == TERMINATED).astype(float), (events != ORDINARY).astype(float)


def reference_gae(events: Sequence[str], r: Sequence, v: Sequence, v_next: Sequence, gamma: object,
                  lambda_: object) -> list:
    """Â_t = Σ_{k=t}^{e} (γλ)^{k-t} δ_k term by term, from the events alone.

    e is the first step at or after t whose event ends the trace (anything but an ordinary
    transition) or the column's last step; δ_k bootstraps from V(s_{k+1}) unless event k is a
    true termination.
    """
    advantages = []
    for t in range(len(events)):
        total, weight = 0, 1
        for k in range(t, len(events)):
            bootstrap = 0 if events[k] == TERMINATED else v_next[k]
            total = total + weight * (r[k] + gamma * bootstrap - v[k])
            if events[k] != ORDINARY:
                break
            weight = weight * gamma * lambda_
        advantages.append(total)
    return advantages


def fragment_end(events: Sequence[str], t: int) -> int:
    """The last step of the trace that contains step t."""
    return next((k for k in range(t, len(events)) if events[k] != ORDINARY), len(events) - 1)


_event_draws = st.sampled_from((ORDINARY, ORDINARY, ORDINARY, TERMINATED, TRUNCATED, BUFFER_EDGE))


def _floats(low: float, high: float) -> st.SearchStrategy:
    return st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False)


# Exact numbers are eighths in [-10, 10] and discounts sixteenths in [0, 1]: st.fractions() is
# far slower to draw from, and these denominators already make every product exact and distinct.
_EXACT_NUMBERS = st.integers(-80, 80).map(lambda k: Fraction(k, 8))
_EXACT_DISCOUNTS = st.integers(0, 16).map(lambda k: Fraction(k, 16))
_NUMBERS = {False: _floats(-100, 100), True: _EXACT_NUMBERS}
_DISCOUNTS = {False: _floats(0, 1), True: _EXACT_DISCOUNTS}


def _column(length: int, drawn: tuple) -> tuple[list, list, list, list]:
    """One environment's column in which every event of the table happens before the last step.

    V(s_{t+1}) is the next step's V(s_t) after an ordinary transition; after a truncation it is
    the last observation before the reset, after a termination a value the GAE must ignore, and
    at a buffer edge the value of a state the next buffer starts from: all drawn independently.
    """
    events, positions, order, numbers = drawn
    for event, position in zip(order, positions, strict=True):
        events[position] = event
    r, v, free = numbers[:length], numbers[length:2 * length], numbers[2 * length:]
    v_next = [v[t + 1] if events[t] == ORDINARY and t + 1 < length else free[t] for t in range(length)]
    return events, r, v, v_next


@functools.cache
def _buffers_of_length(length: int, exact: bool) -> st.SearchStrategy:
    """1 to 3 environments' columns of ``length`` steps, with γ and λ."""
    column = st.tuples(
        st.lists(_event_draws, min_size=length, max_size=length),
        st.lists(st.integers(0, length - 2), min_size=len(EVENTS), max_size=len(EVENTS), unique=True),
        st.permutations(EVENTS),
        st.lists(_NUMBERS[exact], min_size=3 * length, max_size=3 * length),
    ).map(functools.partial(_column, length))
    return st.tuples(st.lists(column, min_size=1, max_size=3), _DISCOUNTS[exact], _DISCOUNTS[exact])


_float_buffers = st.integers(min_value=len(EVENTS) + 1, max_value=24).flatmap(
    lambda length: _buffers_of_length(length, exact=False))
_exact_buffers = st.integers(min_value=len(EVENTS) + 1, max_value=10).flatmap(
    lambda length: _buffers_of_length(length, exact=True))


def _stacked(columns: list) -> dict[str, np.ndarray]:
    """The columns as [T, n_envs] arrays, with their masks; fractions give object arrays and integer masks."""
    exact = isinstance(columns[0][1][0], Fraction)
    r, v, v_next = (np.array([column[i] for column in columns], dtype=object if exact else float).T
                    for i in (1, 2, 3))
    terminated, trace_cut = (np.array(m, dtype=int if exact else float).T
                             for m in zip(*(masks(column[0]) for column in columns), strict=True))
    return {"r_t": r, "v_t": v, "v_tp1": v_next, "terminated_t": terminated, "trace_cut_t": trace_cut}


def _column_bound(column: tuple) -> float:
    """Rounding allowance for one column: every operation on terms bounded by the column's magnitudes."""
    _, r, v, v_next = column
    magnitude = float(np.abs(r).sum() + np.abs(v).sum() + np.abs(v_next).sum())
    return rounding_bound(4 * len(r), magnitude)


class Discounting(NoParams):
    """γ and λ of a GAE check."""

    gamma: float = Field(gt=0, le=1, description="the discount γ")
    gae_lambda: float = Field(gt=0, lt=1, description="the GAE parameter λ")


# Step 4.3.2: n-step estimates ------------------------------------------------------------------


@verifier(kind="property", uses=("n_step_advantages", "td_errors"))
@given(_exact_buffers)
def n_step_endpoints_property(ctx: Context, buffer: tuple) -> None:
    """On random buffers of exact numbers, impl's n-step estimate is δ_t at n = 1, the Monte Carlo
    return minus V(s_t) once n reaches a true terminal (n = T + 1 reaches every episode's end),
    and the definition at n = 1, 2, 3 and T + 1.

    The definition used here stops at the end e of t's fragment: with m = min(n, e - t + 1),
    Σ_{l<m} γ^l r_{t+l} + γ^m (1 - terminated_{t+m-1}) V(s_{t+m}) - V(s_t).
    """
    columns, gamma, _ = buffer
    reach_buffer(gamma, len(columns[0][0]))
    arrays = _stacked(columns)
    delta = ctx.impl.td_errors(arrays["r_t"], arrays["v_t"], arrays["v_tp1"], arrays["terminated_t"], gamma)
    length = len(columns[0][0])
    estimates = {n: ctx.impl.n_step_advantages(*arrays.values(), gamma, n) for n in (1, 2, 3, length + 1)}
    assert np.array_equal(estimates[1], delta), ("n = 1", estimates[1], delta)
    for env, (events, r, v, v_next) in enumerate(columns):
        for t in range(length):
            end = fragment_end(events, t)
            for n, estimate in estimates.items():
                definition = _n_step_definition(events, r, v, v_next, gamma, n, t)
                assert estimate[t, env] == definition, (n, t, env, estimate[t, env], definition)
            if events[end] == TERMINATED:
                monte_carlo = sum(gamma ** (k - t) * r[k] for k in range(t, end + 1)) - v[t]
                assert estimates[length + 1][t, env] == monte_carlo, ("Monte Carlo", t, env)


def _n_step_definition(events: Sequence[str], r: Sequence, v: Sequence, v_next: Sequence, gamma: object, n: int,
                       t: int) -> object:
    """The n-step estimate at t by its definition, stopped at the end e of t's fragment: with m = min(n, e - t + 1),
    Σ_{l<m} γ^l r_{t+l} + γ^m (1 - terminated_{t+m-1}) V(s_{t+m}) - V(s_t)."""
    m = min(n, fragment_end(events, t) - t + 1)
    tail = 0 if events[t + m - 1] == TERMINATED else v_next[t + m - 1]
    return sum(gamma**lag * r[t + lag] for lag in range(m)) + gamma**m * tail - v[t]


@verifier(kind="property", uses=("n_step_advantages",))
@given(_float_buffers)
def n_step_definition_float_property(ctx: Context, buffer: tuple) -> None:
    """On random float buffers with all four events, impl's n-step estimate at n = 1, 2, 3 and T + 1 is the
    definition stopped at the fragment's end, within the rounding of the column's sums: the same check as
    the exact one, for implementations that compute only in floats."""
    columns, gamma, _ = buffer
    arrays = _stacked(columns)
    length = len(columns[0][0])
    reach_buffer(gamma, length)
    for n in (1, 2, 3, length + 1):
        estimate = ctx.impl.n_step_advantages(*arrays.values(), gamma, n)
        for env, column in enumerate(columns):
            expected = [_n_step_definition(*column, gamma, n, t) for t in range(length)]
            bound = _column_bound(column)
            assert_close(estimate[:, env], np.array(expected), bound, f"the {n}-step estimate of env {env}")


# Step 4.3.3: the recursion, its sum, λ = 0, the mixture of n-step estimates, value targets ----


@verifier(kind="symbolic")
def recursion_equals_sum_symbolic(ctx: Context) -> dict[str, object]:
    """S_L(t) = Σ_{l=0}^{L-1} c^l δ_{t+l} (c = γλ) solves Â_t = δ_t + c Â_{t+1} with Â = 0 past the
    fragment, by induction on the fragment length L.

    Base: S_1(t) = δ_t and the recursion gives δ_t + c·0. Step: assume S_L(t') = δ_{t'} + c S_{L-1}(t'+1)
    for every t'. The definition gives S_{L+1}(t) = S_L(t) + c^L δ_{t+L} and
    S_L(t+1) = S_{L-1}(t+1) + c^{L-1} δ_{t+L}; with S_{L-1}(t+1) an opaque symbol X, a zero residual
    of S_{L+1}(t) - (δ_t + c S_L(t+1)) proves the step for symbolic L, t, γ and λ. Neither γ nor λ
    carries an assumption: the proof speaks for γ = 1 as for γ < 1.
    """
    gamma, lambda_, rest = sp.symbols("gamma lambda X")
    c = gamma * lambda_
    length = sp.Symbol("L", integer=True, positive=True)
    reach(discount=gamma, horizon=length)
    t = sp.Symbol("t", integer=True)
    delta = sp.IndexedBase("delta")
    base = delta[t] - (delta[t] + c * 0)
    hypothesis_at_t = delta[t] + c * rest
    next_sum = rest + c ** (length - 1) * delta[t + length]
    longer_sum = hypothesis_at_t + c**length * delta[t + length]
    step = longer_sum - (delta[t] + c * next_sum)
    return {"base_case_residual": sp.simplify(base), "inductive_step_residual": sp.simplify(sp.expand(step))}


def _rollout(drawn: tuple) -> tuple:
    """gae_advantages' arguments as a rollout stores them, from one event per entry and free numbers.

    The masks follow the events. V(s_{t+1}) of a step that does not cut the trace is V(s_t) of the
    next row, the same state; after a cut, and at the last row, it is a free number (the last
    observation before a reset, a terminal state's value the GAE must ignore, or the state a next
    buffer starts from). Independent masks or next values would be inputs no rollout produces, on
    which a correct GAE that reads V(s_{t+1}) from the next row (Stable-Baselines3's) differs.
    """
    events, r, v, free, gamma, lambda_ = drawn
    terminated, trace_cut = masks(events)
    v_next = free.copy()
    v_next[:-1] = np.where(trace_cut[:-1] != 0, free[:-1], v[1:])
    return r, v, v_next, terminated, trace_cut, gamma, lambda_


@functools.cache
def _rollout_arrays_of_shape(shape: tuple[int, ...]) -> st.SearchStrategy:
    values = st.arrays(np.float64, shape, elements=_floats(-100, 100))
    events = st.arrays(np.dtype(f"U{max(map(len, EVENTS))}"), shape, elements=_event_draws)
    return st.tuples(events, values, values, values, _floats(0, 1), _floats(0, 1)).map(_rollout)


# Rollouts shaped [T] or [T, n_envs], events drawn entry by entry, and γ, λ. Some are longer than 32
# steps: a vectorised GAE may work in blocks (impl's of 16 steps), and a block's error can hide until
# a trace crosses into a block that is neither the last nor the one before it. One range of lengths, not
# two ranges to choose from: a failure found at 33 steps then shrinks to the fewest that fail, where the
# other choice would leave the shrinker at the upper range's bottom.
_rollout_arrays = st.tuples(st.integers(min_value=1, max_value=64),
                            st.integers(min_value=0, max_value=4)).flatmap(
    lambda size: _rollout_arrays_of_shape(size[:1] if size[1] == 0 else size))


def _fragment_sums(r: np.ndarray, v: np.ndarray, v_next: np.ndarray, terminated: np.ndarray,
                   trace_cut: np.ndarray, gamma: float, lambda_: float) -> np.ndarray:
    """Σ_{l=0}^{L_t-1} (γλ)^l δ_{t+l} written out, column by column, with L_t from trace_cut."""
    delta = r + gamma * (1 - terminated) * v_next - v
    columns = delta.reshape(len(delta), -1)
    cuts = trace_cut.reshape(len(delta), -1)
    sums = np.zeros_like(columns)
    for env in range(columns.shape[1]):
        for t in range(len(columns)):
            end = next((k for k in range(t, len(columns)) if cuts[k, env]), len(columns) - 1)
            weights = (gamma * lambda_) ** np.arange(end - t + 1)
            sums[t, env] = weights @ columns[t:end + 1, env]
    return sums.reshape(delta.shape)


def _array_bound(*arrays: np.ndarray) -> float:
    return rounding_bound(4 * len(arrays[0]), float(sum(np.abs(a).sum() for a in arrays)))


@verifier(kind="property", uses=("gae_advantages",))
@given(_rollout_arrays)
def recursion_equals_sum_property(ctx: Context, arrays: tuple) -> None:
    """impl's GAE on random [T] and [T, n_envs] rollouts (events drawn entry by entry, see
    :func:`_rollout`) equals the explicit sum Σ_{l=0}^{L_t-1} (γλ)^l δ_{t+l} over each uncut fragment."""
    reach_buffer(arrays[5], len(arrays[0]))
    advantages = ctx.impl.gae_advantages(*arrays)
    expected = _fragment_sums(*arrays)
    assert advantages.shape == expected.shape, (advantages.shape, expected.shape)
    bound = _array_bound(*arrays[:3])
    assert_close(advantages, expected, bound, "GAE against the explicit sum over each fragment")


@verifier(kind="property", uses=("gae_advantages", "td_errors"))
@given(_rollout_arrays)
def lambda_zero_property(ctx: Context, arrays: tuple) -> None:
    """With λ = 0, impl's GAE is the TD error δ_t = r_t + γ (1 - terminated_t) V(s_{t+1}) - V(s_t),
    both impl's own and the one written out here, on random rollouts with every event (:func:`_rollout`)."""
    r, v, v_next, terminated, trace_cut, gamma, _ = arrays
    reach_buffer(gamma, len(r))
    advantages = ctx.impl.gae_advantages(r, v, v_next, terminated, trace_cut, gamma, 0.0)
    written_out = r + gamma * (1 - terminated) * v_next - v
    bound = rounding_bound(4, float(np.abs(r).max() + np.abs(v).max() + np.abs(v_next).max()))
    assert_close(advantages, written_out, bound, "GAE at λ = 0 against the TD error written out")
    assert_close(advantages, ctx.impl.td_errors(r, v, v_next, terminated, gamma), bound,
                 "GAE at λ = 0 against impl's td_errors")


_terminal_episodes = st.integers(min_value=1, max_value=12).flatmap(
    lambda length: st.tuples(
        st.lists(_EXACT_NUMBERS, min_size=length, max_size=length),
        st.lists(_EXACT_NUMBERS, min_size=length + 1, max_size=length + 1),
        _EXACT_DISCOUNTS,
    ))


@verifier(kind="property", uses=("gae_advantages",))
@given(_terminal_episodes)
def terminal_monte_carlo_exact(ctx: Context, episode: tuple) -> None:
    """In exact arithmetic, impl's GAE with λ = 1 on an episode that ends in a true terminal is the
    Monte Carlo return Σ_k γ^k r_{t+k} minus V(s_t), whatever value the terminal state is given."""
    rewards, values, gamma = episode
    length = len(rewards)
    reach_buffer(gamma, length)
    terminated = np.zeros(length, dtype=int)
    terminated[-1] = 1
    advantages = ctx.impl.gae_advantages(np.array(rewards, dtype=object), np.array(values[:-1], dtype=object),
                                         np.array(values[1:], dtype=object), terminated, terminated, gamma, 1)
    for t in range(length):
        expected = sum(gamma ** (k - t) * rewards[k] for k in range(t, length)) - values[t]
        assert advantages[t] == expected, (t, advantages[t], expected)


@verifier(kind="symbolic")
def mixture_symbolic(ctx: Context) -> dict[str, object]:
    """The weight of δ_{t+l} in the λ-mixture of n-step estimates is (γλ)^l, for symbolic l and L.

    Â^(n) = Σ_{l<n} γ^l δ_{t+l} on a consistent fragment, so in (1-λ) Σ_{n≥1} λ^{n-1} Â^(n), δ_{t+l}
    carries γ^l times (1-λ) Σ_{n>l} λ^{n-1}. On a fragment of L steps every n ≥ L gives Â^(L),
    whose weights sum to λ^{L-1}: the coefficient is (1-λ) Σ_{n=l+1}^{L-1} λ^{n-1} + λ^{L-1}.
    Both that and the unbounded sum (for 0 < λ < 1) must equal λ^l, so that with γ^l the weight is (γλ)^l;
    γ > 0 is a symbol, every discount up to 1 included, and the fragment's length L is symbolic too,
    or unbounded.
    """
    gamma = sp.Symbol("gamma", positive=True)
    lambda_ = sp.Symbol("lambda", positive=True)
    n = sp.Symbol("n", integer=True, positive=True)
    lag = sp.Symbol("l", integer=True, nonnegative=True)
    length = sp.Symbol("L", integer=True, positive=True)
    finite = (1 - lambda_) * sp.summation(lambda_ ** (n - 1), (n, lag + 1, length - 1)) + lambda_ ** (length - 1)
    unbounded = (1 - lambda_) * sp.summation(lambda_ ** (n - 1), (n, lag + 1, sp.oo))
    below_one = sp.refine(sp.simplify(unbounded), sp.Q.lt(lambda_, 1))
    reach(discount=gamma, horizon=length)
    reach(discount=gamma, horizon=math.inf)
    weight = (gamma * lambda_) ** lag
    return {"finite_fragment_residual": sp.simplify(gamma**lag * finite - weight),
            "unbounded_residual": sp.simplify(gamma**lag * below_one - weight)}


@verifier(kind="property", uses=("gae_advantages", "n_step_advantages"))
@given(_exact_buffers)
def mixture_property(ctx: Context, buffer: tuple) -> None:
    """In exact arithmetic on random buffers with all four events, impl's GAE equals
    (1-λ) Σ_{n=1}^{L_t-1} λ^{n-1} Â_t^(n) + λ^{L_t-1} Â_t^(L_t) built from impl's n-step estimates,
    L_t being the number of steps from t to the end of its fragment."""
    columns, gamma, lambda_ = buffer
    arrays = _stacked(columns)
    length = len(columns[0][0])
    reach_buffer(gamma, length)
    advantages = ctx.impl.gae_advantages(*arrays.values(), gamma, lambda_)
    estimates = {n: ctx.impl.n_step_advantages(*arrays.values(), gamma, n) for n in range(1, length + 1)}
    for env, (events, *_) in enumerate(columns):
        for t in range(length):
            steps = fragment_end(events, t) - t + 1
            mixture = (sum((1 - lambda_) * lambda_ ** (n - 1) * estimates[n][t, env] for n in range(1, steps))
                       + lambda_ ** (steps - 1) * estimates[steps][t, env])
            assert advantages[t, env] == mixture, (t, env, advantages[t, env], mixture)


@verifier(kind="property", uses=("gae_advantages", "value_targets", "normalize_advantages"))
@given(_float_buffers)
def value_targets_property(ctx: Context, buffer: tuple) -> None:
    """impl's value targets are V_old(s_t) + Â_t; normalising the advantages returns a new array with
    mean 0 and standard deviation at most 1, and at least sqrt((N-1)/N) (1 - STABILISER_AT_MOST)
    when the spread of Â is 1 or more (the stabilising epsilon only keeps the division finite, and
    the sample standard deviation may be the divisor), and leaves Â, hence the targets, exactly as
    they were."""
    columns, gamma, lambda_ = buffer
    reach_buffer(gamma, len(columns[0][0]))
    arrays = _stacked(columns)
    advantages = ctx.impl.gae_advantages(*arrays.values(), gamma, lambda_)
    kept = advantages.copy()
    targets = ctx.impl.value_targets(arrays["v_t"], advantages)
    bound = rounding_bound(1, float(np.abs(arrays["v_t"]).max() + np.abs(advantages).max()))
    assert_close(targets, arrays["v_t"] + advantages, bound, "the value targets against V + Â")
    normalized = ctx.impl.normalize_advantages(advantages)
    assert np.array_equal(advantages, kept), "normalisation changed the advantages it was given"
    assert np.array_equal(ctx.impl.value_targets(arrays["v_t"], advantages), targets), "targets moved"
    spread = float(np.std(advantages))
    if spread > 0:
        bound = rounding_bound(4 * advantages.size, float(np.abs(advantages).max()) / spread)
        assert_close(np.mean(normalized), 0.0, bound, "the mean of the normalised advantages")
        assert float(np.std(normalized)) <= 1 + bound, np.std(normalized)
    if spread >= 1:
        # std(Â) / (std(Â) + eps) >= 1 - eps for a spread of at least 1; dividing by the sample standard
        # deviation (ddof = 1, torch.std's default, as CleanRL does) leaves sqrt((N - 1) / N) of that.
        sample_share = math.sqrt((advantages.size - 1) / advantages.size)
        assert float(np.std(normalized)) >= sample_share * (1 - STABILISER_AT_MOST) - bound, (
            spread, np.std(normalized))


def _estimates_and_targets(ctx: Context, columns: list, gamma: object, lambda_: object
                           ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[dict[str, list]]]:
    """impl's TD error, n-step estimates (n = 1, 2, 3, T + 1) and GAE of a buffer, impl's value targets built from
    each, and per column each estimate's target written out here (see :func:`target_minus_prediction_property`)."""
    arrays = _stacked(columns)
    length = len(columns[0][0])
    reach_buffer(gamma, length)
    estimates = {"TD error": ctx.impl.td_errors(arrays["r_t"], arrays["v_t"], arrays["v_tp1"], arrays["terminated_t"],
                                                gamma)}
    for n in (1, 2, 3, length + 1):
        estimates[f"{n}-step"] = ctx.impl.n_step_advantages(*arrays.values(), gamma, n)
    estimates["GAE"] = ctx.impl.gae_advantages(*arrays.values(), gamma, lambda_)
    value_targets = {name: ctx.impl.value_targets(arrays["v_t"], estimate) for name, estimate in estimates.items()}
    targets = []
    for column in columns:
        events, r, v, v_next = column
        one_step = [r[t] + gamma * (0 if events[t] == TERMINATED else v_next[t]) for t in range(length)]
        lambda_return = [advantage + v[t] for t, advantage in
                         enumerate(truncated_lambda_return_advantages(*column, gamma, lambda_))]
        written = {"TD error": one_step, "GAE": lambda_return}
        for n in (1, 2, 3, length + 1):
            written[f"{n}-step"] = [_n_step_definition(*column, gamma, n, t) + v[t] for t in range(length)]
        targets.append(written)
    return estimates, value_targets, targets


@verifier(kind="property", uses=("td_errors", "n_step_advantages", "gae_advantages", "value_targets"))
@given(_exact_buffers)
def target_minus_prediction_property(ctx: Context, buffer: tuple) -> None:
    """In exact arithmetic on random buffers with all four events, each of impl's advantage estimates
    is a target minus the critic's prediction V(s_t), the target written out here from the rewards and
    values alone, and impl's value target V(s_t) + Â_t built from it is that target itself:

    - the TD error, whose target is r_t + γ (1 - terminated_t) V(s_{t+1});
    - the n-step estimate for n = 1, 2, 3 and T + 1, whose target is Σ_{l<m} γ^l r_{t+l} plus
      γ^m V(s_{t+m}) unless step t+m-1 terminates, m = min(n, e - t + 1) for the end e of t's fragment;
    - GAE, whose target is the λ-return G_t = r_t + γ [(1-λ) V(s_{t+1}) + λ G_{t+1}] inside the
      fragment, r_t + γ V(s_{t+1}) at its cut end and r_t at a true terminal
      (:func:`truncated_lambda_return_advantages`).

    Unlike a check that V̂ = V + Â for impl's own Â, this fails for any Â that is not a target minus
    V(s_t): twice GAE's advantages, say, give V + 2Â, which is no λ-return unless Â = 0.
    """
    columns, gamma, lambda_ = buffer
    estimates, value_targets, targets = _estimates_and_targets(ctx, columns, gamma, lambda_)
    for env, (column, written) in enumerate(zip(columns, targets, strict=True)):
        v = column[2]
        for name, target in written.items():
            for t, expected in enumerate(target):
                assert estimates[name][t, env] == expected - v[t], (name, t, env, estimates[name][t, env],
                                                                     expected, v[t])
                assert value_targets[name][t, env] == expected, (name, t, env, value_targets[name][t, env])


@verifier(kind="property", uses=("td_errors", "n_step_advantages", "gae_advantages", "value_targets"))
@given(_float_buffers)
def target_minus_prediction_float_property(ctx: Context, buffer: tuple) -> None:
    """:func:`target_minus_prediction_property` on random float buffers, within the rounding of each column's
    sums: the same check for implementations that compute only in floats."""
    columns, gamma, lambda_ = buffer
    estimates, value_targets, targets = _estimates_and_targets(ctx, columns, gamma, lambda_)
    for env, (column, written) in enumerate(zip(columns, targets, strict=True)):
        v, bound = np.array(column[2]), 2 * _column_bound(column)
        for name, target in written.items():
            expected = np.array(target)
            assert_close(estimates[name][:, env], expected - v, bound, f"{name}'s estimate in env {env}")
            assert_close(value_targets[name][:, env], expected, bound, f"{name}'s value target in env {env}")


# Step 4.3.4: termination, truncation and the buffer's edge --------------------------------------


def _coefficient(change: object, slope: object) -> bool | str:
    """True if an input moved Â_t by ``slope`` per unit, False if not at all; anything else is shown."""
    if change == slope:
        return True
    return False if change == 0 else f"coefficient {change}"


def _one_answer(answers: dict[str, bool | str]) -> bool | str:
    """The answer of several places where the same event happens, or each place's when they differ."""
    if len(set(answers.values())) == 1:
        return next(iter(answers.values()))
    return "; ".join(f"{where}: {answer}" for where, answer in answers.items())


@verifier(kind="exact", uses=("gae_advantages",), params=Discounting)
def four_events_table_exact(ctx: Context) -> dict[str, object]:
    """The table of step 4.3.4 read off impl's GAE in exact arithmetic, one row per event.

    A column holds every event at a known step t, in a buffer a rollout can store: after an
    ordinary step the next row starts from s_{t+1}, so V(s_{t+1}) is stored twice (as the step's
    V(s_{t+1}) and as the next row's V(s_t)) and the two are equal. Â is affine in the inputs, so
    raising V(s_{t+1}) by 1 with Â_{t+1} held fixed moves Â_t by exactly γ if step t bootstraps
    and 0 if not; where the next row starts from s_{t+1}, holding Â_{t+1} fixed means raising
    both copies and that row's reward by 1 too (δ_{t+1} keeps its value). Raising the next row's
    reward alone moves Â_t by exactly γλ if the recursion goes on into step t+1 and 0 if it stops
    there. A buffer edge where nothing is joined is seen inside the array (trace_cut set) and at
    the array's end without ``carry`` (its bootstrap only: nothing follows it there); joined, it
    is the array's end with the next buffer's first advantage passed as ``carry``, which holds
    Â_{t+1} fixed there.
    """
    gamma, lambda_ = as_written(ctx.params.gamma), as_written(ctx.params.gae_lambda)
    events = [ORDINARY, TERMINATED, ORDINARY, TRUNCATED, ORDINARY, BUFFER_EDGE, ORDINARY, ORDINARY]
    at = {event: events.index(event) for event in EVENTS}
    length = len(events)
    r, v, v_next = (over(ctx.rng.integers(-40, 40, length), 4) for _ in range(3))
    terminated, trace_cut = masks(events)
    continues = [t for t in range(length - 1) if events[t] == ORDINARY]
    v_next[continues] = v[[t + 1 for t in continues]]
    reach_buffer(gamma, length)

    def advantages(rewards: np.ndarray = r, values: np.ndarray = v, next_values: np.ndarray = v_next,
                   **options: object) -> np.ndarray:
        return ctx.impl.gae_advantages(rewards, values, next_values, terminated.astype(int), trace_cut.astype(int),
                                       gamma, lambda_, **options)

    base = advantages()
    observed: dict[str, object] = {}
    for event, t in at.items():
        raised_next_value, raised_value, raised_reward = v_next.copy(), v.copy(), r.copy()
        raised_next_value[t] += 1
        raised_reward[t + 1] += 1
        if event == ORDINARY:
            raised_value[t + 1] += 1
            bootstrap_change = advantages(raised_reward, raised_value, raised_next_value)[t] - base[t]
        else:
            bootstrap_change = advantages(next_values=raised_next_value)[t] - base[t]
        observed[f"{event}_bootstraps"] = _coefficient(bootstrap_change, gamma)
        observed[f"{event}_continues_trace"] = _coefficient(advantages(rewards=raised_reward)[t] - base[t],
                                                            gamma * lambda_)
    last = length - 1
    raised_next_value = v_next.copy()
    raised_next_value[last] += 1
    observed["buffer_edge_bootstraps"] = _one_answer({
        "inside the array": observed["buffer_edge_bootstraps"],
        "at the array's end": _coefficient(advantages(next_values=raised_next_value)[last] - base[last], gamma)})
    carried, raised_carry = Fraction(3, 2), Fraction(5, 2)
    try:
        joined = advantages(carry=carried)
        observed["joined_buffer_edge_bootstraps"] = _coefficient(
            advantages(next_values=raised_next_value, carry=carried)[last] - joined[last], gamma)
        observed["joined_buffer_edge_continues_trace"] = _coefficient(
            advantages(carry=raised_carry)[last] - joined[last], gamma * lambda_)
    except Unsupported as declined:  # an implementation without streaming: its other rows still count
        observed |= dict.fromkeys(("joined_buffer_edge_bootstraps", "joined_buffer_edge_continues_trace"),
                                  Declined(str(declined)))
    return observed


@verifier(kind="property", uses=("gae_advantages",))
@given(_float_buffers)
def four_events_property(ctx: Context, buffer: tuple) -> None:
    """On random buffers of 1 to 3 environments, each column holding all four events, impl's GAE
    equals the reference written from the events: per-fragment sums Σ (γλ)^l δ_{t+l}, bootstrapping
    everywhere but at true terminals and stopping after every event other than an ordinary step."""
    columns, gamma, lambda_ = buffer
    reach_buffer(gamma, len(columns[0][0]))
    advantages = ctx.impl.gae_advantages(*_stacked(columns).values(), gamma, lambda_)
    for env, column in enumerate(columns):
        expected = np.array(reference_gae(*column, gamma, lambda_))
        bound = _column_bound(column)
        assert_close(advantages[:, env], expected, bound, f"GAE of env {env} against the reference from the events")


def single_done_gae(events: Sequence[str], r: Sequence, v: Sequence, v_next: Sequence, gamma: object,
                    lambda_: object) -> list:
    """The common bug, kept here as the contrast and never in impl: one flag done = terminated or
    truncated both drops the bootstrap and stops the recursion. Buffer edges are still handled
    right (bootstrapped, recursion stopped), so every difference comes from the flag."""
    done = [event in (TERMINATED, TRUNCATED) for event in events]
    advantages: list = [0] * len(events)
    carried: object = 0
    for t in reversed(range(len(events))):
        delta = r[t] + gamma * (0 if done[t] else v_next[t]) - v[t]
        carried = delta + (0 if events[t] != ORDINARY else gamma * lambda_ * carried)
        advantages[t] = carried
    return advantages


class TruncatedStep(NoParams):
    """A transition cut by a time limit, and the value of the observation before the reset."""

    reward: float = Field(description="r_{t+1}, the reward of the truncated transition")
    gamma: float = Field(gt=0, le=1, description="the discount γ")
    gae_lambda: float = Field(ge=0, le=1, description="the GAE parameter λ")
    next_value: float = Field(description="V(s_{t+1}) of the last observation before reset()")
    value: float = Field(description="V(s_t) of the truncated transition's state")


@verifier(kind="counterexample", uses=("gae_advantages", "value_targets"), params=TruncatedStep)
def single_done_counterexample(ctx: Context) -> dict[str, object]:
    """The value target of a time-limit truncation, in exact arithmetic: impl with its two masks,
    and the single-``done`` variant above.

    The buffer holds the truncated transition, then the first transition of the next episode
    (after the reset), which ends the buffer. The removed term is the correct target minus the
    single-flag one.
    """
    params = ctx.params
    gamma, lambda_ = as_written(params.gamma), as_written(params.gae_lambda)
    events = [TRUNCATED, ORDINARY]
    r = np.array([as_written(params.reward), Fraction(1)], dtype=object)
    v = np.array([as_written(params.value), Fraction(2)], dtype=object)
    v_next = np.array([as_written(params.next_value), Fraction(3)], dtype=object)
    terminated, trace_cut = masks(events)
    reach_buffer(gamma, len(events))
    advantages = ctx.impl.gae_advantages(r, v, v_next, terminated.astype(int), trace_cut.astype(int), gamma, lambda_)
    correct = ctx.impl.value_targets(v, advantages)[0]
    single_flag = v[0] + single_done_gae(events, r, v, v_next, gamma, lambda_)[0]
    return {"correct_target": correct, "single_done_target": single_flag, "removed_term": correct - single_flag}


@verifier(kind="property", uses=("gae_advantages", "value_targets"))
@given(_float_buffers)
def single_done_bias_property(ctx: Context, buffer: tuple) -> None:
    """On random buffers with all four events, the single-flag targets differ from impl's exactly on
    the fragments that end in a truncation at step e, by -γ (γλ)^{e-t} V(s_{e+1}): downward where
    the continuation value is positive, upward where it is negative, and nowhere else."""
    columns, gamma, lambda_ = buffer
    reach_buffer(gamma, len(columns[0][0]))
    arrays = _stacked(columns)
    targets = ctx.impl.value_targets(arrays["v_t"], ctx.impl.gae_advantages(*arrays.values(), gamma, lambda_))
    for env, column in enumerate(columns):
        events, _, v, v_next = column
        single_flag = np.array(v) + np.array(single_done_gae(*column, gamma, lambda_))
        bound = _column_bound(column)
        for t in range(len(events)):
            end = fragment_end(events, t)
            bias = single_flag[t] - targets[t, env]
            expected = -gamma * (gamma * lambda_) ** (end - t) * v_next[end] if events[end] == TRUNCATED else 0.0
            assert_close(bias, expected, bound, f"the single-flag target's bias in env {env} at step {t}")
            if abs(expected) > bound:
                assert np.sign(bias) == -np.sign(v_next[end]), (env, t, bias, v_next[end])


_split_buffers = st.tuples(_float_buffers, st.lists(st.booleans(), min_size=24, max_size=24))


def _pieces(length: int, splits: list[bool]) -> list[slice]:
    """Consecutive buffers: a new one starts after every step t < T-1 with splits[t]."""
    starts = [0] + [t + 1 for t in range(length - 1) if splits[t]]
    return [slice(start, stop) for start, stop in zip(starts, [*starts[1:], length], strict=True)]


@verifier(kind="property", uses=("gae_advantages",))
@given(_split_buffers)
def streaming_property(ctx: Context, split_buffer: tuple) -> None:
    """A random buffer with all four events, split into consecutive pieces at random steps and run
    through impl's GAE from the last piece to the first, each passing its first advantage as the
    ``carry`` of the piece before, equals impl's GAE over the unsplit buffer. Where a piece ends
    in an ordinary step its trace_cut stays 0 (the episode goes on into the next piece)."""
    (columns, gamma, lambda_), splits = split_buffer
    reach_buffer(gamma, len(columns[0][0]))
    arrays = _stacked(columns)
    whole = ctx.impl.gae_advantages(*arrays.values(), gamma, lambda_)
    streamed, carry = [], None
    for piece in reversed(_pieces(len(whole), splits)):
        part = ctx.impl.gae_advantages(*(a[piece] for a in arrays.values()), gamma, lambda_, carry=carry)
        streamed.insert(0, part)
        carry = part[0]
    streamed_whole = np.concatenate(streamed)
    for env, column in enumerate(columns):
        bound = _column_bound(column)
        assert_close(streamed_whole[:, env], whole[:, env], bound, f"streamed GAE of env {env} against the unsplit")


def truncated_lambda_return_advantages(events: Sequence[str], r: Sequence, v: Sequence, v_next: Sequence,
                                       gamma: float, lambda_: float) -> list:
    """Â_t = G_t^λ - V(s_t) for the λ-return truncated at the end of each trace, by its own recursion:
    G_t = r_t + γ [(1-λ) V(s_{t+1}) + λ G_{t+1}] inside a trace, G_t = r_t + γ V(s_{t+1}) where the
    trace stops (the V(s_{t+1}) tail), and G_t = r_t at a true terminal."""
    returns: list = [0.0] * len(events)
    for t in reversed(range(len(events))):
        if events[t] == TERMINATED:
            returns[t] = r[t]
        elif events[t] != ORDINARY or t == len(events) - 1:
            returns[t] = r[t] + gamma * v_next[t]
        else:
            returns[t] = r[t] + gamma * ((1 - lambda_) * v_next[t] + lambda_ * returns[t + 1])
    return [g - value for g, value in zip(returns, v, strict=True)]


@verifier(kind="property", uses=("gae_advantages",))
@given(_split_buffers)
def batch_cut_property(ctx: Context, split_buffer: tuple) -> None:
    """A random buffer with all four events, split at random steps into pieces run through impl's
    GAE independently (a batch: each piece's end cuts the trace), gives on each piece the truncated
    λ-return estimate with the V(s_{e+1}) tail at the piece's end e; inside a trace that the split
    cut, that is the unsplit GAE minus (γλ)^{e-t+1} times the unsplit Â_{e+1}."""
    (columns, gamma, lambda_), splits = split_buffer
    reach_buffer(gamma, len(columns[0][0]))
    arrays = _stacked(columns)
    whole = ctx.impl.gae_advantages(*arrays.values(), gamma, lambda_)
    for piece in _pieces(len(whole), splits):
        batch = ctx.impl.gae_advantages(*(a[piece] for a in arrays.values()), gamma, lambda_)
        for env, (events, r, v, v_next) in enumerate(columns):
            part = (events[piece], r[piece], v[piece], v_next[piece])
            bound = _column_bound((events, r, v, v_next))
            expected = np.array(truncated_lambda_return_advantages(*part, gamma, lambda_))
            assert_close(batch[:, env], expected, bound, f"GAE of env {env} on the piece {piece.start}:{piece.stop} "
                         "against the truncated λ-return")
            end = piece.stop - 1
            if end + 1 < len(events) and events[end] == ORDINARY:
                for t in range(piece.start, end + 1):
                    if fragment_end(events, t) >= end:
                        tail = (gamma * lambda_) ** (end - t + 1) * whole[end + 1, env]
                        assert_close(batch[t - piece.start, env], whole[t, env] - tail, bound,
                                     f"the piece's GAE of env {env} at step {t} against the unsplit less the tail")


# --------------------------------------------- 4.3.2-4.3.3: a long target's variance, and the tail at the buffer's edge


class GrowingChain(NoParams):
    """A chain whose every step's reward is random, and the episode lengths to compare."""

    chain: Chain
    lengths: list[int] = Field(min_length=2, description="episode lengths, each at most 6 (Chain's limit)")


@verifier(kind="exact", uses=("n_step_advantages",), params=GrowingChain)
def long_target_variance_grows_exact(ctx: Context) -> dict[str, object]:
    """For each episode length L, the variance at s_0 of impl's Monte Carlo estimate (n = L, to the
    episode's end) and of its one-step estimate (n = 1), over every episode enumerated exactly, and
    their ratio. With independent per-step rewards and γ = 1 the long target's variance is the sum
    of the L steps' variances: L times the one-step target's when the critic errs by a constant."""
    observed: dict[str, list[object]] = {"long_target_variance_by_length": [], "one_step_variance_by_length": [],
                                         "ratio_by_length": []}
    for length in ctx.params.lengths:
        chain = Chain(**{**ctx.params.chain.model_dump(), "length": length})
        reach_chain(chain, advantages="exact" if chain.critic_error == 0 else "estimated")
        rewards, probability = _chain_paths(chain, None)
        critic = chain_critic(chain, chain_values(chain))
        _, long = _mean_and_variance(probability, _chain_estimates(ctx, chain, rewards, critic, length))
        _, short = _mean_and_variance(probability, _chain_estimates(ctx, chain, rewards, critic, 1))
        observed["long_target_variance_by_length"].append(long)
        observed["one_step_variance_by_length"].append(short)
        observed["ratio_by_length"].append(long / short if short else None)
    return observed


class EpisodicMDP(NoParams):
    """A small episodic MDP: P[s][a][s2], R[s][a] and π[s][a], a start state, and an absorbing terminal state."""

    P: list[list[list[float]]] = Field(min_length=2, description="P[s][a][s2]; the terminal state's row absorbs")
    R: list[list[float]] = Field(min_length=2, description="R[s][a], the reward of taking a in s (0 in the terminal)")
    pi: list[list[float]] = Field(min_length=2, description="π(a|s), the policy that collects the episodes")
    start: int = Field(ge=0, description="the state every episode starts from")
    terminal: int = Field(ge=0, description="the absorbing terminal state, worth 0")


class TwoEnvironments(NoParams):
    """The same task with deterministic and with stochastic transitions, its discount, and its episodes' length."""

    deterministic: EpisodicMDP
    stochastic: EpisodicMDP
    gamma: float = Field(gt=0, le=1, description="the discount γ")
    horizon: int = Field(ge=1, le=8, description="decisions of every episode: the terminal is reached after exactly "
                                                 "this many")


def _episodes(mdp: EpisodicMDP, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every episode of ``horizon`` decisions from the start state, exactly: states [horizon + 1, M], actions
    [horizon, M], their probabilities [M], and the MDP's P, R, π as exact arrays."""
    P, R, pi = (as_fractions(table) for table in (mdp.P, mdp.R, mdp.pi))
    paths = [((mdp.start,), (), Fraction(1))]
    for _ in range(horizon):
        paths = [(states + (following,), actions + (a,), probability * pi[states[-1], a] * P[states[-1], a, following])
                 for states, actions, probability in paths for a in range(pi.shape[1]) for following in range(len(P))
                 if pi[states[-1], a] * P[states[-1], a, following]]
    if any(states[-1] != mdp.terminal or mdp.terminal in states[:-1] for states, _, _ in paths):
        raise ValueError(f"every episode must reach the terminal state {mdp.terminal} after exactly {horizon} "
                         "decisions")
    states = np.array([path[0] for path in paths]).T
    actions = np.array([path[1] for path in paths]).T
    return states, actions, np.array([path[2] for path in paths], dtype=object), (P, R, pi)


@verifier(kind="exact", uses=("n_step_advantages",), params=TwoEnvironments)
def long_target_noise_by_transitions_exact(ctx: Context) -> dict[str, object]:
    """The variance of the Monte Carlo target (impl's n-step estimate with n = horizon, to the episode's end)
    and of the one-step target at the start state, each plus V^π(s_0), over every episode enumerated
    exactly, in the same task with deterministic and with stochastic transitions: the randomness of the
    long target here is the environment's next states alone (the policy and the rewards of each (s, a)
    are fixed).

    V^π is solved here on the live states with sympy (the terminal is worth 0); the critic is exact, so
    each target is unbiased and only its noise differs.
    """
    params = ctx.params
    gamma = as_written(params.gamma)
    observed: dict[str, object] = {}
    for name in ("deterministic", "stochastic"):
        mdp = getattr(params, name)
        s, a, probability, (P, R, pi) = _episodes(mdp, params.horizon)
        reach_mdp(P, gamma=gamma, horizon=params.horizon, advantages="exact")
        live = [state for state in range(len(P)) if state != mdp.terminal]
        values = np.zeros(len(P), dtype=object) + Fraction(0)
        values[live] = exact_policy_values(P[np.ix_(live, range(P.shape[1]), live)], R[live], pi[live], gamma)
        terminated = (s[1:] == mdp.terminal).astype(int)
        observed[f"{name}_episodes"] = len(probability)
        for horizon, n in (("long", params.horizon), ("one_step", 1)):
            estimate = ctx.impl.n_step_advantages(R[s[:-1], a], values[s[:-1]], values[s[1:]], terminated, terminated,
                                                  gamma, n)[0]
            _, variance = _mean_and_variance(probability, estimate + values[mdp.start])
            observed[f"{name}_{horizon}_target_variance"] = variance
    observed["stochastic_long_minus_one_step_variance"] = (observed["stochastic_long_target_variance"]
                                                           - observed["stochastic_one_step_target_variance"])
    return observed


def _tail_coefficients(ctx: Context, length: int, gamma: float, lambda_: float, terminal_at_end: bool,
                       rng: np.random.Generator) -> np.ndarray:
    """∂Â_t / ∂V(s_T) of impl's batch GAE on one buffer of ``length`` steps of one episode, by raising
    the last row's V(s_{t+1}) by 1 (Â is affine in it). The buffer is one a rollout stores: every row
    but the last continues into the next (its V(s_{t+1}) is the next row's V(s_t)), and the last row
    cuts the trace: a buffer edge, or the episode's true terminal when ``terminal_at_end``."""
    r, v = rng.normal(size=length), rng.normal(size=length)
    v_next = np.append(v[1:], rng.normal())
    terminated, trace_cut = np.zeros(length), np.zeros(length)
    trace_cut[-1] = 1
    terminated[-1] = float(terminal_at_end)
    raised = v_next.copy()
    raised[-1] += 1
    base = ctx.impl.gae_advantages(r, v, v_next, terminated, trace_cut, gamma, lambda_)
    moved = ctx.impl.gae_advantages(r, v, raised, terminated, trace_cut, gamma, lambda_)
    return np.asarray(moved, dtype=float) - np.asarray(base, dtype=float)


def _tail_bound(length: int) -> float:
    # Â_t sums at most T terms of standard normal draws (bounded by 10 in practice, with margin) and the raised 1.
    return rounding_bound(8 * length, 30.0 * length)


def _edge_tail_draws() -> st.SearchStrategy:
    # γ and λ in [1/2, 1] (sixteenths; γ = λ = 1 makes γλ = 1), a buffer length, the number of buffers an
    # episode spans, a seed. The smallest tail coefficient, γ (γλ)^(T-1) >= 1e-8, stays far above float rounding,
    # so a coefficient read as zero is zero.
    return st.tuples(st.integers(8, 16), st.integers(8, 16), st.integers(1, 12), st.integers(1, 5),
                     st.integers(0, 2**32 - 1))


@verifier(kind="property", uses=("gae_advantages",))
@given(_edge_tail_draws())
def edge_tail_weight_property(ctx: Context, draw: tuple) -> None:
    """Where the bootstrapped tail at a rollout's edge weighs most, read off impl's batch GAE.

    - Short buffers: for one episode that goes on past a buffer of T steps, the mean over the
      buffer's steps of ∂Â_t/∂V(s_T), the weight the critic's tail carries, is larger for T than
      for T + 1 (it is γ/T Σ_{k<T} (γλ)^k, which falls with T when γλ < 1; with γ = λ = 1 it is 1 at
      every T, and only the share of steps below says where the tail weighs most), and every step's
      coefficient is positive: no estimate of the buffer is free of the tail.
    - Long episodes: an episode of k T steps ending in a true terminal, collected in k consecutive
      buffers of T, has a share of (k - 1)/k of its steps whose estimates carry an edge's tail (all
      but the last buffer's); an episode that fits in one buffer (k = 1) has none, and k + 1
      buffers' worth has a larger share than k.
    """
    gamma_16, lambda_16, length, pieces, seed = draw
    gamma, lambda_ = gamma_16 / 16, lambda_16 / 16
    # Buffers of random values (a critic's estimates) cut from episodes of k and k + 1 buffers' length.
    reach(discount=gamma, horizon=[pieces * length, (pieces + 1) * length], advantages="estimated")
    rng = np.random.default_rng(seed)
    means = []
    for size in (length, length + 1):
        coefficients = _tail_coefficients(ctx, size, gamma, lambda_, False, rng)
        assert np.all(coefficients > _tail_bound(size)), ("a step without the edge's tail", size, coefficients)
        means.append(float(coefficients.mean()))
    margin = means[0] - means[1]
    if gamma * lambda_ < 1:
        assert margin > 2 * _tail_bound(length + 1), ("the tail does not weigh more in the shorter buffer", means)
    else:
        assert_close(margin, 0.0, 2 * _tail_bound(length + 1), "with γλ = 1, the shorter buffer's extra mean tail")
    shares = []
    for k in (pieces, pieces + 1):
        carrying = 0
        for piece in range(k):
            last = piece == k - 1
            coefficients = _tail_coefficients(ctx, length, gamma, lambda_, last, rng)
            carrying += int(np.sum(np.abs(coefficients) > _tail_bound(length)))
            if last:
                assert_close(coefficients, 0.0, _tail_bound(length), "the tail coefficients before a terminal")
        shares.append(Fraction(carrying, k * length))
    assert shares == [Fraction(k - 1, k) for k in (pieces, pieces + 1)], ("share of steps with a tail", shares)
    assert shares[1] > shares[0], shares


# --------------------------------------------------------------------------- week 16 step 1: the value head and λ


def _mdps(actions: tuple[int, int]) -> st.SearchStrategy:
    return st.tuples(st.integers(1, 3), st.integers(*actions)).flatmap(lambda size: discounted_exact_mdps(*size))


def _expected_targets(ctx: Context, mdp: dict, values: np.ndarray) -> np.ndarray:
    """E_{a~π(s), s2~P(s, a)}[V̂] per state s, for the one-step target V̂ = V(s) + δ(s, a, s2).

    Every δ(s, a, s2) = R(s, a) + γ V(s2) - V(s) is impl's TD error (no termination) and every
    target impl's value target; the expectation over the current policy's samples is taken here.
    """
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    shape = P.shape
    delta = ctx.impl.td_errors(np.broadcast_to(R[:, :, None], shape), np.broadcast_to(values[:, None, None], shape),
                               np.broadcast_to(values[None, None, :], shape), np.zeros(shape, dtype=int), gamma)
    targets = ctx.impl.value_targets(np.broadcast_to(values[:, None, None], shape), delta)
    return (pi * (P * targets).sum(axis=-1)).sum(axis=-1)


# Episodic MDPs with γ up to 1 (an LLM's answer is undiscounted), with a choice to make in some state.
_episodic_choices = episodic_mdps_any_discount.filter(lambda mdp: mdp["R"].shape[1] >= 2)


@verifier(kind="property", uses=("td_errors", "value_targets"))
@given(st.one_of(_mdps((2, 3)), _episodic_choices))
def value_head_fixed_point_property(ctx: Context, mdp: dict) -> None:
    """On random exact MDPs (discounted, γ < 1, or episodic with γ in [0, 1], γ = 1 included) and
    policies π that are not optimal (V^π ≠ V*, both computed here):
    the mean of the value head's regression target V(s) + δ over π's own transitions leaves
    V = V^π unchanged in every state, so V^π is what regression on these samples converges to,
    and does not leave V* unchanged: the value head learns the current policy's values, not the
    optimal ones.

    Why V* must move: if Σ_a π(a|s) A*(s, a) were 0 in every state, V* would solve π's Bellman
    equation and be V^π; so some state has a mean target below V*. Exact, compared with ==.
    """
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    current = exact_policy_values(P, R, pi, gamma)
    _, optimal = exact_optimal_values(P, R, gamma)
    assume(not np.array_equal(current, optimal))
    # The targets are averaged over π's own transitions.
    reach_tabular(mdp, data="current")
    at_current = _expected_targets(ctx, mdp, current)
    assert np.array_equal(at_current, current), ("V^π is not a fixed point", at_current, current)
    at_optimal = _expected_targets(ctx, mdp, optimal)
    assert not np.array_equal(at_optimal, optimal), ("V* is a fixed point of π's targets", at_optimal, optimal)


def _paths(P: np.ndarray, pi: np.ndarray, state: int, action: int, horizon: int
           ) -> list[tuple[list[int], list[int], Fraction]]:
    """Every (s_0..s_H, a_0..a_{H-1}, probability) with s_0 = state and a_0 = action given, then π."""
    paths = [([state, s2], [action], P[state, action, s2]) for s2 in range(P.shape[2]) if P[state, action, s2] > 0]
    for _ in range(horizon - 1):
        paths = [(states + [s2], actions + [a], p * pi[states[-1], a] * P[states[-1], a, s2])
                 for states, actions, p in paths
                 for a in range(pi.shape[1]) for s2 in range(P.shape[2])
                 if pi[states[-1], a] * P[states[-1], a, s2] > 0]
    return paths


_lambda_cases = st.tuples(_mdps((1, 3)), st.integers(2, 3), st.integers(1, 7).map(lambda k: Fraction(k, 8)))


def _same_mean_for_every_lambda(ctx: Context, case: tuple[dict, int, Fraction], in_floats: bool) -> None:
    """The property of :func:`gae_lambda_keeps_expectation_property` on one case; ``in_floats`` hands impl the
    same paths as float64 arrays (γ and λ as floats: λ = k/8 is exact), for an implementation that declines
    fractions. The bound is the same either way: a float implementation rounds the fractions it is given too."""
    mdp, horizon, drawn_lambda = case
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    # GAE estimates over π's own paths of a stationary discounted MDP, cut after H steps and bootstrapped.
    reach_mdp(P, gamma=gamma, horizon=math.inf, data="current", advantages="estimated")
    values = exact_policy_values(P, R, pi, gamma)
    advantages = exact_action_values(P, R, values, gamma) - values[:, None]
    starts = list(itertools.product(range(R.shape[0]), range(R.shape[1])))
    columns, owners = [], []
    for start in starts:
        for states, actions, p in _paths(P, pi, *start, horizon):
            columns.append((states, actions))
            owners.append((start, p))
    numbers = float if in_floats else object
    r = np.array([[R[s[t], a[t]] for s, a in columns] for t in range(horizon)], dtype=numbers)
    v = np.array([[values[s[t]] for s, _ in columns] for t in range(horizon)], dtype=numbers)
    v_next = np.array([[values[s[t + 1]] for s, _ in columns] for t in range(horizon)], dtype=numbers)
    terminated = np.zeros(r.shape, dtype=int)
    trace_cut = np.zeros(r.shape, dtype=int)
    trace_cut[-1] = 1
    magnitude = horizon * float(largest_magnitude(R.ravel()) + 2 * largest_magnitude(values))
    bound = Fraction(rounding_bound(8 * horizon, magnitude))
    for lambda_ in (Fraction(0), drawn_lambda, Fraction(1)):
        given = (float(gamma), float(lambda_)) if in_floats else (gamma, lambda_)
        estimates = ctx.impl.gae_advantages(r, v, v_next, terminated, trace_cut, *given)[0]
        means = dict.fromkeys(starts, Fraction(0))
        for (start, p), estimate in zip(owners, estimates, strict=True):
            means[start] += p * Fraction(estimate)
        for (s, a), mean in means.items():
            assert abs(mean - advantages[s, a]) <= bound, (lambda_, s, a, mean, advantages[s, a])


def gae_lambda_keeps_expectation_in_floats(ctx: Context) -> dict[str, object]:
    """:func:`gae_lambda_keeps_expectation_property` for an implementation that declines fractions: the same
    paths, handed over in float64, each mean within the same rounding bound."""
    return check_property(ctx, lambda case: _same_mean_for_every_lambda(ctx, case, in_floats=True), _lambda_cases)


@verifier(kind="property", uses=("gae_advantages",), in_floats=gae_lambda_keeps_expectation_in_floats)
def gae_lambda_keeps_expectation_property(ctx: Context) -> dict[str, object]:
    """On random exact MDPs and policies, with the exact V^π as the critic: for λ = 0, a random λ in
    (0, 1) and λ = 1, the mean of impl's GAE estimate Â_0 over every path of H = 2 or 3 steps from
    (s_0, a_0) (a buffer cut after H steps, bootstrapped from V^π(s_H)) is A^π(s_0, a_0) for every
    (s_0, a_0): λ changes how the horizons are mixed, not what the estimate's mean is worth.

    A^π = R + γ P V^π - V^π is computed here. Each E[δ_{t+k} | s_t, a_t] is 0 for k >= 1 under π
    with the exact V^π, so every mixture of horizons has that mean, and a discount by γλ would
    not. The paths are one batch of columns, given to impl as exact Fractions; an implementation
    that computes in floats is judged within the rounding of H backward steps on TD errors bounded
    by max|R| + 2 max|V^π|, and the mean over the paths is taken exactly from what it returns.
    """
    return check_property(ctx, lambda case: _same_mean_for_every_lambda(ctx, case, in_floats=False), _lambda_cases)

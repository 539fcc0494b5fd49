"""Tabular values and the Bellman operators (week-16 syllabus steps 1-2; module steps 4.2.1-4.2.2, 4.3.2).

Random MDPs here have exact rational entries, so every identity is checked with ``==``: the
transition rows are integer weights divided by their sum, rewards are eighths, the discount a
sixteenth below 1, or up to 1 where what is checked holds at γ = 1 (one backup, a contraction) or the
episodes end. Episodic MDPs only move to higher-numbered states until an absorbing terminal, so
their episodes can be enumerated and their values are finite at γ = 1 too. The references (V^π
by sympy's solve, V* by policy iteration on it, synchronous backups) are computed here, never by
impl. The syllabus's two-state example is built from its description: in s1 the action "stay"
keeps s1 and "go" moves to s2; s2 has a single action that keeps s2, written as two identical
actions so that the arrays stay rectangular.

Steps 4.2.1-4.2.2: with b(s) = V(s) the score's coefficient is exactly the advantage Q(s, a) - V(s), and
V^π(s) = E[Q^π(s, A) | s], for impl's Bellman evaluation and for impl's V-from-Q on the exact Q^π.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
from pydantic import Field

from claims_harness import Context, NoParams, Rounded, check_property, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import (
    discounted_exact_mdps,
    exact_action_values,
    exact_mdp,
    exact_policy_values,
    over,
    probability_rows,
    terminal_states,
)
from verifiers._numeric import as_written, assert_close, largest, largest_magnitude, rounding_bound
from verifiers._reach import reach_mdp, transitions_of
from verifiers.baseline_state import longest_episode, mdps_with_end

ACTION_NAMES = ("stay", "go")
S1, S2 = 0, 1


class TwoStates(NoParams):
    """The syllabus's two-state example."""

    gamma: float = Field(gt=0, lt=1, description="the discount γ")
    stay_reward: float = Field(description="reward for 'stay' in s1")
    go_reward: float = Field(description="reward for 'go' from s1 to s2")
    s2_reward: float = Field(description="reward of the single action in s2")


def two_state_mdp(params: TwoStates) -> tuple[np.ndarray, np.ndarray, Fraction]:
    """P[s, a, s2], R[s, a] as exact object arrays, and γ."""
    P = np.zeros((2, 2, 2), dtype=int).astype(object)
    P[S1, 0, S1] = P[S1, 1, S2] = P[S2, 0, S2] = P[S2, 1, S2] = 1
    s2_reward = as_written(params.s2_reward)
    R = np.array([[as_written(params.stay_reward), as_written(params.go_reward)], [s2_reward, s2_reward]], dtype=object)
    return P, R, as_written(params.gamma)


def _one_hot(actions: np.ndarray, n_actions: int) -> np.ndarray:
    return np.eye(n_actions, dtype=int)[actions].astype(object)


def exact_policy_iteration(ctx: Context, P: np.ndarray, R: np.ndarray, gamma: Fraction
                           ) -> tuple[np.ndarray, np.ndarray]:
    """An optimal deterministic policy and V*, by policy iteration on impl's exact linear solve.

    Evaluating a policy exactly and switching to the greedy one never lowers any value, and a
    finite MDP has finitely many deterministic policies, so this ends; ties go to the lowest
    action, which makes the last switch final.
    """
    n_states, n_actions = R.shape
    policy = np.zeros(n_states, dtype=int)
    for _ in range(n_actions**n_states + 1):
        values = ctx.impl.policy_state_values(P, R, _one_hot(policy, n_actions), gamma)
        improved = ctx.impl.greedy_policy(P, R, values, gamma)
        if np.array_equal(improved, policy):
            return policy, values
        policy = improved
    raise AssertionError("policy iteration did not settle")


def _two_state_sweeps_bound(R: np.ndarray, gamma: Fraction, sweeps: int) -> float:
    """The float64 rounding of ``sweeps`` backups of the two-state example from V = 0: each backup of a state rounds
    at most 2S + 2 = 6 times (two products, a sum, γ, the reward, the max) numbers no larger than
    |R|_∞ / (1 - γ), and the inputs 0.9 and the rewards are rounded once (:func:`rounding_bound`)."""
    return rounding_bound(6 * sweeps + 3, float(largest_magnitude(R) / (1 - gamma)))


def value_iteration_two_states_in_floats(ctx: Context) -> dict[str, object]:
    """:func:`value_iteration_two_states` for an implementation that declines fractions: the same three iterations
    from V = (0, 0) in float64, each value within its derived rounding bound (:func:`_two_state_sweeps_bound`); the
    preferred action is the larger of impl's two float Q-values, which at this example differ by far more than the
    bound."""
    P, R, gamma = two_state_mdp(ctx.params)
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    P_float, R_float = P.astype(float), R.astype(float)
    observed: dict[str, object] = {}
    previous = ctx.impl.value_iteration(P_float, R_float, float(gamma), 0)
    for k in (1, 2, 3):
        bound = _two_state_sweeps_bound(R, gamma, k)
        current = ctx.impl.value_iteration(P_float, R_float, float(gamma), k)
        q_s1 = ctx.impl.action_values(P_float, R_float, previous, float(gamma))[S1]
        observed[f"iteration_{k}"] = [Rounded(float(value), bound) for value in current]
        observed[f"iteration_{k}_stay"], observed[f"iteration_{k}_go"] = (Rounded(float(q), bound) for q in q_s1)
        observed[f"iteration_{k}_greedy"] = ACTION_NAMES[ctx.impl.greedy_policy(P_float, R_float, previous,
                                                                                 float(gamma))[S1]]
        previous = current
    return observed


@verifier(kind="exact",
          uses=("value_iteration", "action_values", "greedy_policy"),
          params=TwoStates, in_floats=value_iteration_two_states_in_floats)
def value_iteration_two_states(ctx: Context) -> dict[str, object]:
    """Three iterations of impl's value iteration from V = (0, 0) on the two-state example, exactly.

    Iteration k substitutes V_{k-1} into the right-hand side: the two action values of s1 it
    compares are impl's Q_{V_{k-1}}(s1, ·), and the action it prefers is impl's greedy action.
    """
    P, R, gamma = two_state_mdp(ctx.params)
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    observed: dict[str, object] = {}
    previous = ctx.impl.value_iteration(P, R, gamma, 0)
    for k in (1, 2, 3):
        current = ctx.impl.value_iteration(P, R, gamma, k)
        q_s1 = ctx.impl.action_values(P, R, previous, gamma)[S1]
        observed[f"iteration_{k}"] = list(current)
        observed[f"iteration_{k}_stay"], observed[f"iteration_{k}_go"] = q_s1
        observed[f"iteration_{k}_greedy"] = ACTION_NAMES[ctx.impl.greedy_policy(P, R, previous, gamma)[S1]]
        previous = current
    return observed


@verifier(kind="exact",
          uses=("policy_state_values", "greedy_policy", "bellman_optimality_operator", "value_iteration"),
          params=TwoStates)
def fixed_point_two_states(ctx: Context) -> dict[str, object]:
    """The limit of value iteration on the two-state example, two ways.

    Exactly: policy iteration with impl's linear solve gives V* in fractions, and impl's
    optimality operator must leave it unchanged; the policy that stays in s1 forever is
    evaluated the same way. Numerically: n float iterations of impl's value iteration from 0 must
    be within γ^n |V*|_∞ of V* (the contraction), plus the rounding of n backups of numbers
    bounded by |V*|_∞ / (1 - γ).
    """
    P, R, gamma = two_state_mdp(ctx.params)
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    policy, optimal = exact_policy_iteration(ctx, P, R, gamma)
    stay_forever = ctx.impl.policy_state_values(P, R, _one_hot(np.zeros(2, dtype=int), 2), gamma)
    residual = ctx.impl.bellman_optimality_operator(P, R, optimal, gamma) - optimal
    n = 100
    iterated = ctx.impl.value_iteration(P.astype(float), R.astype(float), float(gamma), n)
    largest = float(largest_magnitude(optimal))
    error = float(np.abs(iterated - optimal.astype(float)).max())
    allowed = float(gamma) ** n * largest + rounding_bound(4 * n, largest / (1 - float(gamma)))
    return {
        "optimal_s1": optimal[S1],
        "optimal_s2": optimal[S2],
        "optimal_action_s1": ACTION_NAMES[policy[S1]],
        "fixed_point_residual": largest_magnitude(residual),
        "stay_forever_s1": stay_forever[S1],
        "value_iteration_error": error,
        "value_iteration_within_contraction_bound": error <= allowed,
    }


@functools.cache
def _mdps_of_size(n_states: int, n_actions: int, top_sixteenths: int = 15) -> st.SearchStrategy:
    weights = st.lists(st.integers(0, 3), min_size=n_states, max_size=n_states)
    table = st.lists(weights, min_size=n_states * n_actions, max_size=n_states * n_actions)
    eighths = st.lists(st.integers(-40, 40), min_size=n_states * n_actions, max_size=n_states * n_actions)
    policy = st.lists(st.lists(st.integers(0, 3), min_size=n_actions, max_size=n_actions),
                      min_size=n_states, max_size=n_states)
    values = st.lists(st.integers(-40, 40), min_size=n_states, max_size=n_states)
    return st.tuples(table, eighths, policy, values, values, st.integers(0, top_sixteenths)).map(
        functools.partial(_exact_mdp, n_states, n_actions))


def _exact_mdp(n_states: int, n_actions: int, drawn: tuple) -> dict[str, object]:
    """An MDP of :func:`exact_mdp` with two value vectors v and u in eighths."""
    table, eighths, policy, v, u, gamma_sixteenths = drawn
    return {**exact_mdp(n_states, n_actions, (table, eighths, policy, gamma_sixteenths)), "v": over(v, 8),
            "u": over(u, 8)}


_exact_mdps = st.tuples(st.integers(1, 4), st.integers(1, 3)).flatmap(lambda size: _mdps_of_size(*size))
# The same MDPs with γ = 1 too, for what holds at every γ in [0, 1]: one backup, a contraction by at most γ.
_exact_mdps_any_discount = st.tuples(st.integers(1, 4), st.integers(1, 3)).flatmap(
    lambda size: _mdps_of_size(*size, top_sixteenths=16))


def _max_norm(x: np.ndarray) -> Fraction:
    return largest_magnitude(x)


@verifier(kind="property", uses=("bellman_optimality_operator", "bellman_expectation_operator"))
@given(_exact_mdps_any_discount)
def contraction_property(ctx: Context, mdp: dict) -> None:
    """On random exact MDPs, policies and pairs of value functions V, U, with γ in [0, 1] (γ = 1
    included: there the operators do not expand), impl's optimality operator T and expectation
    operator T^π satisfy |T V - T U|_∞ <= γ |V - U|_∞ exactly."""
    P, R, pi, gamma, v, u = (mdp[k] for k in ("P", "R", "pi", "gamma", "v", "u"))
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    distance = _max_norm(v - u)
    optimality = _max_norm(ctx.impl.bellman_optimality_operator(P, R, v, gamma)
                           - ctx.impl.bellman_optimality_operator(P, R, u, gamma))
    expectation = _max_norm(ctx.impl.bellman_expectation_operator(P, R, pi, v, gamma)
                            - ctx.impl.bellman_expectation_operator(P, R, pi, u, gamma))
    assert optimality <= gamma * distance, ("optimality", optimality, gamma * distance)
    assert expectation <= gamma * distance, ("expectation", expectation, gamma * distance)


def expected_td_errors(ctx: Context, P: np.ndarray, R: np.ndarray, values: np.ndarray, gamma: Fraction
                       ) -> np.ndarray:
    """E[δ | s, a] = Σ_{s2} P(s2|s, a) δ(s, a, s2), with every δ(s, a, s2) from impl's TD error."""
    n_states, n_actions = R.shape
    shape = (n_states, n_actions, n_states)
    delta = ctx.impl.td_errors(np.broadcast_to(R[:, :, None], shape), np.broadcast_to(values[:, None, None], shape),
                               np.broadcast_to(values[None, None, :], shape), np.zeros(shape, dtype=int), gamma)
    return (P * delta).sum(axis=-1)


@verifier(kind="property", uses=("td_errors", "policy_state_values", "policy_action_values"))
@given(_exact_mdps)
def td_error_expectation_property(ctx: Context, mdp: dict) -> None:
    """On random exact MDPs and policies, with V = V^π, the expectation over s_{t+1} of impl's TD
    error at (s_t, a_t) equals A^π(s_t, a_t) = Q^π(s_t, a_t) - V^π(s_t), exactly.

    V^π and Q^π = R + γ P V^π are computed here with sympy; impl's V^π and Q^π must equal them.
    """
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    # The TD errors are taken with the exact V^π.
    reach_mdp(P, gamma=gamma, horizon=math.inf, advantages="exact")
    values = exact_policy_values(P, R, pi, gamma)
    advantages = R + gamma * (P * values).sum(axis=-1) - values[:, None]
    assert np.array_equal(ctx.impl.policy_state_values(P, R, pi, gamma), values), "V^π"
    assert np.array_equal(ctx.impl.policy_action_values(P, R, pi, gamma) - values[:, None], advantages), "Q^π"
    expected = expected_td_errors(ctx, P, R, values, gamma)
    assert np.array_equal(expected, advantages), (expected, advantages)


@verifier(kind="property", uses=("policy_state_values", "policy_action_values", "bellman_expectation_operator"))
@given(_exact_mdps)
def policy_evaluation_property(ctx: Context, mdp: dict) -> None:
    """On random exact MDPs and policies, impl's V^π is the solution sympy finds for
    (I - γ P_π) V = R_π, a fixed point of impl's T^π, and Σ_a π(a|s) Q^π(s, a) for impl's Q^π; given
    the same MDP in floats, impl's V^π is that solution up to the rounding of a linear solve."""
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    values = ctx.impl.policy_state_values(P, R, pi, gamma)
    solution = exact_policy_values(P, R, pi, gamma)
    assert np.array_equal(values, solution), (values, solution)
    assert np.array_equal(ctx.impl.bellman_expectation_operator(P, R, pi, values, gamma), values), "not fixed"
    q_values = ctx.impl.policy_action_values(P, R, pi, gamma)
    assert np.array_equal((pi * q_values).sum(axis=-1), values), (q_values, values)
    # In floats: ||I - γ P_π||∞ ||(I - γ P_π)^-1||∞ <= (1 + γ) / (1 - γ) bounds the condition number, and
    # |V| <= max|R| / (1 - γ); a backward-stable solve of n equations is off by O(n^3) roundings of that size.
    in_floats = ctx.impl.policy_state_values(P.astype(float), R.astype(float), pi.astype(float), float(gamma))
    largest = float(max(abs(r) for r in R.ravel())) / float(1 - gamma)
    bound = rounding_bound(8 * len(values) ** 3 + 8, float((1 + gamma) / (1 - gamma)) * largest)
    assert_close(in_floats, solution.astype(float), bound, "impl's V^π in floats against the exact solution")


def exact_optimal_values(P: np.ndarray, R: np.ndarray, gamma: Fraction) -> tuple[np.ndarray, np.ndarray]:
    """An optimal deterministic policy and V*, by policy iteration computed here, independently of impl.

    Each policy is evaluated with sympy (:func:`exact_policy_values`); a state switches to the
    lowest-index best action only when that is strictly better than its current action, so no
    policy repeats and the loop ends at an optimal policy (Puterman 1994, thm. 6.4.2).
    """
    n_states, n_actions = R.shape
    policy = np.zeros(n_states, dtype=int)
    for _ in range(n_actions**n_states + 1):
        values = exact_policy_values(P, R, _one_hot(policy, n_actions), gamma)
        q_values = exact_action_values(P, R, values, gamma)
        best = [largest(q_values[s]) for s in range(n_states)]
        improved = np.array([policy[s] if q_values[s, policy[s]] == best[s] else list(q_values[s]).index(best[s])
                             for s in range(n_states)])
        if np.array_equal(improved, policy):
            return policy, values
        policy = improved
    raise AssertionError("policy iteration did not settle")


@verifier(kind="property", uses=("td_errors", "greedy_policy", "bellman_optimality_operator", "action_values"))
def optimal_residual_property(ctx: Context) -> dict[str, object]:
    """On random exact MDPs (discounted, γ < 1, or episodic with γ in [0, 1], γ = 1 included), with V*
    and Q* = R + γ P V* computed here (:func:`exact_optimal_values`): impl's optimality operator
    leaves V* unchanged, impl's Q_{V*} is Q*, the expected Bellman residual of impl's TD error at
    (s, a) is A*(s, a) = Q*(s, a) - V*(s), and impl's greedy action has A* = 0; A* itself is at most
    0 everywhere."""

    def is_optimal_advantage(mdp: dict) -> None:
        P, R, gamma = (mdp[k] for k in ("P", "R", "gamma"))
        # The TD errors are taken with the exact V*.
        reach_tabular(mdp, advantages="exact")
        _, optimal = exact_optimal_values(P, R, gamma)
        advantages = exact_action_values(P, R, optimal, gamma) - optimal[:, None]
        assert np.array_equal(ctx.impl.bellman_optimality_operator(P, R, optimal, gamma), optimal), "T V* != V*"
        assert np.array_equal(ctx.impl.action_values(P, R, optimal, gamma) - optimal[:, None], advantages), "Q*"
        expected = expected_td_errors(ctx, P, R, optimal, gamma)
        assert np.array_equal(expected, advantages), (expected, advantages)
        assert all(a <= 0 for a in advantages.reshape(-1)), advantages
        greedy = ctx.impl.greedy_policy(P, R, optimal, gamma)
        assert all(advantages[s, greedy[s]] == 0 for s in range(len(greedy))), (advantages, greedy)

    return check_property(ctx, is_optimal_advantage, st.one_of(_exact_mdps, episodic_mdps_any_discount))


def reach_tabular(mdp: dict, **more: object) -> None:
    """A drawn MDP: episodic (it has a horizon) or discounted with an unbounded horizon."""
    if "horizon" in mdp:
        reach_episodic(mdp, **more)
    else:
        reach_mdp(mdp["P"], gamma=mdp["gamma"], horizon=math.inf, **more)


# --------------------------------------------------------------------- value iteration: synchronous, and from any start


def synchronous_backups(P: np.ndarray, R: np.ndarray, gamma: Fraction, v_0: np.ndarray, n: int) -> np.ndarray:
    """V_n from V_0 by V_k(s) = max_a Q_{V_{k-1}}(s, a): every state reads the previous sweep's values."""
    values = v_0
    for _ in range(n):
        values = exact_action_values(P, R, values, gamma).max(axis=-1)
    return values


def in_place_sweep(P: np.ndarray, R: np.ndarray, gamma: Fraction, v_0: np.ndarray) -> np.ndarray:
    """One Gauss-Seidel sweep in index order: each state reads the values already updated in this sweep."""
    values = v_0.copy()
    for s in range(len(values)):
        values[s] = max(R[s] + gamma * (P[s] * values).sum(axis=-1))
    return values


_sweeps = st.integers(1, 4)


@functools.cache
def _dyadic_mdps_of_size(n_states: int, n_actions: int) -> st.SearchStrategy:
    cuts = st.lists(st.integers(0, 8), min_size=n_states - 1, max_size=n_states - 1).map(sorted)
    rows = st.lists(cuts, min_size=n_states * n_actions, max_size=n_states * n_actions)
    eighths = st.lists(st.integers(-40, 40), min_size=n_states * n_actions, max_size=n_states * n_actions)
    values = st.lists(st.integers(-40, 40), min_size=n_states, max_size=n_states)
    return st.tuples(rows, eighths, values, st.integers(0, 16)).map(functools.partial(_dyadic_mdp, n_states, n_actions))


def _dyadic_mdp(n_states: int, n_actions: int, drawn: tuple) -> dict[str, object]:
    rows, eighths, v, gamma_sixteenths = drawn
    P = over([np.diff([0, *cuts, 8]) for cuts in rows], 8).reshape(n_states, n_actions, n_states)
    R = over(eighths, 8).reshape(n_states, n_actions)
    return {"P": P, "R": R, "gamma": Fraction(gamma_sixteenths, 16), "v": over(v, 8)}


# Transition probabilities in eighths, rewards and V_0 in eighths, γ in sixteenths (up to 1): every value of the
# first four synchronous sweeps is a dyadic rational, which float64 holds exactly.
_dyadic_mdps = st.tuples(st.integers(1, 4), st.integers(1, 3)).flatmap(lambda size: _dyadic_mdps_of_size(*size))
_FLOAT_EXACT_SWEEPS = 4


@given(_dyadic_mdps, st.integers(1, _FLOAT_EXACT_SWEEPS))
def value_iteration_synchronous_in_floats(ctx: Context, mdp: dict, n: int) -> None:
    """The float twin of :func:`value_iteration_synchronous_property`, for an implementation that declines fractions
    (PyTorch, JAX): impl's n <= 4 iterations on float64 arrays equal n synchronous backups computed here in
    fractions, exactly.

    No rounding bound is needed, and none is used: the MDPs are dyadic (probabilities in eighths, rewards and V_0 in
    eighths, γ in sixteenths, |V_0| <= 5), so each sweep multiplies a denominator by at most 2^7 and the values stay
    below 2^7 in magnitude (|V_n| <= 5 + n * 5 at γ <= 1): after four sweeps every product and every partial sum,
    in whatever order an implementation adds them, has at most 3 + 4 * 7 + 7 + 2 = 40 significant bits, fewer than
    float64's 53, so float arithmetic computes them exactly. An in-place (Gauss-Seidel) sweep then differs from the
    synchronous one as it does in fractions.
    """
    P, R, gamma, v_0 = (mdp[k] for k in ("P", "R", "gamma", "v"))
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    observed = ctx.impl.value_iteration(P.astype(float), R.astype(float), float(gamma), n, v_0.astype(float))
    expected = synchronous_backups(P, R, gamma, v_0, n)
    assert [Fraction(float(x)) for x in observed] == list(expected), (n, observed, expected)


@verifier(kind="property", uses=("value_iteration",), in_floats=value_iteration_synchronous_in_floats)
@given(_exact_mdps_any_discount, _sweeps)
def value_iteration_synchronous_property(ctx: Context, mdp: dict, n: int) -> None:
    """On random exact MDPs with γ in [0, 1], from a random V_0 and from the default V_0 = 0 (one
    value per state, whatever the number of actions), impl's n iterations equal n synchronous
    backups computed here (:func:`synchronous_backups`), exactly.

    An in-place (Gauss-Seidel) sweep gives other numbers as soon as a state's backup reads a
    state updated before it in the same sweep, which random MDPs with two or more states and
    dense transitions do almost always.
    """
    P, R, gamma, v_0 = (mdp[k] for k in ("P", "R", "gamma", "v"))
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    observed = ctx.impl.value_iteration(P, R, gamma, n, v_0)
    expected = synchronous_backups(P, R, gamma, v_0, n)
    assert np.array_equal(observed, expected), (n, observed, expected)
    from_zero = ctx.impl.value_iteration(P, R, gamma, n)
    expected = synchronous_backups(P, R, gamma, np.array([Fraction(0)] * len(v_0), dtype=object), n)
    assert np.array_equal(from_zero, expected), ("from V_0 = 0, the default", n, from_zero, expected)


def value_iteration_relabelled_two_states_in_floats(ctx: Context) -> dict[str, object]:
    """:func:`value_iteration_relabelled_two_states` for an implementation that declines fractions: impl's first two
    iterations in float64, each value within its derived rounding bound (:func:`_two_state_sweeps_bound`); the
    in-place sweep's V(s1) is the harness's, exact. An in-place sweep's 1.8 is 0.8 from the synchronous 1."""
    P, R, gamma = two_state_mdp(ctx.params)
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    order = [S2, S1]
    P_relabelled, R_relabelled = P[order][:, :, order], R[order]
    observed: dict[str, object] = {}
    for k in (1, 2):
        values = ctx.impl.value_iteration(P_relabelled.astype(float), R_relabelled.astype(float), float(gamma), k,
                                          np.zeros(2))
        bound = _two_state_sweeps_bound(R, gamma, k)
        observed[f"iteration_{k}"] = [Rounded(float(values[order.index(S1)]), bound),
                                      Rounded(float(values[order.index(S2)]), bound)]
    zeros = np.array([Fraction(0)] * 2, dtype=object)
    observed["in_place_sweep_iteration_1_s1"] = in_place_sweep(P_relabelled, R_relabelled, gamma, zeros)[
        order.index(S1)]
    return observed


@verifier(kind="exact", uses=("value_iteration",), params=TwoStates,
          in_floats=value_iteration_relabelled_two_states_in_floats)
def value_iteration_relabelled_two_states(ctx: Context) -> dict[str, object]:
    """The syllabus's two-state example with the states numbered the other way (s2 first), exactly.

    Synchronous iterations do not depend on how the states are numbered; an in-place sweep in
    index order does: it backs up s2 first and then lets s1 read the new V(s2). Reported in the
    text's naming (s1, s2): impl's first two iterations from V = (0, 0), and the in-place sweep's
    first V(s1), computed here, which shows that this numbering separates the two.
    """
    P, R, gamma = two_state_mdp(ctx.params)
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    order = [S2, S1]
    P_relabelled, R_relabelled = P[order][:, :, order], R[order]
    zeros = np.array([Fraction(0)] * 2, dtype=object)
    observed: dict[str, object] = {}
    for k in (1, 2):
        values = ctx.impl.value_iteration(P_relabelled, R_relabelled, gamma, k, zeros)
        observed[f"iteration_{k}"] = [values[order.index(S1)], values[order.index(S2)]]
    observed["in_place_sweep_iteration_1_s1"] = in_place_sweep(P_relabelled, R_relabelled, gamma, zeros)[
        order.index(S1)]
    return observed


# Enough float sweeps that γ^n |V_0 - V*| is far below float64's rounding at γ <= 3/4: 0.75^150 < 2e-19.
_LONG_RUN = 150
_contracting_mdps = st.tuples(st.integers(1, 4), st.integers(1, 3)).flatmap(
    lambda size: _mdps_of_size(*size, top_sixteenths=12))


def _within_contraction_in_floats(ctx: Context, mdp: dict, n: int) -> None:
    """impl's n iterations in float64 from V_0 are within γ^n |V_0 - V*|_∞ of V*, computed here in fractions
    (:func:`exact_optimal_values`), plus the float64 rounding the contraction lets through.

    The rounding bound is derived, not tuned: every iterate is bounded by B = max(|V_0|, |V*|) + |V_0 - V*| (the
    contraction); one sweep on float64 inputs (P, R and γ rounded once) costs at most 3S + 4 roundings of numbers
    below |R| + B per state (S products and S - 1 sums, γ, the reward, the rounded inputs), and each error is
    contracted by γ at every later sweep, so the total is at most that divided by 1 - γ (:func:`rounding_bound`).
    """
    P, R, gamma, v_0 = (mdp[k] for k in ("P", "R", "gamma", "v"))
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    _, optimal = exact_optimal_values(P, R, gamma)
    iterated = ctx.impl.value_iteration(P.astype(float), R.astype(float), float(gamma), n, v_0.astype(float))
    start_gap = _max_norm(v_0 - optimal)
    largest_value = max(_max_norm(v_0), _max_norm(optimal)) + start_gap
    per_sweep = rounding_bound(3 * P.shape[-1] + 4, float(_max_norm(R) + largest_value))
    allowed = float(gamma**n * start_gap) + per_sweep / float(1 - gamma)
    error = max(abs(Fraction(float(x)) - exact) for x, exact in zip(iterated, optimal, strict=True))
    assert error <= allowed, (f"after {n} iterations V is {float(error):.3g} from V*, more than the contraction and "
                              f"float64 rounding allow ({allowed:.3g})", iterated, optimal)


@verifier(kind="property", uses=("value_iteration",))
@given(_contracting_mdps)
def value_iteration_runs_every_sweep_property(ctx: Context, mdp: dict) -> None:
    """On random exact MDPs (γ <= 3/4), from a random V_0, impl's 150 iterations in float64 are within
    γ^150 |V_0 - V*|_∞ of V* plus float64 rounding (:func:`_within_contraction_in_floats`): value iteration asked
    for n sweeps makes n sweeps. An implementation that stops once a sweep changes V by less than a tolerance τ
    is off by up to about τ γ / (1 - γ), and fails for any τ above the rounding bound (below 1e-12 for the MDPs
    drawn); 0.75^150 < 2e-19, so the contraction term is far below it.
    """
    _within_contraction_in_floats(ctx, mdp, _LONG_RUN)


_iterations = st.integers(0, 5)


@given(_exact_mdps, _iterations)
def value_iteration_convergence_in_floats(ctx: Context, mdp: dict, n: int) -> None:
    """:func:`value_iteration_convergence_property` for an implementation that declines fractions: the same bound
    γ^n |V_0 - V*|_∞ in float64, plus the float64 rounding it lets through (:func:`_within_contraction_in_floats`)."""
    _within_contraction_in_floats(ctx, mdp, n)


@verifier(kind="property", uses=("value_iteration",), in_floats=value_iteration_convergence_in_floats)
@given(_exact_mdps, _iterations)
def value_iteration_convergence_property(ctx: Context, mdp: dict, n: int) -> None:
    """On random exact MDPs, from a random start V_0, impl's V_n is within γ^n |V_0 - V*|_∞ of V*,
    with V* computed here (:func:`exact_optimal_values`): the contraction makes value iteration
    converge from any start, and no slower than γ^n. Exact, so the bound is tested with <=."""
    P, R, gamma, v_0 = (mdp[k] for k in ("P", "R", "gamma", "v"))
    reach_mdp(P, gamma=gamma, horizon=math.inf)
    _, optimal = exact_optimal_values(P, R, gamma)
    error = _max_norm(ctx.impl.value_iteration(P, R, gamma, n, v_0) - optimal)
    assert error <= gamma**n * _max_norm(v_0 - optimal), (n, error, gamma**n * _max_norm(v_0 - optimal))


# ---------------------------------------------------------------- episodic MDPs: V = E[G], and G_t - V(s_t) estimates A


@functools.cache
def _episodic_mdps_of_size(n_live: int, n_actions: int, top_sixteenths: int = 15) -> st.SearchStrategy:
    n_states = n_live + 1
    weights = st.lists(st.integers(0, 3), min_size=n_states, max_size=n_states)
    table = st.lists(weights, min_size=n_live * n_actions, max_size=n_live * n_actions)
    eighths = st.lists(st.integers(-40, 40), min_size=n_live * n_actions, max_size=n_live * n_actions)
    policy = st.lists(st.lists(st.integers(0, 3), min_size=n_actions, max_size=n_actions),
                      min_size=n_states, max_size=n_states)
    start = st.lists(st.integers(0, 3), min_size=n_live, max_size=n_live)
    return st.tuples(table, eighths, policy, start, st.integers(0, top_sixteenths)).map(
        functools.partial(_episodic_mdp, n_live, n_actions))


def _episodic_mdp(n_live: int, n_actions: int, drawn: tuple) -> dict[str, object]:
    """States 0..n_live-1 move only to higher-numbered states; state n_live is the absorbing terminal.

    So every episode ends within n_live steps, and E[G] is a finite sum over the enumerated
    episodes. The terminal state has reward 0 (a true terminal, as impl's tabular functions expect).
    """
    table, eighths, policy, start, gamma_sixteenths = drawn
    terminal = n_live
    weights = np.array(table).reshape(n_live, n_actions, n_live + 1)
    for s in range(n_live):
        weights[s, :, : s + 1] = 0
        weights[s, :, terminal] += weights[s].sum(axis=-1) == 0
    P = np.concatenate([probability_rows(weights), np.zeros((1, n_actions, n_live + 1), dtype=int).astype(object)])
    P[terminal, :, terminal] = 1
    R = over(eighths + [0] * n_actions, 8).reshape(n_live + 1, n_actions)
    return {"P": P, "R": R, "pi": probability_rows(policy), "gamma": Fraction(gamma_sixteenths, 16),
            "rho": probability_rows(start + [0]), "horizon": n_live}


_episodic_mdps = st.tuples(st.integers(1, 3), st.integers(1, 3)).flatmap(lambda size: _episodic_mdps_of_size(*size))
# Episodes end, so every value is finite at γ = 1 too: the undiscounted setting of an LLM's answer.
episodic_mdps_any_discount = st.tuples(st.integers(1, 3), st.integers(1, 3)).flatmap(
    lambda size: _episodic_mdps_of_size(*size, top_sixteenths=16))


def reach_episodic(mdp: dict, **more: object) -> None:
    """An episodic witness of :func:`_episodic_mdp`: its decision states (the terminal is none), actions,
    transitions, discount and the most decisions an episode takes."""
    P, R = mdp["P"], mdp["R"]
    reach(states=len(R) - len(terminal_states(P, R)), actions=R.shape[1], transitions=transitions_of(P),
          discount=mdp["gamma"], horizon=mdp["horizon"], **more)


def episodes(P: np.ndarray, pi: np.ndarray, first_states: dict[int, Fraction], horizon: int
             ) -> list[tuple[list[int], list[int], Fraction]]:
    """Every (states s_0..s_H, actions a_0..a_{H-1}, probability) of positive probability, enumerated here."""
    paths = [([s], [], p) for s, p in first_states.items() if p > 0]
    for _ in range(horizon):
        paths = [(states + [s2], actions + [a], p * pi[states[-1], a] * P[states[-1], a, s2])
                 for states, actions, p in paths
                 for a in range(pi.shape[1]) for s2 in range(P.shape[2])
                 if pi[states[-1], a] * P[states[-1], a, s2] > 0]
    return paths


@verifier(kind="property", uses=("policy_state_values",))
@given(_episodic_mdps)
def value_is_expected_return_property(ctx: Context, mdp: dict) -> None:
    """On random episodic MDPs (:func:`_episodic_mdp`) and policies, impl's V^π(s) equals the
    expected discounted return E[Σ_k γ^k r_k | s_0 = s], enumerated here over every episode, exactly.

    impl solves the Bellman equation; the enumeration uses only the definition of V, so the two
    agree only if the value obeys the Bellman rule (reward now plus γ times the value of where the
    step leads)."""
    P, R, pi, gamma, horizon = (mdp[k] for k in ("P", "R", "pi", "gamma", "horizon"))
    reach_episodic(mdp)
    values = ctx.impl.policy_state_values(P, R, pi, gamma)
    for s in range(len(R)):
        expected = sum(p * sum(gamma**k * R[states[k], actions[k]] for k in range(horizon))
                       for states, actions, p in episodes(P, pi, {s: Fraction(1)}, horizon))
        assert values[s] == expected, (s, values[s], expected)


@verifier(kind="property", uses=("bellman_expectation_operator", "action_values", "td_errors"))
@given(episodic_mdps_any_discount)
def episodic_bellman_property(ctx: Context, mdp: dict) -> None:
    """On random episodic MDPs (:func:`_episodic_mdp`) and policies, with γ in [0, 1] and γ = 1
    included: the value V(s) = E[Σ_k γ^k r_k | s_0 = s], enumerated here over every episode (the
    definition, no equation solved), is a fixed point of impl's T^π (the reward of the next step plus
    the discounted value of where it leads); impl's Q_V = action_values(V) is R + γ P V (computed
    here), and Σ_a π(a|s) Q_V(s, a) = V(s), the fixed-policy equation without a maximum; the mean of
    impl's TD error over the next state is Q_V - V, the advantage, whose π-weighted mean is 0.

    Every quantity is exact, compared with ==. The episodes end, so γ = 1 is as legitimate as γ < 1
    (an LLM's answer); impl's linear solve is not used, its contract needing γ < 1.
    """
    P, R, pi, gamma, horizon = (mdp[k] for k in ("P", "R", "pi", "gamma", "horizon"))
    reach_episodic(mdp, advantages="exact")
    values = np.array([sum(p * sum(gamma**k * R[states[k], actions[k]] for k in range(horizon))
                           for states, actions, p in episodes(P, pi, {s: Fraction(1)}, horizon))
                       for s in range(len(R))], dtype=object)
    assert np.array_equal(values, exact_policy_values(P, R, pi, gamma)), "the verifier's references disagree"
    backed_up = ctx.impl.bellman_expectation_operator(P, R, pi, values, gamma)
    assert np.array_equal(backed_up, values), ("T^π V != V", backed_up, values)
    q_values = ctx.impl.action_values(P, R, values, gamma)
    assert np.array_equal(q_values, exact_action_values(P, R, values, gamma)), ("Q_V", q_values)
    assert np.array_equal((pi * q_values).sum(axis=-1), values), ("Σ_a π Q != V", q_values, values)
    advantages = exact_action_values(P, R, values, gamma) - values[:, None]
    expected = expected_td_errors(ctx, P, R, values, gamma)
    assert np.array_equal(expected, advantages), ("E[δ | s, a] != Q - V", expected, advantages)
    assert all(mean == 0 for mean in (pi * advantages).sum(axis=-1)), advantages


def _conditional_means(ctx: Context, mdp: dict, total_return: bool) -> dict[tuple[int, int, int], Fraction]:
    """E[G - V^π(s_t) | s_t, a_t] for every (t, s_t, a_t) of positive probability, from ρ.

    G is impl's reward-to-go G_t of the episode, or, with ``total_return``, impl's G_0 (the whole
    episode's discounted return R(τ)); the difference is impl's baseline_advantages. V^π is impl's
    for γ < 1; at γ = 1, where impl's linear solve is singular on the terminal (its contract needs
    γ < 1), it is the verifier's own (:func:`exact_policy_values`).
    """
    P, R, pi, gamma, rho, horizon = (mdp[k] for k in ("P", "R", "pi", "gamma", "rho", "horizon"))
    values = ctx.impl.policy_state_values(P, R, pi, gamma) if gamma < 1 else exact_policy_values(P, R, pi, gamma)
    mass: dict[tuple[int, int, int], Fraction] = {}
    weighted: dict[tuple[int, int, int], Fraction] = {}
    for states, actions, p in episodes(P, pi, dict(enumerate(rho)), horizon):
        rewards = np.array([R[s, a] for s, a in zip(states[:-1], actions, strict=True)], dtype=object)
        returns = ctx.impl.discounted_returns(rewards, gamma)
        if total_return:
            returns = np.full(horizon, returns[0], dtype=object)
        estimates = ctx.impl.baseline_advantages(returns, values[np.array(states[:-1])])
        for t in range(horizon):
            key = (t, states[t], actions[t])
            mass[key] = mass.get(key, 0) + p
            weighted[key] = weighted.get(key, 0) + p * estimates[t]
    return {key: weighted[key] / mass[key] for key in mass}


@verifier(kind="property", uses=("policy_state_values", "discounted_returns", "baseline_advantages"))
@given(episodic_mdps_any_discount)
def return_minus_value_property(ctx: Context, mdp: dict) -> None:
    """On random episodic MDPs (γ in [0, 1], γ = 1 included), policies and start distributions: for
    every step t and every (s_t, a_t) an episode can reach, the mean of G_t - V^π(s_t) over the
    episodes through (s_t, a_t) equals A^π(s_t, a_t) = Q^π(s_t, a_t) - V^π(s_t), exactly.

    G_t is impl's reward-to-go of each enumerated episode and the difference impl's baseline
    advantage; A^π is computed here from V^π solved with sympy, Q^π = R + γ P V^π.
    """
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    # Sampled returns of π's own episodes minus V^π: estimates of the advantage.
    reach_episodic(mdp, data="current", advantages="estimated")
    values = exact_policy_values(P, R, pi, gamma)
    advantages = exact_action_values(P, R, values, gamma) - values[:, None]
    for (t, s, a), mean in _conditional_means(ctx, mdp, total_return=False).items():
        assert mean == advantages[s, a], (t, s, a, mean, advantages[s, a])


class RewardBefore(NoParams):
    """A two-step episode: one action in s0 with a reward, then a choice in s1, then the terminal."""

    gamma: float = Field(ge=0, lt=1)
    reward_before: float = Field(description="reward of the single action in s0")
    rewards_after: list[float] = Field(min_length=2, description="reward of each action in s1")
    pi_after: list[float] = Field(min_length=2, description="the policy in s1")


@verifier(kind="counterexample",
          uses=("policy_state_values", "discounted_returns", "baseline_advantages"), params=RewardBefore)
def total_return_minus_value_exact(ctx: Context) -> dict[str, object]:
    """At t = 1 of a two-step episode that collected a reward at t = 0: the conditional means of
    G_1 - V(s_1) and of R(τ) - V(s_1) = G_0 - V(s_1) given (s_1, a_1), with A(s_1, a_1) computed here.

    States: s0 (one action, ``reward_before``, to s1), s1 (the actions of ``rewards_after``, to the
    terminal), and the terminal; every episode starts in s0. Everything through impl as in
    :func:`_conditional_means`; exact.
    """
    params = ctx.params
    n_actions = len(params.rewards_after)
    P = np.zeros((3, n_actions, 3), dtype=int).astype(object)
    P[0, :, 1] = P[1, :, 2] = P[2, :, 2] = 1
    R = np.array([[as_written(params.reward_before)] * n_actions, [as_written(r) for r in params.rewards_after],
                  [Fraction(0)] * n_actions], dtype=object)
    first_action_only = [Fraction(1)] + [Fraction(0)] * (n_actions - 1)
    pi = np.array([first_action_only, [as_written(p) for p in params.pi_after], first_action_only], dtype=object)
    gamma = as_written(params.gamma)
    mdp = {"P": P, "R": R, "pi": pi, "gamma": gamma, "rho": [Fraction(1), Fraction(0), Fraction(0)], "horizon": 2}
    reach_episodic(mdp, data="current", advantages="estimated")
    values = exact_policy_values(P, R, pi, gamma)
    advantages = exact_action_values(P, R, values, gamma) - values[:, None]
    to_go = _conditional_means(ctx, mdp, total_return=False)
    total = _conditional_means(ctx, mdp, total_return=True)
    return {"advantage": [advantages[1, a] for a in range(n_actions)],
            "reward_to_go_minus_value": [to_go[(1, 1, a)] for a in range(n_actions)],
            "total_return_minus_value": [total[(1, 1, a)] for a in range(n_actions)]}


# --------------------------------------------------------------------------- 4.2.1-4.2.2: V as the expectation of Q


_values = st.fractions(min_value=-5, max_value=5, max_denominator=20)


_states = st.integers(min_value=1, max_value=8).flatmap(lambda k: st.tuples(
    st.lists(st.integers(min_value=1, max_value=20), min_size=k, max_size=k),
    st.lists(_values, min_size=k, max_size=k)))


@verifier(kind="property", uses=("state_value_from_q", "baseline_advantages"))
@given(_states)
def advantage_coefficient_property(ctx: Context, case: tuple[list[int], list[Fraction]]) -> None:
    """For random exact policies and action values at one state, the coefficient impl gives the score
    with the baseline b(s) = V(s) (its own V) is Q(a) - Σ_b π(b) Q(b) for every action, exactly, and it
    is positive exactly for the actions whose Q(a) exceeds that mean."""
    weights, values = case
    reach(actions=len(weights), states=1)
    pi = probability_rows(weights)
    q = np.array(values, dtype=object)
    coefficient = ctx.impl.baseline_advantages(q, ctx.impl.state_value_from_q(pi, q))
    mean = sum(p * v for p, v in zip(pi, q, strict=True))
    assert list(coefficient) == [v - mean for v in q], (list(coefficient), mean)
    assert [c > 0 for c in coefficient] == [v > mean for v in q], list(coefficient)


# Stochastic kernels P[s, a, s2] (every row sums to 1; with one state, or rows of one weight, deterministic),
# one to three states, two to four actions, any policy (zeros allowed) and γ in [0, 15/16].
_discounted_mdps = st.tuples(st.integers(1, 3), st.integers(2, 4)).flatmap(
    lambda size: discounted_exact_mdps(*size))


@verifier(kind="property", uses=("policy_state_values", "policy_action_values", "state_value_from_q"))
@given(_discounted_mdps)
def bellman_value_is_expected_q_property(ctx: Context, mdp: dict) -> None:
    """On random discounted MDPs and policies, impl's Bellman evaluation of the policy is the verifier's own:
    impl's V^π is the exact solution of (I - γ P_π) V = R_π, impl's Q^π is R + γ P V^π for that solution, and
    V^π(s) = Σ_a π(a|s) Q^π(s, a) holds for impl's own pair, both as a sum here and through impl's
    ``state_value_from_q``. A Q^π shifted by a constant, or a V^π that is not the π-expectation of Q^π, fails
    one of these."""
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    values = exact_policy_values(P, R, pi, gamma)
    action_values = exact_action_values(P, R, values, gamma)
    # A stationary discounted setting: the Bellman fixed point of an unbounded horizon, with exact Q^π.
    reach_mdp(P, gamma=gamma, horizon=math.inf, advantages="exact")
    impl_values = ctx.impl.policy_state_values(P, R, pi, gamma)
    impl_action_values = ctx.impl.policy_action_values(P, R, pi, gamma)
    assert list(impl_values) == list(values), ("V^π", list(impl_values), list(values))
    assert np.array_equal(impl_action_values, action_values), ("Q^π", impl_action_values, action_values)
    assert list((pi * impl_action_values).sum(axis=-1)) == list(impl_values), ("Σ_a π Q^π", impl_values)
    from_q = ctx.impl.state_value_from_q(pi, impl_action_values)
    assert list(from_q) == list(impl_values), ("state_value_from_q(π, Q^π)", list(from_q), list(impl_values))


@verifier(kind="property", uses=("state_value_from_q",))
@given(mdps_with_end)
def value_from_exact_q_property(ctx: Context, mdp: dict) -> None:
    """On random MDPs, episodic at γ = 1 and episodic or discounted below it (:data:`mdps_with_end`), impl's
    V from Q, applied to the exact Q^π of every state, gives the exact V^π: both solved here over the
    rationals, V^π from the Bellman equation (I - γ P_π) V = R_π and Q^π = R + γ P V^π from it."""
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    values = exact_policy_values(P, R, pi, gamma)
    action_values = exact_action_values(P, R, values, gamma)
    reach_mdp(P, gamma=gamma, horizon=longest_episode(P), advantages="exact")
    observed = ctx.impl.state_value_from_q(pi, action_values)
    assert list(observed) == list(values), (list(observed), list(values))

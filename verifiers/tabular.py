"""Tabular values and the Bellman operators (week-16 syllabus step 1; module step 4.3.2).

Random MDPs here have exact rational entries, so every identity is checked with ``==``: the
transition rows are integer weights divided by their sum, rewards are eighths, the discount a
sixteenth below 1. The syllabus's two-state example is built from its description: in s1 the
action "stay" keeps s1 and "go" moves to s2; s2 has a single action that keeps s2, written as
two identical actions so that the arrays stay rectangular.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from harness import Context, check_property, verifier
from verifiers._numeric import rounding_bound

ACTION_NAMES = ("stay", "go")
S1, S2 = 0, 1


def _exact(value: float) -> Fraction:
    # repr gives the shortest decimal that round-trips, i.e. the number as the claim wrote it.
    return Fraction(repr(value))


class TwoStates(BaseModel):
    """The syllabus's two-state example."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gamma: float = Field(gt=0, lt=1, description="the discount γ")
    stay_reward: float = Field(description="reward for 'stay' in s1")
    go_reward: float = Field(description="reward for 'go' from s1 to s2")
    s2_reward: float = Field(description="reward of the single action in s2")


def two_state_mdp(params: TwoStates) -> tuple[np.ndarray, np.ndarray, Fraction]:
    """P[s, a, s2], R[s, a] as exact object arrays, and γ."""
    P = np.zeros((2, 2, 2), dtype=int).astype(object)
    P[S1, 0, S1] = P[S1, 1, S2] = P[S2, 0, S2] = P[S2, 1, S2] = 1
    s2_reward = _exact(params.s2_reward)
    R = np.array([[_exact(params.stay_reward), _exact(params.go_reward)], [s2_reward, s2_reward]], dtype=object)
    return P, R, _exact(params.gamma)


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


@verifier("tabular.value_iteration_two_states", uses=("value_iteration", "action_values", "greedy_policy"),
          params=TwoStates)
def value_iteration_two_states(ctx: Context) -> dict[str, object]:
    """Three iterations of impl's value iteration from V = (0, 0) on the two-state example, exactly.

    Iteration k substitutes V_{k-1} into the right-hand side: the two action values of s1 it
    compares are impl's Q_{V_{k-1}}(s1, ·), and the action it prefers is impl's greedy action.
    """
    P, R, gamma = two_state_mdp(ctx.params)
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


@verifier("tabular.fixed_point_two_states",
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
    policy, optimal = exact_policy_iteration(ctx, P, R, gamma)
    stay_forever = ctx.impl.policy_state_values(P, R, _one_hot(np.zeros(2, dtype=int), 2), gamma)
    residual = ctx.impl.bellman_optimality_operator(P, R, optimal, gamma) - optimal
    n = 100
    iterated = ctx.impl.value_iteration(P.astype(float), R.astype(float), float(gamma), n)
    largest = float(max(abs(x) for x in optimal))
    error = float(np.abs(iterated - optimal.astype(float)).max())
    allowed = float(gamma) ** n * largest + rounding_bound(4 * n, largest / (1 - float(gamma)))
    return {
        "optimal_s1": optimal[S1],
        "optimal_s2": optimal[S2],
        "optimal_action_s1": ACTION_NAMES[policy[S1]],
        "fixed_point_residual": max(abs(x) for x in residual),
        "stay_forever_s1": stay_forever[S1],
        "value_iteration_error": error,
        "value_iteration_within_contraction_bound": error <= allowed,
    }


@functools.cache
def _mdps_of_size(n_states: int, n_actions: int) -> st.SearchStrategy:
    weights = st.lists(st.integers(0, 3), min_size=n_states, max_size=n_states)
    table = st.lists(weights, min_size=n_states * n_actions, max_size=n_states * n_actions)
    eighths = st.lists(st.integers(-40, 40), min_size=n_states * n_actions, max_size=n_states * n_actions)
    policy = st.lists(st.lists(st.integers(0, 3), min_size=n_actions, max_size=n_actions),
                      min_size=n_states, max_size=n_states)
    values = st.lists(st.integers(-40, 40), min_size=n_states, max_size=n_states)
    return st.tuples(table, eighths, policy, values, values, st.integers(0, 15)).map(
        functools.partial(_exact_mdp, n_states, n_actions))


def _normalized_rows(weights: np.ndarray) -> np.ndarray:
    """Integer weights to probabilities along the last axis; an all-zero row puts its mass on index 0."""
    weights = np.array(weights, dtype=int)
    weights[..., 0] += weights.sum(axis=-1) == 0
    totals = weights.sum(axis=-1, keepdims=True)
    return np.vectorize(Fraction, otypes=[object])(weights, totals)


def _exact_mdp(n_states: int, n_actions: int, drawn: tuple) -> dict[str, object]:
    table, eighths, policy, v, u, gamma_sixteenths = drawn
    P = _normalized_rows(np.array(table).reshape(n_states, n_actions, n_states))
    R = np.array([Fraction(k, 8) for k in eighths], dtype=object).reshape(n_states, n_actions)
    return {"P": P, "R": R, "pi": _normalized_rows(np.array(policy)), "gamma": Fraction(gamma_sixteenths, 16),
            "v": np.array([Fraction(k, 8) for k in v], dtype=object),
            "u": np.array([Fraction(k, 8) for k in u], dtype=object)}


_exact_mdps = st.tuples(st.integers(1, 4), st.integers(1, 3)).flatmap(lambda size: _mdps_of_size(*size))


def _max_norm(x: np.ndarray) -> Fraction:
    return max(abs(entry) for entry in x)


@verifier("tabular.contraction_property", uses=("bellman_optimality_operator", "bellman_expectation_operator"))
def contraction_property(ctx: Context) -> dict[str, object]:
    """On random exact MDPs, policies and pairs of value functions V, U, impl's optimality operator T
    and expectation operator T^π satisfy |T V - T U|_∞ <= γ |V - U|_∞ exactly."""

    def contracts(mdp: dict) -> None:
        P, R, pi, gamma, v, u = (mdp[k] for k in ("P", "R", "pi", "gamma", "v", "u"))
        distance = _max_norm(v - u)
        optimality = _max_norm(ctx.impl.bellman_optimality_operator(P, R, v, gamma)
                               - ctx.impl.bellman_optimality_operator(P, R, u, gamma))
        expectation = _max_norm(ctx.impl.bellman_expectation_operator(P, R, pi, v, gamma)
                                - ctx.impl.bellman_expectation_operator(P, R, pi, u, gamma))
        assert optimality <= gamma * distance, ("optimality", optimality, gamma * distance)
        assert expectation <= gamma * distance, ("expectation", expectation, gamma * distance)

    return check_property(ctx, contracts, _exact_mdps)


def expected_td_errors(ctx: Context, P: np.ndarray, R: np.ndarray, values: np.ndarray, gamma: Fraction
                       ) -> np.ndarray:
    """E[δ | s, a] = Σ_{s2} P(s2|s, a) δ(s, a, s2), with every δ(s, a, s2) from impl's TD error."""
    n_states, n_actions = R.shape
    shape = (n_states, n_actions, n_states)
    delta = ctx.impl.td_errors(np.broadcast_to(R[:, :, None], shape), np.broadcast_to(values[:, None, None], shape),
                               np.broadcast_to(values[None, None, :], shape), np.zeros(shape, dtype=int), gamma)
    return (P * delta).sum(axis=-1)


def exact_policy_values(P: np.ndarray, R: np.ndarray, pi: np.ndarray, gamma: Fraction) -> np.ndarray:
    """V^π solved here with sympy, independently of impl: (I - γ P_π) V = R_π."""
    transition = sp.Matrix((pi[:, :, None] * P).sum(axis=1).tolist())
    reward = sp.Matrix((pi * R).sum(axis=1).tolist())
    solution = (sp.eye(len(R)) - sp.Rational(gamma.numerator, gamma.denominator) * transition).LUsolve(reward)
    return np.array([Fraction(int(x.p), int(x.q)) for x in solution], dtype=object)


@verifier("tabular.td_error_expectation_property", uses=("td_errors", "policy_state_values", "policy_action_values"))
def td_error_expectation_property(ctx: Context) -> dict[str, object]:
    """On random exact MDPs and policies, with V = V^π, the expectation over s_{t+1} of impl's TD
    error at (s_t, a_t) equals A^π(s_t, a_t) = Q^π(s_t, a_t) - V^π(s_t), exactly.

    V^π and Q^π = R + γ P V^π are computed here with sympy; impl's V^π and Q^π must equal them.
    """

    def is_advantage(mdp: dict) -> None:
        P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
        values = exact_policy_values(P, R, pi, gamma)
        advantages = R + gamma * (P * values).sum(axis=-1) - values[:, None]
        assert np.array_equal(ctx.impl.policy_state_values(P, R, pi, gamma), values), "V^π"
        assert np.array_equal(ctx.impl.policy_action_values(P, R, pi, gamma) - values[:, None], advantages), "Q^π"
        expected = expected_td_errors(ctx, P, R, values, gamma)
        assert np.array_equal(expected, advantages), (expected, advantages)

    return check_property(ctx, is_advantage, _exact_mdps)


@verifier("tabular.policy_evaluation_property",
          uses=("policy_state_values", "policy_action_values", "bellman_expectation_operator"))
def policy_evaluation_property(ctx: Context) -> dict[str, object]:
    """On random exact MDPs and policies, impl's V^π is the solution sympy finds for
    (I - γ P_π) V = R_π, a fixed point of impl's T^π, and Σ_a π(a|s) Q^π(s, a) for impl's Q^π."""

    def solves_the_equation(mdp: dict) -> None:
        P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
        values = ctx.impl.policy_state_values(P, R, pi, gamma)
        solution = exact_policy_values(P, R, pi, gamma)
        assert np.array_equal(values, solution), (values, solution)
        assert np.array_equal(ctx.impl.bellman_expectation_operator(P, R, pi, values, gamma), values), "not fixed"
        q_values = ctx.impl.policy_action_values(P, R, pi, gamma)
        assert np.array_equal((pi * q_values).sum(axis=-1), values), (q_values, values)

    return check_property(ctx, solves_the_equation, _exact_mdps)


@verifier("tabular.optimal_residual_property",
          uses=("td_errors", "policy_state_values", "greedy_policy", "bellman_optimality_operator", "action_values"))
def optimal_residual_property(ctx: Context) -> dict[str, object]:
    """On random exact MDPs, with V* from exact policy iteration on impl, V* is a fixed point of
    impl's optimality operator, and the expected Bellman residual of impl's TD error at (s, a) is
    A*(s, a) = Q*(s, a) - V*(s): at most 0, and 0 for the greedy action."""

    def is_optimal_advantage(mdp: dict) -> None:
        P, R, gamma = (mdp[k] for k in ("P", "R", "gamma"))
        policy, optimal = exact_policy_iteration(ctx, P, R, gamma)
        assert np.array_equal(ctx.impl.bellman_optimality_operator(P, R, optimal, gamma), optimal), "not fixed"
        advantages = ctx.impl.action_values(P, R, optimal, gamma) - optimal[:, None]
        expected = expected_td_errors(ctx, P, R, optimal, gamma)
        assert np.array_equal(expected, advantages), (expected, advantages)
        assert all(a <= 0 for a in advantages.reshape(-1)), advantages
        assert all(advantages[s, policy[s]] == 0 for s in range(len(policy))), (advantages, policy)

    return check_property(ctx, is_optimal_advantage, _exact_mdps)

"""Checks of the week-16 syllabus (step 1) that the syllabus's other modules do not make.

- One final reward and γ = 1: every token's reward-to-go is that reward (a property over lengths
  and rewards, beside the exact instance of ``syllabus_bandit.undiscounted_answer_exact``).
- The value head's regression target on the current policy's samples: its fixed point is V^π of
  that policy, and V* is not one unless the policy is optimal.
- λ of GAE mixes horizons without pricing the future: with the exact V^π, the mean of the GAE
  estimate given (s_t, a_t) is A^π(s_t, a_t) for every λ.

Random MDPs have exact rational entries (integer weights over their sum, rewards in eighths, γ in
sixteenths below 1; the value head's are also drawn episodic, with γ up to 1). The references (V^π
by sympy's exact solve, V* by exact policy iteration, Q = R + γ P V) are ``verifiers.tabular``'s,
computed without impl.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np

from claims_harness import Context, assume, check_property, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import exact_mdp
from verifiers._numeric import largest_magnitude, rounding_bound
from verifiers._reach import reach_mdp
from verifiers.tabular import (
    episodic_mdps_any_discount,
    exact_action_values,
    exact_optimal_values,
    exact_policy_values,
    reach_tabular,
)

# --------------------------------------------------------------------------- one final reward, γ = 1

# Never a subnormal reward: a platform that flushes subnormals to zero (XLA on the CPU) rightly sums 5e-324 + 0 to 0.
_answers = st.tuples(st.integers(1, 600), st.floats(min_value=-10, max_value=10, allow_subnormal=False),
                     st.sampled_from([1, 1.0]))


@verifier(kind="property", uses=("discounted_returns",))
@given(_answers)
def undiscounted_answer_property(ctx: Context, answer: tuple[int, float, float]) -> None:
    """For answers of 1 to 600 tokens whose only reward r is the last one, and γ = 1 (the integer or
    the float): every reward-to-go G_t from impl is r itself, one score for every token.

    Compared with ==, in floats: with γ = 1 every G_t is r plus zeros times 1, which every correct
    way of summing (a backward loop, a reversed cumulative sum, a linear filter) gives exactly.
    """
    length, final, gamma = answer
    rewards = np.zeros(length)
    rewards[-1] = final
    reach(discount=gamma, horizon=rewards.size, tokens=rewards.size)
    returns = [float(g) for g in ctx.impl.discounted_returns(rewards, gamma)]
    assert len(returns) == length, (length, len(returns))
    assert all(g == final for g in returns), (length, final, sorted(set(returns))[:5])


# --------------------------------------------------------------------------- random exact MDPs


@functools.cache
def _mdps_of_size(n_states: int, n_actions: int) -> st.SearchStrategy:
    pairs = n_states * n_actions
    return st.tuples(st.lists(st.integers(0, 3), min_size=pairs * n_states, max_size=pairs * n_states),
                     st.lists(st.integers(-40, 40), min_size=pairs, max_size=pairs),
                     st.lists(st.integers(0, 3), min_size=pairs, max_size=pairs),
                     st.integers(0, 15)).map(functools.partial(exact_mdp, n_states, n_actions))


def _mdps(actions: tuple[int, int]) -> st.SearchStrategy:
    return st.tuples(st.integers(1, 3), st.integers(*actions)).flatmap(lambda size: _mdps_of_size(*size))


# --------------------------------------------------------------------------- the value head's target


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


# --------------------------------------------------------------------------- λ mixes horizons, γ prices the future


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

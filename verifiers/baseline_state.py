"""What may be subtracted without changing the expected gradient (module step 4.2.1, week 16 step 2).

Also the exact helpers the other baseline verifiers share: the check of the implementation's own (float)
softmax score against the exact e_a - π (``verifiers._exact.softmax_scores``); and random tabular MDPs,
episodic or discounted, with their exact V^π, Q^π and discounted state visitation, solved here over the
rationals.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import (
    as_fractions,
    exact_action_values,
    exact_discounted_visitation,
    exact_policy_values,
    over,
    probability_rows,
    softmax_score,
    softmax_scores,
)
from verifiers._numeric import rounding_bound
from verifiers._params import PositiveFractions
from verifiers._reach import reach_mdp


def softmax_score_agrees(ctx: Context, pi_a: np.ndarray, scores: np.ndarray) -> bool:
    """impl's softmax score at logits log π, for every action, equals the exact e_a - π up to rounding."""
    logits = np.log(np.array(pi_a, dtype=float))
    # One row of logits per action: the contract's z [..., K] with a [...], not a broadcast it does not state.
    observed = ctx.impl.softmax_score(np.broadcast_to(logits, (len(pi_a), len(pi_a))), np.arange(len(pi_a)))
    return bool(np.all(np.abs(observed - scores.astype(float)) <= rounding_bound(4 * len(pi_a), 1.0)))


@verifier(kind="symbolic")
def score_mean_zero_symbolic(ctx: Context) -> dict[str, object]:
    """E_{a~π}[b ∇_θ log π(a)] = b ∇_θ Σ_a π(a) = b ∇_θ 1 = 0, for K symbolic actions.

    General form: π(a, θ) is an undefined function of a scalar parameter coordinate θ, so the
    argument covers every parameterisation; ``expectation_minus_gradient_of_total`` is the first
    two lines (move b out, undo the log-derivative), ``gradient_of_total_when_normalised`` the third
    (Σ_a π(a, θ) = 1 for every θ). Softmax form: π_a = exp(z_a)/Z over K symbolic logits, the score
    ∂ log π_a / ∂z_k is differentiated by sympy, and the expectation is summed over a.
    """
    categories = sp.Symbol("K", integer=True, positive=True)
    reach(actions=categories, states=1)
    a, j, k = sp.symbols("a j k", integer=True)
    theta, baseline = sp.symbols("theta b", real=True)
    pi = sp.Function("pi")
    expectation = sp.Sum(pi(a, theta) * baseline * sp.diff(sp.log(pi(a, theta)), theta), (a, 1, categories))
    total = sp.Sum(pi(a, theta), (a, 1, categories))
    gradient_of_total = baseline * sp.Derivative(total, theta)
    residual = sp.simplify(sp.simplify(expectation) - gradient_of_total.doit())

    z = sp.IndexedBase("z", real=True)
    partition = sp.Symbol("Z", positive=True)
    logsumexp = sp.log(sp.Sum(sp.exp(z[j]), (j, 1, categories)))
    score = sp.diff(z[a] - logsumexp, z[k])
    softmax_expectation = sp.Sum(sp.exp(z[a] - logsumexp) * baseline * score, (a, 1, categories)).doit()

    def is_partition(expr: sp.Basic) -> bool:
        return (isinstance(expr, sp.Sum) and expr.limits[0][1:] == (1, categories)
                and sp.simplify(expr.function - sp.exp(z[expr.limits[0][0]])) == 0)

    # Both sums over exp(z) are the partition function Z, written with different dummy indices.
    softmax_expectation = sp.simplify(sp.simplify(softmax_expectation).replace(is_partition, lambda _: partition))
    return {
        "expectation_minus_gradient_of_total": residual,
        "gradient_of_total_when_normalised": gradient_of_total.subs(total, 1).doit(),
        "softmax_expectation": softmax_expectation,
    }


_probability = st.fractions(min_value=Fraction(1, 50), max_value=Fraction(49, 50), max_denominator=50)
_value = st.fractions(min_value=-5, max_value=5, max_denominator=20)
_two_step_mdps = st.tuples(st.lists(_probability, min_size=3, max_size=3),
                           st.lists(st.lists(_value, min_size=2, max_size=2), min_size=3, max_size=3),
                           st.lists(_value, min_size=3, max_size=3),
                           st.fractions(min_value=0, max_value=1, max_denominator=10))


def _two_step_expected_gradient(ctx: Context, p_s: list[Fraction], r_sa: list[list[Fraction]],
                                b_s: list[Fraction], gamma: Fraction) -> tuple[np.ndarray, int]:
    """E[Σ_t (G_t - b(s_t)) ∇ log π(a_t|s_t)] over the four episodes of a two-step MDP.

    s0 -> (a0) -> s_{1+a0} -> (a1) -> end; two actions per state, π(1|s) = p_s[s], reward r(s, a).
    The policy is a softmax over two logits per state, so the parameter vector has 6 entries and
    the score of (s, a) is e_a - π(.|s) in the block of state s. Also returns the number of decisions
    of an episode.
    """
    pi_sa = [np.array([1 - p, p], dtype=object) for p in p_s]
    expected = np.zeros(6, dtype=object)
    for a0 in (0, 1):
        s1 = 1 + a0
        for a1 in (0, 1):
            probability = pi_sa[0][a0] * pi_sa[s1][a1]
            rewards = (r_sa[0][a0], r_sa[s1][a1])
            returns = np.array([rewards[0] + gamma * rewards[1], rewards[1]], dtype=object)
            advantages = ctx.impl.baseline_advantages(returns, np.array([b_s[0], b_s[s1]], dtype=object))
            estimate = np.zeros(6, dtype=object)
            steps = ((0, a0), (s1, a1))
            for t, (state, action) in enumerate(steps):
                estimate[2 * state:2 * state + 2] += advantages[t] * softmax_score(pi_sa[state], action)
            expected = expected + probability * estimate
    return expected, len(steps)


@verifier(kind="property", uses=("baseline_advantages",))
@given(_two_step_mdps)
def state_baseline_unbiased_property(
    ctx: Context, mdp: tuple[list[Fraction], list[list[Fraction]], list[Fraction], Fraction]
) -> None:
    """On random two-step MDPs with exact rational policies, rewards, discounts and baselines, the
    expected gradient with impl's A_t = G_t - b(s_t) equals the one without a baseline exactly.

    s_1 is random (it depends on a_0), so this checks more than one state: b(s_1) multiplies the
    score of a_1 only, whose mean given s_1 is zero.
    """
    p_s, r_sa, b_s, gamma = mdp
    with_baseline, horizon = _two_step_expected_gradient(ctx, p_s, r_sa, b_s, gamma)
    without, _ = _two_step_expected_gradient(ctx, p_s, r_sa, [Fraction(0)] * 3, gamma)
    # s_1 = 1 + a_0 is a function of the action; the coefficients are sampled returns G_t of the
    # episodes, each weighted by its probability under the policy whose score is taken.
    reach(states=len(p_s), actions=len(r_sa[0]), transitions="deterministic", horizon=horizon, discount=gamma,
          advantages="estimated", data="current")
    assert list(with_baseline) == list(without), (list(with_baseline), list(without))


def compensating_term(pi: sp.Function, baseline: sp.IndexedBase, a: sp.Symbol, theta: sp.Symbol,
                      categories: sp.Basic) -> sp.Basic:
    """Σ_a b(s, a) ∂_θ π(a|s): the term an action-dependent control variate must add back (module step 4.2.1).

    Its own function so that a test can replace it with a wrong term and watch the symbolic check fail.
    """
    return sp.Sum(baseline[a] * sp.diff(pi(a, theta), theta), (a, 1, categories))


_SOFTMAX_ACTIONS = 3


@verifier(kind="symbolic")
def action_dependent_compensated_symbolic(ctx: Context) -> dict[str, object]:
    """E_a[(Q(a) - b(a)) ∇ log π(a)] + Σ_a b(a) ∇π(a) - ∇ Σ_a π(a) Q(a), for K symbolic actions.

    General form: π(a, θ) is an undefined function of one parameter coordinate θ, Q and b arbitrary
    symbols per action, so the residual covers every parameterisation and every b(s, a). Without
    the compensating term the estimator's bias is -∂_θ Σ_a π(a, θ) b(a), reported as a residual
    against that formula. Softmax form: three symbolic logits and baselines b_1, b_2, b_3, the score
    derived by sympy; the uncompensated bias is -π_k (b_k - Σ_a π_a b_a) in coordinate k, which is
    not identically zero and vanishes when every b_a is the same value c.
    """
    categories = sp.Symbol("K", integer=True, positive=True)
    reach(actions=categories, states=1)
    a = sp.Symbol("a", integer=True)
    theta = sp.Symbol("theta", real=True)
    pi = sp.Function("pi")
    q, baseline = sp.IndexedBase("Q", real=True), sp.IndexedBase("b", real=True)
    uncompensated = sp.simplify(sp.Sum(pi(a, theta) * (q[a] - baseline[a]) * sp.diff(sp.log(pi(a, theta)), theta),
                                       (a, 1, categories)))
    gradient = sp.Derivative(sp.Sum(pi(a, theta) * q[a], (a, 1, categories)), theta).doit()
    compensated = uncompensated + compensating_term(pi, baseline, a, theta, categories)
    bias_formula = -sp.Derivative(sp.Sum(pi(a, theta) * baseline[a], (a, 1, categories)), theta).doit()

    logits = sp.symbols(f"z1:{_SOFTMAX_ACTIONS + 1}", real=True)
    reach(actions=len(logits), states=1)
    values = sp.symbols(f"Q1:{_SOFTMAX_ACTIONS + 1}", real=True)
    baselines = sp.symbols(f"b1:{_SOFTMAX_ACTIONS + 1}", real=True)
    partition = sum(sp.exp(z) for z in logits)
    probabilities = [sp.exp(z) / partition for z in logits]
    actions = range(_SOFTMAX_ACTIONS)
    softmax_gradient = [sp.diff(sum(p * v for p, v in zip(probabilities, values, strict=True)), z) for z in logits]
    softmax_bias = [sp.simplify(sum(probabilities[i] * (values[i] - baselines[i])
                                    * sp.diff(sp.log(probabilities[i]), z) for i in actions) - truth)
                    for z, truth in zip(logits, softmax_gradient, strict=True)]
    mean_baseline = sum(p * b for p, b in zip(probabilities, baselines, strict=True))
    softmax_bias_formula = [-p * (b - mean_baseline) for p, b in zip(probabilities, baselines, strict=True)]
    constant = sp.Symbol("c", real=True)
    return {
        "compensated_minus_gradient": sp.simplify(compensated - gradient),
        "uncompensated_bias_minus_formula": sp.simplify(uncompensated - gradient - bias_formula),
        "softmax_uncompensated_bias_minus_formula": [sp.simplify(bias - formula) for bias, formula
                                                     in zip(softmax_bias, softmax_bias_formula, strict=True)],
        "softmax_uncompensated_bias_identically_zero": all(bias == 0 for bias in softmax_bias),
        "softmax_bias_of_constant_baseline": [sp.simplify(bias.subs(dict.fromkeys(baselines, constant)))
                                              for bias in softmax_bias],
    }


_exact_probability_vectors = st.integers(min_value=2, max_value=5).flatmap(lambda k: st.tuples(
    st.lists(st.integers(min_value=1, max_value=20), min_size=k, max_size=k),
    st.lists(_value, min_size=k, max_size=k),
    st.lists(_value, min_size=k, max_size=k)))


@verifier(kind="property", uses=("baseline_advantages", "score_function_gradient"))
@given(_exact_probability_vectors)
def action_dependent_compensated_property(ctx: Context, case: tuple[list[int], list[Fraction], list[Fraction]]) -> None:
    """For random exact softmax policies at one state, action values Q(a) and baselines b(a), with
    impl's advantages Q(a) - b(a) and one-sample estimates (Q(a) - b(a)) (e_a - π):

    * the π-weighted estimate plus the compensating term Σ_a b(a) ∇π(a), with ∇_z π(a) = π(a)(e_a - π),
      equals the true gradient Σ_a π(a) Q(a) (e_a - π), exactly;
    * without the term the bias is zero exactly when b takes the same value for every action.
    """
    weights, values, baselines = case
    reach(actions=len(weights), states=1)
    pi = probability_rows(weights)
    q, b = np.array(values, dtype=object), np.array(baselines, dtype=object)
    scores = softmax_scores(pi)
    advantages = ctx.impl.baseline_advantages(q, b)
    estimates = ctx.impl.score_function_gradient(advantages[:, None], scores[:, None, :])
    expected = pi @ estimates
    gradient = (pi * q) @ scores
    compensation = (pi * b) @ scores
    assert list(expected + compensation) == list(gradient), (list(expected + compensation), list(gradient))
    unbiased = all(v == 0 for v in expected - gradient)
    assert unbiased == (len(set(baselines)) == 1), (baselines, list(expected - gradient))


class ActionBaseline(NoParams):
    """An exact softmax policy at one state, its action values and an action-dependent baseline b(s, a)."""

    pi: PositiveFractions = Field(min_length=2,
                                  description="π(a|s) per action, exact fractions such as '1/2', summing to 1")
    q: list[float] = Field(min_length=2, description="Q(s, a) per action")
    b: list[float] = Field(min_length=2, description="b(s, a) per action")

    @model_validator(mode="after")
    def _one_entry_per_action(self) -> ActionBaseline:
        if not len(self.pi) == len(self.q) == len(self.b):
            raise ValueError("pi, q and b need one entry per action")
        return self


@verifier(kind="counterexample", params=ActionBaseline,
          uses=("softmax_score", "baseline_advantages", "score_function_gradient"))
def action_dependent_bias(ctx: Context) -> dict[str, object]:
    """Σ_a π(a) [(Q(a) - b(a)) - Q(a)] ∇ log π(a): the bias an action-dependent baseline adds, exactly.

    Every single-action estimate goes through impl (advantage, one-sample estimator) in rational
    arithmetic, with the exact softmax score e_a - π checked against impl's float softmax score; the
    expectation is the π-weighted sum over the actions. ``state_baseline_bias`` repeats it with the
    action-independent baseline Σ_a π(a) b(a).
    """
    pi, q, b = as_fractions(ctx.params.pi), as_fractions(ctx.params.q), as_fractions(ctx.params.b)
    reach(actions=len(pi), states=1)
    scores = softmax_scores(pi)

    def expected_gradient(baseline: np.ndarray) -> np.ndarray:
        advantages = ctx.impl.baseline_advantages(q, baseline)
        estimates = ctx.impl.score_function_gradient(advantages[:, None], scores[:, None, :])
        return pi @ estimates

    no_baseline = expected_gradient(np.zeros_like(b) + Fraction(0))
    return {
        "bias": list(expected_gradient(b) - no_baseline),
        "state_baseline_bias": list(expected_gradient(np.full_like(b, pi @ b)) - no_baseline),
        "softmax_score_agrees": softmax_score_agrees(ctx, pi, scores),
    }


def state_value_sum(pi: sp.IndexedBase, q: sp.IndexedBase, index: sp.Symbol, categories: sp.Basic) -> sp.Basic:
    """V = Σ_c π_c Q_c, the baseline of the advantage check; its own function so that a test can put a
    wrong value in its place and watch that check fail."""
    return sp.Sum(pi[index] * q[index], (index, 1, categories))


@verifier(kind="symbolic")
def advantage_mean_zero_symbolic(ctx: Context) -> dict[str, object]:
    """E_{a~π}[Q(a) - V] with V = Σ_b π(b) Q(b): Σ_a π_a Q_a - V Σ_a π_a, zero once Σ_a π_a = 1.

    K is a symbol; ``expectation`` is reported with Σ π left as a sum, and
    ``expectation_when_normalised`` after substituting Σ π = 1. V's summation index c is renamed to
    a once the outer sum is expanded, so two sums cancel only when they are the same sum.
    """
    categories = sp.Symbol("K", integer=True, positive=True)
    reach(actions=categories, states=1)
    a, c = sp.symbols("a c", integer=True)
    pi, q = sp.IndexedBase("pi", positive=True), sp.IndexedBase("Q", real=True)
    value = state_value_sum(pi, q, c, categories)
    expectation = sp.factor_terms(sp.expand(sp.Sum(pi[a] * (q[a] - value), (a, 1, categories)))).xreplace({c: a})
    normalised = expectation.subs(sp.Sum(pi[a], (a, 1, categories)), 1)
    return {"expectation": expectation, "expectation_when_normalised": sp.simplify(normalised)}


_policies_and_values = st.integers(min_value=1, max_value=8).flatmap(lambda k: st.tuples(
    st.lists(st.integers(min_value=1, max_value=20), min_size=k, max_size=k),
    st.lists(_value, min_size=k, max_size=k),
    st.fractions(min_value=-1000, max_value=1000, max_denominator=10)))


@verifier(kind="property", uses=("state_value_from_q", "baseline_advantages"))
@given(_policies_and_values)
def advantage_mean_zero_property(ctx: Context, case: tuple[list[int], list[Fraction], Fraction]) -> None:
    """For random exact policies and action values, impl's V equals Σ_a π(a) Q(a), impl's advantages
    Q - V have π-mean exactly zero, and adding one constant c to every Q(a) (every completion earns
    c more) leaves the advantages exactly as they were. V of a batch of two states (the policy and
    its reverse, Q and Q + c; the contract's shape [..., K]) is each state's own Σ_a π(a) Q(a)."""
    weights, values, offset = case
    reach(actions=len(weights), states=1)
    pi = probability_rows(weights)
    q = np.array(values, dtype=object)
    value = ctx.impl.state_value_from_q(pi, q)
    assert value == sum(p * v for p, v in zip(pi, q, strict=True)), value
    advantages = ctx.impl.baseline_advantages(q, value)
    assert (pi * advantages).sum() == 0, list(advantages)
    shifted = q + offset
    shifted_advantages = ctx.impl.baseline_advantages(shifted, ctx.impl.state_value_from_q(pi, shifted))
    assert list(shifted_advantages) == list(advantages), (offset, list(shifted_advantages), list(advantages))
    batch = ctx.impl.state_value_from_q(np.stack([pi, pi[::-1]]), np.stack([q, shifted]))
    each_state = [value, sum(p * v for p, v in zip(pi[::-1], shifted, strict=True))]
    assert np.shape(batch) == (2,) and list(batch) == each_state, (batch, each_state)


# --------------------------------------------------------------------------- MDPs whose episodes end


def longest_episode(P: np.ndarray) -> float:
    """The most decisions an episode of ``P[s, a, s2]`` (last column: the episode ends) can take from any of its
    S = P.shape[0] states: infinite when moves of positive probability close a cycle among the states."""
    n_states = P.shape[0]
    successors = [sorted({s2 for s2 in range(n_states) if any(P[s, a, s2] != 0 for a in range(P.shape[1]))})
                  for s in range(n_states)]
    decisions: dict[int, float] = {}
    on_path: set[int] = set()

    def longest_from(s: int) -> float:
        if s in on_path:
            return math.inf
        if s not in decisions:
            on_path.add(s)
            decisions[s] = 1 + max((longest_from(s2) for s2 in successors[s]), default=0)
            on_path.discard(s)
        return decisions[s]

    return max(longest_from(s) for s in range(n_states))


def _mdp_with_end(n_states: int, n_actions: int, drawn: tuple) -> dict[str, object]:
    """``P[s, a, :]`` over the S states and, in a last column, the end of the episode; ρ and π are positive.

    At γ = 1 every (s, a) ends the episode with probability at least 1/10, so that V^π is finite; below 1 the
    end may have probability 0 (a continuing MDP, or moves that are a function of the state and action).
    With ``forward`` the moves only go to higher-numbered states, so every episode ends within S decisions.
    A (s, a) drawn to move nowhere ends the episode.
    """
    moves, endings, eighths, policy, start, baselines, gamma_eighths, forward = drawn
    gamma = Fraction(gamma_eighths, 8)
    if forward:
        moves = [[w if s2 > pair // n_actions else 0 for s2, w in enumerate(move)] for pair, move in enumerate(moves)]
    endings = [end if gamma < 1 and sum(move) + end > 0 else max(end, 1) for move, end in zip(moves, endings,
                                                                                               strict=True)]
    P = probability_rows([[*move, end] for move, end in zip(moves, endings, strict=True)])
    return {"P": P.reshape(n_states, n_actions, n_states + 1), "R": over(eighths, 8).reshape(n_states, n_actions),
            "pi": probability_rows(policy), "rho": probability_rows(start), "b": over(baselines, 8), "gamma": gamma}


@functools.cache
def _mdps_with_end_of_size(n_states: int, n_actions: int) -> st.SearchStrategy:
    pairs = n_states * n_actions
    moves = st.lists(st.lists(st.integers(0, 3), min_size=n_states, max_size=n_states), min_size=pairs,
                     max_size=pairs)
    endings = st.lists(st.integers(0, 3), min_size=pairs, max_size=pairs)
    eighths = st.lists(st.integers(-40, 40), min_size=pairs, max_size=pairs)
    policy = st.lists(st.lists(st.integers(1, 4), min_size=n_actions, max_size=n_actions), min_size=n_states,
                      max_size=n_states)
    start = st.lists(st.integers(1, 3), min_size=n_states, max_size=n_states)
    baselines = st.lists(st.integers(-40, 40), min_size=n_states, max_size=n_states)
    return st.tuples(moves, endings, eighths, policy, start, baselines, st.integers(1, 8), st.booleans()).map(
        functools.partial(_mdp_with_end, n_states, n_actions))


# One to three states, two to four actions, γ from 1/8 to 1, a positive policy and start distribution; moves
# anywhere, or only forward (episodes of at most S decisions). When every (s, a) ends the episode at once, each
# state is a bandit.
mdps_with_end = st.tuples(st.integers(1, 3), st.integers(2, 4)).flatmap(
    lambda size: _mdps_with_end_of_size(*size))


def tabular_softmax_scores(pi: np.ndarray) -> np.ndarray:
    """scores[s, a] = ∇_θ log π(a|s) for a tabular softmax θ[s, a], flattened: e_a - π(.|s) in the block of s."""
    n_states, n_actions = pi.shape
    scores = np.zeros((n_states, n_actions, n_states * n_actions), dtype=object) + Fraction(0)
    for s in range(n_states):
        scores[s, :, s * n_actions:(s + 1) * n_actions] = softmax_scores(pi[s])
    return scores


@verifier(kind="property", uses=("baseline_advantages",))
@given(mdps_with_end)
def state_baseline_exact_q_property(ctx: Context, mdp: dict) -> None:
    """On random MDPs (:data:`mdps_with_end`: one to three states, two to four actions, deterministic or stochastic
    moves, γ in (0, 1]) with a tabular softmax policy, the policy gradient Σ_s d(s) Σ_a π(a|s) C(s, a) ∇log π(a|s)
    with impl's coefficients C = Q^π(s, a) - b(s) equals, exactly, the one with C = Q^π(s, a) - 0.

    Q^π and the discounted visitation d(s) = Σ_t γ^t Pr(s_t = s) are solved here over the rationals;
    b is a random baseline per state. impl's ``baseline_advantages`` gets every (s, a) in one array, state
    by state, with b(s) repeated for each action of s, so a baseline it takes from a neighbouring entry
    depends on the action.
    """
    P, R, pi, rho, b, gamma = (mdp[k] for k in ("P", "R", "pi", "rho", "b", "gamma"))
    n_states, n_actions = R.shape
    q = exact_action_values(P, R, exact_policy_values(P, R, pi, gamma), gamma)
    # The coefficients are the exact Q^π of the witness; its states are visited under the policy scored.
    reach_mdp(P, gamma=gamma, horizon=longest_episode(P), advantages="exact", data="current")
    weights = (exact_discounted_visitation(P, pi, rho, gamma)[:, None] * pi).reshape(-1)
    scores = tabular_softmax_scores(pi).reshape(n_states * n_actions, -1)

    def gradient(baseline: np.ndarray) -> list[Fraction]:
        coefficients = ctx.impl.baseline_advantages(q.reshape(-1), np.repeat(baseline, n_actions))
        return list((weights * coefficients) @ scores)

    with_baseline, without = gradient(b), gradient(np.zeros(n_states, dtype=int).astype(object))
    assert with_baseline == without, (with_baseline, without)

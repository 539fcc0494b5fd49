"""What may be subtracted without changing the expected gradient (module step 4.2.1, week 16 step 2).

Also the exact categorical helpers the other baseline verifiers share: the score of a softmax
policy with respect to its logits, e_a - π, computed from exact probabilities and checked against
the implementation's own (float) softmax score.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from harness import Context, check_property, verifier
from verifiers._numeric import rounding_bound


def exact_softmax_scores(pi_a: np.ndarray) -> np.ndarray:
    """Row a is ∇_z log π(a) = e_a - π for a softmax policy with probabilities ``pi_a`` (exact)."""
    categories = len(pi_a)
    return np.array([[Fraction(int(a == k)) - pi_a[k] for k in range(categories)] for a in range(categories)],
                    dtype=object)


def softmax_score_agrees(ctx: Context, pi_a: np.ndarray, scores: np.ndarray) -> bool:
    """impl's softmax score at logits log π, for every action, equals the exact e_a - π up to rounding."""
    logits = np.log(np.array(pi_a, dtype=float))
    observed = ctx.impl.softmax_score(logits, np.arange(len(pi_a)))
    return bool(np.all(np.abs(observed - scores.astype(float)) <= rounding_bound(4 * len(pi_a), 1.0)))


@verifier("baseline_state.score_mean_zero_symbolic")
def score_mean_zero_symbolic(ctx: Context) -> dict[str, object]:
    """E_{a~π}[b ∇_θ log π(a)] = b ∇_θ Σ_a π(a) = b ∇_θ 1 = 0, for K symbolic actions.

    General form: π(a, θ) is an undefined function of a scalar parameter coordinate θ, so the
    argument covers every parameterisation; ``expectation_minus_gradient_of_total`` is the first
    two lines (move b out, undo the log-derivative), ``gradient_of_total_when_normalised`` the third
    (Σ_a π(a, θ) = 1 for every θ). Softmax form: π_a = exp(z_a)/Z over K symbolic logits, the score
    ∂ log π_a / ∂z_k is differentiated by sympy, and the expectation is summed over a.
    """
    categories = sp.Symbol("K", integer=True, positive=True)
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
                                b_s: list[Fraction], gamma: Fraction) -> np.ndarray:
    """E[Σ_t (G_t - b(s_t)) ∇ log π(a_t|s_t)] over the four episodes of a two-step MDP.

    s0 -> (a0) -> s_{1+a0} -> (a1) -> end; two actions per state, π(1|s) = p_s[s], reward r(s, a).
    The policy is a softmax over two logits per state, so the parameter vector has 6 entries and
    the score of (s, a) is e_a - π(.|s) in the block of state s.
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
            for t, (state, action) in enumerate(((0, a0), (s1, a1))):
                estimate[2 * state:2 * state + 2] += advantages[t] * exact_softmax_scores(pi_sa[state])[action]
            expected = expected + probability * estimate
    return expected


@verifier("baseline_state.state_baseline_unbiased_property", uses=("baseline_advantages",))
def state_baseline_unbiased_property(ctx: Context) -> dict[str, object]:
    """On random two-step MDPs with exact rational policies, rewards, discounts and baselines, the
    expected gradient with impl's A_t = G_t - b(s_t) equals the one without a baseline exactly.

    s_1 is random (it depends on a_0), so this checks more than one state: b(s_1) multiplies the
    score of a_1 only, whose mean given s_1 is zero.
    """

    def unbiased(mdp: tuple[list[Fraction], list[list[Fraction]], list[Fraction], Fraction]) -> None:
        p_s, r_sa, b_s, gamma = mdp
        with_baseline = _two_step_expected_gradient(ctx, p_s, r_sa, b_s, gamma)
        without = _two_step_expected_gradient(ctx, p_s, r_sa, [Fraction(0)] * 3, gamma)
        assert list(with_baseline) == list(without), (list(with_baseline), list(without))

    return check_property(ctx, unbiased, _two_step_mdps)


class ActionBaseline(BaseModel):
    """A softmax policy at one state, its action values and an action-dependent baseline b(s, a)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    logits: list[float] = Field(min_length=2, description="z, one logit per action")
    q: list[float] = Field(min_length=2, description="Q(s, a) per action")
    b: list[float] = Field(min_length=2, description="b(s, a) per action")


@verifier("baseline_state.action_dependent_bias", params=ActionBaseline,
          uses=("softmax", "softmax_score", "baseline_advantages", "score_function_gradient"))
def action_dependent_bias(ctx: Context) -> dict[str, object]:
    """Σ_a π(a) [(Q(a) - b(a)) - Q(a)] ∇ log π(a): the bias an action-dependent baseline adds.

    Every single-action estimate goes through impl (advantage, score, one-sample estimator); the
    expectation is the π-weighted sum over the actions. ``state_baseline_bias`` repeats it with
    the action-independent baseline mean_a b(a), which must give zero.
    """
    logits, q, b = (np.array(v, dtype=float) for v in (ctx.params.logits, ctx.params.q, ctx.params.b))
    actions = np.arange(len(logits))
    pi = ctx.impl.softmax(logits)
    scores = ctx.impl.softmax_score(np.broadcast_to(logits, (len(actions), len(logits))), actions)

    def expected_gradient(baseline: np.ndarray) -> np.ndarray:
        advantages = ctx.impl.baseline_advantages(q, baseline)
        estimates = ctx.impl.score_function_gradient(advantages[:, None], scores[:, None, :])
        return pi @ estimates

    bias = expected_gradient(b) - expected_gradient(np.zeros_like(b))
    state_bias = expected_gradient(np.full_like(b, b.mean())) - expected_gradient(np.zeros_like(b))
    magnitude = float(np.abs(q).max() + np.abs(b).max())
    return {
        "bias": bias,
        "bias_norm": float(np.linalg.norm(bias)),
        "state_baseline_bias_within_rounding": bool(np.all(np.abs(state_bias) <= rounding_bound(8 * len(q),
                                                                                                 magnitude))),
    }


@verifier("baseline_state.advantage_mean_zero_symbolic")
def advantage_mean_zero_symbolic(ctx: Context) -> dict[str, object]:
    """E_{a~π}[Q(a) - V] with V = Σ_b π(b) Q(b): Σ_a π_a Q_a - V Σ_a π_a, zero once Σ_a π_a = 1.

    K is a symbol; ``expectation`` is reported with Σ π left as a sum, and
    ``expectation_when_normalised`` after substituting Σ π = 1.
    """
    categories = sp.Symbol("K", integer=True, positive=True)
    a, c = sp.symbols("a c", integer=True)
    pi, q = sp.IndexedBase("pi", positive=True), sp.IndexedBase("Q", real=True)
    value = sp.Sum(pi[c] * q[c], (c, 1, categories))
    expectation = sp.factor_terms(sp.expand(sp.Sum(pi[a] * (q[a] - value), (a, 1, categories))))
    expectation = expectation.subs(sp.Sum(pi[a] * q[a], (a, 1, categories)), value)
    normalised = expectation.subs(sp.Sum(pi[a], (a, 1, categories)), 1)
    return {"expectation": expectation, "expectation_when_normalised": sp.simplify(normalised)}


_policies_and_values = st.integers(min_value=1, max_value=8).flatmap(lambda k: st.tuples(
    st.lists(st.integers(min_value=1, max_value=20), min_size=k, max_size=k),
    st.lists(_value, min_size=k, max_size=k)))


@verifier("baseline_state.advantage_mean_zero_property", uses=("state_value_from_q", "baseline_advantages"))
def advantage_mean_zero_property(ctx: Context) -> dict[str, object]:
    """For random exact policies and action values, impl's V equals Σ_a π(a) Q(a) and impl's
    advantages Q - V have π-mean exactly zero."""

    def mean_zero(case: tuple[list[int], list[Fraction]]) -> None:
        weights, values = case
        pi = np.array([Fraction(w, sum(weights)) for w in weights], dtype=object)
        q = np.array(values, dtype=object)
        value = ctx.impl.state_value_from_q(pi, q)
        assert value == sum(p * v for p, v in zip(pi, q, strict=True)), value
        advantages = ctx.impl.baseline_advantages(q, value)
        assert (pi * advantages).sum() == 0, list(advantages)

    return check_property(ctx, mean_zero, _policies_and_values)

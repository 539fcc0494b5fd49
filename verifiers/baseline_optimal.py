"""The scalar baseline that minimises the second moment, and when it equals V (module step 4.2.2)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from harness import Context, check_property, verifier
from verifiers.baseline_state import exact_softmax_scores, softmax_score_agrees


def _symbols() -> tuple[sp.Symbol, sp.Symbol, sp.Symbol, sp.IndexedBase, sp.IndexedBase, sp.IndexedBase]:
    categories = sp.Symbol("K", integer=True, positive=True)
    a = sp.Symbol("a", integer=True)
    b = sp.Symbol("b", real=True)
    # n_a = ||g(a)||^2; positive for a softmax with every π_a > 0 and K >= 2.
    return (categories, a, b, sp.IndexedBase("pi", positive=True), sp.IndexedBase("Q", real=True),
            sp.IndexedBase("n", positive=True))


@verifier("baseline_optimal.second_moment_symbolic")
def second_moment_symbolic(ctx: Context) -> dict[str, object]:
    """M(b) = E||(Q(A) - b) g(A)||^2 = Σ_a π_a (Q_a - b)^2 n_a with n_a = ||g(a)||^2, K symbolic.

    Reports the stationary points of dM/db (sympy's solve) minus the boxed formula, the second
    derivative 2 Σ π_a n_a and its sign, and the residual of M(b) = M(b*) + (b - b*)^2 Σ π_a n_a,
    which makes b* the global minimum, not just a stationary point.
    """
    categories, a, b, pi, q, n = _symbols()
    moment = sp.Sum(pi[a] * (q[a] - b) ** 2 * n[a], (a, 1, categories))
    weight = sp.Sum(pi[a] * n[a], (a, 1, categories))
    optimal = sp.Sum(pi[a] * q[a] * n[a], (a, 1, categories)) / weight
    stationary = sp.solve(sp.factor_terms(sp.expand(sp.diff(moment, b))), b)
    second = sp.diff(moment, b, 2)
    gap = moment - moment.subs(b, optimal) - (b - optimal) ** 2 * weight
    return {
        "stationary_points_minus_formula": [sp.simplify(point - optimal) for point in stationary],
        "second_derivative_minus_twice_weight": sp.simplify(second - 2 * weight),
        "second_derivative_positive": bool(second.is_positive),
        "quadratic_decomposition_residual": sp.simplify(sp.factor_terms(sp.expand(gap))),
    }


@verifier("baseline_optimal.constant_norm_symbolic")
def constant_norm_symbolic(ctx: Context) -> dict[str, object]:
    """b* - V when ||g(a)||^2 = c for every action: Σ π Q c / Σ π c - Σ π Q, zero once Σ π = 1."""
    categories, a, _, pi, q, _ = _symbols()
    constant = sp.Symbol("c", positive=True)
    total = sp.Sum(pi[a], (a, 1, categories))
    value = sp.Sum(pi[a] * q[a], (a, 1, categories))
    optimal = sp.factor_terms(sp.Sum(pi[a] * q[a] * constant, (a, 1, categories))) / sp.factor_terms(
        sp.Sum(pi[a] * constant, (a, 1, categories)))
    return {"optimal_minus_value_when_normalised": sp.simplify((optimal - value).subs(total, 1))}


_weights = st.integers(min_value=1, max_value=20)
_rational = st.fractions(min_value=-5, max_value=5, max_denominator=12)
_cases = st.tuples(st.integers(min_value=2, max_value=5), st.integers(min_value=1, max_value=3)).flatmap(
    lambda shape: st.tuples(
        st.lists(_weights, min_size=shape[0], max_size=shape[0]),
        st.lists(_rational, min_size=shape[0], max_size=shape[0]),
        st.lists(st.lists(_rational, min_size=shape[1], max_size=shape[1]), min_size=shape[0], max_size=shape[0])
        .filter(lambda rows: any(any(x != 0 for x in row) for row in rows)),
        _rational,
    ))


@verifier("baseline_optimal.minimises_second_moment_property", uses=("optimal_scalar_baseline",))
def minimises_second_moment_property(ctx: Context) -> dict[str, object]:
    """For random exact policies, action values, score vectors (any parameterisation) and b, the
    second moment M(b), computed here from its definition, satisfies M(b) - M(b*) =
    (b - b*)^2 E||g||^2 >= 0 with impl's b*: impl's b* is the exact minimiser."""

    def minimises(case: tuple[list[int], list[Fraction], list[list[Fraction]], Fraction]) -> None:
        weights, values, rows, b = case
        pi = np.array([Fraction(w, sum(weights)) for w in weights], dtype=object)
        q = np.array(values, dtype=object)
        scores = np.array(rows, dtype=object)
        squared_norms = (scores * scores).sum(axis=1)

        def moment(baseline: Fraction) -> Fraction:
            return (pi * (q - baseline) ** 2 * squared_norms).sum()

        optimal = ctx.impl.optimal_scalar_baseline(pi, q, scores)
        gap = moment(b) - moment(optimal)
        assert gap == (b - optimal) ** 2 * (pi * squared_norms).sum(), (optimal, gap)

    return check_property(ctx, minimises, _cases)


class SoftmaxState(BaseModel):
    """A softmax policy at one state and the action values there."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    logits: list[float] = Field(min_length=2, description="z, one logit per action")
    q: list[float] = Field(min_length=2, description="Q(s, a) per action")


@verifier("baseline_optimal.softmax_example", params=SoftmaxState,
          uses=("softmax", "softmax_score", "state_value_from_q", "optimal_scalar_baseline"))
def softmax_example(ctx: Context) -> dict[str, object]:
    """V and b* through impl (softmax, its score for every action, V, b*) at the given logits, and
    independently in sympy from π = exp(z)/Σ exp(z) and g(a) = e_a - π, evaluated to 60 digits."""
    logits, q = np.array(ctx.params.logits), np.array(ctx.params.q)
    actions = np.arange(len(logits))
    pi = ctx.impl.softmax(logits)
    scores = ctx.impl.softmax_score(np.broadcast_to(logits, (len(actions), len(logits))), actions)
    value = ctx.impl.state_value_from_q(pi, q)
    optimal = ctx.impl.optimal_scalar_baseline(pi, q, scores)

    exact_logits = [sp.Rational(repr(z)) for z in ctx.params.logits]
    exact_q = [sp.Rational(repr(v)) for v in ctx.params.q]
    partition = sum(sp.exp(z) for z in exact_logits)
    exact_pi = [sp.exp(z) / partition for z in exact_logits]
    norms = [sum(((1 if a == k else 0) - exact_pi[k]) ** 2 for k in actions) for a in actions]
    reference_value = sum(p * v for p, v in zip(exact_pi, exact_q, strict=True))
    reference_optimal = (sum(p * v * m for p, v, m in zip(exact_pi, exact_q, norms, strict=True))
                         / sum(p * m for p, m in zip(exact_pi, norms, strict=True)))
    return {
        "value": float(value),
        "optimal_baseline": float(optimal),
        "reference_value": sp.N(reference_value, 60),
        "reference_optimal_baseline": sp.N(reference_optimal, 60),
        "optimal_minus_value": float(optimal - value),
    }


class UniformState(BaseModel):
    """A uniform policy over len(q) actions (all logits equal) and the action values."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    q: list[float] = Field(min_length=2, description="Q(s, a) per action")


@verifier("baseline_optimal.uniform_policy_exact", params=UniformState,
          uses=("softmax_score", "state_value_from_q", "optimal_scalar_baseline"))
def uniform_policy_exact(ctx: Context) -> dict[str, object]:
    """Under a uniform softmax policy every ||e_a - π||^2 is (K-1)/K, so impl's b* must equal its V,
    exactly (fractions; the exact scores are checked against impl's softmax score)."""
    categories = len(ctx.params.q)
    pi = np.array([Fraction(1, categories)] * categories, dtype=object)
    q = np.array([Fraction(repr(v)) for v in ctx.params.q], dtype=object)
    scores = exact_softmax_scores(pi)
    value = ctx.impl.state_value_from_q(pi, q)
    optimal = ctx.impl.optimal_scalar_baseline(pi, q, scores)
    return {
        "squared_score_norms": list((scores * scores).sum(axis=1)),
        "value": value,
        "optimal_baseline": optimal,
        "optimal_minus_value": optimal - value,
        "softmax_score_agrees": softmax_score_agrees(ctx, pi, scores),
    }

"""The scalar baseline that minimises the second moment, and when it equals V (module step 4.2.2)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, probability_rows, softmax_scores
from verifiers._params import PositiveFractions, one_entry_each
from verifiers.baseline_state import softmax_score_agrees


def _symbols() -> tuple[sp.Symbol, sp.Symbol, sp.Symbol, sp.IndexedBase, sp.IndexedBase, sp.IndexedBase]:
    categories = sp.Symbol("K", integer=True, positive=True)
    a = sp.Symbol("a", integer=True)
    b = sp.Symbol("b", real=True)
    # n_a = ||g(a)||^2; positive for a softmax with every π_a > 0 and K >= 2.
    return (categories, a, b, sp.IndexedBase("pi", positive=True), sp.IndexedBase("Q", real=True),
            sp.IndexedBase("n", positive=True))


def optimal_baseline_formula(pi: sp.IndexedBase, q: sp.IndexedBase, n: sp.IndexedBase, a: sp.Symbol,
                             categories: sp.Basic) -> sp.Basic:
    """The boxed b* = Σ_a π_a Q_a n_a / Σ_a π_a n_a with n_a = ||g(a)||^2, as the symbolic checks test it.

    Its own function, like :func:`state_value_formula`, so that a test can put a wrong formula in its
    place and watch those checks fail.
    """
    return sp.Sum(pi[a] * q[a] * n[a], (a, 1, categories)) / sp.Sum(pi[a] * n[a], (a, 1, categories))


def state_value_formula(pi: sp.IndexedBase, q: sp.IndexedBase, a: sp.Symbol, categories: sp.Basic) -> sp.Basic:
    """V = Σ_a π_a Q_a / Σ_a π_a, which is E_π[Q] once Σ_a π_a = 1."""
    return sp.Sum(pi[a] * q[a], (a, 1, categories)) / sp.Sum(pi[a], (a, 1, categories))


@verifier(kind="symbolic")
def second_moment_symbolic(ctx: Context) -> dict[str, object]:
    """M(b) = E||(Q(A) - b) g(A)||^2 = Σ_a π_a (Q_a - b)^2 n_a with n_a = ||g(a)||^2, K symbolic.

    Reports the stationary points of dM/db (sympy's solve) minus the boxed formula, the second
    derivative 2 Σ π_a n_a and its sign, and the residual of M(b) = M(b*) + (b - b*)^2 Σ π_a n_a,
    which makes b* the global minimum, not just a stationary point.
    """
    categories, a, b, pi, q, n = _symbols()
    reach(actions=categories, states=1)
    moment = sp.Sum(pi[a] * (q[a] - b) ** 2 * n[a], (a, 1, categories))
    weight = sp.Sum(pi[a] * n[a], (a, 1, categories))
    optimal = optimal_baseline_formula(pi, q, n, a, categories)
    stationary = sp.solve(sp.factor_terms(sp.expand(sp.diff(moment, b))), b)
    second = sp.diff(moment, b, 2)
    gap = moment - moment.subs(b, optimal) - (b - optimal) ** 2 * weight
    return {
        "stationary_points_minus_formula": [sp.simplify(point - optimal) for point in stationary],
        "second_derivative_minus_twice_weight": sp.simplify(second - 2 * weight),
        "second_derivative_positive": bool(second.is_positive),
        "quadratic_decomposition_residual": sp.simplify(sp.factor_terms(sp.expand(gap))),
    }


@verifier(kind="symbolic")
def constant_norm_symbolic(ctx: Context) -> dict[str, object]:
    """b* - V when ||g(a)||^2 = c for every action: Σ π Q c / Σ π c - Σ π Q, zero once Σ π = 1."""
    categories, a, _, pi, q, n = _symbols()
    reach(actions=categories, states=1)
    constant = sp.Symbol("c", positive=True)
    total = sp.Sum(pi[a], (a, 1, categories))
    optimal = optimal_baseline_formula(pi, q, n, a, categories).xreplace({n[a]: constant})
    # Pull the constant norm out of each sum, so that it can cancel.
    optimal = optimal.replace(lambda e: isinstance(e, sp.Sum), sp.factor_terms)
    difference = optimal - state_value_formula(pi, q, a, categories)
    return {"optimal_minus_value_when_normalised": sp.simplify(difference.subs(total, 1))}


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


@verifier(kind="property", uses=("optimal_scalar_baseline",))
@given(_cases)
def minimises_second_moment_property(ctx: Context,
                                     case: tuple[list[int], list[Fraction], list[list[Fraction]], Fraction]) -> None:
    """For random exact policies, action values, score vectors (any parameterisation) and b, the
    second moment M(b), computed here from its definition, satisfies M(b) - M(b*) =
    (b - b*)^2 E||g||^2 >= 0 with impl's b*: impl's b* is the exact minimiser. b* of a batch of
    two states (this one, and the reversed policy with Q + b and the scores reversed; the
    contract's shapes [..., K] and [..., K, P]) is each state's own Σ π Q ||g||^2 / Σ π ||g||^2."""
    weights, values, rows, b = case
    reach(actions=len(weights), states=1)
    pi = probability_rows(weights)
    q = np.array(values, dtype=object)
    scores = np.array(rows, dtype=object)
    squared_norms = (scores * scores).sum(axis=1)

    def moment(baseline: Fraction) -> Fraction:
        return (pi * (q - baseline) ** 2 * squared_norms).sum()

    optimal = ctx.impl.optimal_scalar_baseline(pi, q, scores)
    gap = moment(b) - moment(optimal)
    assert gap == (b - optimal) ** 2 * (pi * squared_norms).sum(), (optimal, gap)
    other = (pi[::-1], q + b, scores[::-1])
    batch = ctx.impl.optimal_scalar_baseline(*(np.stack([mine, theirs]) for mine, theirs in zip(
        (pi, q, scores), other, strict=True)))
    each_state = [(p * v * (g * g).sum(axis=-1)).sum() / (p * (g * g).sum(axis=-1)).sum()
                  for p, v, g in ((pi, q, scores), other)]
    assert np.shape(batch) == (2,) and list(batch) == each_state, (batch, each_state)


class SoftmaxState(NoParams):
    """A softmax policy at one state and the action values there."""

    logits: list[float] = Field(min_length=2, description="z, one logit per action")
    q: list[float] = Field(min_length=2, description="Q(s, a) per action")


@verifier(kind="exact", params=SoftmaxState,
          uses=("softmax", "softmax_score", "state_value_from_q", "optimal_scalar_baseline"))
def softmax_example(ctx: Context) -> dict[str, object]:
    """V and b* through impl (softmax, its score for every action, V, b*) at the given logits, and
    independently in sympy from π = exp(z)/Σ exp(z) and g(a) = e_a - π, evaluated to 60 digits."""
    logits, q = np.array(ctx.params.logits), np.array(ctx.params.q)
    actions = np.arange(len(logits))
    reach(actions=len(actions), states=1)
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


class UniformState(NoParams):
    """A uniform policy over len(q) actions (all logits equal) and the action values."""

    q: list[float] = Field(min_length=2, description="Q(s, a) per action")


@verifier(kind="exact", params=UniformState, uses=("softmax_score", "state_value_from_q", "optimal_scalar_baseline"))
def uniform_policy_exact(ctx: Context) -> dict[str, object]:
    """Under a uniform softmax policy every ||e_a - π||^2 is (K-1)/K, so impl's b* must equal its V,
    exactly (fractions; the exact scores are checked against impl's softmax score)."""
    categories = len(ctx.params.q)
    pi = np.array([Fraction(1, categories)] * categories, dtype=object)
    reach(actions=len(pi), states=1)
    q = as_fractions(ctx.params.q)
    scores = softmax_scores(pi)
    value = ctx.impl.state_value_from_q(pi, q)
    optimal = ctx.impl.optimal_scalar_baseline(pi, q, scores)
    return {
        "squared_score_norms": list((scores * scores).sum(axis=1)),
        "value": value,
        "optimal_baseline": optimal,
        "optimal_minus_value": optimal - value,
        "softmax_score_agrees": softmax_score_agrees(ctx, pi, scores),
    }


@verifier(kind="symbolic")
def value_gap_symbolic(ctx: Context) -> dict[str, object]:
    """b* - V = Cov_π(Q, ||g||^2) / E_π||g||^2 for K symbolic actions, with n_a = ||g(a)||^2.

    The covariance is E[Q n] - E[Q] E[n] with E = Σ_a π_a (.), Σ π = 1. The denominator is positive,
    so b* = V exactly when the covariance is zero (both directions), and b* lies above V when actions
    with larger score norms have larger Q.
    """
    categories, a, _, pi, q, n = _symbols()
    reach(actions=categories, states=1)

    def mean(term: sp.Basic) -> sp.Basic:
        return sp.Sum(pi[a] * term, (a, 1, categories))

    weight = mean(n[a])
    covariance = mean(q[a] * n[a]) - mean(q[a]) * mean(n[a])
    gap = optimal_baseline_formula(pi, q, n, a, categories) - state_value_formula(pi, q, a, categories)
    return {
        "optimal_minus_value_minus_covariance_over_weight": sp.simplify(
            (gap - covariance / weight).subs(mean(1), 1)),
        "weight_positive": bool(weight.is_positive),
    }


class ExactSoftmaxState(NoParams):
    """An exact softmax policy at one state (π, fractions such as '1/3') and the action values there."""

    pi: PositiveFractions = Field(min_length=2, description="π(a|s) per action, exact fractions summing to 1")
    q: list[str] = Field(min_length=2, description="Q(s, a) per action, exact")

    _lengths = one_entry_each("pi", "q", per="action")


@verifier(kind="exact", params=ExactSoftmaxState,
          uses=("softmax_score", "state_value_from_q", "optimal_scalar_baseline"))
def value_gap_exact(ctx: Context) -> dict[str, object]:
    """impl's b* and V for a softmax policy over its logits (exact scores e_a - π, checked against impl's
    softmax score), with the verifier's own squared score norms and the covariance Cov_π(Q, ||g||^2)
    computed from its definition; all in fractions."""
    pi, q = as_fractions(ctx.params.pi), as_fractions(ctx.params.q)
    reach(actions=len(pi), states=1)
    scores = softmax_scores(pi)
    norms = (scores * scores).sum(axis=1)
    covariance = pi @ (q * norms) - (pi @ q) * (pi @ norms)
    value = ctx.impl.state_value_from_q(pi, q)
    optimal = ctx.impl.optimal_scalar_baseline(pi, q, scores)
    return {
        "squared_score_norms": list(norms),
        "score_norm_constant": len(set(norms)) == 1,
        "covariance": covariance,
        "value": value,
        "optimal_baseline": optimal,
        "optimal_minus_value": optimal - value,
        "gap_minus_covariance_over_weight": optimal - value - covariance / (pi @ norms),
        "softmax_score_agrees": softmax_score_agrees(ctx, pi, scores),
    }


class ReparameterisedState(ExactSoftmaxState):
    """The same policy and action values, and the per-logit scales of a second, scaled-logit parameterisation."""

    logit_scales: list[int] = Field(min_length=2, description="c in π = softmax(c ⊙ θ), one positive scale per logit")

    @model_validator(mode="after")
    def _one_scale_per_logit(self) -> ReparameterisedState:
        if len(self.logit_scales) != len(self.pi) or any(c <= 0 for c in self.logit_scales):
            raise ValueError("logit_scales needs one positive integer per action")
        return self


def _scores_at(probabilities: list[sp.Basic], theta: tuple[sp.Symbol, ...], point: dict[sp.Symbol, sp.Basic]
               ) -> tuple[list[Fraction], np.ndarray]:
    """π(θ) and the score ∂ log π(a) / ∂θ of every action at ``point``, differentiated by sympy, as fractions."""

    def exact(expr: sp.Basic) -> Fraction:
        value = sp.nsimplify(sp.simplify(expr.subs(point)))
        assert value.is_Rational, f"{expr} is not rational at {point}"
        return Fraction(int(value.p), int(value.q))

    policy = [exact(p) for p in probabilities]
    scores = np.array([[exact(sp.diff(sp.log(p), t)) for t in theta] for p in probabilities], dtype=object)
    return policy, scores


@verifier(kind="counterexample", params=ReparameterisedState, uses=("state_value_from_q", "optimal_scalar_baseline"))
def parameterisation_exact(ctx: Context) -> dict[str, object]:
    """One policy π over K actions written three ways, and impl's b* for each with the Euclidean norm of
    that parameterisation's score:

    * logits θ, π = softmax(θ), at θ = log π;
    * scaled logits θ, π = softmax(c ⊙ θ), at θ = log π / c: the logits of a network layer whose
      coordinates have different scales, equivalently the logits with the weighted norm Σ_k c_k^2 g_k^2;
    * probability coordinates θ = (π_1, ..., π_{K-1}), π_K = 1 - Σ θ, at θ = (π_1, ..., π_{K-1}).

    Each π(θ) and its score are differentiated by sympy and evaluated exactly; the three policies
    must be the same π. V does not depend on the parameterisation.
    """
    pi, q = [Fraction(p) for p in ctx.params.pi], as_fractions(ctx.params.q)
    categories = len(pi)
    reach(actions=categories, states=1)
    theta = sp.symbols(f"theta1:{categories + 1}", real=True)
    exp_logits = [sp.exp(t) for t in theta]
    scaled = [sp.exp(c * t) for c, t in zip(ctx.params.logit_scales, theta, strict=True)]
    coordinates = theta[:-1]
    exact_pi = [sp.Rational(p.numerator, p.denominator) for p in pi]
    writings = {
        "logits": ([e / sum(exp_logits) for e in exp_logits], theta,
                   {t: sp.log(p) for t, p in zip(theta, exact_pi, strict=True)}),
        "scaled_logits": ([e / sum(scaled) for e in scaled], theta,
                          {t: sp.log(p) / c for t, p, c in zip(theta, exact_pi, ctx.params.logit_scales, strict=True)}),
        "probabilities": ([*coordinates, 1 - sum(coordinates)], coordinates,
                          dict(zip(coordinates, exact_pi[:-1], strict=True))),
    }
    observed: dict[str, object] = {}
    same_policy = True
    for name, (probabilities, parameters, point) in writings.items():
        policy, scores = _scores_at(probabilities, parameters, point)
        same_policy &= policy == pi
        observed[f"optimal_baseline_{name}"] = ctx.impl.optimal_scalar_baseline(np.array(policy, dtype=object), q,
                                                                                scores)
    observed["value"] = ctx.impl.state_value_from_q(np.array(pi, dtype=object), q)
    observed["same_policy"] = same_policy
    return observed


_TWO_ACTIONS = 2
_PARAMETERS = 3


@verifier(kind="symbolic")
def two_action_parameterisation_symbolic(ctx: Context) -> dict[str, object]:
    """b* of a two-action policy in any parameterisation and any weighted Euclidean norm, K = 2 and sympy.

    The logits z_1(θ), z_2(θ) are undefined functions of three parameters θ, so π = softmax(z(θ)) stands for
    every parameterisation (a network's output layer included); the squared norm of a score g is
    Σ_k m_k g_k^2 with positive symbolic weights m_k. The scores are differentiated by sympy, every derivative
    ∂z_a/∂θ_k is then a free symbol, and b* (the boxed formula, :func:`optimal_baseline_formula`) is
    simplified. Reported: b* minus (1 - π_1) Q_1 + π_1 Q_2, and whether b* still involves a derivative of the
    logits or a weight of the norm. Both scores are multiples of ∇(z_1 - z_2), by 1 - π_1 and -π_1, so
    their squared norms keep the ratio (1 - π_1)^2 : π_1^2 whatever the parameters and the norm.
    """
    theta = sp.symbols(f"theta1:{_PARAMETERS + 1}", real=True)
    logits = [sp.Function(f"z{a}")(*theta) for a in range(1, _TWO_ACTIONS + 1)]
    reach(actions=len(logits), states=1)
    partition = sum(sp.exp(z) for z in logits)
    probabilities = [sp.exp(z) / partition for z in logits]
    norm_weights = sp.symbols(f"m1:{_PARAMETERS + 1}", positive=True)
    values = sp.symbols(f"Q1:{_TWO_ACTIONS + 1}", real=True)
    slopes = {sp.Derivative(z, t): sp.Symbol(f"dz{a}_{k}", real=True)
              for a, z in enumerate(logits, 1) for k, t in enumerate(theta, 1)}
    levels = {z: sp.Symbol(f"x{a}", real=True) for a, z in enumerate(logits, 1)}

    def plain(expr: sp.Basic) -> sp.Basic:
        return expr.subs(slopes).subs(levels)

    squared_norms = [plain(sum(m * sp.diff(sp.log(p), t) ** 2 for m, t in zip(norm_weights, theta, strict=True)))
                     for p in probabilities]
    _, a, _, pi, q, n = _symbols()
    optimal = optimal_baseline_formula(pi, q, n, a, _TWO_ACTIONS).doit().subs(
        {pi[i + 1]: plain(p) for i, p in enumerate(probabilities)}
        | {q[i + 1]: v for i, v in enumerate(values)} | {n[i + 1]: m for i, m in enumerate(squared_norms)})
    optimal = sp.simplify(optimal)
    first = plain(probabilities[0])
    return {
        "optimal_minus_closed_form": sp.simplify(optimal - ((1 - first) * values[0] + first * values[1])),
        "depends_on_parameterisation_or_norm": bool(optimal.free_symbols & (set(slopes.values()) | set(norm_weights))),
    }


@verifier(kind="symbolic")
def regression_target_symbolic(ctx: Context) -> dict[str, object]:
    """The squared error E_π[(Q(A) - v)^2] = Σ_a π_a (Q_a - v)^2 of a constant prediction v, K symbolic.

    Reports the stationary points of its derivative in v minus V = Σ π_a Q_a (once Σ π = 1), and the
    residual of E(v) = E(V) + (v - V)^2 Σ π_a, which makes V the global minimum: least-squares
    regression on sampled returns targets V.
    """
    categories, a, v, pi, q, _ = _symbols()
    reach(actions=categories, states=1)
    total = sp.Sum(pi[a], (a, 1, categories))
    value = state_value_formula(pi, q, a, categories)
    error = sp.Sum(pi[a] * (q[a] - v) ** 2, (a, 1, categories))
    stationary = sp.solve(sp.factor_terms(sp.expand(sp.diff(error, v))), v)
    gap = error - error.subs(v, value) - (v - value) ** 2 * total
    return {
        "stationary_points_minus_value": [sp.simplify(point - value) for point in stationary],
        "quadratic_decomposition_residual": sp.simplify(sp.factor_terms(sp.expand(gap))),
    }


_regression_cases = st.integers(min_value=1, max_value=6).flatmap(lambda k: st.tuples(
    st.lists(_weights, min_size=k, max_size=k), st.lists(_rational, min_size=k, max_size=k), _rational))


@verifier(kind="property", uses=("state_value_from_q",))
@given(_regression_cases)
def regression_target_property(ctx: Context, case: tuple[list[int], list[Fraction], Fraction]) -> None:
    """For random exact policies, action values and predictions v, the squared error E_π[(Q - v)^2],
    computed here from its definition, exceeds that of impl's V by exactly (v - V)^2: impl's V is the
    least-squares regression target."""
    weights, values, prediction = case
    reach(actions=len(weights), states=1)
    pi = probability_rows(weights)
    q = np.array(values, dtype=object)

    def squared_error(v: Fraction) -> Fraction:
        return (pi * (q - v) ** 2).sum()

    value = ctx.impl.state_value_from_q(pi, q)
    assert squared_error(prediction) - squared_error(value) == (prediction - value) ** 2, (value, prediction)

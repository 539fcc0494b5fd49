"""The score-function (log-derivative) estimator on one distribution (module steps 4.1.1-4.1.3).

The identity ∇_θ E_{p_θ}[f] = E_{p_θ}[f ∇_θ log p_θ] for K symbolic outcomes; the softmax score and its zero
mean; the estimator's unbiasedness, exactly over every sample of size N and by a calibrated Monte Carlo test;
and where the identity as written stops: an f that depends on θ itself, samples that are not the current
policy's, a support that moves with θ (X ~ Uniform(0, θ)), and a checker that scores answers wrongly (the
estimator is then the correct gradient of its own, wrong objective).

References are the verifier's own: sympy for a symbolic number of categories, fractions for enumerations.
The implementation is reached only through ``ctx.impl``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import sympy as sp
from pydantic import Field

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, softmax_scores
from verifiers._numeric import (
    assert_close,
    central_difference,
    cosine,
    largest_magnitude,
    log_softmax,
    rounding_bound,
    softmax,
)
from verifiers._params import PositiveDistribution, one_entry_each
from verifiers._reach import reach_bandit
from verifiers._sampling import categorical


def _piecewise_branch(expression: sp.Expr, condition: sp.Basic) -> sp.Expr:
    """The branch of a (folded) Piecewise that holds under ``condition``.

    sympy cannot assume that an index m lies in 1..K, so a derivative with respect to z[m] of a
    sum over 1..K comes back as Piecewise((..., K >= m), (..., True)); the claim is about the
    first branch (m is one of the categories).
    """
    folded = sp.piecewise_fold(expression)
    if not isinstance(folded, sp.Piecewise):
        return folded
    for branch in folded.args:
        if branch.cond == condition:
            return branch.expr
    raise AssertionError(f"no branch under {condition} in {folded}")


def _softmax_symbols() -> tuple[sp.Symbol, sp.Symbol, sp.Symbol, sp.IndexedBase, Callable[[sp.Expr], sp.Expr]]:
    """K symbolic categories, indices k and m in 1..K, logits z and π_k = exp(z_k) / Σ_j exp(z_j)."""
    categories = sp.Symbol("K", integer=True, positive=True)
    k = sp.Symbol("k", integer=True)
    m = sp.Symbol("m", integer=True, positive=True)
    z = sp.IndexedBase("z", real=True)
    j = sp.Symbol("j", integer=True)
    partition = sp.Sum(sp.exp(z[j]), (j, 1, categories))

    def pi(index: sp.Expr) -> sp.Expr:
        return sp.exp(z[index]) / partition

    return categories, k, m, z, pi


@verifier(kind="symbolic")
def log_derivative_symbolic(ctx: Context) -> dict[str, object]:
    """∇_θ Σ_x f(x) p_θ(x) - Σ_x p_θ(x) f(x) ∇_θ log p_θ(x), for K symbolic outcomes.

    General form: p(k, θ) is an undefined positive function of one parameter coordinate θ and
    f[k] an arbitrary value that does not involve θ, so a zero residual holds for every
    parameterisation and every K. Softmax form: p_k = exp(z_k)/Σ_j exp(z_j) with K symbolic logits;
    sympy differentiates Σ_k f_k p_k with respect to z_m, and the right side uses the score
    e_k - π written out as δ_km - π_m.
    """
    categories = sp.Symbol("K", integer=True, positive=True)
    k = sp.Symbol("k", integer=True)
    theta = sp.Symbol("theta", real=True)
    p, f = sp.Function("p", positive=True), sp.IndexedBase("f")
    left = sp.diff(sp.Sum(f[k] * p(k, theta), (k, 1, categories)), theta)
    # The right side's expectation is under p_θ itself, the distribution differentiated.
    right = sp.Sum(p(k, theta) * f[k] * sp.diff(sp.log(p(k, theta)), theta), (k, 1, categories))
    reach(actions=categories, data="current")

    categories, k, m, z, pi = _softmax_symbols()
    reach(actions=categories, data="current")
    in_range = categories >= m
    softmax_left = sp.diff(sp.Sum(f[k] * pi(k), (k, 1, categories)), z[m]).doit()
    softmax_right = sp.Sum(f[k] * pi(k) * (sp.KroneckerDelta(k, m) - pi(m)), (k, 1, categories)).doit()
    softmax_residual = _piecewise_branch(softmax_left, in_range) - _piecewise_branch(softmax_right, in_range)
    return {"residual": sp.simplify(left - right), "softmax_residual": sp.simplify(softmax_residual)}


class Categorical(NoParams):
    """Logits of a softmax distribution over K outcomes and a value f per outcome."""

    logits: list[float] = Field(min_length=2, max_length=16)
    values: list[float] = Field(min_length=2, max_length=16)

    _lengths = one_entry_each("logits", "values", per="outcome")


@verifier(kind="montecarlo", uses=("softmax_score", "score_function_gradient"), params=Categorical)
def score_function_montecarlo(ctx: Context) -> dict[str, object]:
    """Single-sample estimates f(x) ∇_z log π(x) from impl, minus the exact gradient, per logit.

    Outcomes are drawn from the verifier's own softmax; impl computes the score and the estimate
    (each draw a batch of N = 1). Each component takes only the K values f_a (e_a - π)_m - g_m, so
    their minimum and maximum are the honest support of that component's samples; the sample size
    detects the check's deviation over the widest of these supports. The exact gradient
    Σ_a π_a f_a (e_a - π) is the verifier's own.
    """
    logits, values = np.array(ctx.params.logits), np.array(ctx.params.values)
    categories = len(logits)
    pi = softmax(logits)
    outcome_values = values[:, None] * (np.eye(categories) - pi)
    gradient = pi @ outcome_values
    # impl's float estimate may differ from the verifier's in the last bits.
    slack = rounding_bound(4 * categories, float(np.abs(values).max()))
    low = (outcome_values - gradient).min(axis=0) - slack
    high = (outcome_values - gradient).max(axis=0) + slack
    n = ctx.samples_needed((0.0, float((high - low).max())))
    outcomes = categorical(ctx.rng, pi, n)
    reach_bandit(categories, data="current")
    estimates = ctx.impl.score_function_gradient(values[outcomes][:, None],
                                                 ctx.impl.softmax_score(np.broadcast_to(logits, (n, categories)),
                                                                        outcomes)[:, None])
    bias = [ctx.mean_estimate(estimates[:, i] - gradient[i], (float(low[i]), float(high[i])))
            for i in range(categories)]
    return {"bias": bias, "gradient": gradient.tolist(), "samples": n}


class ExactCategorical(NoParams):
    """Exact probabilities of K outcomes, a value per outcome, and the largest sample size N."""

    probabilities: PositiveDistribution = Field(min_length=2, max_length=6)
    values: list[float] = Field(min_length=2, max_length=6)
    max_samples: int = Field(ge=1, le=5)

    _lengths = one_entry_each("probabilities", "values", per="outcome")


@verifier(kind="exact", uses=("score_function_gradient",), params=ExactCategorical)
def score_function_estimator_exact(ctx: Context) -> dict[str, object]:
    """E[(1/N) Σ_i f(x_i) ∇_z log π(x_i)] over all K^N samples of size N, in rational arithmetic.

    The score e_x - π of a softmax with probabilities π (logits log π) is written exactly; impl
    forms each sample's estimate; the probability-weighted sum over every N-tuple is compared
    with the gradient Σ_x π_x f_x (e_x - π) for N = 1..``max_samples``.
    """
    pi, values = as_fractions(ctx.params.probabilities), as_fractions(ctx.params.values)
    categories = len(pi)
    scores = softmax_scores(pi)
    gradient = (pi * values) @ scores
    largest_bias = []
    for size in range(1, ctx.params.max_samples + 1):
        samples = np.array(list(itertools.product(range(categories), repeat=size)))
        probability = np.prod(pi[samples], axis=1)
        reach_bandit(categories, data="current")
        estimates = ctx.impl.score_function_gradient(values[samples], scores[samples])
        bias = probability @ estimates - gradient
        largest_bias.append(largest_magnitude(bias))
    return {"largest_bias_by_sample_size": largest_bias, "gradient": list(gradient),
            "gradient_is_nonzero": any(g != 0 for g in gradient)}


@verifier(kind="symbolic")
def direct_dependence_symbolic(ctx: Context) -> dict[str, object]:
    """∇_θ Σ_k f(k, θ) p(k, θ) against E[f ∇log p + ∇f] and against E[f ∇log p] alone, K symbolic.

    Both f and p are undefined functions of one parameter coordinate θ. The residual with the
    direct term is zero; without it, what is left is Σ_k p ∂f/∂θ, which is not zero as an
    expression (``score_term_alone_is_exact`` reports whether sympy reduces it to 0).
    """
    categories = sp.Symbol("K", integer=True, positive=True)
    k = sp.Symbol("k", integer=True)
    theta = sp.Symbol("theta", real=True)
    p, f = sp.Function("p", positive=True), sp.Function("f")
    left = sp.diff(sp.Sum(f(k, theta) * p(k, theta), (k, 1, categories)), theta)
    score_term = sp.Sum(p(k, theta) * f(k, theta) * sp.diff(sp.log(p(k, theta)), theta), (k, 1, categories))
    direct_term = sp.Sum(p(k, theta) * sp.diff(f(k, theta), theta), (k, 1, categories))
    reach(actions=categories)
    left_over = sp.simplify(left - score_term)
    return {"residual": sp.simplify(left - score_term - direct_term),
            "score_term_alone_is_exact": left_over == 0,
            "left_over_minus_direct_term": sp.simplify(left_over - direct_term)}


class PenalisedCategorical(NoParams):
    """A softmax over K outcomes with f_θ(a) = r_a - β π_θ(a): a reward with a policy-dependent penalty."""

    logits: list[float] = Field(min_length=2, max_length=8)
    rewards: list[float] = Field(min_length=2, max_length=8)
    penalty: float


@verifier(kind="counterexample", uses=("softmax", "softmax_score"), params=PenalisedCategorical)
def direct_dependence_counterexample(ctx: Context) -> dict[str, object]:
    """With f_θ(a) = r_a - β π_θ(a), the score term alone against the true gradient of E[f_θ].

    impl gives π and the scores e_a - π. The score term is Σ_a π_a f_a (e_a - π); the direct term
    E[∇f] = -β Σ_a π_a ∇π_a = -β Σ_a π_a² (e_a - π). The true gradient is the central difference of
    the verifier's own E[f_θ] = Σ_a π_a r_a - β Σ_a π_a² (step 1e-5: its error, below 1e-9 for
    logits and rewards of order one, is far under the printed precision).
    """
    logits, rewards, beta = np.array(ctx.params.logits), np.array(ctx.params.rewards), ctx.params.penalty
    categories = len(logits)
    reach_bandit(categories)
    pi = ctx.impl.softmax(logits)
    scores = ctx.impl.softmax_score(np.broadcast_to(logits, (categories, categories)), np.arange(categories))
    score_term = (pi * (rewards - beta * pi)) @ scores
    direct_term = -beta * (pi**2) @ scores

    def expected_value(z: np.ndarray) -> float:
        q = softmax(z)
        return float(q @ rewards - beta * q @ q)

    true_gradient = central_difference(expected_value, logits, 1e-5)
    return {"true_gradient": true_gradient.tolist(), "score_term": score_term.tolist(),
            "direct_term": direct_term.tolist(), "score_plus_direct": (score_term + direct_term).tolist(),
            "cosine_score_term_to_gradient": cosine(score_term, true_gradient)}


@verifier(kind="symbolic")
def softmax_score_symbolic(ctx: Context) -> dict[str, object]:
    """∂ log π_k / ∂z_m - (δ_km - π_m) for K symbolic logits, m one of the K categories."""
    categories, k, m, z, pi = _softmax_symbols()
    reach(actions=categories)
    score = sp.diff(sp.log(pi(k)).expand(force=True), z[m]).doit()
    residual = _piecewise_branch(score, categories >= m) - (sp.KroneckerDelta(k, m) - pi(m))
    return {"residual": sp.simplify(residual)}


_logit_vectors = st.integers(2, 12).flatmap(lambda size: st.tuples(
    st.arrays(np.float64, size, elements=st.floats(min_value=-10, max_value=10)),
    st.integers(0, size - 1)))


@verifier(kind="property", uses=("softmax_score", "log_softmax"))
@given(_logit_vectors)
def softmax_score_property(ctx: Context, example: tuple[np.ndarray, int]) -> None:
    """impl's softmax score equals the central difference of impl's log-softmax, and impl's
    log-softmax agrees with the verifier's own (so a fault there cannot hide one in the score).

    Error bound of the central difference with step h: the third derivative of log π_a along one
    logit is -π_m(1-π_m)(1-2π_m) or its mirror, at most 1/(6√3) < 1/10 in size, so truncation is
    below h²/60; each log-softmax evaluation rounds within rounding_bound(4K, |z|max + log K),
    divided by h. h = 1e-5.
    """
    step = 1e-5
    logits, action = example
    categories = len(logits)
    reach(actions=categories)
    magnitude = float(np.abs(logits).max()) + math.log(categories)
    assert_close(ctx.impl.log_softmax(logits), log_softmax(logits), rounding_bound(4 * categories, magnitude),
                 "impl's log_softmax against the verifier's")
    numeric = central_difference(lambda z: float(ctx.impl.log_softmax(z)[action]), logits, step)
    score = ctx.impl.softmax_score(logits, action)
    bound = step**2 / 60 + rounding_bound(4 * categories, magnitude) / step
    assert_close(score, numeric, bound, f"impl's softmax_score(action {action}) against the central difference")


@verifier(kind="symbolic")
def expected_score_symbolic(ctx: Context) -> dict[str, object]:
    """Σ_a π_a ∂ log π_a / ∂z_m for a softmax over K symbolic logits, m one of the K categories.

    sympy differentiates log π_a itself; the sum over a is then done symbolically.
    """
    categories, k, m, z, pi = _softmax_symbols()
    reach(actions=categories)
    score = _piecewise_branch(sp.diff(sp.log(pi(k)).expand(force=True), z[m]).doit(), categories >= m)
    expectation = _piecewise_branch(sp.Sum(pi(k) * score, (k, 1, categories)).doit(), categories >= m)
    # Summing π_k over k leaves Σ_k exp(z_k), the partition function with another dummy index.
    j = sp.Symbol("j", integer=True)
    same_partition = {sp.Sum(sp.exp(z[k]), (k, 1, categories)): sp.Sum(sp.exp(z[j]), (j, 1, categories))}
    return {"expected_score": sp.simplify(sp.simplify(expectation).subs(same_partition))}


@verifier(kind="property", uses=("softmax", "softmax_score"))
@given(_logit_vectors)
def expected_score_property(ctx: Context, example: tuple[np.ndarray, int]) -> None:
    """Σ_a π(a) (impl's score of a) is zero up to float64 rounding for random logits."""
    logits, _ = example
    categories = len(logits)
    reach(actions=categories)
    pi = ctx.impl.softmax(logits)
    scores = ctx.impl.softmax_score(np.broadcast_to(logits, (categories, categories)), np.arange(categories))
    assert_close(pi @ scores, 0.0, rounding_bound(4 * categories, 1.0), "Σ_a π(a) score(a)")


# --------------------------------------------------------------------------- 4.1.1-4.1.3: what the identity needs


@verifier(kind="symbolic")
def current_policy_samples_symbolic(ctx: Context) -> dict[str, object]:
    """E_{X~q}[f(X) ∂_θ log p_θ(X)] - ∂_θ E_{X~p_θ}[f(X)] for K symbolic outcomes.

    p(k, θ) is an undefined positive function of one parameter coordinate and f[k] values that do not
    involve θ. Drawn from p_θ itself (q = p_θ) the residual is zero; drawn from another distribution
    q[k] (not depending on θ) it is Σ_k (q_k - p_k) f_k ∂_θ log p_k, which sympy does not reduce to
    zero (``off_policy_residual_is_zero``).
    """
    categories = sp.Symbol("K", integer=True, positive=True)
    k = sp.Symbol("k", integer=True)
    theta = sp.Symbol("theta", real=True)
    p, f, q = sp.Function("p", positive=True), sp.IndexedBase("f"), sp.IndexedBase("q", positive=True)
    score = sp.diff(sp.log(p(k, theta)), theta)
    gradient = sp.diff(sp.Sum(f[k] * p(k, theta), (k, 1, categories)), theta)
    on_policy = sp.Sum(p(k, theta) * f[k] * score, (k, 1, categories))
    reach(actions=categories, data="current")
    off_policy = sp.Sum(q[k] * f[k] * score, (k, 1, categories))
    reach(actions=categories, data="other")
    off_residual = sp.simplify(off_policy - gradient)
    formula = sp.Sum((q[k] - p(k, theta)) * f[k] * score, (k, 1, categories))
    return {"on_policy_residual": sp.simplify(on_policy - gradient),
            "off_policy_residual_is_zero": off_residual == 0,
            "off_policy_residual_minus_formula": sp.simplify(sp.expand(off_residual - formula).doit())}


class SampledCategorical(NoParams):
    """A softmax distribution p (exact probabilities), a value f per outcome, another distribution q
    the samples may come from, and the largest sample size N."""

    probabilities: PositiveDistribution = Field(min_length=2, max_length=6, description="p, the current policy")
    values: list[float] = Field(min_length=2, max_length=6, description="f(x) per outcome")
    sampling: PositiveDistribution = Field(min_length=2, max_length=6,
                                           description="q, the distribution of the other draws")
    max_samples: int = Field(ge=1, le=4)
    _lengths = one_entry_each("probabilities", "values", "sampling", per="outcome")


@verifier(kind=("exact", "counterexample"), uses=("score_function_gradient",), params=SampledCategorical)
def off_policy_samples_exact(ctx: Context) -> dict[str, object]:
    """impl's estimate (1/N) Σ_i f(x_i) (e_{x_i} - p) averaged exactly over every sample of size N = 1..max_samples,
    with the x_i drawn from p (the current policy) and from q, minus the gradient Σ_x p_x f_x (e_x - p).

    The bias with draws from q is reported per sample size (the largest coordinate, as a fraction) and,
    for N = 1, as a vector beside the verifier's formula Σ_x (q_x - p_x) f_x (e_x - p).
    """
    params = ctx.params
    p, f, q = as_fractions(params.probabilities), as_fractions(params.values), as_fractions(params.sampling)
    scores = softmax_scores(p)
    gradient = (p * f) @ scores
    on_policy, off_policy, off_vector = [], [], None
    for size in range(1, params.max_samples + 1):
        samples = np.array(list(itertools.product(range(len(p)), repeat=size)))
        estimates = ctx.impl.score_function_gradient(f[samples], scores[samples])
        for distribution, largest, drawn_by in ((p, on_policy, "current"), (q, off_policy, "other")):
            reach_bandit(len(p), data=drawn_by)
            bias = np.prod(distribution[samples], axis=1) @ estimates - gradient
            largest.append(max(abs(b) for b in bias))
            if distribution is q and size == 1:
                off_vector = bias
    formula = ((q - p) * f) @ scores
    return {"on_policy_largest_bias_by_sample_size": on_policy,
            "off_policy_largest_bias_by_sample_size": off_policy,
            "off_policy_bias": list(off_vector),
            "off_policy_bias_minus_formula": largest_magnitude(off_vector - formula)}


@verifier(kind=("symbolic", "counterexample"))
def support_depends_on_theta_symbolic(ctx: Context) -> dict[str, object]:
    """The textbook failure of the exchange (Mohamed et al. 2020): X ~ Uniform(0, θ), f(x) = x, θ > 0.

    ``derivative``: d/dθ of E[X] = ∫_0^θ x / θ dx, integrated first. ``score_function_expectation``:
    ∫_0^θ x ∂_θ log p_θ(x) p_θ(x) dx with log p_θ(x) = -log θ on the support. ``boundary_term``:
    Leibniz's f(θ) p_θ(θ), the part the exchange leaves out. ``fixed_support_residual``: the same
    comparison for p_θ(x) = θ x^(θ-1) on [0, 1] (a support that does not move with θ), where the
    exchange holds.
    """
    theta = sp.Symbol("theta", positive=True)
    x = sp.Symbol("x", positive=True)
    density = 1 / theta
    derivative = sp.simplify(sp.diff(sp.integrate(x * density, (x, 0, theta)), theta))
    score = sp.diff(sp.log(density), theta)
    score_function = sp.simplify(sp.integrate(x * score * density, (x, 0, theta)))
    boundary = sp.simplify((x * density).subs(x, theta))

    fixed = theta * x ** (theta - 1)
    fixed_derivative = sp.diff(sp.integrate(x * fixed, (x, 0, 1), conds="none"), theta)
    fixed_score = sp.integrate(sp.expand(x * sp.diff(sp.log(fixed), theta) * fixed), (x, 0, 1), conds="none")
    return {"derivative": derivative, "score_function_expectation": score_function, "boundary_term": boundary,
            "derivative_minus_score_function_minus_boundary": sp.simplify(derivative - score_function - boundary),
            "fixed_support_residual": sp.simplify(fixed_derivative - fixed_score)}


class CheckedAnswers(NoParams):
    """A softmax policy over answers (exact probabilities), the true reward of each answer and the
    reward a faulty checker gives it."""

    probabilities: PositiveDistribution = Field(min_length=2, max_length=6)
    true_rewards: list[float] = Field(min_length=2, max_length=6)
    checker_rewards: list[float] = Field(min_length=2, max_length=6)
    _lengths = one_entry_each("probabilities", "true_rewards", "checker_rewards", per="answer")


@verifier(kind=("exact", "counterexample"), uses=("score_function_gradient",), params=CheckedAnswers)
def bad_checker_exact(ctx: Context) -> dict[str, object]:
    """The expectation of impl's one-answer estimate r'(y) (e_y - π) with the checker's reward r', exactly
    (π-weighted over the answers), against the gradients of the checker's objective E[r'] and of the true
    objective E[r], both Σ_y π_y r_y (e_y - π) computed here (the scores e_y - π too)."""
    params = ctx.params
    pi = as_fractions(params.probabilities)
    true, checker = as_fractions(params.true_rewards), as_fractions(params.checker_rewards)
    scores = softmax_scores(pi)
    # Every answer is weighted by its probability under the policy differentiated.
    reach_bandit(len(pi), data="current")
    estimates = ctx.impl.score_function_gradient(checker[:, None], scores[:, None, :])
    expectation = pi @ estimates
    checker_gradient, true_gradient = (pi * checker) @ scores, (pi * true) @ scores
    return {"expected_estimate_minus_checker_gradient": [e - g for e, g in zip(expectation, checker_gradient,
                                                                              strict=True)],
            "checker_objective_gradient": list(checker_gradient),
            "true_objective_gradient": list(true_gradient)}



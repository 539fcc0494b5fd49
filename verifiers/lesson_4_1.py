"""Lesson 4.1's statements that the checks of ``verifiers.policy_gradient`` leave open.

* 4.1.1: the score-function estimator needs samples of the current policy (symbolic, and a witness);
* 4.1.2: moving the derivative under the integral needs regularity (X ~ Uniform(0, θ));
* 4.1.3: a bad checker gives the correct gradient of its own, wrong objective;
* 4.1.4: the full return and the reward-to-go give the same expected gradient on random exact MDPs;
* 4.1.2 and 4.1.5: a step along one sampled term w ∇log π(a|s) moves the chosen logit and probability with the
  sign of w (property);
* 4.1.5: REINFORCE's estimate is (1/N) Σ_i Σ_t w_{i,t} ∇ log π (property); with the recipe's weights G_t and
  γ < 1 it is unbiased for no objective, while γ^t G_t (or γ = 1) makes it unbiased for J (exact); the policy
  gradient theorem on random infinite-horizon MDPs, against J differentiated with dual numbers (property); and
  the expected step's effect on each action's probability (exact: with three actions one with a positive
  advantage can lose probability).

Every reference here is the verifier's own and exact (sympy, fractions); the implementation is
reached only through ``ctx.impl``.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, assume, check_property, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, random_exact_mdp, softmax_scores
from verifiers._numeric import as_written, assert_close, largest_magnitude, log_softmax, rounding_bound
from verifiers._params import Distribution, PositiveDistribution
from verifiers._reach import reach_bandit, reach_mdp
from verifiers.policy_gradient import (
    ExactMDP,
    WeightField,
    asymmetry,
    finite_horizon_policy_gradient,
)
from verifiers.trajectory_law import exact_mdps

# --------------------------------------------------------------------------- 4.1.1


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

    @model_validator(mode="after")
    def _distributions(self) -> SampledCategorical:
        if not len(self.probabilities) == len(self.values) == len(self.sampling):
            raise ValueError("probabilities, values and sampling need one entry per outcome")
        return self


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


# --------------------------------------------------------------------------- 4.1.2


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


# --------------------------------------------------------------------------- 4.1.3


class CheckedAnswers(NoParams):
    """A softmax policy over answers (exact probabilities), the true reward of each answer and the
    reward a faulty checker gives it."""

    probabilities: PositiveDistribution = Field(min_length=2, max_length=6)
    true_rewards: list[float] = Field(min_length=2, max_length=6)
    checker_rewards: list[float] = Field(min_length=2, max_length=6)

    @model_validator(mode="after")
    def _shapes(self) -> CheckedAnswers:
        if not len(self.probabilities) == len(self.true_rewards) == len(self.checker_rewards):
            raise ValueError("one probability and two rewards per answer")
        return self


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


# --------------------------------------------------------------------------- 4.1.4: the reward-to-go


_tenths = st.integers(0, 10).map(lambda n: Fraction(n, 10))


def _all_exact(values: np.ndarray) -> bool:
    """Whether every entry is an integer or a fraction (exact arithmetic), not a float."""
    return all(isinstance(value, int | Fraction) for value in np.ravel(values))


@verifier(kind="property",
          uses=("enumerate_trajectories", "full_return_weights", "discounted_objective_weights", "reinforce_gradient"))
def causal_weights_property(ctx: Context) -> dict[str, object]:
    """On random exact MDPs (1 to 3 states, 2 or 3 actions, horizons 1 to 3 with at most 128 trajectories,
    transition rows that may put all their mass on one state), a policy table and γ in {0, 1/10, ..., 1}: the
    exact expectations of impl's REINFORCE estimate with the full discounted return R_γ(τ) at every step and
    with γ^t G_t are equal, and equal the gradient of J_γ from the verifier's finite-horizon policy gradient
    theorem (:func:`verifiers.policy_gradient.finite_horizon_policy_gradient`), in rational arithmetic: the
    rewards before step t add nothing in expectation to its term (:class:`verifiers.policy_gradient.WeightField`
    writes the scores and takes the expectations)."""

    def same_expectation(mdp: object, pi: np.ndarray, horizon: int, gamma: Fraction) -> None:
        # The weights are returns of trajectories the policy itself draws (enumerated exactly).
        reach_mdp(mdp.P, gamma=gamma, horizon=horizon, data="current", advantages="estimated")
        field = WeightField(ctx, mdp, pi, horizon)
        full = field.expectation(ctx.impl.full_return_weights(field.paths.r_t, gamma))
        causal = field.expectation(ctx.impl.discounted_objective_weights(field.paths.r_t, gamma))
        theorem = finite_horizon_policy_gradient(mdp.P, mdp.R, mdp.rho, pi, horizon, gamma)
        # Weights in floats (an idiom without exact arithmetic) may differ by their rounding alone: the enumerated
        # sum of M (T + 4) operations on numbers up to T max|R|.
        n_states, n_actions = pi.shape
        bound = rounding_bound(len(field.paths.probability) * (horizon + 4) + horizon * (n_states**2 * n_actions + 10),
                               horizon * float(np.abs(mdp.R).max()))
        for side, other in ((full, causal), (causal, theorem)):
            gap = largest_magnitude((side - other).ravel())
            assert gap == 0 if _all_exact(side) else float(gap) <= bound, (side, other)

    return check_property(ctx, lambda example, gamma: same_expectation(*example, gamma),
                          exact_mdps(most_trajectories=128), _tenths)


# --------------------------------------------------------------------------- 4.1.2 and 4.1.5: one sampled term


@st.composite
def _sampled_terms(draw: st.DrawFn) -> tuple[np.ndarray, int, int, float, float, float]:
    """Logits θ [S, A] of a tabular softmax policy (1 to 3 states, 2 to 4 actions, entries in [-3, 3]), a state s
    and an action a, the action's value Q(s, a), a baseline b(s) (Q(s, a) itself in some draws) and a step size."""
    n_states, n_actions = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    logits = draw(st.arrays(np.float64, (n_states, n_actions), elements=st.floats(min_value=-3, max_value=3)))
    state, action = draw(st.integers(0, n_states - 1)), draw(st.integers(0, n_actions - 1))
    value = draw(st.floats(min_value=-5, max_value=5))
    baseline = draw(st.one_of(st.just(value), st.floats(min_value=-5, max_value=5)))
    return logits, state, action, value, baseline, draw(st.floats(min_value=1e-3, max_value=2))


@verifier(kind="property", uses=("tabular_softmax_score", "reinforce_gradient"))
@given(_sampled_terms())
def sampled_term_sign_property(ctx: Context, example: tuple[np.ndarray, int, int, float, float, float]) -> None:
    """One sampled term's step θ ← θ + η (Q(s,a) - b(s)) ∇_θ log π_θ(a|s), through impl's score and estimator (one
    step of one trajectory), on random tabular logits: it equals the verifier's η w (e_a - π(·|s)) in row s (w =
    Q(s,a) - b(s)) up to rounding and leaves the other rows exactly; in row s the chosen logit moves by more than
    every other when w > 0 and by less when w < 0 (by η w (1 - π(a|s) + π(b|s)) relative to logit b); π(a|s), by
    the verifier's softmax, rises when w > 0 and falls when w < 0, for every step size; w = 0 moves nothing.

    Along the direction v = e_a - π(·|s) the derivative of log π(a|s) is v_a - Σ_b π'(b) v_b at every point π'
    of the segment, positive because v_a is the largest entry of v: the sign holds for every step size, not only
    small ones. |η w| is at least 1e-6 (else the example is discarded), so every change stays far above float64
    resolution.
    """
    logits, state, action, value, baseline, step_size = example
    weight = value - baseline
    assume(weight == 0 or abs(step_size * weight) >= 1e-6)
    n_states, n_actions = logits.shape
    reach(states=n_states, actions=n_actions)
    score = ctx.impl.tabular_softmax_score(logits, state, action)
    step = step_size * np.asarray(ctx.impl.reinforce_gradient(np.array([[weight]]), np.asarray(score)[None, None]),
                                  dtype=float)
    pi = np.exp(log_softmax(logits[state]))
    reference = step_size * weight * (np.eye(n_actions)[action] - pi)
    bound = rounding_bound(8 * n_actions, abs(step_size * weight))
    assert_close(step[state], reference, bound, "row s of the step against η w (e_a - π(·|s))")
    assert np.all(np.delete(step, state, axis=0) == 0), ("a row other than s moved", step)
    if weight == 0:
        assert np.all(step == 0), step
        return
    others = np.delete(np.arange(n_actions), action)
    relative = step[state, action] - step[state, others]
    assert np.all(np.sign(relative) == np.sign(weight)), ("logit of a relative to the others", relative, weight)
    change = np.exp(log_softmax(logits[state] + step[state]))[action] - pi[action]
    assert np.sign(change) == np.sign(weight), ("π(a|s) moved against the weight", change, weight)


# --------------------------------------------------------------------------- 4.1.5: the estimator's form


_weights = st.integers(-160, 160).map(lambda n: Fraction(n, 16))


@st.composite
def _reinforce_batches(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Exact weights [T, M, N] and scores [T, M, N, P] (M independent batches of N trajectories)."""
    horizon, batches, trajectories, size = (draw(st.integers(1, 4)), draw(st.integers(1, 3)),
                                            draw(st.integers(1, 5)), draw(st.integers(1, 3)))
    cells = horizon * batches * trajectories
    weights = draw(st.lists(_weights, min_size=cells, max_size=cells))
    scores = draw(st.lists(_weights, min_size=cells * size, max_size=cells * size))
    return (np.array(weights, dtype=object).reshape(horizon, batches, trajectories),
            np.array(scores, dtype=object).reshape(horizon, batches, trajectories, size))


@verifier(kind="property", uses=("reinforce_gradient",))
@given(_reinforce_batches())
def reinforce_form_property(ctx: Context, batch: tuple[np.ndarray, np.ndarray]) -> None:
    """On random exact weights and scores, impl's REINFORCE estimate of every batch equals
    (1/N) Σ_i Σ_t w_{i,t} s_{i,t}, the sum over the steps of each trajectory averaged over its N
    trajectories, exactly; and one batch alone ([T, N]) gives that batch's estimate."""
    w_t, score_t = batch
    horizon, batches, trajectories = w_t.shape
    # Arbitrary numbers stand for the weights: estimates, whatever objective they belong to.
    reach(horizon=horizon, advantages="estimated")
    estimate = ctx.impl.reinforce_gradient(w_t, score_t)
    for m in range(batches):
        definition = [sum(w_t[t, m, i] * score_t[t, m, i, j] for t in range(horizon) for i in range(trajectories))
                      / trajectories for j in range(score_t.shape[-1])]
        assert list(estimate[m]) == definition, (m, list(estimate[m]), definition)
    alone = ctx.impl.reinforce_gradient(w_t[:, 0], score_t[:, 0])
    assert list(alone) == list(estimate[0]), (list(alone), list(estimate[0]))



# --------------------------------------------------------------------------- 4.1.5: the theorem


class _Dual:
    """a + b ε with ε² = 0, over fractions: forward-mode differentiation of a rational computation."""

    __slots__ = ("a", "b")

    def __init__(self, a: object, b: object = 0) -> None:
        self.a, self.b = Fraction(a), Fraction(b)

    @staticmethod
    def _of(value: object) -> _Dual:
        return value if isinstance(value, _Dual) else _Dual(value)

    def __add__(self, other: object) -> _Dual:
        other = self._of(other)
        return _Dual(self.a + other.a, self.b + other.b)

    __radd__ = __add__

    def __sub__(self, other: object) -> _Dual:
        other = self._of(other)
        return _Dual(self.a - other.a, self.b - other.b)

    def __rsub__(self, other: object) -> _Dual:
        return self._of(other) - self

    def __mul__(self, other: object) -> _Dual:
        other = self._of(other)
        return _Dual(self.a * other.a, self.a * other.b + self.b * other.a)

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> _Dual:
        other = self._of(other)
        return _Dual(self.a / other.a, (self.b * other.a - self.a * other.b) / (other.a * other.a))

    def __rtruediv__(self, other: object) -> _Dual:
        return self._of(other) / self


def _solve(system: list[list[object]], rhs: list[object]) -> list[object]:
    """x with system x = rhs by Gauss-Jordan elimination, for fractions or duals (pivot on a non-zero value)."""
    size = len(rhs)
    rows = [[*row, value] for row, value in zip(system, rhs, strict=True)]
    for column in range(size):
        pivot = next(r for r in range(column, size) if Fraction(getattr(rows[r][column], "a", rows[r][column])) != 0)
        rows[column], rows[pivot] = rows[pivot], rows[column]
        lead = rows[column][column]
        rows[column] = [value / lead for value in rows[column]]
        for r in range(size):
            if r != column:
                factor = rows[r][column]
                rows[r] = [value - factor * top for value, top in zip(rows[r], rows[column], strict=True)]
    return [row[-1] for row in rows]


def _objective(P: np.ndarray, R: np.ndarray, rho: np.ndarray, pi: list[list[object]], gamma: Fraction) -> object:
    """J = Σ_s ρ(s) V(s) with (I - γ P_π) V = r_π: the expected discounted return, for fractions or duals."""
    n_states, n_actions = R.shape
    kernel = [[sum((pi[s][a] * P[s, a, t] for a in range(n_actions)), Fraction(0)) for t in range(n_states)]
              for s in range(n_states)]
    system = [[Fraction(int(s == t)) - gamma * kernel[s][t] for t in range(n_states)] for s in range(n_states)]
    reward = [sum((pi[s][a] * R[s, a] for a in range(n_actions)), Fraction(0)) for s in range(n_states)]
    values = _solve(system, reward)
    return sum((rho[s] * values[s] for s in range(n_states)), Fraction(0))


def _softmax_direction(pi: np.ndarray, state: int, action: int) -> list[list[_Dual]]:
    """The policy table as duals π + ε ∂π/∂θ_{s,a}: ∂π(b|u)/∂θ_{s,a} is π(b|s) (δ_ab - π(a|s)) in row s, zero
    elsewhere (the softmax's exact derivative)."""
    n_states, n_actions = pi.shape
    return [[_Dual(pi[u, b], pi[u, b] * (int(action == b) - pi[u, action]) if u == state else 0)
             for b in range(n_actions)] for u in range(n_states)]


@st.composite
def _discounted_mdps(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Fraction]:
    """An exact MDP of up to 3 states and 3 actions (transition rows may hold zeros), a positive policy
    table, rewards in quarters of [-2, 2], and γ in {0, 1/10, ..., 9/10}."""
    n_states, n_actions = draw(st.integers(1, 3)), draw(st.integers(2, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    P, R, rho, pi = random_exact_mdp(rng, n_states, n_actions, 10)
    return P, R, rho, pi, Fraction(draw(st.integers(0, 9)), 10)


@verifier(kind="property", uses=("policy_action_values",))
@given(_discounted_mdps())
def policy_gradient_theorem_property(ctx: Context,
                                     example: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Fraction]) -> None:
    """On random exact infinite-horizon MDPs, policies and γ < 1: ∂J/∂θ_{s,a} of the tabular softmax policy,
    differentiated here with dual numbers (forward mode, exact), equals the theorem's
    Σ_s d(s) Σ_b π(b|s) Q^π(s, b) ∂ log π(b|s)/∂θ_{s,a} = d(s) π(a|s) (Q^π(s, a) - Σ_b π(b|s) Q^π(s, b)),
    with impl's Q^π and the unnormalised visitation d = ρᵀ (I - γ P_π)^{-1}, computed here; Σ_s d(s) is
    1/(1 - γ), the constant that normalising d to a distribution puts in front.

    The dual part of π along θ_{s,a} is ∂π(b|s)/∂θ_{s,a} = π(b|s) (δ_ab - π(a|s)), the softmax's exact
    derivative; J(θ + ε e_{s,a}) is then solved in dual numbers, so its ε part is the derivative of J.
    """
    P, R, rho, pi, gamma = example
    n_states, n_actions = R.shape
    kernel = (pi[:, :, None] * P).sum(axis=1)
    system = [[Fraction(int(t == s)) - gamma * kernel[t, s] for t in range(n_states)] for s in range(n_states)]
    visitation = _solve(system, list(rho))  # (I - γ P_π)ᵀ d = ρ
    assert sum(visitation) == 1 / (1 - gamma), (visitation, gamma)
    # The theorem's side: the exact Q^π of the stationary discounted setting, visits of π itself.
    reach_mdp(P, gamma=gamma, horizon=math.inf, data="current", advantages="exact")
    q = ctx.impl.policy_action_values(P, R, pi, gamma)
    for s, a in itertools.product(range(n_states), range(n_actions)):
        derivative = _objective(P, R, rho, _softmax_direction(pi, s, a), gamma).b
        theorem = visitation[s] * pi[s, a] * (q[s, a] - sum(pi[s, b] * q[s, b] for b in range(n_actions)))
        assert derivative == theorem, ((s, a), derivative, theorem)


# --------------------------------------------------------------------------- 4.1.5: which objective the weights fit


def _finite_horizon_objective(P: np.ndarray, R: np.ndarray, rho: np.ndarray, pi: list[list[object]], horizon: int,
                              gamma: Fraction) -> object:
    """J_γ = Σ_{t<T} γ^t Σ_s d_t(s) Σ_a π(a|s) R(s, a), with d_0 = ρ and d_{t+1}(s2) = Σ_{s,a} d_t(s) π(a|s) P(s2|s, a):
    the literal discounted objective of step 4.1.4, for fractions or duals."""
    n_states, n_actions = R.shape
    visits, total = list(rho), Fraction(0)
    for t in range(horizon):
        total = total + gamma**t * sum((visits[s] * pi[s][a] * R[s, a] for s in range(n_states)
                                        for a in range(n_actions)), Fraction(0))
        visits = [sum((visits[s] * pi[s][a] * P[s, a, s2] for s in range(n_states) for a in range(n_actions)),
                      Fraction(0)) for s2 in range(n_states)]
    return total


@verifier(kind=("exact", "counterexample"),
          uses=("enumerate_trajectories", "discounted_returns", "discounted_objective_weights", "reinforce_gradient"),
          params=ExactMDP)
def reinforce_weights_objective_exact(ctx: Context) -> dict[str, object]:
    """Which objective REINFORCE is unbiased for, with the recipe's weights G_t and with γ^t G_t, exactly.

    For each γ: the exact expectation of impl's estimate over every trajectory impl enumerates, with impl's
    ``discounted_returns`` (G_t) and ``discounted_objective_weights`` (γ^t G_t) as weights, minus ∇J_γ, the
    gradient of the literal objective differentiated here in dual numbers (forward mode over fractions, the
    softmax's exact derivative; :func:`_finite_horizon_objective`), the largest coordinate reported; and the
    asymmetry of each field's Jacobian (:class:`verifiers.policy_gradient.WeightField`). A field with an
    asymmetric Jacobian is the gradient of no function: no objective exists for which that estimate is unbiased.
    """
    params = ctx.params
    mdp, pi = params.exact_tables()
    field = WeightField(ctx, mdp, pi, params.horizon)
    n_states, n_actions = pi.shape
    results: dict[str, list[object]] = {key: [] for key in (
        "bias_with_returns_by_gamma", "asymmetry_with_returns_by_gamma",
        "bias_with_discounted_weights_by_gamma", "asymmetry_with_discounted_weights_by_gamma")}
    for gamma in map(as_written, params.gammas):
        # The weights are returns of trajectories the policy itself draws (enumerated exactly).
        reach_mdp(mdp.P, gamma=gamma, horizon=params.horizon, data="current", advantages="estimated")
        gradient = np.array([[_finite_horizon_objective(mdp.P, mdp.R, mdp.rho, _softmax_direction(pi, s, a),
                                                        params.horizon, gamma).b
                              for a in range(n_actions)] for s in range(n_states)], dtype=object)
        for name, weights in (("returns", ctx.impl.discounted_returns),
                              ("discounted_weights", ctx.impl.discounted_objective_weights)):
            w_t = weights(field.paths.r_t, gamma)
            results[f"bias_with_{name}_by_gamma"].append(
                largest_magnitude((field.expectation(w_t) - gradient).ravel()))
            results[f"asymmetry_with_{name}_by_gamma"].append(asymmetry(field.jacobian(w_t)))
    return results


# --------------------------------------------------------------------------- 4.1.5: the sign of the expected step


class ExpectedStepExample(NoParams):
    """One state's policy π(a) and action values Q(a), exact decimals."""

    policy: Distribution = Field(min_length=2, description="π(a); sums to exactly one")
    q: list[float] = Field(min_length=2, description="Q(s, a) of each action")

    @model_validator(mode="after")
    def _one_value_per_action(self) -> ExpectedStepExample:
        if len(self.q) != len(self.policy):
            raise ValueError("q needs one value per action of the policy")
        return self


@verifier(kind=("exact", "counterexample"), uses=("score_function_gradient",), params=ExpectedStepExample)
def expected_step_probabilities_exact(ctx: Context) -> dict[str, object]:
    """The expected policy-gradient step at one state and what it does to each action's probability, exactly.

    The step on the logits is Σ_a π(a) A(a) ∇_z log π(a) with A(a) = Q(a) - V and V = Σ_a π(a) Q(a):
    impl's ``score_function_gradient`` averages f_a ∇log π(a) over the K actions with f_a = K π(a) A(a),
    which makes its mean the expectation; the scores e_a - π are the verifier's exact rows. Along a logit
    step dz a softmax's probabilities move, to first order, by dπ = π ⊙ (dz - π·dz).
    """
    pi, q = as_fractions(ctx.params.policy), as_fractions(ctx.params.q)
    advantage = q - (pi * q).sum()
    reach(states=1, actions=len(pi), advantages="exact")
    step = ctx.impl.score_function_gradient(len(pi) * pi * advantage, softmax_scores(pi))
    change = pi * (step - (pi * step).sum())
    return {"advantages": list(advantage), "logit_step": list(step), "probability_change": list(change),
            "logits_follow_advantages": all((s > 0) == (a > 0) and (s < 0) == (a < 0)
                                            for s, a in zip(step, advantage, strict=True)),
            "a_positive_advantage_loses_probability": any(a > 0 > c for a, c in zip(advantage, change, strict=True))}

"""Probability ratios, the local and clipped surrogates and the PPO loss (module lesson 4.4, week 16 steps 3-4)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pydantic import BaseModel, ConfigDict, Field

from harness import Context, check_property, verifier
from verifiers._numeric import EPS, rounding_bound


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _exact(value: float) -> Fraction:
    # repr gives the shortest decimal that round-trips, i.e. the number as the claim wrote it.
    return Fraction(repr(value))


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


# --------------------------------------------------------------------------- 4.4.1 ratios


_probabilities = st.floats(min_value=1e-6, max_value=1.0)


@verifier("ppo.ratio_from_log_probabilities_property", uses=("probability_ratios",))
def ratio_from_log_probabilities_property(ctx: Context) -> dict[str, object]:
    """impl's r from log π and log π_old equals π / π_old, and r > 1 exactly when π > π_old.

    exp(log π - log π_old) carries the rounding of both logarithms, relative error about
    eps (|log π| + |log π_old| + 1), which bounds the comparison.
    """

    def ratio_is_quotient(pair: tuple[float, float]) -> None:
        new, old = pair
        ratio = float(ctx.impl.probability_ratios(np.log([new]), np.log([old]))[0])
        quotient = new / old
        bound = rounding_bound(4, quotient * (1 + abs(np.log(new)) + abs(np.log(old))))
        assert abs(ratio - quotient) <= bound, (ratio, quotient, bound)
        if abs(new - old) > bound * old:
            assert (ratio > 1) == (new > old), (ratio, new, old)

    return check_property(ctx, ratio_is_quotient, st.tuples(_probabilities, _probabilities))


# --------------------------------------------------------------------------- 4.4.1 gradient at θ_old


@verifier("ppo.surrogate_gradient_at_old_symbolic")
def surrogate_gradient_at_old_symbolic(ctx: Context) -> dict[str, object]:
    """∂/∂θ [π_θ(a|s) / π_old(a|s)] at θ = θ_old minus ∂/∂θ log π_θ(a|s) at θ_old, for any policy.

    π is an undefined differentiable function of a parameter θ, and π_old is its value at θ_old,
    held fixed; the surrogate is linear in these per-sample terms with the advantages fixed, so a
    zero residual per term makes ∇L^PG(θ_old) = E_old[Â ∇ log π_θ_old], the policy gradient. The
    same residual for the batch sum Σ_{i=1}^{N} Â_i r_i with N symbolic is reported too.
    """
    theta, theta_old = sp.symbols("theta theta_old", real=True)
    policy = sp.Function("pi")
    ratio = policy(theta) / policy(theta_old)
    per_sample = (sp.diff(ratio, theta) - sp.diff(sp.log(policy(theta)), theta)).subs(theta, theta_old)
    i, n = sp.symbols("i N", integer=True, positive=True)
    advantage = sp.IndexedBase("A")
    member = sp.Function("pi_i")
    batch = sp.Sum(advantage[i] * member(theta, i) / member(theta_old, i), (i, 1, n))
    reinforce = sp.Sum(advantage[i] * sp.log(member(theta, i)), (i, 1, n))
    batch_residual = (sp.diff(batch, theta) - sp.diff(reinforce, theta)).subs(theta, theta_old).doit()
    return {"per_sample_residual": sp.simplify(per_sample),
            "batch_residual": sp.simplify(sp.expand(batch_residual))}


class TabularBatch(_Params):
    n_states: int = Field(ge=1, le=50, description="rows of the logit table")
    n_actions: int = Field(ge=2, le=20, description="actions per state")
    batch_size: int = Field(ge=1, le=4096, description="samples (s, a, Â) in the batch")


def _sample_batch(rng: np.random.Generator, logits: np.ndarray, batch_size: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    states = rng.integers(0, logits.shape[0], batch_size)
    probabilities = np.exp(_log_softmax(logits[states]))
    actions = (rng.random(batch_size)[:, None] >= np.cumsum(probabilities, axis=1)).sum(axis=1)
    actions = np.minimum(actions, logits.shape[1] - 1)
    return states, actions, rng.normal(size=batch_size)


@verifier("ppo.surrogate_gradient_at_old_tabular",
          uses=("log_softmax", "probability_ratios", "surrogate_objective_grad", "ppo_clip_objective_grad",
                "softmax_score"),
          params=TabularBatch)
def surrogate_gradient_at_old_tabular(ctx: Context) -> dict[str, object]:
    """For a tabular softmax policy at θ = θ_old, impl's surrogate and clipped-surrogate gradients
    with respect to the logit table equal the REINFORCE gradient (1/N) Σ_i Â_i (e_{a_i} - π(s_i)).

    The policy side runs entirely through impl (log-probabilities, ratios, the gradient of each
    objective with respect to log π, the softmax score); the REINFORCE side is computed here.
    Observed: the largest difference over ``examples`` random tables and batches, relative to
    the float64 rounding bound of the sums (<= 1 means equal up to rounding).
    """
    params = ctx.params
    worst = 0.0
    examples = {"smoke": 20, "full": 200}[ctx.profile]
    for _ in range(examples):
        logits = ctx.rng.normal(scale=2.0, size=(params.n_states, params.n_actions))
        states, actions, advantages = _sample_batch(ctx.rng, logits, params.batch_size)
        log_pi = ctx.impl.log_softmax(logits[states])[np.arange(params.batch_size), actions]
        ratio = ctx.impl.probability_ratios(log_pi, log_pi)
        score = ctx.impl.softmax_score(logits[states], actions)
        probabilities = np.exp(_log_softmax(logits[states]))
        one_hot = np.eye(params.n_actions)[actions]
        reinforce = np.zeros_like(logits)
        np.add.at(reinforce, states, advantages[:, None] * (one_hot - probabilities) / params.batch_size)
        bound = rounding_bound(2 * params.batch_size, np.abs(advantages).sum() / params.batch_size)
        for per_sample in (ctx.impl.surrogate_objective_grad(ratio, advantages),
                           ctx.impl.ppo_clip_objective_grad(ratio, advantages, 0.2)):
            gradient = np.zeros_like(logits)
            np.add.at(gradient, states, (np.asarray(per_sample) / params.batch_size)[:, None] * score)
            worst = max(worst, float(np.abs(gradient - reinforce).max()) / bound)
    return {"largest_difference_in_rounding_bounds": worst, "examples": examples,
            "gradients_equal": worst <= 1.0}


class MlpBatch(_Params):
    batch_size: int = Field(ge=1, le=4096, description="observations in the batch")
    hidden: list[int] = Field(min_length=1, description="hidden widths of each head")


@verifier("ppo.surrogate_gradient_at_old_mlp",
          uses=("actor_critic_init", "actor_critic_forward", "actor_critic_backward", "log_softmax",
                "probability_ratios", "surrogate_objective_grad", "ppo_clip_objective_grad", "softmax_score"),
          params=MlpBatch)
def surrogate_gradient_at_old_mlp(ctx: Context) -> dict[str, object]:
    """The syllabus's key test on impl's MLP policy: at θ = θ_old the gradients of the surrogate
    and of the clipped surrogate with respect to every policy parameter equal the gradient of the
    REINFORCE objective (1/N) Σ_i Â_i log π_θ(a_i|s_i).

    All three backpropagate through impl's network from a gradient with respect to the logits:
    REINFORCE's is (Â_i / N) ∇_z log π(a_i|s_i), with impl's score; the surrogates' comes from
    impl's log-probabilities, ratios (exactly 1 at θ_old) and objective gradients. With every
    ratio exactly 1 the two must agree exactly, not just up to rounding.
    """
    params = ctx.params
    examples = {"smoke": 10, "full": 100}[ctx.profile]
    n = params.batch_size
    largest = 0.0
    for _ in range(examples):
        network = ctx.impl.actor_critic_init(ctx.rng, 4, 3, tuple(params.hidden))
        output = ctx.impl.actor_critic_forward(network, ctx.rng.normal(size=(n, 4)))
        probabilities = np.exp(_log_softmax(output.logits))
        actions = np.minimum((ctx.rng.random(n)[:, None] >= np.cumsum(probabilities, axis=1)).sum(axis=1), 2)
        advantages = ctx.rng.normal(size=n)
        log_pi = ctx.impl.log_softmax(output.logits)[np.arange(n), actions]
        ratio = ctx.impl.probability_ratios(log_pi, log_pi)
        score = ctx.impl.softmax_score(output.logits, actions)
        no_value_gradient = np.zeros(n)
        reinforce = ctx.impl.actor_critic_backward(network, output, (advantages / n)[:, None] * score,
                                                   no_value_gradient)
        for per_sample in (ctx.impl.surrogate_objective_grad(ratio, advantages),
                           ctx.impl.ppo_clip_objective_grad(ratio, advantages, 0.2)):
            gradient = ctx.impl.actor_critic_backward(network, output, (np.asarray(per_sample) / n)[:, None] * score,
                                                      no_value_gradient)
            largest = max(largest, *(float(np.abs(gradient[k] - reinforce[k]).max())
                                     for k in reinforce if k.startswith("policy.")))
    return {"max_abs_difference": largest, "examples": examples}


# ------------------------------------------------------------ 4.4.1 and week16 step 3: a different objective


class TwoStepPolicy(_Params):
    p_first: float = Field(gt=0, lt=1, description="new policy's probability of action 0 in the first state")
    p_second: float = Field(gt=0, lt=1, description="new policy's probability of action 0 in the state it leads to")


def _two_step_tree(p_first: sp.Expr, p_second: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """The true gain J(θ) - J(θ_old) and the surrogate Σ_t E_{s_t~d_old}[E_{a~π_θ} Â_old(s_t, a)].

    s0 --a=0--> s1, s0 --a=1--> s2 (reward 0); in s1 action 0 earns 1 and action 1 earns 0; in
    s2 both earn 0. π_old picks each action with probability 1/2 everywhere; π_θ picks action 0
    with p_first in s0 and p_second in s1 and s2.
    """
    half = sp.Rational(1, 2)
    def probability(s: str, a: int) -> sp.Expr:
        return new[s] if a == 0 else 1 - new[s]

    reward = {("s1", 0): 1, ("s1", 1): 0, ("s2", 0): 0, ("s2", 1): 0}
    value_old = {s: half * reward[(s, 0)] + half * reward[(s, 1)] for s in ("s1", "s2")}
    value_old["s0"] = half * value_old["s1"] + half * value_old["s2"]
    advantage_old = {("s0", 0): value_old["s1"] - value_old["s0"], ("s0", 1): value_old["s2"] - value_old["s0"]}
    advantage_old.update({key: reward[key] - value_old[key[0]] for key in reward})
    new = {"s0": p_first, "s1": p_second, "s2": p_second}
    true_objective = sum(probability("s0", a) * sum(probability(s, b) * reward[(s, b)] for b in (0, 1))
                         for a, s in ((0, "s1"), (1, "s2")))
    old_state_probability = {"s0": 1, "s1": half, "s2": half}
    surrogate = sum(old_state_probability[s] * sum(probability(s, a) * advantage_old[(s, a)] for a in (0, 1))
                    for s in ("s0", "s1", "s2"))
    return true_objective - value_old["s0"], surrogate


@verifier("ppo.surrogate_differs_away_from_old", params=TwoStepPolicy)
def surrogate_differs_away_from_old(ctx: Context) -> dict[str, object]:
    """A two-step decision tree where the local surrogate and the true gain agree at θ_old in value
    and gradient but differ away from it, because the surrogate keeps π_old's state distribution.

    Exact in sympy: the gap is a polynomial in the new policy's probabilities.
    """
    p_first, p_second = sp.symbols("p_first p_second", positive=True)
    true_gain, surrogate = _two_step_tree(p_first, p_second)
    gap = sp.factor(sp.expand(true_gain - surrogate))
    at_old = {p_first: sp.Rational(1, 2), p_second: sp.Rational(1, 2)}
    at_new = {p_first: _exact(ctx.params.p_first), p_second: _exact(ctx.params.p_second)}
    return {
        "gap": gap,
        "gap_at_old": gap.subs(at_old),
        "gap_gradient_at_old": [sp.diff(gap, p).subs(at_old) for p in (p_first, p_second)],
        "true_gain_at_new": true_gain.subs(at_new),
        "surrogate_at_new": surrogate.subs(at_new),
        "gap_at_new": gap.subs(at_new),
    }


# --------------------------------------------------------------------------- 4.4.2 trajectory ratios


@verifier("ppo.trajectory_ratio_product_symbolic")
def trajectory_ratio_product_symbolic(ctx: Context) -> dict[str, object]:
    """p_θ(τ)/p_old(τ) = Π_t r_t when both policies act in the same environment, by induction on T.

    p(τ_{0:T}) = ρ(s_0) Π_{t<T} π(a_t|s_t) P(s_{t+1}|s_t, a_t); the initial distribution and the
    transition probabilities are symbols shared by both policies. Base case (one step) and the
    step T -> T+1 (one more action and transition, with the ratio up to T an opaque symbol R_T)
    must leave zero residual.
    """
    rho, transition, pi_new, pi_old, ratio_so_far, p_new_so_far = sp.symbols(
        "rho P pi_theta pi_old R_T p_theta_T", positive=True)
    base = (rho * pi_new * transition) / (rho * pi_old * transition) - pi_new / pi_old
    p_old_so_far = p_new_so_far / ratio_so_far
    step = ((p_new_so_far * pi_new * transition) / (p_old_so_far * pi_old * transition)
            - ratio_so_far * pi_new / pi_old)
    return {"base_case_residual": sp.simplify(base), "inductive_step_residual": sp.simplify(step)}


class TrajectoryEnumeration(_Params):
    n_states: int = Field(ge=1, le=4)
    n_actions: int = Field(ge=2, le=3)
    horizon: int = Field(ge=1, le=5)


def _random_simplex(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random rational distributions along the last axis, as an object array of Fractions."""
    weights = rng.integers(1, 10, size=shape)
    rows = np.empty(shape, dtype=object)
    for index in np.ndindex(shape[:-1]):
        rows[index] = [Fraction(int(w), int(weights[index].sum())) for w in weights[index]]
    return rows


@verifier("ppo.trajectory_ratio_importance_exact", uses=("probability_ratios",), params=TrajectoryEnumeration)
def trajectory_ratio_importance_exact(ctx: Context) -> dict[str, object]:
    """Enumerate every trajectory of a random tabular MDP: weighting by the product of per-step
    ratios turns expectations under π_old into expectations under π_θ exactly (Fractions), and the
    product of impl's per-step ratios equals p_θ(τ)/p_old(τ) up to float64 rounding.
    """
    params = ctx.params
    rng = ctx.rng
    rho = _random_simplex(rng, (params.n_states,))
    transition = _random_simplex(rng, (params.n_states, params.n_actions, params.n_states))
    pi_old = _random_simplex(rng, (params.n_states, params.n_actions))
    pi_new = _random_simplex(rng, (params.n_states, params.n_actions))
    reward = np.array([[Fraction(int(v)) for v in row] for row in rng.integers(-3, 4, (params.n_states,
                                                                                      params.n_actions))])
    weighted_old, expected_new, total_old, worst = Fraction(0), Fraction(0), Fraction(0), 0.0
    steps = itertools.product(range(params.n_states), range(params.n_actions))
    for path in itertools.product(list(steps), repeat=params.horizon):
        states = [s for s, _ in path]
        actions = [a for _, a in path]
        p_old = rho[states[0]] * np.prod([pi_old[s, a] for s, a in path])
        p_new = rho[states[0]] * np.prod([pi_new[s, a] for s, a in path])
        for t in range(params.horizon - 1):
            p_old *= transition[states[t], actions[t], states[t + 1]]
            p_new *= transition[states[t], actions[t], states[t + 1]]
        step_ratios = [pi_new[s, a] / pi_old[s, a] for s, a in path]
        total_return = sum(reward[s, a] for s, a in path)
        weighted_old += p_old * np.prod(step_ratios) * total_return
        expected_new += p_new * total_return
        total_old += p_old
        if p_old:
            impl_ratios = ctx.impl.probability_ratios(np.log([float(pi_new[s, a]) for s, a in path]),
                                                      np.log([float(pi_old[s, a]) for s, a in path]))
            exact = p_new / p_old
            bound = rounding_bound(8 * params.horizon, float(exact) * (1 + 2 * params.horizon * np.log(10)))
            worst = max(worst, abs(float(np.prod(impl_ratios)) - float(exact)) / bound)
    return {"importance_weighted_old": weighted_old, "expectation_new": expected_new,
            "difference": weighted_old - expected_new, "total_probability": total_old,
            "impl_product_within_rounding": worst <= 1.0}


class TokenRatios(_Params):
    pi_old: float = Field(gt=0, le=1, description="old probability of one token")
    pi_new: float = Field(gt=0, le=1, description="new probability of the same token")
    per_token_up: float = Field(gt=0, description="per-token ratio above 1")
    per_token_down: float = Field(gt=0, description="per-token ratio below 1")
    tokens: int = Field(ge=1, le=10_000)


@verifier("ppo.token_ratio_products", uses=("probability_ratios",), params=TokenRatios)
def token_ratio_products(ctx: Context) -> dict[str, object]:
    """The ratio of one token, and the trajectory ratio of ``tokens`` tokens with equal per-token
    ratios: exactly in rationals, and as the product of impl's per-token ratios from log-probabilities.
    """
    params = ctx.params
    tokens = params.tokens

    def impl_product(per_token: float) -> float:
        return float(np.prod(ctx.impl.probability_ratios(np.full(tokens, np.log(per_token)), np.zeros(tokens))))

    return {
        "token_ratio": _exact(params.pi_new) / _exact(params.pi_old),
        "token_ratio_impl": float(ctx.impl.probability_ratios(np.log([params.pi_new]), np.log([params.pi_old]))[0]),
        "product_up": float(_exact(params.per_token_up) ** tokens),
        "product_up_rounded_to_integer": round(_exact(params.per_token_up) ** tokens),
        "product_up_impl": impl_product(params.per_token_up),
        "product_down": float(_exact(params.per_token_down) ** tokens),
        "product_down_impl": impl_product(params.per_token_down),
    }


@verifier("ppo.ratio_product_variance_symbolic")
def ratio_product_variance_symbolic(ctx: Context) -> dict[str, object]:
    """Var_old(Π_{t=1}^T r_t) = E_old[r^2]^T - 1 for i.i.d. per-step ratios, by induction on T.

    Under π_old each r_t has mean Σ_a π_old(a) π(a)/π_old(a) = 1 and second moment
    m = Σ_a π(a)^2/π_old(a) = 1 + χ²(π || π_old) >= 1. By independence E[Π_{T+1}^2] =
    E[Π_T^2] m and E[Π_T] = 1; with the symbol T this proves the formula for every horizon, so
    the variance grows geometrically whenever π differs from π_old. Also reported: m - 1 written
    as the χ² sum for two actions, which is a sum of squares.
    """
    m, horizon = sp.symbols("m T", positive=True)
    variance = m**horizon - 1
    second_moment = variance + 1
    base = variance.subs(horizon, 1) - (m - 1)
    step = (m * second_moment - 1) - variance.subs(horizon, horizon + 1)
    q, p = sp.symbols("q p", positive=True)  # π_old(0) = q, π(0) = p, two actions
    chi_square = sp.together(p**2 / q + (1 - p) ** 2 / (1 - q) - 1)
    return {"base_case_residual": sp.simplify(base), "inductive_step_residual": sp.simplify(sp.expand(step)),
            "chi_square_two_actions": sp.factor(chi_square)}


class IidRatios(_Params):
    pi_old: list[float] = Field(min_length=2, description="old per-step action probabilities")
    pi_new: list[float] = Field(min_length=2, description="new per-step action probabilities")
    max_horizon: int = Field(ge=1, le=12)


@verifier("ppo.ratio_product_variance_exact", params=IidRatios)
def ratio_product_variance_exact(ctx: Context) -> dict[str, object]:
    """Enumerate all action sequences up to ``max_horizon`` in Fractions: the exact variance of the
    product of per-step ratios under π_old, against E[r^2]^T - 1, and the growth factor per step."""
    old = [_exact(p) for p in ctx.params.pi_old]
    new = [_exact(p) for p in ctx.params.pi_new]
    second_moment = sum(n * n / o for n, o in zip(new, old, strict=True))
    variances, residuals = [], []
    for horizon in range(1, ctx.params.max_horizon + 1):
        mean = square = Fraction(0)
        for sequence in itertools.product(range(len(old)), repeat=horizon):
            probability = np.prod([old[a] for a in sequence])
            product = np.prod([new[a] / old[a] for a in sequence])
            mean += probability * product
            square += probability * product * product
        variances.append(square - mean * mean)
        residuals.append(square - mean * mean - (second_moment**horizon - 1))
    return {"second_moment": second_moment, "variances": variances, "residuals": residuals,
            "growth_factors": [(b + 1) / (a + 1) for a, b in itertools.pairwise(variances)],
            "max_abs_residual": max(abs(r) for r in residuals)}


# --------------------------------------------------------------------------- 4.4.3 clipping


class ClipCases(_Params):
    """Samples (Â, r) given as two lists of equal length, and the clipping parameter."""

    epsilon: float = Field(gt=0, lt=1)
    advantages: list[float] = Field(min_length=1)
    ratios: list[float] = Field(min_length=1)


@verifier("ppo.clip_cases_exact", uses=("ppo_clip_objective", "ppo_clip_objective_grad", "clip_active"),
          params=ClipCases)
def clip_cases_exact(ctx: Context) -> dict[str, object]:
    """For each (Â, r): the unclipped term r Â and the clipped term clip(r, 1-ε, 1+ε) Â (computed
    here), impl's clipped objective (their minimum), impl's gradient with respect to log π, and
    whether impl reports the clipped branch active (the plateau). All in exact Fractions."""
    epsilon = _exact(ctx.params.epsilon)
    advantages = np.array([_exact(a) for a in ctx.params.advantages], dtype=object)
    ratios = np.array([_exact(r) for r in ctx.params.ratios], dtype=object)
    clipped_ratios = [min(max(r, 1 - epsilon), 1 + epsilon) for r in ratios]
    return {
        "interval": [1 - epsilon, 1 + epsilon],
        "unclipped": list(ratios * advantages),
        "clipped": [c * a for c, a in zip(clipped_ratios, advantages, strict=True)],
        "objective": list(ctx.impl.ppo_clip_objective(ratios, advantages, epsilon)),
        "gradient": list(ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon)),
        "plateau": [bool(v) for v in ctx.impl.clip_active(ratios, advantages, epsilon)],
    }


_signed_advantages = st.floats(min_value=-100, max_value=100, allow_nan=False).filter(lambda a: a != 0)
_ratios = st.floats(min_value=1e-4, max_value=1e4)
_epsilons = st.floats(min_value=0.01, max_value=0.99)


@verifier("ppo.clipping_never_blocks_correction_property", uses=("ppo_clip_objective_grad",))
def clipping_never_blocks_correction_property(ctx: Context) -> dict[str, object]:
    """For every sign of Â, every r > 0 and every ε in (0, 1), impl's gradient of the clipped term
    with respect to log π is r Â (the unclipped gradient, pointing toward the advantage) whenever
    the ratio has moved against the advantage (Â > 0, r <= 1, or Â < 0, r >= 1); it is zero only
    when the ratio has already moved past 1 ± ε in the advantage's direction; and it never has the
    opposite sign of Â.
    """

    def never_blocks(case: tuple[float, float, float]) -> None:
        advantage, ratio, epsilon = case
        gradient = float(ctx.impl.ppo_clip_objective_grad(np.array([ratio]), np.array([advantage]), epsilon)[0])
        moved_past = (advantage > 0 and ratio > 1 + epsilon) or (advantage < 0 and ratio < 1 - epsilon)
        if moved_past:
            assert gradient == 0, (advantage, ratio, epsilon, gradient)
        else:
            assert abs(gradient - ratio * advantage) <= EPS * abs(ratio * advantage), (advantage, ratio, gradient)
            assert gradient != 0
        assert gradient * advantage >= 0, (advantage, ratio, gradient)

    return check_property(ctx, never_blocks, st.tuples(_signed_advantages, _ratios, _epsilons))


@verifier("ppo.clip_fractions_counterexample", uses=("clip_diagnostics",), params=ClipCases)
def clip_fractions_counterexample(ctx: Context) -> dict[str, object]:
    """impl's two clip diagnostics on one batch: ratios outside [1-ε, 1+ε] and clipping active."""
    diagnostics = ctx.impl.clip_diagnostics(np.array(ctx.params.ratios), np.array(ctx.params.advantages),
                                            ctx.params.epsilon)
    return {"outside_fraction": diagnostics.outside_fraction, "active_fraction": diagnostics.active_fraction,
            "difference": diagnostics.outside_fraction - diagnostics.active_fraction}


class SharedLogits(_Params):
    pi_old: list[float] = Field(min_length=2, description="old action probabilities in the one state")
    actions: list[int] = Field(min_length=1)
    advantages: list[float] = Field(min_length=1)
    epsilon: float = Field(gt=0, lt=1)
    learning_rate: float = Field(gt=0)
    steps: list[int] = Field(min_length=2, description="increasing numbers of gradient steps to report")


@verifier("ppo.clipping_is_no_trust_region", params=SharedLogits,
          uses=("probability_ratios", "ppo_clip_objective_grad", "softmax_score", "log_softmax", "clip_diagnostics",
                "kl_k3"))
def clipping_is_no_trust_region(ctx: Context) -> dict[str, object]:
    """Gradient ascent on L^CLIP through impl, for one state's logits shared by the whole batch.

    A sample whose ratio is clipped stops contributing, but the other samples keep moving the
    shared logits, so its ratio keeps leaving [1-ε, 1+ε] and KL(π_old || π_θ) keeps growing with
    the number of steps (epochs). Reported after each number of steps in ``steps``: the ratios,
    impl's clip diagnostics, impl's k3 estimate on the batch and the exact KL.
    """
    params = ctx.params
    old_logits = np.log(np.array(params.pi_old))
    actions, advantages = np.array(params.actions), np.array(params.advantages)
    n = actions.size
    log_pi_old = ctx.impl.log_softmax(old_logits)[actions]
    logits = old_logits.copy()
    report: dict[str, list[object]] = {"ratios": [], "outside_fraction": [], "active_fraction": [], "kl_k3_batch": [],
                                       "kl_exact": []}
    for step in range(1, max(params.steps) + 1):
        log_pi = ctx.impl.log_softmax(logits)[actions]
        ratio = ctx.impl.probability_ratios(log_pi, log_pi_old)
        weight = ctx.impl.ppo_clip_objective_grad(ratio, advantages, params.epsilon) / n
        logits = logits + params.learning_rate * (weight[:, None] * ctx.impl.softmax_score(
            np.broadcast_to(logits, (n, logits.size)), actions)).sum(axis=0)
        if step in params.steps:
            log_pi = ctx.impl.log_softmax(logits)[actions]
            ratio = ctx.impl.probability_ratios(log_pi, log_pi_old)
            diagnostics = ctx.impl.clip_diagnostics(ratio, advantages, params.epsilon)
            p_old, log_new = np.array(params.pi_old), _log_softmax(logits)
            report["ratios"].append([float(r) for r in ratio])
            report["outside_fraction"].append(float(diagnostics.outside_fraction))
            report["active_fraction"].append(float(diagnostics.active_fraction))
            report["kl_k3_batch"].append(float(np.mean(ctx.impl.kl_k3(log_pi - log_pi_old))))
            report["kl_exact"].append(float(p_old @ (np.log(p_old) - log_new)))
    kl = report["kl_exact"]
    return {**report, "steps": list(params.steps), "min_ratio_last": min(report["ratios"][-1]),
            "max_ratio_last": max(report["ratios"][-1]), "outside_fraction_last": report["outside_fraction"][-1],
            "kl_keeps_growing": all(b > a for a, b in itertools.pairwise(kl)), "kl_last": kl[-1]}


# --------------------------------------------------------------------------- 4.4.4 loss and diagnostics


_loss_batches = st.integers(1, 32).flatmap(lambda n: st.tuples(
    hnp.arrays(np.float64, (n, 3), elements=st.floats(-5, 5)),  # logits
    hnp.arrays(np.int64, n, elements=st.integers(0, 2)),  # actions
    hnp.arrays(np.float64, n, elements=st.floats(-1.5, 1.5)),  # log π - log π_old
    hnp.arrays(np.float64, n, elements=st.floats(-10, 10)),  # advantages
    hnp.arrays(np.float64, n, elements=st.floats(-10, 10)),  # values
    hnp.arrays(np.float64, n, elements=st.floats(-10, 10)),  # value targets
    st.floats(0, 2), st.floats(0, 0.1), st.floats(0.05, 0.5)))


@verifier("ppo.total_loss_composition_property",
          uses=("log_softmax", "probability_ratios", "ppo_clip_objective", "ppo_clip_objective_grad",
                "squared_error_value_loss", "categorical_entropy", "categorical_entropy_grad", "ppo_total_loss",
                "softmax_score"))
def total_loss_composition_property(ctx: Context) -> dict[str, object]:
    """impl's PPO loss -L^CLIP + c_V L_V - c_H H and its gradient with respect to the logits and the
    logits, assembled from impl's parts as the training loop does, equal the same quantities
    computed here from their definitions: min(r Â, clip(r) Â), ½(V - V̂)², -Σ π log π, and the
    derivative with respect to the logits -(1/N) 1[not clipped] r Â (e_a - π) + (c_H/N) π (log π + H).
    """

    def composes(batch: tuple) -> None:
        logits, actions, log_ratio, advantages, values, targets, value_coef, entropy_coef, epsilon = batch
        n = actions.size
        rows = np.arange(n)
        log_pi = ctx.impl.log_softmax(logits)[rows, actions]
        ratio = ctx.impl.probability_ratios(log_pi, log_pi - log_ratio)
        clip_term = ctx.impl.ppo_clip_objective(ratio, advantages, epsilon).mean()
        value_loss = ctx.impl.squared_error_value_loss(values, targets)
        entropy = ctx.impl.categorical_entropy(logits).mean()
        loss = ctx.impl.ppo_total_loss(clip_term, value_loss, entropy, value_coef, entropy_coef)
        d_logits = (-ctx.impl.ppo_clip_objective_grad(ratio, advantages, epsilon)[:, None] / n
                    * ctx.impl.softmax_score(logits, actions)
                    - entropy_coef * ctx.impl.categorical_entropy_grad(logits) / n)

        r = np.exp(log_ratio)
        clipped = np.clip(r, 1 - epsilon, 1 + epsilon)
        log_p = _log_softmax(logits)
        p = np.exp(log_p)
        h = -(p * log_p).sum(axis=1)
        reference = (-np.minimum(r * advantages, clipped * advantages).mean()
                     + value_coef * 0.5 * ((values - targets) ** 2).mean() - entropy_coef * h.mean())
        unclipped = ~(clipped * advantages < r * advantages)
        reference_d_logits = (-(unclipped * r * advantages)[:, None] * (np.eye(3)[actions] - p) / n
                              + entropy_coef * p * (log_p + h[:, None]) / n)
        magnitude = float(np.abs(r * advantages).max() + value_coef * ((values - targets) ** 2).max() + 5)
        bound = rounding_bound(8 * n, magnitude * (1 + 4 * np.abs(log_ratio).max()))
        assert abs(loss - reference) <= bound, (loss, reference, bound)
        assert np.abs(d_logits - reference_d_logits).max() <= bound / n * 4, (d_logits, reference_d_logits)

    return check_property(ctx, composes, _loss_batches)

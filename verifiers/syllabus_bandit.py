"""The three-armed bandit and discounting of the week-16 syllabus, steps 1 and 2.

The bandit: one state, K arms, π = softmax(θ). One REINFORCE step after drawing arm a with
reward R is θ ← θ + η R (e_a - π), the cross-entropy (SFT) step on label a scaled by R. Step 2's
baselines for a batch of N arms drawn from π are the batch mean and the mean of the other N - 1.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, softmax_score, softmax_scores
from verifiers._numeric import as_written, assert_close, central_difference, log_softmax, rounding_bound
from verifiers._reach import reach_bandit
from verifiers.baseline_state import softmax_score_agrees


class BanditStep(NoParams):
    """K arms at logits θ = 0, the drawn arm, its reward and the step size η."""

    arms: int = Field(ge=2, le=16)
    drawn_arm: int = Field(ge=0)
    reward: float
    step_size: float = Field(gt=0)


@verifier(kind="exact", params=BanditStep)
def step_symbolic(ctx: Context) -> dict[str, object]:
    """The bandit step at θ = 0 in exact arithmetic: sympy differentiates log softmax(θ)[a].

    The reward and η enter as the rationals the claim writes, so the new logits are exact and
    π(a) after the step is a closed form in e (e/(e + 2) for the syllabus's numbers). ``pi_before``
    is the whole policy softmax(0), every arm's probability.
    """
    params = ctx.params
    theta = sp.symbols(f"theta0:{params.arms}", real=True)
    # One sampled arm's reward, scoring the arm the policy at θ itself drew.
    reach_bandit(len(theta), data="current", advantages="estimated")
    log_pi = theta[params.drawn_arm] - sp.log(sum(sp.exp(t) for t in theta))
    at_zero = {t: 0 for t in theta}
    score = [sp.nsimplify(sp.diff(log_pi, t).subs(at_zero)) for t in theta]
    step = sp.Rational(repr(params.step_size)) * sp.Rational(repr(params.reward))
    after = [step * s for s in score]
    pi_after = sp.simplify(sp.exp(log_pi).subs(dict(zip(theta, after, strict=True))))
    partition = sum(sp.exp(t) for t in theta)
    return {"score": score, "theta_after": after, "pi_before": [sp.exp(t).subs(at_zero) / partition.subs(at_zero)
                                                                for t in theta],
            "pi_drawn_before": sp.exp(log_pi).subs(at_zero), "pi_drawn_after": pi_after}


@verifier(kind="exact", uses=("softmax", "softmax_score"), params=BanditStep)
def step_impl(ctx: Context) -> dict[str, object]:
    """The same step with impl's softmax and score at θ = 0 (float64).

    ``score_matches_exact`` compares impl's score with the exact e_a - (1/K, ..., 1/K) within
    float64 rounding of K-term softmax arithmetic.
    """
    params = ctx.params
    theta = np.zeros(params.arms)
    reach_bandit(theta.size, data="current", advantages="estimated")
    score = ctx.impl.softmax_score(theta, params.drawn_arm)
    exact = softmax_score([Fraction(1, params.arms)] * params.arms, params.drawn_arm)
    after = theta + params.step_size * params.reward * score
    return {
        "score_matches_exact": bool(all(abs(Fraction(float(s)) - e) <= rounding_bound(4 * params.arms, 1.0)
                                        for s, e in zip(score, exact, strict=True))),
        "theta_after": after.tolist(),
        "pi_drawn_before": float(ctx.impl.softmax(theta)[params.drawn_arm]),
        "pi_drawn_after": float(ctx.impl.softmax(after)[params.drawn_arm]),
    }


@verifier(kind="symbolic")
def cross_entropy_symbolic(ctx: Context) -> dict[str, object]:
    """For K symbolic logits, ∂/∂z_m of the cross-entropy -log softmax(z)[a] is π_m - δ_am, so the
    REINFORCE step R (e_a - π) is -R times the cross-entropy gradient on label a.

    ``residual`` is the cross-entropy gradient minus (π_m - δ_am), for m one of the K categories;
    ``step_residual`` is R (δ_am - π_m) + R ∂CE/∂z_m.
    """
    categories = sp.Symbol("K", integer=True, positive=True)
    a, j = sp.symbols("a j", integer=True)
    m = sp.Symbol("m", integer=True, positive=True)
    reward = sp.Symbol("R", real=True)
    z = sp.IndexedBase("z", real=True)
    partition = sp.Sum(sp.exp(z[j]), (j, 1, categories))
    gradient = sp.piecewise_fold(sp.diff(-(z[a] - sp.log(partition)), z[m]).doit())
    in_range = categories >= m
    branch = next(arg.expr for arg in gradient.args if arg.cond == in_range) \
        if isinstance(gradient, sp.Piecewise) else gradient
    pi_m = sp.exp(z[m]) / partition
    # The step R (e_a - π) is taken at the logits of the policy that drew a: REINFORCE's own sample.
    reach(actions=categories, data="current")
    return {"residual": sp.simplify(branch - (pi_m - sp.KroneckerDelta(a, m))),
            "step_residual": sp.simplify(reward * (sp.KroneckerDelta(a, m) - pi_m) + reward * branch)}


_steps = st.integers(2, 10).flatmap(lambda size: st.tuples(
    st.arrays(np.float64, size, elements=st.floats(min_value=-3, max_value=3)),
    st.integers(0, size - 1),
    st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=5), st.floats(min_value=-5, max_value=-1e-3)),
    st.floats(min_value=1e-3, max_value=2)))


@verifier(kind="property", uses=("softmax_score",))
@given(_steps)
def cross_entropy_property(ctx: Context, example: tuple[np.ndarray, int, float, float]) -> None:
    """For random logits, label a and reward R: impl's R·(score of a) equals -R times the central
    difference of the verifier's own cross-entropy -log softmax(z)[a].

    Error bound (step h = 1e-5): the third derivative of log softmax along one logit is at most
    1/(6√3) < 1/10 in size, so truncation is below h²/60; each evaluation rounds within
    rounding_bound(4K, |z|max + log K), divided by h; all times |R|.
    """
    step = 1e-5
    logits, label, reward, _ = example
    categories = len(logits)
    reach_bandit(categories, data="current", advantages="estimated")
    numeric = central_difference(lambda z: -log_softmax(z)[label], logits, step)
    reinforce = reward * ctx.impl.softmax_score(logits, label)
    magnitude = float(np.abs(logits).max()) + math.log(categories)
    bound = abs(reward) * (step**2 / 60 + rounding_bound(4 * categories, magnitude) / step)
    assert_close(reinforce, -reward * numeric, bound, "R times impl's score against -R ∇(-log softmax(z)[a])")


def _reinforce_step(ctx: Context, logits: np.ndarray, arm: int, reward: float, step_size: float) -> np.ndarray:
    """η times impl's one-sample REINFORCE estimate R ∇ log π(a), from impl's estimator and score."""
    score = ctx.impl.softmax_score(logits, arm)
    return step_size * ctx.impl.score_function_gradient(np.array([reward]), score[None, :])


def _reference_step(logits: np.ndarray, arm: int, reward: float, step_size: float) -> np.ndarray:
    """η R (e_a - π), with the verifier's own softmax."""
    return step_size * reward * (np.eye(len(logits))[arm] - np.exp(log_softmax(logits)))


def _reference_pi(logits: np.ndarray, arm: int) -> float:
    return float(np.exp(log_softmax(logits))[arm])


@verifier(kind="exact", uses=("softmax_score", "score_function_gradient"), params=BanditStep)
def reward_sign_exact(ctx: Context) -> dict[str, object]:
    """The bandit step at θ = 0 with reward R, 0 and -R, through impl's estimator and score.

    Each step must equal the verifier's own η R (e_a - π) up to float64 rounding; π(a) before and
    after is the verifier's softmax of the logits impl's step produced.
    """
    params = ctx.params
    theta = np.zeros(params.arms)
    rewards = {"positive": abs(params.reward), "zero": 0.0, "negative": -abs(params.reward)}
    steps = {}
    for label, r in rewards.items():
        reach_bandit(theta.size, data="current", advantages="estimated")
        steps[label] = _reinforce_step(ctx, theta, params.drawn_arm, r, params.step_size)
    bound = rounding_bound(8 * params.arms, params.step_size * abs(params.reward))
    matches = all(np.abs(steps[label] - _reference_step(theta, params.drawn_arm, r, params.step_size)).max() <= bound
                  for label, r in rewards.items())
    return {"steps_match_reference": bool(matches),
            "step_with_zero_reward_is_zero": bool(np.all(steps["zero"] == 0)),
            "pi_drawn_before": _reference_pi(theta, params.drawn_arm),
            "pi_drawn_after_positive_reward": _reference_pi(theta + steps["positive"], params.drawn_arm),
            "pi_drawn_after_negative_reward": _reference_pi(theta + steps["negative"], params.drawn_arm)}


@verifier(kind="property", uses=("softmax_score", "score_function_gradient"))
@given(_steps)
def reward_sign_property(ctx: Context, example: tuple[np.ndarray, int, float, float]) -> None:
    """For random logits, arm a, reward R (zero, positive or negative) and step size η > 0: impl's
    step η R ∇ log π(a) equals the verifier's η R (e_a - π) up to rounding, is exactly zero for
    R = 0, and raises π(a) (the verifier's softmax) if R > 0 and lowers it if R < 0.

    Along the direction v = e_a - π(θ) the derivative of log π(a) is v_a - E_π[v] > 0, because v_a
    is the largest entry of v; so the sign holds for every step size, not only small ones. Logits
    in [-3, 3] and |η R| >= 1e-6 keep the change far above float64 resolution.
    """
    logits, arm, reward, step_size = example
    # One sampled arm, stepped at the logits of the policy that drew it, weighted by a drawn reward.
    reach_bandit(len(logits), data="current", advantages="estimated")
    step = _reinforce_step(ctx, logits, arm, reward, step_size)
    reference = _reference_step(logits, arm, reward, step_size)
    bound = rounding_bound(8 * len(logits), abs(step_size * reward))
    assert_close(step, reference, bound, "impl's REINFORCE step")
    if reward == 0:
        assert np.all(step == 0), step
    else:
        change = _reference_pi(logits + step, arm) - _reference_pi(logits, arm)
        assert np.sign(change) == np.sign(reward), (change, reward)


class Discounting(NoParams):
    """Discount factors, delays before a single reward of 1, and the length of an answer."""

    gamma: float = Field(ge=0, le=1)
    delays: list[int] = Field(min_length=1)
    long_gamma: float = Field(ge=0, le=1)
    answer_length: int = Field(ge=1, le=10_000)


@verifier(kind="exact", uses=("discounted_returns",), params=Discounting)
def discount_weights(ctx: Context) -> dict[str, object]:
    """What a reward of 1 is worth at the first decision, through impl's returns.

    A reward k steps after the first decision is ``r_t[k] = 1`` in a zero array of length k + 1,
    and its worth at the first decision is G_0 = γ^k. For an answer of L tokens rewarded after the
    last one, r_t has length L, so the first token's G_0 is γ^(L-1); ``weight_after_answer_length``
    is the reward L steps away, γ^L.
    """
    params = ctx.params

    def worth(gamma: float, delay: int, **answer: int) -> float:
        rewards = np.zeros(delay + 1)
        rewards[delay] = 1.0
        reach(discount=gamma, horizon=rewards.size, **answer)
        return float(ctx.impl.discounted_returns(rewards, gamma)[0])

    # The answer's tokens are its decisions: a reward after the last of L tokens is L - 1 steps after the first.
    return {"weight_after_delay": [worth(params.gamma, k) for k in params.delays],
            "first_token_weight": worth(params.long_gamma, params.answer_length - 1, tokens=params.answer_length),
            "weight_after_answer_length": worth(params.long_gamma, params.answer_length)}


class UndiscountedAnswer(NoParams):
    """An answer of L tokens with one final reward."""

    answer_length: int = Field(ge=1, le=10_000)
    final_reward: float


@verifier(kind="exact", uses=("discounted_returns",), params=UndiscountedAnswer)
def undiscounted_answer_exact(ctx: Context) -> dict[str, object]:
    """With γ = 1 (exact integer) and one exact final reward, every token's reward-to-go from impl."""
    params = ctx.params
    final = as_written(params.final_reward)
    rewards = np.array([Fraction(0)] * (params.answer_length - 1) + [final], dtype=object)
    gamma = 1
    reach(discount=gamma, horizon=rewards.size, tokens=rewards.size)
    returns = ctx.impl.discounted_returns(rewards, gamma)
    return {"distinct_token_weights": len(set(returns)), "first_token_weight": returns[0],
            "every_token_gets_final_reward": all(g == final for g in returns)}


@verifier(kind="symbolic")
def discounted_sum_symbolic(ctx: Context) -> dict[str, object]:
    """Σ_{k>=0} γ^k for 0 <= γ < 1 (written γ = 1/(1 + x), x > 0) and for γ = 1.

    With rewards bounded by M the infinite return is then bounded by M/(1 - γ); at γ = 1 the same
    sum of a constant reward diverges. ``near_reward_worth_more``: sympy decides γ^k - γ^(k+1) > 0
    for every k >= 0 and 0 < γ < 1, so a reward one step nearer is worth more.
    """
    k = sp.Symbol("k", integer=True, nonnegative=True)
    x = sp.Symbol("x", positive=True)
    gamma = 1 / (1 + x)
    geometric = sp.Sum(gamma**k, (k, 0, sp.oo)).doit()
    # Both sums run over an unbounded horizon: every 0 < γ < 1 (γ = 1/(1 + x)), then γ = 1.
    reach(discount=gamma, horizon=math.inf)
    reach(discount=1, horizon=math.inf)
    return {"geometric_sum_minus_bound": sp.simplify(geometric - 1 / (1 - gamma)),
            "undiscounted_sum_diverges": sp.Sum(sp.Integer(1), (k, 0, sp.oo)).doit() is sp.oo,
            "near_reward_worth_more": bool(sp.simplify(gamma**k - gamma ** (k + 1)).is_positive)}


@verifier(kind="symbolic")
def infinite_return_symbolic(ctx: Context) -> dict[str, object]:
    """The return G_t = Σ_{k>=0} γ^k r_{t+k} over an unbounded horizon, for 0 < γ < 1 (γ = 1/(1 + x), x > 0)
    and two bounded reward sequences whose plain sum never settles: a constant reward, r_k = c, and an
    alternating one, r_k = c (-1)^k.

    sympy sums the series itself. ``recursion_residuals``: G_t - (r_t + γ G_{t+1}), the backward recursion
    every finite computation of returns uses. ``truncation_residuals``: G_t - Σ_{k<T} γ^k r_{t+k} - γ^T G_{t+T}
    for a symbolic horizon T >= 1, so the finite returns of T steps differ from the infinite one by a tail
    γ^T G_{t+T} that vanishes as T grows: the infinite sum is their limit.
    """
    x = sp.Symbol("x", positive=True)
    gamma = 1 / (1 + x)
    c = sp.Symbol("c", real=True)
    k = sp.Symbol("k", integer=True, nonnegative=True)
    t = sp.Symbol("t", integer=True, nonnegative=True)
    horizon = sp.Symbol("T", integer=True, positive=True)
    recursion, truncation = [], []
    for sign in (1, -1):
        def reward(step: sp.Expr, sign: int = sign) -> sp.Expr:
            return c * sp.Integer(sign) ** step

        def infinite(start: sp.Expr) -> sp.Expr:
            return sp.Sum(gamma**k * reward(start + k), (k, 0, sp.oo)).doit()

        reach(discount=gamma, horizon=math.inf)
        # The finite returns of T steps, T >= 1: one step and many.
        reach(discount=gamma, horizon=horizon)
        finite = sp.Sum(gamma**k * reward(t + k), (k, 0, horizon - 1)).doit()
        recursion.append(sp.simplify(infinite(t) - (reward(t) + gamma * infinite(t + 1))))
        truncation.append(sp.simplify(infinite(t) - finite - gamma**horizon * infinite(t + horizon)))
    return {"recursion_residuals": recursion, "truncation_residuals": truncation}


_long_rewards = st.tuples(
    st.arrays(np.float64, st.integers(1, 400), elements=st.floats(min_value=-1, max_value=1)),
    st.floats(min_value=0, max_value=0.99))


@verifier(kind="property", uses=("discounted_returns",))
@given(_long_rewards)
def discounted_return_bound_property(ctx: Context, example: tuple[np.ndarray, float]) -> None:
    """For random rewards in [-1, 1] and γ in [0, 0.99], every |G_t| from impl is at most
    max|r| / (1 - γ), up to float64 rounding."""
    rewards, gamma = example
    reach(discount=gamma, horizon=rewards.size)
    largest = float(np.abs(rewards).max())
    returns = ctx.impl.discounted_returns(rewards, gamma)
    bound = largest / (1 - gamma)
    assert np.all(np.abs(returns) <= bound + rounding_bound(2 * len(rewards), bound)), (returns.max(), bound)


class BanditBatch(NoParams):
    """Rewards of the arms of a uniform bandit (θ = 0) and the number of arms drawn per batch."""

    rewards: list[float] = Field(min_length=2, max_length=6, description="R(a) per arm")
    batch_size: int = Field(ge=2, le=6, description="N, the arms drawn independently for one batch")


@verifier(kind="exact", params=BanditBatch,
          uses=("group_centered_advantages", "leave_one_out_advantages", "score_function_gradient", "softmax_score"))
def batch_baselines_exact(ctx: Context) -> dict[str, object]:
    """The batch estimator (1/N) Σ_i (R_i - b_i) ∇ log π(a_i) with no baseline, the batch mean
    (impl's group-centred advantages over the batch) and the mean of the other N - 1 rewards
    (impl's leave-one-out advantages), by enumerating all K^N batches in Fractions.

    Reported for each: the expected gradient and the total variance (trace of the covariance).
    ``batch_mean_factor`` is c with E[batch-mean estimator] = c ∇J, when the two are parallel
    (None otherwise); the true gradient ∇J = Σ_a π_a R_a (e_a - π) and the exact scores e_a - π
    are the verifier's, the latter checked against impl's softmax score.
    """
    arms, n = len(ctx.params.rewards), ctx.params.batch_size
    # Every batch of N arms the uniform policy draws, enumerated; each arm's reward is its exact value, and the
    # batch mean and the leave-one-out mean are estimates of the baseline from the batch.
    reach_bandit(arms, group=n, data="current", advantages=["exact", "estimated"])
    pi = np.array([Fraction(1, arms)] * arms, dtype=object)
    reward_a = as_fractions(ctx.params.rewards)
    scores_a = softmax_scores(pi)
    true_gradient = pi * reward_a @ scores_a
    advantages = {"no_baseline": lambda r: r, "batch_mean": ctx.impl.group_centered_advantages,
                  "leave_one_out": ctx.impl.leave_one_out_advantages}
    means = {label: np.zeros(arms, dtype=object) * Fraction(0) for label in advantages}
    squares = dict.fromkeys(advantages, Fraction(0))
    probability = Fraction(1, arms**n)
    for batch in itertools.product(range(arms), repeat=n):
        rewards = reward_a[list(batch)]
        for label, advantage in advantages.items():
            estimate = ctx.impl.score_function_gradient(advantage(rewards), scores_a[list(batch)])
            means[label] = means[label] + probability * estimate
            squares[label] += probability * (estimate @ estimate)
    observed: dict[str, object] = {"softmax_score_agrees": softmax_score_agrees(ctx, pi, scores_a),
                                   "true_gradient": list(true_gradient)}
    for label in advantages:
        observed[f"expected_gradient_{label}"] = list(means[label])
        observed[f"total_variance_{label}"] = squares[label] - means[label] @ means[label]
    factor = (means["batch_mean"] @ true_gradient) / (true_gradient @ true_gradient)
    parallel = all(m == factor * g for m, g in zip(means["batch_mean"], true_gradient, strict=True))
    observed["batch_mean_factor"] = factor if parallel else None
    observed["batch_mean_keeps_direction"] = bool(parallel and factor > 0)
    return observed


class ActionBaselines(NoParams):
    """Rewards of the arms of a uniform bandit (θ = 0) and a baseline b(a) per arm."""

    rewards: list[float] = Field(min_length=2, description="R(a) per arm")
    action_baselines: list[float] = Field(min_length=2, description="b(a) per arm, subtracted from that arm's reward")

    @model_validator(mode="after")
    def _one_baseline_per_arm(self) -> ActionBaselines:
        if len(self.rewards) != len(self.action_baselines):
            raise ValueError("rewards and action_baselines need one entry per arm")
        return self


@verifier(kind="counterexample", params=ActionBaselines,
          uses=("baseline_advantages", "score_function_gradient", "softmax_score"))
def action_baseline_bias_exact(ctx: Context) -> dict[str, object]:
    """Σ_a π(a) (R(a) - b(a)) (e_a - π) at the uniform policy, each one-sample update through impl
    (advantage and estimator; exact scores checked against impl's), against the true gradient
    Σ_a π(a) R(a) (e_a - π) computed here. ``bias`` is their difference."""
    arms = len(ctx.params.rewards)
    # The expectation over the policy's own arms, each with its exact (deterministic) reward.
    reach_bandit(arms, data="current", advantages="exact")
    pi = np.array([Fraction(1, arms)] * arms, dtype=object)
    reward_a, baseline_a = as_fractions(ctx.params.rewards), as_fractions(ctx.params.action_baselines)
    scores_a = softmax_scores(pi)
    advantages = ctx.impl.baseline_advantages(reward_a, baseline_a)
    expected = pi @ ctx.impl.score_function_gradient(advantages[:, None], scores_a[:, None, :])
    true_gradient = pi * reward_a @ scores_a
    return {"softmax_score_agrees": softmax_score_agrees(ctx, pi, scores_a), "true_gradient": list(true_gradient),
            "expected_gradient_action_baseline": list(expected), "bias": list(expected - true_gradient)}

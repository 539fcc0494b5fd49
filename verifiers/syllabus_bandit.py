"""The three-armed bandit step and discounting of the week-16 syllabus, step 1.

The bandit: one state, K arms, π = softmax(θ). One REINFORCE step after drawing arm a with
reward R is θ ← θ + η R (e_a - π), the cross-entropy (SFT) step on label a scaled by R.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pydantic import BaseModel, ConfigDict, Field

from harness import Context, check_property, verifier
from verifiers._numeric import central_difference, rounding_bound
from verifiers.policy_gradient import reference_log_softmax


class BanditStep(BaseModel):
    """K arms at logits θ = 0, the drawn arm, its reward and the step size η."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    arms: int = Field(ge=2, le=16)
    drawn_arm: int = Field(ge=0)
    reward: float
    step_size: float = Field(gt=0)


@verifier("syllabus_bandit.step_symbolic", params=BanditStep)
def step_symbolic(ctx: Context) -> dict[str, object]:
    """The bandit step at θ = 0 in exact arithmetic: sympy differentiates log softmax(θ)[a].

    The reward and η enter as the rationals the claim writes, so the new logits are exact and
    π(a) after the step is a closed form in e (e/(e + 2) for the syllabus's numbers).
    """
    params = ctx.params
    theta = sp.symbols(f"theta0:{params.arms}", real=True)
    log_pi = theta[params.drawn_arm] - sp.log(sum(sp.exp(t) for t in theta))
    at_zero = {t: 0 for t in theta}
    score = [sp.nsimplify(sp.diff(log_pi, t).subs(at_zero)) for t in theta]
    step = sp.Rational(repr(params.step_size)) * sp.Rational(repr(params.reward))
    after = [step * s for s in score]
    pi_after = sp.simplify(sp.exp(log_pi).subs(dict(zip(theta, after, strict=True))))
    return {"score": score, "theta_after": after, "pi_drawn_before": sp.exp(log_pi).subs(at_zero),
            "pi_drawn_after": pi_after}


@verifier("syllabus_bandit.step_impl", uses=("softmax", "softmax_score"), params=BanditStep)
def step_impl(ctx: Context) -> dict[str, object]:
    """The same step with impl's softmax and score at θ = 0 (float64).

    ``score_matches_exact`` compares impl's score with the exact e_a - (1/K, ..., 1/K) within
    float64 rounding of K-term softmax arithmetic.
    """
    params = ctx.params
    theta = np.zeros(params.arms)
    score = ctx.impl.softmax_score(theta, params.drawn_arm)
    exact = [Fraction(int(k == params.drawn_arm)) - Fraction(1, params.arms) for k in range(params.arms)]
    after = theta + params.step_size * params.reward * score
    return {
        "score_matches_exact": bool(all(abs(Fraction(float(s)) - e) <= rounding_bound(4 * params.arms, 1.0)
                                        for s, e in zip(score, exact, strict=True))),
        "theta_after": after.tolist(),
        "pi_drawn_before": float(ctx.impl.softmax(theta)[params.drawn_arm]),
        "pi_drawn_after": float(ctx.impl.softmax(after)[params.drawn_arm]),
    }


@verifier("syllabus_bandit.cross_entropy_symbolic")
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
    return {"residual": sp.simplify(branch - (pi_m - sp.KroneckerDelta(a, m))),
            "step_residual": sp.simplify(reward * (sp.KroneckerDelta(a, m) - pi_m) + reward * branch)}


_steps = st.integers(2, 10).flatmap(lambda size: st.tuples(
    hnp.arrays(np.float64, size, elements=st.floats(min_value=-3, max_value=3)),
    st.integers(0, size - 1),
    st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=5), st.floats(min_value=-5, max_value=-1e-3)),
    st.floats(min_value=1e-3, max_value=2)))


@verifier("syllabus_bandit.cross_entropy_property", uses=("softmax_score",))
def cross_entropy_property(ctx: Context) -> dict[str, object]:
    """For random logits, label a and reward R: impl's R·(score of a) equals -R times the central
    difference of the verifier's own cross-entropy -log softmax(z)[a].

    Error bound (step h = 1e-5): the third derivative of log softmax along one logit is at most
    1/(6√3) < 1/10 in size, so truncation is below h²/60; each evaluation rounds within
    rounding_bound(4K, |z|max + log K), divided by h; all times |R|.
    """
    step = 1e-5

    def same_step(example: tuple[np.ndarray, int, float, float]) -> None:
        logits, label, reward, _ = example
        categories = len(logits)
        numeric = central_difference(lambda z: -reference_log_softmax(z)[label], logits, step)
        reinforce = reward * ctx.impl.softmax_score(logits, label)
        magnitude = float(np.abs(logits).max()) + math.log(categories)
        bound = abs(reward) * (step**2 / 60 + rounding_bound(4 * categories, magnitude) / step)
        assert np.abs(reinforce - (-reward * numeric)).max() <= bound, (reinforce, -reward * numeric, bound)

    return check_property(ctx, same_step, _steps)


@verifier("syllabus_bandit.reward_sign_exact", uses=("softmax", "softmax_score"), params=BanditStep)
def reward_sign_exact(ctx: Context) -> dict[str, object]:
    """The bandit step at θ = 0 with the claim's reward, with reward 0, and with minus the reward."""
    params = ctx.params
    theta = np.zeros(params.arms)
    score = ctx.impl.softmax_score(theta, params.drawn_arm)

    def pi_drawn_after(reward: float) -> float:
        return float(ctx.impl.softmax(theta + params.step_size * reward * score)[params.drawn_arm])

    zero_step = params.step_size * 0.0 * score
    return {"largest_step_with_zero_reward": float(np.abs(zero_step).max()),
            "pi_drawn_before": float(ctx.impl.softmax(theta)[params.drawn_arm]),
            "pi_drawn_after_positive_reward": pi_drawn_after(abs(params.reward)),
            "pi_drawn_after_negative_reward": pi_drawn_after(-abs(params.reward))}


@verifier("syllabus_bandit.reward_sign_property", uses=("softmax", "softmax_score"))
def reward_sign_property(ctx: Context) -> dict[str, object]:
    """For random logits, arm a, reward R and step size η > 0, the step θ + η R (score of a) raises
    π(a) if R > 0, lowers it if R < 0 and leaves θ unchanged if R = 0.

    Along the direction v = e_a - π(θ) the derivative of log π(a) is v_a - E_π[v] > 0, because v_a
    is the largest entry of v; so the sign holds for every step size, not only small ones. Logits
    in [-3, 3] and |η R| >= 1e-6 keep the change far above float64 resolution.
    """

    def sign_follows(example: tuple[np.ndarray, int, float, float]) -> None:
        logits, arm, reward, step_size = example
        after = logits + step_size * reward * ctx.impl.softmax_score(logits, arm)
        before_pi, after_pi = ctx.impl.softmax(logits)[arm], ctx.impl.softmax(after)[arm]
        if reward == 0:
            assert np.array_equal(after, logits), (logits, after)
        else:
            assert np.sign(after_pi - before_pi) == np.sign(reward), (before_pi, after_pi, reward)

    return check_property(ctx, sign_follows, _steps)


class Discounting(BaseModel):
    """Discount factors, delays before a single reward of 1, and the length of an answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gamma: float = Field(ge=0, le=1)
    delays: list[int] = Field(min_length=1)
    long_gamma: float = Field(ge=0, le=1)
    answer_length: int = Field(ge=1, le=10_000)


@verifier("syllabus_bandit.discount_weights", uses=("discounted_returns",), params=Discounting)
def discount_weights(ctx: Context) -> dict[str, object]:
    """What a reward of 1 is worth at the first decision, through impl's returns.

    A reward k steps after the first decision is ``r_t[k] = 1`` in a zero array of length k + 1,
    and its worth at the first decision is G_0 = γ^k. For an answer of L tokens rewarded after the
    last one, r_t has length L, so the first token's G_0 is γ^(L-1); ``weight_after_answer_length``
    is the reward L steps away, γ^L.
    """
    params = ctx.params

    def worth(gamma: float, delay: int) -> float:
        rewards = np.zeros(delay + 1)
        rewards[delay] = 1.0
        return float(ctx.impl.discounted_returns(rewards, gamma)[0])

    return {"weight_after_delay": [worth(params.gamma, k) for k in params.delays],
            "first_token_weight": worth(params.long_gamma, params.answer_length - 1),
            "weight_after_answer_length": worth(params.long_gamma, params.answer_length)}


class UndiscountedAnswer(BaseModel):
    """An answer of L tokens with one final reward."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    answer_length: int = Field(ge=1, le=10_000)
    final_reward: float


@verifier("syllabus_bandit.undiscounted_answer_exact", uses=("discounted_returns",), params=UndiscountedAnswer)
def undiscounted_answer_exact(ctx: Context) -> dict[str, object]:
    """With γ = 1 (exact integer) and one exact final reward, every token's reward-to-go from impl."""
    params = ctx.params
    final = Fraction(repr(params.final_reward))
    rewards = np.array([Fraction(0)] * (params.answer_length - 1) + [final], dtype=object)
    returns = ctx.impl.discounted_returns(rewards, 1)
    return {"distinct_token_weights": len(set(returns)), "first_token_weight": returns[0],
            "every_token_gets_final_reward": all(g == final for g in returns)}


@verifier("syllabus_bandit.discounted_sum_symbolic")
def discounted_sum_symbolic(ctx: Context) -> dict[str, object]:
    """Σ_{k>=0} γ^k for 0 <= γ < 1 (written γ = 1/(1 + x), x > 0) and for γ = 1.

    With rewards bounded by M the infinite return is then bounded by M/(1 - γ); at γ = 1 the same
    sum of a constant reward diverges.
    """
    k = sp.Symbol("k", integer=True, nonnegative=True)
    x = sp.Symbol("x", positive=True)
    gamma = 1 / (1 + x)
    geometric = sp.Sum(gamma**k, (k, 0, sp.oo)).doit()
    return {"geometric_sum_minus_bound": sp.simplify(geometric - 1 / (1 - gamma)),
            "undiscounted_sum_diverges": sp.Sum(sp.Integer(1), (k, 0, sp.oo)).doit() is sp.oo}


_long_rewards = st.tuples(
    hnp.arrays(np.float64, st.integers(1, 400), elements=st.floats(min_value=-1, max_value=1)),
    st.floats(min_value=0, max_value=0.99))


@verifier("syllabus_bandit.discounted_return_bound_property", uses=("discounted_returns",))
def discounted_return_bound_property(ctx: Context) -> dict[str, object]:
    """For random rewards in [-1, 1] and γ in [0, 0.99], every |G_t| from impl is at most
    max|r| / (1 - γ), up to float64 rounding."""

    def bounded(example: tuple[np.ndarray, float]) -> None:
        rewards, gamma = example
        largest = float(np.abs(rewards).max())
        returns = ctx.impl.discounted_returns(rewards, gamma)
        bound = largest / (1 - gamma)
        assert np.all(np.abs(returns) <= bound + rounding_bound(2 * len(rewards), bound)), (returns.max(), bound)

    return check_property(ctx, bounded, _long_rewards)

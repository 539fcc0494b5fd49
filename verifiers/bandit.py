"""One REINFORCE step on the three-armed bandit of the week-16 syllabus (steps 1 and 2).

One state, K arms, π = softmax(θ). One REINFORCE step after drawing arm a with reward R is
θ ← θ + η R (e_a - π), the cross-entropy (SFT) step on label a scaled by R, and it moves the drawn arm's
logit with the sign of R. The baselines of this bandit are ``verifiers.baseline_bandit``'s.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import softmax_score
from verifiers._numeric import assert_close, central_difference, log_softmax, rounding_bound
from verifiers._reach import reach_bandit


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

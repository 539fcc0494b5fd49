"""The k3 estimator of KL(π_old || π), its conditions, and how far one parameter step moves a policy (lesson 4.4)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._numeric import as_written, assert_close, log_softmax, rounding_bound


@verifier(kind="symbolic")
def k3_nonnegative_symbolic(ctx: Context) -> dict[str, object]:
    """f(r) = (r - 1) - log r on r > 0: its critical points, f there, and the sign of f''.

    One critical point with f = 0 and f'' > 0 everywhere on r > 0 (strict convexity) means f
    is non-negative and vanishes only at that point.
    """
    r = sp.Symbol("r", positive=True)
    f = (r - 1) - sp.log(r)
    critical = sp.solve(sp.diff(f, r), r)
    return {
        "critical_points": critical,
        "value_at_critical_points": [f.subs(r, point) for point in critical],
        "second_derivative": sp.diff(f, r, 2),
        "strictly_convex": bool(sp.diff(f, r, 2).is_positive),
    }


_log_ratios = st.arrays(np.float64, st.integers(1, 64),
                        elements=st.floats(min_value=-20, max_value=20, allow_nan=False))


@verifier(kind="property", uses=("kl_k3",))
@given(_log_ratios)
def k3_nonnegative_property(ctx: Context, log_ratio: np.ndarray) -> None:
    """impl's k3 is >= 0 for every log-ratio (up to the rounding of (r - 1) - log r: three operations on
    numbers up to max(r, 1), so the plain ``np.exp(x) - 1 - x`` passes as well as ``expm1``), 0 at log r = 0,
    and > 0 wherever |log r| >= 1e-6.

    The 1e-6 floor keeps (r - 1) - log r ≈ (log r)^2 / 2 >= 5e-13 far above float64's
    resolution near zero, so a zero there would be the estimator's fault, not rounding's.
    """
    reach(data="old")  # log r = log π_θ - log π_old of stored actions
    k3 = ctx.impl.kl_k3(log_ratio)
    rounding = np.array([rounding_bound(3, float(np.exp(x))) for x in log_ratio])
    negative = k3 < -rounding
    assert not np.any(negative), f"k3 below zero beyond rounding at log r = {log_ratio[negative]}: {k3[negative]}"
    assert np.all(k3[np.abs(log_ratio) >= 1e-6] > 0), log_ratio
    assert np.all(ctx.impl.kl_k3(np.zeros(3)) == 0), ("k3 at log r = 0", ctx.impl.kl_k3(np.zeros(3)))


@verifier(kind="symbolic")
def k3_unbiased_symbolic(ctx: Context) -> dict[str, object]:
    """E_{a~p}[(r(a) - 1) - log r(a)] - KL(p || q) with r = q/p, for K symbolic categories.

    Per category the gap is q_a - p_a (``per_category_residual`` is what is left after
    subtracting that); summed over a and with both distributions normalised it is
    Σ q - Σ p = 1 - 1 = 0.
    """
    categories = sp.Symbol("K", integer=True, positive=True)
    # One state's distributions over K actions, every K; the expectation is under p = π_old.
    reach(states=1, actions=categories, data="old")
    a = sp.Symbol("a", integer=True)
    p, q = sp.IndexedBase("p", positive=True), sp.IndexedBase("q", positive=True)
    k3 = (q[a] / p[a] - 1) - sp.log(q[a] / p[a])
    kl_term = p[a] * sp.log(p[a] / q[a])
    per_category = sp.simplify(sp.expand_log(p[a] * k3 - kl_term, force=True))
    gap = sp.factor_terms(sp.expand(sp.Sum(per_category, (a, 1, categories))))
    normalised = gap.subs({sp.Sum(q[a], (a, 1, categories)): 1, sp.Sum(p[a], (a, 1, categories)): 1})
    return {"per_category_residual": sp.simplify(per_category - (q[a] - p[a])),
            "gap_when_normalised": sp.simplify(normalised)}


_categoricals = st.integers(2, 12).flatmap(lambda k: st.tuples(
    st.arrays(np.float64, k, elements=st.floats(min_value=-8, max_value=8)),
    st.arrays(np.float64, k, elements=st.floats(min_value=-8, max_value=8)),
))


@verifier(kind="property", uses=("kl_k3",))
@given(_categoricals)
def k3_unbiased_property(ctx: Context, logits: tuple[np.ndarray, np.ndarray]) -> None:
    """For random categorical π_old and π, Σ_a π_old(a) k3(a) from impl equals KL(π_old || π)
    computed from its definition, up to float64 rounding."""
    reach(states=1, actions=logits[0].size, data="old")  # one state's policies; the expectation under π_old
    log_old, log_new = (log_softmax(z) for z in logits)
    p_old = np.exp(log_old)
    expectation = p_old @ ctx.impl.kl_k3(log_new - log_old)
    kl = p_old @ (log_old - log_new)
    magnitude = float(p_old @ (np.exp(log_new - log_old) + np.abs(log_new - log_old)))
    bound = rounding_bound(8 * len(p_old), magnitude)
    assert_close(expectation, kl, bound, "Σ_a π_old(a) k3(a) against KL(π_old || π)")


class FiniteBatch(NoParams):
    """Two categorical policies over the same actions and one finite batch of actions.

    Any batch of actions with pi_old > 0 is one that pi_old draws with positive probability.
    """

    pi_old: list[float] = Field(min_length=2, description="old action probabilities, summing to 1")
    pi_new: list[float] = Field(min_length=2, description="new action probabilities, summing to 1")
    actions: list[int] = Field(min_length=1, description="the batch, indices of actions with pi_old > 0")


def _finite_batch(ctx: Context) -> tuple[np.ndarray, np.ndarray, float]:
    """The batch's actions, their log-ratios log pi_new - log pi_old, and the exact KL(pi_old || pi_new)."""
    p_old, p_new = np.array(ctx.params.pi_old), np.array(ctx.params.pi_new)
    actions = np.array(ctx.params.actions)
    reach(states=1, actions=p_old.size, data="old")  # one state's policies; the batch's actions come from π_old
    log_ratio = np.log(p_new[actions]) - np.log(p_old[actions])
    return actions, log_ratio, float(p_old @ (np.log(p_old) - np.log(p_new)))


@verifier(kind="counterexample", uses=("probability_ratios", "kl_k3"), params=FiniteBatch)
def k3_finite_batch_counterexample(ctx: Context) -> dict[str, object]:
    """On one finite batch of actions from π_old, the sample mean of r - 1 (impl's ratios) is not zero, and
    the batch mean of impl's k3 is not KL(π_old || π_θ), which is computed here exactly from both
    distributions: k3 on a batch is a diagnostic, not a measurement."""
    actions, log_ratio, kl = _finite_batch(ctx)
    ratio = ctx.impl.probability_ratios(log_ratio, np.zeros_like(log_ratio))
    k3_mean = float(np.mean(ctx.impl.kl_k3(log_ratio)))
    return {"mean_ratio_minus_one": float(np.mean(ratio - 1)), "k3_batch_mean": k3_mean, "kl_exact": kl,
            "k3_minus_kl": k3_mean - kl, "action_counts": np.bincount(actions, minlength=len(ctx.params.pi_old))}


@verifier(kind="counterexample", uses=("kl_k1",), params=FiniteBatch)
def k1_negative_counterexample(ctx: Context) -> dict[str, object]:
    """impl's k1 = -log r on one sample with r > 1 (the action the new policy prefers), and its
    mean on a finite batch from π_old: both negative here, although KL(π_old || π_θ) >= 0."""
    _, log_ratio, kl = _finite_batch(ctx)
    p_old, p_new = np.array(ctx.params.pi_old), np.array(ctx.params.pi_new)
    favoured = int(np.argmax(p_new / p_old))
    single = float(np.asarray(ctx.impl.kl_k1(np.array([np.log(p_new[favoured]) - np.log(p_old[favoured])])))[0])
    return {"k1_single_sample": single, "k1_batch_mean": float(np.mean(ctx.impl.kl_k1(log_ratio))),
            "kl_exact": kl}


class UnbiasednessConditions(NoParams):
    """Two witnesses for the conditions of k3's unbiasedness, each a pair of categorical policies."""

    pi_old: list[float] = Field(min_length=2, description="old action probabilities, all positive")
    pi_new: list[float] = Field(min_length=2, description="new action probabilities, all positive")
    pi_old_partial: list[float] = Field(min_length=2, description="old probabilities, zero somewhere")
    pi_new_full: list[float] = Field(min_length=2, description="new probabilities, all positive")


def _k3_expectation(impl: object, sampling: np.ndarray, pi_old: np.ndarray, pi_new: np.ndarray) -> float:
    """Σ_a sampling(a) k3(a) with impl's k3 of log π_new(a) - log π_old(a), over the actions sampling can draw."""
    drawn = sampling > 0
    # One state's policies; the actions are drawn from π_old, the policy the ratios divide by, or from the
    # current π_θ they are compared with.
    reach(states=1, actions=sampling.size, data="old" if sampling is pi_old else "current" if sampling is pi_new
          else "other")
    return float(sampling[drawn] @ impl.kl_k3(np.log(pi_new[drawn]) - np.log(pi_old[drawn])))


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) = Σ_{p(a) > 0} p(a) log(p(a) / q(a))."""
    support = p > 0
    return float(p[support] @ (np.log(p[support]) - np.log(q[support])))


@verifier(kind="counterexample", uses=("kl_k3",), params=UnbiasednessConditions)
def k3_unbiasedness_conditions_counterexample(ctx: Context) -> dict[str, object]:
    """The expectation of impl's k3 misses KL(π_old || π_θ) when either condition of step 4.4.4 fails.

    Actions drawn from π_θ instead of π_old: E_θ[k3] - KL(π_old || π_θ). Supports that do not
    overlap (π_old(a) = 0 where π_θ(a) > 0): E_old[k3] - KL(π_old || π_θ) = E_old[r - 1] =
    Σ_{π_old > 0} π_θ - 1, the missing mass, which is also computed here exactly in rationals.
    """
    params = ctx.params
    old, new = np.array(params.pi_old), np.array(params.pi_new)
    partial, full = np.array(params.pi_old_partial), np.array(params.pi_new_full)
    missing_mass = sum((as_written(q) for p, q in zip(params.pi_old_partial, params.pi_new_full, strict=True)
                        if p > 0), Fraction(0)) - 1
    return {"gap_sampling_new_policy": _k3_expectation(ctx.impl, new, old, new) - _kl(old, new),
            "gap_without_overlap": _k3_expectation(ctx.impl, partial, partial, full) - _kl(partial, full),
            "mean_ratio_minus_one_without_overlap": missing_mass}


class SameStep(NoParams):
    """Two logit vectors of a categorical policy and one parameter step applied to each."""

    logits_a: list[float] = Field(min_length=2)
    logits_b: list[float] = Field(min_length=2)
    step: list[float] = Field(min_length=2, description="the same step in parameter space, added to both")


@verifier(kind="counterexample", params=SameStep)
def same_step_different_kl_counterexample(ctx: Context) -> dict[str, object]:
    """The same step in the logits moves a softmax policy by very different KL at two points.

    KL(softmax(z) || softmax(z + Δ)) at z = ``logits_a`` and z = ``logits_b`` for one Δ, and their
    ratio: near a uniform policy the step changes the distribution much more than where the
    policy is already nearly deterministic, although the Euclidean step length is the same.
    """
    step = np.array(ctx.params.step)
    kls = []
    for logits in (np.array(ctx.params.logits_a), np.array(ctx.params.logits_b)):
        reach(states=1, actions=logits.size)
        before, after = log_softmax(logits), log_softmax(logits + step)
        kls.append(float(np.exp(before) @ (before - after)))
    return {"step_length": float(np.linalg.norm(step)), "kl_a": kls[0], "kl_b": kls[1], "kl_ratio": kls[0] / kls[1]}

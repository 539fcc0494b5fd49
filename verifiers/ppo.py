"""PPO's clipped objective, its loss and diagnostics, and one batch reused for several epochs (lesson 4.4,
steps 4.4.3-4.4.5; step 4.3.5; week 16 steps 3-4).

The ratios the clipping acts on are ``verifiers.ratios``'s, and the unclipped surrogate ``verifiers.surrogate``'s.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field

from claims_harness import Context, NoParams, assume, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import (
    as_fractions,
)
from verifiers._numeric import (
    EPS,
    as_written,
    assert_close,
    log_softmax,
    rounding_bound,
    smallest,
)
from verifiers._reach import reach_bandit

# --------------------------------------------------------------------------- 4.4.1 gradient at θ_old


# Rationals built from integers (st.fractions draws five times slower): ratios in [1/100, 10^4],
# advantages in [-10^4, 10^4], eps in {1/100, ..., 99/100}; ratios land on the kinks 1 ± eps often.
_exact_ratios = st.builds(Fraction, st.integers(1, 10_000), st.integers(1, 100))
_exact_advantages = st.builds(Fraction, st.integers(-10_000, 10_000), st.integers(1, 100))
_exact_epsilons = st.builds(Fraction, st.integers(1, 99), st.just(100))
_exact_clip_batches = st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.lists(_exact_ratios, min_size=n, max_size=n), st.lists(_exact_advantages, min_size=n, max_size=n),
    _exact_epsilons))


def _clip_fraction(ratio: Fraction, epsilon: Fraction) -> Fraction:
    return min(max(ratio, 1 - epsilon), 1 + epsilon)


@verifier(kind="property", uses=("surrogate_objective", "surrogate_objective_grad", "ppo_clip_objective_grad"))
@given(_exact_clip_batches)
def surrogate_gradient_code_exact_property(ctx: Context, case: tuple[list[Fraction], list[Fraction], Fraction]) -> None:
    """impl's surrogate and its gradient code in exact rationals, for ratios anywhere in [1/100, 10^4]:
    the per-sample surrogate is r Â (the definition of L^PG), its derivative with respect to
    log π is r Â (because ∂r/∂log π = r), and the clipped surrogate's derivative is r Â where the
    unclipped branch is the minimum and 0 where the clipped branch strictly is (ratios exactly
    at the kinks 1 ± ε are skipped). At r = 1 a gradient of Â / r is right too, so this part
    needs ratios away from 1: it is the gradient the loop follows once θ has left θ_old.
    """
    ratio_list, advantage_list, epsilon = case
    reach(data="old", advantages="estimated")  # ratios against π_old, advantages arbitrary numbers
    ratios, advantages = np.array(ratio_list, dtype=object), np.array(advantage_list, dtype=object)
    products = [r * a for r, a in zip(ratio_list, advantage_list, strict=True)]
    assert list(ctx.impl.surrogate_objective(ratios, advantages)) == products, "the surrogate is not r Â"
    assert list(ctx.impl.surrogate_objective_grad(ratios, advantages)) == products, "its gradient is not r Â"
    clipped_gradients = ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon)
    for r, a, observed, product in zip(ratio_list, advantage_list, clipped_gradients, products, strict=True):
        if r not in (1 - epsilon, 1 + epsilon):
            expected = 0 if _clip_fraction(r, epsilon) * a < product else product
            assert observed == expected, ("clipped gradient", r, a, epsilon, observed, expected)


# --------------------------------------------------------------------------- 4.4.3 clipping


class ClipCases(NoParams):
    """Samples (Â, r) given as two lists of equal length, and the clipping parameter."""

    epsilon: float = Field(gt=0, lt=1)
    advantages: list[float] = Field(min_length=1)
    ratios: list[float] = Field(min_length=1)


@verifier(kind="exact", uses=("ppo_clip_objective", "ppo_clip_objective_grad", "clip_active"), params=ClipCases)
def clip_cases_exact(ctx: Context) -> dict[str, object]:
    """For each (Â, r): the unclipped term r Â and the clipped term clip(r, 1-ε, 1+ε) Â (computed
    here), impl's clipped objective (their minimum), impl's gradient with respect to log π, and
    whether impl reports the clipped branch active (the plateau). All in exact Fractions."""
    epsilon = as_written(ctx.params.epsilon)
    advantages, ratios = as_fractions(ctx.params.advantages), as_fractions(ctx.params.ratios)
    reach(advantages="estimated", data="old")  # ratios against π_old, advantages numbers written for Â
    clipped_ratios = [min(max(r, 1 - epsilon), 1 + epsilon) for r in ratios]
    return {
        "interval": [1 - epsilon, 1 + epsilon],
        "unclipped": list(ratios * advantages),
        "clipped": [c * a for c, a in zip(clipped_ratios, advantages, strict=True)],
        "objective": list(ctx.impl.ppo_clip_objective(ratios, advantages, epsilon)),
        "gradient": list(ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon)),
        "plateau": [bool(v) for v in ctx.impl.clip_active(ratios, advantages, epsilon)],
    }


# The six regions of (sign of Â, position of r) in which the clipped term is one smooth expression.
CLIP_REGIONS = ("A>0, r<1-eps", "A>0, inside", "A>0, r>1+eps", "A<0, r<1-eps", "A<0, inside", "A<0, r>1+eps")


def _sign(expression: sp.Expr) -> str:
    """'zero', 'negative' or 'positive' when sympy can decide it under the symbols' assumptions, else 'undecided'."""
    expression = sp.simplify(expression)
    for name, test in (("zero", expression.is_zero), ("negative", expression.is_negative),
                       ("positive", expression.is_positive)):
        if test:
            return name
    return "undecided"


@verifier(kind="symbolic")
def clip_pessimistic_symbolic(ctx: Context) -> dict[str, object]:
    """min(r Â, clip(r, 1-ε, 1+ε) Â) - r Â and the sign of the term's slope in r, in each of the six
    regions of ``CLIP_REGIONS``, for every ε in (0, 1), every Â of the region's sign and every r in it.

    Positive symbols e, u, a parametrise the regions: ε = e/(1+e) covers (0, 1); r = (1-ε)/(1+u)
    is below the interval, r = 1 - ε + 2ε/(1+u) inside and r = 1 + ε + u above; Â = ±a. sympy
    evaluates clip as Min(Max(r, 1-ε), 1+ε) and the minimum with Min under these assumptions.
    A gap that is zero or negative in every region makes L^CLIP a lower (pessimistic) bound of the
    unclipped surrogate; where it is negative the term is also flat in r (the plateau).
    """
    e, u, a = sp.symbols("e u a", positive=True)
    reach(advantages="estimated", data="old")  # ratios against π_old, advantages any number of either sign
    epsilon = e / (1 + e)
    positions = ((1 - epsilon) / (1 + u), 1 - epsilon + 2 * epsilon / (1 + u), 1 + epsilon + u)
    gaps, slopes = [], []
    for advantage in (a, -a):
        for ratio in positions:
            clipped = sp.simplify(sp.Min(sp.Max(ratio, 1 - epsilon), 1 + epsilon))
            term = sp.simplify(sp.Min(ratio * advantage, clipped * advantage))
            gaps.append(_sign(term - ratio * advantage))
            # r is a monotone function of u in each region: d term / dr = (d term / du) / (dr / du).
            slopes.append(_sign(sp.diff(term, u) / sp.diff(ratio, u)))
    return {"regions": list(CLIP_REGIONS), "gap_sign": gaps, "slope_sign": slopes,
            "never_above_unclipped": all(g in ("zero", "negative") for g in gaps)}


@verifier(kind="property", uses=("ppo_clip_objective",))
@given(_exact_clip_batches)
def clip_objective_pessimistic_property(ctx: Context, case: tuple[list[Fraction], list[Fraction], Fraction]) -> None:
    """impl's clipped term in exact rationals, for r in [1/100, 10^4], Â in [-10^4, 10^4] and
    ε in {1/100, ..., 99/100}: it is at most the unclipped r Â and at most the clipped clip(r) Â (the pessimistic
    choice of the two), and it equals min(r Â, clip(r, 1-ε, 1+ε) Â), computed here.
    """
    ratio_list, advantage_list, epsilon = case
    reach(advantages="estimated", data="old")
    observed = ctx.impl.ppo_clip_objective(np.array(ratio_list, dtype=object),
                                           np.array(advantage_list, dtype=object), epsilon)
    for r, a, term in zip(ratio_list, advantage_list, observed, strict=True):
        unclipped, clipped = r * a, _clip_fraction(r, epsilon) * a
        assert term <= unclipped, ("above the unclipped term", r, a, epsilon, term)
        assert term <= clipped, ("above the clipped term", r, a, epsilon, term)
        assert term == min(unclipped, clipped), ("not the minimum", r, a, epsilon, term)


# Advantages of at least 1e-6 in size: for subnormal ones r Â and clip(r) Â can round to the same
# number, and whether clipping is active is then decided by rounding, not by the rule under test.
_signed_advantages = st.floats(min_value=-100, max_value=100).filter(lambda a: abs(a) >= 1e-6)
_ratios = st.floats(min_value=1e-4, max_value=1e4)
_epsilons = st.floats(min_value=0.01, max_value=0.99)


@verifier(kind="property", uses=("ppo_clip_objective_grad",))
@given(st.tuples(_signed_advantages, _ratios, _epsilons))
def clipping_never_blocks_correction_property(ctx: Context, case: tuple[float, float, float]) -> None:
    """For every sign of Â, every r > 0 and every ε in (0, 1), impl's gradient of the clipped term
    with respect to log π is r Â (the unclipped gradient, pointing toward the advantage) whenever
    the ratio has moved against the advantage (Â > 0, r <= 1, or Â < 0, r >= 1); it is zero only
    when the ratio has already moved past 1 ± ε in the advantage's direction; and it never has the
    opposite sign of Â. Ratios within 1e-9 of a kink 1 ± ε are skipped: there r Â and clip(r) Â
    can round to the same float, and which branch a correct implementation takes is rounding's choice.
    """
    advantage, ratio, epsilon = case
    assume(min(abs(ratio - (1 - epsilon)), abs(ratio - (1 + epsilon))) > 1e-9)
    reach(advantages="estimated", data="old")
    gradient = float(ctx.impl.ppo_clip_objective_grad(np.array([ratio]), np.array([advantage]), epsilon)[0])
    moved_past = (advantage > 0 and ratio > 1 + epsilon) or (advantage < 0 and ratio < 1 - epsilon)
    if moved_past:
        assert gradient == 0, (advantage, ratio, epsilon, gradient)
    else:
        assert_close(gradient, ratio * advantage, EPS * abs(ratio * advantage), "the unclipped gradient against r Â")
        assert gradient != 0, ("the clip blocks a gradient it should pass", advantage, ratio, epsilon)
    assert gradient * advantage >= 0, (advantage, ratio, gradient)


@verifier(kind="counterexample", uses=("ratio_clip_diagnostics",), params=ClipCases)
def clip_fractions_counterexample(ctx: Context) -> dict[str, object]:
    """impl's two clip diagnostics on one batch: ratios outside [1-ε, 1+ε] and clipping active."""
    reach(advantages="estimated", data="old")
    diagnostics = ctx.impl.ratio_clip_diagnostics(np.array(ctx.params.ratios), np.array(ctx.params.advantages),
                                            ctx.params.epsilon)
    return {"outside_fraction": diagnostics.outside_fraction, "active_fraction": diagnostics.active_fraction,
            "difference": diagnostics.outside_fraction - diagnostics.active_fraction}


# Clip ranges with 1 ± ε and |r - 1| exact in binary: there a ratio exactly on an edge is inside the interval,
# and every correct way of writing the comparisons says so.
_EXACT_EPSILONS = (0.125, 0.25, 0.375, 0.5)


def _diagnostic_batch(epsilon: float, n: int) -> st.SearchStrategy[tuple[list[float], list[float], float]]:
    ratios = st.floats(0.01, 10).filter(lambda r: min(abs(r - (1 - epsilon)), abs(r - (1 + epsilon))) > 1e-9)
    if epsilon in _EXACT_EPSILONS:
        ratios = st.one_of(ratios, st.sampled_from([1 - epsilon, 1 + epsilon]))
    return st.tuples(st.lists(ratios, min_size=n, max_size=n),
                     st.lists(_signed_advantages, min_size=n, max_size=n), st.just(epsilon))


_diagnostic_batches = st.tuples(st.one_of(st.floats(0.01, 0.99), st.sampled_from(_EXACT_EPSILONS)),
                                st.integers(1, 32)).flatmap(
    lambda epsilon_and_size: _diagnostic_batch(*epsilon_and_size))


@verifier(kind="property", uses=("ratio_clip_diagnostics",))
@given(_diagnostic_batches)
def clip_diagnostics_property(ctx: Context, case: tuple[list[float], list[float], float]) -> None:
    """impl's two diagnostics of step 4.4.4 against their definitions, on random batches: the share
    of ratios outside [1-ε, 1+ε], and the share of samples whose clipped branch is strictly the
    minimum (Â > 0 with r > 1+ε, or Â < 0 with r < 1-ε).

    Ratios within 1e-9 of 1 ± ε and advantages below 1e-6 in size are not drawn, so that a
    different but correct way of writing the comparisons (|r - 1| > ε, or clip(r) Â < r Â) cannot
    round to the other side, except ratios exactly 1 ± ε for an ε whose 1 ± ε is exact in binary
    (1/8, 1/4, 3/8, 1/2): the interval is closed, so they are inside, and not clipped. Each share is k/N for
    N <= 32, computed with one rounded division, so it must be within eps of k/N.
    """
    ratio_list, advantage_list, epsilon = case
    reach(advantages="estimated", data="old")
    ratios, advantages = np.array(ratio_list), np.array(advantage_list)
    outside = (ratios < 1 - epsilon) | (ratios > 1 + epsilon)
    active = ((advantages > 0) & (ratios > 1 + epsilon)) | ((advantages < 0) & (ratios < 1 - epsilon))
    diagnostics = ctx.impl.ratio_clip_diagnostics(ratios, advantages, epsilon)
    assert_close(float(diagnostics.outside_fraction), outside.mean(), EPS, "outside_fraction")
    assert_close(float(diagnostics.active_fraction), active.mean(), EPS, "active_fraction")


class SharedLogits(NoParams):
    pi_old: list[float] = Field(min_length=2, description="old action probabilities in the one state")
    actions: list[int] = Field(min_length=1)
    advantages: list[float] = Field(min_length=1)
    epsilon: float = Field(gt=0, lt=1)
    learning_rate: float = Field(gt=0)
    steps: list[int] = Field(min_length=2, description="increasing numbers of gradient steps to report")


@verifier(kind="counterexample", params=SharedLogits,
          uses=("probability_ratios", "ppo_clip_objective_grad", "softmax_score", "log_softmax",
                "ratio_clip_diagnostics", "kl_k3"))
def clipping_is_no_trust_region(ctx: Context) -> dict[str, object]:
    """Gradient ascent on L^CLIP through impl, for one state's logits shared by the whole batch.

    A sample whose ratio is clipped stops contributing, but the other samples keep moving the
    shared logits, so its ratio keeps leaving [1-ε, 1+ε] and KL(π_old || π_θ) keeps growing with
    the number of steps (epochs). Reported after each number of steps in ``steps``: the ratios,
    impl's clip diagnostics, impl's k3 estimate on the batch and the exact KL; whether the lowest
    ratio (a sample with Â < 0, clipped once below 1 - ε) keeps falling and the KL keeps growing
    from one reported step to the next.
    """
    params = ctx.params
    old_logits = np.log(np.array(params.pi_old))
    actions, advantages = np.array(params.actions), np.array(params.advantages)
    # One logit vector, one state, shared by the whole batch of actions stored from π_old.
    reach(states=np.atleast_2d(old_logits).shape[0], actions=old_logits.size, data="old", advantages="estimated")
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
            diagnostics = ctx.impl.ratio_clip_diagnostics(ratio, advantages, params.epsilon)
            p_old, log_new = np.array(params.pi_old), log_softmax(logits)
            report["ratios"].append([float(r) for r in ratio])
            report["outside_fraction"].append(float(diagnostics.outside_fraction))
            report["active_fraction"].append(float(diagnostics.active_fraction))
            report["kl_k3_batch"].append(float(np.mean(ctx.impl.kl_k3(log_pi - log_pi_old))))
            report["kl_exact"].append(float(p_old @ (np.log(p_old) - log_new)))
    kl = report["kl_exact"]
    lowest = [smallest(ratios) for ratios in report["ratios"]]
    return {**report, "steps": list(params.steps), "min_ratio_last": lowest[-1],
            "min_ratio_keeps_falling": all(b < a for a, b in itertools.pairwise(lowest)),
            "max_ratio_last": max(report["ratios"][-1]), "outside_fraction_last": report["outside_fraction"][-1],
            "kl_keeps_growing": all(b > a for a, b in itertools.pairwise(kl)), "kl_last": kl[-1]}


# --------------------------------------------------------------------------- 4.4.4 loss and diagnostics


_loss_batches = st.integers(1, 32).flatmap(lambda n: st.tuples(
    st.arrays(np.float64, (n, 3), elements=st.floats(-5, 5)),  # logits
    st.arrays(np.int64, n, elements=st.integers(0, 2)),  # actions
    st.arrays(np.float64, n, elements=st.floats(-1.5, 1.5)),  # log π - log π_old
    st.arrays(np.float64, n, elements=st.floats(-10, 10)),  # advantages
    st.arrays(np.float64, n, elements=st.floats(-10, 10)),  # values
    st.arrays(np.float64, n, elements=st.floats(-10, 10)),  # value targets
    st.floats(0, 2), st.floats(0, 0.1), st.floats(0.05, 0.5)))


@verifier(kind="property",
          uses=("log_softmax", "probability_ratios", "ppo_clip_objective", "ppo_clip_objective_grad",
                "squared_error_value_loss", "categorical_entropy", "categorical_entropy_grad", "ppo_total_loss",
                "softmax_score"))
@given(_loss_batches)
def total_loss_composition_property(ctx: Context, batch: tuple) -> None:
    """impl's PPO loss -L^CLIP + c_V L_V - c_H H and its gradient with respect to the logits and the
    logits, assembled from impl's parts as the training loop does, equal the same quantities
    computed here from their definitions: min(r Â, clip(r) Â), ½(V - V̂)², -Σ π log π, and the
    derivative with respect to the logits -(1/N) 1[not clipped] r Â (e_a - π) + (c_H/N) π (log π + H).
    The entropy and its gradient of the logits stacked as [1, N, K] are those of the rows, stacked.
    """
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
    # Within rounding of a band edge the implementation's ratio may fall on the other branch.
    assume(np.abs(np.abs(r - 1) - epsilon).min() > 1e-9)
    reach(actions=logits.shape[1], data="old", advantages="estimated")
    clipped = np.clip(r, 1 - epsilon, 1 + epsilon)
    log_p = log_softmax(logits)
    p = np.exp(log_p)
    h = -(p * log_p).sum(axis=1)
    reference = (-np.minimum(r * advantages, clipped * advantages).mean()
                 + value_coef * 0.5 * ((values - targets) ** 2).mean() - entropy_coef * h.mean())
    unclipped = ~(clipped * advantages < r * advantages)
    reference_d_logits = (-(unclipped * r * advantages)[:, None] * (np.eye(3)[actions] - p) / n
                          + entropy_coef * p * (log_p + h[:, None]) / n)
    magnitude = float(np.abs(r * advantages).max() + value_coef * ((values - targets) ** 2).max() + 5)
    bound = rounding_bound(8 * n, magnitude * (1 + 4 * np.abs(log_ratio).max()))
    assert_close(loss, reference, bound, "impl's PPO loss against its definition")
    assert_close(d_logits, reference_d_logits, bound / n * 4, "the loss's gradient with respect to the logits")
    # The entropy and its gradient act along the last axis whatever the leading ones ([..., K]).
    stacked = logits[None]
    stacked_entropy = np.asarray(ctx.impl.categorical_entropy(stacked))
    stacked_grad = np.asarray(ctx.impl.categorical_entropy_grad(stacked))
    assert stacked_entropy.shape == (1, n) and stacked_grad.shape == (1, n, 3), (stacked_entropy.shape,
                                                                                stacked_grad.shape)
    assert_close(stacked_entropy[0], h, bound, "categorical_entropy of the logits stacked [1, N, K]")
    assert_close(stacked_grad[0], -p * (log_p + h[:, None]), bound, "categorical_entropy_grad of the stacked logits")


# ---------------------------------------------------- week 16 steps 3-4: the clipped objective on the syllabus's bandit


# Ratios in fortieths up to 4 (so every band edge 1 ± k/20 is hit exactly too), advantages in eighths, ε in twentieths.
_fortieths = st.integers(1, 160).map(lambda k: Fraction(k, 40))


_advantages = st.integers(-40, 40).map(lambda k: Fraction(k, 8))


_clip_batches = st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.lists(_fortieths, min_size=n, max_size=n), st.lists(_advantages, min_size=n, max_size=n),
    st.integers(1, 19).map(lambda k: Fraction(k, 20))))


@verifier(kind="property", uses=("ppo_clip_objective", "ppo_clip_objective_grad"))
@given(_clip_batches)
def clipped_objective_property(ctx: Context, batch: tuple) -> None:
    """For random exact ratios r > 0, advantages Â and ε in (0, 1): impl's clipped objective equals
    min(r Â, clip(r, 1-ε, 1+ε) Â) and its derivative with respect to log π equals r Â, or 0 where
    the clipped branch is strictly the smaller (it is then constant in θ); both computed here, in
    Fractions, compared with ==. On a band edge (both branches equal, Â ≠ 0) either one-sided
    derivative is accepted: a correct implementation may break the tie either way."""
    ratios, advantages, epsilon = batch
    # Ratios to π_old and drawn numbers standing for Â: the clip is per sample, whatever the setting.
    reach(data="old", advantages="estimated")
    clipped = [min(max(r, 1 - epsilon), 1 + epsilon) * a for r, a in zip(ratios, advantages, strict=True)]
    unclipped = [r * a for r, a in zip(ratios, advantages, strict=True)]
    ratio_t, advantage_t = np.array(ratios, dtype=object), np.array(advantages, dtype=object)
    objective = list(ctx.impl.ppo_clip_objective(ratio_t, advantage_t, epsilon))
    gradient = list(ctx.impl.ppo_clip_objective_grad(ratio_t, advantage_t, epsilon))
    assert objective == [min(u, c) for u, c in zip(unclipped, clipped, strict=True)], (objective, batch)
    # Where r sits on a band edge both branches are equal and either one-sided derivative (r Â or 0) is correct.
    allowed = [{0, u} if r in (1 - epsilon, 1 + epsilon) else {0} if c < u else {u}
               for u, c, r in zip(unclipped, clipped, ratios, strict=True)]
    assert all(g in options for g, options in zip(gradient, allowed, strict=True)), (gradient, batch)


class ClippedEpochs(NoParams):
    """One state's old policy, a batch of (arm, Â), and plain gradient ascent on L^CLIP for some epochs."""

    pi_old: list[float] = Field(min_length=2, description="π_old over the arms")
    actions: list[int] = Field(min_length=1, description="the batch's sampled arms")
    advantages: list[float] = Field(min_length=1, description="Â of each sample")
    epsilon: float = Field(gt=0, lt=1)
    learning_rate: float = Field(gt=0)
    epochs: list[int] = Field(min_length=1, description="increasing epoch counts after which to report")


def _log_ratios(logits: np.ndarray, old_logits: np.ndarray, actions: np.ndarray) -> np.ndarray:
    return (log_softmax(logits) - log_softmax(old_logits))[actions]


@verifier(kind="counterexample", params=ClippedEpochs,
          uses=("log_softmax", "probability_ratios", "ppo_clip_objective_grad", "softmax_score"))
def clipped_epochs_leave_band(ctx: Context) -> dict[str, object]:
    """Several epochs of full-batch gradient ascent on L^CLIP, every step through impl, on one batch.

    The logits of the one state are shared by every sample. A sample whose ratio has passed the
    band in its advantage's direction stops contributing, but the others keep moving the shared
    logits, so its ratio keeps moving too. Reported after each count in ``epochs``: the batch's
    ratios and their largest distance from 1, and KL(π_old || π) (both from the verifier's own
    log-softmax).
    """
    params = ctx.params
    old_logits = np.log(np.array(params.pi_old, dtype=float))
    actions, advantages = np.array(params.actions), np.array(params.advantages, dtype=float)
    # A batch drawn by π_old with given numbers for Â, the logits moving away from π_old epoch after epoch.
    reach_bandit(old_logits.size, data="old", advantages="estimated", tokens=1)
    n = actions.size
    log_pi_old = ctx.impl.log_softmax(old_logits)[actions]
    logits = old_logits.copy()
    ratios, distances, divergences = [], [], []
    for epoch in range(1, max(params.epochs) + 1):
        ratio = ctx.impl.probability_ratios(ctx.impl.log_softmax(logits)[actions], log_pi_old)
        weight = ctx.impl.ppo_clip_objective_grad(ratio, advantages, params.epsilon) / n
        score = ctx.impl.softmax_score(np.broadcast_to(logits, (n, logits.size)), actions)
        logits = logits + params.learning_rate * (weight[:, None] * score).sum(axis=0)
        if epoch in params.epochs:
            reference = np.exp(_log_ratios(logits, old_logits, actions))
            ratios.append(reference.tolist())
            distances.append(float(np.abs(reference - 1).max()))
            old_log_pi = log_softmax(old_logits)
            divergences.append(float(np.exp(old_log_pi) @ (old_log_pi - log_softmax(logits))))
    return {"epochs": list(params.epochs), "ratios": ratios, "farthest_from_one": distances,
            "farthest_from_one_last": distances[-1], "kl_old_to_new": divergences,
            "kl_keeps_growing": all(b > a for a, b in itertools.pairwise(divergences))}


# ---------------------------------------------------------- 4.3.5: one batch, several epochs, with and without clipping


@verifier(kind="exact", uses=("ppo_clip_objective_grad", "surrogate_objective_grad"), params=ClippedEpochs)
def ppo_reuse_epochs_exact(ctx: Context) -> dict[str, object]:
    """One batch reused for several epochs of gradient ascent on the shared logits, once on PPO's
    clipped objective and once on the plain surrogate r_t Â_t, through impl's per-sample derivatives
    with respect to log π(a_t); the ratios, softmax scores and KL(π_old || π) are computed here.

    Reported after each number of epochs: the exact KL of each, and the first epoch's steps (at
    r_t = 1 both objectives give the policy-gradient step, so PPO's first pass over the batch is the
    ordinary one; only the later passes differ).
    """
    params = ctx.params
    pi_old = np.array(params.pi_old, dtype=float)
    actions, advantages = np.array(params.actions), np.array(params.advantages, dtype=float)
    if len(actions) != len(advantages):
        raise ValueError("one advantage per stored action")
    log_pi_old = np.log(pi_old)
    n = len(actions)
    one_hot = np.eye(len(pi_old))[actions]
    # One state's logits, stepped for several epochs on a batch drawn from π_old; the advantages are given numbers.
    reach_bandit(len(pi_old), data="old", advantages="estimated")

    def derivative(objective: str, ratio: np.ndarray) -> np.ndarray:
        if objective == "clipped":
            return np.asarray(ctx.impl.ppo_clip_objective_grad(ratio, advantages, params.epsilon), dtype=float)
        return np.asarray(ctx.impl.surrogate_objective_grad(ratio, advantages), dtype=float)

    kl: dict[str, list[float]] = {"clipped": [], "plain": []}
    first_steps = {}
    for objective in kl:
        logits = log_pi_old.copy()
        for epoch in range(1, max(params.epochs) + 1):
            log_pi = log_softmax(logits)
            ratio = np.exp(log_pi[actions] - log_pi_old[actions])
            scores = one_hot - np.exp(log_pi)
            step = params.learning_rate * (derivative(objective, ratio)[:, None] * scores).sum(axis=0) / n
            if epoch == 1:
                first_steps[objective] = step
            logits = logits + step
            if epoch in params.epochs:
                kl[objective].append(float(pi_old @ (log_pi_old - log_softmax(logits))))
    bound = rounding_bound(8 * n, params.learning_rate * float(np.abs(advantages).max()))
    return {"kl_clipped": kl["clipped"], "kl_plain": kl["plain"],
            "first_epoch_steps_agree": bool(np.abs(first_steps["clipped"] - first_steps["plain"]).max() <= bound),
            "clipped_moves_less_at_every_reported_epoch": all(c < p for c, p in zip(kl["clipped"], kl["plain"],
                                                                                     strict=True)),
            "clipped_kl_grows": all(b > a for a, b in zip(kl["clipped"][:-1], kl["clipped"][1:], strict=True))}

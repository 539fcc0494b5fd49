"""KL(π_old || π) and the penalties built on it (lessons 4.4 and 4.5, week 16 steps 3-4).

The k3 estimator, its conditions, what a batch's k3 does not bound, and how far one parameter step moves a
policy (4.4.4); where a KL penalty over several tokens goes (4.5); and clipping and the KL penalty as anchors
on the syllabus's bandit, in one step and over training.
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
from verifiers._numeric import as_written, assert_close, log_softmax, rounding_bound
from verifiers._params import PositiveFractions
from verifiers._reach import reach_bandit


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


# --------------------------------------------------------------------------- 4.4.4: what a batch's k3 does not bound


@verifier(kind="counterexample", uses=("probability_ratios", "kl_k3"), params=FiniteBatch)
def k3_batch_bounds_no_update(ctx: Context) -> dict[str, object]:
    """impl's ratios and k3 on one batch drawn from π_old, beside the exact KL(π_old || π_θ) and the
    exact probability that π_old draws that batch (in rationals, from the probabilities as written).

    A policy that moves only the mass of actions the batch does not hold leaves every ratio of the
    batch at 1, so the batch's k3 is 0 however far the policy moved: a small D̂ is no bound on the update.
    """
    p_old, p_new = np.array(ctx.params.pi_old), np.array(ctx.params.pi_new)
    reach(states=1, actions=p_old.size, data="old")  # one state's policies; the batch is drawn from π_old
    log_pi_old, log_pi_new = np.log(p_old[ctx.params.actions]), np.log(p_new[ctx.params.actions])
    ratios = np.asarray(ctx.impl.probability_ratios(log_pi_new, log_pi_old), dtype=float)
    probability = Fraction(1)
    for a in ctx.params.actions:
        probability *= as_written(ctx.params.pi_old[a])
    kl = float(p_old @ (np.log(p_old) - np.log(p_new)))
    return {"k3_batch_mean": float(np.mean(ctx.impl.kl_k3(log_pi_new - log_pi_old))), "kl_exact": kl,
            "batch_probability": probability, "ratios_in_batch": [float(r) for r in ratios],
            "every_ratio_in_batch_is_one": bool(np.all(ratios == 1))}


# --------------------------------------------------------------------- 4.5: where a KL penalty over several tokens goes


# The policy is tabular and autoregressive: one categorical distribution per prefix, its logits the
# parameters. Answers have a fixed number of tokens and no EOS; logarithms stay exact in sympy as rational
# combinations of logarithms of primes, so the three placements are compared exactly.
class PenaltyWitness(NoParams):
    """A tabular answer policy and a reference policy, answers of exactly ``length`` tokens.

    Both map every prefix (a string over the first K letters 'a', 'b', ... shorter than ``length``) to the
    probabilities of the K tokens, as exact fractions; an answer is a string of ``length`` tokens.
    """

    prefix_probabilities: dict[str, PositiveFractions]
    reference_probabilities: dict[str, PositiveFractions]
    length: int = Field(ge=2, le=3)

    @model_validator(mode="after")
    def _complete(self) -> PenaltyWitness:
        sizes = {len(row) for table in (self.prefix_probabilities, self.reference_probabilities)
                 for row in table.values()}
        if len(sizes) != 1 or min(sizes) < 2:
            raise ValueError(f"every distribution needs the same number (at least 2) of tokens, found sizes {sizes}")
        symbols = "abcdefgh"[:sizes.pop()]
        needed = {"".join(body) for n in range(self.length) for body in itertools.product(symbols, repeat=n)}
        for name, table in (("prefix_probabilities", self.prefix_probabilities),
                            ("reference_probabilities", self.reference_probabilities)):
            if set(table) != needed:
                raise ValueError(f"{name} must hold exactly the prefixes {sorted(needed, key=lambda p: (len(p), p))}")
        return self


def _log(value: sp.Expr) -> sp.Expr:
    """log of a positive rational as Σ e_p log p over its prime factors: one canonical form, so that an exact
    difference of such logarithms is zero exactly when it expands to 0 (logarithms of primes are linearly
    independent over the rationals)."""
    fraction = Fraction(int(value.p), int(value.q))
    factors = {**sp.factorint(fraction.numerator)}
    for prime, power in sp.factorint(fraction.denominator).items():
        factors[prime] = factors.get(prime, 0) - power
    return sp.Add(*(power * sp.log(sp.Integer(prime)) for prime, power in factors.items() if prime != 1))


def _canonical(expression: sp.Expr) -> sp.Expr:
    return sp.expand(expression.replace(lambda e: isinstance(e, sp.log) and e.args[0].is_Rational,
                                        lambda e: _log(e.args[0])))


class _AnswerPolicy:
    """The witness as sympy: one logit per (prefix, token), the policy a softmax per prefix, evaluated where the
    softmax equals the witness's probabilities (logits log p)."""

    def __init__(self, params: PenaltyWitness, length: int):
        rows = {p: [sp.Rational(q) for q in row] for p, row in params.prefix_probabilities.items() if len(p) < length}
        self.reference = {p: [sp.Rational(q) for q in row] for p, row in params.reference_probabilities.items()
                          if len(p) < length}
        self.prefixes = sorted(rows, key=lambda p: (len(p), p))
        self.symbols = "abcdefgh"[:len(rows[""])]
        self.logits = {p: sp.symbols(f"z_{p or 'root'}_0:{len(self.symbols)}", real=True) for p in self.prefixes}
        self.at_witness = {z: sp.log(q) for p in self.prefixes for z, q in zip(self.logits[p], rows[p], strict=True)}
        self.answers = ["".join(body) for body in itertools.product(self.symbols, repeat=length)]

    def token_probability(self, prefix: str, token: str) -> sp.Expr:
        logits = self.logits[prefix]
        return sp.exp(logits[self.symbols.index(token)]) / sp.Add(*(sp.exp(z) for z in logits))

    def probability(self, answer: str) -> sp.Expr:
        return sp.Mul(*(self.token_probability(answer[:t], token) for t, token in enumerate(answer)))

    def reference_log_ratio(self, answer: str) -> sp.Expr:
        """log π(y)/π_ref(y) at the witness, the sum of the answer's per-token log-ratios."""
        return sp.Add(*(sp.log(self.at(self.token_probability(answer[:t], token)))
                        - sp.log(self.reference[answer[:t]][self.symbols.index(token)])
                        for t, token in enumerate(answer)))

    def prefix_kl(self, prefix: str) -> sp.Expr:
        """KL(π(·|prefix) || π_ref(·|prefix)) over the vocabulary, as a function of the prefix's own logits."""
        return sp.Add(*(self.token_probability(prefix, token)
                        * (sp.log(self.token_probability(prefix, token)) - sp.log(self.reference[prefix][k]))
                        for k, token in enumerate(self.symbols)))

    def gradient(self, expression: sp.Expr) -> list[sp.Expr]:
        """∇ with respect to every logit, at the witness, in canonical form."""
        return [_canonical(self.at(sp.diff(expression, z))) for p in self.prefixes for z in self.logits[p]]

    def at(self, expression: sp.Expr) -> sp.Expr:
        return sp.simplify(expression.subs(self.at_witness))


def _kl_gradient(policy: _AnswerPolicy) -> list[sp.Expr]:
    """The verifier's own ∇ KL(π(·|x) || π_ref(·|x)) over whole answers, by differentiating
    Σ_y π(y) log(π(y)/π_ref(y)) in the logits."""
    kl = sp.Add(*(policy.probability(y) * (sp.log(policy.probability(y))
                                           - sp.Add(*(sp.log(policy.reference[y[:t]][policy.symbols.index(token)])
                                                      for t, token in enumerate(y))))
                  for y in policy.answers))
    return policy.gradient(kl)


def _in_reward_expected_gradient(policy: _AnswerPolicy) -> list[sp.Expr]:
    """The penalty in the stop-gradient reward: E_y[log(π(y)/π_ref(y)) ∇ log π(y)], the answer's summed log-ratio held
    fixed as a reward is."""
    terms = [policy.at(policy.probability(y)) * policy.reference_log_ratio(y) * np.array(
        policy.gradient(sp.log(policy.probability(y))), dtype=object) for y in policy.answers]
    return [_canonical(coordinate) for coordinate in np.sum(terms, axis=0)]


def _in_loss_expected_gradient(policy: _AnswerPolicy) -> list[sp.Expr]:
    """The penalty in the loss with its direct derivative: E_y[Σ_t ∇ KL(π(·|y_<t) || π_ref(·|y_<t))], each position's
    KL over the vocabulary differentiated at the sampled prefix, as a per-token KL term of a loss is."""
    terms = [policy.at(policy.probability(y)) * np.array(policy.gradient(policy.prefix_kl(y[:t])), dtype=object)
             for y in policy.answers for t in range(len(y))]
    return [_canonical(coordinate) for coordinate in np.sum(terms, axis=0)]


def _prefix_score_term(policy: _AnswerPolicy) -> list[sp.Expr]:
    """The score part of step 4.1.2's extended formula for the per-token penalty f(y) = Σ_t KL_t(y_<t):
    E_y[Σ_t KL_t(y_<t) ∇ log π(y_<t)], which the direct derivative leaves out."""
    terms = [policy.at(policy.probability(y)) * policy.at(policy.prefix_kl(y[:t]))
             * np.array(policy.gradient(sp.log(policy.probability(y[:t])) if t else sp.Integer(0)), dtype=object)
             for y in policy.answers for t in range(len(y))]
    return [_canonical(coordinate) for coordinate in np.sum(terms, axis=0)]


def _largest_gap(left: list[sp.Expr], right: list[sp.Expr]) -> int | float:
    """The largest |left - right| over the coordinates: 0 when every difference is exactly zero, else the largest
    difference's size, evaluated to 30 significant digits and reported as a float."""
    gaps = [_canonical(a - b) for a, b in zip(left, right, strict=True)]
    if all(gap == 0 for gap in gaps):
        return 0
    return float(max(abs(sp.N(gap, 30)) for gap in gaps))


@verifier(kind=("exact", "counterexample"), params=PenaltyWitness)
def kl_penalty_placements_exact(ctx: Context) -> dict[str, object]:
    """Where a KL penalty goes, for answers of several tokens: the placements' expected gradients against ∇ KL.

    With KL = KL(π(·|x) || π_ref(·|x)) over whole answers (the sum of the per-token log-ratios in
    expectation), the expected gradient of each placement of the penalty (weight 1) is compared with
    ∇ KL, all exact (sympy; rationals and logarithms of primes): in the stop-gradient reward, the
    answer's summed log-ratio times its score; in the loss, each position's KL over the vocabulary
    differentiated directly at the sampled prefix; both together. ``*_gap`` is the largest coordinate
    of the difference, 0 exactly or a positive number. ``loss_placement_with_prefix_score_gap`` adds
    to the loss placement the score part of step 4.1.2's extended formula, Σ_t E[KL_t ∇ log π(y_<t)];
    ``one_token_loss_placement_gap`` is the loss placement's gap for the same policy's first token
    alone (answers of one token), where no prefix comes before the penalised position.
    """
    params = ctx.params
    observed = {}
    for length, prefix in ((params.length, ""), (1, "one_token_")):
        policy = _AnswerPolicy(params, length)
        # Every answer of the prompt, weighted by the policy being differentiated: on-policy expectations.
        reach(tokens=length, horizon=length, actions=len(policy.symbols), states=1, data="current")
        true_gradient = _kl_gradient(policy)
        in_loss = _in_loss_expected_gradient(policy)
        observed[f"{prefix}loss_placement_gap"] = _largest_gap(in_loss, true_gradient)
        if prefix:
            continue
        in_reward = _in_reward_expected_gradient(policy)
        observed["reward_placement_gap"] = _largest_gap(in_reward, true_gradient)
        observed["both_placements_gap"] = _largest_gap([a + b for a, b in zip(in_reward, in_loss, strict=True)],
                                                       true_gradient)
        observed["loss_placement_with_prefix_score_gap"] = _largest_gap(
            [a + b for a, b in zip(in_loss, _prefix_score_term(policy), strict=True)], true_gradient)
    return observed


# ---------------------------------------------- week 16 steps 3-4: clipping and the KL penalty as anchors on the bandit


def _kl_and_gradient(logits: np.ndarray, ref_logits: np.ndarray) -> tuple[float, np.ndarray]:
    """KL(π || π_ref) and its gradient with respect to π's logits, π_j (log π_j/π_ref,j - KL), computed here."""
    log_pi, log_ref = log_softmax(logits), log_softmax(ref_logits)
    pi = np.exp(log_pi)
    divergence = float(pi @ (log_pi - log_ref))
    return divergence, pi * (log_pi - log_ref - divergence)


def _kl_penalty(ctx: Context, logits: np.ndarray, ref_logits: np.ndarray, beta: float) -> tuple[float, np.ndarray]:
    """impl's β KL(π || π_ref) for one position and its gradient with respect to the logits."""
    one = np.ones((1, 1))
    value, gradient = ctx.impl.kl_penalty_loss(logits[None, None, :], ref_logits[None, None, :], one, beta,
                                               "token_mean")
    return float(value), np.asarray(gradient, dtype=float)[0, 0]


_anchors = st.integers(2, 6).flatmap(lambda k: st.tuples(
    *(st.arrays(np.float64, k, elements=st.floats(-3, 3)) for _ in range(3)),
    st.arrays(np.float64, k, elements=st.floats(-5, 5)),
    st.floats(0.05, 0.5), st.floats(0.01, 2)))


@verifier(kind="property", uses=("ppo_clip_objective_grad", "kl_penalty_loss"))
@given(_anchors)
def clip_and_kl_anchors_property(ctx: Context, example: tuple) -> None:
    """What each term is anchored to, for random logits of π, π_old and π_ref, one sample per arm
    with a random Â, random ε and β.

    The clipped term's weight on ∇ log π(a) (impl's) is 0 exactly when r = π(a)/π_old(a) has left
    [1-ε, 1+ε] in the direction of Â(a), and r Â otherwise; at the start of a batch, where
    π_old = π and every r = 1, it is Â whatever π_ref is: the band moves with π_old. The KL
    penalty's gradient (impl's) is β ∇ KL(π || π_ref), computed here: it vanishes only at π = π_ref
    and pulls toward π_ref however far π_old has moved. Ratios within 1e-9 of a band edge are not
    judged (the min there is a tie up to rounding).
    """
    logits, old_logits, ref_logits, advantages, epsilon, beta = example
    reach_bandit(logits.size, data="old", advantages="estimated", tokens=1)
    ratio = np.exp(log_softmax(logits) - log_softmax(old_logits))
    weight = ctx.impl.ppo_clip_objective_grad(ratio, advantages, epsilon)
    for r, a, w in zip(ratio, advantages, weight, strict=True):
        if abs(abs(r - 1) - epsilon) < 1e-9:
            continue
        past_band = (a > 0 and r > 1 + epsilon) or (a < 0 and r < 1 - epsilon)
        expected = 0.0 if past_band else r * a
        assert_close(w, expected, rounding_bound(4, abs(r * a)), f"impl's clipped weight at r = {r:.6g}, Â = {a:.6g}")
    at_batch_start = ctx.impl.ppo_clip_objective_grad(np.ones_like(advantages), advantages, epsilon)
    assert_close(at_batch_start, advantages, rounding_bound(1, float(np.abs(advantages).max())),
                 "impl's clipped weight at r = 1 against Â")
    divergence, gradient = _kl_and_gradient(logits, ref_logits)
    value, impl_gradient = _kl_penalty(ctx, logits, ref_logits, beta)
    magnitude = beta * (1 + 2 * float(np.abs(logits).max() + np.abs(ref_logits).max()) + math.log(len(logits)))
    bound = rounding_bound(16 * len(logits), magnitude)
    assert_close(value, beta * divergence, bound, "impl's KL penalty against β KL(π || π_ref)")
    assert_close(impl_gradient, beta * gradient, bound, "the KL penalty's gradient against β ∇ KL(π || π_ref)")


class BanditTraining(NoParams):
    """The syllabus's bandit trained by PPO from π_ref, batch after batch, on expected gradients."""

    rewards: list[float] = Field(min_length=2, description="R(a) per arm")
    epsilon: float = Field(gt=0, lt=1)
    beta: float = Field(gt=0, description="the KL penalty's coefficient in the penalised run")
    learning_rate: float = Field(gt=0)
    epochs: int = Field(ge=1, description="gradient steps on each batch")
    batches: list[int] = Field(min_length=2, description="increasing batch counts after which to report")


def _train_bandit(ctx: Context, params: BanditTraining, beta: float) -> list[float]:
    """KL(π || π_ref) after each batch count in ``params.batches``; π_ref = softmax(0), uniform.

    Each batch sets π_old = π and the exact advantages Â(a) = R(a) - E_{π_old}[R]; each epoch
    ascends the expected clipped objective Σ_a π_old(a) min(r_a Â_a, clip(r_a) Â_a), with impl's
    per-arm derivative and score, minus impl's KL penalty β KL(π || π_ref) (none when β = 0).
    """
    rewards = np.array(params.rewards, dtype=float)
    arms = np.arange(rewards.size)
    ref_logits = np.zeros(rewards.size)
    logits = ref_logits.copy()
    reported = []
    for batch in range(1, max(params.batches) + 1):
        old_logits = logits.copy()
        pi_old = np.exp(log_softmax(old_logits))
        advantages = rewards - pi_old @ rewards
        for _ in range(params.epochs):
            ratio = np.exp(log_softmax(logits) - log_softmax(old_logits))
            weight = pi_old * ctx.impl.ppo_clip_objective_grad(ratio, advantages, params.epsilon)
            ascent = weight @ ctx.impl.softmax_score(np.broadcast_to(logits, (arms.size, arms.size)), arms)
            if beta > 0:
                ascent = ascent - _kl_penalty(ctx, logits, ref_logits, beta)[1]
            logits = logits + params.learning_rate * ascent
        if batch in params.batches:
            reported.append(_kl_and_gradient(logits, ref_logits)[0])
    return reported


@verifier(kind="counterexample", params=BanditTraining,
          uses=("ppo_clip_objective_grad", "softmax_score", "kl_penalty_loss"))
def clip_and_kl_over_training(ctx: Context) -> dict[str, object]:
    """PPO on the bandit over many batches, with the clip alone and with the clip and a KL penalty.

    With the clip alone each batch's band is around that batch's π_old, so the policy keeps
    drifting from π_ref, batch after batch, toward the best arm: KL(π || π_ref) keeps growing
    toward log(1/π_ref(best arm)). With the penalty the expected update stops where
    ∇E_π[R] = β ∇KL(π || π_ref), at π* ∝ π_ref exp(R/β), whose KL is computed here in closed form.
    """
    params = ctx.params
    # Each batch's data are π_old's and its advantages the exact R - E_{π_old}[R] (see _train_bandit).
    reach_bandit(len(params.rewards), data="old", advantages="exact", tokens=1)
    clip_only = _train_bandit(ctx, params, 0.0)
    penalised = _train_bandit(ctx, params, params.beta)
    rewards = np.array(params.rewards, dtype=float)
    optimum_logits = rewards / params.beta
    optimum_kl = _kl_and_gradient(optimum_logits, np.zeros(rewards.size))[0]
    return {"batches": list(params.batches), "kl_clip_only": clip_only, "kl_with_penalty": penalised,
            "penalised_optimum_kl": optimum_kl,
            "clip_only_kl_keeps_growing": all(b > a for a, b in itertools.pairwise(clip_only)),
            "clip_only_last_minus_penalised_optimum": clip_only[-1] - optimum_kl,
            "penalised_last_gap_to_optimum": abs(penalised[-1] - optimum_kl)}

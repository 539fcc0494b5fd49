"""Importance weighting, clipping and the KL penalty as the week-16 syllabus states them (steps 3 and 4).

The setting is the syllabus's bandit: one state, K arms, π = softmax(z). For exact checks the
policies are given by rational probabilities, so π, the ratios r = π/π_old and the scores
e_a - π are exact, and expectations are sums over the arms weighted by the policy that draws
them. impl supplies the per-sample weights on ∇ log π (the surrogate's and the clipped
surrogate's derivatives with respect to log π) and the KL penalty; the references (the true
policy gradient, the clipped objective's definition, KL and its gradient) are computed here.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness import Context, check_property, verifier
from verifiers._numeric import as_written, log_softmax, rounding_bound


def _exact_scores(pi: list[Fraction]) -> np.ndarray:
    """Row a is ∇_z log π(a) = e_a - π, exactly."""
    return np.array([[Fraction(int(a == k)) - pi[k] for k in range(len(pi))] for a in range(len(pi))], dtype=object)


def _policy_gradient(pi: list[Fraction], weights: list[Fraction]) -> np.ndarray:
    """Σ_a π(a) w(a) (e_a - π): the expected gradient when arms are drawn from π and weighted by w."""
    return np.array(pi, dtype=object) * np.array(weights, dtype=object) @ _exact_scores(pi)


class TwoPolicies(BaseModel):
    """An old and a new policy over the same arms, and the arms' rewards (or advantages)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    pi_old: list[float] = Field(min_length=2, description="π_old(a), the policy that drew the samples")
    pi_new: list[float] = Field(min_length=2, description="π_θ(a), the policy being trained")
    rewards: list[float] = Field(min_length=2, description="R(a) per arm")
    baseline: float = Field(0.0, description="b subtracted from every reward: Â(a) = R(a) - b")
    epsilon: float = Field(0.2, gt=0, lt=1, description="the clipping parameter ε")

    @model_validator(mode="after")
    def _one_entry_per_arm(self) -> TwoPolicies:
        if not len(self.pi_old) == len(self.pi_new) == len(self.rewards):
            raise ValueError("pi_old, pi_new and rewards need one entry per arm")
        for name in ("pi_old", "pi_new"):
            if sum(as_written(p) for p in getattr(self, name)) != 1 or min(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive and sum to exactly 1")
        return self


def _exact_policies(params: TwoPolicies) -> tuple[list[Fraction], list[Fraction], np.ndarray, np.ndarray]:
    old, new = [as_written(p) for p in params.pi_old], [as_written(p) for p in params.pi_new]
    ratios = np.array([n / o for n, o in zip(new, old, strict=True)], dtype=object)
    advantages = np.array([as_written(r) - as_written(params.baseline) for r in params.rewards], dtype=object)
    return old, new, ratios, advantages


# --------------------------------------------------------------------------- step 3: off-policy data


@verifier("syllabus_ppo.importance_weighting_symbolic", kind="symbolic")
def importance_weighting_symbolic(ctx: Context) -> dict[str, object]:
    """Σ_a π_old(a) [π(a)/π_old(a)] f(a) - Σ_a π(a) f(a) over K symbolic arms, any f and positive
    π_old: weighting samples of π_old by r = π/π_old gives expectations under π."""
    categories = sp.Symbol("K", integer=True, positive=True)
    a = sp.Symbol("a", integer=True)
    old, new, f = sp.IndexedBase("q", positive=True), sp.IndexedBase("p", positive=True), sp.IndexedBase("f")
    weighted = sp.Sum(old[a] * (new[a] / old[a]) * f[a], (a, 1, categories))
    return {"residual": sp.simplify(weighted - sp.Sum(new[a] * f[a], (a, 1, categories)))}


@verifier("syllabus_ppo.stale_samples_exact", kind="exact", uses=("surrogate_objective_grad",), params=TwoPolicies)
def stale_samples_exact(ctx: Context) -> dict[str, object]:
    """The gradient of J(θ) = E_{π_θ}[R] at π_θ, estimated from arms drawn by π_old, exactly.

    Plain REINFORCE on the old samples weights ∇ log π_θ(a) by R(a) and estimates the gradient at
    π_old's point, not at π_θ's; the surrogate's derivative with respect to log π (impl's
    surrogate_objective_grad, r R) reweights each sample by r = π_θ/π_old and gives ∇J(θ) exactly.
    The true gradient Σ_a π_θ(a) R(a) (e_a - π_θ) is computed here.
    """
    old, new, ratios, rewards = _exact_policies(ctx.params)
    true_gradient = _policy_gradient(new, list(rewards))
    scores = _exact_scores(new)
    stale = np.array(old, dtype=object) * rewards @ scores
    reweighted = np.array(old, dtype=object) * ctx.impl.surrogate_objective_grad(ratios, rewards) @ scores
    return {"true_gradient": list(true_gradient), "stale_minus_true": list(stale - true_gradient),
            "reweighted_minus_true": list(reweighted - true_gradient)}


# --------------------------------------------------------------------------- step 4: the clipped objective


# Ratios in fortieths up to 4 (so every band edge 1 ± k/20 is hit exactly too), advantages in eighths, ε in twentieths.
_ratios = st.integers(1, 160).map(lambda k: Fraction(k, 40))
_advantages = st.integers(-40, 40).map(lambda k: Fraction(k, 8))
_clip_batches = st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.lists(_ratios, min_size=n, max_size=n), st.lists(_advantages, min_size=n, max_size=n),
    st.integers(1, 19).map(lambda k: Fraction(k, 20))))


@verifier("syllabus_ppo.clipped_objective_property", kind="property",
          uses=("ppo_clip_objective", "ppo_clip_objective_grad"))
def clipped_objective_property(ctx: Context) -> dict[str, object]:
    """For random exact ratios r > 0, advantages Â and ε in (0, 1): impl's clipped objective equals
    min(r Â, clip(r, 1-ε, 1+ε) Â) and its derivative with respect to log π equals r Â, or 0 where
    the clipped branch is strictly the smaller (it is then constant in θ); both computed here, in
    Fractions, compared with ==. On a band edge (both branches equal, Â ≠ 0) either one-sided
    derivative is accepted: a correct implementation may break the tie either way."""

    def matches_definition(batch: tuple) -> None:
        ratios, advantages, epsilon = batch
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

    return check_property(ctx, matches_definition, _clip_batches)


@verifier("syllabus_ppo.clipping_bias_exact", kind="counterexample",
          uses=("surrogate_objective_grad", "ppo_clip_objective_grad"),
          params=TwoPolicies)
def clipping_bias_exact(ctx: Context) -> dict[str, object]:
    """Expected gradients with respect to the logits at π_θ, from arms drawn by π_old, exactly.

    The true policy gradient Σ_a π_θ(a) Â(a) (e_a - π_θ) is computed here (Â = R - b, which the
    baseline leaves unbiased). The unclipped surrogate, weighted per sample by impl's r Â, equals
    it; the clipped surrogate, weighted by impl's clipped derivative, drops the samples whose ratio
    has left [1-ε, 1+ε] in their advantage's direction and so differs from it. At π_θ = π_old all
    ratios are 1 and the clipped gradient is the true one.
    """
    old, new, ratios, advantages = _exact_policies(ctx.params)
    epsilon = as_written(ctx.params.epsilon)
    true_gradient = _policy_gradient(new, list(advantages))
    scores = _exact_scores(new)
    weights_old = np.array(old, dtype=object)
    unclipped = weights_old * ctx.impl.surrogate_objective_grad(ratios, advantages) @ scores
    clipped = weights_old * ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon) @ scores
    ones = np.array([Fraction(1)] * len(old), dtype=object)
    at_old = weights_old * ctx.impl.ppo_clip_objective_grad(ones, advantages, epsilon) @ _exact_scores(old)
    return {"ratios": list(ratios), "true_gradient": list(true_gradient),
            "unclipped_minus_true": list(unclipped - true_gradient), "clipped_gradient": list(clipped),
            "clipped_minus_true": list(clipped - true_gradient),
            "clipped_minus_true_at_old": list(at_old - _policy_gradient(old, list(advantages)))}


class ClippedEpochs(BaseModel):
    """One state's old policy, a batch of (arm, Â), and plain gradient ascent on L^CLIP for some epochs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    pi_old: list[float] = Field(min_length=2, description="π_old over the arms")
    actions: list[int] = Field(min_length=1, description="the batch's sampled arms")
    advantages: list[float] = Field(min_length=1, description="Â of each sample")
    epsilon: float = Field(gt=0, lt=1)
    learning_rate: float = Field(gt=0)
    epochs: list[int] = Field(min_length=1, description="increasing epoch counts after which to report")


def _log_ratios(logits: np.ndarray, old_logits: np.ndarray, actions: np.ndarray) -> np.ndarray:
    return (log_softmax(logits) - log_softmax(old_logits))[actions]


@verifier("syllabus_ppo.clipped_epochs_leave_band", kind="counterexample", params=ClippedEpochs,
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


# ------------------------------------------------------- step 4 and the interview: clip vs. the KL penalty


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
    *(hnp.arrays(np.float64, k, elements=st.floats(-3, 3)) for _ in range(3)),
    hnp.arrays(np.float64, k, elements=st.floats(-5, 5)),
    st.floats(0.05, 0.5), st.floats(0.01, 2)))


@verifier("syllabus_ppo.clip_and_kl_anchors_property", kind="property",
          uses=("ppo_clip_objective_grad", "kl_penalty_loss"))
def clip_and_kl_anchors_property(ctx: Context) -> dict[str, object]:
    """What each term is anchored to, for random logits of π, π_old and π_ref, one sample per arm
    with a random Â, random ε and β.

    The clipped term's weight on ∇ log π(a) (impl's) is 0 exactly when r = π(a)/π_old(a) has left
    [1-ε, 1+ε] in the direction of Â(a), and r Â otherwise; at the start of a batch, where
    π_old = π and every r = 1, it is Â whatever π_ref is: the band moves with π_old. The KL
    penalty's gradient (impl's) is β ∇ KL(π || π_ref), computed here: it vanishes only at π = π_ref
    and pulls toward π_ref however far π_old has moved. Ratios within 1e-9 of a band edge are not
    judged (the min there is a tie up to rounding).
    """

    def anchored(example: tuple) -> None:
        logits, old_logits, ref_logits, advantages, epsilon, beta = example
        ratio = np.exp(log_softmax(logits) - log_softmax(old_logits))
        weight = ctx.impl.ppo_clip_objective_grad(ratio, advantages, epsilon)
        for r, a, w in zip(ratio, advantages, weight, strict=True):
            if abs(abs(r - 1) - epsilon) < 1e-9:
                continue
            past_band = (a > 0 and r > 1 + epsilon) or (a < 0 and r < 1 - epsilon)
            expected = 0.0 if past_band else r * a
            assert abs(w - expected) <= rounding_bound(4, abs(r * a)), (r, a, epsilon, w, expected)
        at_batch_start = ctx.impl.ppo_clip_objective_grad(np.ones_like(advantages), advantages, epsilon)
        assert np.all(np.abs(at_batch_start - advantages) <= rounding_bound(1, float(np.abs(advantages).max()))), \
            (at_batch_start, advantages)
        divergence, gradient = _kl_and_gradient(logits, ref_logits)
        value, impl_gradient = _kl_penalty(ctx, logits, ref_logits, beta)
        magnitude = beta * (1 + 2 * float(np.abs(logits).max() + np.abs(ref_logits).max()) + math.log(len(logits)))
        bound = rounding_bound(16 * len(logits), magnitude)
        assert abs(value - beta * divergence) <= bound, (value, beta * divergence, bound)
        assert np.abs(impl_gradient - beta * gradient).max() <= bound, (impl_gradient, beta * gradient, bound)

    return check_property(ctx, anchored, _anchors)


class BanditTraining(BaseModel):
    """The syllabus's bandit trained by PPO from π_ref, batch after batch, on expected gradients."""

    model_config = ConfigDict(extra="forbid", frozen=True)
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


@verifier("syllabus_ppo.clip_and_kl_over_training", kind="counterexample", params=BanditTraining,
          uses=("ppo_clip_objective_grad", "softmax_score", "kl_penalty_loss"))
def clip_and_kl_over_training(ctx: Context) -> dict[str, object]:
    """PPO on the bandit over many batches, with the clip alone and with the clip and a KL penalty.

    With the clip alone each batch's band is around that batch's π_old, so the policy keeps
    drifting from π_ref, batch after batch, toward the best arm: KL(π || π_ref) keeps growing
    toward log(1/π_ref(best arm)). With the penalty the expected update stops where
    ∇E_π[R] = β ∇KL(π || π_ref), at π* ∝ π_ref exp(R/β), whose KL is computed here in closed form.
    """
    params = ctx.params
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

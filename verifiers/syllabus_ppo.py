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
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import softmax_score, softmax_scores
from verifiers._numeric import as_written, assert_close, log_softmax, rounding_bound
from verifiers._params import PositiveDistribution
from verifiers._reach import reach_bandit


def _policy_gradient(pi: list[Fraction], weights: list[Fraction]) -> np.ndarray:
    """Σ_a π(a) w(a) (e_a - π): the expected gradient when arms are drawn from π and weighted by w."""
    return np.array(pi, dtype=object) * np.array(weights, dtype=object) @ softmax_scores(pi)


class TwoPolicies(NoParams):
    """An old and a new policy over the same arms, and the arms' rewards (or advantages)."""

    pi_old: PositiveDistribution = Field(min_length=2, description="π_old(a), the policy that drew the samples")
    pi_new: PositiveDistribution = Field(min_length=2, description="π_θ(a), the policy being trained")
    rewards: list[float] = Field(min_length=2, description="R(a) per arm")
    baseline: float = Field(0.0, description="b subtracted from every reward: Â(a) = R(a) - b")
    epsilon: float = Field(0.2, gt=0, lt=1, description="the clipping parameter ε")

    @model_validator(mode="after")
    def _one_entry_per_arm(self) -> TwoPolicies:
        if not len(self.pi_old) == len(self.pi_new) == len(self.rewards):
            raise ValueError("pi_old, pi_new and rewards need one entry per arm")
        return self


def _exact_policies(params: TwoPolicies) -> tuple[list[Fraction], list[Fraction], np.ndarray, np.ndarray]:
    old, new = [as_written(p) for p in params.pi_old], [as_written(p) for p in params.pi_new]
    ratios = np.array([n / o for n, o in zip(new, old, strict=True)], dtype=object)
    advantages = np.array([as_written(r) - as_written(params.baseline) for r in params.rewards], dtype=object)
    return old, new, ratios, advantages


# --------------------------------------------------------------------------- step 3: off-policy data


@verifier(kind="symbolic")
def importance_weighting_symbolic(ctx: Context) -> dict[str, object]:
    """Σ_a π_old(a) [π(a)/π_old(a)] f(a) - Σ_a π(a) f(a) over K symbolic arms, any f and positive
    π_old: weighting samples of π_old by r = π/π_old gives expectations under π."""
    categories = sp.Symbol("K", integer=True, positive=True)
    a = sp.Symbol("a", integer=True)
    old, new, f = sp.IndexedBase("q", positive=True), sp.IndexedBase("p", positive=True), sp.IndexedBase("f")
    weighted = sp.Sum(old[a] * (new[a] / old[a]) * f[a], (a, 1, categories))
    # Samples of π_old (q) reweighted to π (p).
    reach(actions=categories, data="old")
    return {"residual": sp.simplify(weighted - sp.Sum(new[a] * f[a], (a, 1, categories)))}


@verifier(kind="exact", uses=("surrogate_objective_grad",), params=TwoPolicies)
def stale_samples_exact(ctx: Context) -> dict[str, object]:
    """The gradient of J(θ) = E_{π_θ}[R] at π_θ, estimated from arms drawn by π_old, exactly.

    Plain REINFORCE on the old samples weights ∇ log π_θ(a) by R(a) and estimates the gradient at
    π_old's point, not at π_θ's; the surrogate's derivative with respect to log π (impl's
    surrogate_objective_grad, r R) reweights each sample by r = π_θ/π_old and gives ∇J(θ) exactly.
    The true gradient Σ_a π_θ(a) R(a) (e_a - π_θ) is computed here.
    """
    old, new, ratios, rewards = _exact_policies(ctx.params)
    # Arms drawn by π_old, each with its exact reward, evaluated for π_θ: one token of one state.
    reach_bandit(len(old), data="old", advantages="exact", tokens=1)
    true_gradient = _policy_gradient(new, list(rewards))
    scores = softmax_scores(new)
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


@verifier(kind="counterexample", uses=("surrogate_objective_grad", "ppo_clip_objective_grad"), params=TwoPolicies)
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
    # Arms drawn by π_old, each with its exact reward minus a constant: one token of one state.
    reach_bandit(len(old), data="old", advantages="exact", tokens=1)
    true_gradient = _policy_gradient(new, list(advantages))
    scores = softmax_scores(new)
    weights_old = np.array(old, dtype=object)
    unclipped = weights_old * ctx.impl.surrogate_objective_grad(ratios, advantages) @ scores
    clipped = weights_old * ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon) @ scores
    ones = np.array([Fraction(1)] * len(old), dtype=object)
    at_old = weights_old * ctx.impl.ppo_clip_objective_grad(ones, advantages, epsilon) @ softmax_scores(old)
    return {"ratios": list(ratios), "true_gradient": list(true_gradient),
            "unclipped_minus_true": list(unclipped - true_gradient), "clipped_gradient": list(clipped),
            "clipped_minus_true": list(clipped - true_gradient),
            "clipped_minus_true_at_old": list(at_old - _policy_gradient(old, list(advantages)))}


class TwoTokenAnswer(NoParams):
    """An answer of two tokens: the first drawn in the prompt's state, the second in the state the first leads to
    (the prefix: one state per first token), under an old and a new tabular softmax policy, with a final reward."""

    first_old: PositiveDistribution = Field(min_length=2, description="π_old(a | prompt)")
    first_new: PositiveDistribution = Field(min_length=2, description="π_θ(a | prompt)")
    second_old: list[PositiveDistribution] = Field(min_length=2,
                                                   description="π_old(b | prompt, a), one row per first token a")
    second_new: list[PositiveDistribution] = Field(min_length=2,
                                                   description="π_θ(b | prompt, a), one row per first token a")
    rewards: list[list[float]] = Field(min_length=2, description="R(a, b), the answer's one final reward")
    epsilon: float = Field(gt=0, lt=1, description="the clipping parameter ε")

    @model_validator(mode="after")
    def _consistent(self) -> TwoTokenAnswer:
        first, rows = len(self.first_old), [self.second_old, self.second_new, self.rewards]
        if len(self.first_new) != first or any(len(table) != first for table in rows):
            raise ValueError("first_old, first_new and the rows of second_old, second_new and rewards need one "
                             "entry per first token")
        width = len(self.second_old[0])
        if width < 2 or any(len(row) != width for table in rows for row in table):
            raise ValueError("every row of second_old, second_new and rewards needs the same two or more entries")
        return self


def per_token_weights(ctx: Context, ratios: np.ndarray, advantages: np.ndarray) -> np.ndarray:
    """The weight the per-token surrogate Σ_t r_t Â_t puts on each token's ∇ log π_θ: impl's r_t Â_t."""
    return ctx.impl.surrogate_objective_grad(ratios, advantages)


def product_of_ratios_weights(ratios: np.ndarray, advantages: np.ndarray) -> np.ndarray:
    """The weight (Π_t r_t)(Σ_t Â_t) that the honest transfer, E_old[(Π_t r_t) Σ_t Â_t], puts on each token's
    ∇ log π_θ: the product depends on every token's probability, the advantages do not."""
    weight = math.prod(ratios) * sum(advantages)
    return np.array([weight] * len(ratios), dtype=object)


@verifier(kind="counterexample", params=TwoTokenAnswer, uses=("surrogate_objective_grad", "ppo_clip_objective_grad"))
def per_token_surrogate_bias_exact(ctx: Context) -> dict[str, object]:
    """Expected gradients with respect to every state's logits at π_θ, from answers drawn by π_old, exactly.

    The policy is a tabular softmax over the prompt's state and the state after each first token, so
    ∇ log π_θ(a|s) is e_a - π_θ(·|s) in s's block. ∇J = Σ_τ p_θ(τ) R(τ) Σ_t ∇ log π_θ(a_t|s_t) is
    computed here; Â_t are π_old's exact advantages (γ = 1, one final reward): Â_1 = V_old(s_a) -
    V_old(prompt), Â_2 = R(a, b) - V_old(s_a). The per-token surrogate E_old[Σ_t r_t Â_t] weights each
    token's score by impl's r_t Â_t, and the clipped surrogate by impl's clipped derivative; the
    product of ratios, E_old[(Π_t r_t) Σ_t Â_t] = J(θ) - J(θ_old), weights both by (Π_t r_t) Σ_t Â_t
    (:func:`product_of_ratios_weights`). ``no_clip_active``: every ratio lies inside [1 - ε, 1 + ε]
    (decided here). At θ = θ_old every ratio is 1 and the per-token gradient is ∇J(θ_old).
    """
    params = ctx.params
    first = {"old": [as_written(p) for p in params.first_old], "new": [as_written(p) for p in params.first_new]}
    second = {"old": [[as_written(p) for p in row] for row in params.second_old],
              "new": [[as_written(p) for p in row] for row in params.second_new]}
    rewards = [[as_written(r) for r in row] for row in params.rewards]
    epsilon = as_written(params.epsilon)
    n_first, n_second = len(rewards), len(rewards[0])
    blocks = [0] + [n_first + a * n_second for a in range(n_first)]
    size = n_first + n_first * n_second

    def score(block: int, action: int, pi: list[Fraction]) -> np.ndarray:
        vector = np.array([Fraction(0)] * size, dtype=object)
        vector[blocks[block]:blocks[block] + len(pi)] = softmax_score(pi, action)
        return vector

    values_after = [sum(p * r for p, r in zip(second["old"][a], rewards[a], strict=True)) for a in range(n_first)]
    value_prompt = sum(p * v for p, v in zip(first["old"], values_after, strict=True))
    zero = np.array([Fraction(0)] * size, dtype=object)
    true, per_token, clipped, product, at_old, true_at_old = (zero.copy() for _ in range(6))
    ratios_seen = []
    for a, b in itertools.product(range(n_first), range(n_second)):
        path = (a, b)
        # Two tokens, each in a state of its own (the prompt, then the prefix), read from π_old's answer.
        reach(states=len(blocks), actions=[n_first, n_second], horizon=len(path), tokens=len(path),
              transitions="deterministic", data="old", advantages="exact")
        p_old = first["old"][a] * second["old"][a][b]
        p_new = first["new"][a] * second["new"][a][b]
        scores = [score(0, a, first["new"]), score(1 + a, b, second["new"][a])]
        old_scores = [score(0, a, first["old"]), score(1 + a, b, second["old"][a])]
        ratios = np.array([first["new"][a] / first["old"][a], second["new"][a][b] / second["old"][a][b]],
                          dtype=object)
        advantages = np.array([values_after[a] - value_prompt, rewards[a][b] - values_after[a]], dtype=object)
        ratios_seen.extend(ratios)
        true = true + p_new * rewards[a][b] * sum(scores)
        true_at_old = true_at_old + p_old * rewards[a][b] * sum(old_scores)
        for total, weights, basis in (
                (per_token, per_token_weights(ctx, ratios, advantages), scores),
                (clipped, ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon), scores),
                (product, product_of_ratios_weights(ratios, advantages), scores),
                (at_old, per_token_weights(ctx, np.array([Fraction(1)] * len(path), dtype=object), advantages),
                 old_scores)):
            total += p_old * sum(w * g for w, g in zip(weights, basis, strict=True))
    return {"ratio_range": [min(ratios_seen), max(ratios_seen)],
            "no_clip_active": all(1 - epsilon <= r <= 1 + epsilon for r in ratios_seen),
            "true_gradient": list(true), "per_token_gradient": list(per_token),
            "per_token_minus_true": list(per_token - true), "clipped_minus_per_token": list(clipped - per_token),
            "product_of_ratios_minus_true": list(product - true),
            "per_token_minus_true_at_old": list(at_old - true_at_old)}


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

"""Sequence-level REINFORCE, RLOO and the token-level PPO objective (module lesson 4.5).

Per-token arrays follow the causal layout: the logits at position k score the token at k + 1.
The verifiers compute their references independently (their own log-softmax, their own answer
spans) and call the implementation only through ``ctx.impl``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field
from scipy.special import log_softmax, softmax

from harness import Context, check_property, verifier
from verifiers._numeric import central_difference, rounding_bound


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- 4.5.1: mask and causal shift


class MaskedBatch(_Params):
    """A hand-made batch: each row is a prompt, the generated tokens, then padding."""

    vocab_size: int = Field(ge=3)
    eos_id: int = Field(ge=0)
    pad_id: int = Field(ge=0)
    prompts: list[list[int]] = Field(min_length=1, description="prompt tokens per row")
    generated: list[list[int]] = Field(min_length=1, description="tokens written after the prompt, per row")
    label_shift: int = Field(1, description="logits at position k score token k + label_shift; 1 is causal")


def _build_rows(params: MaskedBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    width = max(len(p) + len(g) for p, g in zip(params.prompts, params.generated, strict=True)) + 1
    tokens = np.full((len(params.prompts), width), params.pad_id, dtype=int)
    for row, (prompt, generated) in enumerate(zip(params.prompts, params.generated, strict=True)):
        tokens[row, :len(prompt) + len(generated)] = [*prompt, *generated]
    return (tokens, np.array([len(p) for p in params.prompts]), np.array([len(g) for g in params.generated]))


def _answer_spans(params: MaskedBatch) -> list[range]:
    """Token positions of each answer, up to and including the first generated EOS (the verifier's own rule)."""
    spans = []
    for prompt, generated in zip(params.prompts, params.generated, strict=True):
        end = generated.index(params.eos_id) + 1 if params.eos_id in generated else len(generated)
        spans.append(range(len(prompt), len(prompt) + end))
    return spans


@verifier("sequence.masked_gradient_structure", uses=("token_log_probs", "response_mask", "sequence_log_prob"),
          params=MaskedBatch)
def masked_gradient_structure(ctx: Context) -> dict[str, object]:
    """Where the gradient of Σ_b A_b log π(y_b|x_b) lands among the logits, by central differences.

    The loss runs through impl's token log-probabilities, response mask and masked sum; with
    ``label_shift`` ≠ 1 the logits are moved so that position k scores token k + label_shift,
    the off-by-one variants. The logits that (causally) score a prompt token, a padding token or a
    token after EOS must get exactly zero gradient; those scoring the first answer token (the
    last prompt position) and a generated EOS must get a non-zero one. ``log_prob_error`` compares
    the sequence log-probability with the verifier's own chain-rule sum.
    """
    params = ctx.params
    tokens, prompt_length, generated_length = _build_rows(params)
    batch, width = tokens.shape
    logits = ctx.rng.normal(size=(batch, width, params.vocab_size))
    advantages = ctx.rng.choice([-1.0, 1.0], size=batch) * ctx.rng.uniform(0.5, 2.0, size=batch)
    mask = ctx.impl.response_mask(tokens, prompt_length, generated_length, params.eos_id)

    def sequence_log_probs(z: np.ndarray) -> np.ndarray:
        scored = np.roll(z, params.label_shift - 1, axis=1)
        return ctx.impl.sequence_log_prob(ctx.impl.token_log_probs(scored, tokens), mask)

    def loss(z: np.ndarray) -> float:
        return float(advantages @ sequence_log_probs(z))

    gradient = central_difference(loss, logits, 1e-5)
    norms = np.abs(gradient).max(axis=-1)

    spans = _answer_spans(params)
    outside, first_answer, eos = [], [], []
    for row, span in enumerate(spans):
        scoring = {position - 1 for position in span}
        outside += [norms[row, k] for k in range(width) if k not in scoring]
        first_answer.append(norms[row, span.start - 1])
        if params.generated[row][len(span) - 1] == params.eos_id:
            eos.append(norms[row, span.stop - 2])
    prompt_scoring = [norms[row, k] for row, span in enumerate(spans) for k in range(span.start - 1)]
    reference = np.array([sum(log_softmax(logits[row, k - 1])[tokens[row, k]] for k in span)
                          for row, span in enumerate(spans)])
    return {
        "prompt_logit_gradient": max(prompt_scoring),
        "outside_answer_logit_gradient": max(outside),
        "first_answer_token_gradient": min(first_answer),
        "eos_gradient": min(eos),
        "log_prob_error": float(np.abs(sequence_log_probs(logits) - reference).max()),
        "log_prob_matches_chain_rule": bool(np.all(np.abs(sequence_log_probs(logits) - reference)
                                                   <= rounding_bound(4 * width * params.vocab_size,
                                                                     np.abs(reference).max()))),
    }


# --------------------------------------------------------------------------- 4.5.1: what the objective means


class RatioWitness(_Params):
    """One answer whose token ratios are given, with one advantage."""

    ratios: list[float] = Field(min_length=2)
    advantage: float
    epsilon: float = Field(gt=0, lt=1)


@verifier("sequence.token_clip_vs_product_clip", uses=("token_clipped_surrogate", "sequence_clipped_surrogate"),
          params=RatioWitness)
def token_clip_vs_product_clip(ctx: Context) -> dict[str, object]:
    """Clip each token ratio (mean over the answer's tokens) versus clip the product of the ratios."""
    params = ctx.params
    log_pi_old = np.zeros((1, len(params.ratios)))
    log_pi = np.log(np.array(params.ratios))[None, :]
    mask = np.ones_like(log_pi)
    token_objective, token_gradient = ctx.impl.token_clipped_surrogate(
        log_pi, log_pi_old, np.array([[params.advantage]]), mask, params.epsilon, "token_mean")
    sequence_objective, sequence_gradient = ctx.impl.sequence_clipped_surrogate(
        log_pi, log_pi_old, np.array([params.advantage]), mask, params.epsilon)
    return {
        "product_of_ratios": float(np.prod(params.ratios)),
        "token_clip_objective": token_objective,
        "product_clip_objective": sequence_objective,
        "token_clip_gradient_norm": float(np.abs(token_gradient).sum()),
        "product_clip_gradient_norm": float(np.abs(sequence_gradient).sum()),
    }


class LengthWitness(_Params):
    """Answers of different lengths with one advantage each, every token ratio equal to 1."""

    lengths: list[int] = Field(min_length=2)
    advantages: list[float] = Field(min_length=2)
    epsilon: float = Field(0.2, gt=0, lt=1)


@verifier("sequence.aggregation_units", uses=("token_clipped_surrogate",), params=LengthWitness)
def aggregation_units(ctx: Context) -> dict[str, object]:
    """The three averaging units on one batch: objectives and the gradient weight of each answer's token.

    ``<unit>_token_weight`` lists, per answer, the gradient of the objective with respect to the
    log-probability of one of its tokens (all tokens of an answer share it when ratios are 1).
    """
    params = ctx.params
    width = max(params.lengths)
    mask = (np.arange(width)[None, :] < np.array(params.lengths)[:, None]).astype(float)
    log_pi = ctx.rng.normal(size=mask.shape)
    observed: dict[str, object] = {}
    for unit in ("token_mean", "answer_mean", "answer_sum"):
        objective, gradient = ctx.impl.token_clipped_surrogate(
            log_pi, log_pi, np.array(params.advantages)[:, None], mask, params.epsilon, unit)
        observed[f"{unit}_objective"] = objective
        observed[f"{unit}_token_weight"] = [float(gradient[b, 0]) for b in range(len(params.lengths))]
    return observed


class KlWitness(_Params):
    """A one-token answer from a softmax policy, a reference policy, rewards and the KL coefficient."""

    logits: list[float] = Field(min_length=2)
    ref_logits: list[float] = Field(min_length=2)
    rewards: list[float] = Field(min_length=2)
    beta: float = Field(gt=0)


@verifier("sequence.kl_double_count", uses=("kl_penalized_rewards", "kl_penalty_loss"), params=KlWitness)
def kl_double_count(ctx: Context) -> dict[str, object]:
    """Exact expected gradients of J(z) = E_π[R] - β KL(π || π_ref) for the three KL placements.

    Every answer (one token) is enumerated, so expectations are exact sums. In the reward: the
    stop-gradient rewards R - β log(π/π_ref) from impl, through the score e_a - π. In the loss: the
    rewards alone through the score, minus the gradient of impl's penalty. Both: the penalised
    rewards and the penalty's gradient. The true gradient is the verifier's own formula
    π ⊙ (R - β log(π/π_ref) - J). ``penalty_multiple_when_both`` is the projection of the
    penalty's contribution in the "both" gradient on the true penalty gradient.
    """
    params = ctx.params
    z, z_ref, rewards = (np.array(v, dtype=float) for v in (params.logits, params.ref_logits, params.rewards))
    pi, log_pi, log_ref = softmax(z), log_softmax(z), log_softmax(z_ref)
    scores = np.eye(len(z)) - pi
    mask = np.ones((len(z), 1))
    penalized = ctx.impl.kl_penalized_rewards(rewards, log_pi[:, None], log_ref[:, None], mask, params.beta)
    _, penalty_gradient = ctx.impl.kl_penalty_loss(z[None, None, :], z_ref[None, None, :], np.ones((1, 1)),
                                                   params.beta, "token_mean")
    penalty_gradient = penalty_gradient[0, 0]
    reward_only = (pi * rewards) @ scores
    shaped = rewards - params.beta * (log_pi - log_ref)
    true = pi * (shaped - pi @ shaped)
    in_reward = (pi * penalized) @ scores
    in_loss = reward_only - penalty_gradient
    both = in_reward - penalty_gradient
    bound = rounding_bound(8 * len(z), np.abs(shaped).max())
    penalty = true - reward_only
    return {
        "reward_placement_matches": bool(np.abs(in_reward - true).max() <= bound),
        "loss_placement_matches": bool(np.abs(in_loss - true).max() <= bound),
        "both_placements_match": bool(np.abs(both - true).max() <= bound),
        "penalty_multiple_when_both": float((both - reward_only) @ penalty / (penalty @ penalty)),
    }


# --------------------------------------------------------------------------- 4.5.2: RLOO on a sequence policy


class TabularSequencePolicy(_Params):
    """An autoregressive policy over {EOS, a, b}: one categorical distribution per prefix.

    ``prefix_probabilities`` maps a prefix ('' or a string over 'ab' shorter than max_tokens)
    to the probabilities of [EOS, a, b] as exact fractions; ``rewards`` maps every answer to its
    reward, an answer being a string over 'ab' followed by '$' (EOS) or cut at max_tokens.
    """

    prefix_probabilities: dict[str, list[str]]
    rewards: dict[str, str]
    max_tokens: int = Field(ge=1, le=3)
    group_size: int = Field(ge=2, le=4)


def _tabular_answers(params: TabularSequencePolicy) -> tuple[list[str], list[Fraction], np.ndarray]:
    """Every answer, its exact probability and its exact score with respect to all prefix logits."""
    prefixes = sorted(params.prefix_probabilities, key=lambda p: (len(p), p))
    distributions = {p: [Fraction(q) for q in params.prefix_probabilities[p]] for p in prefixes}
    alphabet = "$ab"
    answers = [body + "$" for n in range(params.max_tokens) for body in map("".join, itertools.product("ab", repeat=n))]
    answers += list(map("".join, itertools.product("ab", repeat=params.max_tokens)))
    probabilities, scores = [], []
    for answer in answers:
        probability, score = Fraction(1), np.zeros((len(prefixes), 3), dtype=object) + Fraction(0)
        for t, symbol in enumerate(answer):
            distribution = distributions[answer[:t]]
            choice = alphabet.index(symbol)
            probability *= distribution[choice]
            block = prefixes.index(answer[:t])
            score[block] += np.array([Fraction(int(k == choice)) - distribution[k] for k in range(3)], dtype=object)
        probabilities.append(probability)
        scores.append(score.reshape(-1))
    return answers, probabilities, np.array(scores, dtype=object)


_exact_rewards = st.fractions(min_value=-10, max_value=10, max_denominator=64)
_exact_batches = st.integers(min_value=2, max_value=5).flatmap(lambda size: st.tuples(
    st.just(size), st.lists(st.lists(_exact_rewards, min_size=size, max_size=size), min_size=1, max_size=3)
    .map(lambda groups: [r for group in groups for r in group])))


@verifier("sequence.rloo_definition_property", uses=("rloo_advantages",))
def rloo_definition_property(ctx: Context) -> dict[str, object]:
    """On random batches of exact rewards in contiguous groups of G, impl's RLOO advantage of answer i
    is R_i minus the mean of the other G - 1 rewards of its own group."""

    def definition_holds(batch: tuple[int, list[Fraction]]) -> None:
        size, rewards = batch
        observed = list(ctx.impl.rloo_advantages(np.array(rewards, dtype=object), size))
        expected = []
        for start in range(0, len(rewards), size):
            group = rewards[start:start + size]
            expected += [r - (sum(group) - r) / (size - 1) for r in group]
        assert observed == expected, (rewards, observed, expected)

    return check_property(ctx, definition_holds, _exact_batches)


@verifier("sequence.rloo_unbiased_exact",
          uses=("rloo_advantages", "group_mean_advantages", "score_function_gradient"),
          params=TabularSequencePolicy)
def rloo_unbiased_exact(ctx: Context) -> dict[str, object]:
    """Exact expectations over every group of G answers of the RLOO and group-mean estimators.

    The estimator of one group is (1/G) Σ_i A_i ∇ log π(y_i|x), with the sequence score the sum of
    the per-step scores e_{y_t} - π(·|y_<t); everything is in rational arithmetic. The true
    gradient is Σ_y π(y) R(y) ∇ log π(y|x), from the enumeration of single answers.
    """
    params = ctx.params
    answers, probabilities, scores = _tabular_answers(params)
    rewards = [Fraction(params.rewards[a]) for a in answers]
    gradient = sum((p * r * s for p, r, s in zip(probabilities, rewards, scores, strict=True)),
                   np.zeros(scores.shape[1], dtype=object) + Fraction(0))
    groups = list(itertools.product(range(len(answers)), repeat=params.group_size))
    group_rewards = np.array([rewards[i] for group in groups for i in group], dtype=object)
    group_scores = np.array([[scores[i] for i in group] for group in groups], dtype=object)
    weights = np.array([np.prod([probabilities[i] for i in group]) for group in groups], dtype=object)
    expectations = {}
    for name, function in (("rloo", ctx.impl.rloo_advantages), ("group_mean", ctx.impl.group_mean_advantages)):
        advantages = function(group_rewards, params.group_size).reshape(len(groups), params.group_size)
        estimates = ctx.impl.score_function_gradient(advantages, group_scores)
        expectations[name] = (weights[:, None] * estimates).sum(axis=0)
    ratio = (expectations["group_mean"] @ gradient) / (gradient @ gradient)
    return {
        "answers": len(answers),
        "total_probability": sum(probabilities),
        "gradient_norm_squared": gradient @ gradient,
        "rloo_bias": max(abs(v) for v in expectations["rloo"] - gradient),
        "group_mean_ratio": ratio,
        "group_mean_residual": max(abs(v) for v in expectations["group_mean"] - ratio * gradient),
    }


# --------------------------------------------------------------------------- 4.5.3: GRPO and the LOO advantage


@verifier("sequence.grpo_loo_relation_symbolic")
def grpo_loo_relation_symbolic(ctx: Context) -> dict[str, object]:
    """(R_i - mean R)/σ - (G-1)/(G σ) · A_i^LOO for symbolic G, R_i, T = Σ_{j≠i} R_j and σ > 0."""
    group_size, r_i, others = sp.symbols("G R_i T")
    sigma = sp.symbols("sigma", positive=True)
    normalised = (r_i - (r_i + others) / group_size) / sigma
    leave_one_out = r_i - others / (group_size - 1)
    return {"residual": sp.simplify(normalised - (group_size - 1) / (group_size * sigma) * leave_one_out)}


class GrpoGuard(_Params):
    epsilon: float = Field(gt=0)


_float_rewards = st.floats(min_value=-10, max_value=10, allow_nan=False)
_batches = st.integers(min_value=2, max_value=8).flatmap(
    lambda size: st.tuples(st.just(size), st.lists(_float_rewards, min_size=size, max_size=4 * size)
                           .map(lambda r, size=size: r[:len(r) - len(r) % size])))


@verifier("sequence.grpo_loo_relation_property", uses=("grpo_advantages", "rloo_advantages"), params=GrpoGuard)
def grpo_loo_relation_property(ctx: Context) -> dict[str, object]:
    """On random batches of contiguous groups, impl's GRPO advantage equals its RLOO advantage times
    (G-1)/(G (σ + ε)), σ the group's population standard deviation computed here."""
    epsilon = ctx.params.epsilon

    def relation_holds(batch: tuple[int, list[float]]) -> None:
        size, rewards = batch
        rewards = np.array(rewards, dtype=float)
        grpo = ctx.impl.grpo_advantages(rewards, size, epsilon)
        loo = ctx.impl.rloo_advantages(rewards, size)
        groups = rewards.reshape(-1, size)
        sigma = np.sqrt(((groups - groups.mean(axis=1, keepdims=True)) ** 2).mean(axis=1))
        expected = loo * np.repeat((size - 1) / (size * (sigma + epsilon)), size)
        bound = rounding_bound(8 * size, np.abs(groups).max() / epsilon)
        assert np.all(np.abs(grpo - expected) <= bound), (grpo, expected)

    return check_property(ctx, relation_holds, _batches)


class TwoGroups(_Params):
    """Rewards of a batch in contiguous groups, and the GRPO guard; the answers are random token rows."""

    rewards: list[float] = Field(min_length=4)
    group_size: int = Field(ge=2)
    epsilon: float = Field(gt=0)
    vocab_size: int = Field(ge=2)
    answer_length: int = Field(ge=1)


@verifier("sequence.grpo_vs_rloo_gradient",
          uses=("grpo_advantages", "rloo_advantages", "token_log_probs", "token_log_probs_vjp",
                "token_clipped_surrogate"),
          params=TwoGroups)
def grpo_vs_rloo_gradient(ctx: Context) -> dict[str, object]:
    """Batch gradients (w.r.t. the logits, at θ = θ_old, ``answer_sum`` unit) with RLOO and GRPO advantages.

    Within one group GRPO's advantages are a positive multiple of RLOO's, so the two gradients are
    parallel (cosine 1); over groups with different reward spreads the per-group factors
    (G-1)/(G σ_g) differ and the batch gradients point in different directions.
    """
    params = ctx.params
    rewards = np.array(params.rewards, dtype=float)
    answers = len(rewards)
    width = 2 + params.answer_length
    tokens = ctx.rng.integers(params.vocab_size, size=(answers, width))
    logits = ctx.rng.normal(size=(answers, width, params.vocab_size))
    mask = np.zeros((answers, width - 1))
    mask[:, 1:] = 1.0
    log_pi = ctx.impl.token_log_probs(logits, tokens)

    def gradient(advantages: np.ndarray, rows: slice) -> np.ndarray:
        _, weights = ctx.impl.token_clipped_surrogate(log_pi[rows], log_pi[rows], advantages[rows, None],
                                                      mask[rows], 0.2, "answer_sum")
        return ctx.impl.token_log_probs_vjp(logits[rows], tokens[rows], weights).reshape(-1)

    def cosine(rows: slice) -> float:
        grpo = gradient(ctx.impl.grpo_advantages(rewards, params.group_size, params.epsilon), rows)
        rloo = gradient(ctx.impl.rloo_advantages(rewards, params.group_size), rows)
        return float(grpo @ rloo / np.sqrt((grpo @ grpo) * (rloo @ rloo)))

    return {"first_group_cosine": cosine(slice(0, params.group_size)), "batch_cosine": cosine(slice(0, answers))}


# --------------------------------------------------------------------------- 4.5.4: one weight for every token


_layouts = st.integers(min_value=1, max_value=4).flatmap(lambda batch: st.tuples(
    st.lists(st.integers(1, 4), min_size=batch, max_size=batch),
    st.lists(st.integers(1, 5), min_size=batch, max_size=batch),
    st.lists(st.floats(-3, 3, allow_nan=False).filter(lambda a: abs(a) > 1e-3), min_size=batch, max_size=batch),
    st.integers(0, 2**32 - 1)))


@verifier("sequence.broadcast_advantage_property",
          uses=("token_log_probs", "token_log_probs_vjp", "response_mask", "token_clipped_surrogate"))
def broadcast_advantage_property(ctx: Context) -> dict[str, object]:
    """At θ = θ_old with the ``answer_sum`` unit, the token surrogate's gradient with respect to the
    logits equals (1/B) Σ_b A_b Σ_t ∇ log π(y_bt | x_b, y_b,<t), the verifier's own e_y - softmax sum
    over each answer's span; every answer token's weight has the sign of its answer's advantage."""
    vocab, eos = 5, 0

    def identity_holds(layout: tuple[list[int], list[int], list[float], int]) -> None:
        prompt_lengths, generated_lengths, advantages, seed = layout
        rng = np.random.default_rng(seed)
        batch = len(prompt_lengths)
        width = max(p + g for p, g in zip(prompt_lengths, generated_lengths, strict=True)) + 1
        tokens = rng.integers(vocab, size=(batch, width))
        logits = rng.normal(size=(batch, width, vocab))
        mask = ctx.impl.response_mask(tokens, prompt_lengths, generated_lengths, eos)
        log_pi = ctx.impl.token_log_probs(logits, tokens)
        _, weights = ctx.impl.token_clipped_surrogate(log_pi, log_pi, np.array(advantages)[:, None], mask, 0.2,
                                                      "answer_sum")
        d_logits = ctx.impl.token_log_probs_vjp(logits, tokens, weights)
        reference = np.zeros_like(logits)
        for b in range(batch):
            for position in range(prompt_lengths[b], prompt_lengths[b] + generated_lengths[b]):
                score = -softmax(logits[b, position - 1])
                score[tokens[b, position]] += 1
                reference[b, position - 1] = advantages[b] / batch * score
                if tokens[b, position] == eos:
                    break
            answer = np.flatnonzero(reference[b].any(axis=-1))
            assert np.all(np.sign(weights[b, answer]) == np.sign(advantages[b])), (weights[b], advantages[b])
        bound = rounding_bound(4 * vocab, max(np.abs(advantages)))
        assert np.all(np.abs(d_logits - reference) <= bound), np.abs(d_logits - reference).max()

    return check_property(ctx, identity_holds, _layouts)


# --------------------------------------------------------------------------- 4.5.5: clipping is no trust region


class ClipEpochs(_Params):
    """A softmax policy, a batch of sampled actions with advantages, and plain gradient-ascent epochs."""

    logits: list[float] = Field(min_length=2)
    actions: list[int] = Field(min_length=1)
    advantages: list[float] = Field(min_length=1)
    epsilon: float = Field(gt=0, lt=1)
    learning_rate: float = Field(gt=0)
    epochs: int = Field(ge=1)


@verifier("sequence.clipping_not_trust_region", uses=("token_clipped_surrogate",), params=ClipEpochs)
def clipping_not_trust_region(ctx: Context) -> dict[str, object]:
    """Several epochs of gradient ascent on the clipped surrogate over one frozen batch.

    Clipping removes the gradient of a token whose ratio has left [1-ε, 1+ε] in the advantage's
    direction, but other tokens that share the parameters keep moving it. Reports the largest
    ratio of the batch after the epochs and that token's own gradient in the last epoch.
    """
    params = ctx.params
    z = np.array(params.logits, dtype=float)
    actions = np.array(params.actions)
    advantages = np.array(params.advantages, dtype=float)[:, None]
    mask = np.ones((len(actions), 1))
    log_pi_old = log_softmax(z)[actions][:, None]
    for _ in range(params.epochs):
        log_pi = log_softmax(z)[actions][:, None]
        _, weights = ctx.impl.token_clipped_surrogate(log_pi, log_pi_old, advantages, mask, params.epsilon,
                                                      "token_mean")
        z = z + params.learning_rate * weights[:, 0] @ (np.eye(len(z))[actions] - softmax(z))
    ratios = np.exp(log_softmax(z)[actions] - log_pi_old[:, 0])
    largest = int(np.argmax(ratios))
    return {"largest_ratio": float(ratios[largest]), "largest_ratio_last_gradient": float(weights[largest, 0]),
            "upper_clip": 1 + params.epsilon}

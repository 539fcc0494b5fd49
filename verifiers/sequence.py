"""Sequence-level log-probabilities, the token-level PPO objective, and a cut at max_tokens (module lesson
4.5, step 4.5.1).

RLOO, GRPO and the rest of the lesson are in ``verifiers/sequence_groups.py``.

Per-token arrays follow the causal layout: the logits at position k score the token at k + 1.
The verifiers compute their references independently (their own log-softmax, their own answer
spans) and call the implementation only through ``ctx.impl``.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
from pydantic import Field, model_validator
from scipy.special import log_softmax, softmax

from claims_harness import Context, NoParams, check_property, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import softmax_score
from verifiers._numeric import assert_close, central_difference, largest, largest_magnitude, rounding_bound, smallest
from verifiers._params import PositiveFractions

# --------------------------------------------------------------------------- 4.5.1: mask and causal shift


class MaskedBatch(NoParams):
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


@verifier(kind=("exact", "counterexample"),
          uses=("token_log_probs", "response_mask", "sequence_log_prob"),
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
    # One answer per row, each after its own prompt; the advantages are random numbers standing for Â.
    reach(tokens=[len(span) for span in spans], horizon=[len(span) for span in spans], actions=params.vocab_size,
          states=len({tuple(prompt) for prompt in params.prompts}), advantages="estimated")
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
        "prompt_logit_gradient": largest(prompt_scoring),
        "outside_answer_logit_gradient": largest(outside),
        "first_answer_token_gradient": smallest(first_answer),
        "eos_gradient": smallest(eos),
        "log_prob_error": float(np.abs(sequence_log_probs(logits) - reference).max()),
        "log_prob_matches_chain_rule": bool(np.all(np.abs(sequence_log_probs(logits) - reference)
                                                   <= rounding_bound(4 * width * params.vocab_size,
                                                                     np.abs(reference).max()))),
    }


_EOS = 0
# Rows of a batch: prompt lengths, generated lengths, padding, a seed, and the vocabulary size V (2 to 6 tokens, the
# padding id V - 1), so that the policy chooses among two tokens in some batches and among more in others.
_layout_rows = st.integers(min_value=1, max_value=4).flatmap(lambda batch: st.tuples(
    st.lists(st.integers(1, 4), min_size=batch, max_size=batch),
    st.lists(st.integers(1, 5), min_size=batch, max_size=batch),
    st.integers(0, 2),
    st.integers(0, 2**32 - 1),
    st.integers(2, 6)))


def _random_rows(prompt_lengths: list[int], generated_lengths: list[int], padding: int, seed: int, vocabulary: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Token rows (prompt, generated tokens, padding) over ``vocabulary`` tokens, and logits for them.

    Generated tokens may contain EOS anywhere, several times (a batched sampler may keep writing
    after it); prompts may contain the EOS id too (chat prompts carry end-of-turn tokens), which
    is not a generated EOS. Prompt and answer tokens are drawn from the ids below the padding id
    V - 1; with two tokens, from both (the padding id is then also the one token besides EOS, as
    tokenizers that pad with a real token have it).
    """
    rng = np.random.default_rng(seed)
    pad = vocabulary - 1
    written = max(pad, 2)
    width = max(p + n for p, n in zip(prompt_lengths, generated_lengths, strict=True)) + padding
    tokens = np.full((len(prompt_lengths), width), pad, dtype=int)
    for row, (prompt, generated) in enumerate(zip(prompt_lengths, generated_lengths, strict=True)):
        tokens[row, :prompt] = rng.integers(0, written, size=prompt)
        tokens[row, prompt:prompt + generated] = rng.integers(0, written, size=generated)
    return tokens, rng.normal(scale=2.0, size=(*tokens.shape, vocabulary))


def _distinct_prompts(tokens: np.ndarray, prompt_lengths: list[int]) -> int:
    """How many different prompts the rows answer: the states of a batch of one-prompt answers."""
    return len({tuple(tokens[row, :prompt]) for row, prompt in enumerate(prompt_lengths)})


def _own_mask(tokens: np.ndarray, prompt_lengths: list[int], generated_lengths: list[int]) -> np.ndarray:
    """Entry k (token k + 1) is 1 for generated tokens up to and including the first generated EOS."""
    mask = np.zeros((tokens.shape[0], tokens.shape[1] - 1))
    for row, (prompt, generated) in enumerate(zip(prompt_lengths, generated_lengths, strict=True)):
        for position in range(prompt, prompt + generated):
            mask[row, position - 1] = 1.0
            if tokens[row, position] == _EOS:
                break
    return mask


@verifier(kind="property", uses=("response_mask",))
@given(_layout_rows)
def response_mask_property(ctx: Context, layout: tuple[list[int], list[int], int, int, int]) -> None:
    """On random rows (prompt, generated tokens with EOS anywhere, padding), impl's response mask is
    exactly the verifier's own: 1 at entry k when token k + 1 was generated and no generated EOS
    came before it, the first generated EOS included; 0 for the prompt, padding and after EOS."""
    prompt_lengths, generated_lengths, padding, seed, vocabulary = layout
    tokens, _ = _random_rows(prompt_lengths, generated_lengths, padding, seed, vocabulary)
    observed = np.asarray(ctx.impl.response_mask(tokens, np.array(prompt_lengths), np.array(generated_lengths),
                                                 _EOS))
    expected = _own_mask(tokens, prompt_lengths, generated_lengths)
    answer_lengths = expected.sum(axis=1)  # each row's answer, up to its first generated EOS
    reach(tokens=answer_lengths, horizon=answer_lengths, states=_distinct_prompts(tokens, prompt_lengths))
    assert observed.shape == expected.shape and np.array_equal(observed, expected), (tokens, observed, expected)


@verifier(kind="property", uses=("token_log_probs", "sequence_log_prob"))
@given(_layout_rows)
def log_prob_chain_rule_property(ctx: Context, layout: tuple[list[int], list[int], int, int, int]) -> None:
    """On random rows and logits, impl's sequence log-probability (its causal token log-probabilities,
    summed under the verifier's own mask) equals Σ_t log π(y_t | x, y_<t) computed here from the
    logits of the position before each answer token, and its exponential equals the product of the
    verifier's own token probabilities: the factorisation over the answer's tokens. Vocabularies of
    2 to 6 tokens, answers of one to five tokens."""
    prompt_lengths, generated_lengths, padding, seed, vocabulary = layout
    tokens, logits = _random_rows(prompt_lengths, generated_lengths, padding, seed, vocabulary)
    mask = _own_mask(tokens, prompt_lengths, generated_lengths)
    answer_lengths = mask.sum(axis=1)
    reach(tokens=answer_lengths, horizon=answer_lengths, actions=logits.shape[-1],
          states=_distinct_prompts(tokens, prompt_lengths))
    observed = np.asarray(ctx.impl.sequence_log_prob(ctx.impl.token_log_probs(logits, tokens), mask))
    for row in range(tokens.shape[0]):
        scored = [k + 1 for k in np.flatnonzero(mask[row])]
        log_terms = [log_softmax(logits[row, k - 1])[tokens[row, k]] for k in scored]
        product = np.prod([softmax(logits[row, k - 1])[tokens[row, k]] for k in scored])
        magnitude = float(np.abs(log_terms).sum())
        bound = rounding_bound(4 * len(scored) * vocabulary, magnitude)
        assert_close(observed[row], sum(log_terms), bound, f"impl's sequence log-probability of row {row}")
        assert_close(np.exp(observed[row]), product, product * (bound + rounding_bound(4 * len(scored), 1.0)),
                     f"the exponential of row {row}'s log-probability against Π_t π(y_t | x, y_<t)")


# --------------------------------------------------------------------------- 4.5.1: what the objective means


class RatioWitness(NoParams):
    """One answer whose token ratios are given, with one advantage."""

    ratios: list[float] = Field(min_length=2)
    advantage: float = Field(gt=0)
    epsilon: float = Field(gt=0, lt=1)


@verifier(kind="counterexample", uses=("token_clipped_surrogate", "sequence_clipped_surrogate"), params=RatioWitness)
def token_clip_vs_product_clip(ctx: Context) -> dict[str, object]:
    """Clip each token ratio (mean over the answer's tokens) versus clip the product of the ratios.

    ``product_of_ratios`` is the whole answer's ratio as impl's sequence surrogate sees it: its
    objective divided by A with a clip range wide enough (ε' = product, so 1 + ε' exceeds it) that
    nothing is clipped, for a positive advantage.
    """
    params = ctx.params
    log_pi_old = np.zeros((1, len(params.ratios)))
    log_pi = np.log(np.array(params.ratios))[None, :]
    mask = np.ones_like(log_pi)
    # One answer of as many tokens as ratios, each ratio against the policy that sampled it; A is a given number.
    reach(tokens=mask.shape[1], horizon=mask.shape[1], states=mask.shape[0], data="old", advantages="estimated")
    token_objective, token_gradient = ctx.impl.token_clipped_surrogate(
        log_pi, log_pi_old, np.array([[params.advantage]]), mask, params.epsilon, "token_mean")
    sequence_objective, sequence_gradient = ctx.impl.sequence_clipped_surrogate(
        log_pi, log_pi_old, np.array([params.advantage]), mask, params.epsilon)
    unclipped_range = float(np.prod(params.ratios))
    sequence_ratio, _ = ctx.impl.sequence_clipped_surrogate(log_pi, log_pi_old, np.array([params.advantage]), mask,
                                                            unclipped_range)
    return {
        "product_of_ratios": sequence_ratio / params.advantage,
        "token_clip_objective": token_objective,
        "product_clip_objective": sequence_objective,
        "token_clip_gradient_norm": float(np.abs(token_gradient).sum()),
        "product_clip_gradient_norm": float(np.abs(sequence_gradient).sum()),
    }


class LengthWitness(NoParams):
    """Answers of different lengths with one advantage each, every token ratio equal to 1."""

    lengths: list[int] = Field(min_length=2)
    advantages: list[float] = Field(min_length=2)
    epsilon: float = Field(0.2, gt=0, lt=1)


@verifier(kind="counterexample", uses=("token_clipped_surrogate",), params=LengthWitness)
def aggregation_units(ctx: Context) -> dict[str, object]:
    """The three averaging units on one batch: objectives and the gradient weight of each answer's token.

    ``<unit>_token_weight`` lists, per answer, the gradient of the objective with respect to the
    log-probability of one of its tokens (all tokens of an answer share it when ratios are 1).
    """
    params = ctx.params
    width = max(params.lengths)
    mask = (np.arange(width)[None, :] < np.array(params.lengths)[:, None]).astype(float)
    log_pi = ctx.rng.normal(size=mask.shape)
    # Every ratio 1: the objective at θ = θ_old, on the batch π_old sampled; the advantages are given numbers.
    reach(tokens=mask.sum(axis=1), horizon=mask.sum(axis=1), data="old", advantages="estimated")
    observed: dict[str, object] = {}
    for unit in ("token_mean", "answer_mean", "answer_sum"):
        objective, gradient = ctx.impl.token_clipped_surrogate(
            log_pi, log_pi, np.array(params.advantages)[:, None], mask, params.epsilon, unit)
        observed[f"{unit}_objective"] = objective
        observed[f"{unit}_token_weight"] = [float(gradient[b, 0]) for b in range(len(params.lengths))]
    return observed


_UNITS = ("token_mean", "answer_mean", "answer_sum")


class AggregationUnit(NoParams):
    """One named averaging unit of the token objective."""

    aggregation: str = Field(pattern="^(token_mean|answer_mean|answer_sum)$")


def _unit_weights(mask: np.ndarray, aggregation: str) -> np.ndarray:
    """The verifier's own token weights of each unit, from module step 4.5.1's definitions.

    Lengths are counted on the mask, never on the padded row: tokens of the whole batch
    (m / Σ m), the mean within each answer and then over answers (m / (B n_b)), or the sum within
    each answer and then the mean over answers (m / B).
    """
    answers, lengths = mask.shape[0], mask.sum(axis=1, keepdims=True)
    return {"token_mean": mask / mask.sum(), "answer_mean": mask / (answers * lengths),
            "answer_sum": mask / answers}[aggregation]


# Padded batches in the causal layout: row b's answer of n_b tokens sits at entries p_b - 1 .. p_b + n_b - 2
# (after a prompt of p_b tokens), and every row ends in at least one padding entry, so the padded
# length T is longer than every answer and a mean over T differs from the mean over the mask.
_padded_batches = st.integers(min_value=1, max_value=4).flatmap(lambda batch: st.tuples(
    st.lists(st.integers(1, 3), min_size=batch, max_size=batch),
    st.lists(st.integers(1, 5), min_size=batch, max_size=batch),
    st.integers(1, 3),
    st.floats(0.05, 0.5),
    st.integers(0, 2**32 - 1)))


def _padded_batch(prompt_lengths: list[int], answer_lengths: list[int], padding: int, seed: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mask, log π, log π_old and one advantage per answer for a padded batch.

    Log-ratios of answer tokens lie in [-0.5, 0.5] so that some ratios leave a clip range of
    0.05 to 0.5 and some do not; outside the mask they are arbitrary finite numbers, as the
    log-probabilities a model computes at prompt and padding positions are.
    """
    rng = np.random.default_rng(seed)
    width = max(p + n - 1 for p, n in zip(prompt_lengths, answer_lengths, strict=True)) + padding
    position = np.arange(width)[None, :]
    start = np.array(prompt_lengths)[:, None] - 1
    mask = ((position >= start) & (position < start + np.array(answer_lengths)[:, None])).astype(float)
    log_pi_old = rng.normal(-1.5, 1.0, size=mask.shape)
    log_ratio = np.where(mask > 0, rng.uniform(-0.5, 0.5, size=mask.shape), rng.uniform(-30, 30, size=mask.shape))
    advantages = rng.uniform(-3, 3, size=len(prompt_lengths))
    return mask, log_pi_old + log_ratio, log_pi_old, advantages


def _reach_padded_batch(mask: np.ndarray) -> None:
    """What a padded batch of :func:`_padded_batch` reaches: answers of their masked lengths, scored against the
    policy that sampled them (log π_old), with advantages that are random numbers standing for Â."""
    reach(tokens=mask.sum(axis=1), horizon=mask.sum(axis=1), data="old", advantages="estimated")


def _clipped_terms(log_pi: np.ndarray, log_pi_old: np.ndarray, advantages: np.ndarray, epsilon: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per token: min(r A, clip(r) A), r A, and d/d log π of the minimum (r A where r A is the minimum, else 0)."""
    ratio = np.exp(log_pi - log_pi_old)
    unclipped = ratio * advantages[:, None]
    clipped = np.clip(ratio, 1 - epsilon, 1 + epsilon) * advantages[:, None]
    return np.minimum(unclipped, clipped), unclipped, np.where(unclipped <= clipped, unclipped, 0.0)


@verifier(kind="property", uses=("token_clipped_surrogate",), params=AggregationUnit)
def aggregation_unit_property(ctx: Context) -> dict[str, object]:
    """On random padded batches, impl's token clipped objective with the named unit, and its gradient
    with respect to log π, equal the unit's definition computed here: Σ w_t min(r_t A, clip(r_t) A)
    with the verifier's own weights w (lengths counted on the mask, not on the padded row)."""
    aggregation = ctx.params.aggregation

    def definition_holds(batch: tuple[list[int], list[int], int, float, int]) -> None:
        prompt_lengths, answer_lengths, padding, epsilon, seed = batch
        mask, log_pi, log_pi_old, advantages = _padded_batch(prompt_lengths, answer_lengths, padding, seed)
        _reach_padded_batch(mask)
        terms, _, slopes = _clipped_terms(np.where(mask > 0, log_pi, log_pi_old), log_pi_old, advantages, epsilon)
        weights = _unit_weights(mask, aggregation)
        objective, gradient = ctx.impl.token_clipped_surrogate(log_pi, log_pi_old, advantages[:, None], mask,
                                                               epsilon, aggregation)
        bound = rounding_bound(4 * mask.size, float(np.abs(terms).max()))
        assert_close(objective, (weights * terms).sum(), bound, f"impl's {aggregation} objective")
        assert_close(gradient, weights * slopes, bound, f"impl's {aggregation} gradient with respect to log π")

    return check_property(ctx, definition_holds, _padded_batches)


@verifier(kind="property", uses=("token_clipped_surrogate",))
@given(_padded_batches)
def token_clip_pessimistic_property(ctx: Context, batch: tuple[list[int], list[int], int, float, int]) -> None:
    """For every unit, on random padded batches: impl's clipped objective is at most the unclipped
    Σ w r A computed here, equal to it when every answer token's ratio lies in [1-ε, 1+ε], and at
    θ = θ_old (every ratio 1) it is Σ w A with gradient w A: a pessimistic bound that is exact
    at the old policy, the local objective PPO reuses a batch with."""
    prompt_lengths, answer_lengths, padding, epsilon, seed = batch
    mask, log_pi, log_pi_old, advantages = _padded_batch(prompt_lengths, answer_lengths, padding, seed)
    _reach_padded_batch(mask)
    _, unclipped, _ = _clipped_terms(np.where(mask > 0, log_pi, log_pi_old), log_pi_old, advantages, epsilon)
    ratio = np.exp(log_pi - log_pi_old)
    inside = bool(np.all((ratio[mask > 0] >= 1 - epsilon) & (ratio[mask > 0] <= 1 + epsilon)))
    for aggregation in _UNITS:
        weights = _unit_weights(mask, aggregation)
        bound = rounding_bound(4 * mask.size, float(np.abs(unclipped).max()))
        objective, _ = ctx.impl.token_clipped_surrogate(log_pi, log_pi_old, advantages[:, None], mask, epsilon,
                                                        aggregation)
        surrogate = float((weights * unclipped).sum())
        assert objective <= surrogate + bound, (aggregation, objective, surrogate)
        if inside:
            assert_close(objective, surrogate, bound, f"impl's {aggregation} objective, every ratio inside the band")
        at_old, gradient = ctx.impl.token_clipped_surrogate(log_pi_old, log_pi_old, advantages[:, None], mask,
                                                            epsilon, aggregation)
        assert_close(at_old, (weights * advantages[:, None]).sum(), bound, f"impl's {aggregation} objective at θ_old")
        assert_close(gradient, weights * advantages[:, None], bound, f"impl's {aggregation} gradient at θ_old")


class KlWitness(NoParams):
    """A one-token answer from a softmax policy, a reference policy, rewards and the KL coefficient."""

    logits: list[float] = Field(min_length=2)
    ref_logits: list[float] = Field(min_length=2)
    rewards: list[float] = Field(min_length=2)
    beta: float = Field(gt=0)


def _kl_placements(ctx: Context, z: np.ndarray, z_ref: np.ndarray, rewards: np.ndarray, beta: float
                   ) -> dict[str, np.ndarray]:
    """Exact expected gradients, with respect to the logits z, of a one-token answer's three KL placements.

    Every answer (one token) is enumerated, so expectations are exact sums. In the reward: the
    stop-gradient rewards R - β log(π/π_ref) from impl, through the score e_a - π. In the loss: the
    rewards alone through the score, minus the gradient of impl's penalty. Both: the penalised
    rewards and the penalty's gradient. ``true`` is the verifier's own gradient of
    J(z) = E_π[R] - β KL(π || π_ref), π ⊙ (R - β log(π/π_ref) - J); ``penalty`` is its part due to
    the KL term, ``bound`` the rounding allowance.
    """
    pi, log_pi, log_ref = softmax(z), log_softmax(z), log_softmax(z_ref)
    # Every one-token answer of the vocabulary, weighted by the policy being differentiated: on-policy expectations.
    reach(tokens=1, horizon=1, states=1, actions=len(z), data="current")
    scores = np.eye(len(z)) - pi
    mask = np.ones((len(z), 1))
    penalized = ctx.impl.kl_penalized_rewards(rewards, log_pi[:, None], log_ref[:, None], mask, beta)
    _, penalty_gradient = ctx.impl.kl_penalty_loss(z[None, None, :], z_ref[None, None, :], np.ones((1, 1)), beta,
                                                   "token_mean")
    penalty_gradient = np.asarray(penalty_gradient)[0, 0]
    reward_only = (pi * rewards) @ scores
    shaped = rewards - beta * (log_pi - log_ref)
    true = pi * (shaped - pi @ shaped)
    in_reward = (pi * np.asarray(penalized)) @ scores
    return {"true": true, "penalty": true - reward_only, "reward_only": reward_only, "in_reward": in_reward,
            "in_loss": reward_only - penalty_gradient, "both": in_reward - penalty_gradient,
            "bound": rounding_bound(8 * len(z), float(np.abs(shaped).max()))}


@verifier(kind="counterexample", uses=("kl_penalized_rewards", "kl_penalty_loss"), params=KlWitness)
def kl_double_count(ctx: Context) -> dict[str, object]:
    """The three placements of a KL penalty on one witness (see :func:`_kl_placements`).

    ``penalty_multiple_when_both`` is the projection of the penalty's contribution in the "both"
    gradient on the true penalty gradient.
    """
    params = ctx.params
    z, z_ref, rewards = (np.array(v, dtype=float) for v in (params.logits, params.ref_logits, params.rewards))
    placed = _kl_placements(ctx, z, z_ref, rewards, params.beta)
    true, penalty, bound = placed["true"], placed["penalty"], placed["bound"]
    return {
        "reward_placement_matches": bool(np.abs(placed["in_reward"] - true).max() <= bound),
        "loss_placement_matches": bool(np.abs(placed["in_loss"] - true).max() <= bound),
        "both_placements_match": bool(np.abs(placed["both"] - true).max() <= bound),
        "penalty_multiple_when_both": float((placed["both"] - placed["reward_only"]) @ penalty / (penalty @ penalty)),
    }


_kl_cases = st.integers(min_value=2, max_value=6).flatmap(lambda actions: st.tuples(
    *(st.lists(st.floats(-3, 3), min_size=actions, max_size=actions) for _ in range(3)), st.floats(0.01, 2.0)))


@verifier(kind="property", uses=("kl_penalized_rewards", "kl_penalty_loss"))
@given(_kl_cases)
def kl_placement_property(ctx: Context, case: tuple[list[float], list[float], list[float], float]) -> None:
    """On random logits, reference logits, rewards and β (one-token answers, see :func:`_kl_placements`):
    the penalty in the stop-gradient reward alone, and in the loss alone, each give the exact gradient
    of E[R] - β KL(π || π_ref); both together add the penalty's gradient a second time."""
    logits, ref_logits, rewards, beta = case
    placed = _kl_placements(ctx, np.array(logits), np.array(ref_logits), np.array(rewards), beta)
    true, bound = placed["true"], placed["bound"]
    assert_close(placed["in_reward"], true, bound, "the gradient with the penalty in the reward")
    assert_close(placed["in_loss"], true, bound, "the gradient with the penalty in the loss")
    assert_close(placed["both"], true + placed["penalty"], 2 * bound, "the gradient with the penalty in both")


@verifier(kind="property", uses=("sequence_clipped_surrogate",))
@given(_padded_batches)
def sequence_surrogate_property(ctx: Context, batch: tuple[list[int], list[int], int, float, int]) -> None:
    """On random padded batches, impl's sequence-level surrogate and its gradient with respect to log π
    equal their definitions computed here: (1/B) Σ_b min(ρ_b A_b, clip(ρ_b, 1-ε, 1+ε) A_b), ρ_b being the
    product of the ratios of answer b's own tokens (what padding holds does not count), and
    ∂/∂ log π_bt = m_bt ρ_b A_b / B where the unclipped branch is the minimum, 0 where the clipped one
    strictly is. An answer whose ρ_b is within rounding of 1 ± ε may take either branch.

    ρ_b's relative rounding is bounded by the sum of at most T + 2 roundings of the log-probabilities
    of b's tokens, added in size: rounding_bound(4 (T + 2), Σ_t m_bt (|log π_bt| + |log π_old,bt|) + 1).
    """
    prompt_lengths, answer_lengths, padding, epsilon, seed = batch
    mask, log_pi, log_pi_old, advantages = _padded_batch(prompt_lengths, answer_lengths, padding, seed)
    _reach_padded_batch(mask)
    answers, length = mask.shape
    rho = np.exp([math.fsum(row[m > 0]) for row, m in zip(log_pi - log_pi_old, mask, strict=True)])
    unclipped, clipped = rho * advantages, np.clip(rho, 1 - epsilon, 1 + epsilon) * advantages
    relative = np.array([rounding_bound(4 * (length + 2), float((np.abs(a) + np.abs(b))[m > 0].sum()) + 1)
                         for a, b, m in zip(log_pi, log_pi_old, mask, strict=True)])
    size = np.maximum(rho, 1 + epsilon) * np.abs(advantages)
    objective, gradient = ctx.impl.sequence_clipped_surrogate(log_pi, log_pi_old, advantages, mask, epsilon)
    gradient = np.asarray(gradient, dtype=float)
    bound = float((relative * size).sum()) / answers + rounding_bound(2 * answers, float(size.max()))
    expected = np.minimum(unclipped, clipped).sum() / answers
    assert_close(objective, expected, bound, "impl's sequence surrogate")
    assert gradient.shape == mask.shape, (gradient.shape, mask.shape)
    near_edge = np.minimum(np.abs(rho - (1 - epsilon)), np.abs(rho - (1 + epsilon))) <= 2 * relative * rho
    for b in range(answers):
        active = unclipped[b] / answers * mask[b]
        row_bound = relative[b] * size[b] / answers + rounding_bound(2, float(size[b]))
        branches = [active, 0 * active] if near_edge[b] else [active if unclipped[b] <= clipped[b] else 0 * active]
        assert any(np.all(np.abs(gradient[b] - branch) <= row_bound) for branch in branches), (
            b, rho[b], advantages[b], gradient[b], branches)


_kl_batches = st.tuples(_padded_batches, st.integers(2, 5), st.floats(0.01, 2.0),
                        st.sampled_from(("token_mean", "answer_mean", "answer_sum")))


@verifier(kind="property", uses=("kl_penalized_rewards", "kl_penalty_loss"))
@given(_kl_batches)
def kl_terms_batch_property(ctx: Context, case: tuple) -> None:
    """On random padded batches over a vocabulary of 2 to 5 tokens, for every averaging unit: impl's
    penalised rewards are R_b - β Σ_t m_bt (log π_bt - log π_ref,bt) over answer b's own tokens, and
    impl's penalty in the loss is β Σ_bt w_bt KL(π_bt || π_ref,bt) with the unit's weights (the
    verifier's own, :func:`_unit_weights`), with gradient β w_bt π_bt (log(π_bt / π_ref,bt) - KL_bt)
    with respect to the logits; each position's KL is computed here exactly over the vocabulary.
    Logits at padding positions are arbitrary finite numbers, as a model computes them."""
    batch, vocabulary, beta, aggregation = case
    prompt_lengths, answer_lengths, padding, _, seed = batch
    mask, log_pi, log_ref, _ = _padded_batch(prompt_lengths, answer_lengths, padding, seed)
    rng = np.random.default_rng(seed + 1)
    rewards = rng.uniform(-1, 1, size=mask.shape[0])
    logits, ref_logits = rng.normal(0, 2, size=(2, *mask.shape, vocabulary))
    reach(tokens=mask.sum(axis=1), horizon=mask.sum(axis=1), actions=logits.shape[-1])
    penalized = np.asarray(ctx.impl.kl_penalized_rewards(rewards, log_pi, log_ref, mask, beta), dtype=float)
    log_ratio_sums = np.array([math.fsum(row[m > 0]) for row, m in zip(log_pi - log_ref, mask, strict=True)])
    reward_bound = rounding_bound(4 * mask.shape[1], beta * float(np.abs(log_pi).sum() + np.abs(log_ref).sum()))
    assert penalized.shape == rewards.shape, (penalized.shape, rewards.shape)
    assert_close(penalized, rewards - beta * log_ratio_sums, reward_bound, "impl's penalised rewards")

    log_p, log_q = log_softmax(logits, axis=-1), log_softmax(ref_logits, axis=-1)
    kl = (np.exp(log_p) * (log_p - log_q)).sum(axis=-1)
    weights = _unit_weights(mask, aggregation)
    penalty, gradient = ctx.impl.kl_penalty_loss(logits, ref_logits, mask, beta, aggregation)
    expected_gradient = beta * weights[..., None] * np.exp(log_p) * (log_p - log_q - kl[..., None])
    bound = rounding_bound(8 * vocabulary * mask.size, beta * float(np.abs(log_p - log_q).max() + 1))
    assert_close(float(penalty), beta * (weights * kl).sum(), bound, f"impl's {aggregation} KL penalty")
    assert np.shape(gradient) == logits.shape, (np.shape(gradient), logits.shape)
    assert_close(gradient, expected_gradient, bound, "the penalty's gradient with respect to the logits")


# ----------------------------------------------------------------------- what a cut at max_tokens does to the objective


# The policy is tabular and autoregressive over {EOS, a, b}: one categorical distribution per prefix, its
# logits the parameters (a softmax per prefix), every probability an exact fraction. An answer is a string over
# 'ab' followed by '$' (the EOS), or, under a cut, max_tokens tokens over 'ab' that never wrote an EOS. No
# implementation is involved (the course GRU's cut answers are claim sequence-log-prob-chain-rule's).
_ALPHABET = "$ab"


class CutWitness(NoParams):
    """A tabular answer policy, the task's rewards of finished answers, and a cut at max_tokens.

    ``prefix_probabilities`` maps a prefix over 'ab' to the probabilities of [EOS, a, b]; it must
    hold every prefix of fewer than ``max_tokens`` tokens (the cut policy) and every prefix of a
    rewarded answer (the policy without the cut). ``rewards`` maps finished answers ('body$') to
    their reward; a finished answer it does not list earns 0, so the objective without the cut is
    a finite sum. ``cut_reward`` is what the task's rule gives an answer cut at max_tokens.
    """

    prefix_probabilities: dict[str, PositiveFractions]
    rewards: dict[str, str] = Field(min_length=1)
    max_tokens: int = Field(ge=1, le=4)
    cut_reward: str

    @model_validator(mode="after")
    def _complete(self) -> CutWitness:
        for prefix, distribution in self.prefix_probabilities.items():
            if set(prefix) - set("ab") or len(distribution) != 3:
                raise ValueError(f"prefix {prefix!r}: a string over 'ab' with three probabilities [EOS, a, b]")
        needed = {"".join(body) for n in range(self.max_tokens) for body in itertools.product("ab", repeat=n)}
        for answer in self.rewards:
            if not answer.endswith("$") or set(answer[:-1]) - set("ab"):
                raise ValueError(f"reward key {answer!r}: a finished answer, a string over 'ab' followed by '$'")
            needed |= {answer[:t] for t in range(len(answer))}
        missing = sorted(needed - set(self.prefix_probabilities), key=lambda p: (len(p), p))
        if missing:
            raise ValueError(f"prefix_probabilities lacks the prefixes {missing}")
        return self


def _prefixes(params: CutWitness) -> list[str]:
    return sorted(params.prefix_probabilities, key=lambda p: (len(p), p))


def _probability_and_score(params: CutWitness, answer: str) -> tuple[Fraction, np.ndarray]:
    """π(answer) and ∇ log π(answer) with respect to every prefix's logits (a row of 3 per prefix)."""
    prefixes = _prefixes(params)
    probability = Fraction(1)
    score = np.zeros((len(prefixes), 3), dtype=object) + Fraction(0)
    for t, symbol in enumerate(answer):
        distribution = [Fraction(q) for q in params.prefix_probabilities[answer[:t]]]
        choice = _ALPHABET.index(symbol)
        probability *= distribution[choice]
        score[prefixes.index(answer[:t])] += softmax_score(distribution, choice)
    return probability, score.reshape(-1)


def _objective(params: CutWitness, outcomes: dict[str, Fraction]) -> tuple[Fraction, np.ndarray]:
    """J = Σ_y π(y) R(y) over the given outcomes and ∇J = Σ_y π(y) R(y) ∇ log π(y), exactly."""
    value, gradient = Fraction(0), np.zeros(len(params.prefix_probabilities) * 3, dtype=object) + Fraction(0)
    for answer, reward in outcomes.items():
        probability, score = _probability_and_score(params, answer)
        value += probability * reward
        gradient = gradient + probability * reward * score
    return value, gradient


def _off_direction(vector: np.ndarray, direction: np.ndarray) -> Fraction:
    """The largest coordinate of the component of ``vector`` orthogonal to ``direction`` (0 iff parallel)."""
    return largest_magnitude(vector - (vector @ direction) / (direction @ direction) * direction)


@verifier(kind=("exact", "counterexample"), params=CutWitness)
def truncation_objective_exact(ctx: Context) -> dict[str, object]:
    """The expected reward with and without a cut at max_tokens, and with two rules for a cut answer.

    Without the cut an answer runs to its own EOS: J = Σ_y π(y) R(y) over the finished answers
    (those ``rewards`` lists; the others earn 0). With the cut the outcomes are the finished answers
    of at most max_tokens tokens (EOS included) and the cut answers, max_tokens tokens without an
    EOS, each with the probability of its written tokens and the reward the task's rule gives it:
    J_cut = Σ_{finished} π(y) R(y) + Σ_{cut} π(c) R_cut. The alternative rule scores a cut answer as
    if it had finished there (R(c + EOS)). Reported: the cut outcomes' probability and the total;
    the objectives; how far ∇J_cut is from the direction of ∇J (the largest coordinate of its
    orthogonal component, 0 for a mere rescaling); the largest gradient coordinate on the logits of
    prefixes of max_tokens tokens or more, which the cut objective never reaches; and the
    alternative rule's objective and direction against the task's rule.
    """
    params = ctx.params
    rewards = {answer: Fraction(value) for answer, value in params.rewards.items()}
    finished = ["".join(body) + "$" for n in range(params.max_tokens) for body in itertools.product("ab", repeat=n)]
    cut = ["".join(body) for body in itertools.product("ab", repeat=params.max_tokens)]
    cut_rule = {**{y: rewards.get(y, Fraction(0)) for y in finished}, **dict.fromkeys(cut, Fraction(params.cut_reward))}
    alternative = {**{y: rewards.get(y, Fraction(0)) for y in finished},
                   **{c: rewards.get(c + "$", Fraction(0)) for c in cut}}
    full_value, full_gradient = _objective(params, rewards)
    cut_value, cut_gradient = _objective(params, cut_rule)
    alternative_value, alternative_gradient = _objective(params, alternative)
    probabilities = {y: _probability_and_score(params, y)[0] for y in finished + cut}
    # Every outcome of the one prompt, with and without the cut, weighted by the policy being differentiated.
    outcomes = [*probabilities, *rewards]
    reach(tokens=[len(y) for y in outcomes], horizon=[len(y) for y in outcomes], states=1, data="current",
          actions=sorted({len(distribution) for distribution in params.prefix_probabilities.values()}))
    beyond = np.array([len(prefix) >= params.max_tokens for prefix in _prefixes(params) for _ in range(3)])
    return {
        "total_probability_with_cut": sum(probabilities.values()),
        "cut_probability": sum(probabilities[c] for c in cut),
        "full_objective": full_value,
        "cut_objective": cut_value,
        "cut_off_direction": _off_direction(cut_gradient, full_gradient),
        "cut_gradient_beyond_cut": largest_magnitude(cut_gradient[beyond], default=Fraction(0)),
        "full_gradient_beyond_cut": largest_magnitude(full_gradient[beyond], default=Fraction(0)),
        "alternative_rule_objective": alternative_value,
        "alternative_rule_off_direction": _off_direction(alternative_gradient, cut_gradient),
    }

"""Group advantages on a sequence policy: RLOO, GRPO, one weight for every token, and the closing map's
environment and clipping witnesses (module lesson 4.5, steps 4.5.2 to 4.5.5).

Split from ``verifiers/sequence.py`` (the token-level objective of step 4.5.1); the verifiers keep their
registered names, ``sequence.*``, which the claim files use. References are computed independently
and the implementation is called only through ``ctx.impl``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
import sympy as sp
from pydantic import Field
from scipy.special import log_softmax, softmax

from claims_harness import Context, NoParams, check_property, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import softmax_score
from verifiers._numeric import assert_close, central_difference, largest, largest_magnitude, rounding_bound
from verifiers._reach import reach_bandit, reach_mdp

# --------------------------------------------------------------------------- 4.5.2: RLOO on a sequence policy


class TabularSequencePolicy(NoParams):
    """An autoregressive policy over {EOS, a, b}: one categorical distribution per prefix.

    ``prefix_probabilities`` maps a prefix ('' or a string over 'ab' shorter than max_tokens)
    to the probabilities of [EOS, a, b] as exact fractions; ``rewards`` maps every answer to its
    reward, an answer being a string over 'ab' followed by '$' (EOS) or cut at max_tokens.
    """

    prefix_probabilities: dict[str, list[str]]
    rewards: dict[str, str]
    max_tokens: int = Field(ge=1, le=3)
    group_size: int = Field(ge=2, le=4)


def _reach_answers(prefix_probabilities: dict[str, list], answers: list[str], **more: object) -> None:
    """The answers of a tabular policy to its one prompt: as many tokens as symbols (the EOS included), each token
    chosen among the entries of a prefix's distribution, and any other dimension (``group=G``)."""
    lengths = [len(answer) for answer in answers]
    vocabulary = {len(distribution) for distribution in prefix_probabilities.values()}
    reach(tokens=lengths, horizon=lengths, actions=sorted(vocabulary), states=1, **more)


def _reach_groups_of_answers(params: TabularSequencePolicy, answers: list[str], groups: list[tuple[int, ...]]
                             ) -> None:
    """Groups of G answers to one prompt, every group weighted by the probability the policy being differentiated
    gives it (on-policy), with advantages estimated from the group's rewards."""
    _reach_answers(params.prefix_probabilities, answers, group=len(groups[0]), data="current",
                   advantages="estimated")


def _tabular_answers(params: TabularSequencePolicy) -> tuple[list[str], list[Fraction], np.ndarray]:
    """Every answer, its exact probability and its exact score with respect to all prefix logits."""
    distributions = {p: [Fraction(q) for q in row] for p, row in params.prefix_probabilities.items()}
    return _enumerated_answers(distributions, "ab", params.max_tokens)


def _enumerated_answers(distributions: dict[str, list[Fraction]], symbols: str, max_tokens: int
                        ) -> tuple[list[str], list[Fraction], np.ndarray]:
    """Every answer of a tabular policy over EOS ('$') and ``symbols``, its probability and its score.

    ``distributions`` maps each prefix (a string over ``symbols`` shorter than max_tokens) to the
    probabilities of [EOS, *symbols]; an answer is a string over ``symbols`` followed by '$', or cut
    at max_tokens. The score is taken with respect to every prefix's logits, in prefix order.
    """
    prefixes = sorted(distributions, key=lambda p: (len(p), p))
    alphabet = "$" + symbols
    answers = [body + "$" for n in range(max_tokens) for body in map("".join, itertools.product(symbols, repeat=n))]
    answers += list(map("".join, itertools.product(symbols, repeat=max_tokens)))
    probabilities, scores = [], []
    for answer in answers:
        probability = Fraction(1)
        score = np.zeros((len(prefixes), len(alphabet)), dtype=object) + Fraction(0)
        for t, symbol in enumerate(answer):
            distribution = distributions[answer[:t]]
            choice = alphabet.index(symbol)
            probability *= distribution[choice]
            block = prefixes.index(answer[:t])
            score[block] += softmax_score(distribution, choice)
        probabilities.append(probability)
        scores.append(score.reshape(-1))
    return answers, probabilities, np.array(scores, dtype=object)


# Numerator and denominator drawn as integers: st.fractions is slow to draw.
_exact_rewards = st.builds(Fraction, st.integers(-640, 640), st.integers(1, 64))
_exact_batches = st.integers(min_value=2, max_value=5).flatmap(lambda size: st.tuples(
    st.just(size), st.lists(st.lists(_exact_rewards, min_size=size, max_size=size), min_size=1, max_size=3)
    .map(lambda groups: [r for group in groups for r in group])))


@verifier("sequence.rloo_definition_property", kind="property", uses=("rloo_advantages",))
@given(_exact_batches)
def rloo_definition_property(ctx: Context, batch: tuple[int, list[Fraction]]) -> None:
    """On random batches of exact rewards in contiguous groups of G, impl's RLOO advantage of answer i
    is R_i minus the mean of the other G - 1 rewards of its own group."""
    size, rewards = batch
    reach(group=size, states=len(rewards) // size)  # groups of G answers, one group per prompt
    observed = list(ctx.impl.rloo_advantages(np.array(rewards, dtype=object), size))
    expected = []
    for start in range(0, len(rewards), size):
        group = rewards[start:start + size]
        expected += [r - (sum(group) - r) / (size - 1) for r in group]
    assert observed == expected, (rewards, observed, expected)


def _expected_group_estimate(ctx: Context, advantages_of: Any, probabilities: list[Fraction], rewards: list[Fraction],
                             scores: np.ndarray, groups: list[tuple[int, ...]]) -> np.ndarray:
    """E[(1/G) Σ_i A_i ∇ log π(y_i|x)] over every group of G independent answers, each group weighted by its
    probability; the advantages are impl's ``advantages_of(rewards, G)``, the estimate impl's score-function
    gradient. Exact for rational inputs."""
    group_size = len(groups[0])
    group_rewards = np.array([rewards[i] for group in groups for i in group], dtype=object)
    group_scores = np.array([[scores[i] for i in group] for group in groups], dtype=object)
    weights = np.array([np.prod([probabilities[i] for i in group]) for group in groups], dtype=object)
    advantages = advantages_of(group_rewards, group_size).reshape(len(groups), group_size)
    estimates = ctx.impl.score_function_gradient(advantages, group_scores)
    return (weights[:, None] * estimates).sum(axis=0)


@verifier("sequence.rloo_unbiased_exact", kind="exact",
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
    _reach_groups_of_answers(params, answers, groups)
    expectations = {name: _expected_group_estimate(ctx, function, probabilities, rewards, scores, groups)
                    for name, function in (("rloo", ctx.impl.rloo_advantages),
                                           ("group_mean", ctx.impl.group_mean_advantages))}
    ratio = (expectations["group_mean"] @ gradient) / (gradient @ gradient)
    return {
        "answers": len(answers),
        "total_probability": sum(probabilities),
        "gradient_norm_squared": gradient @ gradient,
        "rloo_bias": largest_magnitude(expectations["rloo"] - gradient),
        "group_mean_ratio": ratio,
        "group_mean_residual": largest_magnitude(expectations["group_mean"] - ratio * gradient),
    }


def _answer_count(symbols: int, max_tokens: int) -> int:
    """How many answers a tabular policy over EOS and ``symbols`` other tokens has, cut at max_tokens."""
    return sum(symbols**n for n in range(max_tokens)) + symbols**max_tokens


# (tokens besides EOS, max_tokens, G) small enough to enumerate every group of answers: at most 64 groups.
_ENUMERABLE_GROUPS = tuple((symbols, max_tokens, size) for symbols in (1, 2) for max_tokens in (1, 2, 3)
                           for size in (2, 3, 4) if _answer_count(symbols, max_tokens) ** size <= 64)


@st.composite
def _tabular_policies_and_rewards(draw: st.DrawFn) -> tuple[dict[str, list[Fraction]], str, int, int, list[Fraction]]:
    """A random tabular answer policy (every prefix's distribution over EOS and one or two tokens, each
    probability positive and rational), max_tokens, G and an exact reward for every answer."""
    symbol_count, max_tokens, size = draw(st.sampled_from(_ENUMERABLE_GROUPS))
    symbols = "ab"[:symbol_count]
    distributions = {}
    for n in range(max_tokens):
        for body in itertools.product(symbols, repeat=n):
            weights = draw(st.lists(st.integers(1, 6), min_size=symbol_count + 1, max_size=symbol_count + 1))
            distributions["".join(body)] = [Fraction(w, sum(weights)) for w in weights]
    answers = _answer_count(symbol_count, max_tokens)
    rewards = draw(st.lists(st.builds(Fraction, st.integers(-8, 8), st.integers(1, 4)), min_size=answers,
                            max_size=answers))
    return distributions, symbols, max_tokens, size, rewards


@verifier("sequence.rloo_unbiased_property", kind="property", uses=("rloo_advantages", "score_function_gradient"))
@given(_tabular_policies_and_rewards())
def rloo_unbiased_property(ctx: Context, case: tuple[dict[str, list[Fraction]], str, int, int, list[Fraction]]) -> None:
    """On random tabular answer policies (vocabularies of two or three tokens, EOS included, answers of one to
    three tokens, cut at max_tokens) with random exact rewards, and G = 2 to 4: the exact expectation over every
    group of G independent answers of impl's RLOO estimate (1/G) Σ_i A_i ∇ log π(y_i|x) equals the gradient of the
    expected reward Σ_y π(y) R(y) ∇ log π(y|x), computed here from single answers (:func:`_enumerated_answers`)."""
    distributions, symbols, max_tokens, size, rewards = case
    answers, probabilities, scores = _enumerated_answers(distributions, symbols, max_tokens)
    groups = list(itertools.product(range(len(answers)), repeat=size))
    _reach_answers(distributions, answers, group=size, data="current", advantages="estimated")
    gradient = sum((p * r * s for p, r, s in zip(probabilities, rewards, scores, strict=True)),
                   np.zeros(scores.shape[1], dtype=object) + Fraction(0))
    expectation = _expected_group_estimate(ctx, ctx.impl.rloo_advantages, probabilities, rewards, scores, groups)
    assert list(expectation) == list(gradient), (distributions, rewards, size, list(expectation), list(gradient))


_offset_batches = _exact_batches.flatmap(lambda batch: st.tuples(
    st.just(batch), st.lists(_exact_rewards, min_size=len(batch[1]) // batch[0], max_size=len(batch[1]) // batch[0])))


@verifier("sequence.rloo_offset_invariance_property", kind="property", uses=("rloo_advantages",))
@given(_offset_batches)
def rloo_offset_invariance_property(ctx: Context, case: tuple[tuple[int, list[Fraction]], list[Fraction]]) -> None:
    """On random batches of exact rewards in contiguous groups of G, adding a different constant c_g
    to every reward of group g (a prompt that is easier or harder as a whole) leaves impl's RLOO
    advantages exactly unchanged."""
    (size, rewards), offsets = case
    reach(group=size, states=len(offsets))  # one offset per prompt's group
    shifted = [r + offsets[i // size] for i, r in enumerate(rewards)]
    before = list(ctx.impl.rloo_advantages(np.array(rewards, dtype=object), size))
    after = list(ctx.impl.rloo_advantages(np.array(shifted, dtype=object), size))
    assert before == after, (rewards, offsets, before, after)


@verifier("sequence.rloo_offset_invariance_symbolic", kind="symbolic")
def rloo_offset_invariance_symbolic(ctx: Context) -> dict[str, object]:
    """A_i(R + c) - A_i(R) for the leave-one-out advantage, symbolic G, R_i, T = Σ_{j≠i} R_j and offset c.

    For contrast, the same difference for a baseline shared by a batch of P prompts (the mean of
    all P G rewards) when only this prompt's rewards move by c: it is c (P-1)/P, not 0.
    """
    group_size, prompts = sp.symbols("G P", positive=True)
    r_i, others, offset, rest = sp.symbols("R_i T c U")
    reach(group=group_size, states=prompts)  # any group size, any number of prompts in the batch

    def leave_one_out(own: sp.Expr, sum_of_others: sp.Expr) -> sp.Expr:
        return own - sum_of_others / (group_size - 1)

    def batch_mean(own: sp.Expr, sum_of_others: sp.Expr, other_prompts: sp.Expr) -> sp.Expr:
        return own - (own + sum_of_others + other_prompts) / (prompts * group_size)

    shifted = leave_one_out(r_i + offset, others + (group_size - 1) * offset) - leave_one_out(r_i, others)
    batch_shift = (batch_mean(r_i + offset, others + (group_size - 1) * offset, rest)
                   - batch_mean(r_i, others, rest))
    return {"offset_residual": sp.simplify(shifted),
            "batch_mean_baseline_shift_minus_formula": sp.simplify(batch_shift - offset * (prompts - 1) / prompts)}


_equal_groups = st.tuples(st.integers(min_value=2, max_value=6), st.lists(_exact_rewards, min_size=1, max_size=4))


@verifier("sequence.equal_rewards_zero_property", kind="property", uses=("rloo_advantages", "group_mean_advantages"))
@given(_equal_groups)
def equal_rewards_zero_property(ctx: Context, case: tuple[int, list[Fraction]]) -> None:
    """For any G and any batch of groups in which every answer of a group earns the group's one
    exact reward, impl's RLOO and group-mean advantages are exactly zero."""
    size, levels = case
    reach(group=size, states=len(levels))  # one level per prompt's group
    rewards = np.array([level for level in levels for _ in range(size)], dtype=object)
    for function in (ctx.impl.rloo_advantages, ctx.impl.group_mean_advantages):
        advantages = list(function(rewards, size))
        assert advantages == [0] * len(rewards), (function.__name__, list(rewards), advantages)


class EqualRewardGroup(TabularSequencePolicy):
    """The tabular policy, and one group of answers (keys of ``rewards``) that all earn the same reward."""

    group: list[str] = Field(min_length=2)


@verifier("sequence.equal_rewards_not_stationary", kind="counterexample",
          uses=("rloo_advantages", "score_function_gradient"),
          params=EqualRewardGroup)
def equal_rewards_not_stationary(ctx: Context) -> dict[str, object]:
    """One group of equal rewards gives the RLOO estimate exactly zero, while the exact gradient of the
    expected reward, Σ_y π(y) R(y) ∇ log π(y), is not zero: the policy is not at a stationary point,
    let alone optimal, and a better answer exists. Rational arithmetic throughout."""
    params = ctx.params
    answers, probabilities, scores = _tabular_answers(params)
    rewards = {a: Fraction(params.rewards[a]) for a in answers}
    # The exact gradient sums over every answer under the current policy; the group is one of G answers to the prompt.
    _reach_answers(params.prefix_probabilities, answers, group=len(params.group), data="current",
                   advantages="estimated")
    gradient = sum((p * rewards[a] * s for a, p, s in zip(answers, probabilities, scores, strict=True)),
                   np.zeros(scores.shape[1], dtype=object) + Fraction(0))
    group_rewards = np.array([rewards[a] for a in params.group], dtype=object)
    advantages = ctx.impl.rloo_advantages(group_rewards, len(params.group))
    estimate = ctx.impl.score_function_gradient(advantages, np.array([scores[answers.index(a)] for a in params.group]))
    return {
        "group_rewards_equal": len(set(group_rewards)) == 1,
        "group_estimate_largest": largest_magnitude(estimate),
        "gradient_norm_squared": gradient @ gradient,
        "best_reward_minus_group_reward": largest(rewards.values()) - group_rewards[0],
    }


class AnswerLevelConditions(TabularSequencePolicy):
    """The tabular policy (the current one), an old policy that sampled the data, and a batch size.

    ``old_prefix_probabilities`` has the keys of ``prefix_probabilities``.
    """

    old_prefix_probabilities: dict[str, list[str]]
    batch_size: int = Field(2, ge=2, le=3, description="answers per batch for the token-mean unit")


def _token_scores(params: TabularSequencePolicy, answer: str) -> list[np.ndarray]:
    """The exact score ∇ log π(y_t | y_<t) of each token of ``answer`` with respect to all prefix logits."""
    prefixes = sorted(params.prefix_probabilities, key=lambda p: (len(p), p))
    scores = []
    for t, symbol in enumerate(answer):
        distribution = [Fraction(q) for q in params.prefix_probabilities[answer[:t]]]
        score = np.zeros((len(prefixes), 3), dtype=object) + Fraction(0)
        score[prefixes.index(answer[:t])] = softmax_score(distribution, "$ab".index(symbol))
        scores.append(score.reshape(-1))
    return scores


@verifier("sequence.answer_level_conditions_exact", kind="exact", params=AnswerLevelConditions)
def answer_level_conditions_exact(ctx: Context) -> dict[str, object]:
    """Exact expectations of answer-level REINFORCE estimators against ∇J, J = E_{y~π}[R(y)].

    ∇J = Σ_y π(y) R(y) Σ_t ∇log π(y_t | y_<t) is the on-policy sum over the answer's tokens.
    Dividing each answer's term by its length (the ``answer_mean`` unit), or the batch's terms by
    the batch's token count (``token_mean``, over every batch of ``batch_size`` answers), gives an
    expectation that is not even parallel to ∇J: the gradient of another objective, not a rescaled
    one. Answers sampled from the old policy and weighted without the sequence ratio
    π(y)/π_old(y) are biased too. ``*_off_direction`` is the largest coordinate of the expectation's
    component orthogonal to ∇J, ``*_bias`` of its difference from ∇J; rational arithmetic, no
    implementation involved (the units' implementation is checked by the aggregation properties).
    """
    params = ctx.params
    old = params.model_copy(update={"prefix_probabilities": params.old_prefix_probabilities})
    answers, probabilities, _ = _tabular_answers(params)
    _, old_probabilities, _ = _tabular_answers(old)
    rewards = [Fraction(params.rewards[a]) for a in answers]
    # ∇J and the two length-averaged units weigh the answers by the current policy; the uncorrected estimator by
    # the old one, which sampled the answers before the policy moved.
    _reach_answers(params.prefix_probabilities, answers, data="current")
    _reach_answers(params.old_prefix_probabilities, answers, data="old")
    zero = np.zeros(len(params.prefix_probabilities) * 3, dtype=object) + Fraction(0)
    scores = [sum(_token_scores(params, a), zero) for a in answers]
    gradient = sum((p * r * s for p, r, s in zip(probabilities, rewards, scores, strict=True)), zero)

    def off_direction(expectation: np.ndarray) -> Fraction:
        return largest_magnitude(expectation - (expectation @ gradient) / (gradient @ gradient) * gradient)

    answer_mean = sum((p * r * s / len(a) for a, p, r, s in zip(answers, probabilities, rewards, scores, strict=True)),
                      zero)
    token_mean = zero
    for batch in itertools.product(range(len(answers)), repeat=params.batch_size):
        weight = np.prod([probabilities[i] for i in batch])
        tokens = sum(len(answers[i]) for i in batch)
        token_mean = token_mean + weight * sum((rewards[i] * scores[i] for i in batch), zero) / tokens
    uncorrected = sum((q * r * s for q, r, s in zip(old_probabilities, rewards, scores, strict=True)), zero)
    return {
        "gradient_norm_squared": gradient @ gradient,
        "answer_mean_off_direction": off_direction(answer_mean),
        "token_mean_off_direction": off_direction(token_mean),
        "off_policy_uncorrected_bias": largest_magnitude(uncorrected - gradient),
    }


# --------------------------------------------------------------------------- 4.5.3: GRPO and the LOO advantage


@verifier("sequence.grpo_loo_relation_symbolic", kind="symbolic")
def grpo_loo_relation_symbolic(ctx: Context) -> dict[str, object]:
    """(R_i - mean R)/σ - (G-1)/(G σ) · A_i^LOO for symbolic G, R_i, T = Σ_{j≠i} R_j and σ > 0."""
    group_size, r_i, others = sp.symbols("G R_i T")
    sigma = sp.symbols("sigma", positive=True)
    reach(group=group_size)  # an identity of rational functions of G, for any group size
    normalised = (r_i - (r_i + others) / group_size) / sigma
    leave_one_out = r_i - others / (group_size - 1)
    return {"residual": sp.simplify(normalised - (group_size - 1) / (group_size * sigma) * leave_one_out)}


class GrpoGuard(NoParams):
    epsilon: float = Field(gt=0)


_float_rewards = st.floats(min_value=-10, max_value=10, allow_nan=False)
_batches = st.integers(min_value=2, max_value=8).flatmap(
    lambda size: st.tuples(st.just(size), st.lists(_float_rewards, min_size=size, max_size=4 * size)
                           .map(lambda r, size=size: r[:len(r) - len(r) % size])))


@verifier("sequence.grpo_loo_relation_property", kind="property",
          uses=("grpo_advantages", "rloo_advantages"), params=GrpoGuard)
def grpo_loo_relation_property(ctx: Context) -> dict[str, object]:
    """On random batches of contiguous groups, impl's GRPO advantage equals its RLOO advantage times
    (G-1)/(G (σ + ε)), σ the group's population standard deviation computed here."""
    epsilon = ctx.params.epsilon

    def relation_holds(batch: tuple[int, list[float]]) -> None:
        size, rewards = batch
        reach(group=size, states=len(rewards) // size)
        rewards = np.array(rewards, dtype=float)
        grpo = ctx.impl.grpo_advantages(rewards, size, epsilon)
        loo = ctx.impl.rloo_advantages(rewards, size)
        groups = rewards.reshape(-1, size)
        sigma = np.sqrt(((groups - groups.mean(axis=1, keepdims=True)) ** 2).mean(axis=1))
        expected = loo * np.repeat((size - 1) / (size * (sigma + epsilon)), size)
        bound = rounding_bound(8 * size, np.abs(groups).max() / epsilon)
        assert_close(grpo, expected, bound, "impl's GRPO advantages against its RLOO ones times (G-1)/(G (σ + ε))")

    return check_property(ctx, relation_holds, _batches)


class TwoGroups(NoParams):
    """Rewards of a batch in contiguous groups, and the GRPO guard; the answers are random token rows."""

    rewards: list[float] = Field(min_length=4)
    group_size: int = Field(ge=2)
    epsilon: float = Field(gt=0)
    vocab_size: int = Field(ge=2)
    answer_length: int = Field(ge=1)


@verifier("sequence.grpo_vs_rloo_gradient", kind="counterexample",
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
    # Groups of G answers of answer_length tokens, one group per prompt, at θ = θ_old with given rewards.
    reach(group=params.group_size, states=answers // params.group_size, tokens=mask.sum(axis=1),
          horizon=mask.sum(axis=1), actions=logits.shape[-1], data="old", advantages="estimated")
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


# Prompt and generated lengths, one advantage per answer, a seed, and the vocabulary size (2 to 5 tokens).
_layouts = st.integers(min_value=1, max_value=4).flatmap(lambda batch: st.tuples(
    st.lists(st.integers(1, 4), min_size=batch, max_size=batch),
    st.lists(st.integers(1, 5), min_size=batch, max_size=batch),
    st.lists(st.floats(-3, 3, allow_nan=False).filter(lambda a: abs(a) > 1e-3), min_size=batch, max_size=batch),
    st.integers(0, 2**32 - 1),
    st.integers(2, 5)))


@verifier("sequence.broadcast_advantage_property", kind="property",
          uses=("token_log_probs", "token_log_probs_vjp", "response_mask", "token_clipped_surrogate"))
@given(_layouts)
def broadcast_advantage_property(ctx: Context, layout: tuple[list[int], list[int], list[float], int, int]) -> None:
    """At θ = θ_old with the ``answer_sum`` unit, the token surrogate's gradient with respect to the
    logits equals (1/B) Σ_b A_b Σ_t ∇ log π(y_bt | x_b, y_b,<t), the verifier's own e_y - softmax sum
    over each answer's span; every token of an answer gets the same weight, with the sign of the
    answer's advantage. Vocabularies of 2 to 5 tokens, EOS among them."""
    eos = 0
    prompt_lengths, generated_lengths, advantages, seed, vocab = layout
    rng = np.random.default_rng(seed)
    batch = len(prompt_lengths)
    width = max(p + g for p, g in zip(prompt_lengths, generated_lengths, strict=True)) + 1
    tokens = rng.integers(vocab, size=(batch, width))
    logits = rng.normal(size=(batch, width, vocab))
    mask = ctx.impl.response_mask(tokens, prompt_lengths, generated_lengths, eos)
    log_pi = ctx.impl.token_log_probs(logits, tokens)
    # The answers' lengths are the verifier's own (the reference's spans below); the surrogate at θ = θ_old.
    lengths = [next((k + 1 for k in range(g) if tokens[b, prompt_lengths[b] + k] == eos), g)
               for b, g in enumerate(generated_lengths)]
    reach(tokens=lengths, horizon=lengths, actions=logits.shape[-1], data="old", advantages="estimated",
          states=len({tuple(tokens[b, :p]) for b, p in enumerate(prompt_lengths)}))
    _, weights = ctx.impl.token_clipped_surrogate(log_pi, log_pi, np.array(advantages)[:, None], mask, 0.2,
                                                  "answer_sum")
    d_logits = ctx.impl.token_log_probs_vjp(logits, tokens, weights)
    reference = np.zeros_like(logits)
    bound = rounding_bound(4 * vocab, max(np.abs(advantages)))
    for b in range(batch):
        for position in range(prompt_lengths[b], prompt_lengths[b] + generated_lengths[b]):
            score = -softmax(logits[b, position - 1])
            score[tokens[b, position]] += 1
            reference[b, position - 1] = advantages[b] / batch * score
            if tokens[b, position] == eos:
                break
        answer = np.flatnonzero(reference[b].any(axis=-1))
        assert np.all(np.sign(weights[b, answer]) == np.sign(advantages[b])), (weights[b], advantages[b])
        assert_close(weights[b, answer], weights[b, answer[0]], bound, f"answer {b}'s token weights against its first")
    assert_close(d_logits, reference, bound, "impl's gradient with respect to the logits")


# --------------------------------------------------------------------------- 4.5.5: the environment still matters


class TwoEnvironments(NoParams):
    """One tabular softmax policy in two MDPs that differ only in their transition kernels."""

    P: list[list[list[float]]] = Field(description="P[s][a][s2]")
    P_other: list[list[list[float]]] = Field(description="a second kernel of the same shape")
    R: list[list[float]]
    rho: list[float]
    theta: list[list[float]]
    horizon: int = Field(ge=1, le=4)
    states: list[int] = Field(description="s_0..s_T of a trajectory possible under both kernels")
    actions: list[int] = Field(description="a_0..a_{T-1} of that trajectory")


class _Mdp(NamedTuple):
    """The four attributes impl's MDP functions read."""

    P: np.ndarray
    R: np.ndarray
    rho: np.ndarray
    P_alt: np.ndarray | None


# The objective of step 4.1.3's witness: the expected sum of the horizon's rewards, undiscounted.
_GAMMA = 1


def _finite_horizon_return(P: np.ndarray, R: np.ndarray, rho: np.ndarray, theta: np.ndarray, horizon: int,
                           gamma: float) -> float:
    """J(θ) = Σ_t γ^t E[R(s_t, a_t)] by propagating the state distribution forward (no trajectories, no impl)."""
    pi = softmax(theta, axis=-1)
    distribution, total = rho, 0.0
    for t in range(horizon):
        total += gamma**t * float(distribution @ (pi * R).sum(axis=1))
        distribution = np.einsum("s,sa,sax->x", distribution, pi, P)
    return total


@verifier("sequence.environment_shapes_gradient", kind="counterexample",
          uses=("trajectory_score",), params=TwoEnvironments)
def environment_shapes_gradient(ctx: Context) -> dict[str, object]:
    """The score of a trajectory has no environment in it, the gradient of J still does.

    impl's trajectory score of one trajectory is computed in both MDPs (it must be the same: only
    policy terms enter it); the gradients of J are the verifier's central differences (step 1e-5)
    of its own forward computation of J in each MDP, and ``gradient_gap`` is the largest
    coordinate of their difference, far above the differences' error (of order 1e-10 here).
    """
    params = ctx.params
    R, rho, theta = np.array(params.R, dtype=float), np.array(params.rho, dtype=float), np.array(params.theta)
    kernels = [np.array(params.P, dtype=float), np.array(params.P_other, dtype=float)]
    for P in kernels:
        reach_mdp(P, gamma=_GAMMA, horizon=params.horizon)
    scores = [np.asarray(ctx.impl.trajectory_score(_Mdp(P, R, rho, None), theta, np.array(params.states),
                                                   np.array(params.actions)))
              for P in kernels]
    gradients = [central_difference(lambda z, P=P: _finite_horizon_return(P, R, rho, z, params.horizon, _GAMMA), theta,
                                    1e-5)
                 for P in kernels]
    return {"score_difference": float(np.abs(scores[0] - scores[1]).max()),
            "gradient_gap": float(np.abs(gradients[0] - gradients[1]).max())}


# --------------------------------------------------------------------------- 4.5.5: clipping is no trust region


class ClipEpochs(NoParams):
    """A softmax policy, a batch of sampled actions with advantages, and plain gradient-ascent epochs."""

    logits: list[float] = Field(min_length=2)
    actions: list[int] = Field(min_length=1)
    advantages: list[float] = Field(min_length=1)
    epsilon: float = Field(gt=0, lt=1)
    learning_rate: float = Field(gt=0)
    epochs: int = Field(ge=1)


@verifier("sequence.clipping_not_trust_region", kind="counterexample",
          uses=("token_clipped_surrogate",), params=ClipEpochs)
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
    # One state's actions (one-token answers) drawn by π_old, given advantages, reused over the epochs.
    reach_bandit(len(z), tokens=1, data="old", advantages="estimated")
    for _ in range(params.epochs):
        log_pi = log_softmax(z)[actions][:, None]
        _, weights = ctx.impl.token_clipped_surrogate(log_pi, log_pi_old, advantages, mask, params.epsilon,
                                                      "token_mean")
        z = z + params.learning_rate * weights[:, 0] @ (np.eye(len(z))[actions] - softmax(z))
    ratios = np.exp(log_softmax(z)[actions] - log_pi_old[:, 0])
    largest = int(np.argmax(ratios))
    return {"largest_ratio": float(ratios[largest]), "largest_ratio_last_gradient": float(weights[largest, 0]),
            "upper_clip": 1 + params.epsilon}

"""Causal log-probabilities, the response mask, group advantages and token objectives (lesson 4.5)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import course_entry

import impl
from claims_harness import RunOptions, lookup, run_check
from verifiers._numeric import central_difference

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EOS, PAD = 0, 5


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(45)


def _batch():
    """Rows: finished answer; answer with tokens written after its EOS; answer cut without EOS."""
    tokens = np.array([[3, 1, 2, 1, 2, EOS, PAD],
                       [4, 2, 2, EOS, 1, 1, PAD],
                       [3, 1, 1, 2, 1, 1, PAD]])
    return tokens, np.array([3, 2, 4]), np.array([3, 4, 2])


def test_response_mask_covers_the_answer_up_to_and_including_eos():
    tokens, prompt_length, generated_length = _batch()
    mask = impl.response_mask(tokens, prompt_length, generated_length, EOS)
    # entry k belongs to token k + 1
    np.testing.assert_array_equal(mask, [[0, 0, 1, 1, 1, 0],
                                         [0, 1, 1, 0, 0, 0],
                                         [0, 0, 0, 1, 1, 0]])


def test_token_log_probs_score_the_next_token(rng):
    tokens, _, _ = _batch()
    logits = rng.normal(size=(*tokens.shape, 6))
    log_probs = impl.token_log_probs(logits, tokens)
    for b, k in np.ndindex(log_probs.shape):
        z = logits[b, k]
        assert log_probs[b, k] == pytest.approx(z[tokens[b, k + 1]] - np.log(np.exp(z).sum()))


def test_sequence_log_prob_is_the_masked_sum_and_ignores_infinite_masked_entries():
    log_pi = np.array([[-np.inf, -1.0, -2.0]])
    assert impl.sequence_log_prob(log_pi, np.array([[0.0, 1.0, 1.0]]))[0] == -3.0


@pytest.mark.parametrize("weights_seed", [0, 1])
def test_token_log_probs_vjp_matches_finite_differences(rng, weights_seed):
    tokens, _, _ = _batch()
    logits = rng.normal(size=(*tokens.shape, 6))
    weights = np.random.default_rng(weights_seed).normal(size=(tokens.shape[0], tokens.shape[1] - 1))
    numeric = central_difference(lambda z: float((weights * impl.token_log_probs(z, tokens)).sum()), logits, 1e-6)
    np.testing.assert_allclose(impl.token_log_probs_vjp(logits, tokens, weights), numeric, atol=1e-7)


def test_group_advantages_use_contiguous_groups_exactly():
    rewards = np.array([Fraction(v) for v in (1, 0, 0, 2, 2, 5)], dtype=object)
    loo = impl.rloo_advantages(rewards, 3)
    assert list(loo) == [1, Fraction(-1, 2), Fraction(-1, 2), Fraction(-3, 2), Fraction(-3, 2), 3]
    centered = impl.group_mean_advantages(rewards, 3)
    assert list(loo) == [Fraction(3, 2) * c for c in centered]
    with pytest.raises(ValueError, match="contiguous groups of 4"):
        impl.rloo_advantages(rewards, 4)


def test_grpo_advantages_of_equal_rewards_are_zero_and_otherwise_standardised(rng):
    np.testing.assert_array_equal(impl.grpo_advantages(np.full(8, 0.7), 4, 1e-8), np.zeros(8))
    advantages = impl.grpo_advantages(rng.normal(size=12), 4, 1e-12).reshape(3, 4)
    np.testing.assert_allclose(advantages.mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(advantages.std(axis=1), 1, atol=1e-9)


@pytest.mark.parametrize("aggregation", ["token_mean", "answer_mean", "answer_sum"])
def test_token_clipped_surrogate_gradient_matches_finite_differences(rng, aggregation):
    tokens, prompt_length, generated_length = _batch()
    mask = impl.response_mask(tokens, prompt_length, generated_length, EOS)
    log_pi_old = rng.normal(size=mask.shape)
    # ratios spread over both sides of the clip range, away from its kinks
    log_pi = log_pi_old + rng.choice([-0.5, -0.05, 0.05, 0.5], size=mask.shape)
    advantages = np.array([[1.0], [-2.0], [0.5]])

    def objective(x):
        return impl.token_clipped_surrogate(x, log_pi_old, advantages, mask, 0.2, aggregation)[0]

    _, gradient = impl.token_clipped_surrogate(log_pi, log_pi_old, advantages, mask, 0.2, aggregation)
    np.testing.assert_allclose(gradient, central_difference(objective, log_pi, 1e-6), atol=1e-7)
    assert np.all(gradient[mask == 0] == 0)


def test_aggregation_units_agree_up_to_length_when_lengths_are_equal():
    mask = np.ones((3, 4))
    token_mean = impl.aggregation_weights(mask, "token_mean")
    np.testing.assert_allclose(impl.aggregation_weights(mask, "answer_mean"), token_mean)
    np.testing.assert_allclose(impl.aggregation_weights(mask, "answer_sum"), 4 * token_mean)
    with pytest.raises(ValueError, match="unknown aggregation"):
        impl.aggregation_weights(mask, "mean")


@pytest.mark.parametrize("shift", [-0.3, 0.01, 0.3])
def test_sequence_clipped_surrogate_gradient_matches_finite_differences(rng, shift):
    mask = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    log_pi_old = rng.normal(size=mask.shape)
    log_pi = log_pi_old + shift / 3
    advantages = np.array([1.0, -1.0])

    def objective(x):
        return impl.sequence_clipped_surrogate(x, log_pi_old, advantages, mask, 0.2)[0]

    _, gradient = impl.sequence_clipped_surrogate(log_pi, log_pi_old, advantages, mask, 0.2)
    np.testing.assert_allclose(gradient, central_difference(objective, log_pi, 1e-6), atol=1e-7)


def test_kl_penalty_loss_gradient_matches_finite_differences_and_vanishes_at_the_reference(rng):
    mask = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    logits, reference = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))

    def penalty(z):
        return impl.kl_penalty_loss(z, reference, mask, 0.3, "token_mean")[0]

    _, gradient = impl.kl_penalty_loss(logits, reference, mask, 0.3, "token_mean")
    np.testing.assert_allclose(gradient, central_difference(penalty, logits, 1e-6), atol=1e-7)
    value, at_reference = impl.kl_penalty_loss(reference, reference, mask, 0.3, "token_mean")
    assert value == 0 and np.all(at_reference == 0)


def test_kl_penalized_rewards_subtract_the_masked_log_ratio():
    mask = np.array([[1.0, 1.0, 0.0]])
    rewards = impl.kl_penalized_rewards([1.0], [[-1.0, -2.0, -9.0]], [[-1.5, -1.0, 0.0]], mask, 0.5)
    assert rewards[0] == pytest.approx(1.0 - 0.5 * (0.5 - 1.0))


def _run_claim(claim_id: str, implementation: str) -> list[str]:
    entry = course_entry(claim_id)
    return [run_check(entry, i, lookup(check.verifier), RunOptions(impl=implementation)).status
            for i, check in enumerate(entry.claim.checks)]


def test_a_mask_shifted_by_one_fails_the_mask_claims(monkeypatch):
    assert _run_claim("response-mask-and-causal-shift", "impl") == ["passed"] * 4
    monkeypatch.syspath_prepend(str(FIXTURES))
    assert _run_claim("response-mask-and-causal-shift", "shifted_mask")[0] == "failed"
    assert _run_claim("sequence-log-prob-chain-rule", "shifted_mask")[0] == "failed"
    assert _run_claim("closing-map-correct-mask", "shifted_mask") == ["failed", "failed"]


def test_training_with_a_mask_shifted_by_one_fails_the_experiment(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))
    # The experiment and the loop's contract fail; the figure's check draws fixed runs and has no mask to shift.
    assert _run_claim("gru-rloo-ppo-training", "shifted_mask") == ["failed", "failed", "passed"]

"""The GRU policy, its sampler and the verifiable-reward task of lesson 4.5."""

from __future__ import annotations

import numpy as np
import pytest

import impl
from impl import gru_task


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(4553)


def _policy(rng: np.random.Generator, vocab: int = 5, hidden: int = 4) -> dict[str, np.ndarray]:
    params = impl.gru_init(rng, vocab, hidden)
    params["w_out"] = rng.normal(size=params["w_out"].shape)
    params["b_out"] = rng.normal(size=vocab)
    params["b"] = rng.normal(scale=0.5, size=params["b"].shape)
    return params


def test_gru_backward_matches_central_differences(rng):
    params = _policy(rng)
    tokens = rng.integers(5, size=(3, 6))
    weights = rng.normal(size=(3, 6, 5))
    logits, cache = impl.gru_forward(params, tokens)
    grads = impl.gru_backward(params, cache, weights)
    step = 1e-6
    for name, value in params.items():
        numeric = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            shifted = {k: v.copy() for k, v in params.items()}
            shifted[name][index] += step
            upper = float((weights * impl.gru_forward(shifted, tokens)[0]).sum())
            shifted[name][index] -= 2 * step
            numeric[index] = (upper - float((weights * impl.gru_forward(shifted, tokens)[0]).sum())) / (2 * step)
        np.testing.assert_allclose(grads[name], numeric, atol=1e-7, err_msg=name)


def test_policy_gradient_through_the_whole_pipeline_matches_central_differences(rng):
    params = _policy(rng)
    tokens = np.array([[1, 2, 3, 4, 0, 4], [2, 3, 1, 1, 1, 4]])
    prompt_length, generated = np.array([2, 3]), np.array([3, 3])
    mask = impl.response_mask(tokens, prompt_length, generated, 0)
    advantages = np.array([[1.5], [-0.5]])

    def objective(p):
        log_pi = impl.token_log_probs(impl.gru_forward(p, tokens)[0], tokens)
        return impl.token_clipped_surrogate(log_pi, log_pi_old, advantages, mask, 0.2, "answer_mean")[0]

    log_pi_old = impl.token_log_probs(impl.gru_forward(params, tokens)[0], tokens) - 0.05
    logits, cache = impl.gru_forward(params, tokens)
    _, d_log_pi = impl.token_clipped_surrogate(impl.token_log_probs(logits, tokens), log_pi_old, advantages, mask,
                                               0.2, "answer_mean")
    grads = impl.gru_backward(params, cache, impl.token_log_probs_vjp(logits, tokens, d_log_pi))
    step = 1e-6
    for index in np.ndindex(params["u"].shape):
        shifted = {k: v.copy() for k, v in params.items()}
        shifted["u"][index] += step
        upper = objective(shifted)
        shifted["u"][index] -= 2 * step
        assert grads["u"][index] == pytest.approx((upper - objective(shifted)) / (2 * step), abs=1e-7)


def test_logits_at_a_position_do_not_see_later_tokens(rng):
    params = _policy(rng)
    tokens = rng.integers(5, size=(1, 7))
    changed = tokens.copy()
    changed[0, 4:] = (changed[0, 4:] + 1) % 5
    original, _ = impl.gru_forward(params, tokens)
    altered, _ = impl.gru_forward(params, changed)
    np.testing.assert_array_equal(original[0, :4], altered[0, :4])
    assert not np.allclose(original[0, 4:], altered[0, 4:])


def test_sampler_flags_truncation_and_stops_at_eos(rng):
    params = _policy(rng)
    prompts = rng.integers(1, 5, size=(200, 3))
    lengths = rng.integers(1, 4, size=200)
    tokens, generated, truncated = impl.gru_sample(params, prompts, lengths, 3, 0, 4, rng)
    assert truncated.any() and (~truncated).any()
    for b in range(200):
        answer = list(tokens[b, lengths[b]:lengths[b] + generated[b]])
        assert truncated[b] == (0 not in answer)
        assert truncated[b] or answer[-1] == 0 and answer.count(0) == 1
        assert not truncated[b] or generated[b] == 3
    again = impl.gru_sample(params, prompts, lengths, 3, 0, 4, np.random.default_rng(1))
    np.testing.assert_array_equal(again[0], impl.gru_sample(params, prompts, lengths, 3, 0, 4,
                                                            np.random.default_rng(1))[0])


def test_checker_rewards_only_a_finished_correct_answer_fully():
    a, b, eos = gru_task.SYMBOL_A, gru_task.SYMBOL_B, gru_task.EOS
    assert gru_task.target_answer(gru_task.REVERSE, (a, b, b)) == (b, b, a)
    assert gru_task.target_answer(gru_task.COUNT, (a, b, a)) == (a, a)
    assert impl.verifiable_reward(gru_task.COUNT, (b,), (eos,), False) == 1
    assert impl.verifiable_reward(gru_task.COPY, (a, b), (a, b, eos), False) == 1
    assert impl.verifiable_reward(gru_task.COPY, (a, b), (a, b), True) == 0
    assert impl.verifiable_reward(gru_task.COPY, (a, b), (a, a, eos), False) == pytest.approx(2 / 3)
    assert len(gru_task.task_prompts()) == 42


def test_training_history_has_one_entry_per_iteration_and_evaluation():
    history = impl.train_gru_policy(0, 5, prompts_per_batch=4, group_size=2, ppo_epochs=2, eval_every=2,
                                    eval_samples_per_prompt=1)
    assert history["eval_iterations"] == [0, 2, 4, 5]
    assert len(history["batch_reward"]) == 5 and len(history["eval_reward"]) == 4
    assert all(0 <= r <= 1 for r in history["eval_reward"])

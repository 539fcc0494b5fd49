"""The reference implementation, by identities rather than golden numbers."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import impl


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


def test_centered_advantages_sum_to_zero(rng):
    rewards = rng.normal(size=(5, 8))
    np.testing.assert_allclose(impl.group_centered_advantages(rewards).sum(axis=-1), 0, atol=1e-12)


def test_leave_one_out_is_scaled_centered_exactly():
    rewards = np.array([[Fraction(1), Fraction(-1, 5), Fraction(3, 7)]], dtype=object)
    loo = impl.leave_one_out_advantages(rewards)
    assert list(loo[0]) == list(Fraction(3, 2) * impl.group_centered_advantages(rewards)[0])
    assert loo[0, 0] == 1 - (Fraction(-1, 5) + Fraction(3, 7)) / 2


def test_leave_one_out_needs_two_answers():
    with pytest.raises(ValueError, match="G = 1"):
        impl.leave_one_out_advantages([1.0])


def test_score_function_gradient_of_a_scalar_and_a_vector_parameter(rng):
    weights = rng.normal(size=(3, 6))
    scalar_scores = rng.normal(size=(3, 6))
    np.testing.assert_allclose(impl.score_function_gradient(weights, scalar_scores),
                               (weights * scalar_scores).mean(axis=-1))
    vector_scores = rng.normal(size=(6, 4))
    np.testing.assert_allclose(impl.score_function_gradient(weights[0], vector_scores),
                               (weights[0][:, None] * vector_scores).mean(axis=0))


def test_bernoulli_score_is_the_logit_derivative_of_the_log_probability():
    p, step = 0.35, 1e-6
    logit = np.log(p / (1 - p))

    def log_prob(action: int, z: float) -> float:
        probability = 1 / (1 + np.exp(-z))
        return np.log(probability if action else 1 - probability)

    for action in (0, 1):
        numeric = (log_prob(action, logit + step) - log_prob(action, logit - step)) / (2 * step)
        assert impl.bernoulli_logit_score(action, p) == pytest.approx(numeric, abs=1e-8)


def _episode(rng: np.random.Generator, length: int = 12):
    rewards, values = rng.normal(size=length), rng.normal(size=length + 1)
    return rewards, values[:-1], values[1:]


def test_gae_with_lambda_zero_is_the_td_error(rng):
    r_t, v_t, v_tp1 = _episode(rng)
    terminated_t = (rng.random(12) < 0.2).astype(float)
    trace_cut_t = np.maximum(terminated_t, rng.random(12) < 0.2)
    np.testing.assert_array_equal(impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, 0.9, 0.0),
                                  impl.td_errors(r_t, v_t, v_tp1, terminated_t, 0.9))


def test_gae_with_lambda_one_at_a_terminal_is_the_return_minus_the_value(rng):
    r_t, v_t, v_tp1 = _episode(rng)
    terminated_t = np.zeros(12)
    terminated_t[-1] = 1
    advantages = impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, terminated_t, 0.9, 1.0)
    returns = np.array([sum(0.9**k * r for k, r in enumerate(r_t[t:])) for t in range(12)])
    np.testing.assert_allclose(advantages, returns - v_t, rtol=1e-12, atol=1e-12)


def test_gae_trace_cut_splits_the_array_into_independent_fragments(rng):
    r_t, v_t, v_tp1 = _episode(rng)
    terminated_t = np.zeros(12)
    cut = np.zeros(12)
    cut[4] = 1
    whole = impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, cut, 0.99, 0.95)
    first = impl.gae_advantages(r_t[:5], v_t[:5], v_tp1[:5], terminated_t[:5], np.zeros(5), 0.99, 0.95)
    second = impl.gae_advantages(r_t[5:], v_t[5:], v_tp1[5:], terminated_t[5:], np.zeros(7), 0.99, 0.95)
    # Not bit for bit: impl filters the whole array, so its rounding depends on the steps after the cut.
    np.testing.assert_allclose(whole, np.concatenate([first, second]), rtol=0, atol=4 * 12 * np.finfo(float).eps
                               * (np.abs(r_t).sum() + np.abs(v_t).sum() + np.abs(v_tp1).sum()))


def test_gae_is_vectorized_over_environments(rng):
    r_t, v_t, v_tp1 = (rng.normal(size=(10, 3)) for _ in range(3))
    terminated_t = (rng.random((10, 3)) < 0.2).astype(float)
    batched = impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, terminated_t, 0.9, 0.8)
    for env in range(3):
        single = impl.gae_advantages(r_t[:, env], v_t[:, env], v_tp1[:, env], terminated_t[:, env],
                                     terminated_t[:, env], 0.9, 0.8)
        np.testing.assert_allclose(batched[:, env], single, rtol=1e-14)


def test_k3_is_k1_plus_the_ratio_minus_one(rng):
    log_ratio = rng.normal(size=50)
    np.testing.assert_allclose(impl.kl_k3(log_ratio), impl.kl_k1(log_ratio) + np.exp(log_ratio) - 1,
                               rtol=1e-12, atol=1e-15)


def test_k3_keeps_precision_near_ratio_one():
    assert impl.kl_k3(1e-9) == pytest.approx(0.5e-18, rel=1e-6)

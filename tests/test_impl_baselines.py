"""impl's baselines (lesson 4.2), by identities and finite differences rather than golden numbers."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import impl


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(4242)


def test_baseline_advantages_cover_none_constant_and_state_dependent(rng):
    returns = rng.normal(size=(6, 2))
    np.testing.assert_array_equal(impl.baseline_advantages(returns, 0.0), returns)
    np.testing.assert_array_equal(impl.baseline_advantages(returns, 1.5), returns - 1.5)
    per_step = rng.normal(size=(6, 1))
    np.testing.assert_array_equal(impl.baseline_advantages(returns, per_step), returns - per_step)


def test_state_value_advantages_have_zero_policy_mean_exactly():
    pi = np.array([Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)], dtype=object)
    q = np.array([Fraction(1), Fraction(4), Fraction(-2, 7)], dtype=object)
    value = impl.state_value_from_q(pi, q)
    assert value == Fraction(1, 2) + Fraction(4, 3) - Fraction(2, 42)
    assert (pi * impl.baseline_advantages(q, value)).sum() == 0


@pytest.mark.parametrize("values", [[0.1, 0.1, 0.1], [1e300, 1e300], [-7.3] * 16, [0.1]])
def test_equal_float_rewards_give_exact_zero_advantages(values):
    rewards = np.array(values)
    assert np.all(impl.group_centered_advantages(rewards) == 0)
    assert np.all(impl.group_normalized_advantages(rewards, 1e-12) == 0)
    if len(values) > 1:
        assert np.all(impl.leave_one_out_advantages(rewards) == 0)


def test_normalized_advantages_are_centered_rewards_over_population_std(rng):
    rewards = rng.normal(size=(4, 8))
    eps = 1e-6
    expected = (rewards - rewards.mean(axis=-1, keepdims=True)) / (rewards.std(axis=-1, keepdims=True) + eps)
    np.testing.assert_allclose(impl.group_normalized_advantages(rewards, eps), expected, rtol=1e-12, atol=1e-12)


def test_normalized_advantages_ignore_shift_and_positive_scale(rng):
    rewards = rng.normal(size=(3, 5))
    base = impl.group_normalized_advantages(rewards, 1e-12)
    np.testing.assert_allclose(impl.group_normalized_advantages(7.0 + 3.0 * rewards, 1e-12), base, atol=1e-9)
    np.testing.assert_allclose((base**2).mean(axis=-1), 1.0, rtol=1e-9)


@pytest.mark.parametrize("eps", [0.0, -1e-8, float("nan")])
def test_normalized_advantages_need_a_positive_guard(eps):
    with pytest.raises(ValueError, match="eps"):
        impl.group_normalized_advantages([1.0, 2.0], eps)


def _second_moment(pi: np.ndarray, q: np.ndarray, scores: np.ndarray, b: float) -> float:
    return float(pi @ ((q - b) ** 2 * (scores**2).sum(axis=1)))


def test_optimal_baseline_is_a_stationary_point_of_the_second_moment(rng):
    pi = rng.dirichlet(np.ones(4))
    q, scores = rng.normal(size=4), rng.normal(size=(4, 3))
    optimal = float(impl.optimal_scalar_baseline(pi, q, scores))
    step = 1e-5
    derivative = (_second_moment(pi, q, scores, optimal + step) - _second_moment(pi, q, scores, optimal - step)) / (
        2 * step)
    assert derivative == pytest.approx(0.0, abs=1e-8)
    for b in (optimal - 0.3, optimal + 0.3):
        assert _second_moment(pi, q, scores, b) > _second_moment(pi, q, scores, optimal)


def test_optimal_baseline_for_two_softmax_actions_is_the_other_actions_weighting():
    # With two actions ||e_a - π||^2 = 2 π_{other}^2, so b* = π_2 Q_1 + π_1 Q_2: the weights swap.
    logits, q = np.array([2.0, 0.0]), np.array([1.0, 4.0])
    pi = impl.softmax(logits)
    scores = impl.softmax_score(np.broadcast_to(logits, (2, 2)), np.arange(2))
    assert impl.optimal_scalar_baseline(pi, q, scores) == pytest.approx(pi[1] * q[0] + pi[0] * q[1], rel=1e-12)
    assert impl.state_value_from_q(pi, q) == pytest.approx(pi[0] * q[0] + pi[1] * q[1], rel=1e-12)


def test_optimal_baseline_is_the_value_under_a_uniform_policy():
    pi = np.array([Fraction(1, 3)] * 3, dtype=object)
    scores = np.array([[Fraction(int(a == k)) - Fraction(1, 3) for k in range(3)] for a in range(3)], dtype=object)
    q = np.array([Fraction(3), Fraction(-1, 2), Fraction(5, 7)], dtype=object)
    assert impl.optimal_scalar_baseline(pi, q, scores) == impl.state_value_from_q(pi, q)

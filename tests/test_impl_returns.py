"""impl.returns: discounted returns and the three REINFORCE weightings, by identities."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import impl


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261130)


def test_returns_satisfy_the_backward_recursion(rng):
    rewards = rng.normal(size=(9, 4))
    returns = impl.discounted_returns(rewards, 0.8)
    np.testing.assert_array_equal(returns[-1], rewards[-1])
    np.testing.assert_allclose(returns[:-1], rewards[:-1] + 0.8 * returns[1:], rtol=1e-14)


def test_returns_are_exact_for_fractions():
    rewards = np.array([Fraction(1), Fraction(-1, 3), Fraction(2)], dtype=object)
    half = Fraction(1, 2)
    assert list(impl.discounted_returns(rewards, half)) == [Fraction(1) - Fraction(1, 6) + Fraction(1, 2),
                                                            Fraction(-1, 3) + 1, Fraction(2)]


def test_gamma_zero_keeps_only_the_immediate_reward_and_gamma_one_sums_the_rest(rng):
    rewards = rng.normal(size=7)
    np.testing.assert_array_equal(impl.discounted_returns(rewards, 0.0), rewards)
    np.testing.assert_allclose(impl.discounted_returns(rewards, 1.0), np.cumsum(rewards[::-1])[::-1], rtol=1e-13)


def test_a_batch_is_its_columns(rng):
    rewards = rng.normal(size=(6, 3))
    for weights in (impl.discounted_returns, impl.discounted_objective_weights, impl.full_return_weights):
        batched = weights(rewards, 0.9)
        assert batched.shape == rewards.shape
        for column in range(3):
            np.testing.assert_array_equal(batched[:, column], weights(rewards[:, column], 0.9))


def test_literal_weights_are_discounted_reward_to_go(rng):
    rewards = rng.normal(size=(8, 2))
    expected = 0.7 ** np.arange(8)[:, None] * impl.discounted_returns(rewards, 0.7)
    np.testing.assert_allclose(impl.discounted_objective_weights(rewards, 0.7), expected, rtol=1e-14)


def test_full_return_repeats_the_first_return_and_equals_past_plus_literal_weights(rng):
    rewards = rng.normal(size=5)
    full = impl.full_return_weights(rewards, 0.9)
    np.testing.assert_array_equal(full, np.full(5, impl.discounted_returns(rewards, 0.9)[0]))
    past = np.array([sum(0.9**k * rewards[k] for k in range(t)) for t in range(5)])
    np.testing.assert_allclose(full, past + impl.discounted_objective_weights(rewards, 0.9), rtol=1e-13)

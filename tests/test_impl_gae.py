"""impl.gae: the fast GAE against the plain loop, streaming, n-step estimates, targets, normalisation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import impl


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261130)


def _buffer(rng: np.random.Generator, shape: tuple[int, ...], cut_rate: float = 0.1) -> tuple[np.ndarray, ...]:
    r_t, v_t, v_tp1 = (rng.normal(size=shape) for _ in range(3))
    terminated_t = (rng.random(shape) < cut_rate / 2).astype(float)
    trace_cut_t = np.maximum(terminated_t, rng.random(shape) < cut_rate)
    return r_t, v_t, v_tp1, terminated_t, trace_cut_t


def _loop_gae(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    """The per-step backward loop most implementations write, as the reference."""
    delta_t = r_t + gamma * (1 - terminated_t) * v_tp1 - v_t
    advantage_t = np.empty_like(delta_t)
    carried = np.zeros_like(delta_t[0])
    for t in reversed(range(len(delta_t))):
        carried = delta_t[t] + gamma * lambda_ * (1 - trace_cut_t[t]) * carried
        advantage_t[t] = carried
    return advantage_t


def _rounding_bound(arrays, gamma, lambda_):
    """impl's documented bound against the loop: 4 T eps times the largest cut-free discounted sum of |δ|."""
    r_t, v_t, v_tp1, terminated_t, _ = arrays
    magnitude_t = np.abs(r_t) + gamma * np.abs(v_tp1) + np.abs(v_t)
    uncut = np.zeros_like(magnitude_t)
    suffix = _loop_gae(magnitude_t, np.zeros_like(magnitude_t), np.zeros_like(magnitude_t), uncut, uncut, 1.0,
                       gamma * lambda_)
    return 4 * len(r_t) * np.finfo(float).eps * suffix.max()


# 16, 17 and 4097 steps: one 16-step block of the suffix sums exactly, one step more, and many blocks with a remainder.
@pytest.mark.parametrize("shape", [(1,), (7,), (16,), (17,), (300,), (50, 1), (64, 5), (20, 2, 3), (1000, 2), (4097,)])
@pytest.mark.parametrize("cut_rate", [0.0, 0.05, 0.5, 1.0])
@pytest.mark.parametrize(("gamma", "lambda_"), [(0.99, 0.95), (1.0, 1.0), (0.9, 0.0), (0.5, 1.0)])
def test_gae_equals_the_backward_loop_up_to_its_rounding_bound(rng, shape, cut_rate, gamma, lambda_):
    arrays = _buffer(rng, shape, cut_rate)
    error = np.abs(impl.gae_advantages(*arrays, gamma, lambda_) - _loop_gae(*arrays, gamma, lambda_)).max()
    assert error <= _rounding_bound(arrays, gamma, lambda_)


def test_gae_with_lambda_zero_equals_the_td_errors_bit_for_bit(rng):
    arrays = _buffer(rng, (200, 3), 0.1)
    np.testing.assert_array_equal(impl.gae_advantages(*arrays, 0.9, 0.0), impl.td_errors(*arrays[:4], 0.9))


def test_a_nan_reaches_the_earlier_steps_of_its_column_as_in_the_loop(rng):
    r_t, v_t, v_tp1, terminated_t, trace_cut_t = _buffer(rng, (60, 2), 0.0)
    trace_cut_t[[19, 39]] = 1
    r_t[30, 0] = np.nan
    advantages = impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, 1.0, 1.0)
    assert np.isnan(advantages[:31, 0]).all() and np.isfinite(advantages[31:, 0]).all()
    assert np.isfinite(advantages[:, 1]).all()
    np.testing.assert_array_equal(np.isnan(advantages),
                                  np.isnan(_loop_gae(r_t, v_t, v_tp1, terminated_t, trace_cut_t, 1.0, 1.0)))


def test_the_rounding_of_a_long_buffer_at_gamma_lambda_one_stays_within_the_bound(rng):
    arrays = _buffer(rng, (100_000,), 0.005)
    error = np.abs(impl.gae_advantages(*arrays, 1.0, 1.0) - _loop_gae(*arrays, 1.0, 1.0)).max()
    assert error <= _rounding_bound(arrays, 1.0, 1.0)


def test_gae_of_fractions_is_exact_and_matches_floats(rng):
    arrays = _buffer(rng, (9, 2), 0.3)
    exact = [np.vectorize(Fraction, otypes=[object])(a) for a in arrays]
    exact_advantages = impl.gae_advantages(*exact, Fraction(9, 10), Fraction(4, 5))
    assert all(isinstance(x, Fraction) for x in exact_advantages.reshape(-1))
    np.testing.assert_allclose(exact_advantages.astype(float), impl.gae_advantages(*arrays, 0.9, 0.8), rtol=1e-13,
                               atol=1e-13)


def test_gae_of_integer_rewards_is_float():
    advantages = impl.gae_advantages([1, 2, 3], [0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 1], 0.5, 0.5)
    np.testing.assert_allclose(advantages, [1 + 0.25 * (2 + 0.25 * 3), 2 + 0.25 * 3, 3])


def test_gae_of_an_empty_buffer_is_empty():
    assert impl.gae_advantages(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), 0.9, 0.9).shape == (0,)


def test_streaming_with_carry_equals_the_unsplit_buffer(rng):
    r_t, v_t, v_tp1, terminated_t, trace_cut_t = _buffer(rng, (40, 3), 0.1)
    trace_cut_t[14] = 0
    whole = impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, 0.99, 0.9)
    later = impl.gae_advantages(r_t[15:], v_t[15:], v_tp1[15:], terminated_t[15:], trace_cut_t[15:], 0.99, 0.9)
    earlier = impl.gae_advantages(r_t[:15], v_t[:15], v_tp1[:15], terminated_t[:15], trace_cut_t[:15], 0.99, 0.9,
                                  carry=later[0])
    error = np.abs(np.concatenate([earlier, later]) - whole).max()
    assert error <= _rounding_bound((r_t, v_t, v_tp1, terminated_t, trace_cut_t), 0.99, 0.9)


def test_carry_is_ignored_where_the_last_step_cuts_the_trace(rng):
    arrays = list(_buffer(rng, (6,), 0.0))
    arrays[4][-1] = 1
    with_carry = impl.gae_advantages(*arrays, 0.9, 0.9, carry=123.0)
    np.testing.assert_array_equal(with_carry, impl.gae_advantages(*arrays, 0.9, 0.9))


def test_gae_with_lambda_one_on_one_episode_is_the_n_step_estimate_to_its_end(rng):
    rewards, values = rng.normal(size=8), rng.normal(size=9)
    masks = np.zeros(8), np.zeros(8)
    gae = impl.gae_advantages(rewards, values[:-1], values[1:], *masks, 0.9, 1.0)
    n_step = impl.n_step_advantages(rewards, values[:-1], values[1:], *masks, 0.9, 8)
    np.testing.assert_allclose(gae, n_step, rtol=1e-12, atol=1e-12)


def test_one_step_estimate_is_the_td_error_exactly():
    r_t = np.array([Fraction(1, 3), Fraction(-2), Fraction(5, 7)], dtype=object)
    v_t = np.array([Fraction(1), Fraction(2, 9), Fraction(-1, 2)], dtype=object)
    v_tp1 = np.array([Fraction(2, 9), Fraction(4), Fraction(3)], dtype=object)
    terminated_t, trace_cut_t = np.array([0, 1, 0]), np.array([0, 1, 1])
    gamma = Fraction(9, 10)
    assert list(impl.n_step_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, 1)) == list(
        impl.td_errors(r_t, v_t, v_tp1, terminated_t, gamma))


def test_n_step_estimate_stops_at_a_terminal():
    r_t, v_t, v_tp1 = np.array([1.0, 2.0, 4.0]), np.zeros(3), np.array([10.0, 10.0, 10.0])
    terminated_t = trace_cut_t = np.array([0, 1, 0])
    estimate = impl.n_step_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, 0.5, 5)
    np.testing.assert_allclose(estimate, [1 + 0.5 * 2, 2, 4 + 0.5 * 10])


def test_n_step_needs_a_positive_horizon():
    with pytest.raises(ValueError, match="at least 1"):
        impl.n_step_advantages([1.0], [0.0], [0.0], [0], [0], 0.9, 0)


def test_value_targets_use_the_raw_advantages_and_normalisation_copies(rng):
    advantages, values = rng.normal(loc=3, scale=2, size=50), rng.normal(size=50)
    kept = advantages.copy()
    normalized = impl.normalize_advantages(advantages)
    np.testing.assert_array_equal(advantages, kept)
    np.testing.assert_array_equal(impl.value_targets(values, advantages), values + kept)
    assert abs(normalized.mean()) < 1e-12
    assert normalized.std() == pytest.approx(1, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), length=st.integers(1, 120), n_envs=st.integers(1, 3),
       gamma=st.floats(0.0, 1.0), lambda_=st.floats(0.0, 1.0))
def test_gae_stays_within_its_rounding_bound_on_values_of_mixed_scales(data, length, n_envs, gamma, lambda_):
    values = hnp.arrays(np.float64, (length, n_envs), elements=st.floats(-1e6, 1e6) | st.floats(-1e-3, 1e-3))
    masks = hnp.arrays(np.float64, (length, n_envs), elements=st.sampled_from([0.0, 1.0]))
    arrays = (data.draw(values), data.draw(values), data.draw(values), data.draw(masks), data.draw(masks))
    error = np.abs(impl.gae_advantages(*arrays, gamma, lambda_) - _loop_gae(*arrays, gamma, lambda_)).max()
    assert error <= _rounding_bound(arrays, gamma, lambda_)

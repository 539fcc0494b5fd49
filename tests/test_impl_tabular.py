"""impl.tabular and impl.actor_critic: Bellman identities, exact and float solves, the loop's pieces."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import impl


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261201)


def _mdp(rng: np.random.Generator, n_states: int = 4, n_actions: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    P = rng.dirichlet(np.ones(n_states), size=(n_states, n_actions))
    R = rng.normal(size=(n_states, n_actions))
    pi = rng.dirichlet(np.ones(n_actions), size=n_states)
    return P, R, pi


def _as_fractions(x: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda value: Fraction(value).limit_denominator(1000), otypes=[object])(x)


def test_policy_values_solve_the_bellman_expectation_equation(rng):
    P, R, pi = _mdp(rng)
    values = impl.policy_state_values(P, R, pi, 0.9)
    np.testing.assert_allclose(impl.bellman_expectation_operator(P, R, pi, values, 0.9), values, rtol=1e-12)
    np.testing.assert_allclose((pi * impl.policy_action_values(P, R, pi, 0.9)).sum(axis=1), values, rtol=1e-12)


def test_exact_and_float_policy_evaluation_agree(rng):
    P, R, pi = _mdp(rng, 3, 2)
    exact_P = _as_fractions(P)
    exact_P /= exact_P.sum(axis=-1, keepdims=True)
    exact_pi = _as_fractions(pi)
    exact_pi /= exact_pi.sum(axis=-1, keepdims=True)
    exact = impl.policy_state_values(exact_P, _as_fractions(R), exact_pi, Fraction(9, 10))
    assert all(isinstance(x, Fraction) for x in exact)
    approximate = impl.policy_state_values(exact_P.astype(float), _as_fractions(R).astype(float),
                                           exact_pi.astype(float), 0.9)
    np.testing.assert_allclose(exact.astype(float), approximate, rtol=1e-12)


def test_value_iteration_approaches_the_value_of_its_greedy_policy(rng):
    P, R, _ = _mdp(rng)
    values = impl.value_iteration(P, R, 0.8, 200)
    greedy = np.eye(R.shape[1])[impl.greedy_policy(P, R, values, 0.8)]
    np.testing.assert_allclose(impl.policy_state_values(P, R, greedy, 0.8), values, atol=1e-12)
    np.testing.assert_allclose(impl.bellman_optimality_operator(P, R, values, 0.8), values, atol=1e-12)


def test_value_iteration_starts_from_the_given_values(rng):
    P, R, _ = _mdp(rng)
    start = rng.normal(size=len(R))
    np.testing.assert_array_equal(impl.value_iteration(P, R, 0.9, 0, start), start)
    np.testing.assert_array_equal(impl.value_iteration(P, R, 0.9, 1, start),
                                  impl.bellman_optimality_operator(P, R, start, 0.9))


def test_an_absorbing_zero_reward_state_has_value_zero():
    P = np.zeros((2, 1, 2), dtype=int).astype(object)
    P[0, 0, 1] = P[1, 0, 1] = 1
    R = np.array([[Fraction(3)], [Fraction(0)]], dtype=object)
    values = impl.policy_state_values(P, R, np.ones((2, 1), dtype=int).astype(object), Fraction(1, 2))
    assert list(values) == [3, 0]


def test_a_singular_exact_system_is_reported():
    P = np.ones((1, 1, 1), dtype=int).astype(object)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        impl.policy_state_values(P, np.array([[Fraction(1)]], dtype=object), np.ones((1, 1), dtype=int), 1)


def test_value_loss_gradient_matches_central_differences(rng):
    v_t, target_t = rng.normal(size=6), rng.normal(size=6)
    gradient = impl.squared_error_value_loss_grad(v_t, target_t)
    step = 1e-6
    for i in range(6):
        up, down = v_t.copy(), v_t.copy()
        up[i] += step
        down[i] -= step
        numeric = (impl.squared_error_value_loss(up, target_t) - impl.squared_error_value_loss(down, target_t)) / (
            2 * step)
        assert gradient[i] == pytest.approx(numeric, abs=1e-8)


def _corridor() -> dict[str, np.ndarray]:
    P = np.zeros((3, 2, 3))
    P[0, 0, 0] = P[0, 1, 1] = P[1, 0, 0] = P[1, 1, 2] = P[2, :, 2] = 1
    R = np.array([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    return {"P": P, "R": R, "terminal": np.array([False, False, True]), "rho_0": np.array([1.0, 0.0, 0.0])}


def test_rollout_has_time_first_arrays_and_cuts_the_last_step(rng):
    mdp = _corridor()
    rollout = impl.collect_rollout(np.zeros((3, 2)), np.arange(3.0), mdp["P"], mdp["R"], mdp["terminal"],
                                   mdp["rho_0"], 4, 10, 5, rng)
    assert rollout.a_t.shape == rollout.trace_cut_t.shape == (10, 5)
    assert np.all(rollout.trace_cut_t[-1] == 1)
    assert np.all(rollout.trace_cut_t >= rollout.terminated_t)
    np.testing.assert_array_equal(rollout.v_tp1, rollout.s_tp1.astype(float))
    np.testing.assert_allclose(rollout.log_pi_old_t, np.log(0.5))


def test_iteration_with_zero_step_sizes_changes_nothing(rng):
    mdp = _corridor()
    theta, phi = rng.normal(size=(3, 2)), rng.normal(size=3)
    rollout = impl.collect_rollout(theta, phi, mdp["P"], mdp["R"], mdp["terminal"], mdp["rho_0"], 4, 10, 5, rng)
    theta_next, phi_next = impl.actor_critic_iteration(theta, phi, rollout, 0.9, 0.95, 0.0, 0.0)
    np.testing.assert_array_equal(theta_next, theta)
    np.testing.assert_array_equal(phi_next, phi)

"""impl.mdp, the REINFORCE estimator and the tabular softmax score, against finite differences."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import impl
from verifiers._numeric import central_difference


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261130)


def random_mdp(rng: np.random.Generator, n_states: int, n_actions: int, *, policy_dependent: bool = False
               ) -> impl.TabularMDP:
    """An MDP with Dirichlet(1) transition rows and initial distribution and rewards uniform on [0, 1).

    Args:
      rng: the source of randomness.
      n_states: S >= 1.
      n_actions: A >= 1.
      policy_dependent: also draw ``P_alt``, making the dynamics depend on θ.
    """

    def kernel() -> np.ndarray:
        return rng.dirichlet(np.ones(n_states), size=(n_states, n_actions))

    P, R, rho = kernel(), rng.random((n_states, n_actions)), rng.dirichlet(np.ones(n_states))
    return impl.TabularMDP(P, R, rho, kernel() if policy_dependent else None)



def test_random_mdp_holds_distributions(rng):
    mdp = random_mdp(rng, 3, 2, policy_dependent=True)
    for kernel in (mdp.P, mdp.P_alt):
        assert kernel.shape == (3, 2, 3)
        np.testing.assert_allclose(kernel.sum(axis=-1), 1)
    np.testing.assert_allclose(mdp.rho.sum(), 1)
    assert mdp.R.shape == (3, 2) and np.all((mdp.R >= 0) & (mdp.R < 1))
    assert random_mdp(rng, 3, 2).P_alt is None


def test_transition_kernel_mixes_with_the_probability_of_action_zero(rng):
    mdp = random_mdp(rng, 2, 3, policy_dependent=True)
    pi = impl.softmax(rng.normal(size=(2, 3)))
    kernel = impl.transition_kernel(mdp, pi)
    np.testing.assert_allclose(kernel[1], (1 - pi[1, 0]) * mdp.P[1] + pi[1, 0] * mdp.P_alt[1])
    np.testing.assert_allclose(kernel.sum(axis=-1), 1)


def test_enumeration_is_a_distribution_and_exact_for_fractions():
    half, quarter = Fraction(1, 2), Fraction(1, 4)
    P = np.array([[[half, half], [quarter, 1 - quarter]], [[1, 0], [0, 1]]], dtype=object)
    mdp = impl.TabularMDP(P, np.array([[1, 0], [0, 2]], dtype=object), np.array([half, half], dtype=object))
    pi = np.array([[quarter, 1 - quarter], [half, half]], dtype=object)
    paths = impl.enumerate_trajectories(mdp, pi, 2)
    assert paths.s_t.shape == (3, 32) and paths.a_t.shape == (2, 32) and paths.r_t.shape == (2, 32)
    assert paths.probability.sum() == 1
    assert list(paths.s_t[:, 0]) == [0, 0, 0] and list(paths.a_t[:, 0]) == [0, 0]
    assert paths.probability[0] == half * quarter * half * quarter * half


@pytest.mark.parametrize("policy_dependent", [False, True])
@pytest.mark.parametrize("gamma", [1.0, 0.6])
def test_objective_gradient_matches_finite_differences(rng, policy_dependent, gamma):
    mdp = random_mdp(rng, 2, 3, policy_dependent=policy_dependent)
    theta = rng.normal(size=(2, 3))
    numeric = central_difference(lambda x: impl.objective(mdp, x, 3, gamma), theta, 1e-5)
    np.testing.assert_allclose(impl.objective_gradient(mdp, theta, 3, gamma), numeric, atol=1e-9)


@pytest.mark.parametrize("policy_dependent", [False, True])
def test_trajectory_score_is_the_derivative_of_the_log_probability(rng, policy_dependent):
    mdp = random_mdp(rng, 2, 2, policy_dependent=policy_dependent)
    theta = rng.normal(size=(2, 2))
    paths = impl.enumerate_trajectories(mdp, impl.softmax(theta), 2)

    def log_probability(x: np.ndarray, m: int) -> float:
        return float(np.log(impl.enumerate_trajectories(mdp, impl.softmax(x), 2).probability[m]))

    score = impl.trajectory_score(mdp, theta, paths.s_t, paths.a_t)
    for m in range(0, len(paths.probability), 5):
        numeric = central_difference(lambda x, m=m: log_probability(x, m), theta, 1e-5)
        np.testing.assert_allclose(score[m], numeric, atol=1e-8)
    policy_sum = impl.tabular_softmax_score(theta, paths.s_t[:-1], paths.a_t).sum(axis=0)
    assert np.allclose(score, policy_sum) != policy_dependent


def test_tabular_score_moves_only_the_visited_row(rng):
    theta = rng.normal(size=(3, 4))
    score = impl.tabular_softmax_score(theta, np.array([2, 0]), np.array([1, 3]))
    assert score.shape == (2, 3, 4)
    np.testing.assert_array_equal(score[0, 2], impl.softmax_score(theta[2], 1))
    np.testing.assert_array_equal(score[0, :2], 0)
    np.testing.assert_array_equal(score[1, 0], impl.softmax_score(theta[0], 3))


def test_reinforce_gradient_sums_over_time_and_averages_over_trajectories(rng):
    w_t, score_t = rng.normal(size=(4, 5)), rng.normal(size=(4, 5, 2, 3))
    expected = sum(w_t[t, i] * score_t[t, i] for t in range(4) for i in range(5)) / 5
    np.testing.assert_allclose(impl.reinforce_gradient(w_t, score_t), expected, rtol=1e-13)
    per_trajectory = impl.reinforce_gradient(w_t[..., None], score_t[:, :, None])
    np.testing.assert_allclose(per_trajectory.mean(axis=0), expected, rtol=1e-13)


def test_sampled_trajectories_follow_the_enumerated_distribution(rng):
    mdp = random_mdp(rng, 2, 2, policy_dependent=True)
    theta = rng.normal(size=(2, 2))
    n = 200_000
    sampled = impl.sample_trajectories(rng, mdp, theta, 2, n)
    assert sampled.s_t.shape == (3, n) and sampled.a_t.shape == (2, n) and sampled.probability is None
    np.testing.assert_array_equal(sampled.r_t, mdp.R[sampled.s_t[:-1], sampled.a_t])
    paths = impl.enumerate_trajectories(mdp, impl.softmax(theta), 2)

    def codes(s: np.ndarray, a: np.ndarray) -> np.ndarray:
        return s[0] + 2 * (a[0] + 2 * (s[1] + 2 * (a[1] + 2 * s[2])))

    frequency = np.bincount(codes(sampled.s_t, sampled.a_t), minlength=32) / n
    probability = np.zeros(32)
    probability[codes(paths.s_t, paths.a_t)] = paths.probability
    # Five standard deviations of a binomial frequency: a false failure has probability below 1e-5.
    assert np.all(np.abs(frequency - probability) <= 5 * np.sqrt(probability * (1 - probability) / n) + 1e-12)


def test_reinforce_expectation_over_enumeration_is_the_objective_gradient(rng):
    mdp = random_mdp(rng, 2, 2)
    theta = rng.normal(size=(2, 2))
    paths = impl.enumerate_trajectories(mdp, impl.softmax(theta), 3)
    score_t = impl.tabular_softmax_score(theta, paths.s_t[:-1], paths.a_t)
    importance = paths.probability * len(paths.probability)
    for weights in (impl.full_return_weights, impl.discounted_objective_weights):
        expectation = impl.reinforce_gradient(weights(paths.r_t, 0.8) * importance, score_t)
        np.testing.assert_allclose(expectation, impl.objective_gradient(mdp, theta, 3, 0.8), atol=1e-13)

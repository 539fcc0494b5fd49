"""PPO's objectives, their analytic gradients, the diagnostics and the loss, by identities and finite differences."""

from __future__ import annotations

import re
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import impl
from verifiers._numeric import central_difference


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)



def test_ratio_is_one_at_the_old_policy_and_the_probability_quotient_elsewhere(rng):
    log_old = np.log(rng.uniform(0.01, 1, 50))
    assert np.all(impl.probability_ratios(log_old, log_old) == 1.0)
    log_new = np.log(rng.uniform(0.01, 1, 50))
    np.testing.assert_allclose(impl.probability_ratios(log_new, log_old), np.exp(log_new) / np.exp(log_old),
                               rtol=1e-13)


def test_surrogate_gradient_is_its_derivative_in_log_probabilities(rng):
    log_old, advantages = np.log(rng.uniform(0.05, 1, 12)), rng.normal(size=12)
    log_new = log_old + rng.normal(scale=0.3, size=12)

    def objective(log_pi):
        return impl.surrogate_objective(impl.probability_ratios(log_pi, log_old), advantages).sum()

    numeric = central_difference(objective, log_new, 1e-6)
    analytic = impl.surrogate_objective_grad(impl.probability_ratios(log_new, log_old), advantages)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-7, atol=1e-10)


def test_clipped_gradient_is_its_derivative_away_from_the_kinks(rng):
    epsilon = 0.2
    log_old, advantages = np.log(rng.uniform(0.05, 1, 40)), rng.normal(size=40)
    log_new = log_old + rng.normal(scale=0.4, size=40)
    ratio = impl.probability_ratios(log_new, log_old)
    assert np.all(np.abs(np.abs(ratio - 1) - epsilon) > 1e-4), "a ratio too close to a kink for differencing"

    def objective(log_pi):
        return impl.ppo_clip_objective(impl.probability_ratios(log_pi, log_old), advantages, epsilon).sum()

    numeric = central_difference(objective, log_new, 1e-6)
    analytic = impl.ppo_clip_objective_grad(ratio, advantages, epsilon)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-7, atol=1e-10)
    assert np.any(analytic == 0) and np.any(analytic != 0)


def test_clipped_objective_equals_the_surrogate_inside_the_interval(rng):
    ratio = rng.uniform(0.81, 1.19, 30)
    advantages = rng.normal(size=30)
    np.testing.assert_array_equal(impl.ppo_clip_objective(ratio, advantages, 0.2), ratio * advantages)
    assert not impl.clip_active(ratio, advantages, 0.2).any()
    np.testing.assert_array_equal(impl.ppo_clip_objective(ratio, advantages, 0.2),
                                  impl.surrogate_objective(ratio, advantages))


def test_four_cases_in_exact_arithmetic():
    epsilon = Fraction(1, 5)
    ratio = np.array([Fraction(3, 2), Fraction(7, 10), Fraction(7, 10), Fraction(3, 2)], dtype=object)
    advantage = np.array([Fraction(2), Fraction(2), Fraction(-2), Fraction(-2)], dtype=object)
    assert list(impl.ppo_clip_objective(ratio, advantage, epsilon)) == [
        Fraction(12, 5), Fraction(7, 5), Fraction(-8, 5), Fraction(-3)]
    assert list(impl.ppo_clip_objective_grad(ratio, advantage, epsilon)) == [0, Fraction(7, 5), 0, Fraction(-3)]
    diagnostics = impl.ratio_clip_diagnostics(ratio, advantage, epsilon)
    assert (diagnostics.outside_fraction, diagnostics.active_fraction) == (1, 0.5)


def test_ratio_on_the_interval_boundary_takes_the_unclipped_branch():
    ratio, advantage = np.array([1.25, 0.75]), np.array([1.0, -1.0])
    assert not impl.clip_active(ratio, advantage, 0.25).any()
    np.testing.assert_array_equal(impl.ppo_clip_objective_grad(ratio, advantage, 0.25), ratio * advantage)


def test_entropy_gradient_is_its_derivative(rng):
    logits = rng.normal(scale=2, size=(6, 4))
    numeric = central_difference(lambda z: impl.categorical_entropy(z).sum(), logits, 1e-6)
    np.testing.assert_allclose(impl.categorical_entropy_grad(logits), numeric, rtol=1e-6, atol=1e-9)


def test_entropy_of_uniform_and_deterministic_policies():
    assert impl.categorical_entropy(np.zeros(4)) == pytest.approx(np.log(4))
    assert impl.categorical_entropy(np.array([50.0, 0.0, 0.0])) == pytest.approx(0, abs=1e-18)


def test_value_loss_and_total_loss_compose():
    values, targets = np.array([1.0, 2.0, 4.0]), np.array([0.0, 2.0, 1.0])
    assert impl.squared_error_value_loss(values, targets) == pytest.approx((1 + 0 + 9) / 6)
    assert impl.ppo_total_loss(0.5, 2.0, 0.7, 0.25, 0.1) == pytest.approx(-0.5 + 0.5 - 0.07)


def test_k1_and_k3_on_a_ratio_above_one():
    log_ratio = np.log(np.array([2.0]))
    assert impl.kl_k1(log_ratio)[0] < 0 < impl.kl_k3(log_ratio)[0]


def test_sample_categorical_frequencies_match_probabilities(rng):
    probabilities = np.tile([0.2, 0.5, 0.3], (60000, 1))
    counts = np.bincount(impl.sample_categorical(rng, probabilities), minlength=3) / 60000
    np.testing.assert_allclose(counts, [0.2, 0.5, 0.3], atol=0.01)


def test_explained_variance_of_perfect_and_constant_critics(rng):
    target = rng.normal(size=100)
    assert impl.explained_variance(target, target) == 1.0
    assert impl.explained_variance(np.full(100, target.mean()), target) == pytest.approx(0.0, abs=1e-12)


def test_a_short_training_run_is_finite_and_reports_every_diagnostic():
    config = impl.PPOConfig(total_env_steps=1024, eval_every=2, eval_episodes=3)
    run = impl.train_ppo_cartpole(config, 0, impl)
    assert set(run.diagnostics) == set(impl.ppo_cartpole.DIAGNOSTICS)
    assert all(values.shape == (config.n_iterations,) for values in run.diagnostics.values())
    for name in ("value_loss", "entropy", "kl_k3", "grad_norm", "advantage_std", "loss"):
        assert np.all(np.isfinite(run.diagnostics[name])), name
    assert np.isnan(run.diagnostics["eval_return"][0]) and np.isfinite(run.diagnostics["eval_return"][1])
    assert np.all(run.diagnostics["kl_k3"] >= 0)
    assert np.all(run.diagnostics["clip_active_fraction"] <= run.diagnostics["ratio_outside_fraction"])


def test_training_is_reproducible_from_the_seed():
    config = impl.PPOConfig(total_env_steps=512, eval_every=0, eval_episodes=2)
    first, second = (impl.train_ppo_cartpole(config, 7, impl) for _ in range(2))
    for name in ("value_loss", "kl_k3", "eval_return", "grad_norm"):
        np.testing.assert_array_equal(first.diagnostics[name], second.diagnostics[name])


def test_truncation_bootstraps_from_the_final_observation():
    """The loop hands GAE V(final observation) at a truncation, terminated = 0 and a cut trace."""
    seen = {}

    class Recorder:
        def __getattr__(self, name):
            return getattr(impl, name)

        @staticmethod
        def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
            seen.update(v_tp1=v_tp1.copy(), terminated=terminated_t.copy(), trace_cut=trace_cut_t.copy())
            return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_)

        class VectorCartPole(impl.VectorCartPole):
            """Every episode is truncated after 5 steps, never terminated."""

            def step(self, action):
                self.state[:] = 0.0
                self.elapsed_steps += 1
                truncated = self.elapsed_steps >= 5
                final = self.observation() + 1.0
                self.elapsed_steps[truncated] = 0
                return impl.VectorStep(self.observation(), np.ones(self.n_envs), np.zeros(self.n_envs, bool),
                                       truncated, final)

    config = impl.PPOConfig(total_env_steps=16, n_envs=2, n_steps=8, n_minibatches=1, n_epochs=1, eval_every=0)
    impl.train_ppo_cartpole(config, 0, Recorder())
    truncated_rows = np.arange(8) % 5 == 4
    np.testing.assert_array_equal(seen["trace_cut"][:, 0], truncated_rows)
    assert not seen["terminated"].any()
    # The final observation (all ones) has a different value from the reset one (all zeros).
    assert np.all(seen["v_tp1"][truncated_rows] != seen["v_tp1"][~truncated_rows][0])


@pytest.mark.parametrize("recompute", [False, True])
def test_recomputing_the_old_log_probabilities_makes_every_ratio_of_the_loss_one(recompute):
    """The switch of step 4.4.5's experiment: with it, π_old is the policy being updated, in every minibatch."""
    loss_ratios = []

    class Recorder:
        def __getattr__(self, name):
            return getattr(impl, name)

        @staticmethod
        def ppo_clip_objective(ratio, advantages, epsilon):
            loss_ratios.append(np.asarray(ratio).copy())
            return impl.ppo_clip_objective(ratio, advantages, epsilon)

    config = impl.PPOConfig(total_env_steps=256, eval_every=0, eval_episodes=0, recompute_old_log_probs=recompute)
    run = impl.train_ppo_cartpole(config, 0, Recorder())
    assert len(loss_ratios) == config.n_epochs * config.n_minibatches
    ratios = np.concatenate(loss_ratios)
    assert np.all(ratios == 1.0) == recompute
    # Either way the diagnostics measure the update against the rollout's stored policy: it moved.
    assert run.diagnostics["kl_k3"][0] > 0


FIXTURES = Path(__file__).resolve().parent / "fixtures"
PROJECT = Path(__file__).resolve().parents[1]


def test_an_implementation_with_flipped_advantages_fails_the_training_claim(pytester):
    """The smoke experiment of ``ppo-trains-cartpole`` run with ``--claims-impl flipped_advantage``."""
    (pytester.path / "claims").mkdir()
    shutil.copy(PROJECT / "claims" / "4.4-ppo.yaml", pytester.path / "claims")
    shutil.copy(PROJECT / "Module_4_Sources.md", pytester.path)
    pytester.syspathinsert(FIXTURES)
    result = pytester.runpytest_inprocess("claims", "-p", "no:cacheprovider", "--claims-impl", "flipped_advantage",
                                          "-k", "ppo-trains-cartpole and experiment")
    result.assert_outcomes(failed=1, skipped=1)
    assert re.search(r"FAILED median_final_return: expected at least 100, observed \d", result.stdout.str())
    assert "implementation 'flipped_advantage'" in result.stdout.str()

"""The vectorized CartPole: against Gymnasium's CartPole-v1 side by side, and the claims that turn wrong ones red."""

from __future__ import annotations

import dataclasses
import sys
import types

import numpy as np
import pytest
from conftest import course_entry

import impl
import impl.cartpole
from claims_harness import lookup
from claims_harness.engine import RunOptions, close_hosts, run_check
from impl.cartpole import MAX_EPISODE_STEPS, RESET_BOUND, THETA_THRESHOLD, X_THRESHOLD

TIME_LIMIT_CLAIM = "cartpole-time-limit-is-truncation"
DETAIL_CLAIM = "implementation-details-change-results"
# The checks of cartpole-time-limit-is-truncation, in the claim file's order.
EQUATIONS, FROM_RESET, GYMNASIUM = 0, 1, 2


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


@pytest.fixture
def gymnasium():
    return pytest.importorskip("gymnasium", reason="gymnasium is not installed: pip install -e '.[gym]'")


@pytest.fixture
def gym_env(gymnasium):
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    yield env
    env.close()


def _gym_step_from(env, state: np.ndarray, elapsed: int, action: int):
    """Gymnasium's CartPole-v1 (TimeLimit included) stepped once from ``state`` after ``elapsed`` steps."""
    env.unwrapped.state = state.copy()
    env.unwrapped.steps_beyond_terminated = None
    env._elapsed_steps = elapsed  # the TimeLimit wrapper's counter, reached through the wrapper chain
    observation, reward, terminated, truncated, _ = env.step(action)
    return env.unwrapped.state, observation, reward, terminated, truncated


def _random_states(rng: np.random.Generator, n: int) -> np.ndarray:
    """States inside and around the termination bounds, some exactly on them."""
    states = rng.uniform([-2.6, -4.0, -0.25, -4.0], [2.6, 4.0, 0.25, 4.0], size=(n, 4))
    states[: n // 10, 0] = rng.choice([-X_THRESHOLD, X_THRESHOLD], n // 10)
    states[n // 10: n // 5, 2] = rng.choice([-THETA_THRESHOLD, THETA_THRESHOLD], n // 10)
    return states


def test_one_step_equals_gymnasium_bit_for_bit_with_flags(rng, gym_env):
    n = 3000
    states = _random_states(rng, n)
    actions = rng.integers(0, 2, size=n)
    elapsed = rng.integers(MAX_EPISODE_STEPS - 3, MAX_EPISODE_STEPS, size=n)
    env = impl.VectorCartPole(n, np.random.default_rng(1))
    env.state, env.elapsed_steps = states.copy(), elapsed.copy()
    step = env.step(actions)
    next_states = impl.cartpole_dynamics(states, actions)
    for i in range(n):
        gym_state, gym_observation, reward, terminated, truncated = _gym_step_from(
            gym_env, states[i], int(elapsed[i]), int(actions[i]))
        assert np.array_equal(gym_state, next_states[i]), (i, gym_state, next_states[i])
        assert np.array_equal(gym_observation, step.final_observation[i])
        assert gym_observation.dtype == step.final_observation.dtype == np.float32
        assert (reward, terminated, truncated) == (step.reward[i], step.terminated[i], step.truncated[i]), i
    assert step.terminated.any() and not step.terminated.all()
    assert step.truncated.any() and not step.truncated.all()
    assert (step.terminated & step.truncated).any()


def test_whole_episodes_equal_gymnasium(rng, gym_env):
    """Episodes from Gymnasium's own reset, one action sequence for both, to the end (any length up to 500)."""
    for episode in range(20):
        observation, _ = gym_env.reset(seed=episode)
        env = impl.VectorCartPole(1, np.random.default_rng(episode))
        env.state = gym_env.unwrapped.state.copy()[None, :]
        assert np.array_equal(env.observation()[0], observation)
        # A slightly greedy controller keeps some episodes alive to the time limit.
        for t in range(MAX_EPISODE_STEPS):
            theta, theta_dot = env.state[0, 2], env.state[0, 3]
            action = int(theta + 0.5 * theta_dot > 0) if rng.random() < 0.9 + 0.1 * (episode % 2) else int(
                rng.integers(2))
            gym_observation, gym_reward, gym_terminated, gym_truncated, _ = gym_env.step(action)
            step = env.step(np.array([action]))
            assert np.array_equal(step.final_observation[0], gym_observation), (episode, t)
            assert (gym_reward, gym_terminated, gym_truncated) == (
                step.reward[0], step.terminated[0], step.truncated[0]), (episode, t)
            if gym_terminated or gym_truncated:
                assert t + 1 == MAX_EPISODE_STEPS or gym_terminated
                break
            assert np.array_equal(env.state[0], gym_env.unwrapped.state)


def test_some_episodes_reach_the_time_limit_as_truncation():
    env = impl.VectorCartPole(4, np.random.default_rng(3))
    for _ in range(MAX_EPISODE_STEPS):
        theta, theta_dot = env.state[:, 2], env.state[:, 3]
        step = env.step((theta + 0.5 * theta_dot > 0).astype(int))
        assert not step.terminated.any()
    assert step.truncated.all() and not step.terminated.any()
    assert np.all(np.abs(step.observation) <= RESET_BOUND)
    assert np.all(env.elapsed_steps == 0)


def test_reset_is_uniform_in_the_reset_range(rng):
    states = impl.cartpole_reset_states(rng, 20000)
    assert states.min() >= -RESET_BOUND and states.max() < RESET_BOUND
    np.testing.assert_allclose(states.mean(axis=0), 0, atol=0.002)
    np.testing.assert_allclose(states.std(axis=0), 2 * RESET_BOUND / np.sqrt(12), rtol=0.02)


# --------------------------------------------------------------------------- the claims against wrong environments


def _statuses(claim_id: str, implementation: str, checks: list[int], profile: str = "smoke") -> list[str]:
    entry = course_entry(claim_id)
    options = RunOptions(impl=implementation, profile=profile)
    close_hosts()  # the implementation runs in a host forked from this process: fork it anew, as the test patched it
    return [run_check(entry, i, lookup(entry.claim.checks[i].verifier), options).status for i in checks]


def _variant(monkeypatch: pytest.MonkeyPatch, name: str, **replaced: object) -> str:
    """A module named ``name``: impl with the given names replaced, importable while the test runs."""
    module = types.ModuleType(name)
    module.__dict__.update({attribute: getattr(impl, attribute) for attribute in impl.__all__}, **replaced)
    monkeypatch.setitem(sys.modules, name, module)
    return name


class _TimeLimitAsTermination(impl.VectorCartPole):
    """Reports the time limit as a termination, as a single done flag would."""

    def step(self, action):
        step = super().step(action)
        return step._replace(terminated=step.terminated | step.truncated, truncated=np.zeros_like(step.truncated))


class _TimeLimitAlsoTerminates(impl.VectorCartPole):
    """Sets terminated wherever it truncates, and keeps truncated too."""

    def step(self, action):
        step = super().step(action)
        return step._replace(terminated=step.terminated | step.truncated)


class _StepCountNeverRestarts(impl.VectorCartPole):
    """Counts steps since the environment was made, not since its last reset."""

    def step(self, action):
        elapsed = self.elapsed_steps + 1
        step = super().step(action)
        self.elapsed_steps = elapsed
        return step


def _semi_implicit_dynamics(state, action):
    """Gymnasium's other integrator: velocities first, then positions from the new velocities."""
    euler = impl.cartpole_dynamics(state, action)
    state = np.asarray(state, dtype=np.float64)
    euler[:, 0] = state[:, 0] + impl.cartpole.TIME_STEP * euler[:, 1]
    euler[:, 2] = state[:, 2] + impl.cartpole.TIME_STEP * euler[:, 3]
    return euler


def test_the_reference_environment_passes_every_check(gymnasium):
    assert _statuses(TIME_LIMIT_CLAIM, "impl", [EQUATIONS, FROM_RESET]) == ["passed", "passed"]
    assert _statuses(TIME_LIMIT_CLAIM, "impl", [GYMNASIUM], profile="full") == ["passed"]


def test_a_cartpole_with_gravity_20_fails_the_equations_of_motion(monkeypatch):
    monkeypatch.setattr(impl.cartpole, "GRAVITY", 20.0)
    assert _statuses(TIME_LIMIT_CLAIM, "impl", [EQUATIONS]) == ["failed"]


def test_a_cartpole_with_gravity_20_fails_the_comparison_with_gymnasium(monkeypatch, gymnasium):
    monkeypatch.setattr(impl.cartpole, "GRAVITY", 20.0)
    assert _statuses(TIME_LIMIT_CLAIM, "impl", [GYMNASIUM], profile="full") == ["failed"]


def test_the_semi_implicit_euler_step_fails_the_equations_of_motion(monkeypatch):
    monkeypatch.setattr(impl.cartpole, "cartpole_dynamics", _semi_implicit_dynamics)
    assert _statuses(TIME_LIMIT_CLAIM, "impl", [EQUATIONS]) == ["failed"]


@pytest.mark.parametrize("wrong", [
    pytest.param({"time_limit": 200}, id="time limit 200"),
    pytest.param({"VectorCartPole": _TimeLimitAsTermination}, id="time limit as termination"),
    pytest.param({"VectorCartPole": _TimeLimitAlsoTerminates}, id="terminated set at the time limit"),
    pytest.param({"VectorCartPole": _StepCountNeverRestarts}, id="step count never restarts"),
])
def test_a_wrong_time_limit_fails_the_episodes_from_reset(wrong, monkeypatch):
    if "time_limit" in wrong:
        monkeypatch.setattr(impl.cartpole, "MAX_EPISODE_STEPS", wrong["time_limit"])
        implementation = "impl"
    else:
        implementation = _variant(monkeypatch, "cartpole_wrong_time_limit", **wrong)
    assert _statuses(TIME_LIMIT_CLAIM, implementation, [FROM_RESET]) == ["failed"]


@pytest.mark.parametrize("wrong", [
    pytest.param({"time_limit": 200}, id="time limit 200"),
    pytest.param({"VectorCartPole": _TimeLimitAsTermination}, id="time limit as termination"),
    pytest.param({"VectorCartPole": _TimeLimitAlsoTerminates}, id="terminated set at the time limit"),
    pytest.param({"VectorCartPole": _StepCountNeverRestarts}, id="step count never restarts"),
])
def test_a_wrong_time_limit_fails_the_comparison_with_gymnasium(wrong, monkeypatch, gymnasium):
    if "time_limit" in wrong:
        monkeypatch.setattr(impl.cartpole, "MAX_EPISODE_STEPS", wrong["time_limit"])
        implementation = "impl"
    else:
        implementation = _variant(monkeypatch, "cartpole_wrong_time_limit", **wrong)
    assert _statuses(TIME_LIMIT_CLAIM, implementation, [GYMNASIUM], profile="full") == ["failed"]


def test_without_gymnasium_the_full_profile_comparison_is_an_error_that_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # import gymnasium now raises ImportError
    entry = course_entry(TIME_LIMIT_CLAIM)
    check = entry.claim.checks[GYMNASIUM]
    assert check.profiles == ["full"]
    result = run_check(entry, GYMNASIUM, lookup(check.verifier), RunOptions(profile="full"))
    assert result.status == "error"
    assert "gymnasium is not installed" in result.error and "pip install -e '.[gym]'" in result.error


# --------------------------------------------------------------------------- step 4.4.5: one detail changed


@dataclasses.dataclass(frozen=True)
class _AlwaysRecomputingConfig(impl.PPOConfig):
    """A loop whose default already takes the old log-probabilities from the policy being updated."""

    recompute_old_log_probs: bool = True


def test_the_detail_experiment_passes_for_the_reference_and_fails_when_the_detail_is_already_wrong(monkeypatch):
    entry = course_entry(DETAIL_CLAIM)
    smoke = [i for i, check in enumerate(entry.claim.checks) if "smoke" in check.profiles]
    assert _statuses(DETAIL_CLAIM, "impl", smoke) == ["passed"]
    implementation = _variant(monkeypatch, "ppo_always_recomputing", PPOConfig=_AlwaysRecomputingConfig)
    assert _statuses(DETAIL_CLAIM, implementation, smoke) == ["failed"]

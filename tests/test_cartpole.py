"""The vectorized CartPole against Gymnasium's CartPole-v1, stepped side by side from the same states."""

from __future__ import annotations

import numpy as np
import pytest

import impl
from impl.cartpole import MAX_EPISODE_STEPS, RESET_BOUND, THETA_THRESHOLD, X_THRESHOLD

gymnasium = pytest.importorskip("gymnasium")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261129)


@pytest.fixture
def gym_env():
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


def test_some_episodes_reach_the_time_limit_as_truncation(gym_env):
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

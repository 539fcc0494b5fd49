"""CartPole, vectorized over environments in NumPy, with Gymnasium CartPole-v1's dynamics.

The constants, the explicit Euler step and the termination test are those of Gymnasium's
``CartPoleEnv`` (itself after Barto, Sutton and Anderson, 1983), written with the same float64
operations in the same order so that states agree bit for bit; the 500-step limit of
CartPole-v1's ``TimeLimit`` wrapper is reported as truncation, not termination. The module's
notebook calls this environment self-contained: it needs nothing beyond NumPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
HALF_POLE_LENGTH = 0.5
POLE_MASS_LENGTH = MASS_POLE * HALF_POLE_LENGTH
FORCE_MAGNITUDE = 10.0
TIME_STEP = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
MAX_EPISODE_STEPS = 500
RESET_BOUND = 0.05
OBSERVATION_SIZE = 4
N_ACTIONS = 2


def cartpole_dynamics(state: ArrayLike, action: ArrayLike) -> np.ndarray:
    """One explicit Euler step of the cart-pole equations of motion (Florian, 2007, eqs. 23-24).

    Args:
      state: (x, ẋ, θ, θ̇) per environment, shape [n_envs, 4], float64.
      action: 1 pushes the cart right and 0 left with force 10 N, shape [n_envs].

    Returns:
      the next state, shape [n_envs, 4], float64.
    """
    state = np.asarray(state, dtype=np.float64)
    x, x_dot, theta, theta_dot = state.T
    force = np.where(np.asarray(action) == 1, FORCE_MAGNITUDE, -FORCE_MAGNITUDE)
    cos_theta = np.cos(theta)
    sin_theta = np.sin(theta)
    temp = (force + POLE_MASS_LENGTH * np.square(theta_dot) * sin_theta) / TOTAL_MASS
    theta_acc = (GRAVITY * sin_theta - cos_theta * temp) / (
        HALF_POLE_LENGTH * (4.0 / 3.0 - MASS_POLE * np.square(cos_theta) / TOTAL_MASS))
    x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos_theta / TOTAL_MASS
    # x + τ ẋ, ẋ + τ ẍ, θ + τ θ̇, θ̇ + τ θ̈: each component the same two operations, on all four at once.
    return state + TIME_STEP * np.column_stack((x_dot, x_acc, theta_dot, theta_acc))


def cartpole_terminated(state: ArrayLike) -> np.ndarray:
    """Whether each state is beyond Gymnasium CartPole-v1's bounds, strictly: |x| > 2.4 or |θ| > 12°.

    The angle's bound is in radians, ``12 * 2 * math.pi / 360`` (``math.radians(12)``); a state exactly on a
    bound has not failed.

    Args:
      state: (x, ẋ, θ, θ̇) per environment, shape [n_envs, 4].

    Returns:
      One boolean per environment, shape [n_envs].
    """
    state = np.asarray(state)
    x, theta = state[:, 0], state[:, 2]
    return (x < -X_THRESHOLD) | (x > X_THRESHOLD) | (theta < -THETA_THRESHOLD) | (theta > THETA_THRESHOLD)


def cartpole_reset_states(rng: np.random.Generator, n_envs: int) -> np.ndarray:
    """Initial states, each component uniform in [-0.05, 0.05), shape [n_envs, 4]."""
    return rng.uniform(-RESET_BOUND, RESET_BOUND, size=(n_envs, OBSERVATION_SIZE))


class VectorStep(NamedTuple):
    """What one step of :class:`VectorCartPole` returns, one entry per environment.

    ``observation`` is already the first observation of a new episode where the episode ended;
    ``final_observation`` is the observation the step reached, before any reset, which is where
    a truncated episode must bootstrap from (module step 4.3.4).
    """

    observation: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_observation: np.ndarray


@dataclass
class VectorCartPole:
    """``n_envs`` CartPole-v1 environments stepped together, each reset as soon as it ends.

    Observations are float32, as Gymnasium returns them; the state itself stays float64.
    Every step earns +1, the step that terminates included.

    Args:
      n_envs: how many environments.
      rng: where each reset's initial state is drawn from.

    Returns:
      The environments. ``step(actions)`` (actions [n_envs] in {0, 1}) returns a :class:`VectorStep`; the
      attribute ``state`` [n_envs, 4] may be set directly to start every environment from a chosen state; the
      time limit is reached by stepping from the environment's own reset.
    """

    n_envs: int
    rng: np.random.Generator
    state: np.ndarray = field(init=False)
    elapsed_steps: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.state = cartpole_reset_states(self.rng, self.n_envs)
        self.elapsed_steps = np.zeros(self.n_envs, dtype=np.int64)

    def observation(self) -> np.ndarray:
        return self.state.astype(np.float32)

    def step(self, action: ArrayLike) -> VectorStep:
        self.state = cartpole_dynamics(self.state, action)
        self.elapsed_steps += 1
        terminated = cartpole_terminated(self.state)
        truncated = self.elapsed_steps >= MAX_EPISODE_STEPS
        final_observation = self.observation()
        ended = terminated | truncated
        if ended.any():
            self.state[ended] = cartpole_reset_states(self.rng, int(ended.sum()))
            self.elapsed_steps[ended] = 0
        return VectorStep(self.observation(), np.ones(self.n_envs), terminated, truncated, final_observation)

"""Stable-Baselines3 2.9.2 under the names of the implementation contract.

The advantage estimators here are SB3's own buffers, filled the way its algorithms fill them and
read back: nothing of GAE or of the n-step sums is written in this module. What the adapter does is
map the contract's arguments onto SB3's conventions.

- ``gae_advantages``: a ``RolloutBuffer`` of ``T`` steps and ``n_envs`` columns (one for a [T] input)
  and ``compute_returns_and_advantage``, SB3's PPO/A2C code. SB3 has one done flag per step, read as
  "the next row starts an episode": ``episode_starts[t + 1] = trace_cut_t[t]`` for t < T - 1, and the
  buffer's last row is closed by ``dones = trace_cut_t[T - 1]`` with ``last_values = v_tp1[T - 1]``. An
  ordinary step reads V(s_{t+1}) from the next row's ``values`` (the contract's domain guarantees that
  it is ``v_tp1[t]`` where the trace goes on). A done flag zeroes the bootstrap, so a truncation (a cut
  that is not a termination) is handed to SB3 the way its ``collect_rollouts`` does it: gamma times the
  value of the observation before the reset is added to that step's reward. SB3 starts every buffer
  with a zero advantage after its end, so ``carry=`` (the streaming form) is not accepted.
- ``discounted_returns``: the same buffer with all values 0, ``gae_lambda = 1`` and the last row done;
  SB3's docstring names this setting the Monte Carlo estimate, and its advantages are then the
  reward-to-go G_t. ``full_return_weights`` repeats G_0 = R(tau) over t.
- ``n_step_advantages``: an ``NStepReplayBuffer`` (SB3's n-step DQN/SAC buffer, ``n_steps = n``), one
  per column, filled in order with ``done = trace_cut_t`` and ``TimeLimit.truncated = trace_cut_t and
  not terminated_t``, and sampled at every index. Its observations are the step indices, so the
  sample's ``next_observations`` says which ``v_tp1`` the n-step target bootstraps from; the advantage is
  SB3's DQN target ``rewards + (1 - dones) * discounts * V(next) `` minus ``v_t``. SB3's buffer treats its
  newest row as a truncation unless it is done, which is the contract's "stopped at the fragment's end".
  Its sampling draws the column from NumPy's global generator (``np.random.randint``), which the
  adapter saves and puts back, so calling it consumes no global randomness.
- ``explained_variance``: ``stable_baselines3.common.utils.explained_variance`` on flattened arrays, as
  SB3's PPO calls it (it asserts 1-D input).
- ``categorical_entropy``, ``categorical_entropy_grad``, ``softmax_score``: SB3's
  ``CategoricalDistribution`` (the discrete-action head of its policies; a ``torch.distributions``
  Categorical underneath) on float64 tensors; the two gradients are torch's autograd of its ``entropy()``
  and of its ``log_prob(a)``.

Precision. SB3's buffers hold float32 (``np.zeros(..., dtype=np.float32)`` for rewards, values,
advantages, dones): every input is rounded to float32 on the way in and the arithmetic is float32. The
adapter does not hide this: ``gae_advantages`` and ``discounted_returns`` return the buffer's float32
arrays as they are, and ``n_step_advantages``, whose sums and discounts are the buffer's float32,
returns float32 too (a float64 array would carry float32's rounding without saying so). The harness
judges in float64, so such a result is an error naming the dtype, never a semantic failure. Exact
arithmetic is out of reach for the same reason: the module declines Fractions
(``__claims_exact_arithmetic__ = False``), and a check that passes them is judged by replay, in float64
(where SB3's float32 is an error naming the dtype), rather than rounded to float32 without a word.

What SB3 has but cannot be adapted without rewriting it: PPO's clipped loss, its clip fraction, its
approximate KL (k3) and its advantage normalisation are written inline in ``PPO.train()``, on
minibatches drawn from the buffer and followed by an optimiser step; there is no function of
(logp, logp_old, adv) to call. (Its normalisation uses ``torch.std``, Bessel-corrected, where the
contract's ``normalize_advantages`` divides by the population std.)

The module computes in NumPy (``__claims_array_library__``): the harness hands it NumPy arrays, and it
makes the tensors SB3's API takes itself.

    claims verify --claims-impl examples.sb3_rl --claims-report /tmp/report_sb3 --no-cache -n 1 \\
        -k "gae_advantages or n_step_advantages or explained_variance"
"""

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import NStepReplayBuffer, RolloutBuffer
from stable_baselines3.common.distributions import CategoricalDistribution
from stable_baselines3.common.utils import explained_variance as sb3_explained_variance

from impl import *  # noqa: F403  (every contract function SB3 has no counterpart of)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose
__claims_array_library__ = "numpy"  # SB3's buffers take NumPy arrays; the few tensors are made here
__claims_exact_arithmetic__ = False  # float32 buffers: a check in Fractions is skipped, not rounded

_OBSERVATION = spaces.Box(low=-np.inf, high=np.inf, shape=(1,), dtype=np.float32)
_ACTION = spaces.Discrete(2)


def _floats(x):
    """A float64 NumPy copy of ``x`` (never Fractions: the module declines them, ``__claims_exact_arithmetic__``)."""
    return np.array(x, dtype=np.float64)


def _columns(r_t, *others):
    """``r_t`` and the per-step arrays broadcast to its shape, each as [T, columns] float64."""
    rewards = _floats(r_t)
    steps = rewards.shape[0]
    return rewards.shape, [a.reshape(steps, -1) for a in
                           (rewards, *(np.array(np.broadcast_to(_floats(x), rewards.shape)) for x in others))]


def _rollout_advantages(rewards, values, episode_starts, last_values, dones, gamma, gae_lambda):
    """SB3's GAE: a RolloutBuffer filled row by row, then ``compute_returns_and_advantage``; all arrays [T, n]."""
    steps, n_envs = rewards.shape
    buffer = RolloutBuffer(steps, _OBSERVATION, _ACTION, device="cpu", gae_lambda=float(gae_lambda),
                           gamma=float(gamma), n_envs=n_envs)
    for t in range(steps):
        buffer.add(np.zeros((n_envs, 1), dtype=np.float32), np.zeros(n_envs), rewards[t], episode_starts[t],
                   th.as_tensor(values[t]), th.zeros(n_envs))
    buffer.compute_returns_and_advantage(th.as_tensor(last_values), dones)
    return buffer.advantages


# ----------------------------------------------------------------------------- lesson 4.1: returns


def discounted_returns(r_t, gamma):
    shape, (rewards,) = _columns(r_t)
    zeros = np.zeros_like(rewards)
    returns = _rollout_advantages(rewards, zeros, zeros, zeros[-1], np.ones(rewards.shape[1]), gamma, 1.0)
    return returns.reshape(shape)


def full_return_weights(r_t, gamma):
    returns = discounted_returns(r_t, gamma)
    return np.broadcast_to(returns[:1], returns.shape).copy()


# ----------------------------------------------------------------------------- lesson 4.3: GAE, n-step


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    shape, (rewards, values, next_values, terminated, cuts) = _columns(r_t, v_t, v_tp1, terminated_t, trace_cut_t)
    cut, truncated = cuts != 0, (cuts != 0) & (terminated == 0)
    # SB3's collect_rollouts: "rewards[idx] += self.gamma * terminal_value" where an episode was truncated.
    rewards = np.where(truncated, rewards + float(gamma) * next_values, rewards)
    episode_starts = np.zeros_like(rewards)
    episode_starts[1:] = cut[:-1]
    advantages = _rollout_advantages(rewards, values, episode_starts, next_values[-1], cut[-1], gamma, lambda_)
    return advantages.reshape(shape)


def n_step_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, n):
    shape, (rewards, values, next_values, terminated, cuts) = _columns(r_t, v_t, v_tp1, terminated_t, trace_cut_t)
    steps, columns = rewards.shape
    advantages = np.empty(rewards.shape, dtype=np.float32)  # the buffer's precision, said by the result's dtype
    state = np.random.get_state()  # SB3 picks the sampled column with np.random.randint
    try:
        for column in range(columns):
            buffer = NStepReplayBuffer(steps, _OBSERVATION, _ACTION, device="cpu", n_envs=1,
                                       handle_timeout_termination=True, n_steps=int(n), gamma=float(gamma))
            for t in range(steps):
                index = np.array([[t]], dtype=np.float32)
                truncated = bool(cuts[t, column] != 0 and terminated[t, column] == 0)
                buffer.add(index, index, np.zeros(1), rewards[t, column:column + 1], np.array([cuts[t, column] != 0]),
                           [{"TimeLimit.truncated": truncated}])
            sample = buffer._get_samples(np.arange(steps))
            bootstrap_from = sample.next_observations.numpy()[:, 0].astype(np.int64)
            bootstrap = th.as_tensor(next_values[bootstrap_from, column])[:, None]
            target = sample.rewards + (1 - sample.dones) * sample.discounts * bootstrap  # SB3's DQN target
            advantages[:, column] = target[:, 0].numpy() - values[:, column]
    finally:
        np.random.set_state(state)
    return advantages.reshape(shape)


def explained_variance(predicted, target):
    return sb3_explained_variance(np.asarray(predicted).reshape(-1), np.asarray(target).reshape(-1))


# ----------------------------------------------------------------------------- the policy's categorical head


def _categorical(logits):
    z = th.as_tensor(_floats(logits))
    rows = z.reshape(-1, z.shape[-1]).requires_grad_(True)
    return z.shape, rows, CategoricalDistribution(rows.shape[-1]).proba_distribution(rows)


def categorical_entropy(logits):
    shape, _, distribution = _categorical(logits)
    return distribution.entropy().detach().numpy().reshape(shape[:-1])


def categorical_entropy_grad(logits):
    shape, rows, distribution = _categorical(logits)
    (gradient,) = th.autograd.grad(distribution.entropy().sum(), rows)
    return gradient.numpy().reshape(shape)


def softmax_score(z, a):
    shape, rows, distribution = _categorical(z)
    actions = th.as_tensor(np.asarray(a, dtype=np.int64).reshape(-1))
    (gradient,) = th.autograd.grad(distribution.log_prob(actions).sum(), rows)
    return gradient.numpy().reshape(*np.shape(a), shape[-1])

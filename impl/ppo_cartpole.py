"""PPO on the self-contained CartPole of :mod:`impl.cartpole`: the module's notebook run (step 4.4.5).

One readable loop in the spirit of CleanRL's ``ppo.py`` (Huang et al., 2022): a dataclass of
hyperparameters, rollouts from vectorized environments, GAE with separate termination and
truncation masks (step 4.3.4), several epochs of shuffled minibatches on the loss
-L^CLIP + c_V L_V - c_H H (step 4.4.4), and the diagnostics of step 4.4.4 per iteration.

The loop does not import the functions it is built from: it receives them as ``ops``, the
``impl`` package or any module with the same functions (the harness passes its view of the
implementation under test), so a claim about this run tests whichever implementation is plugged in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cartpole import N_ACTIONS, OBSERVATION_SIZE


@dataclass(frozen=True)
class PPOConfig:
    """Hyperparameters of one PPO run on CartPole.

    Tuned for wall time on one CPU core, starting from RL Baselines3 Zoo's CartPole-v1 settings
    (8 environments of 32 steps, γ = 0.98, λ = 0.8, no entropy bonus, a linearly decayed step
    size, gradient-norm clipping at 0.5): 10 epochs of 2 minibatches instead of 20 epochs of one,
    a starting step size of 2e-3 instead of 1e-3, ε held at 0.2 instead of decayed, and 32-unit
    hidden layers instead of 64, whose matrix products stay below the size at which OpenBLAS
    splits work across threads (threads that only contend on a busy machine).
    """

    total_env_steps: int = 100_000
    """environment steps of training, summed over the parallel environments"""
    n_envs: int = 8
    """parallel environments of the rollout"""
    n_steps: int = 32
    """steps per environment in one rollout; the batch is n_envs * n_steps transitions"""
    n_epochs: int = 10
    """passes over each batch"""
    n_minibatches: int = 2
    """minibatches per pass"""
    shuffle_minibatches: bool = True
    """draw each pass's minibatches from a fresh permutation of the batch (else in the rollout's order)"""
    learning_rate: float = 2e-3
    """Adam's step size at the start"""
    anneal_learning_rate: bool = True
    """decay the step size linearly to zero over the run"""
    gamma: float = 0.98
    """discount γ"""
    gae_lambda: float = 0.8
    """GAE's λ"""
    clip_epsilon: float = 0.2
    """PPO's clipping parameter ε"""
    value_coef: float = 0.5
    """c_V, weight of the critic's loss"""
    entropy_coef: float = 0.0
    """c_H, weight of the entropy bonus"""
    max_grad_norm: float = 0.5
    """clip the global gradient norm to this"""
    normalize_advantages: bool = True
    """standardise the advantages within each minibatch"""
    recompute_old_log_probs: bool = False
    """recompute log π_old from the current policy at every minibatch (a bug: every ratio is 1; step 4.4.5)"""
    hidden: tuple[int, ...] = (32, 32)
    """widths of the tanh hidden layers of each head"""
    value_head_scale: float = 1.0
    """multiply the value head's initial output weights by this (1: the orthogonal initialisation's unit gain)"""
    eval_episodes: int = 10
    """episodes of the deterministic (greedy) evaluation (0: never evaluate)"""
    eval_every: int = 1
    """evaluate after every this many iterations (0: only at the end)"""
    solved_return: float = 475.0
    """an evaluation mean at least this counts as solved (Gymnasium's CartPole-v1 threshold)"""
    stop_when_solved: bool = False
    """end the run at the first solved evaluation"""

    @property
    def batch_size(self) -> int:
        return self.n_envs * self.n_steps

    @property
    def n_iterations(self) -> int:
        return self.total_env_steps // self.batch_size


DIAGNOSTICS = ("env_steps", "seconds", "episode_return", "episode_length", "loss", "value_loss", "explained_variance",
               "entropy", "ratio_outside_fraction", "clip_active_fraction", "kl_k3", "advantage_mean",
               "advantage_std", "grad_norm", "eval_return")


@dataclass
class PPORun:
    """The outcome of one run: per-iteration diagnostics, the final evaluation, when it was solved.

    ``diagnostics[name][i]`` is measured in iteration i. The clip fractions and k3 KL are those of
    the whole batch after the iteration's last epoch, i.e. how far the update moved the policy
    (clipping judged with the advantages standardised over the whole batch).
    ``episode_return`` and ``episode_length`` are means over episodes that ended during the
    iteration's rollout (NaN if none did); ``eval_return`` is NaN where no evaluation ran.
    """

    seed: int
    config: PPOConfig
    diagnostics: dict[str, np.ndarray]
    final_eval_return: float
    solved_at_env_steps: int | None
    solved_at_seconds: float | None
    seconds: float
    params: dict[str, np.ndarray] = field(repr=False)


def sample_categorical(rng: np.random.Generator, probabilities: np.ndarray) -> np.ndarray:
    """One action per row of ``probabilities`` [B, K], by inverting the cumulative distribution."""
    cumulative = np.cumsum(probabilities, axis=-1)
    return np.minimum((rng.random(probabilities.shape[0])[:, None] >= cumulative).sum(axis=-1),
                      probabilities.shape[-1] - 1)


def explained_variance(predicted: np.ndarray, target: np.ndarray) -> float:
    """1 - Var(target - predicted) / Var(target): 1 for a perfect critic, 0 for a constant one."""
    variance = np.var(target)
    return float("nan") if variance == 0 else float(1 - np.var(target - predicted) / variance)


def evaluate_greedy(ops: Any, params: dict[str, np.ndarray], rng: np.random.Generator, episodes: int
                    ) -> np.ndarray:
    """Returns of ``episodes`` episodes, one per environment, acting by argmax of the policy's logits."""
    env = ops.VectorCartPole(episodes, rng)
    returns, running = np.zeros(episodes), np.ones(episodes, dtype=bool)
    while running.any():
        step = env.step(np.argmax(ops.policy_logits(params, env.observation()), axis=-1))
        returns += step.reward * running
        running &= ~(step.terminated | step.truncated)
    return returns


def _minibatch_loss_grad(ops: Any, params: dict[str, np.ndarray], config: PPOConfig, batch: dict[str, np.ndarray]
                         ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The gradient of -L^CLIP + c_V L_V - c_H H on one minibatch, and the loss's parts."""
    n = batch["actions"].shape[0]
    output = ops.actor_critic_forward(params, batch["obs"])
    log_pi = ops.log_softmax(output.logits)[np.arange(n), batch["actions"]]
    # The bug of step 4.4.5: "old" log-probabilities taken from the policy being updated, not the rollout's.
    log_pi_old = log_pi.copy() if config.recompute_old_log_probs else batch["log_pi_old"]
    ratio = ops.probability_ratios(log_pi, log_pi_old)
    advantage = ops.normalize_advantages(batch["advantages"]) if config.normalize_advantages else batch["advantages"]
    clip_objective = ops.ppo_clip_objective(ratio, advantage, config.clip_epsilon).mean()
    value_loss = ops.squared_error_value_loss(output.values, batch["returns"])
    entropy = ops.categorical_entropy(output.logits).mean()
    loss = ops.ppo_total_loss(clip_objective, value_loss, entropy, config.value_coef, config.entropy_coef)
    d_log_pi = -ops.ppo_clip_objective_grad(ratio, advantage, config.clip_epsilon) / n
    d_logits = (d_log_pi[:, None] * ops.softmax_score(output.logits, batch["actions"])
                - config.entropy_coef * ops.categorical_entropy_grad(output.logits) / n)
    d_values = config.value_coef * ops.squared_error_value_loss_grad(output.values, batch["returns"])
    grads = ops.actor_critic_backward(params, output, d_logits, d_values)
    return grads, {"loss": float(loss), "value_loss": float(value_loss), "entropy": float(entropy)}


def train_ppo_cartpole(config: PPOConfig, seed: int, ops: Any) -> PPORun:
    """Train PPO on CartPole-v1 dynamics from ``seed``; every building block is taken from ``ops``.

    Args:
      config: the hyperparameters.
      seed: seeds the run's two generators: one for initialisation, environments, actions and
        shuffling, one for the evaluations.
      ops: the implementation to build the loop from: the ``impl`` package, or a module or view
        offering the same functions (``VectorCartPole``, ``actor_critic_*``, ``gae_advantages``,
        the PPO functions, ``adam_*``, ``clip_by_global_norm``, ``kl_k3``...).

    Returns:
      the run's :class:`PPORun`.
    """
    started = time.perf_counter()
    # Evaluation draws from its own stream, so the evaluation schedule does not change training.
    rng, eval_rng = (np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(2))
    params = ops.actor_critic_init(rng, OBSERVATION_SIZE, N_ACTIONS, config.hidden)
    if config.value_head_scale != 1.0:
        output = f"value.w{max(int(name.removeprefix('value.w')) for name in params if name.startswith('value.w'))}"
        params = {**params, output: params[output] * config.value_head_scale}
    optimizer = ops.adam_init(params)
    env = ops.VectorCartPole(config.n_envs, rng)
    obs = env.observation()
    episode_return, episode_length = np.zeros(config.n_envs), np.zeros(config.n_envs, dtype=np.int64)
    shape = (config.n_steps, config.n_envs)
    diagnostics: dict[str, list[float]] = {name: [] for name in DIAGNOSTICS}
    solved_at_env_steps = solved_at_seconds = None

    for iteration in range(config.n_iterations):
        buffer = {"obs": np.zeros((*shape, OBSERVATION_SIZE)), "actions": np.zeros(shape, dtype=np.int64),
                  "log_pi_old": np.zeros(shape), "values": np.zeros(shape), "rewards": np.zeros(shape),
                  "terminated": np.zeros(shape), "truncated": np.zeros(shape), "v_tp1": np.zeros(shape)}
        finished_returns, finished_lengths, truncations = [], [], []
        for t in range(config.n_steps):
            output = ops.actor_critic_forward(params, obs)
            log_probabilities = ops.log_softmax(output.logits)
            actions = sample_categorical(rng, np.exp(log_probabilities))
            step = env.step(actions)
            buffer["obs"][t], buffer["actions"][t], buffer["values"][t] = obs, actions, output.values
            buffer["log_pi_old"][t] = log_probabilities[np.arange(config.n_envs), actions]
            buffer["rewards"][t], buffer["terminated"][t], buffer["truncated"][t] = (
                step.reward, step.terminated, step.truncated)
            episode_return += step.reward
            episode_length += 1
            ended = step.terminated | step.truncated
            finished_returns += list(episode_return[ended])
            finished_lengths += list(episode_length[ended])
            episode_return[ended], episode_length[ended] = 0.0, 0
            for env_index in np.flatnonzero(step.truncated & ~step.terminated):
                truncations.append((t, env_index, step.final_observation[env_index]))
            obs = step.observation

        # V(s_{t+1}): the next stored observation, the last one for the rollout's end, and the
        # final observation before reset() where a time limit truncated the episode (step 4.3.4).
        buffer["v_tp1"][:-1] = buffer["values"][1:]
        buffer["v_tp1"][-1] = ops.actor_critic_forward(params, obs).values
        if truncations:
            final_values = ops.actor_critic_forward(params, np.stack([o for _, _, o in truncations])).values
            for (t, env_index, _), value in zip(truncations, final_values, strict=True):
                buffer["v_tp1"][t, env_index] = value
        trace_cut = np.maximum(buffer["terminated"], buffer["truncated"])
        advantages = ops.gae_advantages(buffer["rewards"], buffer["values"], buffer["v_tp1"], buffer["terminated"],
                                        trace_cut, config.gamma, config.gae_lambda)
        returns = ops.value_targets(buffer["values"], advantages)

        flat = {"obs": buffer["obs"].reshape(-1, OBSERVATION_SIZE), "actions": buffer["actions"].reshape(-1),
                "log_pi_old": buffer["log_pi_old"].reshape(-1), "advantages": advantages.reshape(-1),
                "returns": returns.reshape(-1)}
        learning_rate = config.learning_rate * (
            1 - iteration / config.n_iterations if config.anneal_learning_rate else 1.0)
        minibatch_size = config.batch_size // config.n_minibatches
        norms, parts = [], []
        for _ in range(config.n_epochs):
            order = rng.permutation(config.batch_size) if config.shuffle_minibatches else np.arange(config.batch_size)
            for start in range(0, config.batch_size, minibatch_size):
                index = order[start:start + minibatch_size]
                grads, loss_parts = _minibatch_loss_grad(ops, params, config, {k: v[index] for k, v in flat.items()})
                grads, norm = ops.clip_by_global_norm(grads, config.max_grad_norm)
                params, optimizer = ops.adam_update(params, grads, optimizer, learning_rate)
                norms.append(norm)
                parts.append(loss_parts)

        after = ops.actor_critic_forward(params, flat["obs"])
        log_ratio = (ops.log_softmax(after.logits)[np.arange(config.batch_size), flat["actions"]]
                     - flat["log_pi_old"])
        clip_stats = ops.ratio_clip_diagnostics(
            ops.probability_ratios(log_ratio, 0.0),
            ops.normalize_advantages(flat["advantages"]) if config.normalize_advantages else flat["advantages"],
            config.clip_epsilon)
        env_steps = (iteration + 1) * config.batch_size
        evaluate = config.eval_episodes > 0 and (iteration == config.n_iterations - 1 or (
            config.eval_every > 0 and (iteration + 1) % config.eval_every == 0))
        eval_return = (float(evaluate_greedy(ops, params, eval_rng, config.eval_episodes).mean()) if evaluate
                       else float("nan"))
        seconds = time.perf_counter() - started
        row = {
            "env_steps": env_steps, "seconds": seconds,
            "episode_return": float(np.mean(finished_returns)) if finished_returns else float("nan"),
            "episode_length": float(np.mean(finished_lengths)) if finished_lengths else float("nan"),
            "loss": float(np.mean([p["loss"] for p in parts])),
            "value_loss": float(np.mean([p["value_loss"] for p in parts])),
            "explained_variance": explained_variance(buffer["values"].reshape(-1), flat["returns"]),
            "entropy": float(np.mean([p["entropy"] for p in parts])),
            "ratio_outside_fraction": float(clip_stats.outside_fraction),
            "clip_active_fraction": float(clip_stats.active_fraction),
            "kl_k3": float(np.mean(ops.kl_k3(log_ratio))),
            "advantage_mean": float(advantages.mean()), "advantage_std": float(advantages.std()),
            "grad_norm": float(np.mean(norms)), "eval_return": eval_return,
        }
        for name, value in row.items():
            diagnostics[name].append(value)
        if solved_at_env_steps is None and eval_return >= config.solved_return:
            solved_at_env_steps, solved_at_seconds = env_steps, seconds
            if config.stop_when_solved:
                break

    return PPORun(seed, config, {name: np.asarray(values) for name, values in diagnostics.items()},
                  diagnostics["eval_return"][-1], solved_at_env_steps, solved_at_seconds,
                  time.perf_counter() - started, params)


def learning_curve_figure(runs: list[PPORun], title: str = "PPO on CartPole") -> Any:
    """Median and interquartile range over runs of the evaluation return against environment steps.

    Each run's curve holds its last evaluation until the next one, so runs of different lengths
    and evaluation schedules share one axis. Returns a matplotlib ``Figure`` (no pyplot state).
    """
    from matplotlib.figure import Figure

    steps = np.unique(np.concatenate([run.diagnostics["env_steps"] for run in runs]))
    curves = np.full((len(runs), steps.size), np.nan)
    for i, run in enumerate(runs):
        evaluated = ~np.isnan(run.diagnostics["eval_return"])
        run_steps = run.diagnostics["env_steps"][evaluated]
        latest = np.searchsorted(run_steps, steps, side="right") - 1
        known = latest >= 0
        curves[i, known] = run.diagnostics["eval_return"][evaluated][latest[known]]
        if run_steps.size:
            # A run stopped when solved keeps its last evaluation to the end of the axis.
            curves[i, steps > run_steps[-1]] = run.diagnostics["eval_return"][evaluated][-1]
    evaluated_somewhere = ~np.all(np.isnan(curves), axis=0)
    steps, curves = steps[evaluated_somewhere], curves[:, evaluated_somewhere]
    low, median, high = np.nanpercentile(curves, [25, 50, 75], axis=0)
    figure = Figure(figsize=(6.4, 4.0), layout="constrained")
    axes = figure.add_subplot()
    axes.fill_between(steps, low, high, step="post", alpha=0.3, label="interquartile range")
    axes.plot(steps, median, drawstyle="steps-post", label=f"median of {len(runs)} seeds")
    axes.axhline(runs[0].config.solved_return, color="grey", linestyle="--", linewidth=1,
                 label=f"solved ({runs[0].config.solved_return:g})")
    axes.set_xlabel("environment steps")
    axes.set_ylabel(f"greedy evaluation return ({runs[0].config.eval_episodes} episodes)")
    axes.set_title(title)
    axes.legend(loc="lower right")
    return figure

"""The self-contained CartPole and the PPO run on it (module step 4.4.5, and 4.4.2's ratios in practice).

Training runs through the implementation under test: the verifier calls its training loop and
hands it the same view of the implementation, so every building block of the run (environment,
network, GAE, PPO objective, optimiser) is the implementation under test's. Each seed's run is a
task of ``ctx.map_seeds``, which may run it in another process or on a Dask worker.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pydantic import BaseModel, ConfigDict, Field

from harness import Context, SeedRun, check_property, verifier

LOOP_USES = ("train_ppo_cartpole", "PPOConfig", "VectorCartPole", "actor_critic_init", "actor_critic_forward",
             "actor_critic_backward", "policy_logits", "log_softmax", "softmax_score", "probability_ratios",
             "ppo_clip_objective", "ppo_clip_objective_grad", "clip_diagnostics", "categorical_entropy",
             "categorical_entropy_grad", "squared_error_value_loss", "squared_error_value_loss_grad", "ppo_total_loss",
             "kl_k3", "gae_advantages", "value_targets", "normalize_advantages", "adam_init", "adam_update",
             "clip_by_global_norm")

_states = hnp.arrays(np.float64, st.tuples(st.integers(1, 16), st.just(4)),
                     elements=st.floats(min_value=-3.0, max_value=3.0))


class EpisodeEnd(BaseModel):
    """Gymnasium CartPole-v1's termination bounds, time limit and reset range."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    x_threshold: float = Field(gt=0, description="|x| beyond this terminates")
    theta_threshold_degrees: float = Field(gt=0, description="|θ| beyond this many degrees terminates")
    time_limit: int = Field(ge=4, description="steps after which the episode is truncated")
    reset_bound: float = Field(gt=0, description="initial state components are uniform in [-b, b)")


@verifier("cartpole.episode_end_property", uses=("VectorCartPole", "cartpole_dynamics"), params=EpisodeEnd)
def episode_end_property(ctx: Context) -> dict[str, object]:
    """One step of impl's vector CartPole from random states, elapsed step counts and actions:
    the reward is +1 on every step (the terminating one included); ``terminated`` holds exactly
    where the next state (impl's dynamics) is beyond the x or θ threshold; ``truncated`` holds
    exactly where the step count reaches the time limit, independently of termination; the final
    observation is the next state and an ended environment restarts inside the reset range.
    """
    limits = ctx.params
    theta_threshold = limits.theta_threshold_degrees * 2 * math.pi / 360

    def ends_correctly(case: tuple[np.ndarray, int, int]) -> None:
        states, elapsed_seed, action_seed = case
        n = states.shape[0]
        generator = np.random.default_rng(action_seed)
        env = ctx.impl.VectorCartPole(n, np.random.default_rng(elapsed_seed))
        env.state = states.copy()
        env.elapsed_steps = generator.integers(limits.time_limit - 3, limits.time_limit, size=n)
        elapsed_before = env.elapsed_steps.copy()
        actions = generator.integers(0, 2, size=n)
        expected_next = ctx.impl.cartpole_dynamics(states, actions)
        step = env.step(actions)
        x, theta = expected_next[:, 0], expected_next[:, 2]
        assert np.all(step.reward == 1.0), step.reward
        assert np.array_equal(step.terminated, (np.abs(x) > limits.x_threshold) | (np.abs(theta) > theta_threshold))
        assert np.array_equal(step.truncated, elapsed_before + 1 >= limits.time_limit), (elapsed_before, step.truncated)
        assert np.array_equal(step.final_observation, expected_next.astype(np.float32))
        ended = step.terminated | step.truncated
        assert np.all(np.abs(step.observation[ended]) <= limits.reset_bound), step.observation[ended]
        assert np.array_equal(step.observation[~ended], expected_next[~ended].astype(np.float32))

    return check_property(ctx, ends_correctly, st.tuples(_states, st.integers(0, 2**32), st.integers(0, 2**32)))


class TrainingBudget(BaseModel):
    """The seeds, budget and evaluation schedule of a multi-seed PPO run; hyperparameters are
    the implementation's ``PPOConfig`` defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    seeds: list[int] = Field(min_length=1, description="one run per seed, fixed per profile")
    total_env_steps: int = Field(ge=256, description="environment steps of each run")
    eval_every: int = Field(ge=0, description="evaluate after every this many iterations")
    figure: str | None = Field(None, pattern=r"^[a-z0-9-]+$", description="file name of the learning-curve figure")
    random_episodes: int = Field(100, ge=1, description="episodes of the uniformly random policy, for scale")


def _random_policy_returns(ctx: Context, episodes: int) -> np.ndarray:
    env = ctx.impl.VectorCartPole(episodes, ctx.rng)
    returns, running = np.zeros(episodes), np.ones(episodes, dtype=bool)
    while running.any():
        step = env.step(ctx.rng.integers(0, 2, size=episodes))
        returns += step.reward * running
        running &= ~(step.terminated | step.truncated)
    return returns


def _median_or_none(values: list[float | None]) -> float | None:
    """The median with unsolved runs counted as never solving (+inf); None if most never solved."""
    median = float(np.median([math.inf if v is None else v for v in values]))
    return median if math.isfinite(median) else None


def _train_ppo(run: SeedRun, total_env_steps: int, eval_every: int) -> object:
    """One seed's PPO run with the implementation's default hyperparameters, wherever the seed runs."""
    config = run.impl.PPOConfig(total_env_steps=total_env_steps, eval_every=eval_every)
    return run.call_reporting(run.impl.train_ppo_cartpole, config, run.seed, run.impl)


@verifier("cartpole.ppo_training_experiment", uses=(*LOOP_USES, "learning_curve_figure"), params=TrainingBudget)
def ppo_training_experiment(ctx: Context) -> dict[str, object]:
    """Train impl's PPO on impl's CartPole once per seed; the final greedy evaluation's median and
    interquartile range over seeds, when each run first solved CartPole (the first evaluation with
    mean return >= 475: environment steps and wall seconds), a random policy's mean return for
    scale, and the learning-curve figure drawn by the implementation's own plotting code.
    """
    params = ctx.params
    config = ctx.impl.PPOConfig(total_env_steps=params.total_env_steps, eval_every=params.eval_every)
    runs = ctx.map_seeds(_train_ppo, params.seeds, params.total_env_steps, params.eval_every)
    finals = np.array([run.final_eval_return for run in runs])
    q25, median, q75 = (float(q) for q in np.percentile(finals, [25, 50, 75]))
    tracked = ("value_loss", "entropy", "kl_k3", "grad_norm", "explained_variance")
    observed = {
        "median_final_return": median,
        "iqr_final_return": [q25, q75],
        "final_returns": finals,
        "seeds": list(params.seeds),
        "random_policy_return": float(_random_policy_returns(ctx, params.random_episodes).mean()),
        "solved_at_env_steps": [run.solved_at_env_steps for run in runs],
        "solved_at_seconds": [None if run.solved_at_seconds is None else round(run.solved_at_seconds, 3)
                              for run in runs],
        "median_solved_at_env_steps": _median_or_none([run.solved_at_env_steps for run in runs]),
        "median_solved_at_seconds": _median_or_none([run.solved_at_seconds for run in runs]),
        "seconds_per_run": [round(run.seconds, 3) for run in runs],
        "losses_finite": all(bool(np.all(np.isfinite(run.diagnostics[name]))) for run in runs for name in tracked),
        "last_iteration": [{name: float(values[-1]) for name, values in run.diagnostics.items()} for run in runs],
        "hyperparameters": {name: getattr(config, name) for name in config.__dataclass_fields__},
    }
    if params.figure:
        title = f"PPO on CartPole: {len(runs)} seeds, {ctx.profile} profile"
        observed["figure"] = ctx.save_figure(ctx.impl.learning_curve_figure(runs, title), params.figure)
    return observed


class ShortRun(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    seed: int
    total_env_steps: int = Field(ge=256)


@verifier("cartpole.ratios_in_training", uses=LOOP_USES, params=ShortRun)
def ratios_in_training(ctx: Context) -> dict[str, object]:
    """Train impl's PPO briefly and read the run's own diagnostics: after each iteration's epochs,
    the fraction of the batch's ratios outside [1-ε, 1+ε], the fraction clipped, and k3 KL."""
    config = ctx.impl.PPOConfig(total_env_steps=ctx.params.total_env_steps, eval_every=0)
    [run] = ctx.map_seeds(_train_ppo, [ctx.params.seed], ctx.params.total_env_steps, 0)
    outside = run.diagnostics["ratio_outside_fraction"]
    return {
        "epochs_per_iteration": config.n_epochs,
        "clip_epsilon": config.clip_epsilon,
        "max_ratio_outside_fraction": float(outside.max()),
        "iterations_with_ratios_outside": int((outside > 0).sum()),
        "iterations": int(outside.size),
        "max_clip_active_fraction": float(run.diagnostics["clip_active_fraction"].max()),
        "max_kl_k3": float(run.diagnostics["kl_k3"].max()),
        "ratio_outside_fraction": outside,
    }

"""Benchmarks of the CartPole PPO run: environment steps per second, one PPO iteration, time to solve.

With pytest-benchmark: ``tox -e bench`` or ``pytest benchmarks --benchmark-only``. As a script,
``python benchmarks/test_ppo_speed.py [n_seeds]`` prints the time-to-solve table. Measure on one
core: ``OPENBLAS_NUM_THREADS=1``; the default network's products are below OpenBLAS's threading
size anyway, so the variable changes little.

Time to solve follows one fixed rule: evaluate the greedy policy on 10 episodes after every
iteration and stop at the first evaluation whose mean return reaches 475; the wall time includes
those evaluations.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest

import impl

SOLVE_SEEDS = range(5)
SOLVE_BUDGET = 50_176


@pytest.mark.parametrize("n_envs", [8, 64])
def test_env_steps_per_second(benchmark, n_envs):
    env = impl.VectorCartPole(n_envs, np.random.default_rng(0))
    actions = np.random.default_rng(1).integers(0, 2, size=(1000, n_envs))
    counter = iter(range(10**9))

    def step() -> None:
        env.step(actions[next(counter) % 1000])

    benchmark(step)
    benchmark.extra_info["env_steps_per_second"] = n_envs / benchmark.stats.stats.mean


def test_one_ppo_iteration(benchmark):
    """One rollout of 8 x 32 steps, 10 epochs of 2 minibatches and the iteration's diagnostics."""
    config = impl.PPOConfig()
    one_iteration = dataclasses.replace(config, total_env_steps=config.batch_size, eval_episodes=0)
    benchmark(impl.train_ppo_cartpole, one_iteration, 0, impl)
    benchmark.extra_info["env_steps_per_second"] = config.batch_size / benchmark.stats.stats.mean


def time_to_solve(seeds=SOLVE_SEEDS) -> list[impl.PPORun]:
    config = impl.PPOConfig(total_env_steps=SOLVE_BUDGET, eval_every=1, stop_when_solved=True)
    return [impl.train_ppo_cartpole(config, seed, impl) for seed in seeds]


def test_time_to_solve(benchmark):
    runs = benchmark.pedantic(time_to_solve, rounds=1, iterations=1)
    benchmark.extra_info["env_steps"] = [run.solved_at_env_steps for run in runs]
    benchmark.extra_info["seconds"] = [run.solved_at_seconds for run in runs]
    assert all(run.solved_at_env_steps is not None for run in runs)


def main(n_seeds: int) -> None:
    runs = time_to_solve(range(n_seeds))
    print(f"{'seed':>4} {'env steps':>10} {'seconds':>8}")
    for run in runs:
        seconds = "-" if run.solved_at_seconds is None else f"{run.solved_at_seconds:.2f}"
        print(f"{run.seed:>4} {run.solved_at_env_steps or '-':>10} {seconds:>8}")
    solved_steps = [np.inf if r.solved_at_env_steps is None else r.solved_at_env_steps for r in runs]
    solved_seconds = [np.inf if r.solved_at_seconds is None else r.solved_at_seconds for r in runs]
    print(f"median {np.median(solved_steps):>10.0f} {np.median(solved_seconds):>8.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else len(SOLVE_SEEDS))

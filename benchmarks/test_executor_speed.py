"""The seeds of an experiment in the checking process against a local pool of two processes.

Four PPO runs on CartPole through ``SeedRunner.map``, as ``cartpole.ppo_training_experiment``
hands them out; the pool is started (and its workers have imported everything) before the
timing, since a pytest process starts it once. The pool's start-up and the full-profile figures
are in docs/performance.md.
"""

from __future__ import annotations

import pytest

from claims_harness._running.executor import SeedRunner, shutdown_executors
from verifiers.cartpole import LOOP_USES, _train_ppo

CASE = "experiment seeds: 4 PPO runs of 4096 steps"
SEEDS, STEPS = [0, 1, 2, 3], 4096


@pytest.mark.parametrize("workers", [1, 2], ids=["in process", "pool of 2"])
def test_ppo_seeds(benchmark, record_median, workers):
    runner = SeedRunner("impl", LOOP_USES, "cartpole.ppo_training_experiment", "benchmark", workers=workers)
    runner.map(_train_ppo, SEEDS, (STEPS, 0))  # starts the pool and warms its workers
    try:
        runs = benchmark.pedantic(runner.map, (_train_ppo, SEEDS, (STEPS, 0)), rounds=3, iterations=1)
    finally:
        shutdown_executors()
    assert [run.seed for run in runs] == SEEDS
    record_median(CASE, "in process" if workers == 1 else "pool of 2", benchmark, reference="in process")

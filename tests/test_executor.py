"""Experiments' seeds on an executor: in the checking process, on a local process pool, on Dask workers.

The same claim file runs three times through the plugin (in process, ``--claims-workers 2``,
``--claims-scheduler`` of a Dask ``LocalCluster``) and must give the same evidence; a seed that
raises is an error row naming the seed, and a seed past the check's time limit is stopped
without keeping the pool's workers.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import threading
from pathlib import Path

import pytest
from conftest import view_of, write_course

import claims_harness
import impl
from claims_harness import ClaimsError, RunOptions, SeedRun, load_catalogue, run_check
from claims_harness._running.executor import (
    SeedRunner,
    SeedTask,
    default_workers,
    require_same_numerics,
    run_seed,
    shutdown_executors,
)
from claims_harness.engine import RESULTS_FILE, json_schema_text, library_versions, normalized

PROJECT = Path(__file__).resolve().parents[1]
PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:benchmark")
MODELINE = "# yaml-language-server: $schema=schema.json\n"

# Both experiment verifiers, three seeds each, a fraction of a second per seed.
EXPERIMENTS = MODELINE + """\
title: "Experiments on executors"
steps: ["4.4.5", "4.5.3"]
claims:
  - id: ppo-briefly
    where: "4.4.5"
    statement: PPO trains on CartPole for a few iterations per seed.
    sources: [schulman2017ppo]
    checks:
      - kind: experiment
        verifier: cartpole.ppo_training_experiment
        params: {seeds: [0, 1, 2], total_env_steps: 512, eval_every: 1}
        expect:
          losses_finite: true
  - id: gru-briefly
    where: "4.5.3"
    statement: The GRU policy trains for a few iterations per seed.
    sources: [ahmadian2024]
    checks:
      - kind: experiment
        verifier: gru.training_experiment
        params: {seeds: [0, 1, 2], iterations_smoke: 4, iterations_full: 4, prompts_per_batch: 4, group_size: 2,
                 ppo_epochs: 1, epsilon: 0.2, learning_rate: 0.01, hidden_size: 8, max_tokens: 3, eval_every: 2}
        expect:
          iterations: 4
"""


def write_project(root: Path, text: str) -> Path:
    claims = root / "claims"
    claims.mkdir()
    (claims / "experiments.yaml").write_text(text, encoding="utf-8")
    (claims / "schema.json").write_text(json_schema_text(), encoding="utf-8")
    shutil.copy(PROJECT / "Module_4_Sources.md", root / "Module_4_Sources.md")
    write_course(root)
    return claims


@pytest.fixture
def dask_scheduler():
    """A Dask cluster of one worker process: tasks really leave this process and are pickled.

    One per test, closed at its end: a cluster's threads in this process while a later test forks a check's worker
    from it make that fork unsafe (a worker died so once, under load, two tests later).
    """
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        yield cluster.scheduler_address
    shutdown_executors()


def test_the_evidence_is_the_same_in_process_on_a_pool_and_on_dask(pytester, dask_scheduler):
    write_project(pytester.path, EXPERIMENTS)
    executors = {"in-process": ("--claims-workers", "1"), "pool": ("--claims-workers", "2"),
                 "dask": ("--claims-scheduler", dask_scheduler)}
    results = {}
    for name, option in executors.items():
        run = pytester.runpytest_inprocess("claims", *PLUGINS_OFF, *option, "--claims-report", name)
        assert run.ret == pytest.ExitCode.OK, run.stdout.str()[-3000:]
        results[name] = json.loads((pytester.path / name / RESULTS_FILE).read_text(encoding="utf-8"))

    evidence = {name: normalized(result)["claims"] for name, result in results.items()}
    assert evidence["pool"] == evidence["in-process"]
    assert evidence["dask"] == evidence["in-process"]
    # ... and it is evidence of three different runs, not one run three times.
    ppo, gru = (row["checks"][0]["observed"] for row in results["in-process"]["claims"])
    assert len(ppo["final_returns"]) == 3 and len(set(map(str, ppo["last_iteration"]))) == 3
    assert gru["iterations"] == 4


def _where(run: SeedRun) -> tuple[int, int]:
    return run.seed, os.getpid()


def runner(**where: object) -> SeedRunner:
    return SeedRunner("impl", str(PROJECT), (), "test.executor", "a-claim", **where)


def test_seeds_run_where_they_are_sent_and_come_back_in_order(dask_scheduler):
    from distributed import Client

    here = os.getpid()
    assert runner(workers=1).map(_where, [3, 1, 2], ()) == [(3, here), (1, here), (2, here)]
    pooled = runner(workers=2).map(_where, [3, 1, 2], ())
    assert [seed for seed, _ in pooled] == [3, 1, 2] and here not in {pid for _, pid in pooled}
    with Client(dask_scheduler) as client:
        (dask_worker,) = client.run(os.getpid).values()
    assert runner(scheduler=dask_scheduler).map(_where, [3, 1, 2], ()) == [(3, dask_worker), (1, dask_worker),
                                                                            (2, dask_worker)]


def test_a_lambda_or_unpicklable_arguments_are_refused_on_every_executor_not_only_where_pickling_fails():
    with pytest.raises(claims_harness.VerifierError, match="top level of an importable module"):
        runner(workers=1).map(lambda run: run.seed, [0], ())
    with pytest.raises(claims_harness.VerifierError, match="the arguments must pickle"):
        runner(workers=1).map(_where, [0], (threading.Lock(),))


def test_the_implementation_view_is_never_pickled_and_a_worker_without_the_module_says_so():
    view = view_of(impl, ("gae_advantages",), "test.executor", "a-claim")
    with pytest.raises(claims_harness.VerifierError, match="use the run.impl it receives"):
        pickle.dumps(view)
    task = SeedTask(pickle.dumps((_where, ())), 4, "no_such_impl", (), "test.executor", "a-claim", None, None,
                    directory=str(PROJECT))
    with pytest.raises(ClaimsError, match="the worker running seed 4 cannot reach the implementation 'no_such_impl'"):
        run_seed(task)


def test_the_pool_size_leaves_the_cores_to_xdist_workers(monkeypatch):
    monkeypatch.setattr("claims_harness._running.executor.available_cores", lambda: 8)
    monkeypatch.delenv("CLAIMS_WORKERS", raising=False)
    assert [default_workers(n) for n in (1, 2, 4, 8, 16)] == [8, 4, 2, 1, 1]
    monkeypatch.setenv("CLAIMS_WORKERS", "3")  # a shared machine's setting, or --claims-workers before it
    assert (default_workers(1), default_workers(1, asked=5)) == (3, 5)


def test_a_cluster_with_other_numerics_or_no_workers_is_refused_by_name():
    ours = library_versions()
    require_same_numerics("tcp://s:8786", {"tcp://a:1": ours, "tcp://b:2": ours})
    with pytest.raises(ClaimsError, match=r"Dask worker tcp://b:2 has other versions than this run \(numpy 1\.0 there, "
                                          rf"{ours['numpy']} here\)"):
        require_same_numerics("tcp://s:8786", {"tcp://a:1": ours, "tcp://b:2": {**ours, "numpy": "1.0"}})
    with pytest.raises(ClaimsError, match="has no workers; start some with 'dask worker tcp://s:8786'"):
        require_same_numerics("tcp://s:8786", {})


def _raise_on_seed_two(run: SeedRun) -> dict:
    if run.seed == 2:
        raise FloatingPointError(f"the loss of seed {run.seed} is NaN")
    return {"value": run.seed}


def _spin_forever(run: SeedRun) -> dict:
    while True:
        pass


def _quick(run: SeedRun) -> dict:
    return {"value": run.seed}


def per_seed_verifier(name: str, function) -> None:
    @claims_harness.verifier(name, kind="experiment")
    def seeds(ctx):
        return {"value": sum(result["value"] for result in ctx.map_seeds(function, [1, 2, 3]))}


def one_check(claim_id: str, verifier: str, extra: str = "") -> str:
    return f"""\
  - id: {claim_id}
    where: "4.4.5"
    statement: A multi-seed check.
    sources: [schulman2017ppo]
    checks:
      - kind: experiment
        verifier: {verifier}
{extra}        expect:
          value: 6
"""


def misbehaving_catalogue(root: Path):
    per_seed_verifier("test.raises_on_seed_two", _raise_on_seed_two)
    per_seed_verifier("test.spins", _spin_forever)
    per_seed_verifier("test.quick", _quick)
    text = (MODELINE + 'title: "Misbehaving seeds"\nsteps: ["4.4.5"]\nclaims:\n'
            + one_check("raises", "test.raises_on_seed_two") + one_check("spins", "test.spins", "        timeout: 1\n")
            + one_check("quick", "test.quick", "        timeout: 5\n"))
    return load_catalogue(write_project(root, text))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_raising_seed_is_an_error_row_naming_the_seed(tmp_path, restore_registry, workers):
    catalogue = misbehaving_catalogue(tmp_path)
    entry = next(entry for entry in catalogue.entries if entry.id == "raises")
    result = run_check(entry, 0, catalogue.verifiers["test.raises_on_seed_two"], RunOptions(workers=workers))
    assert result.status == "error"
    assert "FloatingPointError: the loss of seed 2 is NaN" in result.error
    if workers > 1:
        assert "(in seed 2 of claim 'raises', run on the local process pool)" in result.error


def test_a_seed_past_the_time_limit_stops_the_check_and_frees_the_pool(tmp_path, restore_registry):
    catalogue = misbehaving_catalogue(tmp_path)
    entries = {entry.id: entry for entry in catalogue.entries}
    options = RunOptions(workers=2)
    spun = run_check(entries["spins"], 0, catalogue.verifiers["test.spins"], options)
    assert spun.status == "error"
    assert "the check ran past its time limit of 1 s" in spun.error
    # The spinning seeds stopped at the same deadline in the workers: the next check gets the pool
    # (were they still spinning, it would wait past its own time limit of 5 s).
    quick = run_check(entries["quick"], 0, catalogue.verifiers["test.quick"], options)
    assert (quick.status, quick.error) == ("passed", None), quick.error

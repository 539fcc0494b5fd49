"""Monte Carlo checks' sampling throughput against raw ``numpy.random.Generator`` draws of the same count.

A check's *sampling* is every call its verifier makes that draws from the check's generator,
timed from the call to its return: ``categorical(ctx.rng, ...)``, or impl's whole
``sample_trajectories`` with its bookkeeping. Its *draws* are the variates those calls take
from the generator (one uniform per categorical or Bernoulli draw; per trajectory, one for the
initial state and two per step). The physical floor is ``Generator.random`` producing that many
doubles in one call; the target is at least a quarter of its throughput, i.e. sampling within 4x
of its time. The whole check (sampling, impl's estimates, the intervals, the comparisons) is
timed too, for scale. Smoke profile, seed 0, as `claims verify --profile smoke` runs them.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from claims_harness._claims.registry import Verifier
from claims_harness._running.options import RunOptions
from claims_harness._running.runner import check_names, run_check
from claims_harness.engine import ClaimEntry, load_catalogue

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = load_catalogue(ROOT / "claims")
CHECKS = [(entry, index) for entry in CATALOGUE.entries if not entry.broken
          for index, check in enumerate(entry.claim.checks) if check.kind == "montecarlo"]
IDS = [f"{entry.id}::{check_names(entry)[index]}" for entry, index in CHECKS]
OPTIONS = RunOptions(profile="smoke")
RAW = "raw Generator.random"


class _CountedGenerator:
    """A check's generator, counting the variates it hands out."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.count = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.rng, name)
        if not callable(attribute):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            values = attribute(*args, **kwargs)
            self.count += np.size(values)
            return values

        return counted


class _SamplingClock:
    """Runs a verifier with a counted generator, timing each call of the verifier's body that draws from it."""

    def __init__(self, verifier: Verifier):
        self.verifier = verifier
        self.seconds: list[float] = []
        self.draws = 0

    def timed(self) -> Verifier:
        return dataclasses.replace(self.verifier, function=self._run)

    def _run(self, ctx: Any) -> Any:
        rng = _CountedGenerator(ctx.rng)
        body = self.verifier.function.__code__
        begun: dict[int, tuple[float, int]] = {}
        sampling = 0.0

        def profile(frame: Any, event: str, arg: Any) -> None:
            nonlocal sampling
            if frame.f_back is None or frame.f_back.f_code is not body:
                return
            if event == "call":
                begun[id(frame)] = (time.perf_counter(), rng.count)
            elif event == "return" and id(frame) in begun:
                started, count = begun.pop(id(frame))
                if rng.count != count:
                    sampling += time.perf_counter() - started

        sys.setprofile(profile)
        try:
            observed = self.verifier.function(dataclasses.replace(ctx, rng=rng))
        finally:
            sys.setprofile(None)
        self.seconds.append(sampling)
        self.draws = rng.count
        return observed


def _verifier(entry: ClaimEntry, index: int) -> Verifier:
    return CATALOGUE.verifiers[entry.claim.checks[index].verifier]


@functools.cache
def _draws(check_id: str) -> int:
    entry, index = CHECKS[IDS.index(check_id)]
    clock = _SamplingClock(_verifier(entry, index))
    assert run_check(entry, index, clock.timed(), OPTIONS).status == "passed"
    return clock.draws


def _case(check_id: str) -> str:
    return f"{check_id} ({_draws(check_id):,} draws)"


@pytest.mark.parametrize("check", CHECKS, ids=IDS)
def test_montecarlo_check_and_its_sampling(benchmark, record_median, check, request):
    entry, index = check
    check_id = request.node.callspec.id
    clock = _SamplingClock(_verifier(entry, index))
    result = benchmark.pedantic(run_check, (entry, index, clock.timed(), OPTIONS), rounds=5, iterations=1)
    assert result.status == "passed", result.error or result.comparisons
    assert clock.draws == _draws(check_id)
    benchmark.extra_info.update(draws=clock.draws, sampling_seconds=clock.seconds)
    record_median(_case(check_id), "whole check", benchmark, reference=RAW)
    record_median(_case(check_id), "sampling", statistics.median(clock.seconds), reference=RAW)


@pytest.mark.parametrize("check", CHECKS, ids=IDS)
def test_raw_generator_draws_of_the_same_count(benchmark, record_median, check, request):
    check_id = request.node.callspec.id
    rng = np.random.default_rng(0)
    benchmark(rng.random, _draws(check_id))
    record_median(_case(check_id), RAW, benchmark, reference=RAW)

"""Issue 17's ratios: this tree against the baseline commit 96c99fd, both timed in this run.

Each side is a fresh copy (the baseline from git, this tree from its tracked files as they are on
disk), so neither has a result cache, and each runs in a subprocess with its copy first on the
path, the way an author or a student starts it:

- every claim, smoke profile, two workers: ``pytest claims -n 2``;
- every claim, full profile: ``claims verify --profile full --no-cache -n 2`` (minutes a side;
  skipped unless ``CLAIMS_BENCH_FULL=1``, as ``tox -e bench`` sets it);
- one claim from a cold start: ``pytest claims -k loo-identity``.

One round each (``benchmark.pedantic``): read them to about ±20 % on a shared machine; the load
average after each run is printed with the ratios (``benchmarks/conftest.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import baseline_and_current

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "96c99fd"
ENVIRONMENT = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
RUNS = {
    "every claim, smoke profile, -n 2": ["-m", "pytest", "claims", "-q", "-p", "no:randomly", "-n", "2"],
    "one claim from a cold start (-k loo-identity)": ["-m", "pytest", "claims", "-q", "-p", "no:randomly",
                                                     "-k", "loo-identity"],
    "every claim, full profile, -n 2": ["-m", "claims_harness.cli", "verify", "--profile", "full", "--no-cache",
                                        "-n", "2", "--out", "bench-reports"],
}
FULL = "every claim, full profile, -n 2"


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    """``{"baseline": the commit's files, "this tree": the tracked files of the working tree}``."""
    return baseline_and_current(tmp_path_factory.mktemp("against-baseline"), BASELINE)


def _run(arguments: list[str], tree: Path) -> subprocess.CompletedProcess:
    for cache in (".claims-cache", "bench-reports"):
        shutil.rmtree(tree / cache, ignore_errors=True)
    environment = {**ENVIRONMENT, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, *arguments], cwd=tree, env=environment, capture_output=True, text=True,
                          check=False)


@pytest.mark.parametrize("side", ["baseline", "this tree"])
@pytest.mark.parametrize("run", list(RUNS))
def test_against_baseline(benchmark, record_median, trees, run, side):
    if run == FULL and os.environ.get("CLAIMS_BENCH_FULL") != "1":
        pytest.skip("the full profile takes minutes a side: set CLAIMS_BENCH_FULL=1")
    benchmark.group = run
    done = benchmark.pedantic(_run, (RUNS[run], trees[side]), rounds=1, iterations=1)
    # The baseline's report may hold failures this tree fixed; a crash of either is not a timing.
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    record_median(run, side, benchmark, reference="baseline")

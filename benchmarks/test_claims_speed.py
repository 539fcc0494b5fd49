"""Wall time of verifying every claim (smoke profile): serial against two xdist workers, and a
`claims verify` after editing one expected number against a cold one.

Each run takes tens of seconds, so these are single rounds (``benchmark.pedantic``, rounds=1)
except the incremental re-run (5 rounds, each after a fresh edit); read them to about ±20 %
on a shared machine. Every run is a subprocess, started the way an author starts it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMOKE = "all claims, smoke profile"
INCREMENTAL = "claims verify --claims-profile smoke -n 2"
# The edited claim: bernoulli-group-estimators' exact check, toggled between two ways of writing 0.273.
EDITED_FILE, EDITED_LINE = "4.2-baselines.yaml", "          gradient: {exact: 0.273}\n"
ENVIRONMENT = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=ENVIRONMENT, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("workers", ["serial", "-n 2"])
def test_smoke_profile_of_every_claim(benchmark, record_median, workers):
    command = [sys.executable, "-m", "pytest", "claims", "-q", "-p", "no:randomly", "--claims-profile", "smoke"]
    command += workers.split() if workers != "serial" else []
    done = benchmark.pedantic(_run, (command, ROOT), rounds=1, iterations=1)
    assert done.returncode == 0, done.stdout[-2000:]
    record_median(SMOKE, workers, benchmark, reference="serial")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the course (its [tool.claims] table, claims, sources registry, reference and verifiers), so
    `claims verify` writes nothing of the project's; the course text is not beside it, and the run says so."""
    copy = tmp_path_factory.mktemp("claims-project")
    for name in ("claims", "impl", "verifiers"):
        shutil.copytree(ROOT / name, copy / name)
    for name in ("pyproject.toml", "Module_4_Sources.md"):
        shutil.copy(ROOT / name, copy)
    return copy


def _verify(project: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "claims_harness.cli", "verify", *INCREMENTAL.split()[2:]]
    done = _run([*command, "--claims-report", "reports"], project)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def test_cold_claims_verify(benchmark, record_median, project):
    def empty_cache():
        shutil.rmtree(project / ".claims-cache", ignore_errors=True)

    benchmark.pedantic(_verify, (project,), setup=empty_cache, rounds=1, iterations=1)
    record_median(INCREMENTAL, "cold cache", benchmark, reference="cold cache")


def test_claims_verify_after_editing_one_expected_number(benchmark, record_median, project):
    _verify(project)  # the cache is warm, whether or not the cold run ran before
    claim_file = project / "claims" / EDITED_FILE
    original = claim_file.read_text(encoding="utf-8")
    assert original.count(EDITED_LINE) == 1
    edits = iter([EDITED_LINE.replace("0.273", "0.2730"), EDITED_LINE] * 5)

    def edit_the_expected_number():
        claim_file.write_text(original.replace(EDITED_LINE, next(edits)), encoding="utf-8")

    done = benchmark.pedantic(_verify, (project,), setup=edit_the_expected_number, rounds=5, iterations=1)
    assert "ran 0 checks" in done.stdout, done.stdout[-2000:]
    record_median(INCREMENTAL, "after one edit, warm cache", benchmark, reference="cold cache")

"""Speed ratios and the engine's shape, printed at the end of ``tox -e bench`` (``pytest benchmarks --benchmark-only``).

Each benchmark stores its median time under (case, contender); the summary divides every
contender's median by the case's reference contender's (impl's GAE, the serial run, the raw
generator...), medians measured in the same run, so the ratios do not depend on the machine's
absolute speed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MEDIANS: dict[str, dict[str, float]] = defaultdict(dict)
REFERENCES: dict[str, str] = {}
# The one-minute load average after each timed run, so that a ratio can be read against the load it had.
LOADS: dict[str, dict[str, float]] = defaultdict(dict)
# Counts of the code's shape, by side ("baseline", "this tree"): benchmarks/test_engine_shape.py.
SHAPES: dict[str, dict[str, object]] = {}


@pytest.fixture
def record_median():
    def record(case: str, contender: str, benchmark, reference: str = "impl") -> None:
        """``benchmark``: the fixture after it ran, or a median in seconds measured otherwise in this run."""
        REFERENCES[case] = reference
        if isinstance(benchmark, float):
            MEDIANS[case][contender] = benchmark
        elif getattr(benchmark, "stats", None) is not None:
            MEDIANS[case][contender] = benchmark.stats.stats.median
        LOADS[case][contender] = os.getloadavg()[0]

    return record


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if SHAPES:
        terminalreporter.section("Engine shape (counts of this run)")
        for measure in next(iter(SHAPES.values())):
            terminalreporter.write_line(f"{measure}: " + "; ".join(f"{side} {shape[measure]}"
                                                                   for side, shape in SHAPES.items()))
    if not MEDIANS:
        return
    terminalreporter.section("Speed ratios (medians of this run)")
    for case, medians in MEDIANS.items():
        reference = REFERENCES[case]
        if reference not in medians:
            continue
        parts = [f"{reference} {_duration(medians[reference])}"]
        for contender in sorted(medians):
            if contender == reference:
                continue
            ratio = medians[contender] / medians[reference]
            relation = (f"{reference} is {ratio:.1f}x faster; {contender} runs at {1 / ratio:.2f} of its speed"
                        if ratio >= 1 else f"{reference} takes {1 / ratio:.2f}x as long")
            parts.append(f"{contender} {_duration(medians[contender])} ({relation})")
        terminalreporter.write_line(f"{case}: " + "; ".join(parts))
        loads = ", ".join(f"{contender} {load:.1f}" for contender, load in LOADS[case].items())
        terminalreporter.write_line(f"    load average after each: {loads}")


def _duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.3f} ms"


def baseline_and_current(base: Path, commit: str) -> dict[str, Path]:
    """``{"baseline": commit's files, "this tree": the tracked files of the working tree as on disk}``, under ``base``.

    Each is a fresh copy with no result cache, for timing both sides in one run; with no git history, a skip.
    """
    if not (ROOT / ".git").exists():
        pytest.skip("needs the git history for the baseline commit")
    baseline = base / "baseline"
    baseline.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True)
    (base / "baseline.tar").write_bytes(archive.stdout)
    with tarfile.open(base / "baseline.tar") as tar:
        tar.extractall(baseline, filter="data")
    current = base / "current"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (current / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, current / name)
    return {"baseline": baseline, "this tree": current}

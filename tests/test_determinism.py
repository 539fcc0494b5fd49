"""Determinism: the same ``--claims-seed`` gives the same report, a different one changes the seeds.

Runs real claim files through the plugin with ``pytester``, restricted to a fast subset (from
``claims list``) that still holds every kind whose result depends on the seed: a Monte Carlo
check and a Hypothesis property check, beside symbolic and exact ones.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from claims_harness.engine import MARKDOWN_FILE, RESULTS_FILE, compare_snapshots, normalized, snapshot

PROJECT = Path(__file__).resolve().parents[1]
# Plugins that would reorder, cache or (under xdist) warn in the inner runs.
PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:benchmark")
# Two lessons' files suffice; copying only these keeps other files (edited concurrently) out.
FILES = ("4.2-baselines.yaml", "4.4-ppo.yaml")
# bernoulli-group-estimators: exact + montecarlo; k3-nonnegative: symbolic + property. ~1 s a run.
SELECT = ("-m", "symbolic or exact or property or montecarlo",
          "-k", "bernoulli-group-estimators or k3-nonnegative")
MONTECARLO = ("bernoulli-group-estimators", "montecarlo")
PROPERTY = ("k3-nonnegative", "property")


@pytest.fixture
def real_project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "claims").mkdir()
    for name in FILES:
        shutil.copy(PROJECT / "claims" / name, pytester.path / "claims" / name)
    shutil.copy(PROJECT / "Module_4_Sources.md", pytester.path / "Module_4_Sources.md")
    return pytester


def run(pytester: pytest.Pytester, out: str, seed: int) -> dict:
    result = pytester.runpytest_inprocess("claims", *PLUGINS_OFF, *SELECT, "--claims-seed", str(seed),
                                          "--claims-report", out)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    return json.loads((pytester.path / out / RESULTS_FILE).read_text(encoding="utf-8"))


def checks(results: dict) -> dict[tuple[str, str], dict]:
    return {(row["id"], check["kind"]): check for row in results["claims"] for check in row["checks"]}


def mask_timings(markdown: str) -> str:
    markdown = re.sub(r"started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; [\d.]+ s", "started <time>; <t> s", markdown)
    markdown = re.sub(r"revision: `[^`]*`", "revision: <rev>", markdown)
    return re.sub(r", seed (\d+), [\d.]+ s$", r", seed \1, <t> s", markdown, flags=re.MULTILINE)


def test_the_report_is_a_function_of_the_seed(real_project):
    """Three runs (seeds 11, 11, 12) in one test: each run is seconds, and the first serves both halves."""
    first = run(real_project, "first", seed=11)
    second = run(real_project, "second", seed=11)
    other = run(real_project, "other", seed=12)
    selected = checks(first)
    assert MONTECARLO in selected and PROPERTY in selected, sorted(selected)
    assert {kind for _, kind in selected} >= {"symbolic", "exact", "montecarlo", "property"}
    assert all(check["status"] == "passed" for check in selected.values())

    # The same seed: identical results apart from timings, and identical reports.
    assert normalized(first) == normalized(second)
    assert compare_snapshots(snapshot(real_project.path / "first"), snapshot(real_project.path / "second")) == []
    markdown = [(real_project.path / out / MARKDOWN_FILE).read_text(encoding="utf-8") for out in ("first", "second")]
    assert mask_timings(markdown[0]) == mask_timings(markdown[1])
    # ... and the evidence that depends on the seed is there to compare, not empty.
    estimate = selected[MONTECARLO]["observed"]["no_baseline"]
    assert {"mean", "low", "high", "n"} <= estimate.keys()
    assert selected[PROPERTY]["observed"]["holds"] is True

    # Another seed: every check gets another seed, and the Monte Carlo draws follow it.
    assert (first["run"]["seed"], other["run"]["seed"]) == (11, 12)
    after = checks(other)
    assert selected.keys() == after.keys()
    assert selected[MONTECARLO]["seed"] != after[MONTECARLO]["seed"]
    assert selected[PROPERTY]["seed"] != after[PROPERTY]["seed"]
    assert "--claims-seed 12" in after[MONTECARLO]["reproduce"]
    old, new = selected[MONTECARLO]["observed"]["no_baseline"], after[MONTECARLO]["observed"]["no_baseline"]
    assert old["n"] == new["n"]
    assert old["mean"] != new["mean"]
    differences = compare_snapshots(snapshot(real_project.path / "first"), snapshot(real_project.path / "other"))
    assert "run: seed 11 -> 12" in differences
    assert any(difference.startswith("claim 'bernoulli-group-estimators' check 2 (montecarlo): seed ")
               for difference in differences), differences

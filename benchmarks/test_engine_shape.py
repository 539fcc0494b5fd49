"""Issue 45's targets: this tree against the baseline commit 2404c84, both measured in this run.

Read from each side's files (the baseline from git, this tree from its tracked files as they are on disk):

- the lines of Python under ``harness/`` (target: at most 10,000) and under ``verifiers/`` (at most 8,500), as
  ``wc -l`` counts them, docstrings and comments included;
- ``harness/``'s longest module (target: none over 450 lines);
- the import statements in ``tests/`` that name a private harness module (``claims_harness._*``, at the baseline
  ``harness._*``; target: at most 40), and the distinct private names they import.

These are counts, not times, so each appears once in the "Engine shape" section at the end of the run
(``benchmarks/conftest.py``). The issue's target that is a time, ``.ci/run`` on a clean clone of each side (at
most 0.75x the baseline's; for this tree, its last commit), takes a quarter of an hour a side: it runs only with
``CLAIMS_BENCH_CI=1``, and its ratio is printed with the other speed ratios.
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, SHAPES, baseline_and_current

BASELINE = "2404c84"
# The package is imported as claims_harness; at the baseline the tests imported it as harness.
PRIVATE_PREFIXES = ("claims_harness._", "harness._")


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    return baseline_and_current(tmp_path_factory.mktemp("engine-shape"), BASELINE)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _private_imports(tests: Path) -> tuple[int, set[tuple[str, str]]]:
    """How many import statements under ``tests`` name a private harness module, and which names they import."""
    statements, names = 0, set()
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PRIVATE_PREFIXES):
                statements += 1
                names.update((node.module, alias.name) for alias in node.names)
            elif isinstance(node, ast.Import) and any(a.name.startswith(PRIVATE_PREFIXES) for a in node.names):
                statements += 1
                names.update((a.name, "") for a in node.names if a.name.startswith(PRIVATE_PREFIXES))
    return statements, names


def measure_shape(tree: Path) -> dict[str, object]:
    """The issue's counts for one copy of the project."""
    modules = {path.relative_to(tree).as_posix(): _lines(path) for path in (tree / "harness").rglob("*.py")}
    longest = max(modules, key=modules.__getitem__)
    statements, names = _private_imports(tree / "tests")
    return {
        "harness/ lines (at most 10,000)": sum(modules.values()),
        "harness/ modules over 450 lines (none)": sum(lines > 450 for lines in modules.values()),
        "harness/ longest module": f"{longest}, {modules[longest]} lines",
        "verifiers/ lines (at most 8,500)": sum(map(_lines, (tree / "verifiers").rglob("*.py"))),
        "private harness imports in tests/ (at most 40)": statements,
        "private harness names imported in tests/": len(names),
    }


@pytest.mark.parametrize("side", ["baseline", "this tree"])
def test_engine_shape(benchmark, trees, side):
    shape = benchmark.pedantic(measure_shape, (trees[side],), rounds=1, iterations=1)
    benchmark.extra_info.update(shape)
    SHAPES[side] = shape


@pytest.fixture(scope="module")
def clones(tmp_path_factory) -> dict[str, Path]:
    """A clean clone of each side, as CI makes one (git history included), beside the course texts."""
    if os.environ.get("CLAIMS_BENCH_CI") != "1":
        pytest.skip(".ci/run takes a quarter of an hour a side: set CLAIMS_BENCH_CI=1")
    if not (ROOT / ".git").exists():
        pytest.skip("needs the git history for the baseline commit")
    base = tmp_path_factory.mktemp("ci-run")
    if (ROOT.parent / "shared").is_dir():
        (base / "shared").symlink_to(ROOT.parent / "shared")  # the course texts, at ../shared from each clone
    clones = {}
    for side, commit in (("baseline", BASELINE), ("this tree", "HEAD")):
        clones[side] = base / side.replace(" ", "-")
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clones[side])], check=True)
        subprocess.run(["git", "checkout", "-q", commit], cwd=clones[side], check=True)
    return clones


@pytest.mark.parametrize("side", ["baseline", "this tree"])
def test_ci_run(benchmark, record_median, clones, side):
    """``.ci/run`` in a clean clone of each side (this tree: its last commit), one after the other."""
    benchmark.group = ".ci/run on a clean clone"
    done = benchmark.pedantic(subprocess.run, (["bash", ".ci/run"],),
                              {"cwd": clones[side], "capture_output": True, "text": True, "check": False},
                              rounds=1, iterations=1)
    # A red run of either side is not a timing of its CI.
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record_median(".ci/run on a clean clone", side, benchmark, reference="baseline")

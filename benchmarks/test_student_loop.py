"""Issue 31's student loop: this tree against the baseline commit 065196d, both timed in this run.

On each side, a fresh copy of the project (the baseline from git, this tree from its tracked files),
beside a link to the course texts, and in it a copy of the reference, ``student_rl``:

1. ``claims verify --impl student_rl -n 2`` from nothing (the cold smoke run; a baseline for the rest);
2. the same again with no edit (the warm run);
3. after a one-line bug in one function of ``student_rl/baselines.py`` (``optimal_scalar_baseline``);
4. after the same kind of bug in ``leave_one_out_advantages``, which the GRU experiments reach too;
5. after both are fixed again.

Each step is one round (``benchmark.pedantic``): read the ratios to about ±20 % on a shared machine.
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
BASELINE = "065196d"
ENVIRONMENT = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
VERIFY = ["-m", "claims_harness.cli", "verify", "--impl", "student_rl", "--out", "student-report", "-n", "2"]
BUGS = {
    "optimal_scalar_baseline": ("    return (weight_a * q_a).sum(axis=-1) / weight_a.sum(axis=-1)",
                                "    return (weight_a * q_a).sum(axis=-1) / (1 + weight_a.sum(axis=-1))"),
    "leave_one_out_advantages": ("    return shifted - others / (group_size - 1)",
                                 "    return shifted - others / (group_size - 1.5)"),
}
STEPS = ("cold", "warm, no edit", "one function edited (optimal_scalar_baseline)",
         "one function edited (leave_one_out_advantages)", "both fixed")


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("student-loop")
    shared = ROOT.parent / "shared"
    if shared.is_dir():
        (base / "shared").symlink_to(shared)  # the course texts, at ../shared from each copy
    trees = baseline_and_current(base, BASELINE)
    for tree in trees.values():
        shutil.copytree(tree / "impl", tree / "student_rl")
    return trees


def _edit(tree: Path, step: str) -> None:
    """Bring ``student_rl/baselines.py`` to what the step runs on."""
    path = tree / "student_rl" / "baselines.py"
    text = (tree / "impl" / "baselines.py").read_text(encoding="utf-8")
    planted = {"one function edited (optimal_scalar_baseline)": ["optimal_scalar_baseline"],
               "one function edited (leave_one_out_advantages)": ["optimal_scalar_baseline",
                                                                  "leave_one_out_advantages"]}.get(step, [])
    for function in planted:
        correct, wrong = BUGS[function]
        assert correct in text, f"{function}: the line to break is not in impl/baselines.py"
        text = text.replace(correct, wrong)
    path.write_text(text, encoding="utf-8")


def _verify(tree: Path) -> subprocess.CompletedProcess:
    environment = {**ENVIRONMENT, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, *VERIFY], cwd=tree, env=environment, capture_output=True, text=True,
                          check=False)


@pytest.mark.parametrize("side", ["baseline", "this tree"])
@pytest.mark.parametrize("step", STEPS)
def test_student_loop(benchmark, record_median, trees, step, side):
    tree = trees[side]
    if step == STEPS[0]:
        shutil.rmtree(tree / ".claims-cache", ignore_errors=True)
    _edit(tree, step)
    benchmark.group = f"student loop: {step}"
    done = benchmark.pedantic(_verify, (tree,), rounds=1, iterations=1)
    # A planted bug fails claims (exit 1); anything else is not a timing.
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    record_median(f"student loop: {step}", side, benchmark, reference="baseline")

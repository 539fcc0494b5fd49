"""``claims mutants``: mutation testing of an implementation with the claims as the tests (harness/_power/mutants.py).

The end-to-end tests run the command on a copy of the toy course (tests/course_two) whose implementation gains a
function no claim checks: its mutants are holes until the reviewed file judges them, and the toy claim's
function's mutants are all caught.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from claims_harness._power import mutants as mutation
from claims_harness._reporting.phrases import mutation_line
from claims_harness.engine import mutation_summary

COURSE_TWO = Path(__file__).parent / "course_two"
UNCHECKED = '''

def running_max(values):
    """The largest of the first 1, 2, ..., n values (no claim checks it)."""
    best, out = None, []
    for value in values:
        best = value if best is None or value > best else best
        out.append(best)
    return out
'''


@pytest.fixture
def toy_course(tmp_path: Path) -> Path:
    course = tmp_path / "course"
    shutil.copytree(COURSE_TWO, course, ignore=shutil.ignore_patterns("__pycache__", ".claims-cache", "reports"))
    with (course / "toy_impl" / "__init__.py").open("a", encoding="utf-8") as init:
        init.write(UNCHECKED)
    with (course / "pyproject.toml").open("a", encoding="utf-8") as pyproject:
        pyproject.write('mutants_reviewed = "reviewed.yaml"\n\n[tool.mutmut]\nsource_paths = ["toy_impl/"]\n')
    return course


def run_mutants(course: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "claims_harness.cli", "mutants", "--workers", "2", *args], cwd=course,
                          capture_output=True, text=True, check=False, timeout=600)


def results_of(course: Path) -> dict:
    return json.loads((course / "reports" / "mutants.json").read_text(encoding="utf-8"))


def test_the_checked_function_is_caught_and_the_unchecked_one_is_a_hole(toy_course: Path) -> None:
    finished = run_mutants(toy_course)
    assert finished.returncode == 1, finished.stdout + finished.stderr
    results = results_of(toy_course)
    by_function: dict[str, set[str]] = {}
    for mutant in results["mutants"]:
        by_function.setdefault(mutant["function"], set()).add(mutant["status"])
    assert by_function["running_sum"] == {"killed"}
    assert by_function["running_max"] == {"not reached"}
    killers = {mutant["killed_by"] for mutant in results["mutants"] if mutant["status"] == "killed"}
    assert killers and killers <= {"claims/lesson1.yaml::triangular-closed-form::exact",
                                   "claims/lesson1.yaml::triangular-closed-form::property"}
    assert results["overall"]["score"] < 0.95
    report = (toy_course / "reports" / "mutants.md").read_text(encoding="utf-8")
    assert "toy_impl/__init__.py:" in report and "`running_max`" in report
    assert "judge each hole" in finished.stdout


def test_a_reviewed_survivor_is_equivalent_with_its_reason(toy_course: Path) -> None:
    assert run_mutants(toy_course).returncode == 1
    holes = [m for m in results_of(toy_course)["mutants"] if m["status"] == "not reached"]
    reviewed = [{"key": m["key"], "module": m["module"], "function": m["function"], "line": m["line"],
                 "change": m["change"], "reason": "no statement of the toy course is about running maxima"}
                for m in holes]
    (toy_course / "reviewed.yaml").write_text(yaml.safe_dump(reviewed), encoding="utf-8")
    for how in (["--review"], []):  # the judgement applied to the last run's results, then by a new run
        finished = run_mutants(toy_course, *how)
        assert finished.returncode == 0, finished.stdout + finished.stderr
        results = results_of(toy_course)
        assert results["overall"]["score"] == 1.0
        assert results["overall"]["equivalent"] == len(holes)
        assert {m["reason"] for m in results["mutants"] if m["status"] == "equivalent"} == {reviewed[0]["reason"]}
        assert {m["verdict"] for m in results["mutants"] if m["status"] == "equivalent"} == {"not reached"}
    (toy_course / "reviewed.yaml").write_text(yaml.safe_dump(reviewed[1:]), encoding="utf-8")
    assert run_mutants(toy_course, "--review").returncode == 1
    assert results_of(toy_course)["overall"]["not_reached"] == 1


def test_review_needs_an_earlier_run(toy_course: Path) -> None:
    finished = run_mutants(toy_course, "--review")
    assert finished.returncode == 2
    assert "no results of an earlier run to review; run 'claims mutants' first" in finished.stderr


def test_a_reviewed_entry_without_a_reason_is_refused(toy_course: Path) -> None:
    (toy_course / "reviewed.yaml").write_text("- key: abc\n  reason: ''\n", encoding="utf-8")
    finished = run_mutants(toy_course)
    assert finished.returncode == 2
    assert "reviewed.yaml: entry 1 needs a 'key' and a 'reason'" in finished.stderr


def test_an_unknown_module_is_refused_by_name(toy_course: Path) -> None:
    finished = run_mutants(toy_course, "--modules", "nothing_here")
    assert finished.returncode == 2
    assert "nothing_here.py: no such module of the implementation" in finished.stderr


def test_a_mutant_is_located_in_the_reference_source(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "arith.py").write_text('"""A module."""\n\n\ndef add(a, b):\n    """Sum."""\n    total = a + b\n'
                                      "    return total\n")
    mutants = mutation.write_mutated_package(package, tmp_path / "out" / "pkg_mutants", ["arith"])
    operator = [m for m in mutants if "a - b" in m.change]
    assert len(operator) == 1
    assert operator[0].change == "- total = a + b\n+ total = a - b"
    assert operator[0].line == 6 and operator[0].function == "add" and operator[0].module == "arith"
    assert operator[0].name.startswith("pkg_mutants.arith.x_add__mutmut_")
    assert len({m.key for m in mutants}) == len(mutants)


def test_the_report_reads_the_last_run_and_says_when_it_is_stale(toy_course: Path) -> None:

    assert run_mutants(toy_course).returncode == 1
    found = mutation_summary(toy_course, "toy_impl")
    assert found is not None and found["current"] and found["holes"] > 0
    assert mutation_summary(toy_course, "a_students_module") is None
    line = mutation_line(found)
    assert f"{found['caught']} of {found['mutants'] - found['equivalent']} mutants" in line and "Stale" not in line
    claim_file = toy_course / "claims" / "lesson1.yaml"
    claim_file.write_text(claim_file.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    stale = mutation_summary(toy_course, "toy_impl")
    assert stale is not None and not stale["current"] and "Stale" in mutation_line(stale)


def test_a_second_run_reuses_what_the_first_found(toy_course: Path) -> None:
    assert run_mutants(toy_course).returncode == 1
    first = results_of(toy_course)
    assert any((toy_course / ".claims-cache" / "mutants").glob("*.json"))
    assert first["reused"] == 0
    assert run_mutants(toy_course).returncode == 1
    second = results_of(toy_course)
    assert second["reused"] == sum(1 for m in first["mutants"] if m["status"] == "killed")
    assert [(m["key"], m["status"]) for m in second["mutants"]] == [(m["key"], m["status"]) for m in first["mutants"]]
    assert run_mutants(toy_course, "--no-cache").returncode == 1
    assert results_of(toy_course)["reused"] == 0


def test_a_run_of_some_modules_reuses_what_a_run_of_all_found(toy_course: Path) -> None:
    (toy_course / "toy_impl" / "extra.py").write_text(UNCHECKED.lstrip(), encoding="utf-8")
    assert run_mutants(toy_course).returncode == 1
    every = results_of(toy_course)
    assert {m["module"] for m in every["mutants"]} == {"__init__", "extra"}
    assert run_mutants(toy_course, "--modules", "__init__").returncode == 1
    some = results_of(toy_course)
    assert set(some["modules"]) == {"__init__"}
    assert some["reused"] == sum(1 for m in every["mutants"] if m["module"] == "__init__" and m["status"] == "killed")
    assert some["reused"] > 0

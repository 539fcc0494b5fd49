"""A second course, run from its own ``[tool.claims]`` table with nothing of Module 4 in the engine.

``tests/course_two/`` is a whole course in miniature: a title, steps of another shape, a sources
file of another name, a reference implementation and a verifier package of other names. It is
verified in a copy, as an author would, by ``claims`` and by pytest.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claims_harness.cli import main as claims_main

HERE = Path(__file__).resolve().parent
HARNESS = HERE.parent / "harness"


@pytest.fixture
def course_two(tmp_path, monkeypatch, restore_registry) -> Path:
    root = tmp_path / "course_two"
    shutil.copytree(HERE / "course_two", root)
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", str(root))
    return root


def test_the_second_course_verifies_and_lints_from_its_own_table(course_two, capsys):
    assert claims_main(["verify", "--no-cache"]) == 0, capsys.readouterr()
    results = json.loads((course_two / "reports" / "claims.json").read_text(encoding="utf-8"))
    assert [(row["id"], row["status"]) for row in results["claims"]] == [("triangular-closed-form", "passed")]
    assert results["run"]["impl"] == "toy_impl"
    assert results["run"]["course"] == "Toy course: sums"
    for name in ("claims_report.md", "claims_report.html"):
        text = (course_two / "reports" / name).read_text(encoding="utf-8")
        assert "Toy course: sums" in text and "Module 4" not in text
    assert "`triangular-closed-form`" in (course_two / "SOURCES.md").read_text(encoding="utf-8")
    capsys.readouterr()
    assert claims_main(["lint"]) == 0, capsys.readouterr().out


def test_a_run_that_reuses_every_observation_keeps_the_figures(course_two):
    """The warm path of ``claims verify`` (no check runs) restores the cached figures."""
    figure = course_two / "reports" / "figures" / "running-sums.svg"

    def verify() -> str:
        done = subprocess.run([sys.executable, "-m", "claims_harness.cli", "verify"], cwd=course_two,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    verify()
    written = figure.read_bytes()
    assert "ran 0 checks" in verify()
    assert figure.read_bytes() == written
    results = json.loads((course_two / "reports" / "claims.json").read_text(encoding="utf-8"))
    assert results["claims"][0]["checks"][0]["observed"]["figure"] == "figures/running-sums.svg"


def test_pytest_runs_the_second_course(course_two):
    done = subprocess.run([sys.executable, "-m", "pytest", "claims", "-q", "-p", "no:randomly"], cwd=course_two,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout


def test_a_step_the_course_does_not_have_is_refused(course_two, capsys):
    claims = course_two / "claims" / "lesson1.yaml"
    claims.write_text(claims.read_text(encoding="utf-8").replace('where: "lesson1/sums"\n    statement',
                                                                 'where: "lesson9/sums"\n    statement'),
                      encoding="utf-8")
    assert claims_main(["lint"]) == 2
    assert "step 'lesson9/sums' is not a step of the course" in capsys.readouterr().out


def test_the_engine_names_no_course():
    """No title, step, package or file name of Module 4 is written into the engine."""
    course_words = re.compile(r"Module[ _]4|REINFORCE|\bPPO\b|week\d|\b4\.\d\.\d\b|Module_4_Sources")
    found = [f"{path.relative_to(HARNESS.parent)}:{number}: {line.strip()}"
             for path in sorted([*HARNESS.glob("*.py"), *HARNESS.glob("templates/*")])
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if course_words.search(line)]
    assert found == []


def test_claims_new_asks_which_subject_the_check_is_about(course_two, monkeypatch):
    """Verifier modules are arranged by subject, so no module is named for the author after the step's lesson:
    without --module (and no terminal to ask on) the command stops and lists the subjects there are."""
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    asked = r"verifier module, the subject the check is about \(existing: none; or a new name\) is needed"
    with pytest.raises(SystemExit, match=asked):
        claims_main(["new", "--step", "lesson1/sums", "--kind", "exact", "--id", "sum-of-two"])
    assert not (course_two / "toy_verifiers" / "lesson1.py").exists()


def test_claims_new_writes_a_property_verifier_that_errors_until_it_asserts_the_property(course_two, capsys):
    """The stub of a property check is the property itself (``@given``): it runs as written, is an error (never a
    pass) while it still raises NotImplementedError, and passes once its body asserts something true."""
    assert claims_main(["new", "--step", "lesson1/sums", "--kind", "property", "--id", "sum-of-one",
                        "--module", "extra"]) == 0, capsys.readouterr()
    assert "choose in @given one strategy per argument" in capsys.readouterr().out
    claims, stub = course_two / "claims" / "lesson1.yaml", course_two / "toy_verifiers" / "extra.py"
    assert "holds: true" in claims.read_text(encoding="utf-8")
    claims.write_text(claims.read_text(encoding="utf-8").replace("TODO-source-key", "gauss1801"), encoding="utf-8")
    with (course_two / "toy_verifiers" / "__init__.py").open("a", encoding="utf-8") as package:
        package.write("from toy_verifiers import extra  # noqa: E402,F401\n")  # this course imports its modules by hand

    def status() -> str:
        claims_main(["verify", "--no-cache", "-k", "sum-of-one", "--claims-report", "out"])
        results = json.loads((course_two / "out" / "claims.json").read_text(encoding="utf-8"))
        return next(row["status"] for row in results["claims"] if row["id"] == "sum-of-one")

    assert status() == "error"
    filled = re.sub(r"raise NotImplementedError\(.*\)", "assert ctx.impl.running_sum([x])[-1] == x",
                    stub.read_text(encoding="utf-8"))
    stub.write_text(filled.replace('kind="property")', 'kind="property", uses=("running_sum",))'), encoding="utf-8")
    assert status() == "passed"

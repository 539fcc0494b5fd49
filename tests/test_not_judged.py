"""Not judged is not green (issue 43, points 5 and 6): what the implementation kept from being judged is counted apart.

A check is not judged when it waited for a function not written yet (a stub, or a function that raised
NotImplementedError in any check of the run), when the implementation declined it (exact arithmetic, an optional
keyword), or when the implementation did not import. Its claim is ``not judged``, never ``passed``; every summary
counts it apart; ``claims verify`` and pytest exit non-zero on it, unless the run asks for a partial verdict
(``--claims-partial``), whose last line says how much was judged. A check skipped because it runs only in another
profile says nothing of the implementation: it stays ``skipped``.

The units are the results document's own (``build_results`` and ``function_scoreboard``, from the rows alone); the
end-to-end cases run a copy of the toy course (tests/course_two) with two more checks, a sympy proof that needs no
implementation and an exact check that passes Fractions, against small throwaway implementations.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import pythonpath

from claims_harness._reporting.phrases import judgement_line, not_judged_line, scoreboard_line
from claims_harness._reporting.results import _claim_status, _summary, checks_summary
from claims_harness._reporting.rows import check_row
from claims_harness.engine import NOT_JUDGED, function_scoreboard, render_markdown, report_directory_problem

HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------- the rows alone

PROFILE_SKIP = "runs only in the full profile; this run's profile is smoke"


def check(kind: str = "exact", status: str = "passed", uses: tuple[str, ...] = ("f",), **fields) -> dict:
    """A check's evidence as the runner gives it (``CheckResult.as_dict``), with what a case sets."""
    return {"kind": kind, "verifier": f"v.{kind}", "verifier_location": "v.py:1", "uses": list(uses),
            "status": status, "seed": 0, "seconds": 0.0, "comparisons": [], "observed": {}, "error": None,
            "skip_reason": None, "not_judged": None, "not_implemented": [], "not_checked": {}, "error_in": [],
            "sharpness": [],
            "reached": {}, "reused": False, "reproduce": "pytest x"} | fields


def stub(*functions: str, uses: tuple[str, ...] | None = None) -> dict:
    return check(status="skipped", uses=uses or functions, not_implemented=list(functions),
                 skip_reason=f"not implemented yet: {', '.join(functions)}: the check runs once the implementation "
                             "has it")


def declined_exact(uses: tuple[str, ...] = ("f",)) -> dict:
    return check(status="skipped", uses=uses, not_judged="exact arithmetic",
                 skip_reason="needs exact arithmetic: this check passes Fractions, which f declines "
                             "(m.__claims_exact_arithmetic__ = False)")


def declined_keyword(uses: tuple[str, ...] = ("f",)) -> dict:
    return check(status="skipped", uses=uses, not_judged="optional keyword",
                 skip_reason="unsupported call: f takes no carry= (an optional feature of the contract, "
                             "docs/implementation-contract.md)")


def claim_of(*checks: dict) -> dict:
    stubs = {name for each in checks for name in each["not_implemented"]}
    return {"problems": [], "checks": [check_row(each, stubs) for each in checks]}


def payloads(*claims: tuple[str, list[dict]]) -> list[dict]:
    return [{"file": "a.yaml", "index": index, "check_index": number, "line": 1, "claim": {"id": claim_id},
             "check": each} for index, (claim_id, checks) in enumerate(claims) for number, each in enumerate(checks)]


@pytest.mark.parametrize(("checks", "status"), [
    ([check("symbolic", uses=()), stub("f")], NOT_JUDGED),  # the case: a proof passed, the rest waited
    ([check("symbolic", uses=()), declined_exact()], NOT_JUDGED),
    ([check("symbolic", uses=()), declined_keyword()], NOT_JUDGED),
    ([check("symbolic", uses=()), check(status="skipped", not_judged="not imported",
                                        skip_reason="not run: it calls the implementation 'm', which cannot be "
                                                    "imported (the run's one error says why)")], NOT_JUDGED),
    ([check(), check(status="skipped", skip_reason="something a later harness says")], NOT_JUDGED),
    ([check(), check("experiment", status="skipped", skip_reason=PROFILE_SKIP)], "passed"),  # the profile's, not f's
    ([check("experiment", status="skipped", skip_reason=PROFILE_SKIP)], "skipped"),
    ([check(status="failed"), stub("f")], "failed"),  # red wins over not judged
    ([check(status="error"), declined_exact()], "error"),
])
def test_a_claim_is_passed_only_when_nothing_was_kept_from_judging_it(checks, status):
    assert _claim_status(claim_of(*checks)) == status


def test_each_check_not_judged_says_why_and_the_summary_counts_it_apart():
    rows = [claim_of(check("symbolic", uses=()), stub("f")), claim_of(declined_exact(), declined_keyword()),
            claim_of(check(), check("experiment", status="skipped", skip_reason=PROFILE_SKIP))]
    for row in rows:
        row["status"] = _claim_status(row)
    assert [each["not_judged"] for row in rows for each in row["checks"]] == [
        None, "not implemented", "exact arithmetic", "optional keyword", None, None]
    summary = _summary(rows)
    assert summary["claims"] == {"passed": 1, "failed": 0, "error": 0, NOT_JUDGED: 2, "skipped": 0}
    assert summary["checks"] == {"passed": 2, "failed": 0, "error": 0, NOT_JUDGED: 3, "skipped": 1}
    assert summary["not_judged"] == {"not implemented": 1, "exact arithmetic": 1, "optional keyword": 1,
                                     "not imported": 0, "other": 0}
    assert summary["by_kind"]["exact"][NOT_JUDGED] == 3
    assert judgement_line(summary) == (
        "judged 2 of 6 checks (2 passed); 3 not judged: 1 waits for functions not written yet, 1 declines exact "
        "arithmetic, 1 declines an optional keyword of the contract; 1 run only in another profile")
    assert not_judged_line(summary) == (
        "3 of 6 checks were not judged, for the implementation's sake: 1 waits for functions not written yet, 1 "
        "declines exact arithmetic, 1 declines an optional keyword of the contract. A claim with a check not judged "
        "is not judged, never passed: this report is a partial verdict.")


def test_a_function_that_raised_not_implemented_error_once_is_not_implemented_in_every_check():
    """NotImplementedError is 'not implemented' for the whole function: a check that passed without reaching the
    raise is not judged for it, and the scoreboard shows the function not implemented, never passed."""
    found = payloads(("small-sums", [check(uses=("f",))]),                     # passed: the raise was not reached
                     ("large-sums", [stub("f")]),                               # raised NotImplementedError here
                     ("other-function", [check(uses=("g",))]),
                     ("both", [check(uses=("f", "g"), status="failed")]))      # a failure stays a failure
    summary = checks_summary(found)
    assert summary["checks"] == {"passed": 1, "failed": 1, "error": 0, NOT_JUDGED: 2, "skipped": 0}
    assert summary["not_judged"]["not implemented"] == 2
    row = check_row(found[0]["check"], {"f"})
    assert row["status"] == NOT_JUDGED and row["not_implemented"] == ["f"]
    assert row["skip_reason"].startswith("not implemented yet: f raised NotImplementedError in another check of this "
                                         "run, so it is judged in none")
    board = {row["function"]: row for row in function_scoreboard(found)}
    assert board["f"]["implemented"] is False
    assert (board["f"]["passed"], board["f"]["not implemented"], board["f"]["failed"]) == (0, 2, 1)
    assert board["g"]["implemented"] is True and board["g"]["passed"] == 1 and board["g"]["failed"] == 1


def test_a_declined_check_is_never_counted_among_the_passed_of_its_function():
    found = payloads(("exact-one", [check(uses=("f",)), declined_exact()]), ("streaming", [declined_keyword()]),
                     ("plain", [check(uses=("f",))]),
                     ("full-only", [check(status="skipped", skip_reason=PROFILE_SKIP)]))
    (row,) = function_scoreboard(found)
    assert {key: row[key] for key in ("claims", "passed", "failed", "not implemented", "declined", "not run")} == {
        "claims": 4, "passed": 1, "failed": 0, "not implemented": 0, "declined": 2, "not run": 1}
    assert scoreboard_line([row]) == "implemented: 1, of which 0 fail and 1 declines checks (not judged)"


def test_the_markdown_says_it_under_the_title_and_marks_the_claim():
    from test_report_output import results_with

    results = results_with("x")
    results["claims"][0]["status"] = NOT_JUDGED
    results["claims"][0]["checks"][0].update(status=NOT_JUDGED, not_judged="exact arithmetic",
                                             skip_reason="needs exact arithmetic: f declines it")
    results["summary"] = _summary(results["claims"]) | {key: value for key, value in results["summary"].items()
                                                          if key not in ("claims", "checks", "by_kind")}
    markdown = render_markdown(results)
    assert "**NOT JUDGED**: 1 of 1 check was not judged, for the implementation's sake: 1 declines exact " \
           "arithmetic." in markdown
    assert "| claims | 0 | 0 | 1 | 1 | 0 |" in markdown  # and the other claim of the document, an error
    assert ": **NOT JUDGED**" in markdown and "Not judged: needs exact arithmetic: f declines it." in markdown


# --------------------------------------------------------------------------- the toy course, end to end

MORE_VERIFIERS = '''

@verifier("toy.gauss_step_symbolic", kind="symbolic")
def gauss_step_symbolic(ctx: Context) -> dict[str, object]:
    """n(n+1)/2 grows by n from n - 1 to n, with sympy: no implementation needed."""
    import sympy as sp

    n = sp.Symbol("n", positive=True, integer=True)
    return {"grows_by_n": bool(sp.simplify(n * (n + 1) / 2 - (n - 1) * n / 2 - n) == 0)}


@verifier("toy.fraction_sums", kind="exact", uses=("running_sum",))
def fraction_sums(ctx: Context) -> dict[str, object]:
    """The running sums of 1/2, 1/3 and 1/6, in exact arithmetic: the last is 1."""
    sums = ctx.impl.running_sum([Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)])
    reach(terms=len(sums))
    return {"last": Fraction(sums[-1])}
'''
MORE_CHECKS = '''      - kind: symbolic
        verifier: toy.gauss_step_symbolic
        rejects: "nothing of the implementation: the closed form itself"
        expect:
          grows_by_n: true
      - kind: exact
        verifier: toy.fraction_sums
        rejects: "a running sum that rounds its terms"
        expect:
          last: {exact: 1}
'''
CHECKS = 4  # the toy claim's exact and property checks, and the two above

STUBS = '''
def running_sum(values):
    """The sums of the first 1, 2, ..., n values."""
    raise NotImplementedError
'''
FLOATS_ONLY = '''
__claims_exact_arithmetic__ = False


def running_sum(values):
    total, sums = 0.0, []
    for value in values:
        total += float(value)
        sums.append(total)
    return sums
'''
# Right up to ten values; past them it would have to show its bug, and raises NotImplementedError instead.
HIDES_ITS_BUG = '''
def running_sum(values):
    if len(values) > 10:
        raise NotImplementedError
    total, sums = 0, []
    for value in values:
        total += value
        sums.append(total)
    return sums
'''


@pytest.fixture
def toy(tmp_path) -> Path:
    """A copy of the toy course with a sympy proof and an exact check in Fractions added to its one claim."""
    root = tmp_path / "course_two"
    shutil.copytree(HERE / "course_two", root, ignore=shutil.ignore_patterns("reports", ".claims-cache"))
    verifiers = root / "toy_verifiers" / "__init__.py"
    verifiers.write_text(verifiers.read_text(encoding="utf-8") + MORE_VERIFIERS, encoding="utf-8")
    claims = root / "claims" / "lesson1.yaml"
    claims.write_text(claims.read_text(encoding="utf-8") + MORE_CHECKS, encoding="utf-8")
    return root


def implementation(root: Path, name: str, source: str) -> str:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(source, encoding="utf-8")
    return name


def run(root: Path, *arguments: str, module: str = "claims_harness.cli") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *arguments], cwd=root, capture_output=True, text=True,
                          check=False, env={**os.environ, "PYTHONPATH": pythonpath(root)}, timeout=600)


def results(directory: Path) -> dict:
    return json.loads((directory / "claims.json").read_text(encoding="utf-8"))


def test_the_reference_is_judged_whole(toy):
    done = run(toy, "verify")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (f"claims verify: judged {CHECKS} of {CHECKS} checks ({CHECKS} passed) "
                                            "(exit status 0)")
    found = results(toy / "reports")
    assert found["summary"]["checks"][NOT_JUDGED] == 0 and found["summary"]["claims"]["passed"] == 1
    assert "NOT JUDGED" not in (toy / "reports" / "claims_report.md").read_text(encoding="utf-8")


def test_a_package_of_stubs_fails_unless_the_run_asks_for_a_partial_verdict(toy):
    impl = implementation(toy, "toy_stubs", STUBS)
    refused = run(toy, "verify", "--claims-impl", impl, "--claims-report", "stubs-report")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stdout.splitlines()[-1] == (
        "claims verify: not green: judged 1 of 4 checks (1 passed); 3 not judged: 3 wait for functions not written "
        "yet; a check not judged fails the run: write what it waits for, or ask for a partial verdict with "
        "--claims-partial (exit status 1)")
    found = results(toy / "stubs-report")
    (row,) = found["claims"]
    assert row["status"] == NOT_JUDGED  # its proof passed; the checks of the implementation waited
    assert [check["status"] for check in row["checks"]] == [NOT_JUDGED, NOT_JUDGED, "passed", NOT_JUDGED]
    assert found["summary"]["claims"]["passed"] == 0
    assert "**NOT JUDGED**: 3 of 4 checks were not judged" in (toy / "stubs-report" / "claims_report.md"
                                                                ).read_text(encoding="utf-8")
    assert 'id="not-judged"' in (toy / "stubs-report" / "claims_report.html").read_text(encoding="utf-8")

    partial = run(toy, "verify", "--claims-impl", impl, "--claims-report", "stubs-report", "--claims-partial")
    assert partial.returncode == 0, partial.stdout + partial.stderr
    assert partial.stdout.splitlines()[-1] == (
        "claims verify: partial verdict (--claims-partial): judged 1 of 4 checks (1 passed); 3 not judged: 3 wait "
        "for functions not written yet (exit status 0)")


def test_pytest_fails_a_package_of_stubs_unless_asked_for_a_partial_verdict(toy):
    impl = implementation(toy, "toy_stubs", STUBS)
    refused = run(toy, "claims", "-p", "no:cacheprovider", "--claims-impl", impl, module="pytest")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert ("claims: not green: judged 1 of 4 checks (1 passed); 3 not judged: 3 wait for functions not written yet"
            in refused.stdout)
    assert "not implemented yet: 1 functions; implemented: 0, of which 0 fail" in refused.stdout
    partial = run(toy, "claims", "-p", "no:cacheprovider", "--claims-impl", impl, "--claims-partial", module="pytest")
    assert partial.returncode == 0, partial.stdout + partial.stderr
    assert ("claims: partial verdict (--claims-partial): judged 1 of 4 checks (1 passed); 3 not judged: 3 wait for "
            "functions not written yet") in partial.stdout


def test_a_module_that_declines_exact_arithmetic_is_judged_on_its_exact_checks_by_replay(toy):
    """Its exact check's calls, made to the reference in fractions, are made to it again in float64
    (claims_harness._running.replay): the check is judged, and says how."""
    impl = implementation(toy, "toy_floats", FLOATS_ONLY)
    done = run(toy, "verify", "--claims-impl", impl, "--claims-report", "floats-report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("claims verify: judged 4 of 4 checks (4 passed)")
    (row,) = results(toy / "floats-report")["claims"]
    replayed = row["checks"][3]
    assert (replayed["status"], replayed["in_floats"]) == ("passed", "replay")
    assert [c["observed"] for c in replayed["comparisons"]] == ["all 1 within"]
    (function,) = results(toy / "floats-report")["functions"]
    assert (function["passed"], function["declined"]) == (1, 0)


def test_a_module_that_declines_exact_arithmetic_fails_an_exact_check_it_gets_wrong_in_floats(toy):
    impl = implementation(toy, "toy_floats_rounding", FLOATS_ONLY.replace("float(value)", "round(float(value), 3)"))
    done = run(toy, "verify", "--claims-impl", impl, "--claims-report", "floats-report")
    assert done.returncode == 1, done.stdout + done.stderr
    (row,) = results(toy / "floats-report")["claims"]
    assert (row["checks"][3]["status"], row["checks"][3]["blamed"]) == ("failed", ["running_sum"])


def test_a_function_raising_not_implemented_error_in_one_check_is_not_implemented_in_all(toy):
    impl = implementation(toy, "toy_hiding", HIDES_ITS_BUG)
    done = run(toy, "verify", "--claims-impl", impl, "--claims-report", "hiding-report")
    assert done.returncode == 1, done.stdout + done.stderr
    found = results(toy / "hiding-report")
    (row,) = found["claims"]
    exact, prop, _, fractions = row["checks"]
    assert prop["not_implemented"] == ["running_sum"]  # n up to 200: it raised
    for passed_without_the_raise in (exact, fractions):  # n = 10 and three fractions: it did not
        assert passed_without_the_raise["status"] == NOT_JUDGED, passed_without_the_raise
        assert passed_without_the_raise["not_implemented"] == ["running_sum"]
        assert passed_without_the_raise["comparisons"] and all(c["passed"] for c in
                                                               passed_without_the_raise["comparisons"])
    assert row["status"] == NOT_JUDGED
    assert found["functions"] == [{"function": "running_sum", "implemented": False, "given": False, "claims": 1,
                                   "passed": 0, "failed": 0, "used by a failing check": 0, "not implemented": 1,
                                   "declined": 0, "not run": 0, "failing_claims": []}]
    assert "3 not judged: 3 wait for functions not written yet" in done.stdout.splitlines()[-1]


# --------------------------------------------------------------------------- report directories that cannot be one


def _a_course_with_every_kind_of_folder(toy: Path) -> None:
    implementation(toy, "toy_student", STUBS)
    for folder in ("tests", "docs", ".claims-cache", "other-course", "more-claims"):
        (toy / folder).mkdir(exist_ok=True)
    (toy / "other-course" / "pyproject.toml").write_text("[tool.claims]\ntitle = 'x'\n", encoding="utf-8")
    (toy / "more-claims" / "extra.yaml").write_text("title: x\nclaims: []\n", encoding="utf-8")


@pytest.mark.parametrize(("given", "said"), [
    ("", "it is the project's root"),
    (".", "it is the project's root"),
    ("claims", "it is the course's claims directory"),
    ("toy_verifiers", "it is the course's verifier package"),
    ("toy_impl", "it is the course's reference implementation"),
    ("toy_student", "it is the implementation under test (toy_student)"),
    ("tests", "it is the project's tests"),
    ("docs", "it is the project's documentation"),
    (".claims-cache", "it is the course's observation cache"),
    ("..", "it is a directory that holds the project"),
    ("/", "it is the file system's root"),
    ("other-course", "it is a course's root"),
    ("more-claims", "it is a directory of claim files (extra.yaml)"),
])
def test_a_report_directory_that_is_part_of_the_project_cannot_hold_a_report(toy, monkeypatch, given, said):
    _a_course_with_every_kind_of_folder(toy)
    monkeypatch.chdir(toy)
    problem = report_directory_problem(Path(given), toy, "toy_student")
    assert problem.startswith(f"{Path(given)} cannot hold a report: {said}"), problem
    assert problem.endswith("a run replaces its report directory whole; give --claims-report a directory of its own, "
                            "e.g. my-report (made if it does not exist)"), problem


@pytest.mark.parametrize(("given", "said"), [("", "it is the project's root"),
                                             ("claims", "it is the course's claims directory")])
def test_a_report_directory_that_cannot_hold_a_report_is_refused_before_anything_runs(toy, given, said):
    """The command and the plugin ask the question above before any check runs, and write nothing."""
    _a_course_with_every_kind_of_folder(toy)
    before = sorted(path.relative_to(toy) for path in toy.rglob("*"))
    done = run(toy, "verify", "--claims-impl", "toy_student", "--claims-report", given, "--claims-partial")
    assert done.returncode == 2, done.stdout + done.stderr
    first, second = done.stderr.splitlines()
    assert first.startswith("claims verify: ") and f" cannot hold a report: {said}" in first, first
    assert second == "claims verify: no check run, no report written"
    assert sorted(path.relative_to(toy) for path in toy.rglob("*")) == before  # nothing swapped, nothing written
    if given:  # pytest reads an empty --claims-report as no report
        plugin = run(toy, "claims", "-p", "no:cacheprovider", "--claims-impl", "toy_student", "--claims-report", given,
                     module="pytest")
        assert plugin.returncode == pytest.ExitCode.USAGE_ERROR and said in plugin.stderr, plugin.stderr


def test_staging_directories_of_runs_that_no_longer_exist_are_removed_at_the_start_of_a_run(toy):
    """A run killed by SIGKILL leaves its staging directory; the next run into the same directory removes it when
    its process is gone or it is older than a day, and leaves a running run's alone."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                              check=True)
    gone = int(finished.stdout)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        staged = {}
        for name, pid, age in (("killed", gone, 0), ("old", alive.pid, 2 * 24 * 3600), ("running", alive.pid, 0),
                               ("unmarked-new", None, 0), ("unmarked-old", None, 2 * 24 * 3600)):
            staging = toy / f".reports.staging-{name}"
            (staging / "figures").mkdir(parents=True)
            if pid is not None:
                (staging / ".claims-run-pid").write_text(f"{pid}\n", encoding="utf-8")
            if age:
                os.utime(staging, (time.time() - age, time.time() - age))
            staged[name] = staging
        done = run(toy, "verify")
        assert done.returncode == 0, done.stdout + done.stderr
        assert {name for name, staging in staged.items() if staging.exists()} == {"running", "unmarked-new"}
        assert not [path for path in toy.iterdir() if ".staging-" in path.name and path not in staged.values()]
    finally:
        alive.kill()
        alive.wait()

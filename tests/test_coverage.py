"""Statement-level coverage: the ledger of each step, its statuses in all three reports, provenance, and the gate.

The fixture is one lesson whose ledger holds one statement of each status: covered by a passed
strong check, weakly covered, failed, not run in the smoke profile, not checkable, and missing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import course_catalogue, write_course
from test_plugin import MODELINE, SOURCES, Project

from claims_harness import RunOptions, load_catalogue, run_check
from claims_harness.cli import main as claims_main
from claims_harness.engine import (
    SHAPE_DESCRIPTIONS,
    STATEMENT_STATUSES,
    NewClaim,
    claim_skeleton,
    compare_snapshots,
    json_schema_text,
    snapshot,
    statement_status,
    validate,
)

CACHE_DIR = Path(".claims-cache")  # the course's cache ([tool.claims] cache), from the course root

BERNOULLI = "params: {p: 0.35, reward_success: 1, reward_failure: -0.2, group_size: 8}"

LEDGER = """\
statements:
  - id: 424-loo-is-scaled-centring
    where: "4.2.4"
    says: The leave-one-out advantage is the group-centred one times G/(G-1).
    shape: general
    scope: {}
  - id: 425-gradient-number
    where: "4.2.5"
    says: The logit gradient of the Bernoulli example is 0.273.
    shape: instance
    scope: {}
  - id: 425-group-mean-ratio
    where: "4.2.5"
    says: The group-mean estimator's expectation is 7/8 of the gradient, for every p.
    shape: general
    scope: {}
  - id: 425-misprinted-number
    where: "4.2.5"
    says: A number the fixture misstates on purpose.
    shape: instance
    scope: {}
  - id: 425-full-profile-only
    where: "4.2.5"
    says: A statement whose only strong check runs in the full profile.
    shape: general
    scope: {}
  - id: 425-attribution
    where: "4.2.5"
    says: The example is due to <em>somebody</em>.
    not_checkable: a historical attribution, cited and not verified
  - id: 425-nobody-checks-this
    where: "4.2.5"
    says: A statement no claim covers & no reason excuses.
    scope: {}
"""


def exact_check(gradient: str = "0.273", chosen: str = "", profiles: str = "") -> str:
    return f"""\
      - kind: exact
        verifier: bernoulli.group_estimators_exact
        {BERNOULLI}
{profiles}        rejects: a logit gradient computed without the factor p(1-p)
{chosen}        expect:
          gradient: {gradient}
          group_mean_ratio: {{exact: "7/8"}}
"""


def ledger_claim(claim_id: str, covers: str, checks: str, where: str = "4.2.5", extra: str = "") -> str:
    return f"""\
  - id: {claim_id}
    where: "{where}"
    statement: The one-step Bernoulli policy's logit gradient is 0.273.
    sources: [williams1992]
    covers: [{covers}]
{extra}    checks:
{checks}"""


CLAIMS = "claims:\n" + "".join([
    ledger_claim("loo-scaled", "424-loo-is-scaled-centring", """\
      - kind: symbolic
        verifier: baselines.loo_identity
        rejects: a leave-one-out mean over all G answers instead of the other G-1
        expect:
          residual: {exact: 0}
""", where="4.2.4"),
    ledger_claim("gradient-printed", "425-gradient-number, 425-group-mean-ratio",
                 exact_check(chosen="        harness_chosen: [group_mean_ratio]\n"),
                 extra="    origin: harness\n"),
    ledger_claim("gradient-misprinted", "425-misprinted-number", exact_check(gradient="0.283")),
    ledger_claim("gradient-in-full", "425-full-profile-only",
                 exact_check() + """\
      - kind: property
        verifier: baselines.loo_identity_property
        profiles: [full]
        rejects: a leave-one-out mean over all G answers instead of the other G-1
        expect:
          holds: true
"""),
])

LESSON = MODELINE + 'title: "Lesson T: a test lesson"\nsteps: ["4.2.4", "4.2.5"]\n' + LEDGER + CLAIMS
EXPECTED_STATUSES = {
    "424-loo-is-scaled-centring": "covered",
    "425-gradient-number": "covered",
    "425-group-mean-ratio": "weak",
    "425-misprinted-number": "failed",
    "425-full-profile-only": "not run",
    "425-attribution": "not checkable",
    "425-nobody-checks-this": "missing",
}


@pytest.fixture
def ledger_project(pytester: pytest.Pytester) -> Project:
    project = Project(pytester)
    project.write("lesson.yaml", LESSON)
    (project.claims / "schema.json").write_text(json_schema_text(), encoding="utf-8")
    return project


def statuses(results: dict) -> dict[str, str]:
    return {statement["id"]: statement["status"] for lesson in results["coverage"] for step in lesson["steps"]
            for statement in step["statements"]}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, str]:
    """The three reports of one pytest run of the fixture (smoke profile): JSON, Markdown, HTML. One run serves
    every test of the module: they only read what it wrote (a test that changes a report changes a copy)."""
    root = tmp_path_factory.mktemp("ledger")
    write_course(root)
    (root / "claims").mkdir()
    (root / "claims" / "lesson.yaml").write_text(LESSON, encoding="utf-8")
    (root / "claims" / "schema.json").write_text(json_schema_text(), encoding="utf-8")
    (root / "Module_4_Sources.md").write_text(SOURCES, encoding="utf-8")
    finished = subprocess.run([sys.executable, "-m", "pytest", "claims", "-p", "no:cacheprovider", "--claims-report",
                               "out"], cwd=root, capture_output=True, text=True, check=False)
    assert "1 failed, 3 passed, 1 skipped in" in finished.stdout, finished.stdout[-3000:] + finished.stderr[-3000:]
    out = root / "out"
    return (json.loads((out / "claims.json").read_text(encoding="utf-8")),
            (out / "claims_report.md").read_text(encoding="utf-8"),
            (out / "claims_report.html").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the results JSON


def test_every_statement_gets_its_status_from_the_checks_covering_it(reports):
    results, _, _ = reports
    assert statuses(results) == EXPECTED_STATUSES
    assert results["summary"]["statements"] == {"covered": 2, "weak": 1, "failed": 1, "not run": 1,
                                                "not checkable": 1, "missing": 1}
    (lesson,) = results["coverage"]
    by_step = {step["step"]: step for step in lesson["steps"]}
    assert by_step["4.2.4"]["statement_counts"]["covered"] == 1
    assert by_step["4.2.5"]["statement_counts"] == {"covered": 1, "weak": 1, "failed": 1, "not run": 1,
                                                    "not checkable": 1, "missing": 1}
    # The claim counts per step stay as they were.
    assert by_step["4.2.5"]["claims"] == 3
    assert by_step["4.2.5"]["statuses"] == {"passed": 2, "failed": 1}


def test_uncovered_statements_are_listed_by_id_and_text(reports):
    results, _, _ = reports
    uncovered = {statement["id"]: statement for statement in results["uncovered"]}
    assert list(uncovered) == ["425-group-mean-ratio", "425-misprinted-number", "425-nobody-checks-this"]
    assert uncovered["425-nobody-checks-this"]["says"] == "A statement no claim covers & no reason excuses."
    assert uncovered["425-misprinted-number"]["claims"] == ["gradient-misprinted"]


def test_the_criterion_travels_with_the_results(reports):
    results, _, _ = reports
    criterion = results["coverage_criterion"]
    assert criterion["statuses"] == STATEMENT_STATUSES
    assert {shape: item["description"] for shape, item in criterion["shapes"].items()} == SHAPE_DESCRIPTIONS
    assert criterion["shapes"]["general"]["strong_kinds"] == ["property", "symbolic"]


def test_claims_carry_what_they_cover_their_origin_and_each_check_its_provenance(reports):
    results, _, _ = reports
    claims = {row["id"]: row for row in results["claims"]}
    assert claims["gradient-printed"]["covers"] == ["425-gradient-number", "425-group-mean-ratio"]
    assert claims["gradient-printed"]["origin"] == "harness"
    assert claims["loo-scaled"]["origin"] == "text"
    (check,) = claims["gradient-printed"]["checks"]
    assert check["harness_chosen"] == ["group_mean_ratio"]
    assert check["rejects"] == "a logit gradient computed without the factor p(1-p)"
    stated_by = {comparison["key"]: comparison["stated_by"] for comparison in check["comparisons"]}
    assert stated_by == {"gradient": "text", "group_mean_ratio": "harness"}
    assert claims["gradient-misprinted"]["checks"][0]["harness_chosen"] == []


# --------------------------------------------------------------------------- Markdown and HTML


def test_markdown_coverage_is_statement_level(reports):
    _, markdown, _ = reports
    coverage = markdown[markdown.index("## Coverage"):markdown.index("## Lesson T")]
    assert "| 4.2.5 | 6 | 1 | **1** | **1** | 1 | 1 | **1** | 2 passed, 1 failed |" in coverage
    assert ("- `425-nobody-checks-this` (4.2.5, general): **MISSING**: A statement no claim covers & no reason "
            "excuses.") in coverage
    assert "- `425-group-mean-ratio` (4.2.5, general): **WEAK**" in coverage
    assert "- `425-misprinted-number` (4.2.5, instance): **FAILED**" in coverage
    # Markup in a statement is text in the Markdown too: escaped, so that it renders as written.
    assert ("- `425-attribution` (4.2.5): The example is due to \\<em>somebody\\</em>. *Why not:* a historical "
            "attribution, cited and not verified") in coverage
    for description in SHAPE_DESCRIPTIONS.values():
        assert description in coverage
    # Each step's section lists its ledger, with the claims covering each statement.
    step = markdown[markdown.index("### Step 4.2.5"):]
    assert "- `425-gradient-number` (instance): covered: The logit gradient" in step
    assert "(claims: `gradient-printed`)" in step


def test_markdown_marks_chosen_values_harness_claims_and_rejects(reports):
    _, markdown, _ = reports
    claim = markdown[markdown.index("#### `gradient-printed`"):markdown.index("#### `gradient-misprinted`")]
    assert claim.startswith("#### `gradient-printed`: passed (added by the harness)")
    assert "- *added by the harness, not stated by the text" in claim
    assert "- covers: `425-gradient-number`, `425-group-mean-ratio`" in claim
    assert "Rejects: a logit gradient computed without the factor p(1-p)" in claim
    rows = {line.split(" | ")[0]: line for line in claim.splitlines() if line.startswith("| `")}
    assert "exactly 7/8 \u2020 |" in rows["| `group_mean_ratio`"]
    assert "\u2020" not in rows["| `gradient`"]
    assert "\u2020 chosen by the harness, not stated by the text: `group_mean_ratio`" in claim
    # The opening sentence says which claims are not the text's.
    opening = markdown.split("\n\n")[1]
    assert "Every claim below is a statement of the text" in opening and "added by the harness" in opening


def test_html_map_has_a_square_per_statement_with_its_text(reports):
    _, _, html = reports
    squares = re.findall(r'<a class="dot st-([a-z-]+)" href="#statement-([a-z0-9-]+)" title="([^"]*)"', html)
    assert {key: status.replace("-", " ") for status, key, _ in squares} == EXPECTED_STATUSES
    titles = {key: title for _, key, title in squares}
    assert titles["425-nobody-checks-this"] == ("425-nobody-checks-this (missing): A statement no claim covers "
                                                "&amp; no reason excuses.")
    assert "<em>somebody</em>" not in html  # statements are text, escaped
    assert 'id="statement-425-attribution"' in html
    uncovered = html[html.index('<h3 id="uncovered">'):html.index('<h3 id="not-checkable">')]
    for key in ("425-group-mean-ratio", "425-misprinted-number", "425-nobody-checks-this"):
        assert f"<code>{key}</code>" in uncovered
    assert "425-gradient-number" not in uncovered
    assert "a historical attribution, cited and not verified" in html


def test_html_marks_chosen_values_harness_claims_and_rejects(reports):
    _, _, html = reports
    claim = html[html.index('id="claim-gradient-printed"'):html.index('id="claim-gradient-misprinted"')]
    assert 'class="badge badge-harness"' in claim
    assert "Rejects: a logit gradient computed without the factor p(1-p)" in claim
    rows = re.findall(r"<tr><td><code>(\w+)</code></td><td>(.*?)</td>", claim)
    assert [("chosen by the harness" in cell) for _, cell in rows] == [False, True]
    assert '<a href="#statement-425-group-mean-ratio">' in claim
    misprinted = html[html.index('id="claim-gradient-misprinted"'):]
    assert "badge-harness" not in misprinted[:misprinted.index("</article>")]


# --------------------------------------------------------------------------- how the ledger reaches the report


def run_every_check(claims: Path) -> None:
    """Run every check once in this process, keeping its observations where a warm `claims verify` reuses them."""
    catalogue = load_catalogue(claims)
    options = RunOptions(profile="smoke", cache_dir=str(CACHE_DIR), report_dir="reports")
    for entry in catalogue.entries:
        for index, check in enumerate(entry.claim.checks):
            run_check(entry, index, catalogue.verifiers[check.verifier], options)


def test_the_warm_path_reports_the_same_coverage_as_pytest(ledger_project, monkeypatch, capsys):
    monkeypatch.chdir(ledger_project.root)
    run_every_check(ledger_project.claims)

    assert claims_main(["verify", "--claims-profile", "smoke", "--claims-report", "warm"]) == 1
    assert "ran 0 checks" in capsys.readouterr().out
    ledger_project.run("--claims-report", "pytest")
    warm, through_pytest = (json.loads((ledger_project.root / name / "claims.json").read_text(encoding="utf-8"))
                            for name in ("warm", "pytest"))
    assert statuses(warm) == statuses(through_pytest) == EXPECTED_STATUSES
    assert warm["uncovered"] == through_pytest["uncovered"]
    assert warm["coverage"] == through_pytest["coverage"]


def test_the_ledger_reaches_the_report_under_xdist(ledger_project):
    ledger_project.run("-n", "2", "-p", "no:benchmark", "--claims-report", "parallel")
    results = json.loads((ledger_project.root / "parallel" / "claims.json").read_text(encoding="utf-8"))
    assert statuses(results) == EXPECTED_STATUSES


def test_claims_a_run_did_not_select_leave_their_statements_not_run(ledger_project):
    ledger_project.run("-k", "loo-scaled", "--claims-report", "out")
    results = json.loads((ledger_project.root / "out" / "claims.json").read_text(encoding="utf-8"))
    assert statuses(results) == EXPECTED_STATUSES | {
        "425-gradient-number": "not run", "425-group-mean-ratio": "not run", "425-misprinted-number": "not run"}


# --------------------------------------------------------------------------- the precedence of statuses


def statement(shape: str = "general", kinds: tuple[str, ...] = ("property", "exact")) -> dict:
    return {"claims": ["c"], "not_checkable": None, "shape": shape, "kinds": list(kinds)}


def ran(*checks: tuple[str, str], problems: tuple[str, ...] = ()) -> dict[str, list[dict]]:
    """The rows of one claim 'c' as ``build_results`` makes them: its problems and its checks' kinds and statuses."""
    return {"c": [{"problems": list(problems),
                   "checks": [{"kind": kind, "status": status} for kind, status in checks]}]}


@pytest.mark.parametrize(("checks", "expected"), [
    ((("property", "passed"), ("exact", "passed")), "covered"),
    ((("property", "passed"), ("exact", "failed")), "failed"),  # red wins over a strong pass
    ((("property", "error"), ("exact", "passed")), "failed"),
    ((("property", "skipped"), ("exact", "passed")), "not run"),  # the strong check exists but did not run
    ((("property", "skipped"), ("exact", "skipped")), "not run"),
])
def test_failed_wins_and_a_skipped_strong_check_is_not_run(checks, expected):
    assert statement_status(statement(), ran(*checks))["status"] == expected


def test_weak_means_no_strong_kind_among_the_covering_checks():
    assert statement_status(statement(kinds=("exact",)), ran(("exact", "passed")))["status"] == "weak"
    assert statement_status(statement("instance", kinds=("exact",)), ran(("exact", "passed")))["status"] == "covered"
    assert statement_status(statement(), {})["status"] == "not run"
    assert statement_status(statement(), ran(problems=("cannot be loaded",)))["status"] == "failed"
    assert statement_status({**statement(), "claims": []}, {})["status"] == "missing"
    assert statement_status({**statement(), "claims": [], "not_checkable": "why"}, {})["status"] == "not checkable"


# --------------------------------------------------------------------------- lint and the release gate


def test_lint_refuses_an_uncovered_statement_and_a_claim_covering_nothing(ledger_project, capsys):
    text = LESSON.replace("    covers: [425-full-profile-only]\n", "    covers: []\n")
    ledger_project.write("lesson.yaml", text)
    assert claims_main(["--claims-dir", str(ledger_project.claims), "lint"]) == 2
    out = capsys.readouterr().out
    assert "statement '425-nobody-checks-this' (4.2.5) is checked by no claim" in out
    assert "statement '425-full-profile-only' (4.2.5) is checked by no claim" in out
    assert "claim 'gradient-in-full' covers no ledger statement" in out
    assert "425-attribution" not in out  # not checkable, with a reason


def test_verify_fails_on_an_incomplete_ledger_but_pytest_does_not(ledger_project, monkeypatch, capsys):
    text = LESSON.replace("0.283", "0.273")  # every check passes; one statement is still missing
    ledger_project.write("lesson.yaml", text)
    ledger_project.run().result.assert_outcomes(passed=4, skipped=1)
    monkeypatch.chdir(ledger_project.root)
    run_every_check(ledger_project.claims)
    capsys.readouterr()
    assert claims_main(["verify", "--claims-profile", "smoke", "--claims-report", "out"]) == 1
    err = capsys.readouterr().err
    assert "statement '425-nobody-checks-this' (4.2.5) is checked by no claim" in err
    assert "claims verify: the statement ledger is incomplete" in err

    ledger_project.write("lesson.yaml", text.replace("covers: [425-misprinted-number]",
                                                     "covers: [425-misprinted-number, 425-nobody-checks-this]"))
    assert claims_main(["verify", "--claims-profile", "smoke", "--claims-report", "out"]) == 0
    assert "ledger" not in capsys.readouterr().err


def test_the_gate_names_a_statement_whose_status_changed(reports, tmp_path):
    results, _, _ = reports
    out = tmp_path / "out"
    out.mkdir()
    (out / "claims.json").write_text(json.dumps(results), encoding="utf-8")
    before = snapshot(out)
    changed = json.loads(json.dumps(results))
    for lesson in changed["coverage"]:
        for step in lesson["steps"]:
            for stated in step["statements"]:
                if stated["id"] == "425-group-mean-ratio":
                    stated["status"] = "covered"
    (out / "claims.json").write_text(json.dumps(changed), encoding="utf-8")
    assert "statement '425-group-mean-ratio': weak -> covered" in compare_snapshots(before, snapshot(out))


def test_a_report_written_before_the_ledger_compares_as_stale_without_crashing(reports, tmp_path):
    results, _, _ = reports
    old = json.loads(json.dumps(results))
    del old["coverage_criterion"], old["uncovered"], old["summary"]["statements"]
    for lesson in old["coverage"]:
        for step in lesson["steps"]:
            del step["statements"], step["statement_counts"]
    (tmp_path / "claims.json").write_text(json.dumps(old), encoding="utf-8")
    before = snapshot(tmp_path)
    assert before.unrendered == ("claims_report.md", "claims_report.html")


# --------------------------------------------------------------------------- authoring


PROJECT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("claim_id", "module", "refused"), [
    ("class", "baseline_groups", "a Python keyword"),
    ("match", "baseline_groups", "a Python keyword"),  # a soft keyword
    ("42-is-the-answer", "baseline_groups", "beginning with a letter"),
    ("loo-identity-again\n", "baseline_groups", "not kebab-case"),
    ("loo-identity-again ", "baseline_groups", "not kebab-case"),
    ("loo-identity-again", "baseline_groups\n", "not a Python module name"),
    ("loo-identity-again", "import", "not a Python module name"),
    ("corridor", "actor_critic", "defines 'corridor' already"),  # a helper the stub would replace
])
def test_claims_new_refuses_what_would_write_invalid_python_or_shadow_a_helper(claim_id, module, refused):
    catalogue = course_catalogue()
    errors = validate(NewClaim("4.2.4", "exact", claim_id, module), catalogue, PROJECT / "verifiers")
    assert any(refused in error for error in errors), errors
    fine = NewClaim("4.2.4", "exact", "loo-identity-again", "baseline_groups")
    assert not validate(fine, catalogue, PROJECT / "verifiers")


def test_a_new_claim_skeleton_asks_for_covers_and_rejects(ledger_project):
    skeleton = claim_skeleton(NewClaim("4.2.5", "exact", "new-claim", "bernoulli"))
    ledger_project.write("lesson.yaml", LESSON + skeleton)
    entry = load_catalogue(ledger_project.claims).entries[-1]
    assert entry.claim.covers == ["todo-statement-id"]
    assert entry.claim.checks[0].rejects.startswith("TODO: one concrete wrong implementation")
    assert not any("covers" in str(problem) for problem in entry.problems), "covers never stops a check from running"
    assert "covers unknown statement 'todo-statement-id'" in " ".join(
        str(problem) for problem in load_catalogue(ledger_project.claims).ledger_problems())

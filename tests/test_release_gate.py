"""`claims verify --check`, the release gate: a fresh run must state what the committed report states.

Another CPU changes the last bits of floats and, through them, where a chaotic experiment's seed
ends. The gate must pass there, as long as the verdicts hold, and must fail, naming what changed,
on any real change. Shown on the committed report itself: every float observation is moved by a
few units in the last place, each experiment's seeds one at a time to either end of the spread its
claim states was measured, and the harness's own comparison judges the result again.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from conftest import course_catalogue, course_entry, pythonpath
from test_loading import claim, claim_file, claims_dir

from claims_harness import RunOptions, lookup, run_check
from claims_harness.cli import main as claims_main
from claims_harness.engine import (
    RESULTS_FILE,
    Check,
    Expectation,
    GateFindings,
    Snapshot,
    compare,
    compare_snapshots,
    gate_findings,
    is_interval,
    snapshot,
    stated_differences,
)
from claims_harness.stats import MeanEstimate
from verifiers import actor_critic, cartpole, gru

PROJECT = Path(__file__).resolve().parents[1]
COMMITTED = PROJECT / "reports" / RESULTS_FILE


@dataclass(frozen=True)
class Chaotic:
    """An experiment's outcomes per seed (or per run), the range each was measured in as its claim
    states, and the verifier's own function that makes the claim's statistics of them."""

    spread: dict[str, tuple[float, float]]
    statistics: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


# The experiments of the committed report's profile (full), with the spreads their claims state were measured
# (in the limitations or the check's note), rounded outwards: CartPole's chaotic seeds scored about 120, taken as 100.
CHAOTIC = {
    "actor-critic-iteration-improves-return": Chaotic(
        {"improvements": (0.0186, 0.0344)},
        lambda observed, params: actor_critic.improvement_statistics(observed["improvements"])),
    "ppo-keeps-neither-ratios-nor-kl-bounded": Chaotic(
        {"max_ratio_outside_fraction": (0.18, 0.65), "max_kl_k3": (0.0127, 0.053)},
        lambda observed, params: cartpole.ratio_statistics(observed["max_ratio_outside_fraction"],
                                                           observed["max_kl_k3"])),
    "ppo-trains-cartpole": Chaotic(
        {"final_returns": (100.0, 500.0)},
        lambda observed, params: cartpole.training_statistics(observed["final_returns"], params["solved_return"])),
    "implementation-details-change-results": Chaotic(
        {"default_final_returns": (100.0, 500.0), "changed_final_returns": (9.2, 212.26)},
        lambda observed, params: cartpole.detail_statistics(
            observed["default_final_returns"], observed["changed_final_returns"],
            observed["default_kl_per_iteration"], observed["changed_kl_per_iteration"])),
    "fewer-epochs-change-results": Chaotic(
        {"default_final_returns": (100.0, 500.0), "changed_final_returns": (89.12, 435.8)},
        lambda observed, params: cartpole.detail_statistics(
            observed["default_final_returns"], observed["changed_final_returns"],
            observed["default_kl_per_iteration"], observed["changed_kl_per_iteration"])),
    # Six details of step 4.4.5, each toggled alone: the verdict is that every seed's run changes, which no seed's
    # outcome moves; the outcomes observed beside it were measured over seeds 0-11 at the full budget.
    **{claim: Chaotic(
        {"default_final_returns": (122.7, 500.0), "changed_final_returns": (141.8, 500.0)},
        lambda observed, params: cartpole.detail_statistics(
            observed["default_final_returns"], observed["changed_final_returns"],
            observed["default_kl_per_iteration"], observed["changed_kl_per_iteration"]))
       for claim in ("value-head-scale-toggled-on-cartpole", "advantage-normalisation-toggled-on-cartpole",
                     "minibatch-order-toggled-on-cartpole", "learning-rate-schedule-toggled-on-cartpole",
                     "gradient-clipping-toggled-on-cartpole", "entropy-bonus-toggled-on-cartpole")},
    "closing-map-run-profiles": Chaotic(
        {"final_returns": (100.0, 500.0)},
        lambda observed, params: cartpole.training_statistics(observed["final_returns"], params["solved_return"])),
    "diagnostic-levels-depend-on-setup": Chaotic(
        {"default_kl_per_iteration": (0.00113, 0.0164), "changed_kl_per_iteration": (6.85e-06, 0.000466)},
        lambda observed, params: cartpole.detail_statistics(
            observed["default_final_returns"], observed["changed_final_returns"],
            observed["default_kl_per_iteration"], observed["changed_kl_per_iteration"])),
    "gru-rloo-ppo-training": Chaotic(
        {"trained_rewards": (0.587, 0.943)},
        lambda observed, params: gru.training_statistics(observed["untrained_rewards"], observed["trained_rewards"])),
    "closing-map-one-curve-not-stability": Chaotic(
        {"final_rewards": (0.67, 0.91)},
        lambda observed, params: gru.spread_statistics(observed["untrained_rewards"], observed["final_rewards"],
                                                       observed["evaluation_half_width"])),
}
ULPS = (-4, -1, 1, 4)


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    return json.loads(COMMITTED.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def claim_checks() -> dict[str, list[Check]]:
    return {entry.id: entry.claim.checks for entry in course_catalogue().entries if entry.claim}


def _ran(results: dict[str, Any], claim_checks: dict[str, list[Check]]):
    """(claim id, the claim file's check, the report's check) of every check that ran and was compared."""
    for row in results["claims"]:
        for stated, check in zip(claim_checks[row["id"]], row["checks"], strict=True):
            assert stated.kind == check["kind"], (row["id"], stated.kind, check["kind"])
            if check["status"] in ("passed", "failed"):
                yield row["id"], stated, check


def rejudged(results: dict[str, Any], claim_checks: dict[str, list[Check]],
             observe: Callable[[str, Check, dict[str, Any]], dict[str, Any]], judge_all: bool = False
             ) -> dict[str, Any]:
    """A copy of ``results`` in which each check observed ``observe(claim, check, observed)`` instead, judged
    again as the runner judges: the harness's compare of each observation with the claim file's expect.
    A check whose observations ``observe`` returns as they were keeps its comparisons, unless ``judge_all``."""
    # Copied down to each check's own fields, which are all this sets (observe returns new observations): a deep
    # copy of the whole report per call was most of this module's time.
    results = {**results, "claims": [{**row, "checks": [dict(check) for check in row["checks"]]}
                                     for row in results["claims"]]}
    for claim_id, stated, check in _ran(results, claim_checks):
        observed = observe(claim_id, stated, check["observed"])
        if observed is check["observed"] and not judge_all:
            continue
        check["observed"] = observed
        comparisons = [asdict(comparison) for key, expectation in stated.expect.items()
                       for comparison in compare(key, expectation, _as_observed(check["observed"][key]))]
        for comparison, before in zip(comparisons, check["comparisons"], strict=True):
            comparison["stated_by"] = before["stated_by"]
        check["comparisons"] = comparisons
        check["status"] = "passed" if all(comparison["passed"] for comparison in comparisons) else "failed"
    return results


def _as_observed(value: Any) -> Any:
    """A reported observation as the verifier returned it, as far as compare can tell: estimates, fractions."""
    if is_interval(value):
        return MeanEstimate(**{**value, "support": tuple(value["support"])})
    if isinstance(value, dict) and value.keys() == {"exact", "value"}:
        return Fraction(value["exact"])
    return [_as_observed(item) for item in value] if isinstance(value, list) else value


def _judged_exactly(expectation: Expectation) -> bool:
    if expectation.elements is not None:
        return any(_judged_exactly(element) for element in expectation.elements)
    return any(condition.operator in ("exact", "equals") for condition in expectation.conditions)


def _nudged(value: Any, ulps: int) -> Any:
    """Every float of ``value`` moved ``ulps`` units in the last place (down when negative)."""
    if isinstance(value, float) and math.isfinite(value):
        for _ in range(abs(ulps)):
            value = math.nextafter(value, math.copysign(math.inf, ulps))
        return value
    if isinstance(value, dict):
        return {key: _nudged(item, ulps) for key, item in value.items()}
    return [_nudged(item, ulps) for item in value] if isinstance(value, list) else value


def _last_bits(ulps: int) -> Callable[[str, Check, dict[str, Any]], dict[str, Any]]:
    """Floats judged by a tolerance, an interval or a threshold, and floats no comparison judges, moved.

    A float the claim states exactly (``exact: 0`` for a gradient on a plateau) is computed exactly on every
    CPU; one that is not is a changed verdict, which the gate must report (see the tests below).
    """
    def observe(claim_id: str, check: Check, observed: dict[str, Any]) -> dict[str, Any]:
        return {key: value if key in check.expect and _judged_exactly(check.expect[key]) else _nudged(value, ulps)
                for key, value in observed.items()}
    return observe


def _one_seed_at(claim: str, key: str, seed: int, outcome: float):
    """Seed ``seed``'s outcome ``key`` of the experiment ``claim`` set to ``outcome``, its statistics recomputed."""
    def observe(claim_id: str, check: Check, observed: dict[str, Any]) -> dict[str, Any]:
        if claim_id != claim or check.kind != "experiment":
            return observed
        changed = {**observed, key: [outcome if i == seed else value for i, value in enumerate(observed[key])]}
        return {**changed, **CHAOTIC[claim].statistics(changed, check.params)}
    return observe


# --------------------------------------------------------------------------- another machine passes


def test_the_committed_report_is_judged_again_to_itself(committed, claim_checks):
    """The re-judging below is the runner's own: unchanged observations give the committed comparisons."""
    again = rejudged(committed, claim_checks, lambda claim_id, check, observed: observed, judge_all=True)
    assert again == committed


def test_every_experiment_of_the_committed_report_has_its_measured_spread(committed, claim_checks):
    ran = {claim_id for claim_id, check, _ in _ran(committed, claim_checks) if check.kind == "experiment"}
    assert ran == set(CHAOTIC)
    for claim_id, check, reported in _ran(committed, claim_checks):
        if check.kind == "experiment":
            observed = reported["observed"]
            assert set(CHAOTIC[claim_id].spread) <= observed.keys(), claim_id
            # The verifier's statistics, from its own per-seed outcomes, are what it reported.
            assert CHAOTIC[claim_id].statistics(observed, check.params).items() <= observed.items(), claim_id


@pytest.mark.parametrize("ulps", ULPS)
def test_floats_that_differ_in_the_last_bits_pass_the_gate(committed, claim_checks, ulps):
    moved = rejudged(committed, claim_checks, _last_bits(ulps))
    assert moved != committed, "nothing was moved"
    assert stated_differences(committed, moved) == []


@pytest.mark.parametrize("claim_id", sorted(CHAOTIC))
def test_any_one_seed_ending_anywhere_in_its_measured_spread_passes_the_gate(committed, claim_checks, claim_id):
    [observed] = [check["observed"] for row_id, stated, check in _ran(committed, claim_checks)
                  if row_id == claim_id and stated.kind == "experiment"]
    for key, ends in CHAOTIC[claim_id].spread.items():
        for seed in range(len(observed[key])):
            for outcome in ends:
                moved = rejudged(committed, claim_checks, _one_seed_at(claim_id, key, seed, outcome))
                assert stated_differences(committed, moved) == [], (key, seed, outcome)


def test_a_chaotic_seed_beyond_the_stated_slack_does_fail_the_gate(committed, claim_checks):
    """Not vacuous: four CartPole seeds of ten at the bottom of their spread miss the claim's 7 of 10."""
    def four_seeds_fail(claim_id: str, check: Check, observed: dict[str, Any]) -> dict[str, Any]:
        if claim_id != "ppo-trains-cartpole" or check.kind != "experiment":
            return observed
        changed = {**observed, "final_returns": [100.0] * 4 + observed["final_returns"][4:]}
        return {**changed, **CHAOTIC[claim_id].statistics(changed, check.params)}

    moved = rejudged(committed, claim_checks, four_seeds_fail)
    differences = stated_differences(committed, moved)
    assert "claim 'ppo-trains-cartpole' check 2 (experiment): passed -> failed" in differences
    assert "claim 'ppo-trains-cartpole' check 2 (experiment): comparison 'seeds_solved' passed -> failed" in differences


def test_the_ratio_experiment_over_seeds_still_turns_red_for_clamped_ratios(monkeypatch):
    """Judging five seeds by a count and a median with slack keeps the check able to fail: the rejects it names."""
    monkeypatch.syspath_prepend(str(PROJECT / "tests" / "fixtures"))
    entry = course_entry("ppo-keeps-neither-ratios-nor-kl-bounded")
    [index] = [index for index, check in enumerate(entry.claim.checks) if check.kind == "experiment"]
    verifier = lookup(entry.claim.checks[index].verifier)
    result = run_check(entry, index, verifier, RunOptions(impl="clamped_ratios", allow_reference=True))
    assert result.status == "failed", result.error
    assert result.observed["seeds_with_ratios_outside"] == 0


# --------------------------------------------------------------------------- a real change fails, by name


def _first(results: dict[str, Any], rule: Callable[[dict[str, Any]], bool]) -> tuple[dict, int, dict, dict]:
    """The first (claim, check number, check, comparison) whose comparison satisfies ``rule``."""
    return next((row, number, check, comparison) for row in results["claims"]
                for number, check in enumerate(row["checks"], start=1)
                for comparison in check["comparisons"] if rule(comparison))


def test_a_changed_verdict_is_named_with_its_comparison(committed):
    changed = copy.deepcopy(committed)
    row, number, check, comparison = _first(changed, lambda c: c["passed"] and c["rule"] != "equal")
    comparison["passed"], check["status"] = False, "failed"
    where = f"claim '{row['id']}' check {number} ({check['kind']})"
    assert stated_differences(committed, changed) == [
        f"{where}: passed -> failed", f"{where}: comparison '{comparison['key']}' passed -> failed"]


def test_a_changed_expected_value_is_named_with_both_numbers(committed):
    changed = copy.deepcopy(committed)
    row, number, check, key = next((row, number, check, key) for row in changed["claims"]
                                   for number, check in enumerate(row["checks"], start=1)
                                   for key, old in check["expected"].items() if isinstance(old, float))
    old = check["expected"][key]
    check["expected"][key] = old + 0.001
    assert stated_differences(committed, changed) == [
        f"claim '{row['id']}' check {number} ({check['kind']}): expected '{key}' {old} -> {old + 0.001}"]


def test_an_exactly_stated_observation_that_moves_is_named(committed):
    changed = copy.deepcopy(committed)
    row, number, check, comparison = _first(changed, lambda c: c["rule"] == "exact equality" and c["passed"]
                                            and isinstance(c["observed"], int))
    comparison["observed"] += 1
    where = f"claim '{row['id']}' check {number} ({check['kind']})"
    assert stated_differences(committed, changed) == [
        f"{where}: comparison '{comparison['key']}' observed {comparison['observed'] - 1} -> {comparison['observed']}"]


def test_a_missing_claim_and_a_changed_statement_are_named(committed):
    changed = copy.deepcopy(committed)
    gone = changed["claims"].pop(0)
    changed["claims"][0]["limitations"] = "Another limitation."
    differences = stated_differences(committed, changed)
    assert f"claim '{gone['id']}' is gone" in differences
    assert any(d.startswith(f"claim '{changed['claims'][0]['id']}': limitations ") for d in differences)
    assert not any("passed -> passed" in d for d in differences)


@pytest.mark.parametrize(("field", "edit"), [
    ("checks.passed", lambda summary: summary["checks"].update(passed=summary["checks"]["passed"] + 1)),
    ("sharpness.score", lambda summary: summary["sharpness"].update(score=0.5)),
    ("mutation.score", lambda summary: summary["mutation"].update(score=0.5)),
    ("mutation.current", lambda summary: summary["mutation"].update(current=not summary["mutation"]["current"])),
    ("statements.missing", lambda summary: summary["statements"].update(missing=3)),
])
def test_what_the_report_says_of_itself_is_compared_too(committed, field, edit):
    """A summary edited by hand (and the report rendered again from it) is not the report a run writes."""
    changed = copy.deepcopy(committed)
    edit(changed["summary"])
    differences = stated_differences(committed, changed)
    assert len(differences) == 1 and differences[0].startswith(f"summary: {field} "), differences


def test_the_committed_report_of_the_reference_has_nothing_not_judged(committed):
    """A full run of the reference judges every check it runs (a report written before the count existed has no
    'not judged' in its summary, and no such status in its rows)."""
    assert committed["summary"]["checks"].get("not judged", 0) == 0
    assert committed["summary"]["claims"].get("not judged", 0) == 0
    assert not any(value for value in committed["summary"].get("not_judged", {}).values())
    assert not [row["id"] for row in committed["claims"] if row["status"] == "not judged"
                or any(check["status"] == "not judged" for check in row["checks"])]


def test_a_check_not_judged_fails_the_gate_by_name(committed):
    changed = copy.deepcopy(committed)
    row, number, check = next((row, number, check) for row in changed["claims"]
                              for number, check in enumerate(row["checks"], start=1) if check["status"] == "passed")
    check["status"], row["status"] = "not judged", "not judged"
    assert f"claim '{row['id']}' check {number} ({check['kind']}): passed -> not judged" in \
        stated_differences(committed, changed)


def test_timings_revision_versions_and_figures_are_not_compared(committed):
    changed = copy.deepcopy(committed)
    changed["run"].update(started="2030-01-01T00:00:00Z", seconds=1.0, revision="0" * 12, id="another",
                          versions={"numpy": "9.9"})
    for row in changed["claims"]:
        for check in row["checks"]:
            check["seconds"], check["reused"] = 123.0, not check["reused"]
            if "figure" in check["observed"]:
                check["observed"]["figure"] = "figures/another.svg"
    assert stated_differences(committed, changed) == []


def test_an_incomplete_run_never_passes_and_a_missing_flag_means_complete(committed):
    unflagged = copy.deepcopy(committed)
    for field in ("complete", "incomplete"):
        unflagged["run"].pop(field, None)
    assert Snapshot(unflagged).incomplete is None
    assert compare_snapshots(Snapshot(unflagged), Snapshot(committed)) == []

    interrupted = copy.deepcopy(committed)
    interrupted["run"].update(complete=False, incomplete="interrupted")
    assert compare_snapshots(Snapshot(committed), Snapshot(interrupted)) == [
        "the fresh run is incomplete (interrupted): it cannot pass the gate"]
    assert compare_snapshots(Snapshot(interrupted), Snapshot(committed)) == [
        "the committed report is of an incomplete run (interrupted)"]


def test_a_committed_markdown_that_is_not_its_json_rendering_is_named(tmp_path, committed):
    (tmp_path / RESULTS_FILE).write_text(json.dumps(committed), encoding="utf-8")
    (tmp_path / "claims_report.md").write_text("# hand-edited\n", encoding="utf-8")
    before = snapshot(tmp_path)
    assert "the committed claims_report.md is not the rendering of the claims.json beside it" in \
        compare_snapshots(before, Snapshot(committed))
    assert compare_snapshots(snapshot(tmp_path / "nowhere"), Snapshot(committed)) == [
        f"nothing to compare with: there is no {RESULTS_FILE} in {tmp_path / 'nowhere'}: run 'claims verify' to "
        "write one"]


# --------------------------------------------------------------------------- the command


def _verify(*extra: str) -> int:
    return claims_main(["verify", "--claims-profile", "smoke", "--no-cache", *extra])


def test_check_passes_on_a_current_report_and_fails_on_a_stale_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    claims = claims_dir(tmp_path, {"a.yaml": claim_file(claim("bernoulli-gradient"))})

    assert _verify() == 0
    results = json.loads((tmp_path / "reports" / "claims.json").read_text(encoding="utf-8"))
    assert [row["status"] for row in results["claims"]] == ["passed"]
    assert "## Registry of claims" in (tmp_path / "Module_4_Sources.md").read_text(encoding="utf-8")
    assert _verify("--check") == 0, capsys.readouterr().err

    # The text's number is written more finely, the committed report is not regenerated: the gate names it.
    (claims / "a.yaml").write_text(claim_file(claim("bernoulli-gradient", expect="gradient: 0.2730")),
                                   encoding="utf-8")
    capsys.readouterr()
    assert _verify("--check") == 1
    err = capsys.readouterr().err
    assert ("claims verify --check: claim 'bernoulli-gradient' check 1 (exact): comparison 'gradient' expected "
            '"0.273 \u00b1 0.0005" -> "0.2730 \u00b1 5e-05"') in err, err
    assert "the committed reports are stale" in err


# --------------------------------------------------------------------------- what the gate calls what it found

DRIFT = ("text: 1 statement changed: x ('claims text status' says what changed; 'claims text review' once the author "
         "has looked)",)
DRIFTED = "the text drifted under 1 statement"


@pytest.mark.parametrize(("findings", "conclusions"), [
    (GateFindings(reports=("claim 'x': statement changed",)),
     ["the committed reports are stale; commit the regenerated ones"]),
    (GateFindings(text_state=("statement 'x' in the text: unchanged at s block 1 -> unchanged at s block 2",)),
     ["the committed reports are stale; commit the regenerated ones"]),  # reviewed: the text's new state to commit
    (GateFindings(drift=DRIFT, drifted=DRIFTED),
     [f"{DRIFTED} (claims text status lists them); review them, the reports are unchanged"]),
    (GateFindings(text_state=("statement 'x' in the text: unchanged at s block 1 -> changed at s block 1",),
                  drift=DRIFT, drifted=DRIFTED),
     [f"{DRIFTED} (claims text status lists them); review them, then commit the reports 'claims verify' writes"]),
    (GateFindings(reports=("claim 'x': statement changed",), drift=DRIFT, drifted=DRIFTED),
     ["the committed reports are stale; commit the regenerated ones",
      f"{DRIFTED} (claims text status lists them); review them, then commit the reports 'claims verify' writes"]),
    (GateFindings(drift=("the course text could not be read: no TEXT.md",), text_unread=True),
     ["the course text could not be read or compared with the ledger (the line above says why); fix that, the "
      "reports are unchanged"]),
    (GateFindings(drift=("text: a kind of drift of a later harness",)),
     ["the text is not clean (the lines above say how; claims text status lists it all); review it, the reports are "
      "unchanged"]),
    (GateFindings(survivors=("a.yaml:3: claim 'x' (exact): 'y' expected 0.5 still passes as 0.6: a survivor",)),
     ["1 survivor of the sharpness check with no reason: sharpen the check, or say why it cannot tell the neighbours "
      "apart in 'insensitive:' of its claim file (docs/adding-a-claim.md)"]),
    (GateFindings(), []),
])
def test_the_gate_names_what_it_found_for_what_it_is(findings, conclusions):
    """Stale reports only where the reports differ; a drifted text as text drift; survivors as survivors."""
    assert findings.conclusions() == conclusions
    assert findings.passed == (not conclusions)
    lines = findings.lines()
    assert lines[len(lines) - len(conclusions):] == conclusions  # the findings' own lines first, then these


def test_the_text_drift_is_counted_from_the_fresh_report(committed):
    text = {"available": True, "documents": [], "clean": False, "counts": {}, "items": {},
            "statements": {"a": {"status": "changed"}, "b": {"status": "reworded"}, "c": {"status": "moved"},
                           "d": {"status": "unchanged"}},
            "marks": {"changed": 1}, "uncovered_blocks": [{}, {}], "unheld_numbers": [{}], "steps_not_in_text": []}
    findings = gate_findings(Snapshot({**committed, "text": text}), Snapshot({**committed, "text": text}))
    assert findings.reports == findings.text_state == ()
    assert findings.conclusions() == [
        "the text drifted under 2 statements and has 1 mark no longer on its block, 2 uncovered blocks and 1 unheld "
        "number or formula (claims text status lists them); review them, the reports are unchanged"]
    only_blocks = {**text, "statements": {"d": {"status": "unchanged"}}, "marks": {}, "unheld_numbers": []}
    assert gate_findings(Snapshot({**committed, "text": only_blocks}), Snapshot({**committed, "text": only_blocks})
                         ).conclusions() == ["the text drifted: it has 2 uncovered blocks (claims text status lists "
                                             "them); review them, the reports are unchanged"]


@pytest.fixture
def toy(tmp_path, monkeypatch, restore_registry) -> Path:
    """A copy of the toy course (tests/course_two), run from its root."""
    root = tmp_path / "course_two"
    shutil.copytree(PROJECT / "tests" / "course_two", root, ignore=shutil.ignore_patterns("reports", ".claims-cache"))
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", pythonpath(root))
    return root


def _gate_lines(err: str) -> list[str]:
    return [line.removeprefix("claims verify --check: ") for line in err.splitlines()
            if line.startswith("claims verify --check: ")]


def test_a_text_that_drifted_under_current_reports_is_named_text_drift_not_stale_reports(toy, capsys):
    """The toy's text revised under its statements, the claims as they were: the gate fails on the drift and says it
    is the text's; it calls the reports stale only when they differ from the fresh ones."""
    assert claims_main(["verify"]) == 0
    assert claims_main(["verify", "--check"]) == 0, capsys.readouterr().err
    text = toy / "TEXT.md"
    text.write_text(text.read_text(encoding="utf-8").replace("the sum is 55", "the sum is 56"), encoding="utf-8")
    drifted = ("the text drifted under 2 statements and has 1 unheld number or formula (claims text status lists "
               "them); review them, ")

    # The committed reports are of the text before: they differ from the fresh ones in the text's state alone.
    capsys.readouterr()
    assert claims_main(["verify", "--check"]) == 1
    lines = _gate_lines(capsys.readouterr().err)
    assert lines[-1] == drifted + "then commit the reports 'claims verify' writes", lines
    assert "statement 'l1-triangular-at-ten' in the text: unchanged at lesson1/sums block 3 -> changed at " \
           "lesson1/sums block 3" in lines
    assert not any("stale" in line for line in lines), lines

    # --check wrote the fresh reports: the same run again states what they state, and only the text is named.
    assert claims_main(["verify", "--check"]) == 1
    lines = _gate_lines(capsys.readouterr().err)
    assert lines[-1] == drifted + "the reports are unchanged", lines
    assert all(line.startswith("text: ") for line in lines[:-1]), lines  # the drift's own lines, nothing else

    # The author puts the text back: it is clean, and now the reports (of the drifted text) are stale.
    text.write_text((PROJECT / "tests" / "course_two" / "TEXT.md").read_text(encoding="utf-8"), encoding="utf-8")
    assert claims_main(["verify", "--check"]) == 1
    lines = _gate_lines(capsys.readouterr().err)
    assert lines[-1] == "the committed reports are stale; commit the regenerated ones", lines
    assert not any(line.startswith(("text: ", "the text drifted")) for line in lines), lines
    assert claims_main(["verify", "--check"]) == 0, capsys.readouterr().err


def test_a_run_of_another_profile_or_implementation_never_replaces_the_report_unasked(toy, capsys):
    """The course's reports/ holds the release report (the full profile): a plain `claims verify` (smoke) or a
    student's implementation would write over it. Without --claims-report such a run is refused, naming the ways
    out; naming the directory replaces it on purpose."""
    assert claims_main(["verify"]) == 0
    results = toy / "reports" / "claims.json"
    written = json.loads(results.read_text(encoding="utf-8"))
    written["run"]["profile"] = "full"  # as the committed release report says
    results.write_text(json.dumps(written), encoding="utf-8")
    before = results.read_text(encoding="utf-8")
    capsys.readouterr()
    assert claims_main(["verify"]) == 2
    error = capsys.readouterr().err
    assert ("holds the report of 'toy_impl' in the full profile, and this run ('toy_impl', smoke profile) would "
            "replace it") in error, error
    assert "--claims-report DIR" in error and "no report written" in error
    assert results.read_text(encoding="utf-8") == before
    assert claims_main(["verify", "--claims-report", "reports"]) == 0
    assert json.loads(results.read_text(encoding="utf-8"))["run"]["profile"] == "smoke"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=author", "-c", "user.email=author@example.org", *args], cwd=root,
                   check=True, capture_output=True)


def test_check_compares_with_the_committed_report_not_with_the_disk(toy, capsys):
    """In a git work tree the yardstick is the report committed at HEAD: a regenerated report left uncommitted
    fails the gate on every run (it passed the second time when the gate read the disk), and says which report it
    compared with; the last line carries the exit status."""
    _git(toy, "init", "-q")
    assert claims_main(["verify"]) == 0
    _git(toy, "add", "-A")
    _git(toy, "commit", "-q", "-m", "course")
    capsys.readouterr()
    assert claims_main(["verify", "--check"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "claims verify --check: the fresh run is compared with the report committed at " in out, out
    assert out.splitlines()[-1].endswith("(exit status 0)"), out

    claims = toy / "claims" / "lesson1.yaml"
    claims.write_text(claims.read_text(encoding="utf-8").replace(
        'rejects: "a running sum that starts from the second value"',
        'rejects: "a running sum that starts from the third value"'), encoding="utf-8")
    assert claims_main(["verify"]) == 0  # the author regenerates the report and forgets to commit it
    for _ in range(2):
        capsys.readouterr()
        assert claims_main(["verify", "--check"]) == 1
        captured = capsys.readouterr()
        lines = _gate_lines(captured.err)
        assert lines[-1] == "the committed reports are stale; commit the regenerated ones", lines
        assert any("rejects" in line and "third value" in line for line in lines), lines
        assert captured.out.splitlines()[-1].endswith("(exit status 1)"), captured.out

    _git(toy, "commit", "-q", "-am", "the regenerated report")
    assert claims_main(["verify", "--check"]) == 0, capsys.readouterr().err


def test_check_without_a_committed_report_fails_and_says_so(toy, capsys):
    _git(toy, "init", "-q")
    _git(toy, "add", "-A")
    _git(toy, "commit", "-q", "-m", "course, no report")
    assert claims_main(["verify", "--check"]) == 1
    err = capsys.readouterr().err
    assert "nothing is committed under reports/ at " in err, err

"""Scope: the course's dimensions, a statement's declared scope, what its checks reached, and the comparison.

The end-to-end case is issue 41's on the toy course (tests/course_two): a statement that speaks for every n,
checked only at n = 10, is reported (``scope not reached``), counted weak and refused by ``claims verify``; a check
whose examples reach the rest clears it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from conftest import pythonpath
from pydantic import ValidationError

from claims_harness import VerifierError, assume, check_property, reach
from claims_harness._running import reaching
from claims_harness.engine import (
    Statement,
    describe_scope,
    parse_dimensions,
    resolve_scope,
    scope_shortfalls,
    statement_status,
    unreached,
)
from claims_harness.errors import ClaimsError

HERE = Path(__file__).resolve().parent
DIMENSIONS = parse_dimensions({
    "discount": {"means": "the discount factor", "symbol": "γ",
                 "values": {"one": {"exact": 1}, "below-one": {"less_than": 1}}},
    "actions": {"means": "actions in a state", "values": {"two": {"exact": 2}, "three-or-more": {"at_least": 3}}},
    "horizon": {"means": "decisions per episode",
                "values": {"one": {"exact": 1}, "many": {"at_least": 2, "less_than": float("inf")},
                           "unbounded": {"exact": float("inf")}}},
    "transitions": {"means": "how the next state comes", "values": ["deterministic", "stochastic"]},
}, "pyproject.toml: tool.claims.scope")
DISCOUNT, ACTIONS, HORIZON, TRANSITIONS = DIMENSIONS


# --------------------------------------------------------------------------- the course's dimensions


@pytest.mark.parametrize(("used", "values"), [
    (1, ("one",)), (1.0, ("one",)), (np.float64(1.0), ("one",)), (Fraction(1, 2), ("below-one",)),
    (0.9999999, ("below-one",)), (sp.Rational(9, 10), ("below-one",)), (1.5, ()),
    (sp.Symbol("gamma", positive=True), ("one", "below-one")),   # every γ > 0: both
    (1 - sp.Symbol("d", positive=True), ("below-one",)),          # below one, whatever d > 0 is
    ([0.5, 1], ("below-one", "one")), (np.array([[0.5], [0.9]]), ("below-one",)),
])
def test_a_number_falls_exactly_in_the_values_its_conditions_admit(used, values):
    assert DISCOUNT.classify(used) == values


def test_an_integer_symbol_reaches_every_count_it_can_be():
    count = sp.Symbol("K", integer=True, positive=True)
    assert ACTIONS.classify(count) == ("two", "three-or-more")
    assert HORIZON.classify(count) == ("one", "many")
    assert HORIZON.classify(float("inf")) == ("unbounded",)


def test_a_name_must_be_one_of_the_dimensions_values():
    assert TRANSITIONS.classify("stochastic") == ("stochastic",)
    with pytest.raises(ClaimsError, match="'stochstic' is not a value of the scope dimension 'transitions'; did you "
                                          "mean 'stochastic'"):
        TRANSITIONS.classify("stochstic")
    with pytest.raises(ClaimsError, match="cannot tell which value dict"):
        DISCOUNT.classify({"gamma": 1})


def test_each_value_is_shown_by_its_condition():
    assert [DISCOUNT.shown(name) for name in DISCOUNT.names] == ["γ = 1", "γ < 1"]
    assert HORIZON.shown("many") == "2 ≤ horizon < ∞"
    assert TRANSITIONS.shown("stochastic") == "transitions: stochastic"


@pytest.mark.parametrize(("table", "message"), [
    ({"Discount": {"means": "m", "values": ["a", "b"]}}, "tool.claims.scope.Discount: a dimension's name is a word"),
    ({"discount": {"values": ["a", "b"]}}, "tool.claims.scope.discount: missing 'means'"),
    ({"discount": {"means": "m", "values": ["a", "b"], "unit": "x"}}, "unknown key(s) 'unit'"),
    ({"discount": {"means": "m", "values": ["a"]}}, "tool.claims.scope.discount.values: expected at least two values"),
    ({"discount": {"means": "m", "values": {"a": {"about": 1}, "b": {}}}},
     "tool.claims.scope.discount.values.a: about = 1 is not a condition"),
    ({"discount": {"means": "m", "values": {"all": {}, "b": {}}}}, "and not 'all'"),
])
def test_a_malformed_declaration_names_its_key_and_the_fix(table, message):
    with pytest.raises(ClaimsError) as raised:
        parse_dimensions(table, "pyproject.toml: tool.claims.scope")
    assert message in str(raised.value)


def test_a_statement_scope_is_resolved_against_the_dimensions():
    resolved, problems = resolve_scope({"discount": "all", "actions": "three-or-more",
                                        "transitions": ["stochastic", "deterministic"]}, DIMENSIONS)
    assert resolved == {"discount": ("one", "below-one"), "actions": ("three-or-more",),
                        "transitions": ("deterministic", "stochastic")}
    assert problems == []
    _, problems = resolve_scope({"discont": "all", "actions": ["two", "four"]}, DIMENSIONS)
    assert problems == [
        "'discont' is not a scope dimension of the course; did you mean 'discount'?; declared: discount, actions, "
        "horizon, transitions",
        "dimension 'actions': 'four' is not among its values; write 'all' or some of two, three-or-more"]


def test_a_statement_not_checkable_has_no_scope_and_a_reason_needs_its_dimension():
    with pytest.raises(ValidationError, match="not checkable has no scope"):
        Statement(id="s", where="4.1.1", says="x", not_checkable="terminology", scope={})
    with pytest.raises(ValidationError, match="'unreached' names 'actions', which 'scope' does not"):
        Statement(id="s", where="4.1.1", says="x", scope={"discount": "all"}, unreached={"actions": "why"})


# --------------------------------------------------------------------------- what a check reaches


def test_reach_records_only_inside_a_check_and_refuses_an_unknown_dimension():
    reach(discount=0.5)  # a helper called from a test: nothing to record, nothing raised
    with reaching.recording(DIMENSIONS) as record:
        reach(discount=0.5, actions=3)
        reach(discount=sp.Symbol("g", positive=True))
        with pytest.raises(VerifierError, match="'discont' is not a scope dimension of the course; did you mean"):
            reach(discont=1)
        with pytest.raises(VerifierError, match="'stochstic' is not a value"):
            reach(transitions="stochstic")
    assert record.as_data() == {"discount": {"below-one": 2, "one": 1}, "actions": {"three-or-more": 1}}
    with reaching.recording(()) as record:
        reach(discont=1)  # a course without dimensions records nothing
    assert record.as_data() == {}


class _Context:
    profile, seed, shrink = "smoke", 7, False
    impl = None


def test_an_example_discarded_by_assume_reaches_nothing():
    from claims_harness import strategies as st

    def odd_discounts(numerator: int) -> None:
        reach(discount=Fraction(numerator, 10))
        assume(numerator % 2 == 1)

    with reaching.recording(DIMENSIONS) as record:
        result = check_property(_Context(), odd_discounts, st.integers(1, 10))
    assert result["holds"] is True
    assert sum(record.as_data()["discount"].values()) == result["examples"]


# --------------------------------------------------------------------------- the comparison


def _statement(scope, shape="general", reasons=None, weak=None):
    return {"id": "s", "where": "4.4.1", "says": "x", "shape": shape, "not_checkable": None, "weak": weak,
            "claims": ["c"], "kinds": ["property", "counterexample"], "scope": scope,
            "unreached_reasons": reasons or {}}


def _rows(*checks):
    return {"c": [{"id": "c", "problems": [], "checks": [
        {"kind": kind, "status": status, "reached": reached} for kind, status, reached in checks]}]}


def test_a_statement_whose_checks_miss_part_of_its_scope_is_weak_and_says_what():
    scope = {"discount": ["one", "below-one"]}
    found = statement_status(_statement(scope), _rows(("property", "passed", {"discount": {"one": 200}})))
    assert found == {"status": "weak", "reached": {"discount": ["one"]}, "unreached": {"discount": ["below-one"]}}
    covered = statement_status(_statement(scope), _rows(("property", "passed", {"discount": {"one": 120}}),
                                                         ("property", "passed", {"discount": {"below-one": 80}})))
    assert covered["status"] == "covered" and covered["unreached"] == {}


def test_a_statement_whose_unreached_scope_a_check_left_out_of_the_run_might_reach_is_not_run_not_weak():
    """pytest's or claims verify's -k may select some checks of a claim: the others might reach the rest."""
    scope = {"discount": ["one", "below-one"]}
    selected = _rows(("property", "passed", {"discount": {"one": 200}}))
    assert statement_status({**_statement(scope), "checks": 2}, selected)["status"] == "not run"
    assert statement_status({**_statement(scope), "checks": 1}, selected)["status"] == "weak"


def test_only_strong_checks_reach_a_statement_unless_none_is_strong():
    scope = {"discount": ["one", "below-one"]}
    # A general statement: one counterexample at γ < 1 does not reach "every γ < 1" for it.
    found = statement_status(_statement(scope), _rows(("property", "passed", {"discount": {"one": 200}}),
                                                       ("counterexample", "passed", {"discount": {"below-one": 1}})))
    assert found["status"] == "weak" and found["unreached"] == {"discount": ["below-one"]}


def test_a_skipped_check_that_might_reach_the_rest_makes_it_not_run_and_a_failure_wins():
    scope = {"discount": ["one", "below-one"]}
    skipped = statement_status(_statement(scope), _rows(("property", "passed", {"discount": {"one": 200}}),
                                                         ("property", "skipped", {})))
    assert skipped["status"] == "not run"
    failed = statement_status(_statement(scope), _rows(("property", "failed", {"discount": {"below-one": 5}})))
    assert failed["status"] == "failed"


def test_a_shortfall_with_a_reason_is_shown_but_not_refused():
    vocabulary = [{"name": "discount", "values": [{"name": "one", "shown": "γ = 1"},
                                                  {"name": "below-one", "shown": "γ < 1"}]}]
    statement = _statement({"discount": ["one", "below-one"]}, reasons={"discount": "only γ = 1 is in the text"})
    statement |= statement_status(statement, _rows(("property", "passed", {"discount": {"one": 3}})))
    assert describe_scope(statement, vocabulary) == ("γ = 1, γ < 1", "γ < 1 (why: only γ = 1 is in the text)")
    results = {"scope_dimensions": vocabulary,
               "coverage": [{"file": "claims/l.yaml", "steps": [{"statements": [statement]}]}]}
    assert scope_shortfalls(results) == [("claims/l.yaml: statement 's' (4.4.1): scope not reached: γ < 1; the "
                                          "statement says why", True)]
    statement["unreached_reasons"] = {}
    assert scope_shortfalls(results)[0][1] is False
    assert unreached({"discount": ["one"]}, {"discount": {"one": 1}}) == {}


# --------------------------------------------------------------------------- the toy course, end to end


@pytest.fixture
def toy_course(tmp_path) -> Path:
    root = tmp_path / "course_two"
    shutil.copytree(HERE / "course_two", root, ignore=shutil.ignore_patterns("reports", ".claims-cache"))
    return root


def _claims(root: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "claims_harness.cli", *arguments], cwd=root, capture_output=True,
                          text=True, check=False, env={**os.environ, "PYTHONPATH": pythonpath(root)})


def test_a_statement_for_every_n_checked_at_one_n_is_reported_and_refused_until_a_witness_reaches_the_rest(
        toy_course):
    claims = toy_course / "claims" / "lesson1.yaml"
    complete = claims.read_text(encoding="utf-8")
    only_ten = complete[:complete.index("      - kind: property")]
    claims.write_text(only_ten, encoding="utf-8")

    refused = _claims(toy_course, "verify")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert ("statement 'l1-triangular-closed-form' (lesson1/sums): scope not reached: n = 1; n > 10"
            in refused.stderr)
    results = json.loads((toy_course / "reports" / "claims.json").read_text(encoding="utf-8"))
    ledger = {s["id"]: s for lesson in results["coverage"] for step in lesson["steps"] for s in step["statements"]}
    assert ledger["l1-triangular-closed-form"]["status"] == "weak"
    assert ledger["l1-triangular-closed-form"]["unreached"] == {"terms": ["one", "many"]}
    assert ledger["l1-triangular-at-ten"]["status"] == "covered"  # it speaks for n = 10 only
    assert results["claims"][0]["checks"][0]["reached"] == {"terms": {"a-few": 1}}
    markdown = (toy_course / "reports" / "claims_report.md").read_text(encoding="utf-8")
    assert "**not reached:** n = 1, n > 10." in markdown
    assert "Scope not reached:</strong> n = 1, n &gt; 10" in (toy_course / "reports" / "claims_report.html"
                                                                ).read_text(encoding="utf-8")
    linted = _claims(toy_course, "lint")
    assert linted.returncode == 2 and "scope not reached: n = 1; n > 10" in linted.stdout
    listed = _claims(toy_course, "scope")
    assert listed.returncode == 1 and "NOT REACHED: n = 1, n > 10" in listed.stdout

    explained = only_ten.replace("    scope: {terms: all}\n", "    scope: {terms: all}\n    unreached: {terms: a "
                                 "reason the author accepts}\n")
    claims.write_text(explained, encoding="utf-8")
    assert _claims(toy_course, "verify").returncode == 0  # shown, with its reason, but not refused

    claims.write_text(complete, encoding="utf-8")
    cleared = _claims(toy_course, "verify")
    assert cleared.returncode == 0, cleared.stdout + cleared.stderr
    results = json.loads((toy_course / "reports" / "claims.json").read_text(encoding="utf-8"))
    ledger = {s["id"]: s for lesson in results["coverage"] for step in lesson["steps"] for s in step["statements"]}
    assert ledger["l1-triangular-closed-form"]["status"] == "covered"
    assert ledger["l1-triangular-closed-form"]["reached"] == {"terms": ["one", "a-few", "many"]}


def test_a_checkable_statement_without_a_scope_is_a_lint_problem_where_the_course_declares_dimensions(toy_course):
    claims = toy_course / "claims" / "lesson1.yaml"
    claims.write_text(claims.read_text(encoding="utf-8").replace("    scope: {terms: all}\n", ""), encoding="utf-8")
    linted = _claims(toy_course, "lint")
    assert linted.returncode == 2
    assert ("claims/lesson1.yaml:26: field 'statements.scope': statement 'l1-triangular-closed-form' (lesson1/sums) "
            "declares no scope") in linted.stdout
    claims.write_text(claims.read_text(encoding="utf-8").replace("    scope: {terms: a-few}\n",
                                                                 "    scope: {terms: few}\n"), encoding="utf-8")
    assert ("field 'statements.scope': statement 'l1-triangular-at-ten': dimension 'terms': 'few' is not among its "
            "values; did you mean 'a-few'?") in _claims(toy_course, "lint").stdout

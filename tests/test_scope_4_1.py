"""Lesson 4.1 under issue 41: the erratum of ``415-reinforce-estimator-unbiased`` and the sign caveat of 4.1.5.

The erratum's check (claim ``reinforce-discounted-returns-fit-no-objective``) passes on the reference, reaching
γ = 1 and γ < 1, and turns red when what it is computed from is changed so that the text's sentence became
true: the weights G_t it takes from ``discounted_returns`` switched to γ^t G_t, whose field is ∇J_γ for every γ.
The sign rule of 4.1.5 is the text's about one sampled term (no erratum), and the expected step's failure with
three actions is a caveat of the harness (``origin: harness``), not an erratum. Checks run in-process.
"""

from __future__ import annotations

import textwrap
from fractions import Fraction

import pytest
from conftest import course_catalogue

from claims_harness import RunOptions, lookup, run_check

FILE = "4.1-policy-gradient.yaml"
ERRATUM = "reinforce-discounted-returns-fit-no-objective"
HEADER = "import numpy as np\nimport impl\nfrom impl import *  # noqa: F403\nfrom impl import __all__  # noqa: F401\n"


@pytest.fixture(scope="module")
def catalogue():
    return course_catalogue()


def _run(catalogue, claim_id: str, implementation: str = "impl", index: int = 0):
    entry = next(entry for entry in catalogue.entries if entry.id == claim_id and entry.file.endswith(FILE))
    check = entry.claim.checks[index]
    return run_check(entry, index, lookup(check.verifier), RunOptions(impl=implementation,
                                                                      scope=catalogue.course.scope))


def _exact(observed: list[object]) -> list[Fraction]:
    """Exact observations as the results carry them: a fraction as {exact, value}, an integer as itself."""
    return [Fraction(value["exact"]) if isinstance(value, dict) else Fraction(value) for value in observed]


def test_the_erratum_holds_on_the_reference_and_reaches_both_sides_of_the_discount(catalogue):
    result = _run(catalogue, ERRATUM)
    assert result.status == "passed", result.error or result.comparisons
    assert set(result.reached["discount"]) == {"one", "below-one"}
    # γ = 1/2 first: G_t is no gradient there; at γ = 1 it is ∇J.
    assert _exact(result.observed["asymmetry_with_returns_by_gamma"]) == [Fraction(131, 256), 0]


def test_the_erratum_turns_red_when_the_returns_carry_the_outer_discount(catalogue, tmp_path, monkeypatch):
    # What would make the text's sentence true for γ < 1: the weights G_t are γ^t G_t.
    source = """
        def discounted_returns(r_t, gamma):
            return impl.discounted_objective_weights(r_t, gamma)
        """
    (tmp_path / "returns_with_outer_discount.py").write_text(HEADER + textwrap.dedent(source), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = _run(catalogue, ERRATUM, "returns_with_outer_discount")
    assert result.status == "failed", result.error
    assert _exact(result.observed["asymmetry_with_returns_by_gamma"]) == [0, 0]
    assert _exact(result.observed["bias_with_returns_by_gamma"]) == [0, 0]


def test_the_sign_rule_is_the_text_s_and_the_expected_step_is_the_harness_s_caveat(catalogue):
    claims = {entry.id: entry.claim for entry in catalogue.entries if entry.file.endswith(FILE)}
    rule, caveat = claims["step-sign-follows-advantage"], claims["expected-step-can-lower-positive-advantage"]
    assert rule.erratum is None and rule.origin != "harness"
    assert [check.kind for check in rule.checks] == ["property", "property"]
    assert caveat.origin == "harness" and caveat.erratum is None
    assert [check.verifier for check in caveat.checks] == ["policy_gradient.expected_step_probabilities_exact"]
    for statement_id in caveat.covers:
        statement = catalogue.statements[statement_id].statement
        assert statement.origin == "harness" and statement.anchor is None, statement_id
        assert statement.scope == {"actions": "three-or-more"}


def test_the_caveat_s_witness_reaches_three_actions_and_the_rule_s_property_reaches_both(catalogue):
    caveat = _run(catalogue, "expected-step-can-lower-positive-advantage")
    assert caveat.status == "passed" and set(caveat.reached["actions"]) == {"three-or-more"}
    rule = _run(catalogue, "step-sign-follows-advantage", index=1)
    assert rule.status == "passed" and set(rule.reached["actions"]) == {"two", "three-or-more"}

"""Lesson 4.4's erratum of step 4.4.1 (issue 41, point 1): the surrogate's gradient at θ_old is ∇J_γ only for γ = 1.

Claim ``time-uniform-surrogate-is-no-discounted-gradient`` computes, on its witness MDP and through the
implementation's ratios and surrogate gradient, the gradient at θ_old of the text's time-uniform
L^PG = E_{t~π_old}[r_t Â_t] against ∇J_γ. These tests show what it shows (the two point apart at
γ = 1/2 and agree at γ = 1) and that it cannot pass once the sentence it corrects is made true:
weighted by γ^t, the surrogate's gradient is ∇J_γ and the erratum's check turns red. They run the check
in this process (``isolation=False``) so that a patched step weight reaches the verifier.
"""

from __future__ import annotations

import textwrap
from fractions import Fraction

import pytest
from conftest import course_catalogue

import verifiers.surrogate as surrogate
from claims_harness import CheckResult, RunOptions, lookup, run_check

ERRATUM = "time-uniform-surrogate-is-no-discounted-gradient"
HEADER = ("import numpy as np\nimport impl\nfrom impl import *  # noqa: F403\nfrom impl import __all__  # noqa: F401\n"
          "__claims_reference_fallback__ = True\n")


def _run_erratum(implementation: str = "impl") -> CheckResult:
    catalogue = course_catalogue()
    entry = next(entry for entry in catalogue.entries if entry.id == ERRATUM)
    options = RunOptions(impl=implementation, isolation=False, scope=catalogue.course.scope)
    return run_check(entry, 0, lookup(entry.claim.checks[0].verifier), options)


def _exact(value: object) -> Fraction:
    """An observation as the results carry it: a Fraction is {'exact': 'p/q', 'value': float}, an integer itself."""
    return Fraction(value["exact"]) if isinstance(value, dict) else Fraction(value)


def _vector(rows: list[list[object]]) -> list[Fraction]:
    return [_exact(x) for row in rows for x in row]


def test_the_time_uniform_surrogate_points_away_below_one_and_agrees_at_one():
    result = _run_erratum()
    assert result.status == "passed", result.error or result.comparisons
    observed = result.observed
    assert [_exact(gamma) for gamma in observed["gammas"]] == [Fraction(1, 2), 1]
    # γ = 1/2: ∇J_γ = (-1/32, 1/32, 0, 0) and ∇L^PG = (3/16, -3/16, 0, 0), opposite directions.
    assert _vector(observed["policy_gradient"][0]) == [Fraction(-1, 32), Fraction(1, 32), 0, 0]
    assert _vector(observed["surrogate_gradient"][0]) == [Fraction(3, 16), Fraction(-3, 16), 0, 0]
    assert observed["cosine_to_policy_gradient"] == [-1, 1]
    # γ = 1: the time-uniform surrogate's gradient is ∇J; with γ^t weights it is ∇J_γ at both discounts.
    assert observed["surrogate_equals_policy_gradient"] == [False, True]
    assert observed["discounted_surrogate_equals_policy_gradient"] == [True, True]
    assert result.reached["discount"].keys() == {"one", "below-one"}


def test_weighting_the_surrogate_by_gamma_to_the_t_turns_the_erratum_red(monkeypatch):
    """The text's sentence made true: the surrogate's states follow the discounted visitation."""
    monkeypatch.setattr(surrogate, "time_uniform_step_weight", surrogate.discounted_step_weight)
    result = _run_erratum()
    assert result.status == "failed", result.comparisons
    failed = {comparison["key"].split("[")[0] for comparison in result.comparisons if not comparison["passed"]}
    assert {"surrogate_gradient", "cosine_to_policy_gradient", "surrogate_equals_policy_gradient",
            "discounts_in_unit_interval_where_gap_vanishes"} <= failed
    assert result.observed["surrogate_equals_policy_gradient"] == [True, True]


@pytest.mark.parametrize("source", [
    # the rejects of the erratum's check: the advantage's sign flipped in the surrogate's gradient code
    """
    def surrogate_objective_grad(ratio_t, advantage_t):
        return -impl.surrogate_objective_grad(ratio_t, advantage_t)
    """,
])
def test_the_named_wrong_implementation_fails_the_erratum(tmp_path, monkeypatch, source):
    (tmp_path / "wrong_surrogate_sign.py").write_text(HEADER + textwrap.dedent(source), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _run_erratum("wrong_surrogate_sign").status == "failed"

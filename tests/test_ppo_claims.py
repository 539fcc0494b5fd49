"""Lesson 4.4's claims turn red for the wrong implementations their checks name, and stay green for impl.

Each test runs one claim's checks of one kind, through the engine, against a module of ``tests/fixtures`` (the
reference with one function replaced) and against ``impl``.
"""

from __future__ import annotations

from pathlib import Path

from conftest import checks_of, outcomes_against

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AT_OLD = "surrogate-gradient-equals-policy-gradient-at-old"


def _check_statuses(implementation: str, claim: str, kind: str) -> dict[str, str]:
    """verifier -> status of each check of ``kind`` of ``claim`` that ran against ``implementation``."""
    outcomes = outcomes_against(implementation, checks_of(claim, kind), FIXTURES)
    statuses = {outcome.evidence["check"]["verifier"]: outcome.status for outcome in outcomes.values()
                if outcome.status != "skipped"}
    assert statuses, f"no {kind} check of {claim} ran"
    return statuses


def test_a_surrogate_gradient_of_a_over_r_fails_the_gradient_code_check():
    """Â / r equals r Â at θ_old, so only the check at ratios away from 1 can see it."""
    assert set(_check_statuses("impl", AT_OLD, "property").values()) == {"passed"}
    assert _check_statuses("surrogate_grad_over_ratio", AT_OLD, "property") == {
        "surrogate.surrogate_gradient_at_old_finite_difference": "passed",
        "ppo.surrogate_gradient_code_exact_property": "failed",
        "losses.key_test_property": "passed",  # the losses are impl's: only surrogate_objective_grad is replaced
    }


def test_a_surrogate_objective_that_is_never_used_fails_the_finite_difference_check():
    """The objective's own central differences are flat, whatever the gradient code says."""
    statuses = _check_statuses("surrogate_objective_unused", AT_OLD, "property")
    assert statuses["surrogate.surrogate_gradient_at_old_finite_difference"] == "failed"


def test_ratios_clamped_into_the_interval_fail_the_no_trust_region_witness():
    claim = "ppo-keeps-neither-ratios-nor-kl-bounded"
    assert _check_statuses("impl", claim, "counterexample") == {"ppo.clipping_is_no_trust_region": "passed"}
    assert _check_statuses("clamped_ratios", claim, "counterexample") == {"ppo.clipping_is_no_trust_region": "failed"}

"""Lesson 4.4's claims turn red for the wrong implementations their checks name, and stay green for impl.

Each test runs one claim's checks in an inner pytest (``pytester``) against a module of
``tests/fixtures`` (the reference with one function replaced) and against ``impl``, and reads
which checks failed from the run's ``claims.json``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PROJECT = Path(__file__).resolve().parents[1]
AT_OLD = "surrogate-gradient-equals-policy-gradient-at-old"


def _check_statuses(pytester: pytest.Pytester, implementation: str, selection: str) -> dict[str, str]:
    """verifier -> status of each check of claims/4.4-ppo.yaml that ``selection`` picks, against ``implementation``."""
    if not (pytester.path / "claims").exists():
        (pytester.path / "claims").mkdir()
        shutil.copy(PROJECT / "claims" / "4.4-ppo.yaml", pytester.path / "claims")
        shutil.copy(PROJECT / "Module_4_Sources.md", pytester.path)
        pytester.syspathinsert(FIXTURES)
    report = pytester.path / f"report-{implementation}"
    pytester.runpytest_inprocess("claims", "-p", "no:cacheprovider", "--claims-impl", implementation, "-k", selection,
                                 "--claims-report", str(report))
    results = json.loads((report / "claims.json").read_text(encoding="utf-8"))
    statuses = {check["verifier"]: check["status"] for claim in results["claims"] for check in claim["checks"]
                if check["status"] != "skipped"}
    assert statuses, f"no check of {selection!r} ran"
    return statuses


def test_a_surrogate_gradient_of_a_over_r_fails_the_gradient_code_check(pytester):
    """Â / r equals r Â at θ_old, so only the check at ratios away from 1 can see it."""
    selection = f"{AT_OLD} and property"
    assert set(_check_statuses(pytester, "impl", selection).values()) == {"passed"}
    assert _check_statuses(pytester, "surrogate_grad_over_ratio", selection) == {
        "surrogate.surrogate_gradient_at_old_finite_difference": "passed",
        "ppo.surrogate_gradient_code_exact_property": "failed",
        "losses.key_test_property": "passed",  # the losses are impl's: only surrogate_objective_grad is replaced
    }


def test_a_surrogate_objective_that_is_never_used_fails_the_finite_difference_check(pytester):
    """The objective's own central differences are flat, whatever the gradient code says."""
    selection = f"{AT_OLD} and property"
    statuses = _check_statuses(pytester, "surrogate_objective_unused", selection)
    assert statuses["surrogate.surrogate_gradient_at_old_finite_difference"] == "failed"


def test_ratios_clamped_into_the_interval_fail_the_no_trust_region_witness(pytester):
    selection = "ppo-keeps-neither-ratios-nor-kl-bounded and counterexample"
    assert _check_statuses(pytester, "impl", selection) == {"ppo.clipping_is_no_trust_region": "passed"}
    assert _check_statuses(pytester, "clamped_ratios", selection) == {"ppo.clipping_is_no_trust_region": "failed"}

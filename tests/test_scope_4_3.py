"""Lesson 4.3's checks that reach the scope of their statements (issue 41): each new check turns red on the wrong
implementation its ``rejects`` names, and the checks of statements that speak for every discount reach γ = 1 and
γ < 1.

Every wrong implementation is the reference with one function replaced, written into the test's directory and run
through the harness with ``RunOptions(impl=...)``, as tests/test_actor_critic_claims.py does with its fixtures.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
from conftest import course_catalogue, course_entry

from claims_harness import RunOptions, lookup, run_check

HEADER = ("import numpy as np\nimport impl\nfrom impl import *  # noqa: F403\nfrom impl import __all__  # noqa: F401\n"
          "__claims_reference_fallback__ = True\n")

# name -> (the replaced function, the checks (claim, index) that must fail, the checks that must still pass)
VARIANTS = {
    # Twice GAE's advantages: V + 2Â is no λ-return, yet V̂ = V + Â holds for them, so the check that covered
    # 431-advantage-is-target-minus-prediction alone before issue 41 stays green.
    "doubled_gae": ("""
        def gae_advantages(*args, **kwargs):
            return 2 * impl.gae_advantages(*args, **kwargs)
        """, [("advantage-is-target-minus-prediction", 0), ("advantage-is-target-minus-prediction", 1)],
        [("value-targets-ignore-normalisation", 0)]),
    "td_error_ignores_terminated": ("""
        def td_errors(r_t, v_t, v_tp1, terminated_t, gamma):
            return impl.td_errors(r_t, v_t, v_tp1, 0 * np.asarray(terminated_t), gamma)
        """, [("td-error-expectation-is-advantage", 1)], []),
    "n_step_always_td_error": ("""
        def n_step_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, n):
            return impl.n_step_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, 1)
        """, [("long-target-noise-depends-on-environment", 2)], []),
    "n_step_ignores_terminated": ("""
        def n_step_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, n):
            return impl.n_step_advantages(r_t, v_t, v_tp1, 0 * np.asarray(terminated_t), trace_cut_t, gamma, n)
        """, [("n-step-critic-error-weight-at-gamma-one", 0), ("n-step-trades-critic-bias-for-variance", 0)], []),
    # The tail γ^(m-1) V(s_{t+m}): only the tail reads V(s_{t+1}), so dividing it by γ takes one γ off.
    "n_step_tail_one_discount_short": ("""
        def n_step_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, n):
            return impl.n_step_advantages(r_t, v_t, np.asarray(v_tp1) / gamma, terminated_t, trace_cut_t, gamma, n)
        """, [("n-step-critic-error-weight-at-gamma-one", 1), ("n-step-trades-critic-bias-for-variance", 0)], []),
}


def _run(claim_id: str, index: int, implementation: str | None = None):
    entry = course_entry(claim_id)
    course = course_catalogue().course
    options = RunOptions(scope=course.scope) if implementation is None else RunOptions(impl=implementation,
                                                                                         scope=course.scope)
    return run_check(entry, index, lookup(entry.claim.checks[index].verifier), options)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_named_wrong_implementation_fails_the_new_checks(tmp_path, monkeypatch, variant):
    source, must_fail, must_pass = VARIANTS[variant]
    (tmp_path / f"wrong_{variant}.py").write_text(HEADER + textwrap.dedent(source), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        for claim_id, index in must_fail:
            assert _run(claim_id, index, f"wrong_{variant}").status == "failed", (claim_id, index)
        for claim_id, index in must_pass:
            assert _run(claim_id, index, f"wrong_{variant}").status == "passed", (claim_id, index)
    finally:
        sys.modules.pop(f"wrong_{variant}", None)


# Checks that must reach γ = 1 and γ < 1, since the statements they cover speak for every discount.
EVERY_DISCOUNT = [
    ("advantage-is-target-minus-prediction", 0), ("advantage-is-target-minus-prediction", 1),
    ("td-error-expectation-is-advantage", 1),
    ("n-step-trades-critic-bias-for-variance", 0), ("gae-recursion-equals-sum", 0), ("gae-recursion-equals-sum", 1),
    ("gae-mixes-n-step-estimates", 0), ("gae-lambda-one-telescopes", 0), ("gae-four-events-table", 1),
    ("batch-gae-is-truncated-estimator", 1), ("actor-treats-advantages-as-constants", 0),
]


@pytest.mark.parametrize(("claim_id", "index"), EVERY_DISCOUNT)
def test_checks_of_statements_for_every_discount_reach_both(claim_id, index):
    result = _run(claim_id, index)
    assert result.status == "passed", result.error
    assert {"one", "below-one"} <= set(result.reached.get("discount", {})), result.reached


def test_the_td_error_and_the_long_target_reach_both_kinds_of_transitions():
    for claim_id, index in (("td-error-expectation-is-advantage", 1), ("n-step-trades-critic-bias-for-variance", 0)):
        reached = _run(claim_id, index).reached
        assert {"deterministic", "stochastic"} <= set(reached.get("transitions", {})), (claim_id, reached)
    noise = _run("long-target-noise-depends-on-environment", 2)
    assert noise.status == "passed", noise.error
    assert set(noise.reached["transitions"]) == {"deterministic", "stochastic"}, noise.reached


def test_the_critic_errors_weight_falls_below_one_and_waits_for_the_end_at_one():
    # The clarification's two witnesses are the same chain at γ = 1 and γ = 0.9: the constant bias at γ = 1
    # comes from the discount, not from the chain.
    at_one, below_one = (_run("n-step-critic-error-weight-at-gamma-one", index) for index in (0, 1))
    assert at_one.status == below_one.status == "passed", (at_one.error, below_one.error)
    assert at_one.observed["bias_magnitude_decreases_with_n"] is False
    assert below_one.observed["bias_magnitude_decreases_with_n"] is True


def test_a_reused_batch_reaches_old_data_in_the_single_use_property():
    result = _run("single-use-batch-is-on-policy", 0)
    assert result.status == "passed", result.error
    assert set(result.reached["data"]) == {"current", "old"}, result.reached

"""Two conventions real library code meets: the precision the harness judges in, and the optional keywords.

A library that stores its buffers in float32 (stable-baselines3's RolloutBuffer, JAX by default)
misses float64 rounding bounds by rounding alone; the harness says so once, naming the dtype,
instead of letting every bound fail with a semantic message. A library without the contract's
optional features (GAE's ``carry=`` for streaming) declines those calls: what needs them is
reported as not checked, and everything else in the same check is still judged.
"""

from __future__ import annotations

from conftest import course_catalogue, course_entry

from claims_harness import RunOptions, run_check
from claims_harness.engine import function_scoreboard

HEADER = '''\
import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True
'''

FLOAT32_GAE = HEADER + '''

def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, carry=None):
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_,
                               carry=carry).astype(np.float32)
'''

# The reference's GAE, without streaming.
NO_CARRY_GAE = HEADER + '''

def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_)
'''

# Without streaming, and one flag for every event: a truncation and a buffer edge drop their bootstrap.
NO_CARRY_SINGLE_DONE_GAE = HEADER + '''

def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    done = np.maximum(terminated_t, trace_cut_t)
    return impl.gae_advantages(r_t, v_t, v_tp1, done, trace_cut_t, gamma, lambda_)
'''

KEYWORDS_GAE = HEADER + '''

def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, **options):
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, **options)
'''

JOINED = {"joined_buffer_edge_bootstraps", "joined_buffer_edge_continues_trace"}


def _run(claim_id: str, verifier: str, implementation: str):
    entry = course_entry(claim_id)
    (index,) = [i for i, check in enumerate(entry.claim.checks) if check.verifier == verifier]
    return run_check(entry, index, course_catalogue().verifiers[verifier], RunOptions(impl=implementation))


def test_a_float32_result_is_one_error_naming_the_dtype_not_a_semantic_failure(module):
    name = module("float32_gae", FLOAT32_GAE)
    for claim_id, verifier in [("gae-lambda-zero-is-td-error", "gae.lambda_zero_property"),
                               ("gae-four-events-table", "gae.four_events_property")]:
        result = _run(claim_id, verifier, name)
        assert result.status == "error", (claim_id, result.status, result.comparisons)
        assert "float32_gae.gae_advantages returned float32 for float64 arguments: the harness judges in float64" \
            in result.error, result.error
        assert result.error_in == ["gae_advantages"], result.error_in


def test_the_scoreboard_blames_an_error_on_the_function_it_names_alone():
    def payload(claim: str, status: str, error_in: list[str]) -> dict:
        return {"claim": {"id": claim}, "check": {"uses": ["gae_advantages", "td_errors"], "status": status,
                                                  "error_in": error_in}}

    rows = {row["function"]: row for row in function_scoreboard([
        payload("a", "error", ["gae_advantages"]), payload("b", "error", []), payload("c", "passed", [])])}
    assert rows["gae_advantages"]["failing_claims"] == ["a", "b"]
    assert rows["td_errors"]["failing_claims"] == ["b"] and rows["td_errors"]["passed"] == 1
    assert rows["td_errors"]["not run"] == 1


def test_a_declined_keyword_leaves_its_rows_unchecked_and_judges_the_rest(module):
    result = _run("gae-four-events-table", "gae.four_events_table_exact", module("no_carry_gae", NO_CARRY_GAE))
    assert result.status == "passed", (result.status, result.error)
    assert set(result.not_checked) == JOINED
    assert all("no_carry_gae.gae_advantages takes no carry=" in why for why in result.not_checked.values())
    compared = {comparison["key"] for comparison in result.comparisons}
    assert compared and not compared & JOINED


def test_the_rest_of_a_check_with_a_declined_call_can_still_fail(module):
    result = _run("gae-four-events-table", "gae.four_events_table_exact",
                  module("no_carry_single_done_gae", NO_CARRY_SINGLE_DONE_GAE))
    assert result.status == "failed", (result.status, result.error)
    assert set(result.not_checked) == JOINED
    failed = {c["key"] for c in result.comparisons if not c["passed"]}
    assert failed == {"truncated_bootstraps", "buffer_edge_bootstraps"}, failed


def test_a_check_that_needs_the_declined_call_throughout_is_skipped_and_says_which(module):
    result = _run("streaming-gae-matches-unsplit", "gae.streaming_property", module("no_carry_gae", NO_CARRY_GAE))
    assert result.status == "skipped", (result.status, result.error)
    assert result.skip_reason.startswith("unsupported call: no_carry_gae.gae_advantages takes no carry="), \
        result.skip_reason


def test_a_function_that_takes_any_keyword_declines_none(module):
    name = module("keywords_gae", KEYWORDS_GAE)
    assert _run("streaming-gae-matches-unsplit", "gae.streaming_property", name).status == "passed"
    result = _run("gae-four-events-table", "gae.four_events_table_exact", name)
    assert result.status == "passed" and not result.not_checked, (result.status, result.not_checked)


SIGNALLING_GAE = HEADER + '''
from claims_harness import Unsupported


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, carry=None):
    raise Unsupported("nothing to see here")
'''


def test_an_implementation_may_not_raise_the_harness_signal_of_an_unsupported_call(module):
    result = _run("gae-lambda-zero-is-td-error", "gae.lambda_zero_property", module("signalling_gae", SIGNALLING_GAE))
    assert result.status == "error", (result.status, result.skip_reason)
    assert "signalling_gae.gae_advantages raised Unsupported (nothing to see here), which is the harness's own signal" \
        in result.error, result.error


def test_a_module_that_declines_fractions_is_judged_on_exact_checks_by_replay_and_runs_float_ones(module):
    name = module("float_only_gae", KEYWORDS_GAE + "\n__claims_exact_arithmetic__ = False\n")
    exact = _run("gae-four-events-table", "gae.four_events_table_exact", name)
    assert (exact.status, exact.in_floats) == ("passed", "replay"), (exact.status, exact.error, exact.skip_reason)
    assert _run("gae-four-events-table", "gae.four_events_property", name).status == "passed"

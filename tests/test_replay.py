"""Every statement judged for every framework, by replay: an exact check of an implementation that declines fractions.

A check whose verifier hands the implementation fractions, and has no float twin of its own, runs against the
reference in exact arithmetic with its calls recorded (in a process of the reference alone); each call is made again
to the implementation under test in float64, and each number of its answer must lie within the rounding bound the
call's own sensitivity gives (claims_harness._running.replay). Correct float code passes, at clip boundaries too;
a wrong function, or one off by a billionth, fails and is blamed alone; the implementation cannot change the
reference it is judged against.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import course_catalogue

from claims_harness import RunOptions, run_check
from claims_harness._running.replay import replayable, verdicts
from claims_harness.engine import close_hosts, read_results

# The reference's functions as a module of the student's own that computes in float64 only.
FLOAT_COPY = """
import inspect

import numpy as np

import impl

__claims_exact_arithmetic__ = False
__claims_reference_fallback__ = True


def _own(function):
    def own(*args, **kwargs):
        return function(*args, **kwargs)
    own.__name__ = own.__qualname__ = function.__name__
    own.__signature__ = inspect.signature(function)
    return own


for _name in ("leave_one_out_advantages", "group_centered_advantages", "ppo_clip_objective",
              "ppo_clip_objective_grad", "clip_active"):
    globals()[_name] = _own(getattr(impl, _name))
"""
# Leave-one-out divided by G, not G - 1.
WRONG_LOO = FLOAT_COPY + """

def leave_one_out_advantages(r_i):
    r = np.asarray(r_i, dtype=float)
    return r - (r.sum(axis=-1, keepdims=True) - r) / r.shape[-1]
"""
# Right but for a relative error of 1e-9, far above any rounding of float64 and far below any tolerance by eye.
A_BILLIONTH_OFF = FLOAT_COPY + """

def leave_one_out_advantages(r_i):
    return impl.leave_one_out_advantages(np.asarray(r_i, dtype=float)) * (1 + 1e-9)
"""
# Wrong, and makes the reference wrong the same way at import: were the reference served from this process, the
# check would compare the mistake with itself.
CORRUPTS_THE_REFERENCE = WRONG_LOO + """

import impl.baselines

impl.leave_one_out_advantages = impl.baselines.leave_one_out_advantages = leave_one_out_advantages
"""


def _run(directory: Path, source: str, claim_id: str, verifier: str) -> dict:
    (directory / "student_floats.py").write_text(source, encoding="utf-8")
    catalogue = course_catalogue()
    entry = next(entry for entry in catalogue.entries if entry.id == claim_id)
    index = next(i for i, check in enumerate(entry.claim.checks) if check.verifier == verifier)
    sys.path.insert(0, str(directory))
    try:
        return run_check(entry, index, catalogue.verifiers[verifier], RunOptions(
            impl="student_floats", cache_dir=None, directory=str(directory), blame=True)).as_dict()
    finally:
        sys.path.remove(str(directory))
        sys.modules.pop("student_floats", None)


@pytest.mark.parametrize(("claim_id", "verifier"), [
    ("loo-identity", "baselines.loo_identity_property"),
    # Witnesses on the clip's boundaries, where float64 may take either side.
    ("clipping-four-cases", "ppo.clip_cases_exact"),
])
def test_a_correct_float_implementation_is_judged_by_replay_and_passes(tmp_path, claim_id, verifier):
    check = _run(tmp_path, FLOAT_COPY, claim_id, verifier)
    assert (check["status"], check["in_floats"]) == ("passed", "replay"), check
    assert check["comparisons"] and all(c["passed"] and c["observed"].startswith("all ") for c in check["comparisons"])


@pytest.mark.parametrize("source", [WRONG_LOO, A_BILLIONTH_OFF, CORRUPTS_THE_REFERENCE])
def test_a_wrong_float_function_fails_and_is_blamed_alone(tmp_path, source):
    check = _run(tmp_path, source, "loo-identity", "baselines.loo_identity_property")
    assert (check["status"], check["in_floats"], check["blamed"]) == ("failed", "replay", ["leave_one_out_advantages"])
    verdict = {c["key"]: c for c in check["comparisons"]}
    assert verdict["group_centered_advantages"]["passed"]
    assert "given leave_one_out_advantages(" in verdict["leave_one_out_advantages"]["observed"]


# Declares nothing: a float dtype alone says it computes in floats (what a function returns decides).
ANSWERS_IN_FLOATS = """
import numpy as np

__claims_reference_fallback__ = True


def leave_one_out_advantages(r_i):
    r = np.asarray(r_i, dtype=float)
    return r - (r.sum(axis=-1, keepdims=True) - r) / (r.shape[-1] - 1)


def group_centered_advantages(r_i):
    r = np.asarray(r_i, dtype=float)
    return r - r.mean(axis=-1, keepdims=True)
"""
ANSWERS_IN_FLOATS_WRONG = ANSWERS_IN_FLOATS.replace("(r.shape[-1] - 1)", "r.shape[-1]")


def test_a_function_that_answers_fractions_in_floats_is_judged_by_replay_without_declaring_it(tmp_path):
    """An exact comparison would fail it by rounding alone ("expected exactly 0.7, observed 0.7")."""
    (tmp_path / "right").mkdir(), (tmp_path / "wrong").mkdir()
    check = _run(tmp_path / "right", ANSWERS_IN_FLOATS, "loo-identity", "baselines.loo_identity_property")
    assert (check["status"], check["in_floats"]) == ("passed", "replay"), check
    wrong = _run(tmp_path / "wrong", ANSWERS_IN_FLOATS_WRONG, "loo-identity", "baselines.loo_identity_property")
    assert (wrong["status"], wrong["in_floats"], wrong["blamed"]) == ("failed", "replay", ["leave_one_out_advantages"])


def test_the_reference_answering_fractions_in_floats_is_an_error_never_judged_against_itself(monkeypatch):
    import impl
    import impl.baselines

    floats = {}
    exec(ANSWERS_IN_FLOATS, floats)  # noqa: S102 - the test's own source
    monkeypatch.setattr(impl, "leave_one_out_advantages", floats["leave_one_out_advantages"])
    monkeypatch.setattr(impl.baselines, "leave_one_out_advantages", floats["leave_one_out_advantages"])
    entry = next(entry for entry in course_catalogue().entries if entry.id == "loo-identity")
    index = next(i for i, check in enumerate(entry.claim.checks) if check.verifier == "baselines.loo_identity_property")
    close_hosts()  # the reference's process, as this test patched it (and none patched after it)
    try:
        check = run_check(entry, index, course_catalogue().verifiers["baselines.loo_identity_property"],
                          RunOptions(impl="impl", cache_dir=None)).as_dict()
    finally:
        close_hosts()
    assert check["status"] == "error" and "replay would judge it against itself" in check["error"], check


def test_a_call_that_cannot_be_replayed_is_counted_apart():
    calls = replayable([{"function": "f", "args": (), "kwargs": {}, "raised": "ValueError: no"},
                        {"function": "f", "args": (), "kwargs": {}, "answer": "text"}])
    assert [call["not_replayed"] for call in calls] == ["it raised", "its answer is not numbers"]
    assert verdicts(calls, [{}, {}]) == {"f": {"calls": 0, "wrong": 0, "first": None,
                                               "not_replayed": {"it raised": 1, "its answer is not numbers": 1}}}


def test_the_reference_is_judged_exactly_on_every_check_of_the_committed_report():
    """The contract admits floats for Fractions from an implementation under test (judged by a twin or by replay);
    the course's reference keeps its own promise of exact arithmetic, so no check of its report ran in floats."""
    results = read_results(Path(__file__).resolve().parent.parent / "reports")
    assert results["run"]["impl"] == "impl"
    in_floats = [f"{row['id']}::{check['kind']}" for row in results["claims"] for check in row["checks"]
                 if check.get("in_floats")]
    assert in_floats == []

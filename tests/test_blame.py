"""Blame is computed, not listed: of a failed check's functions, only those wrong on their own are failed.

A check that calls several functions of the student's module fails when one of them is wrong; each is then run
alone (the check's other functions served as the reference defines them), and only those with which the check still
fails are blamed. The others are "used by a failing check": not counted failed, not named in the headline, and not
told a hint that describes another function's mistake.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import course_catalogue

from claims_harness import RunOptions, run_check
from claims_harness._claims.formats import culprits, hint
from claims_harness._reporting.rows import blame_experiments_as_the_run, check_row
from claims_harness.engine import USED_BY_FAILING, function_scoreboard

# Only leave_one_out_advantages is wrong (it divides by G, not G - 1); group_centered_advantages is the student's own
# and right.
WRONG_LOO = """
import numpy as np
from impl import *  # noqa: F403

__claims_reference_fallback__ = True


def group_centered_advantages(r_i):
    shifted = np.asarray(r_i) - np.asarray(r_i)[..., :1]
    return shifted - shifted.sum(axis=-1, keepdims=True) / shifted.shape[-1]


def leave_one_out_advantages(r_i):
    shifted = np.asarray(r_i) - np.asarray(r_i)[..., :1]
    return shifted - (shifted.sum(axis=-1, keepdims=True) - shifted) / shifted.shape[-1]
"""

# Only reinforce_loss is wrong (half the loss); surrogate_loss and ppo_clip_loss are the student's own and right.
WRONG_REINFORCE = """
import numpy as np
from impl import *  # noqa: F403
from impl import losses as _reference

__claims_reference_fallback__ = True


def reinforce_loss(logp, adv, mask=None):
    return 0.5 * _reference.reinforce_loss(logp, adv, mask)


def surrogate_loss(logp, logp_old, adv, mask=None):
    return _reference.surrogate_loss(np.array(logp, dtype=float), logp_old, adv, mask)


def ppo_clip_loss(logp, logp_old, adv, eps=0.2, mask=None):
    return _reference.ppo_clip_loss(np.array(logp, dtype=float), logp_old, adv, eps, mask)
"""


def _run(directory: Path, impl: str, claim_id: str, verifier: str) -> dict:
    catalogue = course_catalogue()
    entry = next(entry for entry in catalogue.entries if entry.id == claim_id)
    index = next(i for i, check in enumerate(entry.claim.checks) if check.verifier == verifier)
    sys.path.insert(0, str(directory))
    try:
        result = run_check(entry, index, catalogue.verifiers[verifier],
                           RunOptions(impl=impl, cache_dir=None, directory=str(directory), blame=True))
    finally:
        sys.path.remove(str(directory))
    return {"claim": {"id": claim_id}, "check": {**result.as_dict(), "rejects": entry.claim.checks[index].rejects}}


@pytest.mark.parametrize(("source", "claim_id", "verifier", "wrong", "right"), [
    (WRONG_LOO, "loo-identity", "baselines.loo_identity_property", "leave_one_out_advantages",
     ["group_centered_advantages"]),
    (WRONG_REINFORCE, "surrogate-gradient-equals-policy-gradient-at-old", "losses.key_test_property",
     "reinforce_loss", ["surrogate_loss", "ppo_clip_loss"]),
])
def test_only_the_wrong_function_is_failed(tmp_path, source, claim_id, verifier, wrong, right):
    (tmp_path / "student_module.py").write_text(source, encoding="utf-8")
    payload = _run(tmp_path, "student_module", claim_id, verifier)
    assert payload["check"]["status"] == "failed", payload["check"]
    assert payload["check"]["blamed"] == [wrong], payload["check"]
    rows = {row["function"]: row for row in function_scoreboard([payload])}
    assert (rows[wrong]["failed"], rows[wrong][USED_BY_FAILING]) == (1, 0)
    for function in right:
        assert (rows[function]["failed"], rows[function][USED_BY_FAILING]) == (0, 1), rows[function]


def test_a_hint_that_names_another_function_is_not_shown():
    uses = ["value_iteration", "policy_state_values"]
    assert hint("a policy_state_values that solves with γ²", uses, ["value_iteration"]) is None
    assert hint("a value_iteration that sweeps in place", uses, ["value_iteration"]) == \
        "a value_iteration that sweeps in place"
    assert hint("advantages averaged over the wrong axis", uses, ["value_iteration"]) is None  # whose? not said
    assert hint("advantages averaged over the wrong axis", uses, uses) == "advantages averaged over the wrong axis"
    per_function = {"value_iteration": "in-place sweeps", "policy_state_values": "γ² in the solve"}
    assert hint(per_function, uses, ["policy_state_values"]) == "γ² in the solve"


def _context(uses: tuple[str, ...]):
    from types import SimpleNamespace

    import numpy as np

    from claims_harness import Context, NoParams

    return Context(impl=SimpleNamespace(_uses=uses), params=NoParams(), rng=np.random.default_rng(0), seed=0,
                   profile="smoke", alpha=1e-3, beta=0.1, deviation=0.1, figures_dir=Path("."), seed_runner=None)


def test_a_sample_outside_the_support_is_the_implementations_fault_when_the_check_calls_it():
    """The Monte Carlo guard speaks to whoever can fix it: the student when the samples come from their functions,
    the claim's author when the verifier calls none."""
    from claims_harness import ImplementationError
    from claims_harness.errors import SupportViolation

    with pytest.raises(ImplementationError, match=r"when bernoulli_logit_score is right, so what the implementation "
                                                  r"returned is out of it") as raised:
        _context(("bernoulli_logit_score",)).mean_estimate([0.5, 3.0], (0.0, 1.0))
    assert "fix the support or the sampler" not in str(raised.value)
    with pytest.raises(SupportViolation, match="fix the support or the sampler"):
        _context(()).mean_estimate([0.5, 3.0], (0.0, 1.0))


def _payload(claim_id: str, kind: str, uses: list[str], blamed: list[str], status: str = "failed") -> dict:
    return {"claim": {"id": claim_id}, "check": {"kind": kind, "status": status, "uses": uses, "blamed": blamed}}


def test_a_failed_experiment_blames_what_the_runs_other_checks_blamed_in_its_headline_and_the_scoreboard():
    """An experiment is not run again per function: of its functions, it blames those another failed check of the run
    found wrong on their own, in the report's headline (culprits) as in the scoreboard; all of them when none was."""

    payloads = [_payload("identity", "property", ["rloo", "centred"], ["rloo"]),
                _payload("training", "experiment", ["rloo", "centred", "loss"], [])]
    rows = [check_row(payload["check"]) for payload in payloads]
    blame_experiments_as_the_run(rows)
    assert culprits(rows[1]) == ["rloo"]
    board = {row["function"]: row for row in function_scoreboard(payloads)}
    assert (board["rloo"]["failed"], board["centred"][USED_BY_FAILING], board["loss"][USED_BY_FAILING]) == (2, 2, 1)

    alone = [check_row(_payload("training", "experiment", ["rloo", "loss"], [])["check"])]
    blame_experiments_as_the_run(alone)
    assert culprits(alone[0]) == ["rloo", "loss"]


# Only action_values is wrong, and in a way the verifier trips on rather than compares (a third column of Q): the
# error names no function, so each is run alone to find the one with which the check still goes wrong.
WRONG_SHAPE = """
import numpy as np
from impl import *  # noqa: F403
from impl import tabular as _reference

__claims_reference_fallback__ = True


def action_values(P, R, V, gamma):
    Q = _reference.action_values(P, R, V, gamma)
    return np.concatenate([Q, Q[:, :1]], axis=1)
"""


def test_an_error_that_names_no_function_is_blamed_on_the_function_it_follows(tmp_path):
    (tmp_path / "student_module.py").write_text(WRONG_SHAPE, encoding="utf-8")
    payload = _run(tmp_path, "student_module", "value-iteration-two-states", "tabular.value_iteration_two_states")
    assert payload["check"]["status"] == "error", payload["check"]
    assert payload["check"]["error_in"] == ["action_values"], payload["check"]
    rows = {row["function"]: row for row in function_scoreboard([payload])}
    assert rows["action_values"]["failed"] == 1
    assert rows["value_iteration"]["failed"] == rows["greedy_policy"]["failed"] == 0

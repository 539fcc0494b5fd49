"""Lesson 4.5's scope: the clarification on a KL penalty over several tokens, and what its verifiers reach.

The witness of ``kl-in-loss-misses-prefix-score`` shows, for answers of two tokens, that the
per-token KL in the loss, differentiated directly, is not the gradient of the answers' KL. If the
loss placement were the whole extended formula of step 4.1.2 (its prefix score term added), the
text's sentence would hold as a reader takes it, and the witness must then turn red.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import course_entry

from claims_harness import RunOptions, lookup, run_check
from claims_harness.engine import find_course
from verifiers import kl

PROJECT = Path(__file__).resolve().parents[1]
CLAIM = "kl-in-loss-misses-prefix-score"


def _run(claim_id: str, index: int = 0, **options):
    entry = course_entry(claim_id)
    return run_check(entry, index, lookup(entry.claim.checks[index].verifier), RunOptions(**options))


def test_the_witness_passes_as_written():
    assert _run(CLAIM).status == "passed"


def test_a_loss_placement_with_the_prefix_score_term_turns_the_witness_red(monkeypatch):
    direct = kl._in_loss_expected_gradient

    def whole_extended_formula(policy):
        return [a + b for a, b in zip(direct(policy), kl._prefix_score_term(policy), strict=True)]

    monkeypatch.setattr(kl, "_in_loss_expected_gradient", whole_extended_formula)
    result = _run(CLAIM, isolation=False)
    assert result.status == "failed"
    failed = {comparison["key"] for comparison in result.comparisons if not comparison["passed"]}
    # The loss placement now is the penalty's whole gradient (gap 0), and adding the prefix term again overshoots.
    assert failed == {"loss_placement_gap", "loss_placement_with_prefix_score_gap"}


def test_the_prefix_score_term_is_zero_for_one_token_answers():
    params = course_entry(CLAIM).claim.checks[0].params
    witness = kl.PenaltyWitness(**params)
    assert all(term == 0 for term in kl._prefix_score_term(kl._AnswerPolicy(witness, 1)))


@pytest.mark.parametrize(("claim_id", "index", "dimension", "values"), [
    # The sequence verifiers of 4.1.5 and 4.2.4's statements: answers of one token and of several.
    ("sequence-log-prob-chain-rule", 1, "tokens", {"one", "many"}),
    ("sequence-log-prob-chain-rule", 1, "actions", {"two", "three-or-more"}),
    ("aggregation-unit-changes-objective", 0, "tokens", {"one", "many"}),
    ("rloo-sequence-unbiased", 3, "group", {"two", "three-or-more"}),
    ("rloo-sequence-unbiased", 3, "tokens", {"one", "many"}),
    ("broadcast-advantage-gradient", 0, "actions", {"two", "three-or-more"}),
    (CLAIM, 0, "tokens", {"one", "many"}),
])
def test_the_widened_checks_reach_both_values(claim_id, index, dimension, values):
    result = _run(claim_id, index, scope=find_course(PROJECT).scope)
    assert result.status == "passed"
    assert set(result.reached.get(dimension, {})) == values, result.reached


def test_the_witness_computes_in_exact_arithmetic():
    params = course_entry(CLAIM).claim.checks[0].params
    policy = kl._AnswerPolicy(kl.PenaltyWitness(**params), 2)
    gaps = np.array(kl._in_loss_expected_gradient(policy), dtype=object) - np.array(
        kl._kl_gradient(policy), dtype=object)
    # A coordinate of the first position's logits: a rational combination of logarithms of primes, not a float.
    assert not gaps[0].is_Float and gaps[0].free_symbols == set() and gaps[0] != 0

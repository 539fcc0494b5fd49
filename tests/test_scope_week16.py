"""The week-16 syllabus under issue 41: its two new errata, what its checks reach, and its note to the author.

Point 3: the interview answer's "subtracting b(s) lowers the variance" is general, and false for a baseline far
from b*: in the syllabus's own bandit b = 5 raises the total variance from 26/9 to 56/9 (claim
``baseline-can-raise-variance``), while the bandit's numbers (2.89 to 0.22 with b = 2) stay a statement of
their own. Point 4: step 4's "clipping gives up unbiasedness" holds for one token only; for two tokens the
per-token surrogate's gradient is off ∇J with no clip active, and only the product of ratios gives ∇J (claim
``clipping-gives-up-unbiasedness``, second check). Each erratum's witness passes on the reference and turns red
once what it is computed from is changed so that the text's sentence became true. Checks run in-process
(``isolation=False``) so that a patched weight reaches the verifier.
"""

from __future__ import annotations

import math
import sys
import types
from fractions import Fraction

import numpy as np
import pytest
from conftest import course_catalogue

import impl
import verifiers.surrogate as surrogate
from claims_harness import CheckResult, RunOptions, check_names, lookup, run_check

FILE = "claims/week16-syllabus.yaml"
VARIANCE_ERRATUM = "baseline-can-raise-variance"
CLIPPING_ERRATUM = "clipping-gives-up-unbiasedness"


@pytest.fixture(scope="module")
def catalogue():
    return course_catalogue()


def _run(catalogue, claim_id: str, check: str, implementation: str = "impl") -> CheckResult:
    entry = next(entry for entry in catalogue.in_file(FILE) if entry.id == claim_id)
    index = check_names(entry).index(check)
    options = RunOptions(impl=implementation, isolation=False, scope=catalogue.course.scope)
    return run_check(entry, index, lookup(entry.claim.checks[index].verifier), options)


def _exact(value: object) -> Fraction:
    """An observation as the results carry it: a Fraction is {'exact': 'p/q', 'value': float}, an integer itself."""
    return Fraction(value["exact"]) if isinstance(value, dict) else Fraction(value)


@pytest.fixture
def variant(monkeypatch):
    """Register impl with some functions replaced, importable by name for one test, as ``--claims-impl`` would."""

    def register(name: str, **replaced: object) -> str:
        module = types.ModuleType(name)
        module.__dict__.update({key: getattr(impl, key) for key in impl.__all__})
        module.__all__ = list(impl.__all__)
        module.__dict__.update(replaced)
        monkeypatch.setitem(sys.modules, name, module)
        return name

    return register


# ------------------------------------------------------------------ point 3: a baseline can raise the variance


def test_the_variance_erratum_is_general_and_the_bandit_numbers_stay_an_instance(catalogue):
    statements = {statement_id: found.statement for statement_id, found in catalogue.statements.items()}
    general = statements["w16s4-interview-baseline-lowers-variance"]
    assert general.shape == "general" and general.scope == {"states": "all", "actions": "all"}
    instance = statements["w16s4-interview-variance-drop"]
    assert instance.shape == "instance" and instance.scope == {"states": "one", "actions": "three-or-more"}
    claims = {entry.id: entry.claim for entry in catalogue.in_file(FILE)}
    assert claims[VARIANCE_ERRATUM].erratum and claims[VARIANCE_ERRATUM].covers == [
        "w16s4-interview-baseline-lowers-variance"]
    assert "w16s4-interview-variance-drop" in claims["bandit-baseline-variance"].covers
    assert claims["bandit-baseline-variance"].erratum is None


def test_in_the_syllabus_s_bandit_b_equal_to_five_raises_the_variance(catalogue):
    result = _run(catalogue, VARIANCE_ERRATUM, "exact")
    assert result.status == "passed", result.error or result.comparisons
    assert _exact(result.observed["total_variance_no_baseline"]) == Fraction(26, 9)
    assert _exact(result.observed["total_variance_with_baseline"]) == Fraction(56, 9)
    assert set(result.reached["states"]) == {"one"} and set(result.reached["actions"]) == {"three-or-more"}


def test_the_variance_witness_turns_red_when_the_baseline_is_left_out(catalogue, variant):
    """What would make the sentence true: the variance computed without the baseline (b ignored)."""
    def baseline_ignored(g_t, b_t):
        return np.asarray(g_t) + 0 * np.asarray(b_t)

    name = variant("week16_baseline_ignored", baseline_advantages=baseline_ignored)
    witness = _run(catalogue, VARIANCE_ERRATUM, "exact", name)
    assert witness.status == "failed", witness.comparisons
    assert _exact(witness.observed["total_variance_with_baseline"]) == Fraction(26, 9)
    assert _run(catalogue, VARIANCE_ERRATUM, "property", name).status == "failed"


def test_the_variance_property_reaches_many_prompts_and_both_action_counts(catalogue):
    result = _run(catalogue, VARIANCE_ERRATUM, "property")
    assert result.status == "passed", result.error
    assert set(result.reached["states"]) == {"one", "many"}
    assert set(result.reached["actions"]) == {"two", "three-or-more"}


# ------------------------------------------------------------------ point 4: the per-token surrogate is already biased


def _vector(observed: list[object]) -> list[Fraction]:
    return [_exact(x) for x in observed]


def test_two_tokens_show_the_per_token_surrogate_off_the_gradient_with_no_clip_active(catalogue):
    result = _run(catalogue, CLIPPING_ERRATUM, "counterexample-2")
    assert result.status == "passed", result.error or result.comparisons
    observed = result.observed
    assert observed["no_clip_active"] is True
    assert _vector(observed["ratio_range"]) == [Fraction(9, 10), Fraction(11, 10)]
    gap = _vector(observed["per_token_minus_true"])
    assert any(gap) and gap[:2] == [Fraction(99, 8000), Fraction(-99, 8000)]
    assert not any(_vector(observed["clipped_minus_per_token"]))
    assert not any(_vector(observed["product_of_ratios_minus_true"]))
    assert not any(_vector(observed["per_token_minus_true_at_old"]))
    assert set(result.reached["tokens"]) == {"many"} and set(result.reached["data"]) == {"old"}


def test_the_clipping_statement_speaks_for_many_tokens_and_both_checks_reach_their_part(catalogue):
    statement = catalogue.statements["w16s4-clipping-gives-up-unbiasedness"].statement
    assert statement.scope == {"tokens": "all", "data": "old"}
    claim = next(entry.claim for entry in catalogue.in_file(FILE) if entry.id == CLIPPING_ERRATUM)
    assert claim.erratum and claim.clarification is None
    one_token = _run(catalogue, CLIPPING_ERRATUM, "counterexample")
    assert one_token.status == "passed" and set(one_token.reached["tokens"]) == {"one"}


def test_the_clipping_witness_turns_red_when_the_surrogate_is_the_product_of_ratios(catalogue, monkeypatch):
    """What would make the sentence true: the surrogate before the clip is the honest transfer, Π_t r_t."""
    monkeypatch.setattr(surrogate, "per_token_weights",
                        lambda ctx, ratios, advantages: surrogate.product_of_ratios_weights(ratios, advantages))
    result = _run(catalogue, CLIPPING_ERRATUM, "counterexample-2")
    assert result.status == "failed", result.comparisons
    assert not any(_vector(result.observed["per_token_minus_true"]))


def test_an_implementation_whose_surrogate_is_the_product_fails_the_clipping_witness(catalogue, variant):
    def product_surrogate_grad(ratio_t, advantage_t):
        weight = math.prod(np.asarray(ratio_t)) * sum(np.asarray(advantage_t))
        return np.array([weight] * len(ratio_t), dtype=object)

    name = variant("week16_product_surrogate", surrogate_objective_grad=product_surrogate_grad)
    assert _run(catalogue, CLIPPING_ERRATUM, "counterexample-2", name).status == "failed"


# ------------------------------------------------------------------ the rest of the scope, and the note


@pytest.mark.parametrize(("claim_id", "check"), [
    ("value-is-expected-discounted-return", "property-2"),
    ("bellman-operator-contracts", "property"),
    ("bellman-residual-is-advantage", "property"),
    ("return-minus-value-estimates-advantage", "property"),
    ("value-head-learns-current-policy-values", "property"),
])
def test_the_bellman_checks_reach_gamma_one_on_episodic_mdps(catalogue, claim_id, check):
    result = _run(catalogue, claim_id, check)
    assert result.status == "passed", result.error
    assert set(result.reached["discount"]) == {"one", "below-one"}


def test_the_return_s_infinite_sum_is_reached(catalogue):
    result = _run(catalogue, "return-is-discounted-sum", "symbolic")
    assert result.status == "passed", result.error or result.comparisons
    assert set(result.reached["horizon"]) == {"one", "many", "unbounded"}


def test_the_missing_hat_a_of_step_four_is_a_note_to_the_author(catalogue):
    texts = [note.says for note in catalogue.notes[FILE] if note.where == "week16/step-4"]
    assert any("Â" in text and "= +2" in text and "= −2" in text for text in texts), texts

"""The checks of lesson 4.2 (claims/4.2-baselines.yaml) turn red for the wrong implementation or formula they name.

Each wrong implementation is the reference with one function replaced (``tests/fixtures`` or the
bug zoo); each wrong formula replaces one module-level formula of a symbolic verifier. Every case
runs the check against the wrong one, which must fail; the check's ``rejects`` must name the module it
is tested with. That the check passes against the reference is its own item in the same run
(``claims/4.2-baselines.yaml::<claim>::<check>``), not run again here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy as sp
from conftest import course_catalogue

from claims_harness import RunOptions, lookup, run_check
from claims_harness.engine import rejects_text
from verifiers import baseline_optimal, baseline_state, bernoulli

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def claims():
    catalogue = course_catalogue()
    return {entry.id: entry for entry in catalogue.entries if entry.file == "claims/4.2-baselines.yaml"}


def _status(claims, claim_id: str, index: int, implementation: str = "impl") -> str:
    entry = claims[claim_id]
    check = entry.claim.checks[index]
    return run_check(entry, index, lookup(check.verifier), RunOptions(impl=implementation)).status


WRONG_IMPLEMENTATIONS = [
    ("action-dependent-baseline-biases", 0, "zoo.action_dependent_baseline"),
    ("action-dependent-control-variate-compensated", 1, "zoo.action_dependent_baseline"),
    ("advantage-is-q-minus-v", 1, "value_as_plain_mean"),
    ("optimal-scalar-baseline", 1, "optimal_baseline_as_value"),
    ("optimal-baseline-differs-from-value", 0, "optimal_baseline_as_value"),
    ("optimal-baseline-value-gap-is-covariance", 1, "optimal_baseline_as_value"),
    ("optimal-baseline-value-gap-is-covariance", 2, "optimal_baseline_unsquared_norm"),
    ("optimal-baseline-depends-on-parameterisation", 0, "optimal_baseline_as_value"),
    ("value-is-regression-minimiser", 1, "value_as_plain_mean"),
    ("bernoulli-logit-score", 1, "flipped_bernoulli_score"),
    ("bernoulli-group-estimators", 0, "centered_over_batch"),
    ("group-mean-shrinks-expectation", 1, "centered_over_batch"),
    ("centred-advantages-sum-to-zero", 0, "centered_as_loo"),
    ("loo-needs-independent-answers", 0, "loo_as_centered"),
    ("loo-biased-by-shared-reward", 0, "loo_as_centered"),
    ("rloo-answer-level", 0, "zoo.rloo_as_group_mean"),
    ("rloo-answer-level", 1, "zoo.mask_with_prompt"),
    ("no-universal-variance-ordering", 0, "loo_as_centered"),
    ("group-mean-variance-fraction-of-loo", 1, "loo_as_centered"),
    # the checks issue 41 added to reach the statements' scope (tests/test_scope_4_2.py plants the rest)
    ("state-baseline-unbiased", 2, "zoo.action_dependent_baseline"),
    ("value-is-expected-action-value", 1, "value_as_plain_mean"),
    ("group-mean-shrinks-expectation", 2, "centered_over_batch"),
    ("loo-unbiased", 1, "loo_as_centered"),
    ("loo-needs-independent-answers", 1, "loo_as_centered"),
    ("loo-biased-by-shared-reward", 1, "loo_as_centered"),
    ("rloo-answer-level", 2, "zoo.rloo_as_group_mean"),
]


@pytest.mark.parametrize(("claim_id", "index", "implementation"), WRONG_IMPLEMENTATIONS,
                         ids=[f"{c}-{i}-{m}" for c, i, m in WRONG_IMPLEMENTATIONS])
def test_check_fails_the_wrong_implementation_it_names(claims, monkeypatch, claim_id, index, implementation):
    if implementation.startswith("zoo."):  # a student may read the zoo; tests/fixtures is the harness's own business
        assert implementation.replace(".", "/") + ".py" in rejects_text(claims[claim_id].claim.checks[index].rejects)
    monkeypatch.syspath_prepend(str(FIXTURES))
    assert _status(claims, claim_id, index, implementation) == "failed"


def _compensating_term_with_wrong_sign(pi, baseline, a, theta, categories):
    return -sp.Sum(baseline[a] * sp.diff(pi(a, theta), theta), (a, 1, categories))


def _score_in_probability(**_):
    p = sp.Symbol("p", positive=True)
    return {1: 1 / p, 0: -1 / (1 - p)}


def _optimal_baseline_unsquared(pi, q, n, a, categories):
    return (sp.Sum(pi[a] * q[a] * sp.sqrt(n[a]), (a, 1, categories))
            / sp.Sum(pi[a] * sp.sqrt(n[a]), (a, 1, categories)))


def _optimal_baseline_without_normaliser(pi, q, n, a, categories):
    return sp.Sum(pi[a] * q[a] * n[a], (a, 1, categories))


def _unweighted_value(pi, q, a, categories):
    return sp.Sum(q[a], (a, 1, categories)) / categories


def _unweighted_value_sum(pi, q, index, categories):
    return sp.Sum(q[index], (index, 1, categories)) / categories


WRONG_FORMULAS = [
    ("action-dependent-control-variate-compensated", 0, baseline_state, "compensating_term",
     _compensating_term_with_wrong_sign, "wrong sign"),
    ("advantage-is-q-minus-v", 0, baseline_state, "state_value_sum", _unweighted_value_sum, "unweighted mean"),
    ("bernoulli-logit-score", 0, bernoulli, "logit_score_formulas", _score_in_probability, "respect to p"),
    ("optimal-scalar-baseline", 0, baseline_optimal, "optimal_baseline_formula", _optimal_baseline_unsquared,
     "unsquared norm"),
    ("optimal-baseline-value-gap-is-covariance", 0, baseline_optimal, "optimal_baseline_formula",
     _optimal_baseline_unsquared, "unsquared norm"),
    ("optimal-baseline-depends-on-parameterisation", 1, baseline_optimal, "optimal_baseline_formula",
     _optimal_baseline_unsquared, "unsquared norm"),
    ("optimal-baseline-equals-value-for-constant-score-norm", 0, baseline_optimal, "optimal_baseline_formula",
     _optimal_baseline_without_normaliser, "without its normaliser"),
    ("value-is-regression-minimiser", 0, baseline_optimal, "state_value_formula", _unweighted_value,
     "unweighted mean"),
]


@pytest.mark.parametrize(("claim_id", "index", "module", "name", "wrong", "named_as"), WRONG_FORMULAS,
                         ids=[f"{c}-{i}-{n}" for c, i, _, n, _, _ in WRONG_FORMULAS])
def test_symbolic_check_fails_the_wrong_formula_it_names(claims, monkeypatch, claim_id, index, module, name, wrong,
                                                         named_as):
    assert named_as in rejects_text(claims[claim_id].claim.checks[index].rejects)
    monkeypatch.setattr(module, name, wrong)
    assert _status(claims, claim_id, index) == "failed"

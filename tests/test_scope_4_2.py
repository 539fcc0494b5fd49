"""Lesson 4.2 and issue 41: the checks that reach the statements' scope, and what they reject.

* ``value-is-expected-action-value`` (point 6a) checks V^π(s) = Σ_a π(a|s) Q^π(s, a) on the implementation's
  own Bellman evaluation against the verifier's exact solution: a Q^π off by a constant, or a V^π that is not
  the π-expectation of Q^π, fails it; the old check, which handed the implementation an arbitrary Q, passed both.
* ``no-universal-variance-ordering`` (point 5b) files what it adds to a true sentence as a clarification, not an
  erratum, and keeps its computations.
* The new witnesses and properties reach the part of each statement's scope the others missed (γ = 1 and
  γ < 1, one state and many, two actions and more, G = 2, answers of several tokens), and turn red for the
  wrong implementation their ``rejects`` names.

Each planted implementation is the reference with one function replaced, written to a temporary module; the
checks run in this process (``isolation=False``) so that a patched verifier helper reaches them.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import course_catalogue

from claims_harness import CheckResult, RunOptions, lookup, run_check

HEADER = ("import numpy as np\nimport impl\nfrom impl import *  # noqa: F403\nfrom impl import __all__  # noqa: F401\n"
          "__claims_reference_fallback__ = True\n")


@pytest.fixture(scope="module")
def catalogue():
    return course_catalogue()


def _run(catalogue, claim_id: str, index: int, implementation: str = "impl") -> CheckResult:
    entry = next(entry for entry in catalogue.entries if entry.id == claim_id)
    options = RunOptions(impl=implementation, isolation=False, scope=catalogue.course.scope)
    return run_check(entry, index, lookup(entry.claim.checks[index].verifier), options)


def _plant(tmp_path, monkeypatch, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(HEADER + textwrap.dedent(source), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


BELLMAN = ("value-is-expected-action-value", 0)

WRONG_EVALUATIONS = {
    # Q^π off by a constant: Σ_a π Q^π is then V^π + 1, yet the old check (an arbitrary Q handed to V-from-Q) passed.
    "action_values_plus_one": """
        def policy_action_values(P, R, pi, gamma):
            return impl.policy_action_values(P, R, pi, gamma) + 1
        """,
    # V^π that is not the π-expectation of Q^π: the value of the best action under Q^π.
    "greedy_state_values": """
        def policy_state_values(P, R, pi, gamma):
            return impl.policy_action_values(P, R, pi, gamma).max(axis=-1)
        """,
    # both consistent with each other (V = Σ π Q) but for the policy that ignores π: uniform over the actions.
    "uniform_policy_evaluation": """
        def policy_state_values(P, R, pi, gamma):
            pi = np.asarray(pi)
            return impl.policy_state_values(P, R, np.ones_like(pi) / pi.shape[-1], gamma)

        def policy_action_values(P, R, pi, gamma):
            pi = np.asarray(pi)
            return impl.policy_action_values(P, R, np.ones_like(pi) / pi.shape[-1], gamma)
        """,
}


def test_the_bellman_evaluation_check_passes_the_reference_and_reaches_the_discounted_setting(catalogue):
    result = _run(catalogue, *BELLMAN)
    assert result.status == "passed", result.error or result.comparisons
    assert result.reached["discount"].keys() == {"below-one"}
    assert result.reached["horizon"].keys() == {"unbounded"}
    assert result.reached["states"].keys() == {"one", "many"}
    assert result.reached["actions"].keys() == {"two", "three-or-more"}
    assert result.reached["transitions"].keys() == {"deterministic", "stochastic"}


@pytest.mark.parametrize("name", list(WRONG_EVALUATIONS))
def test_the_bellman_evaluation_check_fails_a_wrong_evaluation(catalogue, tmp_path, monkeypatch, name):
    implementation = _plant(tmp_path, monkeypatch, name, WRONG_EVALUATIONS[name])
    assert _run(catalogue, *BELLMAN, implementation).status == "failed"


def test_the_old_check_of_v_from_q_could_not_see_a_shifted_q(catalogue, tmp_path, monkeypatch):
    """Why 422-value-is-expected-q moved: the advantage claim hands V-from-Q its own Q, so Q^π + 1 passes it."""
    name = "action_values_plus_one"
    implementation = _plant(tmp_path, monkeypatch, name, WRONG_EVALUATIONS[name])
    assert _run(catalogue, "advantage-is-q-minus-v", 1, implementation).status == "passed"
    statements = {entry.id: entry for entry in catalogue.entries}
    assert "422-value-is-expected-q" not in statements["advantage-is-q-minus-v"].claim.covers
    assert statements["value-is-expected-action-value"].claim.covers == ["422-value-is-expected-q"]


def test_v_from_the_exact_q_reaches_the_undiscounted_episodic_setting(catalogue):
    result = _run(catalogue, "value-is-expected-action-value", 1)
    assert result.status == "passed", result.error or result.comparisons
    assert result.reached["discount"].keys() == {"one", "below-one"}
    assert result.reached["horizon"].keys() == {"one", "many", "unbounded"}


def test_the_variance_order_is_a_clarification_with_its_computations_kept(catalogue):
    entry = next(entry for entry in catalogue.entries if entry.id == "no-universal-variance-ordering")
    assert entry.claim.erratum is None
    assert "the group size is among the factors" in entry.claim.clarification
    assert len(entry.claim.checks) == 6
    reached: dict[str, set[str]] = {}
    for index in range(len(entry.claim.checks)):
        result = _run(catalogue, entry.id, index)
        assert result.status == "passed", (index, result.error or result.comparisons)
        for dimension, values in result.reached.items():
            reached.setdefault(dimension, set()).update(values)
    assert reached["group"] == {"two", "three-or-more"}
    assert reached["actions"] == {"two", "three-or-more"}


def test_normalisation_at_g_two_fails_an_implementation_that_forgets_the_division(catalogue, tmp_path, monkeypatch):
    implementation = _plant(tmp_path, monkeypatch, "centred_as_normalised", """
        def group_normalized_advantages(r_i, eps):
            return impl.group_centered_advantages(np.asarray(r_i, dtype=float))
        """)
    result = _run(catalogue, "std-normalisation-not-a-control-variate", 1)
    assert result.status == "passed", result.error or result.comparisons
    assert result.reached["group"] == {"two": 2}
    assert _run(catalogue, "std-normalisation-not-a-control-variate", 1, implementation).status == "failed"


@pytest.mark.parametrize(("claim_id", "index", "dimension", "values"), [
    ("state-baseline-unbiased", 2, "horizon", {"one", "many", "unbounded"}),
    ("state-baseline-unbiased", 2, "discount", {"one", "below-one"}),
    ("group-mean-shrinks-expectation", 2, "actions", {"two", "three-or-more"}),
    ("loo-unbiased", 1, "group", {"two", "three-or-more"}),
    ("loo-needs-independent-answers", 1, "group", {"two"}),
    ("loo-needs-independent-answers", 2, "data", {"current", "other"}),
    ("loo-biased-by-shared-reward", 1, "group", {"two"}),
    ("rloo-answer-level", 2, "tokens", {"one", "many"}),
    ("optimal-baseline-depends-on-parameterisation", 1, "actions", {"two"}),
])
def test_the_new_witnesses_reach_what_the_others_missed(catalogue, claim_id, index, dimension, values):
    result = _run(catalogue, claim_id, index)
    assert result.status == "passed", result.error or result.comparisons
    assert set(result.reached[dimension]) == values

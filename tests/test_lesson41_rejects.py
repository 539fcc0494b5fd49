"""Each wrong implementation named in a ``rejects`` of lesson 4.1's claims turns exactly those checks red.

Every variant is the reference with one function replaced, written into the test's own directory
and judged on exactly the checks it must fail, through the engine (no pytest session, no blame runs).
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import outcomes_against

FILE = "claims/4.1-policy-gradient.yaml"
HEADER = ("import numpy as np\nimport impl\nfrom impl import *  # noqa: F403\nfrom impl import __all__  # noqa: F401\n"
          "__claims_reference_fallback__ = True\n")

VARIANTS = {
    "no_outer_discount": ("""
        def discounted_objective_weights(r_t, gamma):
            return impl.discounted_returns(r_t, gamma)
        """, ["reward-to-go-same-expectation::exact", "literal-discounted-objective-gradient::property",
              "dropping-discount-factor-changes-direction::counterexample",
              "reinforce-unbiased-for-chosen-objective::montecarlo", "reward-to-go-definition::property",
              "reward-to-go-same-expectation::property"]),
    "score_without_pi": ("""
        def softmax_score(z, a):
            return np.eye(np.shape(z)[-1])[np.asarray(a)]
        """, ["direct-dependence-needs-extra-term::counterexample", "softmax-score::property",
              "expected-score-is-zero::property", "score-function-estimator-unbiased::montecarlo"]),
    "undiscounted_full_return": ("""
        def full_return_weights(r_t, gamma):
            return impl.full_return_weights(r_t, 1)
        """, ["reinforce-full-return-gradient::property", "reward-to-go-definition::property"]),
    "mean_over_n_minus_one": ("""
        def score_function_gradient(f_i, score_i):
            n = np.shape(f_i)[-1]
            return impl.score_function_gradient(f_i, score_i) * n / max(n - 1, 1)
        """, ["score-function-estimator-unbiased::exact"]),
    "reinforce_mean_over_steps": ("""
        def reinforce_gradient(w_t, score_t):
            return impl.reinforce_gradient(w_t, score_t) / np.shape(w_t)[0]
        """, ["reinforce-unbiased-for-chosen-objective::montecarlo-2", "single-batch-can-point-away::exact",
              "reinforce-full-return-gradient::property"]),
    "trajectory_score_without_last_step": ("""
        def trajectory_score(mdp, theta, s_t, a_t):
            s_t, a_t = np.asarray(s_t), np.asarray(a_t)
            if len(a_t) == 1:
                return 0 * impl.trajectory_score(mdp, theta, s_t, a_t)
            return impl.trajectory_score(mdp, theta, s_t[:-1], a_t[:-1])
        """, ["trajectory-score-is-sum-of-policy-scores::property"]),
    "gradient_ignores_policy_dependent_dynamics": ("""
        def objective_gradient(mdp, theta, horizon, gamma=1.0):
            return impl.objective_gradient(mdp._replace(P_alt=None), theta, horizon, gamma)
        """, ["policy-dependent-dynamics-break-the-simplification::counterexample"]),
    "pathwise_gradient": ("""
        def objective_gradient(mdp, theta, horizon, gamma=1.0):
            return np.zeros(np.shape(theta))
        """, ["sampled-action-has-no-pathwise-gradient::counterexample",
              "sampled-action-has-no-pathwise-gradient::counterexample-2"]),
    "tabular_score_sign_flipped": ("""
        def tabular_softmax_score(theta, s, a):
            return -impl.tabular_softmax_score(theta, s, a)
        """, ["weight-sign-moves-logit::property", "step-sign-follows-advantage::property-2"]),
    "returns_with_outer_discount": ("""
        def discounted_returns(r_t, gamma):
            return impl.discounted_objective_weights(r_t, gamma)
        """, ["undiscounted-weighting-is-no-gradient::counterexample",
              "reinforce-discounted-returns-fit-no-objective::counterexample"]),
    "uniform_actions_in_enumeration": ("""
        def enumerate_trajectories(mdp, pi_sa, horizon):
            shape = np.shape(pi_sa)
            return impl.enumerate_trajectories(mdp, np.full(shape, 1 / shape[1]), horizon)
        """, ["policy-changes-the-data::counterexample"]),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_named_wrong_implementation_fails_its_checks(tmp_path, variant):
    source, must_fail = VARIANTS[variant]
    (tmp_path / f"wrong_{variant}.py").write_text(HEADER + textwrap.dedent(source), encoding="utf-8")
    outcomes = outcomes_against(f"wrong_{variant}", [f"{FILE}::{check}" for check in must_fail], tmp_path)
    assert {node: outcome.status for node, outcome in outcomes.items() if outcome.status not in ("failed", "error")} \
        == {}

"""The week-16 syllabus's checks reject the wrong implementations their ``rejects`` name.

Each variant is the reference implementation with one function replaced, as in the zoo; it is
registered as a module so that the harness imports it by name, exactly as with ``--impl``. Every
named check must fail against its variant: compare and find the difference, or (a Monte Carlo check)
refuse samples out of the support the reference keeps to. That it passes against ``impl`` is its own item,
``claims/week16-syllabus.yaml::<claim>::<check>``, in the same run; it is not run again here. Checks whose
``rejects`` names a wrong formula rather than a wrong implementation (pure sympy proofs and the
text's own readings) have no implementation to replace and are not listed here.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from conftest import course_catalogue

import impl
from claims_harness import Catalogue, CheckResult, RunOptions, check_names, run_check
from zoo import action_dependent_baseline, loss_mean_over_padding, surrogate_inverse_ratio
from zoo import clip_on_log_ratio as log_ratio_clip_loss

# ------------------------------------------------------------------ wrong functions, one per pitfall


def score_sign_flipped(z, a):
    return -impl.softmax_score(z, a)


def score_of_uniform_policy(z, a):
    categories = np.shape(z)[-1]
    return np.eye(categories)[np.asarray(a)] - 1 / categories


def estimator_without_weights(f_i, score_i):
    return impl.score_function_gradient(np.ones(np.shape(f_i)), score_i)


def baseline_added(g_t, b_t):
    return np.asarray(g_t) + np.asarray(b_t)


def baseline_ignored(g_t, b_t):
    return np.asarray(g_t) + 0 * np.asarray(b_t)


def log_ratio_not_exponentiated(log_pi_t, log_pi_old_t):
    return np.asarray(log_pi_t, dtype=float) - np.asarray(log_pi_old_t, dtype=float)


def inverted_ratio(log_pi_t, log_pi_old_t):
    return impl.probability_ratios(log_pi_old_t, log_pi_t)


def clip_on_log_ratio(ratio_t, advantage_t, epsilon):
    ratio, advantage, epsilon = np.asarray(ratio_t, dtype=float), np.asarray(advantage_t, dtype=float), float(epsilon)
    return np.minimum(ratio * advantage, np.exp(np.clip(np.log(ratio), -epsilon, epsilon)) * advantage)


def rloo_divided_by_group_size(rewards):
    r_i = np.asarray(rewards, dtype=float)
    return (r_i.sum(axis=-1, keepdims=True) - r_i) / r_i.shape[-1]


def surrogate_with_log_ratio(logp, logp_old, adv, mask=None):
    logp, logp_old, adv = np.asarray(logp), np.asarray(logp_old), np.asarray(adv)
    adv = adv if adv.shape == logp.shape else adv[:, None]
    mask = np.ones(logp.shape) if mask is None else np.asarray(mask)
    return float(-(mask * (logp - logp_old) * adv).sum() / mask.sum())


def symmetric_clip_grad(ratio_t, advantage_t, epsilon):
    ratio, advantage = np.asarray(ratio_t), np.asarray(advantage_t)
    outside = (ratio < 1 - epsilon) | (ratio > 1 + epsilon)
    return np.where(outside, 0 * advantage, ratio * advantage)


def never_clipping_grad(ratio_t, advantage_t, epsilon):
    return impl.surrogate_objective_grad(ratio_t, advantage_t)


def hard_stop_at_band_grad(ratio_t, advantage_t, epsilon):
    ratio = np.asarray(ratio_t)
    gradient = impl.ppo_clip_objective_grad(ratio_t, advantage_t, epsilon)
    return 0 * gradient if np.any((ratio < 1 - epsilon) | (ratio > 1 + epsilon)) else gradient


def surrogate_grad_without_ratio(ratio_t, advantage_t):
    return np.asarray(advantage_t) + 0 * np.asarray(ratio_t)


def discounted_one_step_too_many(r_t, gamma):
    return gamma * impl.discounted_returns(r_t, gamma)


def immediate_reward_only(r_t, gamma):
    return np.array(list(np.asarray(r_t)))


def undiscounted_returns(r_t, gamma):
    return impl.discounted_returns(r_t, 1)


def one_backup_too_many(P, R, gamma, n_iterations, v_0=None):
    return impl.value_iteration(P, R, gamma, n_iterations + 1, v_0)


def gauss_seidel_value_iteration(P, R, gamma, n_iterations, v_0=None):
    P, R = np.asarray(P), np.asarray(R)
    v = np.zeros(R.shape[0], dtype=R.dtype) if v_0 is None else np.array(v_0)
    for _ in range(n_iterations):
        for s in range(len(v)):
            v[s] = (R[s] + gamma * (P[s] * v).sum(axis=-1)).max()
    return v


def value_iteration_stopping_at_a_tolerance(P, R, gamma, n_iterations, v_0=None):
    P, R = np.asarray(P, dtype=float), np.asarray(R, dtype=float)
    v = np.zeros(R.shape[0]) if v_0 is None else np.array(v_0, dtype=float)
    for _ in range(n_iterations):
        new = (R + gamma * (P * v).sum(axis=-1)).max(axis=-1)
        converged = np.abs(new - v).max() < 1e-8
        v = new
        if converged:
            break
    return v


def value_iteration_from_zeros(P, R, gamma, n_iterations, v_0=None):
    return impl.value_iteration(P, R, gamma, n_iterations)


def values_with_gamma_squared(P, R, pi, gamma):
    return impl.policy_state_values(P, R, pi, gamma * gamma)


def operator_without_discount(P, R, v, gamma):
    return impl.bellman_optimality_operator(P, R, v, 1)


def td_error_adding_value(r_t, v_t, v_tp1, terminated_t, gamma):
    return impl.td_errors(r_t, v_t, v_tp1, terminated_t, gamma) + 2 * np.asarray(v_t)


def td_error_without_discount(r_t, v_t, v_tp1, terminated_t, gamma):
    return impl.td_errors(r_t, v_t, v_tp1, terminated_t, 1)


def gae_ignoring_lambda(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, 1)


def surrogate_as_running_product(ratio_t, advantage_t):
    return np.cumprod(np.asarray(ratio_t), axis=0) * np.asarray(advantage_t)


def gae_lambda_as_discount(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_):
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma * lambda_, 1)


def kl_gradient_without_centring(logits_t, ref_logits_t, mask_t, beta, aggregation):
    value, _ = impl.kl_penalty_loss(logits_t, ref_logits_t, mask_t, beta, aggregation)
    log_ratio = impl.log_softmax(logits_t) - impl.log_softmax(ref_logits_t)
    weights = impl.aggregation_weights(mask_t, aggregation)
    return value, beta * weights[..., None] * impl.softmax(logits_t) * log_ratio


def kl_penalty_without_gradient(logits_t, ref_logits_t, mask_t, beta, aggregation):
    value, gradient = impl.kl_penalty_loss(logits_t, ref_logits_t, mask_t, beta, aggregation)
    return value, np.zeros_like(gradient)


def full_return_without_discount(r_t, gamma):
    return impl.full_return_weights(r_t, 1)


def expectation_operator_discounting_twice(P, R, pi, v, gamma):
    return impl.bellman_expectation_operator(P, R, pi, v, gamma * gamma)


def expectation_operator_with_uniform_policy(P, R, pi, v, gamma):
    pi = np.asarray(pi)
    return impl.bellman_expectation_operator(P, R, np.ones(pi.shape, dtype=int) * pi.sum(axis=1, keepdims=True)
                                             / pi.shape[1], v, gamma)


def action_values_without_discount(P, R, v, gamma):
    return impl.action_values(P, R, v, 1)


def surrogate_grad_as_product_of_ratios(ratio_t, advantage_t):
    weight = math.prod(np.asarray(ratio_t)) * sum(np.asarray(advantage_t))
    return np.array([weight] * len(ratio_t), dtype=object)


# ------------------------------------------------------------------ which check each one must turn red


CASES: list[tuple[str, Callable, str, str]] = [
    ("baseline_advantages", baseline_added, "bandit-baseline-step", "exact"),
    ("baseline_advantages", baseline_ignored, "bandit-baseline-variance", "exact"),
    ("baseline_advantages", baseline_ignored, "bandit-baseline-variance", "montecarlo"),
    ("softmax_score", score_of_uniform_policy, "baseline-unbiased-three-lines", "property"),
    ("probability_ratios", log_ratio_not_exponentiated, "one-token-ratio", "exact"),
    ("probability_ratios", inverted_ratio, "hundred-token-ratio-products-as-printed", "exact"),
    ("probability_ratios", inverted_ratio, "hundred-token-ratio-products-span", "exact"),
    ("probability_ratios", inverted_ratio, "honest-transfer-multiplies-ratios", "exact"),
    ("surrogate_objective_grad", surrogate_grad_without_ratio, "stale-samples-need-importance-weights", "exact"),
    ("ppo_clip_objective", clip_on_log_ratio, "clipping-four-cases-numbers", "exact"),
    ("ppo_clip_objective", clip_on_log_ratio, "clipped-objective-definition", "property"),
    ("ppo_clip_objective_grad", symmetric_clip_grad, "clipping-never-blocks-fixing-a-mistake", "property"),
    ("ppo_clip_objective_grad", hard_stop_at_band_grad, "clipping-limits-moving-away", "counterexample"),
    ("ppo_clip_objective_grad", never_clipping_grad, "clipping-gives-up-unbiasedness", "counterexample"),
    ("kl_penalty_loss", kl_gradient_without_centring, "clip-near-old-kl-near-reference", "property"),
    ("kl_penalty_loss", kl_penalty_without_gradient, "clip-near-old-kl-near-reference", "counterexample"),
    ("softmax_score", score_sign_flipped, "bandit-reinforce-step", "exact-2"),
    ("softmax_score", score_sign_flipped, "reinforce-step-is-reward-scaled-sft-step", "property"),
    ("score_function_gradient", estimator_without_weights, "bandit-step-sign-follows-reward", "exact"),
    ("softmax_score", score_sign_flipped, "bandit-step-sign-follows-reward", "property"),
    ("discounted_returns", discounted_one_step_too_many, "discount-weight-examples", "exact"),
    ("discounted_returns", discounted_one_step_too_many, "return-is-discounted-sum", "property"),
    ("discounted_returns", immediate_reward_only, "undiscounted-answer-same-weight", "exact"),
    ("discounted_returns", undiscounted_returns, "discount-makes-infinite-return-finite", "property"),
    ("gae_advantages", gae_ignoring_lambda, "gae-mixes-horizons", "property"),
    ("value_iteration", one_backup_too_many, "value-iteration-two-states", "exact"),
    ("value_iteration", gauss_seidel_value_iteration, "value-iteration-is-synchronous", "exact"),
    ("value_iteration", gauss_seidel_value_iteration, "value-iteration-is-synchronous", "property"),
    ("policy_state_values", values_with_gamma_squared, "value-iteration-fixed-point", "exact"),
    ("bellman_optimality_operator", operator_without_discount, "bellman-operator-contracts", "property"),
    ("value_iteration", value_iteration_from_zeros, "bellman-operator-contracts", "property-2"),
    ("value_iteration", value_iteration_stopping_at_a_tolerance, "bellman-operator-contracts", "property-3"),
    ("policy_state_values", values_with_gamma_squared, "value-is-expected-discounted-return", "property"),
    ("policy_state_values", values_with_gamma_squared, "policy-evaluation-bellman-equation", "property"),
    ("td_errors", td_error_adding_value, "bellman-residual-is-advantage", "property"),
    ("td_errors", td_error_without_discount, "bellman-residual-is-advantage", "property-2"),
    ("baseline_advantages", baseline_added, "return-minus-value-estimates-advantage", "property"),
    ("discounted_returns", discounted_one_step_too_many, "return-minus-value-estimates-advantage", "counterexample"),
    ("leave_one_out_advantages", impl.group_centered_advantages, "batch-mean-baseline-variant", "exact"),
    ("group_centered_advantages", impl.leave_one_out_advantages, "batch-mean-baseline-shrinks-gradient", "exact"),
    ("baseline_advantages", baseline_ignored, "action-dependent-baseline-biases-bandit", "counterexample"),
    ("baseline_advantages", action_dependent_baseline.baseline_advantages, "baseline-unbiased-three-lines",
     "property-2"),
    ("surrogate_objective_grad", surrogate_grad_without_ratio, "stale-samples-need-importance-weights", "exact-2"),
    ("surrogate_objective", surrogate_as_running_product, "per-step-surrogate-is-another-objective", "property"),
    ("discounted_returns", immediate_reward_only, "undiscounted-answer-same-weight", "property"),
    ("gae_advantages", gae_lambda_as_discount, "gae-mixes-horizons", "property-2"),
    ("td_errors", td_error_without_discount, "value-head-learns-current-policy-values", "property"),
    ("reinforce_loss", loss_mean_over_padding.reinforce_loss, "reinforce-step-is-reward-scaled-sft-step", "property-2"),
    ("rloo_baseline", rloo_divided_by_group_size, "batch-mean-baseline-variant", "property"),
    ("ppo_clip_loss", log_ratio_clip_loss.ppo_clip_loss, "clipped-objective-definition", "property-2"),
    ("surrogate_loss", surrogate_inverse_ratio.surrogate_loss, "per-step-surrogate-is-another-objective", "property-2"),
    ("surrogate_loss", surrogate_with_log_ratio, "per-step-surrogate-is-another-objective", "property-3"),
    ("full_return_weights", full_return_without_discount, "log-derivative-trick", "property"),
    ("bellman_expectation_operator", expectation_operator_discounting_twice, "value-is-expected-discounted-return",
     "property-2"),
    ("bellman_expectation_operator", expectation_operator_with_uniform_policy, "policy-evaluation-bellman-equation",
     "property-2"),
    ("action_values", action_values_without_discount, "bellman-residual-is-advantage", "property-3"),
    ("baseline_advantages", action_dependent_baseline.baseline_advantages, "baseline-unbiased-three-lines",
     "property-3"),
    ("baseline_advantages", baseline_ignored, "action-dependent-baseline-biases-bandit", "counterexample-2"),
    ("surrogate_objective_grad", surrogate_grad_as_product_of_ratios, "clipping-gives-up-unbiasedness",
     "counterexample-2"),
    ("baseline_advantages", baseline_ignored, "baseline-can-raise-variance", "exact"),
    ("baseline_advantages", baseline_ignored, "baseline-can-raise-variance", "property"),
]


def _variant_name(function: str, wrong: Callable) -> str:
    return f"syllabus_variant_{function}_{wrong.__name__}"


@pytest.fixture(scope="module")
def catalogue() -> Iterator[Catalogue]:
    """The claims, and every variant importable by name for the length of this module's tests."""
    names = []
    for function, wrong, _, _ in CASES:
        name = _variant_name(function, wrong)
        module = types.ModuleType(name, f"impl with {function} replaced by {wrong.__name__}")
        module.__dict__.update({key: getattr(impl, key) for key in impl.__all__})
        module.__all__ = list(impl.__all__)
        setattr(module, function, wrong)
        sys.modules[name] = module
        names.append(name)
    yield course_catalogue()
    for name in names:
        sys.modules.pop(name, None)


def _result(catalogue: Catalogue, claim_id: str, check: str, implementation: str) -> CheckResult:
    entry = next(entry for entry in catalogue.entries if entry.id == claim_id)
    index = check_names(entry).index(check)
    verifier = catalogue.verifiers[entry.claim.checks[index].verifier]
    return run_check(entry, index, verifier, RunOptions(impl=implementation))


@pytest.mark.parametrize(("function", "wrong", "claim_id", "check"), CASES,
                         ids=[f"{claim}::{check}::{wrong.__name__}" for _, wrong, claim, check in CASES])
def test_check_rejects_the_wrong_function(catalogue, function, wrong, claim_id, check):
    result = _result(catalogue, claim_id, check, _variant_name(function, wrong))
    assert result.status == "failed" or (result.status == "error" and "outside the declared support" in result.error), (
        result.status, result.error)


def test_every_rejects_of_the_syllabus_names_a_check_here_or_a_formula():
    """Each check of the syllabus that calls impl is tested above with the wrong function its rejects names."""
    catalogue = course_catalogue()
    tested = {(claim, check) for _, _, claim, check in CASES}
    untested = []
    for entry in catalogue.in_file("claims/week16-syllabus.yaml"):
        for check, name in zip(entry.claim.checks, check_names(entry), strict=True):
            assert check.rejects, (entry.id, name)
            if catalogue.verifiers[check.verifier].uses and (entry.id, name) not in tested:
                untested.append((entry.id, name))
    assert not untested, f"checks that call impl but whose rejects no variant here tests: {untested}"


def test_an_in_place_sweep_passes_the_two_state_example_in_the_text_order(catalogue):
    """Why value-iteration-is-synchronous is needed: in the text's numbering Gauss-Seidel gives the same numbers."""
    gauss_seidel = _variant_name("value_iteration", gauss_seidel_value_iteration)
    assert _result(catalogue, "value-iteration-two-states", "exact", gauss_seidel).status == "passed"

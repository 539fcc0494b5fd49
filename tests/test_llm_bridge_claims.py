"""Each wrong implementation named in a ``rejects`` of lesson 4.5's claims turns its checks red.

Every variant is the reference with one function replaced, written into the test's own
directory (or a module of ``zoo/``) and run in-process against exactly the checks that name it.
The three training loops are ``impl``'s own ``train_gru_policy`` with one line changed, so a
loop that recomputes the old log-probabilities at every epoch, ignores the response mask or
uses group-mean advantages differs from the reference in that line only. The GRU experiments
(``gru-rloo-ppo-training::experiment``, ``closing-map-one-curve-not-stability::experiment``)
cost minutes per implementation and are left out; their ``rejects`` were run by hand. The full
profile's CartPole run (``closing-map-run-profiles::experiment-2``, a re-run of lesson 4.4's) is
left out too and was not run with its variant, the advantage's sign flipped, which the smoke
CartPole run turns red here.
"""

from __future__ import annotations

import inspect
import textwrap

import pytest
from conftest import course_catalogue

import impl
from claims_harness import RunOptions, lookup, run_check

HEADER = ("from __future__ import annotations\nimport numpy as np\nimport impl\nfrom impl import *  # noqa: F403\n"
          "from impl import __all__  # noqa: F401\n")


def _loop_with(old: str, new: str) -> str:
    """impl's train_gru_policy with one piece of its source replaced (which must occur exactly once)."""
    source = inspect.getsource(impl.gru_task.train_gru_policy)
    assert source.count(old) == 1, old
    return "from impl.gru_task import *  # noqa: F403\n" + source.replace(old, new)


VARIANTS: dict[str, tuple[str, list[str]]] = {
    "mask_eos_anywhere": ("""
        def response_mask(tokens, prompt_length, generated_length, eos_id):
            tokens = np.asarray(tokens)
            is_eos = tokens[:, 1:] == eos_id
            mask = impl.response_mask(tokens, prompt_length, generated_length, eos_id)
            return mask * (np.cumsum(is_eos, axis=1) - is_eos == 0)
        """, ["response-mask-and-causal-shift::property"]),
    "shifted_mask": ("""
        def response_mask(tokens, prompt_length, generated_length, eos_id):
            mask = impl.response_mask(tokens, prompt_length, generated_length, eos_id)
            shifted = np.zeros_like(mask)
            shifted[:, 1:] = mask[:, :-1]
            return shifted
        """, ["response-mask-and-causal-shift::exact", "response-mask-and-causal-shift::counterexample-2"]),
    "sampler_truncates_full_length": ("""
        def gru_sample(params, prompts, prompt_length, max_tokens, eos_id, pad_id, rng):
            tokens, generated, _ = impl.gru_sample(params, prompts, prompt_length, max_tokens, eos_id, pad_id, rng)
            return tokens, generated, generated == max_tokens
        """, ["eos-and-truncation-differ::property", "closing-map-termination-truncation::property"]),
    "checker_pays_cut_answers": ("""
        def verifiable_reward(task, string, answer, truncated):
            return impl.verifiable_reward(task, string, (*answer, 0) if truncated else answer, False)
        """, ["eos-and-truncation-differ::property"]),
    "padded_answer_mean": ("""
        def token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation):
            if aggregation != "answer_mean":
                return impl.token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation)
            objective, gradient = impl.token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon,
                                                               "answer_sum")
            width = np.shape(mask_t)[1]
            return objective / width, gradient / width
        """, ["aggregation-unit-changes-objective::counterexample",
              "token-aggregation-units-are-their-definitions::property-2"]),
    "padded_token_mean": ("""
        def token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation):
            if aggregation != "token_mean":
                return impl.token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation)
            objective, gradient = impl.token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon,
                                                               "answer_sum")
            width = np.shape(mask_t)[1]
            return objective / width, gradient / width
        """, ["token-aggregation-units-are-their-definitions::property"]),
    "unaveraged_answer_sum": ("""
        def token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation):
            objective, gradient = impl.token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon,
                                                               aggregation)
            scale = np.shape(mask_t)[0] if aggregation == "answer_sum" else 1
            return objective * scale, gradient * scale
        """, ["token-aggregation-units-are-their-definitions::property-3"]),
    "clip_without_min": ("""
        def token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation):
            weights = impl.aggregation_weights(mask_t, aggregation)
            ratio = np.exp(np.where(weights > 0, np.asarray(log_pi_t) - np.asarray(log_pi_old_t), 0.0))
            a_t = np.broadcast_to(np.asarray(a_t, dtype=float), ratio.shape)
            inside = (ratio >= 1 - epsilon) & (ratio <= 1 + epsilon)
            clipped = np.clip(ratio, 1 - epsilon, 1 + epsilon) * a_t
            return float((weights * clipped).sum()), np.where(inside, weights * ratio * a_t, 0.0)
        """, ["closing-map-chain-ppo-pessimistic::property",
              "token-aggregation-units-are-their-definitions::property"]),
    "never_clip": ("""
        def token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation):
            return impl.token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, 1e9, aggregation)
        """, ["closing-map-clipping-not-trust-region::counterexample"]),
    "flipped_kl_reward": ("""
        def kl_penalized_rewards(r, log_pi_t, log_ref_t, mask_t, beta):
            return impl.kl_penalized_rewards(r, log_pi_t, log_ref_t, mask_t, -beta)
        """, ["kl-penalty-counted-twice::counterexample", "kl-penalty-counted-twice::property"]),
    "kl_gradient_without_mean_term": ("""
        def kl_penalty_loss(logits_t, ref_logits_t, mask_t, beta, aggregation):
            value, _ = impl.kl_penalty_loss(logits_t, ref_logits_t, mask_t, beta, aggregation)
            weights = impl.aggregation_weights(mask_t, aggregation)
            log_ratio = impl.log_softmax(logits_t) - impl.log_softmax(ref_logits_t)
            return value, beta * weights[..., None] * impl.softmax(logits_t) * log_ratio
        """, ["kl-penalty-counted-twice::property"]),
    "rloo_over_group_size": ("""
        def rloo_advantages(r_i, group_size):
            groups = np.asarray(r_i).reshape(-1, group_size)
            return (groups - (groups.sum(axis=1, keepdims=True) - groups) / group_size).reshape(-1)
        """, ["rloo-sequence-unbiased::property", "equal-rewards-no-group-signal::property",
              "equal-rewards-no-group-signal::counterexample-2"]),
    "rloo_over_batch": ("""
        def rloo_advantages(r_i, group_size):
            rewards = np.asarray(r_i)
            return rewards - (rewards.sum() - rewards) / (len(rewards) - 1)
        """, ["rloo-invariant-to-prompt-offset::property"]),
    "unguarded_grpo": ("""
        def grpo_advantages(r_i, group_size, epsilon):
            groups = np.asarray(r_i, dtype=float).reshape(-1, group_size)
            centred = groups - groups.mean(axis=1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                return (centred / groups.std(axis=1, keepdims=True)).reshape(-1)
        """, ["equal-rewards-no-group-signal::counterexample"]),
    "grpo_sample_std": ("""
        def grpo_advantages(r_i, group_size, epsilon):
            groups = np.asarray(r_i, dtype=float).reshape(-1, group_size)
            centred = groups - groups.mean(axis=1, keepdims=True)
            return (centred / (groups.std(axis=1, ddof=1, keepdims=True) + epsilon)).reshape(-1)
        """, ["grpo-advantage-is-scaled-loo::property"]),
    "grpo_batch_std": ("""
        def grpo_advantages(r_i, group_size, epsilon):
            rewards = np.asarray(r_i, dtype=float)
            groups = rewards.reshape(-1, group_size)
            return (groups - groups.mean(axis=1, keepdims=True)).reshape(-1) / (rewards.std() + epsilon)
        """, ["grpo-advantage-is-scaled-loo::counterexample"]),
    "vjp_on_own_position": ("""
        def token_log_probs_vjp(logits, tokens, d_log_probs):
            d_logits = impl.token_log_probs_vjp(logits, tokens, d_log_probs)
            return np.roll(d_logits, 1, axis=1)
        """, ["broadcast-advantage-gradient::property"]),
    "reinforce_mean_over_steps": ("""
        def reinforce_gradient(w_t, score_t):
            return impl.reinforce_gradient(w_t, score_t) / np.shape(w_t)[0]
        """, ["closing-map-chain-reinforce-noisy::exact"]),
    "transition_term_in_score": ("""
        def trajectory_score(mdp, theta, s_t, a_t):
            return impl.trajectory_score(mdp._replace(P_alt=np.full_like(mdp.P, 0.5)), theta, s_t, a_t)
        """, ["closing-map-environment-still-matters::counterexample"]),
    "trajectory_score_without_last_step": ("""
        def trajectory_score(mdp, theta, s_t, a_t):
            s_t, a_t = np.asarray(s_t), np.asarray(a_t)
            if len(a_t) == 1:
                return 0 * impl.trajectory_score(mdp, theta, s_t, a_t)
            return impl.trajectory_score(mdp, theta, s_t[:-1], a_t[:-1])
        """, ["closing-map-chain-factorisation::property"]),
    "optimal_baseline_as_value": ("""
        def optimal_scalar_baseline(pi_a, q_a, score_sq_norm_a):
            return (np.asarray(pi_a) * np.asarray(q_a)).sum(axis=-1)
        """, ["closing-map-value-not-optimal-baseline::exact"]),
    "centred_as_leave_one_out": ("""
        group_centered_advantages = leave_one_out_advantages
        """, ["closing-map-group-mean-factor::exact"]),
    "loop_recomputes_old_log_probs": (_loop_with(
        "        for epoch in range(ppo_epochs):\n",
        "        for epoch in range(ppo_epochs):\n"
        "            log_pi_old = ops.token_log_probs(ops.gru_forward(params, tokens)[0], tokens)\n"),
        ["gru-rloo-ppo-training::property"]),
    "loop_ignores_mask": (_loop_with(
        "mask = ops.response_mask(tokens, lengths, generated, EOS)",
        "mask = np.ones((len(tokens), tokens.shape[1] - 1))"),
        ["gru-rloo-ppo-training::property"]),
    "loop_with_group_mean": (_loop_with(
        "advantages = ops.rloo_advantages(rewards, group_size)",
        "advantages = rewards - rewards.reshape(-1, group_size).mean(axis=1).repeat(group_size)"),
        ["gru-rloo-ppo-training::property"]),
}

# Variants of the zoo named in the claims' rejects, with the checks they must turn red.
ZOO: dict[str, list[str]] = {
    "mask_without_eos": ["sequence-log-prob-chain-rule::exact", "response-mask-and-causal-shift::exact",
                         "response-mask-and-causal-shift::property", "closing-map-correct-mask::exact"],
    "mask_with_prompt": ["response-mask-and-causal-shift::exact", "response-mask-and-causal-shift::counterexample",
                         "closing-map-correct-mask::property", "closing-map-no-token-credit::property"],
    "shifted_labels": ["sequence-log-prob-chain-rule::property"],
    "clipped_ratio_product": ["token-clip-is-not-product-clip::counterexample"],
    "rloo_as_group_mean": ["rloo-sequence-unbiased::exact", "rloo-sequence-unbiased::property",
                           "rloo-sequence-unbiased::property-2", "closing-map-group-mean-factor::exact-2"],
    "flipped_ppo_advantage": ["closing-map-clipping-not-trust-region::counterexample-2",
                              "closing-map-run-profiles::experiment"],
    "dropped_discount_weight": ["closing-map-dropping-discount::counterexample",
                                "closing-map-chain-causality::property"],
    "single_done_flag": ["closing-map-termination-truncation::exact"],
}


def _labelled_checks() -> dict[str, tuple[object, int]]:
    """'claim::kind' (the second check of a kind is 'kind-2', as pytest names it) -> (entry, index)."""
    labelled = {}
    for entry in course_catalogue().entries:
        if entry.claim is None or not entry.file.endswith("4.5-llm-bridge.yaml"):
            continue
        seen: dict[str, int] = {}
        for index, check in enumerate(entry.claim.checks):
            seen[check.kind] = seen.get(check.kind, 0) + 1
            label = check.kind if seen[check.kind] == 1 else f"{check.kind}-{seen[check.kind]}"
            labelled[f"{entry.id}::{label}"] = (entry, index)
    return labelled


def _statuses(implementation: str, checks: list[str]) -> dict[str, str]:
    labelled = _labelled_checks()
    statuses = {}
    for name in checks:
        entry, index = labelled[name]
        check = entry.claim.checks[index]
        statuses[name] = run_check(entry, index, lookup(check.verifier), RunOptions(impl=implementation)).status
    return statuses


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_named_wrong_implementation_fails_its_checks(tmp_path, monkeypatch, variant):
    source, must_fail = VARIANTS[variant]
    module = f"wrong_llm_{variant}"
    (tmp_path / f"{module}.py").write_text(HEADER + textwrap.dedent(source), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    # "failed", not "error": the variant runs and the check finds the bug (an error could be a typo here).
    assert _statuses(module, must_fail) == dict.fromkeys(must_fail, "failed")


@pytest.mark.parametrize("variant", sorted(ZOO))
def test_the_named_zoo_variant_fails_its_checks(variant):
    assert _statuses(f"zoo.{variant}", ZOO[variant]) == dict.fromkeys(ZOO[variant], "failed")

"""The bug zoo: implementations that each carry one pitfall the module warns about, and the claims that catch them.

Every variant ``zoo.<name>`` is the reference implementation ``impl`` with ONE function replaced
by a realistic wrong version; its docstring names the pitfall and the module step that warns
about it. ``VARIANTS[name].caught_by`` lists the claims that must fail (or error) when the claims
run against it (``--impl zoo.<name>``, smoke profile, seed 0) and pass against ``impl``;
``zoo._run.run_zoo`` runs the matrix.

A claim that fails only because the variant is inconsistent with the rest of ``impl`` (say, a
loop of ``impl`` that still calls ``impl``'s own version of the replaced function) is left out of
``caught_by``: it would not catch the same bug in a student's module whose loop uses its own
functions.

Some pitfalls are a library's idiom: ``zeroed_truncation_bootstrap`` is CleanRL's single done
flag on the contract's arguments. Its correct counterpart, Stable-Baselines3's idiom, is not a
variant (it must pass): it is ``examples.alternatives.sb3_gae`` (see ``examples/README.md``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    """One implementation of the zoo.

    Attributes:
      pitfall: what is wrong, in a few words.
      step: the module step that warns about it, e.g. "4.3.4".
      caught_by: ids of the claims that must fail or error against the variant.
    """

    pitfall: str
    step: str
    caught_by: tuple[str, ...]


VARIANTS: dict[str, Variant] = {
    "single_done_flag": Variant(
        "one done flag (terminated) as GAE's trace cut and bootstrap mask", "4.3.4",
        ("gae-recursion-equals-sum", "gae-mixes-n-step-estimates", "gae-four-events-table",
         "single-done-flag-biases-targets", "batch-gae-is-truncated-estimator", "closing-map-termination-truncation")),
    "zeroed_truncation_bootstrap": Variant(
        "bootstrap dropped at a time-limit truncation (CleanRL's done = terminated or truncated)", "4.3.4",
        ("gae-recursion-equals-sum", "gae-lambda-zero-is-td-error", "gae-mixes-n-step-estimates",
         "gae-four-events-table", "single-done-flag-biases-targets", "streaming-gae-matches-unsplit",
         "batch-gae-is-truncated-estimator", "closing-map-termination-truncation")),
    "trace_across_reset": Variant(
        "GAE recursion carried across episode resets", "4.3.4",
        ("gae-recursion-equals-sum", "gae-mixes-n-step-estimates", "gae-four-events-table",
         "single-done-flag-biases-targets", "batch-gae-is-truncated-estimator", "closing-map-termination-truncation")),
    "group_mean_as_loo": Variant(
        "group mean used where the leave-one-out baseline is claimed", "4.2.4",
        ("loo-identity", "bernoulli-group-estimators", "loo-unbiased", "no-universal-variance-ordering",
         "group-mean-variance-fraction-of-loo", "loo-needs-independent-answers", "loo-biased-by-shared-reward",
         "batch-mean-baseline-variant")),
    "rloo_as_group_mean": Variant(
        "RLOO sequence advantages computed with the group mean", "4.5.2",
        ("rloo-sequence-unbiased", "grpo-advantage-is-scaled-loo", "closing-map-group-mean-factor")),
    "dropped_discount_weight": Variant(
        "γ^t dropped from the gradient of the literal discounted objective", "4.1.4",
        ("reward-to-go-definition", "reward-to-go-same-expectation", "literal-discounted-objective-gradient",
         "dropping-discount-factor-changes-direction", "reinforce-unbiased-for-chosen-objective")),
    "action_dependent_baseline": Variant(
        "baseline of the next state b(s_{t+1}), which depends on the action", "4.2.1",
        ("state-baseline-unbiased", "action-dependent-baseline-biases",
         "action-dependent-control-variate-compensated")),
    "shifted_labels": Variant(
        "labels not shifted: the logits at position k score token k", "4.5.1",
        ("sequence-log-prob-chain-rule", "response-mask-and-causal-shift")),
    "mask_without_eos": Variant(
        "generated EOS excluded from the response mask", "4.5.1",
        ("sequence-log-prob-chain-rule", "response-mask-and-causal-shift", "eos-and-truncation-differ",
         "broadcast-advantage-gradient", "closing-map-termination-truncation", "closing-map-correct-mask",
         "closing-map-no-token-credit")),
    "mask_with_prompt": Variant(
        "prompt tokens included in the response mask", "4.5.1",
        ("sequence-log-prob-chain-rule", "response-mask-and-causal-shift", "eos-and-truncation-differ",
         "broadcast-advantage-gradient", "closing-map-termination-truncation", "closing-map-correct-mask",
         "closing-map-no-token-credit")),
    "clipped_ratio_product": Variant(
        "clip applied to the product of an answer's token ratios", "4.5.1",
        ("token-clip-is-not-product-clip", "aggregation-unit-changes-objective", "broadcast-advantage-gradient",
         "closing-map-no-token-credit", "token-aggregation-units-are-their-definitions",
         "closing-map-chain-ppo-pessimistic")),
    "normalised_value_targets": Variant(
        "value targets built from normalised advantages", "4.3.3",
        ("value-targets-ignore-normalisation", "single-done-flag-biases-targets")),
    "k3_as_k1": Variant(
        "k1 = -log r reported as the non-negative KL diagnostic k3", "4.4.4",
        ("k3-nonnegative", "k3-unbiased-for-kl")),
    "outside_as_clip_fraction": Variant(
        "fraction of ratios outside [1-ε, 1+ε] reported as the active-clip fraction", "4.4.3",
        ("clip-fraction-differs-from-active-fraction",)),
    "flipped_ppo_advantage": Variant(
        "advantage sign flipped in the gradient of PPO's clipped objective", "4.4.3",
        ("surrogate-gradient-equals-policy-gradient-at-old", "ppo-keeps-neither-ratios-nor-kl-bounded",
         "clipping-four-cases", "ppo-total-loss", "ppo-trains-cartpole", "closing-map-clipping-not-trust-region",
         "clipping-four-cases-numbers", "clipping-never-blocks-fixing-a-mistake", "clipped-objective-definition",
         "clipping-limits-moving-away", "clipping-gives-up-unbiasedness", "clip-near-old-kl-near-reference")),
    "critic_gradient_in_actor": Variant(
        "actor loss not stop-gradiented: its gradient reaches the critic's step", "4.3.1",
        ("value-targets-ignore-normalisation", "actor-treats-advantages-as-constants")),
    "surrogate_inverse_ratio": Variant(
        "surrogate loss whose gradient is Â / r, right only at θ_old", "4.4.1",
        ("surrogate-gradient-equals-policy-gradient-at-old", "per-step-surrogate-is-another-objective")),
    "loss_mean_over_padding": Variant(
        "REINFORCE loss averaged over every token, padding included", "4.5.1",
        ("reinforce-step-is-reward-scaled-sft-step", "surrogate-gradient-equals-policy-gradient-at-old",
         "per-step-surrogate-is-another-objective")),
    "clip_on_log_ratio": Variant(
        "PPO's clip applied to the log-ratio instead of the ratio", "4.4.2",
        ("clipped-objective-definition",)),
    "ascending_clip_loss": Variant(
        "sign of PPO's clipped loss flipped", "4.4.2",
        ("clipped-objective-definition", "surrogate-gradient-equals-policy-gradient-at-old",
         "per-step-surrogate-is-another-objective")),
}

"""The bug zoo in PyTorch: the week-16 loss module with one classic bug of training code each.

These are the bugs NumPy cannot show, because they live in the graph: a constant left attached, a
mask forgotten in a mean, a clip in the wrong space, a sign. Every variant ``zoo.pytorch.<name>``
is ``examples.torch_rl`` with ONE function replaced; ``TORCH_VARIANTS[name].caught_by`` lists the
claims that must fail against it (``--claims-impl zoo.pytorch.<name>``, smoke profile, seed 0),
each with a message that names the function. They need the extra: ``pip install -e '.[torch]'``.
"""

from __future__ import annotations

from zoo import Variant

TORCH_VARIANTS: dict[str, Variant] = {
    "logp_old_attached": Variant(
        "logp_old not detached in the ratio: at θ_old the ratio is a constant 1 and the gradient vanishes", "4.4.1",
        ("surrogate-gradient-equals-policy-gradient-at-old", "per-step-surrogate-is-another-objective")),
    "advantage_attached": Variant(
        "advantage not detached: the policy loss's gradient reaches the critic", "4.3.1",
        ("reinforce-step-is-reward-scaled-sft-step", "surrogate-gradient-equals-policy-gradient-at-old",
         "per-step-surrogate-is-another-objective")),
    "mean_over_padding": Variant(
        "clipped loss averaged over every token, padding included", "4.5.1",
        ("clipped-objective-definition", "surrogate-gradient-equals-policy-gradient-at-old",
         "per-step-surrogate-is-another-objective")),
    "clip_on_log_ratio": Variant(
        "clip applied to the log-ratio instead of the ratio", "4.4.2",
        ("clipped-objective-definition",)),
    "ascending_surrogate": Variant(
        "sign of the surrogate loss flipped: the optimiser ascends it", "4.4.1",
        ("surrogate-gradient-equals-policy-gradient-at-old", "per-step-surrogate-is-another-objective")),
}

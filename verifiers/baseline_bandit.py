"""A constant baseline in the three-armed bandit of the week-16 syllabus (step 2).

The policy is softmax(θ) at θ = 0, uniform over the arms; the single-sample gradient estimate
for arm a is g(a) = (R(a) - b)(e_a - π). Its "total variance" is the trace of its covariance,
E||g - E g||^2, the sum of the per-coordinate variances.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness import Context, verifier
from verifiers._numeric import as_written
from verifiers._sampling import categorical
from verifiers.baseline_state import exact_softmax_scores, softmax_score_agrees


class UniformBandit(BaseModel):
    """Rewards of the arms, the constant baseline and the arm that was drawn."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rewards: list[float] = Field(min_length=2, description="R(a) per arm")
    baseline: float = Field(description="the constant b subtracted from every reward")
    drawn_arm: int = Field(ge=0, description="index of the arm whose update is reported")

    @model_validator(mode="after")
    def _arm_exists(self) -> UniformBandit:
        if self.drawn_arm >= len(self.rewards):
            raise ValueError(f"drawn_arm {self.drawn_arm} is not one of the {len(self.rewards)} arms")
        return self


_USES = ("baseline_advantages", "score_function_gradient")


def _single_sample_gradients(ctx: Context, reward_a: np.ndarray, baseline: object, scores_a: np.ndarray
                             ) -> tuple[np.ndarray, np.ndarray]:
    """The advantage and the one-sample estimate (R(a) - b) score(a) of every row, through impl."""
    advantages = ctx.impl.baseline_advantages(reward_a, baseline)
    return advantages, ctx.impl.score_function_gradient(advantages[:, None], scores_a[:, None, :])


@verifier("baseline_bandit.step_and_variance_exact", kind="exact", params=UniformBandit, uses=(*_USES, "softmax_score"))
def step_and_variance_exact(ctx: Context) -> dict[str, object]:
    """Every arm's update without and with the baseline, the mean update and the total variance,
    by exact enumeration of the arms (fractions; the exact scores e_a - π are checked against
    impl's softmax score). ``mean_reward`` is E_π[R], the policy's mean reward."""
    arms = len(ctx.params.rewards)
    pi = np.array([Fraction(1, arms)] * arms, dtype=object)
    reward_a = np.array([as_written(r) for r in ctx.params.rewards], dtype=object)
    scores_a = exact_softmax_scores(pi)
    observed: dict[str, object] = {"softmax_score_agrees": softmax_score_agrees(ctx, pi, scores_a),
                                   "mean_reward": pi @ reward_a}
    variances = {}
    for label, baseline in (("no_baseline", Fraction(0)), ("with_baseline", as_written(ctx.params.baseline))):
        advantages, gradients = _single_sample_gradients(ctx, reward_a, baseline, scores_a)
        mean = pi @ gradients
        variances[label] = pi @ (gradients * gradients).sum(axis=1) - mean @ mean
        observed[f"multiplier_{label}"] = advantages[ctx.params.drawn_arm]
        observed[f"step_{label}"] = list(gradients[ctx.params.drawn_arm])
        observed[f"mean_gradient_{label}"] = list(mean)
        observed[f"total_variance_{label}"] = variances[label]
    observed["variance_ratio"] = variances["no_baseline"] / variances["with_baseline"]
    return observed


@verifier("baseline_bandit.variance_montecarlo", kind="montecarlo",
          params=UniformBandit, uses=(*_USES, "softmax", "softmax_score"))
def variance_montecarlo(ctx: Context) -> dict[str, object]:
    """The total variance estimated from independent pairs: E||g - g'||^2 / 2 = tr Cov(g).

    For independent copies g, g' the cross term vanishes in expectation, so ||g - g'||^2 / 2 is an
    unbiased one-pair estimate. It lies in [0, 2 max_a ||g(a)||^2], since ||g - g'|| <= ||g|| + ||g'||,
    with ||g(a)||^2 = (R(a) - b)^2 (1 - 2 π_a + ||π||^2): a bound read off the rewards and the
    policy. Arms are drawn from impl's softmax at θ = 0, and every estimate goes through impl.
    """
    rewards = np.array(ctx.params.rewards)
    logits = np.zeros(len(rewards))
    pi = ctx.impl.softmax(logits)
    largest_squared_score = float((1 - 2 * pi + pi @ pi).max())
    baselines = {"no_baseline": 0.0, "with_baseline": ctx.params.baseline}
    supports = {label: (0.0, 2 * float(((rewards - b) ** 2).max()) * largest_squared_score)
                for label, b in baselines.items()}
    n = ctx.samples_needed(max(supports.values(), key=lambda support: support[1]))
    arms = categorical(ctx.rng, pi, 2 * n)
    scores = ctx.impl.softmax_score(np.broadcast_to(logits, (2 * n, len(rewards))), arms)
    observed = {}
    for label, b in baselines.items():
        _, gradients = _single_sample_gradients(ctx, rewards[arms], b, scores)
        difference = gradients[:n] - gradients[n:]
        observed[f"total_variance_{label}"] = ctx.mean_estimate((difference * difference).sum(axis=1) / 2,
                                                                supports[label], "empirical-bernstein")
    return observed

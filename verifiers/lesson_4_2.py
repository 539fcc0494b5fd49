"""Lesson 4.2's statements that the checks of the other baseline verifiers leave open.

* 4.2.1: with b(s) = V(s) the coefficient of the score is exactly the advantage Q(s, a) - V(s);
* 4.2.5: the order of the estimators' variances depends on the parameterisation too: one policy,
  one reward table and one group size, with the order of two estimators' total variances
  reversed between the logits and logits scaled per coordinate.

References are the verifier's own and exact (fractions); the implementation is reached only
through ``ctx.impl``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness import Context, check_property, verifier

# --------------------------------------------------------------------------- 4.2.1

_values = st.fractions(min_value=-5, max_value=5, max_denominator=20)
_states = st.integers(min_value=1, max_value=8).flatmap(lambda k: st.tuples(
    st.lists(st.integers(min_value=1, max_value=20), min_size=k, max_size=k),
    st.lists(_values, min_size=k, max_size=k)))


@verifier("lesson_4_2.advantage_coefficient_property", kind="property",
          uses=("state_value_from_q", "baseline_advantages"))
def advantage_coefficient_property(ctx: Context) -> dict[str, object]:
    """For random exact policies and action values at one state, the coefficient impl gives the score
    with the baseline b(s) = V(s) (its own V) is Q(a) - Σ_b π(b) Q(b) for every action, exactly, and it
    is positive exactly for the actions whose Q(a) exceeds that mean."""

    def is_advantage(case: tuple[list[int], list[Fraction]]) -> None:
        weights, values = case
        pi = np.array([Fraction(w, sum(weights)) for w in weights], dtype=object)
        q = np.array(values, dtype=object)
        coefficient = ctx.impl.baseline_advantages(q, ctx.impl.state_value_from_q(pi, q))
        mean = sum(p * v for p, v in zip(pi, q, strict=True))
        assert list(coefficient) == [v - mean for v in q], (list(coefficient), mean)
        assert [c > 0 for c in coefficient] == [v > mean for v in q], list(coefficient)

    return check_property(ctx, is_advantage, _states)


# --------------------------------------------------------------------------- 4.2.5


class ScaledGroups(BaseModel):
    """A softmax policy over K answers (exact), a reward per answer, the group size, and the per-logit
    scales c of a second parameterisation π = softmax(c ⊙ θ)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    pi: list[str] = Field(min_length=2, max_length=4, description="π per answer, exact fractions summing to 1")
    rewards: list[str] = Field(min_length=2, max_length=4, description="reward per answer, exact")
    group_size: int = Field(ge=2, le=4, description="answers per group, G")
    logit_scales: list[int] = Field(min_length=2, max_length=4, description="c, one positive integer per logit")

    @model_validator(mode="after")
    def _consistent(self) -> ScaledGroups:
        probabilities = [Fraction(p) for p in self.pi]
        if any(p <= 0 for p in probabilities) or sum(probabilities) != 1:
            raise ValueError(f"pi must be positive and sum to exactly 1, got {self.pi}")
        if not len(self.pi) == len(self.rewards) == len(self.logit_scales) or min(self.logit_scales) <= 0:
            raise ValueError("one reward and one positive scale per answer")
        return self


@verifier("lesson_4_2.group_variances_by_parameterisation_exact", kind=("exact", "counterexample"),
          params=ScaledGroups,
          uses=("group_centered_advantages", "leave_one_out_advantages", "score_function_gradient"))
def group_variances_by_parameterisation_exact(ctx: Context) -> dict[str, object]:
    """Exact total variances E||ĝ - E ĝ||² of the three group estimators (1/G) Σ_i A_i S_i over all K^G groups
    of independent answers, in two parameterisations of the same policy.

    Logits: S_i = e_{y_i} - π. Scaled logits θ with π = softmax(c ⊙ θ): the chain rule multiplies
    coordinate k of the score by c_k. The advantages (none, group mean, leave-one-out) and the
    estimates go through impl; the scores are written here. Reported per parameterisation: the total
    variance without a baseline minus that of leave-one-out, and minus that of the group mean.
    """
    params = ctx.params
    pi = np.array([Fraction(p) for p in params.pi], dtype=object)
    rewards = np.array([Fraction(r) for r in params.rewards], dtype=object)
    categories = len(pi)
    groups = np.array(list(itertools.product(range(categories), repeat=params.group_size)))
    probability = np.prod(pi[groups], axis=1)
    group_rewards = rewards[groups]
    advantages = {"no_baseline": group_rewards,
                  "group_mean": ctx.impl.group_centered_advantages(group_rewards),
                  "leave_one_out": ctx.impl.leave_one_out_advantages(group_rewards)}
    logit_scores = np.array([[Fraction(int(a == k)) - pi[k] for k in range(categories)] for a in range(categories)],
                            dtype=object)
    observed: dict[str, object] = {"total_probability": probability.sum()}
    for name, scales in (("logits", [1] * categories), ("scaled_logits", params.logit_scales)):
        scores = (logit_scores * np.array(scales, dtype=object))[groups]
        variance = {}
        for estimator, values in advantages.items():
            estimates = ctx.impl.score_function_gradient(values, scores)
            mean = probability @ estimates
            variance[estimator] = sum(probability @ (estimates[:, k] - mean[k]) ** 2 for k in range(categories))
        observed[f"no_baseline_minus_leave_one_out_{name}"] = variance["no_baseline"] - variance["leave_one_out"]
        observed[f"no_baseline_minus_group_mean_{name}"] = variance["no_baseline"] - variance["group_mean"]
    return observed

"""When the leave-one-out baseline stops being unbiased: the conditions of module step 4.2.4.

Both witnesses use the one-step Bernoulli policy of step 4.2.5 (A ~ Bernoulli(p), score S = A - p
with respect to the logit) and enumerate every group of G answers in rational arithmetic; the
advantages and the group estimate (1/G) Σ_i A_i S_i go through impl. What changes is one of
RLOO's conditions:

* the answers of a group are not independent: a "sticky" sampler repeats the previous answer
  with probability ρ and draws afresh otherwise, which keeps every answer's marginal equal to π;
* the rewards share a component that depends on the current answer: every answer of the group
  gets, besides its own reward r(Y_i), the same bonus λ times the group's share of successes;
* the answers do not all come from one fixed policy: the first few of every group come from another
  (a stale) policy, while every score is taken for the current one.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from pydantic import Field, field_validator, model_validator

from claims_harness import Context, NoParams, reach, verifier
from verifiers._numeric import as_written
from verifiers._reach import reach_bandit

_USES = ("bernoulli_logit_score", "leave_one_out_advantages", "score_function_gradient")
# The two actions of the one-step Bernoulli policy: A = 1 with probability p, A = 0 otherwise.
_ACTIONS = (0, 1)



class _BernoulliGroups(NoParams):
    p: float = Field(gt=0, lt=1, description="probability of action 1")
    reward_success: float = Field(description="r(1), the answer's own reward for action 1")
    reward_failure: float = Field(description="r(0), the answer's own reward for action 0")
    group_size: int = Field(ge=2, le=10, description="answers per group, G")


class DependentGroups(_BernoulliGroups):
    """The Bernoulli policy, its rewards, G, and how often the sampler repeats the previous answer."""

    stickiness: str = Field(description="ρ, an exact fraction in [0, 1) such as '1/2'")

    @field_validator("stickiness")
    @classmethod
    def _a_probability(cls, value: str) -> str:
        if not 0 <= Fraction(value) < 1:
            raise ValueError(f"stickiness must lie in [0, 1), got {value}")
        return value


class SharedBonusGroups(_BernoulliGroups):
    """The Bernoulli policy, its rewards, G, and the weight of the bonus every answer of a group shares."""

    bonus: float = Field(description="λ: every answer's reward gets λ times the group's share of successes")


def _groups(group_size: int) -> np.ndarray:
    return np.array(list(itertools.product(_ACTIONS, repeat=group_size)), dtype=object)


def _estimates(ctx: Context, groups: np.ndarray, p: Fraction, rewards: np.ndarray) -> dict[str, np.ndarray]:
    # Sampled rewards, and for leave-one-out a baseline from the same group: estimates of the advantage.
    reach(advantages="estimated")
    score = ctx.impl.bernoulli_logit_score(groups, p)
    return {"no_baseline": ctx.impl.score_function_gradient(rewards, score),
            "leave_one_out": ctx.impl.score_function_gradient(ctx.impl.leave_one_out_advantages(rewards), score)}


def _single_answer_gradient(p: Fraction, success: Fraction, failure: Fraction) -> Fraction:
    """∂/∂z E[r(A)] = Σ_a π(a) r(a) ∂ log π(a)/∂z, by enumerating the single action."""
    return p * success * (1 - p) + (1 - p) * failure * (0 - p)


def _sticky_probabilities(groups: np.ndarray, p: Fraction, stickiness: Fraction) -> np.ndarray:
    """P(y_1, ..., y_G) = π(y_1) Π_t [ρ [y_t = y_{t-1}] + (1 - ρ) π(y_t)]."""
    pi = (1 - p, p)
    probabilities = []
    for group in groups:
        probability = pi[group[0]]
        for previous, current in itertools.pairwise(group):
            probability *= stickiness * (current == previous) + (1 - stickiness) * pi[current]
        probabilities.append(probability)
    return np.array(probabilities, dtype=object)


@verifier(kind="counterexample", params=DependentGroups, uses=_USES)
def dependent_answers_exact(ctx: Context) -> dict[str, object]:
    """Exact expectations of the no-baseline and leave-one-out estimates, each divided by the gradient
    of one answer's expected reward, for answers from the sticky sampler and (``*_independent``) for
    independent answers (ρ = 0).

    Every answer's marginal is π (``marginals_equal_policy``), so E[R_i S_i] is the gradient and the
    estimator without a baseline stays unbiased; the leave-one-out baseline now correlates with the
    current answer, E[R_j S_i] = (r(1) - r(0)) Cov(Y_i, Y_j) = ρ^|i-j| g, and the estimate loses
    the average of ρ^|i-j| over the pairs i ≠ j.
    """
    params = ctx.params
    p, success, failure = as_written(params.p), as_written(params.reward_success), as_written(params.reward_failure)
    groups = _groups(params.group_size)
    rewards = np.where(groups == 1, success, failure).astype(object)
    gradient = _single_answer_gradient(p, success, failure)
    estimates = _estimates(ctx, groups, p, rewards)
    observed: dict[str, object] = {}
    for suffix, stickiness in (("", Fraction(params.stickiness)), ("_independent", Fraction(0))):
        probability = _sticky_probabilities(groups, p, stickiness)
        # Every answer's marginal is the policy whose score is taken (marginals_equal_policy checks it).
        reach_bandit(len(_ACTIONS), group=groups.shape[1], data="current", tokens=1)
        observed[f"total_probability{suffix}"] = probability.sum()
        for name, values in estimates.items():
            observed[f"{name}_ratio{suffix}"] = (probability @ values) / gradient
        if not suffix:
            observed["marginals_equal_policy"] = all(probability @ groups[:, t] == p for t in range(params.group_size))
    return observed


@verifier(kind="counterexample", params=SharedBonusGroups, uses=_USES)
def shared_reward_exact(ctx: Context) -> dict[str, object]:
    """Independent answers whose rewards R_i = r(Y_i) + λ (1/G) Σ_j Y_j share a group bonus.

    The reference is the gradient of the expected reward of an answer, J = E[(1/G) Σ_i R_i], computed
    by enumerating every group with the group's score Σ_k (Y_k - p), the verifier's own (the answers
    are independent, so the log-probability of a group is the sum of its answers'). Reported: the
    leave-one-out expectation divided by that gradient, with the bonus and (``*_without_bonus``)
    with λ = 0, and the leave-one-out expectation minus the gradient of the answers' own rewards r
    alone: the shared bonus appears in every R_j, so it cancels from every advantage and its
    gradient is lost.
    """
    params = ctx.params
    p, success, failure = as_written(params.p), as_written(params.reward_success), as_written(params.reward_failure)
    groups = _groups(params.group_size)
    successes = groups.sum(axis=1)
    probability = np.array([p**k * (1 - p) ** (params.group_size - k) for k in successes], dtype=object)
    group_score = (groups - p).sum(axis=1)
    # Independent answers, each drawn from the policy whose score is taken.
    reach_bandit(len(_ACTIONS), group=groups.shape[1], data="current", tokens=1)
    own = np.where(groups == 1, success, failure).astype(object)
    observed: dict[str, object] = {"total_probability": probability.sum()}
    for suffix, bonus in (("", as_written(params.bonus)), ("_without_bonus", Fraction(0))):
        rewards = own + (bonus * successes / params.group_size)[:, None]
        gradient = probability @ (rewards.mean(axis=1) * group_score)
        leave_one_out = probability @ _estimates(ctx, groups, p, rewards)["leave_one_out"]
        observed[f"leave_one_out_ratio{suffix}"] = leave_one_out / gradient
        if not suffix:
            observed["leave_one_out_minus_own_reward_gradient"] = (
                leave_one_out - _single_answer_gradient(p, success, failure))
    return observed


class StaleGroups(_BernoulliGroups):
    """The Bernoulli policy, its rewards, G, and how many answers of a group another policy generated."""

    stale_p: float = Field(gt=0, lt=1, description="probability of action 1 under the other (stale) policy")
    stale_answers: int = Field(ge=1, description="the first this many answers of every group come from stale_p")

    @model_validator(mode="after")
    def _within_the_group(self) -> StaleGroups:
        if self.stale_answers > self.group_size:
            raise ValueError(f"stale_answers ({self.stale_answers}) cannot exceed group_size ({self.group_size})")
        return self


@verifier(kind="counterexample", params=StaleGroups, uses=_USES)
def stale_policy_answers_exact(ctx: Context) -> dict[str, object]:
    """Independent answers, the first ``stale_answers`` of each group drawn with probability ``stale_p`` of
    action 1 and the others with p; every score is S_i = Y_i - p, the current policy's. Reported: the exact
    expectations of the leave-one-out and no-baseline estimates divided by the gradient of one answer's
    expected reward under p, and (``*_one_policy``) the same with every answer drawn from p."""
    params = ctx.params
    p, success, failure = as_written(params.p), as_written(params.reward_success), as_written(params.reward_failure)
    stale = as_written(params.stale_p)
    groups = _groups(params.group_size)
    rewards = np.where(groups == 1, success, failure).astype(object)
    gradient = _single_answer_gradient(p, success, failure)
    estimates = _estimates(ctx, groups, p, rewards)
    observed: dict[str, object] = {}
    for suffix, first in (("", stale), ("_one_policy", p)):
        sources = [first] * params.stale_answers + [p] * (params.group_size - params.stale_answers)
        probability = np.array([np.prod([q if y else 1 - q for q, y in zip(sources, group, strict=True)])
                                for group in groups], dtype=object)
        # Each answer's policy against the one whose score is taken: the current one, or another.
        reach_bandit(len(_ACTIONS), group=groups.shape[1], tokens=1,
                     data=["current" if source == p else "other" for source in sources])
        observed[f"total_probability{suffix}"] = probability.sum()
        for name, values in estimates.items():
            observed[f"{name}_ratio{suffix}"] = (probability @ values) / gradient
    return observed

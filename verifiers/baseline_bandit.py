"""Baselines in the three-armed bandit of the week-16 syllabus (step 2), and a baseline b(s) per prompt.

The policy is softmax(θ) at θ = 0, uniform over the arms; the single-sample gradient estimate
for arm a is g(a) = (R(a) - b)(e_a - π). Its "total variance" is the trace of its covariance,
E||g - E g||^2, the sum of the per-coordinate variances. With several prompts s (drawn from d(s)),
each with its own softmax policy and baseline b(s), the same estimate can be lowered or raised by
b(s) (the interview answer's point 2, step 4). Step 2's baselines for a batch of N arms drawn from π are
the batch mean and the mean of the other N - 1; a baseline that depends on the action biases the estimate.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import numpy as np
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, over, probability_rows, softmax_scores
from verifiers._numeric import as_written
from verifiers._params import one_entry_each
from verifiers._reach import reach_bandit
from verifiers._sampling import categorical
from verifiers.baseline_state import softmax_score_agrees


class UniformBandit(NoParams):
    """Rewards of the arms, the constant baseline and the arm that was drawn."""

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


@verifier(kind="exact", params=UniformBandit, uses=(*_USES, "softmax_score"))
def step_and_variance_exact(ctx: Context) -> dict[str, object]:
    """Every arm's update without and with the baseline, the mean update and the total variance,
    by exact enumeration of the arms (fractions; the exact scores e_a - π are checked against
    impl's softmax score). ``mean_reward`` is E_π[R], the policy's mean reward."""
    arms = len(ctx.params.rewards)
    # Every arm of the policy's own draw, enumerated, each with its exact (deterministic) reward.
    reach_bandit(arms, data="current", advantages="exact")
    pi = np.array([Fraction(1, arms)] * arms, dtype=object)
    reward_a = as_fractions(ctx.params.rewards)
    scores_a = softmax_scores(pi)
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


@verifier(kind="montecarlo", params=UniformBandit, uses=(*_USES, "softmax", "softmax_score"))
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
    # Arms drawn from the policy whose score is taken; each arm's reward is its exact value.
    reach_bandit(len(rewards), data="current", advantages="exact")
    scores = ctx.impl.softmax_score(np.broadcast_to(logits, (2 * n, len(rewards))), arms)
    observed = {}
    for label, b in baselines.items():
        _, gradients = _single_sample_gradients(ctx, rewards[arms], b, scores)
        difference = gradients[:n] - gradients[n:]
        observed[f"total_variance_{label}"] = ctx.mean_estimate((difference * difference).sum(axis=1) / 2,
                                                                supports[label], "empirical-bernstein")
    return observed


# --------------------------------------------------------------------------- a baseline b(s) can raise the variance


def _prompts(drawn: tuple) -> dict[str, object]:
    """Prompts drawn with integer weights, each a softmax policy over K arms with positive integer weights, rewards
    and a baseline b(s) in eighths: exact rational entries throughout."""
    state_weights, policies, eighths, baselines = drawn
    total = sum(state_weights)
    return {"d": [Fraction(w, total) for w in state_weights],
            "pi": [probability_rows(row) for row in policies],
            "R": [over(row, 8) for row in eighths],
            "b": [Fraction(k, 8) for k in baselines]}


def _prompts_of_size(n_states: int, n_actions: int) -> st.SearchStrategy:
    rows = functools.partial(st.lists, min_size=n_states, max_size=n_states)
    arms = functools.partial(st.lists, min_size=n_actions, max_size=n_actions)
    return st.tuples(rows(st.integers(1, 4)), rows(arms(st.integers(1, 4))), rows(arms(st.integers(-40, 40))),
                     rows(st.integers(-80, 80))).map(_prompts)


_contextual_bandits = st.tuples(st.integers(1, 3), st.integers(2, 4)).flatmap(lambda size: _prompts_of_size(*size))


def _moments(ctx: Context, prompts: dict, baselines: list[Fraction]) -> tuple[np.ndarray, Fraction]:
    """E[g] and E||g||^2 of g = (R(s, a) - b(s)) ∇ log π(a|s), prompts drawn from d and arms from π(·|s), exactly.

    The parameters are every prompt's logits, so the score of (s, a) is e_a - π(·|s) in s's block and zero
    elsewhere; each estimate goes through impl's baseline advantages and estimator.
    """
    n_actions = len(prompts["pi"][0])
    mean = np.array([Fraction(0)] * (len(prompts["d"]) * n_actions), dtype=object)
    second = Fraction(0)
    for s, (d_s, pi_s, reward_s, b_s) in enumerate(zip(prompts["d"], prompts["pi"], prompts["R"], baselines,
                                                       strict=True)):
        scores = np.zeros((n_actions, mean.size), dtype=int).astype(object)
        scores[:, s * n_actions:(s + 1) * n_actions] = softmax_scores(pi_s)
        _, gradients = _single_sample_gradients(ctx, reward_s, b_s, scores)
        mean = mean + d_s * (pi_s @ gradients)
        second += d_s * (pi_s @ (gradients * gradients).sum(axis=1))
    return mean, second


@verifier(kind="property", uses=(*_USES, "softmax_score"))
@given(_contextual_bandits)
def state_baseline_variance_property(ctx: Context, prompts: dict) -> None:
    """On random prompts (one to three, drawn with random probabilities d(s)), each a softmax policy over two to
    four arms with exact rewards, and a random baseline b(s) per prompt: subtracting b(s) leaves E[g] as it is and
    changes the total variance tr Cov[g] by exactly Σ_s d(s) W(s) [(b(s) - b*(s))^2 - b*(s)^2], with
    W(s) = E[||∇ log π||^2 | s] and b*(s) = E[R ||∇ log π||^2 | s] / W(s) computed here. So it is lowered only by a
    baseline close enough to b*, and raised by any farther one: b(s) = b*(s) + 2|b*(s)| + 1 raises it in every
    example, and b*(s) itself never raises it.

    Every quantity is exact (fractions), compared with ==; impl's score at each prompt's logits is checked
    against e_a - π(·|s).
    """
    n_states, n_actions = len(prompts["d"]), len(prompts["pi"][0])
    # The estimator is handed each arm's exact (deterministic) reward, drawn by the policy it scores.
    reach(states=n_states, actions=n_actions, horizon=1, data="current", advantages="exact")
    weight, optimum = [], []
    for pi_s, reward_s in zip(prompts["pi"], prompts["R"], strict=True):
        scores = softmax_scores(pi_s)
        assert softmax_score_agrees(ctx, pi_s, scores), ("impl's softmax score", pi_s)
        norms = (scores * scores).sum(axis=1)
        weight.append(pi_s @ norms)
        optimum.append((pi_s * reward_s) @ norms / weight[-1])

    def total_variance(baselines: list[Fraction]) -> tuple[np.ndarray, Fraction]:
        mean, second = _moments(ctx, prompts, baselines)
        return mean, second - mean @ mean

    mean_without, without = total_variance([Fraction(0)] * n_states)
    mean_with, with_baseline = total_variance(prompts["b"])
    assert np.array_equal(mean_with, mean_without), ("b(s) moved E[g]", mean_with, mean_without)
    predicted = sum(d * w * ((b - opt) ** 2 - opt**2)
                    for d, w, b, opt in zip(prompts["d"], weight, prompts["b"], optimum, strict=True))
    assert with_baseline - without == predicted, (with_baseline - without, predicted)
    far = [opt + 2 * abs(opt) + 1 for opt in optimum]
    assert total_variance(far)[1] > without, ("a far baseline did not raise the variance", far)
    assert total_variance(optimum)[1] <= without, ("b* raised the variance", optimum)


# --------------------------------------------------------------- step 2: a batch's baselines, and a baseline per action


class BanditBatch(NoParams):
    """Rewards of the arms of a uniform bandit (θ = 0) and the number of arms drawn per batch."""

    rewards: list[float] = Field(min_length=2, max_length=6, description="R(a) per arm")
    batch_size: int = Field(ge=2, le=6, description="N, the arms drawn independently for one batch")


@verifier(kind="exact", params=BanditBatch,
          uses=("group_centered_advantages", "leave_one_out_advantages", "score_function_gradient", "softmax_score"))
def batch_baselines_exact(ctx: Context) -> dict[str, object]:
    """The batch estimator (1/N) Σ_i (R_i - b_i) ∇ log π(a_i) with no baseline, the batch mean
    (impl's group-centred advantages over the batch) and the mean of the other N - 1 rewards
    (impl's leave-one-out advantages), by enumerating all K^N batches in Fractions.

    Reported for each: the expected gradient and the total variance (trace of the covariance).
    ``batch_mean_factor`` is c with E[batch-mean estimator] = c ∇J, when the two are parallel
    (None otherwise); the true gradient ∇J = Σ_a π_a R_a (e_a - π) and the exact scores e_a - π
    are the verifier's, the latter checked against impl's softmax score.
    """
    arms, n = len(ctx.params.rewards), ctx.params.batch_size
    # Every batch of N arms the uniform policy draws, enumerated; each arm's reward is its exact value, and the
    # batch mean and the leave-one-out mean are estimates of the baseline from the batch.
    reach_bandit(arms, group=n, data="current", advantages=["exact", "estimated"])
    pi = np.array([Fraction(1, arms)] * arms, dtype=object)
    reward_a = as_fractions(ctx.params.rewards)
    scores_a = softmax_scores(pi)
    true_gradient = pi * reward_a @ scores_a
    advantages = {"no_baseline": lambda r: r, "batch_mean": ctx.impl.group_centered_advantages,
                  "leave_one_out": ctx.impl.leave_one_out_advantages}
    means = {label: np.zeros(arms, dtype=object) * Fraction(0) for label in advantages}
    squares = dict.fromkeys(advantages, Fraction(0))
    probability = Fraction(1, arms**n)
    for batch in itertools.product(range(arms), repeat=n):
        rewards = reward_a[list(batch)]
        for label, advantage in advantages.items():
            estimate = ctx.impl.score_function_gradient(advantage(rewards), scores_a[list(batch)])
            means[label] = means[label] + probability * estimate
            squares[label] += probability * (estimate @ estimate)
    observed: dict[str, object] = {"softmax_score_agrees": softmax_score_agrees(ctx, pi, scores_a),
                                   "true_gradient": list(true_gradient)}
    for label in advantages:
        observed[f"expected_gradient_{label}"] = list(means[label])
        observed[f"total_variance_{label}"] = squares[label] - means[label] @ means[label]
    factor = (means["batch_mean"] @ true_gradient) / (true_gradient @ true_gradient)
    parallel = all(m == factor * g for m, g in zip(means["batch_mean"], true_gradient, strict=True))
    observed["batch_mean_factor"] = factor if parallel else None
    observed["batch_mean_keeps_direction"] = bool(parallel and factor > 0)
    return observed


class ActionBaselines(NoParams):
    """Rewards of the arms of a uniform bandit (θ = 0) and a baseline b(a) per arm."""

    rewards: list[float] = Field(min_length=2, description="R(a) per arm")
    action_baselines: list[float] = Field(min_length=2, description="b(a) per arm, subtracted from that arm's reward")

    _lengths = one_entry_each("rewards", "action_baselines", per="arm")


@verifier(kind="counterexample", params=ActionBaselines,
          uses=("baseline_advantages", "score_function_gradient", "softmax_score"))
def action_baseline_bias_exact(ctx: Context) -> dict[str, object]:
    """Σ_a π(a) (R(a) - b(a)) (e_a - π) at the uniform policy, each one-sample update through impl
    (advantage and estimator; exact scores checked against impl's), against the true gradient
    Σ_a π(a) R(a) (e_a - π) computed here. ``bias`` is their difference."""
    arms = len(ctx.params.rewards)
    # The expectation over the policy's own arms, each with its exact (deterministic) reward.
    reach_bandit(arms, data="current", advantages="exact")
    pi = np.array([Fraction(1, arms)] * arms, dtype=object)
    reward_a, baseline_a = as_fractions(ctx.params.rewards), as_fractions(ctx.params.action_baselines)
    scores_a = softmax_scores(pi)
    advantages = ctx.impl.baseline_advantages(reward_a, baseline_a)
    expected = pi @ ctx.impl.score_function_gradient(advantages[:, None], scores_a[:, None, :])
    true_gradient = pi * reward_a @ scores_a
    return {"softmax_score_agrees": softmax_score_agrees(ctx, pi, scores_a), "true_gradient": list(true_gradient),
            "expected_gradient_action_baseline": list(expected), "bias": list(expected - true_gradient)}

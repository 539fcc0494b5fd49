"""The GRU policy of module lesson 4.5: exact enumeration of its answers, sampling, training.

The GRU is the implementation's; its output layer is set to random values here (the untrained
policy is uniform) so that enumeration and gradients see a non-trivial distribution.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
from pydantic import Field, model_validator
from scipy.special import log_softmax

from claims_harness import Context, NoParams, SeedRun, check_property, reach, verifier
from claims_harness import strategies as st
from claims_harness.stats import hoeffding_halfwidth
from verifiers._numeric import assert_close, rounding_bound


class GruPolicy(NoParams):
    """A GRU over a small vocabulary and one prompt."""

    vocab_size: int = Field(ge=2, le=8)
    hidden_size: int = Field(ge=1, le=32)
    eos_id: int = Field(ge=0)
    pad_id: int = Field(ge=0)
    prompt: list[int] = Field(min_length=1)
    max_tokens: int = Field(ge=1, le=4)


def _random_policy(ctx: Context, vocab_size: int, hidden_size: int) -> dict[str, np.ndarray]:
    params = ctx.impl.gru_init(ctx.rng, vocab_size, hidden_size)
    params["w_out"] = ctx.rng.normal(size=params["w_out"].shape)
    params["b_out"] = ctx.rng.normal(size=params["b_out"].shape)
    return params


def _all_answers(vocab_size: int, eos_id: int, max_tokens: int) -> list[tuple[tuple[int, ...], bool]]:
    """(answer, truncated): answers ending in EOS with at most max_tokens tokens, and cut ones."""
    body_tokens = [t for t in range(vocab_size) if t != eos_id]
    finished = [(*body, eos_id) for n in range(max_tokens) for body in itertools.product(body_tokens, repeat=n)]
    cut = list(itertools.product(body_tokens, repeat=max_tokens))
    return [(a, False) for a in finished] + [(a, True) for a in cut]


@verifier(kind="exact",
          uses=("gru_init", "gru_forward", "token_log_probs", "response_mask", "sequence_log_prob"),
          params=GruPolicy)
def answer_distribution_exact(ctx: Context) -> dict[str, object]:
    """Enumerate every answer of the GRU policy up to max_tokens.

    log π(y|x) comes from impl (one forward pass over prompt + answer + padding, token
    log-probabilities, response mask, masked sum). The reference is the chain rule computed
    here: for each t a separate forward pass over the prefix x, y_<t, whose last logits give
    log π(y_t | x, y_<t) through the verifier's own log-softmax. The probabilities of all answers,
    the ones cut at max_tokens included, must sum to 1.
    """
    params = ctx.params
    policy = _random_policy(ctx, params.vocab_size, params.hidden_size)
    answers = _all_answers(params.vocab_size, params.eos_id, params.max_tokens)
    prompt_length = len(params.prompt)
    width = prompt_length + params.max_tokens + 1
    tokens = np.full((len(answers), width), params.pad_id, dtype=int)
    for row, (answer, _) in enumerate(answers):
        tokens[row, :prompt_length + len(answer)] = [*params.prompt, *answer]
    lengths = np.array([len(a) for a, _ in answers])
    # Every answer to one prompt, finished (its EOS counted) or cut, each token chosen among the whole vocabulary.
    reach(tokens=lengths, horizon=lengths, actions=params.vocab_size, states=1)
    logits, _ = ctx.impl.gru_forward(policy, tokens)
    mask = ctx.impl.response_mask(tokens, np.full(len(answers), prompt_length), lengths, params.eos_id)
    log_probs = ctx.impl.sequence_log_prob(ctx.impl.token_log_probs(logits, tokens), mask)

    chain_rule = np.zeros(len(answers))
    for row, (answer, _) in enumerate(answers):
        for t, token in enumerate(answer):
            prefix_logits, _ = ctx.impl.gru_forward(policy, tokens[row:row + 1, :prompt_length + t])
            chain_rule[row] += log_softmax(prefix_logits[0, -1])[token]
    magnitude = float(np.abs(chain_rule).max())
    truncated = np.array([cut for _, cut in answers])
    total = float(np.exp(log_probs).sum())
    return {
        "answers": len(answers),
        "chain_rule_holds": bool(np.all(np.abs(log_probs - chain_rule)
                                        <= rounding_bound(4 * width * params.vocab_size, magnitude))),
        "total_probability": total,
        "sums_to_one": bool(abs(total - 1.0) <= rounding_bound(len(answers) * width * params.vocab_size, 1.0)),
        "truncated_probability": float(np.exp(log_probs[truncated]).sum()),
    }


class EqualRewards(GruPolicy):
    """A group of G sampled answers that all get the same reward, and a KL coefficient."""

    group_size: int = Field(ge=2)
    reward: float
    beta: float = Field(gt=0)
    epsilon: float = Field(gt=0, lt=1)


@verifier(kind="counterexample",
          uses=("gru_init", "gru_forward", "gru_backward", "gru_sample", "rloo_advantages",
                "group_mean_advantages", "grpo_advantages", "response_mask", "token_log_probs",
                "token_log_probs_vjp", "token_clipped_surrogate", "kl_penalty_loss"),
          params=EqualRewards)
def equal_rewards_no_signal(ctx: Context) -> dict[str, object]:
    """A group with equal rewards: the advantages, and the parameter gradients of the policy term and
    of three other terms of a loss: a KL penalty, an entropy bonus and an auxiliary loss.

    The policy term is the token clipped surrogate at θ = θ_old with the group's RLOO advantages;
    the KL term is impl's in-loss penalty against a reference GRU with other parameters. The entropy
    bonus is the mean over the answer tokens of the entropy H of π(·|x, y_<t), its gradient with
    respect to the scoring logits the verifier's own, -π ⊙ (log π + H); the auxiliary loss is the
    mean negative log-likelihood of the sampled answers' tokens (a supervised term), through impl's
    token log-probability vector-Jacobian product. All are backpropagated into the GRU's parameters
    by impl; the norms are the verifier's.
    """
    params = ctx.params
    policy = _random_policy(ctx, params.vocab_size, params.hidden_size)
    reference = _random_policy(ctx, params.vocab_size, params.hidden_size)
    prompts = np.tile(np.array(params.prompt), (params.group_size, 1))
    lengths = np.full(params.group_size, len(params.prompt))
    tokens, generated, _ = ctx.impl.gru_sample(policy, prompts, lengths, params.max_tokens, params.eos_id,
                                               params.pad_id, ctx.rng)
    rewards = np.full(params.group_size, params.reward)
    # One prompt's group, sampled by the policy whose terms are differentiated; its answers' lengths are the sampler's.
    reach(group=len(rewards), tokens=generated, horizon=generated, actions=params.vocab_size, states=1,
          data="current", advantages="estimated")
    advantages = {"rloo": ctx.impl.rloo_advantages(rewards, params.group_size),
                  "group_mean": ctx.impl.group_mean_advantages(rewards, params.group_size),
                  "grpo": ctx.impl.grpo_advantages(rewards, params.group_size, 1e-8)}
    mask = ctx.impl.response_mask(tokens, lengths, generated, params.eos_id)
    logits, cache = ctx.impl.gru_forward(policy, tokens)
    log_pi = ctx.impl.token_log_probs(logits, tokens)
    _, d_log_pi = ctx.impl.token_clipped_surrogate(log_pi, log_pi, advantages["rloo"][:, None], mask,
                                                   params.epsilon, "token_mean")
    policy_grads = ctx.impl.gru_backward(policy, cache, ctx.impl.token_log_probs_vjp(logits, tokens, d_log_pi))
    reference_logits, _ = ctx.impl.gru_forward(reference, tokens)
    _, d_scoring_logits = ctx.impl.kl_penalty_loss(logits[:, :-1], reference_logits[:, :-1], mask, params.beta,
                                                   "token_mean")
    d_logits = np.zeros_like(logits)
    d_logits[:, :-1] = d_scoring_logits
    kl_grads = ctx.impl.gru_backward(policy, cache, d_logits)
    weights = mask / mask.sum()
    log_p = log_softmax(logits[:, :-1], axis=-1)
    entropy = -(np.exp(log_p) * log_p).sum(axis=-1, keepdims=True)
    d_logits = np.zeros_like(logits)
    d_logits[:, :-1] = weights[..., None] * -np.exp(log_p) * (log_p + entropy)
    entropy_grads = ctx.impl.gru_backward(policy, cache, d_logits)
    auxiliary_grads = ctx.impl.gru_backward(policy, cache, ctx.impl.token_log_probs_vjp(logits, tokens, -weights))

    def norm(grads: dict[str, np.ndarray]) -> float:
        return float(np.sqrt(sum(float((g * g).sum()) for g in grads.values())))

    return {
        **{f"{name}_largest_advantage": float(np.abs(a).max()) for name, a in advantages.items()},
        "advantages_finite": bool(all(np.isfinite(a).all() for a in advantages.values())),
        "policy_term_gradient_norm": norm(policy_grads),
        "kl_term_gradient_norm": norm(kl_grads),
        "entropy_term_gradient_norm": norm(entropy_grads),
        "auxiliary_term_gradient_norm": norm(auxiliary_grads),
    }


class SamplerSpec(NoParams):
    """A random GRU for the sampler, and one prompt of the task (its token ids) for the checker."""

    vocab_size: int = Field(ge=2, le=8)
    hidden_size: int = Field(ge=1, le=32)
    eos_id: int = Field(ge=0)
    pad_id: int = Field(ge=0)
    copy_task: int = Field(ge=0, description="the task's copy token")
    string: list[int] = Field(min_length=1, description="a string to copy, in the task's symbol tokens")


@verifier(kind="property", uses=("gru_init", "gru_sample", "response_mask", "verifiable_reward"), params=SamplerSpec)
def eos_and_truncation_property(ctx: Context) -> dict[str, object]:
    """Sampled answers: ``truncated`` exactly when max_tokens tokens were written without an EOS;
    otherwise the answer ends with its first EOS; the response mask covers every written token
    (the EOS included). The task's checker gives a correct answer 1 when finished and 0 when cut."""
    params = ctx.params

    def sampler_consistent(case: tuple[int, int, int, int]) -> None:
        seed, max_tokens, batch, prompt_length = case
        rng = np.random.default_rng(seed)
        policy = ctx.impl.gru_init(rng, params.vocab_size, params.hidden_size)
        policy["b_out"] = rng.normal(scale=2.0, size=params.vocab_size)
        prompts = rng.integers(params.vocab_size, size=(batch, prompt_length))
        lengths = rng.integers(1, prompt_length + 1, size=batch)
        tokens, generated, truncated = ctx.impl.gru_sample(policy, prompts, lengths, max_tokens, params.eos_id,
                                                           params.pad_id, rng)
        reach(tokens=generated, horizon=generated, actions=params.vocab_size,
              states=len({tuple(prompts[b, :lengths[b]]) for b in range(batch)}))
        mask = ctx.impl.response_mask(tokens, lengths, generated, params.eos_id)
        for b in range(batch):
            answer = list(tokens[b, lengths[b]:lengths[b] + generated[b]])
            has_eos = params.eos_id in answer
            assert bool(truncated[b]) == (not has_eos and len(answer) == max_tokens), (answer, truncated[b])
            assert has_eos == (not truncated[b]) and (not has_eos or answer.index(params.eos_id) == len(answer) - 1), \
                ("end of sequence not last, or the answer cut", answer, truncated[b])
            assert mask[b].sum() == len(answer) and np.all(mask[b, lengths[b] - 1:lengths[b] - 1 + len(answer)] == 1), \
                ("the mask is not the answer's tokens", answer, mask[b])
            assert np.all(tokens[b, lengths[b] + generated[b]:] == params.pad_id), ("not padded after", tokens[b])

    result = check_property(ctx, sampler_consistent, st.tuples(
        st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 6), st.integers(1, 4)))
    string = tuple(params.string)
    return {
        **result,
        "finished_correct_reward": ctx.impl.verifiable_reward(params.copy_task, string, (*string, params.eos_id),
                                                              False),
        "cut_correct_reward": ctx.impl.verifiable_reward(params.copy_task, string, string, True),
    }


class _Protocol(NoParams):
    """The GRU training protocol: fixed seeds, iterations per profile, hyperparameters."""

    seeds: list[int] = Field(min_length=3)
    iterations_smoke: int = Field(ge=1)
    iterations_full: int = Field(ge=1)
    prompts_per_batch: int = Field(ge=1)
    group_size: int = Field(ge=2)
    ppo_epochs: int = Field(ge=1)
    epsilon: float = Field(gt=0, lt=1)
    learning_rate: float = Field(gt=0)
    hidden_size: int = Field(ge=1)
    max_tokens: int = Field(ge=1)


class Training(_Protocol):
    """The protocol with an evaluation every ``eval_every`` iterations, and the seeds its figure shows."""

    eval_every: int = Field(ge=1)
    figure_seeds: list[int] | None = Field(None, min_length=1,
                                           description="the seeds (some of ``seeds``) the figure draws; all by default")

    @model_validator(mode="after")
    def _figure_seeds_are_trained(self) -> Training:
        shown = self.figure_seeds or []
        if not set(shown) <= set(self.seeds) or len(set(shown)) != len(shown):
            raise ValueError(f"figure_seeds {self.figure_seeds} must be distinct seeds of {self.seeds}")
        return self


_TRAINING_BLOCKS = ("gru_init", "gru_forward", "gru_backward", "gru_sample", "adam_init", "adam_update",
                    "rloo_advantages", "response_mask", "token_log_probs", "token_log_probs_vjp",
                    "token_clipped_surrogate")


def _reach_training(params: _Protocol) -> None:
    """What every training run of the protocol uses (its seeds run elsewhere and record nothing): groups of
    ``group_size`` answers per prompt with RLOO advantages, and PPO epochs over the batch the old policy sampled."""
    reach(group=params.group_size, data="old", advantages="estimated")


def _train_gru(run: SeedRun, iterations: int, params: Training) -> dict[str, list]:
    """One seed's GRU training run, wherever the seed runs."""
    return run.impl.train_gru_policy(run.seed, iterations,
                                     prompts_per_batch=params.prompts_per_batch, group_size=params.group_size,
                                     ppo_epochs=params.ppo_epochs, epsilon=params.epsilon,
                                     learning_rate=params.learning_rate, hidden_size=params.hidden_size,
                                     max_tokens=params.max_tokens, eval_every=params.eval_every, ops=run.impl)


@verifier(kind="experiment", uses=("train_gru_policy", "plot_gru_training", *_TRAINING_BLOCKS), params=Training)
def training_experiment(ctx: Context) -> dict[str, object]:
    """Train the GRU with RLOO and clipped PPO epochs for every seed; median and IQR of the reward.

    The first evaluation of each run is the untrained policy, the last the trained one; reported are
    both per seed and :func:`training_statistics` of them. The figure is impl's, of the runs of
    ``figure_seeds`` (every seed's if none are named); ``figure_shows_median_and_iqr`` says whether it
    draws, at every evaluation, their median and their interquartile range
    (:func:`figure_shows_median_and_iqr`).
    """
    params = ctx.params
    iterations = params.iterations_full if ctx.profile == "full" else params.iterations_smoke
    _reach_training(params)
    histories = ctx.map_seeds(_train_gru, params.seeds, iterations, params)
    curves = np.array([h["eval_reward"] for h in histories])
    initial, final = curves[:, 0].tolist(), curves[:, -1].tolist()
    shown = [histories[params.seeds.index(seed)] for seed in params.figure_seeds or params.seeds]
    one_schedule = all(h["eval_iterations"] == shown[0]["eval_iterations"] for h in shown)
    figure = ctx.impl.plot_gru_training(shown)
    return {
        "iterations": iterations,
        "untrained_rewards": initial,
        "trained_rewards": final,
        **training_statistics(initial, final),
        "figure_shows_median_and_iqr": one_schedule and figure_shows_median_and_iqr(
            figure, shown[0]["eval_iterations"], [h["eval_reward"] for h in shown]),
        "figure": ctx.save_figure(figure, f"gru_training_{ctx.profile}"),
    }


# Every sample-quantile definition NumPy knows (Hyndman and Fan's nine and four more): an interquartile
# range of three runs is not one number, and a figure may draw any of them.
_QUANTILE_METHODS = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
                     "hazen", "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher",
                     "midpoint", "nearest")


def _drawn_extents(figure: Any, xs: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """For every line and every collection of the figure's axes: (its kind, its lowest and highest y at each x).

    Data coordinates only (a collection drawn in another transform is left out); NaN where the
    artist draws no point at that x. A band filled between two curves has, at each x, the lower
    curve's value as its lowest vertex and the upper one's as its highest, whatever its vertex order.
    """
    extents = []
    for axes in figure.drawing():  # what the implementation's figure draws, read in its process as data
        drawn = [("line", np.asarray(points, dtype=float)) for points in axes["lines"]]
        drawn += [("collection", np.asarray(points, dtype=float)) for points in axes["filled"]]
        for kind, points in drawn:
            low, high = np.full(len(xs), np.nan), np.full(len(xs), np.nan)
            for index, x in enumerate(xs):
                at_x = points[np.abs(points[:, 0] - x) <= rounding_bound(4, abs(x)), 1]
                if at_x.size:
                    low[index], high[index] = at_x.min(), at_x.max()
            extents.append((kind, low, high))
    return extents


def figure_shows_median_and_iqr(figure: Any, iterations: list[int], curves: list[list[float]]) -> bool:
    """Whether ``figure`` draws, at every evaluated iteration, the runs' median and their interquartile range.

    The median (the middle value for an odd number of runs, the mean of the two middle ones for an
    even number) must be a line through every evaluation; the interquartile range a band (a filled
    region, or two lines) from the first to the third quartile, for one of NumPy's quantile
    definitions used throughout. Values are compared within float64 rounding of rewards in [0, 1].
    """
    xs, rewards = np.asarray(iterations, dtype=float), np.asarray(curves, dtype=float)
    extents = _drawn_extents(figure, xs)
    tolerance = rounding_bound(64 * rewards.shape[0], 1.0)

    def along(values: np.ndarray, target: np.ndarray) -> bool:
        return bool(np.all(np.abs(values - target) <= tolerance))  # False where the artist misses an x (NaN)

    def lines_along(target: np.ndarray) -> list[int]:
        return [i for i, (kind, low, high) in enumerate(extents)
                if kind == "line" and along(low, target) and along(high, target)]

    median_lines = lines_along(np.median(rewards, axis=0))
    for method in _QUANTILE_METHODS:
        q1, q3 = np.percentile(rewards, [25, 75], axis=0, method=method)
        if any(kind == "collection" and along(low, q1) and along(high, q3) for kind, low, high in extents):
            return bool(median_lines)
        lower, upper = lines_along(q1), lines_along(q3)
        # Two lines for the quartiles, neither of them the line drawn for the median.
        if any(len({a, b, m}) == 3 for a in lower for b in upper for m in median_lines):
            return True
    return False


class FigureRuns(NoParams):
    """How many runs the training figure draws."""

    runs: int = Field(ge=1, le=12)


_schedules = st.tuples(st.integers(1, 8), st.integers(1, 20), st.integers(0, 2**32 - 1), st.booleans())


@verifier(kind="property", uses=("plot_gru_training",), params=FigureRuns)
def training_figure_property(ctx: Context) -> dict[str, object]:
    """impl's training figure of ``runs`` random training histories draws, at every evaluation, the runs'
    median and interquartile range (:func:`figure_shows_median_and_iqr`).

    The rewards are uniform in [0, 1], or drawn from five levels so that runs tie; one to eight
    equally spaced evaluations.
    """
    runs = ctx.params.runs
    # Random histories drawn into a figure: no policy, prompt or answer, so no scope dimension applies to them.

    def figure_holds(schedule: tuple[int, int, int, bool]) -> None:
        evaluations, every, seed, ties = schedule
        rng = np.random.default_rng(seed)
        iterations = [every * k for k in range(evaluations)]
        rewards = (rng.integers(0, 5, size=(runs, len(iterations))) / 4 if ties
                   else rng.uniform(0, 1, size=(runs, len(iterations))))
        histories = [{"eval_iterations": list(iterations), "eval_reward": [float(r) for r in row],
                      "batch_reward": [float(rng.uniform())] * max(iterations[-1], 1),
                      "truncated_fraction": [0.0] * max(iterations[-1], 1)} for row in rewards]
        figure = ctx.impl.plot_gru_training(histories)
        assert figure_shows_median_and_iqr(figure, iterations, rewards.tolist()), (iterations, rewards.tolist())

    return check_property(ctx, figure_holds, _schedules)


def training_statistics(untrained: list[float], trained: list[float]) -> dict[str, object]:
    """What the claim states of the seeds' rewards before and after training: the medians, the trained
    rewards' interquartile range, the median and the smallest improvement, and the trained rewards' range."""
    initial, final = np.asarray(untrained, dtype=np.float64), np.asarray(trained, dtype=np.float64)
    q1, q3 = np.percentile(final, [25, 75])
    return {
        "untrained_median": float(np.median(initial)),
        "trained_median": float(np.median(final)),
        "trained_iqr": [float(q1), float(q3)],
        "median_improvement": float(np.median(final - initial)),
        "smallest_improvement": float((final - initial).min()),
        "final_spread": float(final.max() - final.min()),
    }


class SeedSpread(_Protocol):
    """The training protocol, evaluated only before and after training, on many answers per prompt."""

    eval_samples_per_prompt: int = Field(ge=1)


def _train_gru_evaluated_at_ends(run: SeedRun, iterations: int, params: SeedSpread) -> dict[str, list]:
    """One seed's run with evaluations only of the untrained and of the trained policy."""
    return run.impl.train_gru_policy(run.seed, iterations,
                                     prompts_per_batch=params.prompts_per_batch, group_size=params.group_size,
                                     ppo_epochs=params.ppo_epochs, epsilon=params.epsilon,
                                     learning_rate=params.learning_rate, hidden_size=params.hidden_size,
                                     max_tokens=params.max_tokens, eval_every=iterations,
                                     eval_samples_per_prompt=params.eval_samples_per_prompt, ops=run.impl)


@verifier(kind="experiment", uses=("train_gru_policy", "task_prompts", *_TRAINING_BLOCKS), params=SeedSpread)
def seed_spread_experiment(ctx: Context) -> dict[str, object]:
    """Several seeds of one configuration: do they all learn, and do they end at the same expected reward?

    Each evaluation is the mean reward of n = (task prompts) x ``eval_samples_per_prompt``
    independently sampled answers, rewards in [0, 1], so by Hoeffding's inequality each lies
    within h = sqrt(log(2 k / α) / (2 n)) of the evaluated policy's expected reward, all k = 2 S of
    them at once (S seeds, before and after) with probability at least 1 - α, α this comparison's
    false-failure rate. :func:`spread_statistics` makes of them the claim's bounds.
    """
    params = ctx.params
    iterations = params.iterations_full if ctx.profile == "full" else params.iterations_smoke
    _reach_training(params)
    histories = ctx.map_seeds(_train_gru_evaluated_at_ends, params.seeds, iterations, params)
    curves = np.array([h["eval_reward"] for h in histories])
    evaluated = len(ctx.impl.task_prompts()) * params.eval_samples_per_prompt
    half_width = hoeffding_halfwidth(evaluated, ctx.alpha / curves.size, 1.0)
    initial, final = curves[:, 0].tolist(), curves[:, -1].tolist()
    return {
        "iterations": iterations,
        "untrained_rewards": initial,
        "final_rewards": final,
        "evaluated_answers": evaluated,
        "evaluation_half_width": half_width,
        **spread_statistics(initial, final, half_width),
    }


def spread_statistics(untrained: list[float], trained: list[float], half_width: float) -> dict[str, float]:
    """The claim's bounds from each seed's evaluations, each within ``half_width`` of its policy's expected reward.

    ``final_spread_beyond_noise`` = (largest - smallest trained reward) - 2h is a lower bound on the
    spread of the trained policies' expected rewards, and ``smallest_improvement_beyond_noise`` =
    min over seeds of (trained - untrained) - 2h one on the smallest true improvement: both positive
    means every run learned and the runs genuinely end apart, which evaluation noise alone cannot produce.
    """
    initial, final = np.asarray(untrained, dtype=np.float64), np.asarray(trained, dtype=np.float64)
    return {"final_spread": float(final.max() - final.min()),
            "final_spread_beyond_noise": float(final.max() - final.min() - 2 * half_width),
            "smallest_improvement_beyond_noise": float((final - initial).min() - 2 * half_width)}


class LoopContract(NoParams):
    """Bounds of the small training runs the contract property draws."""

    max_iterations: int = Field(ge=1, le=4)
    max_prompts_per_batch: int = Field(ge=1, le=4)
    max_group_size: int = Field(ge=2, le=6)
    max_ppo_epochs: int = Field(ge=2, le=4)
    epsilon: float = Field(gt=0, lt=1)
    learning_rate: float = Field(gt=0)


class _RecordingOps:
    """The implementation under test, with the calls the loop's contract is about recorded in order.

    ``gru_sample`` is recorded with a copy of the parameters it sampled with, its arguments and its
    results; ``token_clipped_surrogate`` with copies of its arguments. Everything else passes
    straight through.
    """

    def __init__(self, impl: Any):
        self._impl = impl
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._impl, name)

    def gru_sample(self, params, prompts, prompt_length, max_tokens, eos_id, pad_id, rng):
        tokens, generated, truncated = self._impl.gru_sample(params, prompts, prompt_length, max_tokens, eos_id,
                                                             pad_id, rng)
        self.calls.append(("sample", {"params": {k: np.array(v, copy=True) for k, v in params.items()},
                                      "prompts": np.array(prompts), "prompt_length": np.array(prompt_length),
                                      "tokens": np.array(tokens), "generated": np.array(generated),
                                      "truncated": np.array(truncated), "eos_id": eos_id}))
        return tokens, generated, truncated

    def token_clipped_surrogate(self, log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation):
        self.calls.append(("surrogate", {"log_pi": np.array(log_pi_t, dtype=float),
                                         "log_pi_old": np.array(log_pi_old_t, dtype=float),
                                         "advantages": np.array(a_t, dtype=float),
                                         "mask": np.array(mask_t, dtype=float)}))
        return self._impl.token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation)


def _training_iterations(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(sampling call, the surrogate calls that follow it) for every sampling the loop trained on.

    Evaluation samples are followed by no surrogate call and are left out.
    """
    iterations: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for name, call in calls:
        if name == "sample":
            iterations.append((call, []))
        elif iterations:
            iterations[-1][1].append(call)
    return [(sample, steps) for sample, steps in iterations if steps]


def _causal_mask(tokens: np.ndarray, prompt_length: np.ndarray, generated: np.ndarray, eos_id: int) -> np.ndarray:
    """The verifier's own response mask: entry k (token k + 1) for generated tokens up to the first EOS."""
    mask = np.zeros((tokens.shape[0], tokens.shape[1] - 1))
    for row in range(tokens.shape[0]):
        for position in range(prompt_length[row], prompt_length[row] + generated[row]):
            mask[row, position - 1] = 1.0
            if tokens[row, position] == eos_id:
                break
    return mask


@verifier(kind="property",
          uses=("train_gru_policy", "verifiable_reward", "task_prompts", *_TRAINING_BLOCKS),
          params=LoopContract)
def training_loop_contract(ctx: Context) -> dict[str, object]:
    """Small training runs of impl's ``train_gru_policy`` with its building blocks recorded.

    For every sampled batch the loop trains on, and every PPO epoch over it, the arguments the loop
    hands the token clipped surrogate are compared with the verifier's own computation from what
    the sampler returned: the mask is the response mask (generated tokens up to and including the
    first EOS, never the prompt or padding); the advantage of each answer, at every masked token,
    is R_i minus the mean of the other G - 1 rewards of its prompt's group (rewards from impl's
    checker on the sampled answers, prompts decoded as the task's string followed by its task
    token); the old log-probabilities are the same in every epoch and equal the log-probabilities of
    the sampled tokens under the parameters the batch was sampled with (impl's GRU forward pass,
    the verifier's own log-softmax and causal shift); there are ``ppo_epochs`` steps on the whole
    batch. Every prompt the loop trains on is one of impl's task prompts, and ``prompt_types`` is the
    number of task tokens among those. ``groups_with_unequal_rewards`` and
    ``epochs_after_the_policy_moved`` count the cases in which a group-mean advantage, or old
    log-probabilities recomputed each epoch, would differ; ``batches_with_answers_of_several_lengths``
    those in which the sampled answers (EOS included) did not all have one length.
    """
    params = ctx.params
    counts = {"groups_with_unequal_rewards": 0, "epochs_after_the_policy_moved": 0,
              "batches_with_answers_of_several_lengths": 0}
    task_prompts = {(int(task), tuple(int(t) for t in string)) for task, string in ctx.impl.task_prompts()}

    def contract_holds(run: tuple[int, int, int, int, int, int, int]) -> None:
        seed, iterations, prompts_per_batch, group_size, ppo_epochs, max_tokens, hidden_size = run
        ops = _RecordingOps(ctx.impl)
        ctx.impl.train_gru_policy(seed, iterations, prompts_per_batch=prompts_per_batch, group_size=group_size,
                                  ppo_epochs=ppo_epochs, epsilon=params.epsilon, learning_rate=params.learning_rate,
                                  hidden_size=hidden_size, max_tokens=max_tokens, eval_every=iterations,
                                  eval_samples_per_prompt=1, ops=ops)
        trained = _training_iterations(ops.calls)
        assert len(trained) == iterations, f"{len(trained)} sampled batches trained on, {iterations} iterations"
        for sample, steps in trained:
            tokens, lengths, generated = sample["tokens"], sample["prompt_length"], sample["generated"]
            prompts = sample["prompts"]
            assert len(steps) == ppo_epochs, f"{len(steps)} surrogate steps on one batch, ppo_epochs = {ppo_epochs}"
            mask = _causal_mask(tokens, lengths, generated, sample["eos_id"])
            decoded = [(int(prompts[b, lengths[b] - 1]), tuple(int(t) for t in prompts[b, :lengths[b] - 1]))
                       for b in range(len(tokens))]
            assert set(decoded) <= task_prompts, ("prompts that are not the task's", set(decoded) - task_prompts)
            # The batch the loop trains on: groups of G answers per prompt, of their masked lengths, reused by the
            # epochs after the policy that sampled them; the advantages come from the sampled rewards.
            reach(group=group_size, tokens=mask.sum(axis=1), horizon=mask.sum(axis=1), states=len(set(decoded)),
                  data="old", advantages="estimated")
            counts["batches_with_answers_of_several_lengths"] += len(set(mask.sum(axis=1))) > 1
            rewards = [Fraction(ctx.impl.verifiable_reward(int(prompts[b, lengths[b] - 1]),
                                                           tuple(int(t) for t in prompts[b, :lengths[b] - 1]),
                                                           tuple(int(t) for t in tokens[b, lengths[b]:lengths[b]
                                                                                          + generated[b]]),
                                                           bool(sample["truncated"][b])))
                       for b in range(len(tokens))]
            expected_advantages = []
            for start in range(0, len(rewards), group_size):
                assert all(np.array_equal(prompts[start], prompts[b]) for b in range(start, start + group_size)), \
                    "a group's answers answer different prompts"
                group = rewards[start:start + group_size]
                counts["groups_with_unequal_rewards"] += len(set(group)) > 1
                expected_advantages += [float(r - (sum(group) - r) / (group_size - 1)) for r in group]
            expected_advantages = np.array(expected_advantages)
            old_logits, _ = ctx.impl.gru_forward(sample["params"], tokens)
            reach(actions=old_logits.shape[-1])  # each token chosen among the GRU's whole vocabulary
            own_old = np.take_along_axis(log_softmax(old_logits[:, :-1], axis=-1), tokens[:, 1:, None], axis=-1)[..., 0]
            bound = rounding_bound(8 * tokens.shape[1] * old_logits.shape[-1], float(np.abs(own_old).max()) + 1.0)
            for epoch, step in enumerate(steps):
                assert step["mask"].shape == mask.shape and np.array_equal(step["mask"], mask), \
                    ("the mask handed to the objective is not the response mask", step["mask"], mask)
                assert_close(np.broadcast_to(step["advantages"], mask.shape)[mask > 0],
                             np.broadcast_to(expected_advantages[:, None], mask.shape)[mask > 0],
                             rounding_bound(4 * group_size, 1.0), f"epoch {epoch}: advantages vs leave-one-out")
                assert_close(step["log_pi_old"][mask > 0], own_old[mask > 0], bound,
                             f"epoch {epoch}: the old log-probabilities against those of the sampling policy")
                counts["epochs_after_the_policy_moved"] += bool(
                    epoch > 0 and np.abs(step["log_pi"] - own_old)[mask > 0].max() > bound)

    result = check_property(ctx, contract_holds, st.tuples(
        st.integers(0, 2**32 - 1), st.integers(1, params.max_iterations), st.integers(1, params.max_prompts_per_batch),
        st.integers(2, params.max_group_size), st.integers(2, params.max_ppo_epochs), st.integers(1, 5),
        st.integers(2, 8)))
    return {**result, **counts, "prompt_types": len({task for task, _ in task_prompts})}

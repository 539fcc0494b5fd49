"""A verifiable-reward task for the GRU policy, and its training with RLOO and clipped PPO epochs.

Module step 4.5.3: an autoregressive policy answers three prompt types, chooses EOS itself, is
masked on prompt and padding, gets RLOO advantages within each group and several PPO epochs over
frozen old token log-probabilities. The reward comes from a checker, not from a model.

Prompt: a string s of 1-3 symbols from {a, b}, then the task token. Target answer:
copy -> s; reverse -> s reversed; count -> one ``a`` per ``a`` in s (unary count).
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .gru import gru_sample

EOS, SYMBOL_A, SYMBOL_B, COPY, REVERSE, COUNT, PAD = range(7)
VOCAB_SIZE = 7
TASKS = (COPY, REVERSE, COUNT)
LONGEST_STRING = 3
PROMPT_WIDTH = LONGEST_STRING + 1


def task_prompts() -> list[tuple[int, tuple[int, ...]]]:
    """Every (task token, string) pair of the task: 3 tasks x 14 strings."""
    strings = [s for n in range(1, LONGEST_STRING + 1) for s in itertools.product((SYMBOL_A, SYMBOL_B), repeat=n)]
    return [(task, s) for task in TASKS for s in strings]


def target_answer(task: int, string: Sequence[int]) -> tuple[int, ...]:
    """The correct answer without its EOS."""
    if task == COPY:
        return tuple(string)
    if task == REVERSE:
        return tuple(reversed(string))
    if task == COUNT:
        return (SYMBOL_A,) * sum(1 for s in string if s == SYMBOL_A)
    raise ValueError(f"unknown task token {task}")


def encode_prompts(prompts: Sequence[tuple[int, Sequence[int]]]) -> tuple[np.ndarray, np.ndarray]:
    """Token rows ``s + [task]`` padded to PROMPT_WIDTH, and their lengths."""
    rows = np.full((len(prompts), PROMPT_WIDTH), PAD, dtype=int)
    lengths = np.zeros(len(prompts), dtype=int)
    for i, (task, string) in enumerate(prompts):
        rows[i, :len(string) + 1] = (*string, task)
        lengths[i] = len(string) + 1
    return rows, lengths


def verifiable_reward(task: int, string: Sequence[int], answer: Sequence[int], truncated: bool) -> float:
    """The checker: position-wise agreement of ``answer + EOS`` with ``target + EOS``.

    reward = (matching positions) / max(len(answer), len(target)) with EOS counted, so 1 exactly
    for the correct answer. An answer cut by max_tokens never said it was finished and gets 0:
    the task's rule for truncation.

    Args:
      answer: the generated tokens, EOS included when the policy generated it.
      truncated: whether max_tokens cut the answer.
    """
    if truncated:
        return 0.0
    target = (*target_answer(task, string), EOS)
    answer = tuple(answer)
    matches = sum(a == t for a, t in zip(answer, target, strict=False))
    return matches / max(len(answer), len(target))


def answer_rewards(prompts: Sequence[tuple[int, Sequence[int]]], tokens: np.ndarray, prompt_length: np.ndarray,
                   generated_length: np.ndarray, truncated: np.ndarray) -> np.ndarray:
    """The checker's reward for each sampled row."""
    return np.array([
        verifiable_reward(task, string, tokens[i, prompt_length[i]:prompt_length[i] + generated_length[i]],
                          bool(truncated[i]))
        for i, (task, string) in enumerate(prompts)
    ])


def evaluate_reward(params: dict, samples_per_prompt: int, max_tokens: int, rng: np.random.Generator,
                    sample: Any = gru_sample) -> float:
    """Mean checker reward over every task prompt, ``samples_per_prompt`` answers each from ``sample``."""
    prompts = task_prompts() * samples_per_prompt
    rows, lengths = encode_prompts(prompts)
    tokens, generated, truncated = sample(params, rows, lengths, max_tokens, EOS, PAD, rng)
    return float(answer_rewards(prompts, tokens, lengths, generated, truncated).mean())


def train_gru_policy(seed: int, iterations: int, prompts_per_batch: int = 16, group_size: int = 4,
                     ppo_epochs: int = 4, epsilon: float = 0.2, learning_rate: float = 0.01,
                     hidden_size: int = 24, max_tokens: int = 5, eval_every: int = 10,
                     eval_samples_per_prompt: int = 8, ops: Any = None) -> dict[str, Any]:
    """Train the GRU policy on the task with RLOO advantages and clipped PPO epochs.

    Each iteration samples ``group_size`` answers for each of ``prompts_per_batch`` prompts,
    scores them with :func:`verifiable_reward`, computes RLOO advantages within each group,
    freezes the sampling policy's token log-probabilities, and takes ``ppo_epochs`` Adam steps on
    the token-level clipped surrogate (mean over all answer tokens of the batch).

    Args:
      seed: seeds one generator for initialisation, sampling and evaluation.
      iterations: sampling rounds.
      eval_every: iterations between evaluations with :func:`evaluate_reward`.
      ops: where the building blocks (GRU, sampling, mask, RLOO, objective, Adam) come from: the
        implementation under test, so that its bugs show in training (default: this package).

    Returns:
      ``{"eval_iterations", "eval_reward", "batch_reward", "truncated_fraction"}``, lists per
      evaluation or per iteration; the first evaluation is of the untrained policy.
    """
    ops = ops or importlib.import_module(__package__)
    rng = np.random.default_rng(seed)
    params = ops.gru_init(rng, VOCAB_SIZE, hidden_size)
    adam = ops.adam_init(params)
    all_prompts = task_prompts()
    history: dict[str, list] = {"eval_iterations": [], "eval_reward": [], "batch_reward": [],
                                "truncated_fraction": []}
    for iteration in range(iterations + 1):
        if iteration % eval_every == 0 or iteration == iterations:
            history["eval_iterations"].append(iteration)
            history["eval_reward"].append(evaluate_reward(params, eval_samples_per_prompt, max_tokens, rng,
                                                          ops.gru_sample))
        if iteration == iterations:
            break
        chosen = rng.integers(len(all_prompts), size=prompts_per_batch)
        prompts = [all_prompts[i] for i in chosen for _ in range(group_size)]
        rows, lengths = encode_prompts(prompts)
        tokens, generated, truncated = ops.gru_sample(params, rows, lengths, max_tokens, EOS, PAD, rng)
        rewards = answer_rewards(prompts, tokens, lengths, generated, truncated)
        advantages = ops.rloo_advantages(rewards, group_size)
        mask = ops.response_mask(tokens, lengths, generated, EOS)
        # The first epoch's forward pass is the sampling policy's, whose log-probabilities are the old ones.
        logits, cache = ops.gru_forward(params, tokens)
        log_pi_old = ops.token_log_probs(logits, tokens)
        for epoch in range(ppo_epochs):
            if epoch > 0:
                logits, cache = ops.gru_forward(params, tokens)
            _, d_log_pi = ops.token_clipped_surrogate(ops.token_log_probs(logits, tokens), log_pi_old,
                                                      advantages[:, None], mask, epsilon, "token_mean")
            grads = ops.gru_backward(params, cache, ops.token_log_probs_vjp(logits, tokens, d_log_pi))
            # Adam descends; the surrogate is maximised.
            params, adam = ops.adam_update(params, {k: -g for k, g in grads.items()}, adam, learning_rate)
        history["batch_reward"].append(float(rewards.mean()))
        history["truncated_fraction"].append(float(truncated.mean()))
    return history


def plot_gru_training(histories: Sequence[dict[str, Any]]) -> Any:
    """The training figure: median and interquartile range over seeds of the evaluated reward."""
    from matplotlib.figure import Figure

    iterations = np.asarray(histories[0]["eval_iterations"])
    rewards = np.array([h["eval_reward"] for h in histories])
    low, median, high = np.percentile(rewards, [25, 50, 75], axis=0)
    figure = Figure(figsize=(6, 3.5), layout="constrained")
    axes = figure.subplots()
    axes.fill_between(iterations, low, high, alpha=0.3, label="interquartile range")
    axes.plot(iterations, median, label=f"median of {len(histories)} seeds")
    axes.set_xlabel("iteration (one sampled batch, then PPO epochs on frozen old log-probs)")
    axes.set_ylabel("verifiable reward")
    axes.set_title("GRU policy, RLOO advantages, token-level clipped objective")
    axes.legend(loc="lower right")
    return figure

"""Sequence-level pieces of LLM policy gradients: causal log-probabilities, the response mask, groups.

Layout (module step 4.5.1): a batch row holds the prompt at positions 0..p-1, the generated
answer at p..p+n-1 and padding after it. A causal model's logits at position k score the token
at position k+1, so per-token arrays derived from logits have L - 1 entries per row and entry k
belongs to token k + 1. The response mask uses the same indexing, which keeps labels,
log-probabilities and mask shifted together.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .baselines import group_centered_advantages, group_normalized_advantages, leave_one_out_advantages
from .policies import log_softmax, softmax


def token_log_probs(logits: ArrayLike, tokens: ArrayLike) -> np.ndarray:
    """log π(y_{k+1} | y_{<=k}): the logits at position k score the token at position k + 1.

    Args:
      logits: shape [B, L, V]; ``logits[b, k]`` is the model's output after reading tokens 0..k.
      tokens: integer token ids, shape [B, L].

    Returns:
      shape [B, L - 1]; entry k is the log-probability of ``tokens[:, k + 1]``. The logits of the
      last position score nothing inside the row.
    """
    logits = np.asarray(logits, dtype=float)
    tokens = np.asarray(tokens)
    log_probs = log_softmax(logits[:, :-1])
    return np.take_along_axis(log_probs, tokens[:, 1:, None], axis=-1)[..., 0]


def token_log_probs_vjp(logits: ArrayLike, tokens: ArrayLike, d_log_probs: ArrayLike) -> np.ndarray:
    """The gradient with respect to the logits of Σ_k d_k log π(y_{k+1} | y_{<=k}).

    ∇_z log softmax(z)[y] = e_y - softmax(z) (module step 4.1.2), placed at the position whose
    logits score the token, i.e. one position to the left of it.

    Args:
      logits: shape [B, L, V].
      tokens: shape [B, L].
      d_log_probs: the weight of each token's log-probability, shape [B, L - 1], indexed like
        :func:`token_log_probs`.

    Returns:
      shape [B, L, V]; the last position's logits get zero.
    """
    logits = np.asarray(logits, dtype=float)
    tokens = np.asarray(tokens)
    d_log_probs = np.asarray(d_log_probs, dtype=float)
    scores = -softmax(logits[:, :-1])
    np.put_along_axis(scores, tokens[:, 1:, None],
                      np.take_along_axis(scores, tokens[:, 1:, None], axis=-1) + 1.0, axis=-1)
    d_logits = np.zeros_like(logits)
    d_logits[:, :-1] = d_log_probs[..., None] * scores
    return d_logits


def response_mask(tokens: ArrayLike, prompt_length: ArrayLike, generated_length: ArrayLike, eos_id: int
                  ) -> np.ndarray:
    """m = 1 for the answer's tokens up to and including the first generated EOS, 0 elsewhere.

    Module step 4.5.1: the prompt, the padding after the generated tokens and any token after the
    first generated EOS get 0; a generated EOS gets 1. Without an EOS (an answer cut at
    max_tokens) every generated token gets 1.

    Args:
      tokens: shape [B, L].
      prompt_length: p per row, shape [B], p >= 1.
      generated_length: how many tokens were written after the prompt, shape [B]; positions
        from p + generated_length on are padding.
      eos_id: the end-of-sequence token.

    Returns:
      float mask of shape [B, L - 1], indexed like :func:`token_log_probs` (entry k is token k + 1).
    """
    tokens = np.asarray(tokens)
    prompt_length = np.asarray(prompt_length)[:, None]
    generated_length = np.asarray(generated_length)[:, None]
    position = np.arange(1, tokens.shape[1])[None, :]
    generated = (position >= prompt_length) & (position < prompt_length + generated_length)
    is_eos = generated & (tokens[:, 1:] == eos_id)
    eos_before = np.cumsum(is_eos, axis=1) - is_eos
    return (generated & (eos_before == 0)).astype(float)


def sequence_log_prob(log_pi_t: ArrayLike, mask_t: ArrayLike) -> np.ndarray:
    """log π(y | x) = Σ_t m_t log π(y_t | x, y_<t), the masked sum over a row (module step 4.5.1).

    Args:
      log_pi_t: per-token log-probabilities, shape [B, T].
      mask_t: the response mask, shape [B, T].

    Returns:
      shape [B].
    """
    log_pi_t = np.asarray(log_pi_t, dtype=float)
    mask_t = np.asarray(mask_t, dtype=float)
    return (mask_t * np.where(mask_t > 0, log_pi_t, 0.0)).sum(axis=-1)


def _groups(r_i: ArrayLike, group_size: int) -> np.ndarray:
    r_i = np.asarray(r_i)
    if r_i.ndim != 1 or r_i.shape[0] % group_size:
        raise ValueError(f"rewards of shape {r_i.shape} do not split into contiguous groups of {group_size}")
    return r_i.reshape(-1, group_size)


def rloo_advantages(r_i: ArrayLike, group_size: int) -> np.ndarray:
    """A_i = R_i - (1/(G-1)) Σ_{j≠i} R_j within each prompt's group (module step 4.5.2).

    Ahmadian et al. (2024), RLOO. Exact for object arrays of fractions.

    Args:
      r_i: rewards of a batch of answers, shape [N * G]; answers i*G .. i*G + G - 1 share prompt i.
      group_size: G >= 2.

    Returns:
      shape [N * G].
    """
    return leave_one_out_advantages(_groups(r_i, group_size)).reshape(-1)


def group_mean_advantages(r_i: ArrayLike, group_size: int) -> np.ndarray:
    """A_i = R_i - mean_j R_j within each prompt's group; the mean includes R_i (module step 4.2.3).

    Args:
      r_i: shape [N * G], contiguous groups as in :func:`rloo_advantages`.
      group_size: G >= 1.
    """
    return group_centered_advantages(_groups(r_i, group_size)).reshape(-1)


def grpo_advantages(r_i: ArrayLike, group_size: int, epsilon: float) -> np.ndarray:
    """A_i = (R_i - mean_j R_j) / (std_j R_j + ε) within each group, as in GRPO's outcome supervision.

    Shao et al. (2024), DeepSeekMath, section 4.1.2; :func:`impl.baselines.group_normalized_advantages`
    (population std) on contiguous groups. ε > 0 keeps a group of equal rewards at advantage 0.

    Args:
      r_i: shape [N * G], contiguous groups as in :func:`rloo_advantages`.
      group_size: G >= 1.
      epsilon: the guard added to the standard deviation, > 0.
    """
    return group_normalized_advantages(_groups(r_i, group_size), epsilon).reshape(-1)

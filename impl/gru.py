"""A small GRU language-model policy with analytic backpropagation and sampling (module step 4.5.3).

The cell follows Cho et al. (2014) with the reset gate applied to the recurrent product:
z = σ(x W_z + h U_z + b_z), r = σ(x W_r + h U_r + b_r), n = tanh(x W_n + r ⊙ (h U_n) + b_n),
h' = (1 - z) ⊙ n + z ⊙ h, logits = h' W_o + b_o. Inputs are one-hot tokens, so x W is a row of W.
Parameters live in a dict of arrays; gradients use the same keys.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .policies import softmax

GruParams = dict[str, np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """σ(x) = (1 + tanh(x / 2)) / 2, in a new array (one allocation; the cell calls it on every step)."""
    y = np.multiply(x, 0.5)
    np.tanh(y, out=y)
    y += 1.0
    y *= 0.5
    return y


def gru_init(rng: np.random.Generator, vocab_size: int, hidden_size: int) -> GruParams:
    """Random parameters: uniform(±1/√H) as in common GRU initialisations, zero output layer.

    The zero output layer makes the untrained policy uniform over the vocabulary.
    """
    scale = 1.0 / np.sqrt(hidden_size)
    return {
        "w": rng.uniform(-scale, scale, (vocab_size, 3 * hidden_size)),
        "u": rng.uniform(-scale, scale, (hidden_size, 3 * hidden_size)),
        "b": np.zeros(3 * hidden_size),
        "w_out": np.zeros((hidden_size, vocab_size)),
        "b_out": np.zeros(vocab_size),
    }


def _cell(u: np.ndarray, h: np.ndarray, from_input: np.ndarray) -> tuple[np.ndarray, tuple]:
    """One step from the input's projection ``x W + b`` (rows of W: the inputs are one-hot tokens)."""
    hidden = h.shape[-1]
    from_state = h @ u
    gates = _sigmoid(from_input[:, :2 * hidden] + from_state[:, :2 * hidden])
    z, r = gates[:, :hidden], gates[:, hidden:]
    recurrent = from_state[:, 2 * hidden:]
    n = np.tanh(from_input[:, 2 * hidden:] + r * recurrent)
    h_next = (1.0 - z) * n + z * h
    return h_next, (h, z, r, n, recurrent)


def gru_forward(params: GruParams, tokens: ArrayLike) -> tuple[np.ndarray, list]:
    """Logits after reading each prefix: ``logits[:, k]`` is the distribution of token k + 1.

    Args:
      params: from :func:`gru_init`.
      tokens: shape [B, L].

    Returns:
      (logits of shape [B, L, V], cache for :func:`gru_backward`).
    """
    tokens = np.asarray(tokens)
    batch, length = tokens.shape
    # Every step's input projection at once, time first: [L, B, 3H].
    from_input = params["w"][tokens.T] + params["b"]
    h = np.zeros((batch, params["u"].shape[0]))
    states, cache = [], []
    for k in range(length):
        h, step = _cell(params["u"], h, from_input[k])
        states.append(h)
        cache.append(step)
    hidden_states = np.stack(states, axis=1)
    return hidden_states @ params["w_out"] + params["b_out"], [hidden_states, tokens, cache]


def gru_backward(params: GruParams, cache: list, d_logits: ArrayLike) -> GruParams:
    """Backpropagation through time: the gradient of Σ d_logits ⊙ logits with respect to each parameter.

    Args:
      params: the parameters used in the forward pass.
      cache: the second output of :func:`gru_forward`.
      d_logits: shape [B, L, V].
    """
    hidden_states, tokens, steps = cache
    d_logits = np.asarray(d_logits, dtype=float)
    grads = {key: np.zeros_like(value) for key, value in params.items()}
    grads["w_out"] = np.einsum("blh,blv->hv", hidden_states, d_logits)
    grads["b_out"] = d_logits.sum(axis=(0, 1))
    d_states = d_logits @ params["w_out"].T
    d_h = np.zeros_like(d_states[:, 0])
    batch, hidden = d_h.shape
    length = len(steps)
    d_inputs = np.empty((length, batch, 3 * hidden))
    for k in range(length - 1, -1, -1):
        h, z, r, n, recurrent = steps[k]
        d_h = d_h + d_states[:, k]
        d_input = d_inputs[length - 1 - k]
        d_z, d_r, d_n = d_input[:, :hidden], d_input[:, hidden:2 * hidden], d_input[:, 2 * hidden:]
        np.multiply(d_h * (1.0 - z), 1.0 - n * n, out=d_n)
        np.multiply(d_h * (h - n) * z, 1.0 - z, out=d_z)
        np.multiply(d_n * recurrent * r, 1.0 - r, out=d_r)
        d_state = d_input.copy()
        d_state[:, 2 * hidden:] *= r
        grads["b"] += d_input.sum(axis=0)
        grads["u"] += h.T @ d_state
        d_h = d_h * z + d_state @ params["u"].T
    # Row v of W's gradient sums the input gradients of the token-v positions, last step first (the
    # order of the recursion): a stable sort keeps that order, and a sum over the rows adds them one
    # after the other, as np.add.at does, at a tenth of its cost.
    token_order = tokens.T[::-1].reshape(-1)
    by_token = np.argsort(token_order, kind="stable")
    present, first = np.unique(token_order[by_token], return_index=True)
    sorted_inputs = d_inputs.reshape(-1, 3 * hidden)[by_token]
    for token, start, stop in zip(present, first, [*first[1:], len(by_token)], strict=True):
        grads["w"][token] = sorted_inputs[start:stop].sum(axis=0)
    return grads


def gru_sample(params: GruParams, prompts: ArrayLike, prompt_length: ArrayLike, max_tokens: int, eos_id: int,
               pad_id: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample one answer per prompt; the policy chooses EOS itself, max_tokens cuts it otherwise.

    Args:
      prompts: shape [B, P], row b's prompt in its first p_b positions (the rest is ignored).
      prompt_length: p per row, shape [B], 1 <= p <= P.
      max_tokens: the most tokens an answer may have, EOS included.
      eos_id: the end-of-sequence token; generation of a row stops after it.
      pad_id: written after each answer.
      rng: the source of randomness.

    Returns:
      (tokens of shape [B, P + max_tokens], generated_length of shape [B], truncated of shape [B]).
      ``truncated`` is true when an answer reached max_tokens without generating EOS: it was cut,
      not finished, and the task's reward rule decides what a cut answer earns.
    """
    prompts = np.asarray(prompts)
    prompt_length = np.asarray(prompt_length)
    batch = prompts.shape[0]
    width = prompts.shape[1] + max_tokens
    tokens = np.full((batch, width), pad_id, dtype=int)
    tokens[:, :prompts.shape[1]] = np.where(np.arange(prompts.shape[1]) < prompt_length[:, None], prompts, pad_id)
    generated_length = np.zeros(batch, dtype=int)
    finished = np.zeros(batch, dtype=bool)
    h = np.zeros((batch, params["u"].shape[0]))
    for k in range(width - 1):
        h, _ = _cell(params["u"], h, params["w"][tokens[:, k]] + params["b"])
        writing = (k + 1 >= prompt_length) & ~finished & (generated_length < max_tokens)
        if not writing.any():
            if (k + 1 >= prompt_length).all():
                break
            continue
        probabilities = softmax(h[writing] @ params["w_out"] + params["b_out"])
        cumulative = probabilities.cumsum(axis=-1)
        draws = rng.random((len(cumulative), 1))
        sampled = np.minimum((draws > cumulative).sum(axis=-1), probabilities.shape[-1] - 1)
        tokens[writing, k + 1] = sampled
        generated_length[writing] += 1
        finished[writing] = sampled == eos_id
    truncated = ~finished
    return tokens, generated_length, truncated

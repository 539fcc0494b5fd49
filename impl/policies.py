"""Policies and their score functions (gradients of log-probabilities)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def bernoulli_logit_score(a_i: ArrayLike, p: float) -> np.ndarray:
    """Score of a Bernoulli action with respect to its logit: d/dz log π(a) = a - p.

    With π(1) = p = σ(z), log π(1) = log σ(z) and log π(0) = log(1 - σ(z)), whose derivatives
    in z are 1 - p and -p (module step 4.2.5, S = A - p).

    Args:
      a_i: actions in {0, 1}, any shape; object arrays of ``fractions.Fraction`` stay exact.
      p: the probability of action 1.

    Returns:
      the score of each action, shaped like ``a_i``.
    """
    return np.asarray(a_i) - p


def softmax(z: ArrayLike) -> np.ndarray:
    """π = softmax(z) along the last axis, computed from shifted logits for stability.

    Args:
      z: logits, shape [..., K].

    Returns:
      probabilities, shape [..., K], summing to one along the last axis.
    """
    z = np.asarray(z, dtype=float)
    shifted = np.exp(z - z.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def log_softmax(z: ArrayLike) -> np.ndarray:
    """log π = z - logsumexp(z) along the last axis.

    Args:
      z: logits, shape [..., K].
    """
    z = np.asarray(z, dtype=float)
    top = z.max(axis=-1, keepdims=True)
    return z - top - np.log(np.exp(z - top).sum(axis=-1, keepdims=True))


def softmax_score(z: ArrayLike, a: ArrayLike) -> np.ndarray:
    """∇_z log π(a) = e_a - π for a softmax policy over logits z (module step 4.1.2).

    Args:
      z: logits, shape [..., K].
      a: chosen actions, integer array of shape [...], values in [0, K).

    Returns:
      the score with respect to the logits, shape [..., K].
    """
    probabilities = softmax(z)
    one_hot = np.eye(probabilities.shape[-1])[np.asarray(a)]
    return one_hot - probabilities


def tabular_softmax_score(theta: ArrayLike, s: ArrayLike, a: ArrayLike) -> np.ndarray:
    """∇_θ log π_θ(a|s) for a tabular softmax policy π_θ(·|s) = softmax(θ[s]).

    Only row s of θ moves log π_θ(a|s), and that row's gradient is e_a - π_θ(·|s) as in
    :func:`softmax_score`; every other row's gradient is zero.

    Args:
      theta: logits, shape [S, A].
      s: states, integer array of shape [...], values in [0, S).
      a: actions, integer array shaped like ``s``, values in [0, A).

    Returns:
      the score with respect to the whole table, shape [..., S, A].
    """
    theta = np.asarray(theta, dtype=float)
    s = np.asarray(s)
    row_score = softmax_score(theta[s], a)
    in_row = np.eye(theta.shape[0])[s]
    return in_row[..., :, None] * row_score[..., None, :]

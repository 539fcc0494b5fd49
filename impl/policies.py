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

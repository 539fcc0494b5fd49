"""Sample-based estimators of KL(π_old || π) from log-probability ratios."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def kl_k1(log_ratio: ArrayLike) -> np.ndarray:
    """k1 = -log r, with r = π(a)/π_old(a) and a ~ π_old.

    Unbiased for KL(π_old || π) but negative for every r > 1, so a batch mean can be negative.

    Args:
      log_ratio: log π(a) - log π_old(a) for actions sampled from π_old, any shape.
    """
    return -np.asarray(log_ratio, dtype=float)


def kl_k3(log_ratio: ArrayLike) -> np.ndarray:
    """k3 = (r - 1) - log r >= 0, with r = π(a)/π_old(a) and a ~ π_old (module step 4.4.4).

    Non-negative for every r > 0 since x - 1 >= log x, and unbiased for KL(π_old || π) because
    E_{π_old}[r - 1] = 0 (Schulman, "Approximating KL Divergence", 2020). Computed as
    expm1(log r) - log r, which keeps its precision when r is close to 1.

    Args:
      log_ratio: log π(a) - log π_old(a) for actions sampled from π_old, any shape.
    """
    log_ratio = np.asarray(log_ratio, dtype=float)
    return np.expm1(log_ratio) - log_ratio

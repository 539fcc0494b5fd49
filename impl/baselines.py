"""Group baselines: several answers to one prompt, each compared with the others.

Groups lie along the last axis: ``r_i`` has shape [..., G], one reward per answer. The
functions use only +, -, * and /, so object arrays of ``fractions.Fraction`` stay exact.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def group_centered_advantages(r_i: ArrayLike) -> np.ndarray:
    """A_i = R_i - mean_j R_j, the group mean as baseline (module step 4.2.3).

    The mean contains R_i itself, so this is not an action-independent baseline: under
    independent answers the estimator's expectation is (G - 1)/G times the gradient.

    Args:
      r_i: rewards of each group's G answers, shape [..., G], G >= 1.

    Returns:
      advantages shaped like ``r_i``; they sum to zero within each group.
    """
    r_i = np.asarray(r_i)
    return r_i - r_i.sum(axis=-1, keepdims=True) / r_i.shape[-1]


def leave_one_out_advantages(r_i: ArrayLike) -> np.ndarray:
    """A_i = R_i - (1/(G-1)) Σ_{j≠i} R_j, the leave-one-out baseline of RLOO.

    Ahmadian et al. (2024), "Back to Basics", section 3 (RLOO, after Kool et al., 2019); module
    step 4.2.4. The baseline excludes the answer it is compared with, so with independent
    answers it does not depend on that answer's action and the estimator stays unbiased.

    Args:
      r_i: rewards of each group's G answers, shape [..., G], G >= 2.

    Returns:
      advantages shaped like ``r_i``.
    """
    r_i = np.asarray(r_i)
    group_size = r_i.shape[-1]
    if group_size < 2:
        raise ValueError(f"leave-one-out needs at least 2 answers per group, got G = {group_size}")
    others = r_i.sum(axis=-1, keepdims=True) - r_i
    return r_i - others / (group_size - 1)

"""The week-16 syllabus's exercise, under the syllabus's own names, checked with ``--impl``.

The syllabus (week16/step-4) asks for ``mean_baseline``, ``rloo_baseline``, ``surrogate_loss``,
``ppo_clip_loss`` and ``clip_diagnostics``. Where the contract's name differs, the course accepts
the syllabus's name as an alias (``[tool.claims.aliases]`` in pyproject.toml): a loss stands in
for the per-sample objective it averages, a baseline for the advantage it is subtracted from
(docs/implementation-contract.md, "Other names"). So this module deletes the reference's
contract names it replaces, and the claims of the surrogate, the clipped objective and the group
baselines run through these functions. Everything else is the reference's, on purpose.
"""

import numpy as np

from impl import *  # noqa: F403  (every function this exercise does not ask for)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose

# The contract's names for what the syllabus names otherwise: the claims must reach the functions below.
del surrogate_objective, ppo_clip_objective, group_centered_advantages, leave_one_out_advantages  # noqa: F821


def mean_baseline(r_i):
    """b = (1/G) sum_j R_j for each group of G rewards (the last axis)."""
    rewards = np.asarray(r_i)
    return rewards.sum(axis=-1, keepdims=True) / rewards.shape[-1]


def rloo_baseline(r_i):
    """b_i = (1/(G-1)) sum_{j != i} R_j: the mean of the other answers' rewards (RLOO)."""
    rewards = np.asarray(r_i)
    return (rewards.sum(axis=-1, keepdims=True) - rewards) / (rewards.shape[-1] - 1)


def surrogate_loss(ratio_t, advantage_t):
    """-(1/N) sum_t r_t A_t: the loss whose minimum is the local surrogate's maximum."""
    return -np.mean(np.asarray(ratio_t) * np.asarray(advantage_t))


def ppo_clip_loss(ratio_t, advantage_t, epsilon):
    """-(1/N) sum_t min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t): PPO's clipped loss."""
    ratio_t, advantage_t = np.asarray(ratio_t), np.asarray(advantage_t)
    clipped = np.clip(ratio_t, 1 - epsilon, 1 + epsilon)
    return -np.mean(np.minimum(ratio_t * advantage_t, clipped * advantage_t))

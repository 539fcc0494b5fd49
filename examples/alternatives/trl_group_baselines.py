"""Group baselines in TRL's and OpenRLHF's idiom: a correct alternative to ``impl``'s group advantages.

Written from scratch after the structure of TRL's ``GRPOTrainer`` and ``RLOOTrainer`` (OpenRLHF's
``rloo`` advantage estimator is the same computation); every other function comes from ``impl``.
It must pass every claim whose verifiers call the functions below (``tests/test_correct_alternatives.py``).

Where ``impl`` first subtracts each group's first reward (so that a group of equal float rewards
gives exact zeros), the libraries take the statistics of the raw group directly:

- **Group mean and std of a grouped view.** GRPO reshapes the flat rewards to [N, G], takes
  ``mean`` and ``std`` along the group axis and broadcasts them back to every answer:
  A = (R - mean) / (std + ε). A group of equal float rewards then gives advantages of the size of
  the mean's rounding (about 1e-17 for rewards of order 1), not exact zeros.
- **The leave-one-out baseline from the group sum.** RLOO computes the baseline of answer i as
  (Σ_j R_j - R_i) / (G - 1), the mean of the other answers, in one vectorised expression.

The standard deviation is numpy's default, the population std (ddof = 0) that the contract
defines. TRL computes it with ``torch.std``, whose default is the sample std (ddof = 1): that
multiplies every advantage by sqrt((G - 1)/G), a different estimator from the contract's, so this
module keeps numpy's. Sums, means and the division by G - 1 use only + and /, so object arrays of
``Fraction`` stay exact where the contract requires it; the std-normalised functions are float,
as the contract allows.
"""

import numpy as np

from impl import *  # noqa: F403  (everything not defined below is the reference)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def group_centered_advantages(r_i):
    """R - mean(R) along the group axis."""
    rewards = np.asarray(r_i)
    return rewards - rewards.mean(axis=-1, keepdims=True)


def leave_one_out_advantages(r_i):
    """R_i minus the mean of the group's other answers, taken from the group sum."""
    rewards = np.asarray(r_i)
    group_size = rewards.shape[-1]
    if group_size < 2:
        raise ValueError(f"leave-one-out needs at least 2 answers per group, got G = {group_size}")
    baseline = (rewards.sum(axis=-1, keepdims=True) - rewards) / (group_size - 1)
    return rewards - baseline


def group_normalized_advantages(r_i, eps):
    """(R - mean R) / (std R + eps) along the group axis, population std."""
    rewards = np.asarray(r_i, dtype=float)
    return (rewards - rewards.mean(axis=-1, keepdims=True)) / (rewards.std(axis=-1, keepdims=True) + eps)


def _grouped(r_i, group_size):
    """The flat rewards of contiguous groups as a [N, G] view, as GRPO's ``rewards.view(-1, G)``."""
    rewards = np.asarray(r_i)
    if rewards.ndim != 1 or rewards.shape[0] % group_size:
        raise ValueError(f"rewards of shape {rewards.shape} do not split into contiguous groups of {group_size}")
    return rewards.reshape(-1, group_size)


def rloo_advantages(r_i, group_size):
    """RLOO on a flat batch: the group sum minus the answer's own reward, over G - 1."""
    return leave_one_out_advantages(_grouped(r_i, group_size)).reshape(-1)


def group_mean_advantages(r_i, group_size):
    """GRPO's centring without the std: each answer minus its group's mean, on a flat batch."""
    return group_centered_advantages(_grouped(r_i, group_size)).reshape(-1)


def grpo_advantages(r_i, group_size, epsilon):
    """GRPO's group-normalised advantages on a flat batch: mean and std of each group, broadcast back."""
    return group_normalized_advantages(_grouped(r_i, group_size), epsilon).reshape(-1)

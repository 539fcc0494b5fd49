"""A student's solution to the exercises of lessons 4.2 (baselines) and 4.3 (GAE), checked with ``--impl``.

Written from the lesson text, without looking at ``impl/``: the baselines of lesson 4.2 and the
TD / n-step / GAE estimators of lesson 4.3. Everything else the claims need (softmax policies,
score functions, PPO, the GRU task...) is taken from the reference implementation by the star
import below, so only the functions defined here are under test.

It contains ONE deliberate, realistic bug, for the report in ``examples/report/`` to show:
``leave_one_out_advantages`` averages the other G-1 rewards by dividing their sum by G, the
group size, instead of by G-1. Because the rewards are first taken relative to the group's first
reward (which keeps equal rewards at exact zeros), the wrong denominator also leaves a -R_1/G
term in every advantage; that term depends on the first answer's own action, so the estimator
is biased as well as mis-scaled: its expectation is (1 - 1/G^2) times the gradient (8/9 at
G = 3). The claims of step 4.2.4 (the identity A_LOO = G/(G-1) (R - mean R), unbiasedness) and
the exact variances of step 4.2.5 catch it; everything else of lessons 4.2 and 4.3 passes.
"""

import numpy as np

from impl import *  # noqa: F403  (the functions of lessons 4.1, 4.4, 4.5 and the tabular ones)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose

# ----------------------------------------------------------------------------- lesson 4.2: baselines


def baseline_advantages(g_t, b_t):
    """A_t = G_t - b(s_t); b_t is a number (constant baseline) or one value per step."""
    returns = np.asarray(g_t)
    baseline = np.asarray(b_t)
    return returns - baseline


def state_value_from_q(pi_a, q_a):
    """V(s) = sum over actions of pi(a|s) Q(s, a)."""
    probabilities, values = np.asarray(pi_a), np.asarray(q_a)
    return np.sum(probabilities * values, axis=-1)


def optimal_scalar_baseline(pi_a, q_a, score_a):
    """b* = E[Q ||grad log pi||^2] / E[||grad log pi||^2] (step 4.2.2)."""
    probabilities, values, scores = np.asarray(pi_a), np.asarray(q_a), np.asarray(score_a)
    squared_norms = np.sum(scores * scores, axis=-1)
    weights = probabilities * squared_norms
    return np.sum(weights * values, axis=-1) / np.sum(weights, axis=-1)


def _relative_to_first(r_i):
    # Baselines only see differences between rewards. Subtracting the first reward before averaging
    # makes a group of equal float rewards give exact zeros (0.1 + 0.1 + 0.1 is not 3 * 0.1).
    rewards = np.asarray(r_i)
    return rewards - rewards[..., :1]


def group_centered_advantages(r_i):
    """A_i = R_i - mean of the group (the mean includes R_i)."""
    diffs = _relative_to_first(r_i)
    return diffs - np.mean(diffs, axis=-1, keepdims=True)


def leave_one_out_advantages(r_i):
    """A_i = R_i - mean of the OTHER answers' rewards (RLOO)."""
    diffs = _relative_to_first(r_i)
    group_size = diffs.shape[-1]
    if group_size < 2:
        raise ValueError("leave-one-out needs at least two answers per group")
    sum_of_others = np.sum(diffs, axis=-1, keepdims=True) - diffs
    return diffs - sum_of_others / group_size  # the deliberate bug: the mean of G-1 others divides by G-1


def group_normalized_advantages(r_i, eps):
    """(R_i - mean) / (std + eps), population std over the group (GRPO)."""
    if not eps > 0:
        raise ValueError("eps must be positive")
    centered = group_centered_advantages(np.asarray(r_i, dtype=float))
    std = np.sqrt(np.mean(centered**2, axis=-1, keepdims=True))
    return centered / (std + eps)


# ----------------------------------------------------------------------------- lesson 4.3: TD, n-step, GAE
# Time is the first axis; every array is [T] or [T, n_envs]. terminated_t[t] = 1 when s_{t+1} is a real
# terminal state (no bootstrap); trace_cut_t[t] = 1 when step t+1 belongs to another trace (a reset
# follows, or the buffer stops there).


def td_errors(r_t, v_t, v_tp1, terminated_t, gamma):
    """delta_t = r_t + gamma V(s_{t+1}) - V(s_t), without the V(s_{t+1}) term after a termination."""
    rewards, values, next_values = np.asarray(r_t), np.asarray(v_t), np.asarray(v_tp1)
    bootstrap = np.where(np.asarray(terminated_t) != 0, 0, next_values)
    return rewards + gamma * bootstrap - values


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    """A_t = delta_t + gamma lambda A_{t+1}, the sum restarting after every trace cut.

    ``carry`` is the first advantage of the next buffer when this buffer is one piece of a longer
    trajectory; it is used only if the last step does not cut the trace.
    """
    deltas = td_errors(r_t, v_t, v_tp1, terminated_t, gamma)
    if deltas.dtype != object:
        deltas = deltas.astype(float)
    cuts = np.asarray(trace_cut_t) != 0
    advantages = np.empty_like(deltas)
    steps = deltas.shape[0]
    later = 0 if carry is None else np.asarray(carry)
    for t in range(steps - 1, -1, -1):
        goes_on = 1 - cuts[t].astype(int)
        advantages[t] = deltas[t] + gamma * lambda_ * goes_on * later
        later = advantages[t]
    return advantages


def n_step_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, n):
    """A_t^(n) = r_t + ... + gamma^(n-1) r_{t+n-1} + gamma^n V(s_{t+n}) - V(s_t), stopped at the trace's end."""
    if n < 1:
        raise ValueError("n must be at least 1")
    arrays = [np.asarray(x) for x in (r_t, v_t, v_tp1, terminated_t, trace_cut_t)]
    steps = arrays[0].shape[0]
    rewards, values, next_values, terminated, cuts = (np.broadcast_to(x, arrays[0].shape).reshape(steps, -1)
                                                      for x in arrays)
    exact = object in (rewards.dtype, values.dtype, next_values.dtype)
    result = np.empty(rewards.shape, dtype=object if exact else float)
    for env in range(rewards.shape[1]):
        for t in range(steps):
            total, discount, k = -values[t, env], 1, t
            while True:
                total = total + discount * rewards[k, env]
                discount = discount * gamma
                if k - t == n - 1 or cuts[k, env] != 0 or k == steps - 1:
                    if terminated[k, env] == 0:
                        total = total + discount * next_values[k, env]
                    break
                k += 1
            result[t, env] = total
    return result.reshape(arrays[0].shape)


def value_targets(v_old_t, advantage_t):
    """The critic's regression target: V_old(s_t) + A_t, with the raw (not normalised) advantages."""
    return np.asarray(v_old_t) + np.asarray(advantage_t)


def normalize_advantages(advantage_t, eps=1e-8):
    """Batch normalisation of the actor's advantages: zero mean, unit std."""
    advantages = np.asarray(advantage_t, dtype=float)
    return (advantages - advantages.mean()) / (advantages.std() + eps)

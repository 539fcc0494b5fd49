"""GAE in Stable-Baselines3's idiom: a correct alternative to ``impl.gae_advantages``.

Written from scratch after the structure of SB3's ``RolloutBuffer`` (``collect_rollouts`` and
``compute_returns_and_advantage``); every other function comes from ``impl``. It must pass every
claim whose verifiers call ``gae_advantages`` (``tests/test_gae_alternatives.py``); its pair,
the CleanRL idiom, is ``zoo.zeroed_truncation_bootstrap`` (see ``examples/README.md``).

SB3 keeps one flag per step and no separate next-state value:

- **Truncation is folded into the reward.** When a time limit ends an episode, ``collect_rollouts``
  evaluates the critic on ``infos["terminal_observation"]`` and adds γ·V(final observation) to
  the reward of the truncated step. A true termination adds nothing.
- **One done flag cuts everything.** ``episode_starts[t + 1]`` (the previous step was done)
  zeroes both the next value and the carried advantage: after the fold, a truncated step has
  already received its bootstrap, so zeroing the next value loses nothing.
- **The next value is the next row's value.** An ordinary step reads V(s_{t+1}) from
  ``values[t + 1]``; only the buffer's last row reads ``last_values``, the critic on the
  observation after the last step.

Mapped onto the contract's arguments (``docs/implementation-contract.md``): SB3's done flag is
``trace_cut_t`` (a reset follows, or a fragment ends: both stop the recursion, and both bootstrap
unless ``terminated_t``), the folded reward is r_t + γ V(s_{t+1}) on the cut steps that are not
terminations, with V(s_{t+1}) the stored ``v_tp1_t`` (the final observation's value before a
reset, the next buffer's first state at a buffer edge), and ``last_values`` is ``v_tp1`` of the
last row. Every other step's ``v_tp1_t`` is never read: the contract's domain has it equal to
``v_t`` of the next row. ``carry``, which SB3 does not have, starts the accumulator SB3 starts at 0.

So the two agree on every buffer a rollout can store, where ``terminated_t`` implies
``trace_cut_t`` (a reset follows a termination) and ``v_tp1_t = v_t[t + 1]`` wherever
``trace_cut_t`` is 0; outside that domain they differ, e.g. a termination without a cut
bootstraps here from the next row. SB3 stores float32; this module computes in float64, and in
exact arithmetic for ``Fraction`` object arrays, so the differences from ``impl`` are rounding only.
"""

import numpy as np

from impl import *  # noqa: F403  (everything but gae_advantages is the reference)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    """SB3's backward pass over a buffer whose truncations are folded into the rewards."""
    rewards, values, final_values = (np.asarray(x) for x in (r_t, v_t, v_tp1))
    exact = object in (rewards.dtype, values.dtype, final_values.dtype)
    dones = np.asarray(trace_cut_t) != 0
    cut_but_not_terminal = dones & (np.asarray(terminated_t) == 0)
    # collect_rollouts: rewards[idx] += gamma * V(terminal_observation) where a time limit cut the episode.
    rewards = rewards + np.where(cut_but_not_terminal, gamma * final_values, 0)
    advantages = np.empty(rewards.shape, dtype=object if exact else float)
    steps = rewards.shape[0]
    last_gae_lam = 0 if carry is None else np.asarray(carry)
    for step in reversed(range(steps)):
        next_non_terminal = 1 - dones[step].astype(int)
        next_values = final_values[step] if step == steps - 1 else values[step + 1]
        delta = rewards[step] + gamma * next_values * next_non_terminal - values[step]
        last_gae_lam = delta + gamma * lambda_ * next_non_terminal * last_gae_lam
        advantages[step] = last_gae_lam
    return advantages

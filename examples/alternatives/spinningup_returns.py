"""Returns and GAE with ``scipy.signal.lfilter``, the rllab / Spinning Up idiom: a correct alternative to ``impl``'s.

Written from scratch after rllab's ``discount_cumsum`` and Spinning Up's ``PPOBuffer.finish_path``;
every other function comes from ``impl``. It must pass every claim whose verifiers call the
functions below and give them floats (``tests/test_correct_alternatives.py``).

- **A discounted suffix sum is a linear filter.** y_t = x_t + γ y_{t+1} is the IIR filter
  ``lfilter([1], [1, -γ], x[::-1])[::-1]``, run over the reversed time axis: the reward-to-go G_t,
  and with γλ in place of γ the GAE advantages from the TD errors.
- **One path at a time.** Spinning Up calls ``finish_path(last_val)`` when an episode ends or the
  buffer is full, and filters that path's slice only: here every uncut fragment of each
  environment's column is its own path, so the recursion never crosses a ``trace_cut_t``. The
  bootstrap V(s_{t+1}) of each step is the stored ``v_tp1`` (zero after a termination, as
  ``last_val = 0`` is there), and ``carry`` enters the last fragment as a discounted tail.
- **Weights from the returns.** γ^t G_t and the full return R(τ) = G_0 repeated over t, both
  computed from the filtered G.

``lfilter`` computes in floats only (it rejects object arrays), so this module breaks the
contract's "Exact arithmetic" assumption for ``discounted_returns``, ``discounted_objective_weights``,
``full_return_weights`` and ``gae_advantages``: the exact checks, which pass ``Fraction`` arrays
to these, cannot accept it (``tests/test_correct_alternatives.py`` lists them), while every check
that gives them floats must pass.
"""

import numpy as np
from scipy.signal import lfilter

from impl import *  # noqa: F403  (everything not defined below is the reference)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def _discount_cumsum(x, discount):
    """y_t = Σ_{k>=t} discount^{k-t} x_k along the first axis: rllab's discount_cumsum."""
    return lfilter([1.0], [1.0, -float(discount)], np.asarray(x, dtype=float)[::-1], axis=0)[::-1]


def discounted_returns(r_t, gamma):
    """G_t = r_{t+1} + γ G_{t+1}, filtered over the reversed time axis."""
    return _discount_cumsum(r_t, gamma)


def discounted_objective_weights(r_t, gamma):
    """γ^t G_t."""
    returns = discounted_returns(r_t, gamma)
    powers = float(gamma) ** np.arange(returns.shape[0])
    return powers.reshape((-1,) + (1,) * (returns.ndim - 1)) * returns


def full_return_weights(r_t, gamma):
    """R(τ) = G_0 at every step."""
    returns = discounted_returns(r_t, gamma)
    return np.broadcast_to(returns[:1], returns.shape).copy()


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    """Spinning Up's finish_path on every uncut fragment of every environment's column."""
    rewards, values, next_values = (np.asarray(x, dtype=float) for x in (r_t, v_t, v_tp1))
    not_terminal = 1.0 - (np.asarray(terminated_t) != 0)
    cut = np.asarray(trace_cut_t) != 0
    deltas = rewards + float(gamma) * not_terminal * next_values - values
    discount = float(gamma) * float(lambda_)
    steps = deltas.shape[0]
    columns, cut_columns = deltas.reshape(steps, -1), cut.reshape(steps, -1)
    tails = np.zeros(columns.shape[1]) if carry is None else np.broadcast_to(
        np.asarray(carry, dtype=float), deltas.shape[1:]).reshape(-1)
    advantages = np.empty_like(columns)
    for column in range(columns.shape[1]):
        ends = [*np.flatnonzero(cut_columns[:-1, column]) + 1, steps]
        start = 0
        for end in ends:
            path = _discount_cumsum(columns[start:end, column], discount)
            if end == steps and not cut_columns[-1, column]:
                # The trace goes on past the buffer: Â_T = carry, discounted back to every step of the path.
                path = path + discount ** np.arange(end - start, 0, -1) * tails[column]
            advantages[start:end, column] = path
            start = end
    return advantages.reshape(deltas.shape)

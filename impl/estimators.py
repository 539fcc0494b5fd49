"""Score-function (REINFORCE) gradient estimators."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def score_function_gradient(f_i: ArrayLike, score_i: ArrayLike) -> np.ndarray:
    """The score-function estimate (1/N) Σ_i f(x_i) ∇_θ log p_θ(x_i).

    The log-derivative identity ∇ E_p[f] = E_p[f ∇ log p] (Williams, 1992) makes this an
    unbiased estimate of the gradient of E_p[f] when the x_i are drawn from p_θ and f does not
    depend on θ; with advantages as f it is the group estimator (1/G) Σ_i A_i S_i of step 4.2.3.

    Args:
      f_i: weights of the N samples (returns, rewards or advantages), shape [..., N].
      score_i: ∇_θ log p_θ(x_i), shape [..., N, *param_shape]; a scalar parameter needs no
        trailing axes.

    Returns:
      the estimate, shape [..., *param_shape]. Exact for object arrays of fractions.
    """
    f_i = np.asarray(f_i)
    score_i = np.asarray(score_i)
    trailing = score_i.ndim - f_i.ndim
    weighted = f_i.reshape(f_i.shape + (1,) * trailing) * score_i
    return weighted.sum(axis=f_i.ndim - 1) / f_i.shape[-1]


def reinforce_gradient(w_t: ArrayLike, score_t: ArrayLike) -> np.ndarray:
    """REINFORCE over trajectories: ĝ = (1/N) Σ_{i=1}^N Σ_t w_{i,t} ∇_θ log π_θ(a_{i,t}|s_{i,t}).

    Williams (1992); module step 4.1.5. With w_{i,t} = R(τ_i) it is the estimator of step 4.1.3,
    with reward-to-go G_t or γ^t G_t the causal ones of step 4.1.4 (see ``impl.returns``). Each
    trajectory contributes the sum over its steps; the trajectories are then averaged, so this is
    :func:`score_function_gradient` at every step, summed over time.

    Args:
      w_t: weights, time-major, shape [T, N]: step t of trajectory i at ``w_t[t, i]``. Steps past
        the end of a shorter trajectory carry weight 0. Axes between T and N, [T, ..., N], are
        independent batches (e.g. [T, M, 1] gives each of M trajectories its own estimate).
      score_t: ∇_θ log π_θ(a_{i,t}|s_{i,t}), shape [T, ..., N, *param_shape].

    Returns:
      the estimate, shape [..., *param_shape]. Exact for object arrays of fractions.
    """
    return score_function_gradient(w_t, score_t).sum(axis=0)

"""Adam and global gradient-norm clipping on flat ``dict[str, np.ndarray]`` parameters."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

Params = dict[str, np.ndarray]


class AdamState(NamedTuple):
    """First and second moment estimates and the number of updates taken."""

    step: int
    first_moment: Params
    second_moment: Params


def adam_init(params: Params) -> AdamState:
    """Zero moments for every parameter."""
    return AdamState(0, {k: np.zeros_like(v) for k, v in params.items()},
                     {k: np.zeros_like(v) for k, v in params.items()})


def adam_update(params: Params, grads: Params, state: AdamState, learning_rate: float, beta1: float = 0.9,
                beta2: float = 0.999, eps: float = 1e-8) -> tuple[Params, AdamState]:
    """One Adam step (Kingma and Ba, 2015, Algorithm 1), descending the gradient.

    θ ← θ - α m̂ / (√v̂ + ε), with m̂ = m / (1 - β1^t) and v̂ = v / (1 - β2^t) the bias-corrected
    moments of the gradient.

    Args:
      params: current parameters.
      grads: the loss's gradient, same keys and shapes.
      state: the moments from the previous step (or :func:`adam_init`).
      learning_rate: α.
      beta1, beta2: decay rates of the moment estimates.
      eps: ε, added to √v̂ (PyTorch's placement; the paper's too).

    Returns:
      the new parameters and the new state; the inputs are not modified.
    """
    step = state.step + 1
    first, second, updated = {}, {}, {}
    for name, value in params.items():
        first[name] = beta1 * state.first_moment[name] + (1 - beta1) * grads[name]
        second[name] = beta2 * state.second_moment[name] + (1 - beta2) * grads[name] * grads[name]
        corrected_first = first[name] / (1 - beta1**step)
        corrected_second = second[name] / (1 - beta2**step)
        updated[name] = value - learning_rate * corrected_first / (np.sqrt(corrected_second) + eps)
    return updated, AdamState(step, first, second)


def global_norm(grads: Params) -> float:
    """‖g‖ = sqrt(Σ over all parameters of the squared entries)."""
    return float(np.sqrt(sum(float(np.sum(g * g)) for g in grads.values())))


def clip_by_global_norm(grads: Params, max_norm: float) -> tuple[Params, float]:
    """Rescale every gradient by min(1, max_norm / ‖g‖) (Pascanu et al., 2013).

    Returns:
      the clipped gradients and ‖g‖ before clipping (a PPO diagnostic, step 4.4.4).
    """
    norm = global_norm(grads)
    if norm <= max_norm:
        return grads, norm
    scale = max_norm / norm
    return {name: g * scale for name, g in grads.items()}, norm

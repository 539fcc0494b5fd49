"""A small actor-critic MLP with analytic backpropagation: a policy head and a value head.

Each head has its own tanh trunk, as in CleanRL's ``ppo.py`` (Huang et al., 2022, "The 37
Implementation Details of Proximal Policy Optimization"), with orthogonal initialisation:
gain √2 for hidden layers, 0.01 for the policy's logits and 1 for the value, biases zero.
Parameters live in one flat ``dict[str, np.ndarray]`` so that the optimiser and gradient
clipping treat them uniformly: ``policy.w0``, ``policy.b0``, ..., ``value.w0``, ...
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

Params = dict[str, np.ndarray]


def orthogonal_init(rng: np.random.Generator, n_in: int, n_out: int, gain: float) -> np.ndarray:
    """A [n_in, n_out] matrix with orthonormal rows or columns, times ``gain`` (Saxe et al., 2014)."""
    q, r = np.linalg.qr(rng.standard_normal((max(n_in, n_out), min(n_in, n_out))))
    q = q * np.sign(np.diag(r))
    return gain * (q if n_in >= n_out else q.T)


def actor_critic_init(rng: np.random.Generator, obs_size: int, n_actions: int,
                      hidden: tuple[int, ...] = (64, 64)) -> Params:
    """Parameters of a policy head (obs -> logits over ``n_actions``) and a value head (obs -> V)."""
    params: Params = {}
    for head, n_out, output_gain in (("policy", n_actions, 0.01), ("value", 1, 1.0)):
        sizes = (obs_size, *hidden, n_out)
        for layer, (n_in, n_next) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            gain = output_gain if layer == len(sizes) - 2 else np.sqrt(2.0)
            params[f"{head}.w{layer}"] = orthogonal_init(rng, n_in, n_next, gain)
            params[f"{head}.b{layer}"] = np.zeros(n_next)
    return params


def _layers(params: Params, head: str) -> list[tuple[np.ndarray, np.ndarray]]:
    layers, layer = [], 0
    while f"{head}.w{layer}" in params:
        layers.append((params[f"{head}.w{layer}"], params[f"{head}.b{layer}"]))
        layer += 1
    return layers


class ActorCriticOutput(NamedTuple):
    """Logits [B, K], values [B], and the activations the backward pass needs."""

    logits: np.ndarray
    values: np.ndarray
    activations: dict[str, list[np.ndarray]]


def _head_forward(params: Params, head: str, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    activations = [x]
    *hidden, (w_out, b_out) = _layers(params, head)
    for w, b in hidden:
        x = np.tanh(x @ w + b)
        activations.append(x)
    return x @ w_out + b_out, activations


def actor_critic_forward(params: Params, obs: ArrayLike) -> ActorCriticOutput:
    """Logits and values for a batch of observations, shape [B, obs_size]."""
    obs = np.asarray(obs, dtype=np.float64)
    logits, policy_activations = _head_forward(params, "policy", obs)
    values, value_activations = _head_forward(params, "value", obs)
    return ActorCriticOutput(logits, values[:, 0], {"policy": policy_activations, "value": value_activations})


def policy_logits(params: Params, obs: ArrayLike) -> np.ndarray:
    """The policy head alone: logits [B, K] for observations [B, obs_size]."""
    return _head_forward(params, "policy", np.asarray(obs, dtype=np.float64))[0]


def _head_backward(params: Params, head: str, activations: list[np.ndarray], d_out: np.ndarray,
                   grads: Params) -> None:
    layers = _layers(params, head)
    for layer in range(len(layers) - 1, -1, -1):
        x = activations[layer]
        grads[f"{head}.w{layer}"] = x.T @ d_out
        grads[f"{head}.b{layer}"] = d_out.sum(axis=0)
        if layer > 0:
            # tanh' = 1 - tanh², and x is the tanh output of the previous layer.
            d_out = (d_out @ layers[layer][0].T) * (1.0 - x * x)


def actor_critic_backward(params: Params, output: ActorCriticOutput, d_logits: ArrayLike, d_values: ArrayLike
                          ) -> Params:
    """∂loss/∂params from ∂loss/∂logits [B, K] and ∂loss/∂values [B], by the chain rule.

    Args:
      params: the parameters the forward pass used.
      output: what :func:`actor_critic_forward` returned for the same batch, both heads.
      d_logits: the loss's gradient with respect to each logit.
      d_values: the loss's gradient with respect to each value.

    Returns:
      a gradient for every parameter, same keys and shapes as ``params``.
    """
    grads: Params = {}
    _head_backward(params, "policy", output.activations["policy"], np.asarray(d_logits, dtype=np.float64), grads)
    _head_backward(params, "value", output.activations["value"],
                   np.asarray(d_values, dtype=np.float64)[:, None], grads)
    return grads

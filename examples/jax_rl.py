"""The week-16 exercise's seven functions in JAX: the same loss module as ``torch_rl.py``, written with jax.numpy.

The module imports jax, so the harness hands these functions ``jax.Array`` values in float64 (which
is why 64-bit floats are switched on here: JAX computes in float32 by default, and the harness
judges in float64) and reads their results back as NumPy's. The losses' gradients are taken by
central differences, as for NumPy code; checks that pass exact Fractions run their float twins or are
judged by replay, in float64 (docs/implementation-contract.md). Needs ``pip install jax``.

    pytest claims/ --claims-impl examples.jax_rl -k "reinforce_loss or surrogate_loss or ppo_clip_loss"
"""

import jax
import jax.numpy as jnp

from impl import *  # noqa: F403  (every function the exercise does not ask for)
from impl import __all__  # noqa: F401

jax.config.update("jax_enable_x64", True)
__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def _masked_mean(x, mask):
    return x.mean() if mask is None else (x * mask).sum() / mask.sum()


def _per_token(adv, logp):
    return adv if adv.ndim == logp.ndim else adv[..., None]


def reinforce_loss(logp, adv, mask=None):
    return -_masked_mean(_per_token(jax.lax.stop_gradient(adv), logp) * logp, mask)


def surrogate_loss(logp, logp_old, adv, mask=None):
    ratio = jnp.exp(logp - jax.lax.stop_gradient(logp_old))
    return -_masked_mean(ratio * _per_token(jax.lax.stop_gradient(adv), logp), mask)


def ppo_clip_loss(logp, logp_old, adv, eps=0.2, mask=None):
    ratio = jnp.exp(logp - jax.lax.stop_gradient(logp_old))
    adv = _per_token(jax.lax.stop_gradient(adv), logp)
    return -_masked_mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - eps, 1 + eps) * adv), mask)


def clip_diagnostics(logp, logp_old, adv, eps=0.2, mask=None):
    ratio = jnp.exp(logp - logp_old)
    adv = _per_token(adv, logp)
    outside = ((ratio < 1 - eps) | (ratio > 1 + eps)).astype(logp.dtype)
    active = (((adv > 0) & (ratio > 1 + eps)) | ((adv < 0) & (ratio < 1 - eps))).astype(logp.dtype)
    return {"outside_fraction": _masked_mean(outside, mask), "active_fraction": _masked_mean(active, mask)}


def mean_baseline(rewards):
    return jnp.broadcast_to(rewards.mean(axis=-1, keepdims=True), rewards.shape)


def rloo_baseline(rewards):
    return (rewards.sum(axis=-1, keepdims=True) - rewards) / (rewards.shape[-1] - 1)


def value_iteration(P, R, gamma, n_iterations, v_0=None):
    v = jnp.zeros(R.shape[0], dtype=R.dtype) if v_0 is None else jnp.asarray(v_0, dtype=R.dtype)
    for _ in range(n_iterations):
        v = (R + gamma * (P * v).sum(axis=-1)).max(axis=-1)
    return v

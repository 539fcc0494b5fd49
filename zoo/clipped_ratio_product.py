"""Pitfall: the clip applied to the product of the token ratios (module step 4.5.1).

``token_clipped_surrogate`` clips each answer's sequence ratio ρ_b = Π_t r_bt and uses it for every
token of the answer, instead of clipping each token's ratio r_bt on its own. The product of many
ratios close to 1 leaves [1-ε, 1+ε] quickly, so whole answers stop learning at once.
"""

import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def token_clipped_surrogate(log_pi_t, log_pi_old_t, a_t, mask_t, epsilon, aggregation):
    weights = impl.aggregation_weights(mask_t, aggregation)
    mask_t = np.asarray(mask_t, dtype=float)
    log_ratio = np.where(mask_t > 0, np.asarray(log_pi_t, dtype=float) - np.asarray(log_pi_old_t, dtype=float), 0.0)
    ratio = np.broadcast_to(np.exp(log_ratio.sum(axis=-1, keepdims=True)), weights.shape)
    a_t = np.broadcast_to(np.asarray(a_t, dtype=float), weights.shape)
    unclipped = ratio * a_t
    clipped = np.clip(ratio, 1 - epsilon, 1 + epsilon) * a_t
    active = unclipped <= clipped
    objective = float((weights * np.minimum(unclipped, clipped)).sum())
    # ∂ρ_b/∂log π_bt = ρ_b m_bt: every unclipped term of the answer reaches every one of its tokens.
    per_answer = np.where(active, weights * unclipped, 0.0).sum(axis=-1, keepdims=True)
    return objective, per_answer * (mask_t > 0)

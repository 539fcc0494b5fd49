"""Pitfall: labels not shifted, so each position's logits score their own token (module step 4.5.1).

``token_log_probs`` gathers log softmax(logits[:, k]) at ``tokens[:, k]`` instead of
``tokens[:, k + 1]``: a causal model's logits at position k predict the next token, so every
log-probability belongs to the wrong token (and the model is rewarded for copying its input).
"""

import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def token_log_probs(logits, tokens):
    logits, tokens = np.asarray(logits, dtype=float), np.asarray(tokens)
    log_probs = impl.log_softmax(logits[:, :-1])
    return np.take_along_axis(log_probs, tokens[:, :-1, None], axis=-1)[..., 0]

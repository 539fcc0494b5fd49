"""Pitfall: the generated EOS excluded from the response mask (module step 4.5.1).

``response_mask`` stops before the first generated EOS instead of including it, so the decision
to stop answering never receives a gradient.
"""

import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def response_mask(tokens, prompt_length, generated_length, eos_id):
    mask = impl.response_mask(tokens, prompt_length, generated_length, eos_id)
    return mask * (np.asarray(tokens)[:, 1:] != eos_id)

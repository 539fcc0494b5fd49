"""Pitfall: the prompt included in the response mask (module step 4.5.1).

``response_mask`` gives 1 to the prompt's tokens as well as to the answer's (every scored
position before the end of the answer), so the policy gradient also trains the model to produce
the prompt it was given.
"""

import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def response_mask(tokens, prompt_length, generated_length, eos_id):
    mask = impl.response_mask(tokens, prompt_length, generated_length, eos_id)
    position = np.arange(1, np.asarray(tokens).shape[1])[None, :]
    in_prompt = position < np.asarray(prompt_length)[:, None]
    return np.maximum(mask, in_prompt.astype(float))

"""Softmax, log-softmax and entropy in SciPy's idiom, from ``scipy.special``: a correct alternative to ``impl``'s.

Code that already depends on SciPy rarely writes these itself: ``scipy.special.softmax``,
``log_softmax`` and ``entr`` (the elementwise -x log x, 0 at x = 0) do the stabilised computation.
Every other function comes from ``impl``; the module must pass every claim whose verifiers call
the functions below (``tests/test_correct_alternatives.py``).

- ``softmax`` and ``log_softmax`` along the last axis, where the contract puts the actions.
- ``categorical_entropy`` as ``entr(softmax(z)).sum(-1)``: from the probabilities, not from
  ``impl``'s -Σ π log π with a separate log-softmax, so a probability that underflows to 0
  contributes exactly 0.

SciPy's functions are float-only; the contract asks none of these to be exact.
"""

import numpy as np
from scipy import special

from impl import *  # noqa: F403  (everything not defined below is the reference)
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def softmax(z):
    """scipy.special.softmax along the last axis."""
    return special.softmax(np.asarray(z, dtype=float), axis=-1)


def log_softmax(z):
    """scipy.special.log_softmax along the last axis."""
    return special.log_softmax(np.asarray(z, dtype=float), axis=-1)


def categorical_entropy(logits):
    """Σ_a entr(π_a) = -Σ_a π_a log π_a, from scipy's softmax."""
    return special.entr(softmax(logits)).sum(axis=-1)

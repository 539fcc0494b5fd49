"""Pitfall: RLOO's sequence advantages computed with the group mean (module steps 4.5.2 and 4.2.4).

``rloo_advantages`` subtracts the mean of the whole group, R_i included, instead of the mean of the
other G-1 answers: the baseline then depends on the answer it scores, and the expected update is
(G-1)/G of the RLOO one.
"""

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def rloo_advantages(r_i, group_size):
    return impl.group_mean_advantages(r_i, group_size)

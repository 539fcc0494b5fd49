"""Pitfall: the advantage's sign flipped in PPO's clipped objective (module steps 4.4.3 and 4.4.5).

``ppo_clip_objective_grad`` is the derivative of the clipped surrogate with -Â_t in place of Â_t,
the sign slip of a loss that is minimised where the objective should be maximised: every update
pushes the probability of good actions down, and the clip guards the wrong side of the ratio.
"""

import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def ppo_clip_objective_grad(ratio_t, advantage_t, epsilon):
    return impl.ppo_clip_objective_grad(ratio_t, -np.asarray(advantage_t), epsilon)

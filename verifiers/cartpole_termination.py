"""Step 4.4.5: CartPole's bounds terminate strictly, a state on a bound has not yet failed.

Apart from ``verifiers.cartpole``, whose checks step the environment from random states, where a
state exactly on a bound is never drawn.
"""

from __future__ import annotations

import math

import numpy as np

from claims_harness import Context, verifier
from verifiers.cartpole import Bounds


def _on_and_beyond(bounds: Bounds) -> tuple[np.ndarray, np.ndarray]:
    """States [x, ẋ, θ, θ̇] exactly on each bound (either sign), and one float beyond each.

    The θ bound in radians rounds one unit apart written as Gymnasium writes it (12 · 2π / 360)
    and as math.radians(12): the state on the bound takes the smaller, the one beyond the next
    float after the larger, so either way of writing it gives the same answers.
    """
    degrees = bounds.theta_threshold_degrees
    candidates = (bounds.theta_threshold, math.radians(degrees), degrees * math.pi / 180)
    theta_on, theta_beyond = min(candidates), math.nextafter(max(candidates), math.inf)
    x_on, x_beyond = bounds.x_threshold, math.nextafter(bounds.x_threshold, math.inf)
    on = [[sign * x_on, 0, 0, 0] for sign in (1, -1)] + [[0, 0, sign * theta_on, 0] for sign in (1, -1)]
    beyond = [[sign * x_beyond, 0, 0, 0] for sign in (1, -1)] + [[0, 0, sign * theta_beyond, 0] for sign in (1, -1)]
    return np.array(on, dtype=float), np.array(beyond, dtype=float)


@verifier(kind="exact", uses=("cartpole_terminated",), params=Bounds)
def bounds_are_strict(ctx: Context) -> dict[str, object]:
    """impl's ``cartpole_terminated`` on the four states exactly on the x and θ bounds, and on the four
    one float beyond them (see :func:`_on_and_beyond`)."""
    on, beyond = _on_and_beyond(ctx.params)
    return {"on_bounds_terminated": [bool(t) for t in np.asarray(ctx.impl.cartpole_terminated(on))],
            "beyond_bounds_terminated": [bool(t) for t in np.asarray(ctx.impl.cartpole_terminated(beyond))]}

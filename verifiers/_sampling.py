"""Drawing a Monte Carlo check's samples in bulk, close to the speed of the generator's own uniform draws.

``Generator.choice(k, size, p=p)`` inverts the CDF with a binary search per draw, which makes it
about seven times slower than the uniforms it consumes. With the few categories of the claims,
one comparison of every draw per CDF boundary is faster: :func:`categorical` inverts the same
normalised CDF at the same uniforms, so its draws are exactly ``choice``'s. Both helpers write
their draws over the uniforms' buffer instead of a fresh array.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from verifiers._numeric import EPS

# More categories than this make the binary search the faster inversion; the counts also stay in a byte.
_MOST_CATEGORIES = 255


def categorical(rng: np.random.Generator, p: ArrayLike, size: int | tuple[int, ...]) -> np.ndarray:
    """Indices drawn with probabilities ``p``: the very draws of ``rng.choice(len(p), size, p=p)``, faster."""
    p = np.asarray(p, dtype=float)
    # choice's own test: non-negative, and a sum within sqrt(eps) of one.
    if p.ndim != 1 or not (p >= 0).all() or abs(p.sum() - 1) > np.sqrt(EPS):
        raise ValueError(f"probabilities {p} must be one non-negative vector summing to 1")
    if len(p) > _MOST_CATEGORIES:
        return rng.choice(len(p), size=size, p=p)
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    uniform = rng.random(size)
    # choice's draw is the number of CDF entries at or below u; the last entry is exactly 1 > u.
    counts = np.zeros(uniform.shape, dtype=np.uint8)
    for boundary in cdf[:-1]:
        counts += (uniform >= boundary).view(np.uint8)
    # Into the uniforms' own buffer: a fresh array of this size costs more page faults than all the comparisons.
    draws = uniform.view(np.int64)
    draws[...] = counts
    return draws


def bernoulli(rng: np.random.Generator, p: float, size: int | tuple[int, ...]) -> np.ndarray:
    """1.0 with probability ``p``, else 0.0, one per uniform draw (written over the uniforms, as there)."""
    uniform = rng.random(size)
    return np.less(uniform, p, out=uniform)

"""Pitfall: the fraction of ratios outside [1-ε, 1+ε] reported as the clip fraction (module steps 4.4.3-4.4.4).

``ratio_clip_diagnostics`` reports the outside fraction in place of the active-clip fraction. Because of
the min in L^CLIP, a ratio outside the interval on the side its advantage penalises is not
clipped: the outside fraction overstates how much of the batch the clip switched off.
"""

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True  # what this module does not define is impl's, on purpose


def ratio_clip_diagnostics(ratio_t, advantage_t, epsilon):
    outside = impl.ratio_clip_diagnostics(ratio_t, advantage_t, epsilon).outside_fraction
    return impl.ClipDiagnostics(outside, outside)

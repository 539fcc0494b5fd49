"""Group baselines: the leave-one-out identity (module step 4.2.4)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp

from claims_harness import Context, given, reach, verifier
from claims_harness import strategies as st


@verifier(kind="symbolic")
def loo_identity(ctx: Context) -> dict[str, object]:
    """A_i^LOO - G/(G-1) (R_i - mean R), simplified for a symbolic group size G.

    The only fact about sums used is mean R = (R_i + T)/G with T = Σ_{j≠i} R_j, so a zero
    residual proves the identity for every G >= 2 at once.
    """
    group_size, r_i, others = sp.symbols("G R_i T")
    reach(group=group_size)
    mean = (r_i + others) / group_size
    leave_one_out = r_i - others / (group_size - 1)
    scaled_centered = group_size / (group_size - 1) * (r_i - mean)
    return {"residual": sp.simplify(leave_one_out - scaled_centered)}


_exact_rewards = st.fractions(min_value=-10, max_value=10, max_denominator=64)
_groups = st.integers(min_value=2, max_value=10).flatmap(
    lambda size: st.lists(st.lists(_exact_rewards, min_size=size, max_size=size), min_size=1, max_size=4))


@verifier(kind="property", uses=("leave_one_out_advantages", "group_centered_advantages"))
@given(_groups)
def loo_identity_property(ctx: Context, groups: list[list[Fraction]]) -> None:
    """On random groups of exact rewards, impl's LOO advantages are G/(G-1) times its centred ones
    and match the definition R_i - mean_{j≠i} R_j."""
    rewards = np.array(groups, dtype=object)
    size = rewards.shape[-1]
    reach(group=size)
    loo = ctx.impl.leave_one_out_advantages(rewards)
    centered = ctx.impl.group_centered_advantages(rewards)
    assert np.array_equal(loo, Fraction(size, size - 1) * centered), (loo, centered)
    for row, advantages in zip(groups, loo, strict=True):
        definition = [r - (sum(row) - r) / (size - 1) for r in row]
        assert list(advantages) == definition, (row, list(advantages), definition)

"""GAE telescoping (module step 4.3.3)."""

from __future__ import annotations

import numpy as np
import sympy as sp
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness import Context, check_property, verifier
from verifiers._numeric import rounding_bound


@verifier("gae.telescoping_symbolic")
def telescoping_symbolic(ctx: Context) -> dict[str, object]:
    """Σ_{l=0}^{n} γ^l δ_{t+l} = Σ_{l=0}^{n} γ^l r_{t+l+1} + γ^{n+1} V_{t+n+1} - V_t, by induction on n.

    The horizon n, the start t and γ are symbols, so zero residuals in the base case (n = 0)
    and in the inductive step (n -> n + 1) prove the identity for every segment length. The
    partial reward sum is an opaque symbol P_n with P_{n+1} = P_n + γ^{n+1} r_{t+n+2}.
    """
    gamma, partial_rewards = sp.symbols("gamma P_n")
    n, t = sp.symbols("n t", integer=True, nonnegative=True)
    r, v = sp.IndexedBase("r"), sp.IndexedBase("V")

    def delta(k: sp.Expr) -> sp.Expr:
        return r[k + 1] + gamma * v[k + 1] - v[k]

    def right_side(horizon: sp.Expr, rewards: sp.Expr) -> sp.Expr:
        return rewards + gamma ** (horizon + 1) * v[t + horizon + 1] - v[t]

    base = delta(t) - right_side(0, r[t + 1])
    next_rewards = partial_rewards + gamma ** (n + 1) * r[t + n + 2]
    step = (right_side(n + 1, next_rewards) - right_side(n, partial_rewards)) - gamma ** (n + 1) * delta(t + n + 1)
    return {"base_case_residual": sp.simplify(sp.expand(base)),
            "inductive_step_residual": sp.simplify(sp.expand(step))}


_values = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)
_segments = st.integers(min_value=1, max_value=40).flatmap(
    lambda length: st.tuples(
        hnp.arrays(np.float64, length, elements=_values),
        hnp.arrays(np.float64, length + 1, elements=_values),
        st.booleans(),
        st.floats(min_value=0.0, max_value=1.0),
    ))


@verifier("gae.telescoping_property", uses=("gae_advantages",))
def telescoping_property(ctx: Context) -> dict[str, object]:
    """impl's GAE with λ = 1 on a random uncut segment equals the discounted rewards plus
    γ^{K-t+1} V(s_{K+1}) minus V(s_t); at a true terminal the tail is 0."""

    def telescopes(segment: tuple[np.ndarray, np.ndarray, bool, float]) -> None:
        rewards, values, terminal, gamma = segment
        length = len(rewards)
        terminated = np.zeros(length)
        terminated[-1] = float(terminal)
        advantages = ctx.impl.gae_advantages(rewards, values[:-1], values[1:], terminated, np.zeros(length),
                                             gamma, 1.0)
        tail = 0.0 if terminal else values[-1]
        for t in range(length):
            discounts = gamma ** np.arange(length - t)
            expected = discounts @ rewards[t:] + gamma ** (length - t) * tail - values[t]
            bound = rounding_bound(4 * length, np.abs(rewards).sum() + np.abs(values).sum())
            assert abs(advantages[t] - expected) <= bound, (t, advantages[t], expected, bound)

    return check_property(ctx, telescopes, _segments)

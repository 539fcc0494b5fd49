"""Returns and discounting (week-16 syllabus step 1).

The weights γ^t, the discounted sum and its bound, a return without discounting that does not converge,
and one final reward with γ = 1: every token's reward-to-go is that reward (an exact instance and a property
over lengths and rewards).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._numeric import (
    as_written,
    rounding_bound,
)

# Never a subnormal reward: a platform that flushes subnormals to zero (XLA on the CPU) rightly sums 5e-324 + 0 to 0.
_answers = st.tuples(st.integers(1, 600), st.floats(min_value=-10, max_value=10, allow_subnormal=False),
                     st.sampled_from([1, 1.0]))


@verifier(kind="property", uses=("discounted_returns",))
@given(_answers)
def undiscounted_answer_property(ctx: Context, answer: tuple[int, float, float]) -> None:
    """For answers of 1 to 600 tokens whose only reward r is the last one, and γ = 1 (the integer or
    the float): every reward-to-go G_t from impl is r itself, one score for every token.

    Compared with ==, in floats: with γ = 1 every G_t is r plus zeros times 1, which every correct
    way of summing (a backward loop, a reversed cumulative sum, a linear filter) gives exactly.
    """
    length, final, gamma = answer
    rewards = np.zeros(length)
    rewards[-1] = final
    reach(discount=gamma, horizon=rewards.size, tokens=rewards.size)
    returns = [float(g) for g in ctx.impl.discounted_returns(rewards, gamma)]
    assert len(returns) == length, (length, len(returns))
    assert all(g == final for g in returns), (length, final, sorted(set(returns))[:5])


class Discounting(NoParams):
    """Discount factors, delays before a single reward of 1, and the length of an answer."""

    gamma: float = Field(ge=0, le=1)
    delays: list[int] = Field(min_length=1)
    long_gamma: float = Field(ge=0, le=1)
    answer_length: int = Field(ge=1, le=10_000)


@verifier(kind="exact", uses=("discounted_returns",), params=Discounting)
def discount_weights(ctx: Context) -> dict[str, object]:
    """What a reward of 1 is worth at the first decision, through impl's returns.

    A reward k steps after the first decision is ``r_t[k] = 1`` in a zero array of length k + 1,
    and its worth at the first decision is G_0 = γ^k. For an answer of L tokens rewarded after the
    last one, r_t has length L, so the first token's G_0 is γ^(L-1); ``weight_after_answer_length``
    is the reward L steps away, γ^L.
    """
    params = ctx.params

    def worth(gamma: float, delay: int, **answer: int) -> float:
        rewards = np.zeros(delay + 1)
        rewards[delay] = 1.0
        reach(discount=gamma, horizon=rewards.size, **answer)
        return float(ctx.impl.discounted_returns(rewards, gamma)[0])

    # The answer's tokens are its decisions: a reward after the last of L tokens is L - 1 steps after the first.
    return {"weight_after_delay": [worth(params.gamma, k) for k in params.delays],
            "first_token_weight": worth(params.long_gamma, params.answer_length - 1, tokens=params.answer_length),
            "weight_after_answer_length": worth(params.long_gamma, params.answer_length)}


class UndiscountedAnswer(NoParams):
    """An answer of L tokens with one final reward."""

    answer_length: int = Field(ge=1, le=10_000)
    final_reward: float


@verifier(kind="exact", uses=("discounted_returns",), params=UndiscountedAnswer)
def undiscounted_answer_exact(ctx: Context) -> dict[str, object]:
    """With γ = 1 (exact integer) and one exact final reward, every token's reward-to-go from impl."""
    params = ctx.params
    final = as_written(params.final_reward)
    rewards = np.array([Fraction(0)] * (params.answer_length - 1) + [final], dtype=object)
    gamma = 1
    reach(discount=gamma, horizon=rewards.size, tokens=rewards.size)
    returns = ctx.impl.discounted_returns(rewards, gamma)
    return {"distinct_token_weights": len(set(returns)), "first_token_weight": returns[0],
            "every_token_gets_final_reward": all(g == final for g in returns)}


@verifier(kind="symbolic")
def discounted_sum_symbolic(ctx: Context) -> dict[str, object]:
    """Σ_{k>=0} γ^k for 0 <= γ < 1 (written γ = 1/(1 + x), x > 0) and for γ = 1.

    With rewards bounded by M the infinite return is then bounded by M/(1 - γ); at γ = 1 the same
    sum of a constant reward diverges. ``near_reward_worth_more``: sympy decides γ^k - γ^(k+1) > 0
    for every k >= 0 and 0 < γ < 1, so a reward one step nearer is worth more.
    """
    k = sp.Symbol("k", integer=True, nonnegative=True)
    x = sp.Symbol("x", positive=True)
    gamma = 1 / (1 + x)
    geometric = sp.Sum(gamma**k, (k, 0, sp.oo)).doit()
    # Both sums run over an unbounded horizon: every 0 < γ < 1 (γ = 1/(1 + x)), then γ = 1.
    reach(discount=gamma, horizon=math.inf)
    reach(discount=1, horizon=math.inf)
    return {"geometric_sum_minus_bound": sp.simplify(geometric - 1 / (1 - gamma)),
            "undiscounted_sum_diverges": sp.Sum(sp.Integer(1), (k, 0, sp.oo)).doit() is sp.oo,
            "near_reward_worth_more": bool(sp.simplify(gamma**k - gamma ** (k + 1)).is_positive)}


@verifier(kind="symbolic")
def infinite_return_symbolic(ctx: Context) -> dict[str, object]:
    """The return G_t = Σ_{k>=0} γ^k r_{t+k} over an unbounded horizon, for 0 < γ < 1 (γ = 1/(1 + x), x > 0)
    and two bounded reward sequences whose plain sum never settles: a constant reward, r_k = c, and an
    alternating one, r_k = c (-1)^k.

    sympy sums the series itself. ``recursion_residuals``: G_t - (r_t + γ G_{t+1}), the backward recursion
    every finite computation of returns uses. ``truncation_residuals``: G_t - Σ_{k<T} γ^k r_{t+k} - γ^T G_{t+T}
    for a symbolic horizon T >= 1, so the finite returns of T steps differ from the infinite one by a tail
    γ^T G_{t+T} that vanishes as T grows: the infinite sum is their limit.
    """
    x = sp.Symbol("x", positive=True)
    gamma = 1 / (1 + x)
    c = sp.Symbol("c", real=True)
    k = sp.Symbol("k", integer=True, nonnegative=True)
    t = sp.Symbol("t", integer=True, nonnegative=True)
    horizon = sp.Symbol("T", integer=True, positive=True)
    recursion, truncation = [], []
    for sign in (1, -1):
        def reward(step: sp.Expr, sign: int = sign) -> sp.Expr:
            return c * sp.Integer(sign) ** step

        def infinite(start: sp.Expr) -> sp.Expr:
            return sp.Sum(gamma**k * reward(start + k), (k, 0, sp.oo)).doit()

        reach(discount=gamma, horizon=math.inf)
        # The finite returns of T steps, T >= 1: one step and many.
        reach(discount=gamma, horizon=horizon)
        finite = sp.Sum(gamma**k * reward(t + k), (k, 0, horizon - 1)).doit()
        recursion.append(sp.simplify(infinite(t) - (reward(t) + gamma * infinite(t + 1))))
        truncation.append(sp.simplify(infinite(t) - finite - gamma**horizon * infinite(t + horizon)))
    return {"recursion_residuals": recursion, "truncation_residuals": truncation}


_long_rewards = st.tuples(
    st.arrays(np.float64, st.integers(1, 400), elements=st.floats(min_value=-1, max_value=1)),
    st.floats(min_value=0, max_value=0.99))


@verifier(kind="property", uses=("discounted_returns",))
@given(_long_rewards)
def discounted_return_bound_property(ctx: Context, example: tuple[np.ndarray, float]) -> None:
    """For random rewards in [-1, 1] and γ in [0, 0.99], every |G_t| from impl is at most
    max|r| / (1 - γ), up to float64 rounding."""
    rewards, gamma = example
    reach(discount=gamma, horizon=rewards.size)
    largest = float(np.abs(rewards).max())
    returns = ctx.impl.discounted_returns(rewards, gamma)
    bound = largest / (1 - gamma)
    assert np.all(np.abs(returns) <= bound + rounding_bound(2 * len(rewards), bound)), (returns.max(), bound)

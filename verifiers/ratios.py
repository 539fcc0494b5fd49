"""Probability ratios r = π/π_old (lesson 4.4, steps 4.4.1-4.4.2; the tokens of lesson 4.5).

A ratio from log-probabilities; the product of per-step ratios as the trajectory's importance weight
p_θ(τ)/p_old(τ), by induction on the horizon and by enumerating every trajectory of random exact MDPs; and
how the product's variance grows with the horizon.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import distribution_from_weights, probability_rows
from verifiers._numeric import (
    as_written,
    assert_close,
    rounding_bound,
)
from verifiers._reach import transitions_of

_probabilities = st.floats(min_value=1e-6, max_value=1.0)


@verifier(kind="property", uses=("probability_ratios",))
@given(st.tuples(_probabilities, _probabilities))
def ratio_from_log_probabilities_property(ctx: Context, pair: tuple[float, float]) -> None:
    """impl's r from log π and log π_old equals π / π_old, and r > 1 exactly when π > π_old.

    exp(log π - log π_old) carries the rounding of both logarithms, relative error about
    eps (|log π| + |log π_old| + 1), which bounds the comparison.
    """
    new, old = pair
    reach(data="old")  # the ratio of a stored action, against the policy that collected it
    ratio = float(ctx.impl.probability_ratios(np.log([new]), np.log([old]))[0])
    quotient = new / old
    bound = rounding_bound(4, quotient * (1 + abs(np.log(new)) + abs(np.log(old))))
    assert_close(ratio, quotient, bound, "impl's ratio against π / π_old")
    if abs(new - old) > bound * old:
        assert (ratio > 1) == (new > old), (ratio, new, old)


@verifier(kind="symbolic")
def trajectory_ratio_product_symbolic(ctx: Context) -> dict[str, object]:
    """p_θ(τ)/p_old(τ) = Π_t r_t when both policies act in the same environment, by induction on T.

    p(τ_{0:T}) = ρ(s_0) Π_{t<T} π(a_t|s_t) P(s_{t+1}|s_t, a_t); the initial distribution and the
    transition probabilities are symbols shared by both policies. Base case (one step) and the
    step T -> T+1 (one more action and transition, with the ratio up to T an opaque symbol R_T)
    must leave zero residual.
    """
    rho, transition, pi_new, pi_old, ratio_so_far, p_new_so_far = sp.symbols(
        "rho P pi_theta pi_old R_T p_theta_T", positive=True)
    base = (rho * pi_new * transition) / (rho * pi_old * transition) - pi_new / pi_old
    p_old_so_far = p_new_so_far / ratio_so_far
    step = ((p_new_so_far * pi_new * transition) / (p_old_so_far * pi_old * transition)
            - ratio_so_far * pi_new / pi_old)
    # The induction covers every horizon T >= 1 (a trajectory of T decisions, or an answer of T tokens), and a
    # transition probability that is any positive number, 1 (one-hot dynamics) as well as below 1.
    horizon = sp.Symbol("T", integer=True, positive=True)
    reach(horizon=horizon, tokens=horizon, transitions=_dynamics_a_probability_covers(transition), data="old")
    return {"base_case_residual": sp.simplify(base), "inductive_step_residual": sp.simplify(step)}


def _dynamics_a_probability_covers(probability: sp.Expr) -> list[str]:
    """The kinds of dynamics a symbolic transition probability stands for: one-hot rows where it may equal 1,
    drawn next states where it may lie below 1 (read off its assumptions)."""
    kinds = []
    if probability.is_positive and (probability - 1).is_zero is not False:
        kinds.append("deterministic")
    if probability.is_positive and (probability - 1).is_nonnegative is not True:
        kinds.append("stochastic")
    return kinds


class TrajectoryEnumeration(NoParams):
    n_states: int = Field(ge=1, le=4)
    n_actions: int = Field(ge=2, le=3)
    horizon: int = Field(ge=1, le=5)


def _random_simplex(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random rational distributions along the last axis, as an object array of Fractions."""
    return probability_rows(rng.integers(1, 10, size=shape))


def _weighted_expectations(rho: np.ndarray, transition_old: np.ndarray, transition_new: np.ndarray,
                           pi_old: np.ndarray, pi_new: np.ndarray, reward: np.ndarray, horizon: int
                           ) -> dict[str, Fraction]:
    """Enumerate every trajectory of ``horizon`` steps in Fractions: the return's expectation under
    π_old in its dynamics, the same weighted by the product of per-step ratios π_new/π_old (a
    trajectory π_old never takes weighs nothing: it is never sampled), the total of those weights,
    and the return's expectation under π_new in the new dynamics.
    """
    n_states, n_actions = pi_old.shape
    totals = {"expectation_old": Fraction(0), "importance_weighted_old": Fraction(0), "total_weight": Fraction(0),
              "expectation_new": Fraction(0)}
    steps = itertools.product(range(n_states), range(n_actions))
    for path in itertools.product(list(steps), repeat=horizon):
        states = [s for s, _ in path]
        p_old = rho[states[0]] * np.prod([pi_old[s, a] for s, a in path])
        p_new = rho[states[0]] * np.prod([pi_new[s, a] for s, a in path])
        for t, (s, a) in enumerate(path[:-1]):
            p_old *= transition_old[s, a, states[t + 1]]
            p_new *= transition_new[s, a, states[t + 1]]
        total_return = sum(reward[s, a] for s, a in path)
        totals["expectation_old"] += p_old * total_return
        totals["expectation_new"] += p_new * total_return
        if p_old:
            weight = np.prod([pi_new[s, a] / pi_old[s, a] for s, a in path])
            totals["importance_weighted_old"] += p_old * weight * total_return
            totals["total_weight"] += p_old * weight
    return totals


@verifier(kind="exact", uses=("probability_ratios",), params=TrajectoryEnumeration)
def trajectory_ratio_importance_exact(ctx: Context) -> dict[str, object]:
    """Enumerate every trajectory of a random tabular MDP: weighting by the product of per-step
    ratios turns expectations under π_old into expectations under π_θ exactly (Fractions), and the
    product of impl's per-step ratios equals p_θ(τ)/p_old(τ) up to float64 rounding.

    Also the witnesses for the conditions, in the same MDP: without the weights the old
    expectation is not the new one (the old data are not the new policy's); when π_θ acts in other
    dynamics the weighted old expectation misses the new one; and when π_old gives probability 0
    to an action π_θ takes (action 0, in every state), the weights of the trajectories π_old
    samples add up to less than 1, the probability that π_θ avoids that action.
    """
    params = ctx.params
    rng = ctx.rng
    rho = _random_simplex(rng, (params.n_states,))
    transition = _random_simplex(rng, (params.n_states, params.n_actions, params.n_states))
    pi_old = _random_simplex(rng, (params.n_states, params.n_actions))
    pi_new = _random_simplex(rng, (params.n_states, params.n_actions))
    reward = np.array([[Fraction(int(v)) for v in row] for row in rng.integers(-3, 4, (params.n_states,
                                                                                      params.n_actions))])
    other_transition = _random_simplex(rng, (params.n_states, params.n_actions, params.n_states))
    for kernel in (transition, other_transition):
        reach(states=params.n_states, actions=params.n_actions, transitions=transitions_of(kernel),
              horizon=params.horizon, tokens=params.horizon, data="old")
    pi_old_without_action_0 = pi_old.copy()
    for s in range(params.n_states):
        rest = sum(pi_old[s, 1:])
        pi_old_without_action_0[s] = [Fraction(0)] + [p / rest for p in pi_old[s, 1:]]

    same = _weighted_expectations(rho, transition, transition, pi_old, pi_new, reward, params.horizon)
    other_dynamics = _weighted_expectations(rho, transition, other_transition, pi_old, pi_new, reward,
                                            params.horizon)
    no_overlap = _weighted_expectations(rho, transition, transition, pi_old_without_action_0, pi_new, reward,
                                        params.horizon)
    worst = 0.0
    steps = itertools.product(range(params.n_states), range(params.n_actions))
    for path in itertools.product(list(steps), repeat=params.horizon):
        impl_ratios = ctx.impl.probability_ratios(np.log([float(pi_new[s, a]) for s, a in path]),
                                                  np.log([float(pi_old[s, a]) for s, a in path]))
        # The initial and transition probabilities cancel in p_θ(τ)/p_old(τ), as the symbolic check proves.
        exact = np.prod([pi_new[s, a] / pi_old[s, a] for s, a in path])
        bound = rounding_bound(8 * params.horizon, float(exact) * (1 + 2 * params.horizon * np.log(10)))
        worst = max(worst, abs(float(np.prod(impl_ratios)) - float(exact)) / bound)
    return {"importance_weighted_old": same["importance_weighted_old"], "expectation_new": same["expectation_new"],
            "difference": same["importance_weighted_old"] - same["expectation_new"],
            "total_probability": same["total_weight"],
            "impl_product_within_rounding": worst <= 1.0,
            "unweighted_gap_size": abs(same["expectation_old"] - same["expectation_new"]),
            "gap_size_in_other_dynamics": abs(other_dynamics["importance_weighted_old"]
                                              - other_dynamics["expectation_new"]),
            "total_weight_without_overlap": no_overlap["total_weight"]}


@st.composite
def _trajectory_witnesses(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    """A random tabular MDP with rational probabilities: 1-3 states, 2-3 actions, 1-3 steps, one-hot dynamics
    (each action leads to one drawn state) or drawn next states, and two policies that give every action a
    positive probability (overlapping supports); integer rewards in [-3, 3]."""
    n_states, n_actions, horizon = draw(st.integers(1, 3)), draw(st.integers(2, 3)), draw(st.integers(1, 3))
    deterministic = draw(st.booleans())

    def distribution(size: int, low: int) -> list[Fraction]:
        return distribution_from_weights(draw(st.lists(st.integers(low, 9), min_size=size, max_size=size)))

    def successor_row() -> list[Fraction]:
        if deterministic:
            target = draw(st.integers(0, n_states - 1))
            return [Fraction(int(s == target)) for s in range(n_states)]
        return distribution(n_states, 0)

    def table(rows: list[list[object]]) -> np.ndarray:
        array = np.empty((len(rows), len(rows[0])), dtype=object)
        for index, row in enumerate(rows):
            array[index] = row
        return array

    rho = np.array(distribution(n_states, 0), dtype=object)
    transition = np.empty((n_states, n_actions, n_states), dtype=object)
    for s, a in itertools.product(range(n_states), range(n_actions)):
        transition[s, a] = successor_row()
    pi_old = table([distribution(n_actions, 1) for _ in range(n_states)])
    pi_new = table([distribution(n_actions, 1) for _ in range(n_states)])
    reward = table([[Fraction(draw(st.integers(-3, 3))) for _ in range(n_actions)] for _ in range(n_states)])
    return rho, transition, pi_old, pi_new, reward, np.array(horizon)


@verifier(kind="property", uses=("probability_ratios",))
@given(_trajectory_witnesses())
def trajectory_ratio_importance_property(ctx: Context, witness: tuple[np.ndarray, ...]) -> None:
    """:func:`trajectory_ratio_importance_exact` on random MDPs (:func:`_trajectory_witnesses`): enumerating every
    trajectory in Fractions, the old expectation of the return weighted by the product of per-step ratios is the
    new policy's expectation exactly, the weights add up to 1, and the product of impl's per-step ratios
    (from float64 log-probabilities) equals the exact one within its rounding, on every trajectory.
    """
    rho, transition, pi_old, pi_new, reward, horizon_array = witness
    horizon = int(horizon_array)
    n_states, n_actions = pi_old.shape
    reach(states=n_states, actions=n_actions, transitions=transitions_of(transition), horizon=horizon,
          tokens=horizon, data="old")
    totals = _weighted_expectations(rho, transition, transition, pi_old, pi_new, reward, horizon)
    assert totals["importance_weighted_old"] == totals["expectation_new"], totals
    assert totals["total_weight"] == 1, totals
    paths = list(itertools.product(itertools.product(range(n_states), range(n_actions)), repeat=horizon))
    log_new = np.log([[float(pi_new[s, a]) for s, a in path] for path in paths])
    log_old = np.log([[float(pi_old[s, a]) for s, a in path] for path in paths])
    products = np.prod(np.asarray(ctx.impl.probability_ratios(log_new, log_old), dtype=float), axis=1)
    # Each factor carries the rounding of two logarithms of size up to the largest |log π|, and of exp.
    largest_log = float(max(np.abs(log_new).max(), np.abs(log_old).max()))
    for path, product in zip(paths, products, strict=True):
        exact = np.prod([pi_new[s, a] / pi_old[s, a] for s, a in path])
        bound = rounding_bound(8 * horizon, float(exact) * (1 + 2 * horizon * largest_log))
        assert_close(float(product), float(exact), bound, f"the product of impl's ratios along {path}")


class TokenRatios(NoParams):
    pi_old: float = Field(gt=0, le=1, description="old probability of one token")
    pi_new: float = Field(gt=0, le=1, description="new probability of the same token")
    per_token_up: float = Field(gt=0, description="per-token ratio above 1")
    per_token_down: float = Field(gt=0, description="per-token ratio below 1")
    tokens: int = Field(ge=1, le=10_000)


@verifier(kind="exact", uses=("probability_ratios",), params=TokenRatios)
def token_ratio_products(ctx: Context) -> dict[str, object]:
    """The ratio of one token, and the trajectory ratio of ``tokens`` tokens with equal per-token
    ratios: exactly in rationals, and as the product of impl's per-token ratios from log-probabilities.
    """
    params = ctx.params
    tokens = params.tokens
    reach(tokens=tokens, horizon=tokens, data="old")

    def impl_product(per_token: float) -> float:
        return float(np.prod(ctx.impl.probability_ratios(np.full(tokens, np.log(per_token)), np.zeros(tokens))))

    return {
        "token_ratio": as_written(params.pi_new) / as_written(params.pi_old),
        "token_ratio_impl": float(ctx.impl.probability_ratios(np.log([params.pi_new]), np.log([params.pi_old]))[0]),
        "product_up": float(as_written(params.per_token_up) ** tokens),
        "product_up_rounded_to_integer": round(as_written(params.per_token_up) ** tokens),
        "product_up_impl": impl_product(params.per_token_up),
        "product_down": float(as_written(params.per_token_down) ** tokens),
        "product_down_impl": impl_product(params.per_token_down),
    }


@verifier(kind="symbolic")
def ratio_product_variance_symbolic(ctx: Context) -> dict[str, object]:
    """Var_old(Π_{t=1}^T r_t) = E_old[r^2]^T - 1 for i.i.d. per-step ratios, by induction on T.

    Under π_old each r_t has mean Σ_a π_old(a) π(a)/π_old(a) = 1 and second moment
    m = Σ_a π(a)^2/π_old(a) = 1 + χ²(π || π_old) >= 1. By independence E[Π_{T+1}^2] =
    E[Π_T^2] m and E[Π_T] = 1; with the symbol T this proves the formula for every horizon, so
    the variance grows geometrically whenever π differs from π_old. Also reported: m - 1 written
    as the χ² sum for two actions, which is a sum of squares.
    """
    m, horizon = sp.symbols("m T", positive=True)
    reach(horizon=horizon, tokens=horizon, data="old")  # E_old: the steps' actions are drawn from π_old
    variance = m**horizon - 1
    second_moment = variance + 1
    base = variance.subs(horizon, 1) - (m - 1)
    step = (m * second_moment - 1) - variance.subs(horizon, horizon + 1)
    q, p = sp.symbols("q p", positive=True)  # π_old(0) = q, π(0) = p, two actions
    chi_square = sp.together(p**2 / q + (1 - p) ** 2 / (1 - q) - 1)
    return {"base_case_residual": sp.simplify(base), "inductive_step_residual": sp.simplify(sp.expand(step)),
            "chi_square_two_actions": sp.factor(chi_square)}


class IidRatios(NoParams):
    pi_old: list[float] = Field(min_length=2, description="old per-step action probabilities")
    pi_new: list[float] = Field(min_length=2, description="new per-step action probabilities")
    max_horizon: int = Field(ge=1, le=12)


@verifier(kind="exact", params=IidRatios)
def ratio_product_variance_exact(ctx: Context) -> dict[str, object]:
    """Enumerate all action sequences up to ``max_horizon`` in Fractions: the exact variance of the
    product of per-step ratios under π_old, against E[r^2]^T - 1, and the growth factor per step."""
    old = [as_written(p) for p in ctx.params.pi_old]
    new = [as_written(p) for p in ctx.params.pi_new]
    second_moment = sum(n * n / o for n, o in zip(new, old, strict=True))
    variances, residuals = [], []
    for horizon in range(1, ctx.params.max_horizon + 1):
        reach(horizon=horizon, tokens=horizon, actions=len(old), data="old")
        mean = square = Fraction(0)
        for sequence in itertools.product(range(len(old)), repeat=horizon):
            probability = np.prod([old[a] for a in sequence])
            product = np.prod([new[a] / old[a] for a in sequence])
            mean += probability * product
            square += probability * product * product
        variances.append(square - mean * mean)
        residuals.append(square - mean * mean - (second_moment**horizon - 1))
    return {"second_moment": second_moment, "variances": variances, "residuals": residuals,
            "growth_factors": [(b + 1) / (a + 1) for a, b in itertools.pairwise(variances)],
            "max_abs_residual": max(abs(r) for r in residuals)}

"""REINFORCE on trajectories, and the policy gradient theorem (module lesson 4.1, steps 4.1.1-4.1.5).

The score of a trajectory, and data that move with θ (4.1.1, 4.1.3); the full return, the reward-to-go and
their discounted forms as the estimator's weights, which give the gradient of J_γ only as γ^t G_t or at γ = 1
(4.1.4, 4.1.5); the estimator's form, its spread and its Monte Carlo mean; the sign of one sampled term's step;
the policy gradient theorem, in its finite-horizon form and in its discounted-visitation form on random
infinite-horizon MDPs against J differentiated with dual numbers; and the expected step's effect on each
action's probability (with three actions, one with a positive advantage can lose probability).

Two kinds of reference live here, independent of the implementation under test: sympy proofs for a
symbolic horizon, and a small enumerator of trajectories (``reference_objective``) whose central differences
give the exact gradient of J(θ) up to a derived error bound (``objective_difference_bound``), or exact
fractions where the MDP is exact. The implementation is reached only through ``ctx.impl``; MDPs are handed to
it as ``MDPTables`` tuples, which carry the attributes (P, R, rho, P_alt) that ``impl.TabularMDP`` documents.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction
from typing import Literal

import numpy as np
import sympy as sp
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, assume, check_property, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import MDPTables, as_fractions, exact_mdps, random_exact_mdp, softmax_score, softmax_scores
from verifiers._numeric import (
    as_written,
    assert_close,
    central_difference,
    cosine,
    largest_magnitude,
    log_softmax,
    rounding_bound,
    softmax,
)
from verifiers._params import Distribution, one_entry_each
from verifiers._reach import reach_bandit, reach_mdp, transitions_of

# --------------------------------------------------------------------------- references


def _paths(n_states: int, n_actions: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (s_0, a_0, ..., s_T) as time-major index arrays s_t [T+1, M] and a_t [T, M]."""
    ranges = [range(n_states)] + [range(n_actions), range(n_states)] * horizon
    path = np.array(list(itertools.product(*ranges))).T
    return path[0::2], path[1::2]


def policy_kernel(P: np.ndarray, P_alt: np.ndarray | None, pi: np.ndarray) -> np.ndarray:
    """P_θ[s, a, s2]: P, or (1 - π_θ(0|s)) P + π_θ(0|s) P_alt when the environment reacts to the policy."""
    return P if P_alt is None else (1 - pi[:, :1, None]) * P + pi[:, :1, None] * P_alt


def reference_objective(mdp: MDPTables, theta: np.ndarray, horizon: int, gamma: float) -> float:
    """J(θ) = Σ_τ p_θ(τ) Σ_t γ^t R[s_t, a_t] by enumeration, with P_θ mixed by π_θ(0|s) when P_alt is set."""
    pi = softmax(theta)
    kernel = policy_kernel(mdp.P, mdp.P_alt, pi)
    s_t, a_t = _paths(*theta.shape, horizon)
    probability = mdp.rho[s_t[0]]
    discounted = np.zeros(s_t.shape[1])
    for t in range(horizon):
        probability = probability * pi[s_t[t], a_t[t]] * kernel[s_t[t], a_t[t], s_t[t + 1]]
        discounted = discounted + gamma**t * mdp.R[s_t[t], a_t[t]]
    return float(probability @ discounted)


def reach_trajectories(kernel: np.ndarray, horizon: int, **more: object) -> None:
    """Trajectories of a tabular MDP whose kernel P[s, a, s2] is ``kernel`` (P_θ when the environment reacts to
    the policy), for a computation that does not discount: its states, actions, transitions and horizon, and any
    other dimension (``data="current"``). A computation that discounts reports through ``reach_mdp``."""
    states, actions = np.shape(kernel)[:2]
    reach(states=states, actions=actions, transitions=transitions_of(kernel), horizon=horizon, **more)


def largest_return(rewards: np.ndarray, horizon: int, gamma: float) -> float:
    return float(np.abs(rewards).max() * sum(gamma**t for t in range(horizon)))


def objective_difference_bound(mdp: MDPTables, horizon: int, gamma: float, step: float) -> float:
    """A bound on |central difference of J - ∂J/∂θ_{s,a}| for dynamics that do not depend on θ.

    Along one logit x = θ[s, a'] every factor π(a_t|s_t) of p_θ(τ) is a constant, q or c(1 - q)
    with q = σ(x + const); the ratios q^(j)/q and (1-q)^(j)/(1-q) for j = 1, 2, 3 are (1-q),
    (1-q)(1-2q), (1-q)(1-6q+6q²) and their mirror images, all in [-1, 1]. By Leibniz over the at
    most T factors, |∂³p(τ)| <= T³ p(τ), so |J'''| <= T³ max|R_γ|. The central difference is then
    off by at most h²/6 T³ max|R_γ| plus the rounding of the two evaluations of J divided by 2h;
    each evaluation multiplies T policy factors (a softmax of A terms each) and sums M terms.
    """
    n_states, n_actions = mdp.R.shape
    largest = largest_return(mdp.R, horizon, gamma)
    trajectories = n_states ** (horizon + 1) * n_actions**horizon
    truncation = step**2 / 6 * horizon**3 * largest
    return truncation + rounding_bound(trajectories + horizon * (n_actions + 5), largest) / step


_WEIGHTS = ("full_return_weights", "discounted_objective_weights", "discounted_returns")
Weights = Literal["full_return_weights", "discounted_objective_weights", "discounted_returns"]


def _per_trajectory_estimates(ctx: Context, theta: np.ndarray, s_t: np.ndarray, a_t: np.ndarray,
                              r_t: np.ndarray, weights: str, gamma: float) -> np.ndarray:
    """impl's REINFORCE estimate from each trajectory alone, shape [M, S, A].

    A trailing axis of size one makes each trajectory its own batch of N = 1.
    """
    w_t = getattr(ctx.impl, weights)(r_t, gamma)
    score_t = ctx.impl.tabular_softmax_score(theta, s_t[:-1], a_t)
    return ctx.impl.reinforce_gradient(w_t[..., None], score_t[:, :, None])


def _enumerated_estimates(ctx: Context, mdp: MDPTables, theta: np.ndarray, horizon: int, weights: str, gamma: float
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities [M] and impl's single-trajectory estimates [M, S, A] of every possible trajectory."""
    paths = ctx.impl.enumerate_trajectories(mdp, ctx.impl.softmax(theta), horizon)
    possible = paths.probability > 0
    estimates = _per_trajectory_estimates(ctx, theta, paths.s_t[:, possible], paths.a_t[:, possible],
                                          paths.r_t[:, possible], weights, gamma)
    return paths.probability[possible], estimates


class MDPExample(NoParams):
    """A small MDP written out in the claim file, a policy's logits, the horizon and the discount."""

    P: list[list[Distribution]] = Field(description="P[s][a][s2], each P[s][a] sums to one")
    R: list[list[float]] = Field(description="R[s][a], the reward of action a in state s")
    rho: Distribution = Field(description="initial state distribution")
    P_alt: list[list[Distribution]] | None = Field(None, description="second kernel, mixed in with weight π(0|s)")
    theta: list[list[float]] = Field(description="logits θ[s][a] of the tabular softmax policy")
    horizon: int = Field(ge=1, le=4)
    gamma: float = Field(1.0, ge=0, le=1)

    @model_validator(mode="after")
    def _shapes_agree(self) -> MDPExample:
        n_states, n_actions = np.shape(self.R)
        for kernel in (self.P, self.P_alt):
            if kernel is not None and np.shape(kernel) != (n_states, n_actions, n_states):
                raise ValueError(f"a kernel must have shape {(n_states, n_actions, n_states)}")
        if np.shape(self.theta) != (n_states, n_actions) or len(self.rho) != n_states:
            raise ValueError("theta must match R's shape and rho its number of states")
        return self

    def mdp(self) -> MDPTables:
        alt = None if self.P_alt is None else np.array(self.P_alt)
        return MDPTables(np.array(self.P), np.array(self.R), np.array(self.rho), alt)

    def logits(self) -> np.ndarray:
        return np.array(self.theta)


class MDPEstimator(MDPExample):
    """An MDP example and the per-step weights of the REINFORCE estimator."""

    weights: Weights = Field(description="the impl function giving w_{i,t}")


# --------------------------------------------------------------------------- 4.1.1


@verifier(kind="counterexample", uses=("enumerate_trajectories", "softmax"), params=MDPExample)
def state_distribution_moves(ctx: Context) -> dict[str, object]:
    """The distribution of s_1 under the claim's logits θ and under θ with every logit of action
    1 raised by one: same MDP, different data."""
    params = ctx.params
    mdp, theta = params.mdp(), params.logits()
    shifted = theta + np.eye(theta.shape[1])[1]

    def next_state_distribution(logits: np.ndarray) -> list[float]:
        pi = ctx.impl.softmax(logits)
        reach_trajectories(policy_kernel(mdp.P, mdp.P_alt, np.asarray(pi)), 1)
        paths = ctx.impl.enumerate_trajectories(mdp, pi, 1)
        return [float(paths.probability[paths.s_t[1] == s].sum()) for s in range(theta.shape[0])]

    before, after = next_state_distribution(theta), next_state_distribution(shifted)
    return {"next_state_distribution": before, "next_state_distribution_shifted": after,
            "total_variation": 0.5 * float(np.abs(np.subtract(before, after)).sum())}


class SampledBandit(NoParams):
    """A one-state bandit: logits, rewards per arm, draws and the finite-difference step."""

    logits: list[float] = Field(min_length=2)
    rewards: list[float] = Field(min_length=2)
    draws: int = Field(ge=1, le=100_000)
    step: float = Field(gt=0, le=1e-6)


@verifier(kind="counterexample", uses=("sample_trajectories", "objective_gradient"), params=SampledBandit)
def sampled_action_pathwise_gradient(ctx: Context) -> dict[str, object]:
    """Differentiate the reward of a sampled arm through the sampling, holding the randomness fixed.

    The bandit is a one-state MDP of horizon 1. For each logit j, impl samples ``draws`` arms at
    θ + h e_j and at θ - h e_j from generators with one seed (common random numbers), and the
    central difference of each draw's reward is its pathwise derivative. The sampled arm is a
    step function of θ: its derivative is zero except where a uniform draw sits exactly on a CDF
    boundary. A draw's difference is non-zero only if its uniform lies within h/4 of one of the
    K - 1 boundaries (each CDF value moves by at most |∂F/∂θ_j| h <= h/4), so, with whatever
    sampler inverts uniforms, some difference is non-zero with probability at most
    draws K (K - 1) h / 2, reported as ``nonzero_probability_bound``. The true gradient is impl's
    exact gradient of the expected reward.
    """
    params = ctx.params
    logits, rewards = np.array(params.logits), np.array(params.rewards)
    categories = len(logits)
    bandit = MDPTables(np.ones((1, categories, 1)), rewards[None, :], np.ones(1))
    seed = int(ctx.rng.integers(2**63))

    # The draws come from the policy whose (perturbed) logits are differentiated: on-policy data.
    reach_bandit(categories, data="current")

    def rewards_at(theta: np.ndarray) -> np.ndarray:
        trajectories = ctx.impl.sample_trajectories(np.random.default_rng(seed), bandit, theta[None, :], 1,
                                                    params.draws)
        return np.asarray(trajectories.r_t[0], dtype=float)

    pathwise = central_difference(rewards_at, logits, params.step)
    true_gradient = ctx.impl.objective_gradient(bandit, logits[None, :], 1)[0]
    return {
        "pathwise_gradient": pathwise.mean(axis=0).tolist(),
        "draws_with_nonzero_pathwise_derivative": int(np.any(pathwise != 0, axis=1).sum()),
        "nonzero_probability_bound": params.draws * categories * (categories - 1) * params.step / 2,
        "true_gradient": true_gradient.tolist(),
        "true_gradient_norm": float(np.linalg.norm(true_gradient)),
    }


# --------------------------------------------------------------------------- 4.1.3


@verifier(kind="symbolic")
def trajectory_score_symbolic(ctx: Context) -> dict[str, object]:
    """∇_θ log p_θ(τ) = Σ_t ∇_θ log π_θ(a_t|s_t), by induction on the horizon T.

    p_T(θ) is the probability of the first T steps (an undefined positive function of θ); one more
    step multiplies it by π(θ) and by a transition probability. Base case: log ρ(s_0) has zero
    derivative when ρ does not involve θ. Inductive step: the new derivative minus the old one
    minus ∇ log π is zero when the transition probability is a constant symbol P; with a
    transition P(θ) the same residual is ∂ log P/∂θ (``residual_with_policy_dependent_dynamics``).
    """
    theta = sp.Symbol("theta", real=True)
    rho, transition = sp.symbols("rho P", positive=True)
    prefix, pi, moving = (sp.Function(name, positive=True)(theta) for name in ("p_T", "pi", "P"))
    # The induction runs from the T steps of p_T to T + 1, for every T >= 1 (T = 0 is the base case); the
    # constant transition probability P is any positive number, 1 (a deterministic step) included.
    steps = sp.Symbol("T", integer=True, positive=True)
    reach(horizon=steps, transitions=[name for name, possible in (("deterministic", sp.Eq(transition, 1)),
                                                                  ("stochastic", transition < 1))
                                      if possible is not sp.false])

    def step_residual(kernel: sp.Expr) -> sp.Expr:
        longer = sp.diff(sp.log(prefix * pi * kernel), theta)
        return sp.simplify(longer - sp.diff(sp.log(prefix), theta) - sp.diff(sp.log(pi), theta))

    dependent = step_residual(moving)
    return {"base_case_residual": sp.diff(sp.log(rho), theta),
            "inductive_step_residual": step_residual(transition),
            "residual_with_policy_dependent_dynamics": dependent,
            "policy_dependent_residual_is_log_derivative_of_transition":
                sp.simplify(dependent - sp.diff(sp.log(moving), theta)) == 0}


_FIXED_DYNAMICS = st.just(False)


@st.composite
def _random_mdps(draw: st.DrawFn, policy_dependent: st.SearchStrategy[bool] = _FIXED_DYNAMICS
                 ) -> tuple[MDPTables, np.ndarray, int, float]:
    """An MDP with at most 3 states, 3 actions and 3 steps (at most 648 trajectories), logits, horizon, γ.

    Transition rows are 0.8 Dirichlet(1) + 0.2 uniform, so every transition probability is at
    least 0.2/S (the bound for policy-dependent dynamics in ``trajectory_score_property`` uses it).
    """
    n_states, n_actions = draw(st.sampled_from([(1, 2), (2, 2), (2, 3), (3, 2)]))
    horizon = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kernels = [0.8 * rng.dirichlet(np.ones(n_states), size=(n_states, n_actions)) + 0.2 / n_states
               for _ in range(2)]
    mdp = MDPTables(kernels[0], rng.uniform(-1, 1, (n_states, n_actions)), rng.dirichlet(np.ones(n_states)),
               kernels[1] if draw(policy_dependent) else None)
    theta = rng.normal(scale=draw(st.sampled_from([0.5, 2.0])), size=(n_states, n_actions))
    return mdp, theta, horizon, draw(st.floats(0, 1))


@verifier(kind="property", uses=("trajectory_score", "tabular_softmax_score"))
@given(_random_mdps(st.booleans()))
def trajectory_score_property(ctx: Context, example: tuple[MDPTables, np.ndarray, int, float]) -> None:
    """On random MDPs, for every trajectory, impl's ∇_θ log p_θ(τ) equals the central difference of
    the verifier's own log p_θ(τ); when the dynamics do not depend on θ it also equals the sum over
    steps of impl's tabular softmax scores, and when they do (P_θ mixed by π_θ(0|s)) it does not.

    Error bound of the central difference (step h = 1e-5), along one logit: each policy term log q
    or log(1 - q) has third derivative at most 1/(6√3) < 1/10. A transition term log g with
    g = A + B β, β = π_θ(0|s), |B| <= 1, g >= m (the smallest kernel entry) and |β^(j)| <= 1/4 for
    j = 1, 2, 3 has third derivative g'''/g - 3 g'g''/g² + 2 (g'/g)³, at most
    1/(4m) + 3/(16m²) + 2/(64m³) in size. Truncation is h²/6 times T times their sum; each
    evaluation of log p rounds within rounding_bound(T (A + 10), |log p| + |θ|max), divided by h.
    """
    step = 1e-5
    mdp, theta, horizon, _ = example
    reach_trajectories(policy_kernel(mdp.P, mdp.P_alt, softmax(theta)), horizon)
    s_t, a_t = _paths(*theta.shape, horizon)

    def log_probability(logits: np.ndarray) -> np.ndarray:
        log_pi = log_softmax(logits)
        beta = np.exp(log_pi[:, :1, None])
        kernel = mdp.P if mdp.P_alt is None else (1 - beta) * mdp.P + beta * mdp.P_alt
        total = np.log(mdp.rho[s_t[0]])
        for t in range(horizon):
            total = total + log_pi[s_t[t], a_t[t]] + np.log(kernel[s_t[t], a_t[t], s_t[t + 1]])
        return total

    score = ctx.impl.trajectory_score(mdp, theta, s_t, a_t)
    third_derivative = 1 / 10
    if mdp.P_alt is not None:
        m = float(min(mdp.P.min(), mdp.P_alt.min()))
        third_derivative += 1 / (4 * m) + 3 / (16 * m**2) + 2 / (64 * m**3)
    magnitude = float(np.abs(log_probability(theta)).max() + np.abs(theta).max())
    bound = (step**2 / 6 * horizon * third_derivative
             + rounding_bound(horizon * (theta.shape[1] + 10), magnitude) / step)
    assert_close(score, central_difference(log_probability, theta, step), bound,
                 "impl's trajectory_score [trajectory, s, a] against the central difference of log p")
    if mdp.P_alt is None:
        assert_close(score, ctx.impl.tabular_softmax_score(theta, s_t[:-1], a_t).sum(axis=0),
                     rounding_bound(4 * horizon, horizon), "impl's trajectory_score against its summed step scores")


@verifier(kind="counterexample",
          uses=("objective_gradient", "enumerate_trajectories", "softmax", "tabular_softmax_score",
                "full_return_weights", "reinforce_gradient"),
          params=MDPExample)
def policy_dependent_dynamics_counterexample(ctx: Context) -> dict[str, object]:
    """When P_θ depends on θ, E[R(τ) Σ_t ∇log π(a_t|s_t)] against the true gradient of J.

    The true gradient is reported twice: impl's exact enumeration (which includes ∇ log P_θ) and
    the central difference of the verifier's own J (step 1e-4; J is a polynomial of degree at most
    2T in probabilities of order one, so the difference is off by far less than the printed
    precision). The policy-only formula is impl's REINFORCE with full-return weights, averaged
    exactly over the enumerated trajectories.
    """
    params = ctx.params
    mdp, theta = params.mdp(), params.logits()
    # REINFORCE's weights are returns of the enumerated trajectories, drawn by the policy differentiated.
    reach_mdp(policy_kernel(mdp.P, mdp.P_alt, softmax(theta)), gamma=params.gamma, horizon=params.horizon,
              data="current", advantages="estimated")
    probability, estimates = _enumerated_estimates(ctx, mdp, theta, params.horizon, "full_return_weights",
                                                   params.gamma)
    policy_only = np.tensordot(probability, estimates, axes=1)
    true_gradient = ctx.impl.objective_gradient(mdp, theta, params.horizon, params.gamma)
    numeric = central_difference(lambda x: reference_objective(mdp, x, params.horizon, params.gamma), theta, 1e-4)
    return {"true_gradient": true_gradient.tolist(), "finite_difference_gradient": numeric.tolist(),
            "policy_score_formula": policy_only.tolist(),
            "gap_norm": float(np.linalg.norm(true_gradient - policy_only))}


# --------------------------------------------------------------------------- 4.1.4


# Sixteenths in [-10, 10] and tenths in [0, 1], drawn as integers (st.fractions is slow to draw).
_exact_rewards = st.integers(-160, 160).map(lambda n: Fraction(n, 16))
_reward_batches = st.tuples(
    st.lists(st.tuples(_exact_rewards, _exact_rewards, _exact_rewards), min_size=1, max_size=12),
    st.integers(0, 10).map(lambda n: Fraction(n, 10)))


@verifier(kind="property", uses=("discounted_returns", "discounted_objective_weights", "full_return_weights"))
@given(_reward_batches)
def return_weights_property(ctx: Context, example: tuple[list[tuple[Fraction, ...]], Fraction]) -> None:
    """On random exact rewards [T, 3] and a rational γ in [0, 1], impl's three weights equal their
    definitions exactly: G_t = Σ_{k>=t} γ^{k-t} r_{k+1}, γ^t G_t, and R(τ) = G_0 at every t; one
    column alone (shape [T]) gives the same column."""
    rows, gamma = example
    rewards = np.array(rows, dtype=object)
    length = len(rows)
    reach(discount=gamma, horizon=length)
    returns = ctx.impl.discounted_returns(rewards, gamma)
    literal = ctx.impl.discounted_objective_weights(rewards, gamma)
    full = ctx.impl.full_return_weights(rewards, gamma)
    assert list(ctx.impl.discounted_returns(rewards[:, 0], gamma)) == list(returns[:, 0]), \
        ("one trajectory's returns differ from its column of a batch", rewards[:, 0], returns[:, 0])
    for column in range(rewards.shape[1]):
        definition = [sum(gamma ** (k - t) * rewards[k, column] for k in range(t, length)) for t in range(length)]
        assert list(returns[:, column]) == definition, (column, list(returns[:, column]), definition)
        assert list(literal[:, column]) == [gamma**t * g for t, g in enumerate(definition)], literal
        assert list(full[:, column]) == [definition[0]] * length, full


class ExactMDP(NoParams):
    """An MDP and a policy table π(a|s), all exact decimals, with a horizon and discounts."""

    P: list[list[Distribution]]
    R: list[list[float]]
    rho: Distribution
    policy: list[Distribution] = Field(description="π(a|s); each row sums to exactly one")
    horizon: int = Field(ge=1, le=4)
    gammas: list[float] = Field(min_length=1)

    def exact_tables(self) -> tuple[MDPTables, np.ndarray]:
        """The MDP and the policy table π(a|s) as fractions, each decimal as written."""
        return MDPTables(as_fractions(self.P), as_fractions(self.R), as_fractions(self.rho)), as_fractions(self.policy)


def finite_horizon_policy_gradient(P: np.ndarray, R: np.ndarray, rho: np.ndarray, pi: np.ndarray, horizon: int,
                                   gamma: Fraction, discount_visits: bool = True) -> np.ndarray:
    """∇_θ J_γ by the finite-horizon policy gradient theorem, without enumerating trajectories.

    Forward: d_t(s) = Pr(s_t = s). Backward: Q_t(s, a) = R(s, a) + γ Σ_s2 P(s2|s, a) V_{t+1}(s2) with
    V_T = 0 and V_t(s) = Σ_a π(a|s) Q_t(s, a). Then ∇_{θ[s]} J_γ = Σ_t γ^t d_t(s) Σ_a π(a|s) Q_t(s, a)
    (e_a - π(·|s)) for the tabular softmax policy: the discount is in the visits, γ^t d_t. Without
    ``discount_visits`` the visits are the undiscounted d_t, which gives E[Σ_t G_t ∇log π_t], the form
    without γ^t (E[G_t | s_t, a_t] = Q_t). Only + - * /, so exact for fractions.
    """
    n_states, n_actions = pi.shape
    state_distribution = [rho]
    for _ in range(horizon - 1):
        state_distribution.append(np.einsum("s,sa,sat->t", state_distribution[-1], pi, P))
    gradient = np.zeros((n_states, n_actions), dtype=object) + Fraction(0)
    value_next = np.zeros(n_states, dtype=object) + Fraction(0)
    for t in range(horizon - 1, -1, -1):
        q = R + gamma * np.einsum("sat,t->sa", P, value_next)
        advantage = q - (pi * q).sum(axis=1, keepdims=True)
        visits = gamma**t * state_distribution[t] if discount_visits else state_distribution[t]
        gradient = gradient + visits[:, None] * pi * advantage
        value_next = (pi * q).sum(axis=1)
    return gradient


@verifier(kind="exact",
          uses=("enumerate_trajectories", "full_return_weights", "discounted_objective_weights",
                "reinforce_gradient"),
          params=ExactMDP)
def causal_weights_exact(ctx: Context) -> dict[str, object]:
    """E[Σ_t R_γ(τ) ∇log π_t] and E[Σ_t γ^t G_t ∇log π_t] over every trajectory, in rational arithmetic.

    impl enumerates the trajectories with their exact probabilities and forms both weights and
    the estimator; the tabular softmax score (row s_t of the table is e_{a_t} - π(·|s_t)) is
    written exactly by the verifier. Weighting trajectory m by M p(τ_m) turns impl's average over
    the M trajectories into the expectation. With γ = 1, γ^t G_t is the plain reward-to-go. Both
    are also compared with the gradient from the finite-horizon policy gradient theorem
    (``finite_horizon_policy_gradient``), and impl's trajectory probabilities with
    ρ(s_0) Π_t π(a_t|s_t) P(s_{t+1}|s_t, a_t) computed here.
    """
    params = ctx.params
    mdp, pi = params.exact_tables()
    paths = ctx.impl.enumerate_trajectories(mdp, pi, params.horizon)
    n_states, n_actions = pi.shape
    definition = [mdp.rho[s[0]] * math.prod(pi[s[t], a[t]] * mdp.P[s[t], a[t], s[t + 1]]
                                             for t in range(params.horizon))
                  for s, a in zip(paths.s_t.T, paths.a_t.T, strict=True)]
    score_t = np.zeros((*paths.a_t.shape, n_states, n_actions), dtype=object) + Fraction(0)
    for index in np.ndindex(paths.a_t.shape):
        state, action = paths.s_t[index], paths.a_t[index]
        score_t[(*index, state)] = softmax_score(pi[state], action)
    importance = paths.probability * len(paths.probability)
    full_minus_causal, causal_minus_theorem, norms = [], [], []
    for gamma in map(as_written, params.gammas):
        # The weights are the returns of trajectories the policy itself draws (enumerated exactly).
        reach_mdp(mdp.P, gamma=gamma, horizon=params.horizon, data="current", advantages="estimated")
        full = ctx.impl.reinforce_gradient(ctx.impl.full_return_weights(paths.r_t, gamma) * importance, score_t)
        causal = ctx.impl.reinforce_gradient(ctx.impl.discounted_objective_weights(paths.r_t, gamma) * importance,
                                             score_t)
        theorem = finite_horizon_policy_gradient(mdp.P, mdp.R, mdp.rho, pi, params.horizon, gamma)
        full_minus_causal.append(largest_magnitude((full - causal).ravel()))
        causal_minus_theorem.append(largest_magnitude((causal - theorem).ravel()))
        norms.append(sum(g * g for g in theorem.ravel()))
    return {"largest_difference_by_gamma": full_minus_causal,
            "largest_difference_from_theorem_by_gamma": causal_minus_theorem,
            "squared_norm_by_gamma": norms,
            "probabilities_match_definition": list(paths.probability) == definition,
            "total_probability": paths.probability.sum()}


class WeightField:
    """The field F(θ) = E[Σ_t w_t ∇log π_θ(a_t|s_t)] of per-step weights w_t at a policy table, and its Jacobian,
    exactly, for a tabular softmax policy on an exact MDP whose dynamics do not depend on θ.

    Differentiating under the (finite) sum over trajectories, with p_θ(τ)' = p_θ(τ) S(τ)ᵀ and
    S(τ) = Σ_t s_t the trajectory's score: ∂F_i/∂θ_j = E[Σ_t w_t (s_{t,i} S_j + ∂s_{t,i}/∂θ_j)]. For the
    tabular softmax the score of step t is e_{a_t} - π(·|s_t) in row s_t and its derivative is
    -(diag π(·|s_t) - π(·|s_t) π(·|s_t)ᵀ) on that row's block, whatever a_t: written here exactly from the
    policy table; they depend on θ only through π, so any θ with softmax(θ) = π is the point. impl enumerates
    the trajectories with their exact probabilities (``paths``), and averages the estimator: F itself is impl's
    REINFORCE average with weights w_t M p(τ) (M trajectories), and E[Σ_t w_t S_j s_t] the same with weights
    w_t S_j(τ) M p(τ), one j at a time. A field is the gradient of some function only if its Jacobian is
    symmetric (a C² potential would make it a Hessian).
    """

    def __init__(self, ctx: Context, mdp: MDPTables, pi: np.ndarray, horizon: int):
        self._ctx, self.pi = ctx, pi
        n_states, n_actions = pi.shape
        self._size = n_states * n_actions
        self.paths = ctx.impl.enumerate_trajectories(mdp, pi, horizon)
        zero = Fraction(0)
        score_t = np.zeros((*self.paths.a_t.shape, n_states, n_actions), dtype=object) + zero
        for index in np.ndindex(self.paths.a_t.shape):
            state, action = self.paths.s_t[index], self.paths.a_t[index]
            score_t[(*index, state)] = softmax_score(pi[state], action)
        self._score_t = score_t
        self._importance = self.paths.probability * len(self.paths.probability)

    def expectation(self, w_t: np.ndarray) -> np.ndarray:
        """F = E[Σ_t w_t ∇log π(a_t|s_t)] for the per-step weights w_t [T, M], shape [S, A], exactly."""
        return self._ctx.impl.reinforce_gradient(w_t * self._importance, self._score_t)

    @functools.cached_property
    def _trajectory_score(self) -> np.ndarray:
        """S(τ) = Σ_t s_t, shape [M, S·A]."""
        return self._score_t.sum(axis=0).reshape(self._score_t.shape[1], self._size)

    @functools.cached_property
    def _curvature(self) -> np.ndarray:
        """∂s_t/∂θ as one [S·A, S·A] block per state, the same for every action taken there."""
        n_states, n_actions = self.pi.shape
        curvature = np.zeros((n_states, self._size, self._size), dtype=object) + Fraction(0)
        for state in range(n_states):
            block = slice(state * n_actions, (state + 1) * n_actions)
            curvature[state, block, block] = -(np.diag(self.pi[state]) - np.outer(self.pi[state], self.pi[state]))
        return curvature

    def jacobian(self, w_t: np.ndarray) -> np.ndarray:
        """∂F_i/∂θ_j for the field of the per-step weights w_t [T, M], shape [S·A, S·A], exactly."""
        columns = [self._ctx.impl.reinforce_gradient(w_t * self._trajectory_score[:, j] * self._importance,
                                                     self._score_t).reshape(self._size)
                   for j in range(self._size)]
        first = np.array(columns, dtype=object).T  # [i, j]
        expected_weight = [(w_t[t] * self.paths.probability) for t in range(w_t.shape[0])]  # p(τ) w_t, [T][M]
        second = np.zeros((self._size, self._size), dtype=object) + Fraction(0)
        for t in range(w_t.shape[0]):
            for state in range(self.pi.shape[0]):
                mass = sum(expected_weight[t][self.paths.s_t[t] == state])
                second = second + mass * self._curvature[state]
        return first + second


def asymmetry(matrix: np.ndarray) -> Fraction:
    """The largest |M_ij - M_ji|: zero exactly when the (Jacobian) matrix is symmetric."""
    return largest_magnitude(matrix - matrix.T)


@verifier(kind="counterexample",
          uses=("enumerate_trajectories", "discounted_returns", "discounted_objective_weights", "full_return_weights",
                "reinforce_gradient"),
          params=ExactMDP)
def undiscounted_weighting_is_no_gradient(ctx: Context) -> dict[str, object]:
    """The Jacobian of the field F(θ) = E[Σ_t w_t ∇log π_θ(a_t|s_t)] at the policy given, in rational arithmetic
    (:class:`WeightField`).

    An asymmetric Jacobian of the weights w_t = G_t (the form without the outer γ^t) shows that this update
    optimises no objective at all; with w_t = γ^t G_t the field is ∇J_γ, and its Jacobian must be the
    Hessian of J_γ, symmetric. The Hessian of J_γ is the same Jacobian with the full discounted return
    R_γ(τ) at every step (impl's ``full_return_weights``), whose field is ∇J_γ.
    """
    params = ctx.params
    mdp, pi = params.exact_tables()
    field = WeightField(ctx, mdp, pi, params.horizon)
    r_t = field.paths.r_t
    without, with_factor, hessian_agrees = [], [], []
    for gamma in map(as_written, params.gammas):
        # Every weight is a return of trajectories the policy itself draws (enumerated exactly).
        reach_mdp(mdp.P, gamma=gamma, horizon=params.horizon, data="current", advantages="estimated")
        dropped = field.jacobian(ctx.impl.discounted_returns(r_t, gamma))
        literal = field.jacobian(ctx.impl.discounted_objective_weights(r_t, gamma))
        hessian = field.jacobian(ctx.impl.full_return_weights(r_t, gamma))
        without.append(asymmetry(dropped))
        with_factor.append(asymmetry(literal))
        hessian_agrees.append(bool(np.all(literal == hessian)))
    return {"asymmetry_without_discount_factor_by_gamma": without,
            "asymmetry_with_discount_factor_by_gamma": with_factor,
            "jacobian_with_discount_factor_is_objective_hessian_by_gamma": hessian_agrees}


@verifier(kind="property", uses=("objective_gradient",))
def discounted_visitation_property(ctx: Context) -> dict[str, object]:
    """On random MDPs with dynamics independent of θ, random logits and γ in [0, 1]: impl's gradient of the
    literal J_γ equals Σ_t Σ_s γ^t d_t(s) Σ_a π(a|s) Q_t(s, a) ∇log π(a|s), the form without an outer
    γ^t whose states are visited with the discount (``finite_horizon_policy_gradient``, the verifier's
    own forward and backward recursions), within a rounding bound; with the undiscounted visits d_t it
    is another vector wherever γ < 1 makes them differ (counted).

    The bound is that of enumerating every trajectory (impl may compute its gradient so) plus the
    recursions' own T (S A S + 10) operations, on numbers up to T max|R|.
    """
    differs = 0

    def agrees(example: tuple[MDPTables, np.ndarray, int, float]) -> None:
        nonlocal differs
        mdp, theta, horizon, gamma = example
        pi = softmax(theta)
        n_states, n_actions = theta.shape
        # The recursions weight each visit by the exact Q_t of the policy whose visits they follow.
        reach_mdp(mdp.P, gamma=gamma, horizon=horizon, data="current", advantages="exact")
        discounted = finite_horizon_policy_gradient(mdp.P, mdp.R, mdp.rho, pi, horizon, gamma)
        undiscounted = finite_horizon_policy_gradient(mdp.P, mdp.R, mdp.rho, pi, horizon, gamma,
                                                      discount_visits=False)
        exact = ctx.impl.objective_gradient(mdp, theta, horizon, gamma)
        largest = largest_return(mdp.R, horizon, gamma)
        trajectories = n_states ** (horizon + 1) * n_actions**horizon
        bound = rounding_bound(trajectories * (horizon + 4) + horizon * (n_states**2 * n_actions + 10),
                               horizon * max(largest, float(np.abs(mdp.R).max())))
        assert_close(exact, discounted, bound, "impl's objective_gradient against the recursions' (visits discounted)")
        differs += bool(np.abs(exact - undiscounted).max() > bound)

    found = check_property(ctx, agrees, _random_mdps())
    return {**found, "examples_where_undiscounted_visits_differ": differs}


class WeightsProperty(NoParams):
    """Which impl weights the enumerated REINFORCE expectation uses."""

    weights: Literal["full_return_weights", "discounted_objective_weights"]


@verifier(kind="property",
          uses=("enumerate_trajectories", "softmax", "tabular_softmax_score", "reinforce_gradient",
                "full_return_weights", "discounted_objective_weights", "objective", "objective_gradient"),
          params=WeightsProperty)
def enumerated_gradient_property(ctx: Context) -> dict[str, object]:
    """On random MDPs with dynamics independent of θ, random logits and γ in [0, 1]: the exact
    expectation of impl's REINFORCE estimate with the chosen weights, impl's ``objective_gradient``,
    and the central difference of the verifier's own J_γ agree within the derived bound
    (``objective_difference_bound``, step 1e-4, plus the rounding of the enumerated sums); impl's
    ``objective`` equals the verifier's J_γ up to rounding.
    """
    step = 1e-4
    weights = ctx.params.weights

    def agrees(example: tuple[MDPTables, np.ndarray, int, float]) -> None:
        mdp, theta, horizon, gamma = example
        # The weights are returns of the trajectories the policy itself draws (enumerated exactly).
        reach_mdp(mdp.P, gamma=gamma, horizon=horizon, data="current", advantages="estimated")
        probability, estimates = _enumerated_estimates(ctx, mdp, theta, horizon, weights, gamma)
        expectation = np.tensordot(probability, estimates, axes=1)
        exact = ctx.impl.objective_gradient(mdp, theta, horizon, gamma)
        numeric = central_difference(lambda x: reference_objective(mdp, x, horizon, gamma), theta, step)
        largest = largest_return(mdp.R, horizon, gamma)
        summation = rounding_bound(len(probability) * (horizon + 4), horizon * largest)
        bound = objective_difference_bound(mdp, horizon, gamma, step) + summation
        assert_close(expectation, numeric, bound, f"the expected REINFORCE estimate ({weights}) against ∇J_γ's")
        assert_close(exact, numeric, bound, "impl's objective_gradient against the central difference of J_γ")
        assert_close(ctx.impl.objective(mdp, theta, horizon, gamma), reference_objective(mdp, theta, horizon, gamma),
                     rounding_bound(len(probability) + horizon * (theta.shape[1] + 5), largest),
                     "impl's objective against the verifier's J_γ")

    return check_property(ctx, agrees, _random_mdps())


@verifier(kind="counterexample",
          uses=("enumerate_trajectories", "softmax", "tabular_softmax_score", "reinforce_gradient",
                "discounted_objective_weights", "discounted_returns"),
          params=MDPExample)
def dropping_discount_counterexample(ctx: Context) -> dict[str, object]:
    """E[Σ_t γ^t G_t ∇log π_t] (the literal objective's gradient) against E[Σ_t G_t ∇log π_t].

    Both are exact expectations over impl's enumeration; the central difference of the verifier's
    own J_γ (step 1e-4, error bound reported) confirms which of the two is the gradient.
    """
    params = ctx.params
    mdp, theta, horizon, gamma = params.mdp(), params.logits(), params.horizon, params.gamma
    reach_mdp(mdp.P, gamma=gamma, horizon=horizon, data="current", advantages="estimated")
    literal, dropped = (np.tensordot(*_enumerated_estimates(ctx, mdp, theta, horizon, weights, gamma), axes=1)
                        for weights in ("discounted_objective_weights", "discounted_returns"))
    numeric = central_difference(lambda x: reference_objective(mdp, x, horizon, gamma), theta, 1e-4)
    return {"literal_gradient": literal.tolist(), "gradient_without_discount_factor": dropped.tolist(),
            "finite_difference_gradient": numeric.tolist(),
            "finite_difference_error_bound": objective_difference_bound(mdp, horizon, gamma, 1e-4),
            "cosine": cosine(literal, dropped)}


# --------------------------------------------------------------------------- 4.1.5


@verifier(kind="montecarlo",
          uses=("sample_trajectories", "tabular_softmax_score", "reinforce_gradient", *_WEIGHTS),
          params=MDPEstimator)
def reinforce_montecarlo(ctx: Context) -> dict[str, object]:
    """Single-trajectory REINFORCE estimates from impl's sampler, minus the exact gradient of J_γ.

    The exact gradient is the central difference of the verifier's own J_γ (step 1e-4; its error
    bound is reported and is orders of magnitude below the deviation). Support of each component
    (s, a): step t adds w_t times a score entry in [-π(a|s), 1 - π(a|s)], with w_t between the
    smallest and largest value its weight can take given the rewards' range; the sum over t of
    the corner products bounds the estimate. The number of trajectories detects the deviation
    over the widest component.
    """
    params = ctx.params
    mdp, theta, horizon, gamma = params.mdp(), params.logits(), params.horizon, params.gamma
    step = 1e-4
    gradient = central_difference(lambda x: reference_objective(mdp, x, horizon, gamma), theta, step)
    reward_low, reward_high = float(mdp.R.min()), float(mdp.R.max())
    low, high = np.zeros_like(theta), np.zeros_like(theta)
    pi = softmax(theta)
    for t in range(horizon):
        # w_t is a sum of rewards with these total discount weights, so it lies in [low, high] times them.
        rewards_in_weight = {"full_return_weights": range(horizon), "discounted_returns": range(horizon - t),
                             "discounted_objective_weights": range(t, horizon)}[params.weights]
        total_discount = sum(gamma**k for k in rewards_in_weight)
        corners = np.array([w * s for w in (total_discount * reward_low, total_discount * reward_high)
                            for s in (-pi, 1 - pi)])
        low, high = low + corners.min(axis=0), high + corners.max(axis=0)
    slack = rounding_bound(4 * horizon * theta.shape[1], horizon * largest_return(mdp.R, horizon, gamma))
    low, high = low - gradient - slack, high - gradient + slack
    n = ctx.samples_needed((0.0, float((high - low).max())))
    trajectories = ctx.impl.sample_trajectories(ctx.rng, mdp, theta, horizon, n)
    # Sampled by the policy whose gradient is estimated; the weights are the sampled returns.
    reach_mdp(policy_kernel(mdp.P, mdp.P_alt, pi), gamma=gamma, horizon=horizon, data="current",
              advantages="estimated")
    estimates = _per_trajectory_estimates(ctx, theta, trajectories.s_t, trajectories.a_t, trajectories.r_t,
                                          params.weights, gamma)
    bias = [[ctx.mean_estimate(estimates[:, s, a] - gradient[s, a], (float(low[s, a]), float(high[s, a])))
             for a in range(theta.shape[1])] for s in range(theta.shape[0])]
    return {"bias": bias, "gradient": gradient.tolist(), "trajectories": n,
            "reference_error_bound": objective_difference_bound(mdp, horizon, gamma, step)}


@verifier(kind="exact",
          uses=("enumerate_trajectories", "softmax", "tabular_softmax_score", "reinforce_gradient", *_WEIGHTS),
          params=MDPEstimator)
def single_batch_direction_exact(ctx: Context) -> dict[str, object]:
    """The spread of impl's REINFORCE estimate around its mean, exactly, by enumeration.

    For batches of N = 1 and N = 2 independent trajectories: the probability that the estimate
    has a negative inner product with the gradient g (the mean of the single-trajectory
    estimates), and for N = 1 the total variance E||ĝ - g||² beside ||g||².
    """
    params = ctx.params
    mdp, theta = params.mdp(), params.logits()
    reach_mdp(policy_kernel(mdp.P, mdp.P_alt, softmax(theta)), gamma=params.gamma, horizon=params.horizon,
              data="current", advantages="estimated")
    probability, estimates = _enumerated_estimates(ctx, mdp, theta, params.horizon, params.weights, params.gamma)
    flat = estimates.reshape(len(probability), -1)
    gradient = probability @ flat
    inner = flat @ gradient
    pair_inner = (inner[:, None] + inner[None, :]) / 2
    pair_probability = probability[:, None] * probability[None, :]
    return {
        "gradient": gradient.reshape(estimates.shape[1:]).tolist(),
        "gradient_squared_norm": float(gradient @ gradient),
        "total_variance": float(probability @ ((flat - gradient) ** 2).sum(axis=1)),
        "probability_negative_single": float(probability[inner < 0].sum()),
        "probability_negative_pair": float(pair_probability[pair_inner < 0].sum()),
    }


class DiscountedMDP(NoParams):
    """An infinite-horizon MDP, a policy table π(a|s) and γ < 1, all exact decimals."""

    P: list[list[list[float]]]
    R: list[list[float]]
    rho: list[float]
    policy: list[list[float]]
    gamma: float = Field(ge=0, lt=1)


@verifier(kind="exact", params=DiscountedMDP)
def policy_gradient_theorem_exact(ctx: Context) -> dict[str, object]:
    """The policy gradient theorem in its discounted-visitation form, exactly, on one small MDP.

    Left side: J(θ) = ρᵀ (I - γ P_θ)^{-1} r_θ for a tabular softmax policy with symbolic logits θ,
    differentiated by sympy and evaluated at θ = log π (so π_θ is exactly the claim's table).
    Right side: with the unnormalised visitation d(s) = Σ_t γ^t Pr(s_t = s) = [ρᵀ (I - γ P_π)^{-1}](s)
    and Q = R + γ P V, Σ_s d(s) Σ_a π(a|s) Q(s, a) (e_a - π(·|s)). The normalised distribution
    d_γ = (1 - γ) d gives the same vector divided by 1 - γ, the proportionality constant.
    """
    params = ctx.params
    P = sp.Array([[[sp.Rational(repr(p)) for p in row] for row in block] for block in params.P])
    R = sp.Matrix([[sp.Rational(repr(r)) for r in row] for row in params.R])
    rho = sp.Matrix([[sp.Rational(repr(p)) for p in params.rho]])
    pi = sp.Matrix([[sp.Rational(repr(p)) for p in row] for row in params.policy])
    gamma = sp.Rational(repr(params.gamma))
    n_states, n_actions = R.shape
    theta = sp.Matrix(n_states, n_actions, lambda s, a: sp.Symbol(f"theta_{s}_{a}", real=True))

    def objective_parts(policy: sp.Matrix) -> tuple[sp.Matrix, sp.Matrix]:
        kernel = sp.Matrix(n_states, n_states,
                           lambda s, s2: sum(policy[s, a] * P[s, a, s2] for a in range(n_actions)))
        reward = sp.Matrix(n_states, 1, lambda s, _: sum(policy[s, a] * R[s, a] for a in range(n_actions)))
        return (sp.eye(n_states) - gamma * kernel).inv(), reward

    softmax = sp.Matrix(n_states, n_actions, lambda s, a: sp.exp(theta[s, a])
                        / sum(sp.exp(theta[s, b]) for b in range(n_actions)))
    resolvent, reward = objective_parts(softmax)
    objective = (rho * resolvent * reward)[0, 0]
    at_policy = {theta[s, a]: sp.log(pi[s, a]) for s in range(n_states) for a in range(n_actions)}
    gradient = sp.Matrix(n_states, n_actions, lambda s, a: sp.nsimplify(
        sp.simplify(sp.diff(objective, theta[s, a]).subs(at_policy))))

    resolvent, reward = objective_parts(pi)
    visitation = rho * resolvent
    value = resolvent * reward
    q = sp.Matrix(n_states, n_actions, lambda s, a: R[s, a] + gamma * sum(P[s, a, s2] * value[s2]
                                                                         for s2 in range(n_states)))
    # The theorem's side: the exact Q^π of the stationary discounted setting, visits of π itself.
    reach_mdp(P.tolist(), gamma=gamma, horizon=math.inf, data="current", advantages="exact")
    theorem = sp.Matrix(n_states, n_actions, lambda s, a: visitation[s] * sum(
        pi[s, b] * q[s, b] * (int(a == b) - pi[s, a]) for b in range(n_actions)))
    normalised_expectation = (1 - gamma) * theorem
    ratios = {gradient[i] / normalised_expectation[i] for i in range(len(gradient)) if normalised_expectation[i] != 0}
    return {"residual": largest_magnitude([g - t for g, t in zip(gradient, theorem, strict=True)]),
            "visitation_total": sum(visitation),
            "ratio_to_normalised_expectation": ratios.pop() if len(ratios) == 1 else sorted(ratios, key=float),
            "gradient": [float(g) for g in gradient]}


_tenths = st.integers(0, 10).map(lambda n: Fraction(n, 10))


# -------------------------------------------------------------- 4.1.4-4.1.5 on random exact MDPs, and the expected step


def _all_exact(values: np.ndarray) -> bool:
    """Whether every entry is an integer or a fraction (exact arithmetic), not a float."""
    return all(isinstance(value, int | Fraction) for value in np.ravel(values))


@verifier(kind="property",
          uses=("enumerate_trajectories", "full_return_weights", "discounted_objective_weights", "reinforce_gradient"))
def causal_weights_property(ctx: Context) -> dict[str, object]:
    """On random exact MDPs (1 to 3 states, 2 or 3 actions, horizons 1 to 3 with at most 128 trajectories,
    transition rows that may put all their mass on one state), a policy table and γ in {0, 1/10, ..., 1}: the
    exact expectations of impl's REINFORCE estimate with the full discounted return R_γ(τ) at every step and
    with γ^t G_t are equal, and equal the gradient of J_γ from the verifier's finite-horizon policy gradient
    theorem (:func:`finite_horizon_policy_gradient`), in rational arithmetic: the
    rewards before step t add nothing in expectation to its term (:class:`WeightField`
    writes the scores and takes the expectations)."""

    def same_expectation(mdp: object, pi: np.ndarray, horizon: int, gamma: Fraction) -> None:
        # The weights are returns of trajectories the policy itself draws (enumerated exactly).
        reach_mdp(mdp.P, gamma=gamma, horizon=horizon, data="current", advantages="estimated")
        field = WeightField(ctx, mdp, pi, horizon)
        full = field.expectation(ctx.impl.full_return_weights(field.paths.r_t, gamma))
        causal = field.expectation(ctx.impl.discounted_objective_weights(field.paths.r_t, gamma))
        theorem = finite_horizon_policy_gradient(mdp.P, mdp.R, mdp.rho, pi, horizon, gamma)
        # Weights in floats (an idiom without exact arithmetic) may differ by their rounding alone: the enumerated
        # sum of M (T + 4) operations on numbers up to T max|R|.
        n_states, n_actions = pi.shape
        bound = rounding_bound(len(field.paths.probability) * (horizon + 4) + horizon * (n_states**2 * n_actions + 10),
                               horizon * float(np.abs(mdp.R).max()))
        for side, other in ((full, causal), (causal, theorem)):
            gap = largest_magnitude((side - other).ravel())
            assert gap == 0 if _all_exact(side) else float(gap) <= bound, (side, other)

    return check_property(ctx, lambda example, gamma: same_expectation(*example, gamma),
                          exact_mdps(most_trajectories=128), _tenths)


@st.composite
def _sampled_terms(draw: st.DrawFn) -> tuple[np.ndarray, int, int, float, float, float]:
    """Logits θ [S, A] of a tabular softmax policy (1 to 3 states, 2 to 4 actions, entries in [-3, 3]), a state s
    and an action a, the action's value Q(s, a), a baseline b(s) (Q(s, a) itself in some draws) and a step size."""
    n_states, n_actions = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    logits = draw(st.arrays(np.float64, (n_states, n_actions), elements=st.floats(min_value=-3, max_value=3)))
    state, action = draw(st.integers(0, n_states - 1)), draw(st.integers(0, n_actions - 1))
    value = draw(st.floats(min_value=-5, max_value=5))
    baseline = draw(st.one_of(st.just(value), st.floats(min_value=-5, max_value=5)))
    return logits, state, action, value, baseline, draw(st.floats(min_value=1e-3, max_value=2))


@verifier(kind="property", uses=("tabular_softmax_score", "reinforce_gradient"))
@given(_sampled_terms())
def sampled_term_sign_property(ctx: Context, example: tuple[np.ndarray, int, int, float, float, float]) -> None:
    """One sampled term's step θ ← θ + η (Q(s,a) - b(s)) ∇_θ log π_θ(a|s), through impl's score and estimator (one
    step of one trajectory), on random tabular logits: it equals the verifier's η w (e_a - π(·|s)) in row s (w =
    Q(s,a) - b(s)) up to rounding and leaves the other rows exactly; in row s the chosen logit moves by more than
    every other when w > 0 and by less when w < 0 (by η w (1 - π(a|s) + π(b|s)) relative to logit b); π(a|s), by
    the verifier's softmax, rises when w > 0 and falls when w < 0, for every step size; w = 0 moves nothing.

    Along the direction v = e_a - π(·|s) the derivative of log π(a|s) is v_a - Σ_b π'(b) v_b at every point π'
    of the segment, positive because v_a is the largest entry of v: the sign holds for every step size, not only
    small ones. |η w| is at least 1e-6 (else the example is discarded), so every change stays far above float64
    resolution.
    """
    logits, state, action, value, baseline, step_size = example
    weight = value - baseline
    assume(weight == 0 or abs(step_size * weight) >= 1e-6)
    n_states, n_actions = logits.shape
    reach(states=n_states, actions=n_actions)
    score = ctx.impl.tabular_softmax_score(logits, state, action)
    step = step_size * np.asarray(ctx.impl.reinforce_gradient(np.array([[weight]]), np.asarray(score)[None, None]),
                                  dtype=float)
    pi = np.exp(log_softmax(logits[state]))
    reference = step_size * weight * (np.eye(n_actions)[action] - pi)
    bound = rounding_bound(8 * n_actions, abs(step_size * weight))
    assert_close(step[state], reference, bound, "row s of the step against η w (e_a - π(·|s))")
    assert np.all(np.delete(step, state, axis=0) == 0), ("a row other than s moved", step)
    if weight == 0:
        assert np.all(step == 0), step
        return
    others = np.delete(np.arange(n_actions), action)
    relative = step[state, action] - step[state, others]
    assert np.all(np.sign(relative) == np.sign(weight)), ("logit of a relative to the others", relative, weight)
    change = np.exp(log_softmax(logits[state] + step[state]))[action] - pi[action]
    assert np.sign(change) == np.sign(weight), ("π(a|s) moved against the weight", change, weight)


_weights = st.integers(-160, 160).map(lambda n: Fraction(n, 16))


@st.composite
def _reinforce_batches(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Exact weights [T, M, N] and scores [T, M, N, P] (M independent batches of N trajectories)."""
    horizon, batches, trajectories, size = (draw(st.integers(1, 4)), draw(st.integers(1, 3)),
                                            draw(st.integers(1, 5)), draw(st.integers(1, 3)))
    cells = horizon * batches * trajectories
    weights = draw(st.lists(_weights, min_size=cells, max_size=cells))
    scores = draw(st.lists(_weights, min_size=cells * size, max_size=cells * size))
    return (np.array(weights, dtype=object).reshape(horizon, batches, trajectories),
            np.array(scores, dtype=object).reshape(horizon, batches, trajectories, size))


@verifier(kind="property", uses=("reinforce_gradient",))
@given(_reinforce_batches())
def reinforce_form_property(ctx: Context, batch: tuple[np.ndarray, np.ndarray]) -> None:
    """On random exact weights and scores, impl's REINFORCE estimate of every batch equals
    (1/N) Σ_i Σ_t w_{i,t} s_{i,t}, the sum over the steps of each trajectory averaged over its N
    trajectories, exactly; and one batch alone ([T, N]) gives that batch's estimate."""
    w_t, score_t = batch
    horizon, batches, trajectories = w_t.shape
    # Arbitrary numbers stand for the weights: estimates, whatever objective they belong to.
    reach(horizon=horizon, advantages="estimated")
    estimate = ctx.impl.reinforce_gradient(w_t, score_t)
    for m in range(batches):
        definition = [sum(w_t[t, m, i] * score_t[t, m, i, j] for t in range(horizon) for i in range(trajectories))
                      / trajectories for j in range(score_t.shape[-1])]
        assert list(estimate[m]) == definition, (m, list(estimate[m]), definition)
    alone = ctx.impl.reinforce_gradient(w_t[:, 0], score_t[:, 0])
    assert list(alone) == list(estimate[0]), (list(alone), list(estimate[0]))


class _Dual:
    """a + b ε with ε² = 0, over fractions: forward-mode differentiation of a rational computation."""

    __slots__ = ("a", "b")

    def __init__(self, a: object, b: object = 0) -> None:
        self.a, self.b = Fraction(a), Fraction(b)

    @staticmethod
    def _of(value: object) -> _Dual:
        return value if isinstance(value, _Dual) else _Dual(value)

    def __add__(self, other: object) -> _Dual:
        other = self._of(other)
        return _Dual(self.a + other.a, self.b + other.b)

    __radd__ = __add__

    def __sub__(self, other: object) -> _Dual:
        other = self._of(other)
        return _Dual(self.a - other.a, self.b - other.b)

    def __rsub__(self, other: object) -> _Dual:
        return self._of(other) - self

    def __mul__(self, other: object) -> _Dual:
        other = self._of(other)
        return _Dual(self.a * other.a, self.a * other.b + self.b * other.a)

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> _Dual:
        other = self._of(other)
        return _Dual(self.a / other.a, (self.b * other.a - self.a * other.b) / (other.a * other.a))

    def __rtruediv__(self, other: object) -> _Dual:
        return self._of(other) / self


def _solve(system: list[list[object]], rhs: list[object]) -> list[object]:
    """x with system x = rhs by Gauss-Jordan elimination, for fractions or duals (pivot on a non-zero value)."""
    size = len(rhs)
    rows = [[*row, value] for row, value in zip(system, rhs, strict=True)]
    for column in range(size):
        pivot = next(r for r in range(column, size) if Fraction(getattr(rows[r][column], "a", rows[r][column])) != 0)
        rows[column], rows[pivot] = rows[pivot], rows[column]
        lead = rows[column][column]
        rows[column] = [value / lead for value in rows[column]]
        for r in range(size):
            if r != column:
                factor = rows[r][column]
                rows[r] = [value - factor * top for value, top in zip(rows[r], rows[column], strict=True)]
    return [row[-1] for row in rows]


def _objective(P: np.ndarray, R: np.ndarray, rho: np.ndarray, pi: list[list[object]], gamma: Fraction) -> object:
    """J = Σ_s ρ(s) V(s) with (I - γ P_π) V = r_π: the expected discounted return, for fractions or duals."""
    n_states, n_actions = R.shape
    kernel = [[sum((pi[s][a] * P[s, a, t] for a in range(n_actions)), Fraction(0)) for t in range(n_states)]
              for s in range(n_states)]
    system = [[Fraction(int(s == t)) - gamma * kernel[s][t] for t in range(n_states)] for s in range(n_states)]
    reward = [sum((pi[s][a] * R[s, a] for a in range(n_actions)), Fraction(0)) for s in range(n_states)]
    values = _solve(system, reward)
    return sum((rho[s] * values[s] for s in range(n_states)), Fraction(0))


def _softmax_direction(pi: np.ndarray, state: int, action: int) -> list[list[_Dual]]:
    """The policy table as duals π + ε ∂π/∂θ_{s,a}: ∂π(b|u)/∂θ_{s,a} is π(b|s) (δ_ab - π(a|s)) in row s, zero
    elsewhere (the softmax's exact derivative)."""
    n_states, n_actions = pi.shape
    return [[_Dual(pi[u, b], pi[u, b] * (int(action == b) - pi[u, action]) if u == state else 0)
             for b in range(n_actions)] for u in range(n_states)]


@st.composite
def _discounted_mdps(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Fraction]:
    """An exact MDP of up to 3 states and 3 actions (transition rows may hold zeros), a positive policy
    table, rewards in quarters of [-2, 2], and γ in {0, 1/10, ..., 9/10}."""
    n_states, n_actions = draw(st.integers(1, 3)), draw(st.integers(2, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    P, R, rho, pi = random_exact_mdp(rng, n_states, n_actions, 10)
    return P, R, rho, pi, Fraction(draw(st.integers(0, 9)), 10)


@verifier(kind="property", uses=("policy_action_values",))
@given(_discounted_mdps())
def policy_gradient_theorem_property(ctx: Context,
                                     example: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Fraction]) -> None:
    """On random exact infinite-horizon MDPs, policies and γ < 1: ∂J/∂θ_{s,a} of the tabular softmax policy,
    differentiated here with dual numbers (forward mode, exact), equals the theorem's
    Σ_s d(s) Σ_b π(b|s) Q^π(s, b) ∂ log π(b|s)/∂θ_{s,a} = d(s) π(a|s) (Q^π(s, a) - Σ_b π(b|s) Q^π(s, b)),
    with impl's Q^π and the unnormalised visitation d = ρᵀ (I - γ P_π)^{-1}, computed here; Σ_s d(s) is
    1/(1 - γ), the constant that normalising d to a distribution puts in front.

    The dual part of π along θ_{s,a} is ∂π(b|s)/∂θ_{s,a} = π(b|s) (δ_ab - π(a|s)), the softmax's exact
    derivative; J(θ + ε e_{s,a}) is then solved in dual numbers, so its ε part is the derivative of J.
    """
    P, R, rho, pi, gamma = example
    n_states, n_actions = R.shape
    kernel = (pi[:, :, None] * P).sum(axis=1)
    system = [[Fraction(int(t == s)) - gamma * kernel[t, s] for t in range(n_states)] for s in range(n_states)]
    visitation = _solve(system, list(rho))  # (I - γ P_π)ᵀ d = ρ
    assert sum(visitation) == 1 / (1 - gamma), (visitation, gamma)
    # The theorem's side: the exact Q^π of the stationary discounted setting, visits of π itself.
    reach_mdp(P, gamma=gamma, horizon=math.inf, data="current", advantages="exact")
    q = ctx.impl.policy_action_values(P, R, pi, gamma)
    for s, a in itertools.product(range(n_states), range(n_actions)):
        derivative = _objective(P, R, rho, _softmax_direction(pi, s, a), gamma).b
        theorem = visitation[s] * pi[s, a] * (q[s, a] - sum(pi[s, b] * q[s, b] for b in range(n_actions)))
        assert derivative == theorem, ((s, a), derivative, theorem)


def _finite_horizon_objective(P: np.ndarray, R: np.ndarray, rho: np.ndarray, pi: list[list[object]], horizon: int,
                              gamma: Fraction) -> object:
    """J_γ = Σ_{t<T} γ^t Σ_s d_t(s) Σ_a π(a|s) R(s, a), with d_0 = ρ and d_{t+1}(s2) = Σ_{s,a} d_t(s) π(a|s) P(s2|s, a):
    the literal discounted objective of step 4.1.4, for fractions or duals."""
    n_states, n_actions = R.shape
    visits, total = list(rho), Fraction(0)
    for t in range(horizon):
        total = total + gamma**t * sum((visits[s] * pi[s][a] * R[s, a] for s in range(n_states)
                                        for a in range(n_actions)), Fraction(0))
        visits = [sum((visits[s] * pi[s][a] * P[s, a, s2] for s in range(n_states) for a in range(n_actions)),
                      Fraction(0)) for s2 in range(n_states)]
    return total


@verifier(kind=("exact", "counterexample"),
          uses=("enumerate_trajectories", "discounted_returns", "discounted_objective_weights", "reinforce_gradient"),
          params=ExactMDP)
def reinforce_weights_objective_exact(ctx: Context) -> dict[str, object]:
    """Which objective REINFORCE is unbiased for, with the recipe's weights G_t and with γ^t G_t, exactly.

    For each γ: the exact expectation of impl's estimate over every trajectory impl enumerates, with impl's
    ``discounted_returns`` (G_t) and ``discounted_objective_weights`` (γ^t G_t) as weights, minus ∇J_γ, the
    gradient of the literal objective differentiated here in dual numbers (forward mode over fractions, the
    softmax's exact derivative; :func:`_finite_horizon_objective`), the largest coordinate reported; and the
    asymmetry of each field's Jacobian (:class:`WeightField`). A field with an
    asymmetric Jacobian is the gradient of no function: no objective exists for which that estimate is unbiased.
    """
    params = ctx.params
    mdp, pi = params.exact_tables()
    field = WeightField(ctx, mdp, pi, params.horizon)
    n_states, n_actions = pi.shape
    results: dict[str, list[object]] = {key: [] for key in (
        "bias_with_returns_by_gamma", "asymmetry_with_returns_by_gamma",
        "bias_with_discounted_weights_by_gamma", "asymmetry_with_discounted_weights_by_gamma")}
    for gamma in map(as_written, params.gammas):
        # The weights are returns of trajectories the policy itself draws (enumerated exactly).
        reach_mdp(mdp.P, gamma=gamma, horizon=params.horizon, data="current", advantages="estimated")
        gradient = np.array([[_finite_horizon_objective(mdp.P, mdp.R, mdp.rho, _softmax_direction(pi, s, a),
                                                        params.horizon, gamma).b
                              for a in range(n_actions)] for s in range(n_states)], dtype=object)
        for name, weights in (("returns", ctx.impl.discounted_returns),
                              ("discounted_weights", ctx.impl.discounted_objective_weights)):
            w_t = weights(field.paths.r_t, gamma)
            results[f"bias_with_{name}_by_gamma"].append(
                largest_magnitude((field.expectation(w_t) - gradient).ravel()))
            results[f"asymmetry_with_{name}_by_gamma"].append(asymmetry(field.jacobian(w_t)))
    return results


class ExpectedStepExample(NoParams):
    """One state's policy π(a) and action values Q(a), exact decimals."""

    policy: Distribution = Field(min_length=2, description="π(a); sums to exactly one")
    q: list[float] = Field(min_length=2, description="Q(s, a) of each action")

    _lengths = one_entry_each("policy", "q", per="action")


@verifier(kind=("exact", "counterexample"), uses=("score_function_gradient",), params=ExpectedStepExample)
def expected_step_probabilities_exact(ctx: Context) -> dict[str, object]:
    """The expected policy-gradient step at one state and what it does to each action's probability, exactly.

    The step on the logits is Σ_a π(a) A(a) ∇_z log π(a) with A(a) = Q(a) - V and V = Σ_a π(a) Q(a):
    impl's ``score_function_gradient`` averages f_a ∇log π(a) over the K actions with f_a = K π(a) A(a),
    which makes its mean the expectation; the scores e_a - π are the verifier's exact rows. Along a logit
    step dz a softmax's probabilities move, to first order, by dπ = π ⊙ (dz - π·dz).
    """
    pi, q = as_fractions(ctx.params.policy), as_fractions(ctx.params.q)
    advantage = q - (pi * q).sum()
    reach(states=1, actions=len(pi), advantages="exact")
    step = ctx.impl.score_function_gradient(len(pi) * pi * advantage, softmax_scores(pi))
    change = pi * (step - (pi * step).sum())
    return {"advantages": list(advantage), "logit_step": list(step), "probability_change": list(change),
            "logits_follow_advantages": all((s > 0) == (a > 0) and (s < 0) == (a < 0)
                                            for s, a in zip(step, advantage, strict=True)),
            "a_positive_advantage_loses_probability": any(a > 0 > c for a, c in zip(advantage, change, strict=True))}

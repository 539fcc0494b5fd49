"""Ratios, the local and clipped surrogates, TRPO's bound and the PPO loss (lesson 4.4, week 16 steps 3-4)."""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import sympy as sp
from pydantic import Field

from claims_harness import Context, NoParams, assume, check_property, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, exact_solve, probability_rows
from verifiers._numeric import (
    EPS,
    as_written,
    assert_close,
    central_difference,
    largest,
    log_softmax,
    rounding_bound,
    smallest,
)
from verifiers._params import Distribution
from verifiers._reach import reach_mdp, transitions_of

# --------------------------------------------------------------------------- 4.4.1 ratios


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


# --------------------------------------------------------------------------- 4.4.1 gradient at θ_old


@verifier(kind="symbolic")
def surrogate_gradient_at_old_symbolic(ctx: Context) -> dict[str, object]:
    """∂/∂θ [π_θ(a|s) / π_old(a|s)] at θ = θ_old minus ∂/∂θ log π_θ(a|s) at θ_old, for any policy.

    π is an undefined differentiable function of a parameter θ, and π_old is its value at θ_old,
    held fixed; the surrogate is linear in these per-sample terms with the advantages fixed, so a
    zero residual per term makes ∇L^PG(θ_old) = E_old[Â ∇ log π_θ_old], the policy gradient. The
    same residual for the batch sum Σ_{i=1}^{N} Â_i r_i with N symbolic is reported too.

    The condition that the advantages are held fixed: with an advantage A(θ) that moves with the
    parameters, the same residual for A(θ) r(θ) against A(θ_old) ∇log π is A'(θ_old), which is
    not zero for a generic A.
    """
    theta, theta_old = sp.symbols("theta theta_old", real=True)
    policy = sp.Function("pi")
    ratio = policy(theta) / policy(theta_old)
    per_sample = (sp.diff(ratio, theta) - sp.diff(sp.log(policy(theta)), theta)).subs(theta, theta_old)
    i, n = sp.symbols("i N", integer=True, positive=True)
    advantage = sp.IndexedBase("A")
    member = sp.Function("pi_i")
    batch = sp.Sum(advantage[i] * member(theta, i) / member(theta_old, i), (i, 1, n))
    reinforce = sp.Sum(advantage[i] * sp.log(member(theta, i)), (i, 1, n))
    batch_residual = (sp.diff(batch, theta) - sp.diff(reinforce, theta)).subs(theta, theta_old).doit()
    moving_advantage = sp.Function("A")
    moving = (sp.diff(moving_advantage(theta) * ratio, theta)
              - moving_advantage(theta_old) * sp.diff(sp.log(policy(theta)), theta)).subs(theta, theta_old)
    moving = sp.simplify(moving.doit())
    # The N samples each have a policy of their own (pi_i), so they stand for up to N states; the ratio is taken
    # against the policy at theta_old, the one the samples were drawn with, and the A_i are arbitrary numbers.
    reach(states=n, data="old", advantages="estimated")
    return {"per_sample_residual": sp.simplify(per_sample),
            "batch_residual": sp.simplify(sp.expand(batch_residual)),
            "residual_with_moving_advantage": moving,
            "moving_advantage_residual_vanishes": bool(moving == 0)}


class TabularBatch(NoParams):
    n_states: int = Field(ge=1, le=50, description="rows of the logit table")
    n_actions: int = Field(ge=2, le=20, description="actions per state")
    batch_size: int = Field(ge=1, le=4096, description="samples (s, a, Â) in the batch")
    epsilon: float = Field(0.2, gt=0, lt=1, description="clipping parameter of the clipped surrogate")


def _sample_batch(rng: np.random.Generator, logits: np.ndarray, batch_size: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    states = rng.integers(0, logits.shape[0], batch_size)
    probabilities = np.exp(log_softmax(logits[states]))
    actions = (rng.random(batch_size)[:, None] >= np.cumsum(probabilities, axis=1)).sum(axis=1)
    actions = np.minimum(actions, logits.shape[1] - 1)
    return states, actions, rng.normal(size=batch_size)


# For one logit z of a softmax policy and l = log π(a): |l'| <= 1, |l''| <= 1/4, |l'''| <= 1/(6 sqrt 3),
# and the ratio r = exp(l - l_old) has r''' = r (l''' + 3 l' l'' + l'^3), so |r'''| <= this constant times r.
_RATIO_THIRD_DERIVATIVE = 1 / (6 * np.sqrt(3)) + 3 / 4 + 1


class _StoredBatch(NamedTuple):
    states: np.ndarray
    actions: np.ndarray
    log_pi_old: np.ndarray
    advantages: np.ndarray


def _mean_surrogate(impl: object, batch: _StoredBatch, epsilon: float | None, table: np.ndarray) -> float:
    """impl's L^PG (``epsilon`` None) or L^CLIP of the stored batch, for the policy softmax(table[s])."""
    log_pi = impl.log_softmax(table[batch.states])[np.arange(batch.actions.size), batch.actions]
    ratio = impl.probability_ratios(log_pi, batch.log_pi_old)
    if epsilon is None:
        return float(np.mean(impl.surrogate_objective(ratio, batch.advantages)))
    return float(np.mean(impl.ppo_clip_objective(ratio, batch.advantages, epsilon)))


@verifier(kind="property",
          uses=("log_softmax", "probability_ratios", "surrogate_objective", "ppo_clip_objective",
                "surrogate_objective_grad", "ppo_clip_objective_grad", "softmax_score"),
          params=TabularBatch)
def surrogate_gradient_at_old_finite_difference(ctx: Context) -> dict[str, object]:
    """The syllabus's key test on a tabular softmax policy: at θ = θ_old the gradients of impl's
    surrogate L^PG and clipped surrogate L^CLIP with respect to the logit table, taken by central
    differences of impl's objectives (not by impl's gradient code), equal the REINFORCE gradient
    (1/N) Σ_i Â_i (e_{a_i} - π(s_i)), computed here with NumPy's softmax.

    The bound: moving one logit by h changes every log π(a|s) by at most h, so every ratio stays
    in [e^-h, e^h], inside [1-ε, 1+ε] where the clipped objective is smooth, and the central
    difference is off by at most (h²/6) max|f'''| <= (h²/6) c e^h (1/N) Σ|Â_i|, with c the
    constant ``_RATIO_THIRD_DERIVATIVE``. Each evaluation of f rounds by at most δf, the float64
    bound for O(N + K) operations on terms of size (1/N) Σ|Â_i| e (1 + max|z|), which costs
    δf / h; h minimises the sum of the two. Observed: the largest difference over ``examples``
    random tables and batches, relative to that bound (<= 1 means equal), over both objectives;
    and the same, relative to the rounding of the sums, for impl's analytic path (its per-sample
    gradient times its softmax score), the path the training loop follows.
    """
    params = ctx.params
    n = params.batch_size
    rows = np.arange(n)
    examples = {"smoke": 20, "full": 200}[ctx.profile]
    worst_numeric = worst_analytic = 0.0
    for _ in range(examples):
        logits = ctx.rng.normal(scale=2.0, size=(params.n_states, params.n_actions))
        states, actions, advantages = _sample_batch(ctx.rng, logits, n)
        # The actions were drawn from softmax(logits), the policy at theta_old; the advantages are random numbers.
        reach(states=logits.shape[0], actions=logits.shape[1], data="old", advantages="estimated")
        log_pi_old = ctx.impl.log_softmax(logits[states])[rows, actions]
        batch = _StoredBatch(states, actions, log_pi_old, advantages)
        objectives = (functools.partial(_mean_surrogate, ctx.impl, batch, None),
                      functools.partial(_mean_surrogate, ctx.impl, batch, params.epsilon))
        probabilities = np.exp(log_softmax(logits[states]))
        one_hot = np.eye(params.n_actions)[actions]
        reinforce = np.zeros_like(logits)
        np.add.at(reinforce, states, advantages[:, None] * (one_hot - probabilities) / n)

        scale = float(np.abs(advantages).mean())
        evaluation_rounding = rounding_bound(4 * (n + params.n_actions),
                                             scale * np.e * (1 + float(np.abs(logits).max())))
        step = float(np.cbrt(3 * evaluation_rounding / (_RATIO_THIRD_DERIVATIVE * max(scale, EPS))))
        assert step < min(np.log1p(params.epsilon), -np.log1p(-params.epsilon)), step
        bound = (step**2 / 6 * _RATIO_THIRD_DERIVATIVE * np.exp(step) * scale + evaluation_rounding / step
                 + rounding_bound(2 * (n + params.n_actions), scale))
        for objective in objectives:
            numeric = central_difference(objective, logits, step)
            worst_numeric = max(worst_numeric, float(np.abs(numeric - reinforce).max()) / bound)

        ratio = ctx.impl.probability_ratios(log_pi_old, log_pi_old)
        score = ctx.impl.softmax_score(logits[states], actions)
        analytic_bound = rounding_bound(2 * (n + params.n_actions), scale)
        for per_sample in (ctx.impl.surrogate_objective_grad(ratio, advantages),
                           ctx.impl.ppo_clip_objective_grad(ratio, advantages, params.epsilon)):
            gradient = np.zeros_like(logits)
            np.add.at(gradient, states, (np.asarray(per_sample, dtype=float) / n)[:, None] * score)
            worst_analytic = max(worst_analytic, float(np.abs(gradient - reinforce).max()) / analytic_bound)
    return {"examples": examples,
            "largest_numeric_difference_in_bounds": worst_numeric,
            "numeric_gradients_equal_reinforce": worst_numeric <= 1.0,
            "largest_analytic_difference_in_bounds": worst_analytic,
            "analytic_gradients_equal_reinforce": worst_analytic <= 1.0}


# Rationals built from integers (st.fractions draws five times slower): ratios in [1/100, 10^4],
# advantages in [-10^4, 10^4], eps in {1/100, ..., 99/100}; ratios land on the kinks 1 ± eps often.
_exact_ratios = st.builds(Fraction, st.integers(1, 10_000), st.integers(1, 100))
_exact_advantages = st.builds(Fraction, st.integers(-10_000, 10_000), st.integers(1, 100))
_exact_epsilons = st.builds(Fraction, st.integers(1, 99), st.just(100))
_exact_clip_batches = st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.lists(_exact_ratios, min_size=n, max_size=n), st.lists(_exact_advantages, min_size=n, max_size=n),
    _exact_epsilons))


def _clip_fraction(ratio: Fraction, epsilon: Fraction) -> Fraction:
    return min(max(ratio, 1 - epsilon), 1 + epsilon)


@verifier(kind="property", uses=("surrogate_objective", "surrogate_objective_grad", "ppo_clip_objective_grad"))
@given(_exact_clip_batches)
def surrogate_gradient_code_exact_property(ctx: Context, case: tuple[list[Fraction], list[Fraction], Fraction]) -> None:
    """impl's surrogate and its gradient code in exact rationals, for ratios anywhere in [1/100, 10^4]:
    the per-sample surrogate is r Â (the definition of L^PG), its derivative with respect to
    log π is r Â (because ∂r/∂log π = r), and the clipped surrogate's derivative is r Â where the
    unclipped branch is the minimum and 0 where the clipped branch strictly is (ratios exactly
    at the kinks 1 ± ε are skipped). At r = 1 a gradient of Â / r is right too, so this part
    needs ratios away from 1: it is the gradient the loop follows once θ has left θ_old.
    """
    ratio_list, advantage_list, epsilon = case
    reach(data="old", advantages="estimated")  # ratios against π_old, advantages arbitrary numbers
    ratios, advantages = np.array(ratio_list, dtype=object), np.array(advantage_list, dtype=object)
    products = [r * a for r, a in zip(ratio_list, advantage_list, strict=True)]
    assert list(ctx.impl.surrogate_objective(ratios, advantages)) == products, "the surrogate is not r Â"
    assert list(ctx.impl.surrogate_objective_grad(ratios, advantages)) == products, "its gradient is not r Â"
    clipped_gradients = ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon)
    for r, a, observed, product in zip(ratio_list, advantage_list, clipped_gradients, products, strict=True):
        if r not in (1 - epsilon, 1 + epsilon):
            expected = 0 if _clip_fraction(r, epsilon) * a < product else product
            assert observed == expected, ("clipped gradient", r, a, epsilon, observed, expected)


# ------------------------------------------------------------ 4.4.1 and week16 step 3: a different objective


class TwoStepPolicy(NoParams):
    p_first: float = Field(gt=0, lt=1, description="new policy's probability of action 0 in the first state")
    p_second: float = Field(gt=0, lt=1, description="new policy's probability of action 0 in the state it leads to")
    behaviour_first: float | None = Field(
        None, ge=0, le=1,
        description="if given, also build the surrogate on states collected by another policy, which picks action 0 "
                    "in the first state with this probability")


def _two_step_tree(p_first: sp.Expr, p_second: sp.Expr, behaviour_first: sp.Expr | None = None
                   ) -> tuple[sp.Expr, sp.Expr]:
    """The true gain J(θ) - J(θ_old) and the surrogate Σ_t E_{s_t~d}[E_{a~π_θ} Â_old(s_t, a)].

    s0 --a=0--> s1, s0 --a=1--> s2 (reward 0); in s1 action 0 earns 1 and action 1 earns 0; in
    s2 both earn 0. π_old picks each action with probability 1/2 everywhere; π_θ picks action 0
    with p_first in s0 and p_second in s1 and s2. The states of the surrogate come from a policy
    that picks action 0 in s0 with probability ``behaviour_first``: by default π_old's own 1/2, d_old.
    """
    half = sp.Rational(1, 2)
    behaviour_first = half if behaviour_first is None else behaviour_first
    def probability(s: str, a: int) -> sp.Expr:
        return new[s] if a == 0 else 1 - new[s]

    reward = {("s1", 0): 1, ("s1", 1): 0, ("s2", 0): 0, ("s2", 1): 0}
    value_old = {s: half * reward[(s, 0)] + half * reward[(s, 1)] for s in ("s1", "s2")}
    value_old["s0"] = half * value_old["s1"] + half * value_old["s2"]
    advantage_old = {("s0", 0): value_old["s1"] - value_old["s0"], ("s0", 1): value_old["s2"] - value_old["s0"]}
    advantage_old.update({key: reward[key] - value_old[key[0]] for key in reward})
    new = {"s0": p_first, "s1": p_second, "s2": p_second}
    successor = {0: "s1", 1: "s2"}  # the state each action of s0 leads to; s1 and s2 end the episode
    true_objective = sum(probability("s0", a) * sum(probability(s, b) * reward[(s, b)] for b in (0, 1))
                         for a, s in successor.items())
    state_probability = {"s0": 1, "s1": behaviour_first, "s2": 1 - behaviour_first}
    # Two decisions (s0, then its successor): in the LLM reading of week 16, an answer of two tokens.
    decisions = len(("s0", successor[0]))
    reach(states=len(new), actions=len(successor), horizon=decisions, tokens=decisions, transitions="deterministic",
          advantages="exact", data="old" if behaviour_first == half else "other")
    surrogate = sum(state_probability[s] * sum(probability(s, a) * advantage_old[(s, a)] for a in (0, 1))
                    for s in ("s0", "s1", "s2"))
    return true_objective - value_old["s0"], surrogate


@verifier(kind="counterexample", params=TwoStepPolicy)
def surrogate_differs_away_from_old(ctx: Context) -> dict[str, object]:
    """A two-step decision tree where the local surrogate and the true gain agree at θ_old in value
    and gradient but differ away from it, because the surrogate keeps π_old's state distribution.

    Exact in sympy: the gap is a polynomial in the new policy's probabilities. With
    ``behaviour_first``, the gradient at θ_old of the gap of a surrogate whose states come from
    another policy is reported too: the agreement at θ_old needs the old policy's states.
    """
    p_first, p_second = sp.symbols("p_first p_second", positive=True)
    true_gain, surrogate = _two_step_tree(p_first, p_second)
    gap = sp.factor(sp.expand(true_gain - surrogate))
    at_old = {p_first: sp.Rational(1, 2), p_second: sp.Rational(1, 2)}
    at_new = {p_first: as_written(ctx.params.p_first), p_second: as_written(ctx.params.p_second)}
    observed = {
        "gap": gap,
        "gap_at_old": gap.subs(at_old),
        "gap_gradient_at_old": [sp.diff(gap, p).subs(at_old) for p in (p_first, p_second)],
        "true_gain_at_new": true_gain.subs(at_new),
        "surrogate_at_new": surrogate.subs(at_new),
        "gap_at_new": gap.subs(at_new),
    }
    if ctx.params.behaviour_first is not None:
        _, other_surrogate = _two_step_tree(p_first, p_second, as_written(ctx.params.behaviour_first))
        other_gap = sp.expand(true_gain - other_surrogate)
        observed["gap_gradient_at_old_other_states"] = [sp.diff(other_gap, p).subs(at_old) for p in (p_first, p_second)]
    return observed


# --------------------------------------------------------------------------- 4.4.2 trajectory ratios


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
        return _weights_to_distribution(draw(st.lists(st.integers(low, 9), min_size=size, max_size=size)))

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


# --------------------------------------------------------------------------- 4.4.2 TRPO's lower bound


class _Evaluation(NamedTuple):
    eta: Fraction
    advantages: list[list[Fraction]]
    visitation: list[Fraction]


def _evaluate_policy(mdp: dict[str, object], pi: list[list[Fraction]]) -> _Evaluation:
    """Exact policy evaluation of a discounted tabular MDP: η(π) = Σ_s ρ0(s) V(s), A(s, a) = Q(s, a) - V(s),
    and the unnormalised discounted visitation ρ_π(s) = Σ_t γ^t P(s_t = s), from (I - γ P_π) V = r_π
    and ρ_π (I - γ P_π) = ρ0.
    """
    transitions, rewards, initial, gamma = mdp["transitions"], mdp["rewards"], mdp["initial"], mdp["gamma"]
    states, actions = range(len(initial)), range(len(rewards[0]))
    kernel = [[sum(pi[s][a] * transitions[s][a][t] for a in actions) for t in states] for s in states]
    system = [[(1 if s == t else 0) - gamma * kernel[s][t] for t in states] for s in states]
    values = exact_solve(system, [sum(pi[s][a] * rewards[s][a] for a in actions) for s in states])
    transposed = [[system[t][s] for t in states] for s in states]
    visitation = list(exact_solve(transposed, list(initial)))
    advantages = [[rewards[s][a] + gamma * sum(transitions[s][a][t] * values[t] for t in states) - values[s]
                   for a in actions] for s in states]
    return _Evaluation(sum(initial[s] * values[s] for s in states), advantages, visitation)


class _TrpoBound(NamedTuple):
    true_gain: Fraction
    surrogate_gain: Fraction
    penalty_coefficient: Fraction
    max_total_variation: Fraction
    max_kl: float


def _trpo_bound(mdp: dict[str, object], pi_old: list[list[Fraction]], pi_new: list[list[Fraction]]) -> _TrpoBound:
    """The parts of Schulman et al. (2015)'s bound for π = pi_old and π̃ = pi_new, all exact but the KL.

    η(π̃) - η(π) (true gain), L_π(π̃) - η(π) = Σ_s ρ_π(s) Σ_a π̃(a|s) A_π(s, a) (surrogate gain),
    C = 4 max|A_π| γ / (1 - γ)², max_s TV(π(s), π̃(s)) with TV = ½ Σ_a |π - π̃| (their Theorem 1
    uses its square), and max_s KL(π(s) || π̃(s)) in float64 (their eq. 9).
    """
    old, new = _evaluate_policy(mdp, pi_old), _evaluate_policy(mdp, pi_new)
    gamma = mdp["gamma"]
    surrogate_gain = sum(rho * sum(p * a for p, a in zip(pi_new[s], old.advantages[s], strict=True))
                         for s, rho in enumerate(old.visitation))
    largest_advantage = max(abs(a) for row in old.advantages for a in row)
    total_variation = max(sum(abs(p - q) for p, q in zip(row_old, row_new, strict=True)) / 2
                          for row_old, row_new in zip(pi_old, pi_new, strict=True))
    kl = max(sum(float(p) * (np.log(float(p)) - np.log(float(q))) for p, q in zip(row_old, row_new, strict=True)
                 if p) for row_old, row_new in zip(pi_old, pi_new, strict=True))
    return _TrpoBound(new.eta - old.eta, surrogate_gain, 4 * largest_advantage * gamma / (1 - gamma) ** 2,
                      total_variation, kl)


def _kl_rounding(pi_old: list[list[Fraction]], pi_new: list[list[Fraction]]) -> float:
    """A float64 rounding bound of the KL sums of :func:`_trpo_bound` (logarithms of probabilities down to 1/1000)."""
    size = max(len(row) for row in pi_old)
    return rounding_bound(4 * size, 2 * float(np.log(1000)))


def _weights_to_distribution(weights: list[int]) -> list[Fraction]:
    total = sum(weights)
    return [Fraction(w, total) for w in weights] if total else [Fraction(1, len(weights))] * len(weights)


_mdp_shapes = st.tuples(st.integers(2, 4), st.integers(2, 3))


@st.composite
def _random_mdp_and_policies(draw: st.DrawFn) -> tuple[dict[str, object], list[list[Fraction]], list[list[Fraction]]]:
    """A discounted MDP with rational transitions (some zero), rewards, start distribution and γ, a
    policy π with positive rational probabilities, and π̃ = (1 - t) π + t σ for another such policy σ
    and t in {1/100, 1/10, 1/2, 1}: near π, where the bound is tightest, and far from it.
    """
    n_states, n_actions = draw(_mdp_shapes)

    def distribution(size: int, low: int) -> list[Fraction]:
        return _weights_to_distribution(draw(st.lists(st.integers(low, 9), min_size=size, max_size=size)))

    mdp = {"transitions": [[distribution(n_states, 0) for _ in range(n_actions)] for _ in range(n_states)],
           "rewards": [[Fraction(draw(st.integers(-5, 5))) for _ in range(n_actions)] for _ in range(n_states)],
           "initial": distribution(n_states, 0),
           "gamma": draw(st.sampled_from([Fraction(k, 10) for k in range(1, 10)] + [Fraction(99, 100)]))}
    pi_old = [distribution(n_actions, 1) for _ in range(n_states)]
    other = [distribution(n_actions, 1) for _ in range(n_states)]
    t = draw(st.sampled_from([Fraction(1, 100), Fraction(1, 10), Fraction(1, 2), Fraction(1)]))
    pi_new = [[(1 - t) * p + t * q for p, q in zip(row_old, row_other, strict=True)]
              for row_old, row_other in zip(pi_old, other, strict=True)]
    return mdp, pi_old, pi_new


@verifier(kind="property")
def trpo_lower_bound_property(ctx: Context) -> dict[str, object]:
    """TRPO's lower bound (Schulman et al. 2015, Theorem 1 and eq. 9) on random small MDPs, by exact
    policy evaluation in Fractions: η(π̃) >= L_π(π̃) - C α² with α the largest total variation
    between π(s) and π̃(s) (exact), hence η(π̃) >= L_π(π̃) - C max_s KL(π(s) || π̃(s)) (the KL in
    float64, compared within its rounding), with C = 4 max|A_π| γ / (1 - γ)²; and L_π(π) = η(π)
    exactly, so the bound touches η at π and maximising it never lowers η: the monotone improvement.

    Also observed: how many draws had a surrogate that over-promised (L_π(π̃) > η(π̃)), which the
    penalty had to absorb, and the largest share of the penalty C·KL^max any draw used.
    """
    over_promised: list[bool] = []
    shares: list[float] = [0.0]

    def bound_holds(case: tuple[dict[str, object], list[list[Fraction]], list[list[Fraction]]]) -> None:
        mdp, pi_old, pi_new = case
        # A discounted infinite horizon; A_π exact by policy evaluation; L_π weighs by π's own visitation.
        reach_mdp(mdp["transitions"], gamma=mdp["gamma"], horizon=math.inf, advantages="exact", data="old")
        at_old = _trpo_bound(mdp, pi_old, pi_old)
        assert at_old.surrogate_gain == 0 == at_old.true_gain, ("the bound does not touch η at π", at_old)
        bound = _trpo_bound(mdp, pi_old, pi_new)
        shortfall = bound.surrogate_gain - bound.true_gain
        assert shortfall <= bound.penalty_coefficient * bound.max_total_variation**2, ("TV form fails", bound)
        penalty = float(bound.penalty_coefficient) * bound.max_kl
        slack = float(bound.penalty_coefficient) * _kl_rounding(pi_old, pi_new) + rounding_bound(2, float(shortfall))
        assert float(shortfall) <= penalty + slack, ("KL form fails", bound)
        over_promised.append(shortfall > 0)
        if penalty > 0:
            shares.append(float(shortfall) / penalty)

    verdict = check_property(ctx, bound_holds, _random_mdp_and_policies())
    return {**verdict, "draws_where_surrogate_over_promised": sum(over_promised),
            "largest_share_of_penalty_used": largest(shares)}


class DiscountedMdp(NoParams):
    """A discounted tabular MDP and two policies, every probability as a decimal that is exact as a rational."""

    transitions: list[list[Distribution]] = Field(description="P[s][a][s'], each row a distribution")
    rewards: list[list[float]] = Field(description="r(s, a)")
    initial: Distribution = Field(description="start distribution ρ0")
    gamma: float = Field(gt=0, lt=1)
    pi_old: list[Distribution] = Field(description="π[s][a], the policy the rollouts come from")
    pi_new: list[Distribution] = Field(description="π̃[s][a], the candidate new policy")


@verifier(kind="counterexample", params=DiscountedMdp)
def trpo_penalty_dropped_counterexample(ctx: Context) -> dict[str, object]:
    """A witness that TRPO's guarantee needs its penalty: L_π(π̃) > η(π), so the surrogate alone
    promises an improvement, yet η(π̃) < η(π); the penalised bound L_π(π̃) - C KL^max - η(π) is
    negative and still below the true gain, as the theorem says. Exact policy evaluation in Fractions.
    """
    params = ctx.params
    transitions, rewards, initial, pi_old, pi_new = (
        as_fractions(table).tolist()
        for table in (params.transitions, params.rewards, params.initial, params.pi_old, params.pi_new))
    mdp = {"transitions": transitions, "rewards": rewards, "initial": initial, "gamma": as_written(params.gamma)}
    reach_mdp(mdp["transitions"], gamma=mdp["gamma"], horizon=math.inf, advantages="exact", data="old")
    bound = _trpo_bound(mdp, pi_old, pi_new)
    penalised_gain = float(bound.surrogate_gain) - float(bound.penalty_coefficient) * bound.max_kl
    return {"surrogate_gain": bound.surrogate_gain, "true_gain": bound.true_gain,
            "penalty_coefficient": bound.penalty_coefficient, "max_kl": bound.max_kl,
            "penalised_gain": penalised_gain, "bound_holds": penalised_gain <= float(bound.true_gain)}


# --------------------------------------------------------------------------- 4.4.3 clipping


class ClipCases(NoParams):
    """Samples (Â, r) given as two lists of equal length, and the clipping parameter."""

    epsilon: float = Field(gt=0, lt=1)
    advantages: list[float] = Field(min_length=1)
    ratios: list[float] = Field(min_length=1)


@verifier(kind="exact", uses=("ppo_clip_objective", "ppo_clip_objective_grad", "clip_active"), params=ClipCases)
def clip_cases_exact(ctx: Context) -> dict[str, object]:
    """For each (Â, r): the unclipped term r Â and the clipped term clip(r, 1-ε, 1+ε) Â (computed
    here), impl's clipped objective (their minimum), impl's gradient with respect to log π, and
    whether impl reports the clipped branch active (the plateau). All in exact Fractions."""
    epsilon = as_written(ctx.params.epsilon)
    advantages, ratios = as_fractions(ctx.params.advantages), as_fractions(ctx.params.ratios)
    reach(advantages="estimated", data="old")  # ratios against π_old, advantages numbers written for Â
    clipped_ratios = [min(max(r, 1 - epsilon), 1 + epsilon) for r in ratios]
    return {
        "interval": [1 - epsilon, 1 + epsilon],
        "unclipped": list(ratios * advantages),
        "clipped": [c * a for c, a in zip(clipped_ratios, advantages, strict=True)],
        "objective": list(ctx.impl.ppo_clip_objective(ratios, advantages, epsilon)),
        "gradient": list(ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon)),
        "plateau": [bool(v) for v in ctx.impl.clip_active(ratios, advantages, epsilon)],
    }


# The six regions of (sign of Â, position of r) in which the clipped term is one smooth expression.
CLIP_REGIONS = ("A>0, r<1-eps", "A>0, inside", "A>0, r>1+eps", "A<0, r<1-eps", "A<0, inside", "A<0, r>1+eps")


def _sign(expression: sp.Expr) -> str:
    """'zero', 'negative' or 'positive' when sympy can decide it under the symbols' assumptions, else 'undecided'."""
    expression = sp.simplify(expression)
    for name, test in (("zero", expression.is_zero), ("negative", expression.is_negative),
                       ("positive", expression.is_positive)):
        if test:
            return name
    return "undecided"


@verifier(kind="symbolic")
def clip_pessimistic_symbolic(ctx: Context) -> dict[str, object]:
    """min(r Â, clip(r, 1-ε, 1+ε) Â) - r Â and the sign of the term's slope in r, in each of the six
    regions of ``CLIP_REGIONS``, for every ε in (0, 1), every Â of the region's sign and every r in it.

    Positive symbols e, u, a parametrise the regions: ε = e/(1+e) covers (0, 1); r = (1-ε)/(1+u)
    is below the interval, r = 1 - ε + 2ε/(1+u) inside and r = 1 + ε + u above; Â = ±a. sympy
    evaluates clip as Min(Max(r, 1-ε), 1+ε) and the minimum with Min under these assumptions.
    A gap that is zero or negative in every region makes L^CLIP a lower (pessimistic) bound of the
    unclipped surrogate; where it is negative the term is also flat in r (the plateau).
    """
    e, u, a = sp.symbols("e u a", positive=True)
    reach(advantages="estimated", data="old")  # ratios against π_old, advantages any number of either sign
    epsilon = e / (1 + e)
    positions = ((1 - epsilon) / (1 + u), 1 - epsilon + 2 * epsilon / (1 + u), 1 + epsilon + u)
    gaps, slopes = [], []
    for advantage in (a, -a):
        for ratio in positions:
            clipped = sp.simplify(sp.Min(sp.Max(ratio, 1 - epsilon), 1 + epsilon))
            term = sp.simplify(sp.Min(ratio * advantage, clipped * advantage))
            gaps.append(_sign(term - ratio * advantage))
            # r is a monotone function of u in each region: d term / dr = (d term / du) / (dr / du).
            slopes.append(_sign(sp.diff(term, u) / sp.diff(ratio, u)))
    return {"regions": list(CLIP_REGIONS), "gap_sign": gaps, "slope_sign": slopes,
            "never_above_unclipped": all(g in ("zero", "negative") for g in gaps)}


@verifier(kind="property", uses=("ppo_clip_objective",))
@given(_exact_clip_batches)
def clip_objective_pessimistic_property(ctx: Context, case: tuple[list[Fraction], list[Fraction], Fraction]) -> None:
    """impl's clipped term in exact rationals, for r in [1/100, 10^4], Â in [-10^4, 10^4] and
    ε in {1/100, ..., 99/100}: it is at most the unclipped r Â and at most the clipped clip(r) Â (the pessimistic
    choice of the two), and it equals min(r Â, clip(r, 1-ε, 1+ε) Â), computed here.
    """
    ratio_list, advantage_list, epsilon = case
    reach(advantages="estimated", data="old")
    observed = ctx.impl.ppo_clip_objective(np.array(ratio_list, dtype=object),
                                           np.array(advantage_list, dtype=object), epsilon)
    for r, a, term in zip(ratio_list, advantage_list, observed, strict=True):
        unclipped, clipped = r * a, _clip_fraction(r, epsilon) * a
        assert term <= unclipped, ("above the unclipped term", r, a, epsilon, term)
        assert term <= clipped, ("above the clipped term", r, a, epsilon, term)
        assert term == min(unclipped, clipped), ("not the minimum", r, a, epsilon, term)


# Advantages of at least 1e-6 in size: for subnormal ones r Â and clip(r) Â can round to the same
# number, and whether clipping is active is then decided by rounding, not by the rule under test.
_signed_advantages = st.floats(min_value=-100, max_value=100).filter(lambda a: abs(a) >= 1e-6)
_ratios = st.floats(min_value=1e-4, max_value=1e4)
_epsilons = st.floats(min_value=0.01, max_value=0.99)


@verifier(kind="property", uses=("ppo_clip_objective_grad",))
@given(st.tuples(_signed_advantages, _ratios, _epsilons))
def clipping_never_blocks_correction_property(ctx: Context, case: tuple[float, float, float]) -> None:
    """For every sign of Â, every r > 0 and every ε in (0, 1), impl's gradient of the clipped term
    with respect to log π is r Â (the unclipped gradient, pointing toward the advantage) whenever
    the ratio has moved against the advantage (Â > 0, r <= 1, or Â < 0, r >= 1); it is zero only
    when the ratio has already moved past 1 ± ε in the advantage's direction; and it never has the
    opposite sign of Â. Ratios within 1e-9 of a kink 1 ± ε are skipped: there r Â and clip(r) Â
    can round to the same float, and which branch a correct implementation takes is rounding's choice.
    """
    advantage, ratio, epsilon = case
    assume(min(abs(ratio - (1 - epsilon)), abs(ratio - (1 + epsilon))) > 1e-9)
    reach(advantages="estimated", data="old")
    gradient = float(ctx.impl.ppo_clip_objective_grad(np.array([ratio]), np.array([advantage]), epsilon)[0])
    moved_past = (advantage > 0 and ratio > 1 + epsilon) or (advantage < 0 and ratio < 1 - epsilon)
    if moved_past:
        assert gradient == 0, (advantage, ratio, epsilon, gradient)
    else:
        assert_close(gradient, ratio * advantage, EPS * abs(ratio * advantage), "the unclipped gradient against r Â")
        assert gradient != 0, ("the clip blocks a gradient it should pass", advantage, ratio, epsilon)
    assert gradient * advantage >= 0, (advantage, ratio, gradient)


@verifier(kind="counterexample", uses=("ratio_clip_diagnostics",), params=ClipCases)
def clip_fractions_counterexample(ctx: Context) -> dict[str, object]:
    """impl's two clip diagnostics on one batch: ratios outside [1-ε, 1+ε] and clipping active."""
    reach(advantages="estimated", data="old")
    diagnostics = ctx.impl.ratio_clip_diagnostics(np.array(ctx.params.ratios), np.array(ctx.params.advantages),
                                            ctx.params.epsilon)
    return {"outside_fraction": diagnostics.outside_fraction, "active_fraction": diagnostics.active_fraction,
            "difference": diagnostics.outside_fraction - diagnostics.active_fraction}


# Clip ranges with 1 ± ε and |r - 1| exact in binary: there a ratio exactly on an edge is inside the interval,
# and every correct way of writing the comparisons says so.
_EXACT_EPSILONS = (0.125, 0.25, 0.375, 0.5)


def _diagnostic_batch(epsilon: float, n: int) -> st.SearchStrategy[tuple[list[float], list[float], float]]:
    ratios = st.floats(0.01, 10).filter(lambda r: min(abs(r - (1 - epsilon)), abs(r - (1 + epsilon))) > 1e-9)
    if epsilon in _EXACT_EPSILONS:
        ratios = st.one_of(ratios, st.sampled_from([1 - epsilon, 1 + epsilon]))
    return st.tuples(st.lists(ratios, min_size=n, max_size=n),
                     st.lists(_signed_advantages, min_size=n, max_size=n), st.just(epsilon))


_diagnostic_batches = st.tuples(st.one_of(st.floats(0.01, 0.99), st.sampled_from(_EXACT_EPSILONS)),
                                st.integers(1, 32)).flatmap(
    lambda epsilon_and_size: _diagnostic_batch(*epsilon_and_size))


@verifier(kind="property", uses=("ratio_clip_diagnostics",))
@given(_diagnostic_batches)
def clip_diagnostics_property(ctx: Context, case: tuple[list[float], list[float], float]) -> None:
    """impl's two diagnostics of step 4.4.4 against their definitions, on random batches: the share
    of ratios outside [1-ε, 1+ε], and the share of samples whose clipped branch is strictly the
    minimum (Â > 0 with r > 1+ε, or Â < 0 with r < 1-ε).

    Ratios within 1e-9 of 1 ± ε and advantages below 1e-6 in size are not drawn, so that a
    different but correct way of writing the comparisons (|r - 1| > ε, or clip(r) Â < r Â) cannot
    round to the other side, except ratios exactly 1 ± ε for an ε whose 1 ± ε is exact in binary
    (1/8, 1/4, 3/8, 1/2): the interval is closed, so they are inside, and not clipped. Each share is k/N for
    N <= 32, computed with one rounded division, so it must be within eps of k/N.
    """
    ratio_list, advantage_list, epsilon = case
    reach(advantages="estimated", data="old")
    ratios, advantages = np.array(ratio_list), np.array(advantage_list)
    outside = (ratios < 1 - epsilon) | (ratios > 1 + epsilon)
    active = ((advantages > 0) & (ratios > 1 + epsilon)) | ((advantages < 0) & (ratios < 1 - epsilon))
    diagnostics = ctx.impl.ratio_clip_diagnostics(ratios, advantages, epsilon)
    assert_close(float(diagnostics.outside_fraction), outside.mean(), EPS, "outside_fraction")
    assert_close(float(diagnostics.active_fraction), active.mean(), EPS, "active_fraction")


class SharedLogits(NoParams):
    pi_old: list[float] = Field(min_length=2, description="old action probabilities in the one state")
    actions: list[int] = Field(min_length=1)
    advantages: list[float] = Field(min_length=1)
    epsilon: float = Field(gt=0, lt=1)
    learning_rate: float = Field(gt=0)
    steps: list[int] = Field(min_length=2, description="increasing numbers of gradient steps to report")


@verifier(kind="counterexample", params=SharedLogits,
          uses=("probability_ratios", "ppo_clip_objective_grad", "softmax_score", "log_softmax",
                "ratio_clip_diagnostics", "kl_k3"))
def clipping_is_no_trust_region(ctx: Context) -> dict[str, object]:
    """Gradient ascent on L^CLIP through impl, for one state's logits shared by the whole batch.

    A sample whose ratio is clipped stops contributing, but the other samples keep moving the
    shared logits, so its ratio keeps leaving [1-ε, 1+ε] and KL(π_old || π_θ) keeps growing with
    the number of steps (epochs). Reported after each number of steps in ``steps``: the ratios,
    impl's clip diagnostics, impl's k3 estimate on the batch and the exact KL; whether the lowest
    ratio (a sample with Â < 0, clipped once below 1 - ε) keeps falling and the KL keeps growing
    from one reported step to the next.
    """
    params = ctx.params
    old_logits = np.log(np.array(params.pi_old))
    actions, advantages = np.array(params.actions), np.array(params.advantages)
    # One logit vector, one state, shared by the whole batch of actions stored from π_old.
    reach(states=np.atleast_2d(old_logits).shape[0], actions=old_logits.size, data="old", advantages="estimated")
    n = actions.size
    log_pi_old = ctx.impl.log_softmax(old_logits)[actions]
    logits = old_logits.copy()
    report: dict[str, list[object]] = {"ratios": [], "outside_fraction": [], "active_fraction": [], "kl_k3_batch": [],
                                       "kl_exact": []}
    for step in range(1, max(params.steps) + 1):
        log_pi = ctx.impl.log_softmax(logits)[actions]
        ratio = ctx.impl.probability_ratios(log_pi, log_pi_old)
        weight = ctx.impl.ppo_clip_objective_grad(ratio, advantages, params.epsilon) / n
        logits = logits + params.learning_rate * (weight[:, None] * ctx.impl.softmax_score(
            np.broadcast_to(logits, (n, logits.size)), actions)).sum(axis=0)
        if step in params.steps:
            log_pi = ctx.impl.log_softmax(logits)[actions]
            ratio = ctx.impl.probability_ratios(log_pi, log_pi_old)
            diagnostics = ctx.impl.ratio_clip_diagnostics(ratio, advantages, params.epsilon)
            p_old, log_new = np.array(params.pi_old), log_softmax(logits)
            report["ratios"].append([float(r) for r in ratio])
            report["outside_fraction"].append(float(diagnostics.outside_fraction))
            report["active_fraction"].append(float(diagnostics.active_fraction))
            report["kl_k3_batch"].append(float(np.mean(ctx.impl.kl_k3(log_pi - log_pi_old))))
            report["kl_exact"].append(float(p_old @ (np.log(p_old) - log_new)))
    kl = report["kl_exact"]
    lowest = [smallest(ratios) for ratios in report["ratios"]]
    return {**report, "steps": list(params.steps), "min_ratio_last": lowest[-1],
            "min_ratio_keeps_falling": all(b < a for a, b in itertools.pairwise(lowest)),
            "max_ratio_last": max(report["ratios"][-1]), "outside_fraction_last": report["outside_fraction"][-1],
            "kl_keeps_growing": all(b > a for a, b in itertools.pairwise(kl)), "kl_last": kl[-1]}


# --------------------------------------------------------------------------- 4.4.4 loss and diagnostics


_loss_batches = st.integers(1, 32).flatmap(lambda n: st.tuples(
    st.arrays(np.float64, (n, 3), elements=st.floats(-5, 5)),  # logits
    st.arrays(np.int64, n, elements=st.integers(0, 2)),  # actions
    st.arrays(np.float64, n, elements=st.floats(-1.5, 1.5)),  # log π - log π_old
    st.arrays(np.float64, n, elements=st.floats(-10, 10)),  # advantages
    st.arrays(np.float64, n, elements=st.floats(-10, 10)),  # values
    st.arrays(np.float64, n, elements=st.floats(-10, 10)),  # value targets
    st.floats(0, 2), st.floats(0, 0.1), st.floats(0.05, 0.5)))


@verifier(kind="property",
          uses=("log_softmax", "probability_ratios", "ppo_clip_objective", "ppo_clip_objective_grad",
                "squared_error_value_loss", "categorical_entropy", "categorical_entropy_grad", "ppo_total_loss",
                "softmax_score"))
@given(_loss_batches)
def total_loss_composition_property(ctx: Context, batch: tuple) -> None:
    """impl's PPO loss -L^CLIP + c_V L_V - c_H H and its gradient with respect to the logits and the
    logits, assembled from impl's parts as the training loop does, equal the same quantities
    computed here from their definitions: min(r Â, clip(r) Â), ½(V - V̂)², -Σ π log π, and the
    derivative with respect to the logits -(1/N) 1[not clipped] r Â (e_a - π) + (c_H/N) π (log π + H).
    The entropy and its gradient of the logits stacked as [1, N, K] are those of the rows, stacked.
    """
    logits, actions, log_ratio, advantages, values, targets, value_coef, entropy_coef, epsilon = batch
    n = actions.size
    rows = np.arange(n)
    log_pi = ctx.impl.log_softmax(logits)[rows, actions]
    ratio = ctx.impl.probability_ratios(log_pi, log_pi - log_ratio)
    clip_term = ctx.impl.ppo_clip_objective(ratio, advantages, epsilon).mean()
    value_loss = ctx.impl.squared_error_value_loss(values, targets)
    entropy = ctx.impl.categorical_entropy(logits).mean()
    loss = ctx.impl.ppo_total_loss(clip_term, value_loss, entropy, value_coef, entropy_coef)
    d_logits = (-ctx.impl.ppo_clip_objective_grad(ratio, advantages, epsilon)[:, None] / n
                * ctx.impl.softmax_score(logits, actions)
                - entropy_coef * ctx.impl.categorical_entropy_grad(logits) / n)

    r = np.exp(log_ratio)
    # Within rounding of a band edge the implementation's ratio may fall on the other branch.
    assume(np.abs(np.abs(r - 1) - epsilon).min() > 1e-9)
    reach(actions=logits.shape[1], data="old", advantages="estimated")
    clipped = np.clip(r, 1 - epsilon, 1 + epsilon)
    log_p = log_softmax(logits)
    p = np.exp(log_p)
    h = -(p * log_p).sum(axis=1)
    reference = (-np.minimum(r * advantages, clipped * advantages).mean()
                 + value_coef * 0.5 * ((values - targets) ** 2).mean() - entropy_coef * h.mean())
    unclipped = ~(clipped * advantages < r * advantages)
    reference_d_logits = (-(unclipped * r * advantages)[:, None] * (np.eye(3)[actions] - p) / n
                          + entropy_coef * p * (log_p + h[:, None]) / n)
    magnitude = float(np.abs(r * advantages).max() + value_coef * ((values - targets) ** 2).max() + 5)
    bound = rounding_bound(8 * n, magnitude * (1 + 4 * np.abs(log_ratio).max()))
    assert_close(loss, reference, bound, "impl's PPO loss against its definition")
    assert_close(d_logits, reference_d_logits, bound / n * 4, "the loss's gradient with respect to the logits")
    # The entropy and its gradient act along the last axis whatever the leading ones ([..., K]).
    stacked = logits[None]
    stacked_entropy = np.asarray(ctx.impl.categorical_entropy(stacked))
    stacked_grad = np.asarray(ctx.impl.categorical_entropy_grad(stacked))
    assert stacked_entropy.shape == (1, n) and stacked_grad.shape == (1, n, 3), (stacked_entropy.shape,
                                                                                stacked_grad.shape)
    assert_close(stacked_entropy[0], h, bound, "categorical_entropy of the logits stacked [1, N, K]")
    assert_close(stacked_grad[0], -p * (log_p + h[:, None]), bound, "categorical_entropy_grad of the stacked logits")

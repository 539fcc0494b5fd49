"""The importance-weighted surrogate L^PG and what it promises (lesson 4.4, steps 4.4.1-4.4.2 and 4.4.4;
week 16 step 3).

Its gradient at θ_old is the policy gradient (symbolically for any policy, and by finite differences through
impl on a tabular softmax); away from θ_old it differs from the true gain, more so after several epochs of
ascent on it; for γ < 1 a surrogate that weights every step alike misses the discounted gradient. TRPO's
lower bound (Schulman et al. 2015) on random small MDPs, and a witness that the surrogate without its
penalty promises a gain that does not come. On the week-16 syllabus's bandit, with policies given by exact
probabilities (so π, r = π/π_old and the scores e_a - π are exact, and expectations are sums over the arms):
importance weighting, stale samples, the bias clipping puts into the gradient, and per-token ratios in place
of an answer's product. impl supplies the per-sample weights on ∇ log π; the references are computed here.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import sympy as sp
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, check_property, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import (
    as_fractions,
    distribution_from_weights,
    exact_action_values,
    exact_discounted_visitation,
    exact_policy_values,
    softmax_score,
    softmax_scores,
)
from verifiers._numeric import (
    EPS,
    as_written,
    central_difference,
    largest,
    log_softmax,
    rounding_bound,
)
from verifiers._params import Distribution, PositiveDistribution
from verifiers._reach import reach_bandit, reach_mdp

# --------------------------------------------------------------------------- 4.4.1: the gradient at θ_old


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


# --------------------------------------------------------------------------- 4.4.2: TRPO's lower bound


class _Evaluation(NamedTuple):
    eta: Fraction
    advantages: list[list[Fraction]]
    visitation: list[Fraction]


def _evaluate_policy(mdp: dict[str, object], pi: list[list[Fraction]]) -> _Evaluation:
    """Exact policy evaluation of a discounted tabular MDP: η(π) = Σ_s ρ0(s) V(s), A(s, a) = Q(s, a) - V(s),
    and the unnormalised discounted visitation ρ_π(s) = Σ_t γ^t P(s_t = s), from (I - γ P_π) V = r_π
    and ρ_π (I - γ P_π) = ρ0.
    """
    P, R = np.array(mdp["transitions"], dtype=object), np.array(mdp["rewards"], dtype=object)
    rho, policy, gamma = np.array(mdp["initial"], dtype=object), np.array(pi, dtype=object), mdp["gamma"]
    values = exact_policy_values(P, R, policy, gamma)
    advantages = exact_action_values(P, R, values, gamma) - values[:, None]
    visitation = exact_discounted_visitation(P, policy, rho, gamma)
    return _Evaluation(sum(rho * values), advantages.tolist(), visitation.tolist())


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


_mdp_shapes = st.tuples(st.integers(2, 4), st.integers(2, 3))


@st.composite
def _random_mdp_and_policies(draw: st.DrawFn) -> tuple[dict[str, object], list[list[Fraction]], list[list[Fraction]]]:
    """A discounted MDP with rational transitions (some zero), rewards, start distribution and γ, a
    policy π with positive rational probabilities, and π̃ = (1 - t) π + t σ for another such policy σ
    and t in {1/100, 1/10, 1/2, 1}: near π, where the bound is tightest, and far from it.
    """
    n_states, n_actions = draw(_mdp_shapes)

    def distribution(size: int, low: int) -> list[Fraction]:
        return distribution_from_weights(draw(st.lists(st.integers(low, 9), min_size=size, max_size=size)))

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


# ----------------------------------------------------------------- 4.4.1 and 4.4.4: after several epochs, and for γ < 1


class SurrogateAscent(NoParams):
    learning_rate: float = Field(gt=0, description="step size of plain gradient ascent on the surrogate's logits")
    steps: list[int] = Field(min_length=2, description="increasing numbers of ascent steps (epochs) to report")


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def _tree_gains(p_first: float, p_second: float) -> tuple[float, float]:
    """The true gain J(θ) - J(θ_old) and the local surrogate L^PG(θ) = E_{s~d_old, a~π_old}[r Â_old]
    of the two-step tree, computed from its definition.

    s0 --a=0--> s1, s0 --a=1--> s2, no reward; in s1 action 0 earns 1 and action 1 earns 0; in s2
    both earn 0. π_old picks each action with probability 1/2 everywhere; the new policy picks
    action 0 with p_first in s0 and p_second in s1 and s2 (one parameter shared by both states).
    """
    old = {"s0": 0.5, "s1": 0.5, "s2": 0.5}
    new = {"s0": p_first, "s1": p_second, "s2": p_second}
    reward = {("s1", 0): 1.0, ("s1", 1): 0.0, ("s2", 0): 0.0, ("s2", 1): 0.0}

    def pi(policy: dict[str, float], s: str, a: int) -> float:
        return policy[s] if a == 0 else 1 - policy[s]

    value_old = {s: sum(pi(old, s, a) * reward[(s, a)] for a in (0, 1)) for s in ("s1", "s2")}
    value_old["s0"] = pi(old, "s0", 0) * value_old["s1"] + pi(old, "s0", 1) * value_old["s2"]
    advantage = {("s0", 0): value_old["s1"] - value_old["s0"], ("s0", 1): value_old["s2"] - value_old["s0"]}
    advantage.update({key: reward[key] - value_old[key[0]] for key in reward})
    visits_old = {"s0": 1.0, "s1": pi(old, "s0", 0), "s2": pi(old, "s0", 1)}
    surrogate = sum(visits_old[s] * pi(old, s, a) * (pi(new, s, a) / pi(old, s, a)) * advantage[(s, a)]
                    for s in ("s0", "s1", "s2") for a in (0, 1))
    successor = {0: "s1", 1: "s2"}  # the state each action of s0 leads to; s1 and s2 end the episode
    true_new = sum(pi(new, "s0", a) * sum(pi(new, s, b) * reward[(s, b)] for b in (0, 1))
                   for a, s in successor.items())
    # Two decisions (s0, then its successor); A_old exact; the surrogate weighs π_old's visits.
    reach(states=len(old), actions=len(successor), horizon=len(("s0", successor[0])), transitions="deterministic",
          advantages="exact", data="old")
    return true_new - value_old["s0"], surrogate


@verifier(kind="counterexample", params=SurrogateAscent)
def surrogate_error_grows_over_epochs(ctx: Context) -> dict[str, object]:
    """Several epochs of gradient ascent on the local surrogate of one batch (its expectation, so no
    sampling noise) in the two-step tree of :func:`_tree_gains`, from θ_old = (0, 0) in logits.

    Reported after each number of steps in ``steps``: the largest |r - 1| over the state-action
    pairs π_old visits, the surrogate gain L^PG and the true gain, and the surrogate's relative error
    |true - L| / |true| as a prediction of the true gain; whether both grow from one reported step
    to the next. The gradient is the surrogate's own, by the chain rule through the sigmoid: with
    π_old's state weights (1, 1/2, 1/2) and the tree's advantages, dL/dz_0 = σ'(z_0)/2 and
    dL/dz_1 = σ'(z_1)/2 (only s1's advantages are non-zero there).
    """
    params = ctx.params
    z = np.zeros(2)
    report: dict[str, list[float]] = {"max_ratio_distance": [], "surrogate_gain": [], "true_gain": [],
                                      "relative_error": []}
    for step in range(1, max(params.steps) + 1):
        p = np.array([_sigmoid(v) for v in z])
        z = z + params.learning_rate * p * (1 - p) / 2
        if step in params.steps:
            p_first, p_second = (_sigmoid(v) for v in z)
            true_gain, surrogate = _tree_gains(p_first, p_second)
            ratios = [2 * p_first, 2 * (1 - p_first), 2 * p_second, 2 * (1 - p_second)]
            report["max_ratio_distance"].append(max(abs(r - 1) for r in ratios))
            report["surrogate_gain"].append(surrogate)
            report["true_gain"].append(true_gain)
            report["relative_error"].append(abs(true_gain - surrogate) / abs(true_gain))
    distance, error = report["max_ratio_distance"], report["relative_error"]
    return {**report, "steps": list(params.steps),
            "max_ratio_distance_first": distance[0], "max_ratio_distance_last": distance[-1],
            "relative_error_first": error[0], "relative_error_last": error[-1],
            "error_grows_as_ratios_drift": all(b > a for a, b in itertools.pairwise(distance))
            and all(b > a for a, b in itertools.pairwise(error))}


class DiscountedWitness(NoParams):
    """A small MDP written out in the claim file, the old policy's probabilities, the horizon and the discounts."""

    P: list[list[Distribution]] = Field(description="P[s][a][s2], each P[s][a] sums to one")
    R: list[list[float]] = Field(description="R[s][a], the reward of action a in state s")
    rho: Distribution = Field(description="initial state distribution")
    policy: list[Distribution] = Field(description="π_old[s][a], rational as written; its logits are log π_old")
    horizon: int = Field(ge=1, le=4, description="decisions per episode")
    gammas: list[float] = Field(min_length=1, description="the discounts at which the gradients are compared")

    @model_validator(mode="after")
    def _shapes_agree(self) -> DiscountedWitness:
        n_states, n_actions = np.shape(self.R)
        if np.shape(self.P) != (n_states, n_actions, n_states) or np.shape(self.policy) != (n_states, n_actions):
            raise ValueError(f"P must have shape {(n_states, n_actions, n_states)} and policy {(n_states, n_actions)}")
        if len(self.rho) != n_states:
            raise ValueError("rho must have one entry per state")
        if any(not 0 < g <= 1 for g in self.gammas):
            raise ValueError("every discount must lie in (0, 1]")
        return self


def time_uniform_step_weight(gamma: object, t: int) -> object:
    """The weight of step t's samples in the text's L^PG = E_{t~π_old}[r_t Â_t]: every step of the batch counts the
    same, whatever γ (the definition the erratum is about; tests/test_scope_4_4.py weights it by γ^t to show that the
    check then turns red)."""
    return 1


def discounted_step_weight(gamma: object, t: int) -> object:
    """γ^t: the weight under which the surrogate's states follow the discounted visitation Σ_t γ^t Pr(s_t = s)."""
    return gamma**t


class _Sample(NamedTuple):
    probability: object  # of the trajectory the sample belongs to, under π_old
    t: int
    state: int
    action: int


class _Witness(NamedTuple):
    P: list[list[list[object]]]
    R: list[list[object]]
    rho: list[object]
    policy: list[list[object]]
    horizon: int

    @property
    def n_states(self) -> int:
        return len(self.R)

    @property
    def n_actions(self) -> int:
        return len(self.R[0])


def _on_policy_batch(witness: _Witness) -> list[_Sample]:
    """Every time step of every trajectory π_old can take, each with its trajectory's probability (exact)."""
    steps = list(itertools.product(range(witness.n_states), range(witness.n_actions)))
    batch = []
    for path in itertools.product(steps, repeat=witness.horizon):
        probability = witness.rho[path[0][0]]
        for t, (s, a) in enumerate(path):
            probability *= witness.policy[s][a]
            if t + 1 < witness.horizon:
                probability *= witness.P[s][a][path[t + 1][0]]
        if probability:
            batch.extend(_Sample(probability, t, s, a) for t, (s, a) in enumerate(path))
    return batch


def _exact_advantages(witness: _Witness, gamma: object) -> list[list[list[object]]]:
    """A^π_t(s, a) = Q_t(s, a) - V_t(s) of the γ-discounted reward from step t to the horizon, by backward induction
    (exact in the arithmetic of ``gamma`` and the witness: Fractions, or sympy with a symbolic γ)."""
    following = [0] * witness.n_states
    advantages: list[list[list[object]]] = [[] for _ in range(witness.horizon)]
    for t in reversed(range(witness.horizon)):
        q = [[witness.R[s][a] + gamma * sum(witness.P[s][a][s2] * following[s2] for s2 in range(witness.n_states))
              for a in range(witness.n_actions)] for s in range(witness.n_states)]
        following = [sum(witness.policy[s][a] * q[s][a] for a in range(witness.n_actions))
                     for s in range(witness.n_states)]
        advantages[t] = [[q[s][a] - following[s] for a in range(witness.n_actions)] for s in range(witness.n_states)]
    return advantages


def _score(witness: _Witness, s: int, a: int) -> list[list[object]]:
    """∇_θ log π(a|s) of the tabular softmax at θ_old: e_a - π_old(s) in row s, zero elsewhere."""
    return [[((1 if b == a else 0) - witness.policy[s][b]) if row == s else 0 for b in range(witness.n_actions)]
            for row in range(witness.n_states)]


def _weighted_sum(witness: _Witness, weights: list[object], batch: list[_Sample]) -> list[list[object]]:
    """Σ_i weights_i ∇log π(a_i|s_i) over the batch."""
    total: list[list[object]] = [[0] * witness.n_actions for _ in range(witness.n_states)]
    for weight, sample in zip(weights, batch, strict=True):
        for s, row in enumerate(_score(witness, sample.state, sample.action)):
            for a, entry in enumerate(row):
                total[s][a] += weight * entry
    return total


def _impl_surrogate_gradient(impl: object, witness: _Witness, batch: list[_Sample], gamma: Fraction,
                             step_weight: object) -> list[list[Fraction]]:
    """∇_θ of Σ_i w_i r_i Â_i at θ = θ_old through impl: its ratios at θ_old (exp of log π_old - log π_old, as it
    computes them, taken as the exact rationals they are), its derivative of each term with respect to log π
    (``surrogate_objective_grad``, in Fractions), times the verifier's own softmax score; w_i is the sample's
    trajectory probability times ``step_weight(gamma, t)``."""
    advantages = _exact_advantages(witness, gamma)
    log_pi_old = np.log([float(witness.policy[sample.state][sample.action]) for sample in batch])
    at_old = np.asarray(impl.probability_ratios(log_pi_old, log_pi_old), dtype=float)
    ratios = np.array([Fraction(float(r)) for r in at_old], dtype=object)
    handed = np.array([advantages[sample.t][sample.state][sample.action] for sample in batch], dtype=object)
    per_sample = impl.surrogate_objective_grad(ratios, handed)
    weights = [sample.probability * step_weight(gamma, sample.t) * derivative
               for sample, derivative in zip(batch, per_sample, strict=True)]
    return _weighted_sum(witness, weights, batch)


def _objective_gradient(witness: _Witness, gamma: sp.Expr) -> list[list[sp.Expr]]:
    """The verifiers' own ∇_θ J_γ at θ_old, by differentiating J_γ(θ) = Σ_τ p_θ(τ) Σ_t γ^t R(s_t, a_t) in sympy,
    with π_θ = softmax(θ) and θ_old = log π_old: no policy-gradient formula is assumed."""
    logits = [[sp.Symbol(f"theta_{s}_{a}", real=True) for a in range(witness.n_actions)]
              for s in range(witness.n_states)]
    policy = [[sp.exp(z) / sum(sp.exp(y) for y in row) for z in row] for row in logits]
    steps = list(itertools.product(range(witness.n_states), range(witness.n_actions)))
    objective = sp.Integer(0)
    for path in itertools.product(steps, repeat=witness.horizon):
        probability = sp.Rational(witness.rho[path[0][0]])
        for t, (s, a) in enumerate(path):
            probability *= policy[s][a]
            if t + 1 < witness.horizon:
                probability *= sp.Rational(witness.P[s][a][path[t + 1][0]])
        if probability != 0:
            objective += probability * sum(gamma**t * sp.Rational(witness.R[s][a]) for t, (s, a) in enumerate(path))
    at_old = {logits[s][a]: sp.log(sp.Rational(witness.policy[s][a]))
              for s in range(witness.n_states) for a in range(witness.n_actions)}
    return [[sp.factor(sp.simplify(sp.diff(objective, z).subs(at_old))) for z in row] for row in logits]


def _as_fractions(rows: list[list[sp.Expr]]) -> list[list[Fraction]]:
    """Rational sympy numbers as Fractions, so that they compare with impl's side exactly."""
    return [[Fraction(int(sp.Rational(v).p), int(sp.Rational(v).q)) for v in row] for row in rows]


def _cosine(u: list[list[Fraction]], v: list[list[Fraction]]) -> sp.Expr | None:
    """u·v / (|u| |v|), exact (sympy); None when either is the zero vector."""
    flat_u, flat_v = [x for row in u for x in row], [x for row in v for x in row]
    norms = sum(x * x for x in flat_u) * sum(x * x for x in flat_v)
    if norms == 0:
        return None
    dot = sum(x * y for x, y in zip(flat_u, flat_v, strict=True))
    return sp.nsimplify(sp.Rational(dot.numerator, dot.denominator)
                        / sp.sqrt(sp.Rational(norms.numerator, norms.denominator)))


@verifier(kind="symbolic", uses=("probability_ratios", "surrogate_objective_grad"), params=DiscountedWitness)
def time_uniform_surrogate_misses_discounted_gradient(ctx: Context) -> dict[str, object]:
    """∇L^PG at θ = θ_old against ∇J_γ, on a witness MDP, with the exact advantages A^π_t of each step.

    The batch is the on-policy batch of every time step of every trajectory π_old can take, each
    weighted by its trajectory's probability (the sum over steps, which is T times the mean over
    steps of E_{t~π_old}; a constant that changes no direction). At each discount in ``gammas``,
    in Fractions: ∇_θ of the text's time-uniform L^PG = Σ r_t Â_t and of the γ^t-weighted
    Σ γ^t r_t Â_t, both through impl (:func:`_impl_surrogate_gradient`), against the verifiers' own
    ∇J_γ (:func:`_objective_gradient`); the cosine of the first with ∇J_γ and whether each equals it.

    For every γ at once, in sympy with a positive symbol γ (the verifiers' own surrogate, E[w_t Â_t ∇log π]
    with the same step weights): the components of the time-uniform gap ∇L^PG - ∇J_γ factored,
    the discounts in (0, 1] where all of them vanish, and whether the γ^t-weighted gap is zero for every γ.
    """
    params = ctx.params
    witness = _Witness([[[as_written(p) for p in row] for row in block] for block in params.P],
                       [[as_written(r) for r in row] for row in params.R], [as_written(p) for p in params.rho],
                       [[as_written(p) for p in row] for row in params.policy], params.horizon)
    batch = _on_policy_batch(witness)
    gamma = sp.Symbol("gamma", positive=True)
    gradient = _objective_gradient(witness, gamma)
    reach_mdp(params.P, gamma=gamma, horizon=witness.horizon, advantages="exact", data="old")

    def own_surrogate(step_weight: object) -> list[list[sp.Expr]]:
        advantages = _exact_advantages(witness, gamma)
        weights = [sample.probability * step_weight(gamma, sample.t) * advantages[sample.t][sample.state][sample.action]
                   for sample in batch]
        return _weighted_sum(witness, weights, batch)

    gap = [[sp.factor(sp.expand(x - y)) for x, y in zip(row, target, strict=True)]
           for row, target in zip(own_surrogate(time_uniform_step_weight), gradient, strict=True)]
    discounted_gap = [[sp.expand(x - y) for x, y in zip(row, target, strict=True)]
                      for row, target in zip(own_surrogate(discounted_step_weight), gradient, strict=True)]
    # The discounts in (0, 1] where every component of the gap vanishes (all of them, if none is non-zero).
    nonzero = [component for row in gap for component in row if component != 0]
    vanishing: list[sp.Expr] | str = "every"
    if nonzero:
        roots = set.intersection(*(set(sp.solve(component, gamma)) for component in nonzero))
        vanishing = sorted(root for root in roots if root.is_real and 0 < root <= 1)

    observed: dict[str, list[object]] = {"policy_gradient": [], "surrogate_gradient": [],
                                         "discounted_surrogate_gradient": [], "cosine_to_policy_gradient": [],
                                         "surrogate_equals_policy_gradient": [],
                                         "discounted_surrogate_equals_policy_gradient": []}
    for written in params.gammas:
        value = as_written(written)
        reach_mdp(params.P, gamma=value, horizon=witness.horizon, advantages="exact", data="old")
        target = _as_fractions([[entry.subs(gamma, sp.Rational(value.numerator, value.denominator)) for entry in row]
                                for row in gradient])
        uniform = _impl_surrogate_gradient(ctx.impl, witness, batch, value, time_uniform_step_weight)
        discounted = _impl_surrogate_gradient(ctx.impl, witness, batch, value, discounted_step_weight)
        observed["policy_gradient"].append(target)
        observed["surrogate_gradient"].append(uniform)
        observed["discounted_surrogate_gradient"].append(discounted)
        observed["cosine_to_policy_gradient"].append(_cosine(uniform, target))
        observed["surrogate_equals_policy_gradient"].append(uniform == target)
        observed["discounted_surrogate_equals_policy_gradient"].append(discounted == target)
    return {**observed, "gammas": [as_written(g) for g in params.gammas],
            "gap_for_every_discount": gap,
            "discounts_in_unit_interval_where_gap_vanishes": vanishing,
            "discounted_gap_vanishes_for_every_discount": all(c == 0 for row in discounted_gap for c in row)}


# -------------------------------------------------------- week 16 step 3: importance weighting on the syllabus's bandit


def _policy_gradient(pi: list[Fraction], weights: list[Fraction]) -> np.ndarray:
    """Σ_a π(a) w(a) (e_a - π): the expected gradient when arms are drawn from π and weighted by w."""
    return np.array(pi, dtype=object) * np.array(weights, dtype=object) @ softmax_scores(pi)


class TwoPolicies(NoParams):
    """An old and a new policy over the same arms, and the arms' rewards (or advantages)."""

    pi_old: PositiveDistribution = Field(min_length=2, description="π_old(a), the policy that drew the samples")
    pi_new: PositiveDistribution = Field(min_length=2, description="π_θ(a), the policy being trained")
    rewards: list[float] = Field(min_length=2, description="R(a) per arm")
    baseline: float = Field(0.0, description="b subtracted from every reward: Â(a) = R(a) - b")
    epsilon: float = Field(0.2, gt=0, lt=1, description="the clipping parameter ε")

    @model_validator(mode="after")
    def _one_entry_per_arm(self) -> TwoPolicies:
        if not len(self.pi_old) == len(self.pi_new) == len(self.rewards):
            raise ValueError("pi_old, pi_new and rewards need one entry per arm")
        return self


def _exact_policies(params: TwoPolicies) -> tuple[list[Fraction], list[Fraction], np.ndarray, np.ndarray]:
    old, new = [as_written(p) for p in params.pi_old], [as_written(p) for p in params.pi_new]
    ratios = np.array([n / o for n, o in zip(new, old, strict=True)], dtype=object)
    advantages = np.array([as_written(r) - as_written(params.baseline) for r in params.rewards], dtype=object)
    return old, new, ratios, advantages


@verifier(kind="symbolic")
def importance_weighting_symbolic(ctx: Context) -> dict[str, object]:
    """Σ_a π_old(a) [π(a)/π_old(a)] f(a) - Σ_a π(a) f(a) over K symbolic arms, any f and positive
    π_old: weighting samples of π_old by r = π/π_old gives expectations under π."""
    categories = sp.Symbol("K", integer=True, positive=True)
    a = sp.Symbol("a", integer=True)
    old, new, f = sp.IndexedBase("q", positive=True), sp.IndexedBase("p", positive=True), sp.IndexedBase("f")
    weighted = sp.Sum(old[a] * (new[a] / old[a]) * f[a], (a, 1, categories))
    # Samples of π_old (q) reweighted to π (p).
    reach(actions=categories, data="old")
    return {"residual": sp.simplify(weighted - sp.Sum(new[a] * f[a], (a, 1, categories)))}


@verifier(kind="exact", uses=("surrogate_objective_grad",), params=TwoPolicies)
def stale_samples_exact(ctx: Context) -> dict[str, object]:
    """The gradient of J(θ) = E_{π_θ}[R] at π_θ, estimated from arms drawn by π_old, exactly.

    Plain REINFORCE on the old samples weights ∇ log π_θ(a) by R(a) and estimates the gradient at
    π_old's point, not at π_θ's; the surrogate's derivative with respect to log π (impl's
    surrogate_objective_grad, r R) reweights each sample by r = π_θ/π_old and gives ∇J(θ) exactly.
    The true gradient Σ_a π_θ(a) R(a) (e_a - π_θ) is computed here.
    """
    old, new, ratios, rewards = _exact_policies(ctx.params)
    # Arms drawn by π_old, each with its exact reward, evaluated for π_θ: one token of one state.
    reach_bandit(len(old), data="old", advantages="exact", tokens=1)
    true_gradient = _policy_gradient(new, list(rewards))
    scores = softmax_scores(new)
    stale = np.array(old, dtype=object) * rewards @ scores
    reweighted = np.array(old, dtype=object) * ctx.impl.surrogate_objective_grad(ratios, rewards) @ scores
    return {"true_gradient": list(true_gradient), "stale_minus_true": list(stale - true_gradient),
            "reweighted_minus_true": list(reweighted - true_gradient)}


@verifier(kind="counterexample", uses=("surrogate_objective_grad", "ppo_clip_objective_grad"), params=TwoPolicies)
def clipping_bias_exact(ctx: Context) -> dict[str, object]:
    """Expected gradients with respect to the logits at π_θ, from arms drawn by π_old, exactly.

    The true policy gradient Σ_a π_θ(a) Â(a) (e_a - π_θ) is computed here (Â = R - b, which the
    baseline leaves unbiased). The unclipped surrogate, weighted per sample by impl's r Â, equals
    it; the clipped surrogate, weighted by impl's clipped derivative, drops the samples whose ratio
    has left [1-ε, 1+ε] in their advantage's direction and so differs from it. At π_θ = π_old all
    ratios are 1 and the clipped gradient is the true one.
    """
    old, new, ratios, advantages = _exact_policies(ctx.params)
    epsilon = as_written(ctx.params.epsilon)
    # Arms drawn by π_old, each with its exact reward minus a constant: one token of one state.
    reach_bandit(len(old), data="old", advantages="exact", tokens=1)
    true_gradient = _policy_gradient(new, list(advantages))
    scores = softmax_scores(new)
    weights_old = np.array(old, dtype=object)
    unclipped = weights_old * ctx.impl.surrogate_objective_grad(ratios, advantages) @ scores
    clipped = weights_old * ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon) @ scores
    ones = np.array([Fraction(1)] * len(old), dtype=object)
    at_old = weights_old * ctx.impl.ppo_clip_objective_grad(ones, advantages, epsilon) @ softmax_scores(old)
    return {"ratios": list(ratios), "true_gradient": list(true_gradient),
            "unclipped_minus_true": list(unclipped - true_gradient), "clipped_gradient": list(clipped),
            "clipped_minus_true": list(clipped - true_gradient),
            "clipped_minus_true_at_old": list(at_old - _policy_gradient(old, list(advantages)))}


class TwoTokenAnswer(NoParams):
    """An answer of two tokens: the first drawn in the prompt's state, the second in the state the first leads to
    (the prefix: one state per first token), under an old and a new tabular softmax policy, with a final reward."""

    first_old: PositiveDistribution = Field(min_length=2, description="π_old(a | prompt)")
    first_new: PositiveDistribution = Field(min_length=2, description="π_θ(a | prompt)")
    second_old: list[PositiveDistribution] = Field(min_length=2,
                                                   description="π_old(b | prompt, a), one row per first token a")
    second_new: list[PositiveDistribution] = Field(min_length=2,
                                                   description="π_θ(b | prompt, a), one row per first token a")
    rewards: list[list[float]] = Field(min_length=2, description="R(a, b), the answer's one final reward")
    epsilon: float = Field(gt=0, lt=1, description="the clipping parameter ε")

    @model_validator(mode="after")
    def _consistent(self) -> TwoTokenAnswer:
        first, rows = len(self.first_old), [self.second_old, self.second_new, self.rewards]
        if len(self.first_new) != first or any(len(table) != first for table in rows):
            raise ValueError("first_old, first_new and the rows of second_old, second_new and rewards need one "
                             "entry per first token")
        width = len(self.second_old[0])
        if width < 2 or any(len(row) != width for table in rows for row in table):
            raise ValueError("every row of second_old, second_new and rewards needs the same two or more entries")
        return self


def per_token_weights(ctx: Context, ratios: np.ndarray, advantages: np.ndarray) -> np.ndarray:
    """The weight the per-token surrogate Σ_t r_t Â_t puts on each token's ∇ log π_θ: impl's r_t Â_t."""
    return ctx.impl.surrogate_objective_grad(ratios, advantages)


def product_of_ratios_weights(ratios: np.ndarray, advantages: np.ndarray) -> np.ndarray:
    """The weight (Π_t r_t)(Σ_t Â_t) that the honest transfer, E_old[(Π_t r_t) Σ_t Â_t], puts on each token's
    ∇ log π_θ: the product depends on every token's probability, the advantages do not."""
    weight = math.prod(ratios) * sum(advantages)
    return np.array([weight] * len(ratios), dtype=object)


@verifier(kind="counterexample", params=TwoTokenAnswer, uses=("surrogate_objective_grad", "ppo_clip_objective_grad"))
def per_token_surrogate_bias_exact(ctx: Context) -> dict[str, object]:
    """Expected gradients with respect to every state's logits at π_θ, from answers drawn by π_old, exactly.

    The policy is a tabular softmax over the prompt's state and the state after each first token, so
    ∇ log π_θ(a|s) is e_a - π_θ(·|s) in s's block. ∇J = Σ_τ p_θ(τ) R(τ) Σ_t ∇ log π_θ(a_t|s_t) is
    computed here; Â_t are π_old's exact advantages (γ = 1, one final reward): Â_1 = V_old(s_a) -
    V_old(prompt), Â_2 = R(a, b) - V_old(s_a). The per-token surrogate E_old[Σ_t r_t Â_t] weights each
    token's score by impl's r_t Â_t, and the clipped surrogate by impl's clipped derivative; the
    product of ratios, E_old[(Π_t r_t) Σ_t Â_t] = J(θ) - J(θ_old), weights both by (Π_t r_t) Σ_t Â_t
    (:func:`product_of_ratios_weights`). ``no_clip_active``: every ratio lies inside [1 - ε, 1 + ε]
    (decided here). At θ = θ_old every ratio is 1 and the per-token gradient is ∇J(θ_old).
    """
    params = ctx.params
    first = {"old": [as_written(p) for p in params.first_old], "new": [as_written(p) for p in params.first_new]}
    second = {"old": [[as_written(p) for p in row] for row in params.second_old],
              "new": [[as_written(p) for p in row] for row in params.second_new]}
    rewards = [[as_written(r) for r in row] for row in params.rewards]
    epsilon = as_written(params.epsilon)
    n_first, n_second = len(rewards), len(rewards[0])
    blocks = [0] + [n_first + a * n_second for a in range(n_first)]
    size = n_first + n_first * n_second

    def score(block: int, action: int, pi: list[Fraction]) -> np.ndarray:
        vector = np.array([Fraction(0)] * size, dtype=object)
        vector[blocks[block]:blocks[block] + len(pi)] = softmax_score(pi, action)
        return vector

    values_after = [sum(p * r for p, r in zip(second["old"][a], rewards[a], strict=True)) for a in range(n_first)]
    value_prompt = sum(p * v for p, v in zip(first["old"], values_after, strict=True))
    zero = np.array([Fraction(0)] * size, dtype=object)
    true, per_token, clipped, product, at_old, true_at_old = (zero.copy() for _ in range(6))
    ratios_seen = []
    for a, b in itertools.product(range(n_first), range(n_second)):
        path = (a, b)
        # Two tokens, each in a state of its own (the prompt, then the prefix), read from π_old's answer.
        reach(states=len(blocks), actions=[n_first, n_second], horizon=len(path), tokens=len(path),
              transitions="deterministic", data="old", advantages="exact")
        p_old = first["old"][a] * second["old"][a][b]
        p_new = first["new"][a] * second["new"][a][b]
        scores = [score(0, a, first["new"]), score(1 + a, b, second["new"][a])]
        old_scores = [score(0, a, first["old"]), score(1 + a, b, second["old"][a])]
        ratios = np.array([first["new"][a] / first["old"][a], second["new"][a][b] / second["old"][a][b]],
                          dtype=object)
        advantages = np.array([values_after[a] - value_prompt, rewards[a][b] - values_after[a]], dtype=object)
        ratios_seen.extend(ratios)
        true = true + p_new * rewards[a][b] * sum(scores)
        true_at_old = true_at_old + p_old * rewards[a][b] * sum(old_scores)
        for total, weights, basis in (
                (per_token, per_token_weights(ctx, ratios, advantages), scores),
                (clipped, ctx.impl.ppo_clip_objective_grad(ratios, advantages, epsilon), scores),
                (product, product_of_ratios_weights(ratios, advantages), scores),
                (at_old, per_token_weights(ctx, np.array([Fraction(1)] * len(path), dtype=object), advantages),
                 old_scores)):
            total += p_old * sum(w * g for w, g in zip(weights, basis, strict=True))
    return {"ratio_range": [min(ratios_seen), max(ratios_seen)],
            "no_clip_active": all(1 - epsilon <= r <= 1 + epsilon for r in ratios_seen),
            "true_gradient": list(true), "per_token_gradient": list(per_token),
            "per_token_minus_true": list(per_token - true), "clipped_minus_per_token": list(clipped - per_token),
            "product_of_ratios_minus_true": list(product - true),
            "per_token_minus_true_at_old": list(at_old - true_at_old)}

"""Lesson 4.4: the local approximation after several epochs, the surrogate's gradient at θ_old for γ < 1, what
a batch's k3 does not bound, and why stable log-probabilities are a detail PPO's results depend on (steps 4.4.1,
4.4.4 and 4.4.5)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import sympy as sp
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, reach, verifier
from verifiers._numeric import as_written, log_softmax, rounding_bound
from verifiers._params import Distribution
from verifiers._reach import reach_mdp
from verifiers.kl import FiniteBatch

# --------------------------------------------------------------------------- 4.4.1: epochs on one batch


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


# --------------------------------------------------------------------------- 4.4.4: k3 on a batch bounds nothing


@verifier(kind="counterexample", uses=("probability_ratios", "kl_k3"), params=FiniteBatch)
def k3_batch_bounds_no_update(ctx: Context) -> dict[str, object]:
    """impl's ratios and k3 on one batch drawn from π_old, beside the exact KL(π_old || π_θ) and the
    exact probability that π_old draws that batch (in rationals, from the probabilities as written).

    A policy that moves only the mass of actions the batch does not hold leaves every ratio of the
    batch at 1, so the batch's k3 is 0 however far the policy moved: a small D̂ is no bound on the update.
    """
    p_old, p_new = np.array(ctx.params.pi_old), np.array(ctx.params.pi_new)
    reach(states=1, actions=p_old.size, data="old")  # one state's policies; the batch is drawn from π_old
    log_pi_old, log_pi_new = np.log(p_old[ctx.params.actions]), np.log(p_new[ctx.params.actions])
    ratios = np.asarray(ctx.impl.probability_ratios(log_pi_new, log_pi_old), dtype=float)
    probability = Fraction(1)
    for a in ctx.params.actions:
        probability *= as_written(ctx.params.pi_old[a])
    kl = float(p_old @ (np.log(p_old) - np.log(p_new)))
    return {"k3_batch_mean": float(np.mean(ctx.impl.kl_k3(log_pi_new - log_pi_old))), "kl_exact": kl,
            "batch_probability": probability, "ratios_in_batch": [float(r) for r in ratios],
            "every_ratio_in_batch_is_one": bool(np.all(ratios == 1))}


# --------------------------------------------------------------------------- 4.4.5: stable log-probabilities


class ShiftedBatch(NoParams):
    old_logits: list[list[float]] = Field(min_length=1, description="logit rows of π_old, one per sample")
    new_logits: list[list[float]] = Field(min_length=1, description="logit rows of π_θ after an update")
    actions: list[int] = Field(min_length=1, description="the stored action of each sample")
    advantages: list[float] = Field(min_length=1, description="the advantage of each sample")
    shift: float = Field(description="the constant added to every logit of both policies (softmax ignores it)")
    epsilon: float = Field(gt=0, lt=1, description="PPO's clipping parameter")


def _unshifted_log_softmax(z: np.ndarray) -> np.ndarray:
    """log(exp(z) / Σ exp(z)) as written, with no shift by the row's maximum: the unstable computation."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.exp(z)
        return np.log(e / e.sum(axis=-1, keepdims=True))


def _clip_objective(ratio: np.ndarray, advantage: np.ndarray, epsilon: float) -> float:
    with np.errstate(invalid="ignore"):
        return float(np.mean(np.minimum(ratio * advantage, np.clip(ratio, 1 - epsilon, 1 + epsilon) * advantage)))


@verifier(kind="counterexample", uses=("log_softmax", "probability_ratios", "ppo_clip_objective"), params=ShiftedBatch)
def unstable_log_probabilities_break_ppo(ctx: Context) -> dict[str, object]:
    """PPO's clipped objective of one batch whose logits are all shifted by one constant, which
    changes neither policy: from log-probabilities computed as written (exp, normalise, log: the
    verifier's own), and through impl's log_softmax, probability_ratios and ppo_clip_objective;
    beside the objective of the unshifted logits, from the verifiers' reference log-softmax.

    With a shift beyond float64's exp range (about 709) the unstable computation gives inf / inf,
    so its ratios and the objective are NaN, and so is every update built on them; the stable one
    must give the unshifted objective up to rounding (rounding_bound of the shifted logits' size).
    """
    params = ctx.params
    rows = np.arange(len(params.actions))
    actions, advantages = np.array(params.actions), np.array(params.advantages)
    old, new = np.array(params.old_logits), np.array(params.new_logits)
    # The stored actions and their log π_old come from the old logits; the advantages are numbers written for Â.
    reach(actions=old.shape[1], data="old", advantages="estimated")

    def taken(log_pi: np.ndarray) -> np.ndarray:
        return np.asarray(log_pi, dtype=float)[rows, actions]

    reference_ratio = np.exp(taken(log_softmax(new)) - taken(log_softmax(old)))
    reference = _clip_objective(reference_ratio, advantages, params.epsilon)
    with np.errstate(invalid="ignore"):
        unstable_ratio = np.exp(taken(_unshifted_log_softmax(new + params.shift))
                                - taken(_unshifted_log_softmax(old + params.shift)))
    unstable = _clip_objective(unstable_ratio, advantages, params.epsilon)
    impl_ratio = ctx.impl.probability_ratios(taken(ctx.impl.log_softmax(new + params.shift)),
                                             taken(ctx.impl.log_softmax(old + params.shift)))
    stable = float(np.mean(ctx.impl.ppo_clip_objective(impl_ratio, advantages, params.epsilon)))
    magnitude = abs(params.shift) + float(np.abs(np.concatenate([old, new])).max()) + math.log(old.shape[1])
    # Each log-probability is off by a few roundings of numbers of the shifted logits' size, so each
    # ratio by that times r, and each term of the objective by that times |Â| r.
    scale = float(np.abs(advantages).max()) * max(1.0, float(reference_ratio.max()))
    bound = 2 * rounding_bound(8 * old.shape[1], magnitude) * scale
    return {"unshifted_objective": reference, "unstable_objective": unstable, "stable_objective": stable,
            "unstable_objective_finite": bool(np.isfinite(unstable)),
            "stable_objective_finite": bool(np.isfinite(stable)),
            "stable_equals_unshifted": bool(abs(stable - reference) <= bound), "bound": bound}


# --------------------------------------------------------------------------- 4.4.1: the surrogate's gradient for γ < 1


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

"""Lesson 4.4: the local approximation after several epochs, what a batch's k3 does not bound, and why
stable log-probabilities are a detail PPO's results depend on (steps 4.4.1, 4.4.4 and 4.4.5)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
from pydantic import Field

from harness import Context, NoParams, verifier
from verifiers._numeric import as_written, log_softmax, rounding_bound
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
    true_new = sum(pi(new, "s0", a) * sum(pi(new, s, b) * reward[(s, b)] for b in (0, 1))
                   for a, s in ((0, "s1"), (1, "s2")))
    return true_new - value_old["s0"], surrogate


@verifier("lesson_4_4.surrogate_error_grows_over_epochs", kind="counterexample", params=SurrogateAscent)
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


@verifier("lesson_4_4.k3_batch_bounds_no_update", kind="counterexample", uses=("probability_ratios", "kl_k3"),
          params=FiniteBatch)
def k3_batch_bounds_no_update(ctx: Context) -> dict[str, object]:
    """impl's ratios and k3 on one batch drawn from π_old, beside the exact KL(π_old || π_θ) and the
    exact probability that π_old draws that batch (in rationals, from the probabilities as written).

    A policy that moves only the mass of actions the batch does not hold leaves every ratio of the
    batch at 1, so the batch's k3 is 0 however far the policy moved: a small D̂ is no bound on the update.
    """
    p_old, p_new = np.array(ctx.params.pi_old), np.array(ctx.params.pi_new)
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


@verifier("lesson_4_4.unstable_log_probabilities_break_ppo", kind="counterexample",
          uses=("log_softmax", "probability_ratios", "ppo_clip_objective"), params=ShiftedBatch)
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

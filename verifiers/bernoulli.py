"""The one-step Bernoulli experiment of module step 4.2.5: three group estimators.

A ~ Bernoulli(p) with reward ``reward_success`` for A = 1 and ``reward_failure`` for A = 0;
the score with respect to the logit is S = A - p. Each group of G independent actions yields
one estimate (1/G) Σ_i A_i S_i for three choices of the advantage A_i: the reward itself
(no baseline), the reward minus the group mean, and the leave-one-out advantage. Besides their
expectations: their exact variances (step 4.2.5), the std-normalised estimator (step 4.2.3), and
the score S = A - p itself, derived by sympy.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field

from claims_harness import Context, NoParams, check_property, reach, verifier
from claims_harness import strategies as st
from verifiers._numeric import as_written
from verifiers._reach import reach_bandit
from verifiers._sampling import bernoulli

# The two actions of the one-step Bernoulli policy: A = 1 with probability p, A = 0 otherwise.
_ACTIONS = (0, 1)
_USES = ("bernoulli_logit_score", "score_function_gradient", "group_centered_advantages",
         "leave_one_out_advantages")


class BernoulliGroup(NoParams):
    """A one-step Bernoulli policy and the group size of the estimators."""

    p: float = Field(gt=0, lt=1, description="probability of action 1")
    reward_success: float = Field(description="reward for action 1")
    reward_failure: float = Field(description="reward for action 0")
    group_size: int = Field(ge=2, le=16, description="answers per group, G")


def logit_score_formulas() -> dict[int, sp.Basic]:
    """∂/∂z log π(a) for a = 0, 1 with π(1) = σ(z), differentiated by sympy and rewritten in p = σ(z)."""
    z = sp.Symbol("z", real=True)
    p = sp.Symbol("p", positive=True)
    sigmoid = 1 / (1 + sp.exp(-z))
    log_pi = {1: sp.log(sigmoid), 0: sp.log(1 - sigmoid)}
    return {a: sp.simplify(sp.diff(log_prob, z).subs(z, sp.log(p / (1 - p)))) for a, log_prob in log_pi.items()}


@verifier(kind="symbolic")
def logit_score_symbolic(ctx: Context) -> dict[str, object]:
    """The derivative of log π(a) in the logit z, minus a - p, for both actions (sympy, p = σ(z) symbolic)."""
    p = sp.Symbol("p", positive=True)
    formulas = logit_score_formulas()
    reach_bandit(len(formulas))
    return {"score_minus_action_minus_p": [sp.simplify(formula - (a - p))
                                           for a, formula in sorted(formulas.items())]}


_probabilities = st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(999, 1000), max_denominator=1000)


@verifier(kind="property", uses=("bernoulli_logit_score",))
def logit_score_property(ctx: Context) -> dict[str, object]:
    """For random exact p and arrays of actions, impl's Bernoulli logit score equals the sympy derivative
    of log π(a) in the logit, evaluated exactly at p."""
    p_symbol = sp.Symbol("p", positive=True)
    formulas = logit_score_formulas()

    def agrees(case: tuple[Fraction, list[int]]) -> None:
        p, actions = case
        reach_bandit(len(formulas))
        exact_p = sp.Rational(p.numerator, p.denominator)
        expected = [Fraction(str(formulas[a].subs(p_symbol, exact_p))) for a in actions]
        observed = ctx.impl.bernoulli_logit_score(np.array(actions, dtype=object), p)
        assert list(observed) == expected, (p, actions, list(observed), expected)

    return check_property(ctx, agrees, st.tuples(_probabilities, st.lists(st.sampled_from((0, 1)), min_size=1,
                                                                          max_size=8)))



def _estimates(ctx: Context, actions: np.ndarray, p: object, rewards: np.ndarray) -> dict[str, np.ndarray]:
    # Every estimator is handed sampled rewards, and two of them a baseline drawn from the same group.
    reach(advantages="estimated")
    score = ctx.impl.bernoulli_logit_score(actions, p)
    advantages = {
        "no_baseline": rewards,
        "group_mean": ctx.impl.group_centered_advantages(rewards),
        "leave_one_out": ctx.impl.leave_one_out_advantages(rewards),
    }
    return {name: ctx.impl.score_function_gradient(a, score) for name, a in advantages.items()}


def _group_outcomes(params: BernoulliGroup) -> tuple[np.ndarray, np.ndarray, Fraction, np.ndarray]:
    """Every group of G actions, its probability, p, and the rewards, all exact.

    The groups' probabilities are the policy's own, the one whose score the estimators use: on-policy
    answers to one prompt, each a single action.
    """
    p, success, failure = as_written(params.p), as_written(params.reward_success), as_written(params.reward_failure)
    groups = np.array(list(itertools.product(_ACTIONS, repeat=params.group_size)), dtype=object)
    reach_bandit(len(_ACTIONS), group=groups.shape[1], data="current", tokens=1)
    successes = groups.sum(axis=1)
    probability = np.array([p**k * (1 - p) ** (params.group_size - k) for k in successes], dtype=object)
    rewards = np.where(groups == 1, success, failure).astype(object)
    return groups, probability, p, rewards


@verifier(kind="exact", uses=_USES, params=BernoulliGroup)
def group_estimators_exact(ctx: Context) -> dict[str, object]:
    """Exact expectations of the three estimators over all 2^G groups, in rational arithmetic.

    The true gradient is computed independently, by enumerating the single action:
    Σ_a π(a) R(a) (a - p).
    """
    params = ctx.params
    groups, probability, p, rewards = _group_outcomes(params)
    success, failure = as_written(params.reward_success), as_written(params.reward_failure)
    gradient = p * success * (1 - p) + (1 - p) * failure * (0 - p)
    expectations = {name: (probability * values).sum()
                    for name, values in _estimates(ctx, groups, p, rewards).items()}
    return {
        "gradient": gradient,
        **expectations,
        "group_mean_ratio": expectations["group_mean"] / gradient,
        "outcomes": len(groups),
        "total_probability": probability.sum(),
    }


@verifier(kind="montecarlo", uses=_USES, params=BernoulliGroup)
def group_estimators_montecarlo(ctx: Context) -> dict[str, object]:
    """Sample independent groups through impl and estimate each estimator's mean with an interval.

    Every per-group estimate is an average of A_i S_i, so |estimate| <= max|A| max|S|: the
    reward's magnitude without a baseline, (G-1)/G of the reward range for the group mean and
    the whole range for leave-one-out. The number of groups is the smallest that detects the
    check's deviation at its alpha and beta over the widest of these supports; the intervals are
    empirical-Bernstein, never wider than Hoeffding's at alpha/2 and here about five times narrower.
    """
    params = ctx.params
    group_size = params.group_size
    reward_range = abs(params.reward_success - params.reward_failure)
    largest_score = max(params.p, 1 - params.p)
    bounds = {
        "no_baseline": max(abs(params.reward_success), abs(params.reward_failure)) * largest_score,
        "group_mean": reward_range * (group_size - 1) / group_size * largest_score,
        "leave_one_out": reward_range * largest_score,
    }
    widest = max(bounds.values())
    n = ctx.samples_needed((-widest, widest))
    actions = bernoulli(ctx.rng, params.p, (n, group_size))
    # Drawn from the policy whose score is taken, in groups of G one-action answers.
    reach_bandit(len(_ACTIONS), group=actions.shape[1], data="current", tokens=1)
    rewards = np.where(actions == 1, params.reward_success, params.reward_failure)
    estimates = _estimates(ctx, actions, params.p, rewards)
    return {name: ctx.mean_estimate(values, (-bounds[name], bounds[name]), "empirical-bernstein")
            for name, values in estimates.items()}


@verifier(kind=("exact", "counterexample"), uses=_USES, params=BernoulliGroup)
def group_estimator_variances_exact(ctx: Context) -> dict[str, object]:
    """Exact variances of the three per-group estimates over all 2^G groups (rational arithmetic).

    Also reports whether the group-mean estimate is (G-1)/G times the leave-one-out estimate in
    every single group, the source of their fixed variance ratio.
    """
    groups, probability, p, rewards = _group_outcomes(ctx.params)
    estimates = _estimates(ctx, groups, p, rewards)
    variances = {name: (probability * values**2).sum() - (probability * values).sum() ** 2
                 for name, values in estimates.items()}
    group_size = ctx.params.group_size
    return {
        **{f"{name}_variance": value for name, value in variances.items()},
        "no_baseline_minus_leave_one_out": variances["no_baseline"] - variances["leave_one_out"],
        "no_baseline_minus_group_mean": variances["no_baseline"] - variances["group_mean"],
        "group_mean_over_leave_one_out": variances["group_mean"] / variances["leave_one_out"],
        "collinear_in_every_group": bool(np.all(
            estimates["group_mean"] == Fraction(group_size - 1, group_size) * estimates["leave_one_out"])),
    }


class BernoulliCase(NoParams):
    """One Bernoulli policy and its two rewards."""

    p: float = Field(gt=0, lt=1, description="probability of action 1")
    reward_success: float = Field(description="reward for action 1")
    reward_failure: float = Field(description="reward for action 0")


class NormalizedGroups(NoParams):
    """Several Bernoulli cases, the group size and the eps guard of the std normalisation."""

    cases: list[BernoulliCase] = Field(min_length=2)
    group_size: int = Field(ge=2, le=16, description="answers per group, G")
    eps: float = Field(gt=0, description="the guard added to the group std")


@verifier(kind="counterexample", params=NormalizedGroups,
          uses=("bernoulli_logit_score", "score_function_gradient", "group_centered_advantages",
                "group_normalized_advantages"))
def normalized_estimator_ratios(ctx: Context) -> dict[str, object]:
    """For each case, the exact expectation over all 2^G groups of the centred estimator and of the
    std-normalised one, each divided by the true gradient p(1-p)(R(1) - R(0)).

    The centred ratio is exact (fractions); the normalised one needs a square root, so impl
    computes it in floats and the enumeration weights are rounded to floats too (far below the
    printed digits).
    """
    centered_ratios, normalized_ratios = [], []
    for case in ctx.params.cases:
        params = BernoulliGroup(group_size=ctx.params.group_size, **case.model_dump())
        groups, probability, p, rewards = _group_outcomes(params)
        score = ctx.impl.bernoulli_logit_score(groups, p)
        gradient = p * (1 - p) * (as_written(case.reward_success) - as_written(case.reward_failure))
        centered = ctx.impl.score_function_gradient(ctx.impl.group_centered_advantages(rewards), score)
        normalized = ctx.impl.score_function_gradient(
            ctx.impl.group_normalized_advantages(rewards.astype(float), ctx.params.eps), score.astype(float))
        reach(advantages="estimated")
        centered_ratios.append((probability * centered).sum() / gradient)
        normalized_ratios.append(float(probability.astype(float) @ normalized) / float(gradient))
    return {"centered_ratio": centered_ratios, "normalized_ratio": normalized_ratios}

"""Group estimators beyond the Bernoulli example (module steps 4.2.3-4.2.5).

Symbolic statements for any group size G, exact enumeration of a categorical policy with K
actions (every group of G answers) for one policy and for random ones, a calibrated Monte Carlo
test of the same case, and properties of impl's group advantages. RLOO's answer-level estimator with
answers of several tokens (each answer's leave-one-out advantage times the sum of its tokens' scores), and
one policy, reward table and group size on which the order of two estimators' total variances reverses
between the logits and logits scaled per coordinate (4.2.5: the order depends on the parameterisation).
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, over, probability_rows, softmax_score, softmax_scores
from verifiers._numeric import assert_close, rounding_bound
from verifiers._params import PositiveDistribution, PositiveFractions, one_entry_each
from verifiers._reach import reach_bandit
from verifiers._sampling import categorical
from verifiers.baseline_state import softmax_score_agrees

_ADVANTAGES = ("group_centered_advantages", "leave_one_out_advantages")


@verifier(kind="symbolic")
def group_estimators_symbolic(ctx: Context) -> dict[str, object]:
    """E[(1/G) Σ_i A_i S_i] for the group-mean and leave-one-out advantages, G symbolic.

    Independent answers give E[R_i S_i] = m and, for j ≠ i, E[R_j S_i] = E[R] E[S] = μ_R μ_S. The
    group mean contains R_i once and G - 1 other answers; the leave-one-out mean only the G - 1
    others. The per-answer expectations do not depend on i, so the outer sum is G equal terms.
    Reported: each expectation minus its closed form (the covariance m - μ_R μ_S, scaled by
    (G-1)/G for the group mean), and with μ_S = E[S] = 0, the group mean's factor minus (G-1)/G
    and the leave-one-out expectation minus m.
    """
    group_size = sp.Symbol("G", integer=True, positive=True)
    reach(group=group_size)
    i, j = sp.symbols("i j", integer=True, positive=True)
    m, mu_r, mu_s = sp.symbols("m mu_R mu_S", real=True)
    others = sp.Sum(mu_r * mu_s, (j, 1, group_size - 1)).doit()
    group_mean = sp.Sum(m - (m + others) / group_size, (i, 1, group_size)).doit() / group_size
    leave_one_out = sp.Sum(m - others / (group_size - 1), (i, 1, group_size)).doit() / group_size
    covariance = m - mu_r * mu_s
    return {
        "group_mean_residual": sp.simplify(group_mean - (group_size - 1) / group_size * covariance),
        "leave_one_out_residual": sp.simplify(leave_one_out - covariance),
        "group_mean_factor_minus_text": sp.simplify(group_mean.subs(mu_s, 0) / m - (group_size - 1) / group_size),
        "leave_one_out_minus_m": sp.simplify(leave_one_out.subs(mu_s, 0) - m),
    }


@verifier(kind="symbolic")
def variance_ratio_symbolic(ctx: Context) -> dict[str, object]:
    """Var(group-mean estimate) / Var(leave-one-out estimate) for symbolic G.

    Per group the centred advantages are c times the leave-one-out ones, with c derived here from
    the two definitions (mean R = (R_i + T)/G, T the sum of the others); so the group-mean
    estimate is c X for the leave-one-out estimate X, and Var(cX) = E[(cX)^2] - E[cX]^2 with
    E[X] = μ, E[X^2] = ν. Reported: c minus (G-1)/G, the ratio minus c^2, and the ratio minus
    (G-1)^2/G^2.
    """
    group_size, r_i, others = sp.symbols("G R_i T")
    reach(group=group_size)
    mu, nu = sp.symbols("mu nu", real=True)
    centered = r_i - (r_i + others) / group_size
    leave_one_out = r_i - others / (group_size - 1)
    factor = sp.simplify(centered / leave_one_out)
    ratio = sp.simplify((factor**2 * nu - (factor * mu) ** 2) / (nu - mu**2))
    return {
        "collinearity_factor_minus_text": sp.simplify(factor - (group_size - 1) / group_size),
        "variance_ratio_minus_factor_squared": sp.simplify(ratio - factor**2),
        "variance_ratio_minus_text": sp.simplify(ratio - (group_size - 1) ** 2 / group_size**2),
    }


class CategoricalGroup(NoParams):
    """A one-step softmax policy over K actions, a reward per action, and the group size."""

    pi: PositiveDistribution = Field(min_length=2, max_length=6, description="action probabilities, summing to 1")
    rewards: list[float] = Field(min_length=2, max_length=6, description="reward of each action")
    group_size: int = Field(ge=2, le=5, description="answers per group, G")

    _lengths = one_entry_each("pi", "rewards", per="action")


def _group_estimates(ctx: Context, rewards: np.ndarray, scores: np.ndarray) -> dict[str, np.ndarray]:
    """The three estimates (1/G) Σ_i A_i S_i per group, through impl; rewards [n, G], scores [n, G, K]."""
    # Sampled rewards, and for two of the three a baseline from the same group: estimates of the advantage.
    reach(advantages="estimated")
    advantages = {
        "no_baseline": rewards,
        "group_mean": ctx.impl.group_centered_advantages(rewards),
        "leave_one_out": ctx.impl.leave_one_out_advantages(rewards),
    }
    return {name: ctx.impl.score_function_gradient(a, scores) for name, a in advantages.items()}


@verifier(kind="exact", params=CategoricalGroup, uses=(*_ADVANTAGES, "score_function_gradient", "softmax_score"))
def categorical_estimators_exact(ctx: Context) -> dict[str, object]:
    """Exact expectations of the three estimators over all K^G groups, in rational arithmetic.

    The gradient with respect to the logits is computed independently from one action:
    Σ_a π(a) R(a) (e_a - π). Each estimator's expectation is reported as its ratio to that
    gradient, coordinate by coordinate.
    """
    pi, reward_a = as_fractions(ctx.params.pi), as_fractions(ctx.params.rewards)
    scores_a = softmax_scores(pi)
    gradient = (pi * reward_a) @ scores_a
    groups = np.array(list(itertools.product(range(len(pi)), repeat=ctx.params.group_size)))
    probability = np.prod(pi[groups], axis=1)
    # Every group of one-action answers weighted by the policy whose score is taken: on-policy data.
    reach_bandit(len(pi), group=groups.shape[1], data="current", tokens=1)
    estimates = _group_estimates(ctx, reward_a[groups], scores_a[groups])
    ratios = {f"{name}_ratio": list((probability @ values) / gradient) for name, values in estimates.items()}
    return {
        "gradient": list(gradient),
        **ratios,
        "total_probability": probability.sum(),
        "softmax_score_agrees": softmax_score_agrees(ctx, pi, scores_a),
    }


@verifier(kind="montecarlo", params=CategoricalGroup, uses=(*_ADVANTAGES, "score_function_gradient", "softmax_score"))
def categorical_estimators_montecarlo(ctx: Context) -> dict[str, object]:
    """Sample independent groups through impl (float scores from impl's softmax score at logits
    log π) and estimate every coordinate of each estimator's mean with an interval.

    Coordinate k of the score is [a = k] - π_k, so |S_k| <= max(π_k, 1 - π_k); the advantages are
    bounded by the largest |reward| (no baseline), (G-1)/G of the reward range (group mean) and
    the whole range (leave-one-out). The number of groups detects the check's deviation over
    the widest of these supports; the empirical-Bernstein intervals, never wider than Hoeffding's
    at alpha/2, are much narrower here because the estimates vary far less than their range.
    """
    pi = np.array(ctx.params.pi)
    reward_a = np.array(ctx.params.rewards)
    group_size = ctx.params.group_size
    spread = reward_a.max() - reward_a.min()
    largest_advantage = {"no_baseline": np.abs(reward_a).max(),
                         "group_mean": spread * (group_size - 1) / group_size,
                         "leave_one_out": spread}
    largest_score_k = np.maximum(pi, 1 - pi)
    widest = max(largest_advantage.values()) * largest_score_k.max()
    n = ctx.samples_needed((-widest, widest))
    actions = categorical(ctx.rng, pi, (n, group_size))
    # Drawn from the policy whose score is taken, in groups of G one-action answers.
    reach_bandit(len(pi), group=actions.shape[1], data="current", tokens=1)
    logits = np.broadcast_to(np.log(pi), (n, group_size, len(pi)))
    estimates = _group_estimates(ctx, reward_a[actions], ctx.impl.softmax_score(logits, actions))
    observed = {}
    for name, values in estimates.items():
        bound_k = largest_advantage[name] * largest_score_k
        observed[name] = [ctx.mean_estimate(values[:, k], (-bound_k[k], bound_k[k]), "empirical-bernstein")
                          for k in range(len(pi))]
    return observed


def _categorical_group(n_actions: int, group_size: int, drawn: tuple) -> dict[str, object]:
    weights, eighths = drawn
    return {"pi": probability_rows(weights), "rewards": over(eighths, 8), "group_size": group_size}


@functools.cache
def _categorical_groups_of_size(n_actions: int, group_size: int) -> st.SearchStrategy:
    return st.tuples(st.lists(st.integers(1, 6), min_size=n_actions, max_size=n_actions),
                     st.lists(st.integers(-40, 40), min_size=n_actions, max_size=n_actions)).map(
        functools.partial(_categorical_group, n_actions, group_size))


# Two to four actions and groups of two to four answers, at most 81 groups to enumerate (K = 4 with G <= 3).
_categorical_groups = st.integers(2, 4).flatmap(lambda k: st.tuples(st.just(k), st.integers(2, 4 if k < 4 else 3))
                                                ).flatmap(lambda size: _categorical_groups_of_size(*size))


@verifier(kind="property", uses=(*_ADVANTAGES, "score_function_gradient"))
@given(_categorical_groups)
def categorical_estimators_property(ctx: Context, case: dict) -> None:
    """For random exact softmax policies over K = 2 to 4 answers, rewards and G = 2 to 4, the exact expectations
    over all K^G groups of independent answers of impl's three estimators (1/G) Σ_i A_i S_i: without a baseline
    and with leave-one-out it is the gradient Σ_a π(a) R(a) (e_a - π) in the logits, computed here from one
    answer; with the group mean it is (G-1)/G times that gradient, coordinate by coordinate."""
    pi, reward_a, group_size = case["pi"], case["rewards"], case["group_size"]
    scores_a = softmax_scores(pi)
    gradient = (pi * reward_a) @ scores_a
    groups = np.array(list(itertools.product(range(len(pi)), repeat=group_size)))
    probability = np.prod(pi[groups], axis=1)
    reach_bandit(len(pi), group=groups.shape[1], data="current", tokens=1)
    expected = {"no_baseline": list(gradient), "leave_one_out": list(gradient),
                "group_mean": list(Fraction(group_size - 1, group_size) * gradient)}
    for name, values in _group_estimates(ctx, reward_a[groups], scores_a[groups]).items():
        assert list(probability @ values) == expected[name], (name, list(probability @ values), expected[name])


_exact_reward = st.fractions(min_value=-10, max_value=10, max_denominator=64)
_float_reward = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
_group_sizes = st.integers(min_value=2, max_value=16)
_exact_groups = _group_sizes.flatmap(lambda g: st.lists(_exact_reward, min_size=g, max_size=g))
_float_groups = _group_sizes.flatmap(lambda g: st.lists(_float_reward, min_size=g, max_size=g))
_eps = st.floats(min_value=1e-12, max_value=1.0)


@verifier(kind="property", uses=("group_centered_advantages",))
@given(st.tuples(_exact_groups, _float_groups))
def centered_sum_zero_property(ctx: Context, groups: tuple[list[Fraction], list[float]]) -> None:
    """impl's group-centred advantages are R_i - (1/G) Σ_j R_j on exact rewards and sum to exactly zero
    there, and sum to zero up to rounding on floats: the rounding of the mean scales with the rewards'
    size, not their spread (a group of equal large rewards centres to values of its mean's rounding),
    so G subtractions and a G-term sum of values of at most max |R|."""
    exact, floats = groups
    reach(group=[len(exact), len(floats)])
    advantages = list(ctx.impl.group_centered_advantages(np.array(exact, dtype=object)))
    assert advantages == [r - sum(exact) / len(exact) for r in exact], (exact, advantages)
    assert sum(advantages) == 0, exact
    centered = ctx.impl.group_centered_advantages(np.array(floats))
    largest = max(abs(r) for r in floats)
    assert_close(centered.sum(), 0.0, rounding_bound(4 * len(floats), len(floats) * largest), "the centred sum")


_constant_groups = st.tuples(st.integers(min_value=1, max_value=16), _float_reward, _exact_reward, _eps)


@verifier(kind="property", uses=(*_ADVANTAGES, "group_normalized_advantages"))
@given(_constant_groups)
def equal_rewards_property(ctx: Context, case: tuple[int, float, Fraction, float]) -> None:
    """A group whose rewards are all equal gets zero advantages, never NaN, from every group baseline of
    impl (the std-normalised one with any eps > 0): exactly zero for exact rewards, and for float rewards
    zero up to the rounding of the group's mean (the usual ``r - r.mean()`` leaves ~1e-17 of it), which
    the std normalisation divides by at most eps. G = 1 is included where the baseline is defined
    (leave-one-out needs G >= 2)."""
    size, value, exact_value, eps = case
    rewards = np.full(size, value)
    reach(group=len(rewards))
    mean_rounding = rounding_bound(2 * size, abs(value))
    floats = [("group_centered_advantages", ctx.impl.group_centered_advantages(rewards), mean_rounding),
              ("group_normalized_advantages", ctx.impl.group_normalized_advantages(rewards, eps),
               mean_rounding / eps)]
    exact = [("group_centered_advantages", ctx.impl.group_centered_advantages(np.full(size, exact_value,
                                                                                     dtype=object)))]
    if size >= 2:
        floats.append(("leave_one_out_advantages", ctx.impl.leave_one_out_advantages(rewards), mean_rounding))
        exact.append(("leave_one_out_advantages",
                      ctx.impl.leave_one_out_advantages(np.full(size, exact_value, dtype=object))))
    for name, values, bound in floats:
        assert_close(values, 0.0, bound, f"{name} of {size} rewards equal to {value!r} (eps {eps!r})")
    for name, values in exact:
        assert all(v == 0 for v in values), f"{name} of {size} rewards equal to {exact_value}: {list(values)}"


@verifier(kind="property", uses=("group_normalized_advantages",))
@given(st.tuples(_float_groups, _eps))
def normalized_advantages_property(ctx: Context, case: tuple[list[float], float]) -> None:
    """On any float group, impl's std-normalised advantages are finite, sum to zero up to rounding
    and have mean square at most 1 (the population std makes it std^2/(std + eps)^2).

    The rounding has two parts. Each |A_i| <= sqrt(G) (Σ A_i^2 <= G) carries relative rounding. And
    the centred rewards sum to the rounding of the group's mean, at most about G^2 eps max |R|,
    which the division scales by 1/(std + eps): with the exact std (from the rewards as fractions)
    less its own rounding in the denominator, a group of equal large rewards and a tiny eps may
    rightly give advantages near ±1 that do not cancel."""
    rewards, eps = case
    reach(group=len(rewards))
    advantages = ctx.impl.group_normalized_advantages(np.array(rewards), eps)
    size = len(rewards)
    assert np.all(np.isfinite(advantages)), (rewards, advantages)
    exact = [Fraction(r) for r in rewards]
    mean = sum(exact) / size
    std = math.sqrt(sum((r - mean) ** 2 for r in exact) / size)
    largest = max(abs(r) for r in rewards)
    centring = rounding_bound(4 * size, size * largest)
    denominator = max(std * (1 - 1e-12) - rounding_bound(4 * size, largest), 0.0) + eps
    relative = rounding_bound(4 * size, size**1.5)
    bound = relative + centring / denominator
    assert_close(advantages.sum(), 0.0, bound, "the sum of the std-normalised advantages")
    assert (advantages**2).mean() <= 1 + relative, (rewards, advantages)


# ----------------------------------------------------- 4.2.4-4.2.5: answers of several tokens, and the parameterisation


def _rloo_batch(vocabulary: int, group_size: int, drawn: list) -> dict[str, object]:
    """Answers of one to three tokens, each token drawn from its own exact softmax over the vocabulary, with the
    score of the token, e_y - π (the verifier's own), and a reward per answer."""
    scores = [[softmax_score(probability_rows(weights), token) for weights, token in tokens] for tokens, _ in drawn]
    return {"vocabulary": vocabulary, "group_size": group_size, "scores": scores,
            "rewards": [Fraction(eighths, 8) for _, eighths in drawn]}


@functools.cache
def _rloo_batches_of_size(vocabulary: int, group_size: int, prompts: int) -> st.SearchStrategy:
    token = st.tuples(st.lists(st.integers(1, 4), min_size=vocabulary, max_size=vocabulary),
                      st.integers(0, vocabulary - 1))
    answer = st.tuples(st.lists(token, min_size=1, max_size=3), st.integers(-40, 40))
    answers = group_size * prompts
    return st.lists(answer, min_size=answers, max_size=answers).map(
        functools.partial(_rloo_batch, vocabulary, group_size))


# A vocabulary of two or three tokens, groups of two to four answers, one or two prompts.
_rloo_batches = st.tuples(st.integers(2, 3), st.integers(2, 4), st.integers(1, 2)).flatmap(
    lambda size: _rloo_batches_of_size(*size))


@verifier(kind="property", uses=("rloo_advantages", "reinforce_gradient"))
@given(_rloo_batches)
def rloo_answer_level_property(ctx: Context, batch: dict) -> None:
    """On random batches of answers (one to three tokens each, with exact token scores) in contiguous groups of G
    per prompt, impl's RLOO advantages, each weighting every token of its answer, and impl's REINFORCE estimate
    over those token sequences give, per prompt, (1/G) Σ_i (R_i - (1/(G-1)) Σ_{j≠i} R_j) Σ_t ∇log π(y_it),
    computed here from the definition."""
    vocabulary, group_size, scores, rewards = (batch[k] for k in ("vocabulary", "group_size", "scores",
                                                                  "rewards"))
    lengths = [len(tokens) for tokens in scores]
    reach(group=group_size, tokens=lengths, actions=vocabulary)
    prompts = len(rewards) // group_size
    advantages = ctx.impl.rloo_advantages(np.array(rewards, dtype=object), group_size)
    weights = np.zeros((max(lengths), prompts, group_size), dtype=object) + Fraction(0)
    token_scores = np.zeros((max(lengths), prompts, group_size, vocabulary), dtype=object) + Fraction(0)
    for i, tokens in enumerate(scores):
        prompt, answer = divmod(i, group_size)
        for t, score in enumerate(tokens):
            weights[t, prompt, answer] = advantages[i]
            token_scores[t, prompt, answer] = score
    observed = ctx.impl.reinforce_gradient(weights, token_scores)
    for prompt in range(prompts):
        group = range(prompt * group_size, (prompt + 1) * group_size)
        expected = sum((rewards[i] - sum(rewards[j] for j in group if j != i) / (group_size - 1))
                       * sum(scores[i], np.zeros(vocabulary, dtype=object)) for i in group) / group_size
        assert list(observed[prompt]) == list(expected), (prompt, list(observed[prompt]), list(expected))


class ScaledGroups(NoParams):
    """A softmax policy over K answers (exact), a reward per answer, the group size, and the per-logit
    scales c of a second parameterisation π = softmax(c ⊙ θ)."""

    pi: PositiveFractions = Field(min_length=2, max_length=4, description="π per answer, exact fractions summing to 1")
    rewards: list[str] = Field(min_length=2, max_length=4, description="reward per answer, exact")
    group_size: int = Field(ge=2, le=4, description="answers per group, G")
    logit_scales: list[int] = Field(min_length=2, max_length=4, description="c, one positive integer per logit")

    @model_validator(mode="after")
    def _consistent(self) -> ScaledGroups:
        if not len(self.pi) == len(self.rewards) == len(self.logit_scales) or min(self.logit_scales) <= 0:
            raise ValueError("one reward and one positive scale per answer")
        return self


@verifier(kind=("exact", "counterexample"),
          params=ScaledGroups,
          uses=("group_centered_advantages", "leave_one_out_advantages", "score_function_gradient"))
def group_variances_by_parameterisation_exact(ctx: Context) -> dict[str, object]:
    """Exact total variances E||ĝ - E ĝ||² of the three group estimators (1/G) Σ_i A_i S_i over all K^G groups
    of independent answers, in two parameterisations of the same policy.

    Logits: S_i = e_{y_i} - π. Scaled logits θ with π = softmax(c ⊙ θ): the chain rule multiplies
    coordinate k of the score by c_k. The advantages (none, group mean, leave-one-out) and the
    estimates go through impl; the scores are written here. Reported per parameterisation: the total
    variance without a baseline minus that of leave-one-out, and minus that of the group mean.
    """
    params = ctx.params
    pi, rewards = as_fractions(params.pi), as_fractions(params.rewards)
    categories = len(pi)
    groups = np.array(list(itertools.product(range(categories), repeat=params.group_size)))
    probability = np.prod(pi[groups], axis=1)
    # Every group of independent one-action answers, weighted by the policy whose score is taken; the
    # estimators are handed sampled rewards and group baselines.
    reach_bandit(categories, group=groups.shape[1], data="current", tokens=1, advantages="estimated")
    group_rewards = rewards[groups]
    advantages = {"no_baseline": group_rewards,
                  "group_mean": ctx.impl.group_centered_advantages(group_rewards),
                  "leave_one_out": ctx.impl.leave_one_out_advantages(group_rewards)}
    logit_scores = softmax_scores(pi)
    observed: dict[str, object] = {"total_probability": probability.sum()}
    for name, scales in (("logits", [1] * categories), ("scaled_logits", params.logit_scales)):
        scores = (logit_scores * np.array(scales, dtype=object))[groups]
        variance = {}
        for estimator, values in advantages.items():
            estimates = ctx.impl.score_function_gradient(values, scores)
            mean = probability @ estimates
            variance[estimator] = sum(probability @ (estimates[:, k] - mean[k]) ** 2 for k in range(categories))
        observed[f"no_baseline_minus_leave_one_out_{name}"] = variance["no_baseline"] - variance["leave_one_out"]
        observed[f"no_baseline_minus_group_mean_{name}"] = variance["no_baseline"] - variance["group_mean"]
    return observed

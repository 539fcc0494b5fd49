"""Lesson 4.2's statements that the checks of the other baseline verifiers leave open.

* 4.2.1: with b(s) = V(s) the coefficient of the score is exactly the advantage Q(s, a) - V(s);
* 4.2.2: V^π(s) = E[Q^π(s, A) | s] for the V^π and Q^π of an MDP: impl's Bellman evaluation of a policy
  against the verifier's own exact solution, and impl's V-from-Q on the exact Q^π of episodic and
  discounted MDPs;
* 4.2.4: RLOO's answer-level estimator with answers of several tokens: each answer's leave-one-out
  advantage times the sum of its tokens' scores;
* 4.2.5: the order of the estimators' variances depends on the parameterisation too: one policy,
  one reward table and one group size, with the order of two estimators' total variances
  reversed between the logits and logits scaled per coordinate.

References are the verifier's own and exact (fractions); the implementation is reached only
through ``ctx.impl``.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._exact import as_fractions, exact_mdp, probability_rows, softmax_score, softmax_scores
from verifiers._params import PositiveFractions
from verifiers._reach import reach_bandit, reach_mdp
from verifiers.baseline_state import exact_policy_evaluation, longest_episode, mdps_with_end

# --------------------------------------------------------------------------- 4.2.1

_values = st.fractions(min_value=-5, max_value=5, max_denominator=20)
_states = st.integers(min_value=1, max_value=8).flatmap(lambda k: st.tuples(
    st.lists(st.integers(min_value=1, max_value=20), min_size=k, max_size=k),
    st.lists(_values, min_size=k, max_size=k)))


@verifier(kind="property", uses=("state_value_from_q", "baseline_advantages"))
@given(_states)
def advantage_coefficient_property(ctx: Context, case: tuple[list[int], list[Fraction]]) -> None:
    """For random exact policies and action values at one state, the coefficient impl gives the score
    with the baseline b(s) = V(s) (its own V) is Q(a) - Σ_b π(b) Q(b) for every action, exactly, and it
    is positive exactly for the actions whose Q(a) exceeds that mean."""
    weights, values = case
    reach(actions=len(weights), states=1)
    pi = probability_rows(weights)
    q = np.array(values, dtype=object)
    coefficient = ctx.impl.baseline_advantages(q, ctx.impl.state_value_from_q(pi, q))
    mean = sum(p * v for p, v in zip(pi, q, strict=True))
    assert list(coefficient) == [v - mean for v in q], (list(coefficient), mean)
    assert [c > 0 for c in coefficient] == [v > mean for v in q], list(coefficient)


# --------------------------------------------------------------------------- 4.2.2


@functools.cache
def _discounted_mdps_of_size(n_states: int, n_actions: int) -> st.SearchStrategy:
    pairs = n_states * n_actions
    moves = st.lists(st.lists(st.integers(0, 3), min_size=n_states, max_size=n_states), min_size=pairs,
                     max_size=pairs)
    eighths = st.lists(st.integers(-40, 40), min_size=pairs, max_size=pairs)
    policy = st.lists(st.lists(st.integers(0, 3), min_size=n_actions, max_size=n_actions), min_size=n_states,
                      max_size=n_states)
    return st.tuples(moves, eighths, policy, st.integers(0, 15)).map(functools.partial(exact_mdp, n_states, n_actions))


# Stochastic kernels P[s, a, s2] (every row sums to 1; with one state, or rows of one weight, deterministic),
# one to three states, two to four actions, any policy (zeros allowed) and γ in [0, 15/16].
_discounted_mdps = st.tuples(st.integers(1, 3), st.integers(2, 4)).flatmap(
    lambda size: _discounted_mdps_of_size(*size))


@verifier(kind="property", uses=("policy_state_values", "policy_action_values", "state_value_from_q"))
@given(_discounted_mdps)
def bellman_value_is_expected_q_property(ctx: Context, mdp: dict) -> None:
    """On random discounted MDPs and policies, impl's Bellman evaluation of the policy is the verifier's own:
    impl's V^π is the exact solution of (I - γ P_π) V = R_π, impl's Q^π is R + γ P V^π for that solution, and
    V^π(s) = Σ_a π(a|s) Q^π(s, a) holds for impl's own pair, both as a sum here and through impl's
    ``state_value_from_q``. A Q^π shifted by a constant, or a V^π that is not the π-expectation of Q^π, fails
    one of these."""
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    values, action_values = exact_policy_evaluation(P, R, pi, gamma)
    # A stationary discounted setting: the Bellman fixed point of an unbounded horizon, with exact Q^π.
    reach_mdp(P, gamma=gamma, horizon=math.inf, advantages="exact")
    impl_values = ctx.impl.policy_state_values(P, R, pi, gamma)
    impl_action_values = ctx.impl.policy_action_values(P, R, pi, gamma)
    assert list(impl_values) == list(values), ("V^π", list(impl_values), list(values))
    assert np.array_equal(impl_action_values, action_values), ("Q^π", impl_action_values, action_values)
    assert list((pi * impl_action_values).sum(axis=-1)) == list(impl_values), ("Σ_a π Q^π", impl_values)
    from_q = ctx.impl.state_value_from_q(pi, impl_action_values)
    assert list(from_q) == list(impl_values), ("state_value_from_q(π, Q^π)", list(from_q), list(impl_values))


@verifier(kind="property", uses=("state_value_from_q",))
@given(mdps_with_end)
def value_from_exact_q_property(ctx: Context, mdp: dict) -> None:
    """On random MDPs, episodic at γ = 1 and episodic or discounted below it (:data:`mdps_with_end`), impl's
    V from Q, applied to the exact Q^π of every state, gives the exact V^π: both solved here over the
    rationals, V^π from the Bellman equation (I - γ P_π) V = R_π and Q^π = R + γ P V^π from it."""
    P, R, pi, gamma = (mdp[k] for k in ("P", "R", "pi", "gamma"))
    values, action_values = exact_policy_evaluation(P, R, pi, gamma)
    reach_mdp(P, gamma=gamma, horizon=longest_episode(P), advantages="exact")
    observed = ctx.impl.state_value_from_q(pi, action_values)
    assert list(observed) == list(values), (list(observed), list(values))


# --------------------------------------------------------------------------- 4.2.4


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


# --------------------------------------------------------------------------- 4.2.5


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

"""Module lesson 4.5: what a cut at max_tokens does to the objective.

The policy is tabular and autoregressive over {EOS, a, b}: one categorical distribution per
prefix, its logits the parameters (a softmax per prefix), every probability an exact fraction.
An answer is a string over 'ab' followed by '$' (the EOS), or, under a cut, max_tokens tokens
over 'ab' that never wrote an EOS. Everything is rational arithmetic; no implementation is
involved (the course GRU's cut answers are claim sequence-log-prob-chain-rule's).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from pydantic import Field, model_validator

from harness import Context, NoParams, verifier
from verifiers._numeric import largest_magnitude

_ALPHABET = "$ab"


class CutWitness(NoParams):
    """A tabular answer policy, the task's rewards of finished answers, and a cut at max_tokens.

    ``prefix_probabilities`` maps a prefix over 'ab' to the probabilities of [EOS, a, b]; it must
    hold every prefix of fewer than ``max_tokens`` tokens (the cut policy) and every prefix of a
    rewarded answer (the policy without the cut). ``rewards`` maps finished answers ('body$') to
    their reward; a finished answer it does not list earns 0, so the objective without the cut is
    a finite sum. ``cut_reward`` is what the task's rule gives an answer cut at max_tokens.
    """

    prefix_probabilities: dict[str, list[str]]
    rewards: dict[str, str] = Field(min_length=1)
    max_tokens: int = Field(ge=1, le=4)
    cut_reward: str

    @model_validator(mode="after")
    def _complete(self) -> CutWitness:
        for prefix, distribution in self.prefix_probabilities.items():
            if set(prefix) - set("ab") or len(distribution) != 3:
                raise ValueError(f"prefix {prefix!r}: a string over 'ab' with three probabilities [EOS, a, b]")
            values = [Fraction(q) for q in distribution]
            if min(values) <= 0 or sum(values) != 1:
                raise ValueError(f"prefix {prefix!r}: probabilities must be positive and sum to 1, not {distribution}")
        needed = {"".join(body) for n in range(self.max_tokens) for body in itertools.product("ab", repeat=n)}
        for answer in self.rewards:
            if not answer.endswith("$") or set(answer[:-1]) - set("ab"):
                raise ValueError(f"reward key {answer!r}: a finished answer, a string over 'ab' followed by '$'")
            needed |= {answer[:t] for t in range(len(answer))}
        missing = sorted(needed - set(self.prefix_probabilities), key=lambda p: (len(p), p))
        if missing:
            raise ValueError(f"prefix_probabilities lacks the prefixes {missing}")
        return self


def _prefixes(params: CutWitness) -> list[str]:
    return sorted(params.prefix_probabilities, key=lambda p: (len(p), p))


def _probability_and_score(params: CutWitness, answer: str) -> tuple[Fraction, np.ndarray]:
    """π(answer) and ∇ log π(answer) with respect to every prefix's logits (a row of 3 per prefix)."""
    prefixes = _prefixes(params)
    probability = Fraction(1)
    score = np.zeros((len(prefixes), 3), dtype=object) + Fraction(0)
    for t, symbol in enumerate(answer):
        distribution = [Fraction(q) for q in params.prefix_probabilities[answer[:t]]]
        choice = _ALPHABET.index(symbol)
        probability *= distribution[choice]
        score[prefixes.index(answer[:t])] += np.array([Fraction(int(k == choice)) - distribution[k] for k in range(3)],
                                                      dtype=object)
    return probability, score.reshape(-1)


def _objective(params: CutWitness, outcomes: dict[str, Fraction]) -> tuple[Fraction, np.ndarray]:
    """J = Σ_y π(y) R(y) over the given outcomes and ∇J = Σ_y π(y) R(y) ∇ log π(y), exactly."""
    value, gradient = Fraction(0), np.zeros(len(params.prefix_probabilities) * 3, dtype=object) + Fraction(0)
    for answer, reward in outcomes.items():
        probability, score = _probability_and_score(params, answer)
        value += probability * reward
        gradient = gradient + probability * reward * score
    return value, gradient


def _off_direction(vector: np.ndarray, direction: np.ndarray) -> Fraction:
    """The largest coordinate of the component of ``vector`` orthogonal to ``direction`` (0 iff parallel)."""
    return largest_magnitude(vector - (vector @ direction) / (direction @ direction) * direction)


@verifier("lesson_4_5.truncation_objective_exact", kind=("exact", "counterexample"), params=CutWitness)
def truncation_objective_exact(ctx: Context) -> dict[str, object]:
    """The expected reward with and without a cut at max_tokens, and with two rules for a cut answer.

    Without the cut an answer runs to its own EOS: J = Σ_y π(y) R(y) over the finished answers
    (those ``rewards`` lists; the others earn 0). With the cut the outcomes are the finished answers
    of at most max_tokens tokens (EOS included) and the cut answers, max_tokens tokens without an
    EOS, each with the probability of its written tokens and the reward the task's rule gives it:
    J_cut = Σ_{finished} π(y) R(y) + Σ_{cut} π(c) R_cut. The alternative rule scores a cut answer as
    if it had finished there (R(c + EOS)). Reported: the cut outcomes' probability and the total;
    the objectives; how far ∇J_cut is from the direction of ∇J (the largest coordinate of its
    orthogonal component, 0 for a mere rescaling); the largest gradient coordinate on the logits of
    prefixes of max_tokens tokens or more, which the cut objective never reaches; and the
    alternative rule's objective and direction against the task's rule.
    """
    params = ctx.params
    rewards = {answer: Fraction(value) for answer, value in params.rewards.items()}
    finished = ["".join(body) + "$" for n in range(params.max_tokens) for body in itertools.product("ab", repeat=n)]
    cut = ["".join(body) for body in itertools.product("ab", repeat=params.max_tokens)]
    cut_rule = {**{y: rewards.get(y, Fraction(0)) for y in finished}, **dict.fromkeys(cut, Fraction(params.cut_reward))}
    alternative = {**{y: rewards.get(y, Fraction(0)) for y in finished},
                   **{c: rewards.get(c + "$", Fraction(0)) for c in cut}}
    full_value, full_gradient = _objective(params, rewards)
    cut_value, cut_gradient = _objective(params, cut_rule)
    alternative_value, alternative_gradient = _objective(params, alternative)
    probabilities = {y: _probability_and_score(params, y)[0] for y in finished + cut}
    beyond = np.array([len(prefix) >= params.max_tokens for prefix in _prefixes(params) for _ in range(3)])
    return {
        "total_probability_with_cut": sum(probabilities.values()),
        "cut_probability": sum(probabilities[c] for c in cut),
        "full_objective": full_value,
        "cut_objective": cut_value,
        "cut_off_direction": _off_direction(cut_gradient, full_gradient),
        "cut_gradient_beyond_cut": largest_magnitude(cut_gradient[beyond], default=Fraction(0)),
        "full_gradient_beyond_cut": largest_magnitude(full_gradient[beyond], default=Fraction(0)),
        "alternative_rule_objective": alternative_value,
        "alternative_rule_off_direction": _off_direction(alternative_gradient, cut_gradient),
    }

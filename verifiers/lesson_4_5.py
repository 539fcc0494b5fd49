"""Module lesson 4.5: what a cut at max_tokens does to the objective, and where a KL penalty over several tokens goes.

The policy is tabular and autoregressive over {EOS, a, b}: one categorical distribution per
prefix, its logits the parameters (a softmax per prefix), every probability an exact fraction.
An answer is a string over 'ab' followed by '$' (the EOS), or, under a cut, max_tokens tokens
over 'ab' that never wrote an EOS. Everything is rational arithmetic; no implementation is
involved (the course GRU's cut answers are claim sequence-log-prob-chain-rule's). The KL
witness (answers of a fixed number of tokens, no EOS) adds logarithms, kept exact in sympy as
rational combinations of logarithms of primes.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import sympy as sp
from pydantic import Field, model_validator

from claims_harness import Context, NoParams, reach, verifier
from verifiers._exact import softmax_score
from verifiers._numeric import largest_magnitude
from verifiers._params import PositiveFractions

_ALPHABET = "$ab"


class CutWitness(NoParams):
    """A tabular answer policy, the task's rewards of finished answers, and a cut at max_tokens.

    ``prefix_probabilities`` maps a prefix over 'ab' to the probabilities of [EOS, a, b]; it must
    hold every prefix of fewer than ``max_tokens`` tokens (the cut policy) and every prefix of a
    rewarded answer (the policy without the cut). ``rewards`` maps finished answers ('body$') to
    their reward; a finished answer it does not list earns 0, so the objective without the cut is
    a finite sum. ``cut_reward`` is what the task's rule gives an answer cut at max_tokens.
    """

    prefix_probabilities: dict[str, PositiveFractions]
    rewards: dict[str, str] = Field(min_length=1)
    max_tokens: int = Field(ge=1, le=4)
    cut_reward: str

    @model_validator(mode="after")
    def _complete(self) -> CutWitness:
        for prefix, distribution in self.prefix_probabilities.items():
            if set(prefix) - set("ab") or len(distribution) != 3:
                raise ValueError(f"prefix {prefix!r}: a string over 'ab' with three probabilities [EOS, a, b]")
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
        score[prefixes.index(answer[:t])] += softmax_score(distribution, choice)
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


@verifier(kind=("exact", "counterexample"), params=CutWitness)
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
    # Every outcome of the one prompt, with and without the cut, weighted by the policy being differentiated.
    outcomes = [*probabilities, *rewards]
    reach(tokens=[len(y) for y in outcomes], horizon=[len(y) for y in outcomes], states=1, data="current",
          actions=sorted({len(distribution) for distribution in params.prefix_probabilities.values()}))
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


# --------------------------------------------------------------------------- 4.5.1: a KL penalty over several tokens


class PenaltyWitness(NoParams):
    """A tabular answer policy and a reference policy, answers of exactly ``length`` tokens.

    Both map every prefix (a string over the first K letters 'a', 'b', ... shorter than ``length``) to the
    probabilities of the K tokens, as exact fractions; an answer is a string of ``length`` tokens.
    """

    prefix_probabilities: dict[str, PositiveFractions]
    reference_probabilities: dict[str, PositiveFractions]
    length: int = Field(ge=2, le=3)

    @model_validator(mode="after")
    def _complete(self) -> PenaltyWitness:
        sizes = {len(row) for table in (self.prefix_probabilities, self.reference_probabilities)
                 for row in table.values()}
        if len(sizes) != 1 or min(sizes) < 2:
            raise ValueError(f"every distribution needs the same number (at least 2) of tokens, found sizes {sizes}")
        symbols = "abcdefgh"[:sizes.pop()]
        needed = {"".join(body) for n in range(self.length) for body in itertools.product(symbols, repeat=n)}
        for name, table in (("prefix_probabilities", self.prefix_probabilities),
                            ("reference_probabilities", self.reference_probabilities)):
            if set(table) != needed:
                raise ValueError(f"{name} must hold exactly the prefixes {sorted(needed, key=lambda p: (len(p), p))}")
        return self


def _log(value: sp.Expr) -> sp.Expr:
    """log of a positive rational as Σ e_p log p over its prime factors: one canonical form, so that an exact
    difference of such logarithms is zero exactly when it expands to 0 (logarithms of primes are linearly
    independent over the rationals)."""
    fraction = Fraction(int(value.p), int(value.q))
    factors = {**sp.factorint(fraction.numerator)}
    for prime, power in sp.factorint(fraction.denominator).items():
        factors[prime] = factors.get(prime, 0) - power
    return sp.Add(*(power * sp.log(sp.Integer(prime)) for prime, power in factors.items() if prime != 1))


def _canonical(expression: sp.Expr) -> sp.Expr:
    return sp.expand(expression.replace(lambda e: isinstance(e, sp.log) and e.args[0].is_Rational,
                                        lambda e: _log(e.args[0])))


class _AnswerPolicy:
    """The witness as sympy: one logit per (prefix, token), the policy a softmax per prefix, evaluated where the
    softmax equals the witness's probabilities (logits log p)."""

    def __init__(self, params: PenaltyWitness, length: int):
        rows = {p: [sp.Rational(q) for q in row] for p, row in params.prefix_probabilities.items() if len(p) < length}
        self.reference = {p: [sp.Rational(q) for q in row] for p, row in params.reference_probabilities.items()
                          if len(p) < length}
        self.prefixes = sorted(rows, key=lambda p: (len(p), p))
        self.symbols = "abcdefgh"[:len(rows[""])]
        self.logits = {p: sp.symbols(f"z_{p or 'root'}_0:{len(self.symbols)}", real=True) for p in self.prefixes}
        self.at_witness = {z: sp.log(q) for p in self.prefixes for z, q in zip(self.logits[p], rows[p], strict=True)}
        self.answers = ["".join(body) for body in itertools.product(self.symbols, repeat=length)]

    def token_probability(self, prefix: str, token: str) -> sp.Expr:
        logits = self.logits[prefix]
        return sp.exp(logits[self.symbols.index(token)]) / sp.Add(*(sp.exp(z) for z in logits))

    def probability(self, answer: str) -> sp.Expr:
        return sp.Mul(*(self.token_probability(answer[:t], token) for t, token in enumerate(answer)))

    def reference_log_ratio(self, answer: str) -> sp.Expr:
        """log π(y)/π_ref(y) at the witness, the sum of the answer's per-token log-ratios."""
        return sp.Add(*(sp.log(self.at(self.token_probability(answer[:t], token)))
                        - sp.log(self.reference[answer[:t]][self.symbols.index(token)])
                        for t, token in enumerate(answer)))

    def prefix_kl(self, prefix: str) -> sp.Expr:
        """KL(π(·|prefix) || π_ref(·|prefix)) over the vocabulary, as a function of the prefix's own logits."""
        return sp.Add(*(self.token_probability(prefix, token)
                        * (sp.log(self.token_probability(prefix, token)) - sp.log(self.reference[prefix][k]))
                        for k, token in enumerate(self.symbols)))

    def gradient(self, expression: sp.Expr) -> list[sp.Expr]:
        """∇ with respect to every logit, at the witness, in canonical form."""
        return [_canonical(self.at(sp.diff(expression, z))) for p in self.prefixes for z in self.logits[p]]

    def at(self, expression: sp.Expr) -> sp.Expr:
        return sp.simplify(expression.subs(self.at_witness))


def _kl_gradient(policy: _AnswerPolicy) -> list[sp.Expr]:
    """The verifier's own ∇ KL(π(·|x) || π_ref(·|x)) over whole answers, by differentiating
    Σ_y π(y) log(π(y)/π_ref(y)) in the logits."""
    kl = sp.Add(*(policy.probability(y) * (sp.log(policy.probability(y))
                                           - sp.Add(*(sp.log(policy.reference[y[:t]][policy.symbols.index(token)])
                                                      for t, token in enumerate(y))))
                  for y in policy.answers))
    return policy.gradient(kl)


def _in_reward_expected_gradient(policy: _AnswerPolicy) -> list[sp.Expr]:
    """The penalty in the stop-gradient reward: E_y[log(π(y)/π_ref(y)) ∇ log π(y)], the answer's summed log-ratio held
    fixed as a reward is."""
    terms = [policy.at(policy.probability(y)) * policy.reference_log_ratio(y) * np.array(
        policy.gradient(sp.log(policy.probability(y))), dtype=object) for y in policy.answers]
    return [_canonical(coordinate) for coordinate in np.sum(terms, axis=0)]


def _in_loss_expected_gradient(policy: _AnswerPolicy) -> list[sp.Expr]:
    """The penalty in the loss with its direct derivative: E_y[Σ_t ∇ KL(π(·|y_<t) || π_ref(·|y_<t))], each position's
    KL over the vocabulary differentiated at the sampled prefix, as a per-token KL term of a loss is."""
    terms = [policy.at(policy.probability(y)) * np.array(policy.gradient(policy.prefix_kl(y[:t])), dtype=object)
             for y in policy.answers for t in range(len(y))]
    return [_canonical(coordinate) for coordinate in np.sum(terms, axis=0)]


def _prefix_score_term(policy: _AnswerPolicy) -> list[sp.Expr]:
    """The score part of step 4.1.2's extended formula for the per-token penalty f(y) = Σ_t KL_t(y_<t):
    E_y[Σ_t KL_t(y_<t) ∇ log π(y_<t)], which the direct derivative leaves out."""
    terms = [policy.at(policy.probability(y)) * policy.at(policy.prefix_kl(y[:t]))
             * np.array(policy.gradient(sp.log(policy.probability(y[:t])) if t else sp.Integer(0)), dtype=object)
             for y in policy.answers for t in range(len(y))]
    return [_canonical(coordinate) for coordinate in np.sum(terms, axis=0)]


def _largest_gap(left: list[sp.Expr], right: list[sp.Expr]) -> int | float:
    """The largest |left - right| over the coordinates: 0 when every difference is exactly zero, else the largest
    difference's size, evaluated to 30 significant digits and reported as a float."""
    gaps = [_canonical(a - b) for a, b in zip(left, right, strict=True)]
    if all(gap == 0 for gap in gaps):
        return 0
    return float(max(abs(sp.N(gap, 30)) for gap in gaps))


@verifier(kind=("exact", "counterexample"), params=PenaltyWitness)
def kl_penalty_placements_exact(ctx: Context) -> dict[str, object]:
    """Where a KL penalty goes, for answers of several tokens: the placements' expected gradients against ∇ KL.

    With KL = KL(π(·|x) || π_ref(·|x)) over whole answers (the sum of the per-token log-ratios in
    expectation), the expected gradient of each placement of the penalty (weight 1) is compared with
    ∇ KL, all exact (sympy; rationals and logarithms of primes): in the stop-gradient reward, the
    answer's summed log-ratio times its score; in the loss, each position's KL over the vocabulary
    differentiated directly at the sampled prefix; both together. ``*_gap`` is the largest coordinate
    of the difference, 0 exactly or a positive number. ``loss_placement_with_prefix_score_gap`` adds
    to the loss placement the score part of step 4.1.2's extended formula, Σ_t E[KL_t ∇ log π(y_<t)];
    ``one_token_loss_placement_gap`` is the loss placement's gap for the same policy's first token
    alone (answers of one token), where no prefix comes before the penalised position.
    """
    params = ctx.params
    observed = {}
    for length, prefix in ((params.length, ""), (1, "one_token_")):
        policy = _AnswerPolicy(params, length)
        # Every answer of the prompt, weighted by the policy being differentiated: on-policy expectations.
        reach(tokens=length, horizon=length, actions=len(policy.symbols), states=1, data="current")
        true_gradient = _kl_gradient(policy)
        in_loss = _in_loss_expected_gradient(policy)
        observed[f"{prefix}loss_placement_gap"] = _largest_gap(in_loss, true_gradient)
        if prefix:
            continue
        in_reward = _in_reward_expected_gradient(policy)
        observed["reward_placement_gap"] = _largest_gap(in_reward, true_gradient)
        observed["both_placements_gap"] = _largest_gap([a + b for a, b in zip(in_reward, in_loss, strict=True)],
                                                       true_gradient)
        observed["loss_placement_with_prefix_score_gap"] = _largest_gap(
            [a + b for a, b in zip(in_loss, _prefix_score_term(policy), strict=True)], true_gradient)
    return observed

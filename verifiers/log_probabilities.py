"""Log-probabilities computed stably whatever the size of the logits, and why PPO's results depend on it
(step 4.4.5).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from claims_harness import Context, NoParams, given, reach, verifier
from claims_harness import strategies as st
from verifiers._numeric import assert_close, log_softmax, rounding_bound

# Per-row shifts of the logits: far enough apart (and large enough) that exp of an unshifted or
# batch-wide-shifted row under- or overflows (exp(x) is 0 below x ~ -745 and inf above ~ 709).
_row_offsets = st.one_of(st.sampled_from([-1000.0, -400.0, 0.0, 400.0, 1000.0]), st.floats(-1000, 1000))
_shifted_logits = st.tuples(st.integers(1, 4), st.integers(2, 8)).flatmap(lambda shape: st.tuples(
    st.arrays(np.float64, shape, elements=st.floats(min_value=-10, max_value=10)),
    st.arrays(np.float64, shape[0], elements=_row_offsets)))


@verifier(kind="property", uses=("log_softmax", "softmax"))
@given(_shifted_logits)
def stable_softmax_property(ctx: Context, example: tuple[np.ndarray, np.ndarray]) -> None:
    """impl's log_softmax and softmax of a batch of logit rows, each row shifted by its own constant c_b
    (|c_b| up to 1000), are finite and equal the verifier's log-softmax of the unshifted rows, and its exp.

    Softmax is invariant to a per-row shift, so the only difference is rounding: z + c is rounded
    once (half an ulp of |z + c|), and subtracting the row's largest logit, exponentiating, summing
    A terms and taking the log add a few roundings on numbers up to |z + c|max + log A; the bound
    is rounding_bound(4A, |z + c|max + log A). A probability is off by at most its log's error.
    """
    logits, offsets = example
    shifted = logits + offsets[:, None]
    categories = logits.shape[1]
    reach(actions=categories)
    expected = log_softmax(logits)
    bound = rounding_bound(4 * categories, float(np.abs(shifted).max()) + math.log(categories))
    log_pi = np.asarray(ctx.impl.log_softmax(shifted), dtype=float)
    pi = np.asarray(ctx.impl.softmax(shifted), dtype=float)
    assert log_pi.shape == pi.shape == logits.shape, (log_pi.shape, pi.shape, logits.shape)
    assert np.isfinite(log_pi).all() and np.isfinite(pi).all(), (log_pi, pi)
    assert_close(log_pi, expected, bound, "impl's log_softmax of the shifted rows against that of the unshifted")
    assert_close(pi, np.exp(expected), bound, "impl's softmax of the shifted rows against that of the unshifted")


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

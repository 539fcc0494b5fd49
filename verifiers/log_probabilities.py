"""Step 4.4.5: log-probabilities computed stably, whatever the size of the logits."""

from __future__ import annotations

import math

import numpy as np

from claims_harness import Context, given, reach, verifier
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

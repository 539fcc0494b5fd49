"""Results that lie about their own arithmetic reach the verifiers as NumPy's and Python's plain types,
and an implementation may not change the arrays a verifier hands it.

A verifier judges a result by computing with it: ``np.abs(advantages - expected) <= bound``. An
ndarray subclass whose subtraction returns zeros and whose comparisons return True passed
``gae-lambda-zero-is-td-error`` with a GAE that returns nothing but zeros. The implementation view
now hands the verifiers what the implementation returned without its subclass
(``harness._running.context.plain``), so the values are judged and not the type's own operators.

A verifier also computes what it expects from the arrays it passed, after the call: a GAE that
zeroed ``r_t``, ``v_t`` and ``v_tp1`` and returned zeros passed five GAE properties. Outside
experiments (whose training loops are the implementation's own), such a change is an error.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections import namedtuple
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from harness._claims.errors import ImplementationError
from harness._claims.loading import load_catalogue
from harness._running.context import ImplementationView, plain
from harness._running.runner import RunOptions, run_check

CLAIMS = Path(__file__).resolve().parent.parent / "claims"
LAMBDA_ZERO = ("gae-lambda-zero-is-td-error", "gae.lambda_zero_property")

# An array whose differences are zero and whose comparisons all hold; `agrees` is what it returns.
LIAR = '''\
import numpy as np

import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True
COMPARISONS = {"less", "less_equal", "greater", "greater_equal", "equal", "isclose"}


class Agreeable(np.ndarray):
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        result = getattr(ufunc, method)(*(np.asarray(x) for x in inputs), **kwargs)
        if ufunc.__name__ in COMPARISONS:
            return np.ones(np.shape(result), dtype=bool)
        if ufunc.__name__ in ("subtract", "absolute"):
            return np.zeros(np.shape(result)).view(Agreeable)
        return result

    def __eq__(self, other):
        return np.ones(self.shape, dtype=bool)


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    return {returns}.view(Agreeable)
'''


class LyingFloat(float):
    def __sub__(self, other):
        return 0.0

    def __le__(self, other):
        return True


class LyingFraction(Fraction):
    def __eq__(self, other):
        return True


class LyingArray(np.ndarray):
    def __eq__(self, other):
        return np.ones(self.shape, dtype=bool)


@dataclasses.dataclass(frozen=True)
class Output:
    logits: np.ndarray
    values: np.ndarray


Pair = namedtuple("Pair", "first second")


def test_plain_values_are_returned_as_the_same_objects():
    values = [np.arange(3.0), 1.5, 2, True, Fraction(1, 3), np.float64(2.0), None, "text",
              np.array([Fraction(1, 2)], dtype=object), (np.zeros(2), 1.0), [1, 2], {"a": np.ones(1)},
              Output(np.zeros(2), np.ones(2)), Pair(np.zeros(1), 3)]
    for value in values:
        assert plain(value) is value


def test_subclasses_of_arrays_numbers_and_fractions_become_their_base_types_with_the_same_values():
    array = np.arange(4.0).view(LyingArray)
    converted = plain(array)
    assert type(converted) is np.ndarray and np.shares_memory(converted, array)
    assert type(plain(LyingFloat(0.25))) is float and plain(LyingFloat(0.25)) == 0.25
    assert type(plain(LyingFraction(1, 3))) is Fraction and plain(LyingFraction(1, 3)) == Fraction(1, 3)
    exact = np.array([Fraction(1, 2), LyingFraction(2, 3)], dtype=object)
    assert [type(x) for x in plain(exact)] == [Fraction, Fraction] and list(plain(exact)) == [Fraction(1, 2),
                                                                                            Fraction(2, 3)]


def test_containers_are_converted_inside_and_keep_their_kind():
    lying = np.zeros(2).view(LyingArray)
    output = plain(Output(lying, np.ones(2)))
    assert type(output) is Output and type(output.logits) is np.ndarray
    pair = plain(Pair(lying, LyingFloat(1.0)))
    assert type(pair) is Pair and type(pair.first) is np.ndarray and type(pair.second) is float
    assert [type(x) for x in plain((lying, [LyingFloat(1.0)]))[1]] == [float]
    assert type(plain({"advantages": lying})["advantages"]) is np.ndarray


@functools.cache
def _catalogue():
    return load_catalogue(CLAIMS)


@pytest.fixture
def liar(tmp_path, monkeypatch):
    def write(returns: str) -> str:
        name = f"agreeable_{len(list(tmp_path.iterdir()))}"
        (tmp_path / f"{name}.py").write_text(LIAR.replace("{returns}", returns), encoding="utf-8")
        names.append(name)
        return name

    names: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for name in names:
        sys.modules.pop(name, None)


def _run_lambda_zero(implementation: str):
    (entry,) = [e for e in _catalogue().entries if e.id == LAMBDA_ZERO[0]]
    (index,) = [i for i, check in enumerate(entry.claim.checks) if check.verifier == LAMBDA_ZERO[1]]
    return run_check(entry, index, _catalogue().verifiers[LAMBDA_ZERO[1]], RunOptions(impl=implementation))


def test_wrong_advantages_in_an_agreeable_array_fail_the_claim(liar):
    result = _run_lambda_zero(liar("np.zeros(np.shape(r_t))"))
    assert result.status == "failed", (result.status, result.error)


def test_right_advantages_in_an_agreeable_array_pass_it(liar):
    result = _run_lambda_zero(liar("impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, "
                                   "carry=carry)"))
    assert result.status == "passed", (result.status, result.error)


ZEROES_ITS_INPUTS = '''\
import numpy as np

from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True


def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    for given in (r_t, v_t, v_tp1):
        given[...] = 0
    return np.zeros(np.shape(r_t))
'''


def test_an_implementation_that_changes_its_inputs_is_an_error_not_a_pass(tmp_path, monkeypatch):
    name = "zeroes_its_inputs"
    (tmp_path / f"{name}.py").write_text(ZEROES_ITS_INPUTS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        result = _run_lambda_zero(name)
    finally:
        sys.modules.pop(name, None)
    assert result.status == "error", (result.status, result.observed)
    assert f"implementation '{name}': gae_advantages changed its argument 'r_t' in place" in result.error


def _scale_in_place(x, params):
    params["w"] *= 2
    x *= 2
    return x


@pytest.mark.parametrize("guarded", [True, False])
def test_a_guarded_view_names_the_argument_changed_inside_a_container_and_an_unguarded_one_allows_it(guarded):
    module = type(sys)("in_place")
    module.scale = _scale_in_place
    view = ImplementationView(module, ("scale",), "tests.deceptive", "deceptive", inputs_guarded=guarded)
    x, params = np.ones(2), {"w": np.ones(3)}
    if guarded:
        with pytest.raises(ImplementationError, match="scale changed its argument 'x' in place"):
            view.scale(x, params)
        with pytest.raises(ImplementationError, match="scale changed its argument 'params' in place"):
            view.scale(np.ones(0), params)
    else:
        assert view.scale(x, params).tolist() == [2.0, 2.0] and params["w"].tolist() == [2.0] * 3

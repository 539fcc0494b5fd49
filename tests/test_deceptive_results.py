"""Results that lie about their own arithmetic reach the verifiers as NumPy's and Python's plain types,
and an implementation may not change the arrays a verifier hands it.

A verifier judges a result by computing with it: ``np.abs(advantages - expected) <= bound``. An
ndarray subclass whose subtraction returns zeros and whose comparisons return True passed
``gae-lambda-zero-is-td-error`` with a GAE that returns nothing but zeros. The implementation view
now hands the verifiers what the implementation returned without its subclass
(``claims_harness._claims.plain.plain``), so the values are judged and not the type's own operators.

A verifier also computes what it expects from the arrays it passed, after the call: a GAE that
zeroed ``r_t``, ``v_t`` and ``v_tp1`` and returned zeros passed five GAE properties. Outside
experiments (whose training loops are the implementation's own), such a change is an error.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections import namedtuple
from fractions import Fraction

import numpy as np
import pytest
from conftest import course_catalogue, course_entry, view_of

from claims_harness import ImplementationError, RunOptions, lookup, run_check
from claims_harness.engine import plain

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


@pytest.fixture
def liar(module):
    count = iter(range(100))
    return lambda returns: module(f"agreeable_{next(count)}", LIAR.replace("{returns}", returns))


def _run_lambda_zero(implementation: str):
    entry = course_entry(LAMBDA_ZERO[0])
    (index,) = [i for i, check in enumerate(entry.claim.checks) if check.verifier == LAMBDA_ZERO[1]]
    return run_check(entry, index, course_catalogue().verifiers[LAMBDA_ZERO[1]], RunOptions(impl=implementation))


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


def test_an_implementation_that_changes_its_inputs_is_an_error_not_a_pass(module):
    name = module("zeroes_its_inputs", ZEROES_ITS_INPUTS)
    result = _run_lambda_zero(name)
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
    view = view_of(module, ("scale",), "tests.deceptive", "deceptive", inputs_guarded=guarded)
    x, params = np.ones(2), {"w": np.ones(3)}
    if guarded:
        with pytest.raises(ImplementationError, match="scale changed its argument 'x' in place"):
            view.scale(x, params)
        with pytest.raises(ImplementationError, match="scale changed its argument 'params' in place"):
            view.scale(np.ones(0), params)
    else:
        # Allowed, and confined: the arguments crossed as data, so the change stays in the implementation's process.
        assert view.scale(x, params).tolist() == [2.0, 2.0] and params["w"].tolist() == [1.0] * 3


class AlwaysEqual:
    """Not a number of any kind, but it answers every comparison and difference as a right result would."""

    def __eq__(self, other):
        return True

    def __le__(self, other):
        return True

    def __sub__(self, other):
        return 0.0

    __rsub__ = __sub__

    def __abs__(self):
        return 0.0

    def __float__(self):
        return 0.0


class Environment:
    """An object a contract function may return (a CartPole environment, a figure): no arithmetic of its own."""

    def step(self, action):
        return action


def test_a_value_that_only_pretends_to_be_a_number_or_an_array_of_numbers_is_refused():
    from claims_harness.errors import NotPlainData

    for pretender in (AlwaysEqual(), [1.0, AlwaysEqual()], {"advantages": AlwaysEqual()},
                      np.array([AlwaysEqual(), AlwaysEqual()], dtype=object), np.array(["a", "b"], dtype=object)):
        with pytest.raises(NotPlainData):
            plain(pretender)
    environment = Environment()
    assert plain(environment) is environment
    for builtin in ({1, 2}, frozenset({0.5}), range(3)):  # Python's own containers: as they are
        assert plain(builtin) is builtin
    assert type(plain({LyingFloat(1.0)}).pop()) is float
    entries = {"a": np.float64(1.0), "b": LyingFloat(2.0)}
    assert [plain(entries.keys()), plain(entries.values()), plain(entries.items())] == [
        ["a", "b"], [1.0, 2.0], [("a", 1.0), ("b", 2.0)]]  # a dict's views: lists of its plain entries
    assert type(plain(entries.values())[1]) is float
    exact = np.array([Fraction(1, 2), 3, np.float64(0.5)], dtype=object)
    assert plain(exact) is exact


def test_a_pretending_result_is_an_error_row_naming_the_function_and_the_type(module):
    result = _run_lambda_zero(module("always_equal", PRETENDER))
    assert result.status == "error", (result.status, result.observed)
    assert "gae_advantages returned an object array holding a always_equal.AlwaysEqual, which defines __eq__, " \
           "__le__" in result.error and "not plain data" in result.error, result.error[-2000:]


PRETENDER = f'''\
import numpy as np

from impl import *  # noqa: F403
from impl import __all__  # noqa: F401

__claims_reference_fallback__ = True


{inspect.getsource(AlwaysEqual)}

def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    return np.array([AlwaysEqual() for _ in np.ravel(r_t)], dtype=object).reshape(np.shape(r_t))
'''


@dataclasses.dataclass(frozen=True)
class Batch:
    advantages: np.ndarray
    extras: dict


def _rebinds_entries(batch, params):
    params["w"] = np.zeros(3)  # a new array under the same key: the old one is untouched
    object.__setattr__(batch, "advantages", np.zeros(2))  # a frozen dataclass's field, rebound
    return 0.0


def _rebinds_a_nested_entry(batch, params):
    batch.extras["scale"] = 2.0
    return 0.0


@pytest.mark.parametrize("function", [_rebinds_entries, _rebinds_a_nested_entry])
def test_rebinding_an_entry_or_a_field_of_an_argument_is_changing_it(function):
    module = type(sys)("rebinding")
    module.call = function
    view = view_of(module, ("call",), "tests.deceptive", "deceptive", inputs_guarded=True)
    with pytest.raises(ImplementationError, match="call changed its argument 'batch' in place|changed its argument "
                                                  "'params' in place"):
        view.call(Batch(np.ones(2), {"scale": 1.0}), {"w": np.ones(3)})


NAN_LAST = '''\
import numpy as np

from impl import *  # noqa: F403
from impl import __all__  # noqa: F401
import impl

__claims_reference_fallback__ = True


def bellman_optimality_operator(P, R, v, gamma):
    result = np.array(impl.bellman_optimality_operator(P, R, v, gamma), dtype=object)
    result[-1] = float("nan")
    return result
'''


def test_a_nan_anywhere_in_a_result_fails_a_check_that_takes_its_largest_entry(module):
    """Python's max keeps a NaN only when it comes first; the verifiers' reductions keep it wherever it is."""
    name = module("nan_in_its_last_entry", NAN_LAST)
    entry = course_entry("bellman-operator-contracts")
    (index,) = [i for i, check in enumerate(entry.claim.checks) if check.verifier == "tabular.contraction_property"]
    result = run_check(entry, index, lookup("tabular.contraction_property"), RunOptions(impl=name))
    assert result.status == "failed", (result.status, result.error)

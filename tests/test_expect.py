"""Unit tests of claims_harness._claims.expect: what a claim's expected value means, and the comparison."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy

from claims_harness.engine import FloatLiteral, compare, parse_expectation
from claims_harness.errors import ExpectationError
from claims_harness.stats import MeanEstimate


def verdicts(raw, observed) -> list[bool]:
    return [comparison.passed for comparison in compare("x", parse_expectation(raw, ("x",)), observed)]


def passes(raw, observed) -> bool:
    results = verdicts(raw, observed)
    assert results
    return all(results)


def estimate(mean: float, low: float, high: float) -> MeanEstimate:
    return MeanEstimate(mean=mean, low=low, high=high, n=10_000, alpha=1e-6, method="hoeffding",
                        support=(-1.0, 1.0), beta=1e-3, detectable_deviation=0.02)


# --------------------------------------------------------------------------- bare numbers


@pytest.mark.parametrize(("raw", "tolerance"), [
    (0.273, Fraction(5, 10_000)),
    (20, Fraction(1, 2)),
    (FloatLiteral(0.273, "0.2730"), Fraction(5, 100_000)),
    (FloatLiteral(1e-6, "1e-6"), Fraction(5, 10_000_000)),
    (0.238875, Fraction(5, 10_000_000)),
])
def test_bare_number_agrees_within_half_a_unit_of_its_last_printed_digit(raw, tolerance):
    (condition,) = parse_expectation(raw).conditions
    assert condition.operator == "approx"
    assert condition.tolerance == tolerance


def test_bare_number_tolerance_is_inclusive_and_exact():
    # Boundaries in exact arithmetic: the float 0.2735 is a little above 2735/10000.
    assert passes(0.273, Fraction("0.2735"))
    assert passes(0.273, Fraction("0.2725"))
    assert not passes(0.273, Fraction("0.27350001"))
    assert not passes(0.273, 0.2736)
    assert passes(0.273, 0.2731)
    assert not passes(0.273, 0.27)
    assert not passes(FloatLiteral(0.273, "0.2730"), 0.27306)
    assert passes(FloatLiteral(0.273, "0.2730"), 0.27304)
    assert passes(20, 20.5)
    assert not passes(20, 20.51)
    assert passes(20, 19.5)
    assert passes(0.273, Fraction(273, 1000))
    assert passes(0.273, np.float64(0.273))
    assert passes(20, np.int64(20))


def test_non_numbers_do_not_agree_with_a_number():
    assert not passes(0.273, "0.273")
    assert not passes(1, True)
    assert not passes(0.273, float("nan"))
    (comparison,) = compare("x", parse_expectation(0.273), None)
    assert "is not a number" in comparison.rule


# --------------------------------------------------------------------------- exact


def test_exact_fraction():
    assert passes({"exact": "7/8"}, Fraction(7, 8))
    assert passes({"exact": "7/8"}, 0.875)
    assert not passes({"exact": "7/8"}, 0.875000001)
    assert passes({"exact": 0}, 0)
    assert not passes({"exact": "1/10"}, 0.1)  # the float 0.1 is not exactly one tenth


def test_exact_accepts_sympy_numbers():
    assert passes({"exact": "7/8"}, sympy.Rational(7, 8))
    assert passes({"exact": 0}, sympy.Integer(0))
    assert not passes({"exact": 0}, sympy.Rational(1, 10**30))


def test_sympy_expression_that_is_not_a_number_fails():
    (comparison,) = compare("residual", parse_expectation({"exact": 0}), sympy.Symbol("G") - 1)
    assert not comparison.passed
    assert "is not a number" in comparison.rule


def test_sympy_irrational_is_compared_by_value():
    assert passes(1.414, sympy.sqrt(2))
    assert not passes(1.415, sympy.sqrt(2))
    assert not passes({"exact": 1.4142135623730951}, sympy.sqrt(2))


def test_exact_rejects_text_that_is_not_a_number():
    with pytest.raises(ExpectationError, match="is not an exact number"):
        parse_expectation({"exact": "seven eighths"}, ("ratio",))


# --------------------------------------------------------------------------- inequalities on plain numbers


def test_differs_from_needs_more_than_the_printed_precision():
    assert passes({"differs_from": 0.273}, 0.238875)
    assert not passes({"differs_from": 0.273}, 0.273)
    assert not passes({"differs_from": 0.273}, Fraction("0.2735"))  # within half a unit of the last digit
    assert not passes({"differs_from": 0.273}, 0.2732)
    assert passes({"differs_from": 0.273}, 0.2736)
    assert passes({"differs_from": 0}, 0.6)
    assert not passes({"differs_from": 0}, 0.4)  # an integer is stated to within 0.5


def test_ordering_operators():
    assert passes({"less_than": 0.273}, 0.27)
    assert not passes({"less_than": 0.273}, Fraction("0.273"))
    assert passes({"at_most": 0.273}, Fraction("0.273"))
    assert not passes({"at_most": 0.273}, 0.2731)
    assert passes({"greater_than": 0}, 1e-12)
    assert not passes({"greater_than": 0}, 0)
    assert passes({"at_least": 0}, 0)
    assert not passes({"at_least": 0}, -1e-12)


def test_float_equal_to_the_literal_satisfies_at_most():
    assert passes({"at_most": 0.1}, 0.1)


def test_several_conditions_must_all_hold():
    assert verdicts({"greater_than": 0, "less_than": 1}, 0.5) == [True, True]
    assert verdicts({"greater_than": 0, "less_than": 1}, 1.5) == [True, False]


# --------------------------------------------------------------------------- Monte Carlo estimates


def test_approx_against_an_estimate_holds_unless_the_interval_excludes_it():
    inside = estimate(0.27, 0.26, 0.28)
    assert passes(0.273, inside)
    assert passes(0.2601, inside)  # far outside 0.273 +- 0.0005, but not refuted by the evidence
    assert not passes(0.29, inside)
    assert not passes(0.25, inside)


def test_differs_from_an_estimate_requires_the_interval_to_exclude_it():
    interval = estimate(0.239, 0.229, 0.249)
    assert passes({"differs_from": 0.273}, interval)
    assert not passes({"differs_from": 0.24}, interval)
    assert not passes({"differs_from": 0.249}, interval)  # on the boundary: not excluded


def test_inequalities_against_an_estimate_need_the_whole_interval():
    interval = estimate(0.239, 0.229, 0.249)
    assert passes({"less_than": 0.25}, interval)
    assert not passes({"less_than": 0.24}, interval)  # the mean is below, the interval is not
    assert passes({"greater_than": 0.2}, interval)
    assert not passes({"greater_than": 0.23}, interval)
    assert passes({"at_most": 0.249}, interval)
    assert passes({"at_least": 0.229}, interval)


def test_estimate_comparison_reports_the_interval():
    (comparison,) = compare("group_mean", parse_expectation(0.273), estimate(0.239, 0.229, 0.249))
    assert not comparison.passed
    assert "interval [0.229, 0.249]" in comparison.rule
    assert comparison.observed["mean"] == 0.239


# --------------------------------------------------------------------------- lists, booleans, strings


def test_lists_are_compared_element_by_element():
    expectation = [{"exact": 1}, 0.5]
    assert passes(expectation, [1, 0.5])
    assert passes(expectation, (sympy.Integer(1), 0.5004))
    assert passes(expectation, np.array([1.0, 0.5]))
    assert verdicts(expectation, [1, 0.6]) == [True, False]
    keys = [c.key for c in compare("points", parse_expectation(expectation), [1, 0.5])]
    assert keys == ["points[0]", "points[1]"]


@pytest.mark.parametrize("observed", [[1], [1, 0.5, 0], 1, "1, 0.5"])
def test_list_length_or_shape_mismatch_fails(observed):
    (comparison,) = compare("points", parse_expectation([{"exact": 1}, 0.5]), observed)
    assert not comparison.passed
    assert "expected 2 elements" in comparison.rule


def test_empty_expected_list_is_an_error():
    with pytest.raises(ExpectationError, match="must not be empty"):
        parse_expectation([])


def test_bool_equality_is_strict():
    assert passes(True, True)
    assert passes(True, np.bool_(True))
    assert not passes(True, 1)
    assert not passes(False, 0)
    assert not passes(True, "true")
    assert not passes(False, True)


def test_string_equality():
    assert passes("hoeffding", "hoeffding")
    assert not passes("hoeffding", "Hoeffding")


# --------------------------------------------------------------------------- malformed expectations


def test_unknown_operator_suggests_the_closest():
    with pytest.raises(ExpectationError, match=r"unknown operator 'aprox'; did you mean 'approx'\?") as raised:
        parse_expectation({"aprox": 0.273}, ("gradient",))
    assert raised.value.path == ("gradient", "aprox")


@pytest.mark.parametrize("raw", [float("nan"), float("inf"), {"less_than": float("-inf")}, {"approx": True},
                                 {}, None])
def test_unreadable_expectations_are_errors(raw):
    with pytest.raises(ExpectationError):
        parse_expectation(raw, ("x",))


def test_description_shows_the_rule_as_the_text_states_it():
    assert parse_expectation(0.273).describe() == "0.273 ± 0.0005"
    assert parse_expectation({"exact": "7/8"}).describe() == "exactly 7/8"
    assert parse_expectation({"approx": 0.238875, "differs_from": 0.273}).describe() == (
        "0.238875 ± 5e-07 and differs from 0.273")
    assert parse_expectation({"exact": "7/8"}).as_written() == {"exact": "7/8"}
    assert parse_expectation(FloatLiteral(0.273, "0.2730")).as_written() == 0.273


def test_zero_dimensional_array_is_a_number():
    assert passes(0.273, np.array(0.273))

"""Judging: what a claim expects (parse), the comparison with what a verifier observed (compare), and how
sharply the comparison tells the text's number from its printed neighbours (perturb).

The numbers the course text states live in the claim file; this module decides, for each
one, what "agrees" means:

* a bare number (``0.273``) agrees within half a unit of its last printed digit, the text's
  own precision; the printed digits are read from the YAML literal, so ``0.2730`` is finer
  than ``0.273``;
* ``{exact: "7/8"}`` asks for exact equality (integers, fractions, sympy numbers);
* ``{differs_from: x}``, ``{less_than: x}``, ``{greater_than: x}``, ``{at_least: x}``,
  ``{at_most: x}`` state an inequality; several conditions in one mapping must all hold;
* ``true``/``false`` and strings must be equal; a list is compared element by element.

Against a Monte Carlo :class:`~claims_harness.stats.MeanEstimate` the rules read statistically:
``approx x`` holds unless the confidence interval excludes ``x`` (refuted only by evidence),
while every inequality needs the whole interval on the claimed side (it must be shown).

Sharpness asks whether a check would notice the text's number one printed digit off. Each numeric
value expected is moved by one unit of its last printed digit, down and up, one at a time (a
fraction ``p/q`` to ``(p ± 1)/q``), and compared anew with the observation already made: no
verifier runs again, so every check carries this evidence. A neighbour the comparison still
passes is a *survivor*, explained in the claim file (``insensitive: {key: reason}``: a Monte Carlo
interval wider than the printed digit, a value the text rounds) or a hole in the check. An
inequality is a bound, not a value (it says which side, not where): counted apart, never a
survivor; booleans and strings have no neighbours. Mutation-testing tools (mutmut) mutate code,
not a claim file's numbers, which is why this is written here.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from numbers import Rational
from typing import Any

import numpy as np

from claims_harness._claims.formats import format_interval
from claims_harness._claims.plain import Rounded, sympy_rational, to_jsonable
from claims_harness.errors import ExpectationError, did_you_mean
from claims_harness.stats import MeanEstimate

_LARGEST_EXPONENT = 400
_LARGEST_FLOAT = Fraction(sys.float_info.max)
INEQUALITIES = ("differs_from", "less_than", "greater_than", "at_least", "at_most")
OPERATORS = ("approx", "exact", *INEQUALITIES)
KILLED, SURVIVED, EXPLAINED = "killed", "survived", "explained"  # a perturbation's outcomes


class FloatLiteral(float):
    """A float that remembers how it was written, so its printed precision is known."""

    text: str

    def __new__(cls, value: float, text: str) -> FloatLiteral:
        literal = super().__new__(cls, value)
        literal.text = text
        return literal

    def __getnewargs__(self) -> tuple[float, str]:  # a claim crosses to the worker that runs its check
        return float(self), self.text


@dataclass(frozen=True)
class Condition:
    """One thing an observed value must satisfy: ``operator`` applied to ``value``."""

    operator: str
    value: Fraction | bool | str
    text: str
    tolerance: Fraction | None = None

    def describe(self) -> str:
        if self.operator == "approx":
            return f"{self.text} ± {_show(self.tolerance)}"
        if self.operator in ("exact", "equals"):
            return f"exactly {self.text}"
        return f"{self.operator.replace('_', ' ')} {self.text}"


@dataclass(frozen=True)
class Expectation:
    """All conditions on one observed value, or one expectation per element of a list."""

    conditions: tuple[Condition, ...] = ()
    elements: tuple[Expectation, ...] | None = None

    def describe(self) -> str:
        if self.elements is not None:
            return "[" + ", ".join(e.describe() for e in self.elements) + "]"
        return " and ".join(c.describe() for c in self.conditions)

    def as_written(self) -> Any:
        """The expectation as the claim file states it, for the report."""
        if self.elements is not None:
            return [e.as_written() for e in self.elements]
        if len(self.conditions) == 1 and self.conditions[0].operator in ("approx", "equals"):
            condition = self.conditions[0]
            return condition.value if condition.operator == "equals" else _written_number(condition.text)
        return {c.operator: _written_number(c.text) for c in self.conditions}

    def statistical_conditions(self) -> int:
        """How many conditions will be decided by an interval if the observation is one."""
        if self.elements is not None:
            return sum(e.statistical_conditions() for e in self.elements)
        return len(self.conditions)


@dataclass(frozen=True)
class Comparison:
    """The verdict on one expected value."""

    key: str
    expected: str
    observed: Any
    passed: bool
    rule: str


def parse_expectation(raw: Any, path: tuple[str | int, ...] = ()) -> Expectation:
    """Read one ``expect`` value as written in a claim file."""
    if isinstance(raw, bool | str):
        return Expectation((Condition("equals", raw, repr(raw) if isinstance(raw, str) else str(raw).lower()),))
    if isinstance(raw, int | float):
        return Expectation((_approx(raw, path),))
    if isinstance(raw, list):
        if not raw:
            raise ExpectationError("an expected list must not be empty", path)
        return Expectation(elements=tuple(parse_expectation(v, (*path, i)) for i, v in enumerate(raw)))
    if isinstance(raw, dict):
        if not raw:
            raise ExpectationError(f"an empty mapping states nothing; use one of {', '.join(OPERATORS)}", path)
        conditions = []
        for operator, value in raw.items():
            if operator not in OPERATORS:
                raise ExpectationError(
                    f"unknown operator '{operator}'{did_you_mean(str(operator), OPERATORS)}; "
                    f"valid operators: {', '.join(OPERATORS)}",
                    (*path, str(operator)),
                )
            where = (*path, operator)
            if operator == "exact":
                conditions.append(Condition("exact", _exact_number(value, where), _text(value)))
            elif operator == "approx":
                conditions.append(_approx(value, where))
            else:
                conditions.append(Condition(operator, _number(value, where), _text(value)))
        return Expectation(tuple(conditions))
    raise ExpectationError(
        f"expected a number, true/false, a string, a list or a mapping of operators, got {raw!r}", path
    )


def compare(key: str, expectation: Expectation, observed: Any) -> list[Comparison]:
    """Compare one observed value with its expectation; one :class:`Comparison` per condition."""
    if expectation.elements is not None:
        values = as_list(observed)
        if values is None or len(values) != len(expectation.elements):
            size = "not a list" if values is None else f"{len(values)} elements"
            return [Comparison(key, expectation.describe(), to_jsonable(observed), False,
                               f"expected {len(expectation.elements)} elements, observed {size}")]
        results = []
        for i, (element, value) in enumerate(zip(expectation.elements, values, strict=True)):
            results.extend(compare(f"{key}[{i}]", element, value))
        return results
    return [compare_condition(key, condition, observed) for condition in expectation.conditions]


def compare_condition(key: str, condition: Condition, observed: Any) -> Comparison:
    expected = condition.describe()
    shown = to_jsonable(observed)
    if condition.operator == "equals":
        value = observed.item() if isinstance(observed, np.generic) or _is_scalar_array(observed) else observed
        return Comparison(key, expected, shown, value == condition.value and type(value) is type(condition.value),
                          "equal")
    if isinstance(observed, MeanEstimate):
        return _compare_estimate(key, condition, observed)
    if isinstance(observed, Rounded):
        return _compare_rounded(key, condition, observed)
    number = _observed_number(observed)
    if number is None:
        return Comparison(key, expected, shown, False, f"observed value {observed!r} is not a number")
    target = condition.value
    assert isinstance(target, Fraction)
    if _is_float(observed) and condition.operator in INEQUALITIES:
        # A float observation is compared with the float nearest the written number: 0.1 is at most 0.1.
        target = Fraction(float(target))
    if condition.operator == "exact":
        return Comparison(key, expected, shown, number == target, "exact equality")
    if condition.operator == "approx":
        assert condition.tolerance is not None
        return Comparison(key, expected, shown, abs(number - target) <= condition.tolerance,
                          f"|observed - {condition.text}| <= {_show(condition.tolerance)} "
                          "(half a unit of the last printed digit)")
    tolerance = _printed_tolerance(condition.text)
    passed = (abs(number - target) > tolerance if condition.operator == "differs_from"
              else _on_its_side(condition.operator, number, number, target))
    rule = (f"|observed - {condition.text}| > {_show(tolerance)}" if condition.operator == "differs_from"
            else "deterministic comparison")
    return Comparison(key, expected, shown, passed, rule)


_SIDES = {"differs_from": "exclude", "less_than": "lie below", "at_most": "lie at or below",
          "greater_than": "lie above", "at_least": "lie at or above"}


def _on_its_side(operator: str, low: Any, high: Any, target: Any) -> bool:
    """Whether every value from ``low`` to ``high`` lies on the side of ``target`` that ``operator`` states."""
    return {"less_than": high < target, "at_most": high <= target, "greater_than": low > target,
            "at_least": low >= target}[operator]


def _compare_estimate(key: str, condition: Condition, estimate: MeanEstimate) -> Comparison:
    # Only an exact integer may lie beyond float range; no interval reaches it.
    target = _float_or_infinity(condition.value)
    operator = condition.operator
    expected = condition.text if operator in ("approx", "exact") else condition.describe()
    interval = format_interval(estimate.as_dict())
    if operator == "exact":
        passed, rule = estimate.contains(target), f"{condition.text} inside the {interval}"
    elif operator == "approx":
        # The text's number stands for every value that rounds to it; only an interval clear of all of them refutes it.
        assert condition.tolerance is not None
        low, high = float(condition.value - condition.tolerance), float(condition.value + condition.tolerance)
        passed = estimate.low <= high and low <= estimate.high
        rule = f"the {interval} must meet [{low:.10g}, {high:.10g}], the values printed as {condition.text}"
    else:
        passed = (not estimate.contains(target) if operator == "differs_from"
                  else _on_its_side(operator, estimate.low, estimate.high, target))
        rule = f"the whole {interval} must {_SIDES[operator]} {condition.text}"
    if (estimate.low, estimate.high) == tuple(estimate.support):
        # So few samples that the interval is the whole support: the evidence can refute no mean the variable can have.
        rule += (f"; warning: with n={estimate.n} the interval is the whole support, so no mean can be refuted: the "
                 "check's deviation is too large for its support; state a smaller one")
    return Comparison(key, expected, estimate.as_dict(), passed, rule)


def _compare_rounded(key: str, condition: Condition, observed: Rounded) -> Comparison:
    expected, shown = condition.describe(), observed.as_dict()
    if not (math.isfinite(observed.value) and math.isfinite(observed.bound) and observed.bound >= 0):
        return Comparison(key, expected, shown, False, f"observed value {observed.value!r} is not a number")
    target, value, bound = condition.value, Fraction(observed.value), Fraction(observed.bound)
    assert isinstance(target, Fraction)
    within = f"the float64 result's rounding bound {observed.bound:.3g}, derived by the verifier"
    if condition.operator == "exact":
        return Comparison(key, expected, shown, abs(value - target) <= bound,
                          f"|observed - {condition.text}| <= {within}")
    if condition.operator == "approx":
        assert condition.tolerance is not None
        return Comparison(key, expected, shown, abs(value - target) <= condition.tolerance + bound,
                          f"|observed - {condition.text}| <= {_show(condition.tolerance)} (half a unit of the last "
                          f"printed digit) plus {within}")
    passed = (abs(value - target) > _printed_tolerance(condition.text) + bound if condition.operator == "differs_from"
              else _on_its_side(condition.operator, value - bound, value + bound, target))
    return Comparison(key, expected, shown, passed, f"every number within {within} must "
                      f"{_SIDES[condition.operator]} {condition.text}")


def _written_number(text: str) -> int | float | str:
    """A literal as a JSON number where that loses nothing but trailing zeros."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return text


def _approx(raw: Any, path: tuple[str | int, ...]) -> Condition:
    value = _number(raw, path)
    text = _text(raw)
    return Condition("approx", value, text, _printed_tolerance(text))


def _number(raw: Any, path: tuple[str | int, ...], exact: bool = False) -> Fraction:
    """The exact value of a numeric literal; unless ``exact``, one a float observation can be compared with."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ExpectationError(f"expected a number, got {raw!r}", path)
    # math.isfinite would raise OverflowError on an integer beyond float range; only floats can be NaN or infinite.
    if isinstance(raw, float) and not math.isfinite(raw):
        raise ExpectationError(f"expected a finite number, got {raw!r}; state the number the text prints "
                               "(a check against NaN or infinity cannot mean anything)", path)
    value = _fraction(_text(raw), path)
    if not exact and abs(value) > _LARGEST_FLOAT:
        raise ExpectationError(f"{_abbreviated(_text(raw))} is beyond the range of a 64-bit float (about ±1.8e308), "
                               "so no float observation or interval can be compared with it; state an exact integer "
                               "as {exact: ...}", path)
    return value


def _fraction(text: str, path: tuple[str | int, ...]) -> Fraction:
    """The exact value of a literal, refusing ones beyond float64's range (10^±400 is already absurd)."""
    try:
        magnitude = Decimal(text.replace("_", "")).adjusted() if "/" not in text else 0
    except InvalidOperation:
        magnitude = 0
    if abs(magnitude) > _LARGEST_EXPONENT:
        raise ExpectationError(f"{_abbreviated(text)} is out of range: exponents beyond ±{_LARGEST_EXPONENT} cannot be "
                               "stated or observed", path)
    return Fraction(text)


def _abbreviated(text: str) -> str:
    return f"'{text}'" if len(text) <= 40 else f"'{text[:20]}...' ({len(text)} characters)"


def _exact_number(raw: Any, path: tuple[str | int, ...]) -> Fraction:
    if isinstance(raw, str):
        try:
            return _fraction(raw, path)
        except (ValueError, ZeroDivisionError) as error:
            if isinstance(error, ExpectationError):
                raise
            raise ExpectationError(
                f"'{raw}' is not an exact number; write an integer, a decimal or a fraction like \"7/8\"", path
            ) from None
    return _number(raw, path, exact=True)


def _text(raw: Any) -> str:
    if isinstance(raw, FloatLiteral):
        return raw.text
    return raw if isinstance(raw, str) else repr(raw)


def _printed_tolerance(text: str) -> Fraction:
    """Half a unit of the last printed digit of a numeric literal."""
    try:
        exponent = Decimal(text.replace("_", "")).as_tuple().exponent
    except InvalidOperation:
        return Fraction(0)
    assert isinstance(exponent, int)
    return Fraction(1, 2) * Fraction(10) ** exponent


def _is_scalar_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.ndim == 0


def _is_float(value: Any) -> bool:
    return isinstance(value, float | np.floating) or (isinstance(value, np.ndarray) and value.dtype.kind == "f")


def _observed_number(value: Any) -> Fraction | None:
    if isinstance(value, bool):
        return None
    if _is_scalar_array(value) or isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, Rational):
        return Fraction(value.numerator, value.denominator)
    if isinstance(value, float):
        return Fraction(value) if math.isfinite(value) else None
    return sympy_rational(value)


def as_list(value: Any) -> list | None:
    if isinstance(value, np.ndarray):
        return list(value.reshape(-1)) if value.ndim else None
    if isinstance(value, list | tuple):
        return list(value)
    return None


def _float_or_infinity(value: Fraction) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _show(value: Fraction | None) -> str:
    return "0" if value is None else f"{float(value):.10g}"



def perturbations(key: str, expectation: Expectation, observed: Any, explained: dict[str, str]) -> list[dict[str, Any]]:
    """Every perturbation of ``expectation`` (stated for ``key``, or ``key[i]`` for an element) compared with
    ``observed``: a record ``{"key", "written", "perturbed", "outcome"}`` (``killed``, ``survived``, or ``explained``
    with the ``reason`` that ``explained``, the check's ``insensitive``, gives for the key or its element) for each
    neighbour of a condition the observation satisfies as written, ``{"key", "written", "bound": True}`` for an
    inequality."""
    if expectation.elements is not None:
        values = as_list(observed)
        if values is None or len(values) != len(expectation.elements):
            return []  # the comparison itself fails: nothing to perturb
        records = []
        for index, (element, value) in enumerate(zip(expectation.elements, values, strict=True)):
            records += perturbations(f"{key}[{index}]", element, value, explained)
        return records
    records = []
    for condition in expectation.conditions:
        if condition.operator == "equals" or not compare_condition(key, condition, observed).passed:
            continue
        written = condition.describe()
        if condition.operator in INEQUALITIES:
            records.append({"key": key, "written": written, "bound": True})
            continue
        for neighbour in _neighbours(condition):
            record = {"key": key, "written": written, "perturbed": neighbour.describe(), "outcome": KILLED}
            reason = explained.get(key) or explained.get(key.split("[")[0])
            if compare_condition(key, neighbour, observed).passed:
                record.update({"outcome": EXPLAINED, "reason": reason} if reason else {"outcome": SURVIVED})
            records.append(record)
    return records


def _neighbours(condition: Condition) -> list[Condition]:
    """The condition with its number moved one printed unit down and up."""
    text = condition.text
    if condition.operator == "exact" and "/" in text:
        numerator, _, denominator = text.partition("/")
        try:
            p, q = int(numerator), int(denominator)
        except ValueError:
            return []
        return [Condition("exact", Fraction(p + step, q), f"{p + step}/{q}") for step in (-1, 1)]
    try:
        decimal = Decimal(text.replace("_", ""))
    except InvalidOperation:
        return []
    exponent = decimal.as_tuple().exponent
    if not isinstance(exponent, int):
        return []
    unit = Decimal(1).scaleb(exponent)
    moved = [_like(text, (decimal + step).quantize(unit) if exponent < 0 else decimal + step) for step in (-unit, unit)]
    return [Condition(condition.operator, Fraction(written), written, condition.tolerance) for written in moved]


def _like(text: str, value: Decimal) -> str:
    """``value`` written as ``text`` is: in exponent notation if it was (``1e-6`` -> ``2e-6``), else plainly."""
    if "e" in text.lower():
        mantissa, _, power = f"{value:e}".partition("e")
        digits = len(text.lower().partition("e")[0].replace("-", "").replace(".", "")) - 1
        return f"{Decimal(mantissa):.{max(digits, 0)}f}e{int(power)}"
    return f"{value:f}"


def summarize(records: list[dict[str, Any]]) -> dict[str, int]:
    """Counts of a run's (or a check's) perturbations by outcome, and of bounds."""
    counts = {KILLED: 0, SURVIVED: 0, EXPLAINED: 0, "bounds": 0}
    for record in records:
        counts["bounds" if record.get("bound") else record["outcome"]] += 1
    return counts

"""Sharpness: would the check notice if the text's number were one printed digit off?

Every numeric value a claim expects is perturbed by one unit of its last printed digit, up and
down, one at a time, and compared anew with the observation the check already made: no verifier
runs again, so every check carries this evidence (``claims verify`` on a warm cache computes it in
seconds, and ``claims sharpness`` prints it). A perturbation the comparison still passes is a
*survivor*: the check cannot tell the text's number from its neighbour. A survivor is either
explained in the claim file (``insensitive: {key: reason}`` of the check, for example a Monte Carlo
interval wider than the printed digit, or a value the text rounds) or a hole in the check.

What is perturbed:

* ``approx`` (a bare number): to the neighbouring printed values, with the same printed precision;
* ``exact``: an integer or decimal by one unit of its last digit, a fraction ``p/q`` to ``(p ± 1)/q``;
* an inequality is a bound, not a value: the text says which side the observation is on, not
  where, so moving the bound by a printed unit need not cross it. It is counted apart ("bounds")
  and never a survivor;
* booleans and strings have no neighbouring value and are not perturbed.

Mutation-testing tools (mutmut, cosmic-ray) mutate code, not a claim file's numbers, which is why
this is written here; the mutants of ``impl/`` are ``tox -e mutants``'s.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from claims_harness._claims.expect import INEQUALITIES, Condition, Expectation, as_list, compare_condition

KILLED, SURVIVED, EXPLAINED = "killed", "survived", "explained"


def perturbations(key: str, expectation: Expectation, observed: Any, explained: dict[str, str]) -> list[dict[str, Any]]:
    """Every perturbation of ``expectation`` compared with ``observed``, as JSON-ready records.

    Args:
      key: the expected key (``probability``), or an element of it (``probability[2]``).
      expectation: what the claim file states for it.
      observed: what the check observed for it.
      explained: the check's ``insensitive`` reasons, by key (an element's key, or the whole key).

    Returns:
      One record per perturbed condition that the observation satisfies as written:
      ``{"key", "written", "perturbed", "outcome"}`` (``killed``, ``survived`` or ``explained``, with
      ``reason``), or ``{"key", "written", "bound": True}`` for an inequality.
    """
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
            record = {"key": key, "written": written, "perturbed": neighbour.describe()}
            if not compare_condition(key, neighbour, observed).passed:
                record["outcome"] = KILLED
            else:
                reason = explained.get(key) or explained.get(key.split("[")[0])
                record["outcome"] = EXPLAINED if reason else SURVIVED
                if reason:
                    record["reason"] = reason
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
    neighbours = []
    for step in (-unit, unit):
        moved = (decimal + step).quantize(unit) if exponent < 0 else decimal + step
        moved_text = _like(text, moved)
        neighbours.append(Condition(condition.operator, Fraction(moved_text), moved_text, condition.tolerance))
    return neighbours


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

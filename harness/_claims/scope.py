"""Scope: how far a sentence of the text reaches, and how far the checks of it reached.

A sentence speaks for a range of settings: "for every γ", "with one final reward and γ = 1", "in a
state", "for a group of G answers". A check is sharp only inside the settings its witnesses and drawn
examples come from: one that draws only undiscounted MDPs cannot see a sentence that is false for
γ < 1. So the course declares once, in ``[tool.claims.scope.NAME]`` of pyproject.toml, the
*dimensions* its sentences range over (the discount, the number of actions, one state or many, ...),
each with its *values*: a value is a condition on a number (``{exact = 1}``, ``{less_than = 1}``,
``{at_least = 3}``) or a name a verifier reports as it is (``stochastic``). A statement of the
ledger says which values of which dimensions it speaks for (``scope:``); a verifier reports, for
every witness and drawn example, the values it actually used (``claims_harness.reach``); the report
compares the two for each statement, and what no check reached is shown, and makes the statement
weak, unless the statement says why no check can reach it (``unreached:``).

The vocabulary is the course's: another module declares its own dimensions. Numbers are classified
exactly (a float by its exact binary value), so ``0.9999999`` is below one and ``1.0`` is one.

Written here rather than taken from a library: what is needed is the few lines that put a number, a
sympy expression (by what its assumptions allow) or a name into declared values, and the messages
that name the pyproject key or the claim file's field; no interval or units library says that.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real
from typing import Any

from claims_harness.errors import ClaimsError, did_you_mean

# The conditions a value of a dimension may state, as ``expect`` names them; the symbol each prints as.
CONDITIONS = {"exact": "=", "less_than": "<", "greater_than": ">", "at_least": "≥", "at_most": "≤"}
# What a statement writes for "every value of this dimension".
EVERY_VALUE = "all"
_INFINITY = math.inf

Number = Fraction | float  # a float only for ±infinity


@dataclass(frozen=True)
class ScopeValue:
    """One value of a dimension: a condition on a number (all of ``conditions`` hold), or a name only."""

    name: str
    conditions: tuple[tuple[str, Number], ...] = ()

    def holds_for(self, number: Number) -> bool:
        return bool(self.conditions) and all(_compare(number, operator, bound)
                                             for operator, bound in self.conditions)

    def meets(self, interval: Interval) -> bool:
        """Whether some number the interval admits satisfies every condition of this value."""
        if not self.conditions:
            return False
        own = Interval()
        for operator, bound in self.conditions:
            own = own.narrowed(operator, bound)
        return own.intersects(interval)

    def shown(self, symbol: str) -> str:
        """How the report names it: ``γ < 1``, ``actions ≥ 3``, ``transitions: stochastic``."""
        if not self.conditions:
            return f"{symbol}: {self.name}"
        operators = [operator for operator, _ in self.conditions]
        if sorted(operators) in (["at_least", "less_than"], ["at_least", "at_most"], ["greater_than", "less_than"],
                                 ["at_most", "greater_than"]):
            (low_operator, low), (high_operator, high) = sorted(
                self.conditions, key=lambda condition: condition[0] not in ("at_least", "greater_than"))
            return (f"{_number_text(low)} {'≤' if low_operator == 'at_least' else '<'} {symbol} "
                    f"{CONDITIONS[high_operator]} {_number_text(high)}")
        return " and ".join(f"{symbol} {CONDITIONS[operator]} {_number_text(bound)}"
                            for operator, bound in self.conditions)


@dataclass(frozen=True)
class Interval:
    """The numbers between two bounds (each open or closed, ±infinity allowed), integers only if ``integer``."""

    low: Number = -_INFINITY
    high: Number = _INFINITY
    low_closed: bool = False
    high_closed: bool = False
    integer: bool = False

    def narrowed(self, operator: str, bound: Number) -> Interval:
        low, high, low_closed, high_closed = self.low, self.high, self.low_closed, self.high_closed
        if operator in ("exact", "greater_than", "at_least") and (
                bound > low or (bound == low and operator == "greater_than")):
            low, low_closed = bound, operator != "greater_than"
        if operator in ("exact", "less_than", "at_most") and (
                bound < high or (bound == high and operator == "less_than")):
            high, high_closed = bound, operator != "less_than"
        return Interval(low, high, low_closed, high_closed, self.integer)

    def intersects(self, other: Interval) -> bool:
        low, low_closed = max((self.low, self.low_closed), (other.low, other.low_closed),
                              key=lambda bound: (bound[0], not bound[1]))
        high, high_closed = min((self.high, self.high_closed), (other.high, other.high_closed),
                                key=lambda bound: (bound[0], bound[1]))
        if low > high or (low == high and not (low_closed and high_closed and math.isfinite(low))):
            return False
        if not (self.integer or other.integer):
            return True
        if not math.isfinite(low) or not math.isfinite(high):
            return True
        first = math.ceil(low) if low_closed else math.floor(low) + 1
        return first < high or (first == high and high_closed)


@dataclass(frozen=True)
class Dimension:
    """One dimension of the course's scope: its name, what it means, how the report writes it, its values."""

    name: str
    means: str
    symbol: str
    values: tuple[ScopeValue, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(value.name for value in self.values)

    def value(self, name: str) -> ScopeValue:
        for value in self.values:
            if value.name == name:
                return value
        raise KeyError(name)

    def shown(self, name: str) -> str:
        return self.value(name).shown(self.symbol)

    def classify(self, used: Any) -> tuple[str, ...]:
        """The names of the values ``used`` falls in: a number, a sympy expression (every value its assumptions
        allow), a value's name, or a sequence of these (each element counted).

        Raises:
          ClaimsError: for a name the dimension does not declare, or a value of no known type.
        """
        if isinstance(used, str):
            if used not in self.names:
                raise ClaimsError(f"'{used}' is not a value of the scope dimension '{self.name}'"
                                  f"{did_you_mean(used, self.names)}; its values are {', '.join(self.names)}")
            return (used,)
        number = _as_number(used)
        if number is not None:
            return tuple(value.name for value in self.values if value.holds_for(number))
        interval = _symbolic_interval(used)
        if interval is not None:
            return tuple(value.name for value in self.values
                         if value.meets(interval) and not _refuted(used, value.conditions))
        if isinstance(used, Iterable) and not isinstance(used, (bytes, Mapping)):
            return tuple(dict.fromkeys(name for element in _elements(used) for name in self.classify(element)))
        raise ClaimsError(f"scope dimension '{self.name}': cannot tell which value {type(used).__name__} "
                          f"{used!r:.80} is; report a number, a sympy expression, one of {', '.join(self.names)}, "
                          "or a list of these")


def parse_dimensions(table: Any, where: str) -> tuple[Dimension, ...]:
    """The dimensions of ``[tool.claims.scope]``; ``where`` names the table in messages.

    Each is a table ``[tool.claims.scope.NAME]`` with ``means`` (text), an optional ``symbol`` (how the
    report writes it; default the name) and ``values``: a list of names, or a table from each value's
    name to its conditions (``{exact = 1}``, ``{less_than = 1}``; an empty table: a name only).

    Raises:
      ClaimsError: naming the key and the fix.
    """
    if not isinstance(table, dict):
        raise ClaimsError(f"{where}: expected a table of dimensions, [tool.claims.scope.NAME] with 'means' and "
                          f"'values', found {table!r}")
    dimensions = []
    for name, fields in table.items():
        key = f"{where}.{name}"
        if not _is_word(name):
            raise ClaimsError(f"{key}: a dimension's name is a word of lower-case letters, digits and '-', "
                              "e.g. 'discount'")
        if not isinstance(fields, dict):
            raise ClaimsError(f"{key}: expected a table with 'means' and 'values', found {fields!r}")
        unknown = sorted(set(fields) - {"means", "symbol", "values"})
        if unknown:
            raise ClaimsError(f"{key}: unknown key(s) {', '.join(map(repr, unknown))}; a dimension has 'means', "
                              "'symbol' and 'values'")
        for field in ("means", "symbol"):
            if field in fields and not (isinstance(fields[field], str) and fields[field].strip()):
                raise ClaimsError(f"{key}.{field}: expected text, found {fields[field]!r}")
        if "means" not in fields:
            raise ClaimsError(f"{key}: missing 'means', what the dimension measures (e.g. 'the discount factor γ')")
        dimensions.append(Dimension(name, fields["means"], fields.get("symbol", name),
                                    _values(fields.get("values"), f"{key}.values")))
    return tuple(dimensions)


def _values(raw: Any, key: str) -> tuple[ScopeValue, ...]:
    if isinstance(raw, list) and raw and all(isinstance(name, str) for name in raw):
        raw = {name: {} for name in raw}
    if not isinstance(raw, dict) or len(raw) < 2:
        raise ClaimsError(f"{key}: expected at least two values, as a list of names (['deterministic', "
                          "'stochastic']) or a table of conditions ({one = {exact = 1}, below-one = {less_than = "
                          f"1}}), found {raw!r}")
    values = []
    for name, conditions in raw.items():
        if not _is_word(name) or name == EVERY_VALUE:
            raise ClaimsError(f"{key}.{name}: a value's name is a word of lower-case letters, digits and '-' "
                              f"(and not '{EVERY_VALUE}', which a statement writes for every value)")
        if not isinstance(conditions, dict):
            raise ClaimsError(f"{key}.{name}: expected a table of conditions ({', '.join(CONDITIONS)}), "
                              f"found {conditions!r}")
        parsed = []
        for operator, bound in conditions.items():
            number = _as_number(bound) if not isinstance(bound, bool) else None
            if operator not in CONDITIONS or number is None:
                raise ClaimsError(f"{key}.{name}: {operator} = {bound!r} is not a condition; write one of "
                                  f"{', '.join(CONDITIONS)} with a number (inf for infinity)")
            parsed.append((operator, number))
        values.append(ScopeValue(name, tuple(parsed)))
    return tuple(values)


def _is_word(name: Any) -> bool:
    return isinstance(name, str) and bool(name) and name[0].isalpha() and all(
        character.islower() or character.isdigit() or character == "-" for character in name)


def resolve_scope(raw: Mapping[str, Any], dimensions: Iterable[Dimension]) -> tuple[dict[str, tuple[str, ...]],
                                                                                      list[str]]:
    """A statement's ``scope`` as value names per dimension (``all`` spelled out), and what is wrong in it."""
    declared = {dimension.name: dimension for dimension in dimensions}
    resolved, problems = {}, []
    for name, written in raw.items():
        dimension = declared.get(name)
        if dimension is None:
            problems.append(f"'{name}' is not a scope dimension of the course{did_you_mean(name, declared)}; "
                            f"declared: {', '.join(declared) or 'none ([tool.claims.scope] in pyproject.toml)'}")
            continue
        names = dimension.names if written == EVERY_VALUE else (written,) if isinstance(written, str) else written
        unknown = [value for value in names if value not in dimension.names]
        if unknown or not names:
            problems.append(f"dimension '{name}': " + (
                f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not among its values"
                f"{did_you_mean(unknown[0], dimension.names)}" if unknown else "no value")
                + f"; write '{EVERY_VALUE}' or some of {', '.join(dimension.names)}")
            continue
        resolved[name] = tuple(value for value in dimension.names if value in names)
    return resolved, problems


def merge_reached(records: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """The union of several checks' reached values, with their counts added."""
    merged: dict[str, dict[str, int]] = {}
    for record in records:
        for dimension, counts in record.items():
            into = merged.setdefault(dimension, {})
            for value, count in counts.items():
                into[value] = into.get(value, 0) + int(count)
    return merged


def unreached(claimed: Mapping[str, Iterable[str]], reached: Mapping[str, Mapping[str, int]]
              ) -> dict[str, list[str]]:
    """The values a statement claims that no check reached, per dimension (only dimensions with some)."""
    missing = {name: [value for value in values if not reached.get(name, {}).get(value)]
               for name, values in claimed.items()}
    return {name: values for name, values in missing.items() if values}


def _compare(number: Number, operator: str, bound: Number) -> bool:
    return {"exact": number == bound, "less_than": number < bound, "greater_than": number > bound,
            "at_least": number >= bound, "at_most": number <= bound}[operator]


def _as_number(value: Any) -> Number | None:
    """An exact number for an int, a Fraction, a float (±infinity kept as float) or a NumPy scalar; else None."""
    if isinstance(value, bool):
        return None
    item = getattr(value, "item", None)
    if item is not None and getattr(value, "shape", None) == ():
        value = item()
    if isinstance(value, Fraction | int):
        return Fraction(value)
    if isinstance(value, float | Real) and not _is_symbolic(value):
        number = float(value)
        if math.isnan(number):
            return None
        return number if math.isinf(number) else Fraction(number)
    if _is_symbolic(value) and getattr(value, "is_number", False) and value.is_real:
        if value.is_Rational:
            return Fraction(int(value.p), int(value.q))
        number = float(value)
        return number if math.isinf(number) else Fraction(number)
    return None


def _is_symbolic(value: Any) -> bool:
    return type(value).__module__.startswith("sympy")


def _symbolic_interval(value: Any) -> Interval | None:
    """The numbers a sympy expression with free symbols may stand for, by what its assumptions say of its sign."""
    if not _is_symbolic(value) or not getattr(value, "free_symbols", None):
        return None
    low, low_closed = (0, False) if value.is_positive else (0, True) if value.is_nonnegative else (-_INFINITY, False)
    high, high_closed = (0, False) if value.is_negative else (0, True) if value.is_nonpositive else (_INFINITY, False)
    return Interval(low, high, low_closed, high_closed, integer=bool(value.is_integer))


def _refuted(expression: Any, conditions: tuple[tuple[str, Number], ...]) -> bool:
    """Whether sympy can tell that ``expression`` meets some condition for no value its symbols' assumptions allow
    (``1 - d`` with ``d > 0`` is never 1), from the sign of its difference to each bound."""
    import sympy

    for operator, bound in conditions:
        limit = (sympy.oo if bound > 0 else -sympy.oo) if isinstance(bound, float) else sympy.Rational(
            bound.numerator, bound.denominator)
        difference = expression - limit
        sign = {"exact": difference.is_zero is False, "less_than": difference.is_nonnegative,
                "greater_than": difference.is_nonpositive, "at_least": difference.is_negative,
                "at_most": difference.is_positive}[operator]
        if sign is True:
            return True
    return False


def _elements(values: Iterable[Any]) -> Iterable[Any]:
    flat = getattr(values, "flat", None)  # a NumPy array, of any shape
    return flat if flat is not None else values


def _number_text(number: Number) -> str:
    if isinstance(number, float):
        return "∞" if number > 0 else "-∞"
    return str(number)


def describe_scope(statement: Mapping[str, Any], vocabulary: Iterable[Mapping[str, Any]]) -> tuple[str, str]:
    """A statement of a results document, as the reports say its scope: what it claims (``γ = 1, γ < 1; states ≥ 2``,
    or ``no dimension``) and what of it no check reached, with the statement's reasons (empty when all was reached).

    ``vocabulary`` is the results document's ``scope_dimensions``: each dimension with its values as shown.
    """
    shown = {dimension["name"]: {value["name"]: value["shown"] for value in dimension["values"]}
             for dimension in vocabulary}
    claimed = statement.get("scope")
    if claimed is None:
        return "", ""

    def named(dimension: str, value: str) -> str:
        return shown.get(dimension, {}).get(value, f"{dimension}: {value}")

    text = "; ".join(", ".join(named(dimension, value) for value in values) for dimension, values in claimed.items())
    missing = statement.get("unreached") or {}
    reasons = statement.get("unreached_reasons") or {}
    gaps = "; ".join(", ".join(named(dimension, value) for value in values)
                     + (f" (why: {reasons[dimension]})" if dimension in reasons else "")
                     for dimension, values in missing.items())
    return text or "no dimension", gaps

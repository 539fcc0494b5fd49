"""Which check compares each number a statement holds: the binding of the text's numbers to the claims' checks.

A statement standing on a block of the text holds some of its numbers (``anchor.holds``). Each such
number is *bound* to a check of a claim covering the statement when the check states it: an
expected value of ``expect`` (a value, an element of a list, or the bound of an inequality), or an
input in ``params`` that the check computes from. The two agree when they differ by no more than
the coarser of their printed precisions (``0.73`` and ``0.729`` agree; ``2.89`` and ``2.91`` do
not), the rule the harness compares a bare number by. A number no check compares (a count, a
cross-reference, the threshold of a definition) says why in the statement's ``not_compared``.

So a changed number of the text is caught twice: the block's drift makes the statement
``changed``, and the new number, once held, is bound to nothing until the claim expects it; ``claims
text review`` stamps it only when it is bound and the checks that compare it ran after the change
and passed (``claims_harness._authoring.text``).

Formulas a statement holds are bound to its covering claims as a whole: no single expected value
states a formula. Written by hand, not taken from a library: what is needed is the few lines that
read a number as the text prints it (``−⅓``, ``0.9³``) and the claim file's numbers as written.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from claims_harness._claims.claim_file import ClaimEntry
from claims_harness._claims.expect import Expectation
from claims_harness._claims.loading import Catalogue
from claims_harness._text.stamps import parse_hold

_MINUS = "-−–"  # hyphen-minus, the minus sign, and the dash some texts print for it
_SUPERSCRIPTS = {character: str(digit) for digit, character in enumerate("⁰¹²³⁴⁵⁶⁷⁸⁹")}


@dataclass(frozen=True)
class Binding:
    """A check of a covering claim that states a held number: where (``expect.key[i]`` or ``params.name``)."""

    item: str
    claim: str
    check: int  # the check's position in its claim, from 0
    where: str
    value: str  # as the claim file writes it

    def describe(self) -> str:
        return f"claim '{self.claim}' check {self.check + 1}, {self.where} = {self.value}"


def value_of(item: str) -> tuple[Fraction, Fraction] | None:
    """A number as the text prints it, and half a unit of its last printed digit (zero for a fraction or a power):
    ``0.273`` is (273/1000, 1/2000); ``−⅓`` is (-1/3, 0); ``0.9³`` is (729/1000, 0); None for what is no number
    (a cross-reference such as ``4.1.2``)."""
    raw, sign, exponent = item.strip(), 1, ""
    if raw[:1] in _MINUS:
        sign, raw = -1, raw[1:]
    while raw and raw[-1] in _SUPERSCRIPTS:
        exponent, raw = _SUPERSCRIPTS[raw[-1]] + exponent, raw[:-1]
    number = _plain(unicodedata.normalize("NFKC", raw).replace("\u2044", "/"))  # ⅓ is 1⁄3 under NFKC
    if number is None:
        return None
    value, half_unit = number
    if exponent:
        return sign * value ** int(exponent), Fraction(0)
    return sign * value, half_unit


def _plain(text: str) -> tuple[Fraction, Fraction] | None:
    if "/" in text:
        numerator, _, denominator = text.partition("/")
        if numerator.isdigit() and denominator.isdigit() and int(denominator):
            return Fraction(int(numerator), int(denominator)), Fraction(0)
        return None
    if text.count(".") > 1:
        return None  # a section number, not a quantity
    try:
        decimal = Decimal(text)
    except InvalidOperation:
        return None
    if not decimal.is_finite():
        return None
    exponent = decimal.as_tuple().exponent
    return Fraction(decimal), Fraction(1, 2) * Fraction(10) ** exponent


def _stated(check_expect: Mapping[str, Expectation], params: Mapping[str, Any]
            ) -> Iterator[tuple[str, Fraction, Fraction, str]]:
    """Every number a check states: (where, value, tolerance, as written)."""
    for key, expectation in check_expect.items():
        yield from _expected(f"expect.{key}", expectation)
    yield from _inputs("params", params)


def _expected(where: str, expectation: Expectation) -> Iterator[tuple[str, Fraction, Fraction, str]]:
    if expectation.elements is not None:
        for index, element in enumerate(expectation.elements):
            yield from _expected(f"{where}[{index}]", element)
        return
    for condition in expectation.conditions:
        if isinstance(condition.value, Fraction):
            yield where, condition.value, condition.tolerance or Fraction(0), condition.text


def _inputs(where: str, value: Any) -> Iterator[tuple[str, Fraction, Fraction, str]]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float) and math.isfinite(value):
        yield where, Fraction(repr(value)) if isinstance(value, float) else Fraction(value), Fraction(0), repr(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _inputs(f"{where}.{key}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _inputs(f"{where}[{index}]", item)


def bindings_of(held: str, covering: list[ClaimEntry]) -> list[Binding]:
    """The checks of ``covering`` that state the held number ``held`` (none for a formula or a non-number)."""
    number = value_of(held)
    if number is None:
        return []
    value, half_unit = number
    found = []
    for entry in covering:
        for index, check in enumerate(entry.claim.checks if entry.claim is not None else ()):
            for where, stated, tolerance, written in _stated(check.expect, check.params):
                if abs(stated - value) <= max(half_unit, tolerance):
                    found.append(Binding(held, entry.id, index, where, written))
    return found


@dataclass(frozen=True)
class HeldNumber:
    """One number a statement holds, with the checks that state it, or the statement's reason that none does."""

    statement: str
    file: str
    line: int
    item: str
    bindings: tuple[Binding, ...]
    reason: str | None

    @property
    def bound(self) -> bool:
        return bool(self.bindings) or self.reason is not None


def held_numbers(catalogue: Catalogue) -> list[HeldNumber]:
    """Every number every statement of the text holds, each with its bindings (formulas aside)."""
    covering = catalogue.covering()
    found = []
    for key, stated in catalogue.statements.items():
        statement = stated.statement
        if statement.anchor is None or not covering[key]:
            continue  # unplaced, or not checkable: its reason says why no check compares anything
        for hold in statement.anchor.holds:
            item, _ = parse_hold(hold)
            if value_of(item) is None and item not in statement.not_compared:
                continue  # a formula, or a cross-reference: bound to the covering claims as a whole
            found.append(HeldNumber(key, stated.file, stated.line, item, tuple(bindings_of(item, covering[key])),
                                    statement.not_compared.get(item)))
    return found


def binding_problems(catalogue: Catalogue) -> list[str]:
    """One line for each held number no check states and no reason excuses, and each reason for a number the
    statement does not hold: what ``claims lint`` and ``claims text status`` report."""
    lines = []
    covering = catalogue.covering()
    for held in held_numbers(catalogue):
        if held.bound:
            continue
        claims = [entry.id for entry in covering[held.statement]]
        nearest = _nearest(held.item, covering[held.statement])
        lines.append(f"{held.file}:{held.line}: statement '{held.statement}' holds {held.item}, which no check of its "
                     f"claims ({', '.join(claims) or 'none'}) states at its printed precision"
                     + (f" (nearest: {nearest.describe()})" if nearest else "")
                     + "; make the claim expect (or compute from) the text's number, or say why no check compares "
                       f"it under 'not_compared: {{{held.item!r}: ...}}'")
    for key, stated in catalogue.statements.items():
        anchor = stated.statement.anchor
        held = {parse_hold(hold)[0] for hold in anchor.holds} if anchor else set()
        lines += [f"{stated.file}:{stated.line}: statement '{key}': not_compared names {item!r}, which it does not "
                  f"hold (it holds {', '.join(sorted(held)) or 'nothing'}); drop it"
                  for item in stated.statement.not_compared if item not in held]
    return lines


def _nearest(item: str, covering: list[ClaimEntry]) -> Binding | None:
    """The number a covering check states that is closest to the held one: what the claim probably meant."""
    number = value_of(item)
    if number is None:
        return None
    best: tuple[Fraction, Binding] | None = None
    for entry in covering:
        for index, check in enumerate(entry.claim.checks if entry.claim is not None else ()):
            for where, stated, _, written in _stated(check.expect, check.params):
                distance = abs(stated - number[0])
                if best is None or distance < best[0]:
                    best = (distance, Binding(item, entry.id, index, where, written))
    # Only a number of the same size is shown as the one the claim probably meant.
    return best[1] if best is not None and best[0] <= max(abs(number[0]), Fraction(1)) / 2 else None

"""Every error the harness raises, for verifier authors, tools and tests alike: each message names the value,
where it came from and the fix.

``ClaimsError`` is the base of every error raised on purpose; ``ExpectationError`` (a ``ValueError``),
``Unreadable``, ``UnsafeYaml`` and ``NotPlainData`` (a ``TypeError``) are what a claim file's reader and the
implementation's server raise on the way to a :class:`Problem` or a check's error. Signals that never leave
their module (a draw a strategy rejects, a check that must run again) are not errors and stay there.
:func:`visible` is how every message shows text it did not write (a claim id, a key, a value); the module imports
nothing of the harness, so every layer may use it.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import yaml


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest valid name, or nothing when none is close."""
    match = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean '{match[0]}'?" if match else ""


# The Unicode categories never shown as themselves: control, format, surrogate, line and paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def visible(text: str, keep: str = "") -> str:
    """``text`` with every hidden character but those in ``keep`` written as its Python escape (``\\x1b``, ``\\n``).

    What a terminal or a report shows is then the text itself: an ANSI escape sequence in a claim id
    cannot recolour a terminal, and a newline cannot start a line of its own.
    """
    if text.isprintable():  # the common case, decided in C
        return text
    return "".join(ascii(char)[1:-1] if char not in keep and unicodedata.category(char) in _HIDDEN_CATEGORIES
                   else char for char in text)


class ClaimsError(Exception):
    """Base class of every error the harness raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One defect in a claim file, located precisely enough to fix without searching.

    Rendered as ``file:line: claim 'id', check N, field 'f': message; hint``, always one line: every part may
    hold text from the claim file (an id, a key, a quoted value), so control characters are shown escaped
    (``\\x1b``, ``\\n``) and cannot restyle a terminal, start a line of their own or fail to encode.
    """

    file: str
    line: int | None
    message: str
    claim_id: str | None = None
    check_index: int | None = None
    field: str | None = None
    hint: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        context = []
        if self.claim_id:
            context.append(f"claim '{self.claim_id}'")
        if self.check_index is not None:
            context.append(f"check {self.check_index + 1}")
        if self.field:
            context.append(f"field '{self.field}'")
        text = f"{where}: " + (", ".join(context) + ": " if context else "") + self.message
        return visible(f"{text}; {self.hint}" if self.hint else text)


class VerifierError(ClaimsError):
    """A verifier broke its contract (for example, it did not report a value the claim expects)."""


class ImplementationError(ClaimsError):
    """The implementation under test lacks something a verifier needs."""


class UnimportableImplementation(ImplementationError):
    """The implementation under test cannot be imported (or its import kills the interpreter)."""


class RegistryError(ClaimsError):
    """A verifier name is registered twice or looked up but unknown."""


class NotImplementedYet(ClaimsError):
    """Functions of the implementation under test are stubs still to be written: what a check needs is not there yet.

    Not a failure of the claim: the check is skipped and the run's summary counts the function once
    (an exercises package, ``claims exercises``, starts with every contract function a stub).
    """

    def __init__(self, functions: Iterable[str]):
        self.functions = tuple(functions)
        super().__init__(f"not implemented yet: {', '.join(self.functions)}")

    def __reduce__(self) -> tuple[type, tuple[tuple[str, ...]]]:
        return type(self), (self.functions,)


class Unsupported(ClaimsError):
    """The implementation declines a call a check makes: an optional keyword of the contract (``carry=``,
    ``normalize=``) that its function does not take. Not a failure of the claim: a check that needs the call
    is skipped and says which; a check whose other rows do not need it reports those rows as not checked
    (:class:`~claims_harness._claims.plain.Declined`) and compares the rest."""


class Inexpressible(ClaimsError):
    """The implementation's array library cannot express what the check needs (exact arithmetic, say, in a
    framework without an object dtype). Not a failure of the claim: the check is skipped and says why."""


class CheckCrashed(ClaimsError):
    """The process running a check died, or was killed for running past the check's time limit."""


class CheckTimeout(ClaimsError):
    """A check ran past its time limit."""


class NotData(ClaimsError):
    """A message that is not data this format can hold, or a value that cannot be written as data."""


class SupportViolation(ClaimsError, ValueError):
    """A sample lies outside the support the caller declared for the variable.

    The intervals in this module are only valid if every sample lies in the stated
    support, so a violation means the verifier's premise is wrong, not that the
    sample was unlucky.
    """


class SampleSizeError(ClaimsError, ValueError):
    """The sample size that detects ``deviation`` at (alpha, beta) exceeds what the caller can draw.

    Raised before any sample is drawn; the message names the size, the memory it would take
    (eight bytes a sample, the least a float64 sample takes) and the inputs that led to it.
    """

    def __init__(self, needed: float, limit: int, alpha: float, beta: float, deviation: float, width: float):
        self.needed, self.limit = needed, limit
        self.alpha, self.beta, self.deviation, self.width = alpha, beta, deviation, width
        super().__init__(
            f"detecting a deviation of {deviation!r} over a support of width {width!r} at alpha {alpha!r} and beta "
            f"{beta!r} takes n = {needed:.4g} samples ({_bytes(8 * needed)} at eight bytes a sample), more than the "
            f"{limit:,} that can be drawn; state a larger deviation (n grows as 1/deviation^2; alpha and beta enter "
            "only through their logarithms)")


class ResultsUnreadable(ClaimsError):
    """There is no results file where one was looked for, or it is not a run's results; the message says which."""


class ReportNotWritten(ClaimsError):
    """The reports could not be written at the end of a run; the message says where its results were kept."""


class ExpectationError(ValueError):
    """An ``expect`` entry that cannot be read; ``path`` locates it below ``expect``."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()):
        super().__init__(message)
        self.path = path


class Unreadable(Exception):
    """A claim file that cannot be read as one (not a regular file of the project, too large, not UTF-8); ``hint``
    says what to do."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message = message
        self.hint = hint


class UnsafeYaml(Exception):
    """YAML the claim files do not allow (a tag, an alias, a duplicate key, a value that is not plain data), at
    ``line``; ``hint`` says what to write instead."""

    def __init__(self, message: str, line: int | None, node: yaml.Node | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.node = node
        self.hint = hint


class NotPlainData(TypeError):
    """A result that only pretends to be a number, an array or a sequence: the description of what it is."""


def _bytes(count: float) -> str:
    """``count`` bytes in the largest binary unit that keeps the number at least one."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if count < 1024 or unit == "PiB":
            return f"{count:.4g} {unit}"
        count /= 1024
    raise AssertionError("unreachable")

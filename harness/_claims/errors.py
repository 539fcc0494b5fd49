"""The harness's error hierarchy: every message names the value, where it came from and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from claims_harness._claims.formats import visible


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest valid name, or nothing when none is close."""
    match = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean '{match[0]}'?" if match else ""


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
    (:class:`~claims_harness._claims.expect.Declined`) and compares the rest."""


class Inexpressible(ClaimsError):
    """The implementation's array library cannot express what the check needs (exact arithmetic, say, in a
    framework without an object dtype). Not a failure of the claim: the check is skipped and says why."""

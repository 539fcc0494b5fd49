"""Hypothesis properties inside verifiers: seeded from the check, verdict as an observation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis
from hypothesis import HealthCheck
from hypothesis.strategies import SearchStrategy

from harness._context import Context
from harness._executor import CheckTimeout

EXAMPLES = {"smoke": 200, "full": 2000}
# Smoke runs want a verdict fast: a failure is reported as found. The full profile also shrinks
# it to a minimal falsifying example, which can take tens of seconds.
PHASES = {
    "smoke": (hypothesis.Phase.explicit, hypothesis.Phase.reuse, hypothesis.Phase.generate),
    "full": tuple(hypothesis.Phase),
}


def check_property(ctx: Context, test: Callable[..., None], *strategies: SearchStrategy[Any]) -> dict[str, Any]:
    """Run ``test`` on examples drawn from ``strategies``; report whether it held.

    The property fails when ``test`` raises ``AssertionError``; the shrunk falsifying example
    is returned so the report shows it. Returns ``{"holds": bool, "examples": n}`` plus
    ``falsifying_example`` and ``error`` when it failed; a claim expects ``holds: true``.
    """
    examples = EXAMPLES[ctx.profile]
    settings = hypothesis.settings(
        max_examples=examples, deadline=None, database=None, print_blob=False, phases=PHASES[ctx.profile],
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    run = hypothesis.seed(ctx.seed)(settings(hypothesis.given(*strategies)(test)))
    try:
        run()
    except CheckTimeout:
        raise
    except BaseException as error:
        # Hypothesis wraps what a replay raised (FlakyFailure, an exception group): a timeout reads as one.
        timeout = _timeout_within(error)
        if timeout is not None:
            raise timeout from None
        if not isinstance(error, AssertionError):
            raise
        notes = [note for note in getattr(error, "__notes__", []) if "Falsifying" in note or "=" in note]
        return {"holds": False, "examples": examples, "falsifying_example": "\n".join(notes),
                "error": str(error)}
    return {"holds": True, "examples": examples}


def _timeout_within(error: BaseException) -> CheckTimeout | None:
    """The check's timeout inside ``error``'s group, cause or context, if any."""
    pending, seen = [error], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, CheckTimeout):
            return current
        pending += [*getattr(current, "exceptions", ()), *(e for e in (current.__cause__, current.__context__) if e)]
    return None

"""The message a failing or erroring check prints: the functions to blame, where the check is, what it expected
against what it observed (a property's failing input with what the implementation did with it), how to run it
again."""

from __future__ import annotations

from typing import Any

from claims_harness._claims.claim_file import ClaimEntry
from claims_harness._claims.formats import (
    FALSIFYING_KEY,
    IN_FLOATS_NOTES,
    SHRINK_FLAG,
    culprits,
    format_falsifying,
    format_observed,
    headline,
    hint,
)
from claims_harness._running.options import RunOptions
from claims_harness._running.runner import CheckResult
from claims_harness.errors import visible


def failure_text(entry: ClaimEntry, index: int, result: CheckResult, options: RunOptions) -> str:
    """The message a failing or erroring check prints: what, where, expected vs observed, how to rerun."""
    assert entry.claim is not None
    blamed = culprits(result.as_dict())
    lines = [headline(blamed, entry.where, entry.id, result.status, entry.claim.statement)]
    if result.in_floats:
        lines.append(f"  {IN_FLOATS_NOTES[result.in_floats]}")
    innocent = [name for name in result.uses if name not in blamed]
    if innocent:
        lines.append(f"  used by this check, right on their own: {', '.join(innocent)}")
    rejects = hint(entry.claim.checks[index].rejects, result.uses, blamed)
    if rejects:
        lines.append(f"  this check is there to catch {visible(rejects)}")
    lines.append(f"claim '{entry.id}' ({entry.where}) check {index + 1} of {len(entry.claim.checks)}: {result.kind}, "
                 f"verifier '{result.verifier}' ({result.verifier_location}), defined at {entry.file}:"
                 f"{entry.check_lines[index]}")
    if result.error:
        lines.append(f"ERROR: {visible(result.error.rstrip(), keep=chr(10) + chr(9))}")
    for comparison in result.comparisons:
        verdict = "ok    " if comparison["passed"] else "FAILED"
        lines.append(f"  {verdict} {visible(str(comparison['key']))}: expected {visible(str(comparison['expected']))}, "
                     f"observed {_short(comparison['observed'])}; rule: {visible(str(comparison['rule']))}")
    expected_keys = {comparison["key"].split("[")[0] for comparison in result.comparisons}
    if result.status == "failed":
        for key, value in result.observed.items():
            if key == FALSIFYING_KEY and value:
                shrunk = options.shrink or options.profile == "full"
                lines.append("  the smallest failing input found" if shrunk else
                             f"  a failing input (add {SHRINK_FLAG} to the reproduce command for the smallest)")
                lines[-1] += " and what the implementation did with it:"
                lines += [f"    {line}" for line in format_falsifying(value)]
            elif key not in expected_keys:
                lines.append(f"  also observed {visible(key)}: {_short(value)}")
    lines.append(f"seed {result.seed} (derived from --claims-seed {options.seed}), implementation "
                 f"'{options.impl}', profile '{options.profile}'")
    lines.append(f"reproduce: {result.reproduce}")
    return "\n".join(lines)


def _short(value: Any) -> str:
    return visible(format_observed(value, limit=200))

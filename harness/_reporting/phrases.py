"""The reports' sentences about a whole run, said alike by the Markdown, the HTML and the terminal: how much was
judged, the function table's headline, the sharpness and the last mutation run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from claims_harness._claims.formats import NOT_JUDGED, NOT_JUDGED_REASONS, counted


def _not_judged_reasons(summary: Mapping[str, Any]) -> str:
    return ", ".join(f"{count} {NOT_JUDGED_REASONS[why][count != 1]}"
                     for why, count in (summary.get("not_judged") or {}).items() if count)


def judgement_line(summary: Mapping[str, Any]) -> str:
    """How much of a run was judged (``results["summary"]``, or its ``checks`` and ``not_judged``), in one line:
    ``judged 61 of 296 checks (61 passed); 235 not judged: 229 wait for functions not written yet, 6 decline exact
    arithmetic``. A check skipped because it runs only in another profile is counted apart."""
    checks = summary["checks"]
    total = sum(checks.values())
    judged = checks.get("passed", 0) + checks.get("failed", 0) + checks.get("error", 0)
    verdicts = [f"{checks.get('passed', 0)} passed"]
    verdicts += [f"{checks['failed']} failed"] if checks.get("failed") else []
    verdicts += [counted(checks["error"], "error")] if checks.get("error") else []
    line = f"judged {judged} of {counted(total, 'check')} ({', '.join(verdicts)})"
    if checks.get(NOT_JUDGED):
        line += f"; {checks[NOT_JUDGED]} not judged: {_not_judged_reasons(summary)}"
    if checks.get("skipped"):
        line += f"; {checks['skipped']} run only in another profile"
    return line


def not_judged_line(summary: Mapping[str, Any]) -> str | None:
    """The reports' loud line under their title for a run with checks not judged (``results["summary"]``), or None."""
    count = summary["checks"].get(NOT_JUDGED, 0)
    if not count:
        return None
    return (f"{count} of {counted(sum(summary['checks'].values()), 'check')} {'was' if count == 1 else 'were'} not "
            "judged, for the implementation's sake: "
            f"{_not_judged_reasons(summary)}. A claim with a check not judged is not judged, never passed: this "
            "report is a partial verdict.")


def scoreboard_line(rows: list[dict[str, Any]]) -> str:
    """``not implemented yet: 23 functions; implemented: 4, of which 1 fails`` (the summary a student reads first)."""
    stubs = [row for row in rows if not row["implemented"]]
    implemented = [row for row in rows if row["implemented"] and not row["given"]]
    failing = sum(1 for row in implemented if row["failed"])
    verb = "fails" if failing == 1 else "fail"
    text = f"implemented: {len(implemented)}, of which {failing} {verb}"
    declining = sum(1 for row in implemented if row.get("declined"))
    if declining:
        text += f" and {declining} {'declines' if declining == 1 else 'decline'} checks (not judged)"
    return f"not implemented yet: {len(stubs)} functions; {text}" if stubs else text


def sharpness_line(found: Mapping[str, Any]) -> str:
    """The run's sharpness (``results["summary"]["sharpness"]``) in one sentence."""
    judged = found["killed"] + found["survived"] + found["explained"]
    return (f"Sharpness: {found['killed']} of {judged} expected numbers, each moved by one unit of its last printed "
            f"digit, turn their check red ({100 * found['score']:.1f} %); {found['explained']} are explained in the "
            f"claim files (insensitive:), {found['survived']} survive unexplained; {found['bounds']} bounds "
            "(inequalities) are not perturbed.")


def mutation_line(found: Mapping[str, Any]) -> str:
    """The last mutation run of the implementation (``results["summary"]["mutation"]``) in one sentence."""
    judged = found["mutants"] - found["equivalent"]
    score = "-" if found["score"] is None else f"{100 * found['score']:.1f} %"
    line = (f"Mutation testing (claims mutants): {found['caught']} of {judged} mutants of the implementation's "
            f"functions turn a check red ({score}; target {100 * found['target']:.0f} %); {found['equivalent']} more "
            f"are judged equivalent, each with its reason, and {found['holes']} are holes no check catches; "
            f"{found['file']} lists them. By module: "
            + ", ".join(f"{module} {'-' if value is None else f'{100 * value:.1f} %'}"
                        for module, value in found["modules"].items()) + ".")
    if not found["current"]:
        line += (" Stale: the implementation, the claims, the verifiers or the harness changed since this was "
                 "measured; run 'claims mutants' (tox -e mutants) again.")
    return line

"""A check's row as the report shows it, and the table of the implementation's functions built from the rows: for
each function a failing check blames, passes or only uses, what the claims that exercise it found."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from claims_harness._claims.formats import NOT_JUDGED, NOT_JUDGED_REASONS, USED_BY_FAILING, culprits

# How the runner words a skip for the profile's sake (claims_harness._running.runner): the start of ``skip_reason``.
_SKIPPED_BY_PROFILE = "runs only in the "


def found_stubs(payloads: Iterable[dict[str, Any]]) -> set[str]:
    """Every function some check of the run found not implemented (``not_implemented``): a NotImplementedError is
    "not implemented" for the whole function, wherever it was raised."""
    return {function for payload in payloads for function in (payload.get("check") or {}).get("not_implemented") or []}


def check_row(check: dict[str, Any], stubs: AbstractSet[str] = frozenset()) -> dict[str, Any]:
    order = ("kind", "line", "verifier", "verifier_location", "uses", "params", "status", "rejects", "expected",
             "harness_chosen", "observed", "comparisons", "reached", "seed", "seconds", "reused", "error",
             "skip_reason", "not_judged", "not_implemented", "not_checked", "error_in", "blamed", "in_floats",
             "sharpness", "reproduce")
    row = {key: check.get(key) for key in order}
    row["not_checked"] = row["not_checked"] or {}
    row["error_in"] = row["error_in"] or []
    row["blamed"] = row["blamed"] or []
    row["in_floats"] = {True: "twin", False: None}.get(row["in_floats"], row["in_floats"]) or ""  # before: a flag
    row["harness_chosen"] = row["harness_chosen"] or []
    row["not_implemented"] = row["not_implemented"] or []
    row["sharpness"] = row["sharpness"] or []
    row["reached"] = row["reached"] or {}
    # A comparison of an element (``key[2]``) is of the expected value ``key``.
    row["comparisons"] = [{**comparison, "stated_by": "harness" if any(
        comparison["key"] == key or comparison["key"].startswith(f"{key}[") for key in row["harness_chosen"])
        else "text"} for comparison in row["comparisons"] or []]
    if row["status"] == NOT_JUDGED:  # a row of a results document already: as it was judged
        return row
    row["not_judged"] = _not_judged(row, stubs)
    if row["not_judged"] is not None:
        if row["status"] == "passed":  # it passed without reaching the raise another check of the run met
            found = [function for function in row["uses"] or [] if function in stubs]
            row["not_implemented"] = found
            row["skip_reason"] = (f"not implemented yet: {', '.join(found)} raised NotImplementedError in another "
                                  f"check of this run, so {'it is' if len(found) == 1 else 'they are'} judged in none; "
                                  "this check passed without reaching the raise, and its pass does not count")
        row["status"] = NOT_JUDGED
    return row


def _not_judged(check: dict[str, Any], stubs: AbstractSet[str]) -> str | None:
    """Why a check was not judged, for the implementation's sake (a key of NOT_JUDGED_REASONS), or None.

    A check is not judged when the implementation kept it from running (a stub, a call it declines, an import that
    failed), and when it passed using a function that raised NotImplementedError in another check of the run. A check
    skipped because it runs only in another profile is judged in that profile: it stays ``skipped``.
    """
    uses = set(check["uses"] or [])
    if check["status"] == "passed":
        return "not implemented" if uses & stubs else None
    if check["status"] != "skipped":
        return None
    reason = check["skip_reason"] or ""
    if reason.startswith(_SKIPPED_BY_PROFILE):
        return None
    if check["not_implemented"]:
        return "not implemented"
    said = check.get("not_judged")  # by the runner, where it skipped the check
    return str(said) if said in NOT_JUDGED_REASONS else "other"


FUNCTION_STATUSES = ("passed", "failed", USED_BY_FAILING, "not implemented", "declined", "not run")


def function_scoreboard(payloads: list[dict[str, Any]], given: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One row per function of the implementation that a selected check exercises, in the contract's order of use.

    A claim counts for a function when one of its checks uses it; the claim is ``failed`` for the function
    when such a check failed and blamed it (``blamed``: the functions wrong on their own, found by running each
    alone with the others the reference's; an experiment is not run again, and blames those of its functions that
    another check of the run blamed, else all) or erred (an error about one function, ``error_in``, counts for that
    function alone), else ``used by a failing check`` when such a check failed and blamed others, else ``not
    implemented`` when such a check waited for a stub or used a function some check of the run found not
    implemented, else ``declined`` when the implementation declined such a check (exact arithmetic, an optional
    keyword), else ``passed`` when one passed, else ``not run`` (skipped in this profile). A function is
    ``implemented`` unless some check found it a stub (a NotImplementedError anywhere is "not implemented" for the
    whole function), and ``given`` when the run took it from the reference. Functions under test come first, the
    most failing claims first; then the stubs, then the reference's.
    """
    by_function: dict[str, dict[str, list[str]]] = {}
    stubs = found_stubs(payloads)
    checks = [(payload, check_row(payload["check"], stubs)) for payload in payloads
              if payload.get("check") is not None]
    blame_experiments_as_the_run([check for _, check in checks])
    for payload, check in checks:
        blamed = culprits(check) if check["status"] in ("failed", "error") else []
        for function in check["uses"] or []:
            status = check["status"]
            if status == NOT_JUDGED:
                status = {"not implemented": "not implemented", "not imported": "not run"}.get(check["not_judged"],
                                                                                                "declined")
            elif status == "skipped":
                status = "not run"
            if blamed and function not in blamed:  # the check failed or erred for another function
                status = USED_BY_FAILING if status == "failed" else "not run"
            by_function.setdefault(function, {}).setdefault(payload["claim"]["id"], []).append(status)
    rows = []
    for function, claims in by_function.items():
        counts = Counter(_claim_status_for_function(statuses) for statuses in claims.values())
        rows.append({"function": function, "implemented": function not in stubs, "given": function in given,
                     "claims": len(claims),
                     **{status: counts[status] for status in FUNCTION_STATUSES},
                     "failing_claims": sorted(claim for claim, statuses in claims.items()
                                              if _claim_status_for_function(statuses) == "failed")})
    # The function with the most failing claims, the likeliest culprit, comes first.
    return sorted(rows, key=lambda row: (row["given"], not row["implemented"], -row["failed"]))


def blame_experiments_as_the_run(checks: list[dict[str, Any]]) -> None:
    """Blame each failed experiment (check rows of one run) for those of its functions that a failed check of another
    kind blamed, if any: an experiment is not run again per function (its seeds cost too much), so what the run's
    other checks found wrong on its own is the likeliest culprit. The headline (:func:`culprits`) and the scoreboard
    then name the same functions."""
    blamed_by_others = {function for check in checks if check["status"] == "failed" and check["kind"] != "experiment"
                        for function in culprits(check)}
    for check in checks:
        if check["status"] == "failed" and check["kind"] == "experiment":
            check["blamed"] = [function for function in culprits(check) if function in blamed_by_others] \
                or check["blamed"]


def _claim_status_for_function(statuses: list[str]) -> str:
    if "failed" in statuses or "error" in statuses:
        return "failed"
    for status in (USED_BY_FAILING, "not implemented", "declined", "passed"):
        if status in statuses:
            return status
    return "not run"

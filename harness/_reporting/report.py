"""The results document, built only from the evidence items carried, and the writing of the reports."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from claims_harness._claims.course import ENGINE, Course, configures_course, find_course, load_course
from claims_harness._claims.formats import (
    NOT_JUDGED,
    NOT_JUDGED_REASONS,
    PARTIAL_FLAG,
    UNCOVERED,
    USED_BY_FAILING,
    culprits,
    judgement_line,
    library_versions,
)
from claims_harness._claims.loading import Catalogue, ClaimEntry
from claims_harness._claims.reading import read_claim_file
from claims_harness._claims.results_file import RESULTS_FILE, results_text
from claims_harness._claims.schema import KINDS, SHAPE_DESCRIPTIONS, STRONG_KINDS, Statement
from claims_harness._claims.scope import Dimension, merge_reached, resolve_scope, unreached
from claims_harness._reporting.html import HTML_FILE, render_html
from claims_harness._reporting.markdown import render_markdown
from claims_harness._reporting.text_page import PAGE_FILE, render_page
from claims_harness._running.cache import package_digest
from claims_harness._running.runner import RunOptions
from claims_harness._running.sharpness import EXPLAINED, KILLED, SURVIVED, summarize
from claims_harness._text.summary import TextReport
from claims_harness.errors import ClaimsError, ReportNotWritten, Unreadable

STATUSES = ("passed", "failed", "error", NOT_JUDGED, "skipped")
MARKDOWN_FILE = "claims_report.md"

# How the runner words a skip for the profile's sake (claims_harness._running.runner): the start of ``skip_reason``.
_SKIPPED_BY_PROFILE = "runs only in the "

# What a ledger statement's status means, in the order the report shows them. Which check kinds are strong
# for which shape of statement is the schema's (STRONG_KINDS, SHAPE_DESCRIPTIONS); _statement_status decides.
STATEMENT_STATUSES = {
    "covered": "a check of a kind strong for its shape (below) passed, and no covering check failed",
    "weak": "covering checks passed and none failed, but the claims covering it have no check of a kind strong "
            "for its shape, their checks did not reach part of the scope the statement speaks for (shown as "
            "'scope not reached'), or the ledger says why their checks test less than the statement says",
    "failed": "a check of a claim covering it failed or could not run (an error); this wins over any pass, "
              "so red always means broken",
    "not run": "no check decided it in this run, or only weaker ones did (or the scope they reached falls short) "
               "while other covering checks were skipped in this profile or not selected",
    "not checkable": "no claim covers it, and the ledger says why no check can refute or confirm it",
    "missing": "no claim covers it, and the ledger gives no reason",
}
STATEMENT_PRECEDENCE = ("a statement no claim covers is not checkable (with a reason) or missing; otherwise "
                        "failed wins over covered, covered over not run, and not run over weak")

# The evidence of one pytest item, or of one check reused without pytest: JSON text, as it travels from
# pytest-xdist workers to the controller, so both ways of writing reports read exactly the same values.


def lessons_of(catalogues: list[Catalogue]) -> list[dict[str, Any]]:
    """Every lesson (claim file) with its title, declared steps, claims and statement ledger, for the coverage.

    Each statement carries the claims that cover it (from any file) and the kinds of their checks, so that
    a statement whose claims did not run is told apart from one that no claim could cover strongly.
    """
    lessons = []
    for catalogue in catalogues:
        covering = catalogue.covering()
        dimensions = catalogue.course.scope if catalogue.course is not None else ()
        stated_in: dict[str, list[dict[str, Any]]] = {}
        for key, stated in catalogue.statements.items():
            stated_in.setdefault(stated.file, []).append(_ledger_entry(stated.statement, covering[key], dimensions))
        claims_in: dict[str, list[list[Any]]] = {}
        for entry in catalogue.entries:
            claims_in.setdefault(entry.file, []).append([entry.id, entry.where])
        lessons += [{"file": file, "title": catalogue.titles[file], "steps": catalogue.steps[file],
                     "claims": claims_in.get(file, []), "statements": stated_in.get(file, []),
                     "notes": [note.model_dump() for note in catalogue.notes.get(file, [])]}
                    for file in catalogue.files]
    return lessons


def _ledger_entry(statement: Statement, covering: list[ClaimEntry], dimensions: Sequence[Dimension]
                  ) -> dict[str, Any]:
    return {"id": statement.id, "where": statement.where, "says": statement.says, "shape": statement.shape,
            "not_checkable": statement.not_checkable, "weak": statement.weak, "origin": statement.origin,
            "scope": (resolve_scope(statement.scope, dimensions)[0] if statement.scope is not None else None),
            "unreached_reasons": dict(statement.unreached),
            "claims": [entry.id for entry in covering],
            "kinds": sorted({check.kind for entry in covering if entry.claim for check in entry.claim.checks})}


def _scope_vocabulary(dimensions: Sequence[Dimension]) -> list[dict[str, Any]]:
    """The course's scope dimensions as the reports name them: each value with how it is shown (``γ < 1``)."""
    return [{"name": dimension.name, "means": dimension.means,
             "values": [{"name": name, "shown": dimension.shown(name)} for name in dimension.names]}
            for dimension in dimensions]


def build_results(payloads: list[dict[str, Any]], lessons: list[dict[str, Any]], options: RunOptions,
                  started: float, root: Path, given: Sequence[str] = (), text: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    """The results document: run metadata, summary counts, coverage, then claims in file and claim order.

    ``given`` are the functions an implementation with reference fallbacks takes from the reference
    (``Provenance.as_reference``): the scoreboard of functions marks them as not under test. ``text``
    is the course text's state (``claims_harness._text.summary``), when the course configures a text.
    """
    claims: dict[tuple[str, int], dict[str, Any]] = {}
    stubs = found_stubs(payloads)
    for payload in sorted(payloads, key=lambda p: (p["file"], p["index"], p.get("check_index", -1))):
        key = (payload["file"], payload["index"])
        info = payload["claim"]
        row = claims.setdefault(key, {
            "id": info["id"], "where": info.get("where"), "file": payload["file"], "line": payload["line"],
            "lesson": payload.get("title", payload["file"]), "statement": info.get("statement"),
            "formula": info.get("formula"), "sources": info.get("sources", []),
            "citations": info.get("citations", {}), "limitations": info.get("limitations"),
            "erratum": info.get("erratum"), "clarification": info.get("clarification"),
            "origin": info.get("origin", "text"), "covers": info.get("covers", []),
            "status": "passed", "problems": [], "checks": [],
        })
        if "problems" in payload:
            row["problems"].extend(payload["problems"])
        if "check" in payload:
            row["checks"].append(_check_row(payload["check"], stubs))
    blame_experiments_as_the_run([check for row in claims.values() for check in row["checks"]])
    for row in claims.values():
        row["status"] = _claim_status(row)
    rows = list(claims.values())
    coverage = _coverage(lessons, rows)
    ledger = [statement for lesson in coverage for step in lesson["steps"] for statement in step["statements"]]
    return {
        "run": {
            "course": find_course(root).title, "sources_file": find_course(root).sources.relative_to(root).as_posix(),
            "impl": options.impl, "given": list(given), "profile": options.profile, "seed": options.seed,
            "revision": _revision(root), "versions": library_versions(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 2),
        },
        "summary": _summary(rows) | {"statements": _statement_counts(ledger), "sharpness": _sharpness(rows),
                                     "mutation": _mutation(root, options.impl)},
        "coverage_criterion": {
            "shapes": {shape: {"strong_kinds": sorted(STRONG_KINDS[shape]), "description": description}
                       for shape, description in SHAPE_DESCRIPTIONS.items()},
            "statuses": STATEMENT_STATUSES, "precedence": STATEMENT_PRECEDENCE,
        },
        "scope_dimensions": _scope_vocabulary(find_course(root).scope),
        "notes": [{"file": lesson["file"], **note} for lesson in lessons for note in lesson.get("notes", [])],
        "coverage": coverage,
        "uncovered": [statement for statement in ledger if statement["status"] in UNCOVERED],
        **({"text": text} if text is not None else {}),
        "functions": (function_scoreboard(payloads, given) if options.impl != find_course(root).implementation
                      else []),
        "claims": rows,
    }


def _coverage(lessons: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every step of every lesson with the statuses of its claims and of its ledger's statements.

    Rows, statements and unselected claims are grouped by step once: linear in the report's size.
    """
    coverage = []
    run_ids = {row["id"] for row in rows}
    rows_of: dict[str, list[dict[str, Any]]] = {}
    rows_at: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for row in rows:
        rows_of.setdefault(row["id"], []).append(row)
        rows_at.setdefault((row["file"], row["where"]), []).append(row)
    for lesson in lessons:
        ledger = [{"id": statement["id"], "where": statement["where"], "says": statement["says"],
                   "shape": statement["shape"], **_statement_status(statement, rows_of),
                   "claims": statement["claims"], "not_checkable": statement["not_checkable"],
                   "weak": statement.get("weak"),
                   "origin": statement.get("origin", "text"), "scope": statement.get("scope"),
                   "unreached_reasons": statement.get("unreached_reasons") or {}}
                  for statement in lesson.get("statements", [])]
        stated_at: dict[Any, list[dict[str, Any]]] = {}
        for statement in ledger:
            stated_at.setdefault(statement["where"], []).append(statement)
        unselected = Counter(where for claim, where in lesson.get("claims", []) if claim not in run_ids)
        declared = set(lesson["steps"])
        # Claims and statements of a file whose declared steps are unreadable still need a place in the report.
        undeclared = [where for (file, where) in rows_at if file == lesson["file"] and where not in declared]
        undeclared += [where for where in stated_at if where not in declared]
        steps = []
        for step in [*lesson["steps"], *dict.fromkeys(step for step in undeclared if step)]:
            ran = rows_at.get((lesson["file"], step), [])
            statuses = Counter(row["status"] for row in ran)
            step_row = {"step": step, "claims": len(ran),
                        "statuses": {status: statuses[status] for status in STATUSES if statuses[status]}}
            # Claims this run did not select (pytest -k) are "not run", never "uncovered".
            if unselected[step]:
                step_row["statuses"]["not run"] = unselected[step]
                step_row["claims"] += unselected[step]
            stated = stated_at.get(step, [])
            step_row["statements"] = stated
            step_row["statement_counts"] = _statement_counts(stated)
            steps.append(step_row)
        coverage.append({"file": lesson["file"], "title": lesson["title"], "steps": steps})
    return coverage


def _statement_status(statement: dict[str, Any], rows_of: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The statement's status (one of STATEMENT_STATUSES) from this run's checks of the claims covering it, with
    the scope those checks reached and what of the statement's scope they did not.

    The reached scope is the union over the passed checks of a kind strong for the statement's shape (over every
    passed check when none is strong), and over every passed check of a claim with an erratum or a clarification:
    its witnesses show where the sentence is false or says less, which is that part of the scope checked. A
    statement whose checks pass but miss part of its scope is weak, or not run while a covering check that might
    reach it was skipped or not selected.
    """
    if not statement["claims"]:
        return {"status": "not checkable" if statement["not_checkable"] else "missing"}
    ran = [row for claim in statement["claims"] for row in rows_of.get(claim, [])]
    checks = [check for row in ran for check in row["checks"]]
    strong = STRONG_KINDS[statement["shape"]]
    passed = [check for row in ran for check in row["checks"] if check["status"] == "passed"]
    correcting = [check for row in ran if row.get("erratum") or row.get("clarification") for check in row["checks"]
                  if check["status"] == "passed"]
    decisive = ([check for check in passed if check["kind"] in strong] or passed) + correcting
    reached = merge_reached(check.get("reached") or {} for check in decisive)
    claimed = statement.get("scope") or {}
    missing = unreached(claimed, reached) if passed else {}
    scope = {"reached": {name: _in_order(counts, claimed.get(name, ()))
                         for name, counts in reached.items()},
             "unreached": missing}
    if any(row["problems"] for row in ran) or any(check["status"] in ("failed", "error") for check in checks):
        return {"status": "failed", **scope}
    kinds = {check["kind"] for check in passed}
    unfinished = (any(not rows_of.get(claim) for claim in statement["claims"])
                  or any(check["status"] != "passed" for check in checks))
    if kinds and statement.get("weak"):
        return {"status": "weak", **scope}  # the ledger says why its checks test less than it says
    if kinds & strong:
        return {"status": "not run" if missing and unfinished else "weak" if missing else "covered", **scope}
    if kinds and not strong & set(statement["kinds"]):
        return {"status": "weak", **scope}
    return {"status": "not run", **scope}


def _in_order(values: Iterable[str], order: Sequence[str]) -> list[str]:
    """``values`` in the order the statement claims them, the ones it does not claim last, by name."""
    return sorted(values, key=lambda value: (value not in order, order.index(value) if value in order else 0, value))


def scope_shortfalls(results: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each statement whose checks passed without reaching part of its scope: a line naming what they missed, and
    whether the statement says why for each dimension (``unreached:``). The release gate, ``claims verify`` and
    ``claims lint`` refuse the ones without a reason."""
    shown = {dimension["name"]: {value["name"]: value["shown"] for value in dimension["values"]}
             for dimension in results.get("scope_dimensions", [])}
    found = []
    for lesson in results.get("coverage", []):
        for step in lesson["steps"]:
            for statement in step["statements"]:
                missing = statement.get("unreached") or {}
                if statement["status"] not in ("weak", "covered") or not missing:
                    continue
                reasons = statement.get("unreached_reasons") or {}
                values = "; ".join(shown.get(name, {}).get(value, f"{name}: {value}")
                                   for name, values in missing.items() for value in values)
                explained = all(name in reasons for name in missing)
                found.append((f"{lesson['file']}: statement '{statement['id']}' ({statement['where']}): scope not "
                              f"reached: {values}" + (
                                  "; the statement says why" if explained else
                                  "; add a check (or a witness) that reaches it, narrow the statement's scope to "
                                  "what the text says, or say why under 'unreached:'"), explained))
    return found


def _statement_counts(statements: list[dict[str, Any]]) -> dict[str, int]:
    counts = Counter(statement["status"] for statement in statements)
    return {status: counts[status] for status in STATEMENT_STATUSES}


def found_stubs(payloads: Iterable[dict[str, Any]]) -> set[str]:
    """Every function some check of the run found not implemented (``not_implemented``): a NotImplementedError is
    "not implemented" for the whole function, wherever it was raised."""
    return {function for payload in payloads for function in (payload.get("check") or {}).get("not_implemented") or []}


def _check_row(check: dict[str, Any], stubs: AbstractSet[str] = frozenset()) -> dict[str, Any]:
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


def _claim_status(row: dict[str, Any]) -> str:
    statuses = {check["status"] for check in row["checks"]}
    if row["problems"] or "error" in statuses:
        return "error"
    if "failed" in statuses:
        return "failed"
    if NOT_JUDGED in statuses:  # passed only when every check that ran against the implementation passed
        return NOT_JUDGED
    if statuses == {"skipped"} or not statuses:
        return "skipped"
    return "passed"


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    claims = Counter(row["status"] for row in rows)
    checks = Counter(check["status"] for row in rows for check in row["checks"])
    by_kind = {kind: Counter(check["status"] for row in rows for check in row["checks"] if check["kind"] == kind)
               for kind in KINDS}
    not_judged = Counter(check["not_judged"] for row in rows for check in row["checks"] if check["not_judged"])
    return {
        "claims": {status: claims[status] for status in STATUSES},
        "checks": {status: checks[status] for status in STATUSES},
        "by_kind": {kind: {status: counts[status] for status in STATUSES} for kind, counts in by_kind.items()},
        "not_judged": {why: not_judged[why] for why in NOT_JUDGED_REASONS},
    }


def checks_summary(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """What :func:`judgement_line` reads of a run, from its evidence alone (as the report counts it): the checks by
    status, and the checks not judged by why."""
    stubs = found_stubs(payloads)
    checks = [_check_row(payload["check"], stubs) for payload in payloads if payload.get("check")]
    statuses = Counter(check["status"] for check in checks)
    reasons = Counter(check["not_judged"] for check in checks if check["not_judged"])
    return {"checks": {status: statuses[status] for status in STATUSES},
            "not_judged": {why: reasons[why] for why in NOT_JUDGED_REASONS}}


def judged_verdict(summary: dict[str, Any], partial: bool) -> str:
    """The last line of a run of the claims: how much was judged, and, with checks not judged, what that makes it."""
    line = judgement_line(summary)
    if not summary["checks"].get(NOT_JUDGED):
        return line
    if partial:
        return f"partial verdict ({PARTIAL_FLAG}): {line}"
    return (f"not green: {line}; a check not judged fails the run: write what it waits for, or ask for a partial "
            f"verdict with {PARTIAL_FLAG}")


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
    checks = [(payload, _check_row(payload["check"], stubs)) for payload in payloads
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


MUTANTS_JSON = "mutants.json"


def mutation_inputs_digest(course: Course) -> str:
    """What a mutation run (``claims mutants``) depends on: the implementation's, the claims' and the verifiers'
    sources, and the harness's own (which runs and judges every check)."""
    verifiers = course.root / course.verifiers.replace(".", "/")
    reference = course.root / course.implementation
    digest = hashlib.sha256(package_digest(ENGINE).encode())
    for path in sorted([*reference.rglob("*.py"), *course.claims.rglob("*.yaml"), *verifiers.rglob("*.py")]):
        digest.update(str(path.relative_to(course.root)).encode() + b"\0")
        # Only what the loader reads: a directory, a pipe or a link to a device named *.yaml is the loader's to
        # report, and must neither hang nor crash this digest.
        with contextlib.suppress(Unreadable):
            digest.update(read_claim_file(path, course.root))
    return digest.hexdigest()[:16]


def _mutation(root: Path, impl: str) -> dict[str, Any] | None:
    """What the report says of the last ``claims mutants`` run (the course's ``reports/mutants.json``), for a run of
    the reference; None for another implementation or when there is no such run. ``current`` is False when the
    implementation, the claims, the verifiers or the harness changed since it was measured."""
    course = find_course(root)
    path = course.reports / MUTANTS_JSON
    if impl != course.implementation or not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        overall = found["overall"]
        return {"score": overall["score"], "target": course.mutation_target, "mutants": overall["mutants"],
                "caught": overall["killed"] + overall["timeout"], "equivalent": overall["equivalent"],
                "holes": overall["survived"] + overall["not_reached"],
                "modules": {module: counts["score"] for module, counts in found["modules"].items()},
                "current": found["digest"] == mutation_inputs_digest(course), "file": "mutants.md"}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ClaimsError(f"{path}: not a result of 'claims mutants' ({error}); run 'claims mutants' (tox -e mutants) "
                          "again, or delete the file") from None


def _sharpness(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's perturbations of expected numbers (``_running.sharpness``): counts, score and every survivor."""
    records = [(row, check, record) for row in rows for check in row["checks"] for record in check["sharpness"]]
    counts = summarize([record for _, _, record in records])
    judged = counts[KILLED] + counts[SURVIVED] + counts[EXPLAINED]
    return {**counts, "score": round(counts[KILLED] / judged, 4) if judged else None,
            "survivors": [{"claim": row["id"], "file": row["file"], "line": check["line"] or row["line"],
                           "kind": check["kind"],
                           **{key: record[key] for key in ("key", "written", "perturbed")}}
                          for row, check, record in records if record.get("outcome") == SURVIVED]}


def git(directory: Path, *args: str) -> bytes | None:
    """What ``git args`` prints in ``directory``, or None where git is missing or fails (not a repository)."""
    try:
        done = subprocess.run(["git", *args], cwd=directory, capture_output=True, check=False)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _revision(root: Path) -> str:
    revision = (git(root, "rev-parse", "--short=12", "HEAD") or b"").decode().strip() or "unknown"
    # The run's own staging directory (staging_dir_for) is untracked while the run writes: it is not an edit.
    dirty = git(root, "status", "--porcelain", "--", ".", ":(exclude)reports", ":(exclude,glob)**/.*staging-*/**")
    return f"{revision}+dirty" if (dirty or b"").strip() else revision


def write_reports(directory: Path, payloads: list[dict[str, Any]], lessons: list[dict[str, Any]],
                  options: RunOptions, started: float, root: Path, completeness: dict[str, Any],
                  given: Sequence[str] = (), text: TextReport | None = None) -> dict[str, Any]:
    """Write ``claims.json``, ``claims_report.md``, ``claims_report.html`` and ``figures/`` to ``directory``.

    With a readable course text (``text``), also the annotated text, ``claims_text.html``, which is
    never committed (it quotes the text).

    Everything is first written where the run staged its figures (``options.staging_dir``, or a new
    directory beside ``directory``), which then replaces ``directory`` in one step with signals held
    (:func:`_move_together`), so a full disk or a Ctrl-C leaves the previous report whole and a new
    one is never half there.
    ``completeness`` (``id``, ``complete``, ``incomplete``, ``selection``: the run's, from the plugin or the
    warm path of ``claims verify``) goes into ``run``, and every format shows it; ``given`` is as
    :func:`build_results` takes it.
    Returns the results.
    """
    results = build_results(payloads, lessons, options, started, root, given, text.section if text else None)
    results["run"].update(completeness)
    staging = Path(options.staging_dir) if options.staging_dir else staging_dir_for(directory, str(os.getpid()))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        staging.mkdir(parents=True, exist_ok=True)
        texts = {RESULTS_FILE: results_text(results),
                 MARKDOWN_FILE: render_markdown(results), HTML_FILE: render_html(results, staging)}
        if text is not None and text.state is not None:
            texts[PAGE_FILE] = render_page(text.state, text.catalogue, results)
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")
        (staging / STAGING_OWNER).unlink(missing_ok=True)  # the run's mark, not part of the report
        _move_together(staging, directory, list(texts))
    except OSError as error:
        raise ReportNotWritten(f"the reports could not be written to {directory} ({error}); this run's results are "
                               f"in {_kept_somewhere(results)}") from None
    finally:
        remove_staging(staging)
    return results


def _kept_somewhere(results: dict[str, Any]) -> str:
    """The results, written where this process can write (the temporary directory): the file, or why none."""
    handle, name = tempfile.mkstemp(prefix=f"claims-results-{results['run'].get('id') or os.getpid()}-",
                                    suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(results_text(results))
    except OSError as error:
        return f"no file either ({error})"
    return name


def staging_dir_for(directory: Path, run_id: str) -> Path:
    """Where a run writes its report and figures before they replace ``directory``'s: beside it, or inside it
    when it is a mount point of its own (a rename never crosses file systems)."""
    target = directory.resolve()
    try:
        own_mount = target.is_dir() and target.stat().st_dev != target.parent.stat().st_dev
    except OSError:
        own_mount = False
    return target / f".staging-{run_id}" if own_mount else target.parent / f".{target.name}.staging-{run_id}"


# The file in a staging directory that names the process of the run that made it: a later run removes a staging
# directory whose process is gone (killed before it could remove it), or that is older than STALE_SECONDS.
STAGING_OWNER = ".claims-run-pid"
STALE_SECONDS = 24 * 3600


def claim_staging(staging: Path) -> None:
    """Make a run's staging directory at its start, marked with this process's id (:func:`remove_stale_staging`)."""
    staging.mkdir(parents=True, exist_ok=True)
    (staging / STAGING_OWNER).write_text(f"{os.getpid()}\n", encoding="utf-8")


def remove_staging(staging: Path) -> None:
    """Remove a staging directory (after the move, the previous report), unless a file system is mounted inside it:
    what is mounted there is not the run's to delete."""
    if staging.is_dir() and not staging.is_symlink() and _mount_below(staging) is None:
        shutil.rmtree(staging, ignore_errors=True)


def remove_stale_staging(directory: Path, keep: Path | None = None) -> list[Path]:
    """Remove the staging directories of earlier runs into ``directory`` that no longer exist: the process named in
    the directory (its mark, or the pid its name ends with) is gone, or it is older than a day. A run killed by
    SIGKILL leaves its staging directory (and, on a file system without the one-step exchange, the figures it was
    replacing); the next run into the same directory removes it. Returns what was removed."""
    target = directory.resolve()
    candidates = list(target.parent.glob(f".{glob.escape(target.name)}.staging-*")) if target.parent != target else []
    if target.is_dir():
        candidates += [*target.glob(".staging-*"), *target.glob(".figures-replaced-*")]
    removed = []
    for candidate in candidates:
        if candidate == keep or candidate.is_symlink() or not candidate.is_dir() or not _stale(candidate):
            continue
        remove_staging(candidate)
        if not candidate.exists():
            removed.append(candidate)
    return removed


def _stale(staging: Path) -> bool:
    try:
        age = time.time() - staging.lstat().st_mtime
        mark = staging / STAGING_OWNER
        # Without a mark, a name that ends with a pid (a run without a run id; a run id is 12 hexadecimal digits).
        owner = mark.read_text(encoding="utf-8").strip() if mark.is_file() else staging.name.rpartition("-")[2]
    except (OSError, UnicodeDecodeError):
        return False
    if age > STALE_SECONDS:
        return True
    pid = int(owner) if owner.isdigit() and len(owner) <= 7 else 0  # pid_max is at most 2**22
    return 0 < pid != os.getpid() and not _running(pid)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except (OSError, OverflowError):
        return False
    return True


def report_directory_problem(directory: Path, root: Path | None = None, impl: str | None = None,
                             looked_in: Path | None = None) -> str | None:
    """Why a report cannot be written to ``directory`` (checked before a run, so that no result is lost at its
    end, and nothing but a report is replaced), or None.

    It must be a directory, or one that can be made, where this process can write. A run replaces the whole report
    directory (what it does not write is kept, as hard links), and removes the previous one: so it must not be the
    project (``root``) or hold it, nor a folder of the course (its claims, verifiers, reference implementation,
    cache, tests or docs, the implementation under test ``impl``, in the project or in ``looked_in``, the directory
    it is looked for in first), nor a directory of claim files or one that configures a course, nor hold the working
    directory, nor have a file system mounted inside it.
    """
    target = directory.resolve()
    existing = next(path for path in (target, *target.parents) if path.exists())
    if not existing.is_dir():
        return (f"{directory} cannot hold a report: {existing} is not a directory; give --claims-report a "
                "directory (made if it does not exist)")
    folder = _course_folder(target, root, impl, looked_in)
    if folder is not None:
        return (f"{directory} cannot hold a report: it is {folder}, and a run replaces its report directory whole; "
                "give --claims-report a directory of its own, e.g. my-report (made if it does not exist)")
    mount = _mount_below(target)
    if mount is not None:
        return (f"{directory} cannot hold a report: {mount} inside it is a mount point, and a run replaces its report "
                "directory whole and removes the previous one; unmount it, or give --claims-report a directory "
                "with no file system mounted inside it")
    try:
        probe = tempfile.NamedTemporaryFile(dir=existing, prefix=".claims-probe-")  # noqa: SIM115
        probe.close()
    except OSError as error:
        return f"{directory} cannot hold a report: {existing} cannot be written ({error.strerror or error})"
    return None


def _course_folder(target: Path, root: Path | None, impl: str | None, looked_in: Path | None) -> str | None:
    """What of the project ``target`` is, when it is something a report must not replace; None otherwise."""
    if target == Path(target.anchor):
        return "the file system's root"
    try:
        here: Path | None = Path.cwd().resolve()
    except OSError:  # the working directory was removed
        here = None
    if root is not None:
        root = root.resolve()
        if target == root:
            return f"the project's root ({root})"
        if root.is_relative_to(target):
            return f"a directory that holds the project ({root})"
        course = load_course(root)
        folders = {course.claims: "the course's claims directory", course.cache: "the course's observation cache",
                   root / course.verifiers.partition(".")[0]: "the course's verifier package",
                   root / course.implementation.partition(".")[0]: "the course's reference implementation",
                   root / "tests": "the project's tests", root / "docs": "the project's documentation"}
        if impl:
            folders |= {base / impl.partition(".")[0]: f"the implementation under test ({impl})"
                        for base in (root, looked_in or here) if base is not None}
        found = next((what for folder, what in folders.items() if folder.resolve() == target), None)
        if found is not None:
            return f"{found}, {target}"
    if here is not None and here != target and here.is_relative_to(target):
        return f"a directory that holds the working directory ({here})"
    if target.is_dir():
        if configures_course(target):
            return f"a course's root ({target / 'pyproject.toml'} has a [tool.claims] table)"
        claim_file = next((path for path in sorted(target.iterdir()) if _is_claim_file(path)), None)
        if claim_file is not None:
            return f"a directory of claim files ({claim_file.name})"
    return None


def _is_claim_file(path: Path) -> bool:
    """Whether ``path`` is a regular YAML file with a top-level ``claims:`` (read no further than its first 64 KB)."""
    if path.suffix not in (".yaml", ".yml") or path.is_symlink() or not path.is_file():
        return False
    try:
        with path.open("rb") as file:
            head = file.read(65536)
    except OSError:
        return False
    return re.search(rb"^claims:", head, re.MULTILINE) is not None


def _mount_below(directory: Path) -> str | None:
    """A mount point strictly inside ``directory`` (a symbolic link is not followed), or None."""
    if not directory.is_dir():
        return None
    for parent, names, _ in os.walk(directory):
        for name in names:
            path = os.path.join(parent, name)
            if os.path.ismount(path):
                return path
    return None


def _move_together(staging: Path, directory: Path, names: list[str]) -> None:
    """Replace ``directory``'s report files and figures with ``staging``'s, with SIGINT and SIGTERM held.

    In one step where the system can: what this run does not write (``mutants.*``, a file of the author's) is
    linked into ``staging``, and the two directories are exchanged (:func:`_exchange`), so there is never a
    moment with part of one report and part of another. Where it cannot (not Linux, a file system without the
    exchange, or a report directory that is a mount point of its own, whose staging directory is inside it),
    ``figures/`` and then each file are replaced in turn, so that only a kill between two leaves them mixed.
    """
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        target = directory.resolve()
        if staging.resolve().parent != target:
            for entry in target.iterdir():
                if entry.name not in names and entry.name != "figures" and not entry.name.startswith(".staging-") \
                        and not (staging / entry.name).exists():
                    _link(entry, staging / entry.name)
            if _exchange(staging, target):
                return  # the old report is now at ``staging``, which the caller removes
        old_figures = target / f".figures-replaced-{os.getpid()}"
        if (target / "figures").exists():
            os.replace(target / "figures", old_figures)
        if (staging / "figures").exists():
            os.replace(staging / "figures", target / "figures")
        for name in names:
            os.replace(staging / name, target / name)
        shutil.rmtree(old_figures, ignore_errors=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _link(source: Path, destination: Path) -> None:
    """``source`` at ``destination`` too, without copying where a hard link can be made."""
    if source.is_symlink():
        os.symlink(os.readlink(source), destination)
    elif source.is_dir():
        shutil.copytree(source, destination, symlinks=True, copy_function=_link_or_copy)
    else:
        _link_or_copy(source, destination)


def _link_or_copy(source: str | Path, destination: str | Path) -> None:
    try:
        os.link(source, destination)
    except OSError:  # a file system without hard links, or a file this user may not link
        shutil.copy2(source, destination)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two directories in one atomic rename (Linux's ``renameat2`` with ``RENAME_EXCHANGE``, which Python's
    ``os`` does not offer, hence ctypes); False where the system or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(second))


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


# Where and when it ran, not what it found: results that depend on them differ visibly in the claims.
_VOLATILE_RUN_FIELDS = ("started", "seconds", "revision", "versions", "id")


def normalized(results: dict[str, Any]) -> dict[str, Any]:
    """The results without what changes between runs of the same code: timings, revision, library versions.

    A verifier's observation, or a field nested in one, is a timing when its name contains
    ``seconds`` (an experiment's wall time to solve, say): reported, never compared.
    """
    run = {key: value for key, value in results["run"].items() if key not in _VOLATILE_RUN_FIELDS}

    def without_timings(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: without_timings(item) for key, item in value.items() if "seconds" not in key}
        return [without_timings(item) for item in value] if isinstance(value, list) else value

    def stable(check: dict[str, Any]) -> dict[str, Any]:
        kept = {key: value for key, value in check.items() if key not in ("seconds", "reused")}
        return kept | {"observed": without_timings(check["observed"])}

    claims = [{**row, "checks": [stable(check) for check in row["checks"]]} for row in results["claims"]]
    return {**results, "run": run, "claims": claims}

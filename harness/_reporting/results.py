"""The results document of a run, built only from the evidence its parts carried: each claim's and statement's
status, the coverage of the text, the summaries (checks, sharpness, mutation), and the form two runs are compared in
(:func:`normalized`)."""


from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from claims_harness._claims.claim_file import ClaimEntry
from claims_harness._claims.course import find_course
from claims_harness._claims.expect import EXPLAINED, KILLED, SURVIVED, summarize
from claims_harness._claims.formats import NOT_JUDGED, NOT_JUDGED_REASONS, PARTIAL_FLAG, UNCOVERED, library_versions
from claims_harness._claims.loading import Catalogue
from claims_harness._claims.schema import KINDS, SHAPE_DESCRIPTIONS, STRONG_KINDS, Statement
from claims_harness._claims.scope import Dimension, merge_reached, resolve_scope, unreached
from claims_harness._power.mutation_results import mutation_summary
from claims_harness._reporting.phrases import judgement_line
from claims_harness._reporting.rows import blame_experiments_as_the_run, check_row, found_stubs, function_scoreboard
from claims_harness._running.options import RunOptions

STATUSES = ("passed", "failed", "error", NOT_JUDGED, "skipped")


# What a ledger statement's status means, in the order the report shows them. Which check kinds are strong
# for which shape of statement is the schema's (STRONG_KINDS, SHAPE_DESCRIPTIONS); statement_status decides.
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
            "checks": sum(len(entry.claim.checks) for entry in covering if entry.claim),
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
            row["checks"].append(check_row(payload["check"], stubs))
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
                                     "mutation": mutation_summary(root, options.impl)},
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
                   "shape": statement["shape"], **statement_status(statement, rows_of),
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


def statement_status(statement: dict[str, Any], rows_of: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
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
                  or len(checks) < statement.get("checks", 0)  # a check of a covering claim not selected (-k)
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
    checks = [check_row(payload["check"], stubs) for payload in payloads if payload.get("check")]
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

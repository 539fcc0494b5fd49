"""Results JSON and the Markdown report, built only from the evidence items carried."""

from __future__ import annotations

import json
import platform
import subprocess
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

from jinja2 import UndefinedError

from harness._html import HARNESS_ORIGIN, HTML_FILE, figure_paths, format_value, render_html
from harness._loading import Catalogue, ClaimEntry
from harness._runner import CheckResult, RunOptions
from harness._schema import KINDS, SHAPE_DESCRIPTIONS, STRONG_KINDS, Statement

STATUSES = ("passed", "failed", "error", "skipped")
RESULTS_FILE = "claims.json"
MARKDOWN_FILE = "claims_report.md"
_VERSIONED = ("numpy", "scipy", "sympy", "hypothesis", "pydantic", "pyyaml", "pytest")

# What a ledger statement's status means, in the order the report shows them. Which check kinds are strong
# for which shape of statement is the schema's (STRONG_KINDS, SHAPE_DESCRIPTIONS); _statement_status decides.
STATEMENT_STATUSES = {
    "covered": "a check of a kind strong for its shape (below) passed, and no covering check failed",
    "weak": "covering checks passed and none failed, but the claims covering it have no check of a kind strong "
            "for its shape",
    "failed": "a check of a claim covering it failed or could not run (an error); this wins over any pass, "
              "so red always means broken",
    "not run": "no check decided it in this run, or only weaker ones did while its strong checks were skipped in "
               "this profile or not selected",
    "not checkable": "no claim covers it, and the ledger says why no check can refute or confirm it",
    "missing": "no claim covers it, and the ledger gives no reason",
}
STATEMENT_PRECEDENCE = ("a statement no claim covers is not checkable (with a reason) or missing; otherwise "
                        "failed wins over covered, covered over not run, and not run over weak")
UNCOVERED = ("missing", "weak", "failed")
CHOSEN_MARK = "\u2020"
CHOSEN_LEGEND = (f"{CHOSEN_MARK} marks an expected value the harness chose (a witness, a threshold, a corrected "
                 "value); every other expected value is the text's own")


# The evidence of one pytest item, or of one check reused without pytest: JSON text, as it travels from
# pytest-xdist workers to the controller, so both ways of writing reports read exactly the same values.


def claim_payload(entry: ClaimEntry, catalogue: Catalogue) -> dict[str, Any]:
    """What every item of a claim carries about the claim itself."""
    claim = entry.claim
    info: dict[str, Any] = {"id": entry.id, "where": entry.where}
    if claim is not None:
        info.update(statement=claim.statement, formula=claim.formula, sources=claim.sources,
                    limitations=claim.limitations, erratum=claim.erratum, origin=claim.origin, covers=claim.covers,
                    checks=len(claim.checks))
        info["citations"] = {key: catalogue.sources[key].full_citation for key in claim.sources
                             if key in catalogue.sources}
    return {"claims_dir": str(catalogue.root / Path(entry.file).parent), "file": entry.file,
            "title": catalogue.titles.get(entry.file, entry.file), "line": entry.line, "index": entry.index,
            "claim": info}


def file_payload(catalogue: Catalogue, file: str) -> dict[str, Any]:
    """What the item of a claim file's own problems carries: the file stands in for a claim."""
    return {"claims_dir": str(catalogue.root / Path(file).parent), "file": file,
            "title": catalogue.titles.get(file, file), "line": 1, "index": -1, "claim": {"id": file, "where": None}}


def check_evidence(payload: dict[str, Any], entry: ClaimEntry, index: int, result: CheckResult) -> str:
    assert entry.claim is not None
    check = entry.claim.checks[index]
    record = result.as_dict() | {
        "expected": {key: expectation.as_written() for key, expectation in check.expect.items()},
        "harness_chosen": list(check.harness_chosen), "rejects": check.rejects,
    }
    return json.dumps({**payload, "check_index": index, "check": record})


def problems_evidence(payload: dict[str, Any], problems: list[str]) -> str:
    return json.dumps({**payload, "problems": problems})


def lessons_of(catalogues: list[Catalogue]) -> list[dict[str, Any]]:
    """Every lesson (claim file) with its title, declared steps, claims and statement ledger, for the coverage.

    Each statement carries the claims that cover it (from any file) and the kinds of their checks, so that
    a statement whose claims did not run is told apart from one that no claim could cover strongly.
    """
    lessons = []
    for catalogue in catalogues:
        covering = catalogue.covering()
        for file in catalogue.files:
            ledger = [_ledger_entry(stated.statement, covering[key])
                      for key, stated in catalogue.statements.items() if stated.file == file]
            lessons.append({"file": file, "title": catalogue.titles[file], "steps": catalogue.steps[file],
                            "claims": [[entry.id, entry.where] for entry in catalogue.in_file(file)],
                            "statements": ledger})
    return lessons


def _ledger_entry(statement: Statement, covering: list[ClaimEntry]) -> dict[str, Any]:
    return {"id": statement.id, "where": statement.where, "says": statement.says, "shape": statement.shape,
            "not_checkable": statement.not_checkable, "claims": [entry.id for entry in covering],
            "kinds": sorted({check.kind for entry in covering if entry.claim for check in entry.claim.checks})}


def build_results(payloads: list[dict[str, Any]], lessons: list[dict[str, Any]], options: RunOptions,
                  started: float, root: Path) -> dict[str, Any]:
    """The results document: run metadata, summary counts, coverage, then claims in file and claim order."""
    claims: dict[tuple[str, int], dict[str, Any]] = {}
    for payload in sorted(payloads, key=lambda p: (p["file"], p["index"], p.get("check_index", -1))):
        key = (payload["file"], payload["index"])
        info = payload["claim"]
        row = claims.setdefault(key, {
            "id": info["id"], "where": info.get("where"), "file": payload["file"], "line": payload["line"],
            "lesson": payload.get("title", payload["file"]), "statement": info.get("statement"),
            "formula": info.get("formula"), "sources": info.get("sources", []),
            "citations": info.get("citations", {}), "limitations": info.get("limitations"),
            "erratum": info.get("erratum"), "origin": info.get("origin", "text"), "covers": info.get("covers", []),
            "status": "passed", "problems": [], "checks": [],
        })
        if "problems" in payload:
            row["problems"].extend(payload["problems"])
        if "check" in payload:
            row["checks"].append(_check_row(payload["check"]))
    for row in claims.values():
        row["status"] = _claim_status(row)
    rows = list(claims.values())
    coverage = _coverage(lessons, rows)
    ledger = [statement for lesson in coverage for step in lesson["steps"] for statement in step["statements"]]
    return {
        "run": {
            "impl": options.impl, "profile": options.profile, "seed": options.seed,
            "revision": _revision(root), "versions": _versions(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 2),
        },
        "summary": _summary(rows) | {"statements": _statement_counts(ledger)},
        "coverage_criterion": {
            "shapes": {shape: {"strong_kinds": sorted(STRONG_KINDS[shape]), "description": description}
                       for shape, description in SHAPE_DESCRIPTIONS.items()},
            "statuses": STATEMENT_STATUSES, "precedence": STATEMENT_PRECEDENCE,
        },
        "coverage": coverage,
        "uncovered": [statement for statement in ledger if statement["status"] in UNCOVERED],
        "claims": rows,
    }


def _coverage(lessons: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every step of every lesson with the statuses of its claims and of its ledger's statements."""
    coverage = []
    run_ids = {row["id"] for row in rows}
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        rows_of.setdefault(row["id"], []).append(row)
    for lesson in lessons:
        ledger = [{"id": statement["id"], "where": statement["where"], "says": statement["says"],
                   "shape": statement["shape"], "status": _statement_status(statement, rows_of),
                   "claims": statement["claims"], "not_checkable": statement["not_checkable"]}
                  for statement in lesson.get("statements", [])]
        steps = []
        # Claims and statements of a file whose declared steps are unreadable still need a place in the report.
        undeclared = [row["where"] for row in rows
                      if row["file"] == lesson["file"] and row["where"] not in lesson["steps"]]
        undeclared += [statement["where"] for statement in ledger if statement["where"] not in lesson["steps"]]
        for step in [*lesson["steps"], *dict.fromkeys(step for step in undeclared if step)]:
            ran = [row for row in rows if row["file"] == lesson["file"] and row["where"] == step]
            statuses = Counter(row["status"] for row in ran)
            step_row = {"step": step, "claims": len(ran),
                        "statuses": {status: statuses[status] for status in STATUSES if statuses[status]}}
            # Claims this run did not select (pytest -k) are "not run", never "uncovered".
            unselected = sum(1 for claim, where in lesson.get("claims", []) if where == step and claim not in run_ids)
            if unselected:
                step_row["statuses"]["not run"] = unselected
                step_row["claims"] += unselected
            stated = [statement for statement in ledger if statement["where"] == step]
            step_row["statements"] = stated
            step_row["statement_counts"] = _statement_counts(stated)
            steps.append(step_row)
        coverage.append({"file": lesson["file"], "title": lesson["title"], "steps": steps})
    return coverage


def _statement_status(statement: dict[str, Any], rows_of: dict[str, list[dict[str, Any]]]) -> str:
    """One of STATEMENT_STATUSES, from this run's checks of the claims covering the statement."""
    if not statement["claims"]:
        return "not checkable" if statement["not_checkable"] else "missing"
    ran = [row for claim in statement["claims"] for row in rows_of.get(claim, [])]
    checks = [check for row in ran for check in row["checks"]]
    if any(row["problems"] for row in ran) or any(check["status"] in ("failed", "error") for check in checks):
        return "failed"
    strong = STRONG_KINDS[statement["shape"]]
    passed = {check["kind"] for check in checks if check["status"] == "passed"}
    if passed & strong:
        return "covered"
    if passed and not strong & set(statement["kinds"]):
        return "weak"
    return "not run"


def _statement_counts(statements: list[dict[str, Any]]) -> dict[str, int]:
    counts = Counter(statement["status"] for statement in statements)
    return {status: counts[status] for status in STATEMENT_STATUSES}


def _check_row(check: dict[str, Any]) -> dict[str, Any]:
    order = ("kind", "verifier", "verifier_location", "uses", "status", "rejects", "expected", "harness_chosen",
             "observed", "comparisons", "seed", "seconds", "reused", "error", "skip_reason", "reproduce")
    row = {key: check.get(key) for key in order}
    row["harness_chosen"] = row["harness_chosen"] or []
    # A comparison of an element (``key[2]``) is of the expected value ``key``.
    row["comparisons"] = [{**comparison, "stated_by": "harness" if any(
        comparison["key"] == key or comparison["key"].startswith(f"{key}[") for key in row["harness_chosen"])
        else "text"} for comparison in row["comparisons"] or []]
    return row


def _claim_status(row: dict[str, Any]) -> str:
    statuses = {check["status"] for check in row["checks"]}
    if row["problems"] or "error" in statuses:
        return "error"
    if "failed" in statuses:
        return "failed"
    if statuses == {"skipped"} or not statuses:
        return "skipped"
    return "passed"


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    claims = Counter(row["status"] for row in rows)
    checks = Counter(check["status"] for row in rows for check in row["checks"])
    by_kind = {kind: Counter(check["status"] for row in rows for check in row["checks"] if check["kind"] == kind)
               for kind in KINDS}
    return {
        "claims": {status: claims[status] for status in STATUSES},
        "checks": {status: checks[status] for status in STATUSES},
        "by_kind": {kind: {status: counts[status] for status in STATUSES} for kind, counts in by_kind.items()},
    }


def _revision(root: Path) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    revision = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", ".", ":(exclude)reports")
    return f"{revision}+dirty" if dirty else revision


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def write_reports(directory: Path, payloads: list[dict[str, Any]], lessons: list[dict[str, Any]],
                  options: RunOptions, started: float, root: Path) -> dict[str, Any]:
    """Write ``claims.json`` and ``claims_report.md`` to ``directory``; return the results."""
    results = build_results(payloads, lessons, options, started, root)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / RESULTS_FILE).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (directory / MARKDOWN_FILE).write_text(render_markdown(results), encoding="utf-8")
    (directory / HTML_FILE).write_text(render_html(results, directory), encoding="utf-8")
    return results


def render_markdown(results: dict[str, Any]) -> str:
    run, summary = results["run"], results["summary"]
    out = [
        "# Module 4 claims report",
        "",
        "Generated by `claims verify`; do not edit by hand. Every claim below is a statement of the module "
        "\"Policy gradients: from REINFORCE to PPO\" with the checks that can refute it, except the claims marked "
        "*added by the harness*: consequences or caveats the harness adds, which the text does not state. "
        f"In the expected values, {CHOSEN_LEGEND}.",
        "",
        f"- implementation under test: `{run['impl']}`; profile: `{run['profile']}`; global seed: {run['seed']}",
        f"- revision: `{run['revision']}`; started {run['started']}; {run['seconds']} s",
        "- versions: " + ", ".join(f"{name} {version}" for name, version in run["versions"].items()),
        "",
        "## Summary",
        "",
        "| | " + " | ".join(STATUSES) + " |",
        "|---|" + "---|" * len(STATUSES),
        "| claims | " + " | ".join(str(summary["claims"][s]) for s in STATUSES) + " |",
        "| checks | " + " | ".join(str(summary["checks"][s]) for s in STATUSES) + " |",
    ]
    out += [f"| {kind} checks | " + " | ".join(str(counts[s]) for s in STATUSES) + " |"
            for kind, counts in summary["by_kind"].items() if any(counts.values())]
    statements = summary["statements"]
    out += ["", "| | " + " | ".join(statements) + " |", "|---|" + "---|" * len(statements),
            "| statements of the text | " + " | ".join(str(n) for n in statements.values()) + " |"]
    broken = [row for row in results["claims"] if row["status"] in ("failed", "error")]
    if broken:
        out += ["", "## Failures and errors", ""]
        for row in broken:
            out.append(f"- `{row['id']}` ({row['where']}): {_badge(row['status'])}")
            out += [f"  - `{check['reproduce']}`" for check in row["checks"] if check["status"] in ("failed", "error")]
    errata = [row for row in results["claims"] if row["erratum"]]
    if errata:
        out += ["", "## Errata: where the text itself is wrong or imprecise", ""]
        out += [f"- `{row['id']}` ({row['where']}): {' '.join(row['erratum'].split())}" for row in errata]
    out += _render_coverage(results)
    placed = {(lesson["file"], step["step"]) for lesson in results["coverage"] for step in lesson["steps"]}
    # Claims under no step: the problems of a file that cannot be read, say.
    unplaced = [row for row in results["claims"] if (row["file"], row["where"]) not in placed]
    for lesson in results["coverage"]:
        out += ["", f"## {lesson['title']}"]
        for step in lesson["steps"]:
            out += ["", f"### Step {step['step']}"]
            if step["statements"]:
                out += ["", "Statements of this step:", ""]
                out += [_render_statement(statement) for statement in step["statements"]]
            for row in results["claims"]:
                if (row["file"], row["where"]) == (lesson["file"], step["step"]):
                    out += _render_claim(row)
        out += _render_unplaced([row for row in unplaced if row["file"] == lesson["file"]])
    files = {lesson["file"] for lesson in results["coverage"]}
    orphans = [row for row in unplaced if row["file"] not in files]
    for title in dict.fromkeys(row["lesson"] for row in orphans):
        out += ["", f"## {title}", *_render_unplaced([row for row in orphans if row["lesson"] == title])]
    return "\n".join(out) + "\n"


def _render_unplaced(rows: list[dict[str, Any]]) -> list[str]:
    return ["", "### (step unknown)", *[line for row in rows for line in _render_claim(row)]] if rows else []


def _render_coverage(results: dict[str, Any]) -> list[str]:
    criterion = results["coverage_criterion"]
    statuses = list(criterion["statuses"])
    out = ["", "## Coverage", "",
           "Every checkable statement of the text is in the ledger of its step (`statements:` in the claim files), "
           "and each claim names the statements it checks (`covers:`). A statement's status comes from this "
           "run's checks of the claims covering it:", ""]
    out += [f"- **{status}**: {description}" for status, description in criterion["statuses"].items()]
    out += ["", f"When several apply, {criterion['precedence']}. Which kinds of check are "
            "strong depends on the statement's shape:", ""]
    out += [f"- `{shape}` ({', '.join(item['strong_kinds'])}): {item['description']}"
            for shape, item in criterion["shapes"].items()]
    out += ["", "| step | statements | " + " | ".join(statuses) + " | claims |",
            "|---|---|" + "---|" * len(statuses) + "---|"]
    for lesson in results["coverage"]:
        for step in lesson["steps"]:
            counts = step["statement_counts"]
            claims = ", ".join(f"{n} {status}" for status, n in step["statuses"].items()) if step["claims"] else "none"
            cells = [f"**{counts[s]}**" if counts[s] and s in UNCOVERED else str(counts[s]) for s in statuses]
            out.append(f"| {step['step']} | {len(step['statements']) or '**none**'} | " + " | ".join(cells)
                       + f" | {claims} |")
    out += ["", "### Statements not covered (missing, weak or failed)", ""]
    uncovered = results["uncovered"]
    out += [f"- `{s['id']}` ({s['where']}, {s['shape']}): {_badge(s['status'])}: {_one_line(s['says'])}"
            + (f" (claims: {', '.join(f'`{c}`' for c in s['claims'])})" if s["claims"] else "") for s in uncovered]
    if not uncovered:
        out.append("None: every statement of the ledger is covered, not run in this profile, or not checkable.")
    excused = [s for lesson in results["coverage"] for step in lesson["steps"] for s in step["statements"]
               if s["status"] == "not checkable"]
    if excused:
        out += ["", "### Not checkable, and why", ""]
        out += [f"- `{s['id']}` ({s['where']}): {_one_line(s['says'])} *Why not:* {_one_line(s['not_checkable'])}"
                for s in excused]
    return out


def _render_statement(statement: dict[str, Any]) -> str:
    status = statement["status"]
    shape = "" if status == "not checkable" else f" ({statement['shape']})"
    line = f"- `{statement['id']}`{shape}: {_badge(status, UNCOVERED)}: {_one_line(statement['says'])}"
    if statement["claims"]:
        line += f" (claims: {', '.join(f'`{claim}`' for claim in statement['claims'])})"
    if status == "not checkable":
        line += f" *Why not:* {_one_line(statement['not_checkable'])}"
    return line


def _render_claim(row: dict[str, Any]) -> list[str]:
    harness = row["origin"] == "harness"
    out = ["", f"#### `{row['id']}`: {_badge(row['status'])}" + (" (added by the harness)" if harness else ""), ""]
    if row["statement"]:
        out += [row["statement"].strip(), ""]
    if row["formula"]:
        out += ["$$", row["formula"].strip(), "$$", ""]
    if harness:
        out.append(f"- *{HARNESS_ORIGIN}*")
    if row["covers"]:
        out.append(f"- covers: {', '.join(f'`{key}`' for key in row['covers'])}")
    for key in row["sources"]:
        out.append(f"- source `{key}`: {row['citations'].get(key, '(not in the registry)')}")
    if row["limitations"]:
        out.append(f"- limitations: {row['limitations'].strip()}")
    if row["erratum"]:
        out.append(f"- **erratum**: {row['erratum'].strip()}")
    out.append(f"- defined at `{row['file']}:{row['line']}`")
    for problem in row["problems"]:
        out.append(f"- **cannot be loaded**: {problem}")
    for check in row["checks"]:
        out += ["", f"**{check['kind']}** check, verifier `{check['verifier']}` (`{check['verifier_location']}`)"
                f"{', uses ' + ', '.join(f'`{u}`' for u in check['uses']) if check['uses'] else ''}: "
                f"{_badge(check['status'])}, seed {check['seed']}, {check['seconds']} s"
                f"{' (observations reused from the cache)' if check['reused'] else ''}"]
        if check["rejects"]:
            out += ["", f"Rejects: {_one_line(check['rejects'])}"]
        if check["comparisons"]:
            out += ["", f"| observed | expected (stated by the text; {CHOSEN_MARK} chosen by the harness) | "
                    "observed value | rule | verdict |", "|---|---|---|---|---|"]
            out += [f"| `{c['key']}` | {_cell(c['expected'])}"
                    f"{' ' + CHOSEN_MARK if c['stated_by'] == 'harness' else ''} | "
                    f"{_cell(format_value(c['observed']))} | "
                    f"{_cell(c['rule'])} | {'ok' if c['passed'] else '**FAILED**'} |" for c in check["comparisons"]]
            if any(c["stated_by"] == "harness" for c in check["comparisons"]):
                out += ["", f"{CHOSEN_MARK} chosen by the harness, not stated by the text: "
                        + ", ".join(f"`{key}`" for key in check["harness_chosen"])]
        extra = {k: v for k, v in check["observed"].items() if k not in check["expected"]}
        if extra:
            out.append("")
            out += [f"- also observed `{key}`: {format_value(value)}" for key, value in extra.items()]
        if check["error"]:
            out += ["", "```", check["error"].rstrip(), "```"]
        if check["skip_reason"]:
            out += ["", f"Skipped: {check['skip_reason']}."]
        if check["status"] in ("failed", "error"):
            out += ["", f"Reproduce: `{check['reproduce']}`"]
    return out


def _badge(status: str, loud: tuple[str, ...] | None = None) -> str:
    """The status, in capitals and bold when a reader must look: anything but a pass, or one of ``loud``."""
    return f"**{status.upper()}**" if (status != "passed" if loud is None else status in loud) else status


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# Where and when it ran, not what it found: results that depend on them differ visibly in the claims.
_VOLATILE_RUN_FIELDS = ("started", "seconds", "revision", "versions")


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


def snapshot(directory: Path) -> dict[str, Any]:
    """What a report directory says, apart from timings: for comparing a fresh run with a committed one."""
    results_file = directory / RESULTS_FILE
    if not results_file.is_file():
        return {}
    results = json.loads(results_file.read_text(encoding="utf-8"))
    state: dict[str, Any] = {RESULTS_FILE: normalized(results)}
    for name, render in ((MARKDOWN_FILE, render_markdown), (HTML_FILE, lambda r: render_html(r, directory))):
        path = directory / name
        try:
            text = render(results)
        except (KeyError, TypeError, UndefinedError):  # written by an older harness, with fields this one needs
            text = None
        state[name] = text is not None and path.is_file() and path.read_text(encoding="utf-8") == text
    # The figures the claims' evidence names; other files in figures/ belong to other commands.
    named = {path for row in results["claims"] for check in row["checks"] for path in figure_paths(check["observed"])}
    for path in sorted(named):
        figure = directory / path
        state[path] = figure.read_bytes() if figure.is_file() else None
    return state


def compare_snapshots(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """How a fresh report differs from the one that was there, in words; empty when only timings differ."""
    if not before:
        return [f"there was no {RESULTS_FILE} to compare with"]
    differences = []
    old, new = before[RESULTS_FILE], after[RESULTS_FILE]
    run_fields = sorted(old["run"].keys() | new["run"].keys())
    differences += [f"run field '{key}' was {old['run'].get(key)!r}, is {new['run'].get(key)!r}"
                    for key in run_fields if old["run"].get(key) != new["run"].get(key)]
    old_claims = {row["id"]: row for row in old["claims"]}
    new_claims = {row["id"]: row for row in new["claims"]}
    differences += [f"claim '{claim}' is new" for claim in new_claims.keys() - old_claims.keys()]
    differences += [f"claim '{claim}' is gone" for claim in old_claims.keys() - new_claims.keys()]
    differences += [f"claim '{claim}' changed (status {old_claims[claim]['status']} -> {new_claims[claim]['status']})"
                    for claim in old_claims.keys() & new_claims.keys() if old_claims[claim] != new_claims[claim]]
    if [row["id"] for row in old["claims"]] != [row["id"] for row in new["claims"]] and not differences:
        differences.append("the order of claims changed")
    old_statements, new_statements = _statement_statuses(old), _statement_statuses(new)
    differences += [f"statement '{key}' was {old_statements.get(key, 'not in the ledger')}, is "
                    f"{new_statements.get(key, 'not in the ledger')}" for key in old_statements.keys() | new_statements
                    if old_statements.get(key) != new_statements.get(key)]
    differences += [f"{name} did not match the {RESULTS_FILE} beside it" for name in (MARKDOWN_FILE, HTML_FILE)
                    if not before[name]]
    figures = sorted(key for key in before.keys() | after.keys() if key.startswith("figures/"))
    differences += [f"{figure} changed" for figure in figures if before.get(figure) != after.get(figure)]
    if not differences and old != new:
        differences.append("summary or coverage changed")
    return sorted(differences)


def _statement_statuses(results: dict[str, Any]) -> dict[str, str]:
    """Every ledger statement's status; none in a report written before there was a ledger."""
    return {statement["id"]: statement["status"] for lesson in results["coverage"]
            for step in lesson["steps"] for statement in step.get("statements", [])}

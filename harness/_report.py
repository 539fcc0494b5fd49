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

from harness._html import HTML_FILE, figure_paths, format_value, render_html
from harness._loading import Catalogue, ClaimEntry
from harness._runner import CheckResult, RunOptions
from harness._schema import KINDS

STATUSES = ("passed", "failed", "error", "skipped")
RESULTS_FILE = "claims.json"
MARKDOWN_FILE = "claims_report.md"
_VERSIONED = ("numpy", "scipy", "sympy", "hypothesis", "pydantic", "pyyaml", "pytest")


# The evidence of one pytest item, or of one check reused without pytest: JSON text, as it travels from
# pytest-xdist workers to the controller, so both ways of writing reports read exactly the same values.


def claim_payload(entry: ClaimEntry, catalogue: Catalogue) -> dict[str, Any]:
    """What every item of a claim carries about the claim itself."""
    claim = entry.claim
    info: dict[str, Any] = {"id": entry.id, "where": entry.where}
    if claim is not None:
        info.update(statement=claim.statement, formula=claim.formula, sources=claim.sources,
                    limitations=claim.limitations, erratum=claim.erratum, checks=len(claim.checks))
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
    expect = entry.claim.checks[index].expect
    record = result.as_dict() | {"expected": {key: expectation.as_written() for key, expectation in expect.items()}}
    return json.dumps({**payload, "check_index": index, "check": record})


def problems_evidence(payload: dict[str, Any], problems: list[str]) -> str:
    return json.dumps({**payload, "problems": problems})


def lessons_of(catalogues: list[Catalogue]) -> list[dict[str, Any]]:
    """Every lesson (claim file) with its title, declared steps and claims, for the report's coverage."""
    return [{"file": file, "title": catalogue.titles[file], "steps": catalogue.steps[file],
             "claims": [[entry.id, entry.where] for entry in catalogue.in_file(file)]}
            for catalogue in catalogues for file in catalogue.files]


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
            "erratum": info.get("erratum"),
            "status": "passed", "problems": [], "checks": [],
        })
        if "problems" in payload:
            row["problems"].extend(payload["problems"])
        if "check" in payload:
            row["checks"].append(_check_row(payload["check"]))
    for row in claims.values():
        row["status"] = _claim_status(row)
    rows = list(claims.values())
    return {
        "run": {
            "impl": options.impl, "profile": options.profile, "seed": options.seed,
            "revision": _revision(root), "versions": _versions(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 2),
        },
        "summary": _summary(rows),
        "coverage": _coverage(lessons, rows),
        "claims": rows,
    }


def _coverage(lessons: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every step of every lesson with the statuses of its claims; a step with none is uncovered."""
    coverage = []
    run_ids = {row["id"] for row in rows}
    for lesson in lessons:
        steps = []
        # Claims of a file whose declared steps are unreadable still need a place in the report.
        undeclared = [row["where"] for row in rows
                      if row["file"] == lesson["file"] and row["where"] not in lesson["steps"]]
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
            steps.append(step_row)
        coverage.append({"file": lesson["file"], "title": lesson["title"], "steps": steps})
    return coverage


def _check_row(check: dict[str, Any]) -> dict[str, Any]:
    order = ("kind", "verifier", "verifier_location", "uses", "status", "expected", "observed", "comparisons",
             "seed", "seconds", "reused", "error", "skip_reason", "reproduce")
    return {key: check.get(key) for key in order}


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
        "\"Policy gradients: from REINFORCE to PPO\" with the checks that can refute it.",
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
    out += ["", "## Coverage", "", "Claims per step of the module; a step with no claim is uncovered.", ""]
    for lesson in results["coverage"]:
        cells = [f"{step['step']}: " + (", ".join(f"{n} {status}" for status, n in step["statuses"].items())
                                        if step["claims"] else "**uncovered**") for step in lesson["steps"]]
        out.append(f"- {lesson['title']}: " + "; ".join(cells))
    lesson = step = None
    for row in results["claims"]:
        if row["lesson"] != lesson:
            lesson = row["lesson"]
            out += ["", f"## {lesson}"]
            step = None
        if row["where"] != step:
            step = row["where"]
            out += ["", f"### Step {step}" if step else "### (step unknown)"]
        out += _render_claim(row)
    return "\n".join(out) + "\n"


def _render_claim(row: dict[str, Any]) -> list[str]:
    out = ["", f"#### `{row['id']}`: {_badge(row['status'])}", ""]
    if row["statement"]:
        out += [row["statement"].strip(), ""]
    if row["formula"]:
        out += ["$$", row["formula"].strip(), "$$", ""]
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
                f"{' (observations reused from the cache)' if check['reused'] else ''}", ""]
        if check["comparisons"]:
            out += ["| observed | expected (as the text states it) | observed value | rule | verdict |",
                    "|---|---|---|---|---|"]
            out += [f"| `{c['key']}` | {_cell(c['expected'])} | {_cell(format_value(c['observed']))} | "
                    f"{_cell(c['rule'])} | {'ok' if c['passed'] else '**FAILED**'} |" for c in check["comparisons"]]
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


def _badge(status: str) -> str:
    return status if status == "passed" else f"**{status.upper()}**"


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
    rendered = {MARKDOWN_FILE: render_markdown(results), HTML_FILE: render_html(results, directory)}
    for name, text in rendered.items():
        path = directory / name
        state[name] = path.is_file() and path.read_text(encoding="utf-8") == text
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
    differences += [f"{name} did not match the {RESULTS_FILE} beside it" for name in (MARKDOWN_FILE, HTML_FILE)
                    if not before[name]]
    figures = sorted(key for key in before.keys() | after.keys() if key.startswith("figures/"))
    differences += [f"{figure} changed" for figure in figures if before.get(figure) != after.get(figure)]
    if not differences and old != new:
        differences.append("summary or coverage changed")
    return sorted(differences)

"""The Markdown report, rendered from the results document alone.

Every string that comes from a claim file (ids, steps, statements, limitations, errata, the
ledger's text, problems, observed strings, rules, reasons) or from a run (tracebacks, commands)
reaches the Markdown through one of four functions: :func:`text` for prose within a line,
:func:`paragraph` for prose that starts a line, :func:`code` for a code span and :func:`fenced`
for a block. Each makes the string
render as itself: no raw HTML, link, emphasis or heading passes, one table cell stays one cell,
and a newline or a backtick in an id cannot start a line or close a span. A renderer (GitHub,
CommonMark, GFM) shows the literal text; the source stays readable, since only characters that
would mean something are escaped.

Rendering is linear in the size of the report: claims are grouped by their step once, not
searched for at every step.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from claims_harness._claims.formats import (
    FALSIFYING_KEY,
    HARNESS_ORIGIN,
    IN_FLOATS_NOTES,
    NOT_JUDGED,
    UNCOVERED,
    USED_BY_FAILING,
    culprits,
    format_falsifying,
    format_observed,
    headline,
    hint,
    rejects_text,
)
from claims_harness._claims.scope import describe_scope
from claims_harness._reporting.phrases import mutation_line, not_judged_line, scoreboard_line, sharpness_line
from claims_harness.errors import visible

CHOSEN_MARK = "\u2020"
CHOSEN_LEGEND = (f"{CHOSEN_MARK} marks an expected value the harness chose (a witness, a threshold, a corrected "
                 "value); every other expected value is the text's own")

# --------------------------------------------------------------------------- escaping

# Characters that are markup wherever they stand: code spans, emphasis (``*`` always; ``_`` except inside a word,
# where GFM never reads it as emphasis), links, images and reference definitions (each needs an opening ``[``),
# raw HTML and autolinks (a ``<`` before a letter, ``/``, ``!`` or ``?``), table cells, strikethrough, math
# (GitHub), headings' closing sequences, a backslash that would escape what follows (or end a line with a break),
# and an ampersand that would start a character reference. Anything else is left as written, to keep the source
# readable: ``x <= 1``, ``a > b``, ``R & D``, ``s]``.
_INLINE_MARKUP = re.compile(r"[`*\[|~$#]|<(?=[A-Za-z/!?])|(?<![^\W_])_|_(?![^\W_])|\\(?=[!-/:-@\[-`{-~]|$)"
                            r"|&(?=#?\w+;)")
# Markup only at the start of a line: a block quote, a list item, a setext underline, a numbered list item.
_BLOCK_START = re.compile(r"^([>+=-]|\d+(?=[.)]))")


def text(value: Any) -> str:
    """``value`` as prose on one line that renders as itself within a line: a list item, a heading or a cell."""
    return _INLINE_MARKUP.sub(lambda match: "\\" + match.group(), visible(" ".join(str(value).split())))


def paragraph(value: Any) -> str:
    """``value`` as :func:`text` that begins a line of its own, where a leading ``>``, ``-`` or ``1.`` is markup."""
    return _BLOCK_START.sub(lambda match: match.group() + "\\" if match.group()[0].isdigit() else "\\" + match.group(),
                            text(value), count=1)


def code(value: Any, cell: bool = False) -> str:
    """``value`` as one code span: fenced by more backticks than it holds, its line breaks shown as ``\\n``.

    In a table cell (``cell``) a ``|`` is escaped, which GFM requires even inside a code span.
    """
    content = visible(str(value))
    if cell:
        content = content.replace("|", "\\|")
    fence = "`" * (_longest_run(content, "`") + 1)
    if content.startswith(("`", " ")) or content.endswith(("`", " ")):
        content = f" {content} "  # a renderer strips one space at each end, so the content stays as it is
    return f"{fence}{content}{fence}"


def fenced(value: str, info: str = "") -> list[str]:
    """``value`` as a fenced block, lines kept, under a fence longer than any run of backticks in it."""
    fence = "`" * max(3, _longest_run(value, "`") + 1)
    return [fence + info, visible(value.rstrip(), keep="\n\t"), fence]


def _longest_run(value: str, char: str) -> int:
    if char not in value:
        return 0
    return max(len(run) for run in re.findall(f"{re.escape(char)}+", value))


def _badge(status: str, loud: tuple[str, ...] | None = None) -> str:
    """The status, in capitals and bold when a reader must look: anything but a pass, or one of ``loud``."""
    shown = text(status)
    return f"**{shown.upper()}**" if (status != "passed" if loud is None else status in loud) else shown


def _codes(values: list[Any]) -> str:
    return ", ".join(code(value) for value in values)


# --------------------------------------------------------------------------- the report


def render_markdown(results: dict[str, Any]) -> str:
    run, summary = results["run"], results["summary"]
    statuses = list(summary["claims"])
    out = [
        f"# Claims report: {text(run.get('course', 'the course'))}",
        "",
        "Generated by `claims verify`; do not edit by hand. Every claim below is a statement of the text "
        "with the checks that can refute it, except the claims marked "
        "*added by the harness*: consequences or caveats the harness adds, which the text does not state. "
        f"In the expected values, {CHOSEN_LEGEND}.",
        "",
        *_completeness(run),
        *_not_judged(summary),
        f"- implementation under test: {code(run['impl'])}; profile: {code(run['profile'])}; "
        f"global seed: {text(run['seed'])}",
        f"- revision: {code(run['revision'])}; started {text(run['started'])}; {text(run['seconds'])} s",
        "- versions: " + ", ".join(f"{text(name)} {text(version)}" for name, version in run["versions"].items()),
        *_render_functions(results),
        "",
        "## Summary",
        "",
        "| | " + " | ".join(text(status) for status in statuses) + " |",
        "|---|" + "---|" * len(statuses),
        "| claims | " + " | ".join(text(summary["claims"][s]) for s in statuses) + " |",
        "| checks | " + " | ".join(text(summary["checks"][s]) for s in statuses) + " |",
    ]
    out += [f"| {text(kind)} checks | " + " | ".join(text(counts[s]) for s in statuses) + " |"
            for kind, counts in summary["by_kind"].items() if any(counts.values())]
    statements = summary["statements"]
    out += ["", "| | " + " | ".join(text(status) for status in statements) + " |",
            "|---|" + "---|" * len(statements),
            "| statements of the text | " + " | ".join(text(n) for n in statements.values()) + " |"]
    out += _render_sharpness(summary.get("sharpness"))
    if summary.get("mutation"):
        out += ["", paragraph(mutation_line(summary["mutation"]))]
    out += _render_text(results.get("text"))
    broken = [row for row in results["claims"] if row["status"] in ("failed", "error")]
    if broken:
        out += ["", "## Failures and errors", ""]
        for row in broken:
            if row["problems"] or not row["checks"]:
                out.append(f"- {code(row['id'])} ({text(row['where'])}): {_badge(row['status'])}")
            for check in row["checks"]:
                if check["status"] not in ("failed", "error"):
                    continue
                blamed = culprits(check)
                first = headline(blamed, row["where"], row["id"], check["status"], row["statement"] or "")
                out.append(f"- {_badge(check['status'])} {text(first)}")
                rejects = hint(check.get("rejects"), check["uses"] or [], blamed)
                if rejects:
                    out.append(f"  - this check is there to catch {text(rejects)}")
                if (check.get("observed") or {}).get(FALSIFYING_KEY):
                    out.append(f"  - a failing input, what the implementation did with it and a line of Python that "
                               f"reproduces it: under {code(row['id'])} below")
                out.append(f"  - reproduce: {code(check['reproduce'])}")
    out += _render_notes(results)
    out += _render_coverage(results)
    out += _render_lessons(results)
    return "\n".join(out) + "\n"


def _render_sharpness(found: dict[str, Any] | None) -> list[str]:
    """How many expected numbers, moved one printed unit, turn their check red; every survivor, located."""
    if not found or found["score"] is None:
        return []
    out = ["", paragraph(sharpness_line(found))]
    if found["survivors"]:
        out += ["", "Survivors (the check cannot tell the number from its neighbour, and the claim file gives no "
                "reason):", ""]
        out += [f"- {code(survivor['file'] + ':' + str(survivor['line']))}: {code(survivor['claim'])} "
                f"({text(survivor['kind'])}): {code(survivor['key'])} expected {text(survivor['written'])} still "
                f"passes as {text(survivor['perturbed'])}" for survivor in found["survivors"]]
    return out


def _render_text(found: dict[str, Any] | None) -> list[str]:
    """The course text's state: its documents and fingerprints, each statement's anchor, what no one holds."""
    if found is None:
        return []
    out = ["", "## The text", ""]
    if not found.get("available"):
        return [*out, paragraph(f"**The course text was not read**: {found.get('error')}. This report says nothing "
                                "of the statements' places, and the release gate refuses it.")]
    out += ["| document | path | fingerprint | steps | blocks |", "|---|---|---|---|---|"]
    out += [f"| {text(document['name'])} | {code(document['path'], cell=True)} | {code(document['fingerprint'])} | "
            f"{document['steps']} | {document['blocks']} |" for document in found["documents"]]
    counts = ", ".join(f"{count} {status}" for status, count in found["counts"].items())
    items = "; ".join(f"{kind}: {value['held']} held and {value['marked']} marked as nothing checkable, of "
                      f"{value['total']}" for kind, value in found["items"].items())
    out += ["", paragraph(f"Statements against the text: {counts}. Blocks no statement stands on and no mark "
                          f"excuses: {len(found['uncovered_blocks'])}; numbers and formulas no one holds: "
                          f"{len(found['unheld_numbers'])}. {items}.") +
            ("" if found["clean"] else " **The text is not clean**: the release gate fails until the author "
                                       "reviews it (`claims text status`).")]
    return out


def _not_judged(summary: dict[str, Any]) -> list[str]:
    """A loud line for a run with checks not judged (a stub, a declined call); none when every check was judged."""
    line = not_judged_line(summary)
    return [f"**NOT JUDGED**: {text(line)}", ""] if line else []


def _render_functions(results: dict[str, Any]) -> list[str]:
    """For an implementation other than the reference: one row per function the run exercised, failing first."""
    rows = results.get("functions") or []
    if not rows:
        return []
    out = ["", f"## Functions of {code(results['run']['impl'])}", "", paragraph(scoreboard_line(rows)), "",
           "| function | claims | passed | failed | used by a failing check | not implemented | declined | not run | |",
           "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        note = ("the reference's, taken as given" if row["given"] else
                "" if row["implemented"] else "**not implemented yet**")
        failing = f"failing: {_codes(row['failing_claims'])}" if row["failing_claims"] and not row["given"] else ""
        note = "; ".join(part for part in (note, failing) if part)
        out.append(f"| {code(row['function'], cell=True)} | {row['claims']} | {row['passed']} | "
                   f"{_badge('failed') + ' ' if row['failed'] and not row['given'] else ''}{row['failed']} | "
                   f"{row.get(USED_BY_FAILING, 0)} | {row['not implemented']} | {row.get('declined', 0)} | "
                   f"{row['not run']} | {note} |")
    return out


def _completeness(run: dict[str, Any]) -> list[str]:
    """Loud lines for a run that did not finish or did not select every check; none for a whole run."""
    out = []
    if run.get("complete") is False:
        out.append(f"**INCOMPLETE RUN**: {text(run.get('incomplete') or 'the run did not finish')}. "
                   "Claims that did not run are missing below; this report must not be released.")
    if run.get("selection", "all") != "all":
        out.append(f"**PARTIAL SELECTION**: {text(run['selection'])}; claims not selected are not run.")
    return [*out, ""] if out else []


def _render_lessons(results: dict[str, Any]) -> list[str]:
    """Each lesson's steps with their ledger and claims, then the claims under no step, each claim once."""
    placed = {(lesson["file"], step["step"]) for lesson in results["coverage"] for step in lesson["steps"]}
    at_step: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    # Claims under no step: the problems of a file that cannot be read, say; by file, and by lesson for a file
    # that is not a lesson of the coverage at all.
    unplaced: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in results["claims"]:
        if (row["file"], row["where"]) in placed:
            at_step[row["file"], row["where"]].append(row)
        else:
            unplaced[row["file"]].append(row)
    anchors = (results.get("text") or {}).get("statements", {})
    out = []
    for lesson in results["coverage"]:
        out += ["", f"## {text(lesson['title'])}"]
        for step in lesson["steps"]:
            out += ["", f"### Step {text(step['step'])}"]
            if step["statements"]:
                out += ["", "Statements of this step:", ""]
                out += [_render_statement(statement, results.get("scope_dimensions", []), anchors.get(statement["id"]))
                        for statement in step["statements"]]
            for row in at_step[lesson["file"], step["step"]]:
                out += _render_claim(row)
        out += _render_unplaced(unplaced.pop(lesson["file"], []))
    orphans: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in (row for rows in unplaced.values() for row in rows):
        orphans[row["lesson"]].append(row)
    for title, rows in orphans.items():
        out += ["", f"## {text(title)}", *_render_unplaced(rows)]
    return out


def _render_notes(results: dict[str, Any]) -> list[str]:
    """What the author of the text should read: the errata, the clarifications and the small faults found."""
    errata = [row for row in results["claims"] if row["erratum"]]
    clarifications = [row for row in results["claims"] if row.get("clarification")]
    notes = results.get("notes", [])
    if not (errata or clarifications or notes):
        return []
    out = ["", "## Notes to the author"]
    if errata:
        out += ["", "### Errata: where the text is wrong", ""]
        out += [f"- {code(row['id'])} ({text(row['where'])}): {text(row['erratum'])}" for row in errata]
    if clarifications:
        out += ["", "### Clarifications: where the text is true as written but says less than it seems to", ""]
        out += [f"- {code(row['id'])} ({text(row['where'])}): {text(row['clarification'])}" for row in clarifications]
    if notes:
        out += ["", "### Small faults of the text (nothing to check)", ""]
        out += [f"- {text(note['where'])}: {text(note['says'])}" for note in notes]
    return out


def _render_unplaced(rows: list[dict[str, Any]]) -> list[str]:
    return ["", "### (step unknown)", *[line for row in rows for line in _render_claim(row)]] if rows else []


def _render_coverage(results: dict[str, Any]) -> list[str]:
    criterion = results["coverage_criterion"]
    statuses = list(criterion["statuses"])
    out = ["", "## Coverage", "",
           "Every checkable statement of the text is in the ledger of its step (`statements:` in the claim files), "
           "and each claim names the statements it checks (`covers:`). A statement's status comes from this "
           "run's checks of the claims covering it:", ""]
    out += [f"- **{text(status)}**: {text(description)}" for status, description in criterion["statuses"].items()]
    out += ["", f"When several apply, {text(criterion['precedence'])}. Which kinds of check are "
            "strong depends on the statement's shape:", ""]
    out += [f"- {code(shape)} ({text(', '.join(item['strong_kinds']))}): {text(item['description'])}"
            for shape, item in criterion["shapes"].items()]
    out += ["", "| step | statements | " + " | ".join(text(status) for status in statuses) + " | claims |",
            "|---|---|" + "---|" * len(statuses) + "---|"]
    for lesson in results["coverage"]:
        for step in lesson["steps"]:
            counts = step["statement_counts"]
            claims = (text(", ".join(f"{n} {status}" for status, n in step["statuses"].items()))
                      if step["claims"] else "none")
            cells = [f"**{counts[s]}**" if counts[s] and s in UNCOVERED else text(counts[s]) for s in statuses]
            out.append(f"| {text(step['step'])} | {len(step['statements']) or '**none**'} | " + " | ".join(cells)
                       + f" | {claims} |")
    out += ["", "### Statements not covered (missing, weak or failed)", ""]
    uncovered = results["uncovered"]
    vocabulary = results.get("scope_dimensions", [])
    out += [f"- {code(s['id'])} ({text(s['where'])}, {text(s['shape'])}): {_badge(s['status'])}: {text(s['says'])}"
            + (f" (claims: {_codes(s['claims'])})" if s["claims"] else "")
            + (f" *Why weak:* {text(s['weak'])}" if s.get("weak") else "")
            + _unreached(s, vocabulary) for s in uncovered]
    if not uncovered:
        out.append("None: every statement of the ledger is covered, not run in this profile, or not checkable.")
    excused = [s for lesson in results["coverage"] for step in lesson["steps"] for s in step["statements"]
               if s["status"] == "not checkable"]
    if excused:
        out += ["", "### Not checkable, and why", ""]
        out += [f"- {code(s['id'])} ({text(s['where'])}): {text(s['says'])} *Why not:* {text(s['not_checkable'])}"
                for s in excused]
    return out


def _unreached(statement: dict[str, Any], vocabulary: list[dict[str, Any]]) -> str:
    gaps = describe_scope(statement, vocabulary)[1]
    return f" **Scope not reached:** {text(gaps)}." if gaps else ""


def _render_statement(statement: dict[str, Any], vocabulary: list[dict[str, Any]],
                      anchor: dict[str, Any] | None = None) -> str:
    status = statement["status"]
    shape = "" if status == "not checkable" else f" ({text(statement['shape'])})"
    line = f"- {code(statement['id'])}{shape}: {_badge(status, UNCOVERED)}: {text(statement['says'])}"
    if statement["claims"]:
        line += f" (claims: {_codes(statement['claims'])})"
    if status == "not checkable":
        line += f" *Why not:* {text(statement['not_checkable'])}"
    if statement.get("weak"):
        line += f" *Why weak:* {text(statement['weak'])}"
    claimed, gaps = describe_scope(statement, vocabulary)
    if claimed:
        line += f" *Scope:* {text(claimed)}" + (f"; **not reached:** {text(gaps)}." if gaps else
                                                  ", all reached." if status in ("covered", "weak") else ".")
    if anchor is not None:
        place = f", {text(anchor['step'])} block {anchor['block']}" if "step" in anchor else ""
        line += f" *Text:* {_badge(anchor['status'], ('changed', 'orphaned', 'reworded', 'unreviewed'))}{place}."
    elif statement.get("origin") == "harness":
        line += " *Text:* none (added by the harness)."
    return line


def _render_claim(row: dict[str, Any]) -> list[str]:
    harness = row["origin"] == "harness"
    out = ["", f"#### {code(row['id'])}: {_badge(row['status'])}" + (" (added by the harness)" if harness else ""),
           ""]
    if row["statement"]:
        out += [paragraph(row["statement"]), ""]
    if row["formula"]:
        out += [*fenced(row["formula"].strip(), "math"), ""]
    if harness:
        out.append(f"- *{HARNESS_ORIGIN}*")
    if row["covers"]:
        out.append(f"- covers: {_codes(row['covers'])}")
    for key in row["sources"]:
        # A citation's own emphasis (a journal's name in *...*) is dropped, as in the HTML: it is shown as text.
        citation = row["citations"].get(key, "(not in the registry)").replace("*", "")
        out.append(f"- source {code(key)}: {text(citation)}")
    if row["limitations"]:
        out.append(f"- limitations: {text(row['limitations'])}")
    if row["erratum"]:
        out.append(f"- **erratum**: {text(row['erratum'])}")
    if row.get("clarification"):
        out.append(f"- **clarification**: {text(row['clarification'])}")
    out.append(f"- defined at {code(str(row['file']) + ':' + str(row['line']))}")
    for problem in row["problems"]:
        out.append(f"- **cannot be loaded**: {text(problem)}")
    for check in row["checks"]:
        out += _render_check(check)
    return out


def _render_check(check: dict[str, Any]) -> list[str]:
    uses = f", uses {_codes(check['uses'])}" if check["uses"] else ""
    out = ["", f"**{text(check['kind'])}** check, verifier {code(check['verifier'])} "
           f"({code(check['verifier_location'])}){uses}: {_badge(check['status'])}, seed {text(check['seed'])}, "
           f"{text(check['seconds'])} s{' (observations reused from the cache)' if check['reused'] else ''}"]
    if check.get("in_floats"):
        out += ["", f"Note: {text(IN_FLOATS_NOTES[check['in_floats']])}."]
    if check["rejects"]:
        out += ["", f"Rejects: {text(rejects_text(check['rejects']))}"]
    if check["comparisons"]:
        out += ["", f"| observed | expected (stated by the text; {CHOSEN_MARK} chosen by the harness) | "
                "observed value | rule | verdict |", "|---|---|---|---|---|"]
        out += [f"| {code(c['key'], cell=True)} | {text(c['expected'])}"
                f"{' ' + CHOSEN_MARK if c['stated_by'] == 'harness' else ''} | "
                f"{text(format_observed(c['observed']))} | "
                f"{text(c['rule'])} | {'ok' if c['passed'] else '**FAILED**'} |" for c in check["comparisons"]]
        if any(c["stated_by"] == "harness" for c in check["comparisons"]):
            out += ["", f"{CHOSEN_MARK} chosen by the harness, not stated by the text: "
                    + _codes(check["harness_chosen"])]
    # A check none of whose rows was compared says why in its skip reason; one that compared some lists the others.
    if check["not_checked"] and check["status"] != "skipped" and (check["status"] != NOT_JUDGED
                                                                  or check["comparisons"]):
        out += ["", *(f"- not checked {code(key)}: {text(why)}" for key, why in check["not_checked"].items())]
    extra = {key: value for key, value in check["observed"].items() if key not in check["expected"]}
    example = extra.pop(FALSIFYING_KEY, None)
    if extra:
        out.append("")
        out += [f"- also observed {code(key)}: {text(format_observed(value))}" for key, value in extra.items()]
    if example:
        out += ["", "A failing input, and what the implementation did with it:", "",
                *fenced("\n".join(format_falsifying(example)))]
    if check["error"]:
        out += ["", *fenced(check["error"])]
    if check["skip_reason"]:
        out += ["", f"{'Not judged' if check['status'] == NOT_JUDGED else 'Skipped'}: {text(check['skip_reason'])}."]
    if check["status"] in ("failed", "error"):
        out += ["", f"Reproduce: {code(check['reproduce'])}"]
    return out

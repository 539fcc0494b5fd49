"""The annotated text: ``claims_text.html``, every block of the author's documents with the statements standing on it.

Blueprint-style: a block's border says what happened to its anchor (unchanged, moved, reworded,
changed, orphaned, unreviewed; a marked block's is grey, an uncovered block has none and is
shaded), its fill what the checks of its statements say (passed, failed, not run, not checkable,
or "before the change": the results are of a run that saw the block before it changed). Which
text a run saw is in its results: ``text.statements[id].fingerprint`` of ``claims.json`` is the
fingerprint of the block each statement stood on then; a verdict of a statement whose block's
fingerprint is another now is of the old text, and the page says so rather than show it as this
text's. Unheld numbers are highlighted. Every statement links to its row in
``claims_report.html``, whose rows link back here. The page quotes the whole text, so it is
written next to the reports and never committed (``.gitignore`` has it). Offline and
self-contained: inline CSS and script, formulas as MathML (the report's converter), nothing
loaded from anywhere.
"""

from __future__ import annotations

import functools
import html
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, Template, select_autoescape
from markupsafe import Markup

from claims_harness._claims.course import ENGINE
from claims_harness._claims.formats import TEXT_PAGE, block_anchor
from claims_harness._claims.loading import Catalogue
from claims_harness._claims.scope import describe_scope
from claims_harness._reporting.html import formula_to_mathml
from claims_harness._text.document import FORMULA, Block, number_spans
from claims_harness._text.drift import ANCHOR_STATUSES, CLEAN, STATUS_DESCRIPTIONS, TextState

PAGE_FILE = TEXT_PAGE
# The border of a block with several statements is that of the one that most needs a look (a status not listed
# here first).
_URGENCY = ("changed", "ambiguous", "orphaned", "relocated", "reworded", "unreviewed", "moved", "unchanged")
STALE = "before the change"
CHECK_STATES = {
    "passed": "a check of a claim covering it passed, and none failed",
    "failed": "a check of a claim covering it failed or could not run",
    STALE: "the results predate the text's change: its checks passed or failed (each statement says which) in a run "
           "that saw this block before it changed, so they say nothing of it as it is; run 'claims verify' on this "
           "text",
    "not run": "no check of its claims decided it in the run the reports are of",
    "not checkable": "no claim covers it, and the ledger says why",
}
# The fill of a block with several statements: the first of these any of them has.
_FILL_ORDER = ("failed", STALE, "not run", "passed")
_CHECK_OF_COVERAGE = {"covered": "passed", "weak": "passed", "failed": "failed", "not run": "not run",
                      "missing": "not run", "not checkable": "not checkable"}
_INLINE_MATH = re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$")


def write_page(directory: Path, state: TextState, catalogue: Catalogue, results: dict[str, Any] | None) -> Path:
    path = directory / PAGE_FILE
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(state, catalogue, results), encoding="utf-8")
    return path


def render_page(state: TextState, catalogue: Catalogue, results: dict[str, Any] | None) -> str:
    """The page of ``state``; the checks' states come from ``results`` (a run's ``claims.json``), if any."""
    ledger = {statement["id"]: statement for lesson in (results or {}).get("coverage", [])
              for step in lesson["steps"] for statement in step["statements"]}
    # The block each statement stood on in the run the results are of (none in results without a text section).
    seen = {key: item.get("fingerprint") for key, item in
            (((results or {}).get("text") or {}).get("statements") or {}).items() if isinstance(item, dict)}
    vocabulary = (results or {}).get("scope_dimensions", [])
    covering = {key: [entry.id for entry in entries] for key, entries in catalogue.covering().items()}
    standing: dict[int, list[dict[str, Any]]] = defaultdict(list)
    placeless = []
    for key, found in state.statements.items():
        verdict = _CHECK_OF_COVERAGE.get(ledger.get(key, {}).get("status", ""), "not run")
        # A verdict is of this text only if the run saw the block the statement stands on now.
        stale = (results is not None and verdict in ("passed", "failed") and found.block is not None
                 and seen.get(key) != found.block.fingerprint)
        item = {"id": key, "status": found.status, "drift": found.drift, "missing": list(found.missing),
                "says": catalogue.statements[key].statement.says, "claims": covering.get(key, []),
                "verdict": verdict, "check": STALE if stale else verdict, "stale": stale,
                "scope_gaps": describe_scope(ledger[key], vocabulary)[1] if key in ledger else ""}
        if found.block is not None:
            standing[id(found.block)].append(item)
        else:
            placeless.append(item)
    marks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    reasons = {(marked.file, marked.line): marked.mark.reason for marked in catalogue.marks}
    for entry, found in state.marks:
        if found.block is not None:
            marks[id(found.block)].append({"status": found.status, "numbers": list(entry.anchor.holds),
                                           "reason": reasons.get((entry.file, entry.line), "")})
    unheld: dict[int, set[str]] = defaultdict(set)
    for block, item, _ in state.unheld:
        unheld[id(block)].add(item)
    documents = []
    for document in state.documents:
        steps = []
        for step in document.steps.values():
            blocks = []
            for block in step.blocks:
                on = standing[id(block)]
                current_marks = [mark for mark in marks[id(block)] if mark["status"] in CLEAN]
                anchor = (min((item["status"] for item in on), key=_urgency) if on else
                          "marked" if any(not mark["numbers"] for mark in current_marks) else "uncovered")
                checks = {item["check"] for item in on}
                check = next((verdict for verdict in _FILL_ORDER if verdict in checks),
                             "not checkable" if on else "none")
                blocks.append({"id": block_anchor(step.id, block.position), "position": block.position,
                               "kind": block.kind, "line": block.line, "anchor": anchor, "check": check,
                               "statements": on, "marks": marks[id(block)], "unheld": sorted(unheld[id(block)]),
                               "html": _rendered(block, unheld[id(block)])})
            steps.append({"id": step.id, "title": step.title, "line": step.line, "blocks": blocks,
                          "anchor": block_anchor(step.id, 0),
                          "statements": standing[id(step.heading)] if step.heading is not None else []})
        documents.append({"name": document.name, "path": str(document.path), "fingerprint": document.fingerprint,
                          "steps": steps})
    run = (results or {}).get("run", {})
    return _template().render(
        course=catalogue.course.title if catalogue.course else "the course", documents=documents, counts=state.counts(),
        items=state.items, clean=state.clean, placeless=placeless, not_in_text=state.not_in_text,
        statuses=ANCHOR_STATUSES, status_descriptions=STATUS_DESCRIPTIONS, check_states=CHECK_STATES,
        uncovered=len(state.uncovered), unheld=len(state.unheld), run=run, anchor_states=[*ANCHOR_STATUSES, "marked",
                                                                                        "uncovered"],
        stale=sum(item["check"] == STALE for items in standing.values() for item in items),
        text_seen=bool(((results or {}).get("text") or {}).get("available")))


def _urgency(status: str) -> int:
    return _URGENCY.index(status) if status in _URGENCY else -1


def _rendered(block: Block, unheld: set[str]) -> Markup:
    """The block's text as HTML: formulas as MathML (the LaTeX source where they do not convert), unheld numbers
    highlighted."""
    if block.kind == FORMULA:
        shown = _math(block.text, "block")
        return Markup(f"<mark class=\"unheld\">{shown}</mark>") if block.text in unheld else shown
    out, index = [], 0
    for match in _INLINE_MATH.finditer(block.text):
        out.append(_prose(block.text[index:match.start()], unheld))
        math = _math(match.group(1), "inline")
        held_inside = any(match.group(1)[start:end] in unheld for start, end in number_spans(match.group(1)))
        out.append(f"<mark class=\"unheld\">{math}</mark>" if held_inside else str(math))
        index = match.end()
    out.append(_prose(block.text[index:], unheld))
    return Markup("".join(out))


def _prose(text: str, unheld: set[str]) -> str:
    out, index = [], 0
    for start, end in number_spans(text) if unheld else ():
        if text[start:end] in unheld:
            out += [html.escape(text[index:start]), f"<mark class=\"unheld\">{html.escape(text[start:end])}</mark>"]
            index = end
    out.append(html.escape(text[index:]))
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def _math(latex: str, display: str) -> Markup:
    converted = formula_to_mathml(latex, display)
    if converted is not None:
        return converted
    return Markup(f"<code class=\"tex\">{html.escape(latex)}</code>")


@functools.cache
def _template() -> Template:
    environment = Environment(loader=PackageLoader(ENGINE), autoescape=select_autoescape(default=True),
                              undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    environment.filters["css"] = lambda status: status.replace(" ", "-")
    return environment.get_template("text.html.j2")

"""The text's state as a run reports it: the ``text`` section of ``claims.json``, and what renders the text's page.

The section is committed with the reports, so it holds no sentence of the text: the documents'
paths (as configured) and fingerprints, the counts per status, and each statement's status with
the place and fingerprint of the block it stands on now (what ``claims text review`` reads to
know that a changed statement's checks ran against the changed text). Unheld numbers and formulas
are listed as printed: they are facts, not the author's prose.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claims_harness._claims.loading import Catalogue
from claims_harness._text.binding import binding_problems
from claims_harness._text.document import FORMULA, Document, read_documents
from claims_harness._text.drift import ANCHOR_STATUSES, CLEAN, TextState, anchored_entries, resolve
from claims_harness.errors import ClaimsError


def text_state(catalogue: Catalogue, documents: Sequence[Document]) -> TextState:
    """The ledger of ``catalogue`` against ``documents``."""
    entries, harness_own = anchored_entries(catalogue)
    state = resolve(entries, documents, catalogue.course.steps if catalogue.course else ())
    state.not_in_text = harness_own
    state.unbound = binding_problems(catalogue)
    return state


@dataclass
class TextReport:
    """What a run knows of the text: the results' section, and the state it was made from (None when unreadable)."""

    section: dict[str, Any]
    state: TextState | None
    catalogue: Catalogue


def text_overrides(given: Sequence[str]) -> dict[str, Path]:
    """``NAME=PATH`` arguments (``--text``, ``--claims-text``) as the paths that replace documents' configured ones.

    Raises:
      ClaimsError: naming an argument that is not NAME=PATH.
    """
    overrides = {}
    for argument in given:
        name, sep, path = argument.partition("=")
        if not sep or not name or not path:
            raise ClaimsError(f"--text {argument!r}: write NAME=PATH, e.g. --text module=revised.txt")
        overrides[name] = Path(path).resolve()
    return overrides


def text_report(catalogue: Catalogue, overrides: dict[str, Path] | None = None) -> TextReport | None:
    """The text's state for a run's reports (``overrides`` read documents from other paths); None when the course
    configures no text.

    A text that cannot be read is reported, not raised: a student's copy of the project has no
    text, and its reports still say everything else (the release gate refuses them).
    """
    course = catalogue.course
    if course is None or not course.texts:
        return None
    try:
        documents = read_documents(course, overrides)
        state = text_state(catalogue, documents)
    except ClaimsError as error:
        return TextReport({"available": False, "error": str(error)}, None, catalogue)
    except Exception as error:  # a defect of the text's code must cost the report its text section, not the report
        return TextReport({"available": False, "error": f"the text could not be compared with the ledger: "
                                                        f"{type(error).__name__}: {error}"}, None, catalogue)
    return TextReport(section(state, course.root), state, catalogue)


def section(state: TextState, root: Path) -> dict[str, Any]:
    marks = Counter(found.status for _, found in state.marks)
    return {
        "available": True,
        "documents": [{"name": document.name, "path": _relative(document.path, root),
                       "fingerprint": document.fingerprint, "steps": len(document.steps),
                       "blocks": len(document.blocks())} for document in state.documents],
        "clean": state.clean,
        "counts": state.counts(),
        "marks": {status: marks[status] for status in ANCHOR_STATUSES if marks[status]},
        "items": state.items,
        "uncovered_blocks": [{"document": block.document, "step": block.step, "block": block.position,
                              "kind": block.kind} for block in state.uncovered],
        "unheld_numbers": [{"document": block.document, "step": block.step, "block": block.position, "number": item,
                            "count": count, "kind": "formula" if block.kind == FORMULA else "number"}
                           for block, item, count in state.unheld],
        "steps_not_in_text": state.steps_not_in_text,
        "unbound_numbers": len(state.unbound),
        "not_in_text": state.not_in_text,
        "statements": {key: {"status": found.status, "drift": found.drift,
                             **({"step": found.block.step, "block": found.block.position,
                                 "fingerprint": found.block.fingerprint} if found.block is not None else {}),
                             **({"missing": list(found.missing)} if found.missing else {})}
                       for key, found in state.statements.items()},
    }


def _relative(path: Path, root: Path) -> str:
    try:
        return Path(os.path.relpath(path, root)).as_posix()
    except ValueError:  # another drive
        return path.as_posix()


def problems(text: dict[str, Any] | None) -> list[str]:
    """Why the release gate refuses the text's state: one line per kind of drift; none when it is clean."""
    if text is None:
        return []
    if not text.get("available"):
        return [f"the course text could not be read: {text.get('error')}"]
    found = []
    counts = text["counts"]
    drifted = {status: [key for key, item in text["statements"].items() if item["status"] == status]
               for status in ANCHOR_STATUSES if status not in CLEAN and counts.get(status)}
    for status, keys in drifted.items():
        shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
        found.append(f"text: {len(keys)} statement{'s' if len(keys) != 1 else ''} {status}: {shown} ('claims text "
                     "status' says what changed; "
                     "'claims text review' once the author has looked)")
    stale = {status: count for status, count in text.get("marks", {}).items() if status not in CLEAN}
    if stale:
        found.append("text: marks of nothing checkable that no longer stand on their block: " +
                     ", ".join(f"{count} {status}" for status, count in stale.items()) + " (mark the blocks again)")
    if text["uncovered_blocks"]:
        found.append(f"text: {len(text['uncovered_blocks'])} blocks on which no statement stands and no mark says why "
                     "(claims text status lists them)")
    if text["unheld_numbers"]:
        found.append(f"text: {len(text['unheld_numbers'])} numbers or formulas no statement holds and no mark excuses")
    if text.get("unbound_numbers"):
        found.append(f"text: {text['unbound_numbers']} numbers held by statements that no check states and no "
                     "'not_compared' excuses (claims lint lists them)")
    if text["steps_not_in_text"]:
        found.append(f"text: steps of the course found in no document: {', '.join(text['steps_not_in_text'])}")
    return found

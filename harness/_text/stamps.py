"""Review stamps, and the edits the text's commands make to claim files.

A review stamp (``r1:`` and 12 hex digits) is a digest of what was reviewed: for a statement its
id, its wording (``says``) and its anchor's fingerprint, sketch and holds; for a mark its reason
and the same of its anchor. Editing any of them by hand (a fingerprint re-stamped to make drift go
away, a new wording) leaves the stamp stale, and the entry ``unreviewed`` until someone runs
``claims text review`` on it by name. The block's position is a hint, outside the stamp, so
``claims text review --moved`` can update it without a review.

Edits are made to the file's lines, not by dumping YAML again: a statement's ``anchor:`` is one
line (a flow mapping) replaced or appended at the end of the statement, its ``where:`` is replaced
in place, and the ``nothing_checkable:`` section, which only these commands write, is written
whole, in the order of the steps. Comments and every other line stay as they were, so a review
shows in the diff as the lines it changed. A file is replaced atomically, and read back to make
sure it says what was meant.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

import yaml

from claims_harness._claims.course import write_atomically
from claims_harness._claims.schema import Anchor, Mark, Statement
from claims_harness.errors import ClaimsError

STAMP = "r1"
# libyaml when PyYAML has it: these edits parse the whole file twice (to find the lines, then to check the result).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_COUNT = re.compile(r"^(?P<item>.+) ×(?P<count>[1-9][0-9]*)$", re.DOTALL)


def parse_hold(hold: str) -> tuple[str, int]:
    """``'0.9 ×12'`` as ``('0.9', 12)``; a hold without a count is printed once."""
    match = _COUNT.match(hold)
    return (match.group("item"), int(match.group("count"))) if match else (hold, 1)


def format_hold(item: str, count: int) -> str:
    return item if count == 1 else f"{item} ×{count}"


def stamp(entry: Statement | Mark, anchor: Anchor) -> str:
    """The review stamp of ``entry`` standing on ``anchor``."""
    reviewed = (["statement", entry.id, entry.says] if isinstance(entry, Statement) else ["mark", entry.reason])
    payload = json.dumps([*reviewed, anchor.fingerprint, anchor.sketch, sorted(anchor.holds)], ensure_ascii=False)
    return f"{STAMP}:{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:12]}"


def is_reviewed(entry: Statement | Mark, anchor: Anchor) -> bool:
    return anchor.review is not None and anchor.review == stamp(entry, anchor)


# --------------------------------------------------------------------------- writing claim files


def anchor_text(anchor: Anchor) -> str:
    """The anchor as one line of YAML: a flow mapping, every string single-quoted."""
    parts = [f"block: {anchor.block}", f"fingerprint: {_quoted(anchor.fingerprint)}",
             f"sketch: {_quoted(anchor.sketch)}"]
    if anchor.numbers:
        parts.append(f"numbers: {_quoted(anchor.numbers)}")
    if anchor.holds:
        parts.append("holds: [" + ", ".join(_quoted(hold) for hold in anchor.holds) + "]")
    if anchor.review:
        parts.append(f"review: {_quoted(anchor.review)}")
    return "{" + ", ".join(parts) + "}"


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def set_statement(path: Path, statement_id: str, anchor: Anchor | None, where: str | None = None) -> None:
    """Write ``anchor`` (None: remove it) and, if given, ``where`` into the statement ``statement_id`` of ``path``."""
    lines = path.read_text(encoding="utf-8").split("\n")
    node = _statement_node(_compose(path, lines), statement_id, path)
    pairs = {key.value: (key, value) for key, value in node.value}
    indent = " " * node.value[0][0].start_mark.column
    edits: list[tuple[int, int, list[str]]] = []  # (first line, line after the last, new lines): 0-based
    if where is not None:
        value = pairs["where"][1]
        line = lines[value.start_mark.line]
        edits.append((value.start_mark.line, value.start_mark.line + 1,
                      [line[:value.start_mark.column] + json.dumps(where) + line[value.end_mark.column:]]))
    new = [f"{indent}anchor: {anchor_text(anchor)}"] if anchor is not None else []
    if "anchor" in pairs:
        key, value = pairs["anchor"]
        edits.append((key.start_mark.line, _last_line(value, lines) + 1, new))
    elif new:
        after = _last_line(node.value[-1][1], lines) + 1
        edits.append((after, after, new))
    _write(path, _edited(lines, edits), lambda data: _check_statement(data, statement_id, anchor, where, path))


def move_statement(source: Path, target: Path, statement_id: str) -> None:
    """Move the statement ``statement_id`` of ``source``'s ledger to the end of ``target``'s, its lines as they are.

    The target is written first: a failure between the two writes leaves the statement in both files, which
    ``claims lint`` names (a duplicate id), never in neither.
    """
    lines = source.read_text(encoding="utf-8").split("\n")
    node = _statement_node(_compose(source, lines), statement_id, source)
    # From the item's "- " line to the last line of its last value (the node itself ends where the next item begins).
    first, last = node.start_mark.line, _last_line(node.value[-1][1], lines)
    moved = lines[first:last + 1]
    into = target.read_text(encoding="utf-8").split("\n")
    root = _compose(target, into)
    statements = next((value for key, value in root.value if key.value == "statements"), None)
    if not isinstance(statements, yaml.SequenceNode) or not statements.value:
        raise ClaimsError(f"{target}: has no 'statements' list to move statement '{statement_id}' into; add the "
                          "ledger first")
    after = _last_line(statements.value[-1].value[-1][1], into) + 1
    shift = statements.value[-1].start_mark.column - node.start_mark.column
    block = [(" " * shift + line) if shift >= 0 else line[-shift:] for line in moved]
    _write(target, _edited(into, [(after, after, block)]),
           lambda data: _check_moved(data, statement_id, target, present=True))
    _write(source, _edited(lines, [(first, last + 1, [])]),
           lambda data: _check_moved(data, statement_id, source, present=False))


def _check_moved(data: dict, statement_id: str, path: Path, present: bool) -> None:
    found = any(item.get("id") == statement_id for item in data.get("statements") or [])
    if found != present:
        raise ClaimsError(f"{path}: moving statement '{statement_id}' would not read back as meant; the file is "
                          "unchanged")


def set_marks(path: Path, marks: Sequence[Mark], step_order: Sequence[str]) -> None:
    """Replace the ``nothing_checkable`` section of ``path`` with ``marks``, in the order of the steps and blocks."""
    lines = path.read_text(encoding="utf-8").split("\n")
    root = _compose(path, lines)
    pairs = {key.value: (key, value) for key, value in root.value}
    order = {step: index for index, step in enumerate(step_order)}
    ordered = sorted(marks, key=lambda mark: (order.get(mark.where, len(order)), mark.where, mark.anchor.block,
                                              mark.anchor.holds))
    section = ["nothing_checkable:"] + [line for mark in ordered for line in (
        f"  - where: {json.dumps(mark.where)}", f"    anchor: {anchor_text(mark.anchor)}",
        f"    reason: {_quoted(' '.join(mark.reason.split()))}")] if ordered else []
    if "nothing_checkable" in pairs:
        key, value = pairs["nothing_checkable"]
        edits = [(key.start_mark.line, _last_line(value, lines) + 1, section)]
    elif "claims" in pairs:
        at = pairs["claims"][0].start_mark.line
        edits = [(at, at, section)]
    else:
        edits = [(len(lines), len(lines), section)]
    _write(path, _edited(lines, edits), lambda data: _check_marks(data, ordered, path))


def _compose(path: Path, lines: list[str]) -> yaml.MappingNode:
    try:
        root = yaml.compose("\n".join(lines), Loader=_LOADER)
    except yaml.YAMLError as error:
        raise ClaimsError(f"{path}: not valid YAML, so not edited ({error}); fix it ('claims lint') and "
                          "run the command again") from None
    if not isinstance(root, yaml.MappingNode):
        raise ClaimsError(f"{path}: not a claim file (a mapping), so not edited")
    return root


def _statement_node(root: yaml.MappingNode, statement_id: str, path: Path) -> yaml.MappingNode:
    statements = next((value for key, value in root.value if key.value == "statements"), None)
    for item in statements.value if isinstance(statements, yaml.SequenceNode) else ():
        if isinstance(item, yaml.MappingNode) and any(
                key.value == "id" and getattr(value, "value", None) == statement_id for key, value in item.value):
            return item
    raise ClaimsError(f"{path}: no statement '{statement_id}' in its 'statements', so not edited")


def _last_line(node: yaml.Node, lines: list[str]) -> int:
    """The 0-based index of the last line ``node`` stands on, blank lines and comments after it left out."""
    end = node.end_mark.line - (1 if node.end_mark.column == 0 else 0)
    while end > node.start_mark.line and (not lines[end].strip() or lines[end].lstrip().startswith("#")):
        end -= 1
    return end


def _edited(lines: list[str], edits: list[tuple[int, int, list[str]]]) -> list[str]:
    for first, after, new in sorted(edits, reverse=True):
        lines[first:after] = new
    return lines


def _write(path: Path, lines: list[str], check) -> None:
    text = "\n".join(lines)
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as error:  # a bug of these edits, never the author's: refuse to write it
        raise ClaimsError(f"{path}: the edit would not be valid YAML ({error}); the file is unchanged") from None
    check(data)
    write_atomically(path, text.encode("utf-8"))


def _check_statement(data: dict, statement_id: str, anchor: Anchor | None, where: str | None, path: Path) -> None:
    found = next(item for item in data["statements"] if item.get("id") == statement_id)
    written = Anchor.model_validate(found["anchor"]) if "anchor" in found else None
    if written != anchor or (where is not None and found.get("where") != where):
        raise ClaimsError(f"{path}: the edit of statement '{statement_id}' would not read back as written; the file "
                          "is unchanged")


def _check_marks(data: dict, marks: list[Mark], path: Path) -> None:
    written = [Mark.model_validate(item) for item in data.get("nothing_checkable") or []]
    if written != list(marks):
        raise ClaimsError(f"{path}: the marks would not read back as written; the file is unchanged")

"""``claims text status`` and ``claims text show``: the ledger against the course text, read only.

``status`` sums it up (or prints it as JSON, ``--format json``) and exits 0 only when all is clean;
``show`` prints steps of the text block by block, with what holds each block and what no statement
holds there.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from claims_harness._claims.loading import Catalogue
from claims_harness._text.document import FORMULA, Block, Document, step_in
from claims_harness._text.drift import ANCHOR_STATUSES, CLEAN, Resolution, TextState
from claims_harness._text.stamps import format_hold
from claims_harness._text.summary import text_state
from claims_harness.errors import visible


def state_json(state: TextState) -> dict[str, Any]:
    """What ``claims text status --format json`` prints (it quotes the unheld formulas, and no other text)."""
    return {
        "documents": [{"name": document.name, "path": str(document.path), "fingerprint": document.fingerprint,
                       "steps": len(document.steps), "blocks": len(document.blocks())} for document in state.documents],
        "clean": state.clean,
        "counts": state.counts(),
        "statements": {key: found.status for key, found in state.statements.items()},
        "details": {key: _detail(found) for key, found in state.statements.items()},
        "marks": [{"file": entry.file, "line": entry.line, **_detail(found)} for entry, found in state.marks],
        "not_in_text": state.not_in_text,
        "uncovered_blocks": [_place(block) for block in state.uncovered],
        "unheld_numbers": [{**_place(block), "number": item, "count": count,
                            "kind": "formula" if block.kind == FORMULA else "number"}
                           for block, item, count in state.unheld],
        "items": state.items,
        "steps_not_in_text": state.steps_not_in_text,
        "unbound_numbers": state.unbound,
    }


def _place(block: Block) -> dict[str, Any]:
    """Where a block is in the text: ``text_line`` is its line in the document, never a claim file's."""
    return {"document": block.document, "step": block.step, "block": block.position, "kind": block.kind,
            "text_line": block.line}


def _detail(found: Resolution) -> dict[str, Any]:
    detail: dict[str, Any] = {"status": found.status, "drift": found.drift}
    if found.block is not None:
        detail.update(_place(found.block), fingerprint=found.block.fingerprint)
    if found.missing:
        detail["missing"] = list(found.missing)
    if found.similarity is not None:
        detail["similarity"] = found.similarity
    if found.reordered:
        detail["reordered"] = True
    if found.candidates:
        detail["candidates"] = [_place(block) for block in found.candidates]
    return detail


def print_status(args: argparse.Namespace, catalogue: Catalogue, documents: list[Document]) -> int:
    state = text_state(catalogue, documents)
    if args.format == "json":
        print(json.dumps(state_json(state), indent=2, ensure_ascii=False))
        return 0 if state.clean else 1
    for document in documents:
        print(f"{document.name}: {visible(str(document.path))} ({document.fingerprint}), {len(document.steps)} steps, "
              f"{len(document.blocks())} blocks")
    counts = state.counts()
    print("statements: " + ", ".join(f"{counts[status]} {status}" for status in ANCHOR_STATUSES) +
          (f"; {len(state.not_in_text)} of the harness's own (no place in the text)" if state.not_in_text else ""))
    for key, found in state.statements.items():
        if found.status not in CLEAN:
            print(f"  {found.status}: {key}{_where(found)}")
    for entry, found in state.marks:
        if found.status not in CLEAN:
            print(f"  mark {found.status}: {entry.file}:{entry.line} ({entry.where} block {entry.anchor.block})"
                  f"{_where(found)}")
    for kind, counts_of in state.items.items():
        total = counts_of["total"]
        print(f"{kind}: {total} in the text, {counts_of['held']} held by statements, {counts_of['marked']} marked as "
              f"nothing checkable, {counts_of['unheld']} unheld" +
              (f" ({(counts_of['held'] + counts_of['marked']) / total:.1%} accounted for)" if total else ""))
    for block in state.uncovered:
        print(f"  uncovered: {block.document} {block.place} ({block.kind}, line {block.line}): "
              f"{visible(_preview_text(block.text))}")
    for block, item, count in state.unheld:
        print(f"  unheld: {block.document} {block.place} (line {block.line}): {visible(_preview_text(item))}"
              + (f" (printed {count} times)" if count > 1 else ""))
    for step in state.steps_not_in_text:
        print(f"  step {step} of the course is in no document of the text")
    for line in state.unbound:
        print(f"  unbound: {visible(line)}")
    print("claims text status: " + ("clean: every statement unchanged or moved, every block and number held or "
                                    "marked" if state.clean else "not clean (see above)"))
    return 0 if state.clean else 1


def _where(found: Resolution) -> str:
    parts = []
    if found.drift not in (found.status, "unanchored"):
        parts.append(found.drift)
    if found.block is not None:
        parts.append(f"now {found.block.place}, line {found.block.line}")
    if found.missing:
        parts.append("no longer holds " + ", ".join(visible(_preview_text(item)) for item in found.missing))
    if found.reordered:
        parts.append("its block's numbers are the same, in another order")
    if found.candidates:
        parts.append("could be " + " or ".join(f"{block.place} (line {block.line})" for block in found.candidates))
    if found.drift == "unanchored":
        parts.append("no anchor: place it with 'claims text anchor'")
    return f" ({'; '.join(parts)})" if parts else ""


def _preview_text(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def print_steps(args: argparse.Namespace, catalogue: Catalogue, documents: list[Document]) -> int:
    state = text_state(catalogue, documents)
    standing: dict[int, list[str]] = {}
    for key, found in state.statements.items():
        if found.block is not None:
            anchor = catalogue.statements[key].statement.anchor
            holds = f", holds {', '.join(anchor.holds)}" if anchor and anchor.holds and found.block.kind != FORMULA \
                else ""
            standing.setdefault(id(found.block), []).append(f"{key} ({found.status}{holds})")
    for entry, found in state.marks:
        if found.block is not None:
            what = "numbers " + ", ".join(entry.anchor.holds) if entry.anchor.holds else "the block"
            standing.setdefault(id(found.block), []).append(
                f"mark of {what} ({found.status}): {_mark_reason(catalogue, entry.file, entry.line)}")
    unheld = {}
    for block, item, count in state.unheld:
        unheld.setdefault(id(block), []).append(format_hold(item, count))
    wanted = set(args.steps)
    for step in sorted(wanted):
        step_in(documents, step)  # a step the text does not have is an error naming the nearest
    for document in documents:
        for step in document.steps.values():
            if wanted and step.id not in wanted:
                continue
            print(f"== {step.id} ({document.name}, line {step.line}): {visible(step.title)}")
            for line in standing.get(id(step.heading), []):
                print(f"    [0] title -> {visible(line)}")
            for block in step.blocks:
                items = [format_hold(item, count) for item, count in block.items.items()]
                print(f"[{block.position}] {block.kind}, line {block.line}" +
                      (f"; numbers: {', '.join(items)}" if items and block.kind != FORMULA else ""))
                print("    " + visible(block.text))
                for line in standing.get(id(block), ["UNCOVERED: no statement stands here"]):
                    print(f"    -> {visible(line)}")
                if id(block) in unheld and block.kind != FORMULA:
                    print(f"    -> UNHELD: {', '.join(unheld[id(block)])}")
    return 0


def _mark_reason(catalogue: Catalogue, file: str, line: int) -> str:
    return next((marked.mark.reason for marked in catalogue.marks if marked.file == file and marked.line == line), "")

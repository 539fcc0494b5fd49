"""``claims text``: the ledger against the course text (status, show), and the author's edits (anchor, review, mark).

Every command reads the documents ``[tool.claims.texts]`` configures (``--text NAME=PATH`` reads
another copy of one, a revised text, say) and the ledger without importing the verifiers, so it
answers in about a second. Only ``anchor``, ``review`` and ``mark`` write, and only claim files,
one statement or section at a time (``claims_harness._text.stamps``). The two that only read,
``status`` and ``show``, are ``claims_harness._authoring.text_status``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from claims_harness._authoring.text_status import print_status, print_steps
from claims_harness._claims.claim_file import StatementEntry
from claims_harness._claims.loading import Catalogue, load_catalogue
from claims_harness._claims.results_file import RESULTS_FILE, results_if_readable
from claims_harness._claims.schema import Anchor, Mark
from claims_harness._text.binding import bindings_of, value_of
from claims_harness._text.document import FORMULA, Block, Document, numbers_in, read_documents, step_in
from claims_harness._text.drift import CLEAN, TextState
from claims_harness._text.stamps import format_hold, move_statement, parse_hold, set_marks, set_statement, stamp
from claims_harness._text.summary import text_overrides, text_state
from claims_harness.errors import ClaimsError, did_you_mean, visible


def add_parser(commands: Any) -> None:
    """The ``text`` command and its subcommands, on the ``claims`` parser's subparsers."""
    text = commands.add_parser("text", help="the ledger against the course text: status, show, anchor, review, mark, "
                                            "html (docs/text.md)")
    sub = text.add_subparsers(dest="text_command", required=True)

    def with_texts(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--text", action="append", default=[], metavar="NAME=PATH",
                            help="read the document NAME from PATH instead of its configured path (repeatable)")
        return parser

    status = with_texts(sub.add_parser("status", help="the status of every statement against the text, the blocks "
                                                      "and numbers no statement holds; exit 0 only when all is clean"))
    status.add_argument("--format", choices=("text", "json"), default="text")
    show = with_texts(sub.add_parser("show", help="print steps of the text block by block, with what holds each"))
    show.add_argument("steps", nargs="*", help="the steps to show (default: all)")
    anchor = with_texts(sub.add_parser("anchor", help="place a statement on a block of its step (it stays "
                                                      "unreviewed until 'claims text review')"))
    anchor.add_argument("statement", help="the statement's id")
    anchor.add_argument("--block", type=int, required=True, help="the block's position in the step, from 1 "
                                                                 "('claims text show STEP' numbers them); 0 is the "
                                                                 "step's title")
    anchor.add_argument("--step", help="the step of the block, when it is not the statement's 'where' (which it "
                                       "then becomes)")
    anchor.add_argument("--holds", nargs="*", metavar="ITEM", help="the numbers of the block the statement holds, as "
                                                                   "printed (default: those its 'says' prints too; "
                                                                   "none when given no ITEM)")
    review = with_texts(sub.add_parser("review", help="re-stamp statements against the current text, by name"))
    review.add_argument("statements", nargs="*", help="the statements' ids")
    review.add_argument("--all", action="store_true", help="every statement of the text")
    review.add_argument("--moved", action="store_true", help="only update the place of every moved statement and "
                                                             "mark (their text is the same: no review needed)")
    review.add_argument("--holds", nargs="*", metavar="ITEM", help="with one statement: the numbers it now holds")
    review.add_argument("--results", type=Path, help=f"the results that show a changed statement's checks passed "
                                                     f"(default: the course's reports/{RESULTS_FILE})")
    mark = with_texts(sub.add_parser("mark", help="mark a block, or some of its numbers, as holding nothing "
                                                  "checkable, with the reason"))
    mark.add_argument("step")
    mark.add_argument("block", type=int)
    mark.add_argument("--reason", help="why nothing there can be checked")
    mark.add_argument("--numbers", nargs="+", metavar="ITEM", help="mark only these numbers of the block")
    mark.add_argument("--remove", action="store_true", help="remove the marks of the block instead")
    html = with_texts(sub.add_parser("html", help="write the text annotated with its statements and checks "
                                                  "(claims_text.html, never committed)"))
    html.add_argument("--claims-report", "--out", dest="out", type=Path,
                      help="the report directory whose claims.json gives the checks' results, as claims verify names "
                           "it (default: the course's reports/)")


def run(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.claims_dir, verifiers=False)
    course = catalogue.course
    if not course.texts:
        raise ClaimsError(f"{course.root / 'pyproject.toml'}: no [tool.claims.texts] configured, so there is no text "
                          "to compare the ledger with; add a table per document (docs/text.md)")
    documents = read_documents(course, text_overrides(args.text))
    command = {"status": print_status, "show": print_steps, "anchor": _anchor, "review": _review, "mark": _mark,
               "html": _html}[args.text_command]
    return command(args, catalogue, documents)


def _statement(catalogue: Catalogue, key: str) -> StatementEntry:
    stated = catalogue.statements.get(key)
    if stated is None:
        raise ClaimsError(f"no statement '{key}' in the ledger{did_you_mean(key, catalogue.statements)}")
    return stated


def _block(documents: Sequence[Document], step: str, position: int) -> Block:
    in_text = step_in(documents, step)
    found = in_text.block(position)
    if found is None:
        raise ClaimsError(f"step {step} has blocks 1 to {len(in_text.blocks)} (and 0, its title), "
                          f"not {position}; 'claims text show {step}' numbers them")
    return found


def _holds_for(block: Block, asked: Sequence[str] | None, says: str) -> list[str]:
    """What a statement standing on ``block`` holds: the formula of a formula block; else the numbers asked for, or
    those of the block its wording prints too."""
    if block.kind == FORMULA:
        return [block.text]
    if asked is not None:
        unknown = [item for item in asked if item not in block.items]
        if unknown:
            printed = ", ".join(block.items) or "none"
            raise ClaimsError(f"{block.place} does not print {', '.join(map(repr, unknown))}; its numbers, as printed: "
                              f"{printed}")
        chosen = list(dict.fromkeys(asked))
    else:
        said = set(numbers_in(says))
        chosen = [item for item in block.items if item in said]
    return [format_hold(item, block.items[item]) for item in chosen]


def _anchor_on(block: Block, holds: list[str]) -> Anchor:
    """An anchor on ``block`` holding ``holds``, with the digest of where its numbers stand among the block's (none
    for a formula, or when it holds no number)."""
    numbers = None if block.kind == FORMULA or not holds else block.places_of(parse_hold(hold)[0] for hold in holds)
    return Anchor(block=block.position, fingerprint=block.fingerprint, sketch=block.sketch, numbers=numbers,
                  holds=holds)


def _anchor(args: argparse.Namespace, catalogue: Catalogue, documents: list[Document]) -> int:
    stated = _statement(catalogue, args.statement)
    statement = stated.statement
    if statement.origin == "harness":
        raise ClaimsError(f"{stated.file}:{stated.line}: statement '{statement.id}' is of origin 'harness': it has no "
                          "place in the text; drop 'origin: harness' first if the text says it")
    step = args.step or statement.where
    if step != statement.where and step not in catalogue.steps.get(stated.file, []):
        raise ClaimsError(f"step {step} is not a step of {stated.file}; move the statement to the file of its lesson "
                          "first")
    block = _block(documents, step, args.block)
    holds = _holds_for(block, args.holds, statement.says)
    anchor = _anchor_on(block, holds)
    set_statement(catalogue.root / stated.file, statement.id, anchor, step if step != statement.where else None)
    print(f"claims text anchor: '{statement.id}' stands on {block.document} {block.place} ({block.kind}, line "
          f"{block.line})" + (f", holding {', '.join(map(visible, holds))}" if holds else ", holding no number") +
          f"; unreviewed until 'claims text review {statement.id}'")
    printed = block.items if block.kind != FORMULA else set(numbers_in(block.text))
    unprinted = [number for number in dict.fromkeys(numbers_in(statement.says)) if number not in printed]
    if unprinted:
        print(f"claims text anchor: warning: '{statement.id}' says {', '.join(unprinted)}, which {block.place} "
              "does not print: is this its block, and are its numbers the text's?", file=sys.stderr)
    return 0


def _fresh_checks(key: str, block: Block, holds: list[str], catalogue: Catalogue, results: dict[str, Any] | None
                  ) -> str | None:
    """Why a statement whose numbers may have changed cannot be stamped yet, or None.

    Its numbers must be bound (each stated by a check of its claims, or excused under ``not_compared``), and the
    last results must be of a run that saw ``block`` as it is now, in which every claim covering it passed and the
    checks that state its numbers (every check of its claims, when it holds a formula) were evaluated, not reused
    from the cache: a run on the old text, or observations reused from it, show nothing of the new number.
    """
    stated = catalogue.statements[key].statement
    covering = catalogue.covering().get(key, [])
    if not covering:
        return None  # not checkable: its reason is what the review looks at
    numbers = [parse_hold(hold)[0] for hold in holds]
    bound: set[tuple[str, int]] = set()
    for item in numbers:
        if value_of(item) is None:
            bound |= {(entry.id, index) for entry in covering for index in range(len(entry.claim.checks))}
            continue
        found = bindings_of(item, covering)
        if not found and item not in stated.not_compared:
            return (f"it holds {item}, which no check of its claims ({', '.join(entry.id for entry in covering)}) "
                    "states: make the claim expect (or compute from) the text's number, run its checks, then review "
                    "again; or say why no check compares it under 'not_compared'")
        bound |= {(binding.claim, binding.check) for binding in found}
    if results is None:
        return "no results to show its checks passed: run 'claims verify' first"
    seen = ((results.get("text") or {}).get("statements") or {}).get(key) or {}
    names = " or ".join(entry.id for entry in covering)
    if seen.get("fingerprint") != block.fingerprint:
        return (f"the results are of a run before the text changed: run 'claims verify --no-cache -k \"{names}\"' "
                "(after updating what the claims expect), then review again")
    rows = {row["id"]: row for row in results.get("claims", [])}
    failing = [entry.id for entry in covering if rows.get(entry.id, {}).get("status") != "passed"]
    if failing:
        return (f"its claims {', '.join(failing)} did not pass in that run ("
                + ", ".join(f"{claim}: {rows.get(claim, {}).get('status', 'not run')}" for claim in failing) + ")")
    reused = sorted(f"{claim} check {index + 1}" for claim, index in bound
                    if index < len(rows[claim]["checks"]) and rows[claim]["checks"][index].get("reused"))
    if reused:
        return (f"the checks that compare its numbers ({', '.join(reused)}) reused observations made before the "
                f"change: run 'claims verify --no-cache -k \"{names}\"', then review again")
    return None


def _review(args: argparse.Namespace, catalogue: Catalogue, documents: list[Document]) -> int:
    state = text_state(catalogue, documents)
    if args.moved:
        if args.statements or args.all:
            raise ClaimsError("--moved updates every moved statement and mark by itself: name no statement and no "
                              "--all with it")
        return _update_places(catalogue, state)
    if args.all and args.statements:
        raise ClaimsError("name statements, or --all, not both")
    keys = list(state.statements) if args.all else args.statements
    if not keys:
        raise ClaimsError("name the statements to review (claims text review ID ...), or ask for --all by name")
    if args.holds is not None and len(keys) != 1:
        raise ClaimsError("--holds sets what one statement holds: name exactly one")
    results = results_if_readable(args.results or catalogue.course.reports)
    refused, done = [], 0
    for key in keys:
        stated = _statement(catalogue, key)
        if key not in state.statements:
            refused.append(f"{key}: of origin 'harness', it has no place in the text to review")
            continue
        found = state.statements[key]
        if found.drift == "unanchored":
            refused.append(f"{key}: not placed yet: 'claims text anchor {key} --block N'")
            continue
        if found.drift == "orphaned":
            refused.append(f"{key}: no block of the text matches its block: find where the text says it now "
                           f"('claims text show') and anchor it again ('claims text anchor {key} --block N')")
            continue
        if found.drift == "ambiguous":
            refused.append(f"{key}: several blocks could be its block ("
                           + ", ".join(f"{block.place}, line {block.line}" for block in found.candidates)
                           + f"): choose one with 'claims text anchor {key} --block N [--step S]', then review it")
            continue
        block = found.block
        assert block is not None
        statement = stated.statement
        old = statement.anchor
        assert old is not None
        kept = [item for item, _ in map(parse_hold, old.holds) if item in block.items]
        if args.holds is not None:
            asked = args.holds
        elif found.missing:  # what it held is gone: hold what is left, and what its wording prints now
            said = set(numbers_in(statement.says))
            asked = list(dict.fromkeys(kept + [item for item in block.items if item in said]))
        else:
            asked = kept
        holds = _holds_for(block, asked, statement.says)
        # A changed block, or an anchor no one stamped yet (a new one, or one placed anew after a change): its
        # numbers are stamped only against checks that compare them and ran on this text.
        if (found.drift == "changed" or found.status == "unreviewed") and holds:
            why = _fresh_checks(key, block, holds, catalogue, results)
            if why:
                refused.append(f"{key}: {found.status}" + (f" ({', '.join(found.missing)} no longer printed as held)"
                                                            if found.missing else "") + f"; {why}")
                continue
        file = stated.file
        if block.step != statement.where and block.step not in catalogue.steps.get(stated.file, []):
            file = next((name for name, steps in catalogue.steps.items() if block.step in steps), None)
            if file is None:
                refused.append(f"{key}: its block is now in step {block.step}, which no claim file lists in its "
                               "'steps'; add the step to its lesson's file, then review it")
                continue
            move_statement(catalogue.root / stated.file, catalogue.root / file, key)
        anchor = _anchor_on(block, holds)
        anchor = anchor.model_copy(update={"review": stamp(statement, anchor)})
        set_statement(catalogue.root / file, key, anchor, block.step if block.step != statement.where else None)
        done += 1
        print(f"claims text review: '{key}' ({found.status}) stamped on {block.place}" +
              (f", holding {', '.join(map(visible, holds))}" if holds else "") +
              (f"; moved from {stated.file} to {file}, its step's" if file != stated.file else ""))
    for line in refused:
        print(f"claims text review: refused: {line}", file=sys.stderr)
    print(f"claims text review: {done} stamped, {len(refused)} refused")
    return 1 if refused else 0


def _update_places(catalogue: Catalogue, state: TextState) -> int:
    """Move the anchors of statements and marks whose blocks moved within their step to where the blocks are now (no
    re-stamp: the blocks are the same); marks whose blocks moved to another step follow them (to that step's file).
    A statement whose block moved to another step is a review by name, and makes this exit 1."""
    moved, relocated = 0, []
    for key, found in state.statements.items():
        stated = catalogue.statements[key]
        anchor = stated.statement.anchor
        if found.drift == "relocated":
            relocated.append(f"{key} (now {found.block.place}, line {found.block.line})")
        elif found.drift in CLEAN and found.block is not None and anchor is not None and (
                found.block.position != anchor.block
                or anchor.numbers != _anchor_on(found.block, anchor.holds).numbers):
            # The block is the same text (its fingerprint): its place, and the digest of its numbers, are safe to write.
            set_statement(catalogue.root / stated.file, key, anchor.model_copy(update={
                "block": found.block.position, "numbers": _anchor_on(found.block, anchor.holds).numbers}))
            moved += 1
    files: dict[str, list[Mark]] = {}  # the marks each file is to hold
    current = {(marked.file, marked.line): marked.mark for marked in catalogue.marks}
    changed_files = set()
    for entry, found in state.marks:
        mark, file = current[(entry.file, entry.line)], entry.file
        if found.block is not None and found.drift in (*CLEAN, "relocated") and (
                found.block.position != entry.anchor.block or found.block.step != entry.where
                or entry.anchor.numbers != _anchor_on(found.block, entry.anchor.holds).numbers):
            file = next((name for name, steps in catalogue.steps.items() if found.block.step in steps), entry.file)
            mark = mark.model_copy(update={"where": found.block.step, "anchor": mark.anchor.model_copy(update={
                "block": found.block.position, "numbers": _anchor_on(found.block, entry.anchor.holds).numbers})})
            changed_files |= {entry.file, file}
            moved += 1
        files.setdefault(file, []).append(mark)
    for file in changed_files:
        set_marks(catalogue.root / file, files.get(file, []), catalogue.course.steps)
    for line in relocated:
        print(f"claims text review --moved: {line} moved to another step: review it by name ('claims text review "
              f"{line.split()[0]}'), which moves it to that step", file=sys.stderr)
    print(f"claims text review --moved: {moved} anchors updated to where their blocks are now (no review needed: the "
          f"blocks are the same); {len(relocated)} statements moved to another step, left for a review by name")
    return 1 if relocated else 0


def _mark(args: argparse.Namespace, catalogue: Catalogue, documents: list[Document]) -> int:
    block = _block(documents, args.step, args.block)
    file = next((file for file, steps in catalogue.steps.items() if args.step in steps), None)
    if file is None:
        raise ClaimsError(f"no claim file lists step {args.step} in its 'steps'")
    state = text_state(catalogue, documents)
    on_block = {(entry.file, entry.line) for entry, found in state.marks if found.block is block}
    kept = [marked for marked in catalogue.marks if marked.file == file]
    if args.remove:
        if args.reason or args.numbers:
            raise ClaimsError("--remove takes no --reason and no --numbers")
        remaining = [marked.mark for marked in kept if (marked.file, marked.line) not in on_block]
        set_marks(catalogue.root / file, remaining, catalogue.course.steps)
        print(f"claims text mark: {len(kept) - len(remaining)} marks of {block.place} removed")
        return 0
    reason = " ".join((args.reason or "").split())
    if not reason:
        raise ClaimsError("a mark needs its reason: --reason '...' (why nothing there can be checked)")
    if args.numbers is not None and block.kind == FORMULA:
        raise ClaimsError(f"{block.place} is a formula: mark it whole (no --numbers), or hold it by a statement")
    holds = _holds_for(block, args.numbers, "") if args.numbers is not None else []
    current = {(entry.file, entry.line) for entry, found in state.marks if found.block is block and
               found.status in CLEAN}
    if holds and any((marked.file, marked.line) in current and not marked.mark.anchor.holds for marked in kept):
        raise ClaimsError(f"{block.place} is marked whole already, numbers and all; to mark only some of its numbers, "
                          f"remove that mark first (claims text mark {args.step} {args.block} --remove)")
    # A block mark replaces every mark of the block; a number mark joins the block's current marks of the same reason.
    others, merged = [], [parse_hold(hold)[0] for hold in holds]
    for marked in kept:
        mark = marked.mark
        if (marked.file, marked.line) not in on_block:
            others.append(mark)
        elif holds and mark.anchor.holds and (marked.file, marked.line) in current:
            if mark.reason == reason:
                merged += [item for item, _ in map(parse_hold, mark.anchor.holds) if item not in merged]
            else:
                others.append(mark)  # other numbers of the block, for another reason
    anchor = _anchor_on(block, [format_hold(item, block.items[item]) for item in merged])
    mark = Mark(where=args.step, anchor=anchor, reason=reason)
    mark = mark.model_copy(update={"anchor": anchor.model_copy(update={"review": stamp(mark, anchor)})})
    set_marks(catalogue.root / file, [*others, mark], catalogue.course.steps)
    print(f"claims text mark: {block.place} ({block.kind}, line {block.line}): " +
          (f"numbers {', '.join(anchor.holds)}" if anchor.holds else "the whole block") +
          f" marked as holding nothing checkable, in {file}")
    return 0


def _html(args: argparse.Namespace, catalogue: Catalogue, documents: list[Document]) -> int:
    from claims_harness._reporting.text_page import write_page

    out = (args.out or catalogue.course.reports).resolve()
    results = results_if_readable(out / RESULTS_FILE)
    path = write_page(out, text_state(catalogue, documents), catalogue, results)
    print(f"claims text html: wrote {path} (the author's text: never commit it)")
    return 0



"""Drift: every anchored statement and mark of the ledger against the text as it is now.

Each anchor names an old block: its step, its position there and its fingerprint. Resolving them
all against the documents read now takes three passes:

1. **Exact.** An old block whose fingerprint is still in the text is assigned the new block with
   that fingerprint, one to one: in its own step the nearest to its old position, else the first
   elsewhere.
   A step's title is its block 0, and is found as any block is.
2. **Order.** Within each step, the old blocks that stayed in the step keep their relative order
   only along a longest increasing subsequence of their new positions: those are ``unchanged``
   (a paragraph inserted before them shifts their position, not their order); the rest, and every
   block found in another step, are ``moved``. Of two paragraphs that changed places, the later one
   in the old order is the moved one.
3. **Fuzzy.** An old block whose fingerprint is gone is looked for among the new blocks no
   fingerprint claimed: first in its gap (between the new places of its unchanged neighbours in
   its step), at an estimated similarity of at least ``NEAR``; else anywhere, at ``FAR``. A match
   is never trusted: its statements are ``reworded`` when every number and formula they hold is
   still there as often as it was, and ``changed`` otherwise. No match: ``orphaned``.

A statement without an anchor, or whose review stamp does not match its anchor and wording, is
``unreviewed`` whatever its block did (``drift`` still says what that was). A block no statement
stands on and no current mark covers is *uncovered*; a number or formula of a block that no
statement standing on it holds and no current mark covers is *unheld*.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from claims_harness._claims.loading import Catalogue
from claims_harness._claims.schema import Anchor
from claims_harness._text.document import FORMULA, Block, Document
from claims_harness._text.fingerprints import NORMALISATION, SKETCH, similarity
from claims_harness._text.stamps import is_reviewed, parse_hold
from claims_harness.errors import ClaimsError

ANCHOR_STATUSES = ("unchanged", "moved", "relocated", "reworded", "changed", "ambiguous", "orphaned", "unreviewed")
STATUS_DESCRIPTIONS = {
    "unchanged": "its block's fingerprint is where it was",
    "moved": "the same block is at another place of its step; the anchor can be updated without review (claims text "
             "review --moved)",
    "relocated": "the same block is now in another step, and nothing like it is left where it was: review it by name "
                 "(claims text review ID), which moves the statement to that step (and to its lesson's file)",
    "reworded": "its block changed, but every number and formula it holds is still in the block that replaced it, in "
                "the same order",
    "changed": "a number or formula it holds changed or is gone, or the block's numbers changed order: its checks "
               "are suspect until they pass again",
    "ambiguous": "several blocks could be its block (a look-alike, a recap, an identical block elsewhere): it stays "
                 "unplaced until a person anchors it (claims text anchor ID --block N)",
    "orphaned": "no block of the text matches its block",
    "unreviewed": "new or edited since its last review: never stamped against the text",
}
CLEAN = ("unchanged", "moved")
# The estimated similarity (Jaccard, from the sketches) a changed block must keep: in its gap, and anywhere else. A
# second candidate at least as similar as SECOND makes the match ambiguous: a look-alike beside the original.
NEAR, FAR, SECOND = 0.25, 0.5, 0.5
# How many blocks a changed block is compared with: the nearest of its gap, and the nearest of the free blocks
# anywhere (a course text has a few hundred blocks: all of them; a text of a million is searched near the old place).
GAP_CANDIDATES, FAR_CANDIDATES = 64, 2000


@dataclass(frozen=True)
class Anchored:
    """One entry the text must hold: a statement of the ledger, or a mark of ``nothing_checkable``."""

    key: str  # the statement's id, or "mark FILE:LINE"
    is_mark: bool
    file: str
    line: int
    where: str
    anchor: Anchor | None
    reviewed: bool
    holds: tuple[tuple[str, int], ...]
    numbers: str | None = None  # where its numbers stood among its block's, when the anchor records it


@dataclass(frozen=True)
class Resolution:
    """Where an entry's block is now, and what that makes of it."""

    status: str  # one of ANCHOR_STATUSES
    drift: str  # the block's fate, review aside: a status but 'unreviewed', or 'unanchored'
    block: Block | None = None
    missing: tuple[str, ...] = ()  # held items gone, or printed another number of times
    similarity: float | None = None
    candidates: tuple[Block, ...] = ()  # an ambiguous entry's blocks, the likeliest first
    reordered: bool = False  # the block's numbers are the same, in another order


@dataclass
class TextState:
    """The ledger against the text: every entry's resolution, what no entry holds, and the counts."""

    documents: list[Document]
    statements: dict[str, Resolution]
    marks: list[tuple[Anchored, Resolution]]
    not_in_text: list[str]  # statements of origin 'harness'
    uncovered: list[Block]
    unheld: list[tuple[Block, str, int]]
    steps_not_in_text: list[str]
    items: dict[str, dict[str, int]] = field(default_factory=dict)  # numbers / formulas: total, held, marked, unheld
    unbound: list[str] = field(default_factory=list)  # held numbers no check states (claims_harness._text.binding)

    @property
    def clean(self) -> bool:
        return (all(resolution.status in CLEAN for resolution in self.statements.values())
                and all(resolution.status in CLEAN for _, resolution in self.marks)
                and not self.uncovered and not self.unheld and not self.steps_not_in_text and not self.unbound)

    def counts(self) -> dict[str, int]:
        found = Counter(resolution.status for resolution in self.statements.values())
        return {status: found[status] for status in ANCHOR_STATUSES}


def anchored_entries(catalogue: Catalogue) -> tuple[list[Anchored], list[str]]:
    """The ledger's statements of the text and its marks, as entries; and the ids of the harness's own statements."""
    entries, harness_own = [], []
    for key, stated in catalogue.statements.items():
        statement = stated.statement
        if statement.origin == "harness":
            harness_own.append(key)
            continue
        anchor = statement.anchor
        entries.append(Anchored(key, False, stated.file, stated.line, statement.where, anchor,
                                anchor is not None and is_reviewed(statement, anchor),
                                tuple(parse_hold(hold) for hold in anchor.holds) if anchor else (),
                                anchor.numbers if anchor else None))
    for marked in catalogue.marks:
        mark = marked.mark
        entries.append(Anchored(f"mark {marked.file}:{marked.line}", True, marked.file, marked.line, mark.where,
                                mark.anchor, is_reviewed(mark, mark.anchor),
                                tuple(parse_hold(hold) for hold in mark.anchor.holds), mark.anchor.numbers))
    for entry in entries:
        if entry.anchor is not None:
            for value, version in ((entry.anchor.fingerprint, NORMALISATION), (entry.anchor.sketch, SKETCH)):
                if value.partition(":")[0] != version:
                    raise ClaimsError(f"{entry.file}:{entry.line}: {entry.key}: the anchor's '{value[:3]}...' is of a "
                                      f"version this harness does not know (it writes {version}); anchor it again "
                                      "with 'claims text anchor'")
    return entries, harness_own


def resolve(entries: Sequence[Anchored], documents: Sequence[Document], course_steps: Iterable[str] = ()
            ) -> TextState:
    """Every entry against ``documents``, then what no entry holds (see the module's docstring)."""
    steps = {step.id: step for document in documents for step in document.steps.values()}
    by_fingerprint: dict[str, list[Block]] = defaultdict(list)
    for document in documents:
        for step in document.steps.values():
            for block in [step.heading, *step.blocks] if step.heading is not None else step.blocks:
                by_fingerprint[block.fingerprint].append(block)
    order = {step: index for index, step in enumerate(steps)}
    # An old block is what anchors name: several statements may stand on one.
    olds = sorted({(entry.where, entry.anchor.block, entry.anchor.fingerprint, entry.anchor.sketch)
                   for entry in entries if entry.anchor is not None},
                  key=lambda old: (order.get(old[0], len(order)), old[0], old[1]))
    exact: dict[tuple, Block] = {}
    taken: set[int] = set()
    # First every old block that is still in its own step: a block of another step with the same fingerprint is
    # that step's own (a recap, an identical item), never taken from the anchors that stand on it there.
    for old in olds:
        where, position, fingerprint, _ = old
        here = [block for block in by_fingerprint.get(fingerprint, ()) if id(block) not in taken
                and block.step == where]
        if here:
            exact[old] = min(here, key=lambda block: abs(block.position - position))
            taken.add(id(exact[old]))
    elsewhere: dict[tuple, Block] = {}
    for old in olds:
        free = [block for block in by_fingerprint.get(old[2], ()) if id(block) not in taken]
        if old not in exact and free:
            elsewhere[old] = free[0]
            taken.add(id(free[0]))
    in_place = _in_place(olds, exact)
    every = [block for document in documents for block in document.blocks()]
    first = {}  # each step's first block's index in ``every``
    for index, block in enumerate(every):
        first.setdefault(block.step, index)
    free = [index for index, block in enumerate(every) if id(block) not in taken]
    fuzzy: dict[tuple, tuple[Block, float]] = {}
    ambiguous: dict[tuple, tuple[Block, ...]] = {}
    for old in olds:
        if old in exact:
            continue
        left_behind = _gap_candidates(old, exact, in_place, steps)
        if old in elsewhere:
            # The same block in another step is a move only where nothing like it is left at the old place.
            if left_behind:
                ambiguous[old] = (elsewhere[old], left_behind[0][1])
            continue
        around = first.get(old[0], 0) + old[1]
        at = bisect.bisect_left(free, around)
        nearby = [every[index] for index in free[max(0, at - FAR_CANDIDATES // 2):at + FAR_CANDIDATES // 2]]
        candidates = left_behind or _likeliest(old[3], nearby, FAR)
        if len(candidates) > 1 and candidates[1][0] >= SECOND:
            ambiguous[old] = tuple(block for _, block in candidates[:3])
        elif candidates:
            fuzzy[old] = (candidates[0][1], round(candidates[0][0], 3))

    def resolution(entry: Anchored) -> Resolution:
        if entry.anchor is None:
            return Resolution("unreviewed", "unanchored")
        old = (entry.where, entry.anchor.block, entry.anchor.fingerprint, entry.anchor.sketch)
        similar = None
        if old in ambiguous:
            return Resolution("ambiguous" if entry.reviewed else "unreviewed", "ambiguous",
                              candidates=ambiguous[old])
        if old in exact:
            block = exact[old]
            drift = "unchanged" if old in in_place else "moved"
        elif old in elsewhere:
            block, drift = elsewhere[old], "relocated"
        elif old in fuzzy:
            block, similar = fuzzy[old]
            drift = "reworded"
        else:
            return Resolution("orphaned" if entry.reviewed else "unreviewed", "orphaned")
        missing = tuple(item for item, count in entry.holds if block.items.get(item, 0) != count)
        # Numbers that swapped places, or a number added beside those held: the same items, another sentence.
        reordered = (not missing and drift == "reworded" and entry.numbers is not None and entry.holds
                     and block.kind != FORMULA and block.places_of(item for item, _ in entry.holds) != entry.numbers)
        if missing or reordered:
            drift = "changed"
        return Resolution(drift if entry.reviewed else "unreviewed", drift, block, missing, similar,
                          reordered=bool(reordered))

    statements: dict[str, Resolution] = {}
    marks: list[tuple[Anchored, Resolution]] = []
    for entry in entries:
        if entry.is_mark:
            marks.append((entry, resolution(entry)))
        else:
            statements[entry.key] = resolution(entry)
    return _holdings(documents, entries, statements, marks, [key for key in course_steps if key not in steps])


def _in_place(olds: list[tuple], exact: dict[tuple, Block]) -> set[tuple]:
    """The old blocks that kept their step and their order there (a longest increasing run of new positions)."""
    kept: set[tuple] = set()
    by_step: dict[str, list[tuple]] = defaultdict(list)
    for old in olds:
        if old in exact and exact[old].step == old[0]:
            by_step[old[0]].append(old)
    for run in by_step.values():
        positions = [exact[old].position for old in run]  # run is in old order
        kept.update(run[index] for index in _longest_increasing(positions))
    return kept


def _longest_increasing(values: list[int]) -> list[int]:
    """The indices of a longest strictly increasing subsequence; among the longest, the one ending earliest."""
    best = [1] * len(values)
    before = [-1] * len(values)
    for index, value in enumerate(values):
        for earlier in range(index):
            if values[earlier] < value and best[earlier] + 1 > best[index]:
                best[index], before[index] = best[earlier] + 1, earlier
    if not values:
        return []
    index = max(range(len(values)), key=lambda at: (best[at], -at))
    chosen = []
    while index >= 0:
        chosen.append(index)
        index = before[index]
    return chosen[::-1]


def _gap_candidates(old: tuple, exact: dict[tuple, Block], in_place: set[tuple], steps: dict
                    ) -> list[tuple[float, Block]]:
    """The blocks of ``old``'s gap (between the new places of its unchanged neighbours in its step) at NEAR or more,
    the likeliest first; a renamed title is its step's title.

    Every block of the gap is a candidate, also one whose fingerprint another anchor names: after some of a
    paragraph's statements were reviewed against its new wording, the others' old block still maps there.
    """
    where, position, _, sketched = old
    step = steps.get(where)
    if step is None:
        return []
    if position == 0:  # the step is still there: its title is its title, however renamed
        return [(similarity(sketched, step.heading.sketch), step.heading)] if step.heading is not None else []
    before = [exact[other].position for other in in_place if other[0] == where and other[1] < position]
    after = [exact[other].position for other in in_place if other[0] == where and other[1] > position]
    low, high = max(before, default=0), min(after, default=len(step.blocks) + 1)
    # The gap's blocks nearest the old position: a revision's gap is a few paragraphs, a hostile one is bounded.
    start = min(max(low + 1, position - GAP_CANDIDATES // 2), max(low + 1, high - GAP_CANDIDATES))
    gap = step.blocks[max(0, start - 1):min(high - 1, start - 1 + GAP_CANDIDATES)]
    return _likeliest(sketched, gap, NEAR)


def _likeliest(sketched: str, blocks: list[Block], threshold: float) -> list[tuple[float, Block]]:
    """The blocks at ``threshold`` or more like the sketch, the likeliest first (the earlier of equals first)."""
    scored = [(similarity(sketched, block.sketch), index, block) for index, block in enumerate(blocks)]
    return [(score, block) for score, _, block in sorted(scored, key=lambda found: (-found[0], found[1]))
            if score >= threshold]


def _holdings(documents: Sequence[Document], entries: Sequence[Anchored], statements: dict[str, Resolution],
              marks: list[tuple[Anchored, Resolution]], steps_not_in_text: list[str]) -> TextState:
    """What stands on each block now: the uncovered blocks, the unheld items and the share of items held."""
    standing: dict[int, list[Anchored]] = defaultdict(list)
    marked: dict[int, list[Anchored]] = defaultdict(list)
    by_key = {entry.key: entry for entry in entries}
    for key, found in statements.items():
        if found.block is not None:
            standing[id(found.block)].append(by_key[key])
    for entry, found in marks:
        if found.block is not None and (found.status in CLEAN or found.status == "relocated"):
            marked[id(found.block)].append(entry)  # a relocated mark is on its block, only in another step
    uncovered, unheld = [], []
    items = {kind: dict.fromkeys(("total", "held", "marked", "unheld"), 0) for kind in ("numbers", "formulas")}
    for document in documents:
        for block in _with_titles(document):
            held = {item for entry in standing[id(block)] for item, _ in entry.holds}
            whole_mark = any(not entry.holds for entry in marked[id(block)])
            marked_items = {item for entry in marked[id(block)] for item, _ in entry.holds}
            if not standing[id(block)] and not whole_mark:
                uncovered.append(block)
            counts = items["formulas" if block.kind == FORMULA else "numbers"]
            for item, count in block.items.items():
                counts["total"] += count
                if item in held:
                    counts["held"] += count
                elif whole_mark or item in marked_items:
                    counts["marked"] += count
                else:
                    counts["unheld"] += count
                    unheld.append((block, item, count))
    return TextState(list(documents), statements, marks, [], uncovered, unheld, steps_not_in_text, items)


def _with_titles(document: Document) -> list[Block]:
    """Every block of every step, each step's title (its block 0) first: a title is compared like a block."""
    return [block for step in document.steps.values()
            for block in ([step.heading] if step.heading is not None else []) + step.blocks]

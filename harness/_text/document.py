"""A document of the course text: read by path, split into steps and blocks, each block normalised and fingerprinted.

Reading is bounded: at most ``MAX_TEXT_BYTES`` of a regular file (a device, a pipe or a directory
is refused by its type, as claim files are), strict UTF-8, no control characters but tab and the
line ends, no block longer than ``MAX_BLOCK_CHARACTERS`` and at most ``MAX_BLOCKS`` blocks; every
refusal names the file, the line and the fix. Every pass over the text is linear in its size.

Steps are found line by line by the document's ``step`` pattern ([tool.claims.texts.NAME]); a
line the ``end`` pattern matches closes the current step, and text outside every step (front
matter, a lesson's contents, back matter) belongs to no step. A step's title (its heading line
after what the pattern matched) is its block 0: a statement may stand on it, and none needs to.
Within a step:

- the ``text`` format (the module's export: one paragraph a line) makes every non-blank line a
  block: a *formula* when it is LaTeX math, a *row* when it holds a tab, an *item* when it starts
  with a bullet or stands in a run of lines with no blank between them, else a *paragraph*;
- the ``markdown`` format makes a block of every paragraph (its lines joined), list item, heading,
  table row, fenced block and ``$$ ... $$`` formula.

The block splitter is written here, not taken from a Markdown library: the module's export is not
Markdown, and what a block is needs only blank lines, bullets, fences and ``$$``.

Each block's text is normalised (``n1``), then fingerprinted and sketched (``m1``), as
``claims_harness._text.fingerprints`` says.

A block's *items* are what a statement can hold: a formula block is one item, the formula as
printed; any other block's items are its numbers as printed (``0.273``, ``−⅓``, ``0.9³``,
``4.1.2``), found outside LaTeX sub- and superscripts (``r_{t+1}`` holds no number) and names written
with underscores (``module_15_information_geometry``), with a minus sign when it stands directly
before the digits after a space, a bracket or ``=``.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from claims_harness._claims.course import Course, TextSource
from claims_harness._text.fingerprints import fingerprint, normalise, sketch
from claims_harness.errors import ClaimsError, did_you_mean, visible

# The module is 82 KB; a text fifty times larger is data pasted by mistake, refused before it is split.
MAX_TEXT_BYTES = 4 << 20
# The longest paragraph of the module is about 2,600 characters, and it has 319 blocks.
MAX_BLOCK_CHARACTERS = 50_000
MAX_BLOCKS = 20_000
NUMBERS = "q1"

FORMULA, PARAGRAPH, ITEM, ROW, HEADING, CODE = "formula", "paragraph", "item", "row", "heading", "code"


@dataclass(frozen=True)
class Block:
    """One block of a step: its place, its kind and its normalised text (kept in memory, never written)."""

    document: str
    step: str
    position: int  # 1-based, within the step
    line: int  # the first line of the file it stands on
    kind: str
    text: str

    @functools.cached_property
    def fingerprint(self) -> str:
        return fingerprint(self.text)

    @functools.cached_property
    def sketch(self) -> str:
        return sketch(self.text)

    @functools.cached_property
    def items(self) -> Counter[str]:
        """What a statement can hold here, each with its number of occurrences: a formula block's formula, else its
        numbers as printed."""
        return Counter([self.text] if self.kind == FORMULA else numbers_in(self.text))

    def places_of(self, held: Iterable[str]) -> str:
        """``q1:`` and a digest of where each of the ``held`` numbers stands among the block's numbers in the order
        printed: two numbers that swap places change it, another number of the block changing does not."""
        printed = numbers_in(self.text)
        places = [[item, [index for index, number in enumerate(printed) if number == item]] for item in sorted(held)]
        return f"{NUMBERS}:{hashlib.sha256(repr(places).encode('utf-8')).hexdigest()[:16]}"

    @property
    def place(self) -> str:
        return f"{self.step} block {self.position}"


@dataclass
class Step:
    id: str
    title: str
    line: int
    blocks: list[Block] = field(default_factory=list)
    heading: Block | None = None  # the title, block 0: a statement may stand on it, and none needs to

    def block(self, position: int) -> Block | None:
        if position == 0:
            return self.heading
        return self.blocks[position - 1] if 1 <= position <= len(self.blocks) else None


@dataclass
class Document:
    """A document of the course text as read now: its steps in order, with their blocks."""

    name: str
    path: Path
    fingerprint: str
    steps: dict[str, Step]

    def blocks(self) -> list[Block]:
        """Every block of every step, in order; the steps' headings are not among them."""
        return [block for step in self.steps.values() for block in step.blocks]


def read_documents(course: Course, overrides: dict[str, Path] | None = None) -> list[Document]:
    """Every document ``[tool.claims.texts]`` configures, read now; ``overrides`` replace paths by name.

    Raises:
      ClaimsError: when an override names no document, a file cannot be read or split, or a step is
        found in two documents.
    """
    overrides = dict(overrides or {})
    names = [source.name for source in course.texts]
    unknown = [name for name in overrides if name not in names]
    if unknown:
        raise ClaimsError(f"--text {unknown[0]}=...: the course has no document named '{unknown[0]}'; its documents "
                          f"are {', '.join(names) or 'none ([tool.claims.texts] is not configured)'}")
    documents, seen = [], {}
    for source in course.texts:
        document = read_document(source, course, overrides.get(source.name))
        for step in document.steps.values():
            if step.id in seen:
                raise ClaimsError(f"{document.path}:{step.line}: step '{step.id}' is also a step of the document "
                                  f"'{seen[step.id]}'; a step belongs to one document: fix the 'step' pattern of "
                                  f"{source.key} or of the other")
            seen[step.id] = document.name
        documents.append(document)
    return documents


def step_in(documents: Iterable[Document], step: str) -> Step:
    """The step ``step`` of whichever document has it; a ClaimsError naming the nearest steps otherwise."""
    documents = list(documents)
    for document in documents:
        if step in document.steps:
            return document.steps[step]
    known = [name for document in documents for name in document.steps]
    raise ClaimsError(f"no step {step} in the text{did_you_mean(step, known)}")


def read_document(source: TextSource, course: Course, path: Path | None = None) -> Document:
    """The document ``source`` configures (or the file at ``path`` in its stead), split into steps and blocks."""
    path = Path(path) if path is not None else source.path
    shown = visible(str(path))
    text = _read_text(path, source, shown)
    lines = text.split("\n")
    steps: dict[str, Step] = {}
    step: Step | None = None
    context: dict[str, str] = {}
    chunks: list[tuple[int, list[str]]] = []  # the current step's runs of non-blank lines: (first line, lines)
    counted = pending = 0  # the blocks of the steps closed, and at least those of the current one's lines

    def close() -> None:
        nonlocal counted, pending
        pending = 0
        if step is not None:
            step.blocks = _blocks(source, step.id, chunks, shown)
            counted += len(step.blocks)
            if counted > MAX_BLOCKS:
                raise _too_many_blocks(shown, step.blocks[len(step.blocks) - (counted - MAX_BLOCKS)].line)
        chunks.clear()

    for number, line in enumerate(lines, start=1):
        if source.section is not None and (section := source.section.match(line)):
            context.update({key: value for key, value in section.groupdict().items() if value is not None})
        heading = source.step.match(line)
        if heading:
            close()
            name = _step_name(source, heading, context, shown, number)
            if name in steps:
                raise ClaimsError(f"{shown}:{number}: step '{name}' is found a second time (first at line "
                                  f"{steps[name].line}) by the 'step' pattern {source.step.pattern!r} of "
                                  f"{source.key}; each step has one heading: fix the text or the pattern")
            if not course.is_step(name):
                raise ClaimsError(f"{shown}:{number}: step '{visible(name)}', found by the 'step' pattern "
                                  f"{source.step.pattern!r} of {source.key}, is not a step of the course; add it to "
                                  f"[tool.claims] steps (and to the 'steps' of its claim file), or fix the pattern")
            title = line[heading.end():].strip(" —–-:.\t")
            step = steps[name] = Step(name, title, number)
            step.heading = Block(source.name, name, 0, number, HEADING, normalise(title))
        elif source.end is not None and source.end.match(line):
            close()
            step = None
        elif step is not None and line.strip():
            if chunks and chunks[-1][0] + len(chunks[-1][1]) == number:
                chunks[-1][1].append(line)
                pending += source.format == "text"
            else:
                chunks.append((number, [line]))
                pending += 1
            # At least one block a line (the text format) or a run of lines (Markdown): refuse before splitting.
            if counted + pending > MAX_BLOCKS:
                raise _too_many_blocks(shown, number)
    close()
    if not steps:
        raise ClaimsError(f"{shown}:1: the 'step' pattern {source.step.pattern!r} of {source.key} finds no step in "
                          f"{len(lines)} lines; fix the pattern (it is matched at the start of each line) or the "
                          "path")
    return Document(source.name, path, fingerprint(normalise(text)), steps)


def _too_many_blocks(shown: str, line: int) -> ClaimsError:
    return ClaimsError(f"{shown}:{line}: block {MAX_BLOCKS + 1} of the text's steps; a course text has at most "
                       f"{MAX_BLOCKS} (the module has some 300): is this the document?")


def _step_name(source: TextSource, heading: re.Match[str], context: dict[str, str], shown: str, line: int) -> str:
    groups = {**context, **{key: value for key, value in heading.groupdict().items() if value is not None}}
    if source.id is None:
        return groups["step"]
    missing = [name for name in re.findall(r"\{(\w+)\}", source.id) if name not in groups]
    if missing:
        raise ClaimsError(f"{shown}:{line}: the step heading here leaves {', '.join(missing)} of the 'id' template "
                          f"{source.id!r} of {source.key} unset: no line before it matched the 'section' pattern; "
                          "fix the text or the patterns")
    return re.sub(r"\{(\w+)\}", lambda match: groups[match.group(1)], source.id)


def _read_text(path: Path, source: TextSource, shown: str) -> str:
    """The text at ``path``, as the document's lines joined by ``\\n``: bounded, UTF-8, without control characters."""
    try:
        info = os.stat(path)
    except OSError as error:
        missing = error.errno in (errno.ENOENT, errno.ENOTDIR)
        raise ClaimsError(f"{source.key} path: {shown} " + ("does not exist" if missing else
                                                            f"cannot be read ({error.strerror})") +
                          "; set 'path' to the document's file (relative to the project root), or pass "
                          f"--text {source.name}=PATH") from None
    if not stat.S_ISREG(info.st_mode):
        raise ClaimsError(f"{source.key} path: {shown} is not a regular file; name the document's file")
    if info.st_size > MAX_TEXT_BYTES:
        raise ClaimsError(f"{shown}: {info.st_size} bytes; a course text is at most {MAX_TEXT_BYTES} bytes: is this "
                          "the document?")
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise ClaimsError(f"{source.key} path: {shown} cannot be read ({error.strerror})") from None
    with os.fdopen(descriptor, "rb") as file:
        data = file.read(MAX_TEXT_BYTES + 1)
    if len(data) > MAX_TEXT_BYTES:
        raise ClaimsError(f"{shown}: more than {MAX_TEXT_BYTES} bytes; a course text is at most {MAX_TEXT_BYTES} "
                          "bytes: is this the document?")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ClaimsError(f"{shown}:{line}: not valid UTF-8 (byte {error.start}: "
                          f"{data[error.start:error.start + 1]!r}); save the text as UTF-8") from None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    control = _CONTROL.search(text)
    if control:
        line = text.count("\n", 0, control.start()) + 1
        raise ClaimsError(f"{shown}:{line}: the text holds U+{ord(control.group()):04X}, a control character; a "
                          "course text holds printable characters, tabs and line ends only: remove it")
    return text


# C0 and C1 controls but tab and line feed, and DEL; a form feed or a vertical tab is no part of a course text either.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# --------------------------------------------------------------------------- blocks

_BULLET = re.compile(r"^\s*(?:[•\-*+–·]\s|\d{1,3}[.)]\s)")
_MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def _blocks(source: TextSource, step: str, chunks: list[tuple[int, list[str]]], shown: str) -> list[Block]:
    found: list[tuple[int, str, str]] = []  # (line, kind, raw text)
    for first, lines in chunks:
        if source.format == "markdown":
            found.extend(_markdown_blocks(first, lines))
        else:
            run = len(lines) > 1
            for offset, line in enumerate(lines):
                kind = (FORMULA if is_display_formula(line) else ROW if "\t" in line.strip() else
                        ITEM if run or _BULLET.match(line) else PARAGRAPH)
                found.append((first + offset, kind, line))
    blocks = []
    for line, kind, raw in found:
        text = normalise(raw)
        if len(text) > MAX_BLOCK_CHARACTERS:
            raise ClaimsError(f"{shown}:{line}: a block of {len(text)} characters; a paragraph of a course text is at "
                              f"most {MAX_BLOCK_CHARACTERS}: break the line into paragraphs")
        if text:
            blocks.append(Block(source.name, step, len(blocks) + 1, line, kind, text))
    return blocks


def _markdown_blocks(first: int, lines: list[str]) -> list[tuple[int, str, str]]:
    """A run of non-blank Markdown lines as blocks: fences and ``$$`` formulas first, then headings, rows and items."""
    blocks: list[tuple[int, str, list[str]]] = []
    index = 0
    while index < len(lines):
        line, number = lines[index], first + index
        stripped = line.strip()
        fence = _FENCE.match(line)
        if fence or stripped.startswith("$$"):
            closing = fence.group(1) if fence else "$$"
            body = [line]
            done = not fence and stripped.endswith("$$") and len(stripped) > 2
            while not done and index + 1 < len(lines):
                index += 1
                body.append(lines[index])
                done = lines[index].strip().startswith(closing) if fence else lines[index].strip().endswith("$$")
            text = "\n".join(body)
            blocks.append((number, CODE, [text]) if fence else
                          (number, FORMULA, [text.strip().removeprefix("$$").removesuffix("$$")]))
        elif _MARKDOWN_HEADING.match(line):
            blocks.append((number, HEADING, [stripped.lstrip("#")]))
        elif stripped.startswith("|"):
            if not re.fullmatch(r"\|?[\s:|-]+\|?", stripped):  # a table's delimiter row is no block
                blocks.append((number, ROW, [stripped]))
        elif _BULLET.match(line):
            blocks.append((number, ITEM, [_BULLET.sub("", line, count=1)]))
        elif blocks and blocks[-1][1] in (PARAGRAPH, ITEM) and blocks[-1][0] + len(blocks[-1][2]) == number:
            blocks[-1][2].append(line)
        else:
            blocks.append((number, PARAGRAPH, [line]))
        index += 1
    return [(number, kind, "\n".join(body)) for number, kind, body in blocks]


# Groups whose letters are the formula's own words, not prose: \text{old}, \mathrm{token\text{-}clip}.
_WORD_GROUPS = re.compile(r"\\(?:text|mathrm|operatorname|mathbf|mathbb|mathcal|mathit|mathsf|textbf|textit|mbox)"
                          r"\s*\{")
_PROSE_WORD = re.compile(r"(?<![\\\w])[^\W\d_]{3,}")
_MATH_MARK = re.compile(r"\\[A-Za-z]+|[=^_<>≤≥≈]")


def is_display_formula(line: str) -> bool:
    """Whether a line of a plain text is displayed LaTeX math: a math mark, no prose word outside ``\\text{}``."""
    if not _MATH_MARK.search(line) or _BULLET.match(line):
        return False
    return not _PROSE_WORD.search(_blanked(line, _WORD_GROUPS, lambda text, group: _closing_brace(text, group.end())))


def _blanked(text: str, opening: re.Pattern[str], end_of: Callable[[str, re.Match[str]], int]) -> str:
    """``text`` with every group that ``opening`` finds blanked up to ``end_of`` it, offsets kept; a group opened
    inside another is part of it."""
    out, index = [], 0
    for match in opening.finditer(text):
        if match.start() >= index:
            end = end_of(text, match)
            out += [text[index:match.start()], " " * (end - match.start())]
            index = end
    out.append(text[index:])
    return "".join(out)


def _closing_brace(text: str, start: int) -> int:
    """The index after the brace that closes the group opened just before ``start`` (or the end of the text)."""
    depth, index = 1, start
    while index < len(text) and depth:
        if text[index] == "\\":
            index += 2  # an escaped character, a brace included, opens and closes nothing
            continue
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        index += 1
    return index


# --------------------------------------------------------------------------- items

_FRACTIONS = "¼½¾⅐⅑⅒⅓⅔⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞"
_SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_NUMBER = re.compile(rf"(?<![\w.])([-−]?)(\d+(?:\.\d+)*|[{_FRACTIONS}])[{_SUPERSCRIPT_DIGITS}]*(?!\w)")
# A minus belongs to the number only when it follows one of these (or starts the text): '= -10', '(−⅓', ' −2'.
_SIGN_FOLLOWS = set(" ([{=,;:$«\"'/")
_SCRIPT = re.compile(r"[_^] *")  # with the spaces after the mark: '_ {t}' is the script '{t}'
_SCRIPT_COMMAND = re.compile(r"\\[A-Za-z]+|\\.")
# A name written with underscores (module_15_information_geometry, max_tokens) holds no number; r_t and s_0 are
# sub-scripts, which number_spans blanks.
_IDENTIFIER = re.compile(r"(?<![\w\\])[^\W\d_]\w*(?:_[^\W_]+)+")
_COMMAND = re.compile(r"(\\[A-Za-z]+)")


def numbers_in(text: str) -> list[str]:
    """Every number printed in ``text``, outside sub- and superscripts, with its sign where it has one."""
    return [text[start:end] for start, end in number_spans(text)]


def number_spans(text: str) -> list[tuple[int, int]]:
    """Where in ``text`` each number of :func:`numbers_in` is printed: (start, end) offsets."""
    named = _IDENTIFIER.sub(lambda match: " " * len(match.group()) if any(
        len(part) > 1 for part in match.group().split("_")[1:]) else match.group(), text)
    scanned = _COMMAND.sub(lambda match: " " * len(match.group()), _blanked(named, _SCRIPT, _script_end))
    spans = []
    for match in _NUMBER.finditer(scanned):
        start = match.start()
        if match.group(1) and start > 0 and scanned[start - 1] not in _SIGN_FOLLOWS:
            start += 1  # a minus after an operand is subtraction: '5−2' prints the number 2
        spans.append((start, match.end()))
    return spans


def _script_end(text: str, script: re.Match[str]) -> int:
    """Where the LaTeX sub- or superscript that ``script`` opens ends: after its braced group (``_{t+1}``), its
    command (``_\\theta``) or its one character (``^2``): what number_spans blanks, since indices are no numbers."""
    after = script.end()
    if text.startswith("{", after):
        return _closing_brace(text, after + 1)
    command = _SCRIPT_COMMAND.match(text, after)
    return after + len(command.group()) if command else min(len(text), after + 1)

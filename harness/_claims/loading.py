"""Reading claim files: safe YAML with line numbers, validation, and cross-file checks.

Loading never stops at the first defect. A file that is not YAML becomes one problem for that
file; a claim that is malformed becomes one broken entry carrying its problems; every other
claim loads normally. Nothing in a claim file is executed: the YAML is read with a safe
loader that also refuses aliases (no expansion bombs) and duplicate keys (no silent loss), and
every value must be plain data (text, numbers, booleans, lists, mappings): a tag that makes
anything else (bytes, a set whose order changes between runs, a date), a tagged or non-text key
and text that cannot be written out as UTF-8 (a lone surrogate from a "\\udfff" escape) are
problems of the field that holds them. Only regular files inside the project are read, and at
most ``MAX_FILE_BYTES`` of them; anything else named ``*.yaml`` (a directory, a device, a pipe, a
looping or outward symlink) is a problem of that file, never silently skipped.
"""

from __future__ import annotations

import errno
import math
import os
import re
import stat
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from harness._claims.course import Course, find_course
from harness._claims.errors import ClaimsError, Problem, did_you_mean
from harness._claims.expect import ExpectationError, FloatLiteral
from harness._claims.formats import visible
from harness._claims.registry import Verifier, registered
from harness._claims.schema import Check, Claim, ClaimFile, Mark, Statement
from harness._claims.sources import Source, read_sources

MODELINE = "# yaml-language-server: $schema=schema.json"
MAX_FILE_BYTES = 1 << 20
_BYTE_ORDER_MARK = "\ufeff"


@dataclass(frozen=True)
class ClaimEntry:
    """One claim as found in a file: usable (``claim`` set) or broken (``problems`` set)."""

    file: str
    line: int
    index: int
    id: str
    where: str | None
    claim: Claim | None
    check_lines: tuple[int, ...] = ()
    problems: tuple[Problem, ...] = ()
    # The line of each of the claim's own fields; not part of the entry's identity (nor hashable).
    field_lines: Mapping[str, int] = field(default_factory=dict, compare=False)

    @property
    def broken(self) -> bool:
        return self.claim is None or bool(self.problems)


@dataclass(frozen=True)
class StatementEntry:
    """One statement of a ledger, with the file and line that state it."""

    file: str
    line: int
    statement: Statement


@dataclass(frozen=True)
class MarkEntry:
    """One mark of ``nothing_checkable``, with the file and line that state it."""

    file: str
    line: int
    mark: Mark


@dataclass
class Catalogue:
    """Every claim of a claims directory, with the sources and verifiers they refer to."""

    root: Path
    files: list[str]
    entries: list[ClaimEntry]
    file_problems: dict[str, list[Problem]]
    titles: dict[str, str]
    steps: dict[str, list[str]]
    sources: dict[str, Source]
    verifiers: Mapping[str, Verifier] = field(repr=False, default_factory=dict)
    statements: dict[str, StatementEntry] = field(default_factory=dict)
    marks: list[MarkEntry] = field(default_factory=list)
    course: Course | None = field(repr=False, default=None)
    claims_dir: Path | None = None

    def problems(self) -> list[Problem]:
        found = [p for problems in self.file_problems.values() for p in problems]
        found += [p for entry in self.entries for p in entry.problems]
        return sorted(found, key=lambda p: (p.file, p.line or 0))

    def covering(self) -> dict[str, list[ClaimEntry]]:
        """Every ledger statement's id with the usable claims that say they check it."""
        covering: dict[str, list[ClaimEntry]] = {key: [] for key in self.statements}
        for entry in self.entries:
            if entry.claim is not None:
                for key in entry.claim.covers:
                    covering.setdefault(key, []).append(entry)
        return covering

    def ledger_problems(self) -> list[Problem]:
        """What keeps the ledger whole: a statement neither checked nor excused, a claim covering nothing or unknowns.

        These do not stop a claim from running (its checks still say what they say, also when its
        file is copied without the ledgers its ``covers`` name); ``claims lint`` and the release
        gate refuse them.
        """
        found = []
        covering = self.covering()
        for key, stated in self.statements.items():
            claims = covering[key]
            if not claims and stated.statement.not_checkable is None:
                found.append(Problem(stated.file, stated.line, f"statement '{key}' ({stated.statement.where}) is "
                                     "checked by no claim", field="statements",
                                     hint=f"add '{key}' to the 'covers' of a claim that checks it, or give the "
                                          "statement 'not_checkable:' with the reason"))
            elif not claims and stated.statement.weak is not None:
                found.append(Problem(stated.file, stated.line, f"statement '{key}' says why its checks are weak, but "
                                     "no claim covers it", field="statements.weak",
                                     hint="drop 'weak', or add the statement to the 'covers' of the claim whose "
                                          "checks it means"))
            elif claims and stated.statement.not_checkable is not None:
                found.append(Problem(stated.file, stated.line, f"statement '{key}' is marked not_checkable but "
                                     f"claim '{claims[0].id}' covers it", field="statements.not_checkable",
                                     hint="drop 'not_checkable' or drop the statement from the claim's 'covers'"))
        for entry in self.entries:
            for key in entry.claim.covers if entry.claim is not None else ():
                if key not in self.statements:
                    found.append(Problem(entry.file, entry.line, f"covers unknown statement '{key}'"
                                         f"{did_you_mean(key, self.statements)}", claim_id=entry.id, field="covers",
                                         hint="name a statement id of a lesson's 'statements' ledger"))
            if entry.claim is not None and not entry.claim.covers:
                found.append(Problem(entry.file, entry.line, f"claim '{entry.id}' covers no ledger statement",
                                     claim_id=entry.id, field="covers",
                                     hint="list the ids of the statements it checks under 'covers:' "
                                          "(each lesson's 'statements' is its ledger)"))
        return sorted(found, key=lambda p: (p.file, p.line or 0))

    def in_file(self, file: str) -> list[ClaimEntry]:
        return [entry for entry in self.entries if entry.file == file]

    def display_of(self, path: Path) -> str:
        """The name the catalogue gives the claim file at ``path`` (its path from the root, the link itself if one)."""
        return _display(path.parent.resolve() / path.name, self.root)


def claim_files(claims_dir: Path) -> list[Path]:
    """Every entry of ``claims_dir`` named ``*.yaml`` or ``*.yml``, whatever it is: reading tells if it is a claim file.

    Hidden names (an editor's lock or swap file, ``.#lesson.yaml``) are not claim files.
    """
    return sorted(p for p in claims_dir.iterdir() if p.suffix in (".yaml", ".yml") and not p.name.startswith("."))


def load_catalogue(claims_dir: Path | None = None, verifiers: bool = True) -> Catalogue:
    """Load and cross-check every claim file in ``claims_dir`` (default: the course's claims directory).

    The course is the one whose tree holds ``claims_dir`` (``harness._claims.course``): its sources file,
    its verifier package and its steps are what the claims are checked against. Without
    ``verifiers`` the verifier package is not imported (a second, for the text's commands, which
    read only the ledger): a claim naming an unknown verifier is then not found out.

    Raises:
      ClaimsError: when ``claims_dir`` is in no course's tree, or is not a directory.
    """
    course = find_course(claims_dir if claims_dir is not None else None)
    claims_dir = (claims_dir if claims_dir is not None else course.claims).resolve()
    if not claims_dir.is_dir():
        raise ClaimsError(f"{claims_dir}: no such directory of claim files; pass --claims-dir, or set 'claims' "
                          f"in [tool.claims] of {course.root / 'pyproject.toml'}")
    root = course.root
    sources = read_sources(course.sources)
    known = registered(course.verifiers) if verifiers else None
    catalogue = Catalogue(root, [], [], {}, {}, {}, sources, known or {}, course=course, claims_dir=claims_dir)
    seen: dict[str, ClaimEntry] = {}
    for path in claim_files(claims_dir):
        display = _display(path, root)
        catalogue.files.append(display)
        entries, problems, header, statements, marks = _load_file(path, display, root)
        catalogue.file_problems[display] = problems
        catalogue.titles[display] = header.title if header else path.stem
        catalogue.steps[display] = header.steps if header else []
        problems.extend(Problem(display, 1, f"step '{step}' is not a step of the course", field="steps",
                                hint=f"the course's steps are {course.describe_steps()} ([tool.claims] steps in "
                                     "pyproject.toml)")
                        for step in catalogue.steps[display] if not course.is_step(step))
        for stated in statements:
            problems.extend(_check_statement(stated, catalogue))
            catalogue.statements.setdefault(stated.statement.id, stated)
        problems.extend(Problem(display, marked.line, f"a mark of step '{marked.mark.where}', which is not one of this "
                                "file's steps", field="nothing_checkable.where",
                                hint=f"use one of {', '.join(catalogue.steps[display])}, or move the mark to the file "
                                     "of its lesson")
                        for marked in marks if catalogue.steps[display] and
                        marked.mark.where not in catalogue.steps[display])
        catalogue.marks.extend(marks)
        for entry in entries:
            if entry.claim is not None:
                entry = _cross_check(entry, seen, sources, known, catalogue.steps[display], course)
                seen.setdefault(entry.id, entry)
            catalogue.entries.append(entry)
    return catalogue


def _display(path: Path, root: Path) -> str:
    """A claim file's name in problems and reports: its path from the root, escaped if the name is not text."""
    try:
        name = path.relative_to(root).as_posix()
    except ValueError:  # a claims directory that is not below the root
        name = path.as_posix()
    # A name that is not UTF-8 arrives with its bytes as lone surrogates; write them as \xNN.
    return visible(os.fsencode(name).decode("utf-8", "backslashreplace"))


class _Unreadable(Exception):
    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message = message
        self.hint = hint


_FILE_TYPES = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
               stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket"}
_NOT_A_FILE = "a claim file is a regular file of the project; remove or rename this entry"


def _read(path: Path, root: Path) -> bytes:
    """The bytes of the regular file at ``path``, inside ``root``, at most ``MAX_FILE_BYTES`` of them.

    Never blocks and never reads without end: a device (``/dev/zero``), a pipe or a directory is
    refused by its type, and the file is opened without blocking and checked again once open.

    Raises:
      _Unreadable: saying what the entry is instead, and what to do.
    """
    try:
        path.name.encode("utf-8")  # a name that is not UTF-8 arrives with its bytes as lone surrogates
    except UnicodeEncodeError:
        raise _Unreadable("the file name is not valid UTF-8", "rename the file to a UTF-8 name") from None
    try:
        info = os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _Unreadable("a symlink that loops: following it never reaches a file", _NOT_A_FILE) from None
        if error.errno == errno.ENOENT and path.is_symlink():
            raise _Unreadable(f"a symlink to nothing: its target '{visible(os.readlink(path))}' does not exist",
                              _NOT_A_FILE) from None
        raise _Unreadable(f"cannot be read: {error.strerror}", "make it readable, or remove it") from None
    if not stat.S_ISREG(info.st_mode):
        raise _Unreadable(f"not a regular file ({_FILE_TYPES.get(stat.S_IFMT(info.st_mode), 'a special file')})",
                          _NOT_A_FILE)
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(root):
        raise _Unreadable(f"a symlink that leaves the project (to {visible(str(target))})",
                          "copy the file into the claims directory, or link to a file inside the project")
    if info.st_size > MAX_FILE_BYTES:
        raise _Unreadable(f"file is {info.st_size} bytes; claim files are limited to {MAX_FILE_BYTES}",
                          "split the lesson's claims or move bulk data into a verifier")
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise _Unreadable(f"cannot be read: {error.strerror}", "make it readable, or remove it") from None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # replaced since it was looked at
            raise _Unreadable("not a regular file", _NOT_A_FILE)
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _Unreadable(f"file is more than {MAX_FILE_BYTES} bytes; claim files are limited to {MAX_FILE_BYTES}",
                          "split the lesson's claims or move bulk data into a verifier")
    return data


def _check_statement(stated: StatementEntry, catalogue: Catalogue) -> list[Problem]:
    statement = stated.statement
    problems = []
    first = catalogue.statements.get(statement.id)
    if first is not None:
        problems.append(Problem(stated.file, stated.line, f"duplicate statement id '{statement.id}'",
                                field="statements.id",
                                hint=f"first defined at {first.file}:{first.line}; "
                                     "statement ids are unique across files"))
    steps = catalogue.steps[stated.file]
    if steps and statement.where not in steps:
        problems.append(Problem(stated.file, stated.line, f"statement '{statement.id}': step '{statement.where}' is "
                                "not one of this file's steps", field="statements.where",
                                hint=f"use one of {', '.join(steps)}, or move it to the ledger of its lesson"))
    return problems


def _cross_check(
    entry: ClaimEntry, seen: Mapping[str, ClaimEntry], sources: Mapping[str, Source],
    verifiers: Mapping[str, Verifier] | None, steps: list[str], course: Course,
) -> ClaimEntry:
    claim = entry.claim
    assert claim is not None
    problems = []

    def problem(message: str, line: int, **where: Any) -> None:
        problems.append(Problem(entry.file, line, message, claim_id=claim.id, **where))

    def line_of(name: str) -> int:
        return entry.field_lines.get(name, entry.line)

    if claim.id in seen:
        first = seen[claim.id]
        problem(f"duplicate id '{claim.id}'", line_of("id"), field="id",
                hint=f"first defined at {first.file}:{first.line}; ids must be unique across all claim files")
    if not course.is_step(claim.where):
        problem(f"step '{claim.where}' is not a step of the course", line_of("where"), field="where",
                hint=f"the course's steps are {course.describe_steps()} ([tool.claims] steps in pyproject.toml)")
    elif steps and claim.where not in steps:
        problem(f"step '{claim.where}' is not one of this file's steps", line_of("where"), field="where",
                hint=f"use one of {', '.join(steps)}, or move the claim to the file of its lesson")
    for key in claim.sources:
        if key not in sources:
            known = ", ".join(sorted(sources)) or "none"
            problem(f"unknown source '{key}'{did_you_mean(key, sources)}", line_of("sources"), field="sources",
                    hint=f"add it to {course.sources.name} as a '### {key}' heading, or use a defined key ({known})")
    for index, (check, line) in enumerate(zip(claim.checks, entry.check_lines, strict=True)):
        if verifiers is None:
            break  # the ledger alone was asked for
        verifier = verifiers.get(check.verifier)
        if verifier is None:
            problem(f"unknown verifier '{check.verifier}'{did_you_mean(check.verifier, verifiers)}", line,
                    check_index=index, field="verifier",
                    hint=None if did_you_mean(check.verifier, verifiers) else
                    "register it with @harness.verifier in a module of verifiers/")
            continue
        if check.kind not in verifier.kinds:
            declared = " or ".join(f"'{kind}'" for kind in verifier.kinds)
            problem(f"a check of kind '{check.kind}' names verifier '{verifier.name}', whose computation is of kind "
                    f"{declared}", line, check_index=index, field="kind",
                    hint=f"write 'kind: {verifier.kinds[0]}' (the kind its @verifier(..., kind=...) at "
                         f"{verifier.location} declares), or name a verifier of kind '{check.kind}'")
        non_finite = list(_non_finite(check.params))
        for path, value in non_finite:
            problem(f"{value!r} is not a finite number; a parameter must be one a verifier can compute with", line,
                    check_index=index, field=".".join(["params", *map(str, path)]),
                    hint="state the finite value the check is about")
        if non_finite:
            continue
        try:
            # Strict: "8" or 8.0 for an int, or "0.35" for a float, is a mistake to show, not a value to coerce.
            verifier.params.model_validate(check.params, strict=True)
        except ValidationError as error:
            for detail in error.errors():
                problem(_describe(detail, verifier.params), line, check_index=index,
                        field="params." + ".".join(str(part) for part in detail["loc"]))
    if not problems:
        return entry
    return ClaimEntry(entry.file, entry.line, entry.index, entry.id, entry.where, entry.claim,
                      entry.check_lines, tuple(problems), entry.field_lines)


def _non_finite(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], float]]:
    """Every NaN or infinity below ``value``, with the keys and indices that lead to it."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, (*path, index))


def _load_file(path: Path, display: str, root: Path
               ) -> tuple[list[ClaimEntry], list[Problem], ClaimFile | None, list[StatementEntry], list[MarkEntry]]:
    """The file's claims, its file-level problems, its header (title, steps) if readable, its ledger and marks."""

    def file_problem(message: str, line: int | None = None, hint: str | None = None
                     ) -> tuple[list, list, None, list, list]:
        return [], [Problem(display, line, message, hint=hint)], None, [], []

    try:
        data = _read(path, root)
    except _Unreadable as error:
        return file_problem(error.message, hint=error.hint)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        return file_problem(f"not valid UTF-8 (byte {error.start})", line, hint="save the file as UTF-8")
    loader = None
    try:
        loader = _ClaimLoader(text)
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        return file_problem(f"not valid YAML: {error.problem or error.context}",
                            mark.line + 1 if mark else None)
    except yaml.reader.ReaderError as error:
        return file_problem(f"not valid YAML: character {error.character!r} is not allowed",
                            text[: error.position].count("\n") + 1, hint="remove control characters")
    except RecursionError as error:
        found = str(error) if str(error).startswith("flow collections") else "nested too deeply"
        return file_problem(f"not valid YAML: {found}",
                            hint=f"claim files need only a few levels (at most {MAX_FLOW_DEPTH} are read)")
    finally:
        if loader is not None:
            loader.dispose()
    problems = []
    if text.startswith(_BYTE_ORDER_MARK):
        problems.append(Problem(display, 1, "the file starts with a byte-order mark (U+FEFF), before the modeline",
                                hint="remove the byte-order mark: save the file as UTF-8 without a BOM"))
    elif not text.startswith(MODELINE):
        problems.append(Problem(display, 1, "the first line is not the schema modeline",
                                hint=f"start the file with '{MODELINE}' so editors validate it"))
    if not isinstance(root, yaml.MappingNode) or root.tag != _MAP:
        message = "the file must be a mapping with 'title', 'steps' and 'claims'"
        return [], [*problems, Problem(display, 1, message + _tag_note(root))], None, [], []
    first_lines: dict[str, int] = {}
    refused_keys = [(key_node, refused) for key_node, _ in root.value if (refused := _key_problem(key_node, loader))]
    if refused_keys:
        # What the file holds under a key that is not plain text cannot be told: read nothing of it.
        return [], [*problems, *(Problem(display, _line(key_node), message, field=visible(str(key_node.value)),
                                         hint=hint) for key_node, (message, hint) in refused_keys)], None, [], []
    for key, node in _pairs(root):
        if key in first_lines:
            problems.append(Problem(display, _line(node), f"duplicate key '{key}' at the top level "
                                    f"(first at line {first_lines[key]})", field=key,
                                    hint="merge the two: YAML would silently keep only the last"))
        first_lines.setdefault(key, _line(node))
    seen: set[int] = set()
    fields = {key: value for key, value in _pairs(root) if key not in ("claims", "statements", "nothing_checkable")}
    claims_node = dict(_pairs(root)).get("claims")
    statements, statement_problems = _load_list(dict(_pairs(root)).get("statements"), display, seen, loader,
                                                Statement, "statements")
    marks, mark_problems = _load_list(dict(_pairs(root)).get("nothing_checkable"), display, seen, loader, Mark,
                                      "nothing_checkable")
    problems.extend(statement_problems + mark_problems)
    statements = [StatementEntry(display, line, statement) for line, statement in statements]
    marks = [MarkEntry(display, line, mark) for line, mark in marks]
    header = None
    try:
        for value in fields.values():
            _refuse_unsafe(value, seen, loader)
        header = ClaimFile.model_validate({**_construct(fields), "claims": [], "statements": []})
    except (ValidationError, _UnsafeYaml) as error:
        problems.extend(_problems(error, display, root, ClaimFile))
    if claims_node is None:
        problems.append(Problem(display, 1, "missing required field 'claims'", hint="add 'claims:' with a list"))
        return [], problems, header, statements, marks
    if not isinstance(claims_node, yaml.SequenceNode) or claims_node.tag != _SEQ:
        message = "'claims' must be a list of claims" + _tag_note(claims_node)
        problems.append(Problem(display, _line(claims_node), message))
        return [], problems, header, statements, marks
    entries = [_load_claim(node, index, display, seen, loader) for index, node in enumerate(claims_node.value)]
    return entries, problems, header, statements, marks


def _load_list(node: yaml.Node | None, display: str, seen: set[int], loader: _ClaimLoader, model: type[BaseModel],
               name: str) -> tuple[list[tuple[int, Any]], list[Problem]]:
    """The items of the list ``name`` (the ledger, the marks) one by one, so that one malformed item hides no other."""
    if node is None:
        return [], []
    if not isinstance(node, yaml.SequenceNode) or node.tag != _SEQ:
        return [], [Problem(display, _line(node), f"'{name}' must be a list" + _tag_note(node), field=name)]
    items, problems = [], []
    for item in node.value:
        try:
            _refuse_unsafe(item, seen, loader)
            items.append((_line(item), model.model_validate(_construct(item))))
        except (ValidationError, _UnsafeYaml) as error:
            for found in _problems(error, display, item, model):
                problems.append(Problem(found.file, found.line, found.message, field=f"{name}.{found.field}"
                                        if found.field else name, hint=found.hint))
    return items, problems


_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


def _tag_note(node: yaml.Node | None) -> str:
    if node is None:
        return ""
    standard = node.tag.startswith("tag:yaml.org,2002:") and "python" not in node.tag
    return "" if standard else f" (the tag '{node.tag}' is not allowed)"


# Plain data: what the YAML core schema reads text, numbers, booleans, null, lists and mappings as.
_PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map"))
_WHY_NOT = {
    "tag:yaml.org,2002:binary": "bytes are not text; write the text itself",
    "tag:yaml.org,2002:set": "a set has no order, so it would read differently from run to run; write a list",
    "tag:yaml.org,2002:omap": "write a plain mapping",
    "tag:yaml.org,2002:pairs": "write a plain mapping",
    "tag:yaml.org,2002:timestamp": "YAML reads an unquoted date as a date; quote it to keep it text",
}
# The characters the YAML reader refuses in a file, refused too when an escape writes them ("\\udfff", "\\x1b").
_UNWRITABLE = yaml.reader.Reader.NON_PRINTABLE


def _refuse_unsafe(node: yaml.Node, seen: set[int], loader: _ClaimLoader) -> None:
    """Raise at the first node below ``node`` that is not plain data, or that was reached before.

    A node reached twice is shared through an alias: the composer shares aliased nodes instead
    of copying them, so an alias "bomb" costs nothing until something expands it; this walk never
    does, and stops at the first repeat. A tag other than the plain ones, a key that is not plain
    text and text the reader would refuse are refused with the node, so the problem names its field.
    """
    first, last = _line(node), node.end_mark.line + 1
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            uses = loader.alias_lines.get(id(current), [])
            line = next((use for use in uses if first <= use <= last), uses[0] if uses else _line(current))
            raise _UnsafeYaml(f"an alias (*name) reuses the value anchored at line {_line(current)}; aliases and "
                              "merge keys are not allowed in claim files: write the value out", line)
        seen.add(id(current))
        if current.tag not in _PLAIN_TAGS:
            raise _UnsafeYaml(f"the tag '{visible(current.tag)}' is not allowed", _line(current), current,
                              _WHY_NOT.get(current.tag))
        if isinstance(current, yaml.ScalarNode):
            unwritable = _UNWRITABLE.search(current.value)
            if unwritable:
                raise _UnsafeYaml(f"the text holds {_character(unwritable.group())}; claim files hold printable text "
                                  "only", _line(current), current, "remove it (an escape such as \\e or \\udfff in "
                                  "a double-quoted string writes it)")
        elif isinstance(current, yaml.MappingNode):
            for key, _ in current.value:
                refused = _key_problem(key, loader)
                if refused:
                    raise _UnsafeYaml(refused[0], _line(key), key, refused[1])
            stack.extend(item for pair in reversed(current.value) for item in reversed(pair))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(reversed(current.value))


def _key_problem(key: yaml.Node, loader: _ClaimLoader) -> tuple[str, str] | None:
    """Why ``key`` cannot name a field, and the fix: a tag, or a plain scalar YAML reads as other than text."""
    if not isinstance(key, yaml.ScalarNode):
        return None  # refused when constructed: "mapping keys must be plain names"
    name = visible(key.value)
    if id(key) in loader.explicit_tags:
        return (f"the key '{name}' has a tag ('{visible(key.tag)}')", "keys are plain field names: remove the tag")
    if key.tag == "tag:yaml.org,2002:merge":
        return f"the key '{name}' is a merge key, which claim files do not allow", "write the keys out"
    if key.tag != "tag:yaml.org,2002:str":
        return (f"the key '{name}' reads as a {key.tag.rsplit(':', 1)[-1]}, not as a name",
                "keys are plain field names: quote it, or rename it")
    return None


def _character(character: str) -> str:
    code = ord(character)
    what = "a lone surrogate" if 0xD800 <= code <= 0xDFFF else "a control character" if code < 0xA0 else \
        "a non-character"
    return f"U+{code:04X} ({what})"


def _load_claim(node: yaml.Node, index: int, display: str, seen: set[int], loader: _ClaimLoader) -> ClaimEntry:
    # A broken claim is shown by the id and step it was given, escaped: they may hold anything.
    id_node = dict(_pairs(node)).get("id") if isinstance(node, yaml.MappingNode) else None
    claim_id = visible(id_node.value) if isinstance(id_node, yaml.ScalarNode) and id_node.value \
        else f"<claim {index + 1}>"
    where_node = dict(_pairs(node)).get("where") if isinstance(node, yaml.MappingNode) else None
    where = visible(where_node.value) if isinstance(where_node, yaml.ScalarNode) else None
    try:
        _refuse_unsafe(node, seen, loader)
        claim = Claim.model_validate(_construct(node))
    except (ValidationError, _UnsafeYaml) as error:
        problems = tuple(_problems(error, display, node, Claim, claim_id))
        return ClaimEntry(display, _line(node), index, claim_id, where, None, problems=problems)
    checks_node = dict(_pairs(node))["checks"]
    check_lines = tuple(_line(check) for check in checks_node.value)
    field_lines = {key: _line(value) for key, value in _pairs(node)}
    return ClaimEntry(display, _line(node), index, claim.id, claim.where, claim, check_lines, field_lines=field_lines)


def _problems(
    error: ValidationError | _UnsafeYaml, display: str, node: yaml.Node, model: type[BaseModel],
    claim_id: str | None = None,
) -> Iterable[Problem]:
    if isinstance(error, _UnsafeYaml):
        loc = _path_to(node, error.node) if error.node is not None else []
        check_index = loc[1] if len(loc) > 1 and loc[0] == "checks" and isinstance(loc[1], int) else None
        rest = loc[2:] if check_index is not None else loc
        yield Problem(display, error.line, error.message, claim_id=claim_id, check_index=check_index,
                      field=visible(".".join(map(str, rest))) or None,
                      hint=error.hint or "claim files are data only: numbers, strings, lists and mappings")
        return
    for detail in error.errors():
        loc = list(detail["loc"])
        cause = (detail.get("ctx") or {}).get("error")
        if isinstance(cause, ExpectationError):
            loc.extend(cause.path)
        check_index = loc[1] if len(loc) > 1 and loc[0] == "checks" and isinstance(loc[1], int) else None
        rest = loc[2:] if check_index is not None else loc
        yield Problem(display, _line(_node_at(node, loc)), _describe(detail, _model_at(model, loc), cause),
                      claim_id=claim_id, check_index=check_index,
                      field=".".join(str(part) for part in rest) or None, hint=_HINTS.get(str(loc[-1]) if loc else ""))


_HINTS = {
    "id": "write ids in kebab-case, e.g. 'loo-identity'",
    "where": "write the step as the course names it ([tool.claims] steps in pyproject.toml)",
    "verifier": "name a registered verifier ('claims verifiers' lists them), e.g. 'baselines.loo_identity'",
}


def _describe(detail: Mapping[str, Any], model: type[BaseModel] | None, cause: Exception | None = None) -> str:
    kind = detail["type"]
    name = str(detail["loc"][-1]) if detail["loc"] else ""
    if isinstance(cause, ExpectationError):
        return str(cause)
    if kind == "missing":
        return f"missing required field '{name}'"
    if kind == "extra_forbidden":
        fields = list(model.model_fields) if model else []
        return f"unknown field '{name}'{did_you_mean(name, fields)}" + (
            f"; valid fields: {', '.join(fields)}" if fields else "")
    if kind == "literal_error":
        expected = detail.get("ctx", {}).get("expected", "")
        choices = re.findall(r"'([^']+)'", expected)
        return f"{detail['input']!r} is not one of {expected}{did_you_mean(str(detail['input']), choices)}"
    if kind == "string_pattern_mismatch":
        return f"{detail['input']!r} does not match the pattern {detail['ctx']['pattern']}"
    message = detail["msg"].removeprefix("Value error, ")
    return f"{message} (got {detail['input']!r})" if "input" in detail and kind != "value_error" else message


def _model_at(model: type[BaseModel], loc: list[Any]) -> type[BaseModel] | None:
    if model is Claim and len(loc) >= 3 and loc[0] == "checks":
        return Check
    return model


class _UnsafeYaml(Exception):
    def __init__(self, message: str, line: int | None, node: yaml.Node | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.node = node
        self.hint = hint


class _Events:
    """The parser half of a loader, over the whole file's events read at once.

    libyaml (PyYAML's C extension, when installed) reads a claim file's events some twenty times
    faster than PyYAML's Python scanner, which was a third of a cold ``pytest claims -k ...``;
    composing nodes from the events stays in Python, where :class:`_ClaimLoader` records what it
    needs. A file libyaml refuses is read again by the Python parser, whose messages name the
    problem as they always did, so only files that both accept are ever read from libyaml's events.
    """

    def __init__(self, stream: str):
        try:
            if not yaml.__with_libyaml__:
                raise yaml.YAMLError("libyaml is not installed")
            events = list(yaml.parse(stream, Loader=yaml.CSafeLoader))
        except yaml.YAMLError:
            # The Python parser takes about a millisecond per level of flow nesting: a file of a hundred
            # thousand brackets would take minutes. Deeper than any claim file needs is refused first.
            depth, line = _flow_depth(stream)
            if depth > MAX_FLOW_DEPTH:
                raise RecursionError(f"flow collections nested {depth} deep at line {line}") from None
            events = list(yaml.parse(stream, Loader=yaml.SafeLoader))
        self._events = deque(events)

    def check_event(self, *choices: type) -> bool:
        return bool(self._events) and (not choices or isinstance(self._events[0], choices))

    def peek_event(self) -> yaml.Event | None:
        return self._events[0] if self._events else None

    def get_event(self) -> yaml.Event:
        return self._events.popleft()

    def dispose(self) -> None:
        self._events.clear()


# Claim files nest a few levels ([..] in {..} in a check); a hundred is far beyond any and quick to refuse.
MAX_FLOW_DEPTH = 100


def _flow_depth(text: str) -> tuple[int, int]:
    """The deepest nesting of flow brackets in ``text`` outside quotes and comments (an upper bound on YAML's
    flow nesting), and the line where it is first reached; stops counting past ``MAX_FLOW_DEPTH``."""
    depth = deepest = 0
    line = where = 1
    quote = None
    previous = "\n"
    for character in text:
        if character == "\n":
            line += 1
            if quote is None:
                previous = character
                continue
        if quote is not None:
            if character == quote:
                quote = None
        elif character in "'\"":
            quote = character
        elif character == "#" and previous in " \t\n":
            quote = "\n"  # a comment ends at the line's end
        elif character in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, line
                if deepest > MAX_FLOW_DEPTH:
                    break
        elif character in "]}":
            depth = max(depth - 1, 0)
        previous = character
    return deepest, where


class _ClaimLoader(_Events, yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """A safe loader that refuses duplicate and non-scalar keys and keeps numeric literals' text.

    It also records the line of every alias, so that loading can say where one is used, and which
    nodes carry a tag written in the file (``!!str``), which a resolved tag does not tell.
    """

    def __init__(self, stream: str):
        _Events.__init__(self, stream)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self.alias_lines: dict[int, list[int]] = {}
        self.explicit_tags: set[int] = set()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.anchors:
                self.alias_lines.setdefault(id(self.anchors[event.anchor]), []).append(event.start_mark.line + 1)
            return super().compose_node(parent, index)
        node = super().compose_node(parent, index)
        if event.tag not in (None, "!"):
            self.explicit_tags.add(id(node))
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _UnsafeYaml("mapping keys must be plain names, not lists or mappings", _line(key_node), key_node)
            key = self.construct_object(key_node, deep=deep)
            if key in keys:
                raise _UnsafeYaml(f"duplicate key '{key}' in one mapping", _line(key_node), key_node)
            keys.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        return FloatLiteral(super().construct_yaml_float(node), node.value)

    def construct_undefined(self, node: yaml.Node) -> Any:
        raise _UnsafeYaml(f"the tag '{node.tag}' is not allowed", _line(node), node)


_ClaimLoader.add_constructor("tag:yaml.org,2002:float", _ClaimLoader.construct_yaml_float)
_ClaimLoader.add_constructor(None, _ClaimLoader.construct_undefined)
# YAML 1.2 reads 1e-6 as a number; PyYAML's YAML 1.1 rules would read it as a string.
_ClaimLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


def _construct(node_or_pairs: yaml.Node | dict[str, yaml.Node]) -> Any:
    loader = _ClaimLoader("")
    try:
        if isinstance(node_or_pairs, dict):
            return {key: loader.construct_object(value, deep=True) for key, value in node_or_pairs.items()}
        return loader.construct_object(node_or_pairs, deep=True)
    except yaml.constructor.ConstructorError as error:
        mark = error.problem_mark
        raise _UnsafeYaml(str(error.problem), mark.line + 1 if mark else None) from None
    except (ValueError, RecursionError) as error:  # e.g. an integer literal of thousands of digits
        raise _UnsafeYaml(f"a value cannot be read: {str(error)[:200]}", _line(node_or_pairs)
                          if isinstance(node_or_pairs, yaml.Node) else None) from None
    finally:
        loader.dispose()


def _pairs(node: yaml.Node) -> list[tuple[str, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        return []
    return [(key.value, value) for key, value in node.value if isinstance(key, yaml.ScalarNode)]


def _path_to(node: yaml.Node, target: yaml.Node) -> list[Any]:
    """The keys and indices that lead from ``node`` to ``target`` (a value or a key), or [] if absent."""
    stack: list[tuple[yaml.Node, list[Any]]] = [(node, [])]
    while stack:
        current, path = stack.pop()
        if current is target:
            return path
        if isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                if key is target:
                    return [*path, name]
                stack.append((value, [*path, name]))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((item, [*path, index]) for index, item in enumerate(current.value))
    return []


def _node_at(node: yaml.Node, loc: list[Any]) -> yaml.Node:
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = dict(_pairs(node)).get(str(part))
            if found is None:
                keys = [key for key, _ in node.value if isinstance(key, yaml.ScalarNode) and key.value == str(part)]
                return keys[0] if keys else node
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1

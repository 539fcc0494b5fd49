"""Loading claim files: validation, cross-file checks and the catalogue.

Loading never stops at the first defect. A file that is not YAML becomes one problem for that
file; a claim that is malformed becomes one broken entry carrying its problems; every other
claim loads normally. Nothing in a claim file is executed: files are read by
``claims_harness._claims.reading``, which refuses aliases (no expansion bombs), duplicate keys (no silent
loss) and any value that is not plain data (text, numbers, booleans, lists, mappings): a tag that
makes anything else (bytes, a set whose order changes between runs, a date), a tagged or non-text
key and text that cannot be written out as UTF-8 (a lone surrogate from a "\\udfff" escape) are
problems of the field that holds them, as is anything named ``*.yaml`` that is not a regular file
of the project.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from claims_harness._claims.course import Course, find_course, use_packages_of
from claims_harness._claims.reading import (
    MAP_TAG,
    MAX_FLOW_DEPTH,
    SEQ_TAG,
    ClaimLoader,
    construct,
    display_name,
    key_problem,
    line_of,
    node_at,
    pairs,
    path_to,
    read_claim_file,
    refuse_unsafe,
    tag_note,
)
from claims_harness._claims.registry import Verifier, registered
from claims_harness._claims.schema import Check, Claim, ClaimFile, Mark, Note, Statement
from claims_harness._claims.scope import resolve_scope
from claims_harness._claims.sources import Source, read_sources
from claims_harness.errors import ClaimsError, ExpectationError, Problem, Unreadable, UnsafeYaml, did_you_mean, visible

MODELINE = "# yaml-language-server: $schema=schema.json"
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
    notes: dict[str, list[Note]] = field(default_factory=dict)
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
            elif claims and stated.statement.scope is None and self.course is not None and self.course.scope:
                found.append(Problem(stated.file, stated.line, f"statement '{key}' ({stated.statement.where}) "
                                     "declares no scope", field="statements.scope",
                                     hint="say what the sentence speaks for along the course's dimensions "
                                          "([tool.claims.scope]), e.g. 'scope: {discount: all, states: many}', or "
                                          "'scope: {}' when it ranges over none of them"))
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
        return display_name(path.parent.resolve() / path.name, self.root)


def claim_files(claims_dir: Path) -> list[Path]:
    """Every entry of ``claims_dir`` named ``*.yaml`` or ``*.yml``, whatever it is: reading tells if it is a claim file.

    Hidden names (an editor's lock or swap file, ``.#lesson.yaml``) are not claim files.
    """
    return sorted(p for p in claims_dir.iterdir() if p.suffix in (".yaml", ".yml") and not p.name.startswith("."))


def load_catalogue(claims_dir: Path | None = None, verifiers: bool = True) -> Catalogue:
    """Load and cross-check every claim file in ``claims_dir`` (default: the course's claims directory).

    The course is the one whose tree holds ``claims_dir`` (``claims_harness._claims.course``): its sources file,
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
    use_packages_of(course)
    known = registered(course.verifiers) if verifiers else None
    catalogue = Catalogue(root, [], [], {}, {}, {}, sources, known or {}, course=course, claims_dir=claims_dir)
    seen: dict[str, ClaimEntry] = {}
    for path in claim_files(claims_dir):
        display = display_name(path, root)
        catalogue.files.append(display)
        entries, problems, header, statements, marks = _load_file(path, display, root)
        catalogue.file_problems[display] = problems
        catalogue.titles[display] = header.title if header else path.stem
        catalogue.steps[display] = header.steps if header else []
        catalogue.notes[display] = list(header.notes) if header else []
        problems.extend(Problem(display, 1, f"step '{step}' is not a step of the course", field="steps",
                                hint=f"the course's steps are {course.describe_steps()} ([tool.claims] steps in "
                                     "pyproject.toml)")
                        for step in catalogue.steps[display] if not course.is_step(step))
        for stated in statements:
            problems.extend(_check_statement(stated, catalogue))
            catalogue.statements.setdefault(stated.statement.id, stated)
        problems.extend(Problem(display, 1, f"a note of step '{note.where}', which is not one of this file's steps",
                                field="notes.where", hint=f"use one of {', '.join(catalogue.steps[display])}")
                        for note in catalogue.notes[display] if note.where not in catalogue.steps[display])
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


def _check_statement(stated: StatementEntry, catalogue: Catalogue) -> list[Problem]:
    statement = stated.statement
    problems = []
    first = catalogue.statements.get(statement.id)
    if first is not None:
        problems.append(Problem(stated.file, stated.line, f"duplicate statement id '{statement.id}'",
                                field="statements.id",
                                hint=f"first defined at {first.file}:{first.line}; "
                                     "statement ids are unique across files"))
    if statement.scope is not None:
        dimensions = catalogue.course.scope if catalogue.course is not None else ()
        problems.extend(Problem(stated.file, stated.line, f"statement '{statement.id}': {message}",
                                field="statements.scope")
                        for message in resolve_scope(statement.scope, dimensions)[1])
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
                    "register it with @claims_harness.verifier in a module of verifiers/")
            continue
        if check.kind not in verifier.kinds:
            declared = " or ".join(f"'{kind}'" for kind in verifier.kinds)
            problem(f"a check of kind '{check.kind}' names verifier '{verifier.name}', whose computation is of kind "
                    f"{declared}", line, check_index=index, field="kind",
                    hint=f"write 'kind: {verifier.kinds[0]}' (the kind its @verifier(..., kind=...) at "
                         f"{verifier.location} declares), or name a verifier of kind '{check.kind}'")
        if isinstance(check.rejects, dict):
            unknown = [name for name in check.rejects if name not in verifier.uses]
            if unknown:
                problem(f"'rejects' names {', '.join(map(repr, unknown))}, which verifier '{verifier.name}' does not "
                        "use", line, check_index=index, field="rejects",
                        hint=f"key each mistake by one of the functions it uses: {', '.join(verifier.uses) or 'none'}")
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
        data = read_claim_file(path, root)
    except Unreadable as error:
        return file_problem(error.message, hint=error.hint)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        return file_problem(f"not valid UTF-8 (byte {error.start})", line, hint="save the file as UTF-8")
    loader = None
    try:
        loader = ClaimLoader(text)
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
    if not isinstance(root, yaml.MappingNode) or root.tag != MAP_TAG:
        message = "the file must be a mapping with 'title', 'steps' and 'claims'"
        return [], [*problems, Problem(display, 1, message + tag_note(root))], None, [], []
    first_lines: dict[str, int] = {}
    refused_keys = [(key_node, refused) for key_node, _ in root.value if (refused := key_problem(key_node, loader))]
    if refused_keys:
        # What the file holds under a key that is not plain text cannot be told: read nothing of it.
        return [], [*problems, *(Problem(display, line_of(key_node), message, field=visible(str(key_node.value)),
                                         hint=hint) for key_node, (message, hint) in refused_keys)], None, [], []
    for key, node in pairs(root):
        if key in first_lines:
            problems.append(Problem(display, line_of(node), f"duplicate key '{key}' at the top level "
                                    f"(first at line {first_lines[key]})", field=key,
                                    hint="merge the two: YAML would silently keep only the last"))
        first_lines.setdefault(key, line_of(node))
    seen: set[int] = set()
    fields = {key: value for key, value in pairs(root) if key not in ("claims", "statements", "nothing_checkable")}
    claims_node = dict(pairs(root)).get("claims")
    statements, statement_problems = _load_list(dict(pairs(root)).get("statements"), display, seen, loader,
                                                Statement, "statements")
    marks, mark_problems = _load_list(dict(pairs(root)).get("nothing_checkable"), display, seen, loader, Mark,
                                      "nothing_checkable")
    problems.extend(statement_problems + mark_problems)
    statements = [StatementEntry(display, line, statement) for line, statement in statements]
    marks = [MarkEntry(display, line, mark) for line, mark in marks]
    header = None
    try:
        for value in fields.values():
            refuse_unsafe(value, seen, loader)
        header = ClaimFile.model_validate({**construct(fields), "claims": [], "statements": []})
    except (ValidationError, UnsafeYaml) as error:
        problems.extend(_problems(error, display, root, ClaimFile))
    if claims_node is None:
        problems.append(Problem(display, 1, "missing required field 'claims'", hint="add 'claims:' with a list"))
        return [], problems, header, statements, marks
    if not isinstance(claims_node, yaml.SequenceNode) or claims_node.tag != SEQ_TAG:
        message = "'claims' must be a list of claims" + tag_note(claims_node)
        problems.append(Problem(display, line_of(claims_node), message))
        return [], problems, header, statements, marks
    entries = [_load_claim(node, index, display, seen, loader) for index, node in enumerate(claims_node.value)]
    return entries, problems, header, statements, marks


def _load_list(node: yaml.Node | None, display: str, seen: set[int], loader: ClaimLoader, model: type[BaseModel],
               name: str) -> tuple[list[tuple[int, Any]], list[Problem]]:
    """The items of the list ``name`` (the ledger, the marks) one by one, so that one malformed item hides no other."""
    if node is None:
        return [], []
    if not isinstance(node, yaml.SequenceNode) or node.tag != SEQ_TAG:
        return [], [Problem(display, line_of(node), f"'{name}' must be a list" + tag_note(node), field=name)]
    items, problems = [], []
    for item in node.value:
        try:
            refuse_unsafe(item, seen, loader)
            items.append((line_of(item), model.model_validate(construct(item))))
        except (ValidationError, UnsafeYaml) as error:
            for found in _problems(error, display, item, model):
                problems.append(Problem(found.file, found.line, found.message, field=f"{name}.{found.field}"
                                        if found.field else name, hint=found.hint))
    return items, problems


def _load_claim(node: yaml.Node, index: int, display: str, seen: set[int], loader: ClaimLoader) -> ClaimEntry:
    # A broken claim is shown by the id and step it was given, escaped: they may hold anything.
    id_node = dict(pairs(node)).get("id") if isinstance(node, yaml.MappingNode) else None
    claim_id = visible(id_node.value) if isinstance(id_node, yaml.ScalarNode) and id_node.value \
        else f"<claim {index + 1}>"
    where_node = dict(pairs(node)).get("where") if isinstance(node, yaml.MappingNode) else None
    where = visible(where_node.value) if isinstance(where_node, yaml.ScalarNode) else None
    try:
        refuse_unsafe(node, seen, loader)
        claim = Claim.model_validate(construct(node))
    except (ValidationError, UnsafeYaml) as error:
        problems = tuple(_problems(error, display, node, Claim, claim_id))
        return ClaimEntry(display, line_of(node), index, claim_id, where, None, problems=problems)
    checks_node = dict(pairs(node))["checks"]
    check_lines = tuple(line_of(check) for check in checks_node.value)
    field_lines = {key: line_of(value) for key, value in pairs(node)}
    return ClaimEntry(display, line_of(node), index, claim.id, claim.where, claim, check_lines, field_lines=field_lines)


def _problems(
    error: ValidationError | UnsafeYaml, display: str, node: yaml.Node, model: type[BaseModel],
    claim_id: str | None = None,
) -> Iterable[Problem]:
    if isinstance(error, UnsafeYaml):
        loc = path_to(node, error.node) if error.node is not None else []
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
        yield Problem(display, line_of(node_at(node, loc)), _describe(detail, _model_at(model, loc), cause),
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



"""One claim file read into entries: its header, its ledger of statements, its marks and its claims.

Reading never stops at the first defect. A file that is not YAML becomes one problem for that
file; a claim that is malformed becomes one broken entry carrying its problems; every other
claim loads normally. Nothing in a claim file is executed: files are read by
``claims_harness._claims.reading``, which refuses aliases (no expansion bombs), duplicate keys (no silent
loss) and any value that is not plain data (text, numbers, booleans, lists, mappings): a tag that
makes anything else (bytes, a set whose order changes between runs, a date), a tagged or non-text
key and text that cannot be written out as UTF-8 (a lone surrogate from a "\\udfff" escape) are
problems of the field that holds them, as is anything named ``*.yaml`` that is not a regular file
of the project. What a file's entries mean together with the other files' (ids, steps, sources,
verifiers) is ``claims_harness._claims.loading``'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from claims_harness._claims.reading import (
    MAP_TAG,
    MAX_FLOW_DEPTH,
    SEQ_TAG,
    ClaimLoader,
    construct,
    key_problem,
    line_of,
    node_at,
    pairs,
    path_to,
    read_claim_file,
    refuse_unsafe,
    tag_note,
)
from claims_harness._claims.schema import Check, Claim, ClaimFile, Mark, Statement
from claims_harness.errors import ExpectationError, Problem, Unreadable, UnsafeYaml, did_you_mean, visible

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



def load_file(path: Path, display: str, root: Path
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
        yield Problem(display, line_of(node_at(node, loc)), describe(detail, _model_at(model, loc), cause),
                      claim_id=claim_id, check_index=check_index,
                      field=".".join(str(part) for part in rest) or None, hint=_HINTS.get(str(loc[-1]) if loc else ""))


_HINTS = {
    "id": "write ids in kebab-case, e.g. 'loo-identity'",
    "where": "write the step as the course names it ([tool.claims] steps in pyproject.toml)",
    "verifier": "name a registered verifier ('claims verifiers' lists them), e.g. 'baselines.loo_identity'",
}


def describe(detail: Mapping[str, Any], model: type[BaseModel] | None, cause: Exception | None = None) -> str:
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



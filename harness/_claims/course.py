"""The course the engine verifies, read from the ``[tool.claims]`` table of the project's ``pyproject.toml``.

The engine knows no course: which text it is, where its claim files, sources, reports and cache
are, which package is the reference implementation and which holds the verifiers, and which steps
the text has, all come from this one table. The project root is the nearest directory, from the
working directory (or a given path) upwards, whose ``pyproject.toml`` has the table, as pytest
finds its rootdir; a command run anywhere else refuses with one line instead of writing a report
where it stands. A second course is a second tree with its own table (``tests/course_two/``).

Only the engine is installed (as ``claims_harness``): a course's packages (its reference implementation, its
verifiers) are its own, found under its root, which :func:`use_packages_of` puts on the import path before anything of
the course is imported.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claims_harness._claims.scope import Dimension, parse_dimensions
from claims_harness.errors import ClaimsError

# The engine's import name (its folder is harness/): what the cache digests, what templates load from, whose
# exceptions cross from the implementation's process.
ENGINE = __name__.partition(".")[0]
CONFIG_FILE = "pyproject.toml"
TABLE = "claims"

_FIELDS = {
    "title": "the text's title, as the reports print it",
    "claims": "the directory of claim files, relative to the root",
    "reports": "where 'claims verify' writes the reports by default",
    "cache": "where observations are cached",
    "sources": "the Markdown file of primary sources the claims cite",
    "implementation": "the reference implementation's package",
    "verifiers": "the package whose modules register the verifiers",
    "step_pattern": "a regular expression every step name matches",
    "steps": "every step of the text, in order; a claim's 'where' must be one of them",
}
# May be left out.
_OPTIONAL = {
    "contract": "the page of the implementation contract 'claims contract' writes, relative to the root (default: "
                "none)",
    "mutate": "the implementation's modules 'claims mutants' mutates by default (default: all of them)",
    "mutants_reviewed": "the reviewed file of surviving mutants judged equivalent, relative to the root "
                        "(default: mutants-reviewed.yaml)",
    "mutation_target": "the mutation score below which 'claims mutants' fails (default: 0.95)",
    "texts": "the documents of the course text, each a table [tool.claims.texts.NAME] with its path and how its "
             "steps are found (docs/text.md)",
    "scope": "the dimensions the text's sentences range over, each a table [tool.claims.scope.NAME] with 'means' "
             "and 'values' (harness/_claims/scope.py, docs/claims.md)",
}
# The keys of one document's table, [tool.claims.texts.NAME].
_TEXT_FIELDS = {
    "path": "the document's file, relative to the project root (it is read, never copied)",
    "step": "a regular expression matched at the start of every line; a line it matches starts a step, whose name "
            "is its group 'step', or the 'id' template filled from its named groups",
    "id": "optional: the step's name as a template of named groups of 'step' and 'section', e.g. "
          "'week{week}/step-{n}'",
    "section": "optional: a regular expression whose named groups, from the last line it matched, fill 'id'",
    "end": "optional: a regular expression; a line it matches ends the current step (a lesson heading, back matter)",
    "format": "optional: 'text' (every line a block: the module's export) or 'markdown' (paragraphs, list items, "
              "$$ formulas, headings); default: by the file's suffix",
}
TEXT_FORMATS = ("text", "markdown")


@dataclass(frozen=True)
class TextSource:
    """One document of the course text, as ``[tool.claims.texts.NAME]`` configures it (patterns compiled)."""

    name: str
    path: Path
    key: str  # the table's name in messages: "[tool.claims.texts.module]"
    step: re.Pattern[str]
    id: str | None = None
    section: re.Pattern[str] | None = None
    end: re.Pattern[str] | None = None
    format: str = "text"


@dataclass(frozen=True)
class Course:
    """One course: the root it lives in and its ``[tool.claims]`` settings (paths resolved against the root)."""

    root: Path
    title: str
    claims: Path
    reports: Path
    cache: Path
    sources: Path
    implementation: str
    verifiers: str
    step_pattern: str
    steps: tuple[str, ...]
    contract: Path | None = None
    mutate: tuple[str, ...] = ()
    mutants_reviewed: Path | None = None
    mutation_target: float = 0.95
    texts: tuple[TextSource, ...] = ()
    scope: tuple[Dimension, ...] = ()

    def is_step(self, name: str) -> bool:
        return name in self.steps

    def describe_steps(self) -> str:
        return f"{self.steps[0]} to {self.steps[-1]}" if self.steps else "none"


def find_root(start: Path) -> Path | None:
    """The nearest directory from ``start`` upwards whose pyproject.toml has a ``[tool.claims]`` table."""
    start = start.resolve()
    for directory in (start, *start.parents) if start.is_dir() else start.parents:
        if _table(directory / CONFIG_FILE) is not None:
            return directory
    return None


def configures_course(directory: Path) -> bool:
    """Whether ``directory`` holds a pyproject.toml with a ``[tool.claims]`` table (an unreadable one counts)."""
    try:
        return _table(directory / CONFIG_FILE) is not None
    except (ClaimsError, OSError):
        return True


def find_course(start: Path | None = None) -> Course:
    """The course whose tree holds ``start`` (default: the working directory).

    Raises:
      ClaimsError: when no directory from ``start`` upwards configures a course.
    """
    start = Path.cwd() if start is None else Path(start)
    root = find_root(start)
    if root is None:
        raise ClaimsError(f"{start.resolve()} is not inside a course: no {CONFIG_FILE} with a [tool.{TABLE}] table "
                          f"in it or above it; run from the project root (or below it), or pass --claims-dir")
    return load_course(root)


@functools.cache
def load_course(root: Path) -> Course:
    """The course configured in ``root/pyproject.toml``; every problem is one error naming the field."""
    path = root / CONFIG_FILE
    table = _table(path)
    if table is None:
        raise ClaimsError(f"{path}: no [tool.{TABLE}] table; add one with the fields {', '.join(_FIELDS)}")
    unknown = sorted(set(table) - set(_FIELDS) - set(_OPTIONAL))
    missing = [name for name in _FIELDS if name not in table]
    if unknown or missing:
        raise ClaimsError(f"{path}: [tool.{TABLE}]: " + "; ".join(
            [*(f"unknown field '{name}'" for name in unknown), *(f"missing field '{name}' ({_FIELDS[name]})"
                                                               for name in missing)]))
    strings = [name for name in _FIELDS if name != "steps" and not isinstance(table[name], str)]
    steps = table["steps"]
    if strings or not isinstance(steps, list) or not all(isinstance(step, str) for step in steps):
        bad = [*strings, *(["steps"] if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps)
                           else [])]
        raise ClaimsError(f"{path}: [tool.{TABLE}]: field(s) {', '.join(bad)}: expected text ('steps': a list of text)")
    try:
        pattern = re.compile(table["step_pattern"])
    except re.error as error:
        raise ClaimsError(f"{path}: [tool.{TABLE}].step_pattern is not a regular expression: {error}") from None
    unmatched = [step for step in steps if not pattern.fullmatch(step)]
    if unmatched:
        raise ClaimsError(f"{path}: [tool.{TABLE}].steps: {', '.join(map(repr, unmatched))} do not match "
                          f"step_pattern {table['step_pattern']!r}")
    mutate = table.get("mutate", [])
    reviewed = table.get("mutants_reviewed", "mutants-reviewed.yaml")
    target = table.get("mutation_target", 0.95)
    if not (isinstance(mutate, list) and all(isinstance(name, str) for name in mutate)):
        raise ClaimsError(f"{path}: [tool.{TABLE}].mutate: expected a list of module names, found {mutate!r}")
    contract = table.get("contract")
    for key, value in (("mutants_reviewed", reviewed), ("contract", contract)):
        if value is not None and not isinstance(value, str):
            raise ClaimsError(f"{path}: [tool.{TABLE}].{key}: expected a path, found {value!r}")
    if isinstance(target, bool) or not isinstance(target, int | float) or not 0 <= target <= 1:
        raise ClaimsError(f"{path}: [tool.{TABLE}].mutation_target: expected a fraction from 0 to 1, e.g. 0.95, "
                          f"found {target!r}")
    texts = _texts(table.get("texts", {}), root, path)
    scope = parse_dimensions(table.get("scope", {}), f"{path}: tool.{TABLE}.scope")
    return Course(root=root, title=table["title"], claims=root / table["claims"], reports=root / table["reports"],
                  cache=root / table["cache"], sources=root / table["sources"],
                  implementation=table["implementation"], verifiers=table["verifiers"],
                  step_pattern=table["step_pattern"], steps=tuple(steps), mutate=tuple(mutate),
                  contract=root / contract if contract else None, mutants_reviewed=root / reviewed,
                  mutation_target=float(target), texts=texts, scope=scope)


def use_packages_of(course: Course) -> None:
    """Put ``course``'s root on the import path, unless it is there already: its implementation and verifier packages
    are imported from it by name, not installed where another project's names could collide with them. It stays
    there, for the implementation's process to import the reference from (for a while only:
    ``claims_harness._claims.registry.packages_of``).

    Last on the path: a module beside them (a student's ``yaml.py`` in the course root) must not shadow a library the
    judge imports; the implementation's own process puts the directory it starts in first (``server.host_main``).
    """
    root = str(course.root)
    if root not in sys.path:
        sys.path.append(root)


_TEMPLATE_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _texts(table: Any, root: Path, config: Path) -> tuple[TextSource, ...]:
    """The documents of ``[tool.claims.texts]``: each one's keys checked and its patterns compiled."""
    if not isinstance(table, dict):
        raise ClaimsError(f"{config}: [tool.{TABLE}.texts]: expected a table of documents, "
                          f"[tool.{TABLE}.texts.NAME] with 'path' and 'step', found {table!r}")
    texts = []
    for name, fields in table.items():
        table_name = f"[tool.{TABLE}.texts.{name}]"
        where = f"{config}: {table_name}"
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
            raise ClaimsError(f"{where}: a document's name is a word (letters, digits, '-', '_'), e.g. 'module'")
        if not isinstance(fields, dict):
            raise ClaimsError(f"{where}: expected a table with 'path' and 'step', found {fields!r}")
        unknown = sorted(set(fields) - set(_TEXT_FIELDS))
        missing = [field for field in ("path", "step") if field not in fields]
        wrong = [field for field, value in fields.items() if field in _TEXT_FIELDS and not isinstance(value, str)]
        if unknown or missing or wrong:
            raise ClaimsError(f"{where}: " + "; ".join(
                [*(f"unknown key '{field}' (a document has {', '.join(_TEXT_FIELDS)})" for field in unknown),
                 *(f"missing key '{field}' ({_TEXT_FIELDS[field]})" for field in missing),
                 *(f"'{field}' must be text" for field in wrong)]))
        patterns = {}
        for field in ("step", "section", "end"):
            if field in fields:
                try:
                    patterns[field] = re.compile(fields[field])
                except re.error as error:
                    raise ClaimsError(f"{where}, key '{field}': {fields[field]!r} is not a regular expression: "
                                      f"{error}") from None
        groups = set(patterns["step"].groupindex) | set(patterns.get("section", re.compile("")).groupindex)
        template = fields.get("id")
        if template is None and "step" not in patterns["step"].groupindex:
            raise ClaimsError(f"{where}, key 'step': the pattern {fields['step']!r} has no group named 'step'; "
                              "write one, e.g. '^Step (?P<step>\\d+\\.\\d+)', or give 'id', a template of its "
                              "named groups")
        if template is not None:
            unknown_fields = [field for field in _TEMPLATE_FIELD.findall(template) if field not in groups]
            if unknown_fields or not _TEMPLATE_FIELD.search(template):
                raise ClaimsError(f"{where}, key 'id': the template {template!r} " + (
                    f"names {', '.join(map(repr, unknown_fields))}, which neither 'step' nor 'section' captures "
                    f"(their named groups: {', '.join(sorted(groups)) or 'none'})" if unknown_fields else
                    "names no group; write e.g. 'week{week}/step-{n}'"))
        text_format = fields.get("format") or ("markdown" if fields["path"].lower().endswith((".md", ".markdown"))
                                              else "text")
        if text_format not in TEXT_FORMATS:
            raise ClaimsError(f"{where}, key 'format': {text_format!r} is not one of {', '.join(TEXT_FORMATS)}")
        texts.append(TextSource(name=name, path=root / fields["path"], key=table_name,
                                step=patterns["step"], id=template, section=patterns.get("section"),
                                end=patterns.get("end"), format=text_format))
    return tuple(texts)


def _table(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ClaimsError(f"{path}: not valid TOML ({error}); fix the file") from None
    table = data.get("tool", {}).get(TABLE)
    return table if isinstance(table, dict) else None


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename: a reader sees the old file or the new one, never a part.

    The temporary file has a name of its own (two processes writing one path share none) beside ``path``, so
    the rename stays on one file system.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

"""The course the engine verifies, read from the ``[tool.claims]`` table of the project's ``pyproject.toml``.

The engine knows no course: which text it is, where its claim files, sources, reports and cache
are, which package is the reference implementation and which holds the verifiers, and which steps
the text has, all come from this one table. The project root is the nearest directory, from the
working directory (or a given path) upwards, whose ``pyproject.toml`` has the table, as pytest
finds its rootdir; a command run anywhere else refuses with one line instead of writing a report
where it stands. A second course is a second tree with its own table (``tests/course_two/``).
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness._aliases import Alias, parse_aliases
from harness._errors import ClaimsError

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
    "aliases": "other names a course gives contract functions: name = {function = ..., relation = ...} "
               "(harness/_aliases.py)",
    "mutate": "the implementation's modules 'claims mutants' mutates by default (default: all of them)",
    "mutants_reviewed": "the reviewed file of surviving mutants judged equivalent, relative to the root "
                        "(default: mutants-reviewed.yaml)",
    "mutation_target": "the mutation score below which 'claims mutants' fails (default: 0.95)",
}


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
    aliases: tuple[Alias, ...] = ()
    mutate: tuple[str, ...] = ()
    mutants_reviewed: Path | None = None
    mutation_target: float = 0.95

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
    aliases = parse_aliases(table.get("aliases"), f"{path}: [tool.{TABLE}]")
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
    if not isinstance(reviewed, str):
        raise ClaimsError(f"{path}: [tool.{TABLE}].mutants_reviewed: expected a path, found {reviewed!r}")
    if isinstance(target, bool) or not isinstance(target, int | float) or not 0 <= target <= 1:
        raise ClaimsError(f"{path}: [tool.{TABLE}].mutation_target: expected a fraction from 0 to 1, e.g. 0.95, "
                          f"found {target!r}")
    return Course(root=root, title=table["title"], claims=root / table["claims"], reports=root / table["reports"],
                  cache=root / table["cache"], sources=root / table["sources"],
                  implementation=table["implementation"], verifiers=table["verifiers"],
                  step_pattern=table["step_pattern"], steps=tuple(steps), aliases=aliases, mutate=tuple(mutate),
                  mutants_reviewed=root / reviewed, mutation_target=float(target))


def _table(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ClaimsError(f"{path}: not valid TOML ({error}); fix the file") from None
    table = data.get("tool", {}).get(TABLE)
    return table if isinstance(table, dict) else None

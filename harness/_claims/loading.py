"""Loading a course's claims: every claim file read (``claims_harness._claims.claim_file``), then cross-checked
against the others, the course's steps, its sources and its verifiers, into the catalogue and its ledger.

Loading never stops at the first defect: what is wrong becomes a problem of the file, the claim or the statement
that holds it, and every other claim loads normally.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from claims_harness._claims.claim_file import ClaimEntry, MarkEntry, StatementEntry, describe, load_file
from claims_harness._claims.course import Course, find_course, use_packages_of
from claims_harness._claims.reading import display_name
from claims_harness._claims.registry import Verifier, registered
from claims_harness._claims.schema import Note
from claims_harness._claims.scope import resolve_scope
from claims_harness._claims.sources import Source, read_sources
from claims_harness.errors import ClaimsError, Problem, did_you_mean


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
        entries, problems, header, statements, marks = load_file(path, display, root)
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
                problem(describe(detail, verifier.params), line, check_index=index,
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

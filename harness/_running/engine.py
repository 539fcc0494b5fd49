"""The one driver: what a run is made of, and the evidence of each part.

A run is a list of :class:`Part`: one per check of every usable claim, one per claim that cannot
be used, one per claim file with problems of its own. The pytest plugin makes an item of each
part and asks :func:`evaluate` for its evidence while the item runs; ``claims verify`` asks it the
same, first with ``reuse_only`` (``claims_harness._running.driver``), and never starts pytest;
the report writer fills in :func:`never_reported` for a part whose item was selected but whose
evidence never arrived. Nothing else builds a part or its evidence, so the two ways of running
give the same rows, and a row can go missing from no report.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claims_harness._claims.claim_file import ClaimEntry
from claims_harness._claims.loading import Catalogue
from claims_harness._running.failure import failure_text
from claims_harness._running.options import RunOptions
from claims_harness._running.runner import CheckResult, check_names, error_result, reuse_check, run_check

FILE_PROBLEMS = "file-problems"
LOAD_ERROR = "load-error"
# What pytest may see in a node name: a broken claim's id is whatever the file says.
_UNSAFE = re.compile(r"[^A-Za-z0-9._@-]")


@dataclass(frozen=True)
class Part:
    """One row of the report, and one pytest item.

    Attributes:
      file: the claim file, relative to the course root.
      names: the node names below the file: ``(claim, check)``, ``(claim, "load-error")`` or
        ``("file-problems",)``.
      entry: the claim (None for a file's own problems).
      index: the check's position in the claim (None for problems).
      problems: why the claim or file cannot be used, one line each.
      payload: what every row of the claim carries about it (:func:`claim_payload`).
    """

    file: str
    names: tuple[str, ...]
    entry: ClaimEntry | None
    index: int | None
    problems: tuple[str, ...]
    payload: dict[str, Any]

    @property
    def key(self) -> str:
        return "::".join((self.file, *self.names))


@dataclass(frozen=True)
class Outcome:
    """A part's evidence (as the report reads it) and what the test item does with it."""

    evidence: dict[str, Any]
    status: str
    message: str = ""


def parts_of_file(catalogue: Catalogue, file: str) -> list[Part]:
    """The parts of one claim file, in file order, with node names unique within the file."""
    parts = []
    problems = tuple(str(problem) for problem in catalogue.file_problems.get(file, []))
    if problems:
        parts.append(Part(file, (FILE_PROBLEMS,), None, None, problems, file_payload(catalogue, file)))
    used = {FILE_PROBLEMS}
    for entry in catalogue.in_file(file):
        name = _UNSAFE.sub("_", entry.id) or "_"
        while name in used:
            name = f"{name}@{entry.line}"
        used.add(name)
        payload = claim_payload(entry, catalogue)
        if entry.broken:
            parts.append(Part(file, (name, LOAD_ERROR), entry, None,
                              tuple(str(problem) for problem in entry.problems), payload))
            continue
        parts += [Part(file, (name, check), entry, index, (), payload)
                  for index, check in enumerate(check_names(entry))]
    return parts


def every_part(catalogue: Catalogue) -> list[Part]:
    return [part for file in catalogue.files for part in parts_of_file(catalogue, file)]


def keywords(part: Part, catalogue: Catalogue) -> list[str]:
    """What ``-k`` matches a part by: its file's and node names, and for a check its kind, its verifier, the
    functions it uses and the claim's other names (a syllabus's test)."""
    names = [part.file, *part.names]
    if part.index is not None and part.entry is not None and part.entry.claim is not None:
        check = part.entry.claim.checks[part.index]
        names += [check.kind, check.verifier, *catalogue.verifiers[check.verifier].uses, *part.entry.claim.aliases]
    return names


def evaluate(part: Part, catalogue: Catalogue, options: RunOptions, *, reuse_only: bool = False) -> Outcome | None:
    """The part's evidence; with ``reuse_only``, None when its verifier would have to run."""
    if part.index is None:
        return Outcome(problems_evidence(part.payload, list(part.problems)), "error",
                       "\n".join(part.problems))
    entry = part.entry
    assert entry is not None and entry.claim is not None
    verifier = catalogue.verifiers[entry.claim.checks[part.index].verifier]
    if catalogue.course is not None and options.scope != catalogue.course.scope:
        # What a check's examples reach is recorded along the dimensions of the claim's own course.
        options = dataclasses.replace(options, scope=catalogue.course.scope)
    if reuse_only:
        result = reuse_check(entry, part.index, verifier, options)
        if result is None:
            return None
    else:
        result = run_check(entry, part.index, verifier, options)
    return _outcome(part, result, options)


def _outcome(part: Part, result: CheckResult, options: RunOptions) -> Outcome:
    assert part.entry is not None and part.index is not None
    evidence = check_evidence(part.payload, part.entry, part.index, result)
    if result.status in ("failed", "error"):
        return Outcome(evidence, result.status, failure_text(part.entry, part.index, result, options))
    return Outcome(evidence, result.status, result.skip_reason or "")


def never_reported(part: Part, catalogue: Catalogue, options: RunOptions, why: str) -> dict[str, Any]:
    """The evidence of a selected part whose result never reached the report: an error row that says why."""
    if part.index is None:
        return problems_evidence(part.payload, [*part.problems, why])
    assert part.entry is not None and part.entry.claim is not None
    verifier = catalogue.verifiers[part.entry.claim.checks[part.index].verifier]
    result = error_result(part.entry, part.index, verifier, options, why)
    return check_evidence(part.payload, part.entry, part.index, result)


def claim_payload(entry: ClaimEntry, catalogue: Catalogue) -> dict[str, Any]:
    """What every item of a claim carries about the claim itself."""
    claim = entry.claim
    info: dict[str, Any] = {"id": entry.id, "where": entry.where}
    if claim is not None:
        info.update(statement=claim.statement, formula=claim.formula, sources=claim.sources,
                    limitations=claim.limitations, erratum=claim.erratum, clarification=claim.clarification,
                    origin=claim.origin, covers=claim.covers,
                    checks=len(claim.checks))
        info["citations"] = {key: catalogue.sources[key].full_citation for key in claim.sources
                             if key in catalogue.sources}
    return {"claims_dir": str(catalogue.root / Path(entry.file).parent), "file": entry.file,
            "title": catalogue.titles.get(entry.file, entry.file), "line": entry.line, "index": entry.index,
            "claim": info}


def file_payload(catalogue: Catalogue, file: str) -> dict[str, Any]:
    """What the item of a claim file's own problems carries: the file stands in for a claim."""
    return {"claims_dir": str(catalogue.root / Path(file).parent), "file": file,
            "title": catalogue.titles.get(file, file), "line": 1, "index": -1, "claim": {"id": file, "where": None}}


def check_evidence(payload: dict[str, Any], entry: ClaimEntry, index: int, result: CheckResult) -> dict[str, Any]:
    """The evidence of one check: the claim's payload, the check as the file states it, and the result."""
    assert entry.claim is not None
    check = entry.claim.checks[index]
    record = result.as_dict() | {
        "expected": {key: expectation.as_written() for key, expectation in check.expect.items()},
        "harness_chosen": list(check.harness_chosen), "rejects": check.rejects, "params": check.params,
        "line": entry.check_lines[index],
    }
    return {**payload, "check_index": index, "check": record}


def problems_evidence(payload: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """The evidence of a claim or file that cannot be used: its payload and why."""
    return {**payload, "problems": problems}

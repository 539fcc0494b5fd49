"""What a mutation run found, as the course keeps it: ``reports/mutants.json``, ``mutants.md``, the reviewed file of
mutants judged equivalent, the scores, and what the claims report says of the last run (whether it is current).

The run itself is ``claims_harness._power.mutants``; this module reads and writes what it found, so that the report
(``claims_harness._reporting``) can say how the claims fared without running anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from claims_harness._claims.course import ENGINE, Course, find_course, write_atomically
from claims_harness._claims.reading import read_claim_file
from claims_harness._running.cache import package_digest
from claims_harness.errors import ClaimsError, Unreadable

KILLED, SURVIVED, TIMEOUT, NOT_REACHED, EQUIVALENT = "killed", "survived", "timeout", "not reached", "equivalent"
MUTANTS_JSON = "mutants.json"


def mutation_inputs_digest(course: Course) -> str:
    """What a mutation run (``claims mutants``) depends on: the implementation's, the claims' and the verifiers'
    sources, and the harness's own (which runs and judges every check)."""
    verifiers = course.root / course.verifiers.replace(".", "/")
    reference = course.root / course.implementation
    digest = hashlib.sha256(package_digest(ENGINE).encode())
    for path in sorted([*reference.rglob("*.py"), *course.claims.rglob("*.yaml"), *verifiers.rglob("*.py")]):
        digest.update(str(path.relative_to(course.root)).encode() + b"\0")
        # Only what the loader reads: a directory, a pipe or a link to a device named *.yaml is the loader's to
        # report, and must neither hang nor crash this digest.
        with contextlib.suppress(Unreadable):
            digest.update(read_claim_file(path, course.root))
    return digest.hexdigest()[:16]


def mutation_summary(root: Path, impl: str) -> dict[str, Any] | None:
    """What the report says of the last ``claims mutants`` run (the course's ``reports/mutants.json``), for a run of
    the reference; None for another implementation or when there is no such run. ``current`` is False when the
    implementation, the claims, the verifiers or the harness changed since it was measured."""
    course = find_course(root)
    path = course.reports / MUTANTS_JSON
    if impl != course.implementation or not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        overall = found["overall"]
        return {"score": overall["score"], "target": course.mutation_target, "mutants": overall["mutants"],
                "caught": overall["killed"] + overall["timeout"], "equivalent": overall["equivalent"],
                "holes": overall["survived"] + overall["not_reached"],
                "modules": {module: counts["score"] for module, counts in found["modules"].items()},
                "current": found["digest"] == mutation_inputs_digest(course), "file": "mutants.md"}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ClaimsError(f"{path}: not a result of 'claims mutants' ({error}); run 'claims mutants' (tox -e mutants) "
                          "again, or delete the file") from None


def load_reviewed(path: Path) -> dict[str, dict[str, Any]]:
    """The reviewed file: survivors judged equivalent, by key, each with its reason."""
    if not path.is_file():
        return {}
    entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    if not isinstance(entries, list):
        raise ClaimsError(f"{path}: expected a list of reviewed mutants (key, module, function, line, change, "
                          f"reason), found {type(entries).__name__}")
    reviewed = {}
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not entry.get("key") or not str(entry.get("reason", "")).strip():
            raise ClaimsError(f"{path}: entry {number} needs a 'key' and a 'reason' (why the mutant computes the "
                              f"same thing as the original); found {entry!r}")
        reviewed[str(entry["key"])] = entry
    return reviewed


def score(statuses: Sequence[str]) -> dict[str, Any]:
    """Counts of each status, and the score: caught (killed or timed out) over the mutants not judged equivalent."""
    counts = {status: statuses.count(status) for status in (KILLED, TIMEOUT, SURVIVED, NOT_REACHED, EQUIVALENT)}
    judged = len(statuses) - counts[EQUIVALENT]
    caught = counts[KILLED] + counts[TIMEOUT]
    return {"mutants": len(statuses), **{status.replace(" ", "_"): n for status, n in counts.items()},
            "score": round(caught / judged, 4) if judged else None}


def reviewed_again(document: dict[str, Any], reviewed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The run's document with the reviewed file applied: each mutant's ``status`` (its ``verdict``, or
    ``equivalent`` with the reviewed ``reason``), and the scores by module and overall. Nothing runs, so a
    judgement added to the reviewed file reaches the report in seconds (``claims mutants --review``)."""
    for mutant in document["mutants"]:
        verdict = mutant["verdict"] if "verdict" in mutant else mutant["status"]
        judged = verdict in (SURVIVED, NOT_REACHED) and mutant["key"] in reviewed
        mutant["verdict"], mutant["status"] = verdict, EQUIVALENT if judged else verdict
        mutant["reason"] = str(reviewed[mutant["key"]]["reason"]).strip() if judged else mutant.get("timeout", "")
    statuses = [mutant["status"] for mutant in document["mutants"]]
    document["overall"] = score(statuses)
    document["modules"] = {module: score([m["status"] for m in document["mutants"] if m["module"] == module])
                           for module in document["modules"]}
    return document


def last_run(directory: Path) -> dict[str, Any]:
    """What the last run wrote into ``directory`` (its ``mutants.json``).

    Raises:
      ClaimsError: there is none, or it cannot be read.
    """
    path = directory / MUTANTS_JSON
    if not path.is_file():
        raise ClaimsError(f"{path}: no results of an earlier run to review; run 'claims mutants' first")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ClaimsError(f"{path} cannot be read ({error}); run 'claims mutants' again") from None


def write_results(results: dict[str, Any], directory: Path) -> None:
    """``mutants.json`` in ``directory``, replaced whole (a reader never sees half of it)."""
    write_atomically(directory / MUTANTS_JSON, (json.dumps(results, indent=1, ensure_ascii=False) + "\n").encode())


def render_markdown(results: dict[str, Any], course: Course, reviewed_file: Path) -> str:
    """``mutants.md``: the scores by module, every hole with its change, every equivalent mutant with its reason."""
    package = course.implementation
    lines = [f"# Mutation testing of `{package}/` by the claims", "",
             f"Written by `claims mutants` (`tox -e mutants`): each mutant of a function of `{package}/` (made by "
             "mutmut) runs against the checks of the smoke profile that reach the function, and must turn one red. "
             f"Measured in {results['seconds']:.0f} s with {results['workers']} worker processes, over "
             f"{results['checks']} checks; inputs digest `{results['digest']}`.", "",
             "| module | mutants | killed | timeout | equivalent | survived | not reached | score |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    rows = [*results["modules"].items(), ("**all**", results["overall"])]
    for module, found in rows:
        shown = f"`{module}`" if module != "**all**" else module
        lines.append(f"| {shown} | {found['mutants']} | {found['killed']} | {found['timeout']} | "
                     f"{found['equivalent']} | {found['survived']} | {found['not_reached']} | "
                     f"{percent(found['score'])} |")
    lines += ["", f"The score is the caught mutants (killed or timed out) over the mutants not judged equivalent; "
                  f"the target is {course.mutation_target:.0%}.", ""]
    if results["not_green"]:
        lines += ["## Checks not green on the unmutated implementation (left out of the run)", ""]
        lines += [f"- `{label}`: {why}" for label, why in results["not_green"].items()] + [""]
    holes = [m for m in results["mutants"] if m["status"] in (SURVIVED, NOT_REACHED)]
    lines += [f"## Holes: {len(holes)} mutants no check catches", ""]
    lines += [_mutant_item(m, package, m["status"]) for m in holes] or ["None.", ""]
    equivalent = [m for m in results["mutants"] if m["status"] == EQUIVALENT]
    lines += [f"## Equivalent: {len(equivalent)} mutants judged to compute the same thing "
              f"(`{reviewed_file.relative_to(course.root)}`)", ""]
    lines += [_mutant_item(m, package, m["reason"]) for m in equivalent] or ["None.", ""]
    return "\n".join(lines).rstrip() + "\n"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _mutant_item(mutant: dict[str, Any], package: str, note: str) -> str:
    change = "\n".join(f"  {line}" for line in mutant["change"].splitlines())
    return (f"- `{package}/{mutant['module']}.py:{mutant['line']}` `{mutant['function']}` (key `{mutant['key']}`): "
            f"{note}\n\n  ```diff\n{change}\n  ```\n")

"""Mutation testing of the implementation, with the claims as the test suite (``claims mutants``).

Every mutant of a function of the reference implementation must turn at least one claim's check red;
a mutant that no check notices is either *equivalent* (it computes the same thing, judged by a
person and kept in the reviewed file, ``[tool.claims] mutants_reviewed``) or a *hole* in the claims.

mutmut (3.8) makes the mutants: its operators, and its trampolines, which put every mutant of a
function into the module next to the original and pick one by name at call time. Its runner is not
used, for two reasons. It learns which tests reach a function by recording calls in the process that
runs the test, but every check runs in a worker forked for that check (``claims_harness._running.isolation``),
where those records are lost; and it starts a pytest session per mutant, which here collects and
validates every claim file again. So this module drives the run itself:

1. the trampolined copy of the reference is written as a package of its own (the reference's name
   with ``_mutants`` appended), so the reference itself stays loaded and unchanged;
2. every check of the smoke profile that calls the implementation runs once, with mutmut's call
   recording on, on a lane of the run driver's of its own (``claims_harness._running.driver.on_lanes``,
   a process forked from this one): which functions each check reaches, at any depth, and how long it
   takes; a check that is not green on the unmutated copy is reported and leaves the run (it would
   "kill" every mutant);
3. each mutant runs on a fresh lane (claims, verifiers and implementation already loaded), with only
   the checks that reach its function, fastest first, stopping at the first red one. A mutant that runs
   past ten times its checks' recorded time (plus a constant) is killed with its lane and counts as
   caught, as in mutmut: the claims noticed that it never finished.

Both steps keep what they found in the course's cache directory (``mutants/``), keyed on what the
answer depends on: the check's own cache key (its claim, params, seed, verifier sources, the
harness, library versions and the reference implementation's sources), mutmut's version and, for a
mutant, its change and the keys of every check that reaches it. A run after adding a claim runs
again only the mutants the new claim's checks reach; one after editing the implementation, all.
Every configured module (``[tool.claims] mutate``) is trampolined whichever ``--modules`` asks for,
so a run of a few modules and a run of all share their keys.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from claims_harness._claims.course import Course, write_atomically
from claims_harness._claims.formats import PROFILES
from claims_harness._claims.loading import Catalogue
from claims_harness._power.mutation_results import (
    KILLED,
    NOT_REACHED,
    SURVIVED,
    TIMEOUT,
    load_reviewed,
    mutation_inputs_digest,
    reviewed_again,
)
from claims_harness._running.cache import cache_key
from claims_harness._running.driver import LaneEnd, on_lanes
from claims_harness._running.engine import Part, evaluate, every_part
from claims_harness._running.options import RunOptions
from claims_harness._running.processes import TIMED_OUT
from claims_harness._running.runner import alpha_per_comparison
from claims_harness.errors import ClaimsError

# The mutated copy of the reference is a package of this name plus the suffix, beside the reference.
PACKAGE_SUFFIX = "_mutants"
# Mutants are judged by the smoke profile's checks: a mutant a quick run lets through is what a student would meet.
MUTATION_PROFILE = "smoke"
# The supervisor's limit on one mutant: this many times its checks' recorded seconds, plus the constant.
TIME_FACTOR, TIME_CONSTANT = 10.0, 5.0


@dataclass(frozen=True)
class Mutant:
    """One change to one function of the implementation.

    Attributes:
      name: mutmut's name, ``<package>.<module>.x_<function>__mutmut_<n>``; it selects the mutant.
      module: the implementation's module, relative to the package (``gae``).
      function: the function (``Class.method`` for a method).
      line: the first changed line, in the reference's source file.
      change: the changed lines, ``- before`` and ``+ after``.
      key: a digest of module, function and change: what the reviewed file records, stable as long
        as the function's text is.
    """

    name: str
    module: str
    function: str
    line: int
    change: str
    key: str


@dataclass
class MutantResult:
    mutant: Mutant
    status: str
    killed_by: str = ""
    checks: int = 0
    seconds: float = 0.0
    reason: str = ""
    reused: bool = False


@dataclass
class Baseline:
    """What the unmutated copy gave each check: its reach (trampolined functions) and its time."""

    reached: dict[str, set[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    not_green: dict[str, str] = field(default_factory=dict)


def write_mutated_package(reference: Path, destination: Path, modules: Sequence[str]) -> list[Mutant]:
    """Copy the package ``reference`` to ``destination``, each of ``modules`` replaced by mutmut's trampolined
    mutants of it; the mutants, in file order."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    shutil.copytree(reference, destination, ignore=shutil.ignore_patterns("__pycache__"))
    package = destination.name
    mutants = []
    for module in modules:
        source_file = reference / f"{module}.py"
        if not source_file.is_file():
            raise ClaimsError(f"{source_file}: no such module of the implementation; pass --modules with names of "
                              f"{reference.name}'s modules, e.g. {', '.join(modules_of(reference)[:3])}")
        source = source_file.read_text(encoding="utf-8")
        mutated = _mutated_file(mutate_file_contents, source_file, source)
        (destination / f"{module}.py").write_text(mutated.code, encoding="utf-8")
        code_lines = mutated.code.splitlines()
        definitions = _definition_lines(source)
        for name in mutated.mutant_names:
            mangled = name.partition("__mutmut_")[0]
            function = _function_name(mangled)
            original = _lines(code_lines, mutated.line_span_by_function_name[f"{mangled}__mutmut_orig"])
            changed = _lines(code_lines, mutated.line_span_by_function_name[name])
            offset, change = _change(original, changed, (f"{mangled}__mutmut_orig", name), function)
            key = hashlib.sha256(f"{module}\0{function}\0{change}".encode()).hexdigest()[:16]
            # A function of the package's __init__.py belongs to the package itself.
            qualified = package if module == "__init__" else f"{package}.{module}"
            mutants.append(Mutant(f"{qualified}.{name}", module, function, definitions[function] + offset,
                                  change, key))
    return mutants


def _mutated_file(mutate_file_contents: Any, source_file: Path, source: str) -> Any:
    # mutmut reads its settings (the source paths, the patterns not to mutate) from the working directory's
    # pyproject.toml; the course's own says where the implementation is.
    try:
        return mutate_file_contents(str(source_file), source)
    except FileNotFoundError as error:
        raise ClaimsError(f"mutmut found no settings: {error}; run from the course root, whose pyproject.toml has "
                          "[tool.mutmut] source_paths") from None


def modules_of(package: Path) -> list[str]:
    """Every module of the package that defines a function, ``__init__`` among them if it does."""
    import ast

    return sorted(path.stem for path in package.glob("*.py")
                  if any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                         for node in ast.parse(path.read_text(encoding="utf-8")).body))


def _lines(code_lines: list[str], span: Any) -> list[str]:
    return code_lines[span.start - 1:span.end]


def _function_name(mangled: str) -> str:
    # mutmut mangles a function f as x_f and a method C.m as xǁCǁm.
    if mangled.startswith("x_"):
        return mangled[2:]
    _, class_name, method = mangled.split("ǁ")
    return f"{class_name}.{method}"


def _definition_lines(source: str) -> dict[str, int]:
    """The line of each function's ``def`` (decorators excluded), by the names :func:`_function_name` gives."""
    import ast

    lines = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines[node.name] = node.lineno
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines[f"{node.name}.{item.name}"] = item.lineno
    return lines


def _change(original: list[str], changed: list[str], names: tuple[str, str], function: str) -> tuple[int, str]:
    """Where ``changed`` first differs from ``original``, in lines after the ``def`` line, and the diff."""
    # The two copies differ in their generated names (x_f__mutmut_orig, x_f__mutmut_3) besides the change.
    plain = function.rpartition(".")[2]
    before = [line.replace(names[0], plain) for line in original]
    after = [line.replace(names[1], plain) for line in changed]
    start = next(number for number, line in enumerate(before) if line.lstrip().startswith(("def ", "async def ")))
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    lines, first = [], None
    for tag, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        first = a_start if first is None else first
        lines += [f"- {line.strip()}" for line in before[a_start:a_end]]
        lines += [f"+ {line.strip()}" for line in after[b_start:b_end]]
    return (first or start) - start, "\n".join(lines)


def check_label(part: Part) -> str:
    return part.key


class ResultCache:
    """What earlier runs found, one JSON file per key in ``directory``; a missing or unreadable file is a miss."""

    def __init__(self, directory: Path | None):
        self.directory = directory

    def load(self, key: str) -> dict[str, Any] | None:
        path = self.directory / f"{key}.json" if self.directory else None
        if path is None or not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def store(self, key: str, value: dict[str, Any]) -> None:
        if self.directory is None:
            return
        write_atomically(self.directory / f"{key}.json", json.dumps(value).encode())


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


def check_keys(parts: Sequence[Part], catalogue: Catalogue, reference: str, modules: Sequence[str]) -> dict[str, str]:
    """Each check's key in the mutation cache: its observation cache key against the reference, mutmut's version
    and the modules trampolined (a check's reach is counted among their functions only)."""
    from mutmut import __version__ as mutmut_version

    keys = {}
    for part in parts:
        assert part.entry is not None and part.entry.claim is not None and part.index is not None
        check = part.entry.claim.checks[part.index]
        observation = cache_key(part.entry, part.index, catalogue.verifiers[check.verifier], impl=reference,
                                profile=MUTATION_PROFILE, seed=0, alpha=alpha_per_comparison(check))
        keys[check_label(part)] = _digest(observation, mutmut_version, sorted(modules))
    return keys


def measure_baseline(parts: Sequence[Part], catalogue: Catalogue, options: RunOptions, workers: int,
                     keys: dict[str, str], cache: ResultCache) -> Baseline:
    """Run each check once against the unmutated trampolined copy, recording what it reaches and its time."""
    baseline = Baseline()
    found_before = {check_label(part): cache.load("baseline-" + keys[check_label(part)]) for part in parts}
    for label, found in found_before.items():
        if found:
            baseline.seconds[label], baseline.reached[label] = found["seconds"], set(found["reached"])
            if found["why"]:
                baseline.not_green[label] = found["why"]
    parts = [part for part in parts if not found_before[check_label(part)]]

    def child(number: int) -> dict[str, Any]:
        from mutmut.mutation.trampoline import set_mutant_under_test
        from mutmut.state import state

        set_mutant_under_test("stats")
        outcome = evaluate(parts[number], catalogue, options)
        why = "" if outcome.status == "passed" else f"{outcome.status}: {outcome.message}"
        return {"reached": sorted(state()._stats), "why": why.strip()[:500]}

    def done(number: int, ended: LaneEnd) -> None:
        label = check_label(parts[number])
        baseline.seconds[label] = ended.seconds
        if ended.value is None:
            baseline.not_green[label] = f"the check's process ended without an answer ({ended.why.strip()[:500]})"
            return
        baseline.reached[label] = set(ended.value["reached"])
        if ended.value["why"]:
            baseline.not_green[label] = ended.value["why"]
        cache.store("baseline-" + keys[label], {**ended.value, "seconds": ended.seconds})

    limit = 2 * PROFILES[options.profile].timeout
    on_lanes(len(parts), child, workers, done, limit_of=lambda number: limit, fresh=True)
    return baseline


def _mutant_key(mutant: Mutant, labels: Sequence[str], keys: dict[str, str]) -> str:
    return _digest(mutant.name, mutant.change, sorted(keys[label] for label in labels))


def _reach_name(mutant: Mutant) -> str:
    return mutant.name.partition("__mutmut_")[0]


def run_mutants(mutants: Sequence[Mutant], parts: Sequence[Part], baseline: Baseline, catalogue: Catalogue,
                options: RunOptions, workers: int, keys: dict[str, str], cache: ResultCache, progress: Any = None
                ) -> list[MutantResult]:
    """Each mutant against the checks that reach its function, in forked processes, ``workers`` at a time."""
    by_label = {check_label(part): part for part in parts if check_label(part) not in baseline.not_green}
    results: dict[int, MutantResult] = {}
    queued: list[tuple[int, Mutant, list[Part]]] = []
    for number, mutant in enumerate(mutants):
        reach = _reach_name(mutant)
        labels = sorted((label for label in by_label if reach in baseline.reached[label]),
                        key=lambda label: baseline.seconds[label])
        found = cache.load(_mutant_key(mutant, labels, keys))
        if found:
            results[number] = MutantResult(mutant, found["status"], found["killed_by"], len(labels), found["seconds"],
                                           found["reason"], reused=True)
        elif labels:
            queued.append((number, mutant, [by_label[label] for label in labels]))
        else:
            results[number] = MutantResult(mutant, NOT_REACHED)

    def limit_of(number: int) -> float:
        return TIME_FACTOR * sum(baseline.seconds[check_label(part)] for part in queued[number][2]) + TIME_CONSTANT

    def child(number: int) -> str:
        from mutmut.mutation.trampoline import set_mutant_under_test

        set_mutant_under_test(queued[number][1].name)
        for part in queued[number][2]:
            # Every selected check passed on the unmutated copy: any other verdict (a skip too) is the mutant's doing.
            if evaluate(part, catalogue, options).status != "passed":
                return check_label(part)
        return ""

    def done(number: int, ended: LaneEnd) -> None:
        task_number, mutant, selected = queued[number]
        killed_by, seconds = ended.value or "", ended.seconds
        if ended.value == "":
            result = MutantResult(mutant, SURVIVED, checks=len(selected), seconds=seconds)
        elif ended.why == TIMED_OUT:
            result = MutantResult(mutant, TIMEOUT, checks=len(selected), seconds=seconds,
                                  reason=f"ran past {limit_of(number):.0f} s ({TIME_FACTOR:g} times its "
                                         f"checks' time, plus {TIME_CONSTANT:g} s)")
        else:  # a red check, or a process the mutant crashed: either way the claims saw it
            result = MutantResult(mutant, KILLED, killed_by or f"the process ended ({_first_line(ended.why)})",
                                  len(selected), seconds)
        results[task_number] = result
        if ended.why != TIMED_OUT:  # a timeout may be the machine's load: the next run tries again
            cache.store(_mutant_key(mutant, [check_label(part) for part in selected], keys),
                        {"status": result.status, "killed_by": result.killed_by, "seconds": result.seconds,
                         "reason": result.reason})
        if progress:
            progress(result, len(results), len(mutants))

    on_lanes(len(queued), child, workers, done, limit_of=limit_of, fresh=True)
    return [results[number] for number in range(len(mutants))]


def _first_line(why: str) -> str:
    """How a mutant's process ended, in a line: its exit, or the last line of what it raised."""
    lines = why.strip().splitlines()
    return lines[-1] if lines else "raised"


def measure(course: Course, catalogue: Catalogue, modules: Sequence[str], workers: int, reviewed_file: Path,
            progress: Any = None, cache_dir: Path | None = None) -> dict[str, Any]:
    """The whole run: mutants of ``modules``, the baseline, each mutant; the results as ``reports/mutants.json``
    holds them."""
    reference = course.root / course.implementation
    started = time.time()
    # What the run measures is what is on disk when it starts: an edit during the run makes its results stale.
    inputs = mutation_inputs_digest(course)
    with tempfile.TemporaryDirectory(prefix="claims-mutants-") as scratch:
        package = Path(scratch) / f"{course.implementation}{PACKAGE_SUFFIX}"
        # Every configured module is trampolined, whichever are asked for, so that what a check reaches, and so
        # every key, is the same in a run of some modules as in a run of all: each reuses what the other found.
        trampolined = sorted({*(course.mutate or modules_of(reference)), *modules})
        mutants = [mutant for mutant in write_mutated_package(reference, package, trampolined)
                   if mutant.module in modules]
        sys.path.insert(0, scratch)
        try:
            options = RunOptions(impl=package.name, profile=MUTATION_PROFILE, isolation=False, cache_dir=None,
                                 workers=1, in_process=True)
            parts = [part for part in every_part(catalogue) if _smoke_check_of_impl(part, catalogue)]
            keys = check_keys(parts, catalogue, course.implementation, trampolined)
            cache = ResultCache(cache_dir)
            if progress:
                progress(None, 0, len(mutants))
            baseline = measure_baseline(parts, catalogue, options, workers, keys, cache)
            if progress:
                progress(baseline, 0, len(mutants))
            results = run_mutants(mutants, parts, baseline, catalogue, options, workers, keys, cache, progress)
        finally:
            sys.path.remove(scratch)
            for name in [name for name in sys.modules if name.split(".")[0] == package.name]:
                del sys.modules[name]
    return reviewed_again({
        "digest": inputs,
        "profile": MUTATION_PROFILE,
        "workers": workers,
        "seconds": round(time.time() - started, 1),
        "checks": len(parts),
        "reused": sum(1 for r in results if r.reused),
        "not_green": baseline.not_green,
        "modules": {module: {} for module in modules},
        "mutants": [{**asdict(r.mutant), "verdict": r.status, "killed_by": r.killed_by, "checks": r.checks,
                     "seconds": round(r.seconds, 3), "timeout": r.reason} for r in results],
    }, load_reviewed(reviewed_file))


def _smoke_check_of_impl(part: Part, catalogue: Catalogue) -> bool:
    """A check of the smoke profile that calls the implementation: the only ones a mutant can turn red."""
    if part.index is None or part.entry is None or part.entry.claim is None:
        return False
    check = part.entry.claim.checks[part.index]
    return MUTATION_PROFILE in check.profiles and bool(catalogue.verifiers[check.verifier].uses)

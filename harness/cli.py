"""The ``claims`` command: verify every claim and write the reports, lint, list, schema.

Every command works on the course whose tree holds the working directory (``[tool.claims]`` in
the nearest pyproject.toml, ``harness._claims.course``), or the one holding ``--claims-dir``; outside any
course it refuses with one line. Paths it writes (reports, cache, the registry) are the course's,
never the working directory's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import uuid
from functools import partial
from pathlib import Path

from harness._authoring import text as text_commands
from harness._claims.course import Course, find_course, write_atomically
from harness._claims.errors import ClaimsError
from harness._claims.formats import visible
from harness._claims.loading import Catalogue, load_catalogue
from harness._claims.registry import registered
from harness._claims.schema import KINDS, json_schema_text
from harness._claims.sources import registry_section, render_registry, with_registry
from harness._running.cache import checked_implementation
from harness._running.context import PROFILES
from harness._running.executor import default_workers
from harness._running.implementation import PYTEST_FLAG, check_implementation, reference_implementation
from harness._running.isolation import interrupt_on_termination, run_isolated
from harness._running.isolation import supported as isolation_supported
from harness._running.progress import run_showing_progress
from harness._running.runner import DEFAULT_PROFILE, IMPORT_TIME_LIMIT, check_names, close_zygotes, resolve_options
from harness._text.summary import text_overrides

SCHEMA_FILE = "schema.json"
RESULTS_FILE = "claims.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="claims", description=__doc__)
    parser.add_argument("--claims-dir", type=Path, default=None,
                        help="where the claim files are (default: the course's, from [tool.claims] in pyproject.toml)")
    commands = parser.add_subparsers(dest="command", required=True)

    verify = commands.add_parser("verify", help="run every claim's checks and write the reports")
    # The pytest plugin's spellings (--claims-*): one vocabulary for both; the older ones still work, and warn.
    verify.add_argument("--claims-report", "--out", dest="out", type=Path, default=None,
                        help="report directory (default: the course's reports/)")
    verify.add_argument("--claims-impl", "--impl", dest="impl",
                        help="implementation module under test (default: $CLAIMS_IMPL or the course's reference "
                             "implementation)")
    verify.add_argument("--claims-allow-reference", "--allow-reference", dest="allow_reference",
                        action="store_true",
                        help="let the implementation take the functions it does not define from the reference "
                             "as they are (pytest's --claims-allow-reference)")
    verify.add_argument("--claims-profile", "--profile", dest="profile", choices=PROFILES, default=None,
                        help=f"smoke (fast) or full (the release artifact) (default: $CLAIMS_PROFILE or "
                             f"{DEFAULT_PROFILE}, as everywhere)")
    verify.add_argument("--claims-seed", type=int, help="global seed (default: $CLAIMS_SEED or 0)")
    verify.add_argument("-n", "--numprocesses", help="run checks in parallel with pytest-xdist, e.g. 'auto'")
    verify.add_argument("--claims-scheduler", "--scheduler", dest="scheduler",
                        default=os.environ.get("CLAIMS_SCHEDULER"), metavar="ADDRESS",
                        help="run experiments' seeds on this Dask scheduler, e.g. tcp://host:8786 "
                             "(default: $CLAIMS_SCHEDULER, else a local process pool)")
    verify.add_argument("--no-cache", action="store_true", help="re-run every check, reusing nothing from the cache")
    verify.add_argument("--check", action="store_true",
                        help="also fail if the reports differ, in what the claims state, from the ones already in "
                             "--out, or if the run is incomplete")
    verify.add_argument("--claims-text", "--text", dest="text", action="append", default=[], metavar="NAME=PATH",
                        help="read the course text's document NAME from PATH (a revised copy) for the report and the "
                             "gate (repeatable)")
    verify.add_argument("pytest_args", nargs="*", help="extra pytest arguments after '--', e.g. -- -x")

    commands.add_parser("lint", help="validate every claim file without running checks")
    commands.add_parser("list", help="print every claim: id, step, kinds of its checks")
    schema = commands.add_parser("schema", help=f"write claims/{SCHEMA_FILE} from the schema")
    schema.add_argument("--check", action="store_true", help="only report whether the file is current")
    commands.add_parser("verifiers", help="print every registered verifier and what it uses")
    audit = commands.add_parser("audit", help="measure Monte Carlo checks' false-failure rate and power")
    audit.add_argument("--runs", type=int, default=20, help="runs per check and series (default 20)")
    audit.add_argument("--alpha", type=float, default=0.05, help="inflated false-failure rate (default 0.05)")
    audit.add_argument("--claims-impl", "--impl", dest="impl", default=None,
                       help="implementation module under test (default: the reference)")
    audit.add_argument("-k", dest="selected", default="", help="only claims whose id contains this text")
    audit.add_argument("--write", type=Path, help="also write the table to this Markdown file")
    new = commands.add_parser("new", help="append a claim skeleton and a verifier stub (asks for what is missing)")
    new.add_argument("--step", help="where the text says it: one of the course's steps")
    new.add_argument("--kind", help="kind of the first check, e.g. exact")
    new.add_argument("--id", dest="claim_id", help="kebab-case id, unique across claim files")
    new.add_argument("--module", help="verifier module in the verifier package (default: lesson_<the step's lesson>)")
    sharpness = commands.add_parser("sharpness", help="perturb every expected number by one printed unit and "
                                                      "re-compare the cached observations (no check runs)")
    sharpness.add_argument("--claims-profile", "--profile", dest="profile", choices=PROFILES, default=None,
                           help=f"whose cached observations to use (default: $CLAIMS_PROFILE or {DEFAULT_PROFILE})")
    sharpness.add_argument("--claims-seed", type=int, help="global seed of the cached run (default: $CLAIMS_SEED or 0)")
    exercises = commands.add_parser("exercises", help="write the reference implementation as a package of stubs "
                                                      "to fill in")
    exercises.add_argument("directory", type=Path, help="the package to write; its name is the package's, e.g. "
                                                        "exercises")
    exercises.add_argument("--force", action="store_true",
                           help="write into a directory that is not empty, replacing only the files it writes")

    mutants = commands.add_parser("mutants", help="mutate the implementation's functions (mutmut) and run, for each "
                                                  "mutant, the smoke checks that reach it; write mutants.json and .md")
    mutants.add_argument("--modules", nargs="+", help="the implementation's modules to mutate (default: [tool.claims] "
                                                      "mutate, else every module)")
    mutants.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                         help="mutants run at once (default: the number of CPUs)")
    mutants.add_argument("--out", type=Path, default=None, help="where mutants.json and mutants.md go (default: the "
                                                                "course's reports/)")
    mutants.add_argument("--no-cache", action="store_true", help="run every check and mutant again, reusing nothing "
                                                                 "earlier runs found")
    mutants.add_argument("--review", action="store_true",
                         help="run nothing: apply the reviewed file to the last run's mutants.json and rewrite both "
                              "files (after judging survivors)")

    text_commands.add_parser(commands)

    args = parser.parse_args(argv)
    if args.command == "verify":
        _warn_of_old_spellings(sys.argv[1:] if argv is None else argv)
    try:
        args.course = find_course(args.claims_dir)
        args.claims_dir = (args.claims_dir or args.course.claims).resolve()
        if not args.claims_dir.is_dir():
            raise ClaimsError(f"{args.claims_dir}: no such directory of claim files; pass --claims-dir with the "
                              f"course's claims directory ({args.course.claims})")
        command = {"verify": _verify, "lint": _lint, "list": _list, "schema": _schema, "verifiers": _verifiers,
                   "new": _new, "audit": _audit, "exercises": _exercises, "sharpness": _sharpness,
                   "mutants": _mutants, "text": text_commands.run}
        return command[args.command](args)
    except ClaimsError as error:
        print(f"claims {args.command}: {error}", file=sys.stderr)
        return 2


# The spellings of `claims verify`'s options before the command and the plugin shared one vocabulary.
_OLD_SPELLINGS = {"--impl": "--claims-impl", "--out": "--claims-report", "--profile": "--claims-profile",
                  "--text": "--claims-text", "--scheduler": "--claims-scheduler",
                  "--allow-reference": "--claims-allow-reference"}


def _warn_of_old_spellings(argv: list[str]) -> None:
    """One line on stderr for each option given in its old spelling, naming the one to use."""
    own = argv[:argv.index("--")] if "--" in argv else argv
    for option in dict.fromkeys(token.partition("=")[0] for token in own):
        if option in _OLD_SPELLINGS:
            print(f"claims verify: warning: {option} is the old spelling of {_OLD_SPELLINGS[option]} (the pytest "
                  f"plugin's, and the one to use); it still works", file=sys.stderr)


def _verify(args: argparse.Namespace) -> int:
    from harness._reporting.gate import compare_snapshots, snapshot  # the reports' code: not needed to lint or list
    from harness._reporting.report import report_directory_problem

    course: Course = args.course
    args.out = (args.out or course.reports).resolve()
    text_overrides(args.text)  # a malformed --text is refused before anything runs
    unwritable = report_directory_problem(args.out)
    if unwritable:
        print(f"claims verify: {unwritable}\nclaims verify: no check run, no report written", file=sys.stderr)
        return 2
    refused = _implementation_refused(args)
    if refused:
        print(f"claims verify: {refused}\nclaims verify: no check run, no report written", file=sys.stderr)
        return 2
    before = snapshot(args.out) if args.check else None
    catalogue = load_catalogue(args.claims_dir)
    run_id, earlier = uuid.uuid4().hex[:12], _run_id_in(args.out)
    # Extra pytest arguments (-k, -m, -x, ...) decide what runs and how: only pytest can honour them.
    reusable = not (args.no_cache or args.pytest_args)
    status = _verify_without_pytest(args, catalogue, run_id) if reusable else None
    writer = "this command"
    if status is None:
        status, writer = _verify_with_pytest(args, run_id), "pytest"
    results = _this_runs_results(args.out, run_id)
    if results is None:
        other = _run_id_in(args.out)
        if other not in (None, earlier):
            why = f"another run's report (run {other}) replaced this one's in {args.out}/: run again for this run's"
        else:
            why = (f"{writer} wrote no report (exit status {status}); the reports in {args.out}/ are unchanged and "
                   "are not this run's")
        print(f"claims verify: {why}", file=sys.stderr)
        return status or 1
    print(f"claims verify: reports written to {args.out}/ (exit status {status})")
    status = _registry_and_gate(args, catalogue, results, before, compare_snapshots, snapshot) or status
    incomplete = _ledger_gate(catalogue)
    return status or incomplete


def _run_id_in(out: Path) -> str | None:
    """The run id of the report in ``out``, or None when there is none or it cannot be read."""
    try:
        found = json.loads((out / RESULTS_FILE).read_text(encoding="utf-8")).get("run", {}).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return str(found) if found else None


def _this_runs_results(out: Path, run_id: str) -> dict | None:
    """The results this run wrote, or None when the file there is missing, unreadable or another run's."""
    try:
        results = json.loads((out / RESULTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return results if results.get("run", {}).get("id") == run_id else None


def _implementation_refused(args: argparse.Namespace) -> str | None:
    """Why the implementation under test cannot be verified (as pytest would import it), or None."""
    impl = resolve_options(args.impl, args.profile, args.claims_seed).impl
    args.given = ()
    if impl == reference_implementation() and importlib.util.find_spec(impl) is not None:
        return None  # the reference: pytest imports it if a check has to run (a second here, on the cached path)
    # ``python -m pytest`` finds modules in the working directory: so must this check.
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    check = partial(check_implementation, impl, allow_reference=args.allow_reference, flag="--allow-reference")
    try:
        # In a worker: an implementation that kills the interpreter on import must not take this command with it.
        isolated = partial(run_isolated, check, IMPORT_TIME_LIMIT, f"importing the implementation '{impl}'")
        found = checked_implementation(impl, isolated if isolation_supported() else check,
                                       None if args.no_cache else args.course.cache,
                                       allow_reference=args.allow_reference)
    except ClaimsError as error:
        return str(error)
    finally:
        if added:
            sys.path.remove(here)
    args.given = found.as_reference if found is not None else ()
    return None


def _ledger_gate(catalogue: Catalogue) -> int:
    """1 when the statement ledger is incomplete: a green report must mean every statement was checked.

    Checks still run and the reports still say what they found (``pytest claims/`` never fails on
    the ledger); only ``claims verify``, and so the release gate, refuses to call the result done.
    """
    problems = catalogue.ledger_problems()
    for problem in problems:
        print(f"claims verify: {problem}", file=sys.stderr)
    if problems:
        print(f"claims verify: the statement ledger is incomplete ({len(problems)} problems, as 'claims lint' "
              "lists them); cover each statement with a claim or give it 'not_checkable:'", file=sys.stderr)
    return 1 if problems else 0


# What starting pytest costs here beyond this command's own work (importing it, collecting every claim again,
# its plugin's set-up), and what starting pytest-xdist's workers costs on top (each imports the harness, the
# verifiers and the implementation), measured on these 2-core machines: a one-function edit's 11 checks
# (1.3 s of checks) took 13.2 s through pytest, 11 quick checks 8.7 s in one pytest process and 10.9 s on two.
_PYTEST_START_SECONDS = 5.0
_WORKERS_START_SECONDS = 2.0
# A check never timed before is assumed to take this long, by kind (the experiments' smoke runs take 5-30 s).
_UNTIMED_SECONDS = {"experiment": 30.0}


def _quicker_here(args: argparse.Namespace, to_run: list) -> bool:
    """Whether running ``to_run`` one by one in this process is quicker than starting pytest (with ``-n``'s workers).

    ``W`` check-seconds take about ``W`` here, and ``start + W / n`` in pytest on ``n`` workers, so this
    process is quicker while ``W`` is below ``start * n / (n - 1)`` (always, without workers). ``W`` is
    estimated from the times the last report in ``--out`` gives these checks (a student's loop: the same
    implementation, one function edited).
    """
    workers = 1
    if args.numprocesses is not None:
        workers = (os.cpu_count() or 1) if args.numprocesses in ("auto", "logical") else int(args.numprocesses)
    if workers < 2:
        return True
    timed = _last_seconds(args.out)
    estimate = sum(timed.get((part.entry.id, part.index), _UNTIMED_SECONDS.get(
        part.entry.claim.checks[part.index].kind, 1.0)) for part in to_run)
    return estimate < (_PYTEST_START_SECONDS + _WORKERS_START_SECONDS) * workers / (workers - 1)


def _last_seconds(out: Path) -> dict[tuple[str, int], float]:
    """(claim, check index) -> the seconds the report in ``out`` gives it; empty without a readable report."""
    try:
        results = json.loads((out / RESULTS_FILE).read_text(encoding="utf-8"))
        return {(row["id"], index): float(check["seconds"]) for row in results["claims"]
                for index, check in enumerate(row["checks"]) if not check.get("reused")}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _verify_with_pytest(args: argparse.Namespace, run_id: str) -> int:
    # A separate interpreter, so pytest imports (and rewrites) everything itself, as in `pytest claims/`; it runs
    # from the course root, so its rootdir, node ids and imports are the same wherever this was started.
    course: Course = args.course
    pytest_args = [sys.executable, "-m", "pytest", str(args.claims_dir), "--claims-report", str(args.out),
                   "--claims-run-id", run_id, "-q", "-rfE"]
    if not args.no_cache:
        pytest_args += ["--claims-cache", str(course.cache)]
    for name, path in text_overrides(args.text).items():  # absolute: pytest runs from the course root
        pytest_args += ["--claims-text", f"{name}={path}"]
    for option, value in (("--claims-impl", args.impl), ("--claims-profile", args.profile),
                          ("--claims-seed", args.claims_seed), ("-n", args.numprocesses),
                          ("--claims-scheduler", args.scheduler)):
        if value is not None:
            pytest_args += [option, str(value)]
    if args.allow_reference:
        pytest_args.append(PYTEST_FLAG)
    # The implementation is looked for where the command was started (as `python -m pytest` there would).
    python_path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p)
    return run_showing_progress(pytest_args + args.pytest_args, cwd=course.root,
                                env={**os.environ, "PYTHONPATH": python_path})


def _verify_without_pytest(args: argparse.Namespace, catalogue: Catalogue, run_id: str) -> int | None:
    """Reuse every cached observation, run the checks left here, write the reports: the exit status; None when
    pytest has to run (this process cannot tell what pytest would import, or pytest's workers are quicker).

    The checks run through the same evaluation as pytest's items, each in a supervised worker process;
    only what pytest adds is missing: its rewriting of a failing verifier's ``assert`` (every verifier's
    assert gives its own message, so a failure still says what it compared).
    """
    from harness._reporting.report import ReportNotWritten, lessons_of, staging_dir_for, write_reports
    from harness._running.engine import evaluate, every_part, never_reported
    from harness._text.summary import text_report

    if not _imports_as_pytest_would(args):
        return None
    started = time.time()
    # The cached figures are restored into the staging directory, which write_reports moves into place.
    # One checking process: an experiment's seeds may use every core, as in pytest without xdist.
    options = resolve_options(args.impl, args.profile, args.claims_seed, report_dir=str(args.out),
                              cache_dir=str(args.course.cache), allow_reference=args.allow_reference, run_id=run_id,
                              staging_dir=str(staging_dir_for(args.out, run_id)), scheduler=args.scheduler,
                              workers=default_workers(1))
    parts = every_part(catalogue)
    if not parts:
        return None  # nothing to report is pytest's to say (it exits with "no tests collected")
    outcomes = {part.key: evaluate(part, catalogue, options, reuse_only=True) for part in parts}
    to_run = [part for part in parts if outcomes[part.key] is None]
    if to_run and not _quicker_here(args, to_run):
        return None
    completeness = {"id": run_id, "complete": True, "incomplete": None, "selection": "all"}
    undo = interrupt_on_termination()
    try:
        for done, part in enumerate(to_run, 1):
            outcome = outcomes[part.key] = evaluate(part, catalogue, options)
            print(f"claims verify: [{done}/{len(to_run)}] {part.key} {outcome.status}", flush=True)
    except KeyboardInterrupt:
        completeness.update(complete=False, incomplete="interrupted")
    finally:
        undo()
        close_zygotes()
    evidence = [outcome.evidence if outcome is not None else
                never_reported(part, catalogue, options, "the run was interrupted before this check reported")
                for part, outcome in zip(parts, outcomes.values(), strict=True)]
    try:
        write_reports(args.out, evidence, lessons_of([catalogue]), options, started, catalogue.root, completeness,
                      args.given, text_report(catalogue, text_overrides(args.text)))
    except ReportNotWritten as error:
        print(f"claims verify: {error}", file=sys.stderr)
        return 1
    failures = [outcome.message for outcome in outcomes.values()
                if outcome is not None and outcome.status in ("failed", "error")]
    for failure in failures:
        print(failure, end="\n\n")
    ran = f"ran {len(to_run)} checks here" if to_run else "no check had to run"
    print(f"claims verify: {ran}; {len(failures)} of {len(outcomes)} results failed (pytest not started)")
    if not completeness["complete"]:
        return 2  # as pytest's exit status for an interrupted run
    return 1 if failures else 0


def _imports_as_pytest_would(args: argparse.Namespace) -> bool:
    """Whether this process finds the harness, the verifiers and the implementation where pytest would.

    ``python -m pytest`` puts its working directory (the course root) first on ``sys.path``, so a package
    there shadows the installed one (a tox environment's copy of the harness, say); a cache key computed
    from the other copy could reuse observations the code pytest runs never made.
    """
    root: Path = args.course.root
    impl = args.impl or os.environ.get("CLAIMS_IMPL") or reference_implementation()
    # Where pytest would look first: the course root (``python -m pytest`` from there), then the directory
    # this command started in (its PYTHONPATH), so that a student's package in either is found here too.
    for directory in reversed(dict.fromkeys([str(root), os.getcwd()])):
        if directory not in sys.path:
            sys.path.insert(0, directory)
    for name in ("harness", args.course.verifiers, impl.partition(".")[0]):
        local = next((path for path in (root / name / "__init__.py", root / f"{name}.py") if path.is_file()), None)
        spec = importlib.util.find_spec(name)
        found = Path(spec.origin).resolve() if spec is not None and spec.origin else None
        if found is None or (local is not None and local.resolve() != found):
            return False
    return True


def _registry_and_gate(args: argparse.Namespace, catalogue: Catalogue, results: dict, before: dict | None,
                       compare_snapshots, snapshot) -> int:
    """Rewrite the registry of claims after a whole run of the reference, and apply ``--check``; an exit status."""
    from harness._text.summary import problems as text_problems

    run = results["run"]
    checks = [check for row in results["claims"] for check in row["checks"]]
    print(f"claims verify: reused {sum(check['reused'] for check in checks)} of {len(checks)} check results "
          f"from {args.course.cache}/" + (" (cache off)" if args.no_cache else ""))
    whole = run.get("complete") and run.get("selection") == "all"
    if not run.get("complete"):
        print(f"claims verify: the run is incomplete ({run.get('incomplete')}); the reports say so",
              file=sys.stderr)
    if whole and run["impl"] == reference_implementation() and args.out == args.course.reports.resolve():
        sources_file = args.course.sources
        text = sources_file.read_text(encoding="utf-8")
        write_atomically(sources_file, with_registry(text, _registry(catalogue, results)).encode("utf-8"))
        print(f"claims verify: registry of claims rewritten in {sources_file}")
    elif run["impl"] == reference_implementation():
        print("claims verify: registry of claims left as it was (only a whole, complete run of the reference into "
              f"{args.course.reports} rewrites it)")
    status = 0 if run.get("complete") else 1
    _say_text(results.get("text"))
    if before is not None:
        differences = compare_snapshots(before, snapshot(args.out))
        differences += [f"{survivor_line(survivor)}: a survivor with no reason in the claim file"
                        for survivor in results["summary"]["sharpness"]["survivors"]]
        differences += text_problems(results.get("text"))  # a drifted text is the author's to review first
        for difference in differences:
            print(f"claims verify --check: {difference}", file=sys.stderr)
        if differences:
            print("claims verify --check: the committed reports are stale; commit the regenerated ones",
                  file=sys.stderr)
            status = 1
    return status


def _say_text(text: dict | None) -> None:
    """One line on the course text's state; the release gate (--check) refuses a text that is not clean."""
    if text is None:
        return
    if not text.get("available"):
        print(f"claims verify: warning: the course text was not read, so the report says nothing of it: "
              f"{text.get('error')}", file=sys.stderr)
        return
    counts = ", ".join(f"{count} {status}" for status, count in text["counts"].items() if count)
    print(f"claims verify: the text: statements {counts}; {len(text['uncovered_blocks'])} uncovered blocks, "
          f"{len(text['unheld_numbers'])} unheld numbers" + ("" if text["clean"] else
                                                              " ('claims text status' says what to review)"))


def _registry(catalogue: Catalogue, results: dict | None) -> str:
    statuses = {row["id"]: row["status"] for row in results["claims"]} if results else {}
    rows = []
    for entry in catalogue.entries:
        claim = entry.claim
        rows.append({
            "id": entry.id, "where": entry.where or "?",
            "kinds": ", ".join(dict.fromkeys(check.kind for check in claim.checks)) if claim else "-",
            "status": statuses.get(entry.id, "not run"),
            "sources": ", ".join(claim.sources) if claim else "-",
            "limitations": (claim.limitations or "-") if claim else "-",
        })
    return render_registry(rows)


def _lint(args: argparse.Namespace) -> int:
    from harness._authoring.new import lint_warnings

    course: Course = args.course
    catalogue = load_catalogue(args.claims_dir)
    problems = [str(problem) for problem in [*catalogue.problems(), *catalogue.ledger_problems()]]
    problems += [f"{entry.file}:{entry.line}: claim '{entry.id}', check {index + 1}, field 'rejects': missing; name "
                 "one concrete wrong implementation this check turns red (and make sure it does)"
                 for entry in catalogue.entries if entry.claim
                 for index, check in enumerate(entry.claim.checks) if check.rejects is None]
    cited = {key for entry in catalogue.entries if entry.claim for key in entry.claim.sources}
    sources_file = course.sources
    problems += [f"{sources_file.name}:{source.line}: source '{key}' is cited by no claim; cite it where it backs a "
                 "claim, or remove it" for key, source in catalogue.sources.items() if key not in cited]
    results_file = course.reports / RESULTS_FILE
    results = json.loads(results_file.read_text(encoding="utf-8")) if results_file.is_file() else None
    registry = _registry(catalogue, results)
    if sources_file.is_file() and registry_section(sources_file.read_text(encoding="utf-8")) != registry:
        problems.append(f"{sources_file.name}: the generated registry of claims does not match the claim files and "
                        f"{course.reports.name}/{RESULTS_FILE}; regenerate both with "
                        "'claims verify --claims-profile full'")
    schema_path = args.claims_dir / SCHEMA_FILE
    if not schema_path.is_file() or schema_path.read_text(encoding="utf-8") != json_schema_text():
        problems.append(f"{schema_path}: stale or missing; regenerate it with 'claims schema'")
    for problem in problems:
        print(visible(problem))
    warnings = lint_warnings(catalogue, reference_implementation())
    for warning in warnings:
        print(f"warning: {visible(warning)}")
    claims = sum(1 for entry in catalogue.entries if not entry.broken)
    print(f"claims lint: {claims} usable claims in {len(catalogue.files)} files, {len(problems)} problems, "
          f"{len(warnings)} warnings", file=sys.stderr)
    return 2 if problems else 0


def _list(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.claims_dir)
    for entry in catalogue.entries:
        kinds = "cannot be loaded" if entry.broken else ", ".join(check_names(entry))
        print(f"{visible(entry.id):40} {visible(entry.where or '?'):14} {kinds}")
    return 0


def _schema(args: argparse.Namespace) -> int:
    path = args.claims_dir / SCHEMA_FILE
    current = path.is_file() and path.read_text(encoding="utf-8") == json_schema_text()
    if args.check:
        print(f"{path}: {'current' if current else 'stale; run claims schema'}")
        return 0 if current else 1
    path.write_text(json_schema_text(), encoding="utf-8")
    print(f"wrote {path}")
    return 0


def _verifiers(args: argparse.Namespace) -> int:
    for name, verifier in sorted(registered(args.course.verifiers).items()):
        print(f"{name:45} {'/'.join(verifier.kinds):14} {verifier.location:32} uses: {', '.join(verifier.uses) or '-'}")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from harness._power.audit import audit, render

    rows = audit(load_catalogue(args.claims_dir), args.runs, args.alpha, args.impl or reference_implementation(),
                 args.selected)
    table = render(rows, args.runs, args.alpha)
    print(table)
    if args.write:
        args.write.write_text(table, encoding="utf-8")
    return 0 if all(row.ok for row in rows) else 1


def _new(args: argparse.Namespace) -> int:
    from harness._authoring.new import NewClaim, validate, write

    catalogue = load_catalogue(args.claims_dir)

    def ask(value: str | None, question: str) -> str:
        if value:
            return value
        if not sys.stdin.isatty():
            raise SystemExit(f"claims new: {question} is needed; pass it as a flag")
        return input(f"{question}: ").strip()

    step = ask(args.step, f"step (one of {args.course.describe_steps()})")
    kind = ask(args.kind, f"kind ({', '.join(KINDS)})")
    claim_id = ask(args.claim_id, "id (kebab-case)")
    module = args.module or "lesson_" + step.replace(".", "_").replace("/", "_").rsplit("_", 1)[0]
    request = NewClaim(step, kind, claim_id, module)
    verifiers_dir = catalogue.root / catalogue.course.verifiers.replace(".", "/")
    errors = validate(request, catalogue, verifiers_dir)
    for error in errors:
        print(f"claims new: {error}", file=sys.stderr)
    if errors:
        return 2
    for line in write(request, catalogue, verifiers_dir):
        print(line)
    return 0


def _exercises(args: argparse.Namespace) -> int:
    from harness._authoring.exercises import write_exercises

    print(write_exercises(args.directory, load_catalogue(args.claims_dir), force=args.force).summary())
    return 0




def survivor_line(survivor: dict) -> str:
    """One survivor of the perturbation of expected numbers, located in its claim file."""
    return (f"{survivor['file']}:{survivor['line']}: claim '{survivor['claim']}' ({survivor['kind']}): "
            f"'{survivor['key']}' expected {survivor['written']} still passes as {survivor['perturbed']}")


def _sharpness(args: argparse.Namespace) -> int:
    """Perturb every expected number of every cached check; print the score and the survivors (_running.sharpness)."""
    from harness._reporting.report import build_results, lessons_of
    from harness._running.engine import evaluate, every_part

    catalogue = load_catalogue(args.claims_dir)
    options = resolve_options(None, args.profile, args.claims_seed, cache_dir=str(args.course.cache))
    outcomes, uncached = [], 0
    for part in every_part(catalogue):
        outcome = evaluate(part, catalogue, options, reuse_only=True)
        if outcome is None:
            uncached += 1
        else:
            outcomes.append(outcome)
    checks = sum(1 for part in every_part(catalogue) if part.index is not None)
    if uncached == checks:
        print(f"claims sharpness: no observation of the {options.profile} profile is cached in {args.course.cache}/; "
              f"run 'claims verify --claims-profile {options.profile}' first", file=sys.stderr)
        return 2
    results = build_results([outcome.evidence for outcome in outcomes], lessons_of([catalogue]), options,
                            time.time(), catalogue.root)
    found = results["summary"]["sharpness"]
    for survivor in found["survivors"]:
        print(survivor_line(survivor))
    judged = found["killed"] + found["survived"] + found["explained"]
    print(f"claims sharpness: {found['killed']} of {judged} perturbed expected numbers turn their check red "
          f"(score {found['score']}); {found['explained']} explained in the claim files, {found['survived']} "
          f"survivors; {found['bounds']} bounds not perturbed; profile {options.profile}"
          + (f"; {uncached} of {checks} checks not cached, so not measured" if uncached else ""))
    return 1 if found["survived"] else 0


def _mutants(args: argparse.Namespace) -> int:
    """Mutation testing of the implementation by the claims (harness._power.mutants); exit 1 below the target."""
    try:
        import mutmut  # noqa: F401 - only to say how to install it
    except ImportError:
        raise ClaimsError("mutmut is not installed; install the project with its mutants extra: "
                          "pip install -e '.[mutants]' (or run tox -e mutants)") from None
    from harness._power import mutants as mutation

    course = args.course
    modules = args.modules or list(course.mutate) or mutation.modules_of(course.root / course.implementation)
    out = (args.out or course.reports).resolve()
    reviewed_file = course.mutants_reviewed or course.root / "mutants-reviewed.yaml"
    mutation.load_reviewed(reviewed_file)  # a malformed reviewed file stops the run before it starts

    def progress(result: object, done: int, total: int) -> None:
        if isinstance(result, mutation.Baseline):
            print(f"claims mutants: baseline: {len(result.seconds)} checks in {sum(result.seconds.values()):.0f} "
                  f"check-seconds; {len(result.not_green)} not green (left out)", flush=True)
        elif result is None:
            print(f"claims mutants: {total} mutants of {', '.join(modules)}; running each check once to learn what "
                  "it reaches", flush=True)
        elif isinstance(result, mutation.MutantResult) and result.status == mutation.SURVIVED:
            print(f"  survived: {course.implementation}/{result.mutant.module}.py:{result.mutant.line} "
                  f"{result.mutant.function}: {result.mutant.change.splitlines()[-1]}", flush=True)
        elif done % 100 == 0:
            print(f"claims mutants: {done} of {total}", flush=True)

    if args.review:
        last_run = out / mutation.MUTANTS_JSON
        if not last_run.is_file():
            raise ClaimsError(f"{last_run}: no results of an earlier run to review; run 'claims mutants' first")
        results = mutation.reviewed_again(json.loads(last_run.read_text(encoding="utf-8")),
                                          mutation.load_reviewed(reviewed_file))
    else:
        os.chdir(course.root)  # mutmut reads its settings ([tool.mutmut]) from the working directory
        results = mutation.measure(course, load_catalogue(args.claims_dir), modules, max(1, args.workers),
                                   reviewed_file, progress, None if args.no_cache else course.cache / "mutants")
    mutation.write_results(results, out)
    write_atomically(out / "mutants.md", mutation.render_markdown(results, course, reviewed_file).encode("utf-8"))
    overall = results["overall"]
    holes = [m for m in results["mutants"] if m["status"] in (mutation.SURVIVED, mutation.NOT_REACHED)]
    for hole in holes:
        print(f"{course.implementation}/{hole['module']}.py:{hole['line']}: {hole['function']} ({hole['status']}, "
              f"key {hole['key']}):\n" + "\n".join(f"    {line}" for line in hole["change"].splitlines()))
    score = overall["score"]
    if not args.review:
        print(f"claims mutants: {results['reused']} of {overall['mutants']} mutants' results reused from earlier "
              f"runs ({course.cache / 'mutants'})")
    print(f"claims mutants: score {mutation.percent(score)} ({overall['killed'] + overall['timeout']} caught of "
          f"{overall['mutants'] - overall['equivalent']}; {overall['equivalent']} equivalent, {len(holes)} holes); "
          f"target {course.mutation_target:.0%}; wrote {out / 'mutants.md'}")
    if holes:
        print(f"claims mutants: judge each hole: add a claim or a stronger check that catches it, or, if it computes "
              f"the same thing, add it to {reviewed_file} with its reason (key, module, function, line, change, "
              "reason)")
    below = score is not None and score < course.mutation_target
    return 1 if below or results["not_green"] else 0


if __name__ == "__main__":
    sys.exit(main())

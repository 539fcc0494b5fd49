"""``claims verify``: reuse what the cache holds, run the checks left (here, or through pytest when its workers
are quicker or pytest's own options are asked for), write the reports, then the registry and the gates.
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

from claims_harness._claims.course import RESULTS_FILE, Course, write_atomically
from claims_harness._claims.errors import ClaimsError
from claims_harness._claims.formats import IMPLEMENTATION_PATH_FLAG, PYTEST_FLAG, counted
from claims_harness._claims.loading import Catalogue, load_catalogue
from claims_harness._claims.sources import render_registry, with_registry
from claims_harness._running.cache import checked_implementation
from claims_harness._running.executor import default_workers
from claims_harness._running.implementation import reference_implementation
from claims_harness._running.processes import interrupt_on_termination
from claims_harness._running.progress import run_showing_progress
from claims_harness._running.remote import check_implementation, close_hosts
from claims_harness._running.runner import resolve_options
from claims_harness._text.summary import text_overrides


def verify_command(args: argparse.Namespace) -> int:
    """``claims verify``: every claim checked (reusing the cache), the reports written, the registry and the gates."""
    from claims_harness._reporting.gate import committed_snapshot, gate_findings, snapshot  # not needed to lint or list
    from claims_harness._reporting.report import (
        NOT_JUDGED,
        judged_verdict,
        remove_staging,
        remove_stale_staging,
        report_directory_problem,
        staging_dir_for,
    )

    course: Course = args.course
    asked_for = args.out is not None
    args.out = (args.out or course.reports).resolve()
    text_overrides(args.text)  # a malformed --text is refused before anything runs
    options = resolve_options(args.impl, args.profile, args.claims_seed)
    unwritable = report_directory_problem(args.out, course.root, options.impl) or (
        None if asked_for else _kept_apart(args.out, options.impl, options.profile))
    if unwritable:
        print(f"claims verify: {unwritable}\nclaims verify: no check run, no report written", file=sys.stderr)
        return 2
    refused = _implementation_refused(args)
    if refused:
        print(f"claims verify: {refused}\nclaims verify: no check run, no report written", file=sys.stderr)
        return 2
    remove_stale_staging(args.out)  # the staging directories of earlier runs that were killed
    before, compared_with = committed_snapshot(args.out) if args.check else (None, None)
    if compared_with:
        print(f"claims verify --check: the fresh run is compared with {compared_with}")
    catalogue = load_catalogue(args.claims_dir)
    run_id, earlier = uuid.uuid4().hex[:12], _run_id_in(args.out)
    # Extra pytest arguments (-k, -m, -x, ...) decide what runs and how: only pytest can honour them.
    reusable = not (args.no_cache or args.pytest_args)
    status = _verify_without_pytest(args, catalogue, run_id) if reusable else None
    writer = "this command"
    if status is None:
        status, writer = _verify_with_pytest(args, run_id), "pytest"
    results = _this_runs_results(args.out, run_id)
    remove_staging(staging_dir_for(args.out, run_id))  # gone once the reports were written; left when they were not
    if results is None:
        other = _run_id_in(args.out)
        if other not in (None, earlier):
            why = f"another run's report (run {other}) replaced this one's in {args.out}/: run again for this run's"
        else:
            why = (f"{writer} wrote no report (exit status {status}); the reports in {args.out}/ are unchanged and "
                   "are not this run's")
        print(f"claims verify: {why}", file=sys.stderr)
        return status or 1
    print(f"claims verify: reports written to {args.out}/")
    status = _registry_and_gate(args, catalogue, results, before, gate_findings, snapshot) or status
    incomplete = _ledger_gate(catalogue, results)
    not_judged = results["summary"]["checks"].get(NOT_JUDGED, 0)
    status = status or incomplete or (1 if not_judged and not args.partial else 0)
    # The last line says what the exit status says: a gate that failed above is not followed by a green line alone.
    print(f"claims verify: {judged_verdict(results['summary'], args.partial)} (exit status {status})", flush=True)
    return status


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


def _kept_apart(directory: Path, impl: str, profile: str) -> str | None:
    """Why a run with no --claims-report may not replace the report in ``directory`` (the course's reports/): it is
    of another profile or implementation (the committed release report, say, which a smoke run or a student's
    implementation would overwrite); None when the run is of the same kind, or there is no report there."""
    try:
        run = json.loads((directory / RESULTS_FILE).read_text(encoding="utf-8"))["run"]
        kept = (str(run["impl"]), str(run["profile"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if kept == (impl, profile):
        return None
    return (f"{directory} holds the report of '{kept[0]}' in the {kept[1]} profile, and this run ('{impl}', {profile} "
            f"profile) would replace it: give --claims-report DIR for a report of its own (e.g. my-report), run "
            f"--claims-impl {kept[0]} --claims-profile {kept[1]} to regenerate it, or name it with --claims-report "
            "to replace it on purpose")


def _implementation_refused(args: argparse.Namespace) -> str | None:
    """Why the implementation under test cannot be verified (as pytest would import it), or None."""
    impl = resolve_options(args.impl, args.profile, args.claims_seed).impl
    args.given = ()
    if impl == reference_implementation() and importlib.util.find_spec(impl) is not None:
        return None  # the reference: pytest imports it if a check has to run (a second here, on the cached path)
    # Looked for in the working directory first, as pytest's run will, in the implementation's own process: one that
    # kills the interpreter on import does not take this command with it.
    here = os.getcwd()
    check = partial(check_implementation, impl, here, allow_reference=args.allow_reference, flag="--allow-reference")
    try:
        found = checked_implementation(impl, here, check, None if args.no_cache else args.course.cache,
                                       allow_reference=args.allow_reference)
    except ClaimsError as error:
        return str(error)
    args.given = found.as_reference if found is not None else ()
    return None


def _ledger_gate(catalogue: Catalogue, results: dict) -> int:
    """1 when the statement ledger is incomplete, or a statement's checks passed without reaching part of the scope
    it speaks for and it does not say why: a green report must mean every statement was checked, all of it.

    Checks still run and the reports still say what they found (``pytest claims/`` never fails on
    the ledger); only ``claims verify``, and so the release gate, refuses to call the result done.
    """
    from claims_harness._reporting.report import scope_shortfalls

    problems = [str(problem) for problem in catalogue.ledger_problems()]
    unreached = [line for line, explained in scope_shortfalls(results) if not explained]
    for problem in [*problems, *unreached]:
        print(f"claims verify: {problem}", file=sys.stderr)
    if problems:
        print(f"claims verify: the statement ledger is incomplete ({counted(len(problems), 'problem')}, as "
              "'claims lint' lists them); cover each statement with a claim or give it 'not_checkable:'",
              file=sys.stderr)
    if unreached:
        print(f"claims verify: {len(unreached)} statements passed without their checks reaching all of their scope; "
              "green would say more than the checks saw", file=sys.stderr)
    return 1 if problems or unreached else 0


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
    from claims_harness._reporting.report import PARTIAL_FLAG

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
    if args.partial:
        pytest_args.append(PARTIAL_FLAG)
    # The implementation is looked for where the command was started, by its own process: the directory is never on
    # the judge's import path (a sitecustomize.py or a package named like a dependency there would run in it).
    pytest_args += [IMPLEMENTATION_PATH_FLAG, os.getcwd()]
    return run_showing_progress(pytest_args + args.pytest_args, cwd=course.root)


def _verify_without_pytest(args: argparse.Namespace, catalogue: Catalogue, run_id: str) -> int | None:
    """Reuse every cached observation, run the checks left here, write the reports: the exit status; None when
    pytest has to run (this process cannot tell what pytest would import, or pytest's workers are quicker).

    The checks run through the same evaluation as pytest's items, each in a supervised worker process;
    only what pytest adds is missing: its rewriting of a failing verifier's ``assert`` (every verifier's
    assert gives its own message, so a failure still says what it compared).
    """
    from claims_harness._reporting.report import (
        ReportNotWritten,
        claim_staging,
        lessons_of,
        staging_dir_for,
        write_reports,
    )
    from claims_harness._running.engine import evaluate, every_part, never_reported
    from claims_harness._text.summary import text_report

    if not _imports_as_pytest_would(args):
        return None
    started = time.time()
    # The cached figures are restored into the staging directory, which write_reports moves into place.
    # One checking process: an experiment's seeds may use every core, as in pytest without xdist.
    options = resolve_options(args.impl, args.profile, args.claims_seed, report_dir=str(args.out),
                              cache_dir=str(args.course.cache), allow_reference=args.allow_reference, run_id=run_id,
                              staging_dir=str(staging_dir_for(args.out, run_id)), scheduler=args.scheduler,
                              workers=default_workers(1))
    claim_staging(Path(options.staging_dir))  # marked as this run's, so that no other run takes it for a killed one's
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
        close_hosts()
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
    ran = f"ran {counted(len(to_run), 'check')} here" if to_run else "no check had to run"
    print(f"claims verify: {ran}; {len(failures)} of {len(outcomes)} results failed (pytest not started)")
    if not completeness["complete"]:
        return 2  # as pytest's exit status for an interrupted run
    return 1 if failures else 0


def _imports_as_pytest_would(args: argparse.Namespace) -> bool:
    """Whether this process finds the verifiers where pytest would: in the course root, which pytest puts first on
    its import path (``use_packages_of``), when this process had imported another copy of them already (a program
    that ran another course); a cache key computed from the other copy could reuse observations the code pytest runs
    never made. (The implementation is never imported here: its own process looks for it where this command
    started, as pytest's run's does.)
    """
    root: Path = args.course.root
    name = args.course.verifiers
    local = next((path for path in (root / name / "__init__.py", root / f"{name}.py") if path.is_file()), None)
    spec = importlib.util.find_spec(name)
    found = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    return found is not None and (local is None or local.resolve() == found)


def _registry_and_gate(args: argparse.Namespace, catalogue: Catalogue, results: dict, before: dict | None,
                       gate_findings, snapshot) -> int:
    """Rewrite the registry of claims after a whole run of the reference, and apply ``--check``; an exit status."""
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
        write_atomically(sources_file, with_registry(text, registry_of(catalogue, results)).encode("utf-8"))
        print(f"claims verify: registry of claims rewritten in {sources_file}")
    elif run["impl"] == reference_implementation():
        print("claims verify: registry of claims left as it was (only a whole, complete run of the reference into "
              f"{args.course.reports} rewrites it)")
    status = 0 if run.get("complete") else 1
    _say_text(results.get("text"))
    if before is not None:
        # Each finding, then what it is: stale reports, a drifted text (the author's to review), survivors.
        findings = gate_findings(before, snapshot(args.out),
                                 [f"{survivor_line(survivor)}: a survivor with no reason in the claim file"
                                  for survivor in results["summary"]["sharpness"]["survivors"]])
        for line in findings.lines():
            print(f"claims verify --check: {line}", file=sys.stderr)
        if not findings.passed:
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


def registry_of(catalogue: Catalogue, results: dict | None) -> str:
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


def survivor_line(survivor: dict) -> str:
    """One survivor of the perturbation of expected numbers, located in its claim file."""
    return (f"{survivor['file']}:{survivor['line']}: claim '{survivor['claim']}' ({survivor['kind']}): "
            f"'{survivor['key']}' expected {survivor['written']} still passes as {survivor['perturbed']}")

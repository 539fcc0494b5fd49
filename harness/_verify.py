"""``claims verify``: the selected checks reused from the cache or run (``claims_harness._running.driver``, on
``-n`` lanes), the reports written, the failures and the student's scoreboard printed, then the sources table and the
gates. pytest is not started: ``pytest claims/`` is the way to pytest's own options, and writes the same report.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import uuid
from functools import partial
from pathlib import Path

from claims_harness._claims.course import Course, write_atomically
from claims_harness._claims.formats import counted
from claims_harness._claims.loading import Catalogue, load_catalogue
from claims_harness._claims.results_file import results_if_readable
from claims_harness._claims.sources import render_sources_table, with_sources_table
from claims_harness._running.cache import checked_implementation
from claims_harness._running.executor import default_workers
from claims_harness._running.implementation import reference_implementation
from claims_harness._running.options import resolve_options
from claims_harness._running.remote import check_implementation
from claims_harness._text.summary import text_overrides
from claims_harness.errors import ClaimsError


def verify_command(args: argparse.Namespace) -> int:
    """``claims verify``: every claim checked (reusing the cache), the reports written, the sources file's table and
    the gates."""
    from claims_harness._claims.formats import NOT_JUDGED
    from claims_harness._reporting.gate import committed_snapshot, gate_findings, snapshot  # not needed to lint or list
    from claims_harness._reporting.report import remove_stale_staging, report_directory_problem
    from claims_harness._reporting.results import judged_verdict

    course: Course = args.course
    out = (args.out or course.reports).resolve()
    text_overrides(args.text)  # a malformed --text is refused before anything runs
    options = resolve_options(args.impl, args.profile, args.claims_seed)
    unwritable = report_directory_problem(out, course.root, options.impl) or (
        None if args.out is not None else _kept_apart(out, options.impl, options.profile))
    if unwritable:
        print(f"claims verify: {unwritable}\nclaims verify: no check run, no report written", file=sys.stderr)
        return 2
    refused, given = _implementation_refused(args)
    if refused:
        print(f"claims verify: {refused}\nclaims verify: no check run, no report written", file=sys.stderr)
        return 2
    # The request as the rest of the command reads it, built once: the report directory resolved, and the functions
    # the implementation takes from the reference.
    args = argparse.Namespace(**{**vars(args), "out": out, "given": given})
    remove_stale_staging(args.out)  # the staging directories of earlier runs that were killed
    before, compared_with = committed_snapshot(args.out) if args.check else (None, None)
    if compared_with:
        print(f"claims verify --check: the fresh run is compared with {compared_with}")
    catalogue = load_catalogue(args.claims_dir)
    results, status = _run(args, catalogue)
    if results is None:
        return status
    print(f"claims verify: reports written to {args.out}/")
    status = _sources_table_and_gate(args, catalogue, results, before, gate_findings, snapshot) or status
    incomplete = _ledger_gate(catalogue, results)
    not_judged = results["summary"]["checks"].get(NOT_JUDGED, 0)
    status = status or incomplete or (1 if not_judged and not args.partial else 0)
    # The last line says what the exit status says: a gate that failed above is not followed by a green line alone.
    print(f"claims verify: {judged_verdict(results['summary'], args.partial)} (exit status {status})", flush=True)
    return status


def _run(args: argparse.Namespace, catalogue: Catalogue) -> tuple[dict | None, int]:
    """The selected checks reused or run (``claims_harness._running.driver``), the reports written, the failures
    and the student's scoreboard printed: the results and the exit status so far (results None: no report)."""
    from claims_harness._reporting.report import claim_staging, remove_staging, staging_dir_for, write_reports
    from claims_harness._reporting.results import lessons_of
    from claims_harness._reporting.rows import function_scoreboard
    from claims_harness._reporting.terminal import scoreboard_lines
    from claims_harness._running.driver import drive, lanes_asked, last_seconds, selected
    from claims_harness._running.engine import every_part, never_reported
    from claims_harness._text.summary import text_report
    from claims_harness.errors import ReportNotWritten

    started = time.time()
    every = every_part(catalogue)
    if not every:
        raise ClaimsError(f"{args.claims_dir}: no claim files, so nothing to verify; 'claims new' "
                          "writes a claim")
    parts = selected(every, catalogue, args.selected)
    lanes = lanes_asked(args.numprocesses)
    run_id = uuid.uuid4().hex[:12]
    staging = staging_dir_for(args.out, run_id)
    options = resolve_options(args.impl, args.profile, args.claims_seed, report_dir=str(args.out),
                              cache_dir=None if args.no_cache else str(args.course.cache),
                              allow_reference=args.allow_reference, run_id=run_id, staging_dir=str(staging),
                              scheduler=args.scheduler, workers=default_workers(lanes, args.workers),
                              directory=os.getcwd())
    claim_staging(staging)  # marked as this run's, so that no other run takes it for a killed one's
    run = drive(parts, catalogue, options, lanes, last_seconds(args.out), partial(print, flush=True))
    why = "the run was interrupted before this check reported"
    evidence = [outcome.evidence if (outcome := run.outcomes[part.key]) is not None else
                never_reported(part, catalogue, options, why) for part in parts]
    completeness = {"id": run_id, "complete": not run.interrupted,
                    "incomplete": "interrupted" if run.interrupted else None,
                    "selection": "all" if len(parts) == len(every) else f"{len(parts)} of {len(every)} checks selected"}
    try:
        results = write_reports(args.out, evidence, lessons_of([catalogue]), options, started, catalogue.root,
                                completeness, args.given, text_report(catalogue, text_overrides(args.text)))
    except ReportNotWritten as error:  # the staging directory, which holds the results, is left: the error names it
        print(f"claims verify: {error}", file=sys.stderr)
        return None, 1
    remove_staging(staging)
    failures = [outcome.message for outcome in run.outcomes.values()
                if outcome is not None and outcome.status in ("failed", "error")]
    for failure in failures:
        print(failure, end="\n\n")
    if options.impl != reference_implementation():
        lines = scoreboard_lines(function_scoreboard(evidence, args.given))
        print("\n".join([f"claims verify: functions of {options.impl}", *lines] if lines else []))
    skipped = sum(outcome is not None and outcome.status == "skipped" for outcome in run.outcomes.values())
    print(f"claims verify: ran {counted(run.ran, 'check')}; "
          f"{len(failures)} of {len(parts)} results failed" + (f", {skipped} skipped" if skipped else ""))
    return results, 2 if run.interrupted else 1 if failures else 0


def _kept_apart(directory: Path, impl: str, profile: str) -> str | None:
    """Why a run with no --claims-report may not replace the report in ``directory`` (the course's reports/): it is
    of another profile or implementation (the committed release report, say, which a smoke run or a student's
    implementation would overwrite); None when the run is of the same kind, or there is no report there."""
    try:
        run = (results_if_readable(directory) or {})["run"]
        kept = (str(run["impl"]), str(run["profile"]))
    except (KeyError, TypeError):
        return None
    if kept == (impl, profile):
        return None
    return (f"{directory} holds the report of '{kept[0]}' in the {kept[1]} profile, and this run ('{impl}', {profile} "
            f"profile) would replace it: give --claims-report DIR for a report of its own (e.g. my-report), run "
            f"--claims-impl {kept[0]} --claims-profile {kept[1]} to regenerate it, or name it with --claims-report "
            "to replace it on purpose")


def _implementation_refused(args: argparse.Namespace) -> tuple[str | None, tuple[str, ...]]:
    """Why the implementation under test cannot be verified (None when it can), and the functions it takes from the
    reference."""
    impl = resolve_options(args.impl, args.profile, args.claims_seed).impl
    if impl == reference_implementation() and importlib.util.find_spec(impl) is not None:
        return None, ()  # the reference: its host imports it if a check has to run
    # Looked for in the working directory first, in the implementation's own process: one that kills the interpreter
    # on import does not take this command with it.
    here = os.getcwd()
    check = partial(check_implementation, impl, here, allow_reference=args.allow_reference, flag="--allow-reference")
    try:
        found = checked_implementation(impl, here, check, None if args.no_cache else args.course.cache,
                                       allow_reference=args.allow_reference)
    except ClaimsError as error:
        return str(error), ()
    return None, found.as_reference if found is not None else ()


def _ledger_gate(catalogue: Catalogue, results: dict) -> int:
    """1 when the statement ledger is incomplete, or a statement's checks passed without reaching part of the scope
    it speaks for and it does not say why: a green report must mean every statement was checked, all of it.

    Checks still run and the reports still say what they found (``pytest claims/`` never fails on
    the ledger); only ``claims verify``, and so the release gate, refuses to call the result done.
    """
    from claims_harness._reporting.results import scope_shortfalls

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


def _sources_table_and_gate(args: argparse.Namespace, catalogue: Catalogue, results: dict, before: dict | None,
                            gate_findings, snapshot) -> int:
    """Rewrite the sources file's table of claims after a whole run of the reference, and apply ``--check``; an exit
    status."""
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
        write_atomically(sources_file, with_sources_table(text, sources_table_of(catalogue, results)).encode("utf-8"))
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


def sources_table_of(catalogue: Catalogue, results: dict | None) -> str:
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
    return render_sources_table(rows)


def survivor_line(survivor: dict) -> str:
    """One survivor of the perturbation of expected numbers, located in its claim file."""
    return (f"{survivor['file']}:{survivor['line']}: claim '{survivor['claim']}' ({survivor['kind']}): "
            f"'{survivor['key']}' expected {survivor['written']} still passes as {survivor['perturbed']}")

"""The ``claims`` command: verify every claim and write ``reports/``, lint, list, schema."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from harness._authoring import NewClaim, lint_warnings, validate, write
from harness._context import PROFILES
from harness._errors import ClaimsError
from harness._implementation import PYTEST_FLAG, check_implementation
from harness._loading import Catalogue, load_catalogue
from harness._progress import run_showing_progress
from harness._registry import VERIFIER_PACKAGE, registered
from harness._report import RESULTS_FILE, compare_snapshots, lessons_of, snapshot, write_reports
from harness._reuse import reuse_every_check
from harness._runner import DEFAULT_IMPL, check_names, resolve_options
from harness._schema import KINDS, json_schema_text
from harness._sources import SOURCES_FILE, registry_section, render_registry, with_registry

SCHEMA_FILE = "schema.json"
CACHE_DIR = Path(".claims-cache")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="claims", description=__doc__)
    parser.add_argument("--claims-dir", type=Path, default=Path("claims"), help="where the claim files are")
    commands = parser.add_subparsers(dest="command", required=True)

    verify = commands.add_parser("verify", help="run every claim's checks and write the reports")
    verify.add_argument("--out", type=Path, default=Path("reports"), help="report directory (default: reports)")
    verify.add_argument("--impl", help="implementation module under test (default: $CLAIMS_IMPL or 'impl')")
    verify.add_argument("--allow-reference", action="store_true",
                        help="let the implementation take the functions it does not define from the reference "
                             "as they are (pytest's --claims-allow-reference)")
    verify.add_argument("--profile", choices=PROFILES, default=os.environ.get("CLAIMS_PROFILE", "full"),
                        help="full (the release artifact) or smoke (default: $CLAIMS_PROFILE or full)")
    verify.add_argument("--claims-seed", type=int, help="global seed (default: $CLAIMS_SEED or 0)")
    verify.add_argument("-n", "--numprocesses", help="run checks in parallel with pytest-xdist, e.g. 'auto'")
    verify.add_argument("--scheduler", default=os.environ.get("CLAIMS_SCHEDULER"), metavar="ADDRESS",
                        help="run experiments' seeds on this Dask scheduler, e.g. tcp://host:8786 "
                             "(default: $CLAIMS_SCHEDULER, else a local process pool)")
    verify.add_argument("--no-cache", action="store_true", help="re-run every check, reusing nothing from the cache")
    verify.add_argument("--check", action="store_true",
                        help="also fail if the reports differ, apart from timings, from the ones already in --out")
    verify.add_argument("pytest_args", nargs="*", help="extra pytest arguments after '--', e.g. -- -x")

    commands.add_parser("lint", help="validate every claim file without running checks")
    commands.add_parser("list", help="print every claim: id, step, kinds of its checks")
    schema = commands.add_parser("schema", help=f"write claims/{SCHEMA_FILE} from the schema")
    schema.add_argument("--check", action="store_true", help="only report whether the file is current")
    commands.add_parser("verifiers", help="print every registered verifier and what it uses")
    audit = commands.add_parser("audit", help="measure Monte Carlo checks' false-failure rate and power")
    audit.add_argument("--runs", type=int, default=20, help="runs per check and series (default 20)")
    audit.add_argument("--alpha", type=float, default=0.05, help="inflated false-failure rate (default 0.05)")
    audit.add_argument("--impl", default=DEFAULT_IMPL, help="implementation module under test")
    audit.add_argument("-k", dest="selected", default="", help="only claims whose id contains this text")
    audit.add_argument("--write", type=Path, help="also write the table to this Markdown file")
    zoo = commands.add_parser("zoo", help="run the claims against the bug zoo and print which claims caught what")
    zoo.add_argument("variants", nargs="*", help="variants to run (default: all)")
    zoo.add_argument("--workers", type=int, help="variants run at once (default: the number of CPUs)")
    new = commands.add_parser("new", help="append a claim skeleton and a verifier stub (asks for what is missing)")
    new.add_argument("--step", help="where the text says it, e.g. 4.2.3 or week16/step-2")
    new.add_argument("--kind", help="kind of the first check, e.g. exact")
    new.add_argument("--id", dest="claim_id", help="kebab-case id, unique across claim files")
    new.add_argument("--module", help="verifier module in verifiers/ (default: the lesson's, e.g. lesson_4_2)")

    args = parser.parse_args(argv)
    return {"verify": _verify, "lint": _lint, "list": _list, "schema": _schema, "verifiers": _verifiers,
            "new": _new, "audit": _audit, "zoo": _zoo}[args.command](args)


def _verify(args: argparse.Namespace) -> int:
    refused = _implementation_refused(args)
    if refused:
        print(f"claims verify: {refused}\nclaims verify: no check run, no report written", file=sys.stderr)
        return 2
    before = snapshot(args.out) if args.check else None
    catalogue = load_catalogue(args.claims_dir) if args.claims_dir.is_dir() else None
    # Extra pytest arguments (-k, -m, -x, ...) decide what runs and how: only pytest can honour them.
    reusable = catalogue is not None and not (args.no_cache or args.pytest_args)
    status = _verify_from_cache(args, catalogue) if reusable else None
    if status is None:  # some check has to run
        status = _verify_with_pytest(args)
    print(f"claims verify: reports written to {args.out}/ (exit status {status})")
    status = _report_and_registry(args, catalogue, before, status)
    incomplete = _ledger_gate(catalogue)
    return status or incomplete


def _implementation_refused(args: argparse.Namespace) -> str | None:
    """Why the implementation under test cannot be verified (as pytest would import it), or None."""
    impl = resolve_options(args.impl, args.profile, args.claims_seed).impl
    if impl == DEFAULT_IMPL and importlib.util.find_spec(impl) is not None:
        return None  # the reference: pytest imports it if a check has to run (a second here, on the cached path)
    # ``python -m pytest`` finds modules in the working directory: so must this check.
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        check_implementation(impl, allow_reference=args.allow_reference, flag="--allow-reference")
    except ClaimsError as error:
        return str(error)
    finally:
        if added:
            sys.path.remove(here)
    return None


def _ledger_gate(catalogue: Catalogue | None) -> int:
    """1 when the statement ledger is incomplete: a green report must mean every statement was checked.

    Checks still run and the reports still say what they found (``pytest claims/`` never fails on
    the ledger); only ``claims verify``, and so the release gate, refuses to call the result done.
    """
    problems = catalogue.ledger_problems() if catalogue is not None else []
    for problem in problems:
        print(f"claims verify: {problem}", file=sys.stderr)
    if problems:
        print(f"claims verify: the statement ledger is incomplete ({len(problems)} problems, as 'claims lint' "
              "lists them); cover each statement with a claim or give it 'not_checkable:'", file=sys.stderr)
    return 1 if problems else 0


def _verify_with_pytest(args: argparse.Namespace) -> int:
    # A separate interpreter, so pytest imports (and rewrites) everything itself, as in `pytest claims/`.
    pytest_args = [sys.executable, "-m", "pytest", str(args.claims_dir), "--claims-report", str(args.out), "-q", "-rfE"]
    if not args.no_cache:
        pytest_args += ["--claims-cache", str(CACHE_DIR)]
    for option, value in (("--impl", args.impl), ("--profile", args.profile), ("--claims-seed", args.claims_seed),
                          ("-n", args.numprocesses), ("--claims-scheduler", args.scheduler)):
        if value is not None:
            pytest_args += [option, str(value)]
    if args.allow_reference:
        pytest_args.append(PYTEST_FLAG)
    return run_showing_progress(pytest_args + args.pytest_args)


def _verify_from_cache(args: argparse.Namespace, catalogue: Catalogue) -> int | None:
    """Write the reports without starting pytest when no check has to run; the exit status, or None."""
    started = time.time()
    options = resolve_options(args.impl, args.profile, args.claims_seed, report_dir=str(args.out),
                              cache_dir=str(CACHE_DIR), allow_reference=args.allow_reference)
    reused = reuse_every_check(catalogue, options)
    if reused is None:
        return None
    write_reports(args.out, reused.evidence, lessons_of([catalogue]), options, started, catalogue.root)
    for failure in reused.failures:
        print(failure, end="\n\n")
    print(f"claims verify: no check had to run; {len(reused.failures)} of {len(reused.evidence)} results failed "
          "(pytest not started)")
    return 1 if reused.failures else 0


def _report_and_registry(args: argparse.Namespace, catalogue: Catalogue | None, before: dict | None,
                         status: int) -> int:
    results_file = args.out / RESULTS_FILE
    if not results_file.is_file():
        return status or 1
    results = json.loads(results_file.read_text(encoding="utf-8"))
    checks = [check for row in results["claims"] for check in row["checks"]]
    print(f"claims verify: reused {sum(check['reused'] for check in checks)} of {len(checks)} check results "
          f"from {CACHE_DIR}/" + (" (cache off)" if args.no_cache else ""))
    if results["run"]["impl"] == DEFAULT_IMPL:
        catalogue = catalogue or load_catalogue(args.claims_dir)
        sources_file = catalogue.root / SOURCES_FILE
        text = sources_file.read_text(encoding="utf-8")
        sources_file.write_text(with_registry(text, _registry(catalogue, results)), encoding="utf-8")
        print(f"claims verify: registry of claims rewritten in {sources_file}")
    if before is not None:
        differences = compare_snapshots(before, snapshot(args.out))
        for difference in differences:
            print(f"claims verify --check: {difference}", file=sys.stderr)
        if differences:
            print("claims verify --check: the committed reports are stale; commit the regenerated ones",
                  file=sys.stderr)
            return status or 1
    return status


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
    if not args.claims_dir.is_dir():
        print(f"{args.claims_dir}: no such directory; run from the project root or pass --claims-dir", file=sys.stderr)
        return 2
    catalogue = load_catalogue(args.claims_dir)
    problems = [str(problem) for problem in [*catalogue.problems(), *catalogue.ledger_problems()]]
    problems += [f"{entry.file}:{entry.line}: claim '{entry.id}', check {index + 1}, field 'rejects': missing; name "
                 "one concrete wrong implementation this check turns red (and make sure it does)"
                 for entry in catalogue.entries if entry.claim
                 for index, check in enumerate(entry.claim.checks) if check.rejects is None]
    cited = {key for entry in catalogue.entries if entry.claim for key in entry.claim.sources}
    problems += [f"{SOURCES_FILE}:{source.line}: source '{key}' is cited by no claim; cite it where it backs a "
                 "claim, or remove it" for key, source in catalogue.sources.items() if key not in cited]
    sources_file = catalogue.root / SOURCES_FILE
    results_file = catalogue.root / "reports" / RESULTS_FILE
    results = json.loads(results_file.read_text(encoding="utf-8")) if results_file.is_file() else None
    registry = _registry(catalogue, results)
    if sources_file.is_file() and registry_section(sources_file.read_text(encoding="utf-8")) != registry:
        problems.append(f"{SOURCES_FILE}: the generated registry of claims does not match the claim files and "
                        f"reports/{RESULTS_FILE}; regenerate both with 'claims verify'")
    schema_path = args.claims_dir / SCHEMA_FILE
    if not schema_path.is_file() or schema_path.read_text(encoding="utf-8") != json_schema_text():
        problems.append(f"{schema_path}: stale or missing; regenerate it with 'claims schema'")
    for problem in problems:
        print(problem)
    warnings = lint_warnings(catalogue)
    for warning in warnings:
        print(f"warning: {warning}")
    claims = sum(1 for entry in catalogue.entries if not entry.broken)
    print(f"claims lint: {claims} usable claims in {len(catalogue.files)} files, {len(problems)} problems, "
          f"{len(warnings)} warnings", file=sys.stderr)
    return 2 if problems else 0


def _list(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.claims_dir)
    for entry in catalogue.entries:
        kinds = "cannot be loaded" if entry.broken else ", ".join(check_names(entry))
        print(f"{entry.id:40} {entry.where or '?':14} {kinds}")
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
    for name, verifier in sorted(registered().items()):
        print(f"{name:45} {verifier.location:32} uses: {', '.join(verifier.uses) or '-'}")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from harness._audit import audit, render

    rows = audit(load_catalogue(args.claims_dir), args.runs, args.alpha, args.impl, args.selected)
    table = render(rows, args.runs, args.alpha)
    print(table)
    if args.write:
        args.write.write_text(table, encoding="utf-8")
    return 0 if all(row.ok for row in rows) else 1


def _zoo(args: argparse.Namespace) -> int:
    from zoo import VARIANTS
    from zoo._run import run_zoo

    caught = run_zoo(args.variants or None, workers=args.workers)
    escaped = []
    print(f"{'variant':30} {'step':7} caught by")
    for name, failed in caught.items():
        variant = VARIANTS[name]
        missing = sorted(set(variant.caught_by) - set(failed))
        escaped += [name] if missing else []
        print(f"{name:30} {variant.step:7} {', '.join(failed) or 'NOTHING'}"
              + (f"   [expected too: {', '.join(missing)}]" if missing else ""))
    print(f"claims zoo: {len(caught) - len(escaped)} of {len(caught)} variants caught by every claim they must fail")
    return 1 if escaped else 0


def _new(args: argparse.Namespace) -> int:
    catalogue = load_catalogue(args.claims_dir)

    def ask(value: str | None, question: str) -> str:
        if value:
            return value
        if not sys.stdin.isatty():
            raise SystemExit(f"claims new: {question} is needed; pass it as a flag")
        return input(f"{question}: ").strip()

    step = ask(args.step, "step (e.g. 4.2.3)")
    kind = ask(args.kind, f"kind ({', '.join(KINDS)})")
    claim_id = ask(args.claim_id, "id (kebab-case)")
    module = args.module or "lesson_" + step.replace(".", "_").replace("/", "_").rsplit("_", 1)[0]
    request = NewClaim(step, kind, claim_id, module)
    errors = validate(request, catalogue)
    for error in errors:
        print(f"claims new: {error}", file=sys.stderr)
    if errors:
        return 2
    for line in write(request, catalogue, catalogue.root / VERIFIER_PACKAGE):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ``claims`` command: verify every claim and write the reports, lint, list, schema.

Every command works on the course whose tree holds the working directory (``[tool.claims]`` in
the nearest pyproject.toml, ``claims_harness._claims.course``), or the one holding ``--claims-dir``; outside any
course it refuses with one line. Paths it writes (reports, cache, the registry) are the course's,
never the working directory's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from claims_harness._authoring import text as text_commands
from claims_harness._claims.course import Course, find_course, write_atomically
from claims_harness._claims.formats import DEFAULT_PROFILE, PROFILES, counted
from claims_harness._claims.loading import load_catalogue
from claims_harness._claims.registry import packages_of, registered
from claims_harness._claims.results_file import RESULTS_FILE, read_results
from claims_harness._claims.schema import KINDS, json_schema_text
from claims_harness._claims.sources import sources_table_section
from claims_harness._running.implementation import reference_implementation
from claims_harness._running.options import resolve_options
from claims_harness._running.runner import check_names
from claims_harness._verify import sources_table_of, survivor_line, verify_command
from claims_harness.errors import ClaimsError, ResultsUnreadable, visible

SCHEMA_FILE = "schema.json"


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
    verify.add_argument("-n", "--numprocesses", help="run checks on this many processes at once, or 'auto' (one per "
                                                     "core)")
    verify.add_argument("--claims-workers", dest="workers", type=int, default=None, metavar="N",
                        help="processes of the local pool for experiments' seeds; 1 runs them in the check's own "
                             "process (default: $CLAIMS_WORKERS, else the cores divided by the -n lanes)")
    verify.add_argument("-k", dest="selected", default="", metavar="EXPRESSION",
                        help="only the checks whose names match, as pytest's -k reads it: words (parts of a claim's "
                             "id, a kind, a verifier, a function) with and, or, not, e.g. -k \"gae_advantages or "
                             "(baselines and not experiment)\"")
    verify.add_argument("--claims-scheduler", "--scheduler", dest="scheduler",
                        default=os.environ.get("CLAIMS_SCHEDULER"), metavar="ADDRESS",
                        help="run experiments' seeds on this Dask scheduler, e.g. tcp://host:8786 "
                             "(default: $CLAIMS_SCHEDULER, else a local process pool)")
    verify.add_argument("--claims-partial", dest="partial", action="store_true",
                        help="a partial verdict, for a student's exercises: checks not judged (they wait for functions "
                             "not written yet, or the implementation declines them) do not fail the run, and its last "
                             "line says how much was judged")
    verify.add_argument("--no-cache", action="store_true", help="re-run every check, reusing nothing from the cache")
    verify.add_argument("--check", action="store_true",
                        help="also fail if the reports differ, in what the claims state, from the ones already in "
                             "--out, or if the run is incomplete")
    verify.add_argument("--claims-text", "--text", dest="text", action="append", default=[], metavar="NAME=PATH",
                        help="read the course text's document NAME from PATH (a revised copy) for the report and the "
                             "gate (repeatable)")

    commands.add_parser("lint", help="validate every claim file without running checks")
    commands.add_parser("list", help="print every claim: id, step, kinds of its checks")
    scope = commands.add_parser("scope", help="each statement's scope against what its checks reached, from a run's "
                                              "results (no check runs)")
    scope.add_argument("--results", type=Path, default=None,
                       help="the results file of the run to read (default: the course's reports/claims.json)")
    scope.add_argument("--all", action="store_true", help="every statement with a scope, not only those whose checks "
                                                          "missed part of it")
    scope.add_argument("ids", nargs="*", help="only these statements: their ids, or the steps they are in")
    schema = commands.add_parser("schema", help=f"write claims/{SCHEMA_FILE} from the schema")
    schema.add_argument("--check", action="store_true", help="only report whether the file is current")
    commands.add_parser("verifiers", help="print every registered verifier and what it uses")
    contract = commands.add_parser("contract", help="write the implementation contract page ([tool.claims] contract) "
                                                    "from the reference's docstrings and the verifiers' uses=")
    contract.add_argument("--check", action="store_true", help="only report whether the page is current")
    audit = commands.add_parser("audit", help="measure Monte Carlo checks' false-failure rate and power")
    audit.add_argument("--runs", type=int, default=20, help="runs per check and series (default 20)")
    audit.add_argument("--alpha", type=float, default=0.05, help="inflated false-failure rate (default 0.05)")
    audit.add_argument("--claims-impl", "--impl", dest="impl", default=None,
                       help="implementation module under test (default: the reference)")
    audit.add_argument("-k", dest="selected", default="", metavar="EXPRESSION",
                       help="only the checks this selects, as claims verify -k does")
    audit.add_argument("-n", "--numprocesses", help="run checks on this many processes at once, or 'auto'")
    audit.add_argument("--write", type=Path, help="also write the table to this Markdown file")
    new = commands.add_parser("new", help="append a claim skeleton and a verifier stub (asks for what is missing)")
    new.add_argument("--step", help="where the text says it: one of the course's steps")
    new.add_argument("--kind", help="kind of the first check, e.g. exact")
    new.add_argument("--id", dest="claim_id", help="kebab-case id, unique across claim files")
    new.add_argument("--module", help="verifier module in the verifier package: the subject the check is about (a new "
                                      "name makes a new module)")
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
    exercises.add_argument("--torch", nargs="+", default=(), metavar="MODULE",
                           help="write these modules' stubs in PyTorch (e.g. --torch losses): the harness then hands "
                                "their functions torch.float64 tensors and differentiates them by autograd")

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

    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["verify"] and "--" in given:
        print(f"claims verify: it starts no pytest, so it takes no pytest arguments after '--' (given: "
              f"{' '.join(given[given.index('--') + 1:])}): select checks with -k EXPRESSION, or run "
              "'pytest claims/' with pytest's options (it writes the same report)", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.command == "verify":
        _warn_of_old_spellings(given)
    try:
        args.course = find_course(args.claims_dir)
        args.claims_dir = (args.claims_dir or args.course.claims).resolve()
        if not args.claims_dir.is_dir():
            raise ClaimsError(f"{args.claims_dir}: no such directory of claim files; pass --claims-dir with the "
                              f"course's claims directory ({args.course.claims})")
        command = {"verify": verify_command, "lint": _lint, "list": _list, "scope": _scope, "schema": _schema,
                   "verifiers": _verifiers, "contract": _contract, "new": _new, "audit": _audit,
                   "exercises": _exercises, "sharpness": _sharpness, "mutants": _mutants, "text": text_commands.run}
        with packages_of(args.course):
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
    for option in dict.fromkeys(token.partition("=")[0] for token in argv):
        if option in _OLD_SPELLINGS:
            print(f"claims verify: warning: {option} is the old spelling of {_OLD_SPELLINGS[option]} (the pytest "
                  f"plugin's, and the one to use); it still works", file=sys.stderr)


def _lint(args: argparse.Namespace) -> int:
    from claims_harness._authoring.new import lint_warnings
    from claims_harness._reporting.results import scope_shortfalls
    from claims_harness._text.binding import binding_problems

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
    results = None
    if (course.reports / RESULTS_FILE).exists():
        try:
            results = read_results(course.reports)
        except ResultsUnreadable as error:
            problems.append(str(error))
    problems += binding_problems(catalogue)
    shortfalls = scope_shortfalls(results or {})
    problems += [f"{line} (from {course.reports.name}/{RESULTS_FILE})" for line, explained in shortfalls
                 if not explained]
    registry = sources_table_of(catalogue, results)
    if sources_file.is_file() and sources_table_section(sources_file.read_text(encoding="utf-8")) != registry:
        problems.append(f"{sources_file.name}: the generated registry of claims does not match the claim files and "
                        f"{course.reports.name}/{RESULTS_FILE}; regenerate both with "
                        "'claims verify --claims-profile full'")
    schema_path = args.claims_dir / SCHEMA_FILE
    if not schema_path.is_file() or schema_path.read_text(encoding="utf-8") != json_schema_text():
        problems.append(f"{schema_path}: stale or missing; regenerate it with 'claims schema'")
    for problem in problems:
        print(visible(problem))
    for line, explained in shortfalls:
        if explained:
            print(f"note: {visible(line)}")
    warnings = lint_warnings(catalogue, reference_implementation())
    for warning in warnings:
        print(f"warning: {visible(warning)}")
    claims = sum(1 for entry in catalogue.entries if not entry.broken)
    print(f"claims lint: {counted(claims, 'usable claim')} in {counted(len(catalogue.files), 'file')}, "
          f"{counted(len(problems), 'problem')}, {counted(len(warnings), 'warning')}", file=sys.stderr)
    return 2 if problems else 0


def _scope(args: argparse.Namespace) -> int:
    """``claims scope``: what each statement claims along the course's dimensions against what its checks reached.

    Exits 1 when a statement's passed checks missed part of its scope and it does not say why (what the release gate
    refuses), else 0.
    """
    from claims_harness._claims.scope import describe_scope

    path = args.results or args.course.reports / RESULTS_FILE
    try:
        results = read_results(path)
    except ResultsUnreadable as error:
        print(f"claims scope: {error}, or pass --results", file=sys.stderr)
        return 2
    vocabulary = results.get("scope_dimensions", [])
    shown = {dimension["name"]: {value["name"]: value["shown"] for value in dimension["values"]}
             for dimension in vocabulary}
    unexplained = 0
    for lesson in results.get("coverage", []):
        for step in lesson["steps"]:
            for statement in step["statements"]:
                if args.ids and statement["id"] not in args.ids and statement["where"] not in args.ids:
                    continue
                claimed, gaps = describe_scope(statement, vocabulary)
                if statement["status"] in ("not checkable", "missing") or not (gaps or args.all):
                    continue
                unexplained += bool(gaps) and any(name not in (statement.get("unreached_reasons") or {})
                                                  for name in statement.get("unreached") or {})
                reached = "; ".join(", ".join(shown.get(name, {}).get(value, f"{name}: {value}") for value in values)
                                    for name, values in (statement.get("reached") or {}).items())
                print(visible(f"{statement['id']} ({statement['where']}, {statement['status']})\n"
                              f"  claims:  {claimed or 'no scope declared'}\n  reached: {reached or 'nothing'}"
                              + (f"\n  NOT REACHED: {gaps}" if gaps else ""), keep="\n"))
    print(f"claims scope: {unexplained} statements whose checks missed part of their scope without a reason "
          f"(from {path})", file=sys.stderr)
    return 1 if unexplained else 0


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


def _contract(args: argparse.Namespace) -> int:
    from claims_harness._authoring.contract import write_contract

    page, current = write_contract(load_catalogue(args.claims_dir), check=args.check)
    if current:
        print(f"claims contract: {page} is current")
        return 0
    if args.check:
        print(f"claims contract: {page} is not what the reference's docstrings and the verifiers' uses= say; "
              "regenerate it with 'claims contract'", file=sys.stderr)
        return 1
    print(f"claims contract: wrote {page}")
    return 0


def _audit(args: argparse.Namespace) -> int:
    from claims_harness._power.audit import audit, render
    from claims_harness._running.driver import lanes_asked

    rows = audit(load_catalogue(args.claims_dir), args.runs, args.alpha, args.impl or reference_implementation(),
                 args.selected, lanes_asked(args.numprocesses))
    table = render(rows, args.runs, args.alpha)
    print(table)
    if args.write:
        args.write.write_text(table, encoding="utf-8")
    return 0 if all(row.ok for row in rows) else 1


def _new(args: argparse.Namespace) -> int:
    from claims_harness._authoring.new import NewClaim, validate, write

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
    verifiers_dir = catalogue.root / catalogue.course.verifiers.replace(".", "/")
    subjects = sorted(path.stem for path in verifiers_dir.glob("*.py") if not path.stem.startswith("_"))
    module = ask(args.module, "verifier module, the subject the check is about (existing: "
                              f"{', '.join(subjects) or 'none'}; or a new name)")
    request = NewClaim(step, kind, claim_id, module)
    errors = validate(request, catalogue, verifiers_dir)
    for error in errors:
        print(f"claims new: {error}", file=sys.stderr)
    if errors:
        return 2
    for line in write(request, catalogue, verifiers_dir):
        print(line)
    return 0


def _exercises(args: argparse.Namespace) -> int:
    from claims_harness._authoring.exercises import write_exercises

    print(write_exercises(args.directory, load_catalogue(args.claims_dir), force=args.force,
                          torch=tuple(args.torch)).summary())
    return 0




def _sharpness(args: argparse.Namespace) -> int:
    """Perturb every expected number of every cached check; print the score and the survivors (_claims.expect)."""
    from claims_harness._reporting.results import build_results, lessons_of
    from claims_harness._running.driver import reused
    from claims_harness._running.engine import every_part

    catalogue = load_catalogue(args.claims_dir)
    options = resolve_options(None, args.profile, args.claims_seed, cache_dir=str(args.course.cache))
    cached = reused(every_part(catalogue), catalogue, options)
    outcomes = [outcome for outcome in cached.values() if outcome is not None]
    uncached = len(cached) - len(outcomes)
    checks = sum(1 for part in every_part(catalogue) if part.index is not None)
    # A check of another profile is "found" without running: only an observation of this profile is one.
    if not any(outcome.status != "skipped" for outcome in outcomes if outcome.evidence.get("check")):
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
    """Mutation testing of the implementation by the claims (claims_harness._power.mutants); exit 1 below the target."""
    try:
        import mutmut  # noqa: F401 - only to say how to install it
    except ImportError:
        raise ClaimsError("mutmut is not installed; install the project with its mutants extra: "
                          "pip install -e '.[mutants]' (or run tox -e mutants)") from None
    from claims_harness._power import mutants as mutation
    from claims_harness._power import mutation_results as kept

    course = args.course
    modules = args.modules or list(course.mutate) or mutation.modules_of(course.root / course.implementation)
    out = (args.out or course.reports).resolve()
    reviewed_file = course.mutants_reviewed or course.root / "mutants-reviewed.yaml"
    kept.load_reviewed(reviewed_file)  # a malformed reviewed file stops the run before it starts

    def progress(result: object, done: int, total: int) -> None:
        if isinstance(result, mutation.Baseline):
            print(f"claims mutants: baseline: {len(result.seconds)} checks in {sum(result.seconds.values()):.0f} "
                  f"check-seconds; {len(result.not_green)} not green (left out)", flush=True)
        elif result is None:
            print(f"claims mutants: {total} mutants of {', '.join(modules)}; running each check once to learn what "
                  "it reaches", flush=True)
        elif isinstance(result, mutation.MutantResult) and result.status == kept.SURVIVED:
            print(f"  survived: {course.implementation}/{result.mutant.module}.py:{result.mutant.line} "
                  f"{result.mutant.function}: {result.mutant.change.splitlines()[-1]}", flush=True)
        elif done % 100 == 0:
            print(f"claims mutants: {done} of {total}", flush=True)

    if args.review:
        results = kept.reviewed_again(kept.last_run(out), kept.load_reviewed(reviewed_file))
    else:
        os.chdir(course.root)  # mutmut reads its settings ([tool.mutmut]) from the working directory
        results = mutation.measure(course, load_catalogue(args.claims_dir), modules, max(1, args.workers),
                                   reviewed_file, progress, None if args.no_cache else course.cache / "mutants")
    kept.write_results(results, out)
    write_atomically(out / "mutants.md", kept.render_markdown(results, course, reviewed_file).encode("utf-8"))
    overall = results["overall"]
    holes = [m for m in results["mutants"] if m["status"] in (kept.SURVIVED, kept.NOT_REACHED)]
    for hole in holes:
        print(f"{course.implementation}/{hole['module']}.py:{hole['line']}: {hole['function']} ({hole['status']}, "
              f"key {hole['key']}):\n" + "\n".join(f"    {line}" for line in hole["change"].splitlines()))
    score = overall["score"]
    if not args.review:
        print(f"claims mutants: {results['reused']} of {overall['mutants']} mutants' results reused from earlier "
              f"runs ({course.cache / 'mutants'})")
    print(f"claims mutants: score {kept.percent(score)} ({overall['killed'] + overall['timeout']} caught of "
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

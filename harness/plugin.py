"""The pytest plugin: every part of a run (``harness._running.engine``) is a test item.

Collection turns the claim files of the course's claims directory into items
``claims/<file>.yaml::<claim-id>::<kind>``; an item runs its check in ``runtest`` through the one
driver (the verifier itself in a supervised worker process); reporting attaches the evidence to
the test report (``user_properties``), which is how results reach the controller under
pytest-xdist. The controller writes ``reports/`` from this run's evidence alone: a selected item
whose evidence never arrived (a crashed xdist worker, an interrupted run) is an error row, and an
interrupted or stopped run says so in every format.

Options are namespaced ``--claims-*`` so that they cannot collide with other plugins'.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import textwrap
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from harness._claims.course import find_root, load_course
from harness._claims.errors import ClaimsError, UnimportableImplementation
from harness._claims.formats import scoreboard_line
from harness._claims.loading import Catalogue, load_catalogue
from harness._claims.schema import KIND_DESCRIPTIONS
from harness._reporting.report import (
    ReportNotWritten,
    function_scoreboard,
    lessons_of,
    report_directory_problem,
    staging_dir_for,
    write_reports,
)
from harness._running.cache import checked_implementation
from harness._running.context import PROFILES
from harness._running.engine import Outcome, Part, evaluate, every_part, never_reported, parts_of_file
from harness._running.executor import default_workers, shutdown_executors
from harness._running.implementation import (
    FALLBACK_ATTRIBUTE,
    PYTEST_FLAG,
    Provenance,
    check_implementation,
    find_in_directory,
    reference_implementation,
)
from harness._running.isolation import run_isolated
from harness._running.processes import CheckCrashed, interrupt_on_termination
from harness._running.processes import supported as isolation_supported
from harness._running.progress import CHECKS_RECORD, progress_dir, write_record
from harness._running.property import rewrite_asserts_in
from harness._running.runner import (
    DEFAULT_PROFILE,
    IMPORT_TIME_LIMIT,
    SHRINK_FLAG,
    RunOptions,
    close_zygotes,
    resolve_options,
)
from harness._text.summary import text_overrides, text_report

PAYLOAD = "claims_result"
_CATALOGUES = pytest.StashKey[dict[Path, Catalogue]]()
_PROVENANCE = pytest.StashKey[Provenance | None]()
_UNIMPORTABLE = pytest.StashKey[str]()
_OPTIONS = pytest.StashKey[RunOptions]()
_UNDO_TERMINATION = pytest.StashKey[Callable[[], None]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claims", "claim verification (harness)")
    group.addoption("--claims-impl", default=None, metavar="MODULE",
                    help="the implementation under test (default: $CLAIMS_IMPL or the course's reference "
                         "implementation)")
    group.addoption(PYTEST_FLAG, action="store_true", default=False,
                    help="let the implementation take the functions it does not define from the reference (or another "
                         f"package) as they are; a module can say so itself with {FALLBACK_ATTRIBUTE} = True")
    group.addoption("--claims-profile", default=None, choices=PROFILES,
                    help="smoke: fast checks for every run; full: the release profile (default: $CLAIMS_PROFILE "
                         f"or {DEFAULT_PROFILE})")
    group.addoption("--claims-seed", type=int, default=None, metavar="N",
                    help="global seed every check's generator is derived from (default: $CLAIMS_SEED or 0)")
    group.addoption("--claims-report", default=None, metavar="DIR",
                    help="write claims.json, claims_report.md and claims_report.html to DIR after the run")
    group.addoption("--claims-cache", default=None, metavar="DIR",
                    help="reuse observations of checks whose inputs and code did not change, kept in DIR")
    group.addoption("--claims-scheduler", default=None, metavar="ADDRESS",
                    help="run experiments' seeds on a Dask scheduler, e.g. tcp://host:8786 (default: "
                         "$CLAIMS_SCHEDULER, else a local process pool)")
    group.addoption("--claims-workers", type=int, default=None, metavar="N",
                    help="processes of the local pool for experiments' seeds; 1 runs them in the checking process "
                         "(default: $CLAIMS_WORKERS, else the cores divided by the xdist workers)")
    group.addoption(SHRINK_FLAG, action="store_true", default=False,
                    help="shrink a failing property check's input to the smallest one in the smoke profile too (the "
                         "full profile always does; it takes seconds per failing check)")
    group.addoption("--claims-text", action="append", default=[], metavar="NAME=PATH",
                    help="read the course text's document NAME from PATH for the report (a revised copy; repeatable)")
    group.addoption("--claims-run-id", default=None, metavar="ID", help=argparse.SUPPRESS)


def run_options(config: pytest.Config) -> RunOptions:
    """The run's options: fixed when pytest configures the plugin, before any implementation is imported, so
    that nothing an implementation does to the environment changes what runs or what the report says."""
    options = config.stash.get(_OPTIONS, None)
    if options is None:
        options = config.stash[_OPTIONS] = _options_asked_for(config)
    unimportable = _unimportable(config)
    return options if options.unimportable == unimportable else dataclasses.replace(options, unimportable=unimportable)


def _options_asked_for(config: pytest.Config) -> RunOptions:
    report_dir = config.getoption("claims_report")
    run_id = config.getoption("claims_run_id")
    return resolve_options(
        config.getoption("claims_impl"), config.getoption("claims_profile"), config.getoption("claims_seed"),
        report_dir=report_dir,
        cache_dir=config.getoption("claims_cache"),
        scheduler=config.getoption("claims_scheduler") or os.environ.get("CLAIMS_SCHEDULER") or None,
        workers=default_workers(_xdist_workers(config), config.getoption("claims_workers")),
        progress_dir=progress_dir(),
        allow_reference=config.getoption("claims_allow_reference"),
        # A debugger must stop in the process it talks to: --pdb and --trace run checks in this one.
        isolation=not (config.getoption("usepdb", False) or config.getoption("trace", False)),
        staging_dir=str(staging_dir_for(Path(report_dir), run_id)) if report_dir and run_id else None,
        run_id=run_id,
        shrink=config.getoption("claims_shrink"),
    )


def _xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers share this machine with this process (1 without xdist)."""
    workerinput = getattr(config, "workerinput", None)
    return int(workerinput.get("workercount", 1)) if workerinput else 1


def pytest_configure(config: pytest.Config) -> None:
    for kind, description in KIND_DESCRIPTIONS.items():
        config.addinivalue_line("markers", f"{kind}: {description}")
    config.addinivalue_line("markers", "claim: a check of a claim")
    config.stash[_CATALOGUES] = {}
    root = find_root(Path(config.invocation_params.dir))
    if root is not None:
        # Before the verifiers are imported: a failing property's assertion then shows the values it compared.
        rewrite_asserts_in(load_course(root).verifiers)
    # One id for the whole run, set before pytest-xdist starts its workers (they receive the options).
    if not hasattr(config, "workerinput") and config.option.claims_run_id is None:
        config.option.claims_run_id = uuid.uuid4().hex[:12]
    run_options(config)  # fixed now, before anything imports the implementation
    if hasattr(config, "workerinput"):
        return
    config.stash[_UNDO_TERMINATION] = interrupt_on_termination()
    evidence = _Evidence()
    config.pluginmanager.register(evidence, "claims-evidence")
    report_dir = config.getoption("claims_report")
    if report_dir:
        unwritable = report_directory_problem(Path(report_dir))
        if unwritable:  # before any check runs: at the end of the run its results would be lost
            raise pytest.UsageError(unwritable)
        config.pluginmanager.register(_ReportWriter(Path(report_dir), config, evidence), "claims-report")
    if progress_dir():
        config.pluginmanager.register(_CheckCounter(progress_dir()), "claims-progress")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before anything is collected: the implementation imports, and what it offers is its own (or meant not to be).

    One error here replaces one per check; pytest-xdist's workers start only after this has passed.
    """
    config = session.config
    if not _collects_claims(config):
        return
    options = run_options(config)
    find_in_directory(options.impl, str(config.invocation_params.dir))  # in xdist's workers too
    if hasattr(config, "workerinput"):
        return
    check = partial(check_implementation, options.impl, allow_reference=options.allow_reference)
    try:
        # In a worker: an implementation that kills the interpreter on import must not take pytest with it.
        isolated = partial(run_isolated, check, IMPORT_TIME_LIMIT, f"importing the implementation '{options.impl}'")
        config.stash[_PROVENANCE] = checked_implementation(
            options.impl, isolated if options.isolation and isolation_supported() else check, options.cache_dir,
            allow_reference=options.allow_reference)
    except (UnimportableImplementation, CheckCrashed) as error:
        # One error item says why (ImplementationImport); the checks that need no implementation still run.
        config.stash[_UNIMPORTABLE] = str(error)
    except ClaimsError as error:
        raise pytest.UsageError(str(error)) from None


def _unimportable(config: pytest.Config) -> str | None:
    """Why the implementation could not be imported at session start (in pytest-xdist's workers too), or None."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput.get(_UNIMPORTABLE_INPUT) if workerinput is not None else config.stash.get(_UNIMPORTABLE, None)


_UNIMPORTABLE_INPUT = "claims_unimportable"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: a worker learns that the implementation did not import (workers parse only the arguments)."""
    why = _unimportable(node.config)
    if why:
        node.workerinput[_UNIMPORTABLE_INPUT] = why


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):
        items[:] = _longest_first(items)
    # After -k and -m: whatever is selected, a run whose implementation does not import has this one error.
    why = _unimportable(config)
    if why:
        items.insert(0, ImplementationImport.from_parent(session, name="claims-implementation", why=why))


# The kinds whose checks take longest, longest first (experiments train for up to a minute, properties
# for seconds, the other kinds for about one).
_LONGEST_KINDS = ("experiment", "property")


def _longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items with the longest kinds of check first, each kind in collection order.

    pytest-xdist hands out items in collection order. The longest experiments come late in the
    claim files, so the worker that draws one last keeps the run waiting while the other worker
    idles; handing the longest out first (longest-processing-time-first scheduling) evens the
    workers out. Every worker sorts alike, as xdist requires identical collections; a serial run
    keeps file and claim order.
    """

    def rank(item: pytest.Item) -> int:
        return next((index for index, kind in enumerate(_LONGEST_KINDS) if item.get_closest_marker(kind)),
                    len(_LONGEST_KINDS))

    return sorted(items, key=rank)


def pytest_report_header(config: pytest.Config) -> list[str]:
    found = config.stash.get(_PROVENANCE, None)
    return [found.summary()] if found is not None and found.borrowed else []


def _claims_dir_of(path: Path) -> Path | None:
    """The claims directory of the course whose tree holds ``path``, or None outside any course."""
    root = find_root(path)
    return load_course(root).claims.resolve() if root is not None else None


def _is_claim_file(path: Path) -> bool:
    return path.suffix in (".yaml", ".yml") and _claims_dir_of(path.parent) == path.parent.resolve()


def _collects_claims(config: pytest.Config) -> bool:
    """Whether the arguments name claim files: a course's claims directory, a directory above it, or a file in it."""
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0])
        claims = _claims_dir_of(path)
        if claims is None:
            continue
        resolved = path.resolve()
        if resolved == claims or claims.is_relative_to(resolved) or _is_claim_file(path):
            return True
    return False


def pytest_unconfigure(config: pytest.Config) -> None:
    shutdown_executors()
    close_zygotes()
    config.stash.get(_UNDO_TERMINATION, lambda: None)()


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    # Only the course's claims directory: a YAML file elsewhere (a fixture, a CI config) is not a claim file.
    if path.resolve() == _claims_dir_of(path):
        return ClaimsDirectory.from_parent(parent, path=path)
    return None


class ClaimsDirectory(pytest.Directory):
    """The course's claims directory: a node for every entry the catalogue lists, a claim file or not.

    pytest itself would pass over a directory, a device or a broken symlink named ``*.yaml``; the
    catalogue reports each as a problem of that file, so each gets its row here.
    """

    def collect(self):
        catalogue = _catalogue(self.config, self.path.resolve())
        for display in catalogue.files:
            yield ClaimFileNode.from_parent(self, path=catalogue.root / display)


def _catalogue(config: pytest.Config, claims_dir: Path) -> Catalogue:
    catalogues = config.stash[_CATALOGUES]
    if claims_dir not in catalogues:
        catalogues[claims_dir] = load_catalogue(claims_dir)
    return catalogues[claims_dir]


class ImplementationImport(pytest.Item):
    """The one error of a run whose implementation cannot be imported: the checks that call it are skipped."""

    def __init__(self, *, why: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.why = why

    def setup(self) -> None:
        pytest.fail(self.why, pytrace=False)

    def runtest(self) -> None:  # never reached: setup fails
        raise AssertionError(self.why)

    def reportinfo(self):
        return self.path, None, f"the implementation {run_options(self.config).impl}"


class ClaimFileNode(pytest.File):
    """One claim file: a node per claim, plus one error item for problems of the file itself."""

    def collect(self):
        catalogue = _catalogue(self.config, self.path.parent.resolve())
        display = catalogue.display_of(self.path)
        claims: dict[str, ClaimNode] = {}
        for part in parts_of_file(catalogue, display):
            if len(part.names) == 1:
                yield PartItem.from_parent(self, name=part.names[0], part=part, catalogue=catalogue)
                continue
            if part.names[0] not in claims:
                claims[part.names[0]] = ClaimNode.from_parent(self, name=part.names[0], entry=part.entry)
                yield claims[part.names[0]]
            claims[part.names[0]].parts.append(part)


class ClaimNode(pytest.Collector):
    """One claim: an item per check, or a single error item when the claim cannot be used."""

    def __init__(self, *, entry: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.entry = entry
        self.parts: list[Part] = []

    def collect(self):
        catalogue = _catalogue(self.config, self.path.parent.resolve())
        for part in self.parts:
            yield PartItem.from_parent(self, name=part.names[-1], part=part, catalogue=catalogue)

    def reportinfo(self):
        return self.path, self.entry.line - 1, f"claim {self.entry.id} ({self.entry.where})"


class PartItem(pytest.Item):
    """One part of the run: a check of a claim, or the problems of a claim or file that cannot be used.

    The check runs in ``runtest`` (so ``--setup-only`` runs none, and durations are the check's); a part
    that is only problems errors in ``setup``, where pytest reports what keeps a test from running.
    """

    def __init__(self, *, part: Part, catalogue: Catalogue, **kwargs: Any):
        super().__init__(**kwargs)
        self.part = part
        self.catalogue = catalogue
        entry = part.entry
        if entry is not None:
            self.user_properties += [("claim_id", entry.id), ("where", entry.where or ""),
                                     ("sources", ",".join(entry.claim.sources) if entry.claim else "")]
        if part.index is not None and entry is not None and entry.claim is not None:
            check = entry.claim.checks[part.index]
            self.add_marker(check.kind)
            self.add_marker("claim")
            uses = catalogue.verifiers[check.verifier].uses
            # -k selects by the claim's other names (a syllabus's test) and by the functions a check exercises.
            self.extra_keyword_matches.update([*entry.claim.aliases, *uses])
            self.user_properties += [("functions", ",".join(uses)), ("verifier", check.verifier),
                                     ("aliases", ",".join(entry.claim.aliases))]

    def setup(self) -> None:
        # A claim or file that cannot be used is known at collection: it errors (as a broken fixture would),
        # with no check to run.
        if self.part.index is None:
            self._report(evaluate(self.part, self.catalogue, run_options(self.config)))

    def runtest(self) -> None:
        self._report(evaluate(self.part, self.catalogue, run_options(self.config)))

    def _report(self, outcome: Outcome | None) -> None:
        assert outcome is not None
        self.user_properties.append((PAYLOAD, json.dumps(outcome.evidence)))
        if outcome.status in ("failed", "error"):
            pytest.fail(outcome.message, pytrace=False)
        if outcome.status == "skipped":
            pytest.skip(outcome.message)

    def reportinfo(self):
        entry, index = self.part.entry, self.part.index
        if entry is None:
            return self.path, 0, f"{self.part.file} (cannot be loaded)"
        if index is None:
            return self.path, entry.line - 1, f"{entry.id} (cannot be loaded)"
        line = entry.check_lines[index]
        return self.path, line - 1, f"{entry.file}:{line}: {entry.id}::{self.name} ({entry.where})"


class _Evidence:
    """Every item's evidence as it reaches the controlling process (from xdist's workers too), by node id.

    The report is written from it, and the terminal summary opens with it: for an implementation
    other than the reference, one row per function it offers, and the functions still to be written.
    """

    def __init__(self) -> None:
        self.by_node: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PAYLOAD:
                self.by_node[report.nodeid] = json.loads(value)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if run_options(config).impl == reference_implementation() or _unimportable(config):
            return
        rows = function_scoreboard(list(self.by_node.values()), _given(config))
        if not rows:
            return
        writer = terminalreporter
        writer.section(f"functions of {run_options(config).impl}")
        writer.line(scoreboard_line(rows), bold=True, red=any(row["failed"] for row in rows if not row["given"]))
        # Only the functions under test get a row: the stubs and the reference's are one line each.
        tested = [row for row in rows if row["implemented"] and not row["given"]]
        if tested:
            width = max(len("function"), *(len(row["function"]) for row in tested))
            writer.line(f"{'function':<{width}}  claims  passed  failed  not implemented  not run")
            for row in tested:
                writer.line(f"{row['function']:<{width}}  {row['claims']:>6}  {row['passed']:>6}  {row['failed']:>6}  "
                            f"{row['not implemented']:>15}  {row['not run']:>7}")
        for label, names in (("not implemented yet", [row["function"] for row in rows if not row["implemented"]]),
                             ("the reference's, taken as given", [row["function"] for row in rows if row["given"]])):
            if names:
                writer.line(textwrap.fill(f"{label} ({len(names)}): {', '.join(names)}", 100, subsequent_indent="  "))


def _given(config: pytest.Config) -> tuple[str, ...]:
    """The functions this run takes from the reference (checked at session start), not under test."""
    found = config.stash.get(_PROVENANCE, None)
    return found.as_reference if found is not None else ()


class _ReportWriter:
    """Gathers every item's evidence in the controlling process and writes ``reports/`` at the end of the run.

    The rows are every selected part: its evidence if it arrived, else an error row saying that it never
    did. The run is complete only when every selected part reported and pytest was not interrupted.
    """

    def __init__(self, directory: Path, config: pytest.Config, evidence: _Evidence):
        self.directory = directory
        self.config = config
        self.evidence = evidence.by_node
        self.selected: list[str] | None = None
        self.started = time.time()
        try:  # a malformed --claims-text stops the run before any check: a usage error
            self.text_overrides = text_overrides(config.getoption("--claims-text"))
        except ClaimsError as error:
            raise pytest.UsageError(str(error)) from None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not session.config.pluginmanager.hasplugin("dsession"):
            self.selected = [item.nodeid for item in session.items]

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.selected = list(ids)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        options = run_options(self.config)
        parts = self._selected_parts(session)
        if not parts:
            return  # nothing of a course was collected: there is no report to write
        missing = [key for key in parts if key not in self.evidence]
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        stopped = bool(session.shouldstop or session.shouldfail) and not interrupted
        why = ("the run was interrupted before this check reported" if interrupted else
               "the run stopped early (-x or --maxfail) before this check ran" if stopped else
               "its result never reached the report: the process running it died")
        rows = [self.evidence[key] if key in self.evidence else never_reported(part, catalogue, options, why)
                for key, (part, catalogue) in parts.items()]
        problems = []
        if interrupted:
            problems.append("interrupted")
        if stopped:
            problems.append("stopped early")
        if missing:
            problems.append(f"{len(missing)} of {len(parts)} selected checks never reported")
        if options.unimportable:
            problems.append(f"the implementation '{options.impl}' could not be imported, so no check that calls it ran")
        catalogues = list({id(catalogue): catalogue for _, catalogue in parts.values()}.values())
        every = sum(len(every_part(catalogue)) for catalogue in catalogues)
        completeness = {"id": options.run_id, "complete": not problems, "incomplete": "; ".join(problems) or None,
                        "selection": "all" if len(parts) == every else f"{len(parts)} of {every} checks selected"}
        try:
            write_reports(self.directory, rows, lessons_of(catalogues), options, self.started, catalogues[0].root,
                          completeness, _given(self.config), text_report(catalogues[0], self.text_overrides))
        except ReportNotWritten as error:  # the run's end: say where its results are, and fail the run
            session.config.get_terminal_writer().line(f"claims: {error}", red=True, bold=True)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def _selected_parts(self, session: pytest.Session) -> dict[str, tuple[Part, Catalogue]]:
        """Every selected item's part, by node id, in collection order."""
        rootdir = Path(session.config.rootpath)
        by_file: dict[Path, tuple[Catalogue, dict[str, Part]]] = {}
        found: dict[str, tuple[Part, Catalogue]] = {}
        for nodeid in self.selected or []:
            file, _, names = nodeid.partition("::")
            path = rootdir / file
            if path not in by_file:
                if not _is_claim_file(path):
                    continue
                catalogue = _catalogue(self.config, path.parent.resolve())
                display = catalogue.display_of(path)
                by_file[path] = (catalogue, {part.key.partition("::")[2]: part
                                             for part in parts_of_file(catalogue, display)})
            catalogue, parts = by_file[path]
            if names in parts:
                found[nodeid] = (parts[names], catalogue)
        return found


class _CheckCounter:
    """Writes how many checks are done of how many, in the controlling process, for ``claims verify``'s status line."""

    def __init__(self, directory: str):
        self.directory = directory
        self.record: dict[str, Any] = {"done": 0, "total": None, "started": time.time()}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._write(total=len(session.items))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._write(total=len(ids))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self._write(done=self.record["done"] + 1)

    def _write(self, **changes: Any) -> None:
        self.record.update(changes)
        write_record(self.directory, CHECKS_RECORD, self.record)

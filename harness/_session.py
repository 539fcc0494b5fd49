"""What a pytest run of the claims knows, and what its controlling process does with the evidence.

The session's state lives in pytest's stash: the run's options (fixed in ``pytest_configure``, before
anything imports the implementation), the catalogue of each claims directory, the implementation's
provenance, and why it could not be imported. In the controlling process, :class:`Evidence` gathers
every item's evidence (from pytest-xdist's workers too) and prints the student's function table,
:class:`ReportWriter` writes ``reports/`` from this run's evidence alone. The hooks and the collection
tree are ``claims_harness._pytest_hooks``'s.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from claims_harness._claims.course import find_root, load_course
from claims_harness._claims.formats import NOT_JUDGED
from claims_harness._claims.loading import Catalogue, load_catalogue
from claims_harness._reporting.report import remove_staging, staging_dir_for, write_reports
from claims_harness._reporting.results import checks_summary, judged_verdict, lessons_of
from claims_harness._reporting.rows import function_scoreboard
from claims_harness._reporting.terminal import scoreboard_failed, scoreboard_lines
from claims_harness._running.engine import Part, every_part, never_reported, parts_of_file
from claims_harness._running.executor import default_workers
from claims_harness._running.implementation import Provenance, reference_implementation
from claims_harness._running.options import RunOptions, resolve_options
from claims_harness._text.summary import text_overrides, text_report
from claims_harness.errors import ClaimsError, ReportNotWritten

PAYLOAD = "claims_result"
CATALOGUES = pytest.StashKey[dict[Path, Catalogue]]()
PROVENANCE = pytest.StashKey[Provenance | None]()
UNIMPORTABLE = pytest.StashKey[str]()
_OPTIONS = pytest.StashKey[RunOptions]()


def run_options(config: pytest.Config) -> RunOptions:
    """The run's options: fixed when pytest configures the plugin, before any implementation is imported, so
    that nothing an implementation does to the environment changes what runs or what the report says."""
    options = config.stash.get(_OPTIONS, None)
    if options is None:
        options = config.stash[_OPTIONS] = _options_asked_for(config)
    unimportable = why_unimportable(config)
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
        allow_reference=config.getoption("claims_allow_reference"),
        # A debugger must stop in the process it talks to: --pdb and --trace run checks in this one.
        isolation=not (config.getoption("usepdb", False) or config.getoption("trace", False)),
        staging_dir=str(staging_dir_for(Path(report_dir), run_id)) if report_dir and run_id else None,
        run_id=run_id,
        shrink=config.getoption("claims_shrink"),
        directory=config.getoption("claims_impl_path") or str(config.invocation_params.dir),
    )


def _xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers share this machine with this process (1 without xdist)."""
    workerinput = getattr(config, "workerinput", None)
    return int(workerinput.get("workercount", 1)) if workerinput else 1


def why_unimportable(config: pytest.Config) -> str | None:
    """Why the implementation could not be imported at session start (in pytest-xdist's workers too), or None."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput.get(UNIMPORTABLE_INPUT) if workerinput is not None else config.stash.get(UNIMPORTABLE, None)


UNIMPORTABLE_INPUT = "claims_unimportable"


def claims_dir_of(path: Path) -> Path | None:
    """The claims directory of the course whose tree holds ``path``, or None outside any course."""
    root = find_root(path)
    return load_course(root).claims.resolve() if root is not None else None


def is_claim_file(path: Path) -> bool:
    return path.suffix in (".yaml", ".yml") and claims_dir_of(path.parent) == path.parent.resolve()


def catalogue_of(config: pytest.Config, claims_dir: Path) -> Catalogue:
    catalogues = config.stash[CATALOGUES]
    if claims_dir not in catalogues:
        catalogues[claims_dir] = load_catalogue(claims_dir)
    return catalogues[claims_dir]


class Evidence:
    """Every item's evidence as it reaches the controlling process (from xdist's workers too), by node id.

    The report is written from it, and the terminal summary opens with it: for an implementation
    other than the reference, one row per function it offers, and the functions still to be written.
    """

    def __init__(self) -> None:
        self.by_node: dict[str, dict[str, Any]] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Take the check's result from the report (it crosses from an xdist worker as a user property), and out
        of it, before JUnit XML and other plugins read the properties: they keep the claim, step and functions."""
        for name, value in report.user_properties:
            if name == PAYLOAD:
                self.by_node[report.nodeid] = json.loads(value)
        report.user_properties = [(name, value) for name, value in report.user_properties if name != PAYLOAD]

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """A run with checks not judged fails, unless it asks for a partial verdict: skipped is not green."""
        if session.config.getoption("claims_partial") or session.exitstatus != pytest.ExitCode.OK:
            return
        if checks_summary(list(self.by_node.values()))["checks"][NOT_JUDGED]:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        payloads = list(self.by_node.values())
        if run_options(config).impl != reference_implementation() and not why_unimportable(config):
            self._scoreboard(terminalreporter, function_scoreboard(payloads, given_functions(config)),
                             run_options(config).impl)
        summary = checks_summary(payloads)
        partial = config.getoption("claims_partial")
        if summary["checks"][NOT_JUDGED] or partial:
            terminalreporter.line(f"claims: {judged_verdict(summary, partial)}", bold=True,
                                  red=bool(summary["checks"][NOT_JUDGED]) and not partial)

    @staticmethod
    def _scoreboard(writer: Any, rows: list[dict[str, Any]], impl: str) -> None:
        lines = scoreboard_lines(rows)
        if not lines:
            return
        writer.section(f"functions of {impl}")
        writer.line(lines[0], bold=True, red=scoreboard_failed(rows))
        for line in lines[1:]:
            writer.line(line)


def given_functions(config: pytest.Config) -> tuple[str, ...]:
    """The functions this run takes from the reference (checked at session start), not under test."""
    found = config.stash.get(PROVENANCE, None)
    return found.as_reference if found is not None else ()


class ReportWriter:
    """Gathers every item's evidence in the controlling process and writes ``reports/`` at the end of the run.

    The rows are every selected part: its evidence if it arrived, else an error row saying that it never
    did. The run is complete only when every selected part reported and pytest was not interrupted.
    """

    def __init__(self, directory: Path, config: pytest.Config, evidence: Evidence):
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
        if not parts:  # nothing of a course was collected: there is no report to write
            if options.staging_dir:
                remove_staging(Path(options.staging_dir))
            return
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
                          completeness, given_functions(self.config), text_report(catalogues[0], self.text_overrides))
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
                if not is_claim_file(path):
                    continue
                catalogue = catalogue_of(self.config, path.parent.resolve())
                display = catalogue.display_of(path)
                by_file[path] = (catalogue, {part.key.partition("::")[2]: part
                                             for part in parts_of_file(catalogue, display)})
            catalogue, parts = by_file[path]
            if names in parts:
                found[nodeid] = (parts[names], catalogue)
        return found

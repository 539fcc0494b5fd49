"""The pytest plugin's hooks, registered by ``claims_harness.plugin`` in a course's run: every part of a run
(``claims_harness._running.engine``) is a test item.

Collection turns the claim files of the course's claims directory into items
``claims/<file>.yaml::<claim-id>::<kind>``; an item runs its check in ``runtest`` through the one
driver (the verifier itself in a supervised worker process); reporting attaches the evidence to
the test report (``user_properties``), which is how results reach the controller under
pytest-xdist. The controller writes ``reports/`` from this run's evidence alone: a selected item
whose evidence never arrived (a crashed xdist worker, an interrupted run) is an error row, and an
interrupted or stopped run says so in every format (``claims_harness._session`` holds the session's
state and that end of the run).

The options (``--claims-*``) are ``claims_harness.plugin``'s, which pytest loads everywhere the package is installed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from claims_harness._claims.course import find_root, load_course, use_packages_of
from claims_harness._claims.loading import Catalogue
from claims_harness._claims.schema import KIND_DESCRIPTIONS
from claims_harness._reporting.report import claim_staging, remove_stale_staging, report_directory_problem
from claims_harness._running.cache import checked_implementation
from claims_harness._running.driver import last_seconds, longest_first
from claims_harness._running.engine import Outcome, Part, evaluate, keywords, parts_of_file
from claims_harness._running.executor import shutdown_executors
from claims_harness._running.processes import interrupt_on_termination
from claims_harness._running.remote import check_implementation, close_hosts
from claims_harness._session import (
    CATALOGUES,
    PAYLOAD,
    PROVENANCE,
    UNIMPORTABLE,
    UNIMPORTABLE_INPUT,
    Evidence,
    ReportWriter,
    catalogue_of,
    claims_dir_of,
    is_claim_file,
    run_options,
    why_unimportable,
)
from claims_harness.errors import CheckCrashed, ClaimsError, UnimportableImplementation

_UNDO_TERMINATION = pytest.StashKey[Callable[[], None]]()


def pytest_configure(config: pytest.Config) -> None:
    for kind, description in KIND_DESCRIPTIONS.items():
        config.addinivalue_line("markers", f"{kind}: {description}")
    config.addinivalue_line("markers", "claim: a check of a claim")
    config.stash[CATALOGUES] = {}
    root = find_root(Path(config.invocation_params.dir))
    if root is not None:
        use_packages_of(load_course(root))
    # One id for the whole run, set before pytest-xdist starts its workers (they receive the options).
    if not hasattr(config, "workerinput") and config.option.claims_run_id is None:
        config.option.claims_run_id = uuid.uuid4().hex[:12]
    run_options(config)  # fixed now, before anything imports the implementation
    if hasattr(config, "workerinput"):
        return
    config.stash[_UNDO_TERMINATION] = interrupt_on_termination()
    evidence = Evidence()
    config.pluginmanager.register(evidence, "claims-evidence")
    report_dir = config.getoption("claims_report")
    if report_dir:
        options = run_options(config)
        unwritable = report_directory_problem(Path(report_dir), find_root(Path(config.invocation_params.dir)),
                                              options.impl, Path(options.directory))
        if unwritable:  # before any check runs: at the end of the run its results would be lost
            raise pytest.UsageError(unwritable)
        staging = Path(options.staging_dir) if options.staging_dir else None
        remove_stale_staging(Path(report_dir), keep=staging)  # earlier runs' that were killed
        if staging is not None:
            claim_staging(staging)
        config.pluginmanager.register(ReportWriter(Path(report_dir), config, evidence), "claims-report")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before anything is collected: the implementation imports, and what it offers is its own (or meant not to be).

    One error here replaces one per check; pytest-xdist's workers start only after this has passed.
    """
    config = session.config
    if not _collects_claims(config):
        return
    options = run_options(config)
    if hasattr(config, "workerinput"):
        return
    # In the implementation's own process: one that kills the interpreter on import does not take pytest with it.
    check = partial(check_implementation, options.impl, options.directory, allow_reference=options.allow_reference)
    try:
        config.stash[PROVENANCE] = checked_implementation(options.impl, options.directory, check, options.cache_dir,
                                                          allow_reference=options.allow_reference)
    except (UnimportableImplementation, CheckCrashed) as error:
        # One error item says why (ImplementationImport); the checks that need no implementation still run.
        config.stash[UNIMPORTABLE] = str(error)
    except ClaimsError as error:
        raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: a worker learns that the implementation did not import (workers parse only the arguments)."""
    why = why_unimportable(node.config)
    if why:
        node.workerinput[UNIMPORTABLE_INPUT] = why


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):
        items[:] = _longest_first(items, config)
    # After -k and -m: whatever is selected, a run whose implementation does not import has this one error.
    why = why_unimportable(config)
    if why:
        items.insert(0, ImplementationImport.from_parent(session, name="claims-implementation", why=why))


def _longest_first(items: list[pytest.Item], config: pytest.Config) -> list[pytest.Item]:
    """The items in the run driver's order (``claims_harness._running.driver.longest_first``: the longest expected
    first, by the seconds of the last report in --claims-report, else by kind). Every pytest-xdist worker reads
    the same report before any is written, so every worker sorts alike, as xdist requires; a serial run keeps
    file and claim order."""
    report_dir = config.getoption("claims_report")
    seconds = last_seconds(Path(report_dir)) if report_dir else {}
    parts = longest_first([item.part for item in items if isinstance(item, PartItem)], seconds)
    order = {part.key: number for number, part in enumerate(parts)}
    return sorted(items, key=lambda item: order.get(item.part.key, -1) if isinstance(item, PartItem) else -1)


def pytest_report_header(config: pytest.Config) -> list[str]:
    found = config.stash.get(PROVENANCE, None)
    return [found.summary()] if found is not None and found.borrowed else []


def _collects_claims(config: pytest.Config) -> bool:
    """Whether the arguments name claim files: a course's claims directory, a directory above it, or a file in it."""
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0])
        claims = claims_dir_of(path)
        if claims is None:
            continue
        resolved = path.resolve()
        if resolved == claims or claims.is_relative_to(resolved) or is_claim_file(path):
            return True
    return False


def pytest_unconfigure(config: pytest.Config) -> None:
    shutdown_executors()
    close_hosts()
    config.stash.get(_UNDO_TERMINATION, lambda: None)()


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    # Only the course's claims directory: a YAML file elsewhere (a fixture, a CI config) is not a claim file.
    if path.resolve() == claims_dir_of(path):
        return ClaimsDirectory.from_parent(parent, path=path)
    return None


class ClaimsDirectory(pytest.Directory):
    """The course's claims directory: a node for every entry the catalogue lists, a claim file or not.

    pytest itself would pass over a directory, a device or a broken symlink named ``*.yaml``; the
    catalogue reports each as a problem of that file, so each gets its row here.
    """

    def collect(self):
        catalogue = catalogue_of(self.config, self.path.resolve())
        for display in catalogue.files:
            yield ClaimFileNode.from_parent(self, path=catalogue.root / display)


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
        catalogue = catalogue_of(self.config, self.path.parent.resolve())
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
        catalogue = catalogue_of(self.config, self.path.parent.resolve())
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
            self.extra_keyword_matches.update(keywords(part, catalogue))  # what -k selects by, as claims verify's
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """A skipped check's report points at its check in the claim file (``-rs``), not at the line of this plugin
    that raised the skip."""
    report = yield
    if isinstance(item, PartItem) and report.skipped and isinstance(report.longrepr, tuple):
        path, line, _ = item.reportinfo()
        report.longrepr = (str(path), line + 1, report.longrepr[2])
    return report

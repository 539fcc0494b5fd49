"""The pytest plugin: every check of every claim is a test item.

Collection turns ``claims/*.yaml`` into items ``claims/<file>.yaml::<claim-id>::<kind>``;
running an item runs its check through the same engine as ``claims verify``; reporting
attaches the check's evidence to the test report (``user_properties``), which is how results
reach the controller under pytest-xdist and end up in ``reports/``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from harness._context import PROFILES
from harness._errors import ClaimsError
from harness._executor import default_workers, shutdown_executors
from harness._implementation import (
    FALLBACK_ATTRIBUTE,
    PYTEST_FLAG,
    Provenance,
    check_implementation,
    find_in_directory,
)
from harness._loading import Catalogue, ClaimEntry, load_catalogue
from harness._progress import CHECKS_RECORD, progress_dir, write_record
from harness._report import check_evidence, claim_payload, file_payload, lessons_of, problems_evidence, write_reports
from harness._runner import DEFAULT_IMPL, RunOptions, check_names, failure_text, resolve_options, run_check
from harness._schema import KIND_DESCRIPTIONS

PAYLOAD = "claims_result"
_CATALOGUES = pytest.StashKey[dict[Path, Catalogue]]()
_PROVENANCE = pytest.StashKey[Provenance | None]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claims", "Module 4 claim verification")
    group.addoption("--impl", default=None, metavar="MODULE",
                    help=f"the implementation under test (default: $CLAIMS_IMPL or '{DEFAULT_IMPL}')")
    group.addoption(PYTEST_FLAG, action="store_true", default=False,
                    help="let the implementation take the functions it does not define from the reference (or another "
                         f"package) as they are; a module can say so itself with {FALLBACK_ATTRIBUTE} = True")
    group.addoption("--profile", default=None, choices=PROFILES,
                    help="smoke: fast checks for every run; full: the release profile (default: $CLAIMS_PROFILE "
                         "or smoke)")
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


def run_options(config: pytest.Config) -> RunOptions:
    workers = config.getoption("claims_workers") or int(os.environ.get("CLAIMS_WORKERS", "0"))
    return resolve_options(
        config.getoption("impl"), config.getoption("profile"), config.getoption("claims_seed"),
        report_dir=config.getoption("claims_report"),
        cache_dir=config.getoption("claims_cache"),
        scheduler=config.getoption("claims_scheduler") or os.environ.get("CLAIMS_SCHEDULER") or None,
        workers=workers or default_workers(_xdist_workers(config)),
        progress_dir=progress_dir(),
        allow_reference=config.getoption("claims_allow_reference"),
    )


def _xdist_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers share this machine with this process (1 without xdist)."""
    workerinput = getattr(config, "workerinput", None)
    return int(workerinput.get("workercount", 1)) if workerinput else 1


def pytest_configure(config: pytest.Config) -> None:
    for kind, description in KIND_DESCRIPTIONS.items():
        config.addinivalue_line("markers", f"{kind}: {description}")
    config.addinivalue_line("markers", "claim: a check of a Module 4 claim")
    config.stash[_CATALOGUES] = {}
    report_dir = config.getoption("claims_report")
    if report_dir and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_ReportWriter(Path(report_dir), run_options(config)), "claims-report")
    if progress_dir() and not hasattr(config, "workerinput"):
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
    try:
        config.stash[_PROVENANCE] = check_implementation(options.impl, allow_reference=options.allow_reference)
    except ClaimsError as error:
        raise pytest.UsageError(str(error)) from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    found = config.stash.get(_PROVENANCE, None)
    return [found.summary()] if found is not None and found.borrowed else []


def _collects_claims(config: pytest.Config) -> bool:
    """Whether the arguments name claim files: a ``claims`` directory, a directory holding one, or a file in one."""
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0])
        if path.is_dir() and (path.name == "claims" or (path / "claims").is_dir()):
            return True
        if path.suffix in (".yaml", ".yml") and path.parent.name == "claims":
            return True
    return False


def pytest_unconfigure(config: pytest.Config) -> None:
    shutdown_executors()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix in (".yaml", ".yml") and file_path.parent.name == "claims":
        return ClaimFileNode.from_parent(parent, path=file_path)
    return None


class ClaimFileNode(pytest.File):
    """One claim file: a node per claim, plus one error item for problems of the file itself."""

    def collect(self):
        catalogues = self.config.stash[_CATALOGUES]
        claims_dir = self.path.parent.resolve()
        if claims_dir not in catalogues:
            catalogues[claims_dir] = load_catalogue(claims_dir)
        catalogue = catalogues[claims_dir]
        display = self.path.resolve().relative_to(catalogue.root).as_posix()
        problems = catalogue.file_problems.get(display, [])
        if problems:
            yield ProblemItem.from_parent(self, name="file-problems", problems=[str(p) for p in problems],
                                          payload=file_payload(catalogue, display))
        used: set[str] = set()
        for entry in catalogue.in_file(display):
            name = entry.id if entry.id not in used else f"{entry.id}@{entry.line}"
            used.add(name)
            yield ClaimNode.from_parent(self, name=name, entry=entry, catalogue=catalogue)


class ClaimNode(pytest.Collector):
    """One claim: an item per check, or a single error item when the claim cannot be used."""

    def __init__(self, *, entry: ClaimEntry, catalogue: Catalogue, **kwargs: Any):
        super().__init__(**kwargs)
        self.entry = entry
        self.catalogue = catalogue

    def collect(self):
        payload = claim_payload(self.entry, self.catalogue)
        if self.entry.broken:
            yield ProblemItem.from_parent(self, name="load-error", problems=[str(p) for p in self.entry.problems],
                                          payload=payload)
            return
        for index, name in enumerate(check_names(self.entry)):
            yield CheckItem.from_parent(self, name=name, index=index, payload=payload)

    def reportinfo(self):
        return self.path, self.entry.line - 1, f"claim {self.entry.id} ({self.entry.where})"


class CheckItem(pytest.Item):
    """One check of one claim."""

    def __init__(self, *, index: int, payload: dict[str, Any], **kwargs: Any):
        super().__init__(**kwargs)
        self.entry: ClaimEntry = self.parent.entry
        self.index = index
        self.payload = payload
        check = self.entry.claim.checks[index]
        self.add_marker(check.kind)
        self.add_marker("claim")
        self.user_properties += [("claim_id", self.entry.id), ("where", self.entry.where),
                                 ("sources", ",".join(self.entry.claim.sources))]

    def setup(self) -> None:
        options = run_options(self.config)
        check = self.entry.claim.checks[self.index]
        verifier = self.parent.catalogue.verifiers[check.verifier]
        self.result = run_check(self.entry, self.index, verifier, options)
        self.user_properties.append((PAYLOAD, check_evidence(self.payload, self.entry, self.index, self.result)))
        if self.result.status == "error":
            pytest.fail(failure_text(self.entry, self.index, self.result, options), pytrace=False)
        if self.result.status == "skipped":
            pytest.skip(self.result.skip_reason)

    def runtest(self) -> None:
        if self.result.status == "failed":
            pytest.fail(failure_text(self.entry, self.index, self.result, run_options(self.config)), pytrace=False)

    def reportinfo(self):
        line = self.entry.check_lines[self.index]
        return self.path, line - 1, f"{self.entry.file}:{line}: {self.entry.id}::{self.name} ({self.entry.where})"


class ProblemItem(pytest.Item):
    """A claim or file that cannot be run: it errors with every problem found, and hides nothing else."""

    def __init__(self, *, problems: list[str], payload: dict[str, Any], **kwargs: Any):
        super().__init__(**kwargs)
        self.problems = problems
        self.payload = payload

    def setup(self) -> None:
        self.user_properties.append((PAYLOAD, problems_evidence(self.payload, self.problems)))
        pytest.fail("\n".join(self.problems), pytrace=False)

    def runtest(self) -> None:  # setup() always fails first
        raise AssertionError("unreachable")

    def reportinfo(self):
        return self.path, self.payload["line"] - 1, f"{self.payload['claim']['id']} (cannot be loaded)"


class _ReportWriter:
    """Gathers every item's evidence in the controlling process and writes ``reports/``."""

    def __init__(self, directory: Path, options: RunOptions):
        self.directory = directory
        self.options = options
        self.payloads: dict[str, dict[str, Any]] = {}
        self.started = time.time()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == PAYLOAD:
                self.payloads[report.nodeid] = json.loads(value)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        payloads = list(self.payloads.values())
        catalogues = [load_catalogue(Path(d)) for d in sorted({p["claims_dir"] for p in payloads})]
        root = catalogues[0].root if catalogues else Path(session.config.rootpath)
        write_reports(self.directory, payloads, lessons_of(catalogues), self.options, self.started, root)


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

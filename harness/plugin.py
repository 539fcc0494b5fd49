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
from harness._loading import Catalogue, ClaimEntry, load_catalogue
from harness._report import write_reports
from harness._runner import DEFAULT_IMPL, RunOptions, check_names, failure_text, run_check
from harness._schema import KIND_DESCRIPTIONS

PAYLOAD = "claims_result"
_CATALOGUES = pytest.StashKey[dict[Path, Catalogue]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claims", "Module 4 claim verification")
    group.addoption("--impl", default=None, metavar="MODULE",
                    help=f"the implementation under test (default: $CLAIMS_IMPL or '{DEFAULT_IMPL}')")
    group.addoption("--profile", default=None, choices=PROFILES,
                    help="smoke: fast checks for every run; full: the release profile (default: $CLAIMS_PROFILE "
                         "or smoke)")
    group.addoption("--claims-seed", type=int, default=None, metavar="N",
                    help="global seed every check's generator is derived from (default: $CLAIMS_SEED or 0)")
    group.addoption("--claims-report", default=None, metavar="DIR",
                    help="write claims.json, claims_report.md and claims_report.html to DIR after the run")
    group.addoption("--claims-cache", default=None, metavar="DIR",
                    help="reuse observations of checks whose inputs and code did not change, kept in DIR")


def run_options(config: pytest.Config) -> RunOptions:
    seed = config.getoption("claims_seed")
    return RunOptions(
        impl=config.getoption("impl") or os.environ.get("CLAIMS_IMPL") or DEFAULT_IMPL,
        profile=config.getoption("profile") or os.environ.get("CLAIMS_PROFILE") or "smoke",
        seed=seed if seed is not None else int(os.environ.get("CLAIMS_SEED", "0")),
        report_dir=config.getoption("claims_report"),
        cache_dir=config.getoption("claims_cache"),
    )


def pytest_configure(config: pytest.Config) -> None:
    for kind, description in KIND_DESCRIPTIONS.items():
        config.addinivalue_line("markers", f"{kind}: {description}")
    config.addinivalue_line("markers", "claim: a check of a Module 4 claim")
    config.stash[_CATALOGUES] = {}
    report_dir = config.getoption("claims_report")
    if report_dir and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_ReportWriter(Path(report_dir), run_options(config)), "claims-report")


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
                                          payload={"claims_dir": str(claims_dir), "file": display,
                                                   "title": catalogue.titles.get(display, display), "line": 1,
                                                   "index": -1, "claim": {"id": display, "where": None}})
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
        payload = _claim_payload(self.entry, self.catalogue)
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
        record = self.result.as_dict()
        record["expected"] = {key: expectation.as_written() for key, expectation in check.expect.items()}
        self.user_properties.append((PAYLOAD, json.dumps({**self.payload, "check_index": self.index,
                                                          "check": record})))
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
        self.user_properties.append((PAYLOAD, json.dumps({**self.payload, "problems": self.problems})))
        pytest.fail("\n".join(self.problems), pytrace=False)

    def runtest(self) -> None:  # setup() always fails first
        raise AssertionError("unreachable")

    def reportinfo(self):
        return self.path, self.payload["line"] - 1, f"{self.payload['claim']['id']} (cannot be loaded)"


def _claim_payload(entry: ClaimEntry, catalogue: Catalogue) -> dict[str, Any]:
    claim = entry.claim
    info: dict[str, Any] = {"id": entry.id, "where": entry.where}
    if claim is not None:
        info.update(statement=claim.statement, formula=claim.formula, sources=claim.sources,
                    limitations=claim.limitations, erratum=claim.erratum, checks=len(claim.checks))
        info["citations"] = {key: catalogue.sources[key].full_citation for key in claim.sources
                             if key in catalogue.sources}
    return {"claims_dir": str(catalogue.root / Path(entry.file).parent), "file": entry.file,
            "title": catalogue.titles.get(entry.file, entry.file), "line": entry.line, "index": entry.index,
            "claim": info}


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
        lessons = [{"file": file, "title": catalogue.titles[file], "steps": catalogue.steps[file],
                    "claims": [[entry.id, entry.where] for entry in catalogue.in_file(file)]}
                   for catalogue in catalogues for file in catalogue.files]
        root = catalogues[0].root if catalogues else Path(session.config.rootpath)
        write_reports(self.directory, payloads, lessons, self.options, self.started, root)

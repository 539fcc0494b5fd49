"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

PROJECT = Path(__file__).resolve().parents[1]


def pythonpath(*directories: Path | str) -> str:
    """``PYTHONPATH`` for a subprocess that runs in a throwaway project of this course: ``directories`` first, then
    this project, whose course packages (impl, verifiers, zoo) are not installed but imported from its root."""
    return os.pathsep.join([*map(str, directories), str(PROJECT)])


# Every subprocess a test starts finds the course's packages, as pytest's pythonpath (pyproject.toml) does here.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(PROJECT)]))


@pytest.fixture(scope="session", autouse=True)
def _project_modules_imported_once() -> None:
    """Import the verifiers and the reference implementation before any ``pytester`` run.

    An in-process ``pytester`` run removes, when it ends, every module it imported. Were
    ``verifiers`` first imported inside such a run, the next run would import it again and its
    decorators would meet the (module-global) registry's entries from the first import, which
    ``claims_harness.verifier`` refuses as a name "registered twice". ``impl`` and scipy.signal (which
    ``impl.gae`` imports at its first filter) would be imported afresh by every run, which costs
    seconds. Importing them here keeps one copy.
    """
    importlib.import_module("verifiers")
    importlib.import_module("impl")
    importlib.import_module("scipy.signal")


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """Write an implementation module importable by name; it is forgotten (sys.modules) after the test."""
    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
        names.append(name)
        return name

    names: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for name in names:
        sys.modules.pop(name, None)


@pytest.fixture
def restore_registry() -> Iterator[dict]:
    """The verifier registry, put back as it was after the test (for tests that register verifiers).

    The modules the test imported that registered the dropped verifiers are forgotten too: imported
    again by a later test, they register again (left in ``sys.modules``, they would register nothing).
    """
    from claims_harness._claims import registry as _registry

    saved, imported_before = dict(_registry._REGISTRY), set(sys.modules)
    yield _registry._REGISTRY
    dropped = {verifier.function.__module__.partition(".")[0] for name, verifier in _registry._REGISTRY.items()
               if name not in saved}
    _registry._REGISTRY.clear()
    _registry._REGISTRY.update(saved)
    for name in set(sys.modules) - imported_before:
        if name.partition(".")[0] in dropped:
            del sys.modules[name]


def course_table(texts: bool = False) -> str:
    """This project's ``[tool.claims]`` table and its subtables, as pyproject.toml states them.

    Without ``texts``, the documents of the course text (``[tool.claims.texts.*]``) are left out: their
    paths are relative to the project, and a throwaway project elsewhere has no text beside it.
    """
    text = (PROJECT / "pyproject.toml").read_text(encoding="utf-8")
    start = text.index("\n[tool.claims]\n") + 1  # the table's header, not a comment naming it
    end = start
    tables = []
    while True:  # the table and its subtables ([tool.claims.aliases], [tool.claims.texts.module])
        following = text.index("\n[", end + 1)
        tables.append(text[end:following])
        end = following
        if not text.startswith("\n[tool.claims.", end):
            break
    kept = [table for table in tables if texts or not table.lstrip("\n").startswith("[tool.claims.texts.")]
    return "".join(kept).strip() + "\n"


def write_course(root: Path) -> Path:
    """Make ``root`` a throwaway project of this project's course: a pyproject.toml with its ``[tool.claims]``."""
    path = root / "pyproject.toml"
    path.write_text(course_table(), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _throwaway_projects_are_this_course(request: pytest.FixtureRequest) -> None:
    """Every temporary directory a test builds a project in (``tmp_path``, ``pytester.path``) is a course.

    The engine finds its course from ``[tool.claims]`` in the nearest pyproject.toml; a test that is
    about another course, or about running outside one, writes its own file or removes this one.
    """
    for name in ("tmp_path", "pytester"):
        if name in request.fixturenames:
            fixture = request.getfixturevalue(name)
            write_course(fixture if name == "tmp_path" else fixture.path)


# The second course's claim files are its own (tests/test_course_two.py runs them in a copy).
collect_ignore = ["course_two"]


def view_of(module: Any, uses: tuple[str, ...], verifier: str = "tests", claim: str = "claim", **options: Any) -> Any:
    """The view a verifier gets of ``module``, called in this process through the messages that cross between the
    judge and the implementation's process (``claims_harness._running.remote.in_process``)."""
    from claims_harness import ImplementationView
    from claims_harness.engine import in_process

    return ImplementationView(in_process(module), uses, verifier, claim, **options)


@functools.cache
def course_catalogue() -> Any:
    """This course's claims (``claims/``), loaded once per test process: read it, never change it.

    Parsing the claim files takes about 0.4 s; the tests read them a hundred times and more.
    """
    from claims_harness.engine import load_catalogue

    return load_catalogue(PROJECT / "claims")


def course_entry(claim_id: str) -> Any:
    """The catalogue entry of one claim of this course."""
    (entry,) = [entry for entry in course_catalogue().entries if entry.id == claim_id]
    return entry


@functools.cache
def _parts() -> dict[str, Any]:
    """Node id -> part of every check of this course (and of any claim or file it cannot use), in file order."""
    from claims_harness.engine import every_part

    return {part.key: part for part in every_part(course_catalogue())}


def _course_checks() -> list[tuple[str, str, Any]]:
    """(node id, claim id, check) of every check of this course, in file order."""
    return [(node, part.entry.id, part.entry.claim.checks[part.index])
            for node, part in _parts().items() if part.index is not None]


def checks_using(functions: Iterable[str], *, kinds_left_out: tuple[str, ...] = ()) -> list[str]:
    """Node ids (``claims/<file>::<claim>::<check>``) of this course's checks whose verifier calls any of
    ``functions``, but those of ``kinds_left_out``: what ``-k "f1 or f2"`` selects, without its substring matches."""
    verifiers, wanted = course_catalogue().verifiers, set(functions)
    return [node for node, _, check in _course_checks()
            if check.kind not in kinds_left_out and not wanted.isdisjoint(verifiers[check.verifier].uses)]


def checks_of(claim: str, kind: str) -> list[str]:
    """Node ids of the checks of one kind of one claim of this course (``-k "<claim> and <kind>"``)."""
    return [node for node, claim_id, check in _course_checks() if claim_id == claim and check.kind == kind]


def outcomes_against(implementation: str, node_ids: Iterable[str], directory: Path | None = None) -> dict[str, Any]:
    """Each of this course's checks ``node_ids`` evaluated against ``implementation`` (looked for in ``directory``
    first), smoke profile, seed 0: node id -> its outcome (``status``, ``evidence``, ``message``).

    Through the engine API, where a pytest session is not what the test is about: the implementation runs in its own
    process as in any run, but no session starts and a failing check's functions are not blamed one by one.
    """
    from claims_harness.engine import RunOptions, close_hosts, evaluate

    catalogue, parts = course_catalogue(), _parts()
    node_ids = list(node_ids)
    unknown = sorted(set(node_ids) - set(parts))
    assert not unknown, f"no such check in claims/: {unknown}"
    options = RunOptions(impl=implementation, profile="smoke", directory=str(directory or os.getcwd()))
    try:
        return {node_id: evaluate(parts[node_id], catalogue, options) for node_id in node_ids}
    finally:
        close_hosts()  # as a run ends: the implementation's process is not kept for the next test

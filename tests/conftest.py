"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session", autouse=True)
def _project_modules_imported_once() -> None:
    """Import the verifiers and the reference implementation before any ``pytester`` run.

    An in-process ``pytester`` run removes, when it ends, every module it imported. Were
    ``verifiers`` first imported inside such a run, the next run would import it again and its
    decorators would meet the (module-global) registry's entries from the first import, which
    ``harness.verifier`` refuses as a name "registered twice". ``impl`` (with scipy behind it)
    would be imported afresh by every run, which costs seconds. Importing both here keeps one copy.
    """
    importlib.import_module("verifiers")
    importlib.import_module("impl")


@pytest.fixture
def restore_registry() -> Iterator[dict]:
    """The verifier registry, put back as it was after the test (for tests that register verifiers)."""
    from harness import _registry

    saved = dict(_registry._REGISTRY)
    yield _registry._REGISTRY
    _registry._REGISTRY.clear()
    _registry._REGISTRY.update(saved)

"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session", autouse=True)
def _verifiers_imported_once() -> None:
    """Import the project's verifiers before any ``pytester`` run takes its sys.modules snapshot.

    An in-process ``pytester`` run removes the modules it imported when it ends. Were
    ``verifiers`` first imported inside such a run, the next run would import it again and its
    decorators would meet the (module-global) registry's entries from the first import, which
    ``harness.verifier`` refuses as a name "registered twice". Importing it here keeps one copy.
    """
    importlib.import_module("verifiers")


@pytest.fixture
def restore_registry() -> Iterator[dict]:
    """The verifier registry, put back as it was after the test (for tests that register verifiers)."""
    from harness import _registry

    saved = dict(_registry._REGISTRY)
    yield _registry._REGISTRY
    _registry._REGISTRY.clear()
    _registry._REGISTRY.update(saved)

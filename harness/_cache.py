"""Incremental re-verification: a check's observations are reused while nothing they depend on changed.

What is cached is the verifier's output, not the verdict: comparisons with the claim's
``expect`` are always recomputed, so editing an expected number re-verifies that claim in
no time. The key covers everything the observations depend on: the check's inputs (kind,
verifier, params, rates, profile, seed), the verifier module's source, the source of the
implementation under test (when the verifier uses it), the harness's own source and the
versions of the numerical libraries.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import pickle
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from harness._loading import ClaimEntry
from harness._registry import Verifier

_LIBRARIES = ("numpy", "scipy", "sympy", "hypothesis")


def cache_key(entry: ClaimEntry, index: int, verifier: Verifier, *, impl: str, profile: str, seed: int,
              alpha: float) -> str:
    assert entry.claim is not None
    check = entry.claim.checks[index]
    parts = {
        "claim": entry.id, "index": index, "kind": check.kind, "verifier": verifier.name,
        "params": check.params, "alpha": alpha, "beta": check.beta, "deviation": check.deviation,
        "profile": profile, "seed": seed,
        "verifier_source": _module_digest(verifier.function.__module__),
        "impl_source": _module_digest(impl) if verifier.uses else None,
        "harness_source": _module_digest("harness"),
        "versions": _versions(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


class ObservationCache:
    """Pickled observations and the figures they name, one file per key, in a local directory."""

    def __init__(self, directory: Path):
        self.directory = directory

    def load(self, key: str, figures_dir: Path) -> dict[str, Any] | None:
        path = self.directory / f"{key}.pickle"
        if not path.is_file():
            return None
        try:
            # The cache is written only by this harness on this machine; claim files never reach it.
            observed, figures = pickle.loads(path.read_bytes())
        except Exception:  # a truncated or foreign file is a miss, not an error
            return None
        figures_dir.mkdir(parents=True, exist_ok=True)
        for name, data in figures.items():
            (figures_dir / name).write_bytes(data)
        return observed

    def store(self, key: str, observed: dict[str, Any], figures_dir: Path) -> None:
        named = [figures_dir / Path(value).name for value in observed.values()
                 if isinstance(value, str) and value.startswith("figures/")]
        figures = {path.name: path.read_bytes() for path in named if path.is_file()}
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.directory / f"{key}.tmp"
        temporary.write_bytes(pickle.dumps((dict(observed), figures)))
        temporary.replace(self.directory / f"{key}.pickle")


@functools.cache
def _module_digest(name: str) -> str:
    """A digest of a module's source, or of every Python file of a package."""
    module = sys.modules.get(name) or importlib.import_module(name)
    file = Path(inspect.getsourcefile(module) or "")
    files = sorted(file.parent.rglob("*.py")) if file.name == "__init__.py" else [file]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _versions() -> tuple[str, ...]:
    return (sys.version, *(f"{name} {metadata.version(name)}" for name in _LIBRARIES))

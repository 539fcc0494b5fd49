"""Incremental re-verification: a check's observations are reused while nothing they depend on changed.

What is cached is the verifier's output, not the verdict: comparisons with the claim's
``expect`` are always recomputed, so editing an expected number re-verifies that claim in
no time. The key covers everything the observations depend on: the check's inputs (kind,
verifier, params, rates, profile, seed), the verifier module's source, the source of the
implementation under test (when the verifier uses it), the harness's own source and the
versions of the numerical libraries. Sources are found and read without importing them, so
``claims verify`` can compute keys, and reuse every observation, without starting pytest.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import pickle
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from harness._errors import ClaimsError
from harness._loading import ClaimEntry
from harness._registry import Verifier

# pydantic validates (and may coerce) the params a verifier receives.
_LIBRARIES = ("numpy", "scipy", "sympy", "hypothesis", "pydantic")


def cache_key(entry: ClaimEntry, index: int, verifier: Verifier, *, impl: str, profile: str, seed: int,
              alpha: float) -> str:
    assert entry.claim is not None
    check = entry.claim.checks[index]
    parts = {
        "claim": entry.id, "index": index, "kind": check.kind, "verifier": verifier.name,
        "params": check.params, "alpha": alpha, "beta": check.beta, "deviation": check.deviation,
        "profile": profile, "seed": seed,
        "verifier_source": source_digest(verifier.function.__module__),
        "impl_source": source_digest(impl) if verifier.uses else None,
        "harness_source": source_digest("harness"),
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
def source_digest(name: str) -> str:
    """A digest of the source module ``name`` runs: its file (every file, for a package) and, transitively,
    every module of its own top-level package that it imports, such as a verifier's helpers in a sibling module.

    Nothing is imported: the implementation under test alone takes about a second to import.
    """
    root, file = _locate(name)
    # A package's own imports cannot leave it (only the package's modules are followed): no parsing needed.
    files = sorted(file.parent.rglob("*.py")) if file.name == "__init__.py" else _imported_closure(root, file)
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _locate(name: str) -> tuple[Path, Path]:
    """The directory holding the top-level package of ``name``, and the module's file."""
    top = name.partition(".")[0]
    spec = importlib.util.find_spec(top)  # a top-level name: found without importing anything
    if spec is None or spec.origin is None:
        raise ClaimsError(f"cannot find the source of module '{name}'; pass an importable module with --impl")
    origin = Path(spec.origin).resolve()
    root = origin.parent.parent if spec.submodule_search_locations is not None else origin.parent
    file = _module_file(root, name)
    if file is None:
        raise ClaimsError(f"cannot find the source of module '{name}' under {root}")
    return root, file


def _module_file(root: Path, name: str) -> Path | None:
    base = root.joinpath(*name.split("."))
    return next((path for path in (base.with_suffix(".py"), base / "__init__.py") if path.is_file()), None)


def _imported_closure(root: Path, file: Path) -> list[Path]:
    """``file`` and every module of its top-level package that it imports, directly or not, in a stable order."""
    top = file.relative_to(root).parts[0].removesuffix(".py")
    found, pending = {file}, [file]
    while pending:
        path = pending.pop()
        package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
        for name in _imported_names(path, package):
            # Only the package's own modules: an installed package's root is site-packages, numpy included.
            module = _module_file(root, name) if name.partition(".")[0] == top else None
            if module is not None and module not in found:
                found.add(module)
                pending.append(module)
    return sorted(found)


def _imported_names(path: Path, package: str) -> list[str]:
    """Every module name an import statement of ``path`` may refer to (``from a import b`` may import ``a.b``)."""
    names = []
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".") if package else []
            base_parts = parts[:len(parts) - node.level + 1] if node.level else []
            base = ".".join([*base_parts, *([node.module] if node.module else [])])
            names += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return [name for name in names if name]


@functools.cache
def _versions() -> tuple[str, ...]:
    return (sys.version, *(f"{name} {metadata.version(name)}" for name in _LIBRARIES))

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
import os
import pickle
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from harness._errors import ClaimsError
from harness._formats import figure_paths, library_versions
from harness._loading import ClaimEntry
from harness._registry import Verifier

_HARNESS = __name__.partition(".")[0]


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
        "harness_source": package_digest(_HARNESS),
        "versions": library_versions(),
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
        named = [figures_dir / Path(path).name for path in figure_paths(observed)]
        figures = {path.name: path.read_bytes() for path in named if path.is_file()}
        self.directory.mkdir(parents=True, exist_ok=True)
        # A name of its own for each store: two processes storing one key must not share a temporary file.
        handle, temporary = tempfile.mkstemp(prefix=f"{key}.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(pickle.dumps((dict(observed), figures)))
            os.replace(temporary, self.directory / f"{key}.pickle")
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


@functools.cache
def source_digest(name: str) -> str:
    """A digest of the source module ``name`` runs: its file and, transitively, every module it imports whose
    source is not the standard library's or an installed distribution's, whatever package it lives in (a
    student's module that starts with ``from impl import *`` is keyed on ``impl`` too).

    Nothing is imported: the implementation under test alone takes about a second to import. An import the
    source does not spell out (``importlib.import_module(text)``) is not followed.
    """
    digest = hashlib.sha256()
    for path in _source_closure(name):
        digest.update(str(path).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def package_digest(name: str) -> str:
    """A digest of every source file of the installed package ``name`` (the harness: any of it may shape a result)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ClaimsError(f"cannot find the source of package '{name}'")
    directory = Path(spec.origin).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*.py")):
        digest.update(path.relative_to(directory).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _source_closure(name: str) -> list[Path]:
    """The files of ``name`` and of every local module it imports, directly or not, in a stable order.

    A package counts whole (every file, imported or not) when it is the module itself or another top-level
    package than its own (``impl`` for a student module); within its own package only the modules imported.
    """
    own = name.partition(".")[0]
    start = _module_files(name, whole_package=True)
    if start is None:
        raise ClaimsError(f"cannot find the source of module '{name}'; pass an importable module with --claims-impl")
    found: set[Path] = set(start)
    pending = list(start)
    while pending:
        path = pending.pop()
        for imported in _imported_names(path, _package_of(path)):
            if imported.partition(".")[0] == _HARNESS and own != _HARNESS:
                continue  # the whole harness is a part of every key already
            for file in _module_files(imported, whole_package=imported.partition(".")[0] != own) or ():
                if file not in found:
                    found.add(file)
                    pending.append(file)
    return sorted(found)


def _module_files(name: str, *, whole_package: bool) -> list[Path] | None:
    """The local source files of module ``name`` (a package's ``__init__.py``, or all its files when
    ``whole_package``), or None when it is not local: standard library, an installed distribution, built in,
    or not found."""
    top, _, rest = name.partition(".")
    root = _local_root(top)
    if root is None:
        return None
    base = root.joinpath(top, *rest.split(".")) if rest else root / top
    if (base / "__init__.py").is_file():
        return sorted(base.rglob("*.py")) if whole_package else [base / "__init__.py"]
    module = base.with_suffix(".py")
    return [module] if module.is_file() else None


@functools.cache
def _local_root(top: str) -> Path | None:
    """The directory holding the top-level module ``top`` when its source is local (not under the interpreter's
    own library directories, site-packages included), found without importing it."""
    if top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return None
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    origin = Path(spec.origin).resolve()
    if any(origin.is_relative_to(library) for library in _library_directories()):
        return None
    return origin.parent.parent if spec.submodule_search_locations is not None else origin.parent


@functools.cache
def _library_directories() -> tuple[Path, ...]:
    """Where the interpreter's standard library and installed distributions live: keyed by their versions."""
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(dict.fromkeys(Path(sysconfig.get_paths()[name]).resolve() for name in names))


def _package_of(path: Path) -> str:
    """The dotted package a source file belongs to, for resolving its relative imports."""
    parts = []
    directory = path.parent
    while (directory / "__init__.py").is_file():
        parts.append(directory.name)
        directory = directory.parent
    return ".".join(reversed(parts))


def _imported_names(path: Path, package: str) -> list[str]:
    """Every module name an import statement of ``path`` may refer to (``from a import b`` may import ``a.b``)."""
    names = []
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (SyntaxError, ValueError):  # importing it will say what is wrong; the key still covers its bytes
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".") if package else []
            base_parts = parts[:len(parts) - node.level + 1] if node.level else []
            base = ".".join([*base_parts, *([node.module] if node.module else [])])
            names += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return [name for name in names if name]

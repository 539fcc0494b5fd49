"""Incremental re-verification: a check's observations are reused while nothing they depend on changed.

What is cached is the verifier's output, not the verdict: comparisons with the claim's
``expect`` are always recomputed, so editing an expected number re-verifies that claim in
no time. The key covers everything the observations depend on: the check's inputs (kind,
verifier, params, rates, profile, seed), the code of the verifier function, the code of the
implementation functions it uses (:func:`code_digest`: those functions and whatever they reach,
not the whole package, so that editing one function re-runs only the checks that call it), the
harness's own source and the versions of the numerical libraries. Sources are found and read
without importing them, so ``claims verify`` can compute keys, and reuse every observation,
before anything imports the implementation.

The reach of a function is computed here by hand from the syntax tree: no library answers "which
top-level definitions of these local files can this function's result depend on" without
importing the code, and importing the implementation under test is what the key must avoid.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import hmac
import importlib.machinery
import importlib.util
import json
import os
import secrets
import sys
import sysconfig
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claims_harness._claims.claim_file import ClaimEntry
from claims_harness._claims.course import ENGINE, write_atomically
from claims_harness._claims.formats import figure_paths, library_versions
from claims_harness._claims.registry import Verifier
from claims_harness._claims.scope import Dimension
from claims_harness._running.implementation import reference_implementation
from claims_harness._running.processes import judge_records
from claims_harness._running.wire import decode, encode
from claims_harness.errors import ClaimsError, NotData

# A kept summary is this module's reading of a file: another version of this module reads it anew.
_SUMMARY_FORMAT = hashlib.sha256(Path(__file__).read_bytes()).hexdigest().encode()
# A cache entry is a file of this suffix: its signature (HMAC-SHA256, this many bytes), then its content.
_SIGNATURE_BYTES, _SUFFIX = hashlib.sha256().digest_size, ".entry"


def cache_key(entry: ClaimEntry, index: int, verifier: Verifier, *, impl: str, profile: str, seed: int,
              alpha: float, scope: Sequence[Dimension] = (), directory: str | None = None,
              from_reference: Sequence[str] = ()) -> str:
    """The key of a check's observations; ``directory`` is where the implementation is looked for first, and the
    functions ``from_reference`` were served as the reference defines them."""
    assert entry.claim is not None
    check = entry.claim.checks[index]
    parts = {
        "claim": entry.id, "index": index, "kind": check.kind, "verifier": verifier.name,
        "params": check.params, "alpha": alpha, "beta": check.beta, "deviation": check.deviation,
        "profile": profile, "seed": seed,
        "verifier_source": code_digest(verifier.function.__module__, (verifier.function.__name__, *(
            (verifier.in_floats.__name__,) if verifier.in_floats else ()))),
        "impl_source": code_digest(impl, verifier.uses, directory) if verifier.uses else None,
        # Another implementation's check may be judged against the reference (replay, blame): its code counts too.
        "reference_source": code_digest(reference_implementation(), verifier.uses)
        if verifier.uses and impl != reference_implementation() else None,
        "harness_source": package_digest(ENGINE),
        "versions": library_versions(),
        # What the examples reached is stored classified into the course's scope values: a new vocabulary, new keys.
        "scope": [repr(dimension) for dimension in scope],
        **({"from_reference": sorted(from_reference)} if from_reference else {}),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


class ObservationCache:
    """Observations and the figures they name, as data (``claims_harness._running.wire``: nothing read from here is ever
    code), signed, one file per key, in a local directory; from the first
    existing cache a process opens on, the summaries of the source files its keys are made of too
    (:func:`keep_summaries_in`)."""

    def __init__(self, directory: Path):
        self.directory = directory
        if not _kept_summaries and directory.is_dir():  # a refused run writes nothing: not even a cache
            keep_summaries_in(directory)

    def load(self, key: str, figures_dir: Path) -> dict[str, Any] | None:
        """The observations stored under ``key``, their figures restored into ``figures_dir``; None for a miss.

        An entry this harness did not write (its signature does not match: tampered with, or another
        project's) or one that is not data is a miss too, and a warning says so: the check runs again.
        """
        path = self.directory / f"{key}{_SUFFIX}"
        if not path.is_file():
            return None
        try:
            data = path.read_bytes()
        except OSError:
            return None
        signature, content = data[:_SIGNATURE_BYTES], data[_SIGNATURE_BYTES:]
        if not hmac.compare_digest(signature, self._sign(key, content)):
            warnings.warn(f"{path}: a cache entry this harness did not write (tampered with, or foreign): ignored, "
                          "its check runs again", stacklevel=2)
            return None
        try:
            observed, figures = decode(content, known=judge_records())
            if not (isinstance(observed, dict) and isinstance(figures, dict)):
                return None
        except (NotData, ValueError):  # a truncated file, or one of another version's format: a miss, not an error
            return None
        figures_dir.mkdir(parents=True, exist_ok=True)
        for name, figure in figures.items():
            (figures_dir / Path(name).name).write_bytes(figure)
        return observed

    def store(self, key: str, observed: dict[str, Any], figures_dir: Path) -> None:
        named = [figures_dir / Path(path).name for path in figure_paths(observed)]
        figures = {path.name: path.read_bytes() for path in named if path.is_file()}
        content = encode((dict(observed), figures), records=judge_records().values())
        write_atomically(self.directory / f"{key}{_SUFFIX}", self._sign(key, content) + content)

    def _sign(self, key: str, content: bytes) -> bytes:
        """HMAC-SHA256 of the entry under the project's secret: only the judging process signs (workers never
        write the cache), so an entry written by anything else does not verify."""
        return hmac.new(_secret(self.directory), key.encode() + b"\0" + content, hashlib.sha256).digest()


def _secret(directory: Path) -> bytes:
    """The cache's own secret: made once, readable by its owner only (read at each use: a cache may be removed)."""
    path = directory / "secret"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        directory.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # another run made it first
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(secrets.token_bytes(32))
    return path.read_bytes()


def checked_implementation(name: str, directory: str, check: Callable[[], Any], cache_dir: str | Path | None,
                           **settings: Any) -> Any:
    """``check()``, the isolated import and provenance check of implementation ``name`` (a second or so), or
    what it returned before for the same sources of ``name`` and of the reference, the same harness,
    libraries and ``settings``. A refusal is never stored: it is quick, and it must say what is wrong now."""
    if not cache_dir:
        return check()
    cache = ObservationCache(Path(cache_dir))
    parts = {"impl": name, "settings": settings, "harness": package_digest(ENGINE), "versions": library_versions(),
             "sources": [_files_digest(each, directory) for each in (name, reference_implementation())]}
    key = "implementation-" + hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()
    found = cache.load(key, Path(tempfile.gettempdir()))
    if found is not None:
        return found["answer"]
    answer = check()
    cache.store(key, {"answer": answer}, Path(tempfile.gettempdir()))
    return answer


def _files_digest(name: str, directory: str) -> str:
    """A digest of every local source file module ``name`` imports, whole (what importing it runs)."""
    try:
        files = _source_closure(name, directory)
    except ClaimsError:
        return "not found"
    return _contents_digest(files, str)


def forget_sources() -> None:
    """Read every source file anew: digests are kept per process, as one run, whose files do not change, needs."""
    for cached in (code_digest, package_digest, _source_closure, _summary, _local_root):
        cached.cache_clear()


@functools.cache
def code_digest(name: str, roots: tuple[str, ...], directory: str | None = None) -> str:
    """A digest of the code that calling the functions ``roots`` of module ``name`` (looked for in ``directory``
    first) can run.

    The local source files of ``name`` (:func:`_source_closure`) are split into their top-level
    statements. A definition (``def``, ``class``, an import, an assignment to plain names) counts when a
    name it binds is reached: a root, or any identifier, attribute or identifier-like string in a
    definition already counted, in any of the files (names, not modules: a superset is safe, a miss is
    not). Every other top-level statement counts always: it runs at import and may change anything
    (``other.function = replacement``, a loop that registers, a conditional import), and so does a
    module-level ``__getattr__``. Docstrings do not count. Code reached only through an import the
    source does not spell out (``importlib.import_module(text)``) is not seen. Nothing is imported: the
    implementation under test alone takes about a second to import.
    """
    binders: dict[str, list[_Statement]] = {}
    always: list[_Statement] = []
    for path in _source_closure(name, directory):
        for statement in _summary(path)[1]:
            if statement.binds:
                for bound in statement.binds:
                    binders.setdefault(bound, []).append(statement)
            else:
                always.append(statement)
    counted = {id(statement): statement for statement in always}
    pending = [*roots, "__getattr__", *(name for statement in always for name in statement.reads)]
    seen: set[str] = set()
    while pending:
        reached = pending.pop()
        if reached in seen:
            continue
        seen.add(reached)
        for statement in binders.get(reached, ()):
            if id(statement) not in counted:
                counted[id(statement)] = statement
                pending.extend(statement.reads)
    digest = hashlib.sha256()
    for statement in sorted(counted.values(), key=lambda each: (each.path, each.line, each.binds)):
        digest.update(f"{statement.path}:{statement.line}\n".encode())
        digest.update(statement.text.encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class _Statement:
    """A top-level statement of a source file: where it is, its text, the names it binds and reads."""

    path: str
    line: int
    text: str
    binds: tuple[str, ...]
    reads: frozenset[str]


# Where each source file's summary is kept between runs (the course's cache), by the file's path and content.
_kept_summaries: list[Path] = []


def keep_summaries_in(directory: Path) -> None:
    """Keep the summary of every source file read from now on in ``directory``, and read it from there again
    while the file is unchanged: a run with nothing edited then parses no file (half a second here)."""
    _kept_summaries[:] = [directory.resolve() / "sources"]  # where it is now, whatever the working directory becomes


@functools.cache
def _summary(path: Path) -> tuple[tuple[str, ...], tuple[_Statement, ...]]:
    """The modules ``path`` may import and its top-level statements, from one parse.

    Only these small results are kept for the process, never the syntax tree: a process that holds the
    trees of every file it digested makes each garbage collection, and each worker forked from it, pay for
    them (measured: a full collection took 0.19 s with the trees of the course's files, 0.08 s without).
    """
    source = path.read_bytes()
    kept = None
    if _kept_summaries:
        key = hashlib.sha256(b"\0".join([_SUMMARY_FORMAT, str(path).encode(), source])).hexdigest()
        kept = _kept_summaries[0] / f"{key}.json"
        try:
            imports, statements = json.loads(kept.read_text(encoding="utf-8"))
            return tuple(imports), tuple(_Statement(str(path), line, text, tuple(binds), frozenset(reads))
                                         for line, text, binds, reads in statements)
        except (OSError, ValueError, TypeError):
            pass  # not kept yet, or unreadable: parse it
    tree = _syntax_tree(source, path)
    summary = _imported_names(tree, _package_of(path)), _statements(path, source, tree)
    if kept is not None:
        write_atomically(kept, json.dumps([summary[0], [[each.line, each.text, each.binds, sorted(each.reads)]
                                                         for each in summary[1]]]).encode())
    return summary


def _statements(path: Path, data: bytes, tree: ast.Module | None) -> tuple[_Statement, ...]:
    source = data.decode("utf-8", errors="replace")
    if tree is None:
        return (_Statement(str(path), 0, source, (), frozenset()),)
    lines = source.splitlines(keepends=True)
    statements = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # a docstring
        if _is_main_guard(node):
            continue  # runs only as a script, never when the harness imports the module
        first = min([node.lineno, *(decorator.lineno for decorator in getattr(node, "decorator_list", ()))])
        text = "".join(lines[first - 1:node.end_lineno])
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not any(alias.name == "*" for alias in node.names):
            # One definition per imported name: reaching one name of a long import list reaches only it.
            module = node.module.split(".") if isinstance(node, ast.ImportFrom) and node.module else []
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                reads = frozenset([*module, *alias.name.split(".")])
                statements.append(_Statement(str(path), first, text, (bound,), reads))
            continue
        statements.append(_Statement(str(path), first, text, _bound_names(node), frozenset(_read_names(node))))
    return tuple(statements)


def _bound_names(node: ast.stmt) -> tuple[str, ...]:
    """The names a definition binds at module level; empty for a statement that is not a plain definition
    (a star import binds names no one can list: it counts always)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
    names = []
    for target in targets:
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        if not all(isinstance(element, ast.Name) for element in elements):
            return ()  # an attribute or an item of something else: an effect, counted always
        names += [element.id for element in elements]
    return tuple(names)


def _is_main_guard(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__" and not node.orelse)


def _read_names(node: ast.AST) -> set[str]:
    names = set()
    for each in ast.walk(node):
        if isinstance(each, ast.Name):
            names.add(each.id)
        elif isinstance(each, ast.Attribute):
            names.add(each.attr)
        elif isinstance(each, ast.alias):
            names.update(each.name.split("."))
        elif isinstance(each, ast.Constant) and isinstance(each.value, str) and each.value.isidentifier():
            names.add(each.value)  # getattr(module, "name")
    return names


@functools.cache
def package_digest(name: str) -> str:
    """A digest of every source file of the installed package ``name`` (the harness: any of it may shape a result)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ClaimsError(f"cannot find the source of package '{name}'")
    directory = Path(spec.origin).resolve().parent
    return _contents_digest(sorted(directory.rglob("*.py")), lambda path: path.relative_to(directory).as_posix())


def _contents_digest(paths: list[Path], name: Callable[[Path], str]) -> str:
    """A digest of each file's name (as ``name`` gives it) and whole content, in order."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(name(path).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _source_closure(name: str, directory: str | None = None) -> list[Path]:
    """The files of ``name`` and of every local module it imports, directly or not, in a stable order.

    A package counts whole (every file, imported or not) when it is the module itself or another top-level
    package than its own (``impl`` for a student module); within its own package only the modules imported.
    """
    own = name.partition(".")[0]
    start = _module_files(name, directory, whole_package=True)
    if start is None:
        raise ClaimsError(f"cannot find the source of module '{name}'; pass an importable module with --claims-impl")
    found: set[Path] = set(start)
    pending = list(start)
    while pending:
        path = pending.pop()
        for imported in _summary(path)[0]:
            if imported.partition(".")[0] == ENGINE and own != ENGINE:
                continue  # the whole harness is a part of every key already
            for file in _module_files(imported, directory, whole_package=imported.partition(".")[0] != own) or ():
                if file not in found:
                    found.add(file)
                    pending.append(file)
    return sorted(found)


def _module_files(name: str, directory: str | None, *, whole_package: bool) -> list[Path] | None:
    """The local source files of module ``name`` (a package's ``__init__.py``, or all its files when
    ``whole_package``), or None when it is not local: standard library, an installed distribution, built in,
    or not found."""
    top, _, rest = name.partition(".")
    root = _local_root(top, directory)
    if root is None:
        return None
    base = root.joinpath(top, *rest.split(".")) if rest else root / top
    if (base / "__init__.py").is_file():
        return sorted(base.rglob("*.py")) if whole_package else [base / "__init__.py"]
    module = base.with_suffix(".py")
    return [module] if module.is_file() else None


@functools.cache
def _local_root(top: str, directory: str | None = None) -> Path | None:
    """The directory holding the top-level module ``top`` when its source is local (not under the interpreter's
    own library directories, site-packages included), found without importing it: in ``directory`` first, then on
    this process's import path, as the implementation's own process finds it (``claims_harness._running.server``)."""
    if top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return None
    try:
        spec = (importlib.machinery.PathFinder.find_spec(top, [directory]) if directory else None) \
            or importlib.util.find_spec(top)
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


def _syntax_tree(source: bytes, path: Path) -> ast.Module | None:
    """The parsed file, or None when it does not parse: importing it will say what is wrong, and a key
    still covers all its text."""
    try:
        return ast.parse(source, str(path))
    except (SyntaxError, ValueError):
        return None


def _imported_names(tree: ast.Module | None, package: str) -> tuple[str, ...]:
    """Every module name an import statement of ``tree`` may refer to (``from a import b`` may import ``a.b``)."""
    names = []
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".") if package else []
            base_parts = parts[:len(parts) - node.level + 1] if node.level else []
            base = ".".join([*base_parts, *([node.module] if node.module else [])])
            names += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return tuple(name for name in names if name)

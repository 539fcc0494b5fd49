"""``claims exercises DIR``: the reference implementation as a package of stubs for a student to fill in.

A student who starts from a copy of the reference reads the answers; one who starts from nothing
guesses names, signatures and shapes. The exercises are the reference with the body of every
contract function (a name some verifier declares in ``uses=``) replaced by a ``raise
NotImplementedError``: signatures, decorators and docstrings (the formula, the shapes) stay, and so
does everything the functions rely on (imports, classes, constants, helpers), so the package imports
and each function can be filled in on its own. A stub's body is exactly its docstring and that one
``raise``: the shape the engine recognises as "not implemented yet".

The source is edited by line ranges that ``ast`` locates, not regenerated with ``ast.unparse``, so
what is not a stub keeps its comments and layout byte for byte. The reference imports itself
relatively, so the copy uses only its own functions (``check_implementation`` refuses anything else).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import json
import keyword
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from claims_harness._claims.formats import PARTIAL_FLAG
from claims_harness._claims.loading import Catalogue
from claims_harness._running.implementation import contract_functions
from claims_harness.errors import ClaimsError

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Exercised:
    """Where the text exercises one contract function: the steps and claim files of the claims that check it."""

    steps: tuple[str, ...]
    claims: tuple[str, ...]
    files: tuple[str, ...]

    def comment(self) -> str:
        """The line above the stub."""
        if not self.claims:
            return "# Exercise: no claim checks it yet."
        return f"# Exercise ({_steps(self.steps)}): checked by {_count(len(self.claims), 'claim')}."

    def message(self, name: str) -> str:
        """What the stub raises."""
        if not self.claims:
            return f"{name}: not implemented yet (no claim checks it; see 'claims verifiers')"
        return f"{name}: not implemented yet ({_steps(self.steps)}; see {', '.join(self.files)})"


def _steps(steps: tuple[str, ...]) -> str:
    return f"step{'s' if len(steps) > 1 else ''} {', '.join(steps)}"


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"


def exercised(catalogue: Catalogue) -> dict[str, Exercised]:
    """Every contract function some usable claim checks, with the steps (in the course's order) that check it."""
    found: dict[str, tuple[dict[str, None], dict[str, None], dict[str, None]]] = {}
    for entry in catalogue.entries:
        if entry.broken:
            continue
        for check in entry.claim.checks:  # a usable claim names only registered verifiers
            for name in catalogue.verifiers[check.verifier].uses:
                steps, claims, files = found.setdefault(name, ({}, {}, {}))
                steps[entry.where] = claims[entry.id] = files[entry.file] = None
    order = {step: index for index, step in enumerate(catalogue.course.steps)}
    return {name: Exercised(tuple(sorted(steps, key=lambda step: order.get(step, len(order)))), tuple(claims),
                            tuple(sorted(files)))
            for name, (steps, claims, files) in found.items()}


def stub_source(text: str, stubs: Mapping[str, Exercised], path: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with every top-level ``def`` named in ``stubs`` made a stub; the new text and the names stubbed.

    Raises:
      ClaimsError: a function to stub whose body does not start on a line of its own (``def f(): ...``).
    """
    lines = io.StringIO(text, newline="").readlines()  # the lines ast counts (str.splitlines also splits at \f)
    functions = [node for node in ast.parse(text, filename=path).body
                 if isinstance(node, _FUNCTIONS) and node.name in stubs]
    for node in reversed(functions):  # from the bottom up, so that the line numbers above stay right
        body = node.body
        docstring = body[0] if _is_docstring(body[0]) else None
        code = body[1:] if docstring else body
        first = docstring or code[0]
        if not _starts_its_line(lines[first.lineno - 1], first.col_offset) or (
                docstring and code and code[0].lineno == docstring.end_lineno):
            raise ClaimsError(f"{path}:{node.lineno}: the body of '{node.name}' shares a line with the code before "
                              "it; put each statement of it on a line of its own in the reference")
        indent = _indent(lines[first.lineno - 1])
        kept_until = docstring.end_lineno if docstring else _after_header(lines, first.lineno - 1)
        # A JSON string is a valid Python string literal, and in the double quotes the project writes.
        message = json.dumps(stubs[node.name].message(node.name), ensure_ascii=False)
        stub = f"{indent}raise NotImplementedError({message})\n"
        lines[kept_until:body[-1].end_lineno] = [stub]
        header = (node.decorator_list[0] if node.decorator_list else node).lineno - 1
        lines.insert(header, f"{_indent(lines[header])}{stubs[node.name].comment()}\n")
    return "".join(lines), tuple(node.name for node in functions)


def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def _after_header(lines: list[str], first: int) -> int:
    """The index of the line after a header whose body's first statement is ``lines[first]``.

    The lines in between are blank or comments (the header's last line ends with its colon), and belong
    to the body, as the comments on how it is done.
    """
    while first > 0 and (not lines[first - 1].strip() or lines[first - 1].lstrip().startswith("#")):
        first -= 1
    return first


def _starts_its_line(line: str, col_offset: int) -> bool:
    return not line.encode("utf-8")[:col_offset].strip()  # ast counts columns in UTF-8 bytes


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


@dataclass(frozen=True)
class Exercises:
    """What ``write_exercises`` wrote.

    Attributes:
      package: the exercises' package name (the directory's name).
      directory: where it is.
      reference: the reference implementation it was made from.
      stubs: each module file (relative to the package) -> the functions made stubs in it.
      kept: each contract function the reference offers that is kept as it is -> why.
      files: every file written, relative to the package.
      root: the course's root, where the next commands run.
      claims_dir: the claim files, relative to the root.
    """

    package: str
    directory: Path
    reference: str
    stubs: dict[str, tuple[str, ...]]
    kept: dict[str, str]
    files: tuple[str, ...]
    root: Path
    claims_dir: str

    @property
    def stub_count(self) -> int:
        return sum(len(names) for names in self.stubs.values())

    def summary(self) -> str:
        """What was written, what was kept, and the commands that run the claims against it."""
        lines = [f"claims exercises: {_count(self.stub_count, 'stub')} in {_count(len(self.stubs), 'module')} of "
                 f"{self.directory}/ (package '{self.package}', {_count(len(self.files), 'file')} from the reference "
                 f"'{self.reference}')"]
        if self.kept:
            lines.append("kept from the reference as they are: "
                         + ", ".join(f"{name} ({why})" for name, why in self.kept.items()))
        parent = self.directory.parent.resolve()
        python_path = "" if parent == self.root.resolve() else f"PYTHONPATH={shlex.quote(str(parent))} "
        # A partial verdict: the checks of functions still to be written are not judged, which would fail the run.
        lines += [f"next, from {self.root}:",
                  f"  {python_path}pytest {self.claims_dir}/ --claims-impl {self.package} {PARTIAL_FLAG}",
                  f"  {python_path}claims verify --claims-impl {self.package} --claims-report {self.package}-report "
                  f"{PARTIAL_FLAG}"]
        return "\n".join(lines)


def write_exercises(directory: Path, catalogue: Catalogue, *, force: bool = False, torch: tuple[str, ...] = ()
                    ) -> Exercises:
    """Write the course's reference implementation into ``directory`` with every contract function a stub.

    Args:
      directory: the package to write; its name is the package's name.
      catalogue: the course's claims, which say where each function is exercised.
      force: write into a directory that is not empty (replacing only the files written).
      torch: the modules (by name, as ``losses``) whose stubs are to be written in PyTorch: each imports torch and
        says so (``__claims_array_library__``), so the harness hands its functions tensors.

    Raises:
      ClaimsError: the name cannot be the package's, the directory is not empty (without ``force``), or
        the reference cannot be found or imports itself by its own name.
    """
    course = catalogue.course
    package = directory.name
    reference = course.implementation
    _refuse_name(package, directory, {reference.partition(".")[0]: "the reference implementation",
                                      course.verifiers.partition(".")[0]: "the verifier package",
                                      __name__.partition(".")[0]: "the harness"})
    if directory.exists() and not directory.is_dir():
        raise ClaimsError(f"{directory}: exists and is not a directory; name a new directory for the exercises")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise ClaimsError(f"{directory}: not empty; name a new directory, or pass --force to replace the files the "
                          "exercises write there")
    sources = _reference_sources(reference)
    functions = contract_functions()
    where = exercised(catalogue)
    stubs = {name: where.get(name, Exercised((), (), ())) for name in functions}
    written: dict[str, str] = {}
    stubbed: dict[str, tuple[str, ...]] = {}
    classes: set[str] = set()
    for relative, path in sources.items():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        _refuse_absolute_self_imports(tree, reference, path)
        classes.update(node.name for node in tree.body if isinstance(node, ast.ClassDef))
        written[relative], names = stub_source(text, stubs, str(path))
        if names:
            stubbed[relative] = names
    unknown = sorted(set(torch) - {relative.removesuffix(".py").replace("/", ".") for relative in written})
    if unknown:
        raise ClaimsError(f"--torch {' '.join(unknown)}: no such module in the reference; name one of "
                          f"{', '.join(sorted(relative.removesuffix('.py') for relative in stubbed))}")
    for module in torch:
        relative = module.replace(".", "/") + ".py"
        written[relative] = _in_torch(written[relative])
    done = {name for names in stubbed.values() for name in names}
    offered = importlib.import_module(reference)
    kept = {name: "a class" if name in classes else "not defined by a top-level def"
            for name in functions if name not in done and hasattr(offered, name)}
    for relative, text in written.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return Exercises(package, directory, reference, stubbed, kept, tuple(written), course.root,
                     os.path.relpath(catalogue.claims_dir, course.root))


def _in_torch(source: str) -> str:
    """``source`` as a PyTorch module: ``import torch`` and the declaration, after the docstring and ``__future__``."""
    tree = ast.parse(source)
    body = tree.body
    position = 0
    while position < len(body) and (
            (position == 0 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant))
            or (isinstance(body[position], ast.ImportFrom) and body[position].module == "__future__")):
        position += 1
    lines = source.splitlines(keepends=True)
    cut = body[position - 1].end_lineno if position else 0
    declaration = ("\nimport torch\n\n__claims_array_library__ = \"torch\"  # the harness hands these functions "
                   "torch.float64 tensors\n")
    return "".join(lines[:cut]) + declaration + "".join(lines[cut:])


def _refuse_name(package: str, directory: Path, taken: Mapping[str, str]) -> None:
    if not package.isidentifier() or keyword.iskeyword(package):
        raise ClaimsError(f"{directory}: '{package}' is not a Python package name; name the directory with letters, "
                          "digits and underscores, not starting with a digit (e.g. exercises)")
    if package in taken:
        raise ClaimsError(f"{directory}: '{package}' is the name of {taken[package]}, which the exercises would "
                          "hide; name the directory otherwise (e.g. exercises)")


def _reference_sources(reference: str) -> dict[str, Path]:
    """Each Python file of the reference, by its path in the package (a single module becomes ``__init__.py``)."""
    try:
        spec = importlib.util.find_spec(reference)
    except (ImportError, ValueError) as error:
        spec, cause = None, f" ({error})"
    else:
        cause = ""
    if spec is None or spec.origin is None:
        raise ClaimsError(f"the reference implementation '{reference}' ([tool.claims] implementation) cannot be "
                          f"found{cause}; run from the course's root, or install the course")
    if spec.submodule_search_locations is None:
        return {"__init__.py": Path(spec.origin)}
    package = Path(next(iter(spec.submodule_search_locations)))
    return {path.relative_to(package).as_posix(): path for path in sorted(package.rglob("*.py"))}


def _refuse_absolute_self_imports(tree: ast.Module, reference: str, path: Path) -> None:
    """A reference module that imports the reference by name would make the copy use the reference there."""
    for node in ast.walk(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        for name in names:
            if name == reference or name.startswith(f"{reference}."):
                raise ClaimsError(f"{path}:{node.lineno}: the reference imports '{name}' by its name, so the "
                                  "exercises would use the reference there; make the import relative "
                                  "(from .module import name)")

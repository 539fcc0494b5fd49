"""The import rules that keep the judge, the course and the code under test apart.

- ``harness/`` (the engine) imports none of a course's packages: the implementation, the verifiers,
  the zoo, the examples and the tests reach it by the names in ``[tool.claims]``, never by an import.
- ``verifiers/`` never import ``impl``: the implementation under test is handed to them.
- ``impl/`` imports nothing of this project: it is what a student copies.
- The engine's source names no course: no package of this course appears in it as a string either.
Every import counts, at any depth of a file (inside functions and ``TYPE_CHECKING`` blocks too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
COURSE = ("impl", "verifiers", "zoo", "examples", "tests")
OURS = ("harness", *COURSE)


def _imported(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports (relative imports stay within its package)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


def _files(package: str) -> list[Path]:
    return sorted((PROJECT / package).rglob("*.py"))


@pytest.mark.parametrize(("package", "forbidden"), [
    ("harness", COURSE),
    ("verifiers", ("impl", "zoo", "examples", "tests")),
    ("impl", OURS),
])
def test_a_layer_imports_nothing_it_must_not(package, forbidden):
    found = {f"{path.relative_to(PROJECT)} imports {name}" for path in _files(package)
             for name in _imported(path) & set(forbidden) if not (package == "impl" and name == "impl")}
    assert not found, sorted(found)


def test_the_engine_names_no_course():
    """The engine's code neither names this course nor imports one of its packages by a string.

    (``impl`` alone is also the name of a results field, and ``verifiers`` of a configuration key:
    as the argument of an import they would be the course's packages.)
    """
    importers = {"import_module", "find_spec", "__import__"}
    found = []
    for path in _files("harness"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.lower() in ("zoo", "module4", "module_4", "module 4"):
                found.append(f"{path.relative_to(PROJECT)}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Call) and _called(node) in importers \
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                    and node.args[0].value.partition(".")[0] in COURSE:
                found.append(f"{path.relative_to(PROJECT)}:{node.lineno}: imports {node.args[0].value!r}")
    assert not found, found


def _called(node: ast.Call) -> str | None:
    return getattr(node.func, "attr", getattr(node.func, "id", None))


def test_the_zoo_runs_as_its_own_command():
    assert (PROJECT / "zoo" / "__main__.py").is_file()

"""The import rules that keep the judge, the course and the code under test apart.

- ``harness/`` (the engine) imports none of a course's packages: the implementation, the verifiers,
  the zoo, the examples and the tests reach it by the names in ``[tool.claims]``, never by an import.
- ``verifiers/`` never import ``impl``: the implementation under test is handed to them.
- ``impl/`` imports nothing of this project: it is what a student copies.
- The engine's source names no course: no package of this course appears in it as a string either.
- Within ``harness/``, each subpackage imports only the layers below it (its ``__init__`` says which),
  and no module imports itself back through others.
Every import counts, at any depth of a file (inside functions and ``TYPE_CHECKING`` blocks too).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
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


# What each subpackage of the harness may import, besides itself and the leaves every layer may use:
# claims_harness.stats, claims_harness.strategies (the properties' vocabulary) and claims_harness.errors, which import
# nothing of the harness but each other.
ENGINE = "claims_harness"  # the import name of the folder harness/
LEAVES = ("harness.stats", "harness.strategies", "harness._strategy_base", "harness.errors")
LAYERS = {
    "_claims": set(),
    "_text": {"_claims"},
    "_running": {"_claims"},
    "_power": {"_claims", "_running", "_text"},
    "_reporting": {"_claims", "_running", "_text", "_power"},
    "_authoring": {"_claims", "_running", "_text", "_reporting"},
}


def _harness_imports(path: Path) -> set[str]:
    """The harness modules ``path`` imports, by dotted name (``from claims_harness import x`` counts as ``harness``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.partition(".")[0] == ENGINE:
            names.add(_in_folder(node.module))
        elif isinstance(node, ast.Import):
            names |= {_in_folder(alias.name) for alias in node.names if alias.name.partition(".")[0] == ENGINE}
    return names


def _in_folder(name: str) -> str:
    """A module's import name as the name of its file under harness/ (``claims_harness.x`` -> ``harness.x``)."""
    return "harness" + name[len(ENGINE):]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _harness_graph() -> dict[str, set[str]]:
    return {_module_name(path): _harness_imports(path) for path in _files("harness")}


@pytest.mark.parametrize("layer", list(LAYERS))
def test_a_subpackage_of_the_harness_imports_only_the_layers_below_it(layer):
    allowed = {layer, *LAYERS[layer]}
    found = []
    for module, imported in _harness_graph().items():
        if module.split(".")[1:2] != [layer]:
            continue
        for name in imported:
            parts = name.split(".")
            if name in LEAVES or (len(parts) > 1 and parts[1] in allowed):
                continue
            found.append(f"{module} imports {name}")
    assert not found, sorted(found)


def test_the_leaves_import_nothing_of_the_harness_but_each_other():
    graph = _harness_graph()
    assert graph["harness._running.driver"], "the graph sees the harness's imports"
    found = {f"{leaf} imports {name}" for leaf in LEAVES for name in graph[leaf] if name not in LEAVES}
    assert not found, sorted(found)


def test_the_harness_has_no_import_circle():
    graph = _harness_graph()
    state: dict[str, str] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(graph.get(module, ()) - {"harness"}):
            if state.get(imported) == "open":
                raise AssertionError(" -> ".join([*trail, module, imported]))
            if imported not in state:
                visit(imported, [*trail, module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_every_module_of_the_harness_has_its_line_in_the_architecture_page():
    page = (PROJECT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [str(path.relative_to(PROJECT)) for path in _files("harness")
               if path.name != "__init__.py" and f"`{path.name}`" not in page]
    assert not missing, f"add a line for each to docs/architecture.md's table of modules: {missing}"


def test_every_verifier_module_is_placed_on_the_axis_the_package_states():
    """verifiers/__init__.py says the modules are arranged by subject and names each: a new module is placed
    there by name, so that a module by lesson or by origin beside the subjects is seen in review."""
    stated = (PROJECT / "verifiers" / "__init__.py").read_text(encoding="utf-8")
    unplaced = [path.stem for path in sorted((PROJECT / "verifiers").glob("*.py"))
                if not path.stem.startswith("_") and f"``{path.stem}``" not in stated]
    assert not unplaced, f"name each in verifiers/__init__.py's list of subjects (or fold it into one): {unplaced}"


def test_the_tests_go_through_the_public_surfaces():
    """Tests reach the engine through ``claims_harness``, ``claims_harness.engine`` and ``claims_harness.errors``;
    an import of a private module (``claims_harness._*``) is for what only a unit of it can show. Issue 45 set the
    ceiling at 40 such import statements."""
    private = re.compile(r"^\s*(from claims_harness\._\w+|import claims_harness\._\w+|from claims_harness import _)",
                         re.MULTILINE)
    found = {str(path.relative_to(PROJECT)): len(private.findall(path.read_text(encoding="utf-8")))
             for path in (PROJECT / "tests").rglob("*.py")}
    assert sum(found.values()) <= 40, ("import what the tests need from claims_harness.engine (export it there if a "
                                       f"tool would need it too): {sorted(found.items(), key=lambda kv: -kv[1])[:8]}")


def test_every_subpackage_says_what_it_may_import():
    for layer in LAYERS:
        assert "May import:" in (PROJECT / "harness" / layer / "__init__.py").read_text(encoding="utf-8"), layer


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
    done = subprocess.run([sys.executable, "-m", "zoo", "no_such_variant"], cwd=PROJECT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no such variant in the zoo: no_such_variant" in done.stderr and "k3_as_k1" in done.stderr

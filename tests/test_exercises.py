"""``claims exercises DIR``: the reference as stubs to fill in, for Module 4 and for the second course.

What the student gets must be the reference with only the contract functions' bodies gone: the
same signatures and docstrings, every other line byte for byte, a package that imports and is its
own (``check_implementation``), and stubs of the one shape the engine counts as "not implemented
yet". Whether a run against it reports them so is the engine's test; these only generate.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import course_catalogue

from claims_harness import Catalogue, ClaimsError, load_catalogue
from claims_harness._authoring.exercises import Exercised, Exercises, stub_source
from claims_harness.cli import main as claims_main
from claims_harness.engine import check_implementation, contract_functions, write_exercises

PROJECT = Path(__file__).resolve().parents[1]
COURSE_TWO = PROJECT / "tests" / "course_two"
PACKAGE = "exercises_under_test"


def forget(*packages: str) -> None:
    """Drop ``packages`` and their modules from ``sys.modules``, so that a later import reads the files afresh."""
    for name in [name for name in sys.modules if name.partition(".")[0] in packages]:
        del sys.modules[name]


def stub_shape(node: ast.FunctionDef) -> str | None:
    """The message of a stub (a docstring, then one ``raise NotImplementedError("...")``); None for another body."""
    match node.body:
        case [ast.Expr(value=ast.Constant(value=str())),
              ast.Raise(exc=ast.Call(func=ast.Name(id="NotImplementedError"), args=[ast.Constant(value=str(message))],
                                     keywords=[]), cause=None)]:
            return message
    return None


def first_line(node: ast.stmt) -> int:
    """Where a top-level statement starts: its first decorator's line, for a decorated one."""
    decorators = getattr(node, "decorator_list", [])
    return (decorators[0] if decorators else node).lineno


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return course_catalogue()


@pytest.fixture(scope="module")
def module4(tmp_path_factory, catalogue) -> Iterator[Exercises]:
    """The Module 4 exercises, written once, on ``sys.path`` while this file's tests run."""
    directory = tmp_path_factory.mktemp("module4") / PACKAGE
    written = write_exercises(directory, catalogue)
    sys.path.insert(0, str(directory.parent))
    importlib.invalidate_caches()
    yield written
    sys.path.remove(str(directory.parent))
    forget(PACKAGE)


def reference_defs() -> dict[str, set[str]]:
    """Each file of the reference -> the contract functions it defines with a top-level ``def``."""
    contract = set(contract_functions())
    return {path.name: {node.name for node in ast.parse(path.read_text(encoding="utf-8")).body
                        if isinstance(node, ast.FunctionDef) and node.name in contract}
            for path in sorted((PROJECT / "impl").glob("*.py"))}


# --------------------------------------------------------------------------- Module 4


def test_every_contract_function_the_reference_defines_is_a_stub_of_the_one_shape(module4):
    defined = reference_defs()
    assert {name: set(names) for name, names in module4.stubs.items()} == {
        name: names for name, names in defined.items() if names}
    assert sorted(module4.files) == sorted(defined)
    for file, names in defined.items():
        reference = {node.name: node for node in ast.parse((PROJECT / "impl" / file).read_text(encoding="utf-8")).body
                     if isinstance(node, ast.FunctionDef)}
        for node in ast.parse((module4.directory / file).read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                message = stub_shape(node)
                assert message is not None and message.startswith(f"{node.name}: not implemented yet (step"), file
                assert ast.get_docstring(node, clean=False) == ast.get_docstring(reference[node.name], clean=False)
                assert ast.dump(node.args) == ast.dump(reference[node.name].args)
                assert [ast.dump(d) for d in node.decorator_list] == [
                    ast.dump(d) for d in reference[node.name].decorator_list]


def test_what_is_not_a_stub_is_the_references_byte_for_byte(module4):
    """Every other statement and every line between statements is the reference's; a stub gains one comment."""
    for file in module4.files:
        reference_text = (PROJECT / "impl" / file).read_text(encoding="utf-8")
        exercise_text = (module4.directory / file).read_text(encoding="utf-8")
        if file not in module4.stubs:
            assert exercise_text == reference_text, file
            continue
        reference_lines, exercise_lines = reference_text.splitlines(), exercise_text.splitlines()
        reference_nodes, exercise_nodes = ast.parse(reference_text).body, ast.parse(exercise_text).body
        assert len(reference_nodes) == len(exercise_nodes), file
        reference_end = exercise_end = 0
        for before, after in zip(reference_nodes, exercise_nodes, strict=True):
            stubbed = isinstance(after, ast.FunctionDef) and after.name in module4.stubs[file]
            gap = reference_lines[reference_end:first_line(before) - 1]
            comment = exercise_lines[first_line(after) - 2:first_line(after) - 1] if stubbed else []
            assert exercise_lines[exercise_end:first_line(after) - 1] == gap + comment, (file, after.lineno)
            if stubbed:
                assert comment[0].startswith("# Exercise (step"), comment
            else:
                assert ast.get_source_segment(exercise_text, after) == ast.get_source_segment(reference_text, before)
            reference_end, exercise_end = before.end_lineno, after.end_lineno
        assert exercise_lines[exercise_end:] == reference_lines[reference_end:], file


def test_the_stubs_keep_the_references_signatures_and_raise_naming_themselves(module4):
    import impl

    package = importlib.import_module(PACKAGE)
    for name in (name for names in module4.stubs.values() for name in names):
        stub, reference = getattr(package, name), getattr(impl, name)
        assert str(inspect.signature(stub)) == str(inspect.signature(reference)), name
        assert stub.__doc__ == reference.__doc__, name
        assert stub.__module__.partition(".")[0] == PACKAGE
        parameters = inspect.signature(stub).parameters.values()
        positional = [None for p in parameters if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                                                        p.POSITIONAL_OR_KEYWORD)]
        keywords = {p.name: None for p in parameters if p.default is p.empty and p.kind is p.KEYWORD_ONLY}
        with pytest.raises(NotImplementedError, match=f"^{name}: not implemented yet"):
            stub(*positional, **keywords)


def test_the_stubs_say_which_steps_and_claim_files_check_them(module4, catalogue):
    package = importlib.import_module(PACKAGE)
    gae = [entry for entry in catalogue.entries if not entry.broken
           and any("gae_advantages" in catalogue.verifiers[check.verifier].uses for check in entry.claim.checks)]
    with pytest.raises(NotImplementedError) as raised:
        package.gae_advantages(*[None] * 7)
    message = str(raised.value)
    for entry in gae:
        assert entry.where in message and entry.file in message
    source = (module4.directory / "gae.py").read_text(encoding="utf-8")
    assert f"checked by {len(gae)} claims.\ndef gae_advantages(" in source


def test_the_classes_of_the_contract_are_kept_and_listed(module4):
    import impl

    classes = [name for name in contract_functions() if inspect.isclass(getattr(impl, name, None))]
    assert classes and module4.kept == dict.fromkeys(classes, "a class")
    assert "kept from the reference as they are: " + ", ".join(f"{name} (a class)" for name in classes) \
        in module4.summary()


def test_the_exercises_are_their_own_implementation(module4):
    found = check_implementation(PACKAGE)
    assert found is not None and found.borrowed == {} and not found.declared
    assert {name for names in module4.stubs.values() for name in names} <= set(found.own)


# --------------------------------------------------------------------------- the second course


@pytest.fixture
def course_two(tmp_path, monkeypatch, restore_registry) -> Iterator[Path]:
    root = tmp_path / "course_two"
    shutil.copytree(COURSE_TWO, root)
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    yield root
    forget("toy_impl", "toy_verifiers", "toy_exercises")


def test_the_second_courses_reference_becomes_exercises(course_two):
    written = write_exercises(course_two / "toy_exercises", load_catalogue(course_two / "claims"))
    assert written.stubs == {"__init__.py": ("running_sum",)} and written.kept == {}
    source = (course_two / "toy_exercises" / "__init__.py").read_text(encoding="utf-8")
    assert '# Exercise (step lesson1/sums): checked by 1 claim.\ndef running_sum(values):\n' in source
    toy = importlib.import_module("toy_exercises")
    with pytest.raises(NotImplementedError, match=r"^running_sum: not implemented yet \(step lesson1/sums; see "
                                                  r"claims/lesson1\.yaml\)$"):
        toy.running_sum([1, 2])
    found = check_implementation("toy_exercises")
    assert found is not None and found.own == ("running_sum",) and found.borrowed == {}


def test_a_reference_that_imports_itself_by_name_is_refused(course_two):
    (course_two / "toy_impl" / "more.py").write_text("from toy_impl import running_sum\n", encoding="utf-8")
    with pytest.raises(ClaimsError, match=r"more\.py:1: the reference imports 'toy_impl' by its name.*make the "
                                          "import relative"):
        write_exercises(course_two / "toy_exercises", load_catalogue(course_two / "claims"))
    assert not (course_two / "toy_exercises").exists()


def test_the_command_writes_the_exercises_and_prints_the_next_commands(course_two, capsys):
    assert claims_main(["exercises", "toy_exercises"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "claims exercises: 1 stub in 1 module of toy_exercises/ (package 'toy_exercises', 1 file from the reference "
        "'toy_impl')",
        f"next, from {course_two}:",
        "  pytest claims/ --claims-impl toy_exercises --claims-partial",
        "  claims verify --claims-impl toy_exercises --claims-report toy_exercises-report --claims-partial",
    ]
    assert (course_two / "toy_exercises" / "__init__.py").is_file()


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("name", ["my-exercises", "1st_try", "class"])
def test_a_directory_whose_name_is_no_package_name_is_refused(tmp_path, catalogue, name):
    with pytest.raises(ClaimsError, match=f"'{name}' is not a Python package name; name the directory"):
        write_exercises(tmp_path / name, catalogue)
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(("name", "whose"), [("impl", "the reference implementation"),
                                             ("verifiers", "the verifier package"), ("claims_harness", "the harness")])
def test_a_name_the_course_uses_is_refused(tmp_path, catalogue, name, whose):
    with pytest.raises(ClaimsError, match=f"'{name}' is the name of {whose}, which the exercises would hide"):
        write_exercises(tmp_path / name, catalogue)


def test_a_directory_that_is_not_empty_is_refused_unless_forced(tmp_path, catalogue):
    directory = tmp_path / "exercises"
    directory.mkdir()
    (directory / "notes.txt").write_text("mine\n", encoding="utf-8")
    (directory / "gae.py").write_text("# my half-written GAE\n", encoding="utf-8")
    with pytest.raises(ClaimsError, match="exercises: not empty; name a new directory, or pass --force"):
        write_exercises(directory, catalogue)
    assert (directory / "gae.py").read_text(encoding="utf-8") == "# my half-written GAE\n"
    written = write_exercises(directory, catalogue, force=True)
    assert (directory / "notes.txt").read_text(encoding="utf-8") == "mine\n"  # not one of the files it writes
    assert "def gae_advantages(" in (directory / "gae.py").read_text(encoding="utf-8")
    assert sorted(path.name for path in directory.iterdir()) == sorted([*written.files, "notes.txt"])


def test_a_file_in_the_way_is_refused(tmp_path, catalogue):
    (tmp_path / "exercises").write_text("", encoding="utf-8")
    with pytest.raises(ClaimsError, match="exists and is not a directory"):
        write_exercises(tmp_path / "exercises", catalogue, force=True)


def test_the_command_refuses_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(PROJECT)
    assert claims_main(["exercises", str(tmp_path / "bad-name")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("claims exercises: ") and error.count("\n") == 1, error
    assert "'bad-name' is not a Python package name" in error


def test_the_command_names_the_path_to_the_exercises_when_they_are_elsewhere(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(PROJECT)
    assert claims_main(["exercises", str(tmp_path / "elsewhere")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("claims exercises: ") and " stubs in " in lines[0]
    assert lines[-3:] == [f"next, from {PROJECT}:",
                          f"  PYTHONPATH={tmp_path} pytest claims/ --claims-impl elsewhere --claims-partial",
                          f"  PYTHONPATH={tmp_path} claims verify --claims-impl elsewhere "
                          "--claims-report elsewhere-report --claims-partial"]


# --------------------------------------------------------------------------- layouts of a function


def test_the_layouts_a_stub_is_made_from():
    """No docstring, a decorator, comments in the body, async: each a stub; a body on the def line is refused."""
    text = '''\
import functools


@functools.cache
def cached(x):  # keeps its comment
    # how it is done
    return x


async def waited(x):
    """Waits."""

    y = x  # a step
    return y


def kept(x):
    return x
'''
    where = Exercised(("a/b",), ("one",), ("claims/a.yaml",))
    stubbed, names = stub_source(text, {"cached": where, "waited": where}, "m.py")
    assert names == ("cached", "waited")
    message = '"{}: not implemented yet (step a/b; see claims/a.yaml)"'
    assert stubbed == f'''\
import functools


# Exercise (step a/b): checked by 1 claim.
@functools.cache
def cached(x):  # keeps its comment
    raise NotImplementedError({message.format("cached")})


# Exercise (step a/b): checked by 1 claim.
async def waited(x):
    """Waits."""
    raise NotImplementedError({message.format("waited")})


def kept(x):
    return x
'''
    with pytest.raises(ClaimsError, match=r"m\.py:1: the body of 'inline' shares a line with the code before it"):
        stub_source('def inline(x): return x\n', {"inline": where}, "m.py")
    with pytest.raises(ClaimsError, match=r"m\.py:1: the body of 'inline'"):
        stub_source('def inline(x):\n    """Doc."""; return x\n', {"inline": where}, "m.py")
    # A form feed is no line break to ast; nor may it be one to the lines it counts.
    unchecked, _ = stub_source('PAGE = "\f"\ndef lonely():\n    return 1\n', {"lonely": Exercised((), (), ())}, "m.py")
    assert unchecked == ('PAGE = "\f"\n# Exercise: no claim checks it yet.\ndef lonely():\n'
                         '    raise NotImplementedError("lonely: not implemented yet (no claim checks it; see '
                         '\'claims verifiers\')")\n')


def test_only_a_not_implemented_error_the_implementation_raises_itself_is_a_stub(tmp_path, monkeypatch):
    """A stub raises NotImplementedError in its own body; one raised by a library it calls (scipy's lfilter on an
    object array, say) is the implementation's error, and must not turn its check into a skip."""
    from claims_harness._running.implementation import raised_in

    (tmp_path / "half_done").mkdir()
    (tmp_path / "half_done" / "__init__.py").write_text(
        "def stub():\n    raise NotImplementedError('stub: not implemented yet')\n\n\n"
        "def calls(library):\n    return library()\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    half_done = importlib.import_module("half_done")

    def library() -> None:
        raise NotImplementedError("input type 'object' not supported")

    for call, expected in ((half_done.stub, "stub"), (lambda: half_done.calls(library), None)):
        with pytest.raises(NotImplementedError) as raised:
            call()
        assert raised_in(raised.value, "half_done") == expected

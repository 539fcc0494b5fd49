"""The student's path through ``--impl``: a copy of ``impl/`` is what gets tested, and a wrong module is one error.

A student copies the reference (``cp -r impl student_rl``), plants or fixes something, and runs
``pytest claims/ --claims-impl student_rl``. The claims must then test the copy, not the reference it came
from; a module that hands the reference's own functions to the claims must say it means to; and a
module that cannot be imported is one error before anything is collected, for pytest and for
``claims verify`` alike. Runs are in-process ``pytester`` projects, as in ``test_plugin.py``.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sys
import types
from pathlib import Path

import pytest
from conftest import course_catalogue
from test_loading import claim, claim_file, claims_dir
from test_plugin import Project, real_node_ids

from claims_harness import ImplementationError, RunOptions, run_check
from claims_harness.cli import main as claims_main
from claims_harness.engine import FALLBACK_ATTRIBUTE, check_implementation, contract_functions, provenance

CACHE_DIR = Path(".claims-cache")  # the course's cache ([tool.claims] cache), from the course root

PROJECT = Path(__file__).resolve().parents[1]
GAE_FILE = "4.3-actor-critic-gae.yaml"
GAE_CLAIM = "claims/4.3-actor-critic-gae.yaml::gae-recursion-equals-sum"
# The claim's property check must catch GAE's single done flag; its symbolic proof uses no implementation.
SELECTION = ("-k", "gae-recursion-equals-sum")
PLANTED = ("(1 - (np.asarray(trace_cut_t) != 0)", "(1 - (np.asarray(terminated_t) != 0)")

RE_EXPORTS = """\
import impl
from impl import *  # noqa: F403
from impl import __all__  # noqa: F401
{declaration}

def gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_, *, carry=None):
    # the single done flag: the trace is cut only at terminations
    return impl.gae_advantages(r_t, v_t, v_tp1, terminated_t, terminated_t, gamma, lambda_, carry=carry)
"""


@pytest.fixture
def gae_project(pytester: pytest.Pytester) -> Project:
    project = Project(pytester)
    project.copy_real(GAE_FILE)
    return project


def copy_impl(root: Path, name: str = "student_rl") -> Path:
    """``cp -r impl <name>``, as a student would (without the byte-code)."""
    target = root / name
    shutil.copytree(PROJECT / "impl", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def plant(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} is not in {path} exactly once"
    path.write_text(text.replace(old, new), encoding="utf-8")


def write_module(root: Path, name: str, text: str) -> None:
    (root / f"{name}.py").write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- a copy of impl/ is the copy


def test_impl_imports_itself_only_relatively():
    """No absolute ``impl`` import anywhere in the package, nor a module name handed to importlib."""
    offenders = []
    for path in sorted((PROJECT / "impl").glob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#")[0]
            if (code.lstrip().startswith(("from impl", "import impl")) or 'import_module("impl' in code
                    or "import_module('impl" in code):
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert offenders == []


def test_a_copy_of_impl_is_tested_as_a_whole(gae_project, pytester):
    copy_impl(pytester.path)
    # Plain `pytest` (unlike `python -m pytest`) does not put the working directory on sys.path: the
    # harness looks there for the module, so no PYTHONPATH is needed next to the copy.
    assert str(pytester.path) not in sys.path
    run = gae_project.run("--claims-impl", "student_rl", *SELECTION)
    run.result.assert_outcomes(passed=2)
    assert "taken as given" not in run.text  # no function of the copy is the reference's


def test_a_bug_planted_in_a_copy_of_impl_fails_the_claim_that_catches_it(gae_project, pytester):
    student = copy_impl(pytester.path)
    plant(student / "gae.py", *PLANTED)
    run = gae_project.run("--claims-impl", "student_rl", *SELECTION)
    assert run.failed == [f"{GAE_CLAIM}::property"], run.text
    assert run.passed == [f"{GAE_CLAIM}::symbolic"]
    assert "implementation 'student_rl'" in run.text


def test_the_copys_own_loops_call_the_copys_functions(pytester, monkeypatch):
    """The GRU loop's default building blocks are its own package's, not the reference's."""
    copy_impl(pytester.path)
    monkeypatch.syspath_prepend(str(pytester.path))
    try:
        student = importlib.import_module("student_rl")
        assert student.gae_advantages.__module__ == "student_rl.gae"
        assert student.actor_critic.gae_advantages is student.gae_advantages

        class Called(Exception):
            pass

        def gru_init(*args):
            raise Called

        monkeypatch.setattr(student, "gru_init", gru_init)
        with pytest.raises(Called):
            student.train_gru_policy(seed=0, iterations=1)
    finally:
        for name in [name for name in sys.modules if name.partition(".")[0] == "student_rl"]:
            del sys.modules[name]


# --------------------------------------------------------------------------- the reference's own functions


def test_a_module_that_re_exports_the_reference_is_one_error_naming_the_functions(gae_project, pytester):
    write_module(pytester.path, "lazy_rl", RE_EXPORTS.format(declaration=""))
    run = gae_project.run("--claims-impl", "lazy_rl", *SELECTION)
    assert run.result.ret == pytest.ExitCode.USAGE_ERROR
    assert run.reports == []  # nothing collected, nothing run
    error = run.result.stderr.str()
    assert error.count("implementation 'lazy_rl'") == 1, error
    assert "are not defined in 'lazy_rl', so the claims would test them, not your code" in error
    policies = next(line for line in error.splitlines() if line.strip().startswith("impl.policies"))
    assert "(the reference's own)" in policies and "softmax" in policies.split(":", 1)[1]
    assert "gae_advantages" not in error.split("Define them")[0].split("not your code:")[1]  # its own one
    assert "--claims-allow-reference" in error and f"{FALLBACK_ATTRIBUTE} = True" in error


def test_reference_fallbacks_run_when_the_command_line_allows_them(gae_project, pytester):
    write_module(pytester.path, "lazy_rl", RE_EXPORTS.format(declaration=""))
    run = gae_project.run("--claims-impl", "lazy_rl", "--claims-allow-reference", *SELECTION)
    assert run.failed == [f"{GAE_CLAIM}::property"], run.text
    assert run.passed == [f"{GAE_CLAIM}::symbolic"]
    assert "implementation 'lazy_rl': under test: gae_advantages; " in run.text
    others = len(contract_functions()) - 1
    assert f"{others} other contract functions are the reference's, taken as given (allowed on the command line)" \
        in run.text
    # The reproduce command must start the same run.
    assert "--claims-impl lazy_rl --claims-profile smoke --claims-seed 0 --claims-allow-reference" in run.text


def test_reference_fallbacks_run_when_the_module_declares_them(gae_project, pytester):
    write_module(pytester.path, "declared_rl", RE_EXPORTS.format(declaration=f"{FALLBACK_ATTRIBUTE} = True\n"))
    run = gae_project.run("--claims-impl", "declared_rl", *SELECTION)
    assert run.failed == [f"{GAE_CLAIM}::property"], run.text
    assert f"are the reference's, taken as given ({FALLBACK_ATTRIBUTE} = True)" in run.text
    assert "--claims-allow-reference" not in run.text


def test_every_module_of_the_repository_that_starts_from_impl_declares_it():
    """examples/, zoo/ and tests/fixtures/ replace a few functions of impl on purpose, and say so."""
    starts_from_impl = [path for folder in ("examples", "zoo", "tests/fixtures")
                        for path in sorted((PROJECT / folder).rglob("*.py"))
                        if "from impl import *" in path.read_text(encoding="utf-8")]
    assert len(starts_from_impl) > 20
    undeclared = [str(path.relative_to(PROJECT)) for path in starts_from_impl
                  if f"\n{FALLBACK_ATTRIBUTE} = True" not in path.read_text(encoding="utf-8")]
    assert undeclared == []


def test_a_function_from_another_package_is_not_the_modules_own():
    module = types.ModuleType("scipy_rl")
    module.softmax = importlib.import_module("scipy.special").softmax
    module.log_softmax = lambda z: z  # defined "here": a lambda's module is the one that made it
    module.log_softmax.__module__ = "scipy_rl"
    found = provenance(module, ["softmax", "log_softmax", "gae_advantages"], importlib.import_module("impl"))
    assert found.own == ("log_softmax",)
    assert [name for names in found.borrowed.values() for name in names] == ["softmax"]
    assert all(module_name.startswith("scipy") for module_name in found.borrowed)


def test_the_declaration_must_be_true_or_false():
    module = types.ModuleType("vague_rl")
    setattr(module, FALLBACK_ATTRIBUTE, ["softmax"])
    with pytest.raises(ImplementationError, match=f"{FALLBACK_ATTRIBUTE} is \\['softmax'\\]; set it to True"):
        provenance(module, ["softmax"])


def test_the_reference_and_the_repositorys_variants_pass_the_check(monkeypatch):
    monkeypatch.syspath_prepend(str(PROJECT / "tests" / "fixtures"))
    assert check_implementation("impl") is None
    for name in ("examples.student_rl", "examples.alternatives.sb3_gae", "zoo.single_done_flag"):
        found = check_implementation(name)
        assert found is not None and found.declared and found.own, name
    # A reference function bound to another name is not "the reference's" for that name: it is under test.
    try:
        module = importlib.import_module("loo_as_centered")
    finally:
        sys.modules.pop("loo_as_centered", None)
    found = provenance(module, ["leave_one_out_advantages", "softmax"], importlib.import_module("impl"))
    assert (found.own, found.as_reference) == ((), ("softmax",))
    assert "under test: leave_one_out_advantages; 1 other contract functions are the reference's" in found.summary()


# --------------------------------------------------------------------------- an implementation that does not import


def test_an_unimportable_implementation_is_one_error_and_the_checks_that_need_none_still_run(gae_project, pytester):
    run = gae_project.run("--claims-impl", "no_such_impl_module", "--claims-report", "out")
    assert run.result.ret == pytest.ExitCode.TESTS_FAILED
    (error,) = run.errors()
    assert error.nodeid == "::claims-implementation"
    assert "cannot import the implementation 'no_such_impl_module'" in error.longreprtext
    assert "No module named 'no_such_impl_module'" in error.longreprtext
    assert run.text.count("cannot import the implementation") == 2, run.text  # the error, and its summary line
    assert run.failed == [] and run.check_errors() == []
    # The sympy proofs (and whatever else calls no function) ran; every check that calls one was skipped.
    assert any(node.endswith("::symbolic") for node in run.passed)
    assert len(real_node_ids()) > 100  # what used to be as many errors
    results = json.loads((pytester.path / "out" / "claims.json").read_text(encoding="utf-8"))
    assert results["run"]["complete"] is False and "could not be imported" in results["run"]["incomplete"]
    not_run = [check for row in results["claims"] for check in row["checks"] if check["status"] == "not judged"]
    assert not_run and all(check["uses"] and check["not_judged"] == "not imported" for check in not_run)


def test_an_unimportable_implementation_is_one_error_under_xdist_too(gae_project):
    run = gae_project.run("--claims-impl", "no_such_impl_module", "-n", "2")
    run.result.assert_outcomes(passed=len(real_node_ids(kind="symbolic", file=GAE_FILE)),
                               skipped=len(real_node_ids(file=GAE_FILE)) - len(real_node_ids(kind="symbolic",
                                                                                              file=GAE_FILE)),
                               errors=1)


def test_an_implementation_that_raises_on_import_names_the_error_and_the_line(gae_project, pytester):
    write_module(pytester.path, "half_written", "import numpy as np\n\n\nsoftmax = np.exp(undefined_name)\n")
    run = gae_project.run("--claims-impl", "half_written", *SELECTION)
    (error,) = run.errors()
    assert ("cannot import the implementation 'half_written': NameError: name 'undefined_name' is not defined"
            in error.longreprtext)
    assert "half_written.py:4)" in error.longreprtext


def test_a_check_that_uses_no_implementation_does_not_import_it():
    """A sympy proof runs whatever --claims-impl names; only the checks that call the implementation need it."""
    catalogue = course_catalogue()
    (entry,) = [entry for entry in catalogue.entries if entry.id == "gae-recursion-equals-sum"]
    statuses = {}
    for index, check in enumerate(entry.claim.checks):
        result = run_check(entry, index, catalogue.verifiers[check.verifier], RunOptions(impl="no_such_impl_module"))
        statuses[check.kind] = (result.status, result.error or "")
    assert statuses["symbolic"] == ("passed", "")
    assert statuses["property"][0] == "error"
    assert "cannot import the implementation 'no_such_impl_module'" in statuses["property"][1]


# --------------------------------------------------------------------------- claims verify


def test_claims_verify_refuses_an_unimportable_implementation_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    claims_dir(tmp_path, {"a.yaml": claim_file(claim("bernoulli-gradient"))})
    sources = (tmp_path / "Module_4_Sources.md").read_text(encoding="utf-8")
    assert claims_main(["verify", "--claims-impl", "nonexistent", "--claims-profile", "smoke",
                        "--claims-report", "tmp"]) == 2
    error = capsys.readouterr().err
    assert "claims verify: cannot import the implementation 'nonexistent'" in error
    assert "no report written" in error
    assert not (tmp_path / "tmp").exists()
    assert not (tmp_path / CACHE_DIR).exists()
    assert (tmp_path / "Module_4_Sources.md").read_text(encoding="utf-8") == sources


def test_claims_verify_refuses_undeclared_reference_fallbacks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    claims_dir(tmp_path, {"a.yaml": claim_file(claim("bernoulli-gradient"))})
    write_module(tmp_path, "lazy_rl", RE_EXPORTS.format(declaration=""))
    try:
        assert claims_main(["verify", "--claims-impl", "lazy_rl", "--claims-profile", "smoke",
                            "--claims-report", "tmp"]) == 2
    finally:
        sys.modules.pop("lazy_rl", None)
    error = capsys.readouterr().err
    assert "claims verify: implementation 'lazy_rl':" in error
    assert "pass --allow-reference or set" in error  # the option of this command, not pytest's
    assert not (tmp_path / "tmp").exists()
    assert str(tmp_path) not in sys.path  # the working directory was looked in, as pytest would, then left


def test_the_counts_examples_readme_states_are_the_committed_reports():
    """examples/README.md says how many claims its committed report passes and fails: the report's own counts."""
    stated = re.search(r"(\d+) claims pass and (\d+) fail", (PROJECT / "examples" / "README.md").read_text(
        encoding="utf-8"))
    assert stated, "examples/README.md no longer says how many claims its report passes and fails"
    results = json.loads((PROJECT / "examples" / "report" / "claims.json").read_text(encoding="utf-8"))
    counts = results["summary"]["claims"]
    assert (int(stated[1]), int(stated[2])) == (counts["passed"], counts["failed"]), (
        "examples/README.md's counts differ from examples/report/claims.json: write the regenerated report's")

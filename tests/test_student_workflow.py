"""The student's workflow after the copy: exercises to fill in, a scoreboard by function, failures that
name the function, the syllabus's names, and the pytest conventions a student relies on.

``tests/test_student_path.py`` covers what comes first (a copy of ``impl/`` is what gets tested, a
wrong module is one error); ``tests/test_exercises.py`` covers how ``claims exercises`` writes its
stubs. Runs are in-process ``pytester`` projects, as in ``test_plugin.py``.
"""

from __future__ import annotations

import ast
import json
import pickle
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from conftest import checks_using, course_catalogue, outcomes_against
from test_plugin import Project, real_node_ids
from test_student_path import PLANTED, PROJECT, copy_impl, plant

from claims_harness.engine import is_stub, load_course, run_isolated, write_exercises
from claims_harness.errors import ClaimsError, NotImplementedYet

PPO_FILE = "4.4-ppo.yaml"
K3_CLAIMS = ("k3-nonnegative", "k3-unbiased-for-kl")
KEY_TEST = "test_surrogate_reduces_to_reinforce_at_theta_old"


def exercises_in(project: Project, name: str = "exercises") -> Path:
    """``claims exercises <name>`` in the project, for the real course's claims."""
    write_exercises(project.root / name, course_catalogue())
    return project.root / name


def fill_in(package: Path, function: str) -> None:
    """Replace the stub ``function`` with the reference's definition, as a student who wrote it would."""
    for path in package.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        stub = next((node for node in ast.parse(text).body
                     if isinstance(node, ast.FunctionDef) and node.name == function), None)
        if stub is None:
            continue
        reference = (PROJECT / "impl" / path.name).read_text(encoding="utf-8")
        (written,) = [node for node in ast.parse(reference).body
                      if isinstance(node, ast.FunctionDef) and node.name == function]
        lines, reference_lines = text.splitlines(keepends=True), reference.splitlines(keepends=True)
        start = stub.decorator_list[0].lineno if stub.decorator_list else stub.lineno
        lines[start - 1:stub.end_lineno] = reference_lines[written.lineno - 1:written.end_lineno]
        path.write_text("".join(lines), encoding="utf-8")
        return
    raise AssertionError(f"no stub {function} in {package}")


def planted_project(pytester: pytest.Pytester) -> Project:
    """The GAE claims, and ``student_rl``: a copy of impl/ whose GAE has the single done flag."""
    project = Project(pytester)
    project.copy_real("4.3-actor-critic-gae.yaml")
    plant(copy_impl(pytester.path) / "gae.py", *PLANTED)
    return project


@pytest.fixture
def ppo_project(pytester: pytest.Pytester) -> Project:
    project = Project(pytester)
    project.copy_real(PPO_FILE)
    return project


# --------------------------------------------------------------------------- what a stub is


STUBS = '''\
def documented(x):
    """What it computes."""
    raise NotImplementedError("documented: not implemented yet")


def bare(x): raise NotImplementedError


def written(x):
    """Done."""
    return x


def raises_later(x):
    if x:
        raise NotImplementedError
    return x


def raises_something_else(x):
    raise ValueError("no")
'''


def test_a_stub_is_a_docstring_and_a_raise_of_not_implemented_error(tmp_path, monkeypatch):
    (tmp_path / "stubs_module.py").write_text(STUBS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__("stubs_module")
    found = {name: is_stub(getattr(module, name)) for name in
             ("documented", "bare", "written", "raises_later", "raises_something_else")}
    assert found == {"documented": True, "bare": True, "written": False, "raises_later": False,
                     "raises_something_else": False}
    assert not is_stub(len) and not is_stub(np.add) and not is_stub(None) and not is_stub(int)


def test_not_implemented_crosses_the_workers_boundary_with_its_functions():
    def needs_stubs() -> None:
        raise NotImplementedYet(["gae_advantages", "td_errors"])

    with pytest.raises(NotImplementedYet) as raised:
        run_isolated(needs_stubs, 10.0, "a check")
    assert raised.value.functions == ("gae_advantages", "td_errors")
    assert pickle.loads(pickle.dumps(raised.value)).functions == raised.value.functions


# --------------------------------------------------------------------------- exercises, run


def test_the_exercises_unmodified_are_one_summary_and_no_error_wall(ppo_project):
    exercises_in(ppo_project)
    run = ppo_project.run("--claims-impl", "exercises", "-rs", "--claims-partial")
    # A partial verdict, as the exercises' next commands ask: nothing failed, and it says how much was judged.
    assert run.result.ret == pytest.ExitCode.OK
    (last,) = [line for line in run.text.splitlines() if line.startswith("claims: ")]
    assert last.startswith("claims: partial verdict (--claims-partial): judged ") and " not judged: " in last, last
    assert "wait for functions not written yet" in last
    outcomes = run.result.parseoutcomes()
    assert "failed" not in outcomes and "errors" not in outcomes and "error" not in outcomes, run.text
    # Checks that need no implementation (sympy proofs) still run and pass.
    assert outcomes.get("passed", 0) > 0 and outcomes["skipped"] > 0
    assert any(node.endswith("::symbolic") for node in run.passed)
    (summary,) = [line for line in run.text.splitlines() if line.startswith("not implemented yet: ")
                  and "functions;" in line]
    assert summary.endswith("of which 0 fail")
    assert "not implemented yet (" in run.text  # the functions, listed once
    assert "Traceback" not in run.text and "NotImplementedError" not in run.text
    # Without it, checks not judged are not green: the run fails, nothing having failed, and says why.
    refused = ppo_project.run("--claims-impl", "exercises", "-k", "k3-nonnegative")
    assert refused.failed == [] and refused.result.ret == pytest.ExitCode.TESTS_FAILED
    assert "claims: not green: judged " in refused.text and "--claims-partial" in refused.text


def test_filling_in_one_function_turns_exactly_its_claims_green(ppo_project):
    package = exercises_in(ppo_project)
    before = ppo_project.run("--claims-impl", "exercises", "-k", "k3 or kl")
    fill_in(package, "kl_k3")
    after = ppo_project.run("--claims-impl", "exercises", "-k", "k3 or kl")
    assert after.failed == [] and after.errors() == []
    newly_passed = sorted(set(after.passed) - set(before.passed))
    k3_only = sorted(node for claim in K3_CLAIMS for node in real_node_ids(claim=claim, file=PPO_FILE)
                     if not node.endswith("::symbolic"))
    # Every check of the k3 claims that uses only kl_k3 (all of them but the one that also needs
    # probability_ratios) now passes; nothing else changed.
    assert newly_passed and set(newly_passed) <= set(k3_only), newly_passed
    assert set(before.passed) <= set(after.passed)
    assert "implemented: 1, of which 0 fail" in after.text or "implemented: 3, of which 0 fail" in after.text


def test_a_stub_reached_through_another_function_is_not_implemented_not_an_error(pytester):
    project = Project(pytester)
    project.copy_real("4.3-actor-critic-gae.yaml")
    package = exercises_in(project)
    fill_in(package, "gae_advantages")  # it calls td_errors, still a stub
    run = project.run("--claims-impl", "exercises", "-k", "gae-recursion-equals-sum", "-rs")
    assert run.failed == [] and run.errors() == []
    assert "not implemented yet: td_errors" in run.text


# --------------------------------------------------------------------------- failures name the function


def test_a_failure_names_the_function_and_the_step_first(pytester):
    project = planted_project(pytester)
    run = project.run("--claims-impl", "student_rl", "-k", "gae-recursion-equals-sum")
    assert run.failed == ["claims/4.3-actor-critic-gae.yaml::gae-recursion-equals-sum::property"]
    report = next(r for r in run.reports if r.failed)
    first = report.longreprtext.splitlines()[0]
    assert first.startswith("gae_advantages (step 4.3.3): claim 'gae-recursion-equals-sum' does not hold"), first
    text = report.longreprtext
    # The failing input: the student's function, called with its own parameter names, and a line to rerun it.
    assert "call 1: gae_advantages(r_t, v_t, v_tp1, terminated_t, trace_cut_t, gamma, lambda_" in text
    assert "reproduce: import numpy as np; from student_rl import gae_advantages; gae_advantages(r_t=np.array(" \
        in text
    # The scoreboard opens with the failing function.
    assert "functions of student_rl" in run.text
    (row,) = [line for line in run.text.splitlines() if line.startswith("gae_advantages ")
              and line.split()[1].isdigit()]
    assert row.split()[1:4] == ["1", "0", "1"]  # one claim, none passed, one failed


def test_the_reproduction_line_reproduces_what_the_function_returned(pytester, monkeypatch):
    project = planted_project(pytester)
    project.run("--claims-impl", "student_rl", "-k", "gae-recursion-equals-sum", "--claims-report", "out")
    results = json.loads((pytester.path / "out" / "claims.json").read_text(encoding="utf-8"))
    (check,) = [check for row in results["claims"] for check in row["checks"] if check["status"] == "failed"]
    example = check["observed"]["falsifying_example"]
    monkeypatch.syspath_prepend(str(pytester.path))
    namespace: dict[str, object] = {}
    statement, _, call = example["reproduce"].rpartition("; ")
    exec(statement, namespace)  # noqa: S102 (the harness's own output, in a test)
    returned = eval(call, namespace)  # noqa: S307
    assert repr(returned.tolist()) == repr(eval(example["calls"][0]["returned"], namespace).tolist())  # noqa: S307
    markdown = (pytester.path / "out" / "claims_report.md").read_text(encoding="utf-8")
    assert "## Functions of `student_rl`" in markdown
    assert markdown.index("## Functions of") < markdown.index("## Summary")
    assert "gae_advantages (step 4.3.3): claim 'gae-recursion-equals-sum' does not hold" in markdown
    assert results["functions"][0]["function"] == "gae_advantages" and results["functions"][0]["failed"] == 1


def test_the_reference_gets_no_scoreboard(ppo_project):
    run = ppo_project.run("-k", "k3-nonnegative", "--claims-report", "out")
    assert "functions of" not in run.text
    results = json.loads((ppo_project.root / "out" / "claims.json").read_text(encoding="utf-8"))
    assert results["functions"] == []


def test_the_functions_a_run_takes_from_the_reference_are_marked_given(ppo_project, pytester):
    (pytester.path / "partial_rl.py").write_text(textwrap.dedent("""\
        import numpy as np
        from impl import *  # noqa: F403
        __claims_reference_fallback__ = True

        def kl_k3(log_ratio):
            return -np.asarray(log_ratio, dtype=float)  # k1, not k3
        """), encoding="utf-8")
    # kl_k3's own checks; the training runs that call it too would mark the same functions, in half a minute.
    run = ppo_project.run("--claims-impl", "partial_rl", "-k", "kl_k3 and not experiment", "--claims-report", "out")
    assert run.failed
    results = json.loads((ppo_project.root / "out" / "claims.json").read_text(encoding="utf-8"))
    rows = {row["function"]: row for row in results["functions"]}
    assert not rows["kl_k3"]["given"] and rows["kl_k3"]["failed"] >= 1
    assert rows["probability_ratios"]["given"]
    assert results["run"]["given"] and "kl_k3" not in results["run"]["given"]
    assert "implemented: 1, of which 1 fails" in run.text
    assert "the reference's, taken as given (" in run.text


# --------------------------------------------------------------------------- the syllabus's names


def test_the_key_test_of_the_syllabus_selects_its_claims(pytester):
    project = Project(pytester)
    project.copy_real()
    run = project.run("-k", "surrogate_reduces_to_reinforce", "--collect-only", "-q")
    selected = sorted(line for line in run.text.splitlines() if line.startswith("claims/"))
    expected = sorted(real_node_ids(claim="surrogate-gradient-equals-policy-gradient-at-old")
                      + real_node_ids(claim="per-step-surrogate-is-another-objective"))
    assert selected == expected


def test_a_function_name_selects_the_checks_that_exercise_it(ppo_project):
    run = ppo_project.run("-k", "kl_k3", "--collect-only", "-q")
    selected = {line.split("::")[1] for line in run.text.splitlines() if line.startswith("claims/")}
    assert set(K3_CLAIMS) <= selected


def test_junit_xml_names_the_functions_the_step_and_the_aliases(ppo_project):
    ppo_project.run("-k", "surrogate-gradient-equals-policy-gradient-at-old and property", "--junitxml=junit.xml")
    cases = list(ET.parse(ppo_project.root / "junit.xml").getroot().iter("testcase"))
    assert cases
    for case in cases:
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert properties["claim_id"] == "surrogate-gradient-equals-policy-gradient-at-old"
        assert properties["where"] == "4.4.1"
        assert properties["aliases"] == KEY_TEST
        assert {"surrogate_objective", "surrogate_objective_grad", "surrogate_loss"} & \
            set(properties["functions"].split(","))


# The week-16 exercise's functions, written as a student might (einsum, np.where), not as impl writes them.
SYLLABUS_LOSSES = (PROJECT / "examples" / "syllabus_rl.py").read_text(encoding="utf-8")
SYLLABUS_FUNCTIONS = ("reinforce_loss", "surrogate_loss", "ppo_clip_loss", "clip_diagnostics", "mean_baseline",
                      "rloo_baseline")


def test_the_syllabus_losses_written_another_way_pass_and_an_inverse_ratio_surrogate_fails_the_key_test(tmp_path):
    (tmp_path / "syllabus_rl.py").write_text(SYLLABUS_LOSSES, encoding="utf-8")
    outcomes = outcomes_against("syllabus_rl", checks_using(SYLLABUS_FUNCTIONS), tmp_path)
    statuses = [outcome.status for outcome in outcomes.values()]
    assert statuses.count("passed") >= 7 and {"failed", "error"}.isdisjoint(statuses), \
        {node: outcome.message for node, outcome in outcomes.items() if outcome.status != "passed"}
    inverse = SYLLABUS_LOSSES + """
def surrogate_loss(logp, logp_old, adv, mask=None):
    logp, adv, mask = _tokens(logp, adv, mask)
    return np.einsum("bt,bt->", mask, np.exp(np.asarray(logp_old) - logp) * adv) / mask.sum()
"""
    (tmp_path / "inverse_rl.py").write_text(inverse, encoding="utf-8")
    outcomes = outcomes_against("inverse_rl", checks_using(["surrogate_loss"]), tmp_path)
    failed = {node.split("::")[1] for node, outcome in outcomes.items() if outcome.status == "failed"}
    assert failed == {"surrogate-gradient-equals-policy-gradient-at-old", "per-step-surrogate-is-another-objective"}, \
        {node: outcome.status for node, outcome in outcomes.items()}
    messages = "\n".join(outcome.message for outcome in outcomes.values())
    assert "against the ratio-weighted -mask r Â / Σ mask at" in messages


def test_a_course_that_still_declares_aliases_is_told_the_field_is_unknown(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        (PROJECT / "pyproject.toml").read_text(encoding="utf-8")
        + '\n[tool.claims.aliases]\nsurrogate_loss = { function = "surrogate_objective", relation = "negated_mean" }\n',
        encoding="utf-8")
    with pytest.raises(ClaimsError, match="unknown field 'aliases'"):
        load_course(tmp_path)


# --------------------------------------------------------------------------- pytest conventions


def test_last_failed_reruns_only_what_failed(pytester):
    planted_project(pytester)
    first = pytester.runpytest_inprocess("claims", "--claims-impl", "student_rl", "-k", "gae-recursion-equals-sum")
    first.assert_outcomes(passed=1, failed=1)
    again = pytester.runpytest_inprocess("claims", "--claims-impl", "student_rl", "--lf")
    again.assert_outcomes(failed=1)
    assert "gae-recursion-equals-sum::property" in again.stdout.str()


def test_shrinking_in_the_smoke_profile_gives_the_smallest_input_on_request(pytester):
    project = planted_project(pytester)
    quick = project.run("--claims-impl", "student_rl", "-k", "gae-recursion-equals-sum and property")
    assert "add --claims-shrink to the reproduce command for the smallest" in quick.text
    shrunk = project.run("--claims-impl", "student_rl", "-k", "gae-recursion-equals-sum and property",
                         "--claims-shrink")
    text = next(r for r in shrunk.reports if r.failed).longreprtext
    assert "the smallest failing input found" in text
    assert text.rstrip().endswith("--claims-shrink")  # the reproduce command shrinks too
    # Two steps are the fewest that show the single done flag: a cut that is not a termination, then any step.
    (arguments,) = [line for line in text.splitlines() if line.strip().startswith("r_t = ")]
    assert arguments.count(",") <= 2, arguments

"""The pytest plugin end to end: throwaway projects of claim files, run with ``pytester``.

Every project is a ``claims/`` directory of YAML files with a ``Module_4_Sources.md`` beside
it. The plugin loads through its ``pytest11`` entry point and the real verifiers come from the
installed project. Runs are in-process so that their reports can be inspected directly.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from claims_harness._pytest_hooks import _longest_first
from claims_harness.engine import RunOptions, evaluate, every_part, load_catalogue

PROJECT = Path(__file__).resolve().parents[1]
REAL_CLAIMS = PROJECT / "claims"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODELINE = "# yaml-language-server: $schema=schema.json\n"

SOURCES = """\
# Sources of the test project

### williams1992
Williams, R. J. (1992). Simple statistical gradient-following algorithms for connectionist
reinforcement learning. *Machine Learning*, 8(3-4), 229-256.
- Identifier: doi:10.1007/BF00992696

### ahmadian2024
Ahmadian, A., et al. (2024). Back to basics: Revisiting REINFORCE style optimization for
learning from human feedback in LLMs.
- Identifier: arXiv:2402.14740
"""

BASELINES = "4.2-baselines.yaml"
LOO = "claims/4.2-baselines.yaml::loo-identity"
BERNOULLI = "claims/4.2-baselines.yaml::bernoulli-group-estimators"


def good_claim(claim_id: str, gradient: str = "0.273") -> str:
    """A claim with one fast exact check (enumeration of 2^8 groups) that passes as written."""
    return f"""\
  - id: {claim_id}
    where: "4.2.5"
    statement: The one-step Bernoulli policy's logit gradient is 0.273.
    sources: [williams1992]
    checks:
      - kind: exact
        verifier: bernoulli.group_estimators_exact
        params: {{p: 0.35, reward_success: 1, reward_failure: -0.2, group_size: 8}}
        expect:
          gradient: {gradient}
          group_mean_ratio: {{exact: "7/8"}}
"""


def claim_file(*claims: str, title: str = "Lesson T: a test lesson") -> str:
    return f'{MODELINE}title: "{title}"\nsteps: ["4.2.4", "4.2.5"]\nclaims:\n' + "".join(claims)


def line_of(text: str, needle: str) -> int:
    """The 1-based number of the first line of ``text`` containing ``needle``."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in the text")


@dataclass
class Run:
    """One in-process pytest run: its terminal output and every test report."""

    result: pytest.RunResult
    reports: list[pytest.TestReport]

    @property
    def text(self) -> str:
        return self.result.stdout.str()

    def nodeids(self, outcome: str, when: str) -> list[str]:
        return [r.nodeid for r in self.reports if r.outcome == outcome and r.when == when]

    @property
    def passed(self) -> list[str]:
        return self.nodeids("passed", "call")

    @property
    def failed(self) -> list[str]:
        return self.nodeids("failed", "call")

    def errors(self) -> list[pytest.TestReport]:
        """Claims and files that cannot be used: they error in setup."""
        return [r for r in self.reports if r.failed and r.when == "setup"]

    def check_errors(self) -> list[pytest.TestReport]:
        """Checks that ran and could not decide (status ``error``): pytest failures whose message says ERROR."""
        return [r for r in self.reports if r.failed and r.when == "call" and "\nERROR: " in r.longreprtext]

    def the_error(self) -> pytest.TestReport:
        errors = self.errors()
        assert len(errors) == 1, [r.nodeid for r in errors]
        return errors[0]

    def report(self, nodeid: str, when: str = "call") -> pytest.TestReport:
        (found,) = [r for r in self.reports if r.nodeid == nodeid and r.when == when]
        return found


class Project:
    """A throwaway claims project inside ``pytester.path``."""

    def __init__(self, pytester: pytest.Pytester):
        self.pytester = pytester
        self.root = pytester.path
        self.claims = self.root / "claims"
        self.claims.mkdir()
        (self.root / "Module_4_Sources.md").write_text(SOURCES, encoding="utf-8")

    def write(self, name: str, text: str) -> str:
        (self.claims / name).write_text(text, encoding="utf-8")
        return text

    def copy_real(self, *names: str) -> None:
        """Copy real claim files (all of them by default) and the real sources registry."""
        for path in sorted(REAL_CLAIMS.glob("*.yaml")):
            if not names or path.name in names:
                shutil.copy(path, self.claims / path.name)
        shutil.copy(PROJECT / "Module_4_Sources.md", self.root / "Module_4_Sources.md")

    def run(self, *args: str) -> Run:
        result = self.pytester.runpytest_inprocess("claims", "-p", "no:cacheprovider", *args)
        return Run(result, result.reprec.getreports("pytest_runtest_logreport"))


class Loaded:
    """What the plugin collects from a project, found without a pytest session: the error of each part that cannot
    be used (by node id, as the plugin reports it in setup) and the node id of each check that would run."""

    def __init__(self, project: Project):
        catalogue = load_catalogue(project.claims)
        options = RunOptions(profile="smoke", cache_dir=None)
        parts = every_part(catalogue)
        self.errors = {part.key: evaluate(part, catalogue, options).message for part in parts if part.index is None}
        self.checks = [part.key for part in parts if part.index is not None]

    def the_error(self) -> tuple[str, str]:
        assert len(self.errors) == 1, self.errors
        return next(iter(self.errors.items()))


@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    return Project(pytester)


def real_node_ids(kind: str | None = None, claim: str | None = None, file: str = "*.yaml") -> list[str]:
    """Node ids of the real claim files, derived from the YAML independently of the plugin."""
    ids = []
    for path in sorted(REAL_CLAIMS.glob(file)):
        for entry in yaml.safe_load(path.read_text(encoding="utf-8"))["claims"] or []:
            counts: Counter[str] = Counter()
            for check in entry["checks"]:
                counts[check["kind"]] += 1
                name = check["kind"] if counts[check["kind"]] == 1 else f"{check['kind']}-{counts[check['kind']]}"
                if (kind is None or check["kind"] == kind) and (claim is None or entry["id"] == claim):
                    ids.append(f"claims/{path.name}::{entry['id']}::{name}")
    return ids


# --------------------------------------------------------------------------- loading errors
#
# Each defect gives exactly one error item, located at file:line with the claim id, the field
# and a fix, while the other claims keep running. The first test runs a pytest session to see the
# error item and the other claims pass; the rest read what the plugin would collect (Loaded): the
# messages are the loader's, and no session is needed to read them.


def test_a_file_that_is_not_yaml_is_one_error_naming_file_and_line(project):
    text = project.write("a-broken.yaml", claim_file("""\
  - id: unclosed-bracket
    where: "4.2.5"
    statement: the list of sources is never closed
    sources: [williams1992
    checks: []
"""))
    project.write("b-good.yaml", claim_file(good_claim("still-runs")))
    run = project.run()
    run.result.assert_outcomes(errors=1, passed=1)
    error = run.the_error()
    assert error.nodeid == "claims/a-broken.yaml::file-problems"
    # PyYAML notices the unclosed bracket on the line after the one that opens it; either will do.
    opened = line_of(text, "sources: [williams1992")
    assert re.match(rf"claims/a-broken\.yaml:({opened}|{opened + 1}): not valid YAML: expected ',' or ']'",
                    error.longreprtext)
    assert run.passed == ["claims/b-good.yaml::still-runs::exact"]


def test_unknown_verifier_names_the_check_line_and_suggests_the_right_name(project):
    text = project.write("claims.yaml", claim_file(good_claim("first-good"), """\
  - id: misspelt-verifier
    where: "4.2.4"
    statement: the verifier's name has a typo
    sources: [ahmadian2024]
    checks:
      - kind: symbolic
        verifier: baselines.loo_idnetity
        expect:
          residual: {exact: 0}
""", good_claim("last-good")))
    loaded = Loaded(project)
    nodeid, message = loaded.the_error()
    assert nodeid == "claims/claims.yaml::misspelt-verifier::load-error"
    check_line = line_of(text, "- kind: symbolic")
    assert message == (
        f"claims/claims.yaml:{check_line}: claim 'misspelt-verifier', check 1, field 'verifier': "
        "unknown verifier 'baselines.loo_idnetity'; did you mean 'baselines.loo_identity'?")
    assert loaded.checks == ["claims/claims.yaml::first-good::exact", "claims/claims.yaml::last-good::exact"]


def test_duplicate_id_across_files_errors_on_the_second_and_names_the_first(project):
    first = project.write("a.yaml", claim_file(good_claim("shared-id")))
    second = project.write("b.yaml", claim_file(good_claim("b-before"), good_claim("shared-id")))
    loaded = Loaded(project)
    nodeid, message = loaded.the_error()
    assert nodeid == "claims/b.yaml::shared-id::load-error"
    first_line = line_of(first, "- id: shared-id")
    second_line = line_of(second, "- id: shared-id")
    assert message.startswith(f"claims/b.yaml:{second_line}: claim 'shared-id', field 'id': duplicate id 'shared-id'")
    assert f"first defined at claims/a.yaml:{first_line}" in message
    assert sorted(loaded.checks) == ["claims/a.yaml::shared-id::exact", "claims/b.yaml::b-before::exact"]


def test_duplicate_id_in_one_file_keeps_both_nodes_apart(project):
    text = project.write("a.yaml", claim_file(good_claim("twice"), good_claim("twice")))
    loaded = Loaded(project)
    first_line, second_line = [n for n, line in enumerate(text.splitlines(), 1) if "- id: twice" in line]
    assert loaded.the_error()[0] == f"claims/a.yaml::twice@{second_line}::load-error"
    assert f"first defined at claims/a.yaml:{first_line}" in loaded.the_error()[1]


def test_unknown_source_key_names_the_key_and_the_registry(project):
    text = project.write("a.yaml", claim_file(good_claim("good"), """\
  - id: unknown-source
    where: "4.2.5"
    statement: cites a paper the registry does not have
    sources: [williams1992, nosuchpaper2031]
    checks:
      - kind: exact
        verifier: bernoulli.group_estimators_exact
        params: {p: 0.35, reward_success: 1, reward_failure: -0.2, group_size: 8}
        expect:
          gradient: 0.273
"""))
    loaded = Loaded(project)
    message = loaded.the_error()[1]
    assert message.startswith(f"claims/a.yaml:{line_of(text, 'sources: [williams1992, nosuchpaper2031]')}: "
                              "claim 'unknown-source', "
                              "field 'sources': unknown source 'nosuchpaper2031'")
    assert "add it to Module_4_Sources.md as a '### nosuchpaper2031' heading" in message
    assert "ahmadian2024, williams1992" in message  # the keys that are defined


UNSAFE_TAG_CLAIM = """\
  - id: unsafe-tag
    where: "4.2.5"
    statement: !!python/object/apply:os.system ["touch pwned"]
    sources: [williams1992]
    checks:
      - kind: exact
        verifier: bernoulli.group_estimators_exact
        params: {p: 0.35, reward_success: 1, reward_failure: -0.2, group_size: 8}
        expect:
          gradient: 0.273
"""


def test_python_tag_is_refused_and_never_executed(project):
    text = project.write("a.yaml", claim_file(good_claim("good"), UNSAFE_TAG_CLAIM))
    loaded = Loaded(project)
    assert not (project.root / "pwned").exists()
    nodeid, message = loaded.the_error()
    assert nodeid == "claims/a.yaml::unsafe-tag::load-error"
    assert message.startswith(f"claims/a.yaml:{line_of(text, 'statement: !!python')}: claim 'unsafe-tag'")
    assert "the tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed" in message
    assert "claim files are data only" in message


def test_python_tag_error_names_the_field(project):
    project.write("a.yaml", claim_file(UNSAFE_TAG_CLAIM))
    loaded = Loaded(project)
    assert "field 'statement'" in loaded.the_error()[1]


def test_misspelt_field_suggests_the_right_one(project):
    text = project.write("a.yaml", claim_file("""\
  - id: misspelt-field
    where: "4.2.5"
    statement: the check's verifier key is misspelt
    sources: [williams1992]
    checks:
      - kind: exact
        verfier: bernoulli.group_estimators_exact
        expect:
          gradient: 0.273
""", good_claim("good")))
    loaded = Loaded(project)
    nodeid, message = loaded.the_error()
    assert nodeid == "claims/a.yaml::misspelt-field::load-error"
    assert (f"claims/a.yaml:{line_of(text, 'verfier:')}: claim 'misspelt-field', check 1, field 'verfier': "
            "unknown field 'verfier'; did you mean 'verifier'?") in message


ALIAS_CLAIMS = """\
  - id: anchored
    where: "4.2.5"
    statement: &words The one-step Bernoulli policy's logit gradient is 0.273.
    sources: [williams1992]
    checks:
      - kind: exact
        verifier: bernoulli.group_estimators_exact
        params: {p: 0.35, reward_success: 1, reward_failure: -0.2, group_size: 8}
        expect:
          gradient: 0.273
  - id: aliased
    where: "4.2.5"
    statement: *words
    sources: [williams1992]
    checks:
      - kind: exact
        verifier: bernoulli.group_estimators_exact
        params: {p: 0.35, reward_success: 1, reward_failure: -0.2, group_size: 8}
        expect:
          gradient: 0.273
"""


def test_alias_fails_only_its_claim(project):
    project.write("a.yaml", claim_file(ALIAS_CLAIMS))
    project.write("b.yaml", claim_file(good_claim("elsewhere")))
    loaded = Loaded(project)
    nodeid, message = loaded.the_error()
    assert nodeid == "claims/a.yaml::aliased::load-error"
    assert re.match(r"claims/a\.yaml:\d+: claim 'aliased': ", message)
    assert "an alias (*name) reuses the value anchored" in message
    assert "write the value out" in message
    assert loaded.checks == ["claims/a.yaml::anchored::exact", "claims/b.yaml::elsewhere::exact"]


def test_alias_error_points_into_the_aliased_claim(project):
    text = project.write("a.yaml", claim_file(ALIAS_CLAIMS))
    loaded = Loaded(project)
    line = int(re.match(r"claims/a\.yaml:(\d+):", loaded.the_error()[1]).group(1))
    assert line >= line_of(text, "- id: aliased")


@pytest.mark.parametrize("written", [".nan", "-.inf", "{less_than: .inf}"])
def test_non_finite_expectation_is_an_error(project, written):
    text = project.write("a.yaml", claim_file(good_claim("good"), good_claim("not-finite", gradient=written)))
    loaded = Loaded(project)
    nodeid, message = loaded.the_error()
    assert nodeid == "claims/a.yaml::not-finite::load-error"
    gradient_line = [n for n, line in enumerate(text.splitlines(), 1) if "gradient:" in line][1]
    assert message.startswith(f"claims/a.yaml:{gradient_line}: claim 'not-finite', check 1, "
                                         "field 'expect.gradient")
    assert "expected a finite number" in message


def test_missing_modeline_is_a_file_error_and_claims_still_run(project):
    project.write("a.yaml", claim_file(good_claim("good")).removeprefix(MODELINE))
    loaded = Loaded(project)
    nodeid, message = loaded.the_error()
    assert nodeid == "claims/a.yaml::file-problems"
    assert message == ("claims/a.yaml:1: the first line is not the schema modeline; start the file with "
                                  f"'{MODELINE.strip()}' so editors validate it")


# --------------------------------------------------------------------------- failing checks


def perturbed_project(project: Project) -> str:
    project.copy_real(BASELINES)
    path = project.claims / "4.2-baselines.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count("gradient: {exact: 0.273}") == 1
    path.write_text(text.replace("gradient: {exact: 0.273}", "gradient: {exact: 0.283}"), encoding="utf-8")
    return text


def test_perturbed_expected_number_fails_its_check(project):
    perturbed_project(project)
    run = project.run("-k", "bernoulli-group-estimators and exact")
    run.result.assert_outcomes(failed=1, deselected=len(real_node_ids(file=BASELINES)) - 1)
    assert run.failed == [f"{BERNOULLI}::exact"]
    text = run.text
    assert "FAILED gradient: expected exactly 0.283" in text
    assert "observed 0.273" in text
    assert "ok     no_baseline: expected exactly 0.273" in text
    assert re.search(r"reproduce: pytest 'claims/4\.2-baselines\.yaml::bernoulli-group-estimators::exact' "
                     r"--claims-impl impl .*--claims-seed 0", text)


def test_failure_is_reported_at_the_check_in_the_yaml_file(project):
    text = perturbed_project(project)
    run = project.run("-k", "bernoulli-group-estimators and exact")
    report = run.report(f"{BERNOULLI}::exact")
    check_line = line_of(text, "- kind: exact")
    # reportinfo: the location is the check's line in the YAML file (0-based), not the plugin's code.
    assert report.location == ("claims/4.2-baselines.yaml", check_line - 1,
                               f"claims/4.2-baselines.yaml:{check_line}: bernoulli-group-estimators::exact (4.2.5)")
    section = run.text.split("= FAILURES =", 1)[1]
    assert re.search(r"_+ claims/4\.2-baselines\.yaml:\d+: bernoulli-group-estimators::exact \(4\.2\.5\) _+", section)
    assert f"defined at claims/4.2-baselines.yaml:{check_line}" in section


def test_failure_headline_names_the_yaml_file(project):
    perturbed_project(project)
    run = project.run("-k", "bernoulli-group-estimators and exact")
    (headline,) = [line for line in run.text.splitlines() if "bernoulli-group-estimators::exact (4.2.5)" in line]
    assert "4.2-baselines.yaml" in headline


def test_junit_xml_carries_claim_properties(project):
    project.copy_real(BASELINES)
    run = project.run("-k", "bernoulli-group-estimators and exact", "--junitxml=junit.xml")
    run.result.assert_outcomes(passed=1, deselected=len(real_node_ids(file=BASELINES)) - 1)
    (case,) = ET.parse(project.root / "junit.xml").getroot().iter("testcase")
    assert case.get("name") == "exact"
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["claim_id"] == "bernoulli-group-estimators"
    assert properties["where"] == "4.2.5"
    assert properties["sources"] == "williams1992,ahmadian2024"
    assert properties["functions"] == ("bernoulli_logit_score,score_function_gradient,group_centered_advantages,"
                                       "leave_one_out_advantages")
    assert "claims_result" not in properties  # the whole result is the report's, not every JUnit case's


# --------------------------------------------------------------------------- implementations


@pytest.fixture
def buggy_impl(pytester: pytest.Pytester) -> None:
    pytester.syspathinsert(FIXTURES)


# The claims of the module's first draft: two that concern leave-one-out and one that does not.
# The real claim files grow (and more of their claims rightly catch this bug), so running all of
# them would take a minute; the selection is pinned, and the rest of the fixture implementation is
# checked to be the reference one directly.
LOO_CLAIMS = ("loo-identity", "bernoulli-group-estimators")
CONTROL_CLAIMS = ("k3-nonnegative",)


def test_loo_as_centered_is_the_reference_but_for_leave_one_out(buggy_impl):
    impl = importlib.import_module("impl")
    try:
        loo_as_centered = importlib.import_module("loo_as_centered")
    finally:
        sys.modules.pop("loo_as_centered", None)
    assert loo_as_centered.__all__ == impl.__all__
    assert loo_as_centered.leave_one_out_advantages is impl.group_centered_advantages
    for name in impl.__all__:
        if name != "leave_one_out_advantages":
            assert getattr(loo_as_centered, name) is getattr(impl, name), name


def test_loo_as_centered_fails_exactly_the_two_loo_checks(project, buggy_impl):
    project.copy_real()
    claims = LOO_CLAIMS + CONTROL_CLAIMS
    run = project.run("--claims-impl", "loo_as_centered", "-m", "not montecarlo", "-k", " or ".join(claims))
    assert sorted(run.failed) == [f"{BERNOULLI}::exact", f"{LOO}::property"]
    assert run.errors() == []
    selected = [node for claim in claims for node in real_node_ids(claim=claim) if not node.endswith("::montecarlo")]
    passing = sorted(set(selected) - {f"{LOO}::property", f"{BERNOULLI}::exact"})
    assert f"{LOO}::symbolic" in passing
    assert any(node.split("::")[1] in CONTROL_CLAIMS for node in passing)
    assert sorted(run.passed) == passing
    assert "FAILED leave_one_out: expected exactly 0.273" in run.text
    assert "implementation 'loo_as_centered'" in run.text


def test_loo_as_centered_fails_the_montecarlo_check(project, buggy_impl):
    project.copy_real(BASELINES)
    run = project.run("--claims-impl", "loo_as_centered", "-k", "bernoulli-group-estimators and montecarlo")
    run.result.assert_outcomes(failed=1, deselected=len(real_node_ids(file=BASELINES)) - 1)
    assert run.failed == [f"{BERNOULLI}::montecarlo"]
    assert re.search(r"FAILED leave_one_out: expected 0\.273.*observed mean 0\.23", run.text)
    assert re.search(r"ok     no_baseline: .*observed mean 0\.27", run.text)


def test_claims_impl_environment_variable_selects_the_implementation(project, buggy_impl, monkeypatch):
    monkeypatch.setenv("CLAIMS_IMPL", "loo_as_centered")
    project.copy_real()
    run = project.run("-k", "loo-identity")
    run.result.assert_outcomes(passed=1, failed=1, deselected=len(real_node_ids()) - 2)
    assert run.passed == [f"{LOO}::symbolic"]
    assert run.failed == [f"{LOO}::property"]
    assert "implementation 'loo_as_centered'" in run.text


def test_implementation_lacking_a_function_errors_only_where_it_is_needed(project, pytester):
    pytester.makepyfile(partial_impl="""
        \"""The reference implementation without leave_one_out_advantages.\"""
        import impl

        __claims_reference_fallback__ = True

        for _name in impl.__all__:
            if _name != "leave_one_out_advantages":
                globals()[_name] = getattr(impl, _name)
    """)
    pytester.syspathinsert()
    project.copy_real(BASELINES)
    run = project.run("--claims-impl", "partial_impl", "-k", "loo-identity or bernoulli-group-estimators")
    run.result.assert_outcomes(failed=3, passed=1, deselected=len(real_node_ids(file=BASELINES)) - 4)
    assert run.passed == [f"{LOO}::symbolic"]
    errors = {r.nodeid: r.longreprtext for r in run.check_errors()}
    assert sorted(errors) == [f"{BERNOULLI}::exact", f"{BERNOULLI}::montecarlo", f"{LOO}::property"]
    assert ("implementation 'partial_impl' has no function 'leave_one_out_advantages' (needed by claim "
            "'loo-identity'") in errors[f"{LOO}::property"]
    assert ("has no function 'leave_one_out_advantages' (needed by claim 'bernoulli-group-estimators'"
            in errors[f"{BERNOULLI}::exact"])


def test_unimportable_implementation_is_one_error_not_one_per_check(project):
    project.copy_real(BASELINES)
    run = project.run("--claims-impl", "no_such_impl_module", "-k", "bernoulli-group-estimators and exact")
    run.result.assert_outcomes(skipped=1, errors=1)
    (error,) = run.errors()
    assert "cannot import the implementation 'no_such_impl_module'" in error.longreprtext


# --------------------------------------------------------------------------- reports


def report_project(project: Project) -> None:
    project.write("a.yaml", claim_file(good_claim("report-passes"), good_claim("report-fails", gradient="0.283")))
    project.write("b.yaml", claim_file("""\
  - id: report-broken
    where: "4.2.4"
    statement: names a verifier that does not exist
    sources: [ahmadian2024]
    checks:
      - kind: symbolic
        verifier: baselines.no_such_verifier
        expect:
          residual: {exact: 0}
"""))
    project.write("c.yaml", MODELINE + "title: [unclosed\n")


def without_timing(results: dict) -> dict:
    results = json.loads(json.dumps(results))
    del results["run"]["seconds"], results["run"]["started"], results["run"]["id"]
    for claim in results["claims"]:
        for check in claim["checks"]:
            del check["seconds"]
    return results


def test_claims_report_is_written_with_every_claim(project):
    report_project(project)
    run = project.run("--claims-report", "out")
    run.result.assert_outcomes(passed=1, failed=1, errors=2)
    results = json.loads((project.root / "out" / "claims.json").read_text(encoding="utf-8"))
    keys = list(results)
    assert keys[0] == "run" and keys.index("run") < keys.index("summary") < keys.index("claims"), keys
    assert results["run"]["impl"] == "impl"
    claims = {claim["id"]: claim for claim in results["claims"]}
    assert list(claims) == ["report-passes", "report-fails", "report-broken", "claims/c.yaml"]
    for claim in claims.values():
        assert {"id", "where", "status", "checks"} <= claim.keys()
    assert {key: claim["status"] for key, claim in claims.items()} == {
        "report-passes": "passed", "report-fails": "failed", "report-broken": "error", "claims/c.yaml": "error"}
    broken = claims["report-broken"]
    assert broken["checks"] == []
    assert len(broken["problems"]) == 1
    assert "unknown verifier 'baselines.no_such_verifier'" in broken["problems"][0]
    assert "not valid YAML" in claims["claims/c.yaml"]["problems"][0]
    (failing,) = claims["report-fails"]["checks"]
    assert failing["status"] == "failed"
    assert failing["expected"]["gradient"] == 0.283
    assert "--claims-seed 0" in failing["reproduce"]
    assert results["summary"]["claims"] == {"passed": 1, "failed": 1, "error": 2, "not judged": 0, "skipped": 0}
    markdown = (project.root / "out" / "claims_report.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Claims report: Module 4")
    for claim_id in claims:
        assert f"`{claim_id}`" in markdown


def test_claims_report_under_xdist_matches_the_serial_run(project):
    report_project(project)
    project.run("--claims-report", "serial").result.assert_outcomes(passed=1, failed=1, errors=2)
    parallel = project.run("-n", "2", "-p", "no:benchmark", "--claims-report", "parallel")
    parallel.result.assert_outcomes(passed=1, failed=1, errors=2)
    assert "2 workers" in parallel.text
    serial_results = json.loads((project.root / "serial" / "claims.json").read_text(encoding="utf-8"))
    parallel_results = json.loads((project.root / "parallel" / "claims.json").read_text(encoding="utf-8"))
    assert without_timing(parallel_results) == without_timing(serial_results)
    assert (project.root / "parallel" / "claims_report.md").is_file()


# --------------------------------------------------------------------------- node ids and selection


def collected(project: Project, *args: str) -> list[str]:
    result = project.pytester.runpytest_inprocess("claims", "--collect-only", "-q", "-p", "no:cacheprovider", *args)
    return [line for line in result.stdout.lines if "::" in line]


NODE_ID = re.compile(r"^claims/[^/:]+\.ya?ml::(file-problems|[a-z0-9-]+(@\d+)?::([a-z]+(-\d+)?|load-error))$")


def test_collect_only_lists_every_check_in_file_and_claim_order(project):
    project.copy_real()
    listing = collected(project)
    assert collected(project) == listing
    first_claims = LOO_CLAIMS + CONTROL_CLAIMS
    for node in listing:
        assert NODE_ID.match(node), node
    files = [node.split("::")[0] for node in listing]
    assert files == sorted(files)
    assert listing.index(f"{LOO}::symbolic") + 1 == listing.index(f"{LOO}::property")
    # The claims of the first draft, in file and claim order, with their checks in order.
    first = [node for node in listing if node.split("::")[1] in first_claims]
    assert first == [node for node in real_node_ids() if node.split("::")[1] in first_claims]
    assert first[:4] == [f"{LOO}::symbolic", f"{LOO}::property", f"{BERNOULLI}::exact", f"{BERNOULLI}::montecarlo"]


def test_collect_only_of_the_real_claims_matches_their_yaml(project):
    project.copy_real()
    assert collected(project) == real_node_ids()


def test_xdist_workers_take_the_longest_first_as_the_driver_orders_them(project):
    """Without a last report, by kind (experiments, then properties, each in claim order); with one, by the seconds
    it gives each check."""
    project.copy_real()
    items, _ = project.pytester.inline_genitems("claims", "-p", "no:cacheprovider")
    config = items[0].config
    ordered = _longest_first(items, config)
    assert sorted(item.nodeid for item in ordered) == sorted(item.nodeid for item in items)
    kinds = [item.nodeid.split("::")[-1].split("-")[0] for item in ordered]
    experiments, properties = kinds.count("experiment"), kinds.count("property")
    assert experiments and properties
    assert set(kinds[:experiments]) == {"experiment"}
    assert set(kinds[experiments:experiments + properties]) == {"property"}
    assert not {"experiment", "property"} & set(kinds[experiments + properties:])
    rest = [item for item in items if item in ordered[experiments + properties:]]
    assert ordered[experiments + properties:] == rest

    last = project.pytester.path / "last"
    last.mkdir()
    slowest = items[-1]  # an exact check or so, timed here as the slowest of all
    rows = [{"id": slowest.part.entry.id, "checks": [{"seconds": 0.0}] * slowest.part.index + [{"seconds": 99.0}]}]
    (last / "claims.json").write_text(json.dumps({"claims": rows}), encoding="utf-8")
    config.option.claims_report = str(last)
    assert _longest_first(items, config)[0] is slowest


def test_repeated_kind_gets_numbered_item_names(project):
    text = claim_file(good_claim("two-exact-checks"))
    check = text[text.index("      - kind: exact"):]
    project.write("a.yaml", text + check)
    assert collected(project) == ["claims/a.yaml::two-exact-checks::exact", "claims/a.yaml::two-exact-checks::exact-2"]


SYMBOLIC_CLAIM = """\
  - id: k3-critical-point
    where: "4.2.4"
    statement: (r - 1) - log r has its only critical point at r = 1, where it is 0.
    sources: [williams1992]
    checks:
      - kind: symbolic
        verifier: kl.k3_nonnegative_symbolic
        expect:
          critical_points: [{exact: 1}]
          value_at_critical_points: [{exact: 0}]
"""


def test_marker_selects_checks_by_kind(project):
    project.write("a.yaml", claim_file(good_claim("exact-one"), SYMBOLIC_CLAIM, good_claim("exact-two")))
    run = project.run("-m", "symbolic")
    run.result.assert_outcomes(passed=1, deselected=2)
    assert run.passed == ["claims/a.yaml::k3-critical-point::symbolic"]
    run = project.run("-m", "not symbolic")
    run.result.assert_outcomes(passed=2, deselected=1)
    assert run.passed == ["claims/a.yaml::exact-one::exact", "claims/a.yaml::exact-two::exact"]


def test_marker_selects_the_real_symbolic_checks(project):
    project.copy_real()
    assert collected(project, "-m", "symbolic") == real_node_ids(kind="symbolic")


def test_keyword_selects_one_claims_checks(project):
    # Collection only: running them (loo-identity's property check takes seconds) is covered by
    # test_claims_impl_environment_variable_selects_the_implementation, which runs this selection.
    project.copy_real()
    assert collected(project, "-k", "loo-identity") == real_node_ids(claim="loo-identity") == [
        f"{LOO}::symbolic", f"{LOO}::property"]


# --------------------------------------------------------------------------- misbehaving verifiers

MISBEHAVING_VERIFIERS = """
    import claims_harness

    @claims_harness.verifier("test.explodes", kind="exact")
    def explodes(ctx):
        raise RuntimeError("the verifier blew up on purpose")

    @claims_harness.verifier("test.forgets", kind="exact")
    def forgets(ctx):
        return {"something_else": 1}

    @claims_harness.verifier("test.not_a_mapping", kind="exact")
    def not_a_mapping(ctx):
        return [0.273]

    @claims_harness.verifier("test.undeclared", kind="exact")
    def undeclared(ctx):
        return {"value": ctx.impl.kl_k3(0.0)}
"""


def verifier_claim(claim_id: str, verifier: str) -> str:
    return f"""\
  - id: {claim_id}
    where: "4.2.5"
    statement: a claim whose verifier misbehaves
    sources: [williams1992]
    checks:
      - kind: exact
        verifier: {verifier}
        expect:
          value: 0.273
"""


def test_misbehaving_verifiers_are_errors_never_lost(project, pytester, restore_registry):
    pytester.makeconftest(MISBEHAVING_VERIFIERS)
    project.write("a.yaml", claim_file(
        verifier_claim("explodes", "test.explodes"), verifier_claim("forgets", "test.forgets"),
        good_claim("good"), verifier_claim("not-a-mapping", "test.not_a_mapping"),
        verifier_claim("undeclared", "test.undeclared")))
    run = project.run()
    run.result.assert_outcomes(failed=4, passed=1)
    errors = {r.nodeid.split("::")[1]: r.longreprtext for r in run.check_errors()}
    assert "RuntimeError: the verifier blew up on purpose" in errors["explodes"]
    assert "verifier 'test.explodes' (conftest.py:" in errors["explodes"]
    assert "verifier 'test.forgets' did not report 'value'; it reported: 'something_else'" in errors["forgets"]
    assert "verifier 'test.not_a_mapping' returned list" in errors["not-a-mapping"]
    assert "calls impl.kl_k3 without declaring it" in errors["undeclared"]
    assert run.passed == ["claims/a.yaml::good::exact"]


def test_pytest_leaves_the_verifiers_asserts_as_claims_verify_runs_them():
    """No verifier is rewritten: a failing check says under ``pytest claims/`` what it says under ``claims
    verify``, from its own message (the verifiers' comparison names the values it compared)."""
    import verifiers.gae

    assert type(verifiers.gae.__spec__.loader).__name__ != "AssertionRewritingHook"


def test_outside_a_course_pytest_runs_as_without_the_package(tmp_path):
    """The package's pytest plugin loads in every run of the environment it is installed in (a student's own course
    code): outside a course it registers no hook and imports none of the engine, and a --claims-* option given
    there is refused in one line."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'foreign'\n", encoding="utf-8")
    (tmp_path / "test_foreign.py").write_text(
        "import sys\n\n\ndef test_the_engine_is_not_loaded():\n"
        "    assert not {'claims_harness._pytest_hooks', 'claims_harness._running.runner', 'sympy'} "
        "& set(sys.modules)\n",
        encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "CLAIMS_IMPL")}

    def pytest_in_foreign(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments],
                              cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)

    plain = pytest_in_foreign()
    assert plain.returncode == 0 and "1 passed" in plain.stdout, plain.stdout + plain.stderr
    assert "INTERNALERROR" not in plain.stdout + plain.stderr
    refused = pytest_in_foreign("--claims-impl", "student_rl")
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.stdout + refused.stderr
    assert "--claims-impl: " in refused.stderr and "is not inside a course" in refused.stderr


def test_the_package_installs_no_generic_import_name(tmp_path):
    """Installed, the package adds one import name, the engine's, which no other project takes: a foreign project's
    own ``harness``, ``impl``, ``verifiers`` or ``zoo`` is its own (the course's packages are imported from the course
    root, not installed)."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    code = ("import importlib.util\n"
            "print(sorted(name for name in ('claims_harness', 'harness', 'impl', 'verifiers', 'zoo', 'examples') "
            "if importlib.util.find_spec(name) is not None))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=environment, capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.split() == ["['claims_harness']"]

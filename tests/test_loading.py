"""Loading claim files, the schema file, the verifier registry and the ``claims`` command."""

from __future__ import annotations

import importlib
import json
import re
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from conftest import course_catalogue, write_course

from claims_harness import RegistryError, load_catalogue, lookup, verifier
from claims_harness._claims.reading import ClaimLoader
from claims_harness.cli import main
from claims_harness.engine import FloatLiteral, json_schema_text

PROJECT = Path(__file__).resolve().parents[1]
REAL_CLAIMS = PROJECT / "claims"
REAL_FILES = sorted(path.name for path in REAL_CLAIMS.glob("*.yaml"))
MODELINE = "# yaml-language-server: $schema=schema.json\n"
SOURCES = "# Sources\n\n### williams1992\nWilliams, R. J. (1992). Simple statistical gradient-following algorithms.\n"


def claim(claim_id: str, expect: str = "gradient: 0.273", extra: str = "") -> str:
    return f"""\
  - id: {claim_id}
    where: "4.2.5"
    statement: The one-step Bernoulli policy's logit gradient is 0.273.
    sources: [williams1992]
    covers: [425-bernoulli-gradient]
{extra}    checks:
      - kind: exact
        verifier: bernoulli.group_estimators_exact
        params: {{p: 0.35, reward_success: 1, reward_failure: -0.2, group_size: 8}}
        rejects: a logit gradient without the factor p(1-p)
        expect:
          {expect}
"""


LEDGER = """\
statements:
  - id: 425-bernoulli-gradient
    where: "4.2.5"
    says: The one-step Bernoulli policy's logit gradient is 0.273.
    shape: instance
    scope: {}
"""


def claim_file(*claims: str, ledger: str = LEDGER) -> str:
    """A lesson of one step; its ledger (one statement, which ``claim`` covers) unless another file has it."""
    return MODELINE + 'title: "Lesson T"\nsteps: ["4.2.5"]\n' + ledger + "claims:\n" + "".join(claims)


def claims_dir(root: Path, files: dict[str, str], schema: bool = True) -> Path:
    directory = root / "claims"
    directory.mkdir()
    (root / "Module_4_Sources.md").write_text(SOURCES, encoding="utf-8")
    write_course(root)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    if schema:
        (directory / "schema.json").write_text(json_schema_text(), encoding="utf-8")
    return directory


# --------------------------------------------------------------------------- the real claims


def test_schema_file_is_current():
    current = (REAL_CLAIMS / "schema.json").read_text(encoding="utf-8") == json_schema_text()
    assert current, ("claims/schema.json is stale: the claim models in harness/_claims/schema.py changed; "
                     "run `claims schema`")


@pytest.fixture(scope="module")
def real_catalogue():
    return course_catalogue()


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_claim_file_loads_without_problems(real_catalogue, name):
    display = f"claims/{name}"
    assert display in real_catalogue.files
    assert [str(problem) for problem in real_catalogue.file_problems[display]] == []
    for entry in real_catalogue.in_file(display):
        assert not entry.broken, [str(problem) for problem in entry.problems]


# --------------------------------------------------------------------------- YAML reading


def test_exponent_without_a_dot_is_a_number(tmp_path):
    text = claim_file(claim("tiny", expect="gradient: 1e-6\n          big: 2.5E+3"))
    directory = claims_dir(tmp_path, {"a.yaml": text})
    (entry,) = load_catalogue(directory).entries
    assert not entry.broken
    (condition,) = entry.claim.checks[0].expect["gradient"].conditions
    assert condition.operator == "approx"
    assert condition.value == Fraction(1, 10**6)
    assert condition.tolerance == Fraction(1, 2 * 10**6)
    (big,) = entry.claim.checks[0].expect["big"].conditions
    assert big.value == 2500 and big.tolerance == 50


def test_claim_loader_reads_exponents_as_floats_that_remember_their_text():
    data = yaml.load("alpha: 1e-6\nbeta: -3E2\nplain: 0.2730\nname: 1e-6x\n", Loader=ClaimLoader)
    assert isinstance(data["alpha"], FloatLiteral) and data["alpha"] == 1e-6 and data["alpha"].text == "1e-6"
    assert data["beta"] == -300.0 and data["beta"].text == "-3E2"
    assert data["plain"].text == "0.2730"
    assert data["name"] == "1e-6x"


def test_alpha_written_with_an_exponent_loads(tmp_path):
    text = claim_file(claim("with-alpha"))
    text = text.replace("      - kind: exact\n", "      - kind: exact\n        alpha: 1e-9\n")
    (entry,) = load_catalogue(claims_dir(tmp_path, {"a.yaml": text})).entries
    assert not entry.broken, entry.problems
    assert entry.claim.checks[0].alpha == 1e-9


@pytest.mark.parametrize("where", ["claim", "expect"])
def test_duplicate_key_in_a_claim_is_an_error(tmp_path, where):
    if where == "claim":
        broken = claim("dup", extra="    statement: said twice\n")
        key = "statement"
    else:
        broken = claim("dup", expect="gradient: 0.273\n          gradient: 0.283")
        key = "gradient"
    text = claim_file(claim("fine"), broken)
    catalogue = load_catalogue(claims_dir(tmp_path, {"a.yaml": text}))
    fine, dup = catalogue.entries
    assert not fine.broken
    assert dup.broken
    (problem,) = dup.problems
    assert problem.claim_id == "dup"
    assert problem.message == f"duplicate key '{key}' in one mapping"
    second = [n for n, line in enumerate(text.splitlines(), 1) if line.strip().startswith(f"{key}:")][-1]
    assert problem.line == second


@pytest.mark.parametrize("key", ["claims", "title"])
def test_duplicate_top_level_key_is_an_error(tmp_path, key):
    if key == "claims":
        text = claim_file(claim("first")) + "claims:\n" + claim("second")
    else:
        text = claim_file(claim("first")).replace('title: "Lesson T"\n', 'title: "Lesson T"\ntitle: "Again"\n')
    catalogue = load_catalogue(claims_dir(tmp_path, {"a.yaml": text}))
    assert any(f"duplicate key '{key}'" in str(problem) for problem in catalogue.problems()), [
        str(problem) for problem in catalogue.problems()]


def test_alias_is_a_problem_of_the_claim_that_uses_it(tmp_path):
    text = claim_file(claim("anchored", extra="    limitations: &text none\n"),
                      claim("aliased", extra="    limitations: *text\n"))
    anchored, aliased = load_catalogue(claims_dir(tmp_path, {"a.yaml": text})).entries
    assert not anchored.broken
    (problem,) = aliased.problems
    assert problem.claim_id == "aliased"
    assert "an alias (*name) reuses the value anchored" in problem.message


def test_alias_bomb_is_refused_without_expanding_it(tmp_path):
    levels = [f"    level{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 8)}]\n" for i in range(1, 10)]
    bomb = "    limitations: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(levels)
    text = claim_file(claim("bomb", extra=bomb), claim("fine"))
    catalogue = load_catalogue(claims_dir(tmp_path, {"a.yaml": text}))  # 10 * 8**9 strings if expanded
    bomb_entry, fine = catalogue.entries
    assert bomb_entry.broken and not fine.broken
    assert any("alias" in problem.message for problem in bomb_entry.problems)


# --------------------------------------------------------------------------- the verifier registry


def test_two_functions_under_one_name_are_refused(restore_registry):
    verifier("test.clash", kind="exact")(lambda ctx: {})
    with pytest.raises(RegistryError, match="registered twice"):
        verifier("test.clash", kind="exact")(lambda ctx: {})


def test_a_verifier_without_a_name_is_named_after_its_module_and_function(tmp_path, monkeypatch, restore_registry):
    (tmp_path / "lesson_named.py").write_text(textwrap.dedent("""
        import claims_harness

        @claims_harness.verifier(kind="exact")
        def weights_exact(ctx):
            return {}
    """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module("lesson_named")
    finally:
        sys.modules.pop("lesson_named", None)
    assert restore_registry["lesson_named.weights_exact"].function is module.weights_exact


def test_lookup_of_unknown_verifier_suggests_the_closest():
    with pytest.raises(RegistryError, match=r"unknown verifier 'baselines\.loo_idnetity'; "
                                            r"did you mean 'baselines\.loo_identity'\?"):
        lookup("baselines.loo_idnetity")


def test_reimporting_a_verifier_module_is_not_a_name_clash(tmp_path, monkeypatch, restore_registry):
    (tmp_path / "reimported_verifiers.py").write_text(textwrap.dedent("""
        import claims_harness

        @claims_harness.verifier("test.reimported", kind="exact")
        def reimported(ctx):
            return {}
    """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("reimported_verifiers")
        del sys.modules["reimported_verifiers"]
        second = importlib.import_module("reimported_verifiers")
    finally:
        sys.modules.pop("reimported_verifiers", None)
    assert restore_registry["test.reimported"].function is second.reimported


# --------------------------------------------------------------------------- the claims command


BROKEN_FILES = {
    "a.yaml": claim_file(
        claim("good"),
        claim("bad-verifier").replace("bernoulli.group_estimators_exact", "bernoulli.group_estimator_exact"),
        claim("bad-source").replace("[williams1992]", "[nosuchpaper2031]"),
    ),
    "b.yaml": MODELINE + 'title: "B"\nsteps: ["4.2.5"]\nclaims: [\n',
    "c.yaml": claim_file(claim("not-finite", expect="gradient: .nan"), ledger=""),
}


def test_lint_prints_one_line_per_problem_and_fails(tmp_path, capsys):
    directory = claims_dir(tmp_path, BROKEN_FILES)
    assert main(["--claims-dir", str(directory), "lint"]) == 2
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if not line.startswith("warning: ")]
    # Project-level problems (e.g. the generated registry in Module_4_Sources.md) may follow.
    in_files = [line for line in lines if line.startswith("claims/")]
    assert len(in_files) == 4, lines
    for line in in_files:
        assert re.match(r"claims/[abc]\.yaml:\d+: ", line), line
    assert [line.split(":")[0] for line in in_files] == ["claims/a.yaml", "claims/a.yaml", "claims/b.yaml",
                                                         "claims/c.yaml"]
    assert "claim 'bad-verifier', check 1, field 'verifier': unknown verifier" in in_files[0]
    assert "claim 'bad-source', field 'sources': unknown source 'nosuchpaper2031'" in in_files[1]
    assert "not valid YAML" in in_files[2]
    assert "claim 'not-finite', check 1, field 'expect.gradient'" in in_files[3]
    assert f"1 usable claim in 3 files, {len(lines)} problems" in err


def test_lint_reports_a_missing_schema_file(tmp_path, capsys):
    directory = claims_dir(tmp_path, {"a.yaml": claim_file(claim("good"))}, schema=False)
    assert main(["--claims-dir", str(directory), "lint"]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert f"{directory / 'schema.json'}: stale or missing; regenerate it with 'claims schema'" in lines


def test_lint_passes_on_the_real_claims(capsys, monkeypatch):
    monkeypatch.chdir(PROJECT)
    status = main(["--claims-dir", str(REAL_CLAIMS), "lint"])
    out, err = capsys.readouterr()
    assert [line for line in out.splitlines() if not line.startswith("warning: ")] == []
    assert ", 0 problems" in err
    assert status == 0


def linted_project(root: Path) -> Path:
    """A clean project whose generated registry matches its committed reports/claims.json."""
    from claims_harness.engine import sources_table_of, with_sources_table

    root.mkdir()
    directory = claims_dir(root, {"a.yaml": claim_file(claim("good"))})
    results = {"claims": [{"id": "good", "status": "passed"}]}
    (root / "reports").mkdir()
    (root / "reports" / "claims.json").write_text(json.dumps(results), encoding="utf-8")
    registry = sources_table_of(load_catalogue(directory), results)
    (root / "Module_4_Sources.md").write_text(with_sources_table(SOURCES, registry), encoding="utf-8")
    return directory


def test_lint_passes_on_a_clean_project_from_its_root(tmp_path, capsys, monkeypatch):
    directory = linted_project(tmp_path / "project")
    monkeypatch.chdir(tmp_path / "project")
    assert main(["--claims-dir", str(directory), "lint"]) == 0, capsys.readouterr().out


def test_lint_does_not_depend_on_the_working_directory(tmp_path, capsys, monkeypatch):
    directory = linted_project(tmp_path / "project")
    monkeypatch.chdir(tmp_path)
    assert main(["--claims-dir", str(directory), "lint"]) == 0, capsys.readouterr().out


def test_lint_of_a_missing_directory_fails(tmp_path, capsys):
    assert main(["--claims-dir", str(tmp_path / "nowhere"), "lint"]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_list_prints_every_claim_id(capsys):
    assert main(["--claims-dir", str(REAL_CLAIMS), "list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    expected = [entry["id"] for name in REAL_FILES
                for entry in yaml.safe_load((REAL_CLAIMS / name).read_text(encoding="utf-8"))["claims"] or []]
    assert expected
    assert listed == expected


def test_list_marks_claims_that_cannot_be_loaded(tmp_path, capsys):
    directory = claims_dir(tmp_path, BROKEN_FILES)
    assert main(["--claims-dir", str(directory), "list"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert list(rows) == ["good", "bad-verifier", "bad-source", "not-finite"]
    assert rows["good"].split()[1:] == ["4.2.5", "exact"]
    assert rows["bad-verifier"].endswith("cannot be loaded")


def test_schema_check_reports_the_real_schema_current(capsys):
    assert main(["--claims-dir", str(REAL_CLAIMS), "schema", "--check"]) == 0
    assert capsys.readouterr().out.strip().endswith(": current")


def _node_tree(node: yaml.Node, loader: ClaimLoader) -> object:
    """A node as plain data: kind, tag, value, position, whether its tag was written, where it is aliased."""
    own = (type(node).__name__, node.tag, node.start_mark.line, node.start_mark.column,
           id(node) in loader.explicit_tags, tuple(loader.alias_lines.get(id(node), ())))
    if isinstance(node, yaml.ScalarNode):
        return (*own, node.value, node.style or None)  # libyaml writes a plain scalar's style '', Python None
    if isinstance(node, yaml.MappingNode):
        return (*own, [(_node_tree(key, loader), _node_tree(value, loader)) for key, value in node.value])
    return (*own, [_node_tree(item, loader) for item in node.value])


def _composed(text: str) -> object:
    loader = ClaimLoader(text)
    try:
        return _node_tree(loader.get_single_node(), loader)
    finally:
        loader.dispose()


ANCHORS_AND_TAGS = """\
title: !!str 4.2
defaults: &defaults {samples: 1e-6, profile: smoke}
claims:
  - id: a
    params: *defaults
  - id: b
    params: *defaults
    expect: !!float 3
    note: 'quoted: yes'
    text: |
      a block scalar
"""


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="libyaml is not installed")
@pytest.mark.parametrize("name", [*REAL_FILES, "anchors-and-tags"])
def test_libyaml_and_the_python_parser_give_the_same_nodes(monkeypatch, name):
    text = ANCHORS_AND_TAGS if name == "anchors-and-tags" else (REAL_CLAIMS / name).read_text(encoding="utf-8")
    with_libyaml = _composed(text)
    monkeypatch.setattr(yaml, "__with_libyaml__", False)
    assert _composed(text) == with_libyaml


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="libyaml is not installed")
def test_a_file_libyaml_refuses_gets_the_python_parsers_message():
    text = "title: x\nclaims: [a, b\n"
    with pytest.raises(yaml.MarkedYAMLError) as libyaml_alone:
        list(yaml.parse(text, Loader=yaml.CSafeLoader))
    with pytest.raises(yaml.MarkedYAMLError) as with_libyaml:
        ClaimLoader(text)
    with pytest.raises(yaml.MarkedYAMLError) as python_only:
        list(yaml.parse(text, Loader=yaml.SafeLoader))
    assert str(with_libyaml.value) == str(python_only.value) != str(libyaml_alone.value)

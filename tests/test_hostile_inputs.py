"""Input that once crashed, hung or was silently bent by loading, beyond the file corpus of ``tests/hostile/``.

The corpus (``test_hostile.py``) holds what a claim file can say; this module holds what the
directory can hold instead (a directory, a device, a pipe, a looping or outward symlink, a name
that is not UTF-8), the numbers and statistics that broke the comparison or the sampler, and
the guarantee that validating claims never imports the renderers.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import course_catalogue
from test_hostile import CORPUS, MANIFEST, PLUGINS_OFF, corpus_bytes, make_claims_dir, valid_claim_file

from claims_harness import ClaimsError, Context, RegistryError, load_catalogue, stats, verifier
from claims_harness._claims.schema import check_formula
from claims_harness._running.context import MAX_SAMPLES
from claims_harness.cli import main as claims_main
from claims_harness.engine import KINDS, compare, parse_expectation, registered
from claims_harness.errors import ExpectationError

PROJECT = Path(__file__).resolve().parents[1]
BIG = 10**309  # 310 digits: beyond float range, within the 400-digit limit on literals


def file_problems(catalogue, name: str) -> list[str]:
    return [str(problem) for problem in catalogue.file_problems.get(f"claims/{name}", [])]


def load_within(claims: Path, seconds: float = 10.0):
    """``load_catalogue(claims)``, failing (not hanging) if it takes longer than ``seconds``."""
    found = []
    worker = threading.Thread(target=lambda: found.append(load_catalogue(claims)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert found, f"loading {claims} did not finish within {seconds} s"
    return found[0]


# --------------------------------------------------------------------------- numbers beyond float range


@pytest.mark.parametrize(("raw", "field"), [(BIG, ("residual",)), ({"less_than": BIG}, ("residual", "less_than")),
                                            ({"at_least": -BIG}, ("residual", "at_least")),
                                            ({"approx": BIG}, ("residual", "approx"))])
def test_an_integer_beyond_float_range_is_refused_where_floats_compare(raw, field):
    with pytest.raises(ExpectationError, match="beyond the range of a 64-bit float") as refused:
        parse_expectation(raw, ("residual",))
    assert refused.value.path == field


def test_an_exact_integer_beyond_float_range_compares_exactly():
    expectation = parse_expectation({"exact": BIG})
    assert compare("count", expectation, BIG)[0].passed
    assert not compare("count", expectation, BIG + 1)[0].passed
    assert not compare("count", expectation, 1.0e308)[0].passed
    estimate = stats.mean_estimate(np.full(100, 0.5), (0.0, 1.0), 1e-6, 1e-3)
    (comparison,) = compare("count", expectation, estimate)  # no interval reaches it; no OverflowError
    assert not comparison.passed


def test_a_huge_integer_in_one_file_does_not_stop_the_others(tmp_path):
    claims = make_claims_dir(tmp_path, ["valid_xss.yaml", "huge_integer_bare.yaml", "huge_integer_less_than.yaml"])
    (claims / "exact.yaml").write_text(valid_claim_file("huge-exact", expect=f"residual: {{exact: {BIG}}}"),
                                       encoding="utf-8")
    catalogue = load_catalogue(claims)
    assert {entry.id: entry.broken for entry in catalogue.entries} == {
        "huge-exact": False, "broken-huge-integer-bare": True, "broken-huge-integer-less-than": True,
        "valid-markup-in-prose": False}


# --------------------------------------------------------------------------- text that cannot be written


def test_lint_prints_every_hostile_text_escaped_on_one_line(tmp_path, monkeypatch, capsysbinary):
    names = ["surrogate_id.yaml", "surrogate_limitations.yaml", "ansi_id.yaml", "newline_id.yaml",
             "boolean_key.yaml", "tagged_top_level_key.yaml", "binary_tag.yaml"]
    monkeypatch.chdir(tmp_path)
    claims = make_claims_dir(tmp_path, names)
    problems = load_catalogue(claims).problems()
    assert claims_main(["--claims-dir", str(claims), "lint"]) == 2
    out = capsysbinary.readouterr().out.decode("utf-8")  # strict: a lone surrogate would not have been written
    lines = [line for line in out.splitlines() if line.startswith("claims/")]
    assert len(lines) >= len(problems) >= len(names)
    for line in lines:
        assert line.isprintable(), repr(line)
    assert "claim 'surrogate-\\udfff-id'" in out
    assert "claim '\\x1b[31mred-id\\x1b[0m'" in out
    assert "claim 'two\\nlines'" in out


def test_a_broken_claims_id_and_step_are_safe_to_encode(tmp_path):
    claims = make_claims_dir(tmp_path, [])
    text = valid_claim_file("x").replace("id: x", 'id: "bad-\\udfff"').replace('where: "4.2.4"',
                                                                              'where: "\\e[2J\\ud800"')
    (claims / "a.yaml").write_text(text, encoding="utf-8")
    (entry,) = load_catalogue(claims).entries
    assert entry.broken
    assert (entry.id, entry.where) == ("bad-\\udfff", "\\x1b[2J\\ud800")
    entry.id.encode("utf-8"), entry.where.encode("utf-8")


# --------------------------------------------------------------------------- what the claims directory holds


def _directory(claims: Path, outside: Path) -> None:
    (claims / "folder.yaml").mkdir()


def _device(claims: Path, outside: Path) -> None:
    (claims / "zero.yaml").symlink_to("/dev/zero")


def _loop(claims: Path, outside: Path) -> None:
    (claims / "loop.yaml").symlink_to(claims / "other.yaml")
    (claims / "other.yaml").symlink_to(claims / "loop.yaml")


def _dangling(claims: Path, outside: Path) -> None:
    (claims / "dangling.yaml").symlink_to(claims / "nowhere.yaml")


def _outward(claims: Path, outside: Path) -> None:
    (outside / "elsewhere.yaml").write_text(valid_claim_file("from-elsewhere"), encoding="utf-8")
    (claims / "outward.yaml").symlink_to(outside / "elsewhere.yaml")


def _pipe(claims: Path, outside: Path) -> None:
    os.mkfifo(claims / "pipe.yaml")  # opened for reading without a writer, it would block for ever


def _not_utf8_name(claims: Path, outside: Path) -> None:
    (claims / os.fsdecode(b"caf\xe9.yaml")).write_text(valid_claim_file("latin-1-name"), encoding="utf-8")


SPECIAL_ENTRIES = {
    "folder.yaml": (_directory, "not a regular file (a directory)"),
    "zero.yaml": (_device, "not a regular file (a character device)"),
    "loop.yaml": (_loop, "a symlink that loops"),
    "other.yaml": (_loop, "a symlink that loops"),
    "dangling.yaml": (_dangling, "a symlink to nothing"),
    "outward.yaml": (_outward, "a symlink that leaves the project"),
    "pipe.yaml": (_pipe, "not a regular file (a named pipe)"),
    "caf\\xe9.yaml": (_not_utf8_name, "the file name is not valid UTF-8"),
}


@pytest.mark.parametrize("name", list(SPECIAL_ENTRIES))
def test_an_entry_that_is_not_a_claim_file_is_a_problem_of_its_own(name, tmp_path):
    make, text = SPECIAL_ENTRIES[name]
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "pyproject.toml").rename(project / "pyproject.toml")
    claims = make_claims_dir(project, ["valid_xss.yaml"])
    make(claims, tmp_path)
    catalogue = load_within(claims)
    assert f"claims/{name}" in catalogue.files
    (problem,) = file_problems(catalogue, name)
    assert problem.startswith(f"claims/{name}: {text}"), problem
    # The other files load as if it were not there.
    assert [entry.id for entry in catalogue.entries if not entry.broken] == ["valid-markup-in-prose"]


def test_a_symlink_inside_the_project_is_read(tmp_path):
    claims = make_claims_dir(tmp_path, [])
    (tmp_path / "kept.yaml").write_text(valid_claim_file("linked-inside"), encoding="utf-8")
    (claims / "linked.yaml").symlink_to(tmp_path / "kept.yaml")
    catalogue = load_catalogue(claims)
    assert catalogue.problems() == []
    assert [(entry.file, entry.id) for entry in catalogue.entries] == [("claims/linked.yaml", "linked-inside")]
    assert catalogue.display_of(claims / "linked.yaml") == "claims/linked.yaml"


def test_an_editors_hidden_lock_file_is_not_a_claim_file(tmp_path):
    claims = make_claims_dir(tmp_path, ["valid_xss.yaml"])
    (claims / ".#valid_xss.yaml").symlink_to("root@host.1234")  # what Emacs leaves while a file is edited
    assert load_catalogue(claims).files == ["claims/valid_xss.yaml"]


def test_an_outward_symlink_does_not_stop_collection(pytester):
    elsewhere = pytester.path.parent / f"{pytester.path.name}-elsewhere.yaml"
    elsewhere.write_text(valid_claim_file("from-elsewhere"), encoding="utf-8")
    claims = make_claims_dir(pytester.path, ["valid_xss.yaml"])
    (claims / "outward.yaml").symlink_to(elsewhere)
    result = pytester.runpytest_inprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    assert "a symlink that leaves the project" in result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 1 and "interrupted" not in result.stdout.str().lower()
    assert outcomes.get("failed", 0) + outcomes.get("errors", 0) == 1


# --------------------------------------------------------------------------- verifiers declare their kind


def test_every_verifier_declares_kinds_its_checks_use():
    verifiers = registered()
    assert all(verifier.kinds and set(verifier.kinds) <= set(KINDS) for verifier in verifiers.values())
    catalogue = course_catalogue()
    assert not [problem for problem in catalogue.problems() if problem.field == "kind"]
    used = {(check.verifier, check.kind) for entry in catalogue.entries if entry.claim for check in entry.claim.checks}
    assert all(kind in verifiers[name].kinds for name, kind in used)


def test_a_verifier_kind_must_be_a_kind_of_check(restore_registry):
    with pytest.raises(RegistryError, match="'symbolc' is not one of .*; did you mean 'symbolic'"):
        verifier("test.misspelt_kind", kind="symbolc")
    with pytest.raises(TypeError, match="kind"):
        verifier("test.no_kind")


def test_verifiers_lists_each_kind(capsys):
    assert claims_main(["verifiers"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("baselines.loo_identity "))
    assert line.split()[1] == "symbolic"


# --------------------------------------------------------------------------- parameters, tags and keys


def test_an_int_for_a_float_parameter_is_fine(tmp_path):
    claims = make_claims_dir(tmp_path, [])
    # reward_success: 1 is an int for a float field, as the real claims write it.
    text = corpus_bytes("params_string_float.yaml").decode("utf-8").replace('p: "0.35"', "p: 0.35")
    assert "reward_success: 1," in text
    (claims / "a.yaml").write_text(text, encoding="utf-8")
    assert load_catalogue(claims).problems() == []


@pytest.mark.parametrize(("replace", "by", "text"), [
    ("title:", "!!str title:", "the key 'title' has a tag ('tag:yaml.org,2002:str')"),
    ("steps:", "? !!binary c3RlcHM=\n:", "the key 'c3RlcHM=' has a tag"),
    ("statement: The", "? !!str statement\n    : The", "the key 'statement' has a tag"),
    ("sources: [ahmadian2024]", "sources: !!omap [{a: 1}]", "the tag 'tag:yaml.org,2002:omap' is not allowed"),
    ("sources: [ahmadian2024]", "sources: !!pairs [{a: 1}]", "the tag 'tag:yaml.org,2002:pairs' is not allowed"),
    ("sources: [ahmadian2024]", "sources: [ahmadian2024]\n    null: nothing", "the key 'null' reads as a null"),
    ("sources: [ahmadian2024]", "sources: [ahmadian2024]\n    3: three", "the key '3' reads as a int"),
])
def test_a_tag_or_a_key_that_is_not_plain_data_is_a_problem(replace, by, text, tmp_path):
    claims = make_claims_dir(tmp_path, [])
    (claims / "a.yaml").write_text(valid_claim_file("tagged").replace(replace, by, 1), encoding="utf-8")
    problems = [str(problem) for problem in load_catalogue(claims).problems()]
    assert any(text in problem and problem.startswith("claims/a.yaml:") for problem in problems), problems


def test_a_set_is_refused_however_its_order_falls(tmp_path):
    """A set's order follows string hashing, which differs from one process to the next: it never loads."""
    claims = make_claims_dir(tmp_path, ["set_tag.yaml"])
    program = (f"from pathlib import Path\nfrom claims_harness._claims.loading import load_catalogue\n"
               f"print([str(p) for p in load_catalogue(Path({str(claims)!r})).problems()])")
    runs = {subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=PROJECT,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    (only,) = runs
    assert "the tag 'tag:yaml.org,2002:set' is not allowed" in only


# --------------------------------------------------------------------------- Monte Carlo sample sizes


def context(deviation: float, alpha: float = 1e-6, beta: float = 1e-3) -> Context:
    return Context(impl=None, params=None, rng=np.random.default_rng(0), seed=0, profile="smoke", alpha=alpha,
                   beta=beta, deviation=deviation, figures_dir=Path("figures"), seed_runner=None)


def test_a_sample_size_past_the_cap_is_refused_before_anything_is_allocated():
    tracemalloc.start()
    try:
        with pytest.raises(ClaimsError) as refused:
            context(deviation=1.15e-4).samples_needed((0.0, 1.0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(refused.value)
    assert peak < 2**20
    # It names the size, the memory, and what caused them.
    assert "n = 1.567e+09 samples (11.67 GiB at eight bytes a sample)" in message, message
    assert "deviation of 0.000115" in message and "alpha 1e-06" in message and "beta 0.001" in message
    assert f"{MAX_SAMPLES:,}" in message
    assert "state a larger deviation" in message


def test_a_sample_size_at_the_cap_is_drawn():
    width, root = 1.0, math.sqrt(math.log(2e6) / 2) + math.sqrt(math.log(1e3) / 2)
    deviation = width * root / math.sqrt(MAX_SAMPLES) * 1.001
    assert context(deviation).samples_needed((0.0, width)) <= MAX_SAMPLES


def test_a_subnormal_alpha_is_not_blamed_on_the_deviation():
    # 2 / 5e-324 overflows to inf; the bounds now take log(2) - log(alpha) and stay finite.
    n = stats.min_samples(5e-324, 1e-3, 0.1, 1.0)
    assert 40_000 < n < 50_000
    assert math.isfinite(stats.hoeffding_halfwidth(10, 5e-324, 1.0))


def test_a_deviation_so_large_that_a_handful_of_samples_decide_warns_in_the_rule():
    n = context(deviation=5.0).samples_needed((0.0, 1.0))
    assert n == 1
    estimate = stats.mean_estimate(np.array([0.5]), (0.0, 1.0), 1e-6, 1e-3)
    for expected in (0.5, {"less_than": 2.0}, {"exact": "1/2"}):
        (comparison,) = compare("mean", parse_expectation(expected), estimate)
        assert "warning: with n=1 the interval is the whole support, so no mean can be refuted" in comparison.rule
    informative = stats.mean_estimate(np.full(10_000, 0.5), (0.0, 1.0), 1e-6, 1e-3)
    assert "warning" not in compare("mean", parse_expectation(0.5), informative)[0].rule


# --------------------------------------------------------------------------- formulas, without the renderer


def test_loading_imports_no_renderer():
    program = """
import sys
from pathlib import Path
from claims_harness import load_catalogue
catalogue = load_catalogue(Path("claims"))
assert sum(1 for entry in catalogue.entries if entry.claim and entry.claim.formula) > 100
loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("jinja2", "latex2mathml", "markupsafe")
                or name == "claims_harness._reporting.html")
assert loaded == [], loaded
"""
    subprocess.run([sys.executable, "-c", program], check=True, cwd=PROJECT)


def test_claims_load_without_latex2mathml():
    program = """
import sys
sys.modules["latex2mathml"] = None  # import latex2mathml now raises ImportError, as if it were not installed
sys.modules["latex2mathml.converter"] = None
from pathlib import Path
from claims_harness import load_catalogue
catalogue = load_catalogue(Path("claims"))
assert not [problem for problem in catalogue.problems() if problem.field == "formula"], catalogue.problems()
assert sum(1 for entry in catalogue.entries if entry.claim and entry.claim.formula) > 100
"""
    subprocess.run([sys.executable, "-c", program], check=True, cwd=PROJECT)


def test_a_300_kb_formula_is_refused_at_once(tmp_path):
    claims = make_claims_dir(tmp_path, [])
    (claims / "long.yaml").write_text(valid_claim_file("long-formula", extra=f"    formula: '{'x' * 300_000}'\n"),
                                      encoding="utf-8")
    load_catalogue(claims)  # imports, caches
    started = time.perf_counter()
    (problem,) = load_catalogue(claims).problems()
    assert time.perf_counter() - started < 2.0
    assert "the formula is 300000 characters long" in str(problem)


@pytest.mark.parametrize("formula", [
    r"A_i^{\mathrm{LOO}} = \frac{G}{G-1}\left(R_i - \bar R\right)", r"\{ x \mid x > 0 \}", r"\left. f \right|_{0}",
    r"\begin{cases} 1 & x < 0 \\ 0 & \text{else} \end{cases}", r"y_{<t}", r"k_1 = -\log r < 0 \iff r > 1",
    r"\leftarrow \rightarrow \endgroup", "",
])
def test_well_formed_formulas_pass(formula):
    check_formula(formula)


@pytest.mark.parametrize(("formula", "message"), [
    ("{a", "braces { } do not balance: the { at character 1 is never closed"),
    ("a}", "braces { } do not balance: the } at character 2 has no { to close"),
    (r"\left( a", r"\left and \right do not pair: the \left at character 1 is never closed"),
    (r"a \right)", r"\left and \right do not pair: the \right at character 3 has no \left to close"),
    (r"{\left( a } \right)", r"the } at character 11 has no { to close, inside the \left at character 2"),
    (r"\begin{cases} a", r"\begin and \end do not pair: the \begin{cases} at character 1 is never closed"),
    (r"\begin{cases} a \end{array}", r"the \end{array} at character 17 has no \begin{array} to close"),
    (r"\begin x \end x", r"the formula's \begin at character 1 names no environment"),
    (r"\text{</p>}", "the formula contains markup ('</' at character 7)"),
    (r"\text{<!-- x -->}", "the formula contains markup ('<!' at character 7)"),
    ("x" * 4001, "the formula is 4001 characters long"),
])
def test_malformed_formulas_are_refused_naming_the_place(formula, message):
    with pytest.raises(ValueError, match="^the formula") as refused:
        check_formula(formula)
    assert message in str(refused.value)


def test_the_structural_check_is_fast_at_the_length_limit():
    deepest = "{" * 1999 + "}" * 1999
    pairs = r"\left(\begin{cases}{x}\end{cases}\right)" * 90
    started = time.perf_counter()
    for _ in range(50):
        check_formula(deepest)
        check_formula(pairs)
    assert time.perf_counter() - started < 2.0


# --------------------------------------------------------------------------- the corpus counts what it should


def test_this_change_added_at_least_fifteen_hostile_files():
    new = ["huge_integer_bare.yaml", "huge_integer_less_than.yaml", "surrogate_limitations.yaml", "surrogate_id.yaml",
           "ansi_id.yaml", "newline_id.yaml", "binary_tag.yaml", "set_tag.yaml", "custom_tag.yaml",
           "tagged_top_level_key.yaml", "unquoted_date.yaml", "boolean_key.yaml", "merge_inline.yaml",
           "params_string_int.yaml", "params_float_int.yaml", "params_string_float.yaml", "params_nan.yaml",
           "params_inf.yaml", "kind_mismatch.yaml", "formula_unpaired_left.yaml", "formula_begin_end.yaml",
           "alpha_subnormal.yaml", "deviation_infinite.yaml", "long_formula.yaml", "byte_order_mark.yaml"]
    assert set(new) <= set(MANIFEST)
    assert all((CORPUS / name).is_file() or "generate" in MANIFEST[name] for name in new)
    assert all(MANIFEST[name]["problems"] for name in new)

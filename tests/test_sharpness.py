"""Sharpness: every expected number, moved one printed unit, must turn its check red, or the claim says why not."""

from __future__ import annotations

import json
import shutil
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import pythonpath

from claims_harness import load_catalogue
from claims_harness.cli import main as claims_main
from claims_harness.engine import (
    EXPLAINED,
    KILLED,
    SURVIVED,
    forget_sources,
    parse_expectation,
    perturbations,
    summarize,
)
from claims_harness.stats import MeanEstimate

HERE = Path(__file__).resolve().parent


def literal(text: str):
    """A number as a claim file writes it: the loader keeps its printed digits."""
    from claims_harness.engine import FloatLiteral

    return FloatLiteral(float(text), text) if any(c in text for c in ".eE") else int(text)


def outcomes(raw, observed, explained=None):
    return [(record["perturbed"], record["outcome"]) if "perturbed" in record else ("bound", None)
            for record in perturbations("x", parse_expectation(raw), observed, explained or {})]


def test_a_printed_number_is_moved_one_unit_of_its_last_digit_both_ways():
    assert outcomes(literal("0.273"), 0.2731) == [("0.272 ± 0.0005", KILLED), ("0.274 ± 0.0005", KILLED)]
    assert outcomes(literal("0.2730"), 0.27303) == [("0.2729 ± 5e-05", KILLED), ("0.2731 ± 5e-05", KILLED)]
    assert outcomes(literal("55"), 55) == [("54 ± 0.5", KILLED), ("56 ± 0.5", KILLED)]
    assert outcomes(literal("1.5e-3"), 0.0015) == [("1.4e-3 ± 5e-05", KILLED), ("1.6e-3 ± 5e-05", KILLED)]


def test_an_exact_number_is_moved_one_unit_and_a_fraction_by_its_numerator():
    assert outcomes({"exact": "7/8"}, Fraction(7, 8)) == [("exactly 6/8", KILLED), ("exactly 8/8", KILLED)]
    assert outcomes({"exact": 256}, 256) == [("exactly 255", KILLED), ("exactly 257", KILLED)]
    assert outcomes({"exact": 0.273}, Fraction(273, 1000)) == [("exactly 0.272", KILLED), ("exactly 0.274", KILLED)]


def test_a_number_the_observation_cannot_resolve_survives():
    # A printed 6e1 stands for [55, 65]: an observation of 55 also agrees with its neighbour 5e1.
    assert outcomes(literal("6e1"), 55) == [("5e1 ± 5", SURVIVED), ("7e1 ± 5", KILLED)]
    wide = MeanEstimate(mean=0.273, low=0.26, high=0.29, n=100, alpha=1e-6, method="hoeffding", support=(0.0, 1.0),
                        beta=1e-3, detectable_deviation=0.02)
    assert outcomes(literal("0.273"), wide) == [("0.272 ± 0.0005", SURVIVED), ("0.274 ± 0.0005", SURVIVED)]


def test_a_survivor_with_a_reason_is_explained_by_key_or_element():
    explained = {"x": "the interval is wider than the printed unit"}
    records = perturbations("x", parse_expectation(literal("6e1")), 55, explained)
    assert [record["outcome"] for record in records] == [EXPLAINED, KILLED]
    assert records[0]["reason"] == explained["x"]
    elements = perturbations("x", parse_expectation([literal("6e1"), literal("6e1")]), [55, 60], {"x[0]": "why"})
    assert [(record["key"], record["outcome"]) for record in elements] == [
        ("x[0]", EXPLAINED), ("x[0]", KILLED), ("x[1]", KILLED), ("x[1]", KILLED)]


def test_bounds_truth_values_and_failing_comparisons_are_not_perturbed():
    assert outcomes({"less_than": 0.5}, 0.1) == [("bound", None)]
    assert outcomes(True, True) == []
    assert outcomes(literal("0.273"), 0.5) == []  # the check is red already
    counts = summarize(perturbations("x", parse_expectation({"approx": literal("0.273"), "differs_from": 0.5}),
                                     0.273, {}))
    assert counts == {KILLED: 2, SURVIVED: 0, EXPLAINED: 0, "bounds": 1}


def test_insensitive_must_name_keys_of_expect(tmp_path):
    from test_loading import claim_file, claims_dir

    claims_dir(tmp_path, {"a.yaml": claim_file("""\
  - id: names-a-key-it-lacks
    where: "4.2.5"
    statement: a check that explains a survivor of a key it does not expect
    sources: [williams1992]
    checks:
      - kind: exact
        verifier: bernoulli.gradient_exact
        params: {p: 0.35, reward_success: 1, reward_failure: -0.2}
        insensitive: {gradiant: "typo"}
        expect:
          gradient: {exact: 0.273}
""")})
    catalogue = load_catalogue(tmp_path / "claims")
    (entry,) = catalogue.entries
    assert entry.broken
    assert "insensitive names 'gradiant'" in " ".join(str(problem) for problem in entry.problems)


# --------------------------------------------------------------------------- the command and the gate


@pytest.fixture
def course_two(tmp_path, monkeypatch, restore_registry) -> Path:
    root = tmp_path / "course_two"
    shutil.copytree(HERE / "course_two", root)
    # The cache is keyed on the files the verifiers and the implementation were imported from: this copy's.
    # The digests are cached per module name, as one course in one process needs; this test makes several,
    # and an earlier test's copy of the toy implementation must not stand in for this one's.
    sys.modules.pop("toy_impl", None)
    forget_sources()
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", pythonpath(root))
    return root


def rewrite(course: Path, old: str, new: str) -> None:
    path = next((course / "claims").glob("*.yaml"))
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")  # the first check's


def test_the_command_needs_cached_observations(course_two, capsys):
    assert claims_main(["sharpness"]) == 2
    assert "run 'claims verify --claims-profile smoke' first" in capsys.readouterr().err


def test_the_command_needs_observations_of_the_profile_asked_for(course_two, capsys):
    """A check that runs only in another profile is found without running: it is no observation of this one."""
    rewrite(course_two, "        verifier: toy.closed_form_property\n",
            "        verifier: toy.closed_form_property\n        profiles: [smoke]\n")
    assert claims_main(["verify"]) == 0
    capsys.readouterr()
    assert claims_main(["sharpness", "--claims-profile", "full"]) == 2
    assert "run 'claims verify --claims-profile full' first" in capsys.readouterr().err


def test_the_command_reports_the_score_and_every_survivor_from_the_cache(course_two, capsys):
    assert claims_main(["verify"]) == 0
    capsys.readouterr()
    assert claims_main(["sharpness"]) == 0
    assert "4 of 4 perturbed expected numbers turn their check red (score 1.0)" in capsys.readouterr().out
    rewrite(course_two, "last: {exact: 55}", "last: 6e1")
    assert claims_main(["verify"]) == 0
    capsys.readouterr()
    assert claims_main(["sharpness"]) == 1
    out = capsys.readouterr().out
    assert "claims/lesson1.yaml:" in out and "'last' expected 6e1 ± 5 still passes as 5e1 ± 5" in out
    assert "1 survivors" in out
    rewrite(course_two, "        expect:\n", "        insensitive: {last: printed to one significant digit}\n"
                                             "        expect:\n")
    assert claims_main(["verify"]) == 0
    capsys.readouterr()
    assert claims_main(["sharpness"]) == 0
    assert "1 explained in the claim files, 0 survivors" in capsys.readouterr().out


def test_the_release_gate_fails_on_an_unexplained_survivor(course_two, capsys):
    rewrite(course_two, "last: {exact: 55}", "last: 6e1")
    assert claims_main(["verify", "--no-cache"]) == 0
    results = json.loads((course_two / "reports" / "claims.json").read_text(encoding="utf-8"))
    assert results["summary"]["sharpness"]["survivors"][0]["key"] == "last"
    assert "survive unexplained" in (course_two / "reports" / "claims_report.md").read_text(encoding="utf-8")
    capsys.readouterr()
    assert claims_main(["verify", "--no-cache", "--check"]) == 1
    assert "a survivor with no reason in the claim file" in capsys.readouterr().err

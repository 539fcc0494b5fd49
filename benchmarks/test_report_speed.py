"""Rendering the HTML and Markdown reports of N and of 4N claims: linear rendering takes 4x as long.

The results document is made by hand in the shape ``build_results`` writes: lessons of ten steps,
one claim per step (the shape in which finding each step's claims by scanning all of them made
rendering quadratic: 3000 claims took 78 s), each claim with a statement it covers and one that is
not checkable, two checks with an interval and a figure every tenth claim, formulas that repeat.
The summary line reports 4N against N: about 4 is linear, 16 would be quadratic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from claims_harness._claims.schema import KINDS
from claims_harness._reporting.html import render_html
from claims_harness._reporting.markdown import render_markdown

CLAIMS = 750
STATUSES = ("passed", "failed", "error", "skipped")
STATEMENT_STATUSES = ("covered", "weak", "failed", "not run", "not checkable", "missing")
ESTIMATE = {"mean": 0.001, "low": -0.01, "high": 0.01, "n": 197363, "alpha": 3.3e-7, "beta": 1e-3,
            "method": "hoeffding", "support": [-1.5, 0.15], "detectable_deviation": 0.017}


def synthetic_results(claims: int) -> dict[str, Any]:
    coverage: list[dict[str, Any]] = []
    rows, uncovered = [], []
    for index in range(claims):
        if index % 10 == 0:
            coverage.append({"file": f"claims/lesson-{index // 10}.yaml", "title": f"Lesson {index // 10}: synthetic",
                             "steps": []})
        lesson = coverage[-1]
        status = STATUSES[index % 4] if index % 7 == 0 else "passed"
        claim_id, step = f"claim-{index}", f"9.{index // 10}.{index % 10}"
        covered = {"id": f"stmt-{index}", "where": step, "says": f"Statement {index}: E[x_t] = b_t, for <every> t.",
                   "shape": "general", "status": "covered" if status == "passed" else "failed", "claims": [claim_id],
                   "not_checkable": None}
        excused = {**covered, "id": f"stmt-{index}-excused", "status": "not checkable", "claims": [],
                   "not_checkable": "a definition"}
        uncovered += [covered] if covered["status"] != "covered" else []
        counts = {name: sum(s["status"] == name for s in (covered, excused)) for name in STATEMENT_STATUSES}
        lesson["steps"].append({"step": step, "claims": 1, "statuses": {status: 1},
                                "statements": [covered, excused], "statement_counts": counts})
        rows.append({
            "id": claim_id, "where": step, "file": lesson["file"], "line": 10 + index, "lesson": lesson["title"],
            "statement": f"Claim {index}: the *estimator* is unbiased | for every baseline b_t.",
            "formula": f"\\nabla J_{{{index % 50}}} = \\mathbb{{E}}[\\nabla \\log \\pi_\\theta(a|s) (R - b)]",
            "sources": ["williams1992"], "citations": {"williams1992": "Williams (1992). *Machine Learning*."},
            "limitations": "One witness.", "erratum": "The text prints 0.27." if index % 11 == 0 else None,
            "origin": "harness" if index % 5 == 0 else "text", "covers": [covered["id"]], "status": status,
            "problems": [], "checks": [_check(index, kind, status) for kind in KINDS[:2]],
        })
    summary = {"claims": {s: sum(row["status"] == s for row in rows) for s in STATUSES},
               "checks": {s: sum(c["status"] == s for row in rows for c in row["checks"]) for s in STATUSES},
               "by_kind": {kind: {s: sum(c["status"] == s and c["kind"] == kind for row in rows for c in row["checks"])
                                  for s in STATUSES} for kind in KINDS},
               "statements": {s: sum(st["status"] == s for lesson in coverage for step in lesson["steps"]
                                     for st in step["statements"]) for s in STATEMENT_STATUSES}}
    return {"run": {"impl": "impl", "profile": "full", "seed": 0, "revision": "0123456789ab",
                    "versions": {"python": "3.11.7"}, "started": "2026-01-01T00:00:00Z", "seconds": 60.0,
                    "complete": True, "incomplete": None, "selection": "all"},
            "summary": summary,
            "coverage_criterion": {"shapes": {"general": {"strong_kinds": ["property", "symbolic"],
                                                          "description": "holds for every input of a class"}},
                                   "statuses": dict.fromkeys(STATEMENT_STATUSES, "what it means"),
                                   "precedence": "failed wins"},
            "coverage": coverage, "uncovered": uncovered, "claims": rows}


def _check(index: int, kind: str, status: str) -> dict[str, Any]:
    observed = {"gradient": 0.2731 + index * 1e-9, "estimate": ESTIMATE, "trace": [0.5, 0.25, 0.125]}
    if index % 10 == 0:
        observed["figure"] = "figures/training.svg"
    return {
        "kind": kind, "verifier": "baselines.loo_identity", "verifier_location": "verifiers/baselines.py:42",
        "uses": ["gae", "rloo_advantages"], "status": status, "rejects": "a group mean that includes the sample",
        "expected": {"gradient": 0.273, "estimate": {"approx": 0}}, "harness_chosen": ["estimate"],
        "observed": observed,
        "comparisons": [
            {"key": "gradient", "expected": "0.273 \u00b1 0.0005", "observed": observed["gradient"], "passed": True,
             "rule": "|observed - 0.273| <= 0.0005 (half a unit of the last printed digit)", "stated_by": "text"},
            {"key": "estimate", "expected": "0", "observed": ESTIMATE, "passed": True,
             "rule": "0 inside the 0.9999997 interval [-0.01, 0.01]", "stated_by": "harness"}],
        "seed": index, "seconds": 0.01, "reused": False,
        "error": "Traceback (most recent call last):\n  ZeroDivisionError" if status == "error" else None,
        "skip_reason": "not in the smoke profile" if status == "skipped" else None,
        "reproduce": f"pytest 'claims/x.yaml::claim-{index}::{kind}'",
    }


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("report")
    (directory / "figures").mkdir()
    (directory / "figures" / "training.svg").write_text("<svg>" + "<path d='M0 0'/>" * 2000 + "</svg>", "utf-8")
    return directory


@pytest.mark.parametrize("claims", [CLAIMS, 4 * CLAIMS], ids=["N", "4N"])
@pytest.mark.parametrize("render", ["html", "markdown"])
def test_render_report(benchmark, record_median, report_dir, render, claims):
    results = synthetic_results(claims)
    function = (lambda: render_html(results, report_dir)) if render == "html" else (lambda: render_markdown(results))
    function()  # compiles the template once, as a process does before its first report
    text = benchmark.pedantic(function, rounds=3, iterations=1)
    assert text.count("claim-") >= claims
    record_median(f"{render} report, N = {CLAIMS} claims", "N" if claims == CLAIMS else "4N", benchmark,
                  reference="N")

"""Hostile and broken claim files: loading reports them, never runs them, and a run survives them.

The corpus is ``tests/hostile/``: one defect per file, and ``expected.yaml``, which states for
every file the problems loading must report (substring and line) and the rows of
``claims.json`` a run must give. Files that cannot sensibly be committed (bytes that are not
UTF-8, a file over the 1 MiB limit) are written by this module, as ``expected.yaml`` says.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from markupsafe import escape

from claims_harness import load_catalogue
from claims_harness._claims.formats import counted
from claims_harness.cli import main as claims_main
from claims_harness.engine import MAX_FILE_BYTES, json_schema_text

PROJECT = Path(__file__).resolve().parents[1]
# Plugins that would reorder, cache or (under xdist) warn in the inner runs.
PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:benchmark")
CORPUS = Path(__file__).resolve().parent / "hostile"
MANIFEST: dict = yaml.safe_load((CORPUS / "expected.yaml").read_text(encoding="utf-8"))
SOURCES = PROJECT / "Module_4_Sources.md"
# Read once: other work may rewrite the real file's generated registry while the tests run.
SOURCES_TEXT = SOURCES.read_text(encoding="utf-8")
MODELINE = "# yaml-language-server: $schema=schema.json\n"
PWNED = "hostile-pwned"  # what python_tag.yaml's os.system call would create in the working directory


def valid_claim_file(claim_id: str = "generated", statement: str = "The leave-one-out identity holds.",
                     expect: str = "residual: {exact: 0}", extra: str = "") -> str:
    """A complete claim file with one fast symbolic check; the statement is on line 7."""
    return f"""{MODELINE}title: "Generated: {claim_id}"
steps: ["4.2.4"]
claims:
  - id: {claim_id}
    where: "4.2.4"
    statement: {statement}
    sources: [ahmadian2024]
{extra}    checks:
      - kind: symbolic
        verifier: baselines.loo_identity
        expect:
          {expect}
"""


def _non_utf8() -> bytes:
    # Latin-1 'é' (0xE9) on line 7: what an editor with the wrong encoding saves.
    return valid_claim_file("generated-non-utf8", "CAFE").encode("utf-8").replace(b"CAFE", b"caf\xe9 au lait")


def _oversized() -> bytes:
    text = valid_claim_file("generated-oversized").encode("utf-8")
    padding = MAX_FILE_BYTES + 1 - len(text) - len(b"# \n")
    return text + b"# " + b"x" * padding + b"\n"


def _byte_order_mark() -> bytes:
    # What a Windows editor saving "UTF-8 with BOM" writes before the modeline.
    return b"\xef\xbb\xbf" + valid_claim_file("runs-despite-byte-order-mark").encode("utf-8")


def _long_formula() -> bytes:
    # Rendering a formula this long as MathML took seconds on every load; the length cap refuses it at once.
    return valid_claim_file("broken-long-formula", extra=f"    formula: '{'x' * 50_000}'\n").encode("utf-8")


GENERATORS: dict[str, Callable[[], bytes]] = {"non_utf8": _non_utf8, "oversized": _oversized,
                                              "byte_order_mark": _byte_order_mark, "long_formula": _long_formula}
CORPUS_FILES = sorted(MANIFEST)


def corpus_bytes(name: str) -> bytes:
    spec = MANIFEST[name]
    if "generate" in spec:
        return GENERATORS[spec["generate"]]()
    return (CORPUS / name).read_bytes()


def make_claims_dir(root: Path, names: list[str]) -> Path:
    """``root/claims`` holding the named corpus files, with the real sources registry beside it."""
    claims = root / "claims"
    claims.mkdir()
    (root / SOURCES.name).write_text(SOURCES_TEXT, encoding="utf-8")
    for name in names:
        (claims / name).write_bytes(corpus_bytes(name))
    return claims


def expected_problems(name: str) -> list[tuple[str, list[int] | None]]:
    found = []
    for item in MANIFEST[name]["problems"]:
        line = item.get("line")
        found.append((item["text"], None if line is None else line if isinstance(line, list) else [line]))
    return found


@pytest.fixture
def nothing_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Work in ``tmp_path`` with ``os.system`` and ``subprocess.Popen`` replaced by recorders."""
    calls: list[tuple] = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "system", lambda *args: calls.append(("os.system", *args)) or 0)

    class Refused(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            calls.append(("subprocess.Popen", *args))
            raise AssertionError("loading a claim file started a process")

    monkeypatch.setattr(subprocess, "Popen", Refused)
    yield calls
    assert calls == []
    assert not (tmp_path / PWNED).exists()


def test_the_corpus_is_complete():
    committed = sorted(path.name for path in CORPUS.glob("*.yaml") if path.name != "expected.yaml")
    generated = sorted(name for name, spec in MANIFEST.items() if "generate" in spec)
    assert sorted(MANIFEST) == sorted(committed + generated)
    assert len(CORPUS_FILES) >= 24
    assert not [name for name in generated if (CORPUS / name).exists()]
    assert [name for name in CORPUS_FILES if not MANIFEST[name]["problems"]] == [
        "duplicate_id_across_a.yaml", "valid_xss.yaml"]


# --------------------------------------------------------------------------- loading, file by file


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_loading_reports_exactly_the_expected_problems(name, tmp_path, nothing_runs):
    spec = MANIFEST[name]
    claims = make_claims_dir(tmp_path, [name, *spec.get("with", [])])
    tracemalloc.start()
    started = time.perf_counter()
    try:
        catalogue = load_catalogue(claims)  # never raises, whatever the file holds
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Fast and memory-safe even for the alias bomb, whose expansion would be 10^10 strings.
    assert seconds < 2.0
    assert peak < 32 * 2**20, f"loading {name} allocated {peak} bytes at its peak"

    display = f"claims/{name}"
    problems = [str(p) for p in catalogue.problems() if p.file == display]
    with_line = {str(p): p.line for p in catalogue.problems() if p.file == display}
    expected = expected_problems(name)
    assert len(problems) == len(expected), "\n".join(problems)
    unmatched = list(problems)
    for text, lines in expected:
        hits = [p for p in unmatched if text in p and (lines is None or with_line[p] in lines)]
        assert hits, f"no problem of {name} contains {text!r} at line {lines}; problems:\n" + "\n".join(problems)
        unmatched.remove(hits[0])
        assert hits[0].startswith(f"{display}:{with_line[hits[0]]}: " if with_line[hits[0]] else f"{display}: ")

    claim_rows = [(claim_id, status) for claim_id, status in spec["rows"] if claim_id != display]
    entries = catalogue.in_file(display)
    assert [(e.id, "error" if e.broken else "passed") for e in entries] == [tuple(row) for row in claim_rows]
    if any(claim_id == display for claim_id, _ in spec["rows"]):
        assert catalogue.file_problems[display]


def test_the_python_tag_payload_is_live(tmp_path, monkeypatch):
    """Were it read unsafely, python_tag.yaml would create the file the tests check is never created."""
    monkeypatch.chdir(tmp_path)
    text = (CORPUS / "python_tag.yaml").read_text(encoding="utf-8")
    with pytest.raises(yaml.constructor.ConstructorError):
        yaml.safe_load(text)
    assert not (tmp_path / PWNED).exists()
    yaml.unsafe_load(text)  # runs `touch hostile-pwned` in tmp_path
    assert (tmp_path / PWNED).exists()


def test_a_file_of_exactly_the_size_limit_loads(tmp_path):
    text = valid_claim_file("at-the-limit").encode("utf-8")
    claims = make_claims_dir(tmp_path, [])
    (claims / "limit.yaml").write_bytes(text + b"# " + b"x" * (MAX_FILE_BYTES - len(text) - 3) + b"\n")
    assert (claims / "limit.yaml").stat().st_size == MAX_FILE_BYTES
    catalogue = load_catalogue(claims)
    assert catalogue.problems() == []
    assert [entry.id for entry in catalogue.entries] == ["at-the-limit"]


# --------------------------------------------------------------------------- inputs that once crashed loading

CRASHERS = {
    "non_scalar_key.yaml": valid_claim_file(
        "non-scalar-key", extra="    ? [a, b]\n    : a sequence used as a mapping key\n"),
    "huge_integer.yaml": valid_claim_file("huge-integer", expect="residual: {exact: " + "1" * 5000 + "}"),
    "nul_character.yaml": valid_claim_file("nul-character", "A NUL \x00 in the statement."),
    "deep_nesting.yaml": valid_claim_file("deep-nesting", expect="residual: " + "[" * 5000 + "]" * 5000),
}


@pytest.mark.parametrize("name", list(CRASHERS))
def test_input_that_crashes_loading_becomes_a_problem(name, tmp_path):
    claims = make_claims_dir(tmp_path, [])
    (claims / name).write_text(CRASHERS[name], encoding="utf-8")
    catalogue = load_catalogue(claims)
    assert [p for p in catalogue.problems() if p.file == f"claims/{name}"]


def test_one_crashing_file_does_not_stop_the_run(pytester):
    claims = make_claims_dir(pytester.path, ["valid_xss.yaml"])
    (claims / "nul_character.yaml").write_text(CRASHERS["nul_character.yaml"], encoding="utf-8")
    result = pytester.runpytest_inprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=1)


def test_a_numeric_literal_with_a_huge_exponent_loads_fast(tmp_path):
    claims = make_claims_dir(tmp_path, [])
    # Small enough that the bug costs seconds here, not hours; the limit is generous for a fixed harness.
    (claims / "exponent.yaml").write_text(valid_claim_file("huge-exponent", expect="residual: 1e-2000000"),
                                          encoding="utf-8")
    started = time.perf_counter()
    load_catalogue(claims)
    assert time.perf_counter() - started < 0.5


def test_an_oversized_file_is_refused_without_reading_it(tmp_path):
    claims = make_claims_dir(tmp_path, [])
    with open(claims / "huge.yaml", "wb") as file:  # sparse: no disk is used
        file.truncate(64 * 2**20)
    tracemalloc.start()
    try:
        catalogue = load_catalogue(claims)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "file is 67108864 bytes" in str(catalogue.problems()[0])
    assert peak < 8 * 2**20, f"refusing a 64 MiB file allocated {peak} bytes"


def test_a_python_tag_anywhere_is_refused(tmp_path):
    claims = make_claims_dir(tmp_path, [])
    text = valid_claim_file("tag-on-the-sequence").replace(
        "claims:\n", "claims: !!python/object/apply:os.system\n")
    (claims / "tagged.yaml").write_text(text, encoding="utf-8")
    problems = [str(p) for p in load_catalogue(claims).problems()]
    assert any("is not allowed" in p for p in problems), problems


def test_an_infinite_timeout_is_a_load_problem(tmp_path):
    claims = make_claims_dir(tmp_path, [])
    check = "        verifier: baselines.loo_identity\n"
    text = valid_claim_file("infinite-timeout").replace(check, check + "        timeout: .inf\n")
    (claims / "timeout.yaml").write_text(text, encoding="utf-8")
    problems = [str(p) for p in load_catalogue(claims).problems()]
    assert any("field 'timeout'" in p for p in problems), problems


# --------------------------------------------------------------------------- the whole corpus in one run

HOSTILE_VERIFIERS = """
    import time

    import claims_harness

    @claims_harness.verifier("hostile.raises", kind="exact")
    def raises(ctx):
        raise ZeroDivisionError("the hostile verifier divides by zero on purpose")

    @claims_harness.verifier("hostile.hangs", kind="exact")
    def hangs(ctx):
        time.sleep(1000)
        return {"value": 1}

    @claims_harness.verifier("hostile.exits", kind="exact")
    def exits(ctx):
        raise SystemExit(0)
"""


def misbehaving_claim(claim_id: str, verifier: str, extra: str = "") -> str:
    return f"""\
  - id: {claim_id}
    where: "4.2.4"
    statement: A claim whose verifier misbehaves.
    sources: [ahmadian2024]
    checks:
      - kind: exact
        verifier: {verifier}
{extra}        expect:
          value: 1
"""


MISBEHAVING = (MODELINE + 'title: "Misbehaving verifiers"\nsteps: ["4.2.4"]\nclaims:\n'
               + misbehaving_claim("verifier-raises", "hostile.raises")
               + misbehaving_claim("verifier-hangs", "hostile.hangs", "        timeout: 1\n"))


def run_project(pytester: pytest.Pytester, names: list[str], extra: dict[str, str]) -> tuple[pytest.RunResult, dict]:
    """Run the named corpus files and ``extra`` claim files (name -> text) with the misbehaving verifiers."""
    pytester.makeconftest(HOSTILE_VERIFIERS)
    claims = make_claims_dir(pytester.path, names)
    for name, text in extra.items():
        (claims / name).write_text(text, encoding="utf-8")
    result = pytester.runpytest_inprocess("claims", *PLUGINS_OFF, "--claims-report", "out")
    results_file = pytester.path / "out" / "claims.json"
    return result, json.loads(results_file.read_text(encoding="utf-8")) if results_file.is_file() else {}


def test_the_whole_corpus_in_one_run(pytester, restore_registry):
    """Every corpus file and two misbehaving verifiers in one ``claims/`` directory, one pytest run."""
    result, results = run_project(pytester, CORPUS_FILES, {"zz_misbehaving.yaml": MISBEHAVING})
    out = pytester.path / "out"
    assert not (pytester.path / PWNED).exists()
    # Failures and errors, but no crash: not interrupted (2), internal error (3) or usage error (4).
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    assert_every_row_is_there(results)
    assert_the_raising_verifier_is_an_error_with_its_traceback(results, out)
    assert_the_hanging_verifier_is_stopped_at_its_timeout(results)
    assert_markup_in_claim_text_reaches_the_html_escaped(out)
    markdown = (out / "claims_report.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Claims report: Module 4")
    for row in results["claims"]:
        assert f"`{row['id']}`" in markdown


def assert_every_row_is_there(results: dict) -> None:
    rows = [(row["file"], row["id"], row["status"]) for row in results["claims"]]
    expected = [(f"claims/{name}", claim_id, status) for name in CORPUS_FILES for claim_id, status in
                MANIFEST[name]["rows"]]
    corpus_rows = [row for row in rows if row[0] != "claims/zz_misbehaving.yaml"]
    # None missing, none passed that should not: the statuses are exactly the manifest's.
    assert sorted(corpus_rows) == sorted(expected)
    # In file order, and within a file the file's own problems first.
    assert corpus_rows == [(f, i, s) for f in sorted({f for f, _, _ in expected}) for (g, i, s) in expected if g == f]
    for row in results["claims"]:
        if row["status"] == "error" and not row["checks"]:
            assert row["problems"], row["id"]
    passed = [row["id"] for row in results["claims"] if row["status"] == "passed"]
    assert sorted(passed) == sorted(["valid-markup-in-prose", "dup-in-one-file", "dup-across-files",
                                     "fine-claim-without-modeline", "runs-despite-missing-title",
                                     "runs-despite-missing-steps", "hostile-merge-base",
                                     "runs-despite-byte-order-mark"])
    assert results["summary"]["claims"] == {"passed": len(passed), "failed": 0, "error": len(rows) - len(passed),
                                            "not judged": 0, "skipped": 0}


def assert_the_raising_verifier_is_an_error_with_its_traceback(results: dict, out: Path) -> None:
    (row,) = [row for row in results["claims"] if row["id"] == "verifier-raises"]
    assert row["status"] == "error"
    (check,) = row["checks"]
    assert check["status"] == "error"
    assert check["error"].startswith("Traceback (most recent call last):")
    assert "ZeroDivisionError: the hostile verifier divides by zero on purpose" in check["error"]
    assert "conftest.py" in check["error"]
    for report in ("claims_report.md", "claims_report.html"):
        assert "ZeroDivisionError: the hostile verifier divides by zero on purpose" in (out / report).read_text(
            encoding="utf-8")


def assert_the_hanging_verifier_is_stopped_at_its_timeout(results: dict) -> None:
    (row,) = [row for row in results["claims"] if row["id"] == "verifier-hangs"]
    (check,) = row["checks"]
    assert (row["status"], check["status"]) == ("error", "error")
    assert "the check ran past its time limit of 1 s" in check["error"]
    assert 0.9 <= check["seconds"] < 5


def assert_markup_in_claim_text_reaches_the_html_escaped(out: Path) -> None:
    html = (out / "claims_report.html").read_text(encoding="utf-8")
    assert html.count("<script") == 1, "only the report's own filter script may be a script element"
    assert html.count("</script>") == 1
    for tag in ("<img", "<b>", "<i>"):
        assert tag not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html        # statement
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html        # limitations
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "&lt;i&gt;must&lt;/i&gt;" in html                      # the lesson title
    assert "&lt;script&gt;alert(&#39;id&#39;)&lt;/script&gt;" in html  # the id of a broken claim
    assert "&lt;img src=x onerror=alert(&#39;where&#39;)&gt;" in html  # its step
    assert "onerror=alert(1)" not in html  # the formula's payload: a load problem, never rendered
    # The valid claim's formula is rendered as MathML.
    section = html[html.index('id="claim-valid-markup-in-prose"'):]
    assert "<math" in section[:section.index("</article>")]


def test_every_claim_of_the_run_is_in_the_html(pytester, restore_registry):
    _, results = run_project(pytester, ["missing_title.yaml", "valid_xss.yaml"], {})
    html = (pytester.path / "out" / "claims_report.html").read_text(encoding="utf-8")
    assert [row["status"] for row in results["claims"]] == ["error", "passed", "passed"]
    # A claim is shown as its article (id="claim-<id>"), or, if it cannot be run, in the list of errors.
    missing = [row["id"] for row in results["claims"]
               if f'id="claim-{escape(row["id"])}"' not in html and f"<code>{escape(row['id'])}</code>" not in html]
    assert missing == []


def test_a_verifier_raising_system_exit_is_an_error_row(pytester, restore_registry):
    text = (MODELINE + 'title: "Exits"\nsteps: ["4.2.4"]\nclaims:\n'
            + misbehaving_claim("verifier-exits", "hostile.exits"))
    result, results = run_project(pytester, ["valid_xss.yaml"], {"exits.yaml": text})
    result.assert_outcomes(passed=1, failed=1)
    assert [(row["id"], row["status"]) for row in results["claims"]] == [
        ("verifier-exits", "error"), ("valid-markup-in-prose", "passed")]


# --------------------------------------------------------------------------- claims lint


def test_lint_exits_2_with_one_line_per_problem(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    claims = make_claims_dir(tmp_path, CORPUS_FILES)
    (claims / "schema.json").write_text(json_schema_text(), encoding="utf-8")
    problems = [str(problem) for problem in load_catalogue(claims).problems()]
    assert all("\n" not in problem for problem in problems)
    assert sum(len(MANIFEST[name]["problems"]) for name in CORPUS_FILES) == len(problems)

    status = claims_main(["--claims-dir", str(claims), "lint"])
    out, err = capsys.readouterr()
    assert status == 2
    # The copied sources file defines sources the corpus never cites: those lines are lint's too.
    lines = [line for line in out.splitlines()
             if not line.startswith("warning: ") and "is cited by no claim" not in line
             and "field 'covers'" not in line and "field 'rejects'" not in line]
    # Every problem, one line each, then the generated registry of the copied sources file, which
    # does not list the corpus's claims.
    assert lines == [*problems, "Module_4_Sources.md: the generated registry of claims does not match the claim "
                                "files and reports/claims.json; regenerate both with "
                                "'claims verify --claims-profile full'"]
    for name in CORPUS_FILES:
        for text, _ in expected_problems(name):
            assert any(text in line and line.startswith(f"claims/{name}") for line in lines), (name, text)
    usable = sum(1 for name in CORPUS_FILES for claim_id, status in MANIFEST[name]["rows"]
                 if status == "passed")
    uncited = sum("is cited by no claim" in line for line in out.splitlines())
    # The corpus predates the ledger: its claims cover nothing and its checks name no rejected implementation.
    unledgered = sum("field 'covers'" in line or "field 'rejects'" in line for line in out.splitlines())
    assert uncited and unledgered
    assert re.search(rf"claims lint: {counted(usable, 'usable claim')} in {counted(len(CORPUS_FILES), 'file')}, "
                     rf"{counted(len(problems) + 1 + uncited + unledgered, 'problem')}",
                     err)


def test_deep_flow_nesting_is_refused_before_the_slow_parser_reads_it(tmp_path, monkeypatch):
    """libyaml refuses 100,000 nested brackets at once; PyYAML's Python parser would take minutes over them."""
    import yaml

    claims = make_claims_dir(tmp_path, [])
    (claims / "deep.yaml").write_text(valid_claim_file("deep", expect="residual: " + "[" * 100_000 + "]" * 100_000),
                                      encoding="utf-8")
    parse = yaml.parse

    def libyaml_only(stream, Loader):  # noqa: N803 (PyYAML's own spelling)
        assert Loader is not yaml.SafeLoader, "the Python parser was reached"
        return parse(stream, Loader=Loader)

    monkeypatch.setattr(yaml, "parse", libyaml_only)
    (problem,) = [p for p in load_catalogue(claims).problems() if p.file == "claims/deep.yaml"]
    assert "flow collections nested 101 deep" in str(problem)

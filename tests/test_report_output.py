"""Claim text reaches every output as the literal text: the Markdown and HTML reports and the terminal.

Each hostile string goes into every field of a results document that comes from a claim file or a
run (ids, steps, titles, statements, formulas, limitations, errata, the ledger, problems, observed
keys and strings, rules, reasons, tracebacks, commands). The Markdown is parsed with a CommonMark
parser (with GFM tables): it must have exactly the structure the same document has with a benign
string in every field, no raw HTML or link, and show each string as text. The HTML is parsed too:
only the report's own elements, script and links. A Problem stays one line with its control
characters shown escaped.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from claims_harness import Problem
from claims_harness._claims.formats import (
    figure_paths,
    format_interval,
    format_observed,
    is_figure_path,
    library_versions,
)
from claims_harness._reporting import report
from claims_harness._reporting.markdown import code, fenced, text
from claims_harness.cli import main
from claims_harness.engine import mutation_inputs_digest, render_html, render_markdown
from claims_harness.errors import visible

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "line one\n# injected heading\n- injected item\n\n| a | b |\n|---|---|",
    "back`tick ``double`` and `",
    "```\nfenced\n```",
    "~~~\nfenced\n~~~",
    "pipe | in | a cell",
    "[link](javascript:alert(1)) and ![image](x.png) and [ref]\n\n[ref]: javascript:alert(2)",
    "<https://example.com> and <a@b.c>",
    "&lt;entity&gt; &amp; &#60; &#x3c;",
    "*emph* _emph_ **strong** __strong__ ~~strike~~ $math$ $$display$$",
    "> quote",
    "1. numbered",
    "---",
    "trailing backslash \\",
    "\\*escaped\\* \\<",
    "\x1b[31mred\x1b[0m\x1b]0;title\x07\r\x08",
    "bidi \u202eevil\u202c zero\u200bwidth line\u2028sep",
    "lone surrogate \udfff",
]
BENIGN = "benign"


def results_with(value: str) -> dict[str, Any]:
    """A results document of the shape build_results writes, ``value`` in every field a claim file or run fills."""
    estimate = {"mean": 0.001, "low": -0.01, "high": 0.01, "n": 1000, "alpha": 1e-6, "beta": 1e-3,
                "method": "hoeffding", "support": [0, 1], "detectable_deviation": 0.02}
    check = {
        "kind": "exact", "verifier": value, "verifier_location": f"{value}:1", "uses": [value], "status": "failed",
        "rejects": value, "expected": {value: value, "estimate": {"approx": 0}}, "harness_chosen": [value],
        "observed": {value: value, "estimate": estimate, f"{value} also": value},
        "comparisons": [
            {"key": value, "expected": value, "observed": value, "passed": False, "rule": value,
             "stated_by": "harness"},
            {"key": "estimate", "expected": "0", "observed": estimate, "passed": True, "rule": value,
             "stated_by": "text"},
        ],
        "seed": 7, "seconds": 0.5, "reused": False, "error": value, "skip_reason": value, "reproduce": value,
        "not_checked": {value: value},
    }
    claim = {
        "id": value, "where": value, "file": "claims/a.yaml", "line": 3, "lesson": value, "statement": value,
        "formula": value, "sources": [value], "citations": {value: value}, "limitations": value, "erratum": value,
        "origin": "harness", "covers": [value], "status": "failed", "problems": [], "checks": [check],
    }
    broken = {**claim, "id": f"{value} broken", "where": None, "file": value, "lesson": value, "status": "error",
              "problems": [value], "checks": [], "formula": None, "erratum": None}
    covered = {"id": value, "where": value, "says": value, "shape": value, "status": "failed", "claims": [value],
               "not_checkable": None}
    excused = {**covered, "id": f"{value} excused", "status": "not checkable", "claims": [], "not_checkable": value}
    counts = {"covered": 0, "weak": 0, "failed": 1, "not run": 0, "not checkable": 1, "missing": 0}
    statuses = {status: int(status == "failed") for status in ("passed", "failed", "error", "skipped")}
    return {
        "run": {"impl": value, "profile": value, "seed": 0, "revision": value, "versions": {value: value},
                "started": value, "seconds": 1.0, "complete": False, "incomplete": value, "selection": value},
        "summary": {"claims": statuses, "checks": statuses, "by_kind": {"exact": statuses}, "statements": counts},
        "coverage_criterion": {"shapes": {value: {"strong_kinds": [value], "description": value}},
                               "statuses": {status: value for status in counts}, "precedence": value},
        "coverage": [{"file": "claims/a.yaml", "title": value, "steps": [
            {"step": value, "claims": 1, "statuses": {"failed": 1}, "statements": [covered, excused],
             "statement_counts": counts}]}],
        "uncovered": [covered],
        "claims": [claim, broken],
    }


# --------------------------------------------------------------------------- Markdown

PARSER = MarkdownIt("commonmark").enable("table")


def structure(markdown: str) -> list[tuple[str, ...]]:
    """The document's blocks and, within each line of inline text, its kinds of span, text itself left out."""
    shape = []
    for token in PARSER.parse(markdown):
        if token.type != "inline":
            shape.append((token.type, token.tag))
            continue
        kinds: list[str] = []
        for child in token.children or []:
            kind = "text" if child.type in ("text", "text_special") else child.type
            if not (kinds and kind == kinds[-1] == "text"):
                kinds.append(kind)
        shape.append(("inline", *kinds))
    return shape


class Text(HTMLParser):
    """The elements, attributes and text data of an HTML document (character references resolved)."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.data.append(data)

    def text(self) -> str:
        return "".join(self.data)


@pytest.mark.parametrize("value", HOSTILE)
def test_markdown_has_the_structure_of_a_benign_report_and_no_markup_from_claim_text(value):
    markdown = render_markdown(results_with(value))
    markdown.encode("utf-8")  # a lone surrogate would make writing the report fail
    assert structure(markdown) == structure(render_markdown(results_with(BENIGN)))
    html = PARSER.render(markdown)
    kinds = {token.type for token in PARSER.parse(markdown)} | {
        child.type for token in PARSER.parse(markdown) for child in token.children or []}
    assert not kinds & {"html_inline", "html_block", "link_open", "image"}
    assert {tag for tag, _ in Text(html).tags} <= {
        "h1", "h2", "h3", "h4", "p", "ul", "li", "code", "pre", "em", "strong", "table", "thead", "tbody", "tr",
        "th", "td"}


@pytest.mark.parametrize("value", HOSTILE)
def test_markdown_shows_claim_text_as_the_literal_text(value):
    shown = Text(PARSER.render(render_markdown(results_with(value)))).text()
    prose = visible(" ".join(value.split()))
    assert shown.count(prose) >= 10  # statement, limitations, erratum, says, rule, reason, problem, ...
    assert visible(value) in shown  # in a code span: the id, a key, the command that reproduces
    assert visible(value.strip(), keep="\n\t") in shown  # the formula's and the traceback's blocks


def test_markdown_escapes_only_what_would_be_markup():
    assert text("ratio > 1 & p_theta is x_t <= 2, E[R] - b") == "ratio > 1 & p_theta is x_t <= 2, E\\[R] - b"
    assert text("<b> </b> <!-- <?x <https://x") == "\\<b> \\</b> \\<!-- \\<?x \\<https://x"
    assert text("a\nmulti-line   statement ") == "a multi-line statement"
    assert text("\\theta and \\{x\\}") == "\\theta and \\\\{x\\\\}"
    assert code("a`b") == "``a`b``"
    assert code("`a") == "`` `a ``"
    assert code("a|b") == "`a|b`" and code("a|b", cell=True) == "`a\\|b`"
    assert code("id\nwith newline") == "`id\\nwith newline`"
    assert fenced("x ```` y", "math") == ["`````math", "x ```` y", "`````"]


def test_an_incomplete_run_says_so_at_the_top_of_both_reports():
    results = results_with(BENIGN) | {"run": results_with(BENIGN)["run"] | {
        "incomplete": "interrupted (Ctrl-C)", "selection": "3 of 9 checks selected"}}
    markdown = render_markdown(results)
    summary = markdown.index("## Summary")
    assert markdown.index("**INCOMPLETE RUN**: interrupted (Ctrl-C).") < summary
    assert markdown.index("**PARTIAL SELECTION**: 3 of 9 checks selected;") < summary
    html = render_html(results, Path("nowhere"))
    assert html.index("INCOMPLETE RUN: interrupted (Ctrl-C).") < html.index('id="summary"')
    assert "PARTIAL SELECTION: 3 of 9 checks selected" in html
    whole = results_with(BENIGN)
    whole["run"] |= {"complete": True, "incomplete": None, "selection": "all"}
    assert "INCOMPLETE" not in render_markdown(whole) and "INCOMPLETE" not in render_html(whole, Path("nowhere"))
    assert "PARTIAL" not in render_markdown(whole) and "PARTIAL" not in render_html(whole, Path("nowhere"))


# --------------------------------------------------------------------------- HTML

# The report's own links: to a claim or statement in the page, or to a file of the project beside reports/.
OWN_LINK_PREFIXES = ("#", "../")


@pytest.mark.parametrize("value", HOSTILE)
def test_html_escapes_every_claim_text(value, tmp_path):
    html = render_html(results_with(value), tmp_path)
    html.encode("utf-8")
    page = Text(html)
    tags = [tag for tag, _ in page.tags]
    assert tags.count("script") == tags.count("style") == 1, "only the report's own filter script and style sheet"
    # A formula may become MathML, which formula_to_mathml checked element by element; nothing else is markup.
    assert [tag for tag in tags if tag in ("img", "iframe", "object", "embed", "svg", "link", "base", "form")] == []
    for tag, attributes in page.tags:
        assert not [name for name in attributes if name.startswith("on")], (tag, attributes)
        if "href" in attributes:
            assert attributes["href"].startswith(OWN_LINK_PREFIXES), attributes
    assert visible(value, keep="\n\t") in page.text()


def test_html_shows_control_characters_escaped():
    html = render_html(results_with("id\x1b[31m \udfff"), Path("nowhere"))
    assert "\x1b" not in html and "\udfff" not in html
    assert "id\\x1b[31m \\udfff" in html


# --------------------------------------------------------------------------- rendering work


def test_each_formula_is_converted_and_each_figure_read_once_per_report(tmp_path, monkeypatch):
    """What made rendering slow in the number of claims: one conversion per occurrence, one read per check."""
    import claims_harness._reporting.html as html_module

    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "shared.svg").write_text("<?xml?><svg>figure</svg>", encoding="utf-8")
    results = results_with(BENIGN)
    claim = results["claims"][0]
    claim["formula"] = "x^2"
    claim["checks"][0]["observed"]["figure"] = "figures/shared.svg"
    results["claims"] = [{**claim, "id": f"claim-{i}"} for i in range(20)]
    conversions, reads = [], []
    monkeypatch.setattr(html_module, "formula_to_mathml", lambda latex: conversions.append(latex))
    read = html_module._figure_image
    monkeypatch.setattr(html_module, "_figure_image", lambda path: reads.append(path) or read(path))
    html = render_html(results, tmp_path)
    assert conversions == ["x^2"] and reads == [tmp_path / "figures" / "shared.svg"]
    assert html.count(base64.b64encode(b"<?xml?><svg>figure</svg>").decode()) == 20


def test_a_figure_is_an_image_of_the_page_so_a_script_in_it_never_runs(tmp_path):
    """A figure may be drawn by the implementation under test: shown as an image, its markup is never the page's."""
    (tmp_path / "figures").mkdir()
    hostile = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'
    (tmp_path / "figures" / "a.svg").write_bytes(hostile)
    results = results_with(BENIGN)
    results["claims"][0]["checks"][0]["observed"]["figure"] = "figures/a.svg"
    page = Text(render_html(results, tmp_path))
    assert [tag for tag, _ in page.tags].count("script") == 1  # the report's own
    images = [attributes for tag, attributes in page.tags if tag == "img"]
    assert [image["src"] for image in images] == ["data:image/svg+xml;base64," + base64.b64encode(hostile).decode()]


# --------------------------------------------------------------------------- the terminal


def test_a_problem_is_one_line_with_control_characters_escaped():
    problem = Problem("claims/\x1b[2Ja.yaml", 3, "duplicate id 'x\ny'", claim_id="a\x1b[31m\nb\u202e",
                      check_index=0, field="expect.\rkey", hint="rename one\x07")
    shown = str(problem)
    assert shown == ("claims/\\x1b[2Ja.yaml:3: claim 'a\\x1b[31m\\nb\\u202e', check 1, field 'expect.\\rkey': "
                     "duplicate id 'x\\ny'; rename one\\x07")
    assert shown.isprintable()


def test_a_problem_with_a_lone_surrogate_can_be_printed():
    str(Problem("a.yaml", 1, "bad", claim_id="id\udfff")).encode("utf-8")


# YAML's double-quoted escapes: an ANSI colour, a line break and a terminal bell in the id.
ANSI_ID_FILE = ('# yaml-language-server: $schema=schema.json\ntitle: "A"\nsteps: ["4.2.4"]\nclaims:\n'
                '  - id: "red\\e[31m\\nFAKE: all claims passed\\a"\n    where: "4.2.4"\n    statement: S.\n'
                '    sources: [williams1992]\n    checks: []\n')
SHOWN_ID = "red\\x1b[31m\\nFAKE: all claims passed\\x07"


def ansi_id_project(root: Path) -> Path:
    claims = root / "claims"
    claims.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "Module_4_Sources.md", root)
    (claims / "a.yaml").write_text(ANSI_ID_FILE, encoding="utf-8")
    return claims


def assert_shown_escaped(*streams: str) -> None:
    for stream in streams:
        assert "\x1b" not in stream and "\x07" not in stream
        assert not [line for line in stream.splitlines() if line.startswith("FAKE")]


def test_lint_prints_no_control_character_of_an_id(tmp_path, monkeypatch, capsys):
    claims = ansi_id_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["--claims-dir", str(claims), "lint"]) == 2
    out, err = capsys.readouterr()
    assert_shown_escaped(out, err)
    assert SHOWN_ID in out


def test_pytest_and_the_reports_show_no_control_character_of_an_id(pytester):
    ansi_id_project(pytester.path)
    result = pytester.runpytest_inprocess("claims", "-p", "no:cacheprovider", "-p", "no:randomly", "-p",
                                          "no:benchmark", "--claims-report", "out")
    assert_shown_escaped(result.stdout.str(), result.stderr.str())
    assert SHOWN_ID in result.stdout.str()
    reports = [(pytester.path / "out" / name).read_text(encoding="utf-8")
               for name in ("claims.json", "claims_report.md", "claims_report.html")]
    assert_shown_escaped(json.loads(reports[0])["claims"][0]["problems"][0], *reports[1:])


# --------------------------------------------------------------------------- one rule each


def test_an_observed_value_is_written_one_way():
    estimate = {"mean": 0.25, "low": 0.2, "high": 0.3, "n": 400, "alpha": 1e-6, "beta": 1e-3, "method": "hoeffding",
                "support": [0, 1], "detectable_deviation": 0.12}
    assert format_interval(estimate) == "0.999999 interval [0.2, 0.3] (n=400, alpha=1e-06, hoeffding)"
    assert format_observed(estimate) == ("mean 0.25, 0.999999 interval [0.2, 0.3] (n=400, alpha=1e-06, hoeffding), "
                                         "detects 0.12")
    assert format_observed({"exact": "7/8", "value": 0.875}) == "0.875 (exactly 7/8)"
    assert format_observed(1 / 3) == "0.3333333333"
    assert format_observed({"mean": 1}) == '{"mean": 1}'  # a verifier's own mapping, not an estimate
    assert format_observed([True, None]) == "[true, null]"
    assert format_observed("x" * 300, limit=200) == "x" * 200 + "..."


def test_a_figure_is_an_svg_under_figures():
    assert is_figure_path("figures/ppo-cartpole_full.svg")
    for value in ("figures/../secret.svg", "figures/a/b.svg", "figures/a.png", "/figures/a.svg", "figures/.svg x",
                  "figures/a.svg\n", 3):
        assert not is_figure_path(value), value
    assert figure_paths({"figure": "figures/a.svg", "note": "figures/b.png", "n": 2}) == ["figures/a.svg"]


def test_library_versions_are_python_then_each_library():
    versions = library_versions()
    assert list(versions)[:3] == ["python", "numpy", "scipy"]
    assert "pytest" in versions and all(isinstance(version, str) for version in versions.values())
    json.dumps(versions)


@pytest.mark.parametrize("where", ["a file", "under a file", "/dev/null"])
def test_a_report_directory_that_cannot_be_one_is_refused_before_any_check_runs(tmp_path, monkeypatch, capsys, where):
    from claims_harness.cli import main as claims_main

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    (tmp_path / "a file").write_text("not a directory", encoding="utf-8")
    out = {"a file": tmp_path / "a file", "under a file": tmp_path / "a file" / "reports",
           "/dev/null": Path(os.devnull)}
    assert claims_main(["verify", "--claims-report", str(out[where]), "-k", "no-such-claim"]) == 2
    error = capsys.readouterr().err
    assert "is not a directory" in error and "no check run, no report written" in error
    assert (tmp_path / "a file").read_text(encoding="utf-8") == "not a directory"


def test_a_report_directory_on_a_file_system_of_its_own_is_staged_inside_it(tmp_path, monkeypatch):

    target = tmp_path / "reports"
    target.mkdir()
    real_stat = Path.stat

    def mounted(path, *args, **kwargs):  # the target as a mount point: another device than its parent's
        found = real_stat(path, *args, **kwargs)
        if path == target:
            return os.stat_result((*found[:2], found.st_dev + 1, *found[3:]))
        return found

    monkeypatch.setattr(Path, "stat", mounted)
    assert report.staging_dir_for(target, "abc").parent == target
    monkeypatch.undo()
    assert report.staging_dir_for(target, "abc").parent == tmp_path


def test_a_report_directory_with_a_file_system_mounted_inside_is_refused(tmp_path, monkeypatch):

    out = tmp_path / "out"
    (out / "figures" / "mounted").mkdir(parents=True)
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda path: str(path) == str(out / "figures" / "mounted") or real(path))
    problem = report.report_directory_problem(out)
    assert problem == (f"{out} cannot hold a report: {out / 'figures' / 'mounted'} inside it is a mount point, and a "
                       "run replaces its report directory whole and removes the previous one; unmount it, or give "
                       "--claims-report a directory with no file system mounted inside it")
    # Nor is anything with a mount inside ever removed, were one mounted during the run.
    report.remove_staging(out)
    assert (out / "figures" / "mounted").is_dir()
    monkeypatch.undo()
    assert report.report_directory_problem(out) is None  # the report directory itself may be a mount point


def test_a_staging_directory_named_for_a_process_that_is_gone_is_stale(tmp_path):
    """Without a mark, a staging directory whose name ends with a pid (a run without a run id) is its process's: it is
    removed once that process is gone; one named by a run id is removed only once it is a day old."""

    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                              check=True)
    gone = tmp_path / f".out.staging-{int(finished.stdout)}"
    mine = tmp_path / f".out.staging-{os.getpid()}"
    run_id = tmp_path / ".out.staging-0123456789ab"
    replaced = out / f".figures-replaced-{int(finished.stdout)}"  # what a run killed mid-move left inside
    for directory in (gone, mine, run_id, replaced):
        directory.mkdir()
    assert sorted(report.remove_stale_staging(out)) == sorted([gone, replaced])
    assert mine.is_dir() and run_id.is_dir() and (out / "figures").is_dir()


def test_the_mutation_digest_reads_only_regular_claim_files(tmp_path):
    """A directory, a pipe or a link to a device named *.yaml is the loader's to report: the digest neither hangs
    on it nor crashes (and blames mutants.json)."""
    from claims_harness.engine import find_course

    course_dir = tmp_path / "course"
    shutil.copytree(Path(__file__).resolve().parent / "course_two", course_dir,
                    ignore=shutil.ignore_patterns("__pycache__", ".claims-cache", "reports"))
    course = find_course(course_dir)
    before = mutation_inputs_digest(course)
    (course.claims / "a-directory.yaml").mkdir()
    os.mkfifo(course.claims / "a-pipe.yaml")
    (course.claims / "zeros.yaml").symlink_to("/dev/zero")
    after = mutation_inputs_digest(course)
    assert after != before  # the names count, as the loader's problems with them do

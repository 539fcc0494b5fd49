"""The course text in the loop: anchors, drift between text versions, review, the gate, and hostile texts.

Run on the toy course (``tests/course_two``), whose text ``TEXT.md`` was written for these tests
and whose statements are anchored and reviewed against it. Each kind of revision an author makes
gets exactly the statuses it implies; ``claims text status --format json`` is what is compared.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import pythonpath

from claims_harness.cli import main as claims

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent

INTRO_SUMS = "The running sums of 3, 1 and 4 are 3, 4 and 8.\n"
GAUSS = "Gauss is said to have summed the first 100 integers as a schoolboy.\n"
ITEMS = ("- With positive values a running sum never decreases.\n"
         "- The last running sum is the total of all the values.\n")
UNCHANGED_MARKS = ["unchanged", "unchanged", "unchanged"]  # the two steps' titles, and the Gauss anecdote
STATEMENTS = ("l1-sums-are-cumulative", "l1-running-sums-example", "l1-positive-never-decreases", "l1-last-is-total",
              "l1-triangular-closed-form", "l1-triangular-at-ten", "l1-triangular-at-hundred")


@pytest.fixture
def toy(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "course_two"
    shutil.copytree(HERE / "course_two", root, ignore=shutil.ignore_patterns("reports", ".claims-cache"))
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", pythonpath(root))
    return root


def status(capsys, *text: str) -> tuple[int, dict]:
    """``claims text status --format json``, with ``--text`` for each of ``text`` (NAME=PATH)."""
    capsys.readouterr()
    code = claims(["text", "status", "--format", "json", *(arg for given in text for arg in ("--text", given))])
    out = capsys.readouterr().out
    return code, json.loads(out)


def revised(root: Path, name: str, text: str) -> str:
    """A revised copy of the toy text, beside it, as a ``--text`` argument."""
    path = root / f"{name}.md"
    path.write_bytes(text.encode("utf-8"))
    return f"toy={path}"


def drifted(found: dict) -> dict[str, str]:
    return {key: value for key, value in found["statements"].items() if value != "unchanged"}


def test_the_toy_text_is_clean_as_committed(toy, capsys):
    code, found = status(capsys)
    assert code == 0 and found["clean"]
    assert found["statements"] == dict.fromkeys(STATEMENTS, "unchanged")
    assert [mark["status"] for mark in found["marks"]] == UNCHANGED_MARKS
    assert found["uncovered_blocks"] == [] and found["unheld_numbers"] == [] and found["unbound_numbers"] == []
    assert found["items"] == {"numbers": {"total": 11, "held": 10, "marked": 1, "unheld": 0},
                              "formulas": {"total": 1, "held": 1, "marked": 0, "unheld": 0}}


# Each revision of the toy text an author could make, with exactly the statuses it implies: the statements that
# are not 'unchanged', the marks' statuses, the uncovered blocks as (step, position), and the unheld numbers.
REVISIONS = {
    "a number changed": (
        lambda text: text.replace("the sum is 55", "the sum is 56"),
        {"l1-triangular-at-ten": "changed", "l1-triangular-at-hundred": "reworded"}, UNCHANGED_MARKS, [], ["56"]),
    "a paragraph reworded with its numbers intact": (
        lambda text: text.replace(INTRO_SUMS, "Summing 3, 1 and 4 as we go, the running sums are 3, 4 and 8.\n"),
        {"l1-running-sums-example": "reworded"}, UNCHANGED_MARKS, [], []),
    "a paragraph moved within its step": (
        lambda text: text.replace(INTRO_SUMS + "\n", "").replace(ITEMS, ITEMS + "\n" + INTRO_SUMS),
        {"l1-running-sums-example": "moved"}, UNCHANGED_MARKS, [], []),
    "a paragraph moved to another step": (
        lambda text: text.replace(INTRO_SUMS + "\n", "").replace(GAUSS, GAUSS + "\n" + INTRO_SUMS),
        {"l1-running-sums-example": "relocated"}, UNCHANGED_MARKS, [], []),
    "a marked paragraph moved to another step": (
        lambda text: text.replace(GAUSS + "\n", "").replace(ITEMS, ITEMS + "\n" + GAUSS),
        {}, ["unchanged", "unchanged", "relocated"], [], []),
    "a new paragraph holding a new number": (
        lambda text: text.replace("For n = 10", "Every triangular number is a sum of 7 or fewer squares.\n\n"
                                                "For n = 10"),
        {}, UNCHANGED_MARKS, [("lesson1/sums", 3)], ["7"]),
    "a paragraph deleted": (
        lambda text: text.replace("- The last running sum is the total of all the values.\n", ""),
        {"l1-last-is-total": "orphaned"}, UNCHANGED_MARKS, [], []),
    "a step heading renamed": (
        lambda text: text.replace("## Step lesson1/intro: Running sums", "## Step lesson1/intro: Running totals"),
        {}, ["reworded", "unchanged", "unchanged"], [("lesson1/intro", 0)], []),
    "a step heading negated": (
        lambda text: text.replace("## Step lesson1/sums: Triangular numbers",
                                  "## Step lesson1/sums: Not triangular numbers"),
        {}, ["unchanged", "reworded", "unchanged"], [("lesson1/sums", 0)], []),
    "a step heading deleted": (
        lambda text: text.replace("## Step lesson1/sums: Triangular numbers\n", ""),
        {"l1-triangular-closed-form": "relocated", "l1-triangular-at-ten": "relocated",
         "l1-triangular-at-hundred": "relocated"}, ["unchanged", "orphaned", "relocated"], [], []),
    "whitespace and line endings only": (
        lambda text: text.replace("A running sum adds each value", "A  running\tsum adds\neach value")
        .replace("\n", "  \r\n").replace("\r\n\r\n", "\r\n\r\n\r\n"),
        {}, UNCHANGED_MARKS, [], []),
    "two paragraphs of a step swapped": (
        lambda text: text.replace(ITEMS, "".join(reversed(ITEMS.splitlines(keepends=True)))),
        {"l1-last-is-total": "moved"}, UNCHANGED_MARKS, [], []),
    "a formula edited": (
        lambda text: text.replace(r"\frac{n(n+1)}{2}", r"\frac{n(n-1)}{2}"),
        {"l1-triangular-closed-form": "changed"}, UNCHANGED_MARKS, [],
        [r"1 + 2 + \dots + n = \frac{n(n-1)}{2}"]),
    "two numbers of a block swapped": (
        lambda text: text.replace("are 3, 4 and 8.", "are 3, 8 and 4."),
        {"l1-running-sums-example": "changed"}, UNCHANGED_MARKS, [], []),
    "a look-alike inserted before the original, and the original reworded": (
        lambda text: text.replace("For n = 10 the sum is 55, and for n = 100 it is 5050.",
                                  "For n = 10 the sum is 56, and for n = 100 it is 5050.\n\n"
                                  "When n = 10 the sum is 55; when n = 100 it is 5050."),
        {"l1-triangular-at-ten": "ambiguous", "l1-triangular-at-hundred": "ambiguous"}, UNCHANGED_MARKS,
        [("lesson1/sums", 3), ("lesson1/sums", 4)], ["10", "56", "100", "5050", "10", "55", "100", "5050"]),
    "a verbatim recap elsewhere, and the original negated": (
        lambda text: text.replace(INTRO_SUMS, "The running sums of 3, 1 and 4 are not 3, 4 and 8.\n")
        .replace(GAUSS, GAUSS + "\n" + INTRO_SUMS),
        {"l1-running-sums-example": "ambiguous"}, UNCHANGED_MARKS, [("lesson1/intro", 2), ("lesson1/sums", 2)],
        ["3", "1", "4", "8", "3", "1", "4", "8"]),
}


@pytest.mark.parametrize("revision", REVISIONS)
def test_a_revised_text_gets_exactly_the_statuses_its_edit_implies(toy, capsys, revision):
    edit, statements, marks, uncovered, unheld = REVISIONS[revision]
    text = (toy / "TEXT.md").read_text(encoding="utf-8")
    edited = edit(text)
    assert edited != text, "the revision must change the text"
    code, found = status(capsys, revised(toy, "revised", edited))
    assert drifted(found) == statements
    assert [mark["status"] for mark in found["marks"]] == marks
    assert [(block["step"], block["block"]) for block in found["uncovered_blocks"]] == uncovered
    assert [number["number"] for number in found["unheld_numbers"]] == unheld
    clean = all(value in ("unchanged", "moved") for value in [*statements.values(), *marks]) and not (
        uncovered or unheld)
    assert (code, found["clean"]) == ((0, True) if clean else (1, False)), found["steps_not_in_text"]


def test_a_changed_statement_says_what_it_no_longer_holds(toy, capsys):
    text = (toy / "TEXT.md").read_text(encoding="utf-8").replace("the sum is 55", "the sum is 56")
    _, found = status(capsys, revised(toy, "revised", text))
    detail = found["details"]["l1-triangular-at-ten"]
    assert detail["missing"] == ["55"] and (detail["step"], detail["block"]) == ("lesson1/sums", 3)
    assert 0 < detail["similarity"] <= 1


def test_a_fuzzy_match_is_never_trusted_and_an_unrelated_paragraph_is_no_match(toy, capsys):
    """A paragraph replaced by another one that shares nothing of it leaves its statement orphaned, not reworded."""
    text = (toy / "TEXT.md").read_text(encoding="utf-8").replace(
        INTRO_SUMS, "Cats sleep for most of the day, which surprises nobody who has one.\n")
    code, found = status(capsys, revised(toy, "revised", text))
    assert code == 1
    assert drifted(found) == {"l1-running-sums-example": "orphaned"}
    assert [(block["step"], block["block"]) for block in found["uncovered_blocks"]] == [("lesson1/intro", 2)]


def test_the_text_format_makes_every_line_a_block(toy, capsys):
    """The module's export (one paragraph a line, list items as consecutive lines) in the plain-text format."""
    pyproject = toy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8").replace('texts.toy.path = "TEXT.md"',
                                                                       'texts.toy.path = "TEXT.txt"\n'
                                                                       'texts.toy.format = "text"'), encoding="utf-8")
    (toy / "TEXT.txt").write_text("## Step lesson1/intro: x\nA paragraph.\n\nOne item;\nanother item.\n"
                                  "J(\\theta)=\\mathbb{E}[R]\n## Step lesson1/sums: y\nSum 1 and 2.\n",
                                  encoding="utf-8")
    capsys.readouterr()
    assert claims(["text", "show"]) == 0
    shown = capsys.readouterr().out
    assert "[1] paragraph, line 2" in shown and "[2] item, line 4" in shown and "[3] item, line 5" in shown
    assert "[4] formula, line 6" in shown and "[1] paragraph, line 8; numbers: 1, 2" in shown


def test_a_step_or_block_the_text_does_not_have_is_refused_with_what_it_has(toy, capsys):
    capsys.readouterr()
    assert claims(["text", "show", "lesson1/sum"]) != 0
    assert "no step lesson1/sum in the text; did you mean 'lesson1/sums'?" in capsys.readouterr().err
    assert claims(["text", "anchor", "l1-last-is-total", "--step", "lesson1/sums", "--block", "99"]) != 0
    assert "step lesson1/sums has blocks 1 to" in capsys.readouterr().err


# --------------------------------------------------------------------------- anchor and review


def statement_of(root: Path, key: str) -> dict:
    data = yaml.safe_load((root / "claims" / "lesson1.yaml").read_text(encoding="utf-8"))
    return next(item for item in data["statements"] if item["id"] == key)


def test_an_anchor_is_unreviewed_until_reviewed_by_name(toy, capsys):
    assert claims(["text", "anchor", "l1-last-is-total", "--block", "4"]) == 0
    assert "review" not in statement_of(toy, "l1-last-is-total")["anchor"]
    _, found = status(capsys)
    assert drifted(found) == {"l1-last-is-total": "unreviewed"} and not found["clean"]
    assert claims(["text", "review"]) == 2, "reviewing everything must be asked for by name"
    assert claims(["text", "review", "l1-last-is-total"]) == 0
    assert status(capsys)[1]["clean"]


def test_anchoring_holds_the_numbers_the_statement_prints(toy, capsys):
    assert claims(["text", "anchor", "l1-triangular-at-hundred", "--block", "3"]) == 0
    assert statement_of(toy, "l1-triangular-at-hundred")["anchor"]["holds"] == ["100", "5050"]
    assert claims(["text", "anchor", "l1-triangular-at-hundred", "--block", "3", "--holds", "5050"]) == 0
    assert statement_of(toy, "l1-triangular-at-hundred")["anchor"]["holds"] == ["5050"]
    assert claims(["text", "anchor", "l1-triangular-at-hundred", "--block", "3", "--holds", "5051"]) == 2
    assert "does not print '5051'" in capsys.readouterr().err
    assert claims(["text", "anchor", "l1-triangular-at-hundred", "--block", "2"]) == 0  # the formula
    assert statement_of(toy, "l1-triangular-at-hundred")["anchor"]["holds"] == [r"1 + 2 + \dots + n = \frac{n(n+1)}{2}"]
    assert claims(["text", "anchor", "l1-triangular-at-hundred", "--block", "9"]) == 2
    assert "blocks 1 to 3 (and 0, its title), not 9" in capsys.readouterr().err


def test_a_new_wording_or_a_hand_edited_anchor_is_unreviewed(toy, capsys):
    claims_file = toy / "claims" / "lesson1.yaml"
    original = claims_file.read_text(encoding="utf-8")
    claims_file.write_text(original.replace("says: The last running sum is the total of all the values.",
                                            "says: The last running sum is the total."), encoding="utf-8")
    assert drifted(status(capsys)[1]) == {"l1-last-is-total": "unreviewed"}
    fingerprint = statement_of(toy, "l1-sums-are-cumulative")["anchor"]["fingerprint"]
    claims_file.write_text(original.replace(fingerprint, "n1:0123456789abcdef"), encoding="utf-8")
    assert drifted(status(capsys)[1]) == {"l1-sums-are-cumulative": "unreviewed"}


def test_moved_anchors_are_updated_without_a_review(toy, capsys):
    text = (toy / "TEXT.md").read_text(encoding="utf-8")
    (toy / "TEXT.md").write_text(text.replace(INTRO_SUMS + "\n", "").replace(ITEMS, ITEMS + "\n" + INTRO_SUMS)
                                 .replace(GAUSS + "\n", "").replace(INTRO_SUMS, INTRO_SUMS + "\n" + GAUSS),
                                 encoding="utf-8")
    code, found = status(capsys)
    assert code == 1 and drifted(found) == {"l1-running-sums-example": "moved"}
    assert [mark["status"] for mark in found["marks"]] == ["unchanged", "unchanged", "relocated"]
    before = statement_of(toy, "l1-running-sums-example")["anchor"]
    assert claims(["text", "review", "--moved"]) == 0
    after = statement_of(toy, "l1-running-sums-example")["anchor"]
    assert after["block"] == 4 and after["review"] == before["review"]
    marks = yaml.safe_load((toy / "claims" / "lesson1.yaml").read_text(encoding="utf-8"))["nothing_checkable"]
    assert [(mark["where"], mark["anchor"]["block"]) for mark in marks] == [
        ("lesson1/intro", 0), ("lesson1/intro", 5), ("lesson1/sums", 0)]
    code, found = status(capsys)
    assert code == 0 and drifted(found) == {} and [m["status"] for m in found["marks"]] == UNCHANGED_MARKS


def test_a_statement_moved_to_another_step_is_reviewed_by_name_and_its_place_follows(toy, capsys):
    """A move to another step is no clean status: '--moved' leaves it (exit 1); a review by name moves the statement
    to that step, and to the file of that step's lesson where that is another, so that 'claims lint' passes."""
    text = (toy / "TEXT.md").read_text(encoding="utf-8")
    (toy / "TEXT.md").write_text(text.replace(INTRO_SUMS + "\n", "").replace(GAUSS, GAUSS + "\n" + INTRO_SUMS),
                                 encoding="utf-8")
    # The sums step becomes a lesson of its own file: the move crosses files.
    claims_file = toy / "claims" / "lesson1.yaml"
    lesson = claims_file.read_text(encoding="utf-8")
    other = toy / "claims" / "lesson1b.yaml"
    other.write_text(_lesson_of_step(lesson, "lesson1/sums", with_claims=True), encoding="utf-8")
    claims_file.write_text(_lesson_of_step(lesson, "lesson1/intro", with_claims=False), encoding="utf-8")
    assert claims(["verify"]) == 0  # the registry of claims, of the two files now
    capsys.readouterr()
    assert claims(["lint"]) == 0, capsys.readouterr().out
    code, found = status(capsys)
    assert code == 1 and drifted(found) == {"l1-running-sums-example": "relocated"}
    capsys.readouterr()
    assert claims(["text", "review", "--moved"]) == 1
    assert "l1-running-sums-example (now lesson1/sums block 2" in capsys.readouterr().err
    assert claims(["text", "review", "l1-running-sums-example"]) == 0
    assert "moved from claims/lesson1.yaml to claims/lesson1b.yaml" in capsys.readouterr().out
    moved = next(item for item in yaml.safe_load(other.read_text(encoding="utf-8"))["statements"]
                 if item["id"] == "l1-running-sums-example")
    assert moved["where"] == "lesson1/sums" and moved["anchor"]["block"] == 2
    assert "l1-running-sums-example" not in claims_file.read_text(encoding="utf-8")
    code, found = status(capsys)
    assert code == 0, (found["statements"], found["marks"], found["uncovered_blocks"], found["unheld_numbers"],
                       found["unbound_numbers"])
    capsys.readouterr()
    assert claims(["lint"]) == 0, capsys.readouterr().out


def _lesson_of_step(lesson: str, step: str, with_claims: bool) -> str:
    """The toy lesson cut to one step: its statements and marks, and its claims or none."""
    head = lesson[:lesson.index("statements:")].replace('["lesson1/intro", "lesson1/sums"]', f'["{step}"]')
    statements = [item for item in _items(lesson, "statements") if f'where: "{step}"' in item]
    marks = [item for item in _items(lesson, "nothing_checkable") if f'where: "{step}"' in item]
    return (head + "statements:\n" + "".join(statements) + "nothing_checkable:\n" + "".join(marks)
            + (lesson[lesson.index("claims:"):] if with_claims else "claims: []\n"))


def _items(lesson: str, section: str) -> list[str]:
    """The items of a top-level list of a claim file, as text, each from its '  - ' line."""
    start = lesson.index(f"\n{section}:\n") + len(section) + 3
    end = min(at for key in ("\nnothing_checkable:", "\nclaims:") if (at := lesson.find(key, start)) >= 0)
    items: list[str] = []
    for line in lesson[start:end + 1].splitlines(keepends=True):
        if line.startswith("  - ") or not items:
            items.append("")
        items[-1] += line
    return items


def test_a_changed_number_is_cleared_only_by_a_check_of_the_new_number(toy, capsys):
    """Issue 42: the text's n = 10 and 55 become 11 and 66. Neither a new anchor nor a review stamps the new numbers
    until the claim computes from 11 and expects 66, and its checks, evaluated (not reused) on the changed text,
    passed."""
    assert claims(["verify", "--no-cache"]) == 0
    text = toy / "TEXT.md"
    text.write_text(text.read_text(encoding="utf-8").replace("For n = 10 the sum is 55", "For n = 11 the sum is 66"),
                    encoding="utf-8")
    assert drifted(status(capsys)[1]) == {"l1-triangular-at-ten": "changed", "l1-triangular-at-hundred": "reworded"}
    capsys.readouterr()
    assert claims(["text", "review", "l1-triangular-at-ten", "--holds", "11", "66"]) == 1
    assert "it holds 11, which no check of its claims (triangular-closed-form) states" in capsys.readouterr().err
    # A new anchor clears nothing: the statement is unreviewed, and its review meets the same refusal.
    assert claims(["text", "anchor", "l1-triangular-at-ten", "--block", "3", "--holds", "11", "66"]) == 0
    assert drifted(status(capsys)[1])["l1-triangular-at-ten"] == "unreviewed"
    capsys.readouterr()
    assert claims(["text", "review", "l1-triangular-at-ten"]) == 1
    assert "it holds 11, which no check" in capsys.readouterr().err
    claims_file = toy / "claims" / "lesson1.yaml"
    claims_file.write_text(claims_file.read_text(encoding="utf-8").replace("params: {n: 10}", "params: {n: 11}")
                           .replace("last: {exact: 55}", "last: {exact: 66}")
                           .replace("scope: {terms: a-few}", "scope: {terms: many}"), encoding="utf-8")
    capsys.readouterr()
    assert claims(["text", "review", "l1-triangular-at-ten"]) == 1
    assert "a run before the text changed" in capsys.readouterr().err
    assert claims(["verify"]) == 0  # n = 11 is new to the cache: its observations are evaluated, not reused
    assert claims(["text", "review", "l1-triangular-at-ten"]) == 0
    assert statement_of(toy, "l1-triangular-at-ten")["anchor"]["holds"] == ["11", "66"]


def test_a_run_that_reused_its_observations_does_not_clear_a_changed_number(toy, capsys):
    """The text's 55 becomes 55.0 (the same number, printed otherwise): bound, but its check must run again."""
    assert claims(["verify"]) == 0  # observations cached
    text = toy / "TEXT.md"
    text.write_text(text.read_text(encoding="utf-8").replace("the sum is 55", "the sum is 55.0"), encoding="utf-8")
    assert claims(["verify"]) == 0
    capsys.readouterr()
    assert claims(["text", "review", "l1-triangular-at-ten", "--holds", "10", "55.0"]) == 1
    assert "(triangular-closed-form check 1) reused observations made before the change" in capsys.readouterr().err
    assert claims(["verify", "--no-cache"]) == 0
    assert claims(["text", "review", "l1-triangular-at-ten", "--holds", "10", "55.0"]) == 0


def test_a_held_number_no_check_states_is_a_problem_until_excused(toy, capsys):
    claims_file = toy / "claims" / "lesson1.yaml"
    claims_file.write_text(claims_file.read_text(encoding="utf-8").replace("params: {n: 10}", "params: {n: 12}")
                           .replace("last: {exact: 55}", "last: {exact: 78}"), encoding="utf-8")
    capsys.readouterr()
    assert claims(["lint"]) == 2
    out = capsys.readouterr().out
    assert ("statement 'l1-triangular-at-ten' holds 10, which no check of its claims (triangular-closed-form) states "
            "at its printed precision (nearest: claim 'triangular-closed-form' check 1, params.n = 12)") in out
    assert "holds 55, which no check" in out
    code, found = status(capsys)
    assert code == 1 and len(found["unbound_numbers"]) == 2
    claims_file.write_text(claims_file.read_text(encoding="utf-8").replace(
        "    scope: {terms: a-few}\n", "    scope: {terms: a-few}\n    not_compared: {'10': 'x', '55': 'y'}\n", 1),
        encoding="utf-8")
    assert status(capsys)[1]["unbound_numbers"] == []


def test_marks_carry_their_reason_and_are_stamped(toy, capsys):
    assert claims(["text", "mark", "lesson1/sums", "3", "--numbers", "100"]) == 2
    assert "needs its reason" in capsys.readouterr().err
    assert claims(["text", "mark", "lesson1/sums", "2", "--numbers", "1", "--reason", "x"]) == 2
    assert claims(["text", "mark", "lesson1/sums", "1", "--numbers", "100", "--reason", "x"]) == 2
    assert "marked whole already" in capsys.readouterr().err
    assert claims(["text", "mark", "lesson1/sums", "3", "--numbers", "100", "--reason", "the size of an example"]) == 0
    marks = yaml.safe_load((toy / "claims" / "lesson1.yaml").read_text(encoding="utf-8"))["nothing_checkable"]
    assert [(mark["where"], mark["anchor"]["block"], mark["anchor"].get("holds")) for mark in marks] == [
        ("lesson1/intro", 0, None), ("lesson1/sums", 0, None), ("lesson1/sums", 1, None), ("lesson1/sums", 3, ["100"])]
    assert status(capsys)[0] == 0
    claims_file = toy / "claims" / "lesson1.yaml"
    claims_file.write_text(claims_file.read_text(encoding="utf-8").replace("the size of an example", "a size"),
                           encoding="utf-8")
    assert [mark["status"] for mark in status(capsys)[1]["marks"]] == [*UNCHANGED_MARKS, "unreviewed"]
    assert claims(["text", "mark", "lesson1/sums", "3", "--remove"]) == 0
    assert [mark["status"] for mark in status(capsys)[1]["marks"]] == UNCHANGED_MARKS


def test_the_json_status_gives_a_marks_line_in_its_claim_file_and_its_line_in_the_text(toy, capsys):
    assert claims(["text", "mark", "lesson1/sums", "3", "--numbers", "100", "--reason", "the size of an example"]) == 0
    assert claims(["text", "mark", "lesson1/sums", "3", "--numbers", "5050", "--reason", "another reason"]) == 0
    marks = status(capsys)[1]["marks"]
    on_block = [mark for mark in marks if mark.get("block") == 3]
    assert len(on_block) == 2 and len({mark["line"] for mark in on_block}) == 2  # two marks, two claim-file lines
    lines = (toy / "claims" / "lesson1.yaml").read_text(encoding="utf-8").splitlines()
    assert all(lines[mark["line"] - 1].startswith("  - where:") for mark in on_block)
    assert {mark["text_line"] for mark in on_block} == {22}


# --------------------------------------------------------------------------- the gate and the reports


def test_the_release_gate_fails_on_a_revised_text_and_the_reports_carry_its_state(toy, capsys):
    assert claims(["verify", "--no-cache"]) == 0
    results = json.loads((toy / "reports" / "claims.json").read_text(encoding="utf-8"))
    assert results["text"]["clean"] and results["text"]["documents"][0]["path"] == "TEXT.md"
    assert results["text"]["counts"]["unchanged"] == len(STATEMENTS)
    assert "## The text" in (toy / "reports" / "claims_report.md").read_text(encoding="utf-8")
    assert (toy / "reports" / "claims_text.html").is_file()
    capsys.readouterr()
    assert claims(["verify", "--check"]) == 0
    text = toy / "TEXT.md"
    text.write_text(text.read_text(encoding="utf-8").replace("the sum is 55", "the sum is 56"), encoding="utf-8")
    capsys.readouterr()
    assert claims(["verify", "--check"]) == 1
    err = capsys.readouterr().err
    assert "text: 1 statement changed: l1-triangular-at-ten" in err
    assert "text: 1 statement reworded: l1-triangular-at-hundred" in err
    assert "text: 1 numbers or formulas no statement holds" in err
    assert "statement 'l1-triangular-at-ten' in the text: unchanged at lesson1/sums block 3 -> changed" in err
    text.write_text(text.read_text(encoding="utf-8").replace("the sum is 56", "the sum is 55"), encoding="utf-8")
    assert claims(["verify"]) == 0 and claims(["verify", "--check"]) == 0
    given = revised(toy, "revised", text.read_text(encoding="utf-8").replace("Gauss is said", "Gauss, it is said,"))
    capsys.readouterr()
    # A revised copy, read in the configured one's stead.
    assert claims(["verify", "--check", "--claims-text", given]) == 1
    assert "text: marks of nothing checkable that no longer stand on their block: 1 reworded" in capsys.readouterr().err


def test_a_missing_text_is_one_error_and_a_report_without_the_text(toy, capsys):
    (toy / "TEXT.md").unlink()
    capsys.readouterr()
    assert claims(["text", "status"]) == 2
    err = capsys.readouterr().err
    assert "[tool.claims.texts.toy] path:" in err and "TEXT.md does not exist" in err and err.count("\n") == 1
    assert claims(["verify", "--no-cache"]) == 0  # a student's copy has no text: everything else is reported
    assert "the course text was not read" in capsys.readouterr().err
    results = json.loads((toy / "reports" / "claims.json").read_text(encoding="utf-8"))
    assert results["text"]["available"] is False
    assert not (toy / "reports" / "claims_text.html").exists()
    assert claims(["verify", "--check"]) == 1
    assert "the course text could not be read" in capsys.readouterr().err


def test_a_course_without_a_text_works_as_before(tmp_path, monkeypatch, capsys):
    """The conftest's throwaway projects have this course's table without its texts."""
    assert "texts" not in (tmp_path / "pyproject.toml").read_text(encoding="utf-8")
    shutil.copytree(PROJECT / "claims", tmp_path / "claims")
    monkeypatch.chdir(tmp_path)
    assert claims(["text", "status"]) == 2
    assert "no [tool.claims.texts] configured" in capsys.readouterr().err


def test_the_annotated_page_is_never_committed():
    ignored = subprocess.run(["git", "check-ignore", "-q", "reports/claims_text.html"], cwd=PROJECT, check=False)
    assert ignored.returncode == 0
    tracked = subprocess.run(["git", "ls-files", "--", "*claims_text.html"], cwd=PROJECT, capture_output=True,
                             text=True, check=True)
    assert tracked.stdout == ""


def test_the_page_and_the_report_link_to_each_other(toy, capsys):
    """Every link from the annotated text to the report, and back, names an element of the other page."""
    from html.parser import HTMLParser

    assert claims(["verify", "--no-cache"]) == 0

    class Links(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.ids, self.links = set(), []

        def handle_starttag(self, tag, attrs):
            attributes = dict(attrs)
            if "id" in attributes:
                self.ids.add(attributes["id"])
            if tag == "a" and "#" in (attributes.get("href") or ""):
                self.links.append(attributes["href"])

    pages = {}
    for name in ("claims_text.html", "claims_report.html"):
        parser = Links()
        parser.feed((toy / "reports" / name).read_text(encoding="utf-8"))
        pages[name] = parser
    for name, parser in pages.items():
        other = "claims_report.html" if name == "claims_text.html" else "claims_text.html"
        crossing = [link for link in parser.links if link.startswith(other + "#")]
        assert crossing, f"{name} has no link to {other}"
        missing = [link for link in crossing if link.partition("#")[2] not in pages[other].ids]
        assert not missing, f"{name} links to what {other} does not have: {missing}"
    into_text = {link.partition("#")[2] for link in pages["claims_report.html"].links if
                 link.startswith("claims_text.html#")}
    assert len(into_text) == 6  # the blocks the toy's statements stand on


# --------------------------------------------------------------------------- bad and hostile texts


def write_text(root: Path, data: bytes) -> str:
    path = root / "hostile.md"
    path.write_bytes(data)
    return f"toy={path}"


@pytest.mark.parametrize(("data", "message"), [
    (b"## Step lesson1/intro\nA caf\xe9.\n", "hostile.md:2: not valid UTF-8 (byte 27: b'\\xe9')"),
    (b"# A text\n\nwith no step at all\n", "hostile.md:1: the 'step' pattern '^## Step (?P<step>lesson\\\\d+/[a-z]+)' "
                                           "of [tool.claims.texts.toy] finds no step in 4 lines"),
    (b"## Step lesson1/intro\nx\n## Step lesson1/intro\n", "hostile.md:3: step 'lesson1/intro' is found a second "
                                                           "time (first at line 1)"),
    (b"## Step lesson1/intro\nx\n## Step lesson7/extra\n", "hostile.md:3: step 'lesson7/extra', found by the 'step' "
                                                           "pattern"),
    (b"## Step lesson1/intro\nan escape \x1b[31m here\n", "hostile.md:2: the text holds U+001B, a control character"),
    (b"## Step lesson1/intro\n" + b"x" * 60_000 + b"\n", "hostile.md:2: a block of 60000 characters"),
    (b"x" * (5 << 20), "bytes; a course text is at most 4194304 bytes"),
])
def test_a_bad_text_is_one_error_naming_the_file_and_line(toy, capsys, data, message):
    given = write_text(toy, data)
    capsys.readouterr()
    assert claims(["text", "status", "--text", given]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(("headings", "message"), [
    (1_000_000, "22888896 bytes; a course text is at most 4194304 bytes"),
    (180_000, "hostile.md:1: step 'lesson1/x', found by the 'step' pattern"),
])
def test_a_million_step_headings_are_refused(toy, capsys, headings, message):
    given = write_text(toy, b"".join(b"## Step lesson%d/x\n" % index for index in range(1, headings + 1)))
    capsys.readouterr()
    assert claims(["text", "status", "--text", given]) == 2
    assert message in capsys.readouterr().err


def test_a_text_of_a_million_short_paragraphs_is_refused_and_one_of_many_is_read(toy, capsys):
    given = write_text(toy, b"## Step lesson1/intro\n" + b"a 1\n\n" * 800_000 + b"## Step lesson1/sums\nx\n")
    capsys.readouterr()
    assert claims(["text", "status", "--text", given]) == 2
    assert "hostile.md:40002: block 20001 of the text's steps; a course text has at most 20000" in \
        capsys.readouterr().err
    given = write_text(toy, b"## Step lesson1/intro\n" + b"a 1\n\n" * 19_000 + b"## Step lesson1/sums\nx\n")
    code, found = status(capsys, given)
    assert code == 1 and found["documents"][0]["blocks"] == 19_001
    assert drifted(found) == {key: "orphaned" for key in STATEMENTS}


@pytest.mark.parametrize(("table", "message"), [
    ('path = "TEXT.md"\n', "missing key 'step'"),
    ('path = "TEXT.md"\nstep = "^(unclosed"\n', "key 'step': '^(unclosed' is not a regular expression"),
    ('path = "TEXT.md"\nstep = "^## (?P<name>x)"\n', "has no group named 'step'"),
    ('path = "TEXT.md"\nstep = "^## (?P<n>x)"\nid = "{week}/{n}"\n', "names 'week', which neither"),
    ('path = "TEXT.md"\nstep = "^## (?P<step>x)"\nformat = "rst"\n', "'rst' is not one of text, markdown"),
    ('path = "TEXT.md"\nstep = "^## (?P<step>x)"\npages = 3\n', "unknown key 'pages'"),
])
def test_a_bad_text_configuration_names_the_key(toy, capsys, table, message):
    pyproject = toy / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    start = text.index("texts.toy.path")
    pyproject.write_text(text[:start] + "\n[tool.claims.texts.toy]\n" + table, encoding="utf-8")
    capsys.readouterr()
    assert claims(["text", "status"]) == 2
    err = capsys.readouterr().err
    assert "[tool.claims.texts.toy]" in err and message in err, err


def test_the_module_and_the_syllabus_are_clean_as_committed():
    """The course's own texts, where this machine has them (CI has ../shared/seeds/): every statement anchored."""
    seeds = PROJECT.parent / "shared" / "seeds"
    if not seeds.is_dir():
        pytest.skip(f"the course text is not on this machine ({seeds})")
    done = subprocess.run([sys.executable, "-m", "claims_harness.cli", "text", "status", "--format", "json"],
                          cwd=PROJECT, capture_output=True, text=True, check=False)
    found = json.loads(done.stdout)
    assert {status for status in found["statements"].values()} <= {"unchanged", "moved"}, drifted(found)
    assert found["uncovered_blocks"] == [] and found["unheld_numbers"] == [], (found["uncovered_blocks"][:5],
                                                                               found["unheld_numbers"][:5])
    assert done.returncode == 0

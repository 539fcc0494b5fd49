"""The release gate, ``claims verify --check``: does a fresh run state what the committed report states?

Comparing the reports byte for byte fails on any other CPU: the last bits of floats differ, and a
chaotic experiment's seed can end elsewhere. The gate compares what the claims state, at the
precision they state it:

* every claim, check and ledger statement, in order, with everything the claim files and the
  sources say of them (text, expected values, seeds, verifiers, commands), and the run's course,
  implementation, profile, seed and selection;
* each check's verdict and each comparison's verdict; an observed value only where the rule that
  judged it is equality (a float judged within a printed tolerance, against a threshold or by a
  confidence interval is compared by its verdict, which is all the claim states of it), so an
  experiment is compared by its stated statistics, not by its bits;
* not: timings, the revision, library versions (where and when it ran, not what it found),
  observations no comparison judged, figures (regenerated from the observations) or error
  messages (their paths and timings are the machine's; the verdict ``error`` is compared).

A report of an incomplete run never passes, and the committed Markdown and HTML must be the
rendering of the committed ``claims.json``. Each difference is one line that says what changed:
``claim 'x' check 2 (experiment): comparison 'final_spread' failed -> passed``.

The gate also fails where the reports are current but something else is not: a course text that
drifted under its statements (the author's to review, ``claims text``), and a survivor of the
sharpness check with no reason. Its last lines say which of these it is (``GateFindings``): the
committed reports are called stale only when they differ from the fresh ones.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import UndefinedError

from claims_harness._claims.formats import is_interval
from claims_harness._claims.results_file import RESULTS_FILE, read_results
from claims_harness._reporting.html import HTML_FILE, render_html
from claims_harness._reporting.markdown import render_markdown
from claims_harness._reporting.report import MARKDOWN_FILE
from claims_harness._reporting.results import git
from claims_harness._text.drift import CLEAN
from claims_harness._text.summary import problems as text_problems
from claims_harness.errors import ResultsUnreadable, visible

# What the run was asked to do; the rest of ``run`` (id, started, seconds, revision, versions, completeness)
# says where and when it ran, or is judged on its own (an incomplete run never passes).
STATED_RUN_FIELDS = ("course", "sources_file", "impl", "profile", "seed", "selection")
# What the claim files and the sources say of a claim and of a check; verdicts and comparisons are compared apart.
STATED_CLAIM_FIELDS = ("where", "file", "line", "lesson", "statement", "formula", "sources", "citations",
                       "limitations", "erratum", "clarification", "origin", "covers", "problems")
STATED_CHECK_FIELDS = ("verifier", "verifier_location", "uses", "params", "rejects", "harness_chosen", "seed",
                       "skip_reason", "reproduce")
STATED_STATEMENT_FIELDS = ("where", "says", "shape", "not_checkable", "weak", "origin", "claims")
# The rules that judge by equality: the observed value is then part of what the claim states.
EXACT_RULES = ("equal", "exact equality")
# A value longer than this is named as changed, not printed twice.
_SHOWN_LENGTH = 60
_ABSENT = object()


@dataclass(frozen=True)
class Snapshot:
    """What a report directory states, as the gate compares it.

    ``results`` is the ``claims.json`` there (None when there is none, or it cannot be read, and
    ``unreadable`` says why); ``unrendered`` lists the report files that are not the rendering of it.
    """

    results: dict[str, Any] | None
    unreadable: str | None = None
    unrendered: tuple[str, ...] = ()

    @property
    def incomplete(self) -> str | None:
        """Why the run this report is of is incomplete, or None; a report without the flag is of a complete run."""
        run = (self.results or {}).get("run", {})
        if run.get("complete", True) is not False and not run.get("incomplete"):
            return None
        return str(run.get("incomplete") or "marked incomplete")


def snapshot(directory: Path) -> Snapshot:
    """Read a report directory now: before a run overwrites it, or after."""
    try:
        results = read_results(directory)
    except ResultsUnreadable as error:
        return Snapshot(None, str(error))
    unrendered = []
    # The HTML inlines the figures beside it: rendered from this directory, before a run replaces them.
    for name, render in ((MARKDOWN_FILE, render_markdown), (HTML_FILE, lambda r: render_html(r, directory))):
        path = directory / name
        try:
            text = render(results)
        except (KeyError, TypeError, AttributeError, UndefinedError):  # written by another harness, with other fields
            text = None
        if text is None or not path.is_file() or path.read_text(encoding="utf-8") != text:
            unrendered.append(name)
    return Snapshot(results, unrendered=tuple(unrendered))


def committed_snapshot(directory: Path) -> tuple[Snapshot, str]:
    """What the release gate compares a fresh run with, read before the run writes, and where it was read.

    In a git work tree, the report committed at ``HEAD``: a report regenerated on disk and not committed is
    what the gate exists to catch, so it must not be the yardstick (a second run would pass with nothing
    committed). Outside one (a course that is not under git), the files on disk, and the line says so.
    """
    top = git(directory.parent if not directory.is_dir() else directory, "rev-parse", "--show-toplevel")
    if top is None:
        return snapshot(directory), f"the files in {directory}/ (not in a git work tree: nothing committed to read)"
    root = Path(top.decode().strip())
    inside = directory.resolve().relative_to(root.resolve()).as_posix()
    head = (git(root, "rev-parse", "--short=12", "HEAD") or b"").decode().strip()
    listed = git(root, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", inside) if head else None
    names = [name for name in (listed or b"").decode().split("\0") if name]
    where = f"the report committed at {head} ({inside}/ in git)" if head else "the report committed in git"
    if not names:
        return Snapshot(None, f"nothing is committed under {inside}/ at {head or 'HEAD (no commit yet)'}"), where
    with tempfile.TemporaryDirectory(prefix="claims-committed-") as copy:
        for name in names:
            target = Path(copy) / Path(name).relative_to(inside)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(git(root, "show", f"HEAD:{name}") or b"")
        return snapshot(Path(copy)), where


def compare_snapshots(before: Snapshot, after: Snapshot) -> list[str]:
    """How the fresh report (``after``) differs from the committed one (``before``), one line per difference.

    Empty only when both are of complete runs and state the same; see the module docstring for what that means.
    """
    reports, text_state = _snapshot_differences(before, after)
    return reports + text_state


def _snapshot_differences(before: Snapshot, after: Snapshot) -> tuple[list[str], list[str]]:
    """``compare_snapshots``, in two parts: the differences in what the claims and the run state, and those in the
    course text's state alone."""
    differences = []
    if after.results is None:
        return [f"the fresh run wrote no readable report: {after.unreadable}"], []
    if after.incomplete:
        differences.append(f"the fresh run is incomplete ({after.incomplete}): it cannot pass the gate")
    if before.results is None:
        return [*differences, f"nothing to compare with: {before.unreadable}"], []
    if before.incomplete:
        differences.append(f"the committed report is of an incomplete run ({before.incomplete})")
    differences += [f"the committed {name} is not the rendering of the {RESULTS_FILE} beside it"
                    for name in before.unrendered]
    return (differences + _claims_differences(before.results, after.results),
            _text_differences(before.results.get("text"), after.results.get("text")))


@dataclass(frozen=True)
class GateFindings:
    """Why the release gate fails, by what fixes it: each part is lines to print; all empty when it passes.

    ``reports``: the committed reports differ from the fresh ones in what the claims and the run state;
    ``text_state``: they differ only in the course text's state (its documents, each statement's place and
    status); ``drift``: the text is not clean (``claims_harness._text.summary.problems``), whatever the reports say;
    ``survivors``: survivors of the sharpness check with no reason in their claim file.
    """

    reports: tuple[str, ...] = ()
    text_state: tuple[str, ...] = ()
    drift: tuple[str, ...] = ()
    survivors: tuple[str, ...] = ()
    drifted: str = ""  # what of the text drifted, in a few words (empty when it is clean)
    text_unread: bool = False

    @property
    def passed(self) -> bool:
        return not (self.reports or self.text_state or self.drift or self.survivors)

    def lines(self) -> list[str]:
        """Every finding, one line each, then what to do: the gate's output, in order."""
        return [*self.reports, *self.text_state, *self.survivors, *self.drift, *self.conclusions()]

    def conclusions(self) -> list[str]:
        """What is wrong, named for what it is, and its fix; the committed reports are stale only when they differ."""
        found = []
        differ = bool(self.reports or self.text_state)
        if self.reports or (self.text_state and not self.drift):
            found.append("the committed reports are stale; commit the regenerated ones")
        if self.drift:
            then = ("then commit the reports 'claims verify' writes" if differ else "the reports are unchanged")
            if self.text_unread:
                found.append("the course text could not be read or compared with the ledger (the line above says "
                             f"why); fix that, {then}")
            elif self.drifted:
                found.append(f"{self.drifted} (claims text status lists them); review them, {then}")
            else:  # a kind of drift this summary does not count: the lines above name it
                found.append(f"the text is not clean (the lines above say how; claims text status lists it all); "
                             f"review it, {then}")
        if self.survivors:
            found.append(f"{_counted(len(self.survivors), 'survivor')} of the sharpness check with no reason: sharpen "
                         "the check, or say why it cannot tell the neighbours apart in 'insensitive:' of its claim "
                         "file (docs/adding-a-claim.md)")
        return found


def gate_findings(before: Snapshot, after: Snapshot, survivors: list[str] | tuple[str, ...] = ()) -> GateFindings:
    """What ``claims verify --check`` finds: the committed report (``before``) against the fresh one (``after``), the
    course text's state in the fresh one, and the ``survivors`` (their lines) that no claim file explains."""
    reports, text_state = _snapshot_differences(before, after)
    text = (after.results or {}).get("text")
    return GateFindings(tuple(reports), tuple(text_state), tuple(text_problems(text)), tuple(survivors),
                        _drifted(text), bool(text is not None and not text.get("available")))


def _drifted(text: dict[str, Any] | None) -> str:
    """What of the course text is not clean, in a few words: "the text drifted under 2 statements and has 1 unheld
    number or formula"; empty when it is clean or was not read."""
    if not text or not text.get("available"):
        return ""
    drifted = sum(1 for item in text.get("statements", {}).values() if item.get("status") not in CLEAN)
    stale_marks = sum(count for status, count in text.get("marks", {}).items() if status not in CLEAN)
    besides = [_counted(count, singular, plural) for count, singular, plural in (
        (stale_marks, "mark no longer on its block", "marks no longer on their blocks"),
        (len(text.get("uncovered_blocks", [])), "uncovered block", "uncovered blocks"),
        (len(text.get("unheld_numbers", [])), "unheld number or formula", "unheld numbers or formulas"),
        (len(text.get("steps_not_in_text", [])), "step in no document", "steps in no document")) if count]
    if not drifted and not besides:
        return ""
    said = f"the text drifted under {_counted(drifted, 'statement')}" if drifted else "the text drifted"
    if besides:
        listed = ", ".join(besides[:-1]) + (" and " if len(besides) > 1 else "") + besides[-1]
        said += f" and has {listed}" if drifted else f": it has {listed}"
    return said


def _counted(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else plural or singular + 's'}"


def stated_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The differences between two results documents in what they state, in the order of the report."""
    return _claims_differences(old, new) + _text_differences(old.get("text"), new.get("text"))


def _claims_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``stated_differences`` but for the course text's state."""
    old_run, new_run = old.get("run", {}), new.get("run", {})
    differences = [_changed("run", field, old_run.get(field), new_run.get(field))
                   for field in STATED_RUN_FIELDS if old_run.get(field) != new_run.get(field)]
    old_claims, new_claims = _by_id(old.get("claims", [])), _by_id(new.get("claims", []))
    differences += [f"claim '{visible(claim)}' is new" for claim in new_claims if claim not in old_claims]
    differences += [f"claim '{visible(claim)}' is gone" for claim in old_claims if claim not in new_claims]
    common = [claim for claim in new_claims if claim in old_claims]
    if [claim for claim in old_claims if claim in new_claims] != common:
        differences.append("the claims are in another order")
    for claim in common:
        differences += _claim_differences(claim, old_claims[claim], new_claims[claim])
    old_statements, new_statements = _statements(old), _statements(new)
    differences += [f"statement '{visible(key)}' is new" for key in new_statements if key not in old_statements]
    differences += [f"statement '{visible(key)}' is gone" for key in old_statements if key not in new_statements]
    for statement in [key for key in new_statements if key in old_statements]:
        before, after = old_statements[statement], new_statements[statement]
        where = f"statement '{visible(statement)}'"
        differences += [_changed(where, field, before.get(field), after.get(field))
                        for field in STATED_STATEMENT_FIELDS if before.get(field) != after.get(field)]
        if before.get("status") != after.get("status"):
            differences.append(f"{where}: {before.get('status')} -> {after.get('status')}")
    if old.get("coverage_criterion") != new.get("coverage_criterion"):
        differences.append("the coverage criterion changed")
    # What the report says of itself: its counts, the sharpness and mutation scores, whether those are current.
    old_summary, new_summary = _leaves(old.get("summary", {})), _leaves(new.get("summary", {}))
    differences += [_changed("summary", field, old_summary.get(field), new_summary.get(field))
                    for field in dict.fromkeys([*old_summary, *new_summary])
                    if old_summary.get(field) != new_summary.get(field)]
    return differences


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{"a.b": leaf}``."""
    if isinstance(value, dict) and value:
        return {key: leaf for name, item in value.items() for key, leaf in _leaves(item, f"{prefix}{name}.").items()}
    return {prefix.removesuffix("."): value}


def _text_differences(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """How the course text's state differs: its documents, each statement's place and status, what no one holds."""
    if old == new:
        return []
    if old is None or new is None:
        return ["the report " + ("no longer says" if new is None else "now says") + " what the course text's state is"]
    differences = []
    if old.get("available") != new.get("available"):
        return [f"the course text was {'' if old.get('available') else 'not '}read for the committed report, and is "
                f"{'' if new.get('available') else 'not '}read now"]
    documents = [(document.get("name"), document.get("fingerprint")) for document in old.get("documents", [])]
    current = [(document.get("name"), document.get("fingerprint")) for document in new.get("documents", [])]
    differences += [f"the text's document '{visible(str(name))}' is now {visible(str(printed))}"
                    for name, printed in current if (name, printed) not in documents]
    old_statements, new_statements = old.get("statements", {}), new.get("statements", {})
    for key in dict.fromkeys([*old_statements, *new_statements]):
        before, after = old_statements.get(key, {}), new_statements.get(key, {})
        if before != after:
            differences.append(f"statement '{visible(key)}' in the text: {_place(before)} -> {_place(after)}")
    for field in ("uncovered_blocks", "unheld_numbers", "steps_not_in_text", "marks"):
        if old.get(field) != new.get(field):
            differences.append(f"the text's {field.replace('_', ' ')} changed")
    return differences


def _place(item: dict[str, Any]) -> str:
    if not item:
        return "nothing"
    where = f" at {item['step']} block {item['block']}" if "step" in item else ""
    return f"{item.get('status')}{where}"


def _claim_differences(claim: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    where = f"claim '{visible(claim)}'"
    differences = [_changed(where, field, old.get(field), new.get(field))
                   for field in STATED_CLAIM_FIELDS if old.get(field) != new.get(field)]
    old_checks, new_checks = old.get("checks", []), new.get("checks", [])
    for number, (before, after) in enumerate(zip(old_checks, new_checks, strict=False), start=1):
        differences += _check_differences(f"{where} check {number}", before, after)
    differences += [f"{where} check {number} ({check.get('kind')}) is new"
                    for number, check in enumerate(new_checks[len(old_checks):], start=len(old_checks) + 1)]
    differences += [f"{where} check {number} ({check.get('kind')}) is gone"
                    for number, check in enumerate(old_checks[len(new_checks):], start=len(new_checks) + 1)]
    # The claim's verdict follows from its checks' and its problems; said on its own only when nothing else says it.
    if old.get("status") != new.get("status") and not differences:
        differences.append(f"{where}: {old.get('status')} -> {new.get('status')}")
    return differences


def _check_differences(where: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    if old.get("kind") != new.get("kind"):
        return [f"{where} was a {old.get('kind')} check, is a {new.get('kind')} check"]
    where = f"{where} ({old.get('kind')})"
    differences = [_changed(where, field, old.get(field), new.get(field))
                   for field in STATED_CHECK_FIELDS if old.get(field) != new.get(field)]
    old_expected, new_expected = old.get("expected", {}), new.get("expected", {})
    differences += [_changed(where, f"expected '{visible(key)}'", old_expected.get(key, _ABSENT),
                             new_expected.get(key, _ABSENT))
                    for key in dict.fromkeys([*old_expected, *new_expected])
                    if old_expected.get(key, _ABSENT) != new_expected.get(key, _ABSENT)]
    if old.get("status") != new.get("status"):
        differences.append(f"{where}: {old.get('status')} -> {new.get('status')}")
    if old_expected == new_expected:  # else the comparisons differ because the expected values do
        differences += _comparison_differences(where, old.get("comparisons", []), new.get("comparisons", []))
    return differences


def _comparison_differences(where: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    old_by_label, new_by_label = _labelled(old), _labelled(new)
    differences = [f"{where}: {label} is new" for label in new_by_label if label not in old_by_label]
    differences += [f"{where}: {label} is gone" for label in old_by_label if label not in new_by_label]
    for label in [label for label in new_by_label if label in old_by_label]:
        before, after = _as_stated(old_by_label[label]), _as_stated(new_by_label[label])
        if before["verdict"] != after["verdict"]:
            differences.append(f"{where}: {label} {before['verdict']} -> {after['verdict']}")
        differences += [_changed(where, f"{label} {field}", before[field], after.get(field))
                        for field in before if field != "verdict" and before[field] != after.get(field)]
    return differences


def _as_stated(comparison: dict[str, Any]) -> dict[str, Any]:
    """What a comparison states: its verdict, what it expected, whose number that is and by which rule it
    judged; the observed value only under a rule of equality, the rule only when it quotes no interval."""
    stated = {"verdict": "passed" if comparison.get("passed") else "failed", "expected": comparison.get("expected"),
              "stated_by": comparison.get("stated_by")}
    if not is_interval(comparison.get("observed")):
        stated["rule"] = comparison.get("rule")
    if comparison.get("rule") in EXACT_RULES:
        stated["observed"] = comparison.get("observed")
    return stated


def _labelled(comparisons: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each comparison under its key, and what it expects where a key has several (approx and greater than, say)."""
    keys = [str(comparison.get("key")) for comparison in comparisons]
    return {f"comparison '{visible(key)}'" + (f" ({visible(str(c.get('expected')))})" if keys.count(key) > 1 else ""): c
            for key, c in zip(keys, comparisons, strict=True)}


def _by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(row.get("id")): row for row in rows}


def _statements(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every ledger statement of the coverage, by id; none in a report written before there was a ledger."""
    return {str(statement.get("id")): statement for lesson in results.get("coverage", [])
            for step in lesson.get("steps", []) for statement in step.get("statements", [])}


def _changed(where: str, what: str, old: Any, new: Any) -> str:
    old_text, new_text = _shown(old), _shown(new)
    if max(len(old_text), len(new_text)) > _SHOWN_LENGTH:
        return f"{where}: {what} changed"
    return f"{where}: {what} {old_text} -> {new_text}"


def _shown(value: Any) -> str:
    return "nothing" if value is _ABSENT else visible(json.dumps(value, ensure_ascii=False))

"""The rules that more than one part of the harness applies, each written once.

How an observed value and an interval are written (failure messages, both reports, the
comparisons' rules), what counts as a figure a check saved (the cache stores it, the HTML
inlines it), which library versions a run depends on (the report lists them, the cache keys
on them, a Dask cluster must match them), how text from a claim file is shown where a control
character would do harm (a terminal, one line of a report), and the words both reports use for
the same thing. A leaf module: it imports nothing of the harness, so loading claims never pulls
in the renderers.
"""

from __future__ import annotations

import functools
import json
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from claims_harness.errors import visible

# The annotated course text, written beside the reports (never committed: it quotes the text); the reports link to
# its blocks by these ids.
TEXT_PAGE = "claims_text.html"


def block_anchor(step: str, position: int) -> str:
    """The id of a block of the text on the annotated page, as the reports' links name it."""
    return f"block-{re.sub(r'[^A-Za-z0-9.-]', '-', step)}-{position}"


HARNESS_ORIGIN = ("added by the harness, not stated by the text: a consequence or a caveat of what the text says, "
                  "checked like the text's own claims")
# A statement with one of these statuses is listed as not covered, and both reports make it loud.
UNCOVERED = ("missing", "weak", "failed")

# --------------------------------------------------------------------------- text a terminal or a report shows

# Characters that move the cursor, end a line, change a terminal's state, reorder or hide text, or cannot be
# encoded at all: control characters, format characters (bidi overrides, zero widths), line and paragraph
# separators, lone surrogates. Everything else is shown as it is, spaces of any width included.
# --------------------------------------------------------------------------- observed values

_INTERVAL_KEYS = frozenset({"mean", "low", "high", "n", "alpha", "method", "detectable_deviation"})
_EXACT_KEYS = frozenset({"exact", "value"})
_ROUNDED_KEYS = frozenset({"float64", "rounding_bound"})


def is_interval(value: Any) -> bool:
    """Whether ``value`` is an estimate as ``claims_harness.stats`` reports it (a mean with its confidence interval)."""
    return isinstance(value, Mapping) and value.keys() >= _INTERVAL_KEYS


def format_interval(estimate: Mapping[str, Any]) -> str:
    """``0.999999 interval [low, high] (n=..., alpha=..., method)``, however an estimate's interval is stated."""
    return (f"{1 - estimate['alpha']:.7g} interval [{estimate['low']:.6g}, {estimate['high']:.6g}] "
            f"(n={estimate['n']}, alpha={estimate['alpha']:.3g}, {estimate['method']})")


def format_observed(value: Any, limit: int | None = None) -> str:
    """An observed value as a reader wants to see it: estimates with their interval, fractions kept exact.

    Cut to ``limit`` characters (ending in ``...``) when one is given, for a line in a terminal.
    """
    if is_interval(value):
        text = (f"mean {value['mean']:.6g}, {format_interval(value)}, "
                f"detects {value['detectable_deviation']:.3g}")
    elif isinstance(value, Mapping) and value.keys() == _EXACT_KEYS:
        text = f"{value['value']:.10g} (exactly {value['exact']})"
    elif isinstance(value, Mapping) and value.keys() == _ROUNDED_KEYS:
        text = f"{value['float64']:.17g} (float64, rounding bound {value['rounding_bound']:.3g})"
    elif isinstance(value, float):
        text = f"{value:.10g}"
    elif isinstance(value, str):
        text = value
    else:  # before the results are JSON (a failure message) a value may be a numpy array or a sympy number
        text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if limit is None or len(text) <= limit else text[:limit] + "..."


# How much of a falsifying example is shown: each argument and result cut to a line, Hypothesis' input and the
# assertion to a screenful. The reproduce line is whole: it is what a student copies.
FALSIFYING_WIDTH = 200
FALSIFYING_LINES = 12


# The observation a failing property check adds (claims_harness._running.property.check_property).
FALSIFYING_KEY = "falsifying_example"


def format_falsifying(example: Any) -> list[str]:
    """A failing property's ``falsifying_example`` (``claims_harness._running.property.check_property``) as lines to
    show.

    The example's input as Hypothesis wrote it, each call to the implementation with its arguments by
    name and what it returned or raised, the assertion, and the ``reproduce:`` line; no line holds a
    newline. A result cached before calls were recorded holds Hypothesis' note as one string, shown
    as it is.
    """
    if not isinstance(example, Mapping):
        return _first_lines(str(example))
    lines = _first_lines(example.get("input", ""))
    for number, call in enumerate(example.get("calls", ()), 1):
        lines.append(f"call {number}: {call['function']}({', '.join(call['arguments'])})")
        lines += [_cut(f"  {name} = {value}") for name, value in call["arguments"].items()]
        lines.append(_cut(f"  raised {call['raised']}" if "raised" in call else f"  returned {call['returned']}"))
    if example.get("calls_left_out"):
        lines.append(f"({example['calls_left_out']} later calls of the example not recorded)")
    if "assertion" in example:
        lines.append("assertion failed:")
        lines += [f"  {line}" for line in _first_lines(example["assertion"]) or ["(an assert without a message)"]]
    if example.get("reproduce"):
        lines.append(f"reproduce: {example['reproduce']}")
    return lines


def _first_lines(text: str) -> list[str]:
    lines = [_cut(line) for line in text.splitlines()]
    if len(lines) <= FALSIFYING_LINES:
        return lines
    return [*lines[:FALSIFYING_LINES], f"... ({len(lines) - FALSIFYING_LINES} more lines)"]


def _cut(line: str) -> str:
    return line if len(line) <= FALSIFYING_WIDTH else line[:FALSIFYING_WIDTH] + "..."


# --------------------------------------------------------------------------- figures

FIGURES_DIR = "figures"
# A figure is an SVG a check saved under the report's figures/ (Context.save_figure), named so that the name is
# safe as a file name anywhere: the cache stores exactly these, the HTML report inlines exactly these.
_FIGURE_PATH = re.compile(rf"{FIGURES_DIR}/[A-Za-z0-9_.-]+\.svg")


def headline(functions: list[str], where: str | None, claim_id: str, status: str, statement: str) -> str:
    """The first line of a failure: the implementation's functions it exercised, the step, and what does not hold.

    It is what pytest's short summary and the report's list of failures show, so it names what a
    student fixes (``td_errors (step 2.1): ...``) before the claim and verifier that found it.
    """
    named = ", ".join(functions)
    step = f"step {where}" if where else "no step"
    verdict = "does not hold" if status == "failed" else "could not be checked"
    sentence = " ".join(statement.split())
    first = sentence.split(". ")[0].rstrip(".")
    if len(first) > 160:
        first = first[:157].rstrip() + "..."
    return visible(f"{named} ({step}): " if named else f"{step}: ") + visible(f"claim '{claim_id}' {verdict}: {first}")


def culprits(check: Mapping[str, Any]) -> list[str]:
    """The functions a failed or erring check (a result's fields) is about: the one an error names (``error_in``),
    else those wrong on their own (``blamed``), else every function it uses."""
    return list(check.get("error_in") or check.get("blamed") or check.get("uses") or [])


def hint(rejects: str | Mapping[str, str] | None, uses: Sequence[str], blamed: Sequence[str]) -> str | None:
    """A failed check's "there to catch" line for this failure, or None: a ``rejects`` written per function gives the
    lines of the blamed functions; one sentence for the whole check is shown when the failure blames every function
    it uses, or when it names (by name) only blamed ones. Otherwise the mistake it describes may be another
    function's, and would send the reader to fix code that is right."""
    if not rejects:
        return None
    if isinstance(rejects, Mapping):
        return "; ".join(" ".join(rejects[name].split()) for name in blamed if name in rejects) or None
    if set(blamed) < set(uses):
        named = [name for name in uses if re.search(rf"\b{re.escape(name)}\b", rejects)]
        if not named or any(name not in blamed for name in named):
            return None
    return " ".join(rejects.split())


def rejects_text(rejects: str | Mapping[str, str] | None) -> str:
    """A check's ``rejects`` as one line: per function, ``function: what``, joined by semicolons."""
    if isinstance(rejects, Mapping):
        return "; ".join(f"{name}: {' '.join(what.split())}" for name, what in rejects.items())
    return " ".join((rejects or "").split())


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``number`` with ``noun`` agreeing: "1 problem", "2 problems" (``plural`` where adding an s is wrong)."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


# --------------------------------------------------------------------------- how much of a run was judged

@dataclass(frozen=True)
class Profile:
    """What a run of one profile gives a check: the time limit it has unless it states one, and the examples a
    property draws."""

    timeout: float
    examples: int


# The profiles, defined here only. Every command runs the smoke profile unless told otherwise: it is what a student
# and the tests run, in minutes. The release artifact is the full profile, asked for by name (tox -e release, the
# README's main job).
PROFILES = {"smoke": Profile(timeout=120.0, examples=200), "full": Profile(timeout=1800.0, examples=2000)}
DEFAULT_PROFILE = "smoke"
# The run's options that more than one part names (the pytest plugin, claims verify, the runner, messages).
SHRINK_FLAG = "--claims-shrink"
IMPLEMENTATION_PATH_FLAG = "--claims-impl-path"
PYTEST_FLAG = "--claims-allow-reference"
FALLBACK_ATTRIBUTE = "__claims_reference_fallback__"

# The status of a check, and of a claim, that did not run, or whose pass does not count, for the implementation's
# sake: passed is only what ran against the implementation and passed.
NOT_JUDGED = "not judged"
# Checks not judged fail a run (exit status 1) unless it asks for a partial verdict, as a student's exercises do.
PARTIAL_FLAG = "--claims-partial"
# Why a check was not judged, each with how a run's last line says it of one check and of several. A check skipped
# because it runs only in another profile is not among them: it stays ``skipped``, which says nothing of the
# implementation.
NOT_JUDGED_REASONS = {
    "not implemented": ("waits for functions not written yet", "wait for functions not written yet"),
    "exact arithmetic": ("declines exact arithmetic", "decline exact arithmetic"),
    "optional keyword": ("declines an optional keyword of the contract", "decline an optional keyword of the contract"),
    "not imported": ("needs the implementation, which did not import", "need the implementation, which did not import"),
    "other": ("was skipped for another reason (the report says which)",
              "were skipped for other reasons (the report says which)"),
}


# What a check judged in float64 says of itself, by how: its verifier's float twin
# (claims_harness._claims.registry.verifier(in_floats=)), or a replay of its calls (claims_harness._running.replay).
IN_FLOATS_NOTES = {
    "twin": ("judged in float64 by the verifier's float twin: the implementation declines exact arithmetic, so each "
             "number is compared within the rounding bound the verifier derived"),
    "replay": ("judged in float64 by replay: the implementation declines exact arithmetic, so each call this check "
               "makes was made to it again in float64 and its answer compared with the reference's exact one, within "
               "the rounding bound the call's own sensitivity gives; the statement's numbers are the reference's, "
               "checked exactly in its report"),
}


# A function of a failed check that was not wrong on its own (claims_harness._running.runner.blamed_functions).
USED_BY_FAILING = "used by a failing check"


def is_figure_path(value: Any) -> bool:
    return isinstance(value, str) and _FIGURE_PATH.fullmatch(value) is not None


def figure_paths(observed: Mapping[str, Any]) -> list[str]:
    """The observed values that name a figure the run saved (paths relative to the report directory)."""
    return [value for value in observed.values() if is_figure_path(value)]


# --------------------------------------------------------------------------- library versions

# Every library whose version can change what a check observes or how it is judged: numpy's and scipy's numbers,
# sympy's simplification, the examples Hypothesis draws, pydantic's validation of params, PyYAML's reading of the
# claim files, and pytest, which runs the checks. The report lists them, the cache keys on them, and a Dask
# worker must have the same, so that a number never depends on where or when it was computed.
LIBRARIES = ("numpy", "scipy", "sympy", "hypothesis", "pydantic", "pyyaml", "pytest")


def library_versions() -> dict[str, str]:
    """Python's version and each of LIBRARIES' (``"not installed"`` for a missing one), in that order."""
    return dict(_library_versions())


@functools.cache  # importlib.metadata scans sys.path on every call, and the cache asks once per check
def _library_versions() -> tuple[tuple[str, str], ...]:
    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return (("python", platform.python_version()), *((name, version(name)) for name in LIBRARIES))

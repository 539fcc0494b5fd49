"""``claims contract``: the page of the implementation contract, written from the reference's docstrings and the
verifiers' ``uses=``.

The page ([tool.claims] ``contract``) is what a student implements against: every function some verifier declares
in ``uses=``, under the lesson whose claims first need it, with its signature as the reference declares it, the
first paragraph of its docstring, its ``Args:`` as a list, its ``Returns:``, and the claims whose checks call it.
What is written about the contract as a whole (keywords, dtypes, stubs, the structures returned) stays hand-written
above :data:`MARKER`; everything below it is this module's, so that the page cannot drift from the code: CI runs
``claims contract --check`` (``tests/test_contract.py``). The reference is the course's own package, imported here
as ``claims exercises`` imports it, never a student's.

Docstrings are read in the Google style the reference is written in (rlax's): Sphinx's napoleon parses the same
sections into reStructuredText, not into parts a page can lay out, hence the few lines here.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

from claims_harness._authoring.exercises import exercised
from claims_harness._claims.loading import Catalogue
from claims_harness.errors import ClaimsError

MARKER = ("<!-- Everything below is written by 'claims contract' from the docstrings of the reference implementation "
          "and the verifiers' uses=: edit those, then run it. -->")
_SECTION = re.compile(r"^(Args|Returns|Raises|Yields|Attributes|Examples?|Notes?):\s*$")


def contract_page(catalogue: Catalogue, head: str) -> str:
    """The whole page: ``head`` (the hand-written part, up to the marker), the marker, and a section per lesson."""
    needed = exercised(catalogue)
    reference = importlib.import_module(catalogue.course.implementation)
    missing = sorted(function for function in needed if not hasattr(reference, function))
    if missing:
        raise ClaimsError(f"the reference '{reference.__name__}' has no {', '.join(missing)}, which verifiers declare "
                          "in uses=: define them there, or correct the verifiers' uses=")
    lines = [head.rstrip(), "", MARKER, ""]
    for file in catalogue.files:
        functions = sorted(function for function, where in needed.items()
                           if min(where.files, key=catalogue.files.index) == file)
        if functions:
            lines += [f"## {catalogue.titles[file]}", ""]
        for function in functions:
            lines += _entry(function, getattr(reference, function), needed[function].claims)
    return "\n".join(lines).rstrip() + "\n"


def _entry(name: str, value: Any, claims: tuple[str, ...]) -> list[str]:
    summary, arguments, returns = _docstring(inspect.getdoc(value) or "")
    lines = [f"### `{name}`", "", f"`{name}{_signature(value)}`", ""]
    if summary:
        lines += [summary, ""]
    if arguments:
        lines += [*(f"- {argument}" for argument in arguments), ""]
    if returns:
        lines += [f"Returns {returns}", ""]
    return [*lines, "Claims: " + ", ".join(f"`{claim}`" for claim in claims), ""]


def _signature(value: Any) -> str:
    """The signature as the source writes it (annotations as written, a keyword-only marker where there is one)."""
    signature = inspect.signature(value)
    parameters, marked = [], False
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and not marked:
            parameters.append("*")
        marked = marked or parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_POSITIONAL)
        text = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "") + parameter.name
        if parameter.annotation is not parameter.empty:
            text += f": {_annotation(parameter.annotation)}"
        if parameter.default is not parameter.empty:
            text += f" = {parameter.default!r}"
        parameters.append(text)
    returned = signature.return_annotation
    return f"({', '.join(parameters)})" + ("" if returned is signature.empty else f" -> {_annotation(returned)}")


def _annotation(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _docstring(text: str) -> tuple[str, list[str], str]:
    """The first paragraph (one line), the ``Args:`` entries (each one line) and the ``Returns:`` text."""
    lines = text.splitlines()
    end = next((number for number, line in enumerate(lines) if not line.strip()), len(lines))
    summary = " ".join(line.strip() for line in lines[:end])
    arguments: list[str] = []
    returns: list[str] = []
    section = None
    for line in lines[end:]:
        heading = _SECTION.match(line)
        if heading:
            section = heading.group(1)
        elif not line.strip():
            continue
        elif not line.startswith(" "):  # prose after the sections' block
            section = None
        elif section == "Args" and not line.startswith("    "):
            arguments.append(line.strip())
        elif section == "Args" and arguments:
            arguments[-1] += " " + line.strip()
        elif section == "Returns":
            returns.append(line.strip())
    return summary, arguments, " ".join(returns)


def write_contract(catalogue: Catalogue, check: bool) -> tuple[Path, bool]:
    """Write the course's contract page anew (with ``check``, only compare): the page, and whether it was current.

    Raises:
      ClaimsError: the course names no page ([tool.claims] contract), the page has no marker, or the reference
        lacks a function the verifiers use.
    """
    course = catalogue.course
    if course.contract is None:
        raise ClaimsError(f"{course.root / 'pyproject.toml'}: [tool.claims] names no contract page; add "
                          "contract = \"docs/implementation-contract.md\" (any path) to write one")
    try:
        text = course.contract.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = f"# The implementation contract of `{course.implementation}`\n"
    head = text.partition(MARKER)[0]
    page = contract_page(catalogue, head)
    current = page == text
    if not current and not check:
        course.contract.parent.mkdir(parents=True, exist_ok=True)
        course.contract.write_text(page, encoding="utf-8")
    return course.contract, current

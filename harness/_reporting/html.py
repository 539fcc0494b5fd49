"""The self-contained HTML report: inline CSS, SVG figures as images of the page, MathML, filters without a server.

Jinja escapes every value the template prints; what is not escaped is markup the harness made
itself (MathML it checked element by element, the SVG figures the run saved). Control characters
in a value are shown as escapes (:func:`claims_harness._claims.formats.visible`), as in the terminal.

Rendering is linear in the size of the report: the template is compiled once per process, claims
are grouped by their step before the template runs, and a formula or a figure that appears many
times is converted or read once per report.
"""

from __future__ import annotations

import base64
import functools
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, Template, select_autoescape
from markupsafe import Markup, escape

from claims_harness._claims.course import ENGINE
from claims_harness._claims.formats import (
    FALSIFYING_KEY,
    HARNESS_ORIGIN,
    IN_FLOATS_NOTES,
    TEXT_PAGE,
    block_anchor,
    culprits,
    figure_paths,
    format_falsifying,
    format_observed,
    headline,
    hint,
    rejects_text,
)
from claims_harness._claims.scope import describe_scope
from claims_harness._reporting.phrases import mutation_line, not_judged_line, scoreboard_line, sharpness_line
from claims_harness.errors import visible

HTML_FILE = "claims_report.html"
_MATHML = "{http://www.w3.org/1998/Math/MathML}"
# Presentation MathML only: nothing here can run script or load anything.
_MATHML_ELEMENTS = {
    "math", "mi", "mn", "mo", "ms", "mtext", "mspace", "mrow", "mfrac", "msqrt", "mroot", "mstyle", "merror",
    "mpadded", "mphantom", "mfenced", "menclose", "msub", "msup", "msubsup", "munder", "mover", "munderover",
    "mtable", "mtr", "mtd", "mlabeledtr", "semantics", "annotation",
}
_MATHML_ATTRIBUTES = {
    "display", "mathvariant", "stretchy", "fence", "form", "separator", "lspace", "rspace", "accent", "accentunder",
    "columnalign", "rowalign", "columnspacing", "rowspacing", "displaystyle", "scriptlevel", "width", "height",
    "depth", "linethickness", "notation", "open", "close", "separators", "encoding", "movablelimits", "largeop",
    "symmetric", "minsize", "maxsize",
}


def formula_to_mathml(latex: str, display: str = "block") -> Markup | None:
    """MathML for a LaTeX formula (``display``: block or inline), or None when it does not convert to safe
    presentation MathML."""
    from latex2mathml.converter import convert

    try:
        tree = ElementTree.fromstring(convert(latex, display=display))
    except Exception:  # latex2mathml raises many types for bad input; any of them means "show the source"
        return None
    for element in tree.iter():
        if not element.tag.startswith(_MATHML) or element.tag.removeprefix(_MATHML) not in _MATHML_ELEMENTS:
            return None
        if any(name not in _MATHML_ATTRIBUTES for name in element.attrib):
            return None
    ElementTree.register_namespace("", _MATHML.strip("{}"))
    return Markup(ElementTree.tostring(tree, encoding="unicode"))


def render_html(results: dict[str, Any], report_dir: Path) -> str:
    """The report of ``results``; figures are read from ``report_dir``, where the run saved them."""
    claims = results["claims"]
    rows_at: dict[tuple[str, str], list[dict[str, Any]]] = {}  # each step's claims, found once, not at each step
    for row in claims:
        rows_at.setdefault((row["file"], row["where"]), []).append(row)
    ledger = [statement for lesson in results["coverage"] for step in lesson["steps"]
              for statement in step["statements"]]
    figure_image = functools.cache(lambda path: _figure_image(report_dir / path))
    return _template().render(
        run=results["run"], summary=results["summary"], coverage=results["coverage"], claims=claims,
        not_judged=not_judged_line(results["summary"]),
        rows_at=rows_at, criterion=results["coverage_criterion"], uncovered=results["uncovered"],
        excused=[statement for statement in ledger if statement["status"] == "not checkable"],
        harness_origin=HARNESS_ORIGIN,
        failures=[row for row in claims if row["status"] in ("failed", "error")],
        functions=results.get("functions") or [], scoreboard=scoreboard_line(results.get("functions") or []),
        headline=headline, culprits=culprits, hint=hint, rejects_text=rejects_text, in_floats_notes=IN_FLOATS_NOTES,
        falsifying=format_falsifying, falsifying_key=FALSIFYING_KEY,
        sharpness_line=sharpness_line,
        mutation_line=mutation_line, mutation=results["summary"].get("mutation"),
        sharpness=results["summary"].get("sharpness"),
        lessons=[lesson["title"] for lesson in results["coverage"]],
        kinds=[kind for kind, counts in results["summary"]["by_kind"].items() if any(counts.values())],
        mathml=functools.cache(formula_to_mathml),
        text=results.get("text"), places=(results.get("text") or {}).get("statements", {}), page=TEXT_PAGE,
        block_anchor=block_anchor, notes=results.get("notes", []),
        errata=[row for row in claims if row.get("erratum")],
        clarifications=[row for row in claims if row.get("clarification")],
        scope=functools.partial(describe_scope, vocabulary=results.get("scope_dimensions", [])),
        figures=lambda observed: [image for image in map(figure_image, figure_paths(observed)) if image is not None],
    )


@functools.cache
def _template() -> Template:
    environment = Environment(loader=PackageLoader(ENGINE), autoescape=select_autoescape(default=True),
                              undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, finalize=_shown)
    environment.filters["value"] = format_observed
    environment.filters["plain"] = lambda text: text.replace("*", "")
    environment.filters["css"] = lambda status: status.replace(" ", "-")
    return environment.get_template("report.html.j2")


def _shown(value: Any) -> Any:
    """A printed value, control characters escaped (line breaks and tabs kept for ``<pre>``); markup untouched."""
    return visible(value, keep="\n\t") if isinstance(value, str) and not isinstance(value, Markup) else value


def _figure_image(path: Path) -> Markup | None:
    """The figure as an image of the page (a ``data:`` URL): a figure may be the implementation's own drawing, and an
    SVG shown as an image runs no script and loads nothing, whatever it holds."""
    if not path.is_file():
        return None
    data = path.read_bytes()
    if b"<svg" not in data:
        return None
    encoded = base64.b64encode(data).decode("ascii")
    return Markup(f'<img alt="{escape(path.name)}" src="data:image/svg+xml;base64,{encoded}">')

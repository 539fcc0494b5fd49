"""The self-contained HTML report: inline CSS, inline SVG figures, MathML, filters without a server."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

HTML_FILE = "claims_report.html"
HARNESS_ORIGIN = ("added by the harness, not stated by the text: a consequence or a caveat of what the text says, "
                  "checked like the text's own claims")
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
_FIGURE = re.compile(r"^figures/[A-Za-z0-9_.-]+\.svg$")


def formula_to_mathml(latex: str) -> Markup | None:
    """MathML for a LaTeX formula, or None when it does not convert to safe presentation MathML."""
    from latex2mathml.converter import convert

    try:
        tree = ElementTree.fromstring(convert(latex, display="block"))
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
    environment = Environment(loader=PackageLoader("harness"), autoescape=select_autoescape(default=True),
                              undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    environment.filters["mathml"] = formula_to_mathml
    environment.filters["value"] = format_value
    environment.filters["plain"] = lambda text: text.replace("*", "")
    environment.filters["css"] = lambda status: status.replace(" ", "-")
    environment.filters["figures"] = lambda observed: [
        svg for path in figure_paths(observed) if (svg := _inline_svg(report_dir / path)) is not None]
    claims = results["claims"]
    ledger = [statement for lesson in results["coverage"] for step in lesson["steps"]
              for statement in step["statements"]]
    return environment.get_template("report.html.j2").render(
        run=results["run"], summary=results["summary"], coverage=results["coverage"], claims=claims,
        criterion=results["coverage_criterion"], uncovered=results["uncovered"],
        excused=[statement for statement in ledger if statement["status"] == "not checkable"],
        harness_origin=HARNESS_ORIGIN,
        failures=[row for row in claims if row["status"] in ("failed", "error")],
        lessons=[lesson["title"] for lesson in results["coverage"]],
        kinds=[kind for kind, counts in results["summary"]["by_kind"].items() if any(counts.values())],
    )


def figure_paths(observed: dict[str, Any]) -> list[str]:
    """Observed values that name a figure the run saved under ``figures/``."""
    return [value for value in observed.values() if isinstance(value, str) and _FIGURE.match(value)]


def _inline_svg(path: Path) -> Markup | None:
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    start = text.find("<svg")
    return Markup(text[start:]) if start >= 0 else None


def format_value(value: Any) -> str:
    """An observed value as a reader wants to see it: intervals spelled out, fractions kept exact."""
    import json

    if isinstance(value, dict) and {"mean", "low", "high"} <= value.keys():
        return (f"mean {value['mean']:.6g}, interval [{value['low']:.6g}, {value['high']:.6g}], n = {value['n']}, "
                f"alpha = {value['alpha']:.3g}, detects {value['detectable_deviation']:.3g}")
    if isinstance(value, dict) and "exact" in value:
        return f"{value['value']:.10g} (exactly {value['exact']})"
    if isinstance(value, float):
        return f"{value:.10g}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

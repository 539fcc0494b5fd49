"""The primary sources, read from the course's sources file (``sources`` in ``[tool.claims]``).

Each source is a level-3 heading holding its key, followed by a citation paragraph and a few
``- Label: text`` lines::

    ### williams1992
    Williams, R. J. (1992). Simple statistical gradient-following algorithms ...
    - Identifier: doi:10.1007/BF00992696
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_HEADING = re.compile(r"^###\s+([a-z0-9][a-z0-9-]*)\s*$")
_FIELD = re.compile(r"^-\s+([A-Za-z ]+):\s*(.+)$")


@dataclass(frozen=True)
class Source:
    key: str
    citation: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def full_citation(self) -> str:
        """The citation followed by its identifier (arXiv, DOI or URL), as the reports show it."""
        identifier = self.fields.get("Identifier")
        return f"{self.citation} {identifier}." if identifier else self.citation


def read_sources(path: Path) -> dict[str, Source]:
    """Every source in the sources file by key; an absent file has none."""
    if not path.is_file():
        return {}
    sources: dict[str, Source] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        heading = _HEADING.match(line)
        if not heading:
            continue
        citation: list[str] = []
        fields: dict[str, str] = {}
        for following in lines[number:]:
            if following.startswith("#") or following.startswith("<!--"):
                break
            entry = _FIELD.match(following)
            if entry:
                fields[entry.group(1).strip()] = entry.group(2).strip()
            elif following.strip() and not fields:
                citation.append(following.strip())
        sources[heading.group(1)] = Source(heading.group(1), " ".join(citation), number, fields)
    return sources


REGISTRY_BEGIN = "<!-- BEGIN GENERATED REGISTRY: written by `claims verify`; do not edit by hand -->"
REGISTRY_END = "<!-- END GENERATED REGISTRY -->"


def render_sources_table(claims: list[dict[str, str]]) -> str:
    """The generated part of the sources file: every claim with its step, evidence, status, limitations.

    Args:
      claims: one mapping per claim, in catalogue order, with keys id, where, kinds, status,
        sources and limitations (all strings).
    """
    lines = [REGISTRY_BEGIN, "", "## Registry of claims", "",
             "Every claim of the module, the kinds of evidence that check it, its status in the committed report "
             "(`reports/claims.json`) and what it does not say.", "",
             "| claim | step | evidence | status | sources | limitations |", "|---|---|---|---|---|---|"]
    for claim in claims:
        cells = [f"`{claim['id']}`", claim["where"], claim["kinds"], claim["status"], claim["sources"],
                 " ".join(claim["limitations"].split())]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join([*lines, "", REGISTRY_END])


def sources_table_section(text: str) -> str | None:
    """The generated section of the sources file as it stands, markers included."""
    start, end = text.find(REGISTRY_BEGIN), text.find(REGISTRY_END)
    return text[start:end + len(REGISTRY_END)] if 0 <= start < end else None


def with_sources_table(text: str, table: str) -> str:
    """The sources file with its generated section replaced, or appended when it has none."""
    current = sources_table_section(text)
    if current is None:
        return text.rstrip("\n") + "\n\n" + table + "\n"
    return text.replace(current, table)

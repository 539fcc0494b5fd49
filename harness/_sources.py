"""The registry of primary sources, read from ``Module_4_Sources.md``.

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

SOURCES_FILE = "Module_4_Sources.md"
_HEADING = re.compile(r"^###\s+([a-z0-9][a-z0-9-]*)\s*$")
_FIELD = re.compile(r"^-\s+([A-Za-z ]+):\s*(.+)$")


@dataclass(frozen=True)
class Source:
    key: str
    citation: str
    line: int
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def identifier(self) -> str | None:
        return self.fields.get("Identifier")


def read_sources(path: Path) -> dict[str, Source]:
    """Every source in the registry file by key; an absent file has none."""
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

"""What a run prints at its end for a student: the table of the implementation's functions (``claims verify`` and
the pytest plugin print the same lines)."""

from __future__ import annotations

import textwrap
from typing import Any

from claims_harness._claims.formats import USED_BY_FAILING
from claims_harness._reporting.phrases import scoreboard_line


def scoreboard_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The scoreboard's headline, a row per function under test, and one line each for the stubs and the
    reference's functions taken as given; nothing without rows."""
    if not rows:
        return []
    lines = [scoreboard_line(rows)]
    tested = [row for row in rows if row["implemented"] and not row["given"]]
    if tested:
        width = max(len("function"), *(len(row["function"]) for row in tested))
        lines.append(f"{'function':<{width}}  claims  passed  failed  used by a failing check  not implemented  "
                     "declined  not run")
        lines += [f"{row['function']:<{width}}  {row['claims']:>6}  {row['passed']:>6}  {row['failed']:>6}  "
                  f"{row[USED_BY_FAILING]:>23}  {row['not implemented']:>15}  {row['declined']:>8}  {row['not run']:>7}"
                  for row in tested]
    for label, names in (("not implemented yet", [row["function"] for row in rows if not row["implemented"]]),
                         ("the reference's, taken as given", [row["function"] for row in rows if row["given"]])):
        if names:
            lines.append(textwrap.fill(f"{label} ({len(names)}): {', '.join(names)}", 100, subsequent_indent="  "))
    return lines


def scoreboard_failed(rows: list[dict[str, Any]]) -> bool:
    """Whether a function under test failed a check (the headline is then shown in red)."""
    return any(row["failed"] for row in rows if not row["given"])

"""The results file a run writes into its report directory, ``claims.json``: its name, its text, and the one
reader of it.

Every reader of a run's results goes through :func:`read_results`: ``claims lint`` and ``claims scope``, the
release gate, the text's commands, the driver's estimate of the time left, and ``claims verify`` before it
replaces a report of another kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from claims_harness.errors import ResultsUnreadable

# The results document every run writes into the report directory, beside the Markdown and HTML made from it.
RESULTS_FILE = "claims.json"


def read_results(path: Path) -> dict[str, Any]:
    """The results in ``path``: a results file, or a report directory holding one.

    Raises:
      ResultsUnreadable: there is none, or it is not JSON of an object (naming the file and what to run).
    """
    file = path if path.is_file() or path.suffix == ".json" else path / RESULTS_FILE
    try:
        results = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsUnreadable(f"there is no {file.name} in {file.parent}: run 'claims verify' to write one") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ResultsUnreadable(f"{file} cannot be read ({error}): run 'claims verify' to write it anew") from None
    if not isinstance(results, dict):
        raise ResultsUnreadable(f"{file} holds no run's results (a JSON object): run 'claims verify' to write it anew")
    return results


def results_if_readable(path: Path) -> dict[str, Any] | None:
    """The results in ``path`` (as :func:`read_results`), or None when there are none to read."""
    try:
        return read_results(path)
    except ResultsUnreadable:
        return None


def results_text(results: dict[str, Any]) -> str:
    """The results as the file holds them."""
    return json.dumps(results, indent=2, ensure_ascii=False) + "\n"


def check_seconds(results: dict[str, Any] | None) -> dict[tuple[str, int], float]:
    """(claim, check index) -> the seconds ``results`` give the check (a reused one's are those of the run that
    made it); empty for results without them."""
    try:
        return {(row["id"], index): float(check["seconds"]) for row in (results or {})["claims"]
                for index, check in enumerate(row["checks"])}
    except (KeyError, TypeError, ValueError):
        return {}

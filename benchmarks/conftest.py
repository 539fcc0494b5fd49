"""Speed ratios of impl's GAE, printed at the end of ``tox -e bench`` (``pytest benchmarks --benchmark-only``).

Each benchmark stores its median time under (case, contender); the summary divides medians that
were measured in the same run, so the ratios do not depend on the machine's absolute speed.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

MEDIANS: dict[str, dict[str, float]] = defaultdict(dict)


@pytest.fixture
def record_median():
    def record(case: str, contender: str, benchmark) -> None:
        stats = getattr(benchmark, "stats", None)
        if stats is not None:
            MEDIANS[case][contender] = stats.stats.median

    return record


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not MEDIANS:
        return
    terminalreporter.section("GAE speed ratios (medians of this run)")
    for case, medians in MEDIANS.items():
        if "impl" not in medians:
            continue
        parts = [f"impl {medians['impl'] * 1e3:.3f} ms"]
        for contender in sorted(medians):
            if contender == "impl":
                continue
            ratio = medians[contender] / medians["impl"]
            relation = f"impl is {ratio:.1f}x faster" if ratio >= 1 else f"impl takes {1 / ratio:.2f}x as long"
            parts.append(f"{contender} {medians[contender] * 1e3:.3f} ms ({relation})")
        terminalreporter.write_line(f"{case}: " + "; ".join(parts))

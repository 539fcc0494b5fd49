"""``claims audit``: measure what Monte Carlo checks promise instead of assuming it.

For every ``montecarlo`` check, two series of runs with fresh entropy (logged, so any run can
be replayed):

* **false failures**: the correct implementation, at an inflated alpha so failures are frequent
  enough to count; the observed rate must not be significantly above that alpha;
* **power**: every estimated mean moved by the check's own stated deviation; the check must fail
  at least with probability 1 - beta, so the observed rate must not be significantly below it.

"Significantly" uses exact (Clopper-Pearson) binomial bounds at 95 %.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from claims_harness._claims.loading import Catalogue
from claims_harness._running.driver import evaluate_each, selected
from claims_harness._running.engine import every_part
from claims_harness._running.options import RunOptions

CONFIDENCE = 0.95


@dataclass(frozen=True)
class AuditRow:
    node: str
    runs: int
    alpha: float
    false_failures: int
    false_failure_upper: float
    beta: float
    deviation: float
    detections: int
    power_lower: float
    entropy: int
    errors: int

    @property
    def false_failures_too_many(self) -> bool:
        return _bounds(self.false_failures, self.runs)[0] > self.alpha

    @property
    def power_too_low(self) -> bool:
        return _bounds(self.detections, self.runs)[1] < 1 - self.beta

    @property
    def ok(self) -> bool:
        return not (self.false_failures_too_many or self.power_too_low or self.errors)


def _bounds(successes: int, trials: int) -> tuple[float, float]:
    """Two-sided Clopper-Pearson interval for a binomial proportion."""
    tail = (1 - CONFIDENCE) / 2
    low = scipy_stats.beta.ppf(tail, successes, trials - successes + 1) if successes else 0.0
    high = scipy_stats.beta.ppf(1 - tail, successes + 1, trials - successes) if successes < trials else 1.0
    return float(low), float(high)


def audit(catalogue: Catalogue, runs: int, alpha: float, impl: str, expression: str = "", lanes: int = 1
          ) -> list[AuditRow]:
    """Both series of every Monte Carlo check ``expression`` selects (as ``claims verify -k`` reads it), run on
    ``lanes`` processes by the run driver."""
    parts = [part for part in selected(every_part(catalogue), catalogue, expression) if part.index is not None
             and part.entry.claim.checks[part.index].kind == "montecarlo"]
    entropies, tasks = [], []
    for _ in parts:
        entropies.append(int(np.random.SeedSequence().entropy))
        seeds = np.random.SeedSequence(entropies[-1]).generate_state(2 * runs, dtype=np.uint64)
        for run in range(runs):
            null = RunOptions(impl=impl, alpha=alpha, check_seed=int(seeds[2 * run] >> 1))
            shifted = RunOptions(impl=impl, shift_in_deviations=1.0, check_seed=int(seeds[2 * run + 1] >> 1))
            tasks += [null, shifted]
    statuses: list[str] = [""] * len(tasks)
    evaluate_each([(parts[number // (2 * runs)], options) for number, options in enumerate(tasks)], catalogue,
                  lanes, lambda number, outcome: statuses.__setitem__(number, outcome.status))
    rows = []
    for number, (part, entropy) in enumerate(zip(parts, entropies, strict=True)):
        series = statuses[2 * runs * number:2 * runs * (number + 1)]
        null, shifted = series[0::2], series[1::2]
        check = part.entry.claim.checks[part.index]
        false_failures, detections = null.count("failed"), shifted.count("failed")
        rows.append(AuditRow(
            node=f"{part.entry.file}::{part.entry.id}::{part.names[-1]}", runs=runs, alpha=alpha,
            false_failures=false_failures, false_failure_upper=_bounds(false_failures, runs)[1], beta=check.beta,
            deviation=check.deviation or 0.0, detections=detections, power_lower=_bounds(detections, runs)[0],
            entropy=entropy, errors=series.count("error")))
    return rows


def render(rows: list[AuditRow], runs: int, alpha: float) -> str:
    lines = [
        "# Monte Carlo audit",
        "",
        f"Written by `claims audit --runs {runs} --alpha {alpha:g}`. Each Monte Carlo check ran {runs} times "
        f"with fresh entropy at the inflated false-failure rate alpha = {alpha:g}, and {runs} times with every "
        "estimated mean moved by the check's stated deviation. Bounds are 95 % Clopper-Pearson. A check is "
        "worse than stated when its false failures are significantly above alpha or its detections "
        "significantly below 1 - beta.",
        "",
        "| check | false failures | upper bound | stated alpha | detections | lower bound | stated power | entropy "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        verdict = "ok" if row.ok else ("errors" if row.errors else "**worse than stated**")
        lines.append(f"| `{row.node}` | {row.false_failures}/{row.runs} | {row.false_failure_upper:.3f} | "
                     f"{row.alpha:g} | {row.detections}/{row.runs} (deviation {row.deviation:g}) | "
                     f"{row.power_lower:.3f} | {1 - row.beta:g} | {row.entropy} | {verdict} |")
    return "\n".join(lines) + "\n"

"""The module's reference experiment (its ``module_4_reference.py``): three group estimators.

A one-step Bernoulli policy, A ~ Bernoulli(p) with score S = A - p with respect to the logit,
reward ``reward_success`` for A = 1 and ``reward_failure`` for A = 0 (module step 4.2.5). Each
group of G independent actions gives one estimate (1/G) Σ_i A_i S_i of the gradient for three
advantages: the reward itself, the reward minus the group mean, and the leave-one-out advantage.
The script samples independent groups, prints each estimator's mean with a 99.9% interval and
its variance next to the exact expectation (enumeration of all 2^G groups in rational
arithmetic), and draws the means against the exact values::

    python -m impl.reference [--groups N] [--seed S] [--out DIR]

It is a script, not part of the checked interface, so ``impl/__init__.py`` does not import it
(that would also load matplotlib with every ``import impl``).
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from .baselines import group_centered_advantages, leave_one_out_advantages
from .estimators import score_function_gradient
from .policies import bernoulli_logit_score

ESTIMATORS = ("no_baseline", "group_mean", "leave_one_out")
LABELS = {"no_baseline": "no baseline", "group_mean": "group mean", "leave_one_out": "leave-one-out"}
CONFIDENCE = 0.999
FIGURE_NAME = "group_estimators.svg"


@dataclass(frozen=True)
class BernoulliGroups:
    """The experiment's setting; the defaults are the module's (step 4.2.5)."""

    p: Fraction = Fraction("0.35")
    reward_success: Fraction = Fraction(1)
    reward_failure: Fraction = Fraction("-0.2")
    group_size: int = 8


@dataclass(frozen=True)
class Summary:
    """One estimator's sampled mean, its interval and variance, and its exact moments."""

    mean: float
    low: float
    high: float
    variance: float
    exact_mean: Fraction
    exact_variance: Fraction


def group_estimates(a_i: np.ndarray, setting: BernoulliGroups) -> dict[str, np.ndarray]:
    """The three per-group estimates (1/G) Σ_i A_i S_i for groups of actions ``a_i``, shape [n, G].

    Exact for an object array of integer actions (the setting's numbers are fractions); float
    for a float array.
    """
    exact = a_i.dtype == object
    p, success, failure = ((x if exact else float(x)) for x in
                           (setting.p, setting.reward_success, setting.reward_failure))
    r_i = np.where(a_i == 1, success, failure).astype(a_i.dtype)
    score_i = bernoulli_logit_score(a_i, p)
    advantages = {
        "no_baseline": r_i,
        "group_mean": group_centered_advantages(r_i),
        "leave_one_out": leave_one_out_advantages(r_i),
    }
    return {name: score_function_gradient(advantage, score_i) for name, advantage in advantages.items()}


def exact_moments(setting: BernoulliGroups) -> dict[str, tuple[Fraction, Fraction]]:
    """Exact mean and variance of each estimator, enumerating all 2^G groups with their probabilities."""
    groups = np.array(list(itertools.product((0, 1), repeat=setting.group_size)), dtype=object)
    successes = groups.sum(axis=1)
    probability = np.array([setting.p**k * (1 - setting.p) ** (setting.group_size - k) for k in successes],
                           dtype=object)
    moments = {}
    for name, values in group_estimates(groups, setting).items():
        mean = (probability * values).sum()
        moments[name] = (mean, (probability * values * values).sum() - mean * mean)
    return moments


def estimate_bounds(setting: BernoulliGroups) -> dict[str, float]:
    """|estimate| <= max|A| max|S|: the largest |reward| without a baseline, (G-1)/G of the reward
    range for the group mean, the whole range for leave-one-out; |S| <= max(p, 1 - p)."""
    spread = float(abs(setting.reward_success - setting.reward_failure))
    largest_score = float(max(setting.p, 1 - setting.p))
    largest_advantage = {
        "no_baseline": float(max(abs(setting.reward_success), abs(setting.reward_failure))),
        "group_mean": spread * (setting.group_size - 1) / setting.group_size,
        "leave_one_out": spread,
    }
    return {name: value * largest_score for name, value in largest_advantage.items()}


def run_experiment(setting: BernoulliGroups, n_groups: int, rng: np.random.Generator) -> dict[str, Summary]:
    """Sample ``n_groups`` independent groups and summarise each estimator.

    The interval is Hoeffding's at 99.9%: each estimate lies in [-B, B] (``estimate_bounds``), so
    mean ± 2B sqrt(log(2/0.001) / (2n)) covers the expectation with probability >= 0.999 whatever
    the distribution.
    """
    a_i = (rng.random((n_groups, setting.group_size)) < float(setting.p)).astype(float)
    samples = group_estimates(a_i, setting)
    moments = exact_moments(setting)
    bounds = estimate_bounds(setting)
    summaries = {}
    for name in ESTIMATORS:
        values = samples[name]
        halfwidth = 2 * bounds[name] * math.sqrt(math.log(2 / (1 - CONFIDENCE)) / (2 * n_groups))
        mean = float(values.mean())
        summaries[name] = Summary(mean, mean - halfwidth, mean + halfwidth, float(values.var(ddof=1)),
                                  *moments[name])
    return summaries


def format_table(summaries: dict[str, Summary]) -> str:
    """A plain-text table: one row per estimator."""
    header = f"{'estimator':<14} {'mean':>9} {'99.9% interval':>22} {'variance':>11} {'exact mean':>11} " \
             f"{'exact variance':>15}"
    rows = [header, "-" * len(header)]
    for name in ESTIMATORS:
        s = summaries[name]
        interval = f"[{s.low:.5f}, {s.high:.5f}]"
        rows.append(f"{LABELS[name]:<14} {s.mean:>9.5f} {interval:>22} {s.variance:>11.7f} "
                    f"{float(s.exact_mean):>11.7g} {float(s.exact_variance):>15.7g}")
    return "\n".join(rows)


def plot_group_estimators(summaries: dict[str, Summary], setting: BernoulliGroups, n_groups: int,
                          path: Path) -> None:
    """Sampled means with their intervals against the exact gradient and its (G-1)/G share.

    The SVG is byte-for-byte reproducible: a fixed hash salt for element ids, text kept as text
    and no date in the metadata.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    gradient = summaries["no_baseline"].exact_mean
    shrunk = summaries["group_mean"].exact_mean
    with matplotlib.rc_context({"svg.hashsalt": "module4", "svg.fonttype": "none"}):
        figure = Figure(figsize=(6.4, 4.0), layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        axes.axhline(float(gradient), color="tab:blue", linestyle="--", linewidth=1,
                     label=f"exact gradient g = {float(gradient):g}")
        axes.axhline(float(shrunk), color="tab:orange", linestyle=":", linewidth=1,
                     label=f"exact (G-1)/G · g = {float(shrunk):g}")
        for x, name in enumerate(ESTIMATORS):
            s = summaries[name]
            axes.errorbar([x], [s.mean], yerr=[[s.mean - s.low], [s.high - s.mean]], fmt="o", color="black",
                          capsize=6)
        axes.set_xticks(range(len(ESTIMATORS)), [LABELS[name] for name in ESTIMATORS])
        axes.set_xlim(-0.5, len(ESTIMATORS) - 0.5)
        axes.set_ylabel("estimate of the gradient")
        axes.set_title(f"Group estimators, p = {float(setting.p):g}, G = {setting.group_size}: "
                       f"means of {n_groups} groups, {CONFIDENCE:.1%} intervals", fontsize=9)
        axes.legend(loc="lower left", fontsize=8)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="svg", metadata={"Date": None})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impl.reference", description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=100_000, help="independent groups to sample (default 100000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random generator (default 0)")
    parser.add_argument("--out", type=Path, default=Path("reports/figures"),
                        help=f"directory for {FIGURE_NAME} (default reports/figures)")
    args = parser.parse_args(argv)
    if args.groups < 2:
        parser.error("--groups must be at least 2, for a sample variance")
    setting = BernoulliGroups()
    summaries = run_experiment(setting, args.groups, np.random.default_rng(args.seed))
    print(f"Bernoulli policy p = {float(setting.p):g}, rewards {float(setting.reward_success):g} / "
          f"{float(setting.reward_failure):g}, G = {setting.group_size}; {args.groups} groups, seed {args.seed}")
    print(format_table(summaries))
    path = args.out / FIGURE_NAME
    plot_group_estimators(summaries, setting, args.groups, path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Tests for claims_harness.stats: bounds cross-checked against their defining inequalities."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from claims_harness import stats
from claims_harness.errors import SupportViolation
from claims_harness.stats import (
    MeanEstimate,
    detectable_deviation,
    empirical_bernstein_halfwidth,
    hoeffding_halfwidth,
    mean_estimate,
    min_samples,
)

SEED = 20240601
rates = st.floats(min_value=1e-9, max_value=0.999, allow_nan=False)
widths = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False)


# --------------------------------------------------------------------------- Hoeffding


@pytest.mark.parametrize(
    ("n", "alpha", "width"), [(100, 0.05, 1.0), (50, 0.01, 2.0), (1, 0.5, 3.0)]
)
def test_hoeffding_halfwidth_matches_formula_and_inverts_the_tail_bound(n, alpha, width):
    t = hoeffding_halfwidth(n, alpha, width)
    assert t == pytest.approx(width * math.sqrt(math.log(2 / alpha) / (2 * n)), rel=1e-12)
    # Independent check: t is where Hoeffding's tail 2 exp(-2 n t^2 / w^2) equals alpha.
    assert 2 * math.exp(-2 * n * t**2 / width**2) == pytest.approx(alpha, rel=1e-12)


def test_hoeffding_halfwidth_known_value():
    # sqrt(log(40) / 200) = sqrt(3.688879 / 200) = 0.1358102
    assert hoeffding_halfwidth(100, 0.05, 1.0) == pytest.approx(0.1358102, abs=1e-7)


def test_hoeffding_halfwidth_is_monotone_in_n_alpha_and_width():
    by_n = [hoeffding_halfwidth(n, 0.05, 1.0) for n in (1, 2, 10, 100, 10_000)]
    assert all(a > b for a, b in zip(by_n, by_n[1:], strict=False))
    by_alpha = [hoeffding_halfwidth(100, a, 1.0) for a in (1e-6, 1e-3, 0.05, 0.5, 0.99)]
    assert all(a > b for a, b in zip(by_alpha, by_alpha[1:], strict=False))
    assert hoeffding_halfwidth(100, 0.05, 4.0) == pytest.approx(
        4 * hoeffding_halfwidth(100, 0.05, 1.0)
    )


# --------------------------------------------------------------------------- design


def test_min_samples_known_values():
    # alpha = beta = 0.05, deviation = 0.1, width = 1:
    #   sqrt(log(2/0.05)/2) = sqrt(3.688879/2) = 1.358102
    #   sqrt(log(1/0.05)/2) = sqrt(2.995732/2) = 1.223873
    #   (1.358102 + 1.223873)^2 / 0.1^2 = 2.581975^2 * 100 = 666.66 -> 667
    assert min_samples(0.05, 0.05, 0.1, 1.0) == 667
    # alpha = 1e-3, beta = 1e-2, deviation = 0.1, width = 1:
    #   sqrt(log(2000)/2) = 1.949480, sqrt(log(100)/2) = 1.517427
    #   (3.466907)^2 * 100 = 1201.94 -> 1202
    assert min_samples(1e-3, 1e-2, 0.1, 1.0) == 1202
    # Doubling the width on the same relative deviation leaves n unchanged.
    assert min_samples(1e-3, 1e-2, 0.2, 2.0) == 1202


@settings(max_examples=200, deadline=None)
@given(
    alpha=rates,
    beta=rates,
    width=widths,
    relative_deviation=st.floats(min_value=1e-3, max_value=10.0),
)
def test_min_samples_and_detectable_deviation_are_inverse(alpha, beta, width, relative_deviation):
    deviation = relative_deviation * width
    n = min_samples(alpha, beta, deviation, width)
    assert n >= 1
    assert detectable_deviation(n, alpha, beta, width) <= deviation
    if n > 1:
        assert detectable_deviation(n - 1, alpha, beta, width) > deviation


def test_detectable_deviation_is_the_sum_of_two_hoeffding_halfwidths():
    # The one-sided beta term sqrt(log(1/beta)/(2n)) equals the two-sided halfwidth at 2*beta.
    n, alpha, beta, width = 250, 0.01, 0.1, 3.0
    expected = hoeffding_halfwidth(n, alpha, width) + hoeffding_halfwidth(n, 2 * beta, width)
    assert detectable_deviation(n, alpha, beta, width) == pytest.approx(expected, rel=1e-12)


def test_detectable_deviation_decreases_with_n():
    values = [detectable_deviation(n, 0.01, 0.01, 1.0) for n in (1, 10, 100, 1000)]
    assert all(a > b for a, b in zip(values, values[1:], strict=False))


# --------------------------------------------------------------------------- empirical Bernstein


def test_empirical_bernstein_halfwidth_matches_formula_and_scales_with_width():
    v, n, alpha = 0.02, 400, 0.05
    log_term = math.log(4 / alpha)
    expected = math.sqrt(2 * v * log_term / n) + 7 * log_term / (3 * (n - 1))
    assert empirical_bernstein_halfwidth(v, n, alpha, 1.0) == pytest.approx(expected, rel=1e-12)
    # Rescaling X = a + w Z multiplies the variance by w^2 and the halfwidth by w.
    w = 5.0
    assert empirical_bernstein_halfwidth(v * w**2, n, alpha, w) == pytest.approx(w * expected)


def test_empirical_bernstein_is_narrower_than_hoeffding_for_low_variance():
    rng = np.random.default_rng(SEED)
    x = rng.uniform(0.49, 0.51, size=2000)
    hoeff = mean_estimate(x, (0.0, 1.0), alpha=0.05, beta=0.05, method="hoeffding")
    eb = mean_estimate(x, (0.0, 1.0), alpha=0.05, beta=0.05, method="empirical-bernstein")
    assert eb.method == "empirical-bernstein"
    assert eb.mean == hoeff.mean
    assert eb.high - eb.low < 0.5 * (hoeff.high - hoeff.low)
    assert eb.contains(0.5)


def test_empirical_bernstein_falls_back_to_hoeffding_at_half_alpha_for_high_variance():
    # Fair coin, small n: the Bernstein bound is looser than Hoeffding, so the
    # intersection is exactly the Hoeffding interval at alpha/2.
    x = np.array([0.0, 1.0] * 10)
    eb = mean_estimate(x, (0.0, 1.0), alpha=0.05, beta=0.05, method="empirical-bernstein")
    half = hoeffding_halfwidth(20, 0.025, 1.0)
    assert empirical_bernstein_halfwidth(float(np.var(x, ddof=1)), 20, 0.025, 1.0) > half
    assert eb.low == pytest.approx(0.5 - half)
    assert eb.high == pytest.approx(0.5 + half)


def test_empirical_bernstein_with_one_sample_is_hoeffding_at_half_alpha():
    # With n = 1 any interval is at least 0.59 * width wide, so compare after clipping.
    eb = mean_estimate([0.5], (0.0, 10.0), alpha=0.1, beta=0.1, method="empirical-bernstein")
    hoeff = mean_estimate([0.5], (0.0, 10.0), alpha=0.05, beta=0.1, method="hoeffding")
    assert (eb.low, eb.high) == (hoeff.low, hoeff.high)


@settings(max_examples=100, deadline=None)
@given(
    data=st.lists(st.floats(min_value=-2.0, max_value=3.0), min_size=1, max_size=200),
    alpha=st.floats(min_value=1e-6, max_value=0.5),
    method=st.sampled_from(["hoeffding", "empirical-bernstein"]),
)
def test_interval_never_wider_than_hoeffding_and_inside_support(data, alpha, method):
    support = (-2.0, 3.0)
    est = mean_estimate(data, support, alpha=alpha, beta=0.1, method=method)
    bound_alpha = alpha / 2 if method == "empirical-bernstein" else alpha
    assert est.high - est.low <= 2 * hoeffding_halfwidth(len(data), bound_alpha, 5.0) + 1e-12
    assert support[0] <= est.low <= est.mean <= est.high <= support[1]
    assert est.contains(est.mean)
    assert est.detectable_deviation == detectable_deviation(len(data), alpha, 0.1, 5.0)


def test_interval_is_clipped_to_support():
    est = mean_estimate(np.zeros(10), (0.0, 1.0), alpha=0.05, beta=0.05)
    assert est.low == 0.0
    assert est.high == pytest.approx(hoeffding_halfwidth(10, 0.05, 1.0))
    est = mean_estimate(np.ones(3), (0.0, 1.0), alpha=0.05, beta=0.05)
    assert (est.low, est.high) == (pytest.approx(1 - hoeffding_halfwidth(3, 0.05, 1.0)), 1.0)


# --------------------------------------------------------------------------- coverage and power


@pytest.mark.parametrize("method", ["hoeffding", "empirical-bernstein"])
def test_coverage_of_bernoulli_mean(method):
    # Hoeffding is conservative (its tail bound ignores the variance), so at
    # alpha = 0.05 the realised coverage is close to 1; 0.95 holds with a wide margin.
    rng = np.random.default_rng(SEED)
    n, p, alpha = 50, 0.3, 0.05
    draws = rng.random((2000, n)) < p
    hits = sum(
        mean_estimate(row.astype(float), (0.0, 1.0), alpha=alpha, beta=0.1, method=method).contains(
            p
        )
        for row in draws
    )
    assert hits / 2000 >= 1 - alpha


def test_exact_coverage_of_bernoulli_mean_is_at_least_1_minus_alpha():
    # Cross-check without simulation: sum the Binomial(n, p) pmf over the successes k
    # whose interval contains p.
    n, p, alpha = 50, 0.3, 0.05
    half = hoeffding_halfwidth(n, alpha, 1.0)
    k = np.arange(n + 1)
    covered = np.abs(k / n - p) <= half
    assert sps.binom.pmf(k[covered], n, p).sum() >= 1 - alpha


def test_power_of_the_min_samples_design():
    alpha, beta, deviation = 1e-3, 1e-2, 0.1
    n = min_samples(alpha, beta, deviation, 1.0)
    rng = np.random.default_rng(SEED)
    draws = rng.random((300, n)) < 0.5 + deviation
    rejected = sum(
        not mean_estimate(row.astype(float), (0.0, 1.0), alpha=alpha, beta=beta).contains(0.5)
        for row in draws
    )
    assert rejected / 300 >= 1 - beta


def test_exact_power_of_the_min_samples_design():
    # Cross-check without simulation: probability that Binomial(n, 0.6)/n lands
    # more than the Hoeffding halfwidth away from 0.5.
    alpha, beta, deviation = 1e-3, 1e-2, 0.1
    n = min_samples(alpha, beta, deviation, 1.0)
    half = hoeffding_halfwidth(n, alpha, 1.0)
    k = np.arange(n + 1)
    rejects = np.abs(k / n - 0.5) > half
    assert sps.binom.pmf(k[rejects], n, 0.5 + deviation).sum() >= 1 - beta


# --------------------------------------------------------------------------- errors


def test_support_violation_names_value_index_and_support():
    with pytest.raises(SupportViolation, match=r"1\.5.*index 1.*\[0\.0, 1\.0\]"):
        mean_estimate([0.2, 1.5, -1.0], (0.0, 1.0), alpha=0.05, beta=0.05)
    assert issubclass(SupportViolation, ValueError)


def test_nan_sample_is_a_support_violation():
    with pytest.raises(SupportViolation, match=r"nan.*index 2"):
        mean_estimate([0.2, 0.3, float("nan")], (0.0, 1.0), alpha=0.05, beta=0.05)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: hoeffding_halfwidth(0, 0.05, 1.0), r"n must be an integer >= 1, got 0"),
        (lambda: hoeffding_halfwidth(2.5, 0.05, 1.0), r"n must be an integer"),
        (lambda: hoeffding_halfwidth(10, 0.0, 1.0), r"alpha .*\(0, 1\), got 0\.0"),
        (lambda: hoeffding_halfwidth(10, 1.0, 1.0), r"alpha .*\(0, 1\), got 1\.0"),
        (lambda: hoeffding_halfwidth(10, float("nan"), 1.0), r"alpha"),
        (
            lambda: hoeffding_halfwidth(10, 0.05, 0.0),
            r"width must be a finite number > 0, got 0\.0",
        ),
        (lambda: hoeffding_halfwidth(10, 0.05, -1.0), r"width .*got -1\.0"),
        (
            lambda: empirical_bernstein_halfwidth(0.1, 1, 0.05, 1.0),
            r"n must be an integer >= 2, got 1",
        ),
        (
            lambda: empirical_bernstein_halfwidth(-0.1, 10, 0.05, 1.0),
            r"sample_variance .*>= 0, got -0\.1",
        ),
        (lambda: empirical_bernstein_halfwidth(0.1, 10, 1.5, 1.0), r"alpha .*got 1\.5"),
        (
            lambda: min_samples(0.05, 0.05, 0.0, 1.0),
            r"deviation must be a finite number > 0, got 0\.0",
        ),
        (lambda: min_samples(0.05, 1.0, 0.1, 1.0), r"beta .*\(0, 1\), got 1\.0"),
        (lambda: min_samples(-0.1, 0.05, 0.1, 1.0), r"alpha .*got -0\.1"),
        (lambda: min_samples(0.05, 0.05, 0.1, 0.0), r"width .*got 0\.0"),
        (lambda: detectable_deviation(0, 0.05, 0.05, 1.0), r"n must be an integer >= 1, got 0"),
        (lambda: detectable_deviation(10, 0.05, 0.0, 1.0), r"beta .*got 0\.0"),
        (lambda: mean_estimate([], (0.0, 1.0), 0.05, 0.05), r"n = 0"),
        (lambda: mean_estimate([0.5], (0.0, 1.0), 0.0, 0.05), r"alpha .*got 0\.0"),
        (lambda: mean_estimate([0.5], (0.0, 1.0), 0.05, 1.0), r"beta .*got 1\.0"),
        (
            lambda: mean_estimate([0.5], (1.0, 1.0), 0.05, 0.05),
            r"support .*low < high.*\(1\.0, 1\.0\)",
        ),
        (lambda: mean_estimate([0.5], (1.0, 0.0), 0.05, 0.05), r"support"),
        (lambda: mean_estimate([[0.5]], (0.0, 1.0), 0.05, 0.05), r"samples must be 1-D"),
        (
            lambda: mean_estimate([0.5], (0.0, 1.0), 0.05, 0.05, method="bernstein"),
            r"method must be one of 'hoeffding', 'empirical-bernstein', got 'bernstein'",
        ),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_min_samples_rejects_a_deviation_too_small_for_a_finite_n():
    with pytest.raises(ValueError, match="deviation"):
        min_samples(0.05, 0.05, 1e-300, 1.0)
    with pytest.raises(ValueError, match="deviation"):
        min_samples(0.05, 0.05, 1e-8, 1.0)


def test_min_samples_for_a_tiny_but_feasible_deviation():
    # n is about 6.7e12 here: large n must still be exact, not off by round-off.
    n = min_samples(0.05, 0.05, 1e-6, 1.0)
    assert n == pytest.approx(666.659454473088e10, rel=1e-9)
    assert (
        detectable_deviation(n, 0.05, 0.05, 1.0)
        <= 1e-6
        < detectable_deviation(n - 1, 0.05, 0.05, 1.0)
    )


# --------------------------------------------------------------------------- MeanEstimate


def test_as_dict_key_order_and_json():
    est = mean_estimate(np.array([0.1, 0.4, 0.7]), (0, 1), alpha=0.05, beta=0.2)
    d = est.as_dict()
    assert list(d) == [
        "mean",
        "low",
        "high",
        "n",
        "alpha",
        "beta",
        "method",
        "support",
        "detectable_deviation",
    ]
    assert d["support"] == [0.0, 1.0]
    assert d["n"] == 3 and type(d["n"]) is int
    assert all(type(d[k]) is float for k in ("mean", "low", "high", "alpha", "beta"))
    assert json.loads(json.dumps(d)) == d


def test_mean_estimate_fields():
    x = [1.0, 2.0, 3.0, 4.0]
    est = mean_estimate(x, (0.0, 10.0), alpha=0.1, beta=0.05)
    assert isinstance(est, MeanEstimate)
    assert est.mean == pytest.approx(2.5)
    assert est.n == 4 and est.method == "hoeffding" and est.support == (0.0, 10.0)
    assert est.high - est.mean == pytest.approx(hoeffding_halfwidth(4, 0.1, 10.0))
    assert est.detectable_deviation == detectable_deviation(4, 0.1, 0.05, 10.0)
    assert est.contains(est.low) and est.contains(est.high) and not est.contains(est.high + 1e-9)
    with pytest.raises(AttributeError):
        est.mean = 0.0  # type: ignore[misc]


def test_all_lists_the_public_api():
    for name in (
        "MeanEstimate",
        "detectable_deviation",
        "empirical_bernstein_halfwidth",
        "hoeffding_halfwidth",
        "mean_estimate",
        "min_samples",
    ):
        assert name in stats.__all__
        assert getattr(stats, name).__doc__

"""Monte Carlo decisions about the mean of a bounded random variable.

A verifier that checks "the expected value of X is m" draws ``n`` samples of X,
builds a two-sided confidence interval for E[X] and passes iff m lies inside it.
Two error rates govern that decision: ``alpha``, the probability that a correct
hypothesis is rejected (false failure), and ``beta``, the probability that a mean
off by at least ``deviation`` goes undetected (false pass). Because X is known to
lie in ``[a, b]`` the intervals are distribution-free (Hoeffding, or the
empirical-Bernstein bound of Maurer & Pontil), so both rates hold exactly as
stated for any distribution on the support, and the sample size needed for a
given (alpha, beta, deviation) can be computed before any sampling happens.

The design follows TensorFlow Probability's
``tfp.distributions.internal.statistical_testing`` (``assert_true_mean_equal_by_dkwm``,
``min_num_samples_for_dkwm_mean_test``, ``min_discrepancy_of_true_means_detectable_by_dkwm``),
with Hoeffding's inequality in place of the DKW inequality.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from claims_harness.errors import SampleSizeError, SupportViolation

__all__ = [
    "METHODS",
    "MeanEstimate",
    "detectable_deviation",
    "empirical_bernstein_halfwidth",
    "hoeffding_halfwidth",
    "mean_estimate",
    "min_samples",
]

METHODS: tuple[str, ...] = ("hoeffding", "empirical-bernstein")

_LARGEST_EXACT_N = 2**53


@dataclass(frozen=True)
class MeanEstimate:
    """A sample mean with a confidence interval that holds with probability >= 1 - alpha.

    Attributes:
        mean: The sample mean (clipped to ``support`` to absorb round-off).
        low: Lower end of the two-sided interval, clipped to ``support``.
        high: Upper end of the two-sided interval, clipped to ``support``.
        n: Number of samples.
        alpha: Probability that the interval misses the true mean.
        method: ``"hoeffding"`` or ``"empirical-bernstein"``.
        support: ``(a, b)``, the declared range of the variable.
        beta: False-pass rate used for ``detectable_deviation``.
        detectable_deviation: Smallest ``|true mean - hypothesised mean|`` that the
            Hoeffding test at ``(n, alpha)`` detects with probability >= 1 - beta.
    """


    mean: float
    low: float
    high: float
    n: int
    alpha: float
    method: str
    support: tuple[float, float]
    beta: float
    detectable_deviation: float

    def contains(self, value: float) -> bool:
        """Return True iff ``low <= value <= high``."""
        return self.low <= value <= self.high

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict with a fixed key order (stable reports and diffs).

        Returns:
            ``{mean, low, high, n, alpha, beta, method, support, detectable_deviation}``
            with ``support`` as a two-element list and plain Python numbers.
        """
        return {
            "mean": float(self.mean),
            "low": float(self.low),
            "high": float(self.high),
            "n": int(self.n),
            "alpha": float(self.alpha),
            "beta": float(self.beta),
            "method": str(self.method),
            "support": [float(self.support[0]), float(self.support[1])],
            "detectable_deviation": float(self.detectable_deviation),
        }


# --------------------------------------------------------------------------- validation


def _check_n(n: Any, minimum: int = 1) -> int:
    # bool is an Integral, but n=True is always a caller bug.
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise ValueError(f"n must be an integer >= {minimum}, got {n!r}")
    if n < minimum:
        raise ValueError(f"n must be an integer >= {minimum}, got {n!r}")
    return int(n)


def _check_real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    return float(value)


def _check_rate(name: str, value: Any) -> float:
    x = _check_real(name, value)
    # `not (0 < x < 1)` also rejects NaN.
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must be in the open interval (0, 1), got {value!r}")
    return x


def _check_positive(name: str, value: Any) -> float:
    x = _check_real(name, value)
    if not (x > 0.0 and math.isfinite(x)):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return x


def _check_support(support: Any) -> tuple[float, float]:
    try:
        low, high = support
    except (TypeError, ValueError):
        raise ValueError(
            f"support must be a pair (low, high) with low < high, got {support!r}"
        ) from None
    low = _check_real("support low", low)
    high = _check_real("support high", high)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(
            f"support must be a pair (low, high) of finite numbers with low < high, got {support!r}"
        )
    return low, high


def _check_method(method: Any) -> str:
    if method not in METHODS:
        raise ValueError(
            f"method must be one of {', '.join(repr(m) for m in METHODS)}, got {method!r}"
        )
    return method


# --------------------------------------------------------------------------- bounds


def hoeffding_halfwidth(n: int, alpha: float, width: float) -> float:
    """Half-width of the two-sided Hoeffding confidence interval for a mean.

    For i.i.d. X_i in [a, b] with width ``w = b - a``, Hoeffding (1963), Theorem 2,
    gives ``P(|mean_n - E X| >= t) <= 2 exp(-2 n t^2 / w^2)``. Setting the right-hand
    side to ``alpha`` yields the half-width::

        t = w * sqrt(log(2 / alpha) / (2 n))

    Reference: W. Hoeffding, "Probability inequalities for sums of bounded random
    variables", JASA 58(301), 1963.

    Args:
        n: Number of samples, >= 1.
        alpha: Probability that the interval misses the mean, in (0, 1).
        width: ``b - a``, > 0.

    Returns:
        The half-width ``t``; ``[mean_n - t, mean_n + t]`` covers ``E X`` with
        probability >= 1 - alpha.
    """
    n = _check_n(n)
    alpha = _check_rate("alpha", alpha)
    width = _check_positive("width", width)
    return width * math.sqrt(_log_over(2.0, alpha) / (2.0 * n))


def empirical_bernstein_halfwidth(
    sample_variance: float, n: int, alpha: float, width: float
) -> float:
    """Half-width of the two-sided empirical-Bernstein confidence interval for a mean.

    Maurer & Pontil (2009), Theorem 4: for i.i.d. Z_i in [0, 1], n >= 2 and
    ``delta`` in (0, 1), with probability >= 1 - delta::

        E Z - mean_n <= sqrt(2 V_n log(2/delta) / n) + 7 log(2/delta) / (3 (n - 1))

    where ``V_n`` is the unbiased sample variance. Applying it to ``Z`` and ``1 - Z``
    with ``delta = alpha / 2`` each (union bound), and rescaling ``Z = (X - a) / w``,
    gives the two-sided half-width for X in [a, b]::

        t = sqrt(2 V log(4/alpha) / n) + 7 w log(4/alpha) / (3 (n - 1))

    with ``V`` the unbiased sample variance of X. Much tighter than Hoeffding when
    ``V << w^2 / 4``, looser when the variance is near maximal or n is small.

    Reference: A. Maurer and M. Pontil, "Empirical Bernstein bounds and sample
    variance penalization", COLT 2009.

    Args:
        sample_variance: Unbiased (ddof=1) sample variance of X, finite and >= 0.
        n: Number of samples, >= 2.
        alpha: Probability that the interval misses the mean, in (0, 1).
        width: ``b - a``, > 0.

    Returns:
        The half-width ``t``; ``[mean_n - t, mean_n + t]`` covers ``E X`` with
        probability >= 1 - alpha.
    """
    variance = _check_real("sample_variance", sample_variance)
    if not (variance >= 0.0 and math.isfinite(variance)):
        raise ValueError(f"sample_variance must be a finite number >= 0, got {sample_variance!r}")
    n = _check_n(n, minimum=2)
    alpha = _check_rate("alpha", alpha)
    width = _check_positive("width", width)
    log_term = _log_over(4.0, alpha)
    return math.sqrt(2.0 * variance * log_term / n) + 7.0 * width * log_term / (3.0 * (n - 1))


def detectable_deviation(n: int, alpha: float, beta: float, width: float) -> float:
    """Smallest true-mean discrepancy the Hoeffding test detects with probability >= 1 - beta.

    The test rejects ``E X = m`` iff ``|mean_n - m| > t_alpha`` with
    ``t_alpha = w sqrt(log(2/alpha) / (2n))``. If in truth ``|E X - m| >= d``, a
    one-sided Hoeffding bound shows ``mean_n`` falls within ``t_alpha`` of ``m`` with
    probability <= beta as soon as ``d - t_alpha >= t_beta``, where
    ``t_beta = w sqrt(log(1/beta) / (2n))``. Hence the detectable discrepancy::

        d = w * (sqrt(log(2/alpha) / (2n)) + sqrt(log(1/beta) / (2n)))

    This is the Hoeffding analogue of TFP's
    ``min_discrepancy_of_true_means_detectable_by_dkwm``.

    Args:
        n: Number of samples, >= 1.
        alpha: False-failure rate of the test, in (0, 1).
        beta: False-pass rate tolerated, in (0, 1).
        width: ``b - a``, > 0.

    Returns:
        ``d`` as above; ``min_samples`` is its inverse in ``n``.
    """
    n = _check_n(n)
    alpha = _check_rate("alpha", alpha)
    beta = _check_rate("beta", beta)
    width = _check_positive("width", width)
    return width * (
        math.sqrt(_log_over(2.0, alpha) / (2.0 * n)) + math.sqrt(_log_over(1.0, beta) / (2.0 * n))
    )


def min_samples(alpha: float, beta: float, deviation: float, width: float, limit: int = _LARGEST_EXACT_N) -> int:
    """Smallest n at which the Hoeffding test detects a mean ``deviation`` off, w.p. >= 1 - beta.

    Solves ``detectable_deviation(n, alpha, beta, width) <= deviation`` for n::

        n = ceil(w^2 * (sqrt(log(2/alpha)/2) + sqrt(log(1/beta)/2))^2 / deviation^2)

    This is the Hoeffding analogue of TFP's ``min_num_samples_for_dkwm_mean_test``.

    Args:
        alpha: False-failure rate of the test, in (0, 1).
        beta: False-pass rate tolerated, in (0, 1).
        deviation: Smallest ``|true mean - hypothesised mean|`` that must be detected, > 0.
        width: ``b - a``, > 0.
        limit: The largest n the caller can draw; at most 2**53.

    Returns:
        The smallest integer n >= 1 with ``detectable_deviation(n, ...) <= deviation``.

    Raises:
        SampleSizeError: If that n exceeds ``limit``, before anything is allocated.
    """
    alpha = _check_rate("alpha", alpha)
    beta = _check_rate("beta", beta)
    deviation = _check_positive("deviation", deviation)
    width = _check_positive("width", width)
    root = math.sqrt(_log_over(2.0, alpha) / 2.0) + math.sqrt(_log_over(1.0, beta) / 2.0)
    # Past 2**53 consecutive n are no longer distinct floats, so the search below could not settle.
    limit = min(limit, _LARGEST_EXACT_N)
    ratio = width * root / deviation
    exact = ratio * ratio  # inf, not OverflowError, past float range
    if not exact <= limit:
        raise SampleSizeError(exact, limit, alpha, beta, deviation, width)
    n = max(1, math.ceil(exact))
    # The closed form can land one off when `exact` is within round-off of an
    # integer; nudge so that n is minimal for the detectable_deviation callers use.
    while n > 1 and detectable_deviation(n - 1, alpha, beta, width) <= deviation:
        n -= 1
    while detectable_deviation(n, alpha, beta, width) > deviation:
        n += 1
    return n


def _log_over(numerator: float, rate: float) -> float:
    """``log(numerator / rate)``, finite even for a subnormal rate, where the quotient itself overflows."""
    return math.log(numerator) - math.log(rate)


# --------------------------------------------------------------------------- estimation


def mean_estimate(
    samples: Any,
    support: tuple[float, float],
    alpha: float,
    beta: float,
    method: str = "hoeffding",
) -> MeanEstimate:
    """Sample mean of a bounded variable with a two-sided (1 - alpha) confidence interval.

    ``"hoeffding"`` uses ``hoeffding_halfwidth(n, alpha, w)``. ``"empirical-bernstein"``
    intersects the Hoeffding interval at ``alpha/2`` with the Maurer-Pontil interval at
    ``alpha/2``; by the union bound the intersection covers the mean with probability
    >= 1 - alpha, and it is never wider than Hoeffding at ``alpha/2``. With n = 1 the
    empirical-Bernstein bound is undefined (vacuous), so the intersection is just
    Hoeffding at ``alpha/2``. Either interval is finally clipped to the support,
    which contains the mean with certainty.

    ``detectable_deviation`` is always the Hoeffding design value
    ``detectable_deviation(n, alpha, beta, w)``, whatever the method.

    Args:
        samples: 1-D array-like of floats, every one in ``support``.
        support: ``(a, b)`` with ``a < b``, the range the variable is known to lie in.
        alpha: Probability that the interval misses the true mean, in (0, 1).
        beta: False-pass rate used for ``detectable_deviation``, in (0, 1).
        method: One of ``"hoeffding"``, ``"empirical-bernstein"``.

    Returns:
        A ``MeanEstimate``.

    Raises:
        SupportViolation: If a sample lies outside ``support`` (or is NaN).
        ValueError: On empty or non-1-D samples or any invalid argument.
    """
    low_s, high_s = _check_support(support)
    alpha = _check_rate("alpha", alpha)
    beta = _check_rate("beta", beta)
    method = _check_method(method)
    try:
        x = np.asarray(samples, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"samples must be a 1-D array-like of floats: {exc}") from None
    if x.ndim != 1:
        raise ValueError(f"samples must be 1-D, got an array of shape {x.shape}")
    n = x.size
    if n == 0:
        raise ValueError("samples must be non-empty, got n = 0")

    # Written as a negated conjunction so NaN counts as a violation.
    outside = ~((x >= low_s) & (x <= high_s))
    if outside.any():
        index = int(np.flatnonzero(outside)[0])
        raise SupportViolation(
            f"sample {float(x[index])!r} at index {index} lies outside the declared support "
            f"[{low_s!r}, {high_s!r}] ({int(outside.sum())} of {n} samples outside); "
            f"the confidence interval would be invalid, so fix the support or the sampler"
        )

    width = high_s - low_s
    # np.mean of in-support values can stray past an endpoint by round-off.
    mean = min(max(float(np.mean(x)), low_s), high_s)

    if method == "hoeffding":
        low = mean - hoeffding_halfwidth(n, alpha, width)
        high = mean + hoeffding_halfwidth(n, alpha, width)
    else:
        half = hoeffding_halfwidth(n, alpha / 2.0, width)
        if n >= 2:
            variance = float(np.var(x, ddof=1))
            half = min(half, empirical_bernstein_halfwidth(variance, n, alpha / 2.0, width))
        low, high = mean - half, mean + half

    return MeanEstimate(
        mean=mean,
        low=max(low, low_s),
        high=min(high, high_s),
        n=int(n),
        alpha=alpha,
        method=method,
        support=(low_s, high_s),
        beta=beta,
        detectable_deviation=detectable_deviation(n, alpha, beta, width),
    )

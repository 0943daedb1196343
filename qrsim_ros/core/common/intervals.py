"""Confidence intervals of the Monte Carlo estimates: a binomial proportion (Wilson score) and a mean
(Student t). The one place they are computed; ``qrsim batch`` and ``qrsim verify`` both use them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (dimensionless, in [0, 1]).

    ``(p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)`` with ``z`` the two-sided normal quantile
    of ``confidence``; (0, 1) for n = 0.
    """
    if trials <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= trials:
        raise ValueError(f"successes={successes} must be in [0, trials={trials}]")
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    n, p = float(trials), successes / trials
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denom
    # the ends are exact (0 successes: lower 0; all successes: upper 1) whatever the rounding
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == trials else min(1.0, centre + half)
    return lo, hi


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the sample mean and its Student-t interval ``mean -+ t s / sqrt(n)`` (s with
    ddof 1), in the unit of ``values``. One value gives a zero-width interval; none gives NaNs."""
    v = np.asarray(values, float)
    if v.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(v.mean())
    if v.size == 1:
        return mean, mean, mean
    return (mean, *mean_interval_from_sums(float(v.size), float(v.sum()), float(np.square(v).sum()),
                                           confidence))


def mean_interval_from_sums(n: float, total: float, total_sq: float,
                            confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval of a mean from the count ``n``, the sum and the sum of squares of a sample (the
    unit of the values); the mean itself for n < 2. The variance is clipped at 0 against rounding."""
    mean = total / n
    if n < 2:
        return mean, mean
    var = max(0.0, (total_sq - n * mean * mean) / (n - 1.0))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1.0)) * math.sqrt(var / n)
    return mean - half, mean + half

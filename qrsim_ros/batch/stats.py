"""Batch statistics: Wilson score intervals of outcome probabilities and sample distributions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (the one place it is computed).

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


@dataclass(frozen=True)
class Distribution:
    """Summary of a sample: mean, std (ddof 1; 0 for one value), min, quartiles (linear), max."""

    mean: float
    std: float
    min: float
    q1: float
    median: float
    q3: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        v = np.asarray(values, float)
        if v.size == 0:
            return cls(*([math.nan] * 7))
        q1, med, q3 = np.percentile(v, [25, 50, 75])
        std = float(v.std(ddof=1)) if v.size > 1 else 0.0
        return cls(float(v.mean()), std, float(v.min()), float(q1), float(med), float(q3), float(v.max()))

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

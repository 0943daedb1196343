"""Batch statistics: sample distributions (the Wilson interval of outcome probabilities is
``core.common.intervals.wilson_interval``, shared with ``qrsim verify``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


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

"""Monte Carlo estimates from a batch's results.csv, with their 95 % intervals: the probability of each
outcome and of each fault (Wilson) and the mean mission time (Student t)."""

from __future__ import annotations

from dataclasses import dataclass

from qrsim_ros.core.common.intervals import mean_interval, wilson_interval
from qrsim_ros.verification.abstraction import FAULT_LABEL_PREFIX
from qrsim_ros.verification.formats import Batch


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo estimate and its interval (a probability, or a time in s)."""

    value: float
    low: float
    high: float

    def contains(self, x: float, tol: float = 1e-9) -> bool:
        """Whether ``x`` lies in [low, high] (widened by ``tol`` against the model checker's rounding)."""
        return self.low - tol <= x <= self.high + tol


def _proportion(k: int, n: int, confidence: float) -> Estimate:
    return Estimate(k / n, *wilson_interval(k, n, confidence))


def monte_carlo(batch: Batch, confidence: float = 0.95) -> dict[str, Estimate]:
    """Estimates keyed as ``prism.queries`` names them: ``P(<outcome>)``, ``P(fault_<event>)`` and
    ``E[mission time] (s)``."""
    n = len(batch.episodes)
    out = {f"P({o})": _proportion(sum(e.outcome == o for e in batch.episodes), n, confidence)
           for o in batch.outcomes}
    for event in batch.fault_events:
        k = sum(e.faults[event] for e in batch.episodes)
        out[f"P({FAULT_LABEL_PREFIX}{event})"] = _proportion(k, n, confidence)
    mean, lo, hi = mean_interval([e.mission_time_s for e in batch.episodes], confidence)
    out["E[mission time] (s)"] = Estimate(mean, lo, hi)
    return out

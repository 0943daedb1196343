"""The abstract model of a batch: a Markov chain over the mission modes, from the transition counts.

States: ``start`` (each episode's entry, no time), every mode, one state per fault-caused transition
(``<event>@<from>-><to>``, no time; reaching it is the fault) and one absorbing state per outcome
(``end:<outcome>``). Transition probabilities are the maximum-likelihood ones, count / visits; each
state's "time" reward is its mean sojourn time per visit (s). For the MDP, every observed transition's
probability gets its Wilson interval and every mode's sojourn time its Student-t interval.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from qrsim_ros.core.common.intervals import mean_interval_from_sums, wilson_interval
from qrsim_ros.verification.formats import END_PREFIX, START, Batch, TransitionCount

#: the label of every absorbing state (PRISM property ``F "done"``).
DONE = "done"
#: label prefix of the states a fault's transitions pass through: ``fault_<event>``.
FAULT_LABEL_PREFIX = "fault_"
#: most successors of one state for which the MDP's choices (the interval polytope's vertices) are listed.
MAX_MDP_SUCCESSORS = 12


class AbstractionError(ValueError):
    """The counts do not make a model (e.g. too many successors for the interval MDP)."""


@dataclass(frozen=True)
class AbstractChain:
    """A finite chain with integer transition counts.

    ``states[i]`` names state i (0 is the initial state); ``counts[i, j]`` transitions i -> j observed
    (rows of absorbing states are zero); ``sojourn_s[i]`` the mean time per visit (s) and
    ``sojourn_low_s`` / ``sojourn_high_s`` its interval; ``labels`` maps a label to its states.
    """

    states: tuple[str, ...]
    counts: np.ndarray
    sojourn_s: np.ndarray
    sojourn_low_s: np.ndarray
    sojourn_high_s: np.ndarray
    labels: dict[str, tuple[int, ...]]

    @property
    def absorbing(self) -> np.ndarray:
        """Boolean mask of the states with no outgoing transitions."""
        return self.counts.sum(axis=1) == 0

    def probabilities(self) -> list[dict[int, Fraction]]:
        """Maximum-likelihood successor distribution of every state, exact (empty for absorbing ones)."""
        out = []
        for row in self.counts:
            total = int(row.sum())
            out.append({int(j): Fraction(int(row[j]), total) for j in np.flatnonzero(row)})
        return out

    def probability_matrix(self) -> np.ndarray:
        """The maximum-likelihood transition matrix (floats; absorbing rows are zero)."""
        totals = self.counts.sum(axis=1, keepdims=True)
        return np.divide(self.counts, totals, out=np.zeros(self.counts.shape), where=totals > 0)

    def probability_intervals(self, confidence: float = 0.95) -> list[dict[int, tuple[float, float]]]:
        """Wilson interval of every observed transition's probability (count of n visits)."""
        out = []
        for row in self.counts:
            total = int(row.sum())
            out.append({int(j): wilson_interval(int(row[j]), total, confidence) for j in np.flatnonzero(row)})
        return out


def _fault_state(t: TransitionCount) -> str:
    return f"{t.event}@{t.source}->{t.target}"


def build_chain(batch: Batch, confidence: float = 0.95) -> AbstractChain:
    """The abstract chain of a (consistent) batch; labels: each outcome, ``fault_<event>`` for each event
    (empty if it never happened) and ``done``."""
    modes = sorted({m.mode for m in batch.mode_times})
    faults = sorted({_fault_state(t) for t in batch.transitions if t.event})
    outcomes = list(batch.outcomes)
    states = (START, *modes, *faults, *(END_PREFIX + o for o in outcomes))
    index = {name: i for i, name in enumerate(states)}
    counts = np.zeros((len(states), len(states)), dtype=np.int64)
    for t in batch.transitions:
        if t.event:
            via = index[_fault_state(t)]
            counts[index[t.source], via] += t.count
            counts[via, index[t.target]] += t.count
        else:
            counts[index[t.source], index[t.target]] += t.count
    sojourn, low, high = (np.zeros(len(states)) for _ in range(3))
    for m in batch.mode_times:
        i = index[m.mode]
        sojourn[i] = m.total_time_s / m.visits
        lo, hi = mean_interval_from_sums(m.visits, m.total_time_s, m.total_sq_time_s2, confidence)
        low[i], high[i] = max(0.0, lo), hi
    labels: dict[str, tuple[int, ...]] = {o: (index[END_PREFIX + o],) for o in outcomes}
    events = sorted(set(batch.fault_events) | {t.event for t in batch.transitions if t.event})
    for event in events:
        labels[FAULT_LABEL_PREFIX + event] = tuple(index[f] for f in faults if f.startswith(event + "@"))
    labels[DONE] = tuple(index[END_PREFIX + o] for o in outcomes)
    return AbstractChain(states, counts, sojourn, low, high, labels)


def interval_vertices(low: np.ndarray, high: np.ndarray, digits: int = 12) -> list[np.ndarray]:
    """The vertices of ``{q : low <= q <= high, sum q = 1}`` (needs sum low <= 1 <= sum high), each once.

    At a vertex every coordinate but at most one is at a bound: for each coordinate f and each choice of
    low / high bounds for the others, f takes the rest of the mass, kept if within its own bounds
    (k 2^(k-1) candidates for k successors; at most ``MAX_MDP_SUCCESSORS``). The points kept include
    every vertex and lie in the set, so min / max over them equal min / max over the set.
    """
    k = len(low)
    if k > MAX_MDP_SUCCESSORS:
        raise AbstractionError(f"a state with {k} successors (the interval MDP lists the choices of at most "
                               f"{MAX_MDP_SUCCESSORS})")
    if low.sum() > 1.0 + 1e-12 or high.sum() < 1.0 - 1e-12:
        raise AbstractionError(f"empty interval set: lower bounds sum to {low.sum()}, upper to {high.sum()}")
    if k == 1:
        return [np.ones(1)]
    seen: dict[tuple[float, ...], np.ndarray] = {}
    tol = 1e-12
    for f in range(k):
        others = [j for j in range(k) if j != f]
        for at_high in itertools.product((False, True), repeat=k - 1):
            q = np.empty(k)
            for j, up in zip(others, at_high, strict=True):
                q[j] = high[j] if up else low[j]
            q[f] = 1.0 - float(q[others].sum())
            if low[f] - tol <= q[f] <= high[f] + tol:
                q[f] = min(max(q[f], float(low[f])), float(high[f]))
                seen.setdefault(tuple(np.round(q, digits)), q)
    return list(seen.values())

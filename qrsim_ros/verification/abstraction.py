"""The abstract model of a batch: a Markov chain over the mission modes, from the transition counts.

States: ``start`` (each episode's entry, no time), every mode, one state per fault-caused transition
(``<event>@<from>-><to>``, no time; reaching it is the fault) and one absorbing state per outcome
(``end:<outcome>``). Transition probabilities are the maximum-likelihood ones, count / visits; each
state's "time" reward is its mean sojourn time per visit (s). For the MDP, every observed transition's
probability gets its Wilson interval and every mode's sojourn time its Student-t interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from qrsim_ros.core.common.intervals import mean_interval_from_sums, wilson_interval
from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.verification.formats import END_PREFIX, START, Batch, TransitionCount

#: the label of every absorbing state (PRISM property ``F "done"``).
DONE = "done"
#: label prefix of the states a fault's transitions pass through: ``fault_<event>``.
FAULT_LABEL_PREFIX = "fault_"
#: most successors of one state for which the MDP's choices (the interval polytope's vertices) are listed.
MAX_MDP_SUCCESSORS = int(LIMITS["mdp_successors"].hi)
#: most transitions (choices times successors) of the whole interval MDP handed to Storm.
MAX_MDP_TRANSITIONS = int(LIMITS["mdp_transitions"].hi)


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
    every vertex and lie in the set, so min / max over them equal min / max over the set. Order: by f,
    then by the others' bounds as binary numbers (high = 1, the first other the most significant).
    """
    k = len(low)
    if k > MAX_MDP_SUCCESSORS:
        raise AbstractionError(f"a state with {k} successors (the interval MDP lists the choices of at most "
                               f"{MAX_MDP_SUCCESSORS})")
    if low.sum() > 1.0 + 1e-12 or high.sum() < 1.0 - 1e-12:
        raise AbstractionError(f"empty interval set: lower bounds sum to {low.sum()}, upper to {high.sum()}")
    if k == 1:
        return [np.ones(1)]
    tol = 1e-12
    bits = (np.arange(2 ** (k - 1))[:, None] >> np.arange(k - 2, -1, -1)) & 1 == 1  # (2^(k-1), k-1)
    blocks = []
    for f in range(k):
        others = np.array([j for j in range(k) if j != f])
        q = np.empty((len(bits), k))
        q[:, others] = np.where(bits, high[others], low[others])
        q[:, f] = 1.0 - q[:, others].sum(axis=1)
        q = q[(low[f] - tol <= q[:, f]) & (q[:, f] <= high[f] + tol)]
        q[:, f] = np.clip(q[:, f], float(low[f]), float(high[f]))
        blocks.append(q)
    candidates = np.concatenate(blocks)
    _, first = np.unique(np.round(candidates, digits), axis=0, return_index=True)
    return list(candidates[np.sort(first)])


def mdp_choices(chain: AbstractChain, confidence: float = 0.95) -> list[tuple[list[int], list[np.ndarray]]]:
    """Every state's successors and its interval MDP choices (``interval_vertices`` of its transitions'
    Wilson intervals; empty for absorbing states). AbstractionError, naming the largest state, when the
    whole MDP would have more than ``MAX_MDP_TRANSITIONS`` transitions: found before any model is built."""
    out: list[tuple[list[int], list[np.ndarray]]] = []
    for i, bounds in enumerate(chain.probability_intervals(confidence)):
        targets = list(bounds)
        if not targets:
            out.append((targets, []))
            continue
        low = np.array([bounds[j][0] for j in targets])
        high = np.array([bounds[j][1] for j in targets])
        try:
            out.append((targets, interval_vertices(low, high)))
        except AbstractionError as exc:
            raise AbstractionError(f"state {chain.states[i]}: {exc}") from None
    sizes = [len(targets) * len(vertices) for targets, vertices in out]
    if sum(sizes) > MAX_MDP_TRANSITIONS:
        big = int(np.argmax(sizes))
        raise AbstractionError(
            f"the interval MDP would have {sum(sizes):,} transitions, more than the {MAX_MDP_TRANSITIONS:,} "
            f"Storm is given (limits table mdp_transitions); state {chain.states[big]} alone has "
            f"{len(out[big][1]):,} choices of {len(out[big][0])} successors: merge modes with many "
            "successors")
    return out

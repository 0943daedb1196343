"""What a batch's records add up to: every outcome's probability with its Wilson 95 % interval, and the
distribution of every numeric column (the base ones, and any a columns hook added)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qrsim_ros.batch.jobs import BASE_COLUMNS, Record
from qrsim_ros.batch.stats import Distribution
from qrsim_ros.core.common.intervals import wilson_interval
from qrsim_ros.core.tasks.retrieve import OUTCOMES as RETRIEVE_OUTCOMES
from qrsim_ros.core.tasks.rules import DONE_ALL_PERSONS_FOUND, DONE_INVALID_VEHICLE, DONE_TIME_LIMIT

#: Outcomes always listed (with count 0 if none happened), then any other in name order.
OUTCOMES = (DONE_TIME_LIMIT, DONE_INVALID_VEHICLE, DONE_ALL_PERSONS_FOUND)
#: A task type's own outcome list, where it has one (the retrieve referee's).
TASK_OUTCOMES = {"retrieve": RETRIEVE_OUTCOMES}
#: 0/1 columns with this prefix are events (a fault occurred): their share gets a Wilson interval too.
EVENT_PREFIX = "fault_"


def outcomes_for(task_type: str) -> tuple[str, ...]:
    """The outcomes always listed for ``task_type``."""
    return tuple(TASK_OUTCOMES.get(task_type, OUTCOMES))
#: Base columns summarised as distributions, with their labels in the printed table.
DISTRIBUTION_LABELS = {"reward": "reward", "steps": "duration [steps]", "sim_time_s": "duration [s]",
                       "persons_found": "persons found"}
#: Base columns that are not distributions (identifiers, the outcome, a constant).
_NOT_SUMMARISED = {"episode", "seed", "outcome", "persons_total"}


@dataclass(frozen=True)
class OutcomeShare:
    """How many of a batch's episodes ended in (or had) ``name``: their ``count``, their share ``p`` and its
    Wilson 95 % interval."""

    name: str
    count: int
    p: float
    wilson95: tuple[float, float]

    @classmethod
    def of(cls, name: str, count: int, episodes: int) -> OutcomeShare:
        """The share of ``count`` episodes among ``episodes``."""
        return cls(name, count, count / episodes, wilson_interval(count, episodes))


@dataclass(frozen=True)
class Summary:
    """Outcome shares and the distributions (column -> Distribution, in column order) of ``episodes``."""

    episodes: int
    outcomes: tuple[OutcomeShare, ...]
    distributions: dict[str, Distribution]
    #: the share of episodes in which each event column (``fault_*``, 0/1) is 1
    events: tuple[OutcomeShare, ...] = ()

    def label(self, column: str) -> str:
        return DISTRIBUTION_LABELS.get(column, column)


def columns_of(records: Sequence[Record]) -> list[str]:
    """results.csv's columns: ``BASE_COLUMNS``, then extra columns in the order they first appear."""
    columns = list(BASE_COLUMNS)
    for record in records:
        columns += [c for c in record if c not in columns]
    return columns


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def summarise(records: Sequence[Record], outcomes: Sequence[str] = OUTCOMES) -> Summary:
    """The Summary of a batch's records (at least one); ``outcomes``: those always listed."""
    n = len(records)
    counts = Counter(str(r["outcome"]) for r in records)
    names = list(outcomes) + sorted(set(counts) - set(outcomes))
    shares = tuple(OutcomeShare.of(name, counts.get(name, 0), n) for name in names)
    distributions = {}
    for column in columns_of(records):
        if column in _NOT_SUMMARISED:
            continue
        values = [r.get(column) for r in records]
        if all(_is_number(v) for v in values):  # a column with a None (not applicable) is not summarised
            distributions[column] = Distribution.of([float(v) for v in values])
    events = []
    for column in columns_of(records):
        values = [r.get(column) for r in records]
        if column.startswith(EVENT_PREFIX) and all(v in (0, 1) and _is_number(v) for v in values):
            k = int(sum(values))  # type: ignore[arg-type]
            events.append(OutcomeShare.of(column, k, n))
    return Summary(n, shares, distributions, tuple(events))


def table_lines(summary: Summary) -> list[str]:
    """The printed table: outcome probabilities with Wilson 95 % intervals, then the distributions."""
    lines = [f"{'outcome':<20} {'count':>6} {'p':>7}   95% CI (Wilson)"]
    for o in summary.outcomes:
        lines.append(f"{o.name:<20} {o.count:>6} {o.p:>7.3f}   [{o.wilson95[0]:.3f}, {o.wilson95[1]:.3f}]")
    if summary.events:
        lines += ["", f"{'event':<20} {'count':>6} {'p':>7}   95% CI (Wilson)"]
        for o in summary.events:
            low, high = o.wilson95
            lines.append(f"{o.name:<20} {o.count:>6} {o.p:>7.3f}   [{low:.3f}, {high:.3f}]")
    lines.append("")
    cols = ("mean", "std", "min", "q1", "median", "q3", "max")
    lines.append(f"{'':<20}" + "".join(f"{c:>12}" for c in cols))
    for column, d in summary.distributions.items():
        lines.append(f"{summary.label(column):<20}" + "".join(f"{getattr(d, c):>12.6g}" for c in cols))
    return lines

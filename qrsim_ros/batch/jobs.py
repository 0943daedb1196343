"""One batch job: one episode computed from (scenario, seed, policy) only, returned as a record.

A record is a dict of columns, one row of results.csv: ``BASE_COLUMNS`` first, then whatever columns the
job's ``columns`` hook adds (e.g. a mission's ``mission_time_s``). Jobs are picklable (a module-level
function and frozen data) so any engine can ship them to worker processes or machines; a record holds
no wall times, so it depends on the job only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from qrsim_ros.core.config.scenario import Scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.policies.episode import EpisodeResult, run_episode

#: One episode's row: column name -> value (str, int, float or None for "not applicable").
Record = dict[str, Any]
#: The columns of every record, in results.csv's order.
BASE_COLUMNS = ("episode", "seed", "reward", "outcome", "steps", "sim_time_s", "persons_found",
                "persons_total")
#: ``columns(sim, result)``: extra columns of an episode, read from the Simulator at its end. Must be a
#: module-level function (picklable) and must not name a base column.
ColumnsHook = Callable[[Simulator, EpisodeResult], Mapping[str, Any]]


@dataclass(frozen=True)
class EpisodeJob:
    """Episode ``index`` of a batch: the validated ``scenario`` flown with ``seed`` by ``policy``."""

    index: int
    seed: int
    scenario: Scenario
    policy: str
    columns: ColumnsHook | None = None


def base_record(index: int, result: EpisodeResult) -> Record:
    """The ``BASE_COLUMNS`` of one episode."""
    return {
        "episode": index, "seed": result.seed, "reward": result.total_reward, "outcome": result.outcome,
        "steps": result.steps, "sim_time_s": result.sim_time_s, "persons_found": result.persons_found,
        "persons_total": result.persons_total,
    }


def run_job(job: EpisodeJob) -> Record:
    """Fly one episode from scratch: a Simulator built from the validated scenario with the job's seed
    (no YAML read here), at the start of the episode of that seed; its record."""
    sim = Simulator(replace(job.scenario, seed=job.seed))
    result = run_episode(sim, job.policy)
    record = base_record(job.index, result)
    if job.columns is not None:
        extra = dict(job.columns(sim, result))
        clash = sorted(set(extra) & set(BASE_COLUMNS))
        if clash:
            raise ValueError(f"the columns hook {job.columns.__qualname__} redefines base column(s) {clash}")
        record.update(extra)
    return record


def make_jobs(scenario: Scenario, policy: str, seeds: list[int],
              columns: ColumnsHook | None = None) -> list[EpisodeJob]:
    """Episode i of the batch flies seed ``seeds[i]``."""
    return [EpisodeJob(i, s, scenario, policy, columns) for i, s in enumerate(seeds)]


#: ``on_done(done)``: called after each finished episode with the number finished so far.
OnDone = Callable[[int], None]


class Collector:
    """Records by episode index, whatever order they finish in; ``on_done`` told of each."""

    def __init__(self, total: int, on_done: OnDone | None = None) -> None:
        self._records: list[Record | None] = [None] * total
        self._done = 0
        self._on_done = on_done

    def add(self, record: Record) -> None:
        index = int(record["episode"])
        if self._records[index] is None:  # a recomputed episode (a lost worker) is the same record
            self._done += 1
        self._records[index] = record
        if self._on_done is not None:
            self._on_done(self._done)

    @property
    def done(self) -> int:
        return self._done

    def records(self) -> list[Record]:
        """Every record in episode order; ValueError naming the missing episodes if any is missing."""
        missing = [i for i, r in enumerate(self._records) if r is None]
        if missing:
            raise ValueError(f"{len(missing)} episode(s) have no result: {missing[:10]}")
        return [r for r in self._records if r is not None]

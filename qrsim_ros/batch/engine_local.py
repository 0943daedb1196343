"""Batch engines on this machine without Dask: in this process, or a multiprocessing pool."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Sequence

from qrsim_ros.batch.jobs import Collector, EpisodeJob, OnDone, Record, run_job


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. under taskset or a container's cpuset),
    at least 1: the most useful number of worker processes."""
    count = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if count is not None:
        return max(1, count() or 1)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_in_process(jobs: Sequence[EpisodeJob], on_done: OnDone | None = None) -> list[Record]:
    """Every job in turn in this process; records in episode order."""
    collector = Collector(len(jobs), on_done)
    for job in jobs:
        collector.add(run_job(job))
    return collector.records()


def _context() -> mp.context.BaseContext:
    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


def run_pool(jobs: Sequence[EpisodeJob], workers: int, on_done: OnDone | None = None) -> list[Record]:
    """The jobs on a pool of ``workers`` processes (forkserver where available, else spawn), one job at a
    time each; records in episode order. The pool is terminated on the way out (also on Ctrl-C)."""
    collector = Collector(len(jobs), on_done)
    with _context().Pool(processes=workers) as pool:
        for record in pool.imap_unordered(run_job, jobs, chunksize=1):
            collector.add(record)
    return collector.records()

#!/usr/bin/env python3
"""Benchmark: episodes per second of ``qrsim batch``'s engines on this machine (not a timed test).

Cases: in process; a multiprocessing pool of 1 and 2 processes; a Dask LocalCluster of 1 and 2 worker
processes. Each case runs the same R episodes of a cheap scenario (keep_spot, --steps N, the auto
policy) from scratch: the engine's start-up (pool or cluster, worker imports, numba loading) counts, as
it does for a user. Printed per case: start-up [s] (Dask: the cluster and client; the pool starts
inside its run), batch [s], total [s] and episodes/s over the total; every case's records are checked
equal to the in-process ones (the first case). The cases run in --repeats rounds and each case's best
round counts (a shared machine's load only slows).

Usage: ./qrsim exec -- python scripts/bench_batch.py [--runs 40] [--steps 500] [--repeats 2]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import ExitStack

from qrsim_ros.batch import engine_dask
from qrsim_ros.batch.engine_local import run_in_process, run_pool
from qrsim_ros.batch.jobs import EpisodeJob, Record, make_jobs
from qrsim_ros.core.config.scenario import load_scenario

Case = Callable[[list[EpisodeJob]], tuple[list[Record], float]]


def in_process(jobs: list[EpisodeJob]) -> tuple[list[Record], float]:
    return run_in_process(jobs), 0.0


def pool(workers: int) -> Case:
    def case(jobs: list[EpisodeJob]) -> tuple[list[Record], float]:
        return run_pool(jobs, workers), 0.0
    return case


def dask_local(workers: int) -> Case:
    def case(jobs: list[EpisodeJob]) -> tuple[list[Record], float]:
        t0 = time.perf_counter()
        with ExitStack() as stack:
            client = stack.enter_context(engine_dask.local_client(workers))
            startup = time.perf_counter() - t0
            return engine_dask.run_dask(client, jobs), startup
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    scenario = load_scenario("keep_spot", {"task": {"duration_steps": args.steps}})
    jobs = make_jobs(scenario, "auto", list(range(1, args.runs + 1)))
    cases: dict[str, Case] = {
        "in process": in_process,
        "multiprocessing, 1 process": pool(1),
        "multiprocessing, 2 processes": pool(2),
        "dask LocalCluster, 1 worker": dask_local(1),
        "dask LocalCluster, 2 workers": dask_local(2),
    }
    run_in_process(jobs[:1])  # warms this process (imports, numba) as the workers warm themselves
    reference: list[Record] | None = None
    print(f"keep_spot, {args.runs} episodes of {args.steps} steps, best of {args.repeats}")
    print(f"{'engine':<30}{'start-up s':>12}{'batch s':>10}{'total s':>10}{'episodes/s':>12}")
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeats):  # rounds over every case: a load spike slows a round, not one case
        for name, case in cases.items():
            t0 = time.perf_counter()
            records, startup = case(jobs)
            total = time.perf_counter() - t0
            reference = records if reference is None else reference
            if records != reference:
                raise SystemExit(f"{name}: records differ from the in-process run")
            if name not in best or total < best[name][1]:
                best[name] = (startup, total)
    for name, (startup, total) in best.items():
        print(f"{name:<30}{startup:>12.2f}{total - startup:>10.2f}{total:>10.2f}{args.runs / total:>12.2f}")

if __name__ == "__main__":
    main()

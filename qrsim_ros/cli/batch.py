"""``qrsim batch``: many seeded episodes of a scenario in parallel processes, with outcome statistics.

    qrsim batch search_rescue_2a --runs 100 --workers 4 --out results.csv

Episode i (0-based) gets seed BASE + i. --seed BASE follows the seed convention of ``qrsim run``
except that no batch episode is ever clock-seeded: -1 (the default) takes the scenario file's seed as
BASE, or 1 if the file's seed is 0 (from the clock); 1..2147483647 is BASE itself; 0 is rejected. Every
episode builds its own Simulator from its seed (all streams, the policy's included, derive from it), so
an episode's result depends on its seed only: the results, and results.csv, are identical for any
--workers W, and ``qrsim run --seed BASE+i`` flies episode i again. The scenario file is read once; W
processes (multiprocessing, forkserver where available, else spawn) get the validated scenario and each
run whole episodes; W = 1 runs in this process; a W above the CPUs this process may use (its affinity)
is capped at that count, with a one-line note. Results are collected by episode index.

Printed: the probability of every outcome (time_limit, invalid_vehicle, all_persons_found) with its
Wilson 95 % confidence interval, and the distribution (mean, std, min, quartiles, max) of the episode
reward, the duration in steps and in simulated seconds, and of the persons found (search and rescue).
--out FILE.csv: one row per episode: episode, seed, reward, outcome, steps, sim_time_s, persons_found,
persons_total (empty outside search and rescue); floats in full precision, replaced atomically.
--policy, --steps and --set are as for ``qrsim run``. Bad input exits with status 2 and one line.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from qrsim_ros.cli import (
    CliError,
    check_output_path,
    finish_parser,
    report,
    standalone_main,
    subcommand_parser,
    write_csv_atomic,
)
from qrsim_ros.cli.run import (
    ProgressBar,
    add_common_arguments,
    fmt_float,
    input_files,
    load_checked,
    scenario_overrides,
    seed_argument,
)
from qrsim_ros.core.common.intervals import wilson_interval
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.scenario import (
    MAX_SEED,
    SEED_FROM_CLOCK,
    SEED_FROM_FILE,
    Scenario,
    available_scenarios,
    resolve_seed,
)
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.tasks.rules import DONE_ALL_PERSONS_FOUND, DONE_INVALID_VEHICLE, DONE_TIME_LIMIT
from qrsim_ros.policies import PolicyError
from qrsim_ros.policies.episode import EpisodeResult, run_episode

PROG = "qrsim batch"
OUTCOMES = (DONE_TIME_LIMIT, DONE_INVALID_VEHICLE, DONE_ALL_PERSONS_FOUND)
#: BASE when --seed is -1 and the scenario file's seed is 0 (from the clock).
DEFAULT_BASE_SEED = 1
RESULTS_HEADER = ("episode", "seed", "reward", "outcome", "steps", "sim_time_s", "persons_found",
                  "persons_total")


# --- statistics ------------------------------------------------------------------------------------------

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


def resolve_base_seed(requested: int, file_seed: int) -> int:
    """BASE from --seed (validated with ``seed_argument``): -1 = the scenario file's seed, or
    DEFAULT_BASE_SEED (1) if the file's is 0 (from the clock); 0 is rejected (no episode is clock-seeded)."""
    if requested == SEED_FROM_CLOCK:
        raise CliError(f"--seed must be >= 1 or {SEED_FROM_FILE} (the scenario file's seed), got "
                       f"{SEED_FROM_CLOCK}: no batch episode is clock-seeded (episode i gets BASE + i)")
    if requested == SEED_FROM_FILE and file_seed == SEED_FROM_CLOCK:
        return DEFAULT_BASE_SEED
    return resolve_seed(requested, file_seed)  # never the clock here


def episode_seeds(base_seed: int, runs: int) -> list[int]:
    """Seed of episode i: base_seed + i (base_seed >= 1: never 0, which would mean the clock; the last
    at most MAX_SEED, so ``qrsim run`` takes every one of them)."""
    if base_seed < 1:
        raise CliError(f"--seed must be >= 1 (episode i gets BASE + i; 0 would mean the clock), "
                       f"got {base_seed}")
    if base_seed + runs - 1 > MAX_SEED:
        raise CliError(f"the last episode's seed BASE + R - 1 = {base_seed} + {runs} - 1 = "
                       f"{base_seed + runs - 1} exceeds the largest seed {MAX_SEED}")
    return [base_seed + i for i in range(runs)]


# --- running -----------------------------------------------------------------------------------------------

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


def _run_one(job: tuple[int, int, Scenario, str]) -> tuple[int, EpisodeResult]:
    """One episode from scratch (picklable for worker processes): a Simulator built from the validated
    scenario with seed ``seed`` (no YAML read here), at the start of the episode of that seed."""
    index, seed, scenario, policy = job
    sim = Simulator(replace(scenario, seed=seed))
    return index, run_episode(sim, policy)


def _context() -> mp.context.BaseContext:
    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


def run_batch(scenario: Scenario, policy: str, seeds: Sequence[int], workers: int,
              progress: ProgressBar | None = None) -> list[EpisodeResult]:
    """Run one episode of the validated ``scenario`` per seed on ``workers`` processes (1 = in process);
    results in seed order."""
    jobs = [(i, s, scenario, policy) for i, s in enumerate(seeds)]
    results: list[EpisodeResult | None] = [None] * len(jobs)
    done = 0
    if workers <= 1:
        outputs = map(_run_one, jobs)
        for index, result in outputs:
            results[index] = result
            done += 1
            if progress is not None:
                progress.update(done)
    else:
        with _context().Pool(processes=workers) as pool:
            for index, result in pool.imap_unordered(_run_one, jobs, chunksize=1):
                results[index] = result
                done += 1
                if progress is not None:
                    progress.update(done)
    return [r for r in results if r is not None]


def results_rows(results: Sequence[EpisodeResult]) -> list[list[str]]:
    """results.csv rows (no wall times: the file depends on the seeds only)."""
    rows = []
    for i, r in enumerate(results):
        rows.append([str(i), str(r.seed), fmt_float(r.total_reward), r.outcome, str(r.steps),
                     fmt_float(r.sim_time_s), "" if r.persons_found is None else str(r.persons_found),
                     "" if r.persons_total is None else str(r.persons_total)])
    return rows


def report_lines(results: Sequence[EpisodeResult]) -> list[str]:
    """Outcome probabilities with Wilson 95 % intervals and the reward / duration distributions."""
    n = len(results)
    counts = Counter(r.outcome for r in results)
    names = list(OUTCOMES) + sorted(set(counts) - set(OUTCOMES))
    lines = [f"{'outcome':<20} {'count':>6} {'p':>7}   95% CI (Wilson)"]
    for name in names:
        k = counts.get(name, 0)
        lo, hi = wilson_interval(k, n)
        lines.append(f"{name:<20} {k:>6} {k / n:>7.3f}   [{lo:.3f}, {hi:.3f}]")
    lines.append("")
    cols = ("mean", "std", "min", "q1", "median", "q3", "max")
    lines.append(f"{'':<20}" + "".join(f"{c:>12}" for c in cols))
    series: list[tuple[str, list[float]]] = [
        ("reward", [r.total_reward for r in results]),
        ("duration [steps]", [float(r.steps) for r in results]),
        ("duration [s]", [r.sim_time_s for r in results]),
    ]
    if all(r.persons_found is not None for r in results):
        series.append(("persons found", [float(r.persons_found or 0) for r in results]))
    for label, values in series:
        d = Distribution.of(values)
        lines.append(f"{label:<20}" + "".join(f"{getattr(d, c):>12.6g}" for c in cols))
    return lines


# --- command line --------------------------------------------------------------------------------

def _add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_common_arguments(p)
    p.add_argument("--runs", type=int, default=None, metavar="R", help="number of episodes (required)")
    p.add_argument("--workers", type=int, default=None, metavar="W",
                   help="worker processes (default: the CPU count, at most R; 1 = in process; more than the "
                   "CPUs this process may use are capped at that, with a note)")
    p.add_argument("--seed", type=int, default=SEED_FROM_FILE, metavar="BASE",
                   help="episode i gets seed BASE + i (-1: the scenario file's seed, or 1 if that is 0, "
                   "the default; 1..2147483647: BASE; 0, the clock, is not allowed)")
    p.add_argument("--out", default=None, metavar="FILE.csv", help="write one row per episode")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return finish_parser(p, run, PROG)


def build_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``batch`` subcommand on a ``qrsim`` subparsers object."""
    p = subcommand_parser(subparsers, "batch",
                          "many seeded episodes in parallel, with outcome statistics", __doc__)
    return _add_arguments(p)


def run(args: argparse.Namespace) -> int:
    """Validate, run the episodes, print the statistics, write --out. 0 ok, 2 bad input, 1 failure."""
    if args.list:
        print("\n".join(available_scenarios()))
        return 0
    try:
        if args.scenario is None:
            raise CliError("the SCENARIO argument is required (qrsim batch --list shows them)")
        if args.runs is None or args.runs < 1:
            raise CliError(f"--runs R is required and must be >= 1, got {args.runs}")
        cpus = usable_cpus()
        workers = min(args.runs, cpus) if args.workers is None else args.workers
        if workers < 1:
            raise CliError(f"--workers must be >= 1, got {workers}")
        if workers > cpus:  # more processes than CPUs only cost memory and switching
            print(f"{PROG}: note: --workers {workers} capped at the {cpus} CPU(s) this process may use",
                  file=sys.stderr)
            workers = cpus
        requested = seed_argument(args.seed)
        overrides = scenario_overrides(args.sets, args.steps)
        scenario, _ = load_checked(args.scenario, overrides, args.policy)
        seeds = episode_seeds(resolve_base_seed(requested, scenario.seed), args.runs)
        if args.out is not None:
            check_output_path(args.out, input_files(scenario, args.policy))
    except (CliError, ConfigError) as exc:
        return report(PROG, exc)
    bar = ProgressBar(args.runs, PROG, enabled=not args.no_progress)
    wall0 = time.perf_counter()
    try:
        results = run_batch(scenario, args.policy, seeds, workers, bar)
    except PolicyError as exc:
        bar.close()
        return report(PROG, exc, 1)
    bar.close()
    wall_s = time.perf_counter() - wall0
    if args.out is not None:
        try:
            write_csv_atomic(args.out, RESULTS_HEADER, results_rows(results))
        except CliError as exc:
            return report(PROG, exc, 1)
    sim_s = sum(r.sim_time_s for r in results)
    print(f"{args.scenario}, policy {args.policy}: {len(results)} episodes (seeds {seeds[0]}..{seeds[-1]}) "
          f"on {workers} worker(s) in {wall_s:.1f} s wall ({sim_s / wall_s:.1f}x real time overall)")
    for line in report_lines(results):
        print(line)
    if args.out is not None:
        print(f"results: {len(results)} rows -> {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m qrsim_ros.cli.batch SCENARIO --runs R ...``."""
    return standalone_main(_add_arguments, run, PROG, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())

"""``qrsim batch``: many seeded episodes of a scenario on Dask distributed (or a multiprocessing pool), with
outcome statistics and an optional report.

    qrsim batch search_rescue_2a --runs 100 --workers 4 --report out/
    qrsim batch search_rescue_2a --runs 1000 --scheduler tcp://10.0.0.5:8786

Episode i (0-based) gets seed BASE + i. --seed BASE follows the seed convention of ``qrsim run``
except that no batch episode is ever clock-seeded: -1 (the default) takes the scenario file's seed as
BASE, or 1 if the file's seed is 0 (from the clock); 1..2147483647 is BASE itself; 0 is rejected. Every
episode builds its own Simulator from its seed (all streams, the policy's included, derive from it), so
an episode's result depends on its seed only: the results, results.csv and summary.json are identical for
any engine, --workers W and completion order, and ``qrsim run --seed BASE+i`` flies episode i again. The
scenario file is read once; each task carries the validated scenario and runs one whole episode; results
are collected by episode index.

Engines (docs/BATCH.md): --engine dask (the default) runs a LocalCluster of W single-threaded worker
processes on 127.0.0.1, or uses the existing cluster at --scheduler tcp://HOST:PORT (``dask scheduler``
and ``dask worker`` processes whose Python imports the same qrsim_ros); a worker lost mid-batch loses no
episode (Dask runs its tasks again). --engine multiprocessing uses a process pool (forkserver where
available, else spawn). W = 1 without --scheduler runs in this process; a W above the CPUs this process
may use (its affinity) is capped at that count, with a one-line note. An unreachable or malformed
--scheduler exits with status 2 within --connect-timeout. Ctrl-C stops the workers and exits with 130.

Printed: the probability of every outcome (time_limit, invalid_vehicle, all_persons_found) with its
Wilson 95 % confidence interval, and the distribution (mean, std, min, quartiles, max) of the episode
reward, the duration in steps and in simulated seconds, and of the persons found (search and rescue).
--out FILE.csv: one row per episode: episode, seed, reward, outcome, steps, sim_time_s, persons_found,
persons_total (empty outside search and rescue); floats in full precision, replaced atomically.
--report DIR: results.csv (as --out), summary.json, report.md, outcomes.png and distributions.png.
--policy, --steps and --set are as for ``qrsim run``. Bad input exits with status 2 and one line.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING

from qrsim_ros.batch import engine_dask
from qrsim_ros.batch.engine_local import run_in_process, run_pool, usable_cpus
from qrsim_ros.batch.jobs import BASE_COLUMNS, EpisodeJob, OnDone, Record, make_jobs
from qrsim_ros.cli import (
    CliError,
    check_output_path,
    finish_parser,
    report,
    write_bytes_atomic,
    write_csv_atomic,
)
from qrsim_ros.cli.commands import HELP_LINES
from qrsim_ros.cli.run import (
    ProgressBar,
    add_common_arguments,
    input_files,
    list_scenarios,
    load_checked,
    require_scenario,
    scenario_overrides,
    seed_argument,
)
from qrsim_ros.cli.subcommand import Subcommand
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.scenario import (
    MAX_SEED,
    SEED_FROM_CLOCK,
    SEED_FROM_FILE,
    resolve_seed,
)
from qrsim_ros.policies import PolicyError

if TYPE_CHECKING:
    from qrsim_ros.batch.report import BatchInfo

__all__ = ["RESULTS_HEADER", "episode_seeds", "resolve_base_seed", "usable_cpus"]

PROG = "qrsim batch"
ENGINES = ("dask", "multiprocessing")
#: BASE when --seed is -1 and the scenario file's seed is 0 (from the clock).
DEFAULT_BASE_SEED = 1
RESULTS_HEADER = BASE_COLUMNS
#: Exit status after Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130


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


def run_jobs(jobs: Sequence[EpisodeJob], engine: str, workers: int, scheduler: str | None,
             connect_timeout_s: float, on_done: OnDone | None = None) -> tuple[list[Record], str, int]:
    """Run the jobs on the chosen engine: (records in episode order, the engine as printed, the worker
    count). ConnectionError or ValueError before any episode runs when --scheduler is unusable."""
    if engine == "dask" and (scheduler is not None or workers > 1):
        with ExitStack() as stack:
            if scheduler is not None:
                client = stack.enter_context(engine_dask.remote_client(scheduler, connect_timeout_s))
                workers, what = engine_dask.worker_count(client), f"dask scheduler {scheduler}"
            else:
                client, what = stack.enter_context(engine_dask.local_client(workers)), "dask LocalCluster"
            return engine_dask.run_dask(client, jobs, on_done), what, workers
    if engine == "multiprocessing" and workers > 1:
        return run_pool(jobs, workers, on_done), "multiprocessing pool", workers
    return run_in_process(jobs, on_done), "in process", 1


# --- command line --------------------------------------------------------------------------------

def _add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_common_arguments(p)
    p.add_argument("--runs", type=int, default=None, metavar="R", help="number of episodes (required)")
    p.add_argument("--workers", type=int, default=None, metavar="W",
                   help="local worker processes (default: the CPU count, at most R; 1 = in process; more "
                   "than the CPUs this process may use are capped at that, with a note; not with "
                   "--scheduler)")
    p.add_argument("--engine", choices=ENGINES, default="dask",
                   help="dask: Dask distributed, a LocalCluster or --scheduler (the default); "
                   "multiprocessing: a local process pool")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="run on the existing Dask cluster of this scheduler (its workers need qrsim_ros)")
    p.add_argument("--connect-timeout", type=float, default=engine_dask.DEFAULT_CONNECT_TIMEOUT_S,
                   metavar="S",
                   help="seconds to wait for --scheduler and a worker of it (default %(default)g)")
    p.add_argument("--seed", type=int, default=SEED_FROM_FILE, metavar="BASE",
                   help="episode i gets seed BASE + i (-1: the scenario file's seed, or 1 if that is 0, "
                   "the default; 1..2147483647: BASE; 0, the clock, is not allowed)")
    p.add_argument("--out", default=None, metavar="FILE.csv", help="write one row per episode")
    p.add_argument("--report", default=None, metavar="DIR",
                   help="write results.csv, summary.json, report.md and PNG figures into DIR (made if "
                   "missing)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return finish_parser(p, run, PROG)


#: ``qrsim batch``: ``build_parser`` registers it on the ``qrsim`` parser, ``main`` runs it standalone.
COMMAND = Subcommand(PROG, HELP_LINES["batch"], __doc__, _add_arguments)
build_parser, main = COMMAND.build_parser, COMMAND.main


def _local_workers(requested: int | None, runs: int) -> int:
    """W for a local engine: the CPU count (at most R) by default, capped at the usable CPUs with a note."""
    cpus = usable_cpus()
    workers = min(runs, cpus) if requested is None else requested
    if workers < 1:
        raise CliError(f"--workers must be >= 1, got {workers}")
    if workers > cpus:  # more processes than CPUs only cost memory and switching
        print(f"{PROG}: note: --workers {workers} capped at the {cpus} CPU(s) this process may use",
              file=sys.stderr)
        workers = cpus
    return workers


def _check_engine_arguments(args: argparse.Namespace) -> None:
    if args.scheduler is None:
        return
    if args.engine != "dask":
        raise CliError(f"--scheduler needs --engine dask, not --engine {args.engine}")
    if args.workers is not None:
        raise CliError("--workers is for local engines: with --scheduler the cluster's workers run the batch")
    if not args.connect_timeout > 0:
        raise CliError(f"--connect-timeout must be > 0 s, got {args.connect_timeout}")
    try:
        engine_dask.check_scheduler_address(args.scheduler)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _check_report_dir(path: str) -> None:
    """Make --report DIR (and its parents) before any work; CliError if it cannot be a directory."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CliError(f"--report {path}: cannot write the report: it is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--report {path}: cannot make the directory: {exc.strerror or exc}") from None


def _write_outputs(args: argparse.Namespace, records: list[Record], info: BatchInfo) -> list[str]:
    """--out and --report; the lines saying what was written."""
    from qrsim_ros.batch.missions import extras_for
    from qrsim_ros.batch.report import build_report, results_table

    said = []
    if args.out is not None:
        write_csv_atomic(args.out, *results_table(records))
        said.append(f"results: {len(records)} rows -> {args.out}")
    if args.report is not None:
        files = build_report(records, info, extras_for(info.task_type))
        for name, data in files.items():
            write_bytes_atomic(os.path.join(args.report, name), data)
        said.append(f"report: {', '.join(files)} -> {args.report}")
    return said


def run(args: argparse.Namespace) -> int:
    """Validate, run the episodes, print the statistics, write --out and --report. 0 ok, 2 bad input,
    1 failure, 130 interrupted."""
    if list_scenarios(args):
        return 0
    try:
        require_scenario(args, PROG)
        if args.runs is None or args.runs < 1:
            raise CliError(f"--runs R is required and must be >= 1, got {args.runs}")
        _check_engine_arguments(args)
        workers = 0 if args.scheduler is not None else _local_workers(args.workers, args.runs)
        if args.engine == "dask" and workers != 1 and importlib.util.find_spec("distributed") is None:
            raise CliError("--engine dask needs Dask distributed: pip install 'dask[distributed]' (the "
                           "project venv has it), or use --engine multiprocessing")
        requested = seed_argument(args.seed)
        overrides = scenario_overrides(args.sets, args.steps)
        scenario, _ = load_checked(args.scenario, overrides, args.policy)
        seeds = episode_seeds(resolve_base_seed(requested, scenario.seed), args.runs)
        if args.out is not None:
            check_output_path(args.out, input_files(scenario, args.policy))
        if args.report is not None:
            _check_report_dir(args.report)
    except (CliError, ConfigError) as exc:
        return report(PROG, exc)
    # the statistics and figures (scipy, matplotlib) only once the arguments hold: a usage error is quick
    from qrsim_ros.batch.missions import columns_for
    from qrsim_ros.batch.report import BatchInfo
    from qrsim_ros.batch.summary import outcomes_for, summarise, table_lines

    bar = ProgressBar(args.runs, PROG, enabled=not args.no_progress, eta=True)
    wall0 = time.perf_counter()
    try:
        jobs = make_jobs(scenario, args.policy, seeds, columns_for(scenario.task.type))
        records, engine, workers = run_jobs(jobs, args.engine, workers,
                                            args.scheduler, args.connect_timeout, bar.update)
    except ConnectionError as exc:  # --scheduler unusable: found before any episode ran
        bar.close()
        return report(PROG, exc)
    except PolicyError as exc:
        bar.close()
        return report(PROG, exc, 1)
    except KeyboardInterrupt:
        bar.close()
        print(f"{PROG}: interrupted; the workers are stopped, nothing was written", file=sys.stderr)
        return INTERRUPTED
    except Exception as exc:  # the engine gave up (e.g. Dask's KilledWorker: a task killed 3 workers)
        bar.close()
        return report(PROG, RuntimeError(f"the batch failed on the {args.engine} engine: "
                                          f"{type(exc).__name__}: {exc}"), 1)
    bar.close()
    wall_s = time.perf_counter() - wall0
    info = BatchInfo(str(args.scenario), args.policy, tuple(seeds), engine, workers, wall_s,
                     scenario.task.type)
    try:
        written = _write_outputs(args, records, info)
    except CliError as exc:
        return report(PROG, exc, 1)
    sim_s = sum(float(r["sim_time_s"]) for r in records)
    print(f"{args.scenario}, policy {args.policy}: {len(records)} episodes (seeds {seeds[0]}..{seeds[-1]}) "
          f"on {workers} worker(s) ({engine}) in {wall_s:.1f} s wall ({sim_s / wall_s:.1f}x real time "
          f"overall, {len(records) / wall_s:.2f} episodes/s)")
    for line in table_lines(summarise(records, outcomes_for(scenario.task.type))) + written:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

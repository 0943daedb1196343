#!/usr/bin/env python3
"""Benchmark: how long ``qrsim`` takes to answer before it runs anything.

docs/ARCHITECTURE.md describes the qrsim command's start-up.

Runs each command line R times in a fresh interpreter (the installed ``qrsim`` executable, as ``./qrsim``
runs it, without the shell wrapper's environment check) and prints the median and worst wall time and
the peak resident memory. Target: ``--version``, ``help`` and a usage error of every subcommand within
0.5 s on the project's 2-core machine.

With ``--graph`` it times graph starts instead: the README's command (3 vehicles, lockstep, recorded:
10 processes) from the command to vehicle_dynamics' "started: tick 0 published" line, with and without
``--record``, and ``launch keep_spot --duration 2`` to its end (targets: 5 s and 8 s). Each run is in a
free ROS domain; the first tick's time is read off the launcher's output as it arrives.

Usage: ./qrsim exec -- python scripts/bench_startup.py [--repeats 5] [--graph]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QRSIM = Path(__file__).resolve().parents[1] / "install" / "qrsim_ros" / "lib" / "qrsim_ros" / "qrsim"

CASES = (
    ("--version",),
    ("help",),
    ("bogus",),
    *((name, "keep_spot", "--bogus") for name in ("run", "batch", "launch")),
    ("demo", "--bogus"),
    ("replay", "--bogus"),
    ("plot", "--bogus"),
    ("verify", "--bogus"),
    ("play", "--bogus"),
)


def once(argv: tuple[str, ...]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one ``qrsim ARGV``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(QRSIM), *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = 0  # reaped above
    return wall, usage.ru_maxrss / 1024


README_COMMAND = ("launch", "search_rescue", "--variant", "2c", "--num-vehicles", "3", "--seed", "2",
                  "--lockstep", "--real-time-factor", "0", "--duration", "5", "--domain-id", "auto")
#: What vehicle_dynamics logs when it publishes tick 0.
TICK_0 = b"started: tick 0 published"


def graph_once(argv: tuple[str, ...]) -> tuple[float | None, float]:
    """(wall seconds to vehicle_dynamics' tick 0, or None if it never came; wall seconds to the end) of one
    ``qrsim ARGV``, as ``./qrsim`` runs it."""
    t0 = time.perf_counter()
    first: float | None = None
    proc = subprocess.Popen([sys.executable, str(QRSIM), *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    for line in proc.stdout:
        if first is None and TICK_0 in line:
            first = time.perf_counter() - t0
    proc.wait()
    if proc.returncode != 0:
        print(f"bench_startup: qrsim {' '.join(argv)} exited with {proc.returncode}", file=sys.stderr)
    return first, time.perf_counter() - t0


def graph_main(repeats: int) -> int:
    """The graph starts (module docstring)."""
    print(f"load average before: {os.getloadavg()[0]:.2f}; {repeats} runs each")
    print(f"{'case':<58} {'runs [s]':<34} {'median [s]':>10}")
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        cases = (("README command --record: first tick", "first",
                  lambda n: (*README_COMMAND, "--record", str(Path(tmp) / f"bag{n}"))),
                 ("README command: first tick", "first", lambda n: README_COMMAND),
                 ("launch keep_spot --duration 2: to its end", "end",
                  lambda n: ("launch", "keep_spot", "--duration", "2", "--domain-id", "auto")))
        for label, what, argv_of in cases:
            times = []
            for n in range(max(1, repeats)):
                first, end = graph_once(argv_of(n))
                times.append(end if what == "end" else first)
            got = [t for t in times if t is not None]
            shown = ", ".join("-" if t is None else f"{t:.2f}" for t in times)
            median = f"{statistics.median(got):10.2f}" if got else f"{'-':>10}"
            print(f"{label:<58} {shown:<34} {median}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs per command line (default 5)")
    ap.add_argument("--graph", action="store_true", help="time graph starts instead (module docstring)")
    args = ap.parse_args()
    if not QRSIM.exists():
        print(f"bench_startup: {QRSIM} is missing: run ./qrsim once to build", file=sys.stderr)
        return 2
    if args.graph:
        return graph_main(args.repeats)
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.repeats} runs each")
    print(f"{'qrsim ...':<32} {'median [s]':>10} {'worst [s]':>10} {'peak RSS [MB]':>14}")
    for argv in CASES:
        runs = [once(argv) for _ in range(max(1, args.repeats))]
        walls = [w for w, _ in runs]
        print(f"{' '.join(argv):<32} {statistics.median(walls):10.2f} {max(walls):10.2f} "
              f"{max(r for _, r in runs):14.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

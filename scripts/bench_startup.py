#!/usr/bin/env python3
"""Benchmark: how long ``qrsim`` takes to answer before it runs anything.

docs/ARCHITECTURE.md describes the qrsim command's start-up.

Runs each command line R times in a fresh interpreter (the installed ``qrsim`` executable, as ``./qrsim``
runs it, without the shell wrapper's environment check) and prints the median and worst wall time and
the peak resident memory. Target: ``--version``, ``help`` and a usage error of every subcommand within
0.5 s on the project's 2-core machine.

Usage: ./qrsim exec -- python scripts/bench_startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs per command line (default 5)")
    args = ap.parse_args()
    if not QRSIM.exists():
        print(f"bench_startup: {QRSIM} is missing: run ./qrsim once to build", file=sys.stderr)
        return 2
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

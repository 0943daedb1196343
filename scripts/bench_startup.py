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
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
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


STARTED = re.compile(rb"^\[qrsim launch\] started (\w+) \(pid (\d+)\)")
FIRST_LOG = re.compile(rb"^\[(\w+)\] \[INFO\]")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used (NaN once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def graph_once(argv: tuple[str, ...]) -> tuple[float | None, float, dict[str, tuple[float, float, float]]]:
    """Of one ``qrsim ARGV`` (as ``./qrsim`` runs it): wall seconds to vehicle_dynamics' tick 0 (None if it
    never came), wall seconds to the end, and per node (wall seconds when it was started, wall seconds
    and its CPU seconds when it logged its first line: constructed)."""
    t0 = time.perf_counter()
    first: float | None = None
    started: dict[str, tuple[int, float]] = {}
    nodes: dict[str, tuple[float, float, float]] = {}
    proc = subprocess.Popen([sys.executable, str(QRSIM), *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.perf_counter() - t0
        if (m := STARTED.match(line)) is not None:
            started[m.group(1).decode()] = (int(m.group(2)), now)
        elif (m := FIRST_LOG.match(line)) is not None and (name := m.group(1).decode()) in started \
                and name not in nodes:
            pid, at = started[name]
            nodes[name] = (at, now, cpu_seconds(pid))
        if first is None and TICK_0 in line:
            first = now
    proc.wait()
    if proc.returncode != 0:
        print(f"bench_startup: qrsim {' '.join(argv)} exited with {proc.returncode}", file=sys.stderr)
    return first, time.perf_counter() - t0, nodes


def print_breakdown(nodes: dict[str, tuple[float, float, float]]) -> None:
    """Per node: when it was started, when it was constructed and the CPU it had used by then."""
    print(f"  {'node':<20} {'started [s]':>11} {'constructed [s]':>15} {'CPU by then [s]':>15}")
    for name, (at, done, cpu) in sorted(nodes.items(), key=lambda item: item[1][1]):
        print(f"  {name:<20} {at:11.2f} {done:15.2f} {cpu:15.2f}")


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
        breakdown: dict[str, tuple[float, float, float]] = {}
        for label, what, argv_of in cases:
            times = []
            for n in range(max(1, repeats)):
                first, end, nodes = graph_once(argv_of(n))
                times.append(end if what == "end" else first)
                breakdown = breakdown or nodes  # the first run's (the README command with --record)
            got = [t for t in times if t is not None]
            shown = ", ".join("-" if t is None else f"{t:.2f}" for t in times)
            median = f"{statistics.median(got):10.2f}" if got else f"{'-':>10}"
            print(f"{label:<58} {shown:<34} {median}")
    print("\nThe first run of the README command with --record, per node (wall seconds from the command):")
    print_breakdown(breakdown)
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

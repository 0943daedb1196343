#!/usr/bin/env python3
"""Run a tier of the test suite R times, optionally beside K CPU-burning processes, and print per test
its passes, failures and worst duration: whether the suite is green every time, measured.

    scripts/flake_hunt.py                   # the graph tier 3 times
    scripts/flake_hunt.py -R 5 -K 2         # 5 times beside 2 burners (this machine has 2 cores)
    scripts/flake_hunt.py -R 2 -- -k lidar  # more pytest arguments after --

Each round is one ``./qrsim test -m TIER`` (its own pytest process) writing a JUnit XML report; the
table is read from those reports (kept with ``--reports DIR``). Exit status 1 if any test failed or
errored in any round. Nothing is re-run on failure: a failure is a finding (docs/TESTING.md). A hunt
stopped by SIGINT or SIGTERM ends the round in progress and the burners, prints the table of the rounds
it completed, and exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # any python3 runs the hunt: the supervision helpers need only the stdlib
from qrsim_ros.supervision import process_group  # noqa: E402

TIERS = {"graph": "graph", "fast": "not graph"}
_BURN = "while True:\n    sum(range(10000))\n"
#: lines of each failure's report printed at the end (its last lines: the assertion and the output)
DETAIL_LINES = 60


@dataclass
class Record:
    """One test over the rounds."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    worst_s: float = 0.0
    messages: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def read_report(path: Path, records: dict[str, Record], round_no: int) -> None:
    """Add one round's JUnit XML report to ``records`` (test id -> Record)."""
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        rec = records[test_id]
        rec.worst_s = max(rec.worst_s, float(case.get("time", 0.0)))
        outcome = {child.tag for child in case}
        if outcome & {"failure", "error"}:
            rec.failed += 1
            first = next(child for child in case if child.tag in ("failure", "error"))
            rec.messages.append(f"round {round_no}: {(first.get('message') or '').splitlines()[0][:160]}")
            tail = (first.text or "").splitlines()[-DETAIL_LINES:]
            rec.details.append(f"round {round_no}:\n" + "\n".join(tail))
        elif "skipped" in outcome:
            rec.skipped += 1
        else:
            rec.passed += 1


def run_round(tier: str, report: Path, extra: list[str]) -> tuple[int, float]:
    """One ``./qrsim test`` of the tier; its exit status and wall seconds."""
    t0 = time.monotonic()
    cmd = [str(REPO_ROOT / "qrsim"), "test", "-m", TIERS[tier], "-q", "-p", "no:cacheprovider",
           f"--junitxml={report}", *extra]
    # its own process group: a hunt stopped by hand stops the round as a user's Ctrl-C would, then kills
    # what is left of the group (pytest's workers and what they started), so nothing is orphaned
    proc = process_group.start(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        process_group.stop([proc], ((signal.SIGINT, ROUND_STOP_S),))
        process_group.kill_group(proc)
        raise
    return rc, time.monotonic() - t0


#: Stopping a round: SIGINT and this long [s] for pytest to end, then SIGKILL to the round's group.
ROUND_STOP_S = 60.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-R", "--rounds", type=int, default=3, help="how many runs of the tier (default 3)")
    parser.add_argument("-K", "--burners", type=int, default=0,
                        help="CPU-burning processes beside the runs (default 0)")
    parser.add_argument("--tier", choices=sorted(TIERS), default="graph", help="which tier (default graph)")
    parser.add_argument("--reports", type=Path, default=None, metavar="DIR",
                        help="keep each round's JUnit XML report here (default: a temporary directory)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.burners < 0:
        parser.error("-R must be at least 1 and -K at least 0")

    records: dict[str, Record] = defaultdict(Record)
    # SIGTERM or SIGINT (a hunt stopped by hand) ends the round in progress (it does not count) and the
    # burners; the table of the rounds completed is still printed
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as SIGINT: KeyboardInterrupt
    burners = [subprocess.Popen([sys.executable, "-c", _BURN]) for _ in range(args.burners)]
    rounds: list[tuple[int, float]] = []
    stopped = False
    try:
        with tempfile.TemporaryDirectory(prefix="flake_hunt_") as tmp:
            reports = args.reports or Path(tmp)
            reports.mkdir(parents=True, exist_ok=True)
            for r in range(1, args.rounds + 1):
                report = reports / f"round{r}.xml"
                rc, wall_s = run_round(args.tier, report, args.pytest_args)
                rounds.append((rc, wall_s))
                print(f"round {r}/{args.rounds}: exit {rc}, {wall_s:.0f} s", flush=True)
                if report.is_file():
                    read_report(report, records, r)
    except KeyboardInterrupt:
        stopped = True
        print(f"stopped by hand after {len(rounds)} complete round(s)", flush=True)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    args.rounds = len(rounds)

    failed = {t: rec for t, rec in records.items() if rec.failed}
    width = max((len(t) for t in records), default=10)
    print(f"\n{args.tier} tier, {args.rounds} rounds beside {args.burners} burners "
          f"(load average now {os.getloadavg()[0]:.1f}); tests slowest first:")
    print(f"{'test':<{width}}  passed  failed  skipped  worst s")
    for test_id, rec in sorted(records.items(), key=lambda kv: -kv[1].worst_s):
        print(f"{test_id:<{width}}  {rec.passed:>6}  {rec.failed:>6}  {rec.skipped:>7}  {rec.worst_s:>7.1f}")
    total_failed = sum(rec.failed for rec in records.values())
    print(f"\n{len(records)} tests, {total_failed} failures in {args.rounds} rounds; round wall times "
          + ", ".join(f"{w:.0f} s" for _, w in rounds))
    for test_id, rec in failed.items():
        for message in rec.messages:
            print(f"FAILED {test_id} {message}")
    for test_id, rec in failed.items():  # the end of each failure's report: enough to find a cause
        for detail in rec.details:
            print(f"\n--- {test_id}, {detail}")
    bad_exit = [rc for rc, _ in rounds if rc not in (0, 5)]
    return 1 if failed or bad_exit or stopped else 0


if __name__ == "__main__":
    sys.exit(main())

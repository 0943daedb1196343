#!/usr/bin/env python3
"""Benchmark: what a Foxglove client watching everything costs a launched graph.

docs/FOXGLOVE.md describes the bridge. Runs ``qrsim launch SCENARIO --duration D`` three ways: without the
bridge, with the bridge and no client, and with the bridge and one client (test/foxglove_client, installed
with ``npm ci`` in a scratch directory) subscribed to every channel; prints each run's real-time factor
(the launcher's summary), the bridge's CPU seconds and the messages the client took. Target: with the
client, the real-time factor within 10 % of the run without one.

Usage: ./qrsim exec -- python scripts/bench_foxglove.py [--scenario search_rescue] [--num-vehicles 3]
       [--duration 30] [--real-time-factor 1]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENT_DIR = ROOT / "test" / "foxglove_client"
SERVER_LINE = re.compile(r"Foxglove WebSocket server on ws://127\.0\.0\.1:(\d+)")
STARTED = re.compile(r"started foxglove_bridge \(pid (\d+)\)")
RTF = re.compile(r"real-time factor ([0-9.]+) while the clock ran")


def install_client(scratch: Path) -> Path:
    for name in ("package.json", "package-lock.json", "client.mjs"):
        shutil.copy(CLIENT_DIR / name, scratch / name)
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=scratch, check=True,
                   capture_output=True)
    return scratch / "client.mjs"


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(args: argparse.Namespace, foxglove: bool, client: Path | None, scratch: Path) -> dict[str, object]:
    argv = [sys.executable, "-m", "qrsim_ros.cli.main", "launch", args.scenario, "--duration",
            str(args.duration), "--real-time-factor", str(args.real_time_factor), "--domain-id", "auto"]
    if args.num_vehicles:
        argv += ["--num-vehicles", str(args.num_vehicles)]
    if foxglove:
        argv += ["--foxglove", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    found: dict[str, int] = {}
    bridge_cpu = [0.0]
    watcher: subprocess.Popen[str] | None = None

    def sample(pid: int) -> None:
        while (c := cpu_s(pid)) is not None:
            bridge_cpu[0] = c
            time.sleep(0.2)

    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if (m := STARTED.search(line)) and "pid" not in found:
            found["pid"] = int(m.group(1))
            threading.Thread(target=sample, args=(found["pid"],), daemon=True).start()
        if (m := SERVER_LINE.search(line)) and client is not None and watcher is None:
            out = (scratch / "client.jsonl").open("w")
            watcher = subprocess.Popen(["node", str(client), f"ws://127.0.0.1:{m.group(1)}", "--all",
                                        "--brief", "--timeout-ms", str(int((args.duration + 120) * 1000))],
                                       stdout=out, stderr=subprocess.DEVNULL)
    proc.wait()
    messages = 0
    if watcher is not None:
        watcher.wait(timeout=30)
        messages = sum('"logTimeNs"' in line for line in (scratch / "client.jsonl").read_text().splitlines())
    text = "".join(lines)
    rtf = RTF.search(text)
    return {"rtf": float(rtf.group(1)) if rtf else float("nan"), "bridge_cpu_s": bridge_cpu[0],
            "client_messages": messages, "status": proc.returncode}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="search_rescue")
    p.add_argument("--num-vehicles", type=int, default=3)
    p.add_argument("--duration", type=float, default=30.0)
    p.add_argument("--real-time-factor", type=float, default=1.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        client = install_client(scratch)
        print(f"{args.scenario}, {args.num_vehicles} vehicles, {args.duration:g} simulated s, "
              f"real_time_factor {args.real_time_factor:g}")
        for label, foxglove, with_client in (("no bridge", False, False), ("bridge, no client", True, False),
                                             ("bridge + client on every channel", True, True)):
            r = run(args, foxglove, client if with_client else None, scratch)
            print(f"  {label:<34} rtf {r['rtf']:.2f}  bridge CPU {r['bridge_cpu_s']:6.2f} s  "
                  f"client messages {r['client_messages']:>7}  exit {r['status']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Benchmark: the team search's launched ROS 2 graph as the team grows (the AURIS
paper's scalability table, siegemund_2011 table 6.1, redone).

For each N of ``--vehicles`` this runs ``qrsim launch team_search --num-vehicles N --duration D`` with the
autopilot flying (``auto``: whatever the scenario's autopilot is), once free-running
(``--real-time-factor 0 --no-lockstep``, ``--free-duration``: the clock does not wait for the autopilot,
whose set points may go stale; the summary's failsafe onsets and rejected commands say so, "autopilot
behind" in the table), once in lockstep (``--real-time-factor 0 --lockstep``), once free-running at real
time (``--real-time-factor 1 --no-lockstep``: whether the graph and the autopilot keep up, the summary's
commands beside the real-time factor), and (unless
``--no-messages``) once more in lockstep with ``--record`` for the message count. Every run is a child
process in a free ROS domain (``qrsim_ros.dds.free_domain``) and reports:

- the real-time factor: simulated seconds over wall seconds while the clock ran (the launcher's summary;
  vehicle_dynamics's own figure when a fast run ended before the launcher heard /clock);
- CPU seconds (user + system, from /proc, between the samples at "started: tick 0" and at "duration_s
  reached", not reported when those are less than 1 s apart) and peak RSS (VmHWM) and peak PSS
  (smaps_rollup; RSS counts the shared libraries in every process) of every node process, sampled every
  0.5 s and at those two lines; the bottleneck is the node (not the launcher or the recorder) with the
  highest CPU share;
- messages per simulated second over all topics: the recorded run's bag (the recorder subscribes to every
  topic) over its simulated seconds, and per wall second (x that run's real-time factor; the recorder
  takes CPU too).

Every process it starts is stopped on the way out, also on Ctrl-C or SIGTERM: the launcher gets SIGINT
(it stops its nodes in order), then SIGKILL after ``--stop-timeout``; any node process seen during the run
that is still alive after that gets SIGKILL (the nodes also die with the launcher: pdeathsig). A run that
takes longer than ``--wall-limit`` wall seconds is interrupted the same way (its summary still counts).

Prints a Markdown table per run (nodes) and one summary table at the end.

Usage: ./qrsim exec -- python scripts/bench_team_graph.py [--vehicles 1 5 10 20 50] [--duration 20]
         [--modes free lockstep] [--no-messages] [--messages-duration 10] [--wall-limit 1800]
         [--free-duration 100]  (default 5 x --duration: free-running runs are fast)
       ./qrsim exec -- python scripts/bench_team_graph.py --quick   (1 and 5 vehicles, 5 simulated s, 25 free)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

CLK_TCK = os.sysconf("SC_CLK_TCK")
#: Seconds between samples of /proc (light: this script shares the machine with the graph it measures).
SAMPLE_S = 0.5
#: After tick 0, every this many samples a full scan of /proc looks for new processes (the others read
#: only the known ones' files).
FULL_SCAN_EVERY = 10
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024

#: The launch's modes: name -> the launcher's arguments.
MODES = {
    "free": ("--real-time-factor", "0", "--no-lockstep"),
    "lockstep": ("--real-time-factor", "0", "--lockstep"),
    # the clock at real time, free-running: whether the graph and the autopilot keep up with it
    "realtime": ("--real-time-factor", "1", "--no-lockstep"),
}


class StopRequestedError(Exception):
    """Ctrl-C or SIGTERM to this script."""


@dataclass
class Proc:
    """One node process seen during a run."""

    name: str
    start_ticks: int  # /proc/PID/stat starttime: tells a reused pid apart
    cpu_s: float = 0.0
    cpu_at_tick0_s: float | None = None
    cpu_at_end_s: float | None = None  # when the clock stopped (duration_s reached)
    peak_rss_mb: float = 0.0
    peak_pss_mb: float = 0.0  # proportional set size: shared pages split between their users


@dataclass
class RunResult:
    n: int
    mode: str
    rtf: float | None = None
    sim_s: float | None = None
    wall_s: float | None = None
    messages: int | None = None
    procs: dict[int, Proc] = field(default_factory=dict)
    returncode: int | None = None
    note: str = ""
    commands: str = ""  # the summary's "Commands:" (failsafe onsets, stale set points rejected)
    window_s: float | None = None  # wall seconds between the tick-0 and the end CPU samples
    interrupted: bool = False  # Ctrl-C or SIGTERM to this script during the run

    def by_node(self) -> dict[str, tuple[float, float, float]]:
        """CPU seconds while the clock ran, peak RSS and peak PSS [MB] by node name (processes of one name
        summed)."""
        out: dict[str, tuple[float, float, float]] = {}
        for p in self.procs.values():
            end = p.cpu_at_end_s if p.cpu_at_end_s is not None else p.cpu_s
            cpu = end - (p.cpu_at_tick0_s if p.cpu_at_tick0_s is not None else 0.0)
            c, m, q = out.get(p.name, (0.0, 0.0, 0.0))
            out[p.name] = (c + cpu, m + p.peak_rss_mb, q + p.peak_pss_mb)
        return out


def read_stat(pid: int) -> tuple[int, float, int] | None:
    """(parent pid, CPU seconds, start ticks) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK, int(fields[19])


def proc_mb(pid: int, file: str, key: str) -> float:
    """The value in kB of line ``key`` (e.g. "VmHWM:") of /proc/PID/``file``, in MB; 0 if the process is gone,
    the file is unreadable or has no such line."""
    try:
        with open(f"/proc/{pid}/{file}") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_mb(pid: int) -> float:
    """VmHWM (the process's peak resident set so far) [MB]; 0 if it is gone."""
    return proc_mb(pid, "status", "VmHWM:")


def pss_mb(pid: int) -> float:
    """Proportional set size now (/proc/PID/smaps_rollup) [MB]; 0 if it is gone or unreadable."""
    return proc_mb(pid, "smaps_rollup", "Pss:")


def node_name(pid: int, root: int) -> str | None:
    """The node name from a process's ``__node:=`` argument, "launcher" for ``root``, or None when the
    process has not exec'd its node yet."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().replace(b"\0", b" ").split()  # (a fork server child: one string)
    except OSError:
        return None
    if pid == root:
        return "launcher"
    node = next((a.decode().split("__node:=", 1)[1] for a in argv if a.startswith(b"__node:=")), None)
    if node:
        return node
    if b"single_process" in b" ".join(argv):
        return "single_process"
    return None


def known(pids: dict[int, Proc]) -> dict[int, tuple[float, int]]:
    """The processes of ``pids`` still alive (the same ones: same start time): pid -> (CPU seconds, start
    ticks). Cheap: no scan of /proc."""
    out = {}
    for pid, p in pids.items():
        st = read_stat(pid)
        if st is not None and st[2] == p.start_ticks:
            out[pid] = (st[1], st[2])
    return out


def descendants(root: int) -> dict[int, tuple[float, int]]:
    """Every live descendant of ``root`` (and ``root``): pid -> (CPU seconds, start ticks). Reads the
    stat of every process on the machine: done until tick 0 and every ``FULL_SCAN_EVERY`` samples."""
    parents: dict[int, int] = {}
    info: dict[int, tuple[float, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = read_stat(int(entry))
            if st is not None:
                parents[int(entry)] = st[0]
                info[int(entry)] = (st[1], st[2])
    out = {}
    for pid in info:
        p = pid
        while p in parents and p != root:
            p = parents[p]
        if p == root:
            out[pid] = info[pid]
    return out


def stop(proc: subprocess.Popen, seen: dict[int, Proc], timeout_s: float) -> None:
    """SIGINT to the launcher (it stops its nodes), SIGKILL after ``timeout_s``; then SIGKILL to every
    node process seen that is still alive (the same process: same start time). Another Ctrl-C meanwhile
    is ignored (it would leave the nodes behind)."""
    handlers = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        _stop(proc, seen, timeout_s)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def _stop(proc: subprocess.Popen, seen: dict[int, Proc], timeout_s: float) -> None:
    from qrsim_ros.supervision import process_group

    process_group.stop([proc], ((signal.SIGINT, timeout_s), (signal.SIGKILL, 30.0)))
    proc.wait()
    for pid, p in seen.items():
        st = read_stat(pid)
        if st is not None and st[2] == p.start_ticks:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def run(n: int, mode: str, duration_s: float, domain: int, record: bool, wall_limit_s: float,
        stop_timeout_s: float, echo: bool) -> RunResult:
    """One ``qrsim launch team_search``; the figures of RunResult."""
    res = RunResult(n, mode + (" + bag" if record else ""))
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), PYTHONUNBUFFERED="1")
    with tempfile.TemporaryDirectory(prefix="bench_team_graph_") as tmp:
        cmd = [sys.executable, "-m", "qrsim_ros.cli.main", "launch", "team_search", "--num-vehicles", str(n),
               "--duration", f"{duration_s:g}", "--domain-id", str(domain), *MODES[mode]]
        if record:
            cmd += ["--record", os.path.join(tmp, "bag")]
        env["ROS_LOG_DIR"] = os.path.join(tmp, "ros_log")
        # A session of its own: a terminal's Ctrl-C reaches this script only, which stops the launcher
        # in order (SIGINT) instead of every node at once; SIGTERM to it if this script dies.
        from qrsim_ros.supervision import process_group

        proc = process_group.start(cmd, die_with_parent=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, env=env)
        lines: list[str] = []
        started, ended, wake = threading.Event(), threading.Event(), threading.Event()

        def read() -> None:
            for line in proc.stdout:
                lines.append(line)
                if echo:
                    sys.stdout.write("    " + line)
                if "started: tick 0" in line:
                    started.set()
                    wake.set()
                elif "duration_s=" in line and " reached: " in line:
                    ended.set()
                    wake.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        t0 = time.monotonic()
        t_tick0 = t_end = t_last = None
        samples = 0
        try:
            while proc.poll() is None:
                tick0, end = started.is_set(), ended.is_set()
                now = t_last = time.monotonic()
                if tick0 and t_tick0 is None:
                    t_tick0 = now
                if end and t_end is None:
                    t_end = now
                samples += 1
                full = not tick0 or samples % FULL_SCAN_EVERY == 0 or (end and t_end == now)
                for pid, (cpu, start) in (descendants(proc.pid) if full else known(res.procs)).items():
                    p = res.procs.get(pid)
                    if p is None or p.start_ticks != start:
                        name = node_name(pid, proc.pid)
                        if name is None:
                            continue
                        p = res.procs[pid] = Proc(name, start)
                    p.cpu_s = cpu
                    if tick0 and p.cpu_at_tick0_s is None:
                        p.cpu_at_tick0_s = cpu
                    if end and p.cpu_at_end_s is None:
                        p.cpu_at_end_s = cpu
                    p.peak_rss_mb = max(p.peak_rss_mb, peak_rss_mb(pid))
                    p.peak_pss_mb = max(p.peak_pss_mb, pss_mb(pid))
                if time.monotonic() - t0 > wall_limit_s:
                    res.note = f"stopped after the wall limit ({wall_limit_s:g} s)"
                    proc.send_signal(signal.SIGINT)
                    t0 = float("inf")  # once
                wake.wait(SAMPLE_S)  # and at once when tick 0 or the end is logged
                wake.clear()
        except (KeyboardInterrupt, StopRequestedError):
            res.interrupted = True
            res.note = "interrupted"
        finally:
            stop(proc, res.procs, stop_timeout_s)
            reader.join(5)
        res.returncode = proc.returncode
        if t_tick0 is not None:  # an interrupted run: up to the last sample
            res.window_s = (t_end if t_end is not None else t_last) - t_tick0
    summary = next((ln for ln in lines if ln.startswith("Summary: ")), "")
    m = re.search(r"It simulated ([\d.]+) s in ([\d.]+) s of wall time \(real-time factor ([\d.]+)", summary)
    if m:
        res.sim_s, res.wall_s, res.rtf = float(m.group(1)), float(m.group(2)), float(m.group(3))
    else:  # a fast run can end before the launcher hears /clock: the clock owner's own figure
        d = next((re.search(r"duration_s=([\d.]+) reached: \d+ steps in ([\d.]+) s of wall time", ln)
                  for ln in lines if "duration_s=" in ln and " reached: " in ln), None)
        if d and float(d.group(2)) > 0:
            res.sim_s, res.wall_s = float(d.group(1)), float(d.group(2))
            res.rtf = res.sim_s / res.wall_s
            res.note = "real-time factor from vehicle_dynamics (no /clock reached the launcher)"
    c = re.search(r"Commands: ([^.]*)\.", summary)
    res.commands = c.group(1) if c else ""
    b = re.search(r"\(([\d,]+) messages on \d+ topics", summary)
    if b:
        res.messages = int(b.group(1).replace(",", ""))
    if res.rtf is None or proc.returncode not in (0, None):
        res.note = (res.note + "; " if res.note else "") + f"exit status {proc.returncode}"
        sys.stderr.write("".join(lines[-30:]))
    return res


#: Below this many wall seconds between the tick-0 and end samples, the CPU figures are not reported.
MIN_WINDOW_S = 1.0


def cpu_valid(res: RunResult) -> bool:
    return res.window_s is not None and res.window_s >= MIN_WINDOW_S


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "n/a" if x is None else format(x, spec)


def node_table(res: RunResult) -> str:
    nodes = res.by_node()
    total = sum(v[0] for v in nodes.values()) or 1.0
    rows = [f"\nN = {res.n}, {res.mode}: real-time factor {fmt(res.rtf)} ({fmt(res.sim_s)} simulated s in "
            f"{fmt(res.wall_s, '.1f')} wall s){'; ' + res.note if res.note else ''}"
            f"{f'; {res.messages:,} messages in the bag' if res.messages is not None else ''}"
            f"{'; commands: ' + res.commands if res.commands else ''}"
            f"; load average {os.getloadavg()[0]:.2f}"
            f"{'' if cpu_valid(res) else f'; CPU window {fmt(res.window_s)} s: too short, no CPU figures'}\n",
            "| node | CPU s while the clock ran | CPU share | CPU s per simulated s | peak RSS MB "
            "| peak PSS MB |",
            "|---|---:|---:|---:|---:|---:|"]
    for name, (c, m, q) in sorted(nodes.items(), key=lambda kv: -kv[1][0]):
        if not cpu_valid(res):
            rows.append(f"| {name} | n/a | n/a | n/a | {m:.0f} | {q:.0f} |")
            continue
        per_sim = c / res.sim_s if res.sim_s else None
        rows.append(f"| {name} | {c:.2f} | {100 * c / total:.0f} % | {fmt(per_sim)} | {m:.0f} | {q:.0f} |")
    return "\n".join(rows)


def bottleneck(res: RunResult) -> str:
    if not cpu_valid(res):
        return "n/a"
    nodes = {k: v for k, v in res.by_node().items() if k not in ("launcher", "recorder")}
    total = sum(v[0] for v in nodes.values())
    if not nodes or total <= 0:
        return "n/a"
    name, (c, _, _) = max(nodes.items(), key=lambda kv: kv[1][0])
    return f"{name} ({100 * c / total:.0f} %)"


def summary_table(results: dict[int, dict[str, RunResult]]) -> str:
    rows = ["| N | RTF free | RTF lockstep | RTF real time (commands) | CPU s / sim s (free) "
            "| CPU s / sim s (lockstep) | CPU use, % of machine (lockstep) "
            "| memory MB (peak PSS, sum) | node processes | msgs / sim s | msgs / wall s (lockstep + bag) "
            "| bottleneck (free) | bottleneck (lockstep) |",
            "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for n, runs in results.items():
        free, lock, bag, real = runs.get("free"), runs.get("lockstep"), runs.get("bag"), runs.get("realtime")
        realtime = f"{fmt(real.rtf)} ({real.commands or 'n/a'})" if real else "n/a"

        def cpu_per_sim(r: RunResult | None) -> str:
            if r is None or not r.sim_s or not cpu_valid(r):
                return "n/a"
            return f"{sum(v[0] for v in r.by_node().values()) / r.sim_s:.2f}"

        def machine_pct(r: RunResult | None) -> str:
            """The graph's average CPU use in % of the machine while the clock ran (the paper's "Avg. CPU
            usage", which counted the whole machine)."""
            if r is None or not r.sim_s or not r.rtf or not cpu_valid(r):
                return "n/a"
            cpu = sum(v[0] for v in r.by_node().values())
            return f"{100 * cpu / (r.sim_s / r.rtf) / (os.cpu_count() or 1):.0f} %"

        pss = max((sum(v[2] for v in r.by_node().values()) for r in (free, lock) if r), default=None)
        procs = max((len({p.name for p in r.procs.values()} - {"launcher"}) for r in (free, lock) if r),
                    default=None)
        per_sim = bag.messages / bag.sim_s if bag and bag.messages is not None and bag.sim_s else None
        per_wall = per_sim * bag.rtf if per_sim is not None and bag.rtf else None
        behind = free and ("failsafe onsets" in free.commands or "rejected" in free.commands)
        stale = " (autopilot behind)" if behind else ""
        rows.append(f"| {n} | {fmt(free.rtf if free else None)}{stale} | {fmt(lock.rtf if lock else None)} "
                    f"| {realtime} | {cpu_per_sim(free)} | {cpu_per_sim(lock)} | {machine_pct(lock)} "
                    f"| {fmt(pss, '.0f')} "
                    f"| {procs or 'n/a'} "
                    f"| {fmt(per_sim, ',.0f')} | {fmt(per_wall, ',.0f')} "
                    f"| {bottleneck(free) if free else 'n/a'} | {bottleneck(lock) if lock else 'n/a'} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vehicles", type=int, nargs="+", default=[1, 5, 10, 20, 50], help="team sizes N")
    ap.add_argument("--duration", type=float, default=20.0, help="simulated seconds per run")
    ap.add_argument("--modes", nargs="+", choices=tuple(MODES), default=list(MODES))
    ap.add_argument("--free-duration", type=float, default=None,
                    help="simulated seconds of the free-running runs (default 5 x --duration: they run fast, "
                         "and under 1 wall s there are no CPU figures)")
    ap.add_argument("--no-messages", action="store_true", help="skip the recorded run (no message counts)")
    ap.add_argument("--messages-duration", type=float, default=10.0,
                    help="simulated seconds of the recorded run (at most --duration)")
    ap.add_argument("--quick", action="store_true", help="1 and 5 vehicles, 5 simulated seconds")
    ap.add_argument("--wall-limit", type=float, default=1800.0,
                    help="wall seconds after which a run is interrupted (its figures still count)")
    ap.add_argument("--stop-timeout", type=float, default=60.0,
                    help="wall seconds the launcher gets to stop its nodes before SIGKILL")
    ap.add_argument("--domain", type=int, default=None,
                    help="ROS_DOMAIN_ID of the runs (default: a free one, qrsim_ros.dds.free_domain)")
    ap.add_argument("--echo", action="store_true", help="print the launcher's output")
    args = ap.parse_args()
    if args.quick:
        args.vehicles, args.duration = [1, 5], 5.0

    def on_term(_signum: int, _frame: object) -> None:
        raise StopRequestedError

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)  # also when started with SIGINT ignored (a background job)
    if args.domain is None:
        from qrsim_ros.dds import free_domain

        args.domain = free_domain()
    la = os.getloadavg()
    print(f"team_search graph benchmark: N = {args.vehicles}, {args.duration:g} simulated s per run (free: "
          f"{args.free_duration if args.free_duration is not None else 5 * args.duration:g}), modes "
          f"{args.modes}, domain {args.domain}; {os.cpu_count()} CPUs; load average before "
          f"{la[0]:.2f} {la[1]:.2f} {la[2]:.2f}", flush=True)
    results: dict[int, dict[str, RunResult]] = {}
    try:
        for n in args.vehicles:
            results[n] = {}
            free_s = args.free_duration if args.free_duration is not None else 5 * args.duration
            plan = [(m, m, free_s if m == "free" else args.duration, False) for m in args.modes]
            if not args.no_messages:
                plan.append(("bag", "lockstep", min(args.duration, args.messages_duration), True))
            for key, mode, duration, record in plan:
                r = run(n, mode, duration, args.domain, record, args.wall_limit, args.stop_timeout, args.echo)
                results[n][key] = r
                print(node_table(r), flush=True)
                if r.interrupted:
                    raise StopRequestedError
    except (KeyboardInterrupt, StopRequestedError):
        print("\ninterrupted: every process started was stopped; the figures so far:", flush=True)
    la = os.getloadavg()
    print(f"\n## team_search graph, {args.duration:g} simulated s per run (load average after {la[0]:.2f} "
          f"{la[1]:.2f} {la[2]:.2f}; {os.cpu_count()} CPUs)\n")
    print(summary_table(results))
    t = os.times()
    print(f"\n(this script's own CPU: {t.user + t.system:.1f} s, sampling /proc)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

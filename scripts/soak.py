#!/usr/bin/env python3
"""Chaos soak: a launched search-and-rescue graph under a seeded schedule of faults, with figures.

Starts ``qrsim launch search_rescue --num-vehicles 10 --record BAG`` (a free DDS domain of its own; the
bag on a small tmpfs when ``mount -t tmpfs`` works here) and, for ``--minutes``, injects faults drawn
from a schedule that depends only on ``--seed`` (kinds, order, targets, durations; not the OS timing):

- ``kill9`` / ``sigterm``: SIGKILL a random simulator node / SIGTERM a random node;
- ``flood``: ~10 kHz of stale-stamped velocity set points on one vehicle's cmd/velocity for a few s;
- ``malformed``: NaN or wrong-frame velocity set points or attitude commands;
- ``foreign_run`` / ``forged_tick``: a /sim/vehicle_status of another run_id / with tick 50,000,000;
- ``stale_stamp`` / ``future_stamp``: set points stamped 100 s in the past / 1e6 s in the future;
- ``autopilot_stop``: SIGSTOP the example_autopilot for a few s (its vehicles must enter the failsafe);
- ``disk_full``: fill the tmpfs under the bag directory (the soak then ends that run and starts anew).

After each fault it checks the invariants: no simulator node died unless it was the one killed; the
fault shows on /diagnostics (a counter whose key names it rising), in /sim/vehicle_status (its counter
arrays, its ``failsafe`` field) or in the launcher's output, summary and exit status; the exit status
says what happened (0 only for a clean run); the bag reads with the rosbags reader; no node process
outlives its launcher and no leftover files (/tmp/qrsim_launch_*, /dev/shm files nobody maps) remain.
A run that a fault ended (or that ended by itself) is started again. At the end a table: faults per
kind, detected, survived, ticks missing from the bag and from the soak's own subscription.

Detection is by name lookup at run time (``DETECT_KEYWORDS``, the launcher's output patterns), so a
feature that is not there yet shows as "not detected" rather than an error.

Usage (root for the tmpfs; under the shared lock with other ROS tests):
    flock /tmp/qrsim_ros_tests.lock ./qrsim exec -- python scripts/soak.py --minutes 10 --seed 1 \
        --out soak_result   (writes soak_result.json and soak_result.md)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qrsim_ros.dds import free_domain
from qrsim_ros.supervision import process_group
from qrsim_ros.supervision.probe import ProbeNode

# --- the schedule (pure) ----------------------------------------------------------------------------------

#: Every fault kind, in table order.
KINDS = ("kill9", "sigterm", "flood", "malformed", "foreign_run", "forged_tick", "stale_stamp",
         "future_stamp", "autopilot_stop", "disk_full")
#: Kinds whose run is expected to end (the launcher must stop everything and say why, exit != 0).
ENDING_KINDS = frozenset({"kill9", "sigterm"})
#: Kinds after which the soak itself ends the run (the bag cannot go on) and starts a new one.
RESTART_AFTER = frozenset({"disk_full"})
#: Simulator nodes of search_rescue (kill -9 targets).
SIMULATOR_NODES = ("vehicle_dynamics", "wind_field", "imu", "gps", "altimeter", "camera_detector",
                   "referee", "flight_controller")
#: SIGTERM targets: any node of the graph.
ALL_NODES = (*SIMULATOR_NODES, "example_autopilot", "recorder")
#: Variants of ``malformed``.
MALFORMED_VARIANTS = ("nan_velocity", "wrong_frame_velocity", "nan_attitude", "wrong_frame_attitude")
#: The forged tick of ``forged_tick`` (one such status once ended an episode "time_limit").
FORGED_TICK = 50_000_000


@dataclass(frozen=True)
class Fault:
    """One scheduled fault. ``at_s``: wall seconds after the soak's start (not before: a restart may
    delay it); ``target``: a node name or a vehicle namespace; ``duration_s``: wall seconds (flood,
    autopilot_stop); ``variant``: malformed's message kind."""

    index: int
    kind: str
    at_s: float
    target: str = ""
    duration_s: float = 0.0
    variant: str = ""


def make_schedule(seed: int, minutes: float, num_vehicles: int = 10, kinds: Sequence[str] = KINDS,
                  mean_gap_s: float = 20.0) -> list[Fault]:
    """The faults of a soak of ``minutes``, one every ``mean_gap_s`` +-50 % wall seconds, drawn from
    ``seed`` alone. Kinds come in shuffled rounds (each round holds every kind once), so a long enough
    soak injects every kind; the first fault comes after one gap."""
    if not kinds:
        raise ValueError("make_schedule: no fault kinds")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"make_schedule: unknown fault kind(s) {unknown}; known: {', '.join(KINDS)}")
    if not (mean_gap_s > 0 and num_vehicles >= 1 and minutes >= 0):
        raise ValueError(f"make_schedule: need mean_gap_s > 0, num_vehicles >= 1, minutes >= 0 "
                         f"(got {mean_gap_s}, {num_vehicles}, {minutes})")
    rng = random.Random(seed)
    end_s = minutes * 60.0
    out: list[Fault] = []
    t = 0.0
    pool: list[str] = []
    while True:
        t += mean_gap_s * rng.uniform(0.5, 1.5)
        if t > end_s:
            return out
        if not pool:
            pool = list(kinds)
            rng.shuffle(pool)
        kind = pool.pop()
        vehicle = f"uav{rng.randrange(num_vehicles) + 1}"
        target, duration_s, variant = "", 0.0, ""
        if kind == "kill9":
            target = rng.choice(SIMULATOR_NODES)
        elif kind == "sigterm":
            target = rng.choice(ALL_NODES)
        elif kind == "flood":
            target, duration_s = vehicle, round(rng.uniform(2.0, 4.0), 2)
        elif kind == "malformed":
            target, variant = vehicle, rng.choice(MALFORMED_VARIANTS)
        elif kind in ("stale_stamp", "future_stamp"):
            target = vehicle
        elif kind == "autopilot_stop":
            target, duration_s = "example_autopilot", round(rng.uniform(3.0, 6.0), 2)
        out.append(Fault(len(out), kind, round(t, 2), target, duration_s, variant))


# --- results and the table (pure) ---------------------------------------------------------------------------

@dataclass
class FaultResult:
    """What happened to one fault: the checks' outcome and figures."""

    fault: Fault
    injected: bool = False
    detected: bool = False
    survived: bool = False
    evidence: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    bag_ticks_lost: int = 0
    probe_ticks_missed: int = 0
    detail: dict[str, Any] = field(default_factory=dict)


def tabulate(results: Iterable[FaultResult]) -> dict[str, dict[str, int]]:
    """Per kind (and ``total``): injected, detected, survived, bag ticks lost, probe ticks missed,
    invariant violations."""
    rows: dict[str, dict[str, int]] = {}
    cols = ("injected", "detected", "survived", "bag_ticks_lost", "probe_ticks_missed", "violations")
    for r in results:
        for key in (r.fault.kind, "total"):
            row = rows.setdefault(key, dict.fromkeys(cols, 0))
            row["injected"] += int(r.injected)
            row["detected"] += int(r.injected and r.detected)
            row["survived"] += int(r.injected and r.survived)
            row["bag_ticks_lost"] += r.bag_ticks_lost
            row["probe_ticks_missed"] += r.probe_ticks_missed
            row["violations"] += len(r.violations)
    ordered = {k: rows[k] for k in KINDS if k in rows}
    if "total" in rows:
        ordered["total"] = rows["total"]
    return ordered


def markdown_table(rows: dict[str, dict[str, int]], wall_s: float, runs: int) -> str:
    """The table as Markdown (also what is printed)."""
    head = ("| kind | injected | detected | survived | bag ticks lost | probe ticks missed | violations |\n"
            "|---|---:|---:|---:|---:|---:|---:|\n")
    body = "".join(f"| {'**total**' if k == 'total' else k} | {r['injected']} | {r['detected']} | "
                   f"{r['survived']} | {r['bag_ticks_lost']} | {r['probe_ticks_missed']} | "
                   f"{r['violations']} |\n" for k, r in rows.items())
    return head + body + f"\nWall time {wall_s:.0f} s, {runs} launched run(s).\n"


# --- small helpers ------------------------------------------------------------------------------------------

def read_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            # (a fork server's child: one string, the arguments separated by spaces)
            return f.read().decode(errors="replace").replace("\0", " ").split()
    except OSError:
        return []


def process_table() -> dict[int, int]:
    """pid -> parent pid of every live process."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] != "Z":
                out[int(entry)] = int(fields[1])
    return out


def node_name_of(argv: Sequence[str]) -> str | None:
    return next((a.split("__node:=", 1)[1] for a in argv if a.startswith("__node:=")), None)


def mapped_shm_files() -> set[str]:
    """/dev/shm paths some live process maps or holds open (Fast DDS segments and their locks)."""
    from qrsim_ros.cli.leftovers import shm_in_use

    return {f"/dev/shm/{name}" for name in shm_in_use("/dev/shm")}


def shm_files() -> set[str]:
    with contextlib.suppress(OSError):
        return {f"/dev/shm/{n}" for n in os.listdir("/dev/shm")}
    return set()


def try_mount_tmpfs(path: Path, size_mb: int) -> str | None:
    """Mount a tmpfs of ``size_mb`` at ``path``: None on success, else why not."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if r.returncode == 0 else (r.stderr.strip() or f"mount exit status {r.returncode}")


def unmount(path: Path) -> None:
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        if subprocess.run(["umount", str(path)], capture_output=True, timeout=20).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=20)


# --- the probe: the soak's own rclpy node in the graph's domain ---------------------------------------------

#: Keywords of /diagnostics counter keys (and /sim/vehicle_status counter fields) that show a fault.
DETECT_KEYWORDS: dict[str, tuple[str, ...]] = {
    "flood": ("stale", "stamp", "rejected", "dropped", "flood", "expired"),
    "malformed": ("rejected", "non_finite", "nan", "frame", "invalid"),
    "foreign_run": ("foreign", "run_id", "other_run", "rejected"),
    "forged_tick": ("forged", "jump", "rejected", "out_of_order", "non_consecutive"),
    "stale_stamp": ("stale", "stamp", "rejected", "expired", "old"),
    "future_stamp": ("future", "stamp", "rejected", "ahead"),
    "autopilot_stop": ("failsafe", "timeout", "expired"),
    "disk_full": ("disk", "space", "full", "write", "dropped", "error"),
}
#: Wall seconds to wait for the recorder to report a full disk (it writes in batches).
DISK_FULL_WAIT_S = 15.0
#: Launcher output (lines after the injection) that shows a fault.
OUTPUT_PATTERNS: dict[str, str] = {
    "disk_full": r"no space|free space|disk (is )?full|ENOSPC|errno 28",
    "foreign_run": r"foreign|another run|other run|run_id",
    "forged_tick": r"tick 50000000|forged|tick .*(rejected|jump)",
    "autopilot_stop": r"failsafe",
}


class Probe:
    """Subscribes to /diagnostics, /sim/vehicle_status and /referee/status of one domain (spun in a thread)
    and publishes the injected messages."""

    def __init__(self, domain: int) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from qrsim_ros.msg import TaskStatus, VehicleStatus
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        self._probe = ProbeNode(f"qrsim_soak_{os.getpid()}", domain)
        self.node = self._probe.node
        self.lock = threading.Lock()
        #: (status name, key) -> latest value (strings, as published)
        self.diag: dict[tuple[str, str], str] = {}
        self.status: Any = None  # latest own-run VehicleStatus
        self.task: Any = None
        self.failsafe_seen: set[str] = set()  # vehicle names with a non-empty failsafe since reset_marks
        self.max_task_step = 0
        self.ticks_seen: dict[int, set[int]] = collections.defaultdict(set)  # episode -> ticks
        self.run_id = ""
        self._status_fields = list(VehicleStatus.get_fields_and_field_types().items())
        self.has_run_id = any(n == "run_id" for n, _ in self._status_fields)
        self.has_failsafe = any(n == "failsafe" for n, _ in self._status_fields)
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, reliable)
        self.node.create_subscription(VehicleStatus, "/sim/vehicle_status", self._on_status, reliable)
        self.node.create_subscription(TaskStatus, "/referee/status", self._on_task, latched)
        self._probe.spin_in_thread("soak-probe")

    def _on_diag(self, msg: Any) -> None:
        with self.lock:
            for st in msg.status:
                for kv in st.values:
                    self.diag[(st.name, kv.key)] = kv.value

    def _on_status(self, msg: Any) -> None:
        with self.lock:
            rid = getattr(msg, "run_id", "")
            if self.status is not None and self.has_run_id and rid != self.run_id:
                return  # another run's (or an injected foreign) status: not our ground truth
            if msg.tick >= FORGED_TICK:
                return  # our own forgery
            if self.status is None:
                self.run_id = rid
            self.status = msg
            self.ticks_seen[msg.episode].add(msg.tick)
            # the status counter arrays, per vehicle, as pseudo-diagnostics
            for name, typ in self._status_fields:
                if typ.startswith("sequence<uint") or typ.startswith("sequence<int"):
                    for vname, value in zip(msg.names, getattr(msg, name), strict=False):
                        self.diag[(f"/sim/vehicle_status/{vname}", name)] = str(value)
            if self.has_failsafe:
                for vname, fs in zip(msg.names, msg.failsafe, strict=False):
                    if fs:
                        self.failsafe_seen.add(vname)

    def _on_task(self, msg: Any) -> None:
        with self.lock:
            self.task = msg
            self.max_task_step = max(self.max_task_step, int(msg.step))

    # snapshots
    def counters(self) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        with self.lock:
            for k, v in self.diag.items():
                with contextlib.suppress(ValueError):
                    out[k] = float(v)
        return out

    def position(self) -> tuple[int, int] | None:
        """(episode, tick) of the latest own status."""
        with self.lock:
            return None if self.status is None else (int(self.status.episode), int(self.status.tick))

    def sim_time_s(self) -> float:
        with self.lock:
            st = self.status
        return 0.0 if st is None else st.header.stamp.sec + st.header.stamp.nanosec * 1e-9

    def wait_for_status(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.position() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.position() is not None

    # publishing
    def publisher(self, msg_type: Any, topic: str, qos: Any, match_timeout_s: float = 5.0) -> Any:
        """A publisher that has matched a subscriber (or waited ``match_timeout_s`` for one)."""
        pub = self.node.create_publisher(msg_type, topic, qos)
        deadline = time.monotonic() + match_timeout_s
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        return pub

    def drop(self, pub: Any) -> None:
        with contextlib.suppress(Exception):
            self.node.destroy_publisher(pub)

    def close(self) -> None:
        self._probe.close()


def rising(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float],
           keywords: Sequence[str], vehicle: str = "") -> list[str]:
    """Counters whose key contains a keyword and that rose from ``before`` (absent: 0) to ``after``.
    With ``vehicle``, per-vehicle counters (``/sim/vehicle_status/uavN``) of other vehicles are left out:
    a fault aimed at one vehicle must show on that one."""
    out = []
    for (name, key), v in after.items():
        if vehicle and name.startswith("/sim/vehicle_status/") and name.rsplit("/", 1)[1] != vehicle:
            continue
        if any(w in key.lower() for w in keywords) and v > before.get((name, key), 0.0):
            out.append(f"{name}:{key} {before.get((name, key), 0.0):g}->{v:g}")
    return out


def missing_in(ticks: set[int], lo: int, hi: int) -> int:
    """Ticks of [lo, hi] not in ``ticks``."""
    return sum(1 for t in range(lo, hi + 1) if t not in ticks) if hi >= lo else 0


# --- one launched run ---------------------------------------------------------------------------------------

class Run:
    """One ``qrsim launch`` of the soak: its domain, bag, processes, output and end checks."""

    def __init__(self, index: int, workdir: Path, args: argparse.Namespace, domains: set[int],
                 launch_flags: set[str]) -> None:
        self.index = index
        self.args = args
        self.domain = free_domain(exclude=domains)
        domains.add(self.domain)
        self.fs = workdir / f"fs{index}"
        self.fs_error = try_mount_tmpfs(self.fs, args.bag_fs_mb) if args.tmpfs else "--no-tmpfs"
        self.fs_mounted = self.fs_error is None
        self.bag = self.fs / "bag"
        self.log_path = workdir / f"launch{index}.log"
        self.lines: collections.deque[tuple[float, str]] = collections.deque(maxlen=20000)
        self.started = threading.Event()
        self.started_at = math.inf  # monotonic time of tick 0
        self.shm_before = shm_files()
        self.pids: dict[str, tuple[int, list[str]]] = {}  # node name -> (pid, cmdline)
        self.expected_end: str | None = None  # why the run should end: a fault kind, 'clean'
        self.killed_node: str | None = None
        self.faults: list[FaultResult] = []
        self.end: dict[str, Any] = {}
        cmd = [sys.executable, "-m", "qrsim_ros.cli.main", "launch", "search_rescue",
               "--num-vehicles", str(args.num_vehicles), "--record", str(self.bag),
               "--real-time-factor", str(args.real_time_factor), "--seed", str(1 + index)]
        if "--domain-id" in launch_flags:
            cmd += ["--domain-id", str(self.domain)]
        cmd += args.launch_args
        env = dict(os.environ, ROS_DOMAIN_ID=str(self.domain), PYTHONUNBUFFERED="1",
                   ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        self.probe = Probe(self.domain)  # first: it sees every node's first /diagnostics
        self.cmd = cmd
        self.t0 = time.monotonic()
        self.proc = process_group.start(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log_path, "w", encoding="utf-8") as log:
            for line in self.proc.stdout:
                log.write(line)
                self.lines.append((time.monotonic(), line.rstrip()))
                if "started: tick 0" in line:
                    self.started.set()

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def output_since(self, t: float) -> list[str]:
        return [ln for (w, ln) in list(self.lines) if w >= t]

    def refresh_pids(self) -> dict[str, int]:
        """Live node processes (descendants of the launcher with a ``__node:=`` argument), by node name;
        every one seen is remembered for the orphan check."""
        table = process_table()
        live: dict[str, int] = {}
        for pid in table:
            p = pid
            while p in table and p != self.proc.pid and p > 1:
                p = table[p]
            if p != self.proc.pid or pid == self.proc.pid:
                continue
            argv = read_cmdline(pid)
            name = node_name_of(argv)
            if name:
                live[name] = pid
                self.pids[name] = (pid, argv)
        return live

    def wait_started(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.started.is_set() and self.running and time.monotonic() < deadline:
            self.started.wait(0.2)
        if self.started.is_set():
            self.started_at = time.monotonic()
            self.probe.wait_for_status(20.0)
            self.refresh_pids()
        return self.started.is_set()

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGINT the launcher (as Ctrl-C) and wait for it."""
        if self.running:
            self.proc.send_signal(signal.SIGINT)
        self.wait_exit(timeout_s)

    def wait_exit(self, timeout_s: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def finish(self, stopped_by_soak: bool) -> dict[str, Any]:
        """After the launcher ended (or was stopped): exit status, summary, orphans, leftovers, bag."""
        rc = self.wait_exit(90.0)
        if rc is None:  # the launcher hangs: a violation; end it
            self.end.setdefault("violations", []).append("the launcher did not exit within 90 s")
            self.proc.kill()
            rc = self.proc.wait()
        self._reader.join(timeout=5.0)
        wall_s = time.monotonic() - self.t0
        violations: list[str] = self.end.setdefault("violations", [])
        summary = next((ln for _, ln in reversed(self.lines) if ln.startswith("Summary: ")), "")
        died = re.findall(r"(\w+) \((?:killed by|exit status)", summary.split("Died:", 1)[1]) \
            if "Died:" in summary else []
        # exit status: != 0 after a kill or SIGTERM of a node; 0 after a clean end
        if self.expected_end in ENDING_KINDS:
            if rc == 0:
                violations.append(f"exit status 0 after {self.expected_end} of {self.killed_node}")
            if self.killed_node and self.killed_node not in summary:
                violations.append(f"the summary does not name {self.killed_node}")
            others = [d for d in died if d != self.killed_node]
            if others:
                violations.append(f"other nodes died too: {', '.join(others)}")
        elif self.expected_end in (None, "clean") and rc != 0:
            violations.append(f"exit status {rc} after a run that should have been clean")
        # orphans: no node process outlives its launcher
        time.sleep(1.0)  # the kernel delivers pdeathsig and reaps: a moment, then look
        orphans = [f"{n} (pid {pid})" for n, (pid, argv) in self.pids.items() if read_cmdline(pid) == argv]
        if orphans:
            violations.append("orphan node processes: " + ", ".join(orphans))
        tmpdirs = {m.group(1) for _, argv in self.pids.values() for a in argv
                   if (m := re.search(r"(/tmp/qrsim_launch_[^/]+)/", a))}
        left_tmp = sorted(d for d in tmpdirs if os.path.exists(d))
        if left_tmp:
            violations.append("leftover launcher directories: " + ", ".join(left_tmp))
        new_shm = shm_files() - self.shm_before
        unmapped = sorted(new_shm - mapped_shm_files()) if new_shm else []
        # Fast DDS's port mutexes (sem.fastdds_port<N>_mutex) are named semaphores it keeps on purpose
        # (shared by every participant of the port, opened only while used): counted, not a violation.
        sems = [p for p in unmapped if re.search(r"/sem\.fast\w*_port\d+_mutex$", p)]
        stale_shm = [p for p in unmapped if p not in sems]
        removed_shm = 0
        if stale_shm:
            # a killed node cannot remove its files: the next `qrsim launch` does, at its start
            # (cli.leftovers.remove_stale_shm, for files older than SHM_MIN_AGE_S whose lock nobody
            # holds). Run that same clean-up now; only what it leaves is a violation.
            from qrsim_ros.cli.leftovers import SHM_MIN_AGE_S, remove_stale_shm

            time.sleep(SHM_MIN_AGE_S)
            remove_stale_shm()
            still = [p for p in stale_shm if os.path.exists(p)]
            removed_shm, stale_shm = len(stale_shm) - len(still), still
        if stale_shm:
            violations.append(f"{len(stale_shm)} /dev/shm file(s) nobody maps: "
                              + ", ".join(Path(p).name for p in stale_shm[:4])
                              + (" ..." if len(stale_shm) > 4 else ""))
        bag = check_bag(self.bag)
        if bag["error"]:
            violations.append(f"bag: {bag['error']}")
        self.probe.close()
        self.end.update(exit_status=rc, summary=summary, died=died, wall_s=round(wall_s, 1),
                        stopped_by_soak=stopped_by_soak, expected_end=self.expected_end, orphans=orphans,
                        leftover_dirs=left_tmp, leftover_shm=len(stale_shm), new_port_mutexes=len(sems),
                        shm_removed_by_next_start=removed_shm,
                        bag=bag["describe"],
                        bag_truncated=bag["truncated"], domain=self.domain,
                        tmpfs=self.fs_mounted or self.fs_error)
        self.bag_ticks = bag["ticks"]
        self._account_data_loss()
        return self.end

    def _account_data_loss(self) -> None:
        """Per fault: ticks of its window (injection to check, or to the run's end for ending faults)
        the probe saw or the clock passed but the bag lacks, and ticks the probe itself missed."""
        seen = self.probe.ticks_seen
        last = max(((e, max(t)) for e, t in seen.items() if t), default=None)
        for r in self.faults:
            w = r.detail.get("window")
            if not w:
                continue
            (e0, t0), end = w[0], w[1] or last
            # a new episode inside the window: count up to the first one's end
            hi = max(seen.get(e0, {t0})) if end is None or end[0] != e0 else end[1]
            r.bag_ticks_lost = missing_in(self.bag_ticks.get(e0, set()), t0, hi)
            r.probe_ticks_missed = missing_in(seen.get(e0, set()), t0, hi)

    def cleanup(self) -> None:
        if self.fs_mounted:
            unmount(self.fs)
        with contextlib.suppress(OSError):
            shutil.rmtree(self.fs)


def check_bag(bag: Path) -> dict[str, Any]:
    """Read the bag with the rosbags reader: its ticks of /sim/vehicle_status by episode, or the error."""
    from qrsim_ros.bag.info import describe_bag

    out: dict[str, Any] = {"error": "", "truncated": "", "ticks": {}, "describe": describe_bag(bag)}
    if not (bag / "metadata.yaml").exists() and not any(bag.glob("*.mcap")):
        out["error"] = f"no bag was written at {bag}"
        return out
    try:
        from qrsim_ros.plots.bagdata import OpenBag  # the reader `qrsim plot` uses (falls back on bad defs)

        b = OpenBag(bag)
        ticks: dict[int, set[int]] = collections.defaultdict(set)
        n = 0
        for _topic, msg in b.messages({"/sim/vehicle_status"}):
            ticks[int(msg.episode)].add(int(msg.tick))
            n += 1
        b.close()
        out["ticks"], out["truncated"] = dict(ticks), b.truncated
        if n == 0:
            out["error"] = "no /sim/vehicle_status message in the bag"
    except Exception as exc:  # any reader error is the finding
        out["error"] = " ".join(str(exc).split())[:300]
    return out


# --- the fault injectors (one small function each) ----------------------------------------------------------

def _velocity(stamp_s: float, v: tuple[float, float, float], frame: str) -> Any:
    """A TwistStamped velocity set point [m/s] in ``frame`` stamped ``stamp_s`` (simulated s, >= 0)."""
    from geometry_msgs.msg import TwistStamped

    from qrsim_ros.ros.stamps import stamp_from_seconds

    m = TwistStamped()
    m.header.frame_id = frame
    m.header.stamp = stamp_from_seconds(max(stamp_s, 0.0))
    m.twist.linear.x, m.twist.linear.y, m.twist.linear.z = v
    return m


def inject_signal(run: Run, fault: Fault, sig: int) -> dict[str, Any]:
    pid = run.refresh_pids().get(fault.target)
    if pid is None:
        raise LookupError(f"node {fault.target} is not running")
    os.kill(pid, sig)
    return {"pid": pid, "signal": signal.Signals(sig).name}


def inject_flood(run: Run, fault: Fault) -> dict[str, Any]:
    """~10 kHz of zero-velocity set points stamped at t = 1 s (stale) for ``duration_s``."""
    from geometry_msgs.msg import TwistStamped

    from qrsim_ros.ros.qos import QOS_RELIABLE

    pub = run.probe.publisher(TwistStamped, f"/{fault.target}/cmd/velocity", QOS_RELIABLE)
    msg = _velocity(1.0, (0.0, 0.0, 0.0), "map")
    period_s = 1.0 / run.args.flood_hz
    n, t0 = 0, time.monotonic()
    end = t0 + fault.duration_s
    while (now := time.monotonic()) < end:
        pub.publish(msg)
        n += 1
        ahead = t0 + n * period_s - now
        if ahead > 0.001:
            time.sleep(ahead)
    elapsed = time.monotonic() - t0
    run.probe.drop(pub)
    return {"published": n, "rate_hz": round(n / elapsed) if elapsed > 0 else 0}


def inject_malformed(run: Run, fault: Fault) -> dict[str, Any]:
    from geometry_msgs.msg import TwistStamped
    from qrsim_ros.msg import AttitudeCommand

    from qrsim_ros.ros.qos import QOS_RELIABLE
    from qrsim_ros.ros.stamps import stamp_from_seconds

    ns, now = fault.target, run.probe.sim_time_s()
    if fault.variant.endswith("velocity"):
        nan = fault.variant.startswith("nan")
        msg = _velocity(now, (math.nan, 0.0, 0.0) if nan else (0.0, 0.0, 0.0),
                        "map" if nan else "bogus_frame")
        pub = run.probe.publisher(TwistStamped, f"/{ns}/cmd/velocity", QOS_RELIABLE)
    else:
        msg = AttitudeCommand(throttle=0.59, battery_voltage=12.0)
        msg.header.stamp = stamp_from_seconds(now)
        if fault.variant.startswith("nan"):
            msg.roll, msg.header.frame_id = math.nan, f"{ns}/base_link_frd"
        else:
            msg.header.frame_id = "bogus_frame"
        pub = run.probe.publisher(AttitudeCommand, f"/{ns}/cmd/attitude", QOS_RELIABLE)
    for _ in range(5):
        pub.publish(msg)
        time.sleep(0.02)
    run.probe.drop(pub)
    return {"published": 5, "variant": fault.variant}


def _forged_status(run: Run, tick: int | None, run_id: str | None) -> Any:
    from qrsim_ros.msg import VehicleStatus

    with run.probe.lock:
        src = run.probe.status
    if src is None:
        raise LookupError("no /sim/vehicle_status received yet to copy")
    m = VehicleStatus()
    for name in VehicleStatus.get_fields_and_field_types():
        setattr(m, name, getattr(src, name))
    m.tick = src.tick + 1 if tick is None else tick
    if run_id is not None and run.probe.has_run_id:
        m.run_id = run_id
    return m


def _wait_matched(pub: Any, timeout_s: float = 3.0) -> None:
    """Until a fresh publisher has matched a subscriber (a message published before that is lost: the
    10-min soak once sent its single forged tick into the void)."""
    deadline = time.monotonic() + timeout_s
    while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)  # the other subscribers of the same topic match within moments of the first


def _publish_status(run: Run, msg: Any, count: int) -> None:
    from qrsim_ros.msg import VehicleStatus
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    pub = run.probe.publisher(VehicleStatus, "/sim/vehicle_status",
                              QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    _wait_matched(pub)
    for _ in range(count):
        pub.publish(msg)
        time.sleep(0.02)
    run.probe.drop(pub)  # gone again: a later launcher must not see a second simulator in the domain


def inject_foreign_run(run: Run, fault: Fault) -> dict[str, Any]:
    msg = _forged_status(run, None, f"soak-foreign-{fault.index}")
    _publish_status(run, msg, 3)
    return {"run_id_field": run.probe.has_run_id, "tick": int(msg.tick)}


def inject_forged_tick(run: Run, fault: Fault) -> dict[str, Any]:
    msg = _forged_status(run, FORGED_TICK, None)
    _publish_status(run, msg, 1)
    return {"tick": FORGED_TICK}


def inject_stamp(run: Run, fault: Fault, offset_s: float) -> dict[str, Any]:
    from geometry_msgs.msg import TwistStamped

    from qrsim_ros.ros.qos import QOS_RELIABLE

    now = run.probe.sim_time_s()
    pub = run.probe.publisher(TwistStamped, f"/{fault.target}/cmd/velocity", QOS_RELIABLE)
    _wait_matched(pub)
    msg = _velocity(now + offset_s, (0.0, 0.0, 0.0), "map")
    for _ in range(10):
        pub.publish(msg)
        time.sleep(0.02)
    run.probe.drop(pub)
    return {"published": 10, "stamp_s": now + offset_s, "sim_now_s": now}


def inject_autopilot_stop(run: Run, fault: Fault) -> dict[str, Any]:
    """SIGSTOP the autopilot, watch for the failsafe while it is stopped, SIGCONT it."""
    pid = run.refresh_pids().get(fault.target)
    if pid is None:
        raise LookupError(f"{fault.target} is not running")
    with run.probe.lock:
        run.probe.failsafe_seen.clear()
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(fault.duration_s)  # the fault itself: the autopilot is silent this long
        with run.probe.lock:
            seen = sorted(run.probe.failsafe_seen)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    return {"pid": pid, "failsafe_vehicles": seen, "failsafe_field": run.probe.has_failsafe}


def inject_disk_full(run: Run, fault: Fault) -> dict[str, Any]:
    """Fill the bag's filesystem with a filler file until ENOSPC."""
    if not run.fs_mounted:
        raise LookupError(f"no tmpfs under the bag ({run.fs_error}): not filling the real disk")
    filler = run.fs / "filler"
    chunk = b"\0" * (1 << 20)
    written = 0
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
                written += len(chunk)
        except OSError:
            pass
    with contextlib.suppress(OSError), open(filler, "ab") as f:  # top up the last partial chunk
        while True:
            f.write(b"\0" * 4096)
            f.flush()
    st = os.statvfs(run.fs)
    return {"filler_mb": round(written / 1e6, 1), "free_bytes": st.f_bavail * st.f_frsize}


INJECTORS: dict[str, Callable[[Run, Fault], dict[str, Any]]] = {
    "kill9": lambda r, f: inject_signal(r, f, signal.SIGKILL),
    "sigterm": lambda r, f: inject_signal(r, f, signal.SIGTERM),
    "flood": inject_flood,
    "malformed": inject_malformed,
    "foreign_run": inject_foreign_run,
    "forged_tick": inject_forged_tick,
    "stale_stamp": lambda r, f: inject_stamp(r, f, -100.0),
    "future_stamp": lambda r, f: inject_stamp(r, f, 1e6),
    "autopilot_stop": inject_autopilot_stop,
    "disk_full": inject_disk_full,
}


# --- checks after a fault that leaves the run going ---------------------------------------------------------

def check_running_fault(run: Run, res: FaultResult, before: dict[tuple[str, str], float], t_inject: float,
                        step_before: int) -> None:
    """Detection and survival of a fault the graph should ride out: wait ``settle_s``, then every node
    still alive (the recorder may stop on a full disk), the clock advancing, the referee's step not
    jumping, and a counter, status field or output line that shows the fault."""
    kind, args = res.fault.kind, run.args
    pos0 = run.probe.position()
    time.sleep(args.settle_s)  # counters publish at most once a second: give them time
    if kind == "disk_full":  # the recorder notices at its next write: wait for a word from it, then a bit
        deadline = time.monotonic() + DISK_FULL_WAIT_S
        while time.monotonic() < deadline and not any(
                re.search(OUTPUT_PATTERNS[kind], ln, re.I) for ln in run.output_since(t_inject)):
            time.sleep(0.5)
        time.sleep(args.settle_s)
    pos1 = run.probe.position()
    after = run.probe.counters()
    vehicle = res.fault.target if res.fault.target.startswith("uav") else ""
    evidence = rising(before, after, DETECT_KEYWORDS.get(kind, ()), vehicle)
    if evidence and "published" in res.detail:  # what the counters saw of what was sent
        rises = [e.rsplit(" ", 1)[1].split("->") for e in evidence]  # "name:key a->b"
        res.detail["counted"] = max(float(b) - float(a) for a, b in rises)
    pattern = OUTPUT_PATTERNS.get(kind)
    if pattern:
        evidence += [f"output: {ln[:160]}" for ln in run.output_since(t_inject)
                     if re.search(pattern, ln, re.I)][:3]
    if kind == "autopilot_stop" and res.detail.get("failsafe_vehicles"):
        evidence.append(f"failsafe in /sim/vehicle_status: {', '.join(res.detail['failsafe_vehicles'])}")
    res.evidence, res.detected = evidence, bool(evidence)
    # survival
    live = run.refresh_pids()
    expected = set(SIMULATOR_NODES) | {"example_autopilot", "recorder"}
    allowed_missing = {"recorder"} if kind == "disk_full" else set()
    gone = sorted(expected - set(live) - allowed_missing)
    if gone:
        res.violations.append(f"nodes not running after {kind}: {', '.join(gone)}")
    if not run.running:
        res.violations.append(f"the launcher ended after {kind} (exit status {run.proc.returncode})")
    if pos0 is None or pos1 is None or pos1 == pos0:
        res.violations.append(f"the clock did not advance in the {args.settle_s:g} s after {kind}")
    with run.probe.lock:
        task = run.probe.task
        step_now = run.probe.max_task_step
    jump = step_now - step_before
    # the referee steps once per simulated second: more than the wall time allows is a jump
    allowed = (time.monotonic() - t_inject) * max(args.real_time_factor, 1.0) * 2 + 5
    if jump > allowed:
        res.violations.append(f"the referee's step jumped by {jump} (from {step_before})")
    if task is not None and task.done and kind != "disk_full":
        res.violations.append(f"the episode ended ({task.done_reason}) after {kind}")
    res.survived = not res.violations
    res.detail["window"] = (pos0 or pos1, run.probe.position()) if (pos0 or pos1) else None


def run_fault(run: Run, fault: Fault) -> FaultResult:
    """Inject one fault into a running run and check it (an ending fault is judged when the run ends)."""
    res = FaultResult(fault)
    before = run.probe.counters()
    with run.probe.lock:
        step_before = run.probe.max_task_step
    start_pos = run.probe.position()
    t_inject = time.monotonic()
    try:
        res.detail.update(INJECTORS[fault.kind](run, fault))
        res.injected = True
    except Exception as exc:  # the injector could not act (a node not there, no tmpfs): say so
        res.detail["not_injected"] = " ".join(str(exc).split())[:200]
        return res
    if fault.kind in ENDING_KINDS:
        run.expected_end, run.killed_node = fault.kind, fault.target
        res.detail["window"] = (start_pos, None) if start_pos else None
        return res
    check_running_fault(run, res, before, t_inject, step_before)
    if res.detail.get("window") and start_pos:
        res.detail["window"] = (start_pos, res.detail["window"][1])
    return res


def judge_ending(run: Run, res: FaultResult, end: dict[str, Any]) -> None:
    """A kill/SIGTERM: detected if the launcher's exit status is != 0 and its summary names the node;
    survived if the run ended as specified (no other violation at the end)."""
    name = res.fault.target
    if end.get("exit_status") not in (0, None) and name in end.get("summary", ""):
        res.detected = True
        res.evidence.append(f"exit status {end['exit_status']}; summary names {name}")
    elif name in end.get("summary", ""):
        res.evidence.append(f"summary names {name} but exit status {end.get('exit_status')}")
    res.violations += end.get("violations", [])
    res.survived = not res.violations


# --- the soak -----------------------------------------------------------------------------------------------

def launcher_flags() -> set[str]:
    """The options ``qrsim launch --help`` lists (so newer options are used when they exist)."""
    r = subprocess.run([sys.executable, "-m", "qrsim_ros.cli.main", "launch", "--help"], capture_output=True,
                       text=True, timeout=60)
    return set(re.findall(r"--[a-z][a-z0-9-]+", r.stdout))


def soak(args: argparse.Namespace) -> dict[str, Any]:
    schedule = make_schedule(args.seed, args.minutes, args.num_vehicles,
                             [k for k in args.kinds.split(",") if k], args.mean_gap_s)
    workdir = Path(tempfile.mkdtemp(prefix="qrsim_soak_"))
    flags = launcher_flags()
    print(f"soak: seed {args.seed}, {args.minutes:g} min, {len(schedule)} faults scheduled, "
          f"work dir {workdir}; "
          f"launcher options used: {', '.join(sorted(flags & {'--domain-id'})) or 'none new'}", flush=True)
    t_start = time.monotonic()
    deadline = t_start + args.minutes * 60.0
    results: list[FaultResult] = []
    runs: list[dict[str, Any]] = []
    domains: set[int] = set()
    run: Run | None = None

    def end_run(r: Run, by_soak: bool) -> None:
        if by_soak:
            r.stop()
        end = r.finish(stopped_by_soak=by_soak)
        for res in r.faults:
            if res.fault.kind in ENDING_KINDS and res.injected:
                judge_ending(r, res, end)
        runs.append({"index": r.index, **end})
        print(f"soak: run {r.index} ended: exit status {end['exit_status']} ({end['wall_s']} s; "
              f"expected end: {end['expected_end'] or 'clean'}); {end['bag']}"
              + (f"; VIOLATIONS: {'; '.join(end['violations'])}" if end["violations"] else ""), flush=True)
        print(f"soak:   {end['summary'][:400]}", flush=True)
        r.cleanup()

    def new_run() -> Run | None:
        for _attempt in range(3):
            r = Run(len(runs), workdir, args, domains, flags)
            if r.wait_started(args.start_timeout_s):
                print(f"soak: run {r.index} started (domain {r.domain}, bag {r.bag}, "
                      f"tmpfs {'yes' if r.fs_mounted else 'no: ' + str(r.fs_error)})", flush=True)
                return r
            r.expected_end = "start failure"
            print(f"soak: run {r.index} did not start within {args.start_timeout_s:g} s", flush=True)
            end_run(r, by_soak=True)
        return None

    def wait_until(t: float, restart: bool) -> None:
        """Idle until wall time ``t``, ending a run that stops by itself (episode done) and, with
        ``restart``, starting the next one (not in the last minute: it would hardly get to tick 0)."""
        nonlocal run
        while True:
            if run is not None and not run.running:
                end_run(run, by_soak=False)
                run = None
            now = time.monotonic()
            if now >= t:
                return
            if run is None and restart and t - now > 60.0:
                run = new_run()
            time.sleep(min(t - now, 1.0))

    try:
        run = new_run()
        for fault in schedule:
            if time.monotonic() > deadline:
                break
            wait_until(t_start + fault.at_s, restart=True)
            if run is None or not run.running:
                if run is not None:
                    end_run(run, by_soak=False)
                run = new_run()
                if run is None:
                    raise RuntimeError(f"the graph did not start three times in a row: see {workdir}")
            time.sleep(max(0.0, run.started_at + args.warmup_s - time.monotonic()))  # not at tick 0
            if time.monotonic() > deadline:  # a restart took the rest of the soak
                break
            print(f"soak: fault {fault.index} at {time.monotonic() - t_start:6.1f} s: {fault.kind} "
                  f"{fault.target} {fault.variant}".rstrip(), flush=True)
            res = run_fault(run, fault)
            run.faults.append(res)
            results.append(res)
            if fault.kind in ENDING_KINDS and res.injected:
                run.wait_exit(90.0)
                end_run(run, by_soak=False)
                run = None
            elif fault.kind in RESTART_AFTER and res.injected:
                run.expected_end = fault.kind
                end_run(run, by_soak=True)
                run = None
            if not (fault.kind in ENDING_KINDS and res.injected):
                state = ("not injected: " + res.detail.get("not_injected", "")) if not res.injected else (
                    f"detected={res.detected} survived={res.survived}")
                print(f"soak:   {state}; evidence: {'; '.join(res.evidence) or 'none'}"
                      + (f"; violations: {'; '.join(res.violations)}" if res.violations else ""), flush=True)
        wait_until(deadline, restart=True)  # the soak lasts --minutes even after the last fault
    finally:
        if run is not None:
            run.expected_end = run.expected_end or "clean"
            end_run(run, by_soak=True)
    wall_s = time.monotonic() - t_start
    rows = tabulate(results)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"seed": args.seed, "minutes": args.minutes, "wall_s": round(wall_s, 1), "table": rows,
            "runs": runs, "faults": [dict(asdict(r), fault=asdict(r.fault)) for r in results],
            "markdown": markdown_table(rows, wall_s, len(runs))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="soak length [wall minutes] (default 10)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the fault schedule (default 1)")
    ap.add_argument("--out", default="", help="write OUT.json and OUT.md")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated fault kinds")
    ap.add_argument("--mean-gap-s", type=float, default=20.0, help="mean wall seconds between faults")
    ap.add_argument("--num-vehicles", type=int, default=10)
    ap.add_argument("--real-time-factor", type=float, default=1.0)
    ap.add_argument("--flood-hz", type=float, default=10000.0, help="flood rate [Hz] (default 10 kHz)")
    ap.add_argument("--settle-s", type=float, default=3.0, help="wall seconds from a fault to its checks")
    ap.add_argument("--start-timeout-s", type=float, default=180.0)
    ap.add_argument("--warmup-s", type=float, default=5.0,
                    help="wall seconds from tick 0 to a run's first fault")
    ap.add_argument("--bag-fs-mb", type=int, default=256, help="size of the bag's tmpfs [MB]")
    ap.add_argument("--no-tmpfs", dest="tmpfs", action="store_false", help="bags on the work dir's disk")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (launcher logs)")
    ap.add_argument("--print-schedule", action="store_true", help="print the schedule and exit")
    ap.add_argument("launch_args", nargs="*", help="extra 'qrsim launch' arguments (after --)")
    args = ap.parse_args(argv)
    if args.print_schedule:
        for f in make_schedule(args.seed, args.minutes, args.num_vehicles,
                               [k for k in args.kinds.split(",") if k], args.mean_gap_s):
            print(json.dumps(asdict(f)))
        return 0
    result = soak(args)
    print("\n" + result["markdown"], flush=True)
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
        notes = [f"- fault {f['fault']['index']} {f['fault']['kind']} {f['fault']['target']}: "
                 + "; ".join(f["violations"]) for f in result["faults"] if f["violations"]]
        Path(args.out + ".md").write_text(
            f"# Soak: seed {args.seed}, {args.minutes:g} min\n\n{result['markdown']}\n"
            + ("## Violations\n\n" + "\n".join(notes) + "\n" if notes else ""), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

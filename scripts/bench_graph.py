#!/usr/bin/env python3
"""Benchmark: real-time factor and CPU per node of the launched ROS 2 graph (``qrsim launch``).

Each case runs ``qrsim launch`` as a child process (real nodes over real DDS, a domain of its own),
samples the CPU time of every node process from /proc while it runs, and reads the launcher's
one-paragraph summary for the real-time factor (simulated seconds per wall second while the clock ran) and
what the vehicles' controllers failed to keep up with (commands rejected as stale, failsafe onsets: a
free-running clock keeps its rate even when they fall behind).

Targets (2-core machine, separate processes, lockstep, all sensors): keep spot with one vehicle
>= 10x at real_time_factor 0; search and rescue 2C with 10 vehicles >= 1x; the scene variant
with one vehicle, a VLP-16 at 10 Hz and a 640 x 480 fisheye at 20 Hz among 200 obstacles, in real time on
one core (``--cases scene1 --cpus 0``); the sensors' message counts are printed. Scale: search and
rescue 2C with the example autopilot at 50 and 100 vehicles free-running at real time (``sr50_rt``,
``sr100_rt``: no stale set point, no failsafe onset) and 50 in lockstep (``sr50``: >= 1x). MAVLink:
whether 1, 10 and 50 vehicles of ``px4_sitl`` with the mavlink_bridge at PX4's stream rates keep real
time (75 and 100: the headroom; ``--cases mav1,mav10,mav50``; docs/MAVLINK.md).

Usage: ./qrsim exec -- python scripts/bench_graph.py [--cases keep_spot,sr3,...] [--duration 20]
         [--record]  (the same runs with a bag, to show what recording costs)
         [--cpus 0]  (every process pinned to these CPUs, ``taskset -c``)
         [--cpus 1 --sensor-cpus 0]  (the lidar and camera nodes on CPU 0, everything else on CPU 1)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    counted: tuple[str, ...] = ()  # topics whose messages are counted (a subscriber in this process)


CASES = {
    "keep_spot": Case("keep spot, 1 vehicle, lockstep, rtf 0",
                      ("keep_spot", "--no-autopilot", "--lockstep", "--real-time-factor", "0")),
    "keep_spot_single": Case("keep spot, 1 vehicle, lockstep, rtf 0, --single-process",
                             ("keep_spot", "--no-autopilot", "--lockstep", "--real-time-factor", "0",
                              "--single-process")),
    **{f"sr{n}": Case(f"search and rescue 2C, {n} vehicles, example autopilot, lockstep, rtf 0",
                      ("search_rescue", "--variant", "2c", "--num-vehicles", str(n), "--lockstep",
                       "--real-time-factor", "0")) for n in (1, 3, 10, 50, 100)},
    "scene1": Case("search and rescue among 200 obstacles, 1 vehicle, VLP-16 + fisheye 640 x 480 + depth + "
                   "range finder, example autopilot, free-running, rtf 1",
                   ("search_rescue_scene", "--no-lockstep", "--real-time-factor", "1"),
                   ("/uav1/lidar/points", "/uav1/fisheye/image_raw", "/uav1/depth/image_raw",
                    "/uav1/range/down")),
    "scene1_single": Case("the same in one process (--single-process)",
                          ("search_rescue_scene", "--no-lockstep", "--real-time-factor", "1",
                           "--single-process"),
                          ("/uav1/lidar/points", "/uav1/fisheye/image_raw", "/uav1/depth/image_raw",
                           "/uav1/range/down")),
    **{f"sr{n}_rt": Case(f"search and rescue 2C, {n} vehicles, example autopilot, free-running, rtf 1",
                         ("search_rescue", "--variant", "2c", "--num-vehicles", str(n), "--no-lockstep",
                          "--real-time-factor", "1")) for n in (10, 50, 100)},
    # every vehicle a PX4 vehicle on MAVLink (mavlink_bridge), on its base, streaming PX4's default rates
    # to ports nobody listens on (as before a client connects); the ports shifted off PX4 SITL's
    **{f"mav{n}": Case(f"px4_sitl, {n} vehicle(s) on MAVLink (mavlink_bridge), free-running, rtf 1",
                       ("px4_sitl", "--mavlink", "--num-vehicles", str(n), "--no-lockstep",
                        "--real-time-factor", "1", "--param", "mavlink_bridge:mavlink_instance_offset=500"))
       for n in (1, 10, 50, 75, 100)},
}


def children_cpu(root: int, names: dict[int, str]) -> dict[int, float]:
    """CPU seconds (user + system) of every live descendant of ``root`` by pid; ``names`` collects
    each pid's node name (from its ``__node:=`` argument) the first time it is seen."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            if pid not in names:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().replace(b"\0", b" ").split()  # (a fork server child: one string)
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parents[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / CLK_TCK
        if pid not in names and argv:
            node = next((a.decode().split("__node:=", 1)[1] for a in argv if a.startswith(b"__node:=")), None)
            joined = b" ".join(argv)
            if node or pid == root or b"single_process" in joined or b"fork_server" in joined:  # else: not
                names[pid] = node or ("launcher" if pid == root else  # exec'd (or renamed) yet
                                      "single_process" if b"single_process" in joined else "fork_server")
    out: dict[int, float] = {}
    for pid, c in cpu.items():
        p = pid
        while p in parents and p != root:
            p = parents[p]
        if p == root:
            out[pid] = c
    return out


def long_keep_spot(tmp: str, duration_s: float) -> str:
    """config/keep_spot.yaml with an episode of ``duration_s`` (the file's is 20 s: too short to get
    past the first ticks' one-off costs); returns the copy's path."""
    import yaml

    from qrsim_ros.core.config.loader import load_yaml
    from qrsim_ros.core.config.scenario import scenario_path

    data = load_yaml(scenario_path("keep_spot").read_text())
    data["task"]["duration_steps"] = round(duration_s / 0.02)
    path = os.path.join(tmp, "keep_spot.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(data, f)
    return path


def scene_one_vehicle(tmp: str, duration_s: float) -> str:
    """config/search_rescue_scene.yaml cut to its first vehicle, with 200 generated obstacles (the
    performance scene) and an episode of ``duration_s``; returns the copy's path."""
    import yaml

    from qrsim_ros.core.config.loader import load_yaml
    from qrsim_ros.core.config.scenario import scenario_path

    data = load_yaml(scenario_path("search_rescue_scene").read_text())
    data["num_vehicles"] = 1
    data["vehicle"]["initial_states"] = data["vehicle"]["initial_states"][:1]
    data["scene"]["generate"]["count"] = 200
    data["task"]["duration_steps"] = max(1, round(duration_s / data["task"]["dt_s"]))
    path = os.path.join(tmp, "search_rescue_scene_1.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(data, f)
    return path


class TopicCounter:
    """Counts the messages of some topics in a thread of this (unpinned) process: raw subscriptions, so
    nothing is deserialised; reliable, as the sensors publish (a best-effort reader lost most images)."""

    def __init__(self, topics: tuple[str, ...], domain: int) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image, PointCloud2, Range

        self.counts = dict.fromkeys(topics, 0)
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node("bench_graph_counter", context=self.context)
        types = {"points": PointCloud2, "image_raw": Image, "down": Range}
        for topic in topics:
            msg_type = types[topic.rsplit("/", 1)[1]]
            self.node.create_subscription(msg_type, topic, lambda _m, t=topic: self._count(t),
                                          QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                                                     history=HistoryPolicy.KEEP_LAST), raw=True)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _count(self, topic: str) -> None:
        self.counts[topic] += 1

    def _spin(self) -> None:
        while self.context.ok():
            self.executor.spin_once(timeout_sec=0.1)

    def close(self) -> dict[str, int]:
        self.context.try_shutdown()
        self.thread.join(5)
        return self.counts


#: The nodes --sensor-cpus moves: the scene sensors whose rays are the issue's performance target.
SCENE_SENSOR_NODES = ("lidar", "fisheye")


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process ``pid`` onto ``cpus`` (a process's affinity is per thread)."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), cpus)
    except OSError:  # gone meanwhile
        pass


def run(case: Case, duration_s: float, domain: int, record: bool, cpus: str | None = None,
        sensor_cpus: str | None = None) -> tuple[float | None, dict[str, float], str]:
    """One launch: (real-time factor from the summary, CPU seconds by node from tick 0 to the end, bag
    figures if recorded). Start-up (imports, scenario loading) is left out of the CPU figures."""
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), PYTHONUNBUFFERED="1")
    with tempfile.TemporaryDirectory(prefix="bench_graph_") as tmp:
        args = list(case.args)
        if args[0] == "keep_spot":
            args[0] = long_keep_spot(tmp, duration_s)
        elif args[0] == "search_rescue_scene":
            args[0] = scene_one_vehicle(tmp, duration_s)
        taskset = ["taskset", "-c", cpus] if cpus else []
        cmd = [*taskset, sys.executable, "-m", "qrsim_ros.cli.main", "launch", *args,
               "--duration", f"{duration_s:g}"]
        if record:
            cmd += ["--record", os.path.join(tmp, "bag")]
        counter = TopicCounter(case.counted, domain) if case.counted else None
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        lines: list[str] = []
        started = threading.Event()

        def read() -> None:
            for line in proc.stdout:
                lines.append(line)
                if "started: tick 0" in line:
                    started.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        names: dict[int, str] = {}
        base: dict[int, float] | None = None
        last: dict[int, float] = {}
        sensors = {int(c) for c in sensor_cpus.split(",")} if sensor_cpus else set()
        while proc.poll() is None:
            now = children_cpu(proc.pid, names)
            for pid in now:  # again every poll: the nodes' DDS threads start after the process
                if sensors and names.get(pid) in SCENE_SENSOR_NODES:
                    pin(pid, sensors)
            if base is None and started.is_set():
                base = dict(now)
            last.update(now)
            time.sleep(0.2)
        reader.join(5)
        if counter is not None:
            for topic, count in counter.close().items():
                lines.append(f"counted: {topic} {count} messages\n")
        base = base or {}
        cpu: dict[str, float] = {}
        for pid, c in last.items():
            name = names.get(pid, str(pid))
            cpu[name] = cpu.get(name, 0.0) + c - base.get(pid, 0.0)
        summary = next((ln for ln in lines if ln.startswith("Summary: ")), "")
        m = re.search(r"real-time factor ([\d.]+)", summary)
        bag = ""
        if record:
            b = re.search(r"\(([\d,]+ messages on \d+ topics, [\d.]+ MB[^)]*)\)", summary)
            bag = b.group(1) if b else "no bag figures in the summary"
            gap = next((ln for ln in lines if "the recorder fell behind" in ln), "")
            bag += "; " + (gap.split("]: ", 1)[-1].strip() if gap else "every /clock tick recorded")
        if proc.returncode != 0 or not m:
            sys.stderr.write("".join(lines[-30:]))
        counted = " ".join(ln.split(": ", 1)[1].strip() + ";" for ln in lines if ln.startswith("counted: "))
        # a free-running clock keeps its rate whatever the controllers do: what they kept up with is here
        c = re.search(r"Commands: ([^(.]*)", summary)
        kept_up = c.group(1).strip().rstrip(",") if c else "none rejected, no failsafe onset"
        commands = "commands: " + kept_up
        return (float(m.group(1)) if m else None), cpu, "  ".join(x for x in (commands, bag, counted) if x)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="keep_spot,keep_spot_single,sr1,sr3,sr10,sr10_rt",
                    help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--duration", type=float, default=20.0, help="simulated seconds per run")
    ap.add_argument("--record", action="store_true", help="record a bag in every run")
    ap.add_argument("--cpus", default=None, help="pin every process of the runs to these CPUs (taskset -c)")
    ap.add_argument("--sensor-cpus", default=None,
                    help="move the lidar and fisheye nodes' threads to these CPUs (e.g. 0, with --cpus 1)")
    ap.add_argument("--domain", type=int, default=None,
                    help="ROS_DOMAIN_ID of the runs (default: a free one, qrsim_ros.dds.free_domain)")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}  (2-core machine; record={args.record})")
    for key in args.cases.split(","):
        case = CASES[key.strip()]
        if args.domain is None:
            from qrsim_ros.dds import free_domain

            args.domain = free_domain()
        rtf, cpu, bag = run(case, args.duration, args.domain, args.record, args.cpus, args.sensor_cpus)
        total = sum(cpu.values())
        print(f"\n{case.name}: real-time factor {rtf if rtf is not None else 'FAILED'}"
              f"  (load average now {os.getloadavg()[0]:.2f}){'  ' + bag if bag else ''}")
        for name, c in sorted(cpu.items(), key=lambda kv: -kv[1]):
            print(f"  {name:<20} {c:7.2f} s CPU after tick 0 ({100 * c / total:4.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

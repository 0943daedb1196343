"""Recording: the ``recorder`` node and ``qrsim launch --record`` write rosbag2 bags that rosbags reads.

The ROS test records one short search-and-rescue run (``qrsim launch``, 2 vehicles, lockstep, real
time) and, next to the launcher's recorder, two standalone recorders on the same graph: one is
killed with SIGKILL mid-run, the other stopped with SIGTERM mid-run. The bags are read back with
``rosbags.highlevel.AnyReader``; expected topics and rates come from the README/DESIGN topic table and
the scenario file (loaded with the core), type hashes from the live graph. Writer tests need no ROS.
Each ROS test takes a free ROS_DOMAIN_ID (rosenv.free_domain).
"""

from __future__ import annotations

import itertools
import math
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from rosenv import (
    REPO_ROOT,
    TestProcess,
    free_domain,
    interrupt,
    launches_graph,
    python,
    qrsim_launch,
    require_ros,
    ros_env,
    wait_until,
)

#: the module's shared run is paid for by the first test that reads it (its set-up is in its budget)
pytestmark = pytest.mark.timeout(420)
#: From the launch to the clock's first tick [s, wall] (about 35 s on an idle machine).
GRAPH_START_BUDGET_S = 180.0

NUM_VEHICLES = 2
#: long enough that the SIGKILLed recorder has a completed split with /clock while the graph still runs
#: (5 s was not, on 2 cores beside a test suite and two CPU burners; 10 s was not on a machine that ran
#: the suite at half the usual speed: the split came after the run)
DURATION_S = 30.0
TICK_S = 0.02
SEED = 3


# --- reading bags -----------------------------------------------------------------------------------------

@dataclass
class Bag:
    """Everything a test needs from one bag, read once with AnyReader."""

    path: Path
    metadata: dict[str, Any]
    times: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    messages: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    digests: dict[str, str] = field(default_factory=dict)
    durability: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)

    @property
    def meta_counts(self) -> dict[str, int]:
        return {t["topic_metadata"]["name"]: t["message_count"]
                for t in self.metadata["topics_with_message_count"]}


def read_bag(path: Path) -> Bag:
    from rosbags.highlevel import AnyReader

    from qrsim_ros.bag.types import typestore

    store = typestore()
    meta = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    bag = Bag(path, meta)
    # AnyReader checks, at open, that each stored definition hashes to the stored type hash.
    with AnyReader([path], default_typestore=store) as reader:
        for c in reader.connections:
            bag.digests[c.topic] = c.digest
            bag.types[c.topic] = c.msgtype
            qos = c.ext.offered_qos_profiles
            bag.durability[c.topic] = qos[0].durability.name if qos else ""
        for c, t_ns, raw in reader.messages():
            bag.times[c.topic].append(t_ns)
            bag.messages[c.topic].append(store.deserialize_cdr(raw, c.msgtype))
    return bag


# --- writer (no ROS) --------------------------------------------------------------------------------------

def _string_cdr(text: str) -> bytes:
    from qrsim_ros.bag.types import typestore

    store = typestore()
    return bytes(store.serialize_cdr(store.types["std_msgs/msg/String"](data=text), "std_msgs/msg/String"))


def test_writer_splits_are_readable_before_close_and_complete_after(tmp_path: Path) -> None:
    from rosbags.highlevel import AnyReader

    from qrsim_ros.bag.types import typestore
    from qrsim_ros.bag.writer import PARTIAL_DIR, SplitBagWriter

    wall = [0.0]
    writer = SplitBagWriter(tmp_path / "b", typestore(), split_period_s=1.0, wall_clock=lambda: wall[0])
    # a bag exists (and reads, empty) before anything was written
    with AnyReader([tmp_path / "b"], default_typestore=typestore()) as r:
        assert r.message_count == 0
    s = writer.add_topic("/s", "std_msgs/msg/String")
    for i in range(30):
        writer.write(s, i * 1000, _string_cdr(f"m{i}"))
        if i == 9:
            wall[0] = 1.5  # the split is older than split_period_s
            assert writer.maybe_split()
    # As after a SIGKILL now: the first split (10 messages) is in the bag, the second is still partial.
    assert (tmp_path / "b" / PARTIAL_DIR).is_dir()
    with AnyReader([tmp_path / "b"], default_typestore=typestore()) as r:
        got = [r.deserialize(raw, c.msgtype).data for c, _, raw in r.messages()]
    assert got == [f"m{i}" for i in range(10)]
    writer.close()
    assert not (tmp_path / "b" / PARTIAL_DIR).exists()
    with AnyReader([tmp_path / "b"], default_typestore=typestore()) as r:
        got = [(t, r.deserialize(raw, c.msgtype).data) for c, t, raw in r.messages()]
    assert got == [(i * 1000, f"m{i}") for i in range(30)]
    meta = yaml.safe_load((tmp_path / "b" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["version"] == 9 and meta["storage_identifier"] == "mcap"
    assert meta["relative_file_paths"] == ["b_0.mcap", "b_1.mcap"]
    assert [f["message_count"] for f in meta["files"]] == [10, 20] and meta["message_count"] == 30


def test_writer_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    from qrsim_ros.bag.types import typestore
    from qrsim_ros.bag.writer import BagWriterError, SplitBagWriter

    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("x")
    with pytest.raises(BagWriterError, match="not an empty directory"):
        SplitBagWriter(tmp_path / "b", typestore())


def test_clock_bytes_and_subscription_policy() -> None:
    from rosbags.interfaces import QosDurability, QosReliability

    from qrsim_ros.bag.topics import clock_ns, subscription_policy
    from qrsim_ros.bag.types import typestore

    store = typestore()
    clock = store.types["rosgraph_msgs/msg/Clock"](clock=store.types["builtin_interfaces/msg/Time"](
        sec=12, nanosec=340_000_000))
    assert clock_ns(store.serialize_cdr(clock, "rosgraph_msgs/msg/Clock")) == 12_340_000_000

    class Q:
        def __init__(self, reliability: QosReliability, durability: QosDurability) -> None:
            self.reliability, self.durability = reliability, durability

    latched = Q(QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL)
    volatile = Q(QosReliability.RELIABLE, QosDurability.VOLATILE)
    best_effort = Q(QosReliability.BEST_EFFORT, QosDurability.VOLATILE)
    assert subscription_policy([latched]) == (True, True)  # latched history is requested
    assert subscription_policy([latched, volatile]) == (True, False)  # transient local would not match
    assert subscription_policy([volatile, best_effort]) == (False, False)


def test_missing_clock_ticks_are_counted_per_episode() -> None:
    require_ros()
    from qrsim_ros.nodes.recorder import ClockGaps

    gaps = ClockGaps()
    tick = 20_000_000
    for k in [*range(0, 10), *range(13, 20)]:  # ticks 10-12 lost
        if k:
            gaps.step(tick)
        gaps.count(k * tick)
    gaps.episode_end()  # a reset: the clock restarts at 0
    for k in (0, 1, 2, 4):  # tick 3 lost
        gaps.count(k * tick)
    assert gaps.missing() == (4, 20 + 5)


def test_missing_messages_of_periodic_stamped_topics_are_counted_and_named() -> None:
    from qrsim_ros.bag.gaps import PROBATION, StampGaps, missing_summary

    tick = 20_000_000
    imu, gps, markers = StampGaps(), StampGaps(), StampGaps()
    for k in [*range(0, 40), *range(45, 60)]:  # imu: ticks 40-44 lost
        imu.count(k * tick)
        if k == 50:
            imu.count(k * tick)  # a lockstep re-send of tick 50 counts once
    for k in range(0, 60, 10):  # gps every 10 ticks, complete
        gps.count(k * tick)
    for k in (0, 1, 3, 4, 8, 9, 11, 20, 21, 22, 40, 41):  # published on change: never judged
        markers.count(k * tick)
    assert imu.missing() == (5, 60) and gps.missing() is None  # gps: fewer than PROBATION steps yet
    assert markers.missing() is None and markers.irregular
    for k in range(60, 60 + 10 * PROBATION, 10):
        gps.count(k * tick)
    assert gps.missing() == (0, 16) and gps.step_ns == 10 * tick
    for k in (0, 1, 2, 4):  # a reset: imu restarts at 0 and loses tick 3
        imu.count(k * tick)
    assert imu.missing() == (6, 65)
    summary = missing_summary({"/uav1/imu/data": imu, "/uav1/gps/fix": gps, "/viz/gps": markers})
    assert summary == ("6 messages are missing from 1 of the 2 periodic stamped topics "
                       "(/uav1/imu/data 6 of 65)")
    assert missing_summary({"/uav1/gps/fix": gps}) is None


# --- refusing to overwrite --------------------------------------------------------------------------------

def test_launch_refuses_to_record_over_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "bag").mkdir()
    (tmp_path / "bag" / "old.mcap").write_bytes(b"x")
    proc = subprocess.run([sys.executable, "-m", "qrsim_ros.cli.main", "launch", "keep_spot", "--record",
                           str(tmp_path / "bag")], env=ros_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "not an empty directory" in proc.stderr and (tmp_path / "bag" / "old.mcap").read_bytes() == b"x"


@pytest.mark.graph
def test_recorder_reports_a_bad_output_dir_in_one_line(tmp_path: Path) -> None:
    require_ros()
    (tmp_path / "bag").mkdir()
    (tmp_path / "bag" / "old.mcap").write_bytes(b"x")
    proc = subprocess.run(_recorder_command(tmp_path / "bag"), env=ros_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1, proc.stderr
    assert "output_dir" in errors[0] and "not an empty directory" in errors[0]


# --- the recorded run (ROS) -------------------------------------------------------------------------------

@dataclass
class Run:
    bag: Bag
    killed: Bag
    terminated: Bag
    terminated_rc: int
    terminated_log: str
    launcher_rc: int
    output: str
    live_hashes: dict[str, str]
    live_topics: set[str]
    killed_while_running: bool
    killed_after_s: float  # wall seconds from tick 0 to the SIGKILL
    killed_log: str
    wall_s: float


def _recorder_command(output_dir: Path, **params: Any) -> list[str]:
    from qrsim_ros.cli.launch import find_executable
    from qrsim_ros.launch_plan import NodeSpec

    exe = find_executable(NodeSpec("recorder", "recorder"))
    if exe is None:
        pytest.skip("the recorder executable is not installed (run ./qrsim exec -- true)")
    args = [sys.executable, exe, "--ros-args", "-r", f"__node:={output_dir.name}",
            "-p", f"output_dir:={output_dir}", "-p", "use_sim_time:=true"]
    for k, v in params.items():
        args += ["-p", f"{k}:={v}"]
    return args


def _clock_split_written(bag_dir: Path) -> bool:
    """metadata.yaml lists a completed split holding /clock messages (the simulation is running)."""
    try:
        meta = yaml.safe_load((bag_dir / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return False
    return any(t["topic_metadata"]["name"] == "/clock" and t["message_count"] > 0
               for t in meta["topics_with_message_count"])


def _wait(predicate: Any, timeout_s: float, what: str, detail: Any = None) -> None:
    wait_until(predicate, timeout_s, what, poll_s=0.05, detail=detail)  # a file written by another process


#: Wall seconds the graph watcher program may live (the fixture's whole run fits well within it).
WATCHER_DEADLINE_S = 600.0


def _watched(watcher: TestProcess, kind: str) -> dict[str, str]:
    """What the graph watcher program (test/programs/graph_watcher.py) printed: ``node`` names (to '') or
    ``topic`` names (to the type hash their publishers announce)."""
    parts = (line.rstrip("\n").split(" ", 2) for line in list(watcher.lines) if line.startswith(f"{kind} "))
    return {p[1]: p[2] if len(p) > 2 else "" for p in parts}


@pytest.fixture(scope="module")
@launches_graph
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    require_ros()
    tmp = tmp_path_factory.mktemp("recording")
    domain = free_domain()
    env = ros_env(tmp, domain)
    bag_dir, killed_dir, terminated_dir = tmp / "bag", tmp / "killed", tmp / "terminated"
    # The extra recorders leave the ground truth out: the clock owner's start gate counts its
    # subscriptions and must wait for the planned consumers, not for them.
    exclude = "^/parameter_events$|/ground_truth/odom$|^/sim/vehicle_status$"
    # Both extra recorders end without their DDS teardown, by SIGKILL or, under load, by the stop watchdog
    # of the SIGTERMed one. Over the project's profile (loopback UDP) that leaves nothing behind that a
    # live participant depends on; over shared memory a port left so had blocked the imu node in publish()
    # for good and stalled the lockstep run (a flake hunt, and twice here).
    # The SIGKILLed recorder takes only /clock and /tf (100 messages a second): with every other topic too,
    # beside 2 CPU burners, its first split with /clock came after the 30 s run had ended.
    killed_exclude = "^(?!/clock$|/tf$)"
    procs: list[subprocess.Popen[Any]] = []
    launcher: TestProcess | None = None
    watcher: TestProcess | None = None
    t0 = time.monotonic()
    try:
        with open(tmp / "killed.log", "w") as log:
            killed = subprocess.Popen(_recorder_command(killed_dir, split_period_s=0.3,
                                                        exclude=killed_exclude),
                                      env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(killed)
        with open(tmp / "terminated.log", "w") as log:
            terminated = subprocess.Popen(
                _recorder_command(terminated_dir, split_period_s=0.3, exclude=exclude, drain_timeout_s=0.5),
                env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(terminated)
        # the live graph's nodes and type hashes, watched from a process of its own (its DDS teardown is
        # skipped: an rclpy node's destroy_node in the test process once hung in a publisher's deletion)
        watcher = TestProcess([python(), str(REPO_ROOT / "test" / "programs" / "graph_watcher.py"),
                               str(WATCHER_DEADLINE_S)], env, tmp, log=tmp / "graph_watcher.log")
        # The extra recorders are up before the graph starts: on a loaded machine their start-up (seconds)
        # could otherwise outlast the 5 s run, and the SIGKILL case would never see a split with /clock.
        _wait(lambda: {killed_dir.name, terminated_dir.name} <= set(_watched(watcher, "node")), 120,
              "the extra recorders' nodes")
        launcher = qrsim_launch(tmp, ["search_rescue", "--num-vehicles", str(NUM_VEHICLES), "--seed",
                                      str(SEED), "--duration", str(DURATION_S), "--lockstep",
                                      "--real-time-factor", "1", "--record", str(bag_dir)], domain_id=domain)
        # the graph's start-up is the long part under load (a flake hunt beside 2 burners saw no split
        # with /clock 120 s after the launch): wait for its clock to start, then for the split
        launcher.wait_for_line(r"started: tick 0 published", GRAPH_START_BUDGET_S)
        started = time.monotonic()
        _wait(lambda: _clock_split_written(killed_dir), 60, "a completed split with /clock (SIGKILL case)",
              detail=launcher.tail)
        killed.send_signal(signal.SIGKILL)
        killed_while_running = launcher.proc.poll() is None
        killed_after_s = time.monotonic() - started
        killed.wait(timeout=10)
        _wait(lambda: _clock_split_written(terminated_dir), 60, "a completed split with /clock (SIGTERM)")
        terminated.send_signal(signal.SIGTERM)
        terminated_rc = terminated.wait(timeout=30)
        launcher_rc = launcher.wait(180)
    finally:
        if watcher is not None:
            watcher.close()
        for p in procs:
            interrupt(p, 20)
        if launcher is not None:
            launcher.close()
    return Run(read_bag(bag_dir), read_bag(killed_dir), read_bag(terminated_dir), terminated_rc,
               (tmp / "terminated.log").read_text(), launcher_rc, launcher.output,
               _watched(watcher, "topic"), set(_watched(watcher, "topic")),
               killed_while_running, killed_after_s, (tmp / "killed.log").read_text(), time.monotonic() - t0)


def _expected_rates_hz() -> dict[str, float]:
    """Topic -> messages per simulated second, from the topic table (README/DESIGN) and the scenario."""
    from qrsim_ros.core.config.scenario import load_scenario

    sc = load_scenario("search_rescue_2c", {"num_vehicles": NUM_VEHICLES, "seed": SEED})
    v = sc.vehicle
    rates = {"/clock": 1 / TICK_S, "/tf": 1 / TICK_S, "/sim/vehicle_status": 1 / TICK_S,
             "/referee/status": 1 / sc.task.dt_s}
    for i in range(1, NUM_VEHICLES + 1):
        ns = f"/uav{i}"
        rates.update({
            f"{ns}/ground_truth/odom": 1 / TICK_S, f"{ns}/ground_truth/accel": 1 / TICK_S,
            f"{ns}/wind": 1 / TICK_S,  # the air velocity for every step
            f"{ns}/cmd/attitude": 1 / TICK_S,  # the flight controller, every tick (velocity control)
            f"{ns}/imu/data": 1 / v.ahars.accelerometer.dt_s, f"{ns}/altimeter": 1 / v.ahars.altimeter.dt_s,
            f"{ns}/gps/fix": 1 / v.gps_receiver.dt_s, f"{ns}/gps/vel": 1 / v.gps_receiver.dt_s,
            f"{ns}/camera/detections": 1 / v.camera.dt_s,
            f"{ns}/battery": 1 / (TICK_S * BATTERY_EVERY_N_TICKS),  # the battery is on by default
        })
    return rates


#: Latched topics published once (per episode or change): a recorder that joins later gets them late.
LATCHED = ("/tf_static", "/sim/episode", "/area/terrain", "/viz/terrain", "/referee/markers", "/sim/faults")
#: vehicle_dynamics' default battery_every_n_ticks (docs/ENERGY.md: every 0.1 s of simulated time).
BATTERY_EVERY_N_TICKS = 5


def _stamp_ns(msg: Any) -> int:
    """A recorded message's own time: /clock's clock, /tf's first transform's stamp, else header.stamp."""
    stamp = msg.clock if hasattr(msg, "clock") else (
        msg.transforms[0].header.stamp if hasattr(msg, "transforms") else msg.header.stamp)
    return stamp.sec * 1_000_000_000 + stamp.nanosec


@pytest.mark.graph
def test_every_topic_is_recorded_at_its_rate(run: Run) -> None:
    bag = run.bag
    assert run.launcher_rc == 0, run.output
    summary = [ln for ln in run.output.splitlines() if ln.startswith("Summary: ")]
    assert summary and f"Bag: {bag.path} (" in summary[-1], run.output
    rates = _expected_rates_hz()
    expected = set(rates) | set(LATCHED) | {f"/uav{i}/cmd/velocity" for i in range(1, NUM_VEHICLES + 1)}
    assert expected <= set(bag.times), sorted(expected - set(bag.times))
    # ... and every topic the live graph published (but those excluded by default: ROS's parameter events,
    # the lockstep progress reports, the fleet topics) is in the bag, and no excluded one
    from qrsim_ros.nodes.recorder import DEFAULT_EXCLUDE

    excluded = {t for t in run.live_topics if re.match(DEFAULT_EXCLUDE, t)}
    assert {"/parameter_events", "/sim/tick_progress", "/sim/fleet/imu"} <= excluded, sorted(excluded)
    assert not excluded & set(bag.times), sorted(excluded & set(bag.times))
    published = set(run.live_topics) - excluded
    assert published <= set(bag.times) | set(bag.meta_counts), sorted(published - set(bag.times))
    # counts: rate x duration, +1 for tick 0 (every stream publishes at t = 0 too), within 10 %
    for topic, hz in rates.items():
        want = hz * DURATION_S + 1
        times = bag.times[topic]
        got = len(times)
        gap_ns, gap_end_ns = max((b - a, b) for a, b in itertools.pairwise(times))
        assert abs(got - want) <= 0.1 * want, (
            f"{topic}: {got} messages, expected {want:g} (first at {times[0] * 1e-9:.3f} s, last at "
            f"{times[-1] * 1e-9:.3f} s, longest gap {gap_ns * 1e-9:.3f} s before {gap_end_ns * 1e-9:.3f} s)")
    # the clock owner starts when the recorder's /sim/vehicle_status subscription matches, which the
    # recorder creates after all the others: its own topics are in the bag from tick 0. (The stamp, not
    # the bag time, tells: a sample the DDS transport had to repair arrives, and is timed, a few ticks
    # late, as a CI run under load saw for both vehicles' odometry of ticks 0-17.)
    own = ["/clock", "/tf", "/sim/vehicle_status"] + [f"/uav{i}/ground_truth/{kind}" for i in
                                                     range(1, NUM_VEHICLES + 1) for kind in ("odom", "accel")]
    first_stamps = {t: _stamp_ns(bag.messages[t][0]) for t in own}
    keys = ("tick 0 goes to", "subscribed /sim/vehicle_status", "starting")
    start_lines = [ln for ln in run.output.splitlines() if any(key in ln for key in keys)]
    assert {t: ns for t, ns in first_stamps.items() if ns != 0} == {}, (
        {t: bag.times[t][0] for t in own}, start_lines)
    for topic in LATCHED:
        assert len(bag.times[topic]) >= 1
    print(f"\nrecorded run: {bag.metadata['message_count']} messages on {len(bag.times)} topics, "
          f"{sum(f.stat().st_size for f in bag.path.glob('*.mcap')) / 1e6:.2f} MB, {run.wall_s:.1f} s wall")


@pytest.mark.graph
def test_values_decode_and_timestamps_are_monotonic_sim_time(run: Run) -> None:
    bag = run.bag
    end_ns = round(DURATION_S * 1e9)
    offsets: dict[str, list[float]] = defaultdict(list)
    for topic, times in bag.times.items():
        assert all(b >= a for a, b in itertools.pairwise(times)), f"{topic}: not monotonic"
        # sim time: within the run's simulated seconds (a wall-clock stamp would be ~1.8e18 ns)
        assert times[0] >= 0 and times[-1] <= end_ns, (topic, times[0], times[-1])
        for t_ns, msg in zip(times, bag.messages[topic], strict=True):
            stamp = getattr(getattr(msg, "header", None), "stamp", None)
            if stamp is not None and topic not in LATCHED:
                offsets[topic].append((t_ns - (stamp.sec * 10**9 + stamp.nanosec)) / 1e9)
    # /clock: the bag time is the clock's own time, tick by tick; a tick is there twice only if
    # vehicle_dynamics sent it again (a lockstep input late under load: "tick K re-sent" in its log)
    clock = [m.clock.sec * 10**9 + m.clock.nanosec for m in bag.messages["/clock"]]
    assert clock == bag.times["/clock"]
    ticks = list(dict.fromkeys(clock))
    assert ticks == [round(k * TICK_S * 1e9) for k in range(len(ticks))]
    resent = Counter(round(int(k) * TICK_S * 1e9) for k in re.findall(r"tick (\d+) re-sent", run.output))
    repeats = Counter(clock) - Counter(ticks)
    assert all(n <= resent[t_ns] for t_ns, n in repeats.items()), (repeats, resent)
    # every other message: the sim time it was received at, i.e. close to its own stamp
    for topic, d in offsets.items():
        assert statistics.median(abs(x) for x in d) <= 0.1, (topic, statistics.median(d))
        assert max(abs(x) for x in d) <= 2.0, (topic, min(d), max(d))
    # decoded values make sense
    odom = bag.messages["/uav1/ground_truth/odom"][-1]
    assert odom.header.frame_id == "map" and odom.child_frame_id == "uav1/base_link"
    assert math.isfinite(odom.pose.pose.position.z) and odom.pose.pose.position.z > 10.0  # flying at 45 m
    status = bag.messages["/referee/status"][-1]
    assert status.persons_total >= 1 and list(status.vehicle_names) == ["uav1", "uav2"]
    frames = {(t.header.frame_id, t.child_frame_id) for m in bag.messages["/tf_static"] for t in m.transforms}
    assert ("map", "map_ned") in frames  # the frames of NODE_GRAPH.md
    for i in range(1, NUM_VEHICLES + 1):
        assert {(f"uav{i}/base_link", f"uav{i}/base_link_frd"),
                (f"uav{i}/base_link", f"uav{i}/camera_optical")} <= frames
    grid = bag.messages["/area/terrain"][0]
    assert grid.info.width * grid.info.height == len(grid.data) > 0
    # the active faults at tick 0 (none: the scenario has no faults:), and the batteries draining
    faults = bag.messages["/sim/faults"][0]
    assert faults.header.stamp.sec == faults.header.stamp.nanosec == 0 and list(faults.faults) == []
    for i in range(1, NUM_VEHICLES + 1):
        packs = bag.messages[f"/uav{i}/battery"]
        assert packs[0].header.frame_id == f"uav{i}/base_link" and packs[0].location == f"uav{i}"
        assert 9.0 < packs[-1].voltage < packs[0].voltage <= 12.0  # 3 cells: 3.0..4.0 V each (ENERGY.md)
        assert 0.0 < packs[-1].percentage < packs[0].percentage <= 1.0


@pytest.mark.graph
def test_type_hashes_and_qos_are_those_of_the_running_graph(run: Run) -> None:
    bag = run.bag
    compared = 0
    for topic, digest in bag.digests.items():
        if topic in run.live_hashes:
            assert digest == run.live_hashes[topic], topic
            compared += 1
    assert compared >= 20, run.live_hashes
    assert re.fullmatch(r"RIHS01_[0-9a-f]{64}", bag.digests["/uav1/imu/data"])
    # latched topics keep their transient-local QoS (ros2 bag play republishes them latched)
    for topic in ("/tf_static", "/area/terrain", "/referee/status", "/sim/faults"):
        assert bag.durability[topic] == "TRANSIENT_LOCAL", topic
    assert bag.durability["/uav1/imu/data"] == "VOLATILE"


@pytest.mark.graph
def test_robot_description_is_recorded(run: Run) -> None:
    if "/uav1/robot_description" not in run.live_topics:
        pytest.skip("no node publishes uavN/robot_description in this tree yet")
    for i in range(1, NUM_VEHICLES + 1):
        msgs = run.bag.messages[f"/uav{i}/robot_description"]
        assert len(msgs) == 1 and "<robot" in msgs[0].data
        assert run.bag.durability[f"/uav{i}/robot_description"] == "TRANSIENT_LOCAL"


@pytest.mark.graph
def test_sigterm_leaves_a_complete_bag(run: Run) -> None:
    bag = run.terminated
    assert run.terminated_rc == 0, run.terminated_log
    assert not (bag.path / ".partial").exists()
    counts = {topic: len(times) for topic, times in bag.times.items()}
    assert {t: n for t, n in bag.meta_counts.items() if n} == counts
    assert bag.metadata["message_count"] == sum(counts.values())
    assert sum(f["message_count"] for f in bag.metadata["files"]) == sum(counts.values())
    assert counts.get("/clock", 0) > 0 and "/uav1/ground_truth/odom" not in counts  # as excluded


@pytest.mark.graph
def test_sigkill_leaves_a_bag_readable_up_to_its_last_split(run: Run) -> None:
    bag = run.killed
    assert run.killed_while_running, (f"killed {run.killed_after_s:.1f} s after tick 0, after the run's end\n"
                                      f"{run.killed_log[-3000:]}")
    counts = {topic: len(times) for topic, times in bag.times.items()}
    assert counts.get("/clock", 0) > 0 and set(counts) <= {"/clock", "/tf"}, counts
    # what metadata.yaml promises is exactly what the complete splits hold
    assert {t: n for t, n in bag.meta_counts.items() if n} == counts
    # ... and it stopped where it was killed: before the end of the run (the launcher's bag goes on), or,
    # when a loaded machine let the simulation finish first, with the split it was writing left behind
    partial = bag.path / ".partial"
    assert bag.times["/clock"][-1] < run.bag.times["/clock"][-1] or (partial.is_dir() and any(
        partial.iterdir())), (bag.times["/clock"][-1], run.bag.times["/clock"][-1])
    assert set(bag.times["/clock"]) <= set(run.bag.times["/clock"])

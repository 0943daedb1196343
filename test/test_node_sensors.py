"""The sensor nodes (imu, gps, altimeter, camera_detector, plume_field) as real processes over real DDS.

The test itself stands in for ``vehicle_dynamics``: a private rclpy node (own context and
ROS_DOMAIN_ID) publishes ``/clock``, ``uavN/ground_truth/odom``, ``uavN/ground_truth/accel`` and
``/sim/vehicle_status`` stamped t_k (NODE_GRAPH.md), tick by tick, and publishes tick k+1 only once
every sensor output due at tick k has arrived (lockstep on events, no sleeps). The ground truth is
the in-process ``Simulator``'s, recorded tick by tick with the same scenario and seed, so the nodes
must reproduce the Simulator's sensor outputs (same named random streams): to 1e-12 for the IMU,
altimeter, GPS and plume sensor, to float32 rounding for the camera's point cloud. First-principles
checks on top: REP-145 signs at hover, NavSatFix near the geodetic origin for a vehicle above it,
the camera grid at 25 m, rates from the stamps, frames and types. Also: bad parameters exit 1 with
one line, SIGTERM exits 0 (busy and idle nodes). Without other processes: the ground-truth
synchronisation rules (episodes, repeated and missing ticks, fleet status), the point-cloud layout,
and the plume builder shared by the Simulator and the plume_field node (same plume across episodes).
"""

from __future__ import annotations

import math
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosenv import (
    REPO_ROOT,
    TestProcess,
    free_domain,
    node_output_lines,
    python,
    require_ros,
    ros_env,
    wait_until,
)

LIB_DIR = REPO_ROOT / "install" / "qrsim_ros" / "lib" / "qrsim_ros"
DT = 0.02
TICK_NS = 20_000_000
#: Generous: five Python node processes start on a shared 2-core machine.
START_TIMEOUT_S = 90.0
TICK_TIMEOUT_S = 20.0


# --- processes and the test-side node ---------------------------------------------------------------

class NodeProcess:
    """An installed node executable (lib/qrsim_ros/<name>) started with ``--ros-args -p k:=v``."""

    def __init__(self, executable: str, params: dict[str, Any], env: dict[str, str], log_dir: Path) -> None:
        args = [python(), str(LIB_DIR / executable), "--ros-args"]
        for key, value in params.items():
            args += ["-p", f"{key}:={str(value).lower() if isinstance(value, bool) else value}"]
        self.name = executable
        self.signalled = False
        self.log_path = log_dir / f"{executable}.log"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.process = TestProcess(args, env, log_dir, log=self.log_path)  # reaped whatever happens
        self.proc = self.process.proc

    def log(self) -> str:
        return self.process.output

    def send(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` once (a second SIGTERM during the clean shutdown would be a hard kill)."""
        if self.proc.poll() is None and not self.signalled:
            self.signalled = True
            self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int | None:
        """Send ``sig`` (once) and wait; returns the exit status, None if it had to be killed."""
        self.send(sig)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        finally:
            self.process.close(stop_s=0.0)  # (killed, with its process group, if it ignored the signal)


def stop_all(procs: list[NodeProcess]) -> dict[str, int | None]:
    for p in procs:
        p.send(signal.SIGTERM)
    return {p.name: p.stop() for p in procs}


class Harness:
    """The test's rclpy node in a private context and domain, spun in a background thread.

    ``got[(episode, topic, tick)]`` collects every message the subscriptions receive, keyed by the
    episode the harness is driving and the tick of the message's stamp.
    """

    def __init__(self, tmp_path: Path, domain_id: int, monkeypatch: pytest.MonkeyPatch) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path / "ros_log"))
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("sensor_test_harness", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.lock = threading.Lock()
        self.episode = 1
        self.got: dict[tuple[int, str, int], list[Any]] = defaultdict(list)
        self._stop = False
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop and self.context.ok():
            self.executor.spin_once(timeout_sec=0.05)

    def subscribe(self, msg_type: Any, topic: str, qos: Any = None) -> None:
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

        qos = qos or QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                                history=HistoryPolicy.KEEP_LAST)

        def store(msg: Any) -> None:
            ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec if hasattr(msg, "header") \
                else -1
            with self.lock:
                self.got[(self.episode, topic, ns // TICK_NS if ns >= 0 else -1)].append(msg)

        self.node.create_subscription(msg_type, topic, store, qos)

    def count(self, episode: int, topic: str, tick: int) -> int:
        with self.lock:
            return len(self.got.get((episode, topic, tick), ()))

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=5)
        self.node.destroy_node()
        self.executor.shutdown()
        self.context.try_shutdown()


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str,
             procs: list[NodeProcess] | None = None) -> None:
    """Poll ``condition`` (the harness thread fills the data) until true; fail naming ``what``."""
    def met() -> bool:
        for p in procs or ():
            if p.proc.poll() is not None:
                raise AssertionError(f"{p.name} exited with {p.proc.returncode} while waiting for {what}:\n"
                                     f"{p.log()[-2000:]}")
        return condition()

    wait_until(met, timeout_s, what, poll_s=0.002,
               detail=lambda: "".join(f"\n--- {p.name}:\n{p.log()[-1500:]}" for p in procs or ()))


class GroundTruthPublisher:
    """vehicle_dynamics' outputs for one tick: /clock, odometry and specific force of every vehicle,
    /sim/vehicle_status with the fleet's state (built with the conversions the real node uses)."""

    def __init__(self, harness: Harness, num_vehicles: int) -> None:
        from geometry_msgs.msg import AccelStamped
        from nav_msgs.msg import Odometry
        from qrsim_ros.msg import VehicleStatus
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock

        from qrsim_ros.ros.qos import QOS_CLOCK

        node = harness.node
        self.n = num_vehicles
        # deep writer queues: ticks that have no output due are published in a burst
        deep = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        self.clock = node.create_publisher(Clock, "/clock", QOS_CLOCK)
        self.odom = [node.create_publisher(Odometry, f"/uav{i + 1}/ground_truth/odom", deep)
                     for i in range(num_vehicles)]
        self.accel = [node.create_publisher(AccelStamped, f"/uav{i + 1}/ground_truth/accel", deep)
                      for i in range(num_vehicles)]
        self.status = node.create_publisher(VehicleStatus, "/sim/vehicle_status", deep)

    def publish(self, k: int, x: np.ndarray, a: np.ndarray, episode: int, faults: list[Any] | None = None
                ) -> None:
        """Tick k's messages; ``faults``: the tick's active faults (the core's ``ActiveFault``), carried
        by /sim/vehicle_status as vehicle_dynamics does."""
        from qrsim_ros.msg import VehicleStatus
        from rosgraph_msgs.msg import Clock

        from qrsim_ros.ros.stamps import stamp_from_tick
        from qrsim_ros.ros.to_messages import (
            accel_message,
            active_fault_messages,
            fill_accel,
            odometry_from_state,
        )

        stamp = stamp_from_tick(k)
        self.clock.publish(Clock(clock=stamp))
        for i in range(self.n):
            self.odom[i].publish(odometry_from_state(i, x[i], stamp))
            self.accel[i].publish(fill_accel(accel_message(i), a[i], stamp))
        status = VehicleStatus(episode=episode, tick=k, names=[f"uav{i + 1}" for i in range(self.n)],
                               valid=[True] * self.n, state=np.asarray(x, float)[: self.n].ravel().tolist(),
                               specific_force=np.asarray(a, float)[: self.n].ravel().tolist(),
                               faults_listed=True, faults=active_fault_messages(faults or []))
        status.header.stamp = stamp
        self.status.publish(status)


# --- Simulator reference runs -------------------------------------------------------------------------

def record_simulator(sim: Any, ticks_per_episode: list[int], record: Callable[[Any], dict[str, Any]]
                     ) -> list[list[dict[str, Any]]]:
    """Tick-by-tick ground truth and sensor outputs of ``sim`` (task step = one tick), one list per
    episode (tick 0 = after the reset), zero velocity commands (hover)."""
    episodes = []
    spec = sim.action_spec
    action = np.zeros((len(spec["vehicles"]), spec["width"]))
    for e, ticks in enumerate(ticks_per_episode):
        if e:
            sim.reset()
        rows = []
        for k in range(ticks + 1):
            if k:
                sim.step(action)
            assert sim.tick == k and bool(np.all(sim.valid))
            rows.append({"x": sim.true_state().copy(), "a": sim.fleet.accel_body.copy(), **record(sim)})
        episodes.append(rows)
    return episodes


#: How long an unanswered first tick waits before it is sent again [s].
RESEND_S = 2.0


def resend_until(arrived: Callable[[], bool], resend: Callable[[], None], what: str,
                 procs: list[NodeProcess]) -> None:
    """Wait for ``arrived()``, calling ``resend()`` every ``RESEND_S`` until it holds (at most
    ``TICK_TIMEOUT_S``), as vehicle_dynamics sends a tick again while its inputs are late: under load a
    node's subscription can match our publisher only after the first send, and its reader drops what
    came before (the nodes answer a repeated tick with the same outputs)."""
    deadline = time.monotonic() + TICK_TIMEOUT_S
    while time.monotonic() + RESEND_S < deadline:
        try:
            wait_for(arrived, RESEND_S, what, procs)
            return
        except AssertionError:
            if any(p.proc.poll() is not None for p in procs):
                raise
        resend()


def drive(harness: Harness, truth: GroundTruthPublisher, episodes: list[list[dict[str, Any]]],
          due: Callable[[int], list[str]], procs: list[NodeProcess], repeat_tick: int | None = None) -> None:
    """Publish every tick of every episode; before the next tick wait until each topic due at this tick
    (``due(k)``) has a message stamped t_k. ``repeat_tick``: publish that tick of episode 1 twice."""
    for e, rows in enumerate(episodes, start=1):
        harness.episode = e
        for k, row in enumerate(rows):
            truth.publish(k, row["x"], row["a"], e, row.get("faults"))
            topics = due(k)

            def arrived(e: int = e, k: int = k, topics: list[str] = topics) -> bool:
                return all(harness.count(e, t, k) >= 1 for t in topics)

            if k == 0:  # an episode's first tick: sent again until answered (below)
                resend_until(arrived, lambda k=k, row=row, e=e: truth.publish(k, row["x"], row["a"], e,
                                                                              row.get("faults")),
                             f"episode {e} tick {k}: {topics}", procs)
            wait_for(arrived, TICK_TIMEOUT_S, f"episode {e} tick {k}: {topics}", procs)
            if e == 1 and k == repeat_tick:
                truth.publish(k, row["x"], row["a"], e, row.get("faults"))
                wait_for(lambda e=e, k=k, topics=topics: all(harness.count(e, t, k) >= 2 for t in topics),
                         TICK_TIMEOUT_S, f"the repeated tick {k}", procs)


def wait_for_graph(harness: Harness, truth: GroundTruthPublisher, subscribers: int, topics: list[str],
                   procs: list[NodeProcess]) -> None:
    """Until ``subscribers`` nodes take the fleet's ground truth (/sim/vehicle_status, their default
    source) and every topic in ``topics`` has a publisher."""
    def ready() -> bool:
        return (truth.status.get_subscription_count() >= subscribers
                and all(harness.node.count_publishers(t) >= 1 for t in topics))

    wait_for(ready, START_TIMEOUT_S, "the sensor nodes' subscriptions and publishers", procs)


def stamps_hz(ticks: list[int]) -> float:
    """Message rate [Hz] of simulated time from the ticks of consecutive messages."""
    return (len(ticks) - 1) / ((max(ticks) - min(ticks)) * DT)


# --- no processes: conversions, the cloud layout, the shared plume builder ----------------------------

def test_ground_truth_round_trip_and_detection_layout() -> None:
    require_ros()
    from qrsim_ros.core.common.frames import ned_to_enu
    from qrsim_ros.core.common.rng import RandomStreams
    from qrsim_ros.core.sensors.camera import CameraWithClassifier
    from qrsim_ros.ros.from_messages import cloud_points, state_from_odometry
    from qrsim_ros.ros.stamps import stamp_from_tick
    from qrsim_ros.ros.to_messages import (
        DETECTION_DTYPE,
        detection_fields,
        detections_message,
        odometry_from_state,
    )

    # odometry -> core state: position, velocity, rates exact; angles to 1e-15 (yaw wrapped)
    x = np.array([12.5, -3.25, -25.0, 0.05, -0.04, 3.5, 1.5, -0.25, 0.125, 0.01, -0.02, 0.03, 8.0])
    row = state_from_odometry(odometry_from_state(0, x, stamp_from_tick(7)))
    assert np.array_equal(row[[0, 1, 2, 6, 7, 8, 9, 10, 11]], x[[0, 1, 2, 6, 7, 8, 9, 10, 11]])
    assert np.allclose(row[3:6], [0.05, -0.04, 3.5 - 2 * math.pi], atol=1e-15)

    # a level camera 25 m up: windows of a person's projected size, 2280 px * 0.5 m / 25 m = 45.6 px;
    # nf = round(1280 / 45.6) x round(960 / 45.6) = 28 x 21 -> 21 rows (image v) of 28 columns (u)
    cam = CameraWithClassifier(1, None, RandomStreams(3))
    state = np.array([10.0, 20.0, -25.0, 0, 0, 0.3, 0, 0, 0, 0, 0, 0, 0])
    obs = cam.frame(state, np.array([[10.0, 20.0, 0.0]]), None, RandomStreams(3).get("camera"))
    assert obs.grid_dims == (28, 21)
    msg = detections_message(stamp_from_tick(50), "map", obs, detection_fields())
    assert (msg.height, msg.width, msg.point_step) == (21, 28, DETECTION_DTYPE.itemsize)
    assert msg.row_step == 28 * msg.point_step and not msg.is_bigendian and msg.is_dense
    names = [f.name for f in msg.fields]
    assert names[:5] == ["x", "y", "z", "llkd", "terrain_class"] and not any("person" in n for n in names)
    pts = cloud_points(msg)
    j, i = 17, 4  # point (row i, column j) is the core's window (j, i), centre in ENU
    assert np.allclose([pts["x"][i, j], pts["y"][i, j], pts["z"][i, j]],
                       ned_to_enu(obs.centres_ned[j, i]), atol=1e-4)
    assert pts["llkd"][i, j] == np.float32(obs.llkd_grid[j, i])
    corners = ned_to_enu(obs.corners_ned)
    assert np.allclose([pts["c3_x"][i, j], pts["c3_y"][i, j]], corners[j + 1, i + 1, :2], atol=1e-4)
    # the centre lies inside its corners (a window of ~0.5 m on the ground)
    cx = sorted([pts["c0_x"][i, j], pts["c3_x"][i, j]])
    assert cx[0] < pts["x"][i, j] < cx[1]
    # an empty observation is an empty cloud with the same fields
    empty = detections_message(stamp_from_tick(0), "map", None, detection_fields())
    assert (empty.height, empty.width, len(empty.data)) == (0, 0, 0)


@pytest.mark.graph
def test_ground_truth_sync_ticks_episodes_repeats_and_gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """GroundTruthSync's rules, on a real node fed messages directly (no other process)."""
    require_ros()
    from builtin_interfaces.msg import Time
    from qrsim_ros.msg import VehicleStatus

    from qrsim_ros.ros.ground_truth import GroundTruthSync
    from qrsim_ros.ros.names import VEHICLE_STATUS_TOPIC
    from qrsim_ros.ros.stamps import stamp_from_tick
    from qrsim_ros.ros.to_messages import odometry_from_state

    harness = Harness(tmp_path, free_domain(), monkeypatch)
    calls: list[tuple[int, bool, list[bool], list[bool]]] = []

    def handler(k: int, x: Any, accel: Any, present: Any, valid: Any, reset: bool) -> list[Any]:
        calls.append((k, reset, present.tolist(), valid.tolist()))
        return []

    x = np.zeros((2, 13))
    x[:, 0:3] = [[1.0, 2.0, -10.0], [5.0, 2.0, -10.0]]
    x[0, 5] = 0.2
    try:
        sync = GroundTruthSync(harness.node, 2, handler)

        def odom(k: int, i: int, row: Any = None) -> None:
            sync._on_odom(i, odometry_from_state(i, x[i] if row is None else row, stamp_from_tick(k)))

        def tick(k: int) -> None:
            odom(k, 0)
            odom(k, 1)

        tick(0)
        tick(1)
        tick(1)  # vehicle_dynamics re-sent tick 1: not stepped again
        assert calls == [(0, True, [True, True], [True, True]), (1, False, [True, True], [True, True])]
        odom(2, 0)  # uav2's tick 2 never comes: handled once uav1 has moved on, uav2 not present
        assert len(calls) == 2
        odom(3, 0)
        assert calls[-1] == (2, False, [True, False], [True, False])
        odom(3, 1)
        assert calls[-1][:2] == (3, False)
        bad = odometry_from_state(0, x[0], stamp_from_tick(4))
        bad.header.stamp = Time(sec=0, nanosec=90_000_001)  # not a multiple of 0.02 s: dropped, counted
        sync._on_odom(0, bad)
        nan_row = x[1].copy()
        nan_row[0] = np.nan
        odom(4, 0)
        odom(4, 1, nan_row)  # non-finite: handled without that vehicle, counted
        assert calls[-1] == (4, False, [True, False], [True, False])
        odom(7, 0)
        odom(7, 1)  # ticks 5 and 6 lost: 7 does not follow 4, rejected (a forged tick looks the same)
        assert calls[-1][:2] == (4, False)
        tick(8)  # 8 continues 7: a gap, not a forgery; stepping on, the ticks between counted
        assert calls[-1][:2] == (8, False)
        tick(0)  # a new episode starts at tick 0 again
        assert calls[-1][:2] == (0, True)
        tick(50_000_000)  # far ahead: both vehicles' rejected on arrival, the next tick taken as usual
        tick(1)
        assert [c[:2] for c in calls[-2:]] == [(0, True), (1, False)]
        c = sync.counters.values
        counted = (c["ground_truth_rejected"], c["ticks_incomplete"], c["ticks_skipped"], c["ticks_rejected"])
        assert counted == (2, 1, 3, 3)

        # with the fleet status: validity and episode per tick; once a status has been seen, a tick
        # waits for its status while someone publishes it
        calls.clear()
        synced = GroundTruthSync(harness.node, 2, handler, with_status=True)
        harness.node.create_publisher(VehicleStatus, VEHICLE_STATUS_TOPIC, 10)

        def status(k: int, episode: int, valid: list[bool]) -> None:
            msg = VehicleStatus(episode=episode, tick=k, valid=valid)
            msg.header.stamp = stamp_from_tick(k)
            synced._on_status(msg)

        def stick(k: int) -> None:
            for i in range(2):
                synced._on_odom(i, odometry_from_state(i, x[i], stamp_from_tick(k)))

        stick(0)  # no status seen yet: not awaited
        status(0, 1, [True, True])  # arrives late: kept for what it says
        stick(1)
        assert [c[:2] for c in calls] == [(0, True)]
        status(1, 1, [True, False])
        assert calls[-1] == (1, False, [True, True], [True, False])
        status(2, 1, [True, False])  # the status may come first too
        stick(2)
        assert calls[-1] == (2, False, [True, True], [True, False])
        status(3, 2, [True, True])
        stick(3)  # another episode counter without tick 0: rejected (a reset restarts at tick 0)
        assert len(calls) == 3 and synced.counters.values["ticks_rejected"] == 1
        status(4, 2, [True, True])
        stick(4)  # the next tick continues it (tick 0 was missed): the new episode, from here
        assert calls[-1] == (4, True, [True, True], [True, True])
        stick(4)
        status(4, 2, [True, True])  # the same tick of the same episode again: not stepped again
        assert len(calls) == 4

        # the fleet source: one /sim/vehicle_status per tick carries the exact state (thrust included)
        calls.clear()
        seen: list[tuple[Any, Any]] = []
        fleet = GroundTruthSync(harness.node, 2, lambda k, xx, a, p, v, r: seen.append((xx, a)) or handler(
            k, xx, a, p, v, r), with_accel=True, source="fleet")
        x[:, 12] = [4.2, 8.4]
        force = np.array([[0.1, 0.0, -9.81], [0.0, -0.2, -9.8]])

        def fleet_status(k: int, valid: list[bool], state: Any, specific_force: Any) -> None:
            msg = VehicleStatus(episode=1, tick=k, valid=valid, state=state, specific_force=specific_force)
            msg.header.stamp = stamp_from_tick(k)
            fleet._on_fleet(msg)

        fleet_status(0, [True, True], x.ravel().tolist(), force.ravel().tolist())
        assert calls == [(0, True, [True, True], [True, True])]
        assert np.array_equal(seen[0][0], x) and np.array_equal(seen[0][1], force)
        fleet_status(1, [True, True], x[0].tolist(), force.ravel().tolist())  # one vehicle's state only
        fleet_status(1, [True, True], [], [])  # a status without the fleet's state (another publisher)
        assert len(calls) == 1 and fleet.counters.values["ground_truth_rejected"] == 2
        fleet_status(2, [True, False], x.ravel().tolist(), force.ravel().tolist())
        assert len(calls) == 1 and fleet.counters.values["ticks_rejected"] == 1  # 2 does not follow 0
        fleet_status(3, [True, False], x.ravel().tolist(), force.ravel().tolist())
        assert calls[-1] == (3, False, [True, True], [True, False])
        assert fleet.counters.values["ticks_skipped"] == 2  # tick 1 never came complete, 2 was rejected
        with pytest.raises(ValueError, match="ground truth source"):
            GroundTruthSync(harness.node, 2, handler, source="gazebo")
    finally:
        harness.close()


@pytest.mark.graph
def test_wind_field_answers_a_repeated_tick_for_the_readers_matched_now(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vehicle_dynamics re-sends a tick whose wind it misses; wind_field answers it again, built for the
    readers matched now. Its first answer to tick 0 goes to nobody when vehicle_dynamics' reader matches
    late; re-sending that empty answer held a lockstep graph at tick 0 for ever."""
    require_ros()
    from geometry_msgs.msg import Vector3Stamped
    from qrsim_ros.msg import TickProgress

    from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC
    from qrsim_ros.ros.qos import QOS_TICK_PROGRESS

    domain = free_domain()
    env = ros_env(tmp_path, domain)
    params = {"scenario": "keep_spot_x10", "seed": 7, "num_vehicles": 1}
    wind = NodeProcess("wind_field", params, env, tmp_path)
    harness = Harness(tmp_path, domain, monkeypatch)
    handled: list[int] = []
    try:
        harness.node.create_subscription(
            TickProgress, TICK_PROGRESS_TOPIC,
            lambda m: handled.append(int(m.tick)) if m.node == "/wind_field" else None, QOS_TICK_PROGRESS)
        truth = GroundTruthPublisher(harness, 1)
        wait_for_graph(harness, truth, 1, ["/uav1/wind"], [wind])
        x = np.zeros((1, 13))
        x[0, 2], x[0, 12] = -10.0, 4.2
        a = np.array([[0.0, 0.0, -9.81]])
        truth.publish(0, x, a, 1)  # nobody reads uav1/wind yet: handled, nothing to send
        wait_for(lambda: 0 in handled, TICK_TIMEOUT_S, "wind_field's progress report of tick 0", [wind])
        assert harness.node.count_subscribers("/uav1/wind") == 0
        harness.subscribe(Vector3Stamped, "/uav1/wind")
        next_resend = 0.0

        def answered() -> bool:  # tick 0 re-sent every 0.5 s until its wind arrives
            nonlocal next_resend
            if harness.count(1, "/uav1/wind", 0) >= 1:
                return True
            if time.monotonic() >= next_resend:
                truth.publish(0, x, a, 1)
                next_resend = time.monotonic() + 0.5
            return False

        wait_for(answered, TICK_TIMEOUT_S, "uav1/wind stamped t=0 after tick 0 was re-sent", [wind])
        # each repeat answered, the model stepped once (no tick 1 yet). The progress report travels on its
        # own topic: it may arrive after the wind it follows (a fresh-clone CI saw the wind first), so it
        # is awaited, not read at once
        wait_for(lambda: handled.count(0) >= 2, TICK_TIMEOUT_S, "wind_field's report of the repeated tick 0",
                 [wind])
    finally:
        harness.close()
        codes = stop_all([wind])
    assert codes == {"wind_field": 0}, wind.log()[-2000:]


@pytest.mark.parametrize("name", ["plume_3a", "plume_3b", "plume_3e"])
def test_plume_builder_equals_the_simulators_plume(name: str) -> None:
    from qrsim_ros.core.common.rng import RandomStreams
    from qrsim_ros.core.engine.builders import ContinuingStreams, build_scenario_plume, plume_wind
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.core.world.wind import MeanWind

    overrides = {"seed": 21, "task": {"samples_per_location": 5}}
    sim = Simulator.from_scenario(name, overrides)
    sc = sim.scenario
    streams = RandomStreams(sc.seed)
    wind, rng = MeanWind.from_params(sc.wind, streams), ContinuingStreams(streams)
    points = np.random.default_rng(0).uniform([-100, -100, -30], [100, 100, 0], (200, 3))
    sources = []
    for episode in range(2):
        if episode:
            sim.reset()
        wind.reset()  # what the plume_field node does at every episode start
        plume = build_scenario_plume(sc, *plume_wind(wind), rng, reference=False).plume
        assert type(plume) is type(sim.plume)
        assert np.array_equal(plume.sources_ned, sim.plume.sources_ned)
        for k in range(1, 501):  # 10 s: the puff model emits and moves puffs on its own streams
            plume.step(k)
            sim.plume.step(k)
        assert np.array_equal(plume.concentration(points, 10.0), sim.plume.concentration(points, 10.0))
        sources.append(plume.sources_ned)
    assert not np.array_equal(sources[0], sources[1]) or name == "plume_3a"  # episodes draw new plumes


# --- the nodes ------------------------------------------------------------------------------------------

@pytest.mark.graph
def test_imu_gps_altimeter_camera_reproduce_the_simulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    require_ros()
    from geometry_msgs.msg import TwistStamped
    from qrsim_ros.msg import Altitude
    from sensor_msgs.msg import Imu, NavSatFix, NavSatStatus, PointCloud2

    from qrsim_ros.core.common.frames import euler_ned_frd_to_quaternion_enu_flu, frd_to_flu, ned_to_enu
    from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.ros.from_messages import cloud_points

    # Search and rescue 2B (noisy AHARS, GPS on, camera) with 2 vehicles hovering 25 m up: uav1 over the
    # first person of episode 1, uav2 over the geodetic origin, heading psi = 0.3 rad (NED).
    scenario, seed, n, psi = "search_rescue_2b", 7, 2, 0.3
    base = {"seed": seed, "num_vehicles": n, "task": {"dt_s": DT, "duration_steps": 100000}}
    person = Simulator.from_scenario(scenario, base).area.persons_position_ned[0]
    x0 = [[person[0], person[1], -25.0, 0.0, 0.0, psi], [0.0, 0.0, -25.0, 0.0, 0.0, psi]]
    sim = Simulator.from_scenario(scenario, {**base, "vehicle": {"initial_states": x0}})
    assert np.array_equal(sim.area.persons_position_ned[0], person)

    def record(s: Any) -> dict[str, Any]:
        return {"euler": s.ahars.orientation, "gyro": s.ahars.angular_velocity, "acc": s.ahars.acceleration,
                "h": s.ahars.height_m, "hdot": s.ahars.vertical_speed_mps, "lla": s.gps.lla.copy(),
                "gvel": s.gps.velocity_ned.copy(), "gvar": s.gps.position_variance_ned.copy(),
                "fix": s.gps.has_fix.copy(), "cam": s.camera_observations()}

    episodes = record_simulator(sim, [150, 60], record)
    cov = sim.ahars.noise_covariances()

    topics = {f"/uav{i + 1}/{t}": typ for i in range(n) for t, typ in
              (("imu/data", Imu), ("altimeter", Altitude), ("gps/fix", NavSatFix), ("gps/vel", TwistStamped),
               ("camera/detections", PointCloud2))}

    def due(k: int) -> list[str]:
        kinds = ["imu/data", "altimeter"] + (["gps/fix", "gps/vel"] if k % 10 == 0 else []) \
            + (["camera/detections"] if k % 50 == 0 else [])
        return [f"/uav{i + 1}/{t}" for i in range(n) for t in kinds]

    domain = free_domain()
    env = ros_env(tmp_path, domain)
    params = {"scenario": scenario, "seed": seed, "num_vehicles": n, "use_sim_time": True}
    procs: list[NodeProcess] = []
    harness = Harness(tmp_path, domain, monkeypatch)
    try:
        for exe in ("imu", "gps", "altimeter", "camera_detector"):
            procs.append(NodeProcess(exe, params, env, tmp_path / "logs"))
        for topic, typ in topics.items():
            harness.subscribe(typ, topic)
        truth = GroundTruthPublisher(harness, n)
        wait_for_graph(harness, truth, 4, list(topics), procs)
        t0 = time.monotonic()
        drive(harness, truth, episodes, due, procs, repeat_tick=5)
        wall_s = time.monotonic() - t0
        types = dict(harness.node.get_topic_names_and_types())
        codes = stop_all(procs)
    finally:
        stop_all(procs)
        harness.close()
    assert codes == dict.fromkeys(("imu", "gps", "altimeter", "camera_detector"), 0), codes
    ticks_run = sum(len(e) for e in episodes)
    print(f"lockstep: {ticks_run} ticks of {n} vehicles in {wall_s:.1f} s wall "
          f"({1e3 * wall_s / ticks_run:.1f} ms per tick round trip)")

    # types, as the graph reports them
    for topic, typ in topics.items():
        assert types[topic] == [f"{typ.__module__.split('.')[0]}/msg/{typ.__name__}"], topic

    got = harness.got
    for e, rows in enumerate(episodes, start=1):
        for i in range(n):
            ns = f"/uav{i + 1}"
            imu_ticks = sorted(k for (ee, t, k) in got if ee == e and t == f"{ns}/imu/data")
            gps_ticks = sorted(k for (ee, t, k) in got if ee == e and t == f"{ns}/gps/fix")
            cam_ticks = sorted(k for (ee, t, k) in got if ee == e and t == f"{ns}/camera/detections")
            # published on the update ticks only: 50 Hz, 5 Hz, 1 Hz of simulated time (within 10 %)
            assert imu_ticks == list(range(len(rows)))
            assert gps_ticks == list(range(0, len(rows), 10))
            assert cam_ticks == list(range(0, len(rows), 50))
            assert abs(stamps_hz(imu_ticks) - 50.0) <= 5.0 and abs(stamps_hz(gps_ticks) - 5.0) <= 0.5
            assert abs(stamps_hz(cam_ticks) - 1.0) <= 0.1
            for k, row in enumerate(rows):
                imu = got[(e, f"{ns}/imu/data", k)]
                alt = got[(e, f"{ns}/altimeter", k)][0]
                m = imu[0]
                assert m.header.frame_id == alt.header.frame_id == f"uav{i + 1}/base_link"
                # lockstep equality with the Simulator's AHARS (same streams, same truth)
                q = euler_ned_frd_to_quaternion_enu_flu(*row["euler"][i])
                o = m.orientation
                assert np.allclose([o.x, o.y, o.z, o.w], q, rtol=0, atol=1e-12), (e, i, k)
                w, f = m.angular_velocity, m.linear_acceleration
                assert np.allclose([w.x, w.y, w.z], frd_to_flu(row["gyro"][i]), rtol=0, atol=1e-12)
                assert np.allclose([f.x, f.y, f.z], frd_to_flu(row["acc"][i]), rtol=0, atol=1e-12)
                assert abs(alt.height - row["h"][i]) <= 1e-12
                assert abs(alt.vertical_speed - row["hdot"][i]) <= 1e-9
                if k % 10 == 0:
                    fix = got[(e, f"{ns}/gps/fix", k)][0]
                    vel = got[(e, f"{ns}/gps/vel", k)][0]
                    assert fix.header.frame_id == f"uav{i + 1}/base_link" and vel.header.frame_id == "map"
                    assert np.allclose([fix.latitude, fix.longitude], row["lla"][i, :2], rtol=0, atol=1e-12)
                    assert abs(fix.altitude - row["lla"][i, 2]) <= 1e-7
                    assert fix.status.status == (NavSatStatus.STATUS_FIX if row["fix"][i] else -1)
                    var = row["gvar"][i]
                    assert np.allclose(np.array(fix.position_covariance)[[0, 4, 8]], [var[1], var[0], var[2]],
                                       rtol=1e-12, atol=0)
                    v = vel.twist.linear
                    assert np.allclose([v.x, v.y, v.z], ned_to_enu(row["gvel"][i]), rtol=0, atol=1e-9)
                if k % 50 == 0:
                    cloud = got[(e, f"{ns}/camera/detections", k)][0]
                    assert cloud.header.frame_id == "map"
                    obs = row["cam"][i]
                    pts = cloud_points(cloud)
                    if obs is None:  # tick 0: the cameras have not taken a frame yet
                        assert k == 0 and pts.shape == (0, 0)
                        continue
                    nf1, nf2 = obs.grid_dims
                    assert pts.shape == (nf2, nf1)
                    # float32 of the core's values (the attitude round trip through the quaternion moves
                    # the float64 values by ~1e-16 relative, which can flip a float32 rounding)
                    centres = ned_to_enu(obs.centres_ned).transpose(1, 0, 2)
                    xyz = np.stack([pts["x"], pts["y"], pts["z"]], -1)
                    assert np.allclose(xyz, centres, rtol=0, atol=2e-5)
                    assert np.allclose(pts["llkd"], obs.llkd_grid.T, rtol=1e-6, atol=1e-5, equal_nan=True)
                    assert np.array_equal(pts["terrain_class"], obs.terrain_class.T)
    # a repeated tick is not stepped again: its outputs are published again, identical
    rep = got[(1, "/uav1/imu/data", 5)]
    assert len(rep) == 2 and rep[0].orientation == rep[1].orientation
    assert rep[0].linear_acceleration == rep[1].linear_acceleration

    # covariances from the noise parameters (diagonal)
    m = got[(1, "/uav1/imu/data", 3)][0]
    assert np.allclose(np.array(m.angular_velocity_covariance)[[0, 4, 8]], cov.angular_velocity, rtol=1e-12)
    assert np.allclose(np.array(m.linear_acceleration_covariance)[[0, 4, 8]], cov.linear_acceleration,
                       rtol=1e-12)
    assert np.allclose(np.array(m.orientation_covariance)[[0, 4, 8]], cov.orientation, rtol=1e-12)
    assert got[(1, "/uav1/altimeter", 3)][0].height_variance == pytest.approx(cov.height, rel=1e-12)

    # first principles, REP-145 at hover: specific force +g along FLU z (QRSim's g = 9.81; the noisy
    # dynamics add a few 0.01 m/s^2 of hover jitter, the accelerometer 0.0025 m/s^2 of noise), level, and
    # the heading: NED yaw psi = 0.3 is ENU yaw pi/2 - 0.3 (the estimator's error is ~3.5e-3 rad 1-sigma)
    for i in range(n):
        msgs = [got[(1, f"/uav{i + 1}/imu/data", k)][0] for k in range(1, 151)]
        fz = np.mean([mm.linear_acceleration.z for mm in msgs])
        assert abs(fz - 9.81) < 0.1
        q = msgs[-1].orientation
        yaw = math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y**2 + q.z**2))
        roll = math.atan2(2 * (q.w * q.x + q.y * q.z), 1 - 2 * (q.x**2 + q.y**2))
        pitch = math.asin(max(-1.0, min(1.0, 2 * (q.w * q.y - q.z * q.x))))
        assert abs(yaw - (math.pi / 2 - psi)) < 0.05 and abs(roll) < 0.05 and abs(pitch) < 0.05
    # GPS of uav2 hovering 25 m above the geodetic origin: within a few metres of it (pseudorange
    # error ~0.6 m 1-sigma times a DOP of ~1-3 for 10-13 satellites above 10 deg, plus the drift)
    for k in range(0, 151, 10):
        fix = got[(1, "/uav2/gps/fix", k)][0]
        north_m = (fix.latitude - QRSIM_ORIGIN.lat_deg) * 111_200.0
        east_m = ((fix.longitude - QRSIM_ORIGIN.lon_deg) * 111_200.0
                  * math.cos(math.radians(QRSIM_ORIGIN.lat_deg)))
        assert math.hypot(north_m, east_m) < 8.0 and abs(fix.altitude - QRSIM_ORIGIN.alt_m - 25.0) < 15.0
        assert fix.status.status == NavSatStatus.STATUS_FIX and fix.position_covariance_type == 2
    # the camera 25 m up and level: the 28 x 21 window grid (2280 px * 0.5 m / 25 m = 45.6 px windows)
    clouds = [cloud_points(got[(1, "/uav1/camera/detections", k)][0]) for k in (50, 100, 150)]
    assert all(c.shape == (21, 28) for c in clouds)
    # uav1 hovers over the person the Simulator placed first: the window over it scores "person". At
    # 25 m the score is N(0.59, 0.054) with a person and N(0.416, 0.065) without (IndepObsModel), so
    # the expected llkd is +KL(pos || neg) = +3.6 over the person and -KL(neg || pos) = -5.2 elsewhere.
    p_enu = ned_to_enu(person)
    over = [c["llkd"].reshape(-1)[np.argmin(np.hypot(c["x"] - p_enu[0], c["y"] - p_enu[1]))] for c in clouds]
    assert np.mean(over) > 0.0 > np.nanmedian(np.concatenate([c["llkd"].reshape(-1) for c in clouds]))


@pytest.mark.graph
def test_plume_field_reproduces_the_simulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_ros()
    from qrsim_ros.msg import Concentration
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from visualization_msgs.msg import MarkerArray

    from qrsim_ros.core.common.frames import ned_to_enu
    from qrsim_ros.core.engine.simulator import Simulator

    # Plume 3E (puffs, random wind direction, noisy sensor at 2 Hz); the vehicle hovers 3 m downwind of
    # the source at its height, where puffs pass.
    scenario, seed = "plume_3e", 5
    base = {"seed": seed, "task": {"dt_s": DT, "duration_steps": 100000, "samples_per_location": 5}}
    probe = Simulator.from_scenario(scenario, base)
    src, downwind = probe.plume.sources_ned[0], probe.wind.downwind_unit_ned()
    x0 = [[*(src + 3.0 * downwind)[:2], src[2], 0.0, 0.0, 0.0]]
    sim = Simulator.from_scenario(scenario, {**base, "vehicle": {"initial_states": x0}})
    episodes = record_simulator(sim, [150, 50], lambda s: {"c": s.plume_readings(),
                                                           "sources": s.plume.sources_ned.copy()})
    ticks = round(sim.scenario.vehicle.plume_sensor.dt_s / DT)

    domain = free_domain()
    env = ros_env(tmp_path, domain)
    params = {"scenario": scenario, "seed": seed, "num_vehicles": 1, "use_sim_time": True}
    procs: list[NodeProcess] = []
    harness = Harness(tmp_path, domain, monkeypatch)
    markers: list[Any] = []
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    try:
        procs.append(NodeProcess("plume_field", params, env, tmp_path / "logs"))
        # a camera_detector in a plume scenario has nothing to do: it must idle and still exit on SIGTERM
        procs.append(NodeProcess("camera_detector", params, env, tmp_path / "logs"))
        harness.subscribe(Concentration, "/uav1/plume/concentration")
        harness.node.create_subscription(MarkerArray, "/plume/markers", markers.append, latched)
        truth = GroundTruthPublisher(harness, 1)
        wait_for_graph(harness, truth, 1, ["/uav1/plume/concentration", "/plume/markers"], procs)
        wait_for(lambda: "/camera_detector" in [f"{ns.rstrip('/')}/{nm}" for nm, ns in
                                                harness.node.get_node_names_and_namespaces()],
                 START_TIMEOUT_S, "the idle camera_detector", procs)
        # tick 0 sent twice: the repeat is answered again, but not on the latched /plume/markers
        drive(harness, truth, episodes, lambda k: ["/uav1/plume/concentration"] if k % ticks == 0 else [],
              procs, repeat_tick=0)
        wait_for(lambda: len(markers) >= 2, TICK_TIMEOUT_S, "the markers of both episodes", procs)
        codes = stop_all(procs)
    finally:
        stop_all(procs)
        harness.close()
    assert codes == {"plume_field": 0, "camera_detector": 0}, codes
    assert "nothing to do" in procs[1].log()
    assert len(markers) == 2, [[m.pose.position for m in a.markers[1:]] for a in markers]  # one per episode
    nonzero = 0
    for e, rows in enumerate(episodes, start=1):
        got_ticks = sorted(k for (ee, _, k) in harness.got if ee == e)
        assert got_ticks == list(range(0, len(rows), ticks))  # 2 Hz of simulated time
        assert abs(stamps_hz(got_ticks) - 1.0 / (ticks * DT)) <= 0.1 / (ticks * DT)
        for k in got_ticks:
            # an episode's first tick may have been re-sent (resend_until): answered again, identically
            msgs = harness.got[(e, "/uav1/plume/concentration", k)]
            assert len(msgs) == 1 or k == 0, (e, k, len(msgs))
            for m in msgs:
                assert m.header.frame_id == "uav1/base_link"
                assert abs(m.concentration - rows[k]["c"][0]) <= 1e-12, (e, k)
                assert m.variance == pytest.approx(sim.scenario.vehicle.plume_sensor.sigma**2, rel=1e-12)
            nonzero += abs(msgs[0].concentration) > 0
        # the latched markers: a DELETEALL, then one sphere per source in map ENU
        arr = markers[e - 1].markers
        assert arr[0].action == 3 and len(arr) == 1 + len(rows[0]["sources"])
        for mk, s in zip(arr[1:], rows[0]["sources"], strict=True):
            p = mk.pose.position
            assert mk.header.frame_id == "map" and np.allclose([p.x, p.y, p.z], ned_to_enu(s), atol=1e-12)
    assert nonzero > 0
    assert not np.array_equal(episodes[0][0]["sources"], episodes[1][0]["sources"])


@pytest.mark.graph
def test_bad_parameters_exit_with_one_line(tmp_path: Path) -> None:
    require_ros()
    env = ros_env(tmp_path)  # a free domain
    cases = {
        "imu": ({"seed": -5}, "seed"),
        "gps": ({"scenario": "no_such_scenario"}, "scenario"),
        "altimeter": ({"num_vehicles": 5000}, "num_vehicles"),
        "camera_detector": ({"scenario": str(tmp_path / "missing.yaml")}, "scenario"),
        "plume_field": ({"scenario": "plume_3a", "seed": "not_a_number"}, "seed"),
    }
    procs = [NodeProcess(exe, params, env, tmp_path / "logs") for exe, (params, _) in cases.items()]
    try:
        codes = {p.name: p.proc.wait(timeout=START_TIMEOUT_S) for p in procs}
    finally:
        stop_all(procs)
    for p in procs:
        assert codes[p.name] == 1, f"{p.name}: exit {codes[p.name]}\n{p.log()}"
        lines = node_output_lines(p.log())
        assert len(lines) == 1 and "error" in lines[0] and cases[p.name][1] in lines[0], p.log()

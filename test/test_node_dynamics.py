"""vehicle_dynamics and wind_field as real processes over real DDS (keep_spot).

A test-side rclpy node (own context, own ROS_DOMAIN_ID, spun in a background thread) publishes attitude
commands stamped with the simulated time it receives and records what the nodes publish; every wait is
on an event with a timeout. Expected values come from first principles: at hover the vehicle stays
near its start 10 m up (ENU z = +10) and the body specific force is +g along FLU z (REP-145).
Also: the ground-truth conversions round-trip against the core's frames (no processes).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosenv import TestProcess, free_domain, node_output_lines, python, require_ros, ros_env

G = 9.81
HOVER_THROTTLE = 0.59004353928


# --- helpers shared with test_lockstep_agreement.py ---------------------------------------------------

class NodeProcess:
    """A qrsim_ros node run as ``python -m qrsim_ros.nodes.<module> --ros-args -p k:=v ...`` through
    ``rosenv.TestProcess`` (reaped whatever happens), its stdout and stderr in files of their own."""

    def __init__(self, module: str, params: dict[str, Any], env: dict[str, str], log_dir: Path) -> None:
        args = [python(), "-m", f"qrsim_ros.nodes.{module}", "--ros-args"]
        for key, value in params.items():
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            args += ["-p", f"{key}:={text}"]
        self.name = module
        self.stdout_path = log_dir / f"{module}.out"
        self.stderr_path = log_dir / f"{module}.err"
        self.process = TestProcess(args, env, log_dir, log=self.stdout_path, stderr_log=self.stderr_path)
        self.proc = self.process.proc

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_exit(self, timeout_s: float) -> int:
        """Wait for the process to exit by itself; returns its exit status (stops it if the wait fails)."""
        try:
            return self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.stop()
            self.process.close()

    def stop(self, timeout_s: float = 10.0) -> int:
        """SIGTERM, wait; returns the exit status (the process is killed if it does not exit)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} ignored SIGTERM for {timeout_s} s; stderr:\n{self.stderr()}"
                                 ) from None
        finally:
            self.process.close(stop_s=0.0)  # (killed, with its process group, if it ignored the signal)


class Probe:
    """The test's own rclpy node in a private context and DDS domain, spun in a background thread."""

    def __init__(self, tmp_path: Path, domain_id: int, monkeypatch: pytest.MonkeyPatch) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path / "ros_log"))
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node(f"test_probe_{os.getpid()}", context=self.context)
        # the nodes' executor (about 5x the callbacks a second): the SingleThreadedExecutor fell behind the
        # keep-spot run's six topics at 2x real time beside another test (its /clock 7 s of simulated time
        # late after 20 s, so the commands it stamped were stale)
        try:
            from rclpy.experimental import EventsExecutor
        except ImportError:  # an rclpy without it
            EventsExecutor = SingleThreadedExecutor
        self.executor = EventsExecutor(context=self.context)
        self.executor.add_node(self.node)
        # The simulated time to stamp commands with: the latest /clock, taken on an executor of its own. The
        # probe's executor hands over every tick's messages in order, and beside 2 CPU burners it fell 18 s
        # of simulated time behind a 2x run: every command stamped from its /clock was rejected as stale.
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock

        self._latest_clock: Any = None
        self._clock_node = rclpy.create_node(f"test_clock_{os.getpid()}", context=self.context,
                                             start_parameter_services=False)
        self._clock_node.create_subscription(Clock, "/clock", self._on_clock,
                                             QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))
        self._clock_executor = SingleThreadedExecutor(context=self.context)
        self._clock_executor.add_node(self._clock_node)
        self._threads = [threading.Thread(target=self._spin, args=(ex,), daemon=True)
                         for ex in (self.executor, self._clock_executor)]
        for thread in self._threads:
            thread.start()

    def _on_clock(self, msg: Any) -> None:
        self._latest_clock = msg.clock

    def sim_time(self) -> Any:
        """The latest /clock time (builtin_interfaces/Time; zero before the first)."""
        from builtin_interfaces.msg import Time

        latest = self._latest_clock
        return Time() if latest is None else latest

    def sim_time_s(self) -> float:
        """The latest /clock time [s] (0 before the first)."""
        t = self.sim_time()
        return t.sec + t.nanosec * 1e-9

    def _spin(self, executor: Any) -> None:
        while self.context.ok():
            try:
                executor.spin_once(timeout_sec=0.05)
            except Exception:  # the context shut down under the spin
                if self.context.ok():
                    raise

    def close(self) -> None:
        self.context.try_shutdown()
        for thread in self._threads:
            thread.join(timeout=10)
        self._clock_node.destroy_node()
        self.node.destroy_node()


def reliable(depth: int = 1000) -> Any:
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


def latched() -> Any:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str,
             processes: Sequence[NodeProcess] = (), *, exit_grace_s: float = 0.0) -> None:
    """Wait until ``condition()`` (polled on the test thread; the data arrive on the probe's thread). One of
    ``processes`` exiting fails the wait, unless ``condition()`` holds within ``exit_grace_s`` after the
    exit (what the process sent just before it, still on its way to the probe)."""
    deadline = time.monotonic() + timeout_s
    event = threading.Event()
    exited_at: float | None = None
    while not condition():
        for p in processes:
            if p.proc.poll() is not None and exited_at is None:
                exited_at = time.monotonic()
            if p.proc.poll() is not None and time.monotonic() - exited_at > exit_grace_s:
                raise AssertionError(f"{p.name} exited with {p.proc.returncode} while waiting for {what}; "
                                     f"stderr:\n{p.stderr()}")
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.name}:\n{p.stderr()[-3000:]}" for p in processes)
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}\n{logs}")
        event.wait(0.01)


def stop_all(processes: Sequence[NodeProcess]) -> list[int]:
    codes = []
    for p in processes:
        codes.append(p.stop())
    return codes


class LockstepRun:
    """wind_field and vehicle_dynamics (``procs``) in lockstep as fast as possible, and the test's ``probe``
    in their ROS domain (see ``lockstep_run``)."""

    def __init__(self, procs: list[NodeProcess], probe: Probe) -> None:
        self.procs = procs
        self.probe = probe
        self.node = probe.node

    def wait_for_the_end(self, timeout_s: float) -> None:
        """Wait for vehicle_dynamics to end by itself at its ``duration_s`` (wind_field must live on);
        it exits with 0."""
        dyn = self.procs[1]
        wait_for(lambda: dyn.proc.poll() is not None, timeout_s, "vehicle_dynamics to finish duration_s",
                 self.procs[:1])
        assert dyn.proc.returncode == 0, dyn.stderr()


@contextlib.contextmanager
def lockstep_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str, num_vehicles: int,
                 duration_s: float, seed: int, domain_id: int | None = None,
                 **dynamics: Any) -> Iterator[LockstepRun]:
    """wind_field + vehicle_dynamics on ``scenario`` (``seed``, ``num_vehicles``) in lockstep at
    real_time_factor 0 for ``duration_s`` of simulated time, the clock held at tick 0 until every vehicle
    has a command, commands held forever (command_timeout_s 0), no TF, the vehicle_dynamics parameters
    ``dynamics`` added; in a free ROS domain unless ``domain_id``. On the way out the probe is closed and
    the nodes stopped; after a body that did not fail, both exited with 0."""
    domain_id = free_domain() if domain_id is None else domain_id
    env = ros_env(tmp_path, domain_id)
    common = {"scenario": scenario, "seed": seed, "num_vehicles": num_vehicles}
    params = {**common, "lockstep": True, "real_time_factor": 0.0, "wait_for_commands": True,
              "command_timeout_s": 0.0, "duration_s": duration_s, "tf_every_n_ticks": 0, **dynamics}
    procs = [NodeProcess("wind_field", common, env, tmp_path),
             NodeProcess("vehicle_dynamics", params, env, tmp_path)]
    try:
        probe = Probe(tmp_path, domain_id, monkeypatch)
    except BaseException:
        stop_all(procs)
        raise
    try:
        yield LockstepRun(procs, probe)
    finally:
        probe.close()
        codes = stop_all(procs)
    assert codes == [0, 0], [p.stderr() for p in procs]


def quaternion_rotate(q_xyzw: Sequence[float], v: Sequence[float]) -> np.ndarray:
    """v rotated by the unit quaternion q (x, y, z, w): q v q*, written out (Rodrigues form)."""
    x, y, z, w = q_xyzw
    u = np.array([x, y, z])
    v = np.asarray(v, float)
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


# --- conversions (no processes) -----------------------------------------------------------------------

def test_odometry_round_trip_and_frames() -> None:
    require_ros()
    from qrsim_ros.core.common.frames import dcm_ned_to_body
    from qrsim_ros.ros.from_messages import specific_force_from_accel, state_from_odometry
    from qrsim_ros.ros.stamps import stamp_from_tick, tick_of_stamp
    from qrsim_ros.ros.to_messages import (
        accel_message,
        fill_accel,
        fill_ground_truth,
        odometry_from_state,
        odometry_message,
        transform,
    )

    rng = np.random.default_rng(3)
    for _ in range(20):
        x = np.concatenate([rng.uniform(-50, 50, 3), rng.uniform(-1.2, 1.2, 2), rng.uniform(-3, 3, 1),
                            rng.uniform(-5, 5, 6), [16.5]])
        msg = odometry_from_state(1, x, stamp_from_tick(12345))
        assert (msg.header.frame_id, msg.child_frame_id) == ("map", "uav2/base_link")
        assert tick_of_stamp(msg.header.stamp) == 12345
        p = msg.pose.pose.position
        # ENU position: east = NED y, north = NED x, up = -NED z (exact)
        assert (p.x, p.y, p.z) == (x[1], x[0], -x[2])
        # the quaternion rotates FLU body axes into ENU as the NED/FRD DCM does (first principles)
        o = msg.pose.pose.orientation
        r_ned_frd = dcm_ned_to_body(x[3], x[4], x[5]).T
        for axis in np.eye(3):
            flu = axis * [1.0, -1.0, -1.0]  # the FRD axis in FLU
            ned = r_ned_frd @ axis
            enu = [ned[1], ned[0], -ned[2]]
            np.testing.assert_allclose(quaternion_rotate([o.x, o.y, o.z, o.w], flu), enu, atol=1e-14)
        back = state_from_odometry(msg)
        np.testing.assert_array_equal(back[[0, 1, 2, 6, 7, 8, 9, 10, 11]], x[[0, 1, 2, 6, 7, 8, 9, 10, 11]])
        np.testing.assert_allclose(back[3:5], x[3:5], atol=1e-14)
        assert math.isclose(math.remainder(back[5] - x[5], 2 * math.pi), 0.0, abs_tol=1e-14)
        a = rng.normal(size=3)
        acc = fill_accel(accel_message(0), a, stamp_from_tick(1))
        assert (acc.accel.linear.x, acc.accel.linear.y, acc.accel.linear.z) == (a[0], -a[1], -a[2])
        np.testing.assert_array_equal(specific_force_from_accel(acc), a)
    assert tick_of_stamp(stamp_from_tick(10**9)) == 10**9  # exact far out (20 million seconds)
    # the node's batched fill (all vehicles at once) writes the same messages
    x2 = np.array([x, x[::-1]])
    a2 = rng.normal(size=(2, 3))
    odoms, accels = [odometry_message(0), odometry_message(1)], [accel_message(0), accel_message(1)]
    tfs = [transform("map", f"uav{i + 1}/base_link", np.zeros(3), [0, 0, 0, 1], stamp_from_tick(0))
           for i in (0, 1)]
    fill_ground_truth(odoms, accels, tfs, x2, a2, stamp_from_tick(7))
    for i in (0, 1):
        one = odometry_from_state(i, x2[i], stamp_from_tick(7))
        assert odoms[i] == one and odoms[i].child_frame_id == f"uav{i + 1}/base_link"
        assert accels[i] == fill_accel(accel_message(i), a2[i], stamp_from_tick(7))
        tr, rot = tfs[i].transform.translation, tfs[i].transform.rotation
        pos = one.pose.pose.position
        assert (tr.x, tr.y, tr.z) == (pos.x, pos.y, pos.z)
        assert rot == one.pose.pose.orientation and tfs[i].header.stamp == one.header.stamp


def test_turbulence_rewind_redraws_what_the_simulator_draws() -> None:
    """wind_field updates the turbulence one step ahead of the Simulator; at a reset it takes that update
    back (``rewind_updates``): the next episode then draws exactly the Simulator's gusts."""
    from qrsim_ros.core.common.rng import RandomStreams
    from qrsim_ros.core.world.turbulence import DrydenTurbulence, TurbulenceParams

    x = np.zeros((2, 13))
    x[:, 2] = [-10.0, -25.0]
    x[:, 6] = [1.0, 3.0]
    sim, node = (DrydenTurbulence(2, TurbulenceParams(w6_mps=2.0), RandomStreams(17)) for _ in range(2))
    for t in (sim, node):
        t.reset(x)
    for k in range(1, 71):  # 70 updates cross a 64-update noise block: the rewind reaches into it
        sim.step(k, x)
        node.step(k, x)
    node.step(71, x)  # the gust of a step that a reset pre-empts
    node.rewind_updates(1)
    for t in (sim, node):
        t.reset(x)
    for k in range(1, 40):
        assert sim.step(k, x) and node.step(k, x)
        np.testing.assert_array_equal(node.velocity_body, sim.velocity_body)
    with pytest.raises(ValueError, match="cannot rewind"):
        node.rewind_updates(10**6)


# --- the nodes --------------------------------------------------------------------------------------------

#: Wall seconds a wait on what the probe received may take: its lists lag the node by seconds under load.
PROBE_WAIT_S = 30.0


@pytest.mark.graph
@pytest.mark.timeout(300)
def test_dynamics_and_wind_in_keep_spot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Clock, odometry, specific force, /tf, /tf_static, command validation and timeout, reset, SIGTERM."""
    require_ros()
    from geometry_msgs.msg import AccelStamped, Vector3Stamped
    from nav_msgs.msg import Odometry
    from qrsim_ros.msg import AttitudeCommand, VehicleStatus
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import UInt32
    from std_srvs.srv import Trigger
    from tf2_msgs.msg import TFMessage

    domain = free_domain()
    env = ros_env(tmp_path, domain)
    common = {"scenario": "keep_spot", "seed": 11}
    # real time: the probe takes every tick of six topics in this process, which fell behind a 2x run by
    # seconds beside 2 CPU burners (its lists, not the node, lagged the waits below past their budgets)
    dyn_params = {**common, "lockstep": True, "real_time_factor": 1.0, "wait_for_commands": True,
                  "command_timeout_s": 0.6}
    procs = [NodeProcess("wind_field", common, env, tmp_path),
             NodeProcess("vehicle_dynamics", dyn_params, env, tmp_path)]
    probe = Probe(tmp_path, domain, monkeypatch)
    steady = threading.Event()
    pilot: threading.Thread | None = None
    try:
        node = probe.node
        got: dict[str, list[Any]] = {k: [] for k in ("clock", "odom", "accel", "tf", "static", "status",
                                                      "episode", "wind")}
        node.create_subscription(Clock, "/clock", got["clock"].append, reliable())
        node.create_subscription(Odometry, "/uav1/ground_truth/odom", got["odom"].append, reliable())
        node.create_subscription(AccelStamped, "/uav1/ground_truth/accel", got["accel"].append, reliable())
        node.create_subscription(TFMessage, "/tf", got["tf"].append, reliable())
        node.create_subscription(TFMessage, "/tf_static", got["static"].append, latched())
        node.create_subscription(VehicleStatus, "/sim/vehicle_status", got["status"].append, reliable())
        node.create_subscription(UInt32, "/sim/episode", got["episode"].append, latched())
        node.create_subscription(Vector3Stamped, "/uav1/wind", got["wind"].append, reliable())
        cmd_pub = node.create_publisher(AttitudeCommand, "/uav1/cmd/attitude", reliable(10))
        reset_client = node.create_client(Trigger, "/vehicle_dynamics/reset")

        def command(throttle: float = HOVER_THROTTLE, frame: str = "uav1/base_link_frd", pitch: float = 0.0,
                    roll: float = 0.0) -> None:
            m = AttitudeCommand(pitch=pitch, roll=roll, throttle=throttle, yaw_rate=0.0, battery_voltage=12.0)
            m.header.frame_id = frame
            m.header.stamp = probe.sim_time()
            cmd_pub.publish(m)

        def last_status() -> Any:
            return got["status"][-1] if got["status"] else None

        def ticks(msgs: list[Any]) -> list[int]:
            return [round((m.header.stamp.sec * 10**9 + m.header.stamp.nanosec) / 20_000_000) for m in msgs]

        # wait_for_commands: the clock stays at tick 0 until the first valid command
        wait_for(lambda: len(got["odom"]) >= 1 and len(got["static"]) >= 1, 30, "tick 0 and /tf_static",
                 procs)
        assert ticks(got["odom"]) == [0] * len(got["odom"])

        pilot_throttle = [HOVER_THROTTLE]
        pilot_until_s = [math.inf]  # the simulated time [s] after which the autopilot falls silent

        def keep_commanding() -> None:  # an autopilot at ~50 Hz wall (50 Hz of simulated time at 1x)
            while not steady.is_set():
                if probe.sim_time_s() < pilot_until_s[0]:
                    command(throttle=pilot_throttle[0])
                steady.wait(0.02)

        pilot = threading.Thread(target=keep_commanding, daemon=True)
        pilot.start()
        # (the probe may discover a publisher seconds after the others: wait for every topic)
        wait_for(lambda: len(got["odom"]) >= 101 and got["clock"][-1].clock.sec >= 2
                 and len(got["wind"]) >= 20 and all(got[key] for key in ("accel", "tf", "status", "episode")),
                 30,
                 "2 s of simulated flight and every topic", procs)

        # clock and odometry: every tick, 50 Hz of simulated time, the REP-105 frames
        odom = list(got["odom"])
        k = ticks(odom)
        assert sorted(set(k)) == list(range(max(k) + 1)) and np.all(np.diff(k) >= 0)  # every tick, in order
        clock_s = [c.clock.sec + c.clock.nanosec * 1e-9 for c in got["clock"]]
        assert clock_s[-1] >= 2.0 and np.all(np.diff(clock_s) >= 0)
        assert all((m.header.frame_id, m.child_frame_id) == ("map", "uav1/base_link") for m in odom)
        z = np.array([m.pose.pose.position.z for m in odom if ticks([m])[0] <= 100])
        # hovering at its start, 10 m up (ENU z up). Open loop, the vehicle drifts with the air: the
        # vertical Dryden gust at 10 m has sigma ~0.2 m/s and a correlation time of ~20 s, so over the
        # first 2 s it moves well under 3 sigma x 2 s = 1.2 m
        assert z[0] == 10.0 and np.all(np.abs(z - 10.0) < 1.5), z
        accel = [a for a in got["accel"] if ticks([a])[0] >= 10]
        az = np.array([a.accel.linear.z for a in accel])
        assert accel and accel[0].header.frame_id == "uav1/base_link"
        # REP-145: at hover the specific force is +g up the FLU z axis; tolerance: the noisy dynamics and
        # turbulence move it by a few tenths of m/s^2 around g
        assert abs(float(np.mean(az)) - G) < 0.3 and np.all(np.abs(az - G) < 2.0), az
        assert got["wind"] and got["wind"][-1].header.frame_id == "map"
        wind = np.array([[w.vector.x, w.vector.y, w.vector.z] for w in got["wind"]])
        assert np.all(np.isfinite(wind)) and np.ptp(wind[:, 0]) > 0  # turbulence: gusts vary
        tf = got["tf"][-1].transforms
        assert [(t.header.frame_id, t.child_frame_id) for t in tf] == [("map", "uav1/base_link")]

        # /tf_static: map_ned's x (north) is map's y, its z (down) is map's -z; base_link_frd is base_link
        # turned about x; the camera looks down (optical z = body down) with image x = body right
        static = {(t.header.frame_id, t.child_frame_id): t.transform.rotation
                  for t in got["static"][-1].transforms}
        assert set(static) == {("map", "map_ned"), ("uav1/base_link", "uav1/base_link_frd"),
                               ("uav1/base_link", "uav1/camera_optical")}

        def rot(key: tuple[str, str], v: Sequence[float]) -> np.ndarray:
            q = static[key]
            return quaternion_rotate([q.x, q.y, q.z, q.w], v)

        np.testing.assert_allclose(rot(("map", "map_ned"), [1, 0, 0]), [0, 1, 0], atol=1e-12)
        np.testing.assert_allclose(rot(("map", "map_ned"), [0, 0, 1]), [0, 0, -1], atol=1e-12)
        np.testing.assert_allclose(rot(("uav1/base_link", "uav1/base_link_frd"), [0, 1, 0]), [0, -1, 0],
                                   atol=1e-12)
        np.testing.assert_allclose(rot(("uav1/base_link", "uav1/camera_optical"), [0, 0, 1]), [0, 0, -1],
                                   atol=1e-12)
        np.testing.assert_allclose(rot(("uav1/base_link", "uav1/camera_optical"), [1, 0, 0]), [0, -1, 0],
                                   atol=1e-12)
        assert [e.data for e in got["episode"]] == [1]

        # bad commands (among the autopilot's): rejected, counted, without effect on the vehicle
        before = last_status()
        assert list(before.names) == ["uav1"] and list(before.valid) == [True]
        assert list(before.commands_clamped) == [0]
        rejected = before.commands_rejected[0]  # 0, unless the autopilot's stamps lagged (stale) under load
        command(throttle=math.nan)
        command(frame="uav2/base_link_frd")
        command(frame="uav1/base_link", pitch=math.inf)
        wait_for(lambda: last_status().commands_rejected[0] >= rejected + 3, PROBE_WAIT_S, "three rejections",
                 procs)
        # the window: from the tick whose status counted them, 0.5 s (the probe's lists may lag the node's
        # time by seconds under load, so positions in them are not times)
        k_rejected = next(ticks([m])[0] for m in got["status"] if m.commands_rejected[0] >= rejected + 3)
        wait_for(lambda: ticks(got["odom"][-1:])[0] >= k_rejected + 25, PROBE_WAIT_S, "0.5 s more", procs)
        z_of_tick = {ticks([m])[0]: m.pose.pose.position.z for m in got["odom"]}
        z = np.array([z_of_tick[k] for k in range(k_rejected, k_rejected + 26)])
        # still hovering on the held commands: at most drifting with the air (0.5 s x 3 sigma of 0.2 m/s)
        assert np.all(np.abs(z - z[0]) < 0.5), z
        # the autopilot asks for more than full throttle: clamped, counted, the vehicle climbs. It streams
        # it, as it streamed its hover, for 1 s of simulated time (a climb that went on while the probe's
        # lists lagged took the vehicle out of the area), then falls silent
        n_before_climb = len(got["odom"])
        pilot_until_s[0] = probe.sim_time_s() + 1.0
        pilot_throttle[0] = 1.5
        wait_for(lambda: last_status().commands_clamped[0] >= 1, PROBE_WAIT_S, "a clamp", procs)
        steady.set()
        pilot.join(timeout=5)
        # command timeout (0.6 s simulated): hover again, counted
        wait_for(lambda: last_status().command_timeouts[0] >= 1 and not last_status().command_fresh[0],
                 PROBE_WAIT_S,
                 "the command timeout", procs)
        climb = got["odom"][n_before_climb:]
        vz = np.array([m.twist.twist.linear.z for m in climb])
        assert vz.max() > 1.0, vz  # full throttle: climbing (FLU z up) at more than 1 m/s
        assert all(np.isfinite([m.pose.pose.position.z, m.twist.twist.linear.z]).all() for m in got["odom"])
        assert list(last_status().valid) == [True]

        # reset: episode 2, tick 0 again, back at the start
        assert reset_client.wait_for_service(timeout_sec=10)
        future = reset_client.call_async(Trigger.Request())
        wait_for(future.done, PROBE_WAIT_S, "the reset response", procs)
        assert future.result().success, future.result().message
        wait_for(lambda: got["episode"][-1].data == 2, PROBE_WAIT_S, "/sim/episode 2", procs)
        wait_for(lambda: any(ticks([m])[0] == 0 and abs(m.pose.pose.position.z - 10.0) < 1e-9
                             for m in got["odom"][n_before_climb:]), PROBE_WAIT_S, "tick 0 of episode 2",
                 procs)
    finally:
        steady.set()
        if pilot is not None:
            pilot.join(timeout=5)
        probe.close()
        t0 = time.monotonic()
        codes = stop_all(procs)
        stop_s = time.monotonic() - t0
    assert codes == [0, 0], [p.stderr() for p in procs]
    assert stop_s < 10.0
    assert all(p.proc.poll() is not None for p in procs)


@pytest.mark.graph
def test_bad_parameter_exits_with_one_line(tmp_path: Path) -> None:
    require_ros()
    env = ros_env(tmp_path)  # a free domain
    p = NodeProcess("vehicle_dynamics", {"scenario": "keep_spot", "real_time_factor": -1.0}, env, tmp_path)
    code = p.wait_exit(60)
    lines = node_output_lines(p.stderr())
    assert code == 1
    assert len(lines) == 1 and "real_time_factor" in lines[0] and "-1" in lines[0], lines


@pytest.mark.graph
def test_float_parameters_take_integers_but_not_text(tmp_path: Path) -> None:
    """`-p duration_s:=1` (an integer) is the float 1.0; a string is one error line naming it."""
    require_ros()
    env = ros_env(tmp_path)  # a free domain
    for params, want_code in (({"duration_s": 1, "real_time_factor": 0}, 0), ({"duration_s": "abc"}, 1)):
        p = NodeProcess("vehicle_dynamics", {"scenario": "keep_spot", **params}, env, tmp_path)
        code = p.wait_exit(60)
        err = node_output_lines(p.stderr())
        assert code == want_code, err
        if want_code:
            assert len(err) == 1 and "'duration_s'='abc' must be a number" in err[0], err
        else:
            assert "duration_s=1 reached: 50 steps" in p.stderr() + p.stdout_path.read_text(), p.stderr()


@pytest.mark.graph
def test_lockstep_timeout_names_the_missing_input_and_continues(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """No wind_field: after lockstep_timeout_s the dynamics names the missing wind and steps on with the
    held inputs (still air), one step per timeout ('continue')."""
    require_ros()
    from nav_msgs.msg import Odometry

    domain = free_domain()
    env = ros_env(tmp_path, domain)
    params = {"scenario": "keep_spot", "seed": 3, "lockstep": True, "real_time_factor": 0.0,
              "lockstep_timeout_s": 0.1, "lockstep_on_timeout": "continue"}
    procs = [NodeProcess("vehicle_dynamics", params, env, tmp_path)]
    probe = Probe(tmp_path, domain, monkeypatch)
    odom: list[Any] = []
    try:
        probe.node.create_subscription(Odometry, "/uav1/ground_truth/odom", odom.append, reliable())
        wait_for(lambda: "uav1/wind@t=0.04" in procs[0].stderr(), 30, "three timeouts", procs)
        wait_for(lambda: len({(m.header.stamp.sec, m.header.stamp.nanosec) for m in odom}) >= 2, 30,
                 "the clock moving", procs)
    finally:
        probe.close()
        codes = stop_all(procs)
    assert codes == [0]
    err = procs[0].stderr()
    assert "lockstep: no uav1/wind@t=0.00 after 0.1 s: stepping on with the held inputs" in err, err
    assert "uav1/wind@t=0.02" in err
    assert np.all(np.isfinite([m.pose.pose.position.z for m in odom]))


def _windowed_run(window: int, last_tick: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parameters of keep_spot's wind_field and of a lockstep vehicle_dynamics with a window of ``window``
    ticks that stops at ``last_tick``; two consumers (wind_field and the test's), both in the start gate."""
    common = {"scenario": "keep_spot", "seed": 3}
    dynamics = {**common, "lockstep": True, "real_time_factor": 0.0, "lockstep_timeout_s": 0.2,
                "lockstep_window_ticks": window, "lockstep_consumers": 2, "duration_s": last_tick * 0.02,
                "start_subscribers": 2}
    return common, dynamics


@pytest.mark.graph
def test_a_progress_report_sent_before_vehicle_dynamics_subscribed_counts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer reports its progress once, before vehicle_dynamics' /sim/tick_progress reader exists
    (as one whose writer discovers that reader late does): the report is latched, so the lockstep window
    does not wait for ever at tick 5 for a report that was sent already; the run reaches duration_s and
    drains on it."""
    require_ros()
    from qrsim_ros.msg import TickProgress, VehicleStatus

    from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC
    from qrsim_ros.ros.qos import QOS_TICK_PROGRESS

    domain = free_domain()
    env = ros_env(tmp_path, domain)
    window, last_tick = 5, 50
    common, dynamics = _windowed_run(window, last_tick)
    probe = Probe(tmp_path, domain, monkeypatch)
    procs = [NodeProcess("wind_field", common, env, tmp_path)]
    ticks: list[int] = []
    try:
        probe.node.create_subscription(VehicleStatus, "/sim/vehicle_status", lambda m: ticks.append(m.tick),
                                       reliable())
        progress = probe.node.create_publisher(TickProgress, TICK_PROGRESS_TOPIC, QOS_TICK_PROGRESS)
        progress.publish(TickProgress(node="/early_consumer", episode=1, tick=last_tick))
        assert progress.get_subscription_count() == 0  # nobody read it
        procs.append(NodeProcess("vehicle_dynamics", dynamics, env, tmp_path))
        assert procs[1].wait_exit(60) == 0, procs[1].stderr()
        wait_for(lambda: last_tick in ticks, 10, "the last tick's status")
    finally:
        probe.close()
        codes = stop_all(procs)
    err = procs[1].stderr()
    assert "duration_s=1 reached" in err and "/early_consumer" not in err, err
    assert codes[0] == 0


@pytest.mark.graph
def test_lockstep_window_holds_the_clock_for_a_slow_consumer_and_drains_at_the_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ground-truth consumer that reports its progress (/sim/tick_progress) slowly: in lockstep the
    clock runs at most lockstep_window_ticks ahead of it, and at duration_s the node stops only once it
    has handled the last tick (a fast run loses none of its outputs)."""
    require_ros()
    from qrsim_ros.msg import TickProgress, VehicleStatus

    from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC
    from qrsim_ros.ros.qos import QOS_TICK_PROGRESS

    domain = free_domain()
    env = ros_env(tmp_path, domain)
    window, last_tick = 5, 50
    common, dynamics = _windowed_run(window, last_tick)
    procs = [NodeProcess("wind_field", common, env, tmp_path),
             NodeProcess("vehicle_dynamics", dynamics, env, tmp_path)]
    probe = Probe(tmp_path, domain, monkeypatch)
    ticks: list[int] = []
    try:
        probe.node.create_subscription(VehicleStatus, "/sim/vehicle_status", lambda m: ticks.append(m.tick),
                                       reliable())
        progress = probe.node.create_publisher(TickProgress, TICK_PROGRESS_TOPIC, QOS_TICK_PROGRESS)

        def report(tick: int) -> None:
            progress.publish(TickProgress(node="/slow_consumer", episode=1, tick=tick))

        wait_for(lambda: bool(ticks), 60, "tick 0", procs)
        report(10)
        # the clock stops 5 ticks past the slow consumer and says whom it waits for
        wait_for(lambda: "the consumer /slow_consumer@t=0.20 (window 5 ticks)" in procs[1].stderr(), 30,
                 "the window's warning", procs)
        # the clock holds: the probe (reading behind the clock under load) gets up to tick 15, no further
        wait_for(lambda: max(ticks) >= 10 + window, 30, f"tick {10 + window} at the probe", procs)
        assert max(ticks) == 10 + window, max(ticks)
        report(last_tick - 1)
        wait_for(lambda: max(ticks) == last_tick, 30, "the last tick", procs)
        assert procs[1].proc.poll() is None  # draining: the consumer has not handled the last tick
        report(last_tick)
        assert procs[1].wait_exit(30) == 0
    finally:
        probe.close()
        codes = stop_all(procs)
    err = procs[1].stderr()
    assert "duration_s=1 reached" in err and "stopping without" not in err, err
    # the waits for the slow consumer alone re-read the progress reports from a new subscription; the
    # reports that came after (ticks 49 and 50) still arrived
    assert "; progress reports read again" in err, err
    assert codes[0] == 0

"""flight_controller, referee and example_autopilot as real ROS 2 processes over DDS.

The graph tests run the real nodes of the contract (vehicle_dynamics, wind_field, imu, gps, altimeter,
flight_controller, referee) in lockstep as fast as possible; this test process is the external
autopilot (an rclpy node of its own, in its own DDS domain). Each test takes a free ROS_DOMAIN_ID
(``rosenv.free_domain``), so two suites on one machine never mix.
Every wait is on an event (a message, a service answer, a process exit) with a wall-clock deadline.
"""

from __future__ import annotations

import itertools
import math
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosenv import (
    REPO_ROOT,
    assert_exit_0,
    close_graph,
    free_domain,
    grid_tick,
    python,
    reliable_qos,
    require_ros,
    ros_env,
    scenario_with_sensors,
    sensor_messages,
    spin_until,
)

LIB = REPO_ROOT / "install" / "qrsim_ros" / "lib" / "qrsim_ros"
DT_S = 0.02
#: Wall-clock limit for a graph to come up and run its part (generous: ~5 s on an idle 2-core machine,
#: far more when other test runs load it; numba may compile on a first start).
STARTUP_S = 150.0

#: One Pelican flown by WaypointPID, noisy sensors and dynamics, no wind (a goto_waypoint variant).
WAYPOINT_SCENARIO = """\
description: "test_node_control: one noisy Pelican under WaypointPID"
seed: 11
num_vehicles: 1
task:
  type: goto_waypoint
  dt_s: 0.2
  duration_steps: 1000
  start_z_ned_m: -10.0
  waypoint_ned: [-50.0, -50.0, -10.0]
area:
  type: box
  limits_ned: [-70.0, 70.0, -70.0, 70.0, -50.0, 0.0]
wind:
  on: false
gps:
  on: true
vehicle:
  control: waypoint
  dyn_noise: [0.2, 0.2, 0.2, 0.2, 0.2, 0.2]
  ahars: {on: true}
  gps_receiver: {on: true}
  turbulence: {on: false}
"""


# --- helpers -------------------------------------------------------------------------------------------

class Graph:
    """Node processes of one test; ``stop()`` ends them with SIGINT and returns their exit codes."""

    def __init__(self, tmp_path: Path, domain_id: int) -> None:
        self.domain_id = domain_id
        self.env = ros_env(tmp_path, domain_id)
        self.tmp_path = tmp_path
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def start(self, name: str, scenario: str | Path, alias: str | None = None, **params: Any
              ) -> subprocess.Popen[str]:
        """Start node executable ``name`` (logged and keyed as ``alias``, default the name)."""
        args = [python(), str(LIB / name), "--ros-args", "-p", f"scenario:={scenario}"]
        params.setdefault("use_sim_time", True)
        for key, value in params.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            args += ["-p", f"{key}:={text}"]
        key = alias or name
        log = open(self.tmp_path / f"{key}.log", "w")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT, text=True)
        self.procs[key] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text()

    def stop(self, sig: int = signal.SIGINT) -> dict[str, int]:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(sig)
        codes = {}
        for name, p in self.procs.items():
            try:
                codes[name] = p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()  # last resort only (leaves Fast DDS files in /dev/shm)
                codes[name] = p.wait(timeout=10)
        return codes


def waypoint_graph(tmp_path: Path, scenario_text: str = WAYPOINT_SCENARIO) -> tuple[Path, Graph]:
    """``scenario_text`` (default ``WAYPOINT_SCENARIO``) written to ``tmp_path/waypoint.yaml``, and a Graph
    in a free ROS domain (``graph.domain_id``) to run it."""
    scenario = tmp_path / "waypoint.yaml"
    scenario.write_text(scenario_text)
    return scenario, Graph(tmp_path, free_domain())


class Probe:
    """An rclpy node in this process (the external autopilot / observer), in its own context."""

    def __init__(self, domain_id: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path / "ros_log"))
        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("test_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        return spin_until(self.executor, condition, timeout_s, 0.02)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)


def _diagnostics(msgs: list[Any], node_name: str) -> dict[str, int]:
    """The latest counters a node published on /diagnostics."""
    out: dict[str, int] = {}
    for m in msgs:
        for s in m.status:
            if s.name == node_name:
                out = {kv.key: int(kv.value) for kv in s.values}
    return out


@pytest.fixture
def ros(tmp_path: Path) -> Path:
    require_ros()
    missing = [n for n in ("flight_controller", "referee", "example_autopilot") if not (LIB / n).exists()]
    if missing:
        pytest.skip(f"not installed yet (run ./qrsim exec -- true): {missing}")
    return tmp_path


# --- pure conversions (no processes) ---------------------------------------------------------------

def test_quaternion_to_euler_inverts_the_frames_conversion() -> None:
    require_ros()
    from qrsim_ros.core.common.frames import (
        euler_ned_frd_to_quaternion_enu_flu,
        quaternion_enu_flu_to_euler_ned_frd,
    )

    rng = np.random.default_rng(3)
    e = np.column_stack([rng.uniform(-1.5, 1.5, 500), rng.uniform(-1.5, 1.5, 500),
                         rng.uniform(-3.1, 3.1, 500)])
    q = euler_ned_frd_to_quaternion_enu_flu(e[:, 0], e[:, 1], e[:, 2])
    # a few ulps of the angles; arcsin near |theta| = 1.5 loses ~2 bits more
    assert np.max(np.abs(quaternion_enu_flu_to_euler_ned_frd(q) - e)) < 1e-13
    # an unnormalised quaternion is the same attitude; a zero one is no attitude
    assert np.allclose(quaternion_enu_flu_to_euler_ned_frd(3.0 * q[0]), e[0], atol=1e-13)
    assert np.all(np.isnan(quaternion_enu_flu_to_euler_ned_frd([0.0, 0.0, 0.0, 0.0])))
    # yaw by hand: FLU heading east in ENU (identity quaternion) is psi = +90 deg in NED
    assert np.allclose(quaternion_enu_flu_to_euler_ned_frd([0.0, 0.0, 0.0, 1.0]), [0.0, 0.0, math.pi / 2])


def test_estimated_state_from_sensor_messages_equals_the_simulators() -> None:
    """eX assembled from the messages the sensor nodes publish equals Simulator.estimated_state():
    exactly for the noisy GPS (its NED position is lla_to_ned of the published lla), to the UTM
    round trip (< 5e-9 m) for a noiseless one, to float rounding for the attitude."""
    require_ros()
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.ros.estimated_state import EstimatedStateAssembler

    for name, pos_tol in (("cats_mouse_1b", 0.0), ("cats_mouse_1a", 5e-9)):
        sim = Simulator.from_scenario(name, {"seed": 4})
        rng = np.random.default_rng(0)
        asm = EstimatedStateAssembler(sim.num_vehicles, sim.scenario.origin)
        n = sim.num_vehicles
        for _ in range(3):
            sim.step(rng.uniform(-2, 2, (n - 1, 2)))
            imus, alts, fixes, vels = sensor_messages(sim)
            for i in range(n):
                asm.set_imu(i, imus[i])
                asm.set_altitude(i, alts[i])
                asm.set_gps_fix(i, fixes[i])
                asm.set_gps_velocity(i, vels[i])
            ex, ref = asm.estimated_state(sim.valid), sim.estimated_state()
            assert np.max(np.abs(ex[:, 0:3] - ref[:, 0:3])) <= pos_tol, name
            ref_angles = ref[:, 3:6].copy()
            ref_angles[:, 2] = np.angle(np.exp(1j * ref_angles[:, 2]))  # the quaternion wraps the yaw
            assert np.allclose(ex[:, 3:6], ref_angles, rtol=0, atol=1e-14)
            assert np.array_equal(ex[:, 6:9], ref[:, 6:9]) and np.array_equal(ex[:, 12], ref[:, 12])
            assert np.allclose(ex[:, 9:12], ref[:, 9:12], rtol=0, atol=1e-15)
            assert np.allclose(ex[:, 13:16], ref[:, 13:16], rtol=0, atol=1e-13)
            assert np.array_equal(ex[:, [16, 19]], ref[:, [16, 19]])
            assert np.allclose(ex[:, 17:19], ref[:, 17:19], rtol=0, atol=1e-15)


def test_estimated_state_keeps_the_latest_message_until_read_and_update_overrides_it() -> None:
    """set_* keep messages unconverted until eX is read: the latest of each sensor and vehicle wins, an
    ``update`` (converted at once) replaces an older kept one, ``clear`` forgets them; the result equals
    converting each message as it came (sample-and-hold)."""
    require_ros()
    from qrsim_ros.core.common.geodesy import GeodeticOrigin
    from qrsim_ros.ros.estimated_state import EstimatedStateAssembler
    from qrsim_ros.ros.to_messages import altitude_message

    asm = EstimatedStateAssembler(2, GeodeticOrigin(51.5, -0.1, 0.0))
    alt = [altitude_message(None, "f", h, v, 0.0) for h, v in ((1.0, 0.1), (2.0, 0.2), (3.0, 0.3))]
    asm.set_altitude(0, alt[0])
    asm.set_altitude(0, alt[1])
    assert asm.has_altitude.tolist() == [True, False]
    ex = asm.estimated_state()
    assert ex[0, 16] == 2.0 and ex[0, 19] == 0.2 and np.isnan(ex[1, 16])
    asm.set_altitude(1, alt[0])
    asm.update(alt=[(1, alt[2])])  # newer than the kept one
    assert asm.estimated_state()[1, 16] == 3.0
    asm.update(alt=[(1, alt[0])])
    asm.set_altitude(1, alt[1])  # newer than the converted one
    assert asm.estimated_state()[1, 16] == 2.0
    from rclpy.serialization import serialize_message

    from qrsim_ros.ros.stamps import stamp_from_tick

    raw = serialize_message(altitude_message(stamp_from_tick(1), "f", 1.0, 0.1, 0.0))
    asm.set_altitude(1, raw)  # a raw subscription's bytes: deserialized when read
    assert asm.estimated_state()[1, 16] == 1.0 and asm.estimated_state()[1, 19] == 0.1
    asm.set_altitude(0, alt[2])
    asm.clear()
    assert np.all(np.isnan(asm.estimated_state()[:, [16, 19]])) and not asm.has_altitude.any()


def test_initial_placement_gives_the_simulators_headings() -> None:
    """The flight controller's held headings (tasks.initial_placement on the task.placement stream,
    episode after episode) are the Simulator's."""
    from qrsim_ros.core.common.rng import RandomStreams
    from qrsim_ros.core.config.scenario import load_scenario
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.core.tasks.factory import make_task
    from qrsim_ros.core.tasks.rules import PLACEMENT_STREAM, TaskContext, initial_placement

    sc = load_scenario("search_rescue_2c", {"seed": 9})
    sim = Simulator(sc)
    task = make_task(TaskContext(sc))
    rng = RandomStreams(9).get(PLACEMENT_STREAM)
    for _ in range(3):
        x0, headings = initial_placement(task, rng)
        assert np.array_equal(headings, sim._headings)
        assert np.array_equal(np.asarray(x0)[:, 5], sim.true_state()[:, 5])
        assert np.ptp(headings) > 0  # random headings in [0, pi): not all equal
        sim.reset()


# --- graphs ----------------------------------------------------------------------------------------

@pytest.mark.graph
@pytest.mark.timeout(STARTUP_S + 210)  # the graph's start-up budget, then the flight
def test_waypoint_flight_bad_setpoints_status_and_reset(ros: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real graph in lockstep; this process is the autopilot: rejected set points are counted, a
    cmd/pose waypoint is reached, the referee's status adds up, /referee/reset starts episode 2."""
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from nav_msgs.msg import Odometry
    from qrsim_ros.msg import AttitudeCommand, TaskStatus
    from std_srvs.srv import Trigger

    scenario, graph = waypoint_graph(ros)
    probe = None
    try:
        # start gate: tick 0 once all 6 ground-truth consumers (wind, imu, gps, altimeter, flight
        # controller, referee) match /sim/vehicle_status
        graph.start("vehicle_dynamics", scenario, lockstep=True, real_time_factor=0.0, use_sim_time=False,
                    lockstep_timeout_s=0.5, start_subscribers=6)
        for name in ("wind_field", "imu", "gps", "altimeter"):
            graph.start(name, scenario)
        graph.start("flight_controller", scenario, report_period_s=0.2)
        graph.start("referee", scenario)
        probe = Probe(graph.domain_id, ros, monkeypatch)
        from diagnostic_msgs.msg import DiagnosticArray

        node = probe.node
        odom: list[Any] = []
        cmds: list[Any] = []
        status: list[Any] = []
        diags: list[Any] = []
        node.create_subscription(Odometry, "uav1/ground_truth/odom", odom.append, reliable_qos())
        node.create_subscription(AttitudeCommand, "uav1/cmd/attitude", cmds.append, reliable_qos())
        node.create_subscription(TaskStatus, "/referee/status", status.append, reliable_qos())
        node.create_subscription(DiagnosticArray, "/diagnostics", diags.append, reliable_qos())
        pose_pub = node.create_publisher(PoseStamped, "uav1/cmd/pose", reliable_qos(10))
        vel_pub = node.create_publisher(TwistStamped, "uav1/cmd/velocity", reliable_qos(10))
        assert probe.spin_until(lambda: len(odom) > 5, STARTUP_S), "no ground truth: the graph did not start"

        def pose(x: float, y: float, z: float, frame: str = "map") -> PoseStamped:
            m = PoseStamped()
            m.header.frame_id = frame
            m.header.stamp = odom[-1].header.stamp  # issued now: set points expire (command_timeout_s)
            m.pose.position.x, m.pose.position.y, m.pose.position.z = x, y, z
            m.pose.orientation.w = 1.0
            return m

        # bad set points: each rejected and counted by reason; the vehicle keeps its start position
        bad_vel = TwistStamped()
        bad_vel.header.frame_id = "map"

        def counters() -> dict[str, int]:
            return _diagnostics(diags, "/flight_controller")

        def all_rejected() -> bool:
            c = counters()
            return (c.get("setpoint_rejected_non_finite", 0) >= 1 and c.get("setpoint_rejected_frame", 0) >= 1
                    and c.get("setpoint_rejected_mode", 0) >= 1)

        def send_bad() -> bool:
            pose_pub.publish(pose(math.nan, 0.0, 10.0))
            pose_pub.publish(pose(5.0, 5.0, 10.0, frame="uav1/base_link"))
            vel_pub.publish(bad_vel)  # a waypoint vehicle takes no velocity set point
            return all_rejected()

        assert probe.spin_until(lambda: send_bad() or probe.spin_until(all_rejected, 0.3), 60), counters()
        assert not any(v for k, v in counters().items() if k.startswith("skipped"))

        # a good waypoint (ENU): 12 m east, 8 m south, 5 m up from the start at (0, 0, 10)
        target = np.array([12.0, -8.0, 15.0])
        start_tick = grid_tick(odom[-1].header.stamp)
        reached: list[float] = []

        def fly() -> bool:
            if len(odom) % 25 == 0:  # re-publish now and then (the first may precede discovery)
                pose_pub.publish(pose(*target))
            p = odom[-1].pose.pose.position
            if np.linalg.norm(np.array([p.x, p.y, p.z]) - target) < 2.0:
                reached.append(grid_tick(odom[-1].header.stamp) * DT_S)
            return bool(reached)

        pose_pub.publish(pose(*target))
        assert probe.spin_until(fly, 120), f"waypoint not reached; last {odom[-1].pose.pose.position}"
        flight_s = reached[0] - start_tick * DT_S
        assert flight_s < 20.0, flight_s  # 15.4 m at up to 5 m/s: a few seconds, not a crawl

        # the flight controller's commands: stamped on the tick grid, FRD frame, finite, every tick
        ticks = [grid_tick(c.header.stamp) for c in cmds]
        assert all(c.header.frame_id == "uav1/base_link_frd" for c in cmds)
        assert all(math.isfinite(c.pitch) and 0.0 <= c.throttle <= 1.0 for c in cmds)
        assert ticks[-1] - ticks[0] + 1 >= len(set(ticks)) >= 0.99 * (ticks[-1] - ticks[0] + 1)

        # the referee's status: one per task step (0.2 s), rewards add up, generic task fields
        # (awaited: the referee is no lockstep input, and under load the probe may discover it late)
        def task_steps() -> list[Any]:
            return [s for s in status if s.step > 0]

        assert probe.spin_until(lambda: len(task_steps()) >= 10, 60), (len(status),
                                                                       graph.log("referee")[-3000:])
        steps = task_steps()
        for s in steps:
            assert s.scenario == "waypoint" and s.vehicle_names == ["uav1"]
            assert list(s.vehicle_valid) == [True]
            assert not s.done and s.done_reason == "" and s.persons_total == 0
            assert math.isclose(s.time, s.step * 0.2, abs_tol=1e-9)
            assert grid_tick(s.header.stamp) == s.step * 10
            assert s.reward <= 0.0  # control cost only (the terminal term comes at the last step)
        # every step from the first one received (the probe may subscribe after the first steps)
        assert [s.step for s in steps] == list(range(steps[0].step, steps[0].step + len(steps)))
        for a, b in itertools.pairwise(steps):
            assert math.isclose(b.cumulative_reward, a.cumulative_reward + b.reward, rel_tol=1e-12,
                                abs_tol=1e-12)

        # /referee/reset -> /vehicle_dynamics/reset: episode 2 starts from tick 0 at the start position
        client = node.create_client(Trigger, "/referee/reset")
        assert client.wait_for_service(timeout_sec=10.0)
        n_status = len(status)
        future = client.call_async(Trigger.Request())
        assert probe.spin_until(future.done, 60)
        assert future.result().success, future.result().message
        assert "episode 2" in future.result().message

        def new_episode() -> bool:
            return any(s.step == 0 and s.time == 0.0 for s in status[n_status:])

        assert probe.spin_until(new_episode, 60)
        fresh = [o for o in odom if grid_tick(o.header.stamp) == 0]
        assert fresh, "no tick-0 ground truth after the reset"
        p = fresh[-1].pose.pose.position
        assert np.allclose([p.x, p.y, p.z], [0.0, 0.0, 10.0], atol=1e-9)
    finally:
        codes = close_graph(graph, probe)
    assert_exit_0(graph, codes)
    assert "Traceback" not in graph.log("flight_controller") + graph.log("referee")


#: The mouse's link lost from t = 0.4 s for 0.6 s: its escape commands are dropped (docs/FAULTS.md).
MOUSE_LINK_LOST = [{"id": "mouse_link", "kind": "comm_loss", "vehicles": [3], "trigger": {"at_time_s": 0.4},
                    "duration_s": 0.6}]


@pytest.mark.graph
@pytest.mark.timeout(STARTUP_S + 210)  # the graph's start-up budget, then the flight
@pytest.mark.parametrize("faults", [None, MOUSE_LINK_LOST], ids=["no_faults", "mouse_link_lost"])
def test_lockstep_cats_and_mouse_reproduces_the_simulator(ros: Path, monkeypatch: pytest.MonkeyPatch,
                                                           faults: list[dict[str, Any]] | None) -> None:
    """cats_mouse_1b (noisy sensors and dynamics) in lockstep: the cats hover on the flight controller's
    default (zero velocity, no set point), the mouse flees on the referee's escape command. The ground
    truth after 1 s and 2 s equals the in-process Simulator's with zero actions. With the mouse's link
    lost for 0.6 s (the flight_controller drops its escape commands, from the faults of each tick's
    /sim/vehicle_status) too, and the mouse then flies differently from the run without the fault."""
    from nav_msgs.msg import Odometry
    from qrsim_ros.msg import TaskStatus, VehicleStatus

    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.ros.from_messages import state_from_odometry

    domain = free_domain()
    graph = Graph(ros, domain)
    probe = None
    n, seed = 4, 5
    scenario: str | Path = "cats_mouse_1b"
    if faults is not None:
        scenario = scenario_with_sensors(ros, "cats_mouse_1b", "cats_mouse_1b_faults", {}, faults=faults)
    want = {50, 100}
    got: dict[int, dict[int, np.ndarray]] = {k: {} for k in want}
    rewards: dict[int, tuple[float, float]] = {}
    try:
        # The probe subscribes before the graph starts (the referee's first task steps come within a
        # fraction of a second of tick 0 at real_time_factor 0: a probe that joined later missed them)
        probe = Probe(domain, ros, monkeypatch)

        def on_odom(i: int, m: Any) -> None:
            k = grid_tick(m.header.stamp)
            if k in want:
                got[k][i] = state_from_odometry(m)

        for i in range(n):
            probe.node.create_subscription(Odometry, f"uav{i + 1}/ground_truth/odom",
                                           lambda m, i=i: on_odom(i, m), reliable_qos())
        probe.node.create_subscription(
            TaskStatus, "/referee/status",
            lambda m: rewards.__setitem__(m.step, (m.reward, m.cumulative_reward)), reliable_qos())
        # the probe counts in the start gate too (through a /sim/vehicle_status subscription): its
        # discovery can take a second, which is hundreds of ticks at real_time_factor 0
        probe.node.create_subscription(VehicleStatus, "/sim/vehicle_status", lambda m: None, reliable_qos(10))
        # start gate: tick 0 once all 6 ground-truth consumers (wind, imu, gps, altimeter, flight
        # controller, referee) and the probe match, so nobody misses the first task steps during discovery
        for name in ("wind_field", "imu", "gps", "altimeter", "flight_controller", "referee"):
            graph.start(name, scenario, seed=seed)
        # the referee's status publisher discovered before the clock can start (a late match gets only
        # the latest, latched status)
        assert probe.spin_until(lambda: probe.node.count_publishers("/referee/status") >= 1, STARTUP_S)
        graph.start("vehicle_dynamics", scenario, seed=seed, lockstep=True, real_time_factor=0.0,
                    use_sim_time=False, start_subscribers=7)

        def complete() -> bool:
            return all(len(v) == n for v in got.values()) and {1, 2} <= rewards.keys()

        assert probe.spin_until(complete, STARTUP_S), (
            {k: sorted(v) for k, v in got.items()}, sorted(rewards)[:10],
            graph.log("flight_controller")[-2000:],
            graph.log("referee")[-3000:])
    finally:
        codes = close_graph(graph, probe)
    assert_exit_0(graph, codes)

    sim = Simulator.from_scenario(str(scenario), {"seed": seed})
    plain = Simulator.from_scenario("cats_mouse_1b", {"seed": seed})
    for step, k in enumerate(sorted(want), start=1):
        plain.step(np.zeros((n - 1, 2)))
        reward = sim.step(np.zeros((n - 1, 2)))  # one task step = 50 ticks
        assert sim.tick == k
        # the referee's reward (-sum of squared cat-mouse distances) on the ground truth it received
        assert math.isclose(rewards[step][0], reward, rel_tol=1e-9), (rewards, reward)
        assert math.isclose(rewards[step][1], sim.total_reward, rel_tol=1e-9)
        x = sim.true_state()
        ros_x = np.array([got[k][i] for i in range(n)])
        # the mouse really moved (it flees at up to 3 m/s), so the comparison is not trivial
        assert np.linalg.norm(x[n - 1, 0:2]) > 0.05 * k * DT_S
        # the ROS graph's only differences: the quaternion round trip of the attitude (1e-16 rad) in
        # the odometry and IMU messages (measured: 1e-14 m after 10 s); 1e-9 leaves room for growth
        assert np.allclose(ros_x[:, 0:3], x[:, 0:3], rtol=0, atol=1e-9), ros_x[:, 0:3] - x[:, 0:3]
        assert np.allclose(ros_x[:, 3:5], x[:, 3:5], rtol=0, atol=1e-9)
        assert np.allclose(ros_x[:, 6:12], x[:, 6:12], rtol=0, atol=1e-9)
        if faults is not None:  # the fault changed the mouse's flight (and nothing else, so far)
            assert np.abs(plain.true_state()[n - 1, 0:3] - x[n - 1, 0:3]).max() > 1e-3


@pytest.mark.graph
def test_bad_parameters_stop_the_nodes_with_exit_1(ros: Path) -> None:
    cases = {
        "flight_controller": ({"max_pending_ticks": 0}, "max_pending_ticks"),
        "referee": ({"reset_timeout_s": -1.0}, "reset_timeout_s"),
        "example_autopilot": ({"policy": "no-such-policy"}, "policy"),
    }
    domain = free_domain()
    graph = Graph(ros, domain)
    for name, (params, _) in cases.items():
        graph.start(name, "search_rescue_2a", **params)
    graph.start("flight_controller", "no_such_scenario", alias="unknown_scenario")
    cases["unknown_scenario"] = ({}, "scenario")
    try:
        codes = {name: p.wait(timeout=STARTUP_S) for name, p in graph.procs.items()}
    finally:
        graph.stop()
    for name, (_, param) in cases.items():
        out = graph.log(name)
        assert codes[name] == 1, (name, out)
        lines = [ln for ln in out.splitlines() if "error" in ln]
        assert len(lines) == 1 and param in lines[0], (name, out)


@pytest.mark.graph
@pytest.mark.timeout(STARTUP_S + 210)  # the graph's start-up budget, then the flight
def test_autopilot_and_controller_on_fake_sensors_then_sigterm(ros: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the rest of the graph, fed by this process: the flight controller answers every
    complete tick (the fleet topics' IMU + altimeter every tick, GPS on GPS ticks) with one command stamped
    t_k, on the fleet topic and on uav1/cmd/attitude (which has a reader: this test); the
    example autopilot answers a task step with a velocity set point and a final 'done' with a stop;
    the referee, fed ground truth and vehicle status, publishes the terrain, the persons and a find
    (``_referee_finds_a_person``); SIGTERM ends all three nodes cleanly (exit 0)."""
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import TwistStamped
    from qrsim_ros.msg import (
        Altitude,
        AttitudeCommand,
        FleetAttitudeCommand,
        FleetSamples,
        TaskStatus,
        TickProgress,
    )
    from sensor_msgs.msg import Imu, NavSatFix

    from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN, ned_to_lla
    from qrsim_ros.ros import fleet_topics as ft
    from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC
    from qrsim_ros.ros.qos import QOS_LATCHED, QOS_TICK_PROGRESS
    from qrsim_ros.ros.renewable_inputs import RENEW_AFTER_S

    scenario = "search_rescue_2a"  # one vehicle, velocity control, GPS at 5 Hz (every 10 ticks)
    domain = free_domain()
    graph = Graph(ros, domain)
    probe = None
    try:
        graph.start("flight_controller", scenario, seed=3, use_vehicle_status=False)  # no vehicle_dynamics
        for name in ("referee", "example_autopilot"):
            graph.start(name, scenario, seed=3)
        probe = Probe(domain, ros, monkeypatch)
        node = probe.node
        cmds: list[Any] = []
        setpoints: list[Any] = []
        node.create_subscription(AttitudeCommand, "uav1/cmd/attitude", cmds.append, reliable_qos())
        fleet_cmds: list[Any] = []
        node.create_subscription(FleetAttitudeCommand, ft.FLEET_ATTITUDE_COMMAND_TOPIC, fleet_cmds.append,
                                 reliable_qos())
        fleet_cmds: list[Any] = []
        node.create_subscription(FleetAttitudeCommand, ft.FLEET_ATTITUDE_COMMAND_TOPIC, fleet_cmds.append,
                                 reliable_qos())
        node.create_subscription(TwistStamped, "uav1/cmd/velocity", setpoints.append, reliable_qos())
        pubs = {"imu": node.create_publisher(Imu, "uav1/imu/data", reliable_qos(100)),
                "alt": node.create_publisher(Altitude, "uav1/altimeter", reliable_qos(100)),
                "fix": node.create_publisher(NavSatFix, "uav1/gps/fix", reliable_qos(100)),
                "vel": node.create_publisher(TwistStamped, "uav1/gps/vel", reliable_qos(100)),
                "status": node.create_publisher(TaskStatus, "/referee/status", QOS_LATCHED)}
        # the flight controller reads the fleet topics, the autopilot the per-vehicle ones
        pubs.update({kind: node.create_publisher(FleetSamples, topic, reliable_qos(100)) for kind, topic in
                     (("fleet_imu", ft.FLEET_IMU_TOPIC), ("fleet_alt", ft.FLEET_ALTIMETER_TOPIC),
                      ("fleet_gps", ft.FLEET_GPS_TOPIC))})

        def matched() -> bool:  # each topic: its reader (the flight controller or the autopilot)
            return all(p.get_subscription_count() >= 1 for p in pubs.values())

        assert probe.spin_until(matched, STARTUP_S), {k: p.get_subscription_count() for k, p in pubs.items()}

        def stamp(k: int) -> Time:
            ns = k * 20_000_000
            return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)

        # the lockstep window's view of the autopilot: after each task step k it handled, in the status'
        # episode, the last tick before the next step, k + 49 (1 s steps), when it holds no set point
        # (a step it could not answer); holding one, a tick from which the 25-tick window cannot take the
        # clock past the 0.5 s command timeout before the /clock re-send at k + 10 (which reports in turn)
        # has gone out: k
        progress: list[tuple[str, int, int]] = []
        node.create_subscription(TickProgress, TICK_PROGRESS_TOPIC,
                                 lambda m: progress.append((m.node, m.episode, m.tick)), QOS_TICK_PROGRESS)
        first = TaskStatus(scenario=scenario, episode=3, step=0, time=0.0, vehicle_names=["uav1"],
                           vehicle_valid=[True])
        first.header.stamp = stamp(0)
        pubs["status"].publish(first)  # no sensor yet: no policy, no set point
        assert probe.spin_until(lambda: bool(progress), 60), graph.log("example_autopilot")[-2000:]
        assert progress == [("/example_autopilot", 3, 49)] and not setpoints

        lla = ned_to_lla([10.0, -20.0, -45.0], QRSIM_ORIGIN)

        def sensors(k: int, gps: bool) -> None:
            imu = Imu()
            imu.header.stamp = stamp(k)
            imu.orientation.w = 1.0  # level, heading east
            imu.linear_acceleration.z = 9.81
            pubs["imu"].publish(imu)
            alt = Altitude(height=45.0)
            alt.header.stamp = stamp(k)
            pubs["alt"].publish(alt)
            if gps:
                fix = NavSatFix(latitude=float(lla[0]), longitude=float(lla[1]), altitude=float(lla[2]))
                fix.header.stamp = stamp(k)
                pubs["fix"].publish(fix)
                vel = TwistStamped()
                vel.header.stamp = stamp(k)
                vel.header.frame_id = "map"
                pubs["vel"].publish(vel)

            def fleet(kind: str, columns: tuple[str, ...], values: list[float]) -> None:
                pubs[kind].publish(ft.fleet_samples(FleetSamples(), stamp(k), "", columns, [0], [values]))

            fleet("fleet_imu", ft.IMU_COLUMNS, [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 9.81])
            fleet("fleet_alt", ft.ALTIMETER_COLUMNS, [45.0, 0.0])
            if gps:
                fleet("fleet_gps", ft.GPS_COLUMNS, [*(float(v) for v in lla), 1.0, 0.0, 0.0, 0.0])

        sensors(0, gps=True)
        assert probe.spin_until(lambda: len(cmds) >= 1, 60)
        sensors(1, gps=False)  # tick 1 is no GPS tick: IMU and altimeter complete it
        assert probe.spin_until(lambda: len(cmds) >= 2, 60)
        sensors(2, gps=True)  # GPS stamped t_2 is early but harmless: tick 2 completes on IMU + alt
        sensors(10, gps=False)  # a GPS tick without GPS: incomplete, no command
        # tick 10 waits for its GPS: past RENEW_AFTER_S of waiting the controller makes the missing
        # sensors' subscriptions again (each had matched our writer); tick 10 then completes through them
        renewed = ("tick 10: subscribed again to /sim/fleet/gps (1 publisher matched; the graph lists "
                   "/test_probe)")
        assert probe.spin_until(lambda: renewed in graph.log("flight_controller"), RENEW_AFTER_S + 30), \
            graph.log("flight_controller")[-2000:]
        assert [grid_tick(c.header.stamp) for c in cmds] == [0, 1, 2]
        assert probe.spin_until(matched, STARTUP_S), {k: p.get_subscription_count() for k, p in pubs.items()}
        sensors(10, gps=True)
        assert probe.spin_until(lambda: len(cmds) >= 4, 60)
        assert [grid_tick(c.header.stamp) for c in cmds] == [0, 1, 2, 10]
        # tick 10's first input (its re-send trigger without vehicle status) came twice while it was
        # incomplete: the controller named what it lacked
        lacking = "tick 10 re-sent; still waiting for gps"
        assert probe.spin_until(lambda: lacking in graph.log("flight_controller"), 10), \
            graph.log("flight_controller")[-2000:]
        for c in cmds:
            assert c.header.frame_id == "uav1/base_link_frd" and 0.0 < c.throttle < 1.0
            assert abs(c.pitch) <= 0.34 and abs(c.roll) <= 0.34 and c.battery_voltage == 12.0
        # the fleet topic carried the same commands (vehicle_dynamics reads that one)
        assert probe.spin_until(lambda: len(fleet_cmds) >= 4, 10)
        assert [grid_tick(c.header.stamp) for c in fleet_cmds] == [0, 1, 2, 10]
        for f, c in zip(fleet_cmds, cmds, strict=True):
            assert list(f.vehicles) == [0] and list(f.failsafe) == [c.failsafe]
            assert [f.pitch[0], f.roll[0], f.throttle[0], f.yaw_rate[0], f.battery_voltage[0]] == \
                [c.pitch, c.roll, c.throttle, c.yaw_rate, c.battery_voltage]

        # the autopilot flies a task step (lawn-mower: a set point in map) and stops when done
        st = TaskStatus(scenario=scenario, episode=3, step=1, time=1.0, vehicle_names=["uav1"],
                        vehicle_valid=[True])
        st.header.stamp = stamp(50)
        pubs["status"].publish(st)
        assert probe.spin_until(lambda: len(setpoints) >= 1, 60), graph.log("example_autopilot")[-2000:]
        assert probe.spin_until(lambda: len(progress) >= 2, 60)
        assert progress[1] == ("/example_autopilot", 3, 50)
        sp = setpoints[0]
        v = np.array([sp.twist.linear.x, sp.twist.linear.y, sp.twist.linear.z])
        assert sp.header.frame_id == "map" and np.all(np.isfinite(v)) and np.linalg.norm(v[0:2]) > 0.5
        done = TaskStatus(scenario=scenario, step=2, time=2.0, vehicle_names=["uav1"], vehicle_valid=[True],
                          done=True, done_reason="time_limit")
        done.header.stamp = stamp(100)
        pubs["status"].publish(done)
        # a set point already under way when the status arrived may come first: wait for the stop
        def stopped() -> bool:
            last = setpoints[-1].twist.linear
            return len(setpoints) >= 2 and (last.x, last.y, last.z) == (0.0, 0.0, 0.0)

        assert probe.spin_until(stopped, 60), [s.twist.linear for s in setpoints]
        assert graph.procs["example_autopilot"].poll() is None

        _referee_finds_a_person(probe, scenario, seed=3)
    finally:
        codes = close_graph(graph, probe, signal.SIGTERM)
    assert codes == {"flight_controller": 0, "referee": 0, "example_autopilot": 0}, codes
    for name in codes:
        assert "Traceback" not in graph.log(name), graph.log(name)


def _referee_finds_a_person(probe: Probe, scenario: str, seed: int) -> None:
    """Feed the referee one vehicle's ground truth (in /sim/vehicle_status) for ticks 0..50, 3 m above
    the first person of the episode. Expected, from the core with the same seed and QRSim's rules: the
    terrain grid and persons of ``BoxWithPersonsArea`` episode 1; the area update at 1 s (tick 50, on
    the state of t_49) finds the person (3 m <= 5 m, speed 0 <= 0.1 m/s); task step 1 rewards 1."""
    from nav_msgs.msg import OccupancyGrid
    from qrsim_ros.msg import TaskStatus, VehicleStatus
    from visualization_msgs.msg import MarkerArray

    from qrsim_ros.core.common.frames import ned_to_enu
    from qrsim_ros.core.common.rng import RandomStreams
    from qrsim_ros.core.config.scenario import load_scenario
    from qrsim_ros.core.world.area import BoxWithPersonsArea
    from qrsim_ros.ros.stamps import stamp_from_tick

    sc = load_scenario(scenario, {"seed": seed})
    area = BoxWithPersonsArea(sc.num_vehicles, sc.persons_area_params(), RandomStreams(seed))
    area.reset()
    persons = area.persons_position_ned
    node = probe.node
    grids: list[Any] = []
    markers: list[Any] = []
    status: list[Any] = []
    node.create_subscription(OccupancyGrid, "/area/terrain", grids.append, reliable_qos(10))
    node.create_subscription(MarkerArray, "/referee/markers", markers.append, reliable_qos(10))
    node.create_subscription(TaskStatus, "/referee/status", status.append, reliable_qos())
    status_pub = node.create_publisher(VehicleStatus, "/sim/vehicle_status", reliable_qos(100))
    assert probe.spin_until(lambda: status_pub.get_subscription_count() >= 1, STARTUP_S)
    x = np.zeros(13)
    x[0:2], x[2] = persons[0, 0:2], -3.0  # 3 m above the person, level, still
    for k in range(51):
        probe.executor.spin_once(timeout_sec=0.0)
        st = VehicleStatus(episode=1, tick=k, names=["uav1"], valid=[True], invalid_reason=[""],
                           command_fresh=[True], state=x.tolist(), specific_force=[0.0, 0.0, -9.81])
        st.header.stamp = stamp_from_tick(k)
        status_pub.publish(st)
    assert probe.spin_until(lambda: any(s.step == 1 for s in status), 60), [(s.step, s.time) for s in status]
    first = next(s for s in status if s.step == 0)
    assert (first.time, first.reward, first.persons_found, first.persons_total) == (0.0, 0.0, 0, len(persons))
    step1 = next(s for s in status if s.step == 1)
    assert step1.time == 1.0 and step1.reward == 1.0 and step1.cumulative_reward == 1.0
    assert step1.persons_found == 1 and not step1.done

    assert probe.spin_until(lambda: bool(grids), 30)
    g = grids[-1]
    geo = area.terrain.geometry
    assert (g.info.width, g.info.height, g.info.resolution) == (geo.cols, geo.rows, 1.0)
    assert (g.info.origin.position.x, g.info.origin.position.y) == (geo.ymin_m, geo.xmin_m)  # east, north
    assert np.array_equal(np.asarray(g.data, np.int8), area.terrain.grid.ravel().astype(np.int8))

    def persons_markers(msg: Any) -> list[Any]:
        return [m for m in msg.markers if m.action == m.ADD]

    assert probe.spin_until(lambda: any(sum(m.color.g > 0.5 for m in persons_markers(a)) == 1
                                        for a in markers), 30)
    found = next(persons_markers(a) for a in markers if sum(m.color.g > 0.5 for m in persons_markers(a)) == 1)
    assert len(found) == len(persons)
    enu = ned_to_enu(persons)
    for m in found:
        assert np.allclose([m.pose.position.x, m.pose.position.y], enu[m.id, 0:2], atol=1e-9)
        assert (m.color.g > 0.5) == (m.id == 0)  # green: found; red: not yet

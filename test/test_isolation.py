"""Run identity and trust between nodes, over real DDS.

A lockstep graph of run ``run-a`` (the real nodes, started as processes) shares its ROS domain with
(1) a node of another run (an rclpy context of this process that announces run ``run-b`` on
/sim/run_members and publishes commands, /clock and a status of its run), (2) a user's own autopilot
(another context, member of no run) and (3) a forger that publishes one /sim/vehicle_status of run-a with
tick 50,000,000. The other run's messages and the forged tick must change nothing and show on
/diagnostics; the user's commands are flown. The start gate test: a stranger subscribing to
/sim/vehicle_status does not release tick 0.

Each test takes a free ROS_DOMAIN_ID (``rosenv.free_domain``); waits are on events with deadlines.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosenv import assert_exit_0, close_graph, grid_tick, reliable_qos, require_ros
from test_node_control import LIB, STARTUP_S, WAYPOINT_SCENARIO, Probe, waypoint_graph

pytestmark = pytest.mark.graph

RUN_A = "run-a"
FORGED_TICK = 50_000_000


@pytest.fixture
def ros(tmp_path: Path) -> Path:
    require_ros()
    if not (LIB / "flight_controller").exists():
        pytest.skip("not installed yet (run ./qrsim exec -- true)")
    return tmp_path


def _counter(diags: list[Any], status_name: str, key: str) -> int:
    """The largest value of counter ``key`` that status ``status_name`` published on /diagnostics."""
    return max((int(kv.value) for m in diags for s in m.status if s.name == status_name
                for kv in s.values if kv.key == key), default=0)


def _pose(x: float, y: float, z: float, stamp: Any = None) -> Any:
    """A waypoint in ``map``, stamped ``stamp`` (the simulated time: set points expire after 0.5 s)."""
    from geometry_msgs.msg import PoseStamped

    m = PoseStamped()
    m.header.frame_id = "map"
    if stamp is not None:
        m.header.stamp = stamp
    m.pose.position.x, m.pose.position.y, m.pose.position.z = x, y, z
    m.pose.orientation.w = 1.0
    return m


@pytest.mark.timeout(STARTUP_S + 330)  # its waits: the start-up's, then up to 300 s of flight and checks
def test_other_runs_and_forged_ticks_are_ignored_and_counted(ros: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    from builtin_interfaces.msg import Time
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry
    from qrsim_ros.msg import RunMember, TaskStatus, VehicleStatus
    from rosgraph_msgs.msg import Clock

    from qrsim_ros.ros.run_identity import QOS_ANNOUNCE, RUN_MEMBERS_TOPIC

    # set points held (no expiry): at real_time_factor 0 the simulation outruns this test's set points,
    # whose expiry is test_failsafe's subject, not this one's
    scenario, graph = waypoint_graph(ros, WAYPOINT_SCENARIO.replace(
        "  control: waypoint\n", "  control: waypoint\n  command_timeout_s: 0.0\n"))
    domain = graph.domain_id
    user = other = None
    try:
        graph.start("vehicle_dynamics", scenario, lockstep=True, real_time_factor=0.0, use_sim_time=False,
                    lockstep_timeout_s=0.5, start_subscribers=6, run_id=RUN_A)
        for name in ("wind_field", "imu", "gps", "altimeter", "flight_controller", "referee"):
            graph.start(name, scenario, run_id=RUN_A)
        # the user's own autopilot and observer: a member of no run
        user = Probe(domain, ros, monkeypatch)
        odom: list[Any] = []
        status: list[Any] = []
        diags: list[Any] = []
        user.node.create_subscription(Odometry, "uav1/ground_truth/odom", odom.append, reliable_qos())
        user.node.create_subscription(TaskStatus, "/referee/status", status.append, reliable_qos())
        user.node.create_subscription(DiagnosticArray, "/diagnostics", diags.append, reliable_qos())
        user_pose = user.node.create_publisher(PoseStamped, "uav1/cmd/pose", reliable_qos(10))
        forger = user.node.create_publisher(VehicleStatus, "/sim/vehicle_status", reliable_qos(10))
        # a node of another run (its own DDS participant), announced as run-b's example_autopilot
        other = Probe(domain, ros, monkeypatch)
        announce = other.node.create_publisher(RunMember, RUN_MEMBERS_TOPIC, QOS_ANNOUNCE)
        announce.publish(RunMember(run_id="run-b", node="/example_autopilot"))
        other_pose = other.node.create_publisher(PoseStamped, "uav1/cmd/pose", reliable_qos(10))
        other_clock = other.node.create_publisher(Clock, "/clock", reliable_qos(10))
        other_status = other.node.create_publisher(VehicleStatus, "/sim/vehicle_status", reliable_qos(10))

        assert user.spin_until(lambda: len(status) > 3, STARTUP_S), "the graph did not start"
        assert all(s.run_id == RUN_A for s in status)

        # the user's waypoint (ENU, 30 m west and south) is flown
        target = np.array([-30.0, -30.0, 10.0])

        def position() -> np.ndarray:
            p = odom[-1].pose.pose.position
            return np.array([p.x, p.y, p.z])

        def keep_flying() -> None:
            if odom and len(odom) % 5 == 0:  # fresh set points (>= 2 Hz of simulated time)
                user_pose.publish(_pose(*target, stamp=odom[-1].header.stamp))

        def heading_west(min_m: float) -> bool:
            keep_flying()
            return bool(odom) and position()[0] < -min_m and position()[1] < -min_m

        assert user.spin_until(lambda: heading_west(2.0), 120), "the user's waypoint is not flown"

        # run-b's waypoint (east), /clock and status: ignored by every node, counted
        t_other = grid_tick(odom[-1].header.stamp)
        other_pose.publish(_pose(30.0, 30.0, 10.0, stamp=odom[-1].header.stamp))  # fresh, but another run's
        other_clock.publish(Clock(clock=Time(sec=1_000_000)))
        foreign = VehicleStatus(run_id="run-b", episode=1, tick=t_other + 1, names=["uav1"], valid=[True],
                                state=[0.0] * 13, specific_force=[0.0] * 3)
        foreign.header.stamp.sec, foreign.header.stamp.nanosec = divmod((t_other + 1) * 20_000_000,
                                                                        1_000_000_000)
        other_status.publish(foreign)

        # one forged status of run-a, tick 50,000,000 (1,000,000 s)
        forged = VehicleStatus(run_id=RUN_A, episode=1, tick=FORGED_TICK, names=["uav1"], valid=[True],
                               state=[0.0] * 13, specific_force=[0.0] * 3)
        forged.header.stamp.sec = FORGED_TICK // 50
        n_status = len(status)
        forger.publish(forged)

        expected = {("/flight_controller/run", "foreign_run_messages"): 2,
                    ("/wind_field/run", "foreign_run_messages"): 1, ("/referee", "ticks_rejected"): 1,
                    ("/wind_field", "ticks_rejected"): 1}

        def counts() -> dict[tuple[str, str], int]:
            return {key: _counter(diags, *key) for key in expected}

        sent = [time.monotonic()]

        def counted() -> bool:
            keep_flying()
            other.spin_until(lambda: False, 0.01)  # keep the other run's participant served
            if all(counts()[key] >= n for key, n in expected.items()):
                return True
            if time.monotonic() - sent[0] > 2.0:  # again now and then: the first may precede a match
                sent[0] = time.monotonic()
                other_pose.publish(_pose(30.0, 30.0, 10.0, stamp=odom[-1].header.stamp))
                other_clock.publish(Clock(clock=Time(sec=1_000_000)))
                other_status.publish(foreign)
                forger.publish(forged)
            return False

        assert user.spin_until(counted, 60), counts()
        # the run goes on: 20 more simulated seconds flown towards the user's waypoint
        t_end = t_other + 1000
        assert user.spin_until(lambda: keep_flying() or grid_tick(odom[-1].header.stamp) >= t_end, 120)
        assert heading_west(8.0), f"the vehicle turned away from the user's waypoint: {position()}"
        after = status[n_status:]
        assert after and all(not s.done and s.step < 1000 for s in after), [
            (s.step, s.done_reason) for s in after if s.done or s.step >= 1000][:3]
        steps = [s.step for s in after]
        assert steps == list(range(steps[0], steps[0] + len(steps))), "the referee's steps skipped"
        assert all(s.run_id == RUN_A for s in after)
        assert "ignoring uav1/cmd/pose of run 'run-b'" in graph.log("flight_controller")
        assert "tick 50000000 of episode 1 rejected" in graph.log("referee")
    finally:
        if other is not None:
            other.close()
        codes = close_graph(graph, user)
    assert_exit_0(graph, codes)


@pytest.mark.timeout(2 * STARTUP_S + 30)  # its waits: twice the start-up's, and 5 s
def test_a_strangers_subscription_does_not_open_the_start_gate(ros: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    from qrsim_ros.msg import VehicleStatus

    scenario, graph = waypoint_graph(ros)
    stranger = None
    try:
        stranger = Probe(graph.domain_id, ros, monkeypatch)
        seen: list[Any] = []
        sub = stranger.node.create_subscription(VehicleStatus, "/sim/vehicle_status", seen.append,
                                                reliable_qos())
        graph.start("vehicle_dynamics", scenario, use_sim_time=False, start_subscribers=1, run_id=RUN_A)
        assert stranger.spin_until(lambda: sub.get_publisher_count() >= 1, STARTUP_S), "no vehicle_dynamics"
        # matched: the old gate opened now; this one waits for a member of run-a
        assert not stranger.spin_until(lambda: bool(seen), 5.0), (
            f"tick {seen[0].tick} published before any consumer of the run was in")
        graph.start("wind_field", scenario, run_id=RUN_A)
        assert stranger.spin_until(lambda: bool(seen), STARTUP_S), "the run's consumer did not open the gate"
        assert seen[0].tick == 0 and seen[0].run_id == RUN_A
    finally:
        codes = close_graph(graph, stranger)
    assert_exit_0(graph, codes)

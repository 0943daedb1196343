"""Set points expire and a lost autopilot is caught: pure core, in process.

An autopilot that stops (NaN rows: "no new set point") leaves its vehicle on the last set point for
``vehicle.command_timeout_s`` (0.5 s of simulated time), then in ``vehicle.failsafe``: ``hold`` keeps
position and height, ``land`` descends and disarms on the ground, ``level`` is the open-loop hover row.
On the old code the vehicle flew its last 2 m/s set point forever (and NaN rows were an error).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.vehicles.estimated_state import exact_estimated_state
from qrsim_ros.core.vehicles.fleet_control import FleetControl
from qrsim_ros.core.vehicles.pelican import HOVER_CONTROL, expand_state

#: One noisy Pelican in wind and turbulence, velocity control at 50 Hz, 40 s of episode.
SCENARIO = """\
description: "test_failsafe: one noisy Pelican in wind, {control} control"
seed: 21
num_vehicles: 1
task:
  type: keep_velocity
  dt_s: 0.02
  duration_steps: 2000
  start_z_ned_m: -10.0
  target_velocity_ned: [0.0, 0.0, 0.0]
area:
  type: box
  limits_ned: [-200.0, 200.0, -200.0, 200.0, -60.0, 0.0]
wind:
  on: true
  w6_mps: 2.5
  direction_rad: 0.7853981633974483
gps:
  on: true
vehicle:
  control: {control}
  failsafe: {failsafe}
  dyn_noise: [0.2, 0.2, 0.2, 0.2, 0.2, 0.2]
  ahars:
    on: true
  gps_receiver:
    on: true
  turbulence:
    on: true
    w6_mps: 2.0
"""
#: Ticks of commanded flight before the autopilot stops, and the expiry in ticks (0.5 s: > 25 ticks).
COMMANDED, EXPIRY = 100, 26
SILENT = np.full((1, 3), np.nan)


def simulator(tmp_path: Path, mode: str = "hold", control: str = "velocity", **vehicle: object) -> Simulator:
    """The scenario with failsafe ``mode``, ``control`` and other ``vehicle`` settings overridden."""
    path = tmp_path / f"{control}_{mode}.yaml"
    path.write_text(SCENARIO.format(control=control, failsafe=mode))
    return Simulator(load_scenario(path, {"vehicle": dict(vehicle)} if vehicle else None))


def fly_then_stop(sim: Simulator, action: np.ndarray, silent_s: float) -> tuple[int, np.ndarray]:
    """``COMMANDED`` ticks of ``action``, then NaN rows for ``silent_s``; returns the failsafe onset tick
    and the true positions (ticks, 3) of every tick from the first."""
    onset = -1
    positions = []
    silent = np.full_like(action, np.nan)
    for k in range(1, COMMANDED + round(silent_s / BASE_DT_S) + 1):
        if sim.done:
            break
        sim.step(action if k <= COMMANDED else silent)
        if onset < 0 and sim.failsafe[0]:
            onset = sim.tick
        positions.append(sim.true_state()[0, 0:3])
    return onset, np.array(positions)


def test_hold_keeps_position_after_the_autopilot_stops(tmp_path: Path) -> None:
    sim = simulator(tmp_path, "hold")
    onset, pos = fly_then_stop(sim, np.array([[2.0, 0.0, 0.0]]), 35.0)
    # expiry after 0.5 s of simulated time, counted once, the failsafe shown
    assert onset == COMMANDED + EXPIRY
    assert sim.failsafe == ["hold"] and sim.fleet_control.failsafe_onsets.tolist() == [1]
    assert sim.valid[0]
    at_onset = pos[onset - 1]
    after = pos[onset:]
    assert len(after) * BASE_DT_S >= 34.0
    # it brakes from 2 m/s (overshooting ~6.7 m: QRSim's waypoint loop is P only) and comes back: over
    # 34 s within 8 m horizontally and 1.5 m in height of where the set point expired, the last 10 s
    # within 4 m (GPS error included; the old code flew 2 m/s forever, 'level' drifts ~90 m in the wind)
    horizontal = np.linalg.norm(after[:, 0:2] - at_onset[0:2], axis=1)
    assert horizontal.max() < 8.0, horizontal.max()
    assert horizontal[-round(10 / BASE_DT_S):].max() < 4.0, horizontal[-500:].max()
    assert np.abs(after[:, 2] - at_onset[2]).max() < 1.5


def test_level_drifts_as_before(tmp_path: Path) -> None:
    sim = simulator(tmp_path, "level")
    onset, pos = fly_then_stop(sim, np.array([[2.0, 0.0, 0.0]]), 35.0)
    assert onset == COMMANDED + EXPIRY and sim.failsafe == ["level"]
    assert np.linalg.norm(pos[-1, 0:2] - pos[onset - 1, 0:2]) > 30.0  # open loop: the wind takes it


def test_a_fresh_set_point_ends_the_failsafe(tmp_path: Path) -> None:
    sim = simulator(tmp_path, "hold")
    fly_then_stop(sim, np.array([[1.0, 0.0, 0.0]]), 2.0)
    assert sim.failsafe == ["hold"]
    sim.step(np.array([[0.0, 1.0, 0.0]]))
    assert sim.failsafe == [""]


def test_land_descends_and_stays_disarmed(tmp_path: Path) -> None:
    sim = simulator(tmp_path, "land")
    onset, pos = fly_then_stop(sim, np.array([[1.0, 0.0, 0.0]]), 38.0)
    assert onset == COMMANDED + EXPIRY
    assert not sim.valid[0] and sim.fleet.invalid_reason == ["landed (failsafe land)"]
    landed = np.flatnonzero(np.all(np.diff(pos, axis=0) == 0, axis=1))
    assert landed.size, "the vehicle never stopped moving"
    first = landed[0]
    # ~10 m at 0.5 m/s: about 20 s of descent; on the ground (height <= 0.3 m + the altimeter's error)
    assert 12.0 < (first - onset) * BASE_DT_S < 30.0
    assert -1.0 < pos[first, 2] <= 0.0
    assert np.all(pos[first:] == pos[first])  # frozen for good (disarmed)
    assert np.all(np.diff(pos[onset:first, 2]) > -0.05)  # never climbs on the way down (noise aside)


def test_level_is_the_open_loop_hover_row() -> None:
    fc = FleetControl(["velocity", "attitude"], -10.0, command_timeout_s=0.5, failsafe="level")
    x = expand_state(np.array([[0, 0, -10, 0, 0, 0.3], [5, 5, -10, 0, 0, 0.0]], float))
    ex = exact_estimated_state(x, np.zeros((2, 3)))
    targets = np.array([[2.0, 0, 0, np.nan, np.nan], [0.1, 0, 0.7, 0, 12]])
    fresh = fc.controls(targets, ex, [True, True], [0, 0], now_s=1.0, issued_s=[0.5, 0.5])
    assert fc.failsafe == ["", ""] and not np.allclose(fresh[0], HOVER_CONTROL)
    assert np.array_equal(fresh[1], targets[1])
    expired = fc.controls(targets, ex, [True, True], [0, 0], now_s=1.02, issued_s=[0.5, 0.5])
    assert fc.failsafe == ["level", "level"]
    assert np.array_equal(expired, np.tile(HOVER_CONTROL, (2, 1)))


def test_attitude_vehicles_get_the_failsafe_too(tmp_path: Path) -> None:
    sim = simulator(tmp_path, "hold", control="attitude")
    tilt = np.array([[0.05, 0.0, 0.59004353928, 0.0, 12.0]])
    onset, pos = fly_then_stop(sim, tilt, 20.0)
    assert onset == COMMANDED + EXPIRY and sim.failsafe == ["hold"] and sim.valid[0]
    after = pos[onset:]
    # it was drifting at ~1 m/s when the command expired: it brakes and comes back (no drift away)
    horizontal = np.linalg.norm(after[:, 0:2] - pos[onset - 1, 0:2], axis=1)
    assert horizontal.max() < 10.0 and horizontal[-1] < horizontal.max() - 2.0, horizontal
    assert np.abs(after[:, 2] - pos[onset - 1, 2]).max() < 1.5


def test_a_run_that_always_commands_never_fails_safe(tmp_path: Path) -> None:
    a, b = simulator(tmp_path, "hold"), simulator(tmp_path, "hold", command_timeout_s=0.0)
    for _ in range(200):
        a.step(np.array([[1.0, -0.5, 0.0]]))
        b.step(np.array([[1.0, -0.5, 0.0]]))
    assert a.failsafe == [""] and np.array_equal(a.true_state(), b.true_state())


def test_huge_velocity_set_point_is_clamped_and_counted_once(tmp_path: Path) -> None:
    sim = simulator(tmp_path, "hold")
    for _ in range(100):
        sim.step(np.array([[1e9, 0.0, 0.0]]))
    assert sim.fleet_control.setpoints_clamped.tolist() == [1]
    assert np.linalg.norm(sim.true_state()[0, 6:9]) < 6.0  # flown at the controller's limit, not 1e9
    sim.step(np.array([[0.0, -1e9, 0.0]]))
    assert sim.fleet_control.setpoints_clamped.tolist() == [2]
    sim.step(np.array([[1.0, 0.0, 0.0]]))
    assert sim.fleet_control.setpoints_clamped.tolist() == [2]


@pytest.mark.parametrize(("key", "value", "message"), [
    ("failsafe", "fly", "vehicle.failsafe='fly' must be one of hold, land, level"),
    ("command_timeout_s", -1.0, "vehicle.command_timeout_s=-1.0 must be in [0.0, 1000000.0]"),
    ("failsafe_land_rate_m_s", 0.0, "vehicle.failsafe_land_rate_m_s=0.0 must be in [0.1, 3.0]"),
])
def test_bad_failsafe_settings_are_one_clear_line(tmp_path: Path, key: str, value: object,
                                                  message: str) -> None:
    with pytest.raises((ConfigError, ValueError)) as info:
        simulator(tmp_path, "hold", **{key: value})
    assert message in str(info.value) and "\n" not in str(info.value)


# --- the graph: the same expiry in the flight_controller, stamps checked -----------------------------------

@pytest.mark.graph
def test_graph_fails_safe_at_the_simulators_tick_and_checks_stamps(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A lockstep graph flown by one set point stamped 0 (then silence) enters 'hold' at the tick the
    Simulator does, on the same trajectory; set points stamped -100 s and +1e6 s are rejected and a
    1e9 m/s one is clamped, each counted in /sim/vehicle_status."""
    from rosenv import assert_exit_0, close_graph, free_domain, reliable_qos, require_ros
    from test_node_control import LIB, STARTUP_S, Graph, Probe

    require_ros()
    from geometry_msgs.msg import TwistStamped
    from qrsim_ros.msg import VehicleStatus

    scenario = tmp_path / "velocity_hold.yaml"
    scenario.write_text(SCENARIO.format(control="velocity", failsafe="hold"))
    assert (LIB / "flight_controller").exists()
    graph = Graph(tmp_path, free_domain())
    probe = None
    try:
        graph.start("vehicle_dynamics", scenario, lockstep=True, real_time_factor=1.0, use_sim_time=False,
                    start_subscribers=6, lockstep_timeout_s=2.0)
        for name in ("wind_field", "imu", "gps", "altimeter", "flight_controller"):
            graph.start(name, scenario)
        probe = Probe(graph.domain_id, tmp_path, monkeypatch)
        node = probe.node
        pub = node.create_publisher(TwistStamped, "uav1/cmd/velocity", reliable_qos(10))

        def setpoint(north_mps: float, sec: int = 0, nanosec: int = 0) -> TwistStamped:
            m = TwistStamped()
            m.header.frame_id = "map"
            m.header.stamp.sec, m.header.stamp.nanosec = sec, nanosec
            m.twist.linear.y = north_mps  # ENU: y is north
            return m

        # the set point stamped t = 0 reaches the flight controller before the graph starts: the probe's
        # status subscription is the last of the start gate's 6
        assert probe.spin_until(lambda: pub.get_subscription_count() >= 1, STARTUP_S)
        pub.publish(setpoint(2.0))
        # no event says "the flight controller has it": give the reliable delivery (~ms) a second
        assert probe.spin_until(lambda: False, 1.0) is False
        status: dict[int, Any] = {}
        node.create_subscription(VehicleStatus, "/sim/vehicle_status",
                                 lambda m: status.setdefault(int(m.tick), m), reliable_qos())
        assert probe.spin_until(lambda: 200 in status, STARTUP_S), "the graph did not run 200 ticks"
        onset = min(k for k, m in status.items() if m.failsafe[0])
        assert status[onset].failsafe[0] == "hold" and status[onset].failsafe_onsets[0] == 1

        # the Simulator: the same set point at the first tick, then silence
        sim = Simulator(load_scenario(scenario))
        sim.step(np.array([[2.0, 0.0, 0.0]]))
        in_process = {1: sim.true_state()}
        while sim.tick < 200:
            sim.step(SILENT)
            in_process[sim.tick] = sim.true_state()
            if not sim.failsafe[0]:
                sim_onset = sim.tick + 1
        assert onset == sim_onset == 1 + EXPIRY
        worst = max(np.abs(np.array(status[k].state).reshape(-1, 13)[:, :12] - in_process[k][:, :12]).max()
                    for k in range(1, 201) if k in status)
        assert worst < 1e-6, worst

        # stamps: 100 s in the past, 1e6 s ahead -> rejected and counted; a 1e9 m/s set point -> clamped
        pub.publish(setpoint(1.0, sec=-100))
        pub.publish(setpoint(1.0, sec=1_000_000))
        assert probe.spin_until(lambda: status[max(status)].setpoints_rejected[0] >= 2, 30), \
            status[max(status)].setpoints_rejected
        before = status[max(status)]
        assert before.failsafe[0] == "hold"  # neither was flown
        assert before.setpoints_rejected[0] == 2 and before.setpoints_clamped[0] == 0
        attempts = [0]

        def fresh_huge() -> bool:
            # stamped with the latest status's time; on a loaded machine it can arrive more than
            # command_timeout_s later and be rejected as stale: then the next attempt goes out
            last = status[max(status)]
            pub.publish(setpoint(1e9, last.header.stamp.sec, last.header.stamp.nanosec))
            attempts[0] += 1
            return probe.spin_until(lambda: status[max(status)].setpoints_clamped[0] >= 1, 0.3)

        assert probe.spin_until(fresh_huge, 30), "no clamp counted"

        def accounted() -> bool:  # each attempt clamped (flown) or rejected (stale); none flown as it was
            last = status[max(status)]
            return last.setpoints_clamped[0] + last.setpoints_rejected[0] - 2 == attempts[0]

        assert probe.spin_until(accounted, 30), (attempts, status[max(status)].setpoints_clamped,
                                                 status[max(status)].setpoints_rejected)
        # the clamped set point is flown: out of the failsafe
        assert probe.spin_until(lambda: not status[max(status)].failsafe[0], 10), [
            (k, m.failsafe[0], m.setpoints_clamped[0]) for k, m in sorted(status.items())[-5:]]
    finally:
        codes = close_graph(graph, probe)
    assert_exit_0(graph, codes)  # the codes, and the logs of the nodes that did not exit 0

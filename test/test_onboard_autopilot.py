"""The onboard autopilot (core.onboard): PX4's modes, arming checks, missions and offboard rules, flown
on a kinematic vehicle (its velocity follows the set point with a lag; the ground stops it), so that
every mode's behaviour is checked without the airframe: the airframe's own loops are tested elsewhere."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kinematic_fleet import DT_S, LAG_S, KinematicFleet

from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.onboard.autopilot import FORCE_DISARM_MAGIC, OnboardAutopilot
from qrsim_ros.core.onboard.mission import ItemKind, MissionItem
from qrsim_ros.core.onboard.modes import FlightMode, LandedState
from qrsim_ros.core.onboard.parameters import SPECS, ParameterTable
from qrsim_ros.core.vehicles.estimated_state import HEADING, POSITION_NED


def first_time(condition, times: list[float]):
    """A ``before_tick`` that notes in ``times`` the first tick time at which ``condition()`` holds."""
    def watch(t: float) -> None:
        if not times and condition():
            times.append(t)
    return watch


def fleet_on_ground(n: int = 1, **params: float) -> tuple[KinematicFleet, OnboardAutopilot]:
    fleet = KinematicFleet([(10.0 * i, 0.0, 0.0) for i in range(n)])
    ap = OnboardAutopilot(n, DT_S, ParameterTable(n, params))
    ap.observe(0.0, fleet.ex(), np.ones(n, bool))
    return fleet, ap


def took_off(altitude_m: float = 10.0, **params: float) -> tuple[KinematicFleet, OnboardAutopilot]:
    fleet, ap = fleet_on_ground(**params)
    assert ap.arm(0).accepted
    assert ap.takeoff(0, altitude_m).accepted
    fleet.fly(ap, 15.0)
    return fleet, ap


def test_arming_runs_the_preflight_checks_and_says_why_it_refuses() -> None:
    fleet, ap = fleet_on_ground()
    ex = fleet.ex()
    ex[0, POSITION_NED] = np.nan  # a GPS outage: no position estimate
    ap.observe(0.0, ex, np.ones(1, bool))
    result = ap.arm(0)
    assert not result.accepted and "no position estimate" in result.reason
    events = ap.drain_events()
    assert [e.kind for e in events] == ["text"] and "Arming denied" in events[0].text
    ap.observe(0.0, fleet.ex(), np.ones(1, bool))
    refused = ap.arm(0, sensors_healthy=False, failed_checks=["accelerometer self-test failed"])
    assert not refused.accepted
    assert "accelerometer self-test failed" in refused.reason and "sensors unhealthy" in refused.reason
    assert not ap.arm(0, battery_ok=False).accepted
    assert not ap.armed[0]
    assert ap.arm(0).accepted and ap.armed[0]
    np.testing.assert_array_equal(ap.home_ned[0], fleet.pos[0])
    assert ap.arm(0).accepted  # armed already: accepted, nothing changes


def test_takeoff_climbs_at_the_takeoff_speed_to_its_altitude_and_then_holds() -> None:
    fleet, ap = fleet_on_ground()
    assert not ap.takeoff(0, 10.0).accepted  # disarmed
    assert ap.arm(0).accepted and ap.takeoff(0, 10.0).accepted
    assert ap.mode[0] == FlightMode.TAKEOFF
    states = []
    fleet.fly(ap, 3.0, before_tick=lambda t: states.append(int(ap.landed_state[0])))
    assert LandedState.TAKEOFF in states
    climb = -fleet.vel[0, 2]
    assert climb == pytest.approx(ap.params.value("MPC_TKO_SPEED", 0), rel=0.05)
    fleet.fly(ap, 12.0)
    assert ap.mode[0] == FlightMode.HOLD and ap.landed_state[0] == LandedState.IN_AIR
    assert -fleet.pos[0, 2] == pytest.approx(10.0, abs=0.3)
    assert np.hypot(*fleet.pos[0, 0:2]) < 0.05  # straight up
    # the default altitude is MIS_TAKEOFF_ALT
    fleet, ap = fleet_on_ground(MIS_TAKEOFF_ALT=4.0)
    ap.arm(0)
    ap.takeoff(0)
    fleet.fly(ap, 10.0)
    assert -fleet.pos[0, 2] == pytest.approx(4.0, abs=0.3)


def test_offboard_needs_a_stream_flies_velocity_then_position_and_yaw() -> None:
    fleet, ap = took_off()
    assert not ap.set_mode(0, FlightMode.OFFBOARD).accepted  # nothing streamed yet
    ap.offboard_setpoint(0, velocity_ned_mps=(1.0, 0.0, 0.0))
    assert ap.set_mode(0, FlightMode.OFFBOARD).accepted

    def stream_velocity(_t: float) -> None:
        ap.offboard_setpoint(0, velocity_ned_mps=(1.0, 0.0, 0.0), yaw_rad=math.pi / 2)

    north0 = fleet.pos[0, 0]
    fleet.fly(ap, 5.0, before_tick=stream_velocity)
    assert fleet.vel[0, 0] == pytest.approx(1.0, abs=0.02)
    assert fleet.pos[0, 0] - north0 == pytest.approx(5.0 - LAG_S - 1.0 / 3.0 / 2, abs=0.5)
    assert fleet.heading[0] == pytest.approx(math.pi / 2)

    def stream_position(_t: float) -> None:
        ap.offboard_setpoint(0, position_ned_m=(20.0, -5.0, -12.0))

    fleet.fly(ap, 30.0, before_tick=stream_position)
    np.testing.assert_allclose(fleet.pos[0], (20.0, -5.0, -12.0), atol=0.2)
    assert ap.mode[0] == FlightMode.OFFBOARD and ap.failsafe_onsets[0] == 0


def test_offboard_loss_switches_to_the_configured_mode_after_the_timeout() -> None:
    for action, mode in ((0, FlightMode.HOLD), (4, FlightMode.LAND), (3, FlightMode.RTL)):
        fleet, ap = took_off(COM_OBL_RC_ACT=action, COM_OF_LOSS_T=0.5)
        ap.offboard_setpoint(0, velocity_ned_mps=(1.0, 0.0, 0.0))
        ap.set_mode(0, FlightMode.OFFBOARD)
        ap.drain_events()
        t0 = fleet.t
        switched_at = []
        left = first_time(lambda ap=ap: ap.mode[0] != FlightMode.OFFBOARD, switched_at)
        fleet.fly(ap, 2.0, before_tick=left)
        assert ap.mode[0] == mode, action
        assert switched_at[0] - t0 == pytest.approx(0.5 + DT_S, abs=2 * DT_S)
        assert ap.failsafe_onsets[0] == 1
        lost = [e for e in ap.drain_events() if e.kind == "mode"]
        assert len(lost) == 1 and "offboard set points lost" in lost[0].text and lost[0].severity == 2


def test_a_mission_flies_its_waypoints_in_order_then_returns_lands_and_disarms() -> None:
    fleet, ap = fleet_on_ground(RTL_RETURN_ALT=15.0, NAV_ACC_RAD=1.0, COM_DISARM_LAND=2.0)
    square = [(20.0, 0.0, -10.0), (20.0, 20.0, -10.0), (0.0, 20.0, -12.0), (0.0, 0.0, -10.0)]
    items = [MissionItem(ItemKind.WAYPOINT, p) for p in square]
    items[1] = MissionItem(ItemKind.LOITER_TIME, square[1], hold_s=3.0)
    assert ap.set_mission(0, [*items, MissionItem(ItemKind.RTL)]).accepted
    assert ap.start_mission(0).accepted  # a mission can be started disarmed and waits
    assert ap.arm(0).accepted
    reached: list[tuple[int, float]] = []
    heights: list[float] = []
    velocities: list[np.ndarray] = []

    def watch(t: float) -> None:
        reached.extend((e.seq, t) for e in ap.drain_events() if e.kind == "reached")
        heights.append(-fleet.pos[0, 2])

    for _ in range(60):
        velocities += fleet.fly(ap, 5.0, before_tick=watch)
        if not ap.armed[0]:
            break
    assert [seq for seq, _ in reached] == [0, 1, 2, 3, 4]
    loiter_start = next(t for seq, t in reached if seq == 0)
    assert reached[1][1] - loiter_start >= 3.0  # the loiter time at item 1 (after flying there)
    assert not ap.armed[0] and ap.mode[0] == FlightMode.HOLD
    assert ap.landed_state[0] == LandedState.ON_GROUND
    assert np.hypot(*fleet.pos[0, 0:2]) < 1.0 and fleet.pos[0, 2] == 0.0  # home
    assert max(heights) == pytest.approx(15.0, abs=0.5)  # RTL climbed to its return altitude
    v = np.array(velocities)[:, 0]
    v = v[:np.flatnonzero(np.abs(v).sum(axis=1))[-1] + 1]  # while armed (disarming stops the motors at once)
    assert np.hypot(v[:, 0], v[:, 1]).max() <= ap.params.value("MPC_XY_CRUISE", 0) + 1e-9
    assert np.linalg.norm(np.diff(v, axis=0), axis=1).max() <= ap.params.value("MPC_ACC_HOR", 0) * DT_S + 1e-9


def test_disarming_in_the_air_needs_force_and_landing_disarms_after_the_delay() -> None:
    fleet, ap = took_off(COM_DISARM_LAND=1.0)
    refused = ap.disarm(0)
    assert not refused.accepted and "not landed" in refused.reason
    assert ap.set_mode(0, FlightMode.LAND).accepted
    touchdown: list[float] = []
    disarmed_at: list[float] = []

    def watch(t: float) -> None:
        first_time(lambda: ap.landed_state[0] == LandedState.ON_GROUND, touchdown)(t)
        first_time(lambda: not ap.armed[0], disarmed_at)(t)

    fleet.fly(ap, 25.0, before_tick=watch)
    assert not ap.armed[0]
    assert disarmed_at[0] - touchdown[0] == pytest.approx(1.0, abs=2 * DT_S)  # COM_DISARM_LAND
    disarmed = [e for e in ap.drain_events() if "disarmed" in e.text]
    assert len(disarmed) == 1
    # forced, in the air: motors off at once
    fleet, ap = took_off()
    assert ap.disarm(0, force=True).accepted and not ap.armed[0]
    assert FORCE_DISARM_MAGIC == 21196


def test_vehicles_are_independent() -> None:
    fleet, ap = fleet_on_ground(3)
    ap.arm(0)
    ap.takeoff(0, 5.0)
    ap.arm(1)
    ap.takeoff(1, 8.0)
    fleet.fly(ap, 12.0)
    np.testing.assert_allclose(-fleet.pos[:, 2], [5.0, 8.0, 0.0], atol=0.3)
    assert list(ap.armed) == [True, True, False]
    ap.offboard_setpoint(1, velocity_ned_mps=(0.0, 1.0, 0.0))
    assert ap.set_mode(1, FlightMode.OFFBOARD).accepted
    fleet.fly(ap, 2.0, before_tick=lambda t: ap.offboard_setpoint(1, velocity_ned_mps=(0.0, 1.0, 0.0)))
    assert fleet.vel[1, 1] > 0.9 and abs(fleet.vel[0, 1]) < 0.01
    assert list(ap.mode) == [FlightMode.HOLD, FlightMode.OFFBOARD, FlightMode.HOLD]


def test_parameters_are_checked_and_named() -> None:
    table = ParameterTable(2)
    assert table.value("MIS_TAKEOFF_ALT", 1) == 2.5
    assert table.set("MIS_TAKEOFF_ALT", 1, 12) == 12.0
    assert list(table.get("MIS_TAKEOFF_ALT")) == [2.5, 12.0]
    with pytest.raises(ConfigError, match=r"MPC_XY_VEL_MAX=9 must be in \[0.1, 2.7\] m/s"):
        table.set("MPC_XY_VEL_MAX", 0, 9)
    with pytest.raises(ConfigError, match="COM_OBL_RC_ACT=2 must be one of 0, 1, 3, 4, 5"):
        table.set("COM_OBL_RC_ACT", 0, 2)
    with pytest.raises(ConfigError, match=r"'NO_SUCH': no such parameter"):
        table.set("NO_SUCH", 0, 1)
    with pytest.raises(ConfigError, match=r"mavlink\.parameters\.RTL_RETURN_ALT=nan"):
        ParameterTable(1, {"RTL_RETURN_ALT": float("nan")})
    with pytest.raises(ConfigError, match="is not a number"):
        table.set("NAV_ACC_RAD", 0, "far")
    assert all(len(s.name) <= 16 and s.lo <= s.default <= s.hi for s in SPECS)  # MAVLink's id is 16 chars


def test_mission_items_reject_what_cannot_be_flown() -> None:
    with pytest.raises(ConfigError, match="north and east must be finite"):
        MissionItem(ItemKind.WAYPOINT)
    with pytest.raises(ConfigError, match="hold_s"):
        MissionItem(ItemKind.LOITER_TIME, (0.0, 0.0, -5.0), hold_s=-1.0)
    MissionItem(ItemKind.LAND)  # where it is
    _, ap = fleet_on_ground()
    assert not ap.set_mode(0, FlightMode.MISSION).accepted  # no mission
    assert not ap.start_mission(0, 3).accepted


def test_a_change_speed_item_sets_the_speed_of_the_items_after_it() -> None:
    fleet, ap = took_off(5.0)
    far = (60.0, 0.0, -5.0)
    ap.set_mission(0, [MissionItem(ItemKind.CHANGE_SPEED, speed_mps=1.0),
                       MissionItem(ItemKind.WAYPOINT, far)])
    assert ap.start_mission(0).accepted
    v = np.array(fleet.fly(ap, 10.0))[:, 0]
    assert np.hypot(v[:, 0], v[:, 1]).max() == pytest.approx(1.0)
    assert [e.seq for e in ap.drain_events() if e.kind == "reached"] == [0]
    with pytest.raises(ConfigError, match="speed_mps"):
        MissionItem(ItemKind.CHANGE_SPEED, speed_mps=-2.0)


def test_offboard_attitude_set_points_become_the_airframes_attitude_commands() -> None:
    """An attitude set point in Offboard is handed on as Pelican attitude commands (pitch, roll,
    throttle, yaw rate), scaled by the identified loop's steady gains (spec 2.3: it settles to 0.745 of
    a tilt command, 0.436 of a yaw-rate command) and held to the command limits; a yaw without a rate
    turns at MC_YAW_P; a velocity set point replaces it; a non-finite one is refused."""
    from qrsim_ros.core.vehicles.pelican import PQ0, R0, R1, SI_TO_FIRMWARE

    tilt_gain = PQ0 * SI_TO_FIRMWARE[1]
    yaw_gain = -R0 * SI_TO_FIRMWARE[3] / R1
    fleet, ap = took_off(MC_YAW_P=2.0)
    assert ap.offboard_attitude(0, roll_rad=0.2, pitch_rad=-0.1, thrust=0.7, yaw_rate_rads=0.3).accepted
    assert ap.set_mode(0, FlightMode.OFFBOARD).accepted
    sp = ap.step(fleet.t, fleet.ex(), np.ones(1, bool))
    expected = [-0.1 / tilt_gain, 0.2 / tilt_gain, 0.7, 0.3 / yaw_gain]
    np.testing.assert_allclose(sp.attitude_control[0], expected)
    heading = float(fleet.ex()[0, HEADING])
    ap.offboard_attitude(0, roll_rad=1.5, pitch_rad=0.0, thrust=1.5, yaw_rad=heading + 0.1)
    sp = ap.step(fleet.t, fleet.ex(), np.ones(1, bool))
    np.testing.assert_allclose(sp.attitude_control[0], [0.0, 0.9, 1.0, 2.0 * 0.1 / yaw_gain])  # the limits
    assert ap.offboard_thrust(0) == 1.0
    ap.offboard_setpoint(0, velocity_ned_mps=(1.0, 0.0, 0.0))
    sp = ap.step(fleet.t, fleet.ex(), np.ones(1, bool))
    assert np.isnan(sp.attitude_control).all() and sp.velocity_ned_mps[0, 0] > 0
    assert not ap.offboard_attitude(0, roll_rad=math.nan, pitch_rad=0.0, thrust=0.5).accepted
    assert ap.mode[0] == FlightMode.OFFBOARD and ap.failsafe_onsets[0] == 0

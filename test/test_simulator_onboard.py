"""The in-process Simulator with onboard autopilots (``mavlink.on``): Pelicans that rest on the ground, the
autopilot flying them from the ground and back, and their MAVLink face with faults a real autopilot would
see (a pymavlink client on loopback UDP; MAVSDK's flight is test_mavsdk_simulator.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pymavlink.dialects.v20 import common as mavlink
from test_mavlink import Client, free_ports, last_ack

from qrsim_ros.cli.main import main
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.onboard.modes import FlightMode, LandedState
from qrsim_ros.core.vehicles.airframes import GROUND_CRASH_REASON, MAX_TOUCHDOWN_MPS, Airframes
from qrsim_ros.core.vehicles.pelican import (
    HOVER_CONTROL,
    MOTORS_OFF_CONTROL,
    STATE_DOWN,
    STATE_HEADING,
    STATE_NORTH_EAST,
    STATE_VELOCITY_FRD,
    PelicanParams,
)
from qrsim_ros.mavlink.simulator import RealTimePacer, SimulatorMavlink

REST_Z = -0.2  # the Pelican rotor set's contact radius above the ground at 0


def _fleet(ground_rest: bool, down_m: float, w_mps: float = 0.0) -> Airframes:
    params = PelicanParams(dyn_noise=np.full(6, 0.2))  # the default area: the ground at NED z 0
    fleet = Airframes(["pelican"], params, [np.random.default_rng(1)], ground_rest=ground_rest)
    fleet.set_state(np.array([[1.0, 2.0, down_m, 0, 0, 0.3, 0, 0, w_mps, 0, 0, 0]]))
    return fleet


def test_a_pelican_rests_on_the_ground_and_lifts_off_with_thrust() -> None:
    fleet = _fleet(True, -1.0, w_mps=1.0)  # coming down at 1 m/s with the motors off
    for _ in range(100):
        fleet.step(MOTORS_OFF_CONTROL[None, :])
    x = fleet.state[0]
    assert fleet.valid[0] and fleet.resting[0]
    assert x[STATE_DOWN] == REST_Z and np.all(x[STATE_VELOCITY_FRD] == 0)
    assert fleet.accel_body[0] == pytest.approx([0, 0, -9.81])  # the ground holds it up
    resting_at = x.copy()
    for _ in range(200):  # friction: no slide, no turn, whatever the dynamic noise
        fleet.step(MOTORS_OFF_CONTROL[None, :])
    assert np.array_equal(fleet.state[0, STATE_NORTH_EAST], resting_at[STATE_NORTH_EAST])
    assert fleet.state[0, STATE_HEADING] == resting_at[STATE_HEADING]
    climb = HOVER_CONTROL.copy()
    climb[2] = 0.8
    for _ in range(100):
        fleet.step(climb[None, :])
    assert fleet.valid[0] and not fleet.resting[0] and fleet.state[0, STATE_DOWN] < REST_Z - 1.0


def test_a_fast_touchdown_is_a_crash_and_without_ground_rest_the_ground_ends_the_vehicle() -> None:
    fast = _fleet(True, -0.25, w_mps=MAX_TOUCHDOWN_MPS + 1.0)
    for _ in range(5):
        fast.step(MOTORS_OFF_CONTROL[None, :])
    assert not fast.valid[0] and fast.invalid_reason[0] == GROUND_CRASH_REASON
    qrsim = _fleet(False, -1.0, w_mps=1.0)  # QRSim's world: through the ground, out of the area
    for _ in range(100):
        qrsim.step(MOTORS_OFF_CONTROL[None, :])
    assert not qrsim.valid[0] and qrsim.invalid_reason[0].startswith("pz=")


def test_the_autopilot_flies_a_simulated_pelican_from_the_ground_and_back() -> None:
    sim = Simulator.from_scenario("px4_sitl", {"seed": 5, "mavlink": {"parameters": {"MPC_LAND_SPEED": 1.5}}})
    ap = sim.onboard
    assert ap is not None and sim.control_modes == ["velocity"]
    nan = np.full((1, sim.action_spec["width"]), np.nan)
    sim.step(nan)
    assert not ap.armed[0] and ap.landed_state[0] == LandedState.ON_GROUND and sim.fleet.resting[0]
    assert ap.arm(0).accepted and ap.takeoff(0, 8.0).accepted
    for _ in range(12):
        sim.step(nan)
    assert ap.mode[0] == FlightMode.HOLD and -sim.true_state()[0, STATE_DOWN] > 7.5
    assert ap.set_mode(0, FlightMode.LAND).accepted
    for _ in range(15):
        sim.step(nan)
    assert not ap.armed[0] and sim.valid[0] and sim.fleet.resting[0]  # landed, disarmed, not crashed
    texts = [e.text for e in ap.drain_events()]
    assert "Landing detected: disarmed" in texts


def test_a_mavlink_scenario_is_checked_with_one_line() -> None:
    with pytest.raises(ScenarioError, match=r"mavlink: parameters.'MIS_TAKEOFF': no such parameter"):
        load_scenario("px4_sitl", {"mavlink": {"parameters": {"MIS_TAKEOFF": 5}}})
    with pytest.raises(ScenarioError, match=r"MIS_TAKEOFF_ALT=500 must be in \[0.5, 100\] m"):
        load_scenario("px4_sitl", {"mavlink": {"parameters": {"MIS_TAKEOFF_ALT": 500}}})
    with pytest.raises(ScenarioError, match=r"vehicle.control must be velocity .* not 'attitude'"):
        load_scenario("keep_spot", {"mavlink": {"on": True}})
    # cats and mouse: the cats are the autopilots', the mouse stays the task's
    cats = load_scenario("cats_mouse_1a", {"mavlink": {"on": True}, "vehicle": {"control": None}})
    assert cats.control_modes() == ("velocity",) * (cats.num_vehicles - 1) + ("velocity_height",)


def test_arming_is_refused_during_a_gps_outage_and_telemetry_is_the_estimate() -> None:
    faults = [{"kind": "gps_outage", "vehicles": [0], "trigger": {"at_time_s": 0.0}, "duration_s": 3.0}]
    sim = Simulator.from_scenario("px4_sitl", {"seed": 9, "faults": faults, "task": {"dt_s": 0.2}})
    ports = free_ports(1)
    client = Client(ports.api_remote, ports.api_local)
    nan = np.full((1, sim.action_spec["width"]), np.nan)

    def fly(seconds: float) -> None:
        for _ in range(round(seconds / 0.2)):
            sim.step(nan)
            client.read()  # every task step: a socket's buffer holds about a second of telemetry

    with SimulatorMavlink(sim, ports, real_time_factor=0):
        fly(1.0)
        status = client.of("SYS_STATUS")[-1]
        assert not status.onboard_control_sensors_health & mavlink.MAV_SYS_STATUS_SENSOR_GPS
        assert client.of("GPS_RAW_INT")[-1].fix_type == mavlink.GPS_FIX_TYPE_NO_FIX
        client.command(mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 1)
        fly(0.2)
        assert last_ack(client, mavlink.MAV_CMD_COMPONENT_ARM_DISARM).result == mavlink.MAV_RESULT_DENIED
        assert any("Arming denied" in t and "GPS: no fix" in t for t in client.texts())
        fly(2.4)  # the outage ends at 3 s
        client.command(mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 1)
        fly(0.2)
        assert last_ack(client, mavlink.MAV_CMD_COMPONENT_ARM_DISARM).result == mavlink.MAV_RESULT_ACCEPTED
        assert client.of("GPS_RAW_INT")[-1].fix_type == mavlink.GPS_FIX_TYPE_3D_FIX
        assert sim.onboard is not None and sim.onboard.armed[0]
        local = client.of("LOCAL_POSITION_NED")[-1]
        reported = np.array([local.x, local.y, local.z])
        assert reported == pytest.approx(sim.estimated_state()[0, 0:3], abs=0.1)  # the estimate (30 Hz)
        assert np.abs(reported - sim.true_state()[0, 0:3]).max() > 1e-3  # not the ground truth
    client.close()


def test_the_pacer_keeps_simulated_time_to_the_wall_clock() -> None:
    wall = [100.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        wall[0] += s

    pacer = RealTimePacer(2.0, clock=lambda: wall[0], sleep=sleep)
    for k in range(1, 51):
        pacer.wait(0.02 * k)
    assert wall[0] == pytest.approx(100.0 + 0.49)  # 0.98 s simulated after the first tick, at 2x
    wall[0] += 5.0  # the simulation stalled: no burst to catch up
    pacer.wait(1.04)
    pacer.wait(1.06)
    assert slept[-1] == pytest.approx(0.01) and pacer.behind_s > 4.0
    with pytest.raises(ValueError, match="real_time_factor"):
        RealTimePacer(math.nan)


def test_the_command_line_refuses_what_a_mavlink_or_firmware_run_cannot_do(
        capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        ("keep_spot", "--real-time-factor", "2"): "--real-time-factor paces a --mavlink run",
        ("keep_spot", "--mavlink"): "vehicle.control must be velocity",
        ("px4_sitl", "--mavlink", "--real-time-factor", "-1"): "--real-time-factor must be >= 0",
        ("keep_spot", "--firmware", "ardupilot", "--mavlink"): "--firmware and --mavlink exclude each other",
    }
    for argv, message in cases.items():
        assert main(["run", *argv]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (argv, err)


def _takeoff_flight(sim: Simulator, altitude_m: float = 5.0, steps: int = 8) -> np.ndarray:
    """Vehicle 0 armed and taking off to ``altitude_m`` for ``steps`` task steps; the true states."""
    ap = sim.onboard
    assert ap is not None
    nan = np.full((1, sim.action_spec["width"]), np.nan)
    sim.step(nan)
    assert ap.arm(0).accepted and ap.takeoff(0, altitude_m).accepted
    for _ in range(steps):
        sim.step(nan)
    return sim.true_state()


def test_onboard_flights_repeat_with_their_seed_and_a_reseed_keeps_the_vehicles_settings() -> None:
    overrides = {"seed": 21, "mavlink": {"parameters": {"MPC_TKO_SPEED": 2.0}}}
    a, b = Simulator.from_scenario("px4_sitl", overrides), Simulator.from_scenario("px4_sitl", overrides)
    first = _takeoff_flight(a)
    np.testing.assert_array_equal(first, _takeoff_flight(b))  # same seed, same commands: bit for bit
    ap = a.onboard
    assert ap is not None and ap.params.set("MIS_TAKEOFF_ALT", 0, 7.0) == 7.0
    a.reset(seed=21)  # a new episode of the same streams: disarmed on the ground again, settings kept
    assert a.onboard is ap and not ap.armed[0] and ap.mode[0] == FlightMode.HOLD
    assert ap.params.value("MIS_TAKEOFF_ALT", 0) == 7.0 and ap.params.value("MPC_TKO_SPEED", 0) == 2.0
    np.testing.assert_array_equal(_takeoff_flight(a), first)


def test_offboard_attitude_set_points_over_mavlink_fly_the_pelicans_attitude_loop() -> None:
    """SET_ATTITUDE_TARGET in Offboard: the Pelican's roll and pitch follow the quaternion's (its own
    attitude loop, QRSim's), the heading turns at the body yaw rate, a positive roll accelerates it to
    the right; the stream's loss is the offboard failsafe; a body-rates-only message is refused with
    a STATUSTEXT and counted."""
    from qrsim_ros.core.common.frames import euler_to_quaternion
    from qrsim_ros.core.vehicles.pelican import HOVER_THROTTLE, STATE_EAST, STATE_PITCH, STATE_ROLL

    sim = Simulator.from_scenario("px4_sitl", {"seed": 5, "task": {"dt_s": 0.2}})
    _takeoff_flight(sim, 8.0, 60)
    ap = sim.onboard
    assert ap is not None
    nan = np.full((1, sim.action_spec["width"]), np.nan)
    ports = free_ports(1)
    client = Client(ports.api_remote, ports.api_local)
    roll, pitch, yaw_rate = 0.1, -0.05, 0.2

    def attitude(type_mask: int = 0) -> None:
        x, y, z, w = euler_to_quaternion(roll, pitch, float(sim.true_state()[0, STATE_HEADING]))
        client.send(mavlink.MAVLink_set_attitude_target_message(0, 1, 1, type_mask, [w, x, y, z], 0.0, 0.0,
                                                                yaw_rate, HOVER_THROTTLE))

    with SimulatorMavlink(sim, ports, real_time_factor=0) as link:
        attitude()
        sim.step(nan)
        client.command(mavlink.MAV_CMD_DO_SET_MODE, mavlink.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED, 6)  # Offboard
        east0, heading0 = sim.true_state()[0, STATE_EAST], sim.true_state()[0, STATE_HEADING]
        for _ in range(10):  # 2 s
            attitude()
            sim.step(nan)
            client.read()
        assert ap.mode[0] == FlightMode.OFFBOARD
        x = sim.true_state()[0]
        assert x[STATE_ROLL] == pytest.approx(roll, abs=0.02)
        assert x[STATE_PITCH] == pytest.approx(pitch, abs=0.02)
        assert x[STATE_HEADING] - heading0 == pytest.approx(2.0 * yaw_rate, abs=0.1)
        assert x[STATE_EAST] - east0 > 0.5  # rolled right: moving east (at heading ~0)
        attitude(type_mask=0x80)  # rates only
        sim.step(nan)
        client.read()
        assert link.vehicles.counters[0].unsupported == 1
        assert any("SET_ATTITUDE_TARGET without an attitude" in t for t in client.texts())
        for _ in range(8):  # no stream for COM_OF_LOSS_T (1 s) and more: the failsafe (Hold)
            sim.step(nan)
        assert ap.mode[0] == FlightMode.HOLD and ap.failsafe_onsets[0] == 1
    client.close()

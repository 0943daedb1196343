"""The faults acting in the in-process Simulator (docs/FAULTS.md "Effects").

Most checks are paired: two Simulators (or receivers) of the same seed, one with the fault, so every noise
draw is the same and the fault's effect is the difference, exactly. Expected values are written out from
the model's documented numbers (hover thrust m g, the throttle polynomial of spec 2.3, the yaw loop's
steady-state gain), never taken from the code under test.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from scipy import stats

from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state
from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN, ned_to_lla
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.engine.faults import FaultEffects, FaultModels
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.faults import ActiveFault, parse_faults
from qrsim_ros.core.sensors.gps import GpsReceiver, GpsReceiverParams, GpsSpaceSegment, GpsSpaceSegmentParams
from qrsim_ros.core.vehicles.estimated_state import (
    ANGULAR_VELOCITY_FRD,
    EULER,
    GROUND_VELOCITY_NE,
    HEIGHT,
    NORTH_EAST,
    POSITION_NED,
    VERTICAL_SPEED,
)

HOVER = [0.0, 0.0, 0.59004353928, 0.0, 12.0]  # attitude row whose steady thrust is m g (pelican.py)
MG_N = 1.68 * 9.81  # the Pelican's hover thrust [N] (spec 2.2: m = 1.68 kg)
QUIET = {"dyn_noise": [0.0] * 6, "turbulence": {"on": False}}
YAW_RATE_GAIN = 0.435803  # steady-state yaw rate / yaw-rate command of the identified loop (test_simulator)



def sim_with(faults: list[dict[str, Any]] | None, name: str = "keep_spot", seed: int = 5,
             **overrides: Any) -> Simulator:
    over: dict[str, Any] = {"seed": seed, **overrides}
    if faults is not None:
        over["faults"] = faults
    return Simulator.from_scenario(name, over)


def hover_run(sim: Simulator, ticks: int, record: Any) -> list[Any]:
    out = []
    for _ in range(ticks):
        sim.step([HOVER])
        out.append(record(sim))
    return out


# --- the scenario -----------------------------------------------------------------------------------------

def test_the_scenario_parses_the_faults_list_against_the_fleet() -> None:
    sim = sim_with([{"kind": "gps_outage", "vehicles": [0], "trigger": {"at_time_s": 1.0}, "duration_s": 2}])
    (spec,) = sim.scenario.faults
    assert (spec.id, spec.kind, spec.vehicles, spec.duration_s) == ("gps_outage.0", "gps_outage", (0,), 2.0)
    assert Simulator.from_scenario("keep_spot", {"seed": 1}).scenario.faults == ()


@pytest.mark.parametrize(("item", "key"), [
    ({"kind": "rotor_loss", "rotor": 4, "trigger": {"at_time_s": 1}}, "faults[0].rotor"),
    ({"kind": "gps_outage", "vehicles": [1], "trigger": {"at_time_s": 1}}, "faults[0].vehicles[0]"),
    ({"kind": "rotor_los", "trigger": {"at_time_s": 1}}, "faults[0].kind"),
])
def test_a_bad_fault_is_a_config_error_naming_the_key_path(item: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(key)):
        sim_with([item])


# --- no faults: nothing changes --------------------------------------------------------------------------

def test_a_fault_that_never_fires_changes_nothing_bit_for_bit() -> None:
    """The schedule and every hook present but nothing active: states, eX and rewards as without faults."""
    never: list[dict[str, Any]] = [{"kind": k, "trigger": {"at_time_s": 1000.0}} for k in
             ("gps_outage", "gyro_stuck", "altimeter_stuck", "comm_loss", "camera_off")]
    never.append({"kind": "rotor_loss", "rotor": 1, "trigger": {"at_time_s": 1000.0}})
    a, b = sim_with(None, seed=11), sim_with(never, seed=11)
    for _ in range(120):
        assert a.step([HOVER]) == b.step([HOVER])
        np.testing.assert_array_equal(a.true_state(), b.true_state())
        np.testing.assert_array_equal(a.estimated_state(), b.estimated_state())
    assert b.fault_log() == [] and b.active_faults == []


def test_faults_on_one_vehicle_leave_the_others_bit_for_bit() -> None:
    at = {"vehicles": [3], "trigger": {"at_time_s": 0.1}}
    faults = [{"kind": "gps_degradation", "sigma_factor": 3.0, "bias_ned_m": [1, 2, 3], "satellites_lost": 2,
               **at},
              {"kind": "imu_bias_step", "accelerometer_bias_mps2": [0.1, 0, 0], **at},
              {"kind": "gyro_stuck", **at}, {"kind": "altimeter_offset", "offset_m": 1.0, **at},
              {"kind": "rotor_loss", "rotor": 2, **at}, {"kind": "comm_loss", **at}]
    a, b = sim_with(None, name="keep_spot_x10"), sim_with(faults, name="keep_spot_x10")
    others = [i for i in range(10) if i != 3]
    for _ in range(100):
        a.step(np.tile(HOVER, (10, 1)))
        b.step(np.tile(HOVER, (10, 1)))
        np.testing.assert_array_equal(a.true_state()[others], b.true_state()[others])
        np.testing.assert_array_equal(a.estimated_state()[others], b.estimated_state()[others])
    assert not np.array_equal(a.true_state()[3], b.true_state()[3])


# --- triggers through the Simulator ------------------------------------------------------------------------

def test_time_and_step_triggers_fire_at_their_exact_tick() -> None:
    sim = sim_with([{"kind": "grasper_release", "trigger": {"at_time_s": 0.5}},
                    {"kind": "altimeter_offset", "offset_m": 1.0, "trigger": {"at_step": 7},
                     "duration_s": 0.1}])
    hover_run(sim, 40, lambda s: None)
    log = [(e.tick, e.event, e.fault.kind) for e in sim.fault_log()]
    # at_time_s 0.5: tick 25; at_step 7 (one tick per step): tick 7, ends 0.1 s = 5 ticks later
    assert log == [(7, "started", "altimeter_offset"), (12, "ended", "altimeter_offset"),
                   (25, "started", "grasper_release")]
    assert "recorded only" in sim.fault_log()[2].note  # keep_spot has no grasper: a no-op in the log
    sr = sim_with([{"kind": "camera_off", "trigger": {"at_step": 2}}], name="search_rescue_2a")
    for _ in range(3):
        sr.step([[0.0, 0.0, 0.0]])
    assert [e.tick for e in sr.fault_log()] == [2 * 50]  # 50 ticks per task step of 1 s


def test_the_start_up_step_fires_conditions_and_one_shots_at_t0_but_no_periodic_trial() -> None:
    """keep_spot starts at [0, 0, -10]: a box around it is true at the start-up step (tick 0); a periodic
    trigger with P = 1 per tick's period (p_dt = 1) makes its first trial at tick 1, not at tick 0."""
    sim = sim_with([
        {"id": "box", "kind": "gyro_stuck",
         "trigger": {"condition": {"inside_box_ned_m": [-1, 1, -1, 1, -11, -9]}}},
        {"id": "once", "kind": "grasper_release", "trigger": {"probabilistic": {"probability": 1.0}}},
        {"id": "each", "kind": "camera_off",
         "trigger": {"probabilistic": {"probability": 1.0, "period_s": 0.02}}},
    ])
    assert [(e.tick, e.fault.id) for e in sim.fault_log()] == [(0, "box"), (0, "once")]
    sim.step([HOVER])
    assert [(e.tick, e.fault.id) for e in sim.fault_log(since_tick=1)] == [(1, "each")]


def test_a_battery_condition_reads_the_pack_and_never_fires_with_the_battery_off() -> None:
    fault = [{"kind": "comm_loss", "trigger": {"condition": {"battery_below_v": 20.0}}}]
    off = sim_with(fault, vehicle={"battery": {"on": False}})
    hover_run(off, 10, lambda s: None)
    assert off.fault_log() == []
    on = sim_with(fault)  # the default 3S pack is always below 20 V: true at the start-up step
    assert [(e.tick, e.fault.kind) for e in on.fault_log()] == [(0, "comm_loss")]


# --- GPS ----------------------------------------------------------------------------------------------------

def test_gps_outage_no_fix_and_the_estimated_position_holds_its_last_fix() -> None:
    sim = sim_with([{"kind": "gps_outage", "trigger": {"at_time_s": 1.0}, "duration_s": 2.0}])
    rows = hover_run(sim, 200, lambda s: (s.time, bool(s.gps.has_fix[0]),
                                          s.estimated_state()[0, POSITION_NED].copy(),
                                          s.true_state()[0, 0:3].copy()))
    before = [r for r in rows if r[0] < 1.0 - 1e-9]
    during = [r for r in rows if 1.0 - 1e-9 <= r[0] < 3.0 - 1e-9]
    after = [r for r in rows if r[0] >= 3.2 - 1e-9]
    assert all(r[1] for r in before) and not any(r[1] for r in during) and all(r[1] for r in after)
    held = during[0][2]
    np.testing.assert_array_equal(before[-1][2], held)  # the last fix (t = 0.8 s: GPS at 5 Hz)
    for r in during:
        np.testing.assert_array_equal(r[2], held)
    # the true position moved meanwhile (open-loop hover drifts with the dynamic noise and turbulence)
    assert np.linalg.norm(during[-1][3] - during[0][3]) > 1e-3
    assert not np.array_equal(after[-1][2], held)


def test_gps_outage_holds_the_estimated_velocity_and_the_first_fix_after_has_zero_velocity() -> None:
    """docs/FAULTS.md, gps_outage: eX's ground velocity is the receiver's, held at the last fix during the
    outage (no dead reckoning); the height, attitude and rates (AHARS) stay live; the first fix after the
    outage has zero velocity, the next one the difference of the two fixes over the 0.2 s GPS period.
    Outage [1 s, 3 s): ticks 50..149; the GPS updates every 10 ticks, so tick 40 is the last fix before
    it and tick 150 the first after it."""
    sim = sim_with([{"kind": "gps_outage", "trigger": {"at_time_s": 1.0}, "duration_s": 2.0}])
    assert sim.scenario.vehicle.gps_receiver.on  # the noisy receiver: velocity from differences of fixes
    rows = {}
    for k in range(1, 171):
        sim.step([HOVER])
        assert sim.tick == k
        rows[k] = (bool(sim.gps.has_fix[0]), sim.estimated_state()[0].copy(), sim.true_state()[0].copy())
    fix_ticks = [k for k, r in rows.items() if r[0]]
    assert 40 in fix_ticks and not any(50 <= k < 150 for k in fix_ticks) and 150 in fix_ticks
    held = rows[40][1][GROUND_VELOCITY_NE]
    assert np.all(held != 0.0)  # a real reading, so holding it is not the same as zeroing it
    for k in range(50, 150):
        np.testing.assert_array_equal(rows[k][1][GROUND_VELOCITY_NE], held, err_msg=f"tick {k}")
    # the truth moved on meanwhile (open-loop hover in turbulence): the held value is stale
    def true_ne_velocity(k: int) -> np.ndarray:
        x = rows[k][2][None]
        return body_to_ned(dcm_from_state(x), x[:, 6:9])[0, 0:2]

    assert np.linalg.norm(true_ne_velocity(149) - true_ne_velocity(50)) > 0.05
    # the AHARS columns are not held
    for col in (HEIGHT, VERTICAL_SPEED, EULER, ANGULAR_VELOCITY_FRD):
        assert not np.array_equal(rows[60][1][col], rows[140][1][col]), col
    # first fix after the outage: zero velocity; the next: (fix at 160 - fix at 150) / 0.2 s
    assert np.array_equal(rows[150][1][GROUND_VELOCITY_NE], [0.0, 0.0])
    assert not np.array_equal(rows[150][1][POSITION_NED], rows[140][1][POSITION_NED])
    diff = (rows[160][1][NORTH_EAST] - rows[150][1][NORTH_EAST]) / 0.2
    np.testing.assert_allclose(rows[160][1][GROUND_VELOCITY_NE], diff, rtol=1e-9, atol=1e-12)
    assert np.all(diff != 0.0)


def test_gps_outage_on_the_noiseless_receiver_holds_then_reports_the_true_velocity() -> None:
    """QRSim's noiseless receiver (``gps_receiver.on: false``) reports the true position and velocity at
    each 5 Hz update, no difference of fixes: during the outage eX's ground velocity is held at the last
    fix's (tick 40), and the first fix after it (tick 150) is the true velocity, not zero (docs/FAULTS.md)."""
    sim = sim_with([{"kind": "gps_outage", "trigger": {"at_time_s": 1.0}, "duration_s": 2.0}],
                   vehicle={"gps_receiver": {"on": False}})
    rows = {}
    for k in range(1, 151):
        sim.step([HOVER])
        x = sim.true_state()[0][None]
        rows[k] = (bool(sim.gps.has_fix[0]), sim.estimated_state()[0, GROUND_VELOCITY_NE].copy(),
                   body_to_ned(dcm_from_state(x), x[:, 6:9])[0, 0:2])
    assert rows[40][0] and not any(rows[k][0] for k in range(50, 150)) and rows[150][0]
    np.testing.assert_array_equal(rows[40][1], rows[40][2])
    for k in range(50, 150):
        np.testing.assert_array_equal(rows[k][1], rows[40][1], err_msg=f"tick {k}")
    assert np.linalg.norm(rows[149][2] - rows[40][2]) > 0.05  # the truth moved on meanwhile
    np.testing.assert_allclose(rows[150][1], rows[150][2], rtol=0, atol=1e-12)
    assert np.all(rows[150][1] != 0.0)


def _receivers(params: GpsReceiverParams, space_params: GpsSpaceSegmentParams, n: int, seed: int
               ) -> tuple[GpsSpaceSegment, GpsReceiver, GpsReceiver]:
    streams_a, streams_b = RandomStreams(seed), RandomStreams(seed)
    space = GpsSpaceSegment(space_params, streams_a)
    return space, GpsReceiver(n, space, params, streams_a), GpsReceiver(n, space, params, streams_b)


def _static_states(n: int) -> np.ndarray:
    x = np.zeros((n, 13))
    x[:, 0] = np.arange(n) * 50.0
    x[:, 2] = -20.0
    return x


def test_gps_degradation_sigma_times_k_measured_against_the_model_variance() -> None:
    """White receiver noise only (no space-segment errors): the fix error of each update is independent,
    with covariance r_sigma^2 (A^T A)^-1, which is what the unfaulted receiver reports. With sigma x k the
    error variance, normalised by that reported variance, is k^2. M samples of z^2 (z ~ N(0, k^2)) have a
    sample mean with relative standard deviation sqrt(2 / M): M = 3000 gives 2.6 %; the tolerance is 5 of
    those, 13 %. The down axis is the same in the grid (NED) and the geodetic frame, so it is compared
    directly."""
    k, n, updates = 3.0, 10, 300
    space, ref, bad = _receivers(GpsReceiverParams(), GpsSpaceSegmentParams(pr_sigma_m=0.0), n, seed=3)
    x = _static_states(n)
    space.reset(0)
    ref.reset(x)
    bad.reset(x)
    bad.set_fault_state(sigma_factor=np.full(n, k))
    z_ref, z_bad = [], []
    for j in range(1, updates + 1):
        tick = 10 * j  # the GPS updates every 0.2 s
        space.step(tick)
        ref.step(tick, x)
        bad.step(tick, x)
        sd = np.sqrt(ref.position_variance_ned[:, 2])
        z_ref.append((ref.position_ned[:, 2] - x[:, 2]) / sd)
        z_bad.append((bad.position_ned[:, 2] - x[:, 2]) / sd)
        # the reported variance follows the fault too: x k^2
        # (the DOP is evaluated at the degraded fix: equal to ~1e-8 relative)
        np.testing.assert_allclose(bad.position_variance_ned, k * k * ref.position_variance_ned, rtol=1e-6)
    m = n * updates
    tol = 5 * math.sqrt(2 / m)
    assert np.mean(np.square(z_ref)) == pytest.approx(1.0, rel=tol)
    assert np.mean(np.square(z_bad)) == pytest.approx(k * k, rel=tol)


def test_gps_degradation_bias_step_and_satellites_lost() -> None:
    n = 3
    space, ref, bad = _receivers(GpsReceiverParams(), GpsSpaceSegmentParams(), n, seed=4)
    x = _static_states(n)
    space.reset(0)
    ref.reset(x)
    bad.reset(x)
    bias = np.array([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    space.step(10)
    ref.step(10, x)
    bad.step(10, x)
    tracked = ref.num_satellites.copy()
    lost = np.array([2, 0, 0])
    lost[2] = tracked[2] - 3  # 3 left: no fix
    bad.set_fault_state(bias_ned_m=bias, satellites_lost=lost)
    space.step(20)
    ref.step(20, x)
    held = bad.position_ned[2].copy()
    bad.step(20, x)
    np.testing.assert_array_equal(bad.num_satellites, tracked - lost)
    assert bad.has_fix.tolist() == [True, True, False]
    np.testing.assert_array_equal(bad.position_ned[2], held)
    np.testing.assert_allclose(bad.position_ned[1] - ref.position_ned[1], bias[1], atol=1e-9)
    # vehicle 0 solves with 2 satellites fewer: a different fix, shifted by the bias (within the noise)
    assert np.linalg.norm(bad.position_ned[0] - bias[0] - ref.position_ned[0]) < 0.5
    np.testing.assert_allclose(bad.lla[1], ned_to_lla(bad.position_ned[1:2], QRSIM_ORIGIN)[0], atol=1e-9)
    bad.set_fault_state()  # cleared: the receiver's own path again
    space.step(30)
    ref.step(30, x)
    bad.step(30, x)
    np.testing.assert_allclose(bad.position_ned[1], ref.position_ned[1], atol=1e-9)


# --- AHARS --------------------------------------------------------------------------------------------------

def test_imu_bias_step_is_the_exact_difference_of_the_readings() -> None:
    acc, gyr = [0.5, -0.3, 0.2], [0.01, 0.02, -0.03]
    ref = sim_with(None)
    bad = sim_with([{"kind": "imu_bias_step", "accelerometer_bias_mps2": acc, "gyro_bias_radps": gyr,
                     "trigger": {"at_time_s": 0.5}}])

    def rec(s: Simulator) -> tuple:
        return s.time, s.ahars.acceleration[0], s.ahars.angular_velocity[0]

    a, b = hover_run(ref, 60, rec), hover_run(bad, 60, rec)
    for (t, acc_a, gyr_a), (_, acc_b, gyr_b) in zip(a, b, strict=True):
        on = t >= 0.5 - 1e-9
        np.testing.assert_allclose(acc_b - acc_a, acc if on else 0.0, atol=1e-12)
        np.testing.assert_allclose(gyr_b - gyr_a, gyr if on else 0.0, atol=1e-12)


def test_gyro_stuck_repeats_its_last_reading() -> None:
    sim = sim_with([{"kind": "gyro_stuck", "trigger": {"at_time_s": 0.5}, "duration_s": 0.5}])
    rows = hover_run(sim, 60, lambda s: (s.time, s.ahars.angular_velocity[0].copy()))
    last = next(r[1] for r in reversed(rows) if r[0] < 0.5 - 1e-9)
    stuck = [r[1] for r in rows if 0.5 - 1e-9 <= r[0] < 1.0 - 1e-9]
    assert len(stuck) == 25
    for g in stuck:
        np.testing.assert_array_equal(g, last)
    free = [r[1] for r in rows if r[0] >= 1.0 - 1e-9]
    assert not np.array_equal(free[0], last) and not np.array_equal(free[1], free[0])  # noise again


def test_altimeter_stuck_and_offset() -> None:
    ref = sim_with(None)
    off = sim_with([{"kind": "altimeter_offset", "offset_m": 2.5, "trigger": {"at_time_s": 0.5}}])
    stuck = sim_with([{"kind": "altimeter_stuck", "trigger": {"at_time_s": 0.5}}])

    def rec(s: Simulator) -> tuple:
        return s.time, s.ahars.height_m[0], s.ahars.vertical_speed_mps[0], s.estimated_state()[0, HEIGHT]

    a, b, c = hover_run(ref, 60, rec), hover_run(off, 60, rec), hover_run(stuck, 60, rec)
    dt = 0.02  # the altimeter's period in keep_spot
    for (t, h_a, v_a, _), (_, h_b, v_b, ex_b), (_, _, v_c, _) in zip(a, b, c, strict=True):
        on = t >= 0.5 - 1e-9
        assert h_b - h_a == pytest.approx(2.5 if on else 0.0, abs=1e-9)
        assert ex_b == h_b  # the estimated height is the altimeter's
        if on:
            # the vertical speed is a difference of heights: it sees the step once
            assert v_b - v_a == pytest.approx(2.5 / dt if abs(t - 0.5) < 1e-9 else 0.0, abs=1e-6)
            assert v_c == 0.0
    stuck_h = [r[1] for r in c if r[0] >= 0.5 - 1e-9]
    assert len(set(stuck_h)) == 1 and stuck_h[0] == next(r[1] for r in reversed(c) if r[0] < 0.5 - 1e-9)


# --- camera and registered sensors --------------------------------------------------------------------------

def test_camera_off_gives_no_observations_for_that_vehicle_only() -> None:
    fault = {"kind": "camera_off", "vehicles": [1], "trigger": {"at_step": 2}, "duration_s": 3.0}
    sim = sim_with([fault], name="search_rescue_2a", num_vehicles=2)
    seen = []
    for _ in range(7):
        sim.step(np.zeros((2, 3)))
        seen.append([o is not None for o in sim.camera_observations()])
    # steps 1.. (1 s each, camera at 1 Hz): off from t = 2 s to t = 5 s
    assert [s[0] for s in seen] == [True] * 7
    assert [s[1] for s in seen] == [True, False, False, False, True, True, True]


def test_lidar_off_in_the_simulator_measures_nothing_for_that_vehicle() -> None:
    from qrsim_ros.core.sensors.lidar import NOT_MEASURED, OK
    sim = sim_with([{"kind": "lidar_off", "vehicles": [0], "trigger": {"at_time_s": 0.0}}],
                   name="search_rescue_scene")
    sim.step(np.zeros((2, 3)))
    status = sim.sensor("lidar").status
    assert (status[0] == NOT_MEASURED).all()
    assert (status[1] == OK).any()


def test_registered_sensors_off_follow_the_registry() -> None:
    models = FaultModels()
    fx = FaultEffects(parse_faults([{"kind": "lidar_off", "vehicles": [0], "trigger": {"at_time_s": 0}},
                                    {"kind": "camera_off", "vehicles": [1], "trigger": {"at_time_s": 0}}],
                                   num_vehicles=3), 3, RandomStreams(1), models, ticks_per_task_step=1)
    fx.begin_episode()
    valid = np.array([True, True, True])
    assert fx.sensor_valid("lidar", valid).tolist() == [False, True, True]
    assert fx.sensor_valid("fisheye", valid).tolist() == [True, False, True]
    assert fx.sensor_valid("camera", valid).tolist() == [True, False, True]
    assert fx.sensor_valid("camera_classifier", valid).tolist() == [True, False, True]
    assert fx.sensor_valid("range_finder", valid).tolist() == [True, True, True]


def test_a_node_without_the_schedule_applies_an_active_list() -> None:
    """What a sensor node would do with the active faults vehicle_dynamics sends: the same hooks."""
    sim = sim_with(None, name="keep_spot_x10")
    models = FaultModels(fleet=sim.fleet, gps=sim.gps)
    fx = FaultEffects((), 10, RandomStreams(1), models, ticks_per_task_step=1)
    outage = ActiveFault("g", 4, "gps_outage", {}, 0.0, None)
    loss = ActiveFault("r", 2, "rotor_loss", {"rotor": 1}, 0.0, None)
    fx.apply_active([outage, loss])
    assert sim.gps._f_outage.tolist() == [i == 4 for i in range(10)]
    expected_scale = [0.75 if i == 2 else 1.0 for i in range(10)]
    np.testing.assert_array_equal(sim.fleet.pelican._thrust_scale, expected_scale)
    fx.apply_active([])
    assert not sim.gps._faulted and not fx.any_active
    np.testing.assert_array_equal(sim.fleet.pelican._thrust_scale, 1.0)


# --- rotors on the Pelican ----------------------------------------------------------------------------------

def _steady_thrust_by_hand(throttle: float) -> float:
    """Spec 2.3's thrust polynomial, written out: 0.663881 + 7.44649e-4 th + 2.39855e-6 th^2, th = 4097 u."""
    th = 4097.0 * throttle
    return 6.63881e-01 + 7.44649e-04 * th + 2.39855e-06 * th * th


def test_rotor_loss_on_the_pelican_three_quarter_thrust_descent_and_spin() -> None:
    """Rotor 0 (clockwise) lost at t = 1 s under the hover row: thrust -> 3/4 m g, the vehicle sinks
    (about g / 4 at first), and the unbalanced torque commands +4.5 / 2 rad/s of yaw rate, which the
    identified loop turns into 0.435803 x 2.25 rad/s."""
    ref = sim_with(None, vehicle=QUIET)
    bad = sim_with([{"kind": "rotor_loss", "rotor": 0, "trigger": {"at_time_s": 1.0}}], vehicle=QUIET)
    xa = hover_run(ref, 250, lambda s: s.true_state()[0].copy())
    xb = hover_run(bad, 250, lambda s: s.true_state()[0].copy())
    np.testing.assert_array_equal(xa[48], xb[48])  # tick 49: before the fault
    assert xb[-1][12] == pytest.approx(0.75 * MG_N, rel=1e-6)
    assert xa[-1][12] == pytest.approx(MG_N, rel=1e-6)
    # sinking: 3 s at up to g/4 minus the drag (KW = -1.35341 1/s: terminal w = (g/4) / 1.35341 = 1.81 m/s)
    assert xb[-1][8] == pytest.approx(9.81 / 4 / 1.35341, rel=0.02)
    assert xb[-1][2] - xa[-1][2] > 2.0
    assert xb[-1][11] == pytest.approx(YAW_RATE_GAIN * 2.25, rel=1e-3)
    assert abs(xa[-1][11]) < 1e-9
    # the control cost scores what was commanded, not the disturbance the fault adds
    assert bad.step([HOVER]) == ref.step([HOVER])


def test_rotor_degradation_scales_the_thrust_by_the_mean_factor() -> None:
    fault = {"kind": "rotor_degradation", "rotor": 1, "factor": 0.6, "trigger": {"at_time_s": 0.2}}
    bad = sim_with([fault], vehicle=QUIET)
    x = hover_run(bad, 200, lambda s: s.true_state()[0].copy())
    assert x[-1][12] == pytest.approx((3 + 0.6) / 4 * MG_N, rel=1e-6)
    # rotor 1 turns anticlockwise: -sum(spin f) / 2 = -(1 - 0.6 + 1 - 1) / 2 = -0.2 -> -0.9 rad/s command
    assert x[-1][11] == pytest.approx(YAW_RATE_GAIN * -0.2 * 4.5, rel=1e-3)


@pytest.mark.parametrize(("command", "expected"), [
    (0.0, 0.75 * _steady_thrust_by_hand(0.7) + _steady_thrust_by_hand(0.0) / 4),
    (None, 0.75 * _steady_thrust_by_hand(0.7) + MG_N / 4),  # held at the hover thrust's quarter
])
def test_motor_stuck_gives_a_constant_quarter_of_the_thrust(command: float | None, expected: float) -> None:
    fault = {"kind": "motor_stuck", "rotor": 2, "command": command, "trigger": {"at_time_s": 1.0}}
    sim = sim_with([fault], vehicle=QUIET)
    hover_run(sim, 49, lambda s: None)
    climb = [0.0, 0.0, 0.7, 0.0, 12.0]
    for _ in range(150):
        sim.step([climb])
    assert sim.true_state()[0, 12] == pytest.approx(expected, rel=1e-6)
    assert abs(sim.true_state()[0, 11]) < 1e-9  # a stuck motor's torque is not modelled


# --- communications, self test, battery ---------------------------------------------------------------------

def test_comm_loss_the_set_point_expires_and_the_failsafe_flies() -> None:
    """comm_loss from t = 1 s (tick 50) to 2 s: a set point passes if the link is up when it is issued,
    at the time of the state its controls start from (tick k's at t_(k-1)); so the last one reaching the
    vehicle is tick 50's, issued at t = 0.98 s; it expires when older than command_timeout_s = 0.5 s.
    Tick 101's, issued at t = 2.0 s with the link back, flies again."""
    sim = sim_with([{"kind": "comm_loss", "trigger": {"at_time_s": 1.0}, "duration_s": 1.0}])
    ref = sim_with(None)
    rows = hover_run(sim, 150, lambda s: (s.time, s.failsafe[0]))
    assert all(f == "" for _, f in hover_run(ref, 150, lambda s: (s.time, s.failsafe[0])))
    first = next(t for t, f in rows if f)
    # the controls of tick k start from t_(k-1): expired once (k - 1) dt - 0.98 > 0.5, i.e. at k = 76
    assert first == pytest.approx(1.52, abs=1e-9)
    assert {f for t, f in rows if first <= t < 2.0 - 1e-9} == {"hold"}
    assert all(f == "" for t, f in rows if t >= 2.0 + 0.02)  # the link is back: set points fly again


@pytest.mark.parametrize(("duration_s", "failsafe"), [(0.2, ""), (0.92, "hold")])
def test_comm_loss_within_a_task_step_the_steps_set_point_arrives_once_the_link_is_back(
        duration_s: float, failsafe: str) -> None:
    """search_rescue_2a: 50 ticks per task step, one set point per step (issued at every tick of it). A
    link lost from t = 0.1 s for 0.2 s is back at tick 15: the step's set point reaches the vehicle
    again, nothing expires. Lost for 0.92 s (to t = 1.02 s, past the step's last tick at 1.0 s), the last
    set point that arrived is tick 5's, issued at t = 0.08 s with the link still up, expired at tick 31:
    the failsafe flies."""
    sim = sim_with([{"kind": "comm_loss", "trigger": {"at_time_s": 0.1}, "duration_s": duration_s}],
                   name="search_rescue_2a")
    sim.step([[0.5, 0.0, 0.0]])
    assert sim.failsafe == [failsafe]


def test_self_test_failure_invalid_from_t0_and_never_moves() -> None:
    """(With the task's default ``stop_on_invalid`` the episode would end after its first step.)"""
    fault = {"kind": "self_test_failure", "vehicles": [3], "trigger": {"probabilistic": {"probability": 1.0}}}
    sim = sim_with([fault], name="keep_spot_x10", task={"stop_on_invalid": False})
    assert sim.valid.tolist() == [i != 3 for i in range(10)]
    assert sim.fleet.invalid_reason[3] == "self_test_failure"
    x0 = sim.true_state()[3].copy()
    for _ in range(20):
        sim.step(np.tile(HOVER, (10, 1)))
    np.testing.assert_array_equal(sim.true_state()[3], x0)
    assert not sim.valid[3] and sim.valid[[0, 1, 2, 4]].all()
    assert np.isnan(sim.estimated_state()[3]).all()
    assert [(e.tick, e.fault.vehicle) for e in sim.fault_log()] == [(0, 3)]


class _Battery:
    def __init__(self, n: int) -> None:
        self.voltage_v = np.full(n, 12.0)
        self.percentage = np.full(n, 1.0)
        self.calls: list[tuple[int, float]] = []

        class P:
            cells = 3
        self.params = P()

    def cell_failure(self, vehicle: int, volts_drop: float) -> None:
        self.calls.append((vehicle, volts_drop))


def test_battery_cell_failure_calls_the_battery_or_is_recorded() -> None:
    specs = parse_faults([{"kind": "battery_cell_failure", "vehicles": [1], "trigger": {"at_time_s": 0.04}},
                          {"id": "step", "kind": "battery_cell_failure", "vehicles": [0],
                           "voltage_step_v": 0.7, "trigger": {"at_time_s": 0.02}}], num_vehicles=2)
    battery = _Battery(2)
    fx = FaultEffects(specs, 2, RandomStreams(1), FaultModels(battery=battery), ticks_per_task_step=1)
    fx.begin_episode()
    for k in (1, 2, 3):
        fx.step(k)
    assert battery.calls == [(0, 0.7), (1, 12.0 / 3)]  # one cell of three at the pack's 12 V
    sim = sim_with([{"kind": "battery_cell_failure", "trigger": {"at_time_s": 0.02}}],
                   vehicle={"battery": {"on": False}})
    sim.step([HOVER])
    assert "recorded only" in sim.fault_log()[0].note



def test_battery_cell_failure_on_the_simulators_packs() -> None:
    """With the battery on (keep_spot_x10), the fault reaches the Simulator's FleetEnergy (it crashed with
    an AttributeError before): vehicle 0's pack drops by voltage_step_v = 1 V at t = 0.2 s (tick 10),
    vehicle 1 loses one cell of three and its pack is empty."""
    sim = sim_with([{"kind": "battery_cell_failure", "vehicles": [0], "voltage_step_v": 1.0,
                     "trigger": {"at_time_s": 0.2}},
                    {"kind": "battery_cell_failure", "vehicles": [1], "trigger": {"at_time_s": 0.2}}],
                   name="keep_spot_x10", num_vehicles=2)
    assert sim.battery.on and sim.battery.params.cells == 3
    action = np.array([HOVER, HOVER])
    for _ in range(9):
        sim.step(action)
    before = sim.battery.voltage_v.copy()
    sim.step(action)
    drop = before - sim.battery.voltage_v
    # the 1 V step, plus the higher current under the same load through the pack's resistance
    assert 1.0 <= drop[0] < 1.15, drop
    # a third of 11.3 V lost: under the pack's cut-off, empty at once (the motors stop)
    assert drop[1] > 1.5 and sim.battery.empty.tolist() == [False, True], (drop, sim.battery.empty)
    assert next(e.note for e in sim.fault_log()).startswith("pack voltage -1.000 V")


# --- run time -----------------------------------------------------------------------------------------------

def test_inject_and_clear_at_run_time() -> None:
    sim = sim_with(None)
    hover_run(sim, 10, lambda s: None)
    fid = sim.inject_fault({"kind": "gps_outage", "vehicles": [0]})
    assert sim.active_faults == []  # starts at the next tick
    sim.step([HOVER])
    (active,) = sim.active_faults
    assert (active.id, active.kind, active.since_s) == (fid, "gps_outage", pytest.approx(0.22))
    hover_run(sim, 10, lambda s: None)  # through the GPS update at t = 0.4 s
    assert not sim.gps.has_fix[0]
    assert [a.id for a in sim.clear_fault(fid)] == [fid]
    hover_run(sim, 10, lambda s: None)
    assert sim.gps.has_fix[0] and sim.active_faults == []
    assert [(e.tick, e.event) for e in sim.fault_log()] == [(11, "started"), (22, "ended")]
    sim.inject_fault({"kind": "gyro_stuck", "vehicles": [0]})
    sim.step([HOVER])
    sim.clear_fault(kind="gyro_stuck", vehicle=0)
    sim.step([HOVER])
    assert sim.active_faults == []
    sim.reset()  # injected faults are dropped
    assert sim.faults.schedule.specs == () and sim.fault_log() == []


# --- determinism and frequency ------------------------------------------------------------------------------

RANDOM_FAULTS = [
    {"id": "drop", "kind": "gps_outage", "trigger": {"probabilistic": {"probability": 0.5, "period_s": 1.0}},
     "duration_s": 0.3, "repeat": True},
    {"id": "rot", "kind": "rotor_degradation", "rotor": 3, "factor": 0.8,
     "trigger": {"probabilistic": {"probability": 0.3, "period_s": 1.0}}, "duration_s": 0.5, "repeat": True},
]


def _episode(seed: int) -> tuple[list, np.ndarray]:
    sim = sim_with(RANDOM_FAULTS, name="keep_spot_x10", seed=seed)
    xs = [sim.true_state()]
    for _ in range(100):
        sim.step(np.tile(HOVER, (10, 1)))
        xs.append(sim.true_state())
    return [e.as_dict() for e in sim.fault_log()], np.array(xs)


def test_same_seed_same_fault_firings_and_trajectories() -> None:
    log_a, x_a = _episode(21)
    log_b, x_b = _episode(21)
    log_c, _ = _episode(22)
    assert log_a and log_a == log_b
    np.testing.assert_array_equal(x_a, x_b)
    assert log_c != log_a


def test_probabilistic_trigger_frequency_through_the_simulator() -> None:
    """P = 0.5 per 10 s on 10 vehicles of keep_spot_x10 for 4 s (200 ticks) over 12 seeds: each vehicle
    has fired by then with probability 1 - 0.5^(4/10) = 0.2421; 120 Bernoulli samples, 99.9 % binomial
    interval."""
    fault = [{"kind": "comm_loss", "trigger": {"probabilistic": {"probability": 0.5, "period_s": 10.0}}}]
    fired = 0
    trials = 0
    for seed in range(1, 13):
        sim = sim_with(fault, name="keep_spot_x10", seed=seed)
        for _ in range(200):
            sim.step(np.tile(HOVER, (10, 1)))
        fired += len({e.fault.vehicle for e in sim.fault_log() if e.event == "started"})
        trials += 10
    p = 1 - 0.5 ** (4 / 10)
    lo, hi = stats.binom.interval(0.999, trials, p)
    assert lo <= fired <= hi


def test_reset_clears_every_effect() -> None:
    sim = sim_with([{"kind": "rotor_loss", "rotor": 0, "trigger": {"at_time_s": 0.02}},
                    {"kind": "gps_outage", "trigger": {"at_time_s": 0.02}}], vehicle=QUIET)
    hover_run(sim, 30, lambda s: None)
    assert sim.faults.any_active
    sim.reset()
    assert not sim.faults.any_active and sim.active_faults == []
    np.testing.assert_array_equal(sim.fleet.pelican._thrust_scale, 1.0)
    assert not sim.gps._faulted


def test_rotor_loss_on_the_rotor_airframe_is_exact_not_the_pelican_approximation() -> None:
    """On ``vehicle.airframe: rotor`` a lost rotor is that rotor's health 0 in the rigid-body model: the
    other rotors' drag torques no longer cancel, so the body's yaw rate grows at k_m w_h^2 / I_zz in the
    lost rotor's own spin direction (docs/ROTOR.md), and no yaw-rate disturbance is added to the controls
    (that is the identified Pelican's approximation). The lost front rotor also pitches the vehicle past
    the rate limit within a few ticks (invalid: the episode ends), so only the first ticks are compared."""
    over = {"seed": 5, "vehicle": {"airframe": "rotor", **QUIET}}
    healthy = Simulator.from_scenario("keep_spot", over)
    faulty = Simulator.from_scenario("keep_spot", over)
    faulty.inject_fault({"kind": "rotor_loss", "vehicles": [0], "rotor": 0})
    yaw_rates = []
    for _ in range(25):  # 0.5 s
        healthy.step([HOVER])
        if not faulty.done:
            faulty.step([HOVER])
            yaw_rates.append(float(faulty.true_state()[0, 11]))
    assert abs(healthy.true_state()[0, 11]) < 0.05
    rotor = faulty.fleet.rotor.params
    hover_omega_sq = rotor.mass_kg * 9.81 / (4 * rotor.k_f)
    yaw_accel = rotor.spin[0] * rotor.k_m * hover_omega_sq / rotor.inertia_kgm2[2]  # rad/s^2
    assert len(yaw_rates) >= 2
    assert yaw_rates[1] == pytest.approx(yaw_accel * 0.04, rel=0.3)  # two ticks after the loss
    assert faulty.faults.adjust_controls(np.array([HOVER]))[0, 3] == HOVER[3]  # no approximation on top


@pytest.mark.parametrize("command", [0.75, None])
def test_motor_stuck_on_the_rotor_airframe_holds_that_motors_speed(command: float | None) -> None:
    """Rotor airframe: the stuck motor's speed is held exactly (its command's speed omega_min + c (omega_max
    - omega_min), or its speed at the onset) whatever the controller asks; the other motors still follow."""
    fault = {"kind": "motor_stuck", "rotor": 0, "command": command, "trigger": {"at_time_s": 0.5}}
    rotor = {"airframe": "rotor", "dyn_noise": [0.0] * 6, "turbulence": {"on": False},
             "battery": {"on": False}}
    sim = sim_with([fault], vehicle=rotor)
    ref = sim_with(None, vehicle=rotor)
    rp = sim.scenario.vehicle.rotor_params()
    climb = [0.0, 0.0, 0.65, 0.0, 12.0]
    for _ in range(24):  # hover until just before the onset (tick 25)
        sim.step([HOVER])
        ref.step([HOVER])
    at_onset = sim.fleet.rotor_speeds_radps[0, 0]
    np.testing.assert_array_equal(sim.fleet.rotor_speeds_radps, ref.fleet.rotor_speeds_radps)
    for _ in range(25):  # 0.5 s of climb command: several motor time constants
        sim.step([climb])
        ref.step([climb])
    held = rp.omega_min_rads + command * (rp.omega_max_rads - rp.omega_min_rads) if command is not None \
        else at_onset
    speeds, free = sim.fleet.rotor_speeds_radps[0], ref.fleet.rotor_speeds_radps[0]
    # first-order motor: after 0.5 s (> 6 tau) within 1 % of the held command's step
    assert speeds[0] == pytest.approx(held, abs=0.01 * abs(held - at_onset) + 1e-6)
    assert abs(free[0] - held) > 5.0  # without the fault rotor 0 turns at another speed
    assert sim.fault_log()[0].note.startswith("rotor 0 held at ")


def test_the_fault_log_keeps_its_latest_entries_and_counts_the_folded_ones() -> None:
    """A fault that starts and ends every tick: a log bounded to 3 entries holds the unbounded log's last 3
    and counts the others as folded; a reset empties both; the bound is the limits table's."""
    from collections import deque

    from qrsim_ros.core.common.validation import ConfigError
    from qrsim_ros.core.engine.faults import FaultEffects, FaultModels

    blink = [{"id": "blink", "kind": "camera_off", "duration_s": 0.02, "repeat": True,
              "trigger": {"probabilistic": {"probability": 1.0, "period_s": 0.02}}}]
    full, bounded = sim_with(blink), sim_with(blink)
    bounded.faults.log = deque(maxlen=3)  # a small bound in place of fault_log_entries' 10,000
    hover_run(full, 10, lambda s: None)
    hover_run(bounded, 10, lambda s: None)
    whole = [e.as_dict() for e in full.fault_log()]
    assert len(whole) > 10 and full.fault_log_folded == 0
    assert [e.as_dict() for e in bounded.fault_log()] == whole[-3:]
    assert bounded.fault_log_folded == len(whole) - 3
    bounded.reset()
    assert bounded.fault_log() == [] and bounded.fault_log_folded == 0
    keeps_none = FaultEffects((), 1, None, FaultModels(), ticks_per_task_step=1, log_entries=0)
    assert keeps_none.log.maxlen == 0
    with pytest.raises(ConfigError, match=re.escape("log_entries=10001 must be an integer in [0, 10000]")):
        FaultEffects((), 1, None, FaultModels(), ticks_per_task_step=1, log_entries=10001)

"""The sensor schedule the lockstep nodes wait on (ros/sensor_ticks.py): which messages a tick has, and
the latest of each kind at a tick, checked against the scenario's update periods."""

from __future__ import annotations

from typing import Any

import pytest

from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.ros.sensor_ticks import ALT, FIX, IMU, VEL, SensorSchedule


@pytest.mark.parametrize("name", ["retrieve_simplified", "search_rescue_2c", "keep_spot"])
def test_latest_is_the_last_tick_each_kind_was_due(name: str) -> None:
    sc = load_scenario(name, {"seed": 1})
    schedule = SensorSchedule(sc)
    gps_period = round(sc.vehicle.gps_receiver.dt_s / 0.02)
    last: dict[str, int] = {}
    for k in range(0, 3 * schedule.period_ticks + 1):
        due = schedule.due(k)
        assert (FIX in due) == (VEL in due) == (k % gps_period == 0)
        for kind in due:
            last[kind] = k
        for kind in (IMU, ALT, FIX, VEL):
            assert schedule.latest(kind, k) == last[kind], (kind, k)


def test_a_scenarios_gps_at_5_hz_is_due_every_tenth_tick() -> None:
    schedule = SensorSchedule(load_scenario("search_rescue_2c", {"seed": 1}))
    assert schedule.gps_ticks == 10 and schedule.latest(FIX, 37) == 30 and schedule.latest(IMU, 37) == 37


# --- what a lockstep autopilot awaits (ros/step_inputs.py) ---------------------------------------------

def _feed(inputs: Any, k: int, vehicles: range, keys: set[str] | None = None) -> None:
    """Every input of tick ``k`` that ``inputs`` awaits arrives (only ``keys`` if given)."""
    for i in vehicles:
        for key, tick in inputs.awaited(k, i):
            if keys is None or key in keys:
                inputs.arrived(key, i, tick)


def test_a_step_waits_for_its_status_then_every_valid_vehicles_inputs() -> None:
    from types import SimpleNamespace

    from qrsim_ros.ros.step_inputs import BATTERY, CAMERA, StepInputs

    sc = load_scenario("search_rescue_2c", {"seed": 1, "num_vehicles": 3})
    inputs = StepInputs(sc, battery_every_n_ticks=5)
    k = 50  # a task step: camera (1 Hz), GPS (5 Hz), battery (every 5 ticks), IMU, altimeter
    assert inputs.missing(k) == "/sim/vehicle_status"
    inputs.vehicle_status(k, [True, False, True], [])
    assert inputs.missing(k) == "uav1/imu/data"
    keys = {key for key, _ in inputs.awaited(k, 0)}
    assert keys == {IMU, ALT, FIX, VEL, CAMERA, BATTERY}
    _feed(inputs, k, range(1))
    assert inputs.missing(k) == "uav3/imu/data"  # uav2 is invalid: nothing awaited from it
    _feed(inputs, k, range(2, 3), keys={IMU, ALT, FIX, VEL, BATTERY})
    assert inputs.missing(k) == "uav3/camera/detections"
    inputs.arrived(CAMERA, 2, k - 50)  # the previous frame is not this tick's
    assert inputs.missing(k) == "uav3/camera/detections"
    # a camera_off fault on uav3: its camera publishes nothing, so nothing is awaited from it
    inputs.vehicle_status(k, [True, False, True], [SimpleNamespace(vehicle=2, kind="camera_off")])
    assert inputs.missing(k) is None
    inputs.vehicle_status(k, [True, False, True], [])
    inputs.arrived(CAMERA, 2, k)
    assert inputs.missing(k) is None


def test_between_gps_ticks_the_latest_fix_is_awaited_and_off_grid_stamps_never_count() -> None:
    from builtin_interfaces.msg import Time

    from qrsim_ros.ros.stamps import tick_of_stamp
    from qrsim_ros.ros.step_inputs import StepInputs

    sc = load_scenario("search_rescue_2c", {"seed": 1, "num_vehicles": 1})
    inputs = StepInputs(sc, battery_every_n_ticks=0)
    k = 37  # no camera, GPS of tick 30, battery not awaited (0)
    inputs.vehicle_status(k, [True], [])
    assert dict(inputs.awaited(k, 0)) == {IMU: 37, ALT: 37, FIX: 30, VEL: 30}
    _feed(inputs, k, range(1))
    assert inputs.missing(k) is None
    inputs.arrived(FIX, 0, tick_of_stamp(Time(sec=0, nanosec=601_000_000)))  # 0.601 s: off the 20 ms grid
    assert inputs.missing(k) == "uav1/gps/fix"
    inputs.arrived(FIX, 0, 30)
    assert inputs.missing(k) is None


def test_plume_readings_are_awaited_on_the_plume_sensors_ticks() -> None:
    from qrsim_ros.ros.step_inputs import PLUME, StepInputs

    sc = load_scenario("plume_3b", {"seed": 1})
    period = round(sc.vehicle.plume_sensor.dt_s / 0.02)
    inputs = StepInputs(sc, battery_every_n_ticks=0)
    assert inputs.camera_ticks == 0 and inputs.plume_ticks == period
    assert period > 1  # (a noisy plume sensor: not every tick)
    assert (PLUME, period) in inputs.awaited(period, 0) and (PLUME, 0) in inputs.awaited(0, 0)
    assert all(key != PLUME for key, _ in inputs.awaited(period + 1, 0))

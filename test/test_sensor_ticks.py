"""The sensor schedule the lockstep nodes wait on (ros/sensor_ticks.py): which messages a tick has, and
the latest of each kind at a tick, checked against the scenario's update periods."""

from __future__ import annotations

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

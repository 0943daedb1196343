"""The fleet topics (``ros.fleet_topics``): one message per tick between the simulator's nodes carries what
the per-vehicle messages carried, and its readers make the same bits of it.

Without processes: the messages are built and read in this process the way the nodes build and read them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from rosenv import require_ros, sensor_messages


def _fleet(columns: tuple[str, ...], vehicles: list[int], values: Any) -> Any:
    from qrsim_ros.msg import FleetSamples

    from qrsim_ros.ros.fleet_topics import fleet_samples

    return fleet_samples(FleetSamples(), None, "run", columns, vehicles, values)


def test_the_fleet_messages_give_the_estimated_state_of_the_per_vehicle_messages() -> None:
    """A noisy scenario flown a few steps: eX from the fleet IMU, GPS and altimeter messages (the values the
    sensor nodes put in them) is bit-identical to eX from the per-vehicle messages, invalid rows
    included; the GPS fix status is held per vehicle."""
    require_ros()
    from qrsim_ros.core.common.frames import ned_to_enu
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.ros import fleet_topics as ft
    from qrsim_ros.ros.estimated_state import EstimatedStateAssembler
    from qrsim_ros.ros.to_messages import imu_columns

    sim = Simulator.from_scenario("cats_mouse_1b", {"seed": 4})
    n = sim.num_vehicles
    rng = np.random.default_rng(0)
    by_vehicle = EstimatedStateAssembler(n, sim.scenario.origin)
    by_fleet = EstimatedStateAssembler(n, sim.scenario.origin)
    rows = np.arange(n)
    for step in range(4):
        sim.step(rng.uniform(-2, 2, (n - 1, 2)))
        a, g = sim.ahars, sim.gps
        has_fix = np.arange(n) != step % n  # one receiver without a fix each step
        imu = imu_columns(a.orientation, a.angular_velocity, a.acceleration)
        imus, alts, fixes, vels = sensor_messages(sim, has_fix)
        by_vehicle.update(imu=list(enumerate(imus)), alt=list(enumerate(alts)), fix=list(enumerate(fixes)),
                          vel=list(enumerate(vels)))
        for kind, columns, values in (
                ("imu", ft.IMU_COLUMNS, imu),
                ("alt", ft.ALTIMETER_COLUMNS, np.column_stack([a.height_m, a.vertical_speed_mps])),
                ("gps", ft.GPS_COLUMNS, np.column_stack([g.lla, has_fix, ned_to_enu(g.velocity_ned)]))):
            msg = _fleet(columns, rows.tolist(), values)
            by_fleet.update_fleet(kind, *ft.read_samples(msg, "/sim/fleet/x", columns, n))
        assert np.array_equal(by_fleet.estimated_state(sim.valid), by_vehicle.estimated_state(sim.valid),
                              equal_nan=True)
        assert np.array_equal(by_fleet.gps_fix, has_fix)
    assert np.isfinite(by_fleet.estimated_state()).all()


@pytest.mark.parametrize(("columns", "vehicles", "values", "says"), [
    (("x", "y"), [0], [[0.0, 0.0, 0.0]], "columns [x, y] are not this version's [x, y, z]"),
    (("x", "y", "z"), [0, 1], [[0.0, 0.0, 0.0]], "3 values for 2 vehicles x 3 columns"),
    (("x", "y", "z"), [3], [[0.0, 0.0, 0.0]], "vehicle indices must be distinct and below 3"),
    (("x", "y", "z"), [1, 1], [[0.0] * 3] * 2, "vehicle indices must be distinct and below 3"),
])
def test_a_fleet_message_that_does_not_fit_is_refused_naming_the_topic(
        columns: tuple[str, ...], vehicles: list[int], values: Any, says: str) -> None:
    require_ros()
    from qrsim_ros.ros.fleet_topics import WIND_COLUMNS, FleetMessageError, read_samples

    msg = _fleet(columns, vehicles, np.asarray(values, float))
    with pytest.raises(FleetMessageError) as err:
        read_samples(msg, "/sim/fleet/wind", WIND_COLUMNS, 3)
    assert str(err.value) == f"/sim/fleet/wind: {says}"


def test_fleet_attitude_commands_are_held_as_the_per_vehicle_ones() -> None:
    """vehicle_dynamics' intake: the rows of one FleetAttitudeCommand are checked and held exactly as each
    vehicle's cmd/attitude (values, clamping, failsafe, counters); a row of a vehicle not under the flight
    controller, a non-finite row and a message whose fields do not fit are rejected and counted."""
    require_ros()
    from qrsim_ros.msg import AttitudeCommand, FleetAttitudeCommand

    from qrsim_ros.ros.command_intake import CommandIntake
    from qrsim_ros.ros.to_messages import float64_array, uint32_array

    names = ["uav1", "uav2", "uav3"]
    warnings: list[str] = []

    def intake() -> CommandIntake:
        return CommandIntake(names, np.zeros(3, bool), None, 0.5, lambda key, text: warnings.append(text))

    u = np.array([[0.1, -0.2, 0.6, 0.3, 12.0], [1.5, 0.0, 0.5, 0.0, 11.0], [0.0, 0.0, 0.59, 0.0, 12.0]])
    per_vehicle, fleet = intake(), intake()
    for i in range(3):
        m = AttitudeCommand()
        m.header.frame_id = f"{names[i]}/base_link_frd"
        m.pitch, m.roll, m.throttle, m.yaw_rate, m.battery_voltage = u[i].tolist()
        m.failsafe, m.disarm, m.setpoints_rejected, m.setpoints_clamped = "hold" * (i == 1), i == 2, i, 2 * i
        per_vehicle.attitude(i, m, 20_000_000, 20_000_000)
    f = FleetAttitudeCommand(vehicles=uint32_array([0, 1, 2]), failsafe=["", "hold", ""],
                             disarm=[False, False, True], setpoints_rejected=uint32_array([0, 1, 2]),
                             setpoints_clamped=uint32_array([0, 2, 4]))
    f.pitch, f.roll, f.throttle, f.yaw_rate, f.battery_voltage = (float64_array(u[:, c]) for c in range(5))
    assert fleet.fleet_attitude(f, 20_000_000, 20_000_000, np.ones(3, bool)) == [0, 1, 2]
    for name in ("control", "stamp_ns", "present", "disarm", "kind", "failsafe"):
        assert np.array_equal(getattr(fleet.held, name), getattr(per_vehicle.held, name)), name
    for name in ("commands_clamped", "commands_rejected", "setpoints_rejected", "setpoints_clamped"):
        assert np.array_equal(getattr(fleet, name), getattr(per_vehicle, name)), name
    assert fleet.commands_clamped.tolist() == [0, 1, 0]  # pitch 1.5 rad clamped to 0.9

    # uav3 flies its own cmd/attitude; uav1's row is not finite: both rejected, uav2's held
    f.pitch = float64_array([np.nan, 0.2, 0.3])
    controlled = np.array([True, True, False])
    assert fleet.fleet_attitude(f, 40_000_000, 40_000_000, controlled) == [0, 1, 2]
    assert fleet.commands_rejected.tolist() == [1, 0, 1]
    assert fleet.held.stamp_ns.tolist() == [20_000_000, 40_000_000, 20_000_000]
    assert any("not flown by the flight controller" in w for w in warnings)
    # fields of different lengths: nothing held, every vehicle named counted
    f.roll = float64_array([0.0])
    assert fleet.fleet_attitude(f, 60_000_000, 60_000_000, controlled) == []
    assert fleet.commands_rejected.tolist() == [2, 1, 2]
    assert "/sim/fleet/attitude_command rejected: 3 vehicles" in warnings[-1]


def test_fleet_winds_are_taken_as_the_per_vehicle_ones() -> None:
    """The rows of /sim/fleet/wind go through the same lockstep rules as uavN/wind: the awaited tick is
    taken (NED), a non-finite row is counted and the held wind stands for it, an old tick is ignored."""
    require_ros()
    from geometry_msgs.msg import Vector3Stamped

    from qrsim_ros.ros.stamps import stamp_from_tick
    from qrsim_ros.ros.wind_intake import WindIntake

    def intakes() -> tuple[WindIntake, WindIntake]:
        return tuple(WindIntake(["uav1", "uav2"], True, lambda key, text: None) for _ in range(2))

    per_vehicle, fleet = intakes()
    # (stamp tick, the node's tick, winds): tick 0; tick 1 with a non-finite row; tick 0 again at tick 1
    for k, now, winds in ((0, 0, [[1.0, 2.0, 0.5], [0.0, -1.0, 0.0]]),
                          (1, 1, [[np.nan, 0.0, 0.0], [3.0, 0.0, 0.0]]),
                          (0, 1, [[9.0, 9.0, 9.0], [9.0, 9.0, 9.0]])):
        awaited = []
        for i, w in enumerate(winds):
            m = Vector3Stamped()
            m.header.stamp = stamp_from_tick(k)
            m.header.frame_id = "map"
            m.vector.x, m.vector.y, m.vector.z = w
            awaited.append(per_vehicle.receive(i, m, now))
        assert fleet.receive_fleet(np.array([0, 1]), np.array(winds), k * 20_000_000, now) == any(awaited)
        assert any(awaited) == (k == now)
        assert np.array_equal(fleet.wind_ned, per_vehicle.wind_ned)
        assert np.array_equal(fleet.tick, per_vehicle.tick)
        assert np.array_equal(fleet.wind_rejected, per_vehicle.wind_rejected)
    assert fleet.wind_rejected.tolist() == [1, 0]
    assert fleet.wind_ned.tolist() == [[2.0, 1.0, -0.5], [0.0, 3.0, -0.0]]

"""One MAVSDK flight of three vehicles from the ground and back, for both front ends: the in-process
Simulator (test_mavsdk_simulator) and the launched graph's mavlink_bridge (test_mavlink_graph).

MAVSDK (its C++ core, from the package index) connects to each vehicle as a script connects to PX4 SITL
instance i, by its own API port, and flies: wait until healthy, arm, take off to 10 m, Offboard velocity
then position set points, a 4-waypoint mission with RTL after it, land, disarm. What MAVSDK reports is
checked against the rig's ground truth (within the GPS error); the rig says what only it can see.
"""

from __future__ import annotations

import math
from typing import Protocol

import mavsdk
import numpy as np
import pytest
from mavsdk.plugins import action, mission, offboard, telemetry
from test_mavsdk import mission_item, wait_for

from qrsim_ros.core.common.geodesy import GeodeticOrigin, lla_to_ned

NUM_VEHICLES = 3
#: the largest horizontal GPS error the correlated GPS model gives in these flights [m] (its bias and
#: noise, spec 3.3: a few metres)
GPS_ERROR_M = 5.0
#: the PX4 parameters of the flight (set by the rig's scenario or over MAVLink's parameter protocol)
FLIGHT_PARAMETERS = {"RTL_RETURN_ALT": 12.0, "COM_DISARM_LAND": 1.0, "MPC_LAND_SPEED": 1.5}


class FlightRig(Protocol):
    """What a front end shows the flight besides MAVLink."""

    origin: GeodeticOrigin

    def wait(self, condition: object, sim_seconds: float, what: str) -> None:
        """Until ``condition()`` holds, for at most ``sim_seconds`` of simulated time."""

    def truth(self, i: int) -> np.ndarray:
        """Vehicle i's true position NED [m]."""

    def estimate(self, i: int) -> np.ndarray | None:
        """Vehicle i's estimated position NED [m] now, or None where the rig cannot see it."""

    def landed_and_valid(self, i: int) -> bool:
        """Vehicle i rests on the ground, valid (landed, not crashed)."""

    def battery_v(self, i: int) -> float:
        """Vehicle i's pack voltage now [V] (the battery model's)."""


class Client:
    """One MAVSDK instance on API port ``port`` (vehicle i's 14540 + i), as a script for PX4 SITL."""

    def __init__(self, port: int, i: int) -> None:
        config = mavsdk.Configuration.create_with_component_type(mavsdk.ComponentType.GROUND_STATION)
        self.m = mavsdk.Mavsdk(config)
        assert self.m.add_any_connection(f"udpin://127.0.0.1:{port}") == mavsdk.ConnectionResult.SUCCESS
        self.system = self.m.first_autopilot(30.0)
        assert self.system is not None, f"MAVSDK found no autopilot on vehicle {i}'s port {port}"
        self.tel = telemetry.Telemetry(self.system)
        self.act = action.Action(self.system)
        self.off = offboard.Offboard(self.system)
        self.mis = mission.Mission(self.system)

    def healthy(self) -> bool:
        h = self.tel.health()
        return h.is_global_position_ok and h.is_home_position_ok and h.is_armable


def ne_of(lat_deg: float, lon_deg: float, origin: GeodeticOrigin) -> np.ndarray:
    """North, east [m] of a latitude and longitude about ``origin``."""
    return np.asarray(lla_to_ned([lat_deg, lon_deg, origin.alt_m], origin), float)[0:2]


def fly_three_from_the_ground_and_back(rig: FlightRig, clients: list[Client]) -> None:
    """The flight (module docstring) of ``clients`` (vehicle i's MAVSDK at index i)."""
    from qrsim_ros.core.common.geodesy import ned_to_lla

    for i, c in enumerate(clients):
        assert c.system.get_system_id() == i + 1
    for i, c in enumerate(clients):
        rig.wait(c.healthy, 20, f"vehicle {i} healthy (global position, home, armable)")
        assert c.tel.landed_state() == telemetry.LandedState.ON_GROUND and not c.tel.armed()
        # its pack as the vehicle reports it (BATTERY_STATUS, every 2 s): the battery model's, on the ground
        # (a charged pack at rest: it drains by millivolts between two reports)
        rig.wait(lambda c=c: c.tel.battery().voltage_v > 0.0, 5, f"vehicle {i}'s battery")
        reported = c.tel.battery()
        assert reported.voltage_v == pytest.approx(rig.battery_v(i), abs=0.05), (i, reported.voltage_v)
        assert 0.0 < reported.remaining_percent <= 100.0, (i, reported.remaining_percent)

    spots = [rig.truth(i)[0:2] for i in range(len(clients))]  # on the base, 10 m apart around 0, 0
    for c in clients:
        c.act.set_takeoff_altitude(10.0)
        c.act.arm()
        c.act.takeoff()
    for i, c in enumerate(clients):
        rig.wait(lambda i=i, c=c: c.tel.flight_mode() == telemetry.FlightMode.HOLD and -rig.truth(i)[2] > 9.0,
                 20, f"vehicle {i} at 10 m, holding")
    for i, c in enumerate(clients):
        assert c.tel.armed() and c.tel.in_air()
        pos, truth, est = c.tel.position(), rig.truth(i), rig.estimate(i)
        if est is not None:  # the estimate, as of MAVSDK's last GLOBAL_POSITION_INT: within ~0.1 m
            lat, lon, _ = ned_to_lla(est, rig.origin)
            assert (pos.latitude_deg, pos.longitude_deg) == pytest.approx((lat, lon), abs=1e-6)
        reported = ne_of(pos.latitude_deg, pos.longitude_deg, rig.origin)
        assert np.hypot(*(reported - truth[0:2])) < GPS_ERROR_M  # the truth within the GPS error

    # Offboard: each flies away from the base's centre at 1 m/s, then to a position twice as far out as
    # its spot on the base (their paths never cross)
    starts = [rig.truth(i) for i in range(len(clients))]
    ways = [spot / np.linalg.norm(spot) for spot in spots]  # the grid is centred on the base at 0, 0
    for c, way in zip(clients, ways, strict=True):
        yaw_deg = math.degrees(math.atan2(way[1], way[0]))
        c.off.set_velocity_ned(offboard.VelocityNedYaw(float(way[0]), float(way[1]), 0.0, yaw_deg))
        c.off.start()
    for i, way in enumerate(ways):
        rig.wait(lambda i=i, way=way: float(np.dot(rig.truth(i)[0:2] - starts[i][0:2], way)) > 2.0, 10,
                 f"vehicle {i} flying its way in Offboard")
    targets = [(float(2.0 * spot[0]), float(2.0 * spot[1])) for spot in spots]
    for c, (n, e) in zip(clients, targets, strict=True):
        c.off.set_position_ned(offboard.PositionNedYaw(n, e, -10.0, 0.0))
    for i, (c, (n, e)) in enumerate(zip(clients, targets, strict=True)):
        # the position flown is the estimate's (MAVSDK's position_velocity_ned): the truth is within the
        # GPS error of it
        rig.wait(lambda c=c, n=n, e=e: _ned_distance(c, n, e) < 0.5, 30,
                 f"vehicle {i} at its Offboard position")
        assert np.hypot(*(rig.truth(i)[0:2] - (n, e))) < GPS_ERROR_M
    for c in clients:
        assert c.tel.flight_mode() == telemetry.FlightMode.OFFBOARD
        c.off.stop()

    # a mission of 4 waypoints each, RTL after it
    squares = [[(n + dn, e + de) for dn, de in ((5, 0), (5, 5), (0, 5), (0, 0))] for n, e in targets]
    for c, square in zip(clients, squares, strict=True):
        c.mis.set_return_to_launch_after_mission(True)
        c.mis.upload_mission(mission.MissionPlan([mission_item(n, e, rig.origin) for n, e in square]))
    for c in clients:
        c.mis.start_mission()
    for i, c in enumerate(clients):
        rig.wait(c.mis.is_mission_finished, 60, f"vehicle {i}'s mission to finish")
    for i, (c, spot) in enumerate(zip(clients, spots, strict=True)):
        rig.wait(lambda c=c: not c.tel.armed(), 60, f"vehicle {i} to return, land and disarm")
        home = c.tel.home()
        home_ne = ne_of(home.latitude_deg, home.longitude_deg, rig.origin)
        assert np.hypot(*(home_ne - spot)) < GPS_ERROR_M  # home is where the estimate armed, on the base
        assert np.hypot(*(rig.truth(i)[0:2] - home_ne)) < GPS_ERROR_M  # back there
        assert rig.landed_and_valid(i), (i, rig.truth(i))  # landed, not crashed
        assert c.tel.landed_state() == telemetry.LandedState.ON_GROUND


def _ned_distance(c: Client, north: float, east: float) -> float:
    p = c.tel.position_velocity_ned().position
    return float(np.hypot(p.north_m - north, p.east_m - east))


__all__ = ["FLIGHT_PARAMETERS", "GPS_ERROR_M", "NUM_VEHICLES", "Client", "FlightRig",
           "fly_three_from_the_ground_and_back", "wait_for"]

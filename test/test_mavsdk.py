"""MAVSDK (its C++ core, from the package index) flies the onboard autopilot through the MAVLink adapter as
it flies a PX4 SITL vehicle: connect, wait until healthy, arm, take off, Offboard with velocity then
position set points, a 4-waypoint mission with RTL after it, land, disarm. The vehicle is the kinematic
fleet of the autopilot's tests, stepped at wall-clock pace in a thread (MAVSDK's timeouts are wall
time); nothing of MAVSDK's side is ours. Telemetry is checked against the vehicle's state."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator

import mavsdk
import numpy as np
import pytest
from kinematic_fleet import DT_S, KinematicFleet
from mavsdk.plugins import action, mission, offboard, telemetry
from test_mavlink import free_ports

from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN, GeodeticOrigin, ned_to_lla
from qrsim_ros.core.onboard.autopilot import OnboardAutopilot
from qrsim_ros.core.onboard.modes import FlightMode
from qrsim_ros.core.onboard.parameters import ParameterTable
from qrsim_ros.mavlink.vehicles import MavlinkVehicles

#: a real-time flight of about a minute, and MAVSDK's own start-up
pytestmark = pytest.mark.timeout(240)


class RealTimeRig:
    """One kinematic vehicle, its autopilot and MAVLink face, ticked at wall-clock pace in a thread."""

    def __init__(self) -> None:
        self.fleet = KinematicFleet([(0.0, 0.0, 0.0)])
        params = ParameterTable(1, {"RTL_RETURN_ALT": 12.0, "COM_DISARM_LAND": 1.0})
        self.ap = OnboardAutopilot(1, DT_S, params)
        self.ap.observe(0.0, self.fleet.ex(), np.ones(1, bool))
        self.ports = free_ports(1)
        self.mav = MavlinkVehicles(self.ap, QRSIM_ORIGIN, DT_S, self.ports)
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rig", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        def after(t: float, ex: np.ndarray) -> None:
            self.mav.remember(ex)
            self.mav.send(t, ex)

        start, k = time.monotonic(), 0
        try:
            while not self._stop.is_set():
                with self.lock:
                    self.fleet.fly(self.ap, DT_S, before_tick=self.mav.receive, after_step=after)
                k += 1
                ahead = start + k * DT_S - time.monotonic()
                if ahead > 0:
                    self._stop.wait(ahead)
        except BaseException as exc:  # the test reports it
            self.error = exc

    def position(self) -> np.ndarray:
        with self.lock:
            return self.fleet.pos[0].copy()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.mav.close()


@pytest.fixture
def rig() -> Iterator[RealTimeRig]:
    r = RealTimeRig()
    yield r
    r.close()
    assert r.error is None, r.error


def mission_item(north: float, east: float, origin: GeodeticOrigin) -> mission.MissionItem:
    """A fly-through waypoint 10 m above home at 2.5 m/s, 1 m acceptance, at NED ``north``, ``east`` [m]."""
    lat, lon, _ = ned_to_lla([north, east, 0.0], origin)
    nan = float("nan")
    return mission.MissionItem(
        latitude_deg=float(lat), longitude_deg=float(lon), relative_altitude_m=10.0, speed_m_s=2.5,
        is_fly_through=True, gimbal_pitch_deg=nan, gimbal_yaw_deg=nan,
        camera_action=mission.MissionItem.CameraAction.NONE, loiter_time_s=nan,
        camera_photo_interval_s=nan, acceptance_radius_m=1.0, yaw_deg=nan, camera_photo_distance_m=nan,
        vehicle_action=mission.MissionItem.VehicleAction.NONE)


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Until ``condition()`` holds (telemetry MAVSDK keeps, the rig's state): no event to await across
    the two libraries' threads, so it is polled, with a deadline naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.05)


def test_mavsdk_flies_takeoff_offboard_mission_and_landing(rig: RealTimeRig) -> None:
    config = mavsdk.Configuration.create_with_component_type(mavsdk.ComponentType.GROUND_STATION)
    m = mavsdk.Mavsdk(config)
    url = f"udpin://127.0.0.1:{rig.ports.api_remote}"  # as a script for PX4 SITL listens on 14540
    assert m.add_any_connection(url) == mavsdk.ConnectionResult.SUCCESS
    system = m.first_autopilot(10.0)
    assert system is not None, "MAVSDK found no autopilot"
    tel, act, off, ms = (telemetry.Telemetry(system), action.Action(system), offboard.Offboard(system),
                         mission.Mission(system))

    def healthy() -> bool:
        h = tel.health()
        return h.is_global_position_ok and h.is_home_position_ok and h.is_armable

    wait_for(healthy, 20, "a healthy vehicle (global position, home, armable)")
    act.set_takeoff_altitude(8.0)
    act.arm()
    act.takeoff()
    wait_for(lambda: rig.ap.mode[0] == FlightMode.HOLD and -rig.position()[2] > 7.5, 20, "takeoff to 8 m")
    pos = tel.position()
    assert pos.relative_altitude_m == pytest.approx(-rig.position()[2], abs=0.3)
    lat, lon, _ = ned_to_lla(rig.position(), QRSIM_ORIGIN)
    assert (pos.latitude_deg, pos.longitude_deg) == pytest.approx((lat, lon), abs=1e-6)  # ~0.1 m
    assert tel.armed() and tel.in_air()

    # Offboard: a set point before start (PX4's rule), velocity, then position
    off.set_velocity_ned(offboard.VelocityNedYaw(1.0, 0.0, 0.0, 0.0))
    off.start()
    north0 = rig.position()[0]
    wait_for(lambda: rig.position()[0] - north0 > 2.0, 10, "flying north at 1 m/s in Offboard")
    off.set_position_ned(offboard.PositionNedYaw(5.0, -5.0, -10.0, 90.0))
    wait_for(lambda: np.linalg.norm(rig.position() - (5.0, -5.0, -10.0)) < 0.3, 20, "the Offboard position")
    assert rig.ap.mode[0] == FlightMode.OFFBOARD
    off.stop()

    # a mission of 4 waypoints, RTL after it
    square = [(15.0, 5.0), (15.0, 15.0), (5.0, 15.0), (5.0, 5.0)]
    ms.set_return_to_launch_after_mission(True)
    ms.upload_mission(mission.MissionPlan([mission_item(n, e, QRSIM_ORIGIN) for n, e in square]))
    ms.start_mission()
    visited: list[int] = []

    def at_corners() -> bool:
        p = rig.position()
        for k, (n, e) in enumerate(square):
            if k not in visited and math.hypot(p[0] - n, p[1] - e) < 1.0:
                visited.append(k)
        return ms.is_mission_finished()

    wait_for(at_corners, 60, "the mission to finish")
    assert visited == [0, 1, 2, 3]
    wait_for(lambda: not rig.ap.armed[0], 60, "RTL to land and disarm")
    assert np.hypot(*rig.position()[0:2]) < 1.0 and rig.position()[2] == 0.0
    wait_for(lambda: not tel.armed(), 5, "MAVSDK to see the vehicle disarmed")
    assert tel.landed_state() == telemetry.LandedState.ON_GROUND

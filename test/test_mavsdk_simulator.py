"""MAVSDK (its C++ core, from the package index) flies three Pelicans of the in-process Simulator at once, as
it flies three PX4 SITL instances: each by its own port and system id, from the ground (``px4_sitl``:
resting on the base, disarmed), through takeoff, Offboard velocity and position set points and a
4-waypoint mission with RTL after it, to landing and disarming. The vehicles are the full simulation
(noisy IMU, altimeter and correlated GPS, the Pelican model with its dynamic noise), paced at three times
real time (``SimulatorMavlink``); what MAVSDK reports is checked against the ground truth (within the GPS
error) and against the vehicles' estimated states (within what a 50 Hz stream lags behind)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator

import mavsdk
import numpy as np
import pytest
from mavsdk.plugins import action, mission, offboard, telemetry
from test_mavlink import free_ports
from test_mavsdk import mission_item, wait_for

from qrsim_ros.core.common.geodesy import ned_to_lla
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.onboard.modes import FlightMode
from qrsim_ros.core.vehicles.estimated_state import POSITION_NED
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED
from qrsim_ros.mavlink.simulator import SimulatorMavlink

#: about 80 s of simulated flight at three times real time, and MAVSDK's start-up
pytestmark = pytest.mark.timeout(240)
NUM_VEHICLES = 3
REAL_TIME_FACTOR = 3.0
#: the largest horizontal GPS error the correlated GPS model gives in these flights [m] (its bias and
#: noise, spec 3.3: a few metres)
GPS_ERROR_M = 5.0
#: wall seconds allowed per simulated second of a wait (a loaded machine paces slower than real time)
WALL_CAP = 10.0


class SimulatorRig:
    """``px4_sitl`` with three vehicles on MAVLink, stepped in a thread, paced by its MAVLink link."""

    def __init__(self) -> None:
        overrides = {"num_vehicles": NUM_VEHICLES, "seed": 11, "task": {"dt_s": 0.2, "duration_steps": 3000},
                     "mavlink": {"parameters": {"RTL_RETURN_ALT": 12.0, "COM_DISARM_LAND": 1.0,
                                                "MPC_LAND_SPEED": 1.5}}}
        self.sim = Simulator.from_scenario("px4_sitl", overrides)
        self.ports = free_ports(NUM_VEHICLES)
        self.link = SimulatorMavlink(self.sim, self.ports, real_time_factor=REAL_TIME_FACTOR)
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._nan = np.full((self.sim.action_rows, self.sim.action_spec["width"]), np.nan)
        self._thread = threading.Thread(target=self._run, name="simulator", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and not self.sim.done:
                with self.lock:  # one task step (0.2 s) at a time; MAVLink is served every tick inside it
                    self.sim.step(self._nan)
        except BaseException as exc:  # the test reports it
            self.error = exc

    def time(self) -> float:
        with self.lock:
            return self.sim.time

    def wait(self, condition: Callable[[], bool], sim_seconds: float, what: str) -> None:
        """Until ``condition()`` holds, for at most ``sim_seconds`` of simulated time (the flight's own
        clock: a loaded machine runs it slower than paced, not differently); polled, as ``wait_for``."""
        deadline = self.time() + sim_seconds
        wait_for(lambda: condition() or self.time() > deadline or self.error is not None,
                 WALL_CAP * sim_seconds, what)
        assert self.error is None, self.error
        lost = [f"vehicle {i}: {r}" for i, r in enumerate(self.sim.fleet.invalid_reason) if r]
        assert condition(), f"not within {sim_seconds:g} s of simulated time: {what} (invalid: {lost})"

    def truth(self, i: int) -> np.ndarray:
        with self.lock:
            return self.sim.true_state()[i, STATE_POSITION_NED].copy()

    def estimate(self, i: int) -> np.ndarray:
        with self.lock:
            return self.sim.estimated_state()[i, POSITION_NED].copy()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=20)
        self.link.close()


@pytest.fixture
def rig() -> Iterator[SimulatorRig]:
    r = SimulatorRig()
    yield r
    r.close()
    assert r.error is None, r.error


class Client:
    """One MAVSDK instance on vehicle ``i``'s API port, as a script for PX4 SITL instance i connects."""

    def __init__(self, rig: SimulatorRig, i: int) -> None:
        config = mavsdk.Configuration.create_with_component_type(mavsdk.ComponentType.GROUND_STATION)
        self.m = mavsdk.Mavsdk(config)
        url = f"udpin://127.0.0.1:{rig.ports.api_remote + i}"
        assert self.m.add_any_connection(url) == mavsdk.ConnectionResult.SUCCESS
        self.system = self.m.first_autopilot(10.0)
        assert self.system is not None, f"MAVSDK found no autopilot on vehicle {i}'s port"
        self.tel = telemetry.Telemetry(self.system)
        self.act = action.Action(self.system)
        self.off = offboard.Offboard(self.system)
        self.mis = mission.Mission(self.system)

    def healthy(self) -> bool:
        h = self.tel.health()
        return h.is_global_position_ok and h.is_home_position_ok and h.is_armable


def test_mavsdk_flies_three_simulated_pelicans_from_the_ground_and_back(rig: SimulatorRig) -> None:
    sim, ap = rig.sim, rig.sim.onboard
    assert ap is not None
    clients = [Client(rig, i) for i in range(NUM_VEHICLES)]
    for i, c in enumerate(clients):
        assert c.system.get_system_id() == i + 1
    for i, c in enumerate(clients):
        rig.wait(c.healthy, 20, f"vehicle {i} healthy (global position, home, armable)")
        assert c.tel.landed_state() == telemetry.LandedState.ON_GROUND and not c.tel.armed()

    spots = [rig.truth(i)[0:2] for i in range(NUM_VEHICLES)]  # on the base, 10 m apart around 0, 0
    for c in clients:
        c.act.set_takeoff_altitude(10.0)
        c.act.arm()
        c.act.takeoff()
    for i in range(NUM_VEHICLES):
        rig.wait(lambda i=i: ap.mode[i] == FlightMode.HOLD and -rig.truth(i)[2] > 9.0, 20,
                 f"vehicle {i} at 10 m")
    for i, c in enumerate(clients):
        assert c.tel.armed() and c.tel.in_air()
        pos, truth, est = c.tel.position(), rig.truth(i), rig.estimate(i)
        lat, lon, _ = ned_to_lla(est, sim.scenario.origin)
        # the estimate, as of MAVSDK's last GLOBAL_POSITION_INT (50 Hz): within 1e-6 deg (about 0.1 m)
        assert (pos.latitude_deg, pos.longitude_deg) == pytest.approx((lat, lon), abs=1e-6)
        reported = np.array([*_ne_of(pos.latitude_deg, pos.longitude_deg, sim), -pos.relative_altitude_m])
        assert np.hypot(*(reported[0:2] - truth[0:2])) < GPS_ERROR_M  # the truth within the GPS error

    # Offboard: each flies away from the base's centre at 1 m/s, then to a position twice as far out as
    # its spot on the base (their paths never cross)
    starts = [rig.truth(i) for i in range(NUM_VEHICLES)]
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
    for i, (n, e) in enumerate(targets):
        # the position flown is the estimate's: the truth is within the GPS error of it
        rig.wait(lambda i=i, n=n, e=e: np.linalg.norm(rig.estimate(i)[0:2] - (n, e)) < 0.5, 30,
                 f"vehicle {i} at its Offboard position")
        assert np.hypot(*(rig.truth(i)[0:2] - (n, e))) < GPS_ERROR_M
    for i, c in enumerate(clients):
        assert ap.mode[i] == FlightMode.OFFBOARD
        c.off.stop()

    # a mission of 4 waypoints each, RTL after it
    squares = [[(n + dn, e + de) for dn, de in ((5, 0), (5, 5), (0, 5), (0, 0))] for n, e in targets]
    for c, square in zip(clients, squares, strict=True):
        c.mis.set_return_to_launch_after_mission(True)
        plan = mission.MissionPlan([mission_item(n, e, sim.scenario.origin) for n, e in square])
        c.mis.upload_mission(plan)
    for c in clients:
        c.mis.start_mission()
    for i, c in enumerate(clients):
        rig.wait(c.mis.is_mission_finished, 60, f"vehicle {i}'s mission to finish")
    for i, c in enumerate(clients):
        rig.wait(lambda i=i: not ap.armed[i], 60, f"vehicle {i} to return, land and disarm")
        home = ap.home_ned[i]
        truth = rig.truth(i)
        assert np.hypot(*(truth[0:2] - home[0:2])) < GPS_ERROR_M  # home is where the estimate armed
        assert bool(sim.fleet.resting[i]) and bool(sim.valid[i])  # landed, not crashed
        wait_for(lambda c=c: not c.tel.armed(), 5, f"MAVSDK to see vehicle {i} disarmed")
        assert c.tel.landed_state() == telemetry.LandedState.ON_GROUND
    assert ap.failsafe_onsets.sum() == 0


def _ne_of(lat_deg: float, lon_deg: float, sim: Simulator) -> tuple[float, float]:
    from qrsim_ros.core.common.geodesy import lla_to_ned

    n, e, _ = lla_to_ned([lat_deg, lon_deg, sim.scenario.origin.alt_m], sim.scenario.origin)
    return float(n), float(e)

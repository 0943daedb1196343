"""MAVSDK (its C++ core, from the package index) flies three Pelicans of the in-process Simulator at once, as
it flies three PX4 SITL instances: each by its own port and system id, from the ground (``px4_sitl``:
resting on the base, disarmed), through takeoff, Offboard velocity and position set points and a
4-waypoint mission with RTL after it, to landing and disarming. The vehicles are the full simulation
(noisy IMU, altimeter and correlated GPS, the Pelican model with its dynamic noise), paced at three times
real time (``SimulatorMavlink``); what MAVSDK reports is checked against the ground truth (within the GPS
error) and against the vehicles' estimated states (within what a 50 Hz stream lags behind)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from mavsdk_flight import FLIGHT_PARAMETERS, NUM_VEHICLES, Client, fly_three_from_the_ground_and_back
from test_mavlink import free_ports
from test_mavsdk import wait_for

from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.vehicles.estimated_state import POSITION_NED
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED
from qrsim_ros.mavlink.simulator import SimulatorMavlink

#: about 80 s of simulated flight at three times real time, and MAVSDK's start-up
pytestmark = pytest.mark.timeout(240)
REAL_TIME_FACTOR = 3.0
#: wall seconds allowed per simulated second of a wait (a loaded machine paces slower than real time)
WALL_CAP = 10.0


class SimulatorRig:
    """``px4_sitl`` with three vehicles on MAVLink, stepped in a thread, paced by its MAVLink link."""

    def __init__(self) -> None:
        overrides = {"num_vehicles": NUM_VEHICLES, "seed": 11, "task": {"dt_s": 0.2, "duration_steps": 3000},
                     "mavlink": {"parameters": dict(FLIGHT_PARAMETERS)}}
        self.sim = Simulator.from_scenario("px4_sitl", overrides)
        self.origin = self.sim.scenario.origin
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

    def landed_and_valid(self, i: int) -> bool:
        with self.lock:
            return bool(self.sim.fleet.resting[i]) and bool(self.sim.valid[i])

    def battery_v(self, i: int) -> float:
        with self.lock:
            return float(self.sim.battery.voltage_v[i])

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


def test_mavsdk_flies_three_simulated_pelicans_from_the_ground_and_back(rig: SimulatorRig) -> None:
    clients = [Client(rig.ports.api_remote + i, i) for i in range(NUM_VEHICLES)]
    fly_three_from_the_ground_and_back(rig, clients)
    assert rig.sim.onboard is not None and rig.sim.onboard.failsafe_onsets.sum() == 0

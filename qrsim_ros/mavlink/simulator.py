"""The in-process ``Simulator``'s vehicles on MAVLink: ``qrsim run --mavlink`` (docs/MAVLINK.md).

``SimulatorMavlink(sim)`` is the simulator's ``onboard_link`` (``core.onboard.link``): before the onboard
autopilots step it hands them what arrived on every vehicle's links, after the tick it sends the telemetry
that is due, and then, with a real-time factor, waits until the wall clock has caught up with the
simulated time (a client's timeouts, MAVSDK's among them, are wall time). The scenario must have
``mavlink.on`` (the onboard autopilots); the agent vehicles are the MAVLink vehicles, vehicle ``i`` of
them PX4 SITL instance ``i``.

What the vehicles report besides their estimated states comes from the simulation as a real autopilot
would see it: the battery model's voltage and charge, no GPS fix during a ``gps_outage`` fault (the GPS
sensor bit unhealthy, arming refused), a vehicle a failed self-test left invalid cannot arm.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from pymavlink.dialects.v20 import common as mavlink

from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.mavlink.vehicles import MavlinkPorts, MavlinkVehicles, Telemetry

Array = NDArray[np.float64]

#: GPS satellites reported with a fix (the receiver model tracks no count).
SATELLITES_WITH_FIX = 10


class RealTimePacer:
    """Waits until the wall clock reaches ``start + simulated / real_time_factor`` (0: never waits).

    ``clock`` and ``sleep`` are the wall clock [s] and a sleep [s] (``time.monotonic``, ``time.sleep``).
    A simulation that falls behind is not made to catch up in a burst later: the start moves, and the
    time lost is counted in ``behind_s``."""

    #: Behind by more than this [s], the pacer starts again from now instead of running unpaced.
    MAX_LAG_S = 0.5

    def __init__(self, real_time_factor: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not (np.isfinite(real_time_factor) and real_time_factor >= 0):
            raise ValueError(f"real_time_factor={real_time_factor!r} must be >= 0 (0: as fast as it goes)")
        self.real_time_factor = float(real_time_factor)
        self._clock, self._sleep = clock, sleep
        self._start_wall: float | None = None
        self._start_sim = 0.0
        self.behind_s = 0.0

    def wait(self, sim_time_s: float) -> None:
        """Wait until simulated time ``sim_time_s`` [s] is due."""
        if self.real_time_factor == 0:
            return
        now = self._clock()
        if self._start_wall is None:
            self._start_wall, self._start_sim = now, sim_time_s
            return
        due = self._start_wall + (sim_time_s - self._start_sim) / self.real_time_factor
        if due > now:
            self._sleep(due - now)
        elif now - due > self.MAX_LAG_S:
            self.behind_s += now - due
            self._start_wall, self._start_sim = now, sim_time_s


class SimulatorMavlink:
    """The MAVLink face of ``sim``'s onboard autopilots (module docstring). ``ports``: the UDP ports
    (PX4 SITL's by default; with the scenario's ``mavlink.network`` they bind every interface);
    ``real_time_factor``: simulated seconds per wall second (0: unpaced)."""

    def __init__(self, sim: Simulator, ports: MavlinkPorts | None = None,
                 real_time_factor: float = 1.0) -> None:
        if sim.onboard is None:
            raise ValueError(f"scenario {sim.scenario.name!r} has no onboard autopilots: "
                             "set mavlink.on: true")
        self.sim = sim
        ports = ports or MavlinkPorts()
        if sim.scenario.mavlink.network:
            ports = MavlinkPorts(ports.api_local, ports.api_remote, ports.gcs_local, ports.gcs_remote,
                                 ports.host, "0.0.0.0")
        self.vehicles = MavlinkVehicles(sim.onboard, sim.scenario.origin, sim.dt_s, ports,
                                        preflight=self._preflight)
        self.pacer = RealTimePacer(real_time_factor)
        sim.onboard_link = self

    @property
    def ports(self) -> MavlinkPorts:
        return self.vehicles.ports

    def close(self) -> None:
        """Close every link; the simulator goes on without one."""
        if self.sim.onboard_link is self:
            self.sim.onboard_link = None
        self.vehicles.close()

    def __enter__(self) -> SimulatorMavlink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- OnboardLink ------------------------------------------------------------------------------------

    def receive(self, now_s: float) -> None:
        self.vehicles.receive(now_s)

    def send(self, now_s: float, ex: Array) -> None:
        self.vehicles.remember(ex)
        gps_updated = np.full(len(ex), self.sim.tick % self.sim.gps.ticks == 0)  # a new GPS sample
        self.vehicles.send(now_s, ex, self._telemetry(), gps_updated)
        self.pacer.wait(now_s)

    # --- what the simulation tells -------------------------------------------------------------------------

    def _gps_lost(self) -> NDArray[np.bool_]:
        """(M,) the MAVLink vehicles whose GPS receiver has no fix (a ``gps_outage``, too few satellites)."""
        return ~self.sim.gps.has_fix[self.sim.onboard_vehicles]

    def _telemetry(self) -> Telemetry:
        rows = self.sim.onboard_vehicles
        battery = self.sim.battery
        fix = ~self._gps_lost()
        return Telemetry(battery_v=battery.voltage_v[rows], battery_fraction=battery.percentage[rows],
                         gps_fix=fix, satellites=np.where(fix, SATELLITES_WITH_FIX, 0),
                         unhealthy_bits=np.where(fix, 0, mavlink.MAV_SYS_STATUS_SENSOR_GPS))

    def _preflight(self, i: int) -> list[str]:
        """The failed preflight checks of MAVLink vehicle ``i`` besides the autopilot's own."""
        failed = []
        if self._gps_lost()[i]:
            failed.append("GPS: no fix")
        vehicle = int(self.sim.onboard_vehicles[i])
        reason = self.sim.fleet.invalid_reason[vehicle]
        if reason:
            failed.append(f"vehicle: {reason}")
        if bool(self.sim.battery.empty[vehicle]):
            failed.append("battery empty")
        return failed

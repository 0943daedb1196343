"""When the sensor nodes publish: each estimated-state sensor's update period in ticks, from the scenario.

The sensor nodes publish on their update ticks only (``imu/data`` when the accelerometer, gyroscope or
orientation estimator updates; ``altimeter``; ``gps/fix`` and ``gps/vel`` together). Lockstep nodes
that wait for the estimated state of a tick (flight_controller, mission_autopilot) ask this schedule
which messages are due and which one is the latest at a tick.
"""

from __future__ import annotations

import math
from typing import Any

from qrsim_ros.core.common.validation import ticks_per_update

#: vehicle_dynamics publishes uavN/battery on the ticks that are multiples of this (its parameter
#: ``battery_every_n_ticks``; 5: every 0.1 s of simulated time).
BATTERY_EVERY_N_TICKS = 5
#: Keys of the estimated-state sensors (as the flight controller buffers them).
IMU, FIX, VEL, ALT = "imu", "fix", "vel", "alt"


class SensorSchedule:
    """Update periods [ticks] of the IMU, altimeter and GPS of a scenario's vehicles."""

    def __init__(self, scenario: Any) -> None:
        a = scenario.vehicle.ahars
        self.imu_ticks = tuple(ticks_per_update(f"ahars.{s}.dt_s", getattr(a, s).dt_s)
                               for s in ("accelerometer", "gyroscope", "orientation_estimator"))
        self.alt_ticks = ticks_per_update("ahars.altimeter.dt_s", a.altimeter.dt_s)
        self.gps_ticks = ticks_per_update("gps_receiver.dt_s", scenario.vehicle.gps_receiver.dt_s)
        self.period_ticks = math.lcm(*self.imu_ticks, self.alt_ticks, self.gps_ticks)

    def due(self, k: int) -> tuple[str, ...]:
        """The sensor messages published at tick k."""
        imu = any(k % t == 0 for t in self.imu_ticks)
        return (IMU,) * imu + (ALT,) * (k % self.alt_ticks == 0) + (FIX, VEL) * (k % self.gps_ticks == 0)

    def latest(self, kind: str, k: int) -> int:
        """The tick of the latest ``kind`` message published at or before tick k."""
        if kind == IMU:
            return max(k - k % t for t in self.imu_ticks)
        period = self.alt_ticks if kind == ALT else self.gps_ticks
        return k - k % period

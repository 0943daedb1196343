"""What a lockstep autopilot waits for before it answers the task step of tick k.

In process the policy of step k reads the observations of tick k: each vehicle's estimated state from
its latest IMU, altimeter and GPS samples, the camera frame or plume reading taken at tick k (if one is
due then), the battery. Over the graph those messages come from several nodes in no fixed order, so an
autopilot that answers as soon as the referee's status of tick k arrives reads whatever came by then:
the same seed flies differently from run to run. In lockstep the autopilot keeps a ``StepInputs``,
records every awaited message's tick as it arrives, and answers step k once ``missing(k)`` is None
(nothing is forgotten at a new episode: each input comes again from the new episode's tick 0, and the
old episode's ticks are never the ones the new one's first step awaits):

- ``/sim/vehicle_status`` of tick k (validity, and the faults that silence a camera);
- for each vehicle valid at tick k: its latest ``imu/data``, ``altimeter``, ``gps/fix`` and ``gps/vel``
  at or before tick k (``sensor_ticks.SensorSchedule``); on camera ticks (search and rescue) its
  ``camera/detections`` of tick k unless a ``camera_off`` fault is active; on plume-sensor ticks (plume)
  its ``plume/concentration`` of tick k; on battery ticks (``battery_every_n_ticks``, battery on) its
  ``battery`` of tick k.

Not awaited (their delivery has no fixed schedule or they come at any rate): the radio's ``comms/rx``
and the scene range finders' beams; a policy that reads them is not bit-reproducible over the graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from qrsim_ros.core.common.validation import ticks_per_update
from qrsim_ros.core.engine.builders import has_camera
from qrsim_ros.ros.names import vehicle_namespace
from qrsim_ros.ros.sensor_ticks import ALT, FIX, IMU, VEL, SensorSchedule

#: Keys of the awaited inputs besides the estimated-state sensors (``sensor_ticks``).
CAMERA, PLUME, BATTERY = "camera", "plume", "battery"
#: The topic of each key, under the vehicle's namespace (for the "waiting for" message).
TOPICS = {IMU: "imu/data", ALT: "altimeter", FIX: "gps/fix", VEL: "gps/vel", CAMERA: "camera/detections",
          PLUME: "plume/concentration", BATTERY: "battery"}


class StepInputs:
    """The ticks of the awaited inputs that arrived (module docstring) of a scenario's ``num_vehicles``.

    battery_every_n_ticks: vehicle_dynamics publishes ``uavN/battery`` on the ticks that are multiples of
    it (0: not awaited; not awaited either with the battery off).
    """

    def __init__(self, scenario: Any, battery_every_n_ticks: int) -> None:
        self.num_vehicles = int(scenario.num_vehicles)
        self.schedule = SensorSchedule(scenario)
        self.camera_ticks = (ticks_per_update("camera.dt_s", scenario.vehicle.camera.dt_s)
                             if has_camera(scenario) else 0)
        self.plume_ticks = (ticks_per_update("plume_sensor.dt_s", scenario.vehicle.plume_sensor.dt_s)
                            if scenario.task.type == "plume" else 0)
        self.battery_ticks = int(battery_every_n_ticks) if scenario.vehicle.battery.on else 0
        self._tick: dict[tuple[str, int], int] = {}
        self.status_tick = -1  # of the latest /sim/vehicle_status
        self.valid = np.ones(self.num_vehicles, bool)  # at status_tick
        self._camera_off: frozenset[int] = frozenset()  # vehicles with a camera_off fault at status_tick
        # (tick, vehicle) where ``missing`` last stopped: the vehicles before it were complete, so a check
        # on each arrival resumes there (O(N) per tick, not O(N^2)) unless one of them got a new message
        self._resume = (-1, 0)

    def arrived(self, key: str, i: int, k: int | None) -> None:
        """Vehicle ``i``'s ``key`` message of tick ``k`` arrived (None: stamped off the tick grid, never
        awaited)."""
        self._tick[(key, i)] = -1 if k is None else k
        if i < self._resume[1]:  # a vehicle already found complete changed: check from the start again
            self._resume = (-1, 0)

    def vehicle_status(self, tick: int, valid: Any, faults: Any) -> None:
        """The /sim/vehicle_status of ``tick``: its validity flags and active faults (ActiveFault list;
        None: the status did not list them, the last listed set holds)."""
        self.status_tick = int(tick)
        self.valid = np.asarray(valid, bool)
        self._resume = (-1, 0)
        if faults is not None:
            self._camera_off = frozenset(int(f.vehicle) for f in faults if f.kind == "camera_off")

    def awaited(self, k: int, i: int) -> list[tuple[str, int]]:
        """(key, tick) of every input of vehicle ``i`` awaited for the task step at tick ``k``."""
        s = self.schedule
        keys = [(kind, s.latest(kind, k)) for kind in (IMU, ALT, FIX, VEL)]
        if self.camera_ticks and k % self.camera_ticks == 0 and i not in self._camera_off:
            keys.append((CAMERA, k))
        if self.plume_ticks and k % self.plume_ticks == 0:
            keys.append((PLUME, k))
        if self.battery_ticks and k % self.battery_ticks == 0:
            keys.append((BATTERY, k))
        return keys

    def missing_keys(self, k: int, kinds: Iterable[str]) -> list[tuple[str, int]]:
        """(kind, vehicle) of the inputs of ``kinds`` that tick ``k``'s step awaits from its valid vehicles
        and that are not in (the vehicle status of tick k, which says which are valid, must be in)."""
        if self.status_tick != k:
            raise ValueError(f"the vehicle status of tick {k} is not in (latest: {self.status_tick})")
        wanted = frozenset(kinds)
        return [(key, i) for i in range(self.num_vehicles) if self.valid[i]
                for key, tick in self.awaited(k, i) if key in wanted and self._tick.get((key, i)) != tick]

    def missing(self, k: int) -> str | None:
        """The first input of tick ``k`` not in yet (a topic name), or None: step k can be answered."""
        if self.status_tick != k:
            return "/sim/vehicle_status"
        start = self._resume[1] if self._resume[0] == k else 0
        for i in range(start, self.num_vehicles):
            if not self.valid[i]:
                continue
            for key, tick in self.awaited(k, i):
                if self._tick.get((key, i)) != tick:
                    self._resume = (k, i)
                    return f"{vehicle_namespace(i)}/{TOPICS[key]}"
        self._resume = (k, self.num_vehicles)
        return None

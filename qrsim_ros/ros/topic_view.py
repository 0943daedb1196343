"""The ``policies.base.AutopilotView`` of a running graph, filled from the public topics.

``example_autopilot`` and ``mission_autopilot`` run the in-process policies on a ``TopicView``: the
estimated state assembled from ``uavN/imu/data``, ``gps/fix``, ``gps/vel`` and ``altimeter``, the camera
frames, plume readings, range beams, battery and radio packets the nodes store into it, and the static
facts of the scenario (``ScenarioFacts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.comms import BROADCAST, MODES, Inboxes, Packet
from qrsim_ros.core.comms.packets import vehicle_index
from qrsim_ros.core.config.scenario import CONTROL_MODES
from qrsim_ros.core.sensors.scene_range_finders import BEAM_AXES, BeamReadings
from qrsim_ros.core.tasks.factory import make_task
from qrsim_ros.core.tasks.rules import TaskContext
from qrsim_ros.policies.base import PolicyError, ScenarioFacts
from qrsim_ros.ros.estimated_state import EstimatedStateAssembler


@dataclass(frozen=True)
class CameraFrame:
    """One ``camera/detections`` frame as the policies read a ``CameraObservation``: window ground
    centres (nf2, nf1, 3) NED [m] and their llkd (nf2, nf1); ``t_s`` the frame's time."""

    t_s: float
    centres_ned: Array
    llkd_grid: Array

    @property
    def empty(self) -> bool:
        return self.llkd_grid.size == 0


class TopicView(ScenarioFacts):
    """The ``policies.base.AutopilotView`` of a running graph: what ``SimulatorView`` offers in process,
    filled from the public topics (the static facts from the scenario: ``ScenarioFacts``)."""

    def __init__(self, scenario: Any) -> None:
        self.scenario = scenario
        n = scenario.num_vehicles
        self.num_vehicles = n
        self.control_modes = tuple(scenario.control_modes())
        task = make_task(TaskContext(scenario))
        rows = [int(i) for i in task.agent_vehicles]
        modes = [self.control_modes[i] for i in rows]
        self.action_spec = {"vehicles": rows, "modes": modes,
                            "width": max(len(CONTROL_MODES[m]) for m in modes),
                            "columns": {m: CONTROL_MODES[m] for m in dict.fromkeys(modes)}}
        self.action_rows = len(rows)
        self.seed_entropy = RandomStreams(scenario.seed).entropy
        self.assembler = EstimatedStateAssembler(n, scenario.origin)
        self.valid = np.ones(n, bool)
        self.frames: list[CameraFrame | None] = [None] * n
        self.concentration = np.full(n, np.nan)
        self.plume_locations = np.zeros((0, 3))
        rf = scenario.vehicle.sensors.get("range_finders")
        #: the scene range finders' beams and their latest readings (N, B) [m] (uavN/range/<beam>)
        self.range_params = dict(rf.beams) if rf is not None else {}
        self.ranges = np.full((n, len(self.range_params)), np.nan)
        self.time_s = 0.0
        self.step_count = 0
        #: the radio (``comms.on``): packets heard on uavN/comms/rx until ``receive``, and the packets the
        #: policy sent this step, published on uavN/comms/tx by the node before the set points
        self.has_radio = bool(scenario.comms.on)
        self.inboxes = Inboxes(n)
        self.outbox: list[tuple[int, int, bytes, str | None]] = []
        self._sequence = [0] * n
        #: the battery's charge left and voltage per vehicle (uavN/battery ``percentage``, ``voltage`` [V];
        #: NaN before the first)
        self.charge = np.full(n, np.nan)
        self.voltage_v = np.full(n, np.nan)
        #: what each vehicle's onboard failsafe flies, as far as this view is told ('' until then)
        self.failsafes = [""] * n
        self._retrieve: Any = None  # the retrieve devices, where a node serves them

    # observations
    def estimated_state(self) -> Array:
        return self.assembler.estimated_state(self.valid)

    def camera_observations(self) -> list[CameraFrame | None]:
        return list(self.frames)

    def plume_readings(self) -> Array:
        return self.concentration.copy()

    @property
    def range_finder_beams(self) -> tuple[str, ...]:
        return tuple(self.range_params)

    def range_finder_readings(self, beams: tuple[str, ...] | None = None) -> BeamReadings:
        """As ``AutopilotView.range_finder_readings``, from the latest ``uavN/range/<beam>`` messages."""
        names = self.range_finder_beams if beams is None else tuple(beams)
        fitted = list(self.range_params)
        unknown = [b for b in names if b not in self.range_params]
        if not self.range_params or unknown:
            raise PolicyError(f"scenario {self.scenario_name!r}: range-finder beam(s) "
                              f"{', '.join(unknown or names) or 'any'} not fitted "
                              f"(vehicle.sensors.range_finders: {', '.join(fitted) or 'none'})")
        cols = [fitted.index(b) for b in names]
        return BeamReadings(names, np.array([BEAM_AXES[b] for b in names], float).reshape(-1, 3),
                            self.ranges[:, cols].copy(),
                            np.array([self.range_params[b].max_range_m for b in names], float))

    def battery_percentage(self) -> Array:
        """As ``AutopilotView.battery_percentage``, from the latest ``uavN/battery`` messages."""
        return self.charge.copy()

    def battery_voltage_v(self) -> Array:
        """As ``AutopilotView.battery_voltage_v``, from the latest ``uavN/battery`` messages."""
        return self.voltage_v.copy()

    @property
    def failsafe(self) -> list[str]:
        """As ``AutopilotView.failsafe``, as far as this view is told (the mission autopilot reads them)."""
        return list(self.failsafes)

    @property
    def retrieve(self) -> Any:
        """As ``AutopilotView.retrieve``: the retrieve devices over the topics (``mission_autopilot``'s
        ``RetrieveLink``); ``PolicyError`` where no node serves them."""
        if self._retrieve is None:
            raise PolicyError(f"scenario {self.scenario_name!r}: no retrieve devices here (the retrieve task "
                              "is flown by mission_autopilot)")
        return self._retrieve

    def send(self, vehicle: int, destination: int, payload: bytes, mode: str | None = None) -> int:
        """As ``AutopilotView.send``: the packet goes out on ``uavN/comms/tx`` stamped with this step's
        time, before the step's set points. Returns the view's own count of the vehicle's sends (the
        radio numbers the packets itself)."""
        if not self.has_radio:
            raise PolicyError(f"scenario {self.scenario_name!r} has no radio (comms.on: false)")
        vehicle_index("vehicle", vehicle, self.num_vehicles)
        if destination != BROADCAST:
            vehicle_index("destination", destination, self.num_vehicles)
        if mode is not None and mode not in MODES:
            raise PolicyError(f"send: mode {mode!r} is not one of {', '.join(MODES)}")
        self.outbox.append((int(vehicle), int(destination), bytes(payload), mode))
        seq = self._sequence[vehicle]
        self._sequence[vehicle] += 1
        return seq

    def receive(self, vehicle: int) -> list[Packet]:
        """As ``AutopilotView.receive``: the packets heard on ``uavN/comms/rx`` since the last call (sent_s
        NaN: the rx message carries the delivery time only)."""
        if not self.has_radio:
            raise PolicyError(f"scenario {self.scenario_name!r} has no radio (comms.on: false)")
        return self.inboxes.drain(vehicle)

    def set_range(self, i: int, beam: str, range_m: float) -> None:
        """Store vehicle ``i``'s reading of ``beam`` [m] (a sensor_msgs/Range's ``range``)."""
        self.ranges[i, list(self.range_params).index(beam)] = range_m

    def new_episode(self, t_s: float) -> None:
        """A new episode started at simulated time ``t_s``: forget camera frames taken after it (the old
        episode's). Sensor values are kept: the new episode's first ones may already be in."""
        self.frames = [f if f is not None and f.t_s <= t_s else None for f in self.frames]
        self.valid[:] = True
        self.inboxes.clear()
        self.outbox.clear()
        self._sequence = [0] * self.num_vehicles

    def ready(self) -> bool:
        """Whether the episode's policy can be built (besides every sensor having reported)."""
        return True

    def policy_built(self) -> None:
        """The episode's policy was just built from this view."""

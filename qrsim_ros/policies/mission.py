"""``--policy mission``: ireland_2016's mission guidance (``core.mission.guidance``) flying a retrieve
scenario in process, one ``MissionGuidance`` per vehicle.

Per task step it reads only what the vehicle senses (``AutopilotView``): the estimated state (motion
capture position and velocity, heading), the battery voltage, the onboard failsafe (the emergency landing
after a rotor loss is the detected actuator fault), the downward camera's target centroids and the
grasper's report; it commands a velocity set point (``vehicle.control: velocity``) and the grasper, and
reports its mode and the mode's height command (``MissionGuidance.height_command_z_ned_m``, Figure 9's
dashed line) to the referee (the graph's ``uavN/mission/mode``).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.config.retrieve import RetrieveParams
from qrsim_ros.core.mission.guidance import GuidanceInputs, MissionGuidance
from qrsim_ros.core.vehicles.estimated_state import HEADING, POSITION_NED, velocity_ned
from qrsim_ros.policies.base import AutopilotView, PolicyError

Array = NDArray[np.float64]


class RetrieveDevices(Protocol):
    """What the mission reads and drives besides the flight controller: in process the ``RetrieveTask``
    itself (``AutopilotView.retrieve``), in the graph ``ros.retrieve_link.RetrieveLink`` over the topics
    (docs/RETRIEVE.md, "In the node graph"). Sites in NED (north, east) [m], image points [px]."""

    retrieve: RetrieveParams
    landing_site_ne: Array
    drop_site_ne: Array

    def self_test(self, vehicle: int) -> bool | None: ...

    def camera_centroids_px(self, vehicle: int) -> Array: ...

    def holding(self, vehicle: int) -> bool: ...

    def command_grasper(self, vehicle: int, closed: bool) -> None: ...

    def report_mission(self, vehicle: int, mode: str, mission_over: str, time_s: float,
                       height_command_z_ned_m: float) -> None: ...


class Mission:
    """The mission policy (module docstring)."""

    def __init__(self, view: AutopilotView) -> None:
        if view.task.type != "retrieve":
            raise PolicyError(f"the mission policy flies retrieve scenarios, not {view.task.type!r}")
        modes = set(view.action_spec["modes"])
        if modes != {"velocity"}:
            raise PolicyError(f"the mission policy commands velocities: vehicle.control must be 'velocity', "
                              f"not {sorted(modes)}")
        task: RetrieveDevices = view.retrieve
        params = task.retrieve.guidance
        self.rows = list(view.action_spec["vehicles"])
        self.dt_s = float(view.task.dt_s)
        self.guidance = [MissionGuidance(params, task.landing_site_ne, task.drop_site_ne,
                                         task.retrieve.num_targets, lambda i=i: task.self_test(i))
                         for i in self.rows]

    def __call__(self, view: AutopilotView) -> Array:
        task: RetrieveDevices = view.retrieve
        ex = view.estimated_state()
        volts = view.battery_voltage_v()
        failsafe = view.failsafe
        v_ned = velocity_ned(ex)
        actions = np.full((len(self.rows), 3), np.nan)
        for r, i in enumerate(self.rows):
            g = self.guidance[r]
            if not all(math.isfinite(e) for e in ex[i, POSITION_NED].tolist()):
                continue  # a lost vehicle: no set point
            inputs = GuidanceInputs(
                time_s=view.time_s, position_ned_m=ex[i, POSITION_NED], velocity_ned_mps=v_ned[i],
                heading_rad=float(ex[i, HEADING]), battery_v=float(volts[i]),
                centroids_px=task.camera_centroids_px(i), holding=task.holding(i),
                rotor_failed=failsafe[i] == "emergency_land")
            cmd = g.update(inputs, self.dt_s)
            task.command_grasper(i, cmd.grasper_closed)
            task.report_mission(i, cmd.mode, g.mission_over, view.time_s, g.height_command_z_ned_m())
            actions[r] = cmd.velocity_ned_mps
        return actions


def mission(view: AutopilotView) -> Mission:
    """Factory of ``--policy mission``."""
    return Mission(view)

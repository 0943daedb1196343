"""The two trivial baselines: ``hover`` (hold still) and ``random`` (uniform actions)."""

from __future__ import annotations

import numpy as np

from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.vehicles.controllers import WaypointPID
from qrsim_ros.core.vehicles.estimated_state import hold_pose
from qrsim_ros.core.vehicles.fleet_control import LOW_LEVEL_MODES
from qrsim_ros.core.vehicles.pelican import HOVER_CONTROL
from qrsim_ros.core.vehicles.rotor_control import hover_low_level
from qrsim_ros.policies.base import Array, AutopilotView, action_bounds


class Hover:
    """Hold every vehicle where it is at the first step, from estimated states only.

    velocity / velocity_height: zero velocity (the simulator's loops hold the height); waypoint: the
    first estimated position and heading; attitude: a ``WaypointPID`` on the estimated state holding the
    first estimated position and heading when the task step is the 20 ms control step (the generic
    tasks), else the open-loop hover controls (a PID cannot run on a held 1 s action); rates_thrust,
    motors (rotor airframe): ``rotor_control.hover_low_level`` (zero rates and the weight; every motor
    at the hover speed, open loop).
    """

    def __init__(self, view: AutopilotView) -> None:
        spec = view.action_spec
        self.rows = np.asarray(spec["vehicles"], int)
        self.modes = list(spec["modes"])
        self.width = int(spec["width"])
        self.hold: Array | None = None  # (rows, 4) NED position + heading
        self.closed_loop = abs(view.task.dt_s - BASE_DT_S) < 1e-12
        self.pid = WaypointPID(len(self.rows), BASE_DT_S)
        self.low_level = {m: hover_low_level(m, view.rotor_params)
                          for m in set(self.modes) & set(LOW_LEVEL_MODES)}

    def __call__(self, view: AutopilotView) -> Array:
        ex = view.estimated_state()[self.rows]
        if self.hold is None or not np.all(np.isfinite(self.hold)):
            # z as the waypoint loops read it from eX: minus the altimeter height (spec 6)
            self.hold = hold_pose(ex)
        a = np.zeros((len(self.rows), self.width))
        attitude = [r for r, m in enumerate(self.modes) if m == "attitude"]
        if attitude:
            if self.closed_loop:
                u = self.pid.compute_from_estimated_state(ex, self.hold[:, 0:3], self.hold[:, 3])
                a[attitude] = u[attitude]
            else:
                a[attitude] = HOVER_CONTROL
        for r, m in enumerate(self.modes):
            if m == "waypoint":
                a[r, 0:4] = np.nan_to_num(self.hold[r])
            elif m in self.low_level:
                a[r, 0:4] = self.low_level[m]
        return a


def hover(view: AutopilotView) -> Hover:
    """Factory of ``Hover``."""
    return Hover(view)


class RandomActions:
    """Independent uniform actions within each vehicle's action space (``base.mode_bounds``) every step,
    drawn from the policy's own stream ``policy.random`` (seeded by the episode seed)."""

    def __init__(self, view: AutopilotView) -> None:
        self.low, self.high = action_bounds(view.action_spec, view.area_limits_ned, view.rotor_params)
        self.rng = view.policy_rng("random")

    def __call__(self, view: AutopilotView) -> Array:
        return self.low + (self.high - self.low) * self.rng.random(self.low.shape)


def random_actions(view: AutopilotView) -> RandomActions:
    """Factory of ``RandomActions``."""
    return RandomActions(view)

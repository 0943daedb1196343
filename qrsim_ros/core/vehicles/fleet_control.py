"""Fleet control: every vehicle's controls for one tick from its mode, its target and the estimated state.

The one place where QRSim's per-vehicle control modes are dispatched (spec 1.4, 6), used by the
in-process ``Simulator`` and by the ``flight_controller`` node alike:

- ``attitude``: the target row is the control ``[pitch, roll, throttle, yaw_rate, battery]`` itself;
- ``velocity``: ``VelocityPID`` to the NED velocity target [m/s] (columns 0:3), holding the vehicle's
  heading;
- ``velocity_height``: ``VelocityHeightPID`` to the north/east velocity target [m/s] (columns 0:2) at the
  scenario's flight height ``flight_z_ned_m``, holding the heading;
- ``waypoint``: ``WaypointPID`` to the NED position [m] and heading [rad] target (columns 0:4).

One controller per mode runs over the vehicles in that mode (vectorised). Invalid vehicles fly zero
targets, as in QRSim (they are frozen by the dynamics anyway), and so does a row whose target is not
finite (no set point yet); an attitude row of an invalid vehicle, or without a finite target, is the
hover row ``pelican.HOVER_CONTROL``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.vehicles.controllers import VelocityHeightPID, VelocityPID, WaypointPID
from qrsim_ros.core.vehicles.pelican import HOVER_CONTROL

Array = NDArray[np.float64]

#: How an agent's action drives a vehicle (QRSim's three inputs and raw attitude, spec 6/7): each mode
#: with its target columns (what a command of that mode carries).
CONTROL_MODES: dict[str, tuple[str, ...]] = {
    "attitude": ("pitch_rad", "roll_rad", "throttle", "yaw_rate_rads", "battery_v"),
    "velocity": ("vn_mps", "ve_mps", "vd_mps"),
    "velocity_height": ("vn_mps", "ve_mps"),
    "waypoint": ("north_m", "east_m", "down_m", "heading_rad"),
}
#: Modes flown through a PID controller (everything but raw attitude).
CONTROLLED_MODES = ("velocity", "velocity_height", "waypoint")
#: Width of a target row (the widest mode).
TARGET_WIDTH = 5


class FleetControl:
    """The controllers of a fleet whose vehicles each have a control mode (see the module docstring).

    ``modes``: one mode per vehicle; ``flight_z_ned_m``: the height ``velocity_height`` vehicles hold.
    """

    def __init__(self, modes: Sequence[str], flight_z_ned_m: float) -> None:
        unknown = sorted(set(modes) - set(CONTROL_MODES))
        if unknown:
            raise ValueError(f"unknown control mode(s) {unknown}; one of {', '.join(CONTROL_MODES)}")
        self.modes = tuple(modes)
        self.num_vehicles = len(self.modes)
        self.flight_z_ned_m = float(flight_z_ned_m)
        self.rows = {m: np.array([i for i, mm in enumerate(self.modes) if mm == m], int)
                     for m in CONTROL_MODES}
        # per tick: the hover rows to start from, the modes that have vehicles, the flight height
        self._hover = np.tile(HOVER_CONTROL, (self.num_vehicles, 1))
        self._active = [(m, r, len(CONTROL_MODES[m])) for m, r in self.rows.items() if r.size]
        self._flight_z = np.full(self.num_vehicles, self.flight_z_ned_m)
        self._controllers = {
            "velocity": VelocityPID(max(1, len(self.rows["velocity"]))),
            "velocity_height": VelocityHeightPID(max(1, len(self.rows["velocity_height"]))),
            "waypoint": WaypointPID(max(1, len(self.rows["waypoint"]))),
        }

    @property
    def controlled(self) -> NDArray[np.int_]:
        """Indices of the vehicles flown through a controller (mode other than attitude)."""
        return np.array([i for i, m in enumerate(self.modes) if m in CONTROLLED_MODES], int)

    def reset(self) -> None:
        """Forget every controller's state (new episode)."""
        for c in self._controllers.values():
            c.reset()

    def controls(self, targets: ArrayLike, ex: ArrayLike, valid: ArrayLike, headings_rad: ArrayLike) -> Array:
        """Controls (N, 5) for this tick.

        ``targets`` (N, >=4): each vehicle's target in its mode's columns (``CONTROL_MODES``); ``ex``
        (N, 20): estimated states; ``valid`` (N,); ``headings_rad`` (N,): the heading each velocity
        controller holds.
        """
        t_all = np.asarray(targets, float)
        ex = np.asarray(ex, float)
        invalid = ~np.asarray(valid, bool)
        headings = np.asarray(headings_rad, float)
        u = self._hover.copy()
        for mode, rows, width in self._active:
            t = t_all[rows, :width]
            if mode == "attitude":
                fly = ~invalid[rows] & np.isfinite(t).all(axis=1)
                u[rows] = np.where(fly[:, None], t, u[rows])
                continue
            t = np.where(invalid[rows, None] | ~np.isfinite(t), 0.0, t)  # invalid: zero targets, as QRSim
            e = ex[rows]
            c = self._controllers[mode]
            if mode == "velocity":
                u[rows] = c.compute_from_estimated_state(e, t, headings[rows])
            elif mode == "velocity_height":
                u[rows] = c.compute_from_estimated_state(e, t, self._flight_z[rows], headings[rows])
            else:
                u[rows] = c.compute_from_estimated_state(e, t[:, 0:3], t[:, 3])
        return u

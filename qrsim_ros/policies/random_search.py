"""The random search of QRSim's search-and-rescue and plume examples (``main_searchrescue.m``).

Every 10 s (10 task steps of 1 s) each vehicle draws a new direction ``u = rand(2) - 0.5`` and flies it
at ``maxv`` = 3 m/s (``U = maxv u / |u|``), at constant height. Draws come from the policy's own stream
(``policy.random_search``, seeded by the episode seed) instead of MATLAB's global generator.

One addition (``keep_inside``, default on): the example happily flies out of the area (reward -1000);
here a vehicle whose estimated position is closer to a side of the area than ``margin_m`` and whose
direction points out of it has that direction component reflected. In waypoint mode every change draws a
waypoint uniformly in the area's central 80 % at the vehicle's current height instead.
"""

from __future__ import annotations

import numpy as np

from qrsim_ros.core.vehicles.controllers import MAX_SPEED_MPS
from qrsim_ros.core.vehicles.estimated_state import HEIGHT, NORTH_EAST
from qrsim_ros.policies.base import Array, AutopilotView, PolicyError

CHANGE_PERIOD_S = 10.0  #: the example changes direction every 10 steps of 1 s


class RandomSearch:
    """See the module docstring. ``margin_m``: distance to a side of the area below which outward
    directions are reflected (default: the distance flown in 5 s)."""

    def __init__(self, view: AutopilotView, keep_inside: bool = True, margin_m: float | None = None) -> None:
        spec = view.action_spec
        if any(m == "attitude" for m in spec["modes"]):
            raise PolicyError("random-search needs velocity, velocity_height or waypoint control, got "
                              f"{spec['modes']}")
        self.rows = np.asarray(spec["vehicles"], int)
        self.modes = list(spec["modes"])
        self.width = int(spec["width"])
        self.rng = view.policy_rng("random_search")
        self.every = max(1, round(CHANGE_PERIOD_S / view.task.dt_s))
        self.limits = np.asarray(view.area_limits_ned, float)
        self.keep_inside = keep_inside
        self.margin_m = 5.0 * MAX_SPEED_MPS if margin_m is None else float(margin_m)
        self.direction = np.zeros((len(self.rows), 2))
        self.waypoints = np.zeros((len(self.rows), 4))
        self.calls = 0

    def __call__(self, view: AutopilotView) -> Array:
        ex = view.estimated_state()[self.rows]
        if self.calls % self.every == 0:
            u = self.rng.random((len(self.rows), 2)) - 0.5
            self.direction = u / np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)
            lim = self.limits
            centre, half = (lim[0:4:2] + lim[1:4:2]) / 2, 0.4 * (lim[1:4:2] - lim[0:4:2])
            ne = centre + half * (2.0 * self.rng.random((len(self.rows), 2)) - 1.0)
            self.waypoints = np.column_stack([ne, -np.nan_to_num(ex[:, HEIGHT]), np.zeros(len(self.rows))])
        self.calls += 1
        if self.keep_inside:
            self._reflect(ex[:, NORTH_EAST])
        a = np.zeros((len(self.rows), self.width))
        for r, mode in enumerate(self.modes):
            if mode == "waypoint":
                a[r, 0:4] = self.waypoints[r]
            else:
                a[r, 0:2] = MAX_SPEED_MPS * self.direction[r]
        return a

    def _reflect(self, pos_ne: Array) -> None:
        lim = self.limits
        for axis in (0, 1):
            lo, hi = lim[2 * axis], lim[2 * axis + 1]
            p = pos_ne[:, axis]
            d = self.direction[:, axis]
            outward = ((p - lo < self.margin_m) & (d < 0)) | ((hi - p < self.margin_m) & (d > 0))
            out = np.isfinite(p) & outward
            self.direction[out, axis] = -d[out]


def random_search(view: AutopilotView) -> RandomSearch:
    """Factory of ``RandomSearch``."""
    return RandomSearch(view)


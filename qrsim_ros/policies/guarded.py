"""Any policy flown with obstacle guarding (``core.mission.guard``, AURIS section 4.2; docs/TEAMS.md).

``guarded(inner_factory)`` wraps a policy factory: every step the inner policy's set points of the
vehicles in ``velocity``, ``velocity_height`` or ``waypoint`` mode pass through an ``ObstacleGuard`` fed
with the estimated states and the scene range finders' readings (``AutopilotView.range_finder_readings``;
the scenario needs ``vehicle.sensors.range_finders`` with at least one beam besides ``down``). Other
modes (attitude, rotor-level) pass unchanged. On the command line: ``--policy guarded-NAME`` for any
built-in NAME (``guarded-search-pattern``) or ``guarded-MODULE:FUNC``; in the graph the example
autopilot's ``policy`` parameter (its ``TopicView`` reads ``uavN/range/<beam>``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from qrsim_ros.core.mission.guard import GuardParams, ObstacleGuard
from qrsim_ros.policies.base import (
    Array,
    AutopilotView,
    Policy,
    PolicyError,
    check_actions,
    check_view,
    instantiate,
)

#: Beams left out by default: the altimeter sees the ground straight below, not an obstacle on the way.
DEFAULT_EXCLUDED_BEAMS = ("down",)
#: Action columns the guard rewrites per control mode.
GUARDED_COLUMNS = {"velocity": 3, "velocity_height": 2, "waypoint": 4}


class Guarded:
    """The inner policy's set points through an ``ObstacleGuard`` (see the module docstring).

    beams: the range-finder beams the guard reads (None: every fitted beam but ``DEFAULT_EXCLUDED_BEAMS``).
    """

    def __init__(self, view: AutopilotView, inner: Policy, params: GuardParams | None = None,
                 beams: tuple[str, ...] | None = None) -> None:
        fitted = check_view(view, "a guarded policy").range_finder_beams
        if beams is None:
            beams = tuple(b for b in fitted if b not in DEFAULT_EXCLUDED_BEAMS)
        if not beams:
            raise PolicyError(f"a guarded policy needs range-finder beams besides down (scenario "
                              f"{view.scenario_name!r} fits: {', '.join(fitted) or 'none'}); add e.g. "
                              "vehicle.sensors.range_finders.front")
        self.inner = inner
        self.beams = tuple(beams)
        readings = view.range_finder_readings(self.beams)  # checks the beams exist
        spec = view.action_spec
        self.rows = np.asarray(spec["vehicles"], int)
        self.modes = list(spec["modes"])
        self.dt_s = float(view.task.dt_s)
        #: one guard (temporary goals) per guarded mode flown; each sees the other rows as inactive
        self.guards = {m: ObstacleGuard(len(self.rows), readings.directions_frd, params)
                       for m in GUARDED_COLUMNS if m in self.modes}

    def __call__(self, view: AutopilotView) -> Array:
        actions = check_actions(self.inner(view), view, "guarded policy's inner policy").copy()
        ex = view.estimated_state()[self.rows]
        r = view.range_finder_readings(self.beams).range_m[self.rows]
        for mode, guard in self.guards.items():
            width = GUARDED_COLUMNS[mode]
            sel = np.array([m == mode for m in self.modes])
            # the other rows' set points are NaN: no direction of travel, untouched
            sp = np.full((len(self.rows), width), np.nan)
            sp[sel] = actions[sel, :width]
            out = guard.waypoint(ex, r, sp, self.dt_s) if mode == "waypoint" else guard.velocity(ex, r, sp)
            actions[sel, :width] = out[sel]
        return actions


def guarded(inner_factory: Callable[[AutopilotView], Any], params: GuardParams | None = None,
            beams: tuple[str, ...] | None = None) -> Callable[[AutopilotView], Guarded]:
    """A factory of ``Guarded`` over the policies ``inner_factory`` builds (``base.instantiate``)."""

    def factory(view: AutopilotView) -> Guarded:
        return Guarded(view, instantiate(inner_factory, view), params, beams)

    return factory

"""A retrieve mission read back from a bag of the node graph (``qrsim launch retrieve --record``) into the
``MissionRun`` the single-run figures draw (``plots.mission``: ireland_2016 Figures 8-10).

One row per task step of the bag's first episode (the ``/referee/status`` stamps), vehicle 0 (``uav1``):

- the true position and validity: ``/sim/vehicle_status`` of the step's tick (``state``: NED);
- the mode and its height command (``height_command_z_ned_m``: ``MissionGuidance.height_command_z_ned_m``,
  Figure 9's dashed line, the ``zcmd_0`` of an in-process CSV): the latest ``uav1/mission/mode`` stamped at
  or before the step (before the first: idle, no command; a non-finite command, or a bag recorded before
  MissionMode carried it: no command);
- the battery voltage: the latest ``uav1/battery``; the grasper's report: ``uav1/grasper/holding``;
- the targets: the latest ``/referee/markers`` target spheres (ENU -> NED; yellow = carried, i.e.
  tethered; any other colour is drawn as resting: the markers do not tell a falling target apart);
- the sites: ``/referee/mission`` (the briefing); V_max and V_th: the guidance's thresholds of the
  scenario the recorder named (``custom_data``), NaN when it does not load here.

``load_mission_bag`` returns None for a bag without a briefing.
"""

from __future__ import annotations

import bisect
import math
from pathlib import Path
from typing import Any

import numpy as np

from qrsim_ros.core.common.frames import enu_to_ned
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED, STATE_SIZE
from qrsim_ros.core.world.targets import PHASES, RESTING, TETHERED
from qrsim_ros.plots.bagdata import (
    BagError,
    OpenBag,
    bag_directory,
    header_stamp_ns,
    marker_state,
    read_custom_data,
)
from qrsim_ros.plots.mission import MissionRun

#: The topics read (vehicle 0's are uav1's).
BRIEFING, STATUS, FLEET = "/referee/mission", "/referee/status", "/sim/vehicle_status"
MARKERS = "/referee/markers"
VEHICLE = "/uav1"
MODE, BATTERY, HOLDING = f"{VEHICLE}/mission/mode", f"{VEHICLE}/battery", f"{VEHICLE}/grasper/holding"
#: The referee's colour of a carried target (``ros.markers.CARRIED_COLOUR``: yellow), told by its channels.
_CARRIED_RGB = (0.95, 0.8, 0.1)


class _FirstEpisode:
    """(stamp [ns], value) of one topic up to its first stamp restart (the bag's first episode)."""

    def __init__(self) -> None:
        self.stamps: list[int] = []
        self.values: list[Any] = []
        self.closed = False

    def add(self, stamp_ns: int, value: Any) -> None:
        if self.closed or (self.stamps and stamp_ns < self.stamps[-1]):
            self.closed = True
            return
        self.stamps.append(stamp_ns)
        self.values.append(value)

    def at(self, stamp_ns: int, default: Any = None) -> Any:
        """The latest value stamped at or before ``stamp_ns``."""
        i = bisect.bisect_right(self.stamps, stamp_ns)
        return self.values[i - 1] if i else default


def _targets(markers: dict[tuple[str, int], Any]) -> tuple[np.ndarray, list[str]]:
    """Target centres (m, 3) NED and phases from the live target spheres, by id."""
    spheres = sorted((k[1], m) for k, m in markers.items() if k[0] == "targets")
    enu = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z] for _, m in spheres], float)
    phases = [PHASES[TETHERED] if np.allclose((m.color.r, m.color.g, m.color.b), _CARRIED_RGB, atol=0.02)
              else PHASES[RESTING] for _, m in spheres]
    return (enu_to_ned(enu) if len(enu) else np.zeros((0, 3))), phases


def _thresholds(custom: dict[str, str]) -> tuple[float, float]:
    """The guidance's V_max and V_th of the recorded scenario (NaN when it does not load here)."""
    from qrsim_ros.core.config.scenario import load_scenario

    try:
        g = load_scenario(custom.get("qrsim_ros.scenario", ""), None).retrieve.guidance
        return float(g.full_battery_v), float(g.low_battery_v)
    except Exception:  # another machine's file, or not a retrieve scenario: no threshold lines
        return float("nan"), float("nan")


def load_mission_bag(path: str | Path) -> MissionRun | None:
    """The bag's retrieve mission (module docstring); None when it has no ``/referee/mission``.
    ``BagError`` when the bag cannot be read, or has a briefing but no task steps."""
    bag_dir = bag_directory(path)
    bag = OpenBag(bag_dir)
    try:
        if not any(c.topic == BRIEFING for c in bag.connections):
            return None
        series = {t: _FirstEpisode() for t in (BRIEFING, STATUS, FLEET, MODE, BATTERY, HOLDING, MARKERS)}
        live: dict[tuple[str, int], Any] = {}
        for topic, msg in bag.messages(set(series)):
            stamp = header_stamp_ns(msg.header) if topic != MARKERS else (
                header_stamp_ns(msg.markers[0].header) if msg.markers else None)
            if topic == MARKERS:
                if stamp is None:
                    continue
                marker_state(live, msg)
                series[topic].add(stamp, _targets(live))
            elif topic == FLEET:
                state = np.asarray(msg.state, float).reshape(-1, STATE_SIZE)
                series[topic].add(stamp, (state[0, STATE_POSITION_NED].copy(), bool(msg.valid[0])))
            elif topic == MODE:
                zcmd = float(getattr(msg, "height_command_z_ned_m", math.nan))
                series[topic].add(stamp, (str(msg.mode), zcmd if math.isfinite(zcmd) else math.nan))
            elif topic == BATTERY:
                series[topic].add(stamp, float(msg.voltage))
            elif topic == HOLDING:
                series[topic].add(stamp, bool(msg.holding))
            else:
                series[topic].add(stamp, msg)
    finally:
        bag.close()
    briefing = series[BRIEFING].values[0] if series[BRIEFING].values else None
    steps = series[STATUS].stamps
    if briefing is None or not steps:
        raise BagError(f"{bag_dir}: a retrieve bag without task steps (/referee/status): nothing to plot")
    rows = [s for s in steps if series[FLEET].at(s) is not None]
    if not rows:
        raise BagError(f"{bag_dir}: a retrieve bag without {FLEET}: no vehicle path to plot")
    fleet = [series[FLEET].at(s) for s in rows]
    first_targets = series[MARKERS].values[0] if series[MARKERS].values else (np.zeros((0, 3)), [])
    targets = [series[MARKERS].at(s, first_targets) for s in rows]
    m = max(len(t[0]) for t in targets)
    targets = [t if len(t[0]) == m else first_targets for t in targets]
    site = {name: enu_to_ned(np.array([p.x, p.y, p.z]))[0:2]
            for name, p in (("landing", briefing.landing_site), ("drop", briefing.drop_site))}
    full_v, low_v = _thresholds(read_custom_data(bag_dir))
    modes = [series[MODE].at(s, ("idle", math.nan)) for s in rows]
    return MissionRun(
        path=bag_dir, t_s=np.array(rows, float) * 1e-9,
        position_ned_m=np.array([p for p, _ in fleet], float).reshape(-1, 3),
        valid=np.array([v for _, v in fleet], bool),
        modes=[m for m, _ in modes],
        zcmd_ned_m=np.array([z for _, z in modes], float),
        battery_v=np.array([series[BATTERY].at(s, float("nan")) for s in rows], float),
        holding=np.array([series[HOLDING].at(s, False) for s in rows], bool),
        targets_ned_m=np.array([t[0] for t in targets], float).reshape(len(rows), m, 3),
        target_phases=[list(t[1]) for t in targets],
        landing_ne_m=site["landing"], drop_ne_m=site["drop"],
        drop_radius_m=float(briefing.drop_radius_m), battery_full_v=full_v, battery_low_v=low_v,
    )

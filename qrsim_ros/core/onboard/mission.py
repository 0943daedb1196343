"""Mission items of the onboard autopilot, in the local NED frame of the run.

The MAVLink adapter turns MISSION_ITEM_INT (MAV_FRAME_GLOBAL_RELATIVE_ALT_INT and friends) into these
with the scenario's geodesy; here a position is north, east, down [m] of the run's NED origin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

from qrsim_ros.core.common.validation import ConfigError


class ItemKind(IntEnum):
    """What a mission item does (MAV_CMD's NAV_WAYPOINT, NAV_LOITER_TIME, NAV_TAKEOFF, NAV_LAND,
    NAV_RETURN_TO_LAUNCH, DO_CHANGE_SPEED)."""

    WAYPOINT = 0
    LOITER_TIME = 1
    TAKEOFF = 2
    LAND = 3
    RTL = 4
    CHANGE_SPEED = 5  # the horizontal speed of the items after it (no position)


#: Items whose position matters (RTL flies home; LAND and TAKEOFF may leave north/east NaN: where it is).
_NEEDS_POSITION = (ItemKind.WAYPOINT, ItemKind.LOITER_TIME)


@dataclass(frozen=True)
class MissionItem:
    """One item: ``position_ned_m`` (north, east, down) [m] (NaN components: keep the current one),
    ``hold_s`` [s] at the item once reached (LOITER_TIME's time, a waypoint's hold), ``yaw_rad`` [rad]
    (NaN: keep the heading), ``acceptance_m`` [m] (NaN: the parameter NAV_ACC_RAD), ``speed_mps`` [m/s]
    (CHANGE_SPEED's speed; NaN: back to MPC_XY_CRUISE)."""

    kind: ItemKind
    position_ned_m: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    hold_s: float = 0.0
    yaw_rad: float = math.nan
    acceptance_m: float = math.nan
    speed_mps: float = math.nan

    def __post_init__(self) -> None:
        if len(self.position_ned_m) != 3:
            raise ConfigError(f"mission item {self.kind.name}: position_ned_m needs 3 values")
        if self.kind in _NEEDS_POSITION and not all(math.isfinite(v) for v in self.position_ned_m[:2]):
            raise ConfigError(f"mission item {self.kind.name}: north and east must be finite, not "
                              f"{self.position_ned_m[:2]}")
        if not (math.isfinite(self.hold_s) and 0.0 <= self.hold_s <= 3600.0):
            raise ConfigError(f"mission item {self.kind.name}: hold_s={self.hold_s!r} must be in [0, 3600] s")
        if not (math.isnan(self.acceptance_m) or 0.0 < self.acceptance_m <= 1000.0):
            raise ConfigError(f"mission item {self.kind.name}: acceptance_m={self.acceptance_m!r} must be in "
                              "(0, 1000] m")
        if not (math.isnan(self.speed_mps) or 0.0 < self.speed_mps <= 100.0):
            raise ConfigError(f"mission item {self.kind.name}: speed_mps={self.speed_mps!r} must be in "
                              "(0, 100] m/s")
        if not (math.isnan(self.yaw_rad) or math.isfinite(self.yaw_rad)):
            raise ConfigError(f"mission item {self.kind.name}: yaw_rad={self.yaw_rad!r} must be finite "
                              "or NaN")

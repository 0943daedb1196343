"""Flight modes and landed states of the onboard autopilot (the PX4 modes a MAVLink client commands).

The values are this project's own; the MAVLink adapter maps them to PX4's custom main/sub modes and to
MAV_LANDED_STATE. ``Hold`` is PX4's AUTO.LOITER.
"""

from __future__ import annotations

from enum import IntEnum


class FlightMode(IntEnum):
    """What the autopilot flies (one per vehicle)."""

    HOLD = 0  # hold the position where the mode was entered (PX4 Hold / AUTO.LOITER)
    TAKEOFF = 1  # climb above home to the takeoff altitude, then Hold
    LAND = 2  # descend where the mode was entered; disarm once landed
    RTL = 3  # climb to the return altitude, fly home, land there
    MISSION = 4  # fly the uploaded mission items in order
    OFFBOARD = 5  # fly the external set points (stream required)


class LandedState(IntEnum):
    """Whether a vehicle is on the ground, taking off, flying or landing (MAV_LANDED_STATE's meaning)."""

    ON_GROUND = 1
    IN_AIR = 2
    TAKEOFF = 3
    LANDING = 4


#: Modes that can be commanded while disarmed (the vehicle waits in them for arming).
DISARMED_MODES = frozenset({FlightMode.HOLD, FlightMode.MISSION, FlightMode.OFFBOARD})

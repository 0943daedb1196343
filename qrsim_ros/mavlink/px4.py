"""PX4's flight-mode encoding on MAVLink: HEARTBEAT's base_mode and custom_mode, DO_SET_MODE's
parameters, and MAV_LANDED_STATE, for the onboard autopilot's ``FlightMode`` and ``LandedState``.

PX4 puts its main mode in byte 2 of custom_mode and its sub mode (of AUTO) in byte 3; pymavlink names
both (``mavutil.PX4_CUSTOM_*``).
"""

from __future__ import annotations

from pymavlink import mavutil
from pymavlink.dialects.v20 import common as mavlink

from qrsim_ros.core.onboard.modes import FlightMode, LandedState

#: FlightMode -> PX4 (main mode, sub mode).
_PX4_MODES: dict[FlightMode, tuple[int, int]] = {
    FlightMode.HOLD: (mavutil.PX4_CUSTOM_MAIN_MODE_AUTO, mavutil.PX4_CUSTOM_SUB_MODE_AUTO_LOITER),
    FlightMode.TAKEOFF: (mavutil.PX4_CUSTOM_MAIN_MODE_AUTO, mavutil.PX4_CUSTOM_SUB_MODE_AUTO_TAKEOFF),
    FlightMode.LAND: (mavutil.PX4_CUSTOM_MAIN_MODE_AUTO, mavutil.PX4_CUSTOM_SUB_MODE_AUTO_LAND),
    FlightMode.RTL: (mavutil.PX4_CUSTOM_MAIN_MODE_AUTO, mavutil.PX4_CUSTOM_SUB_MODE_AUTO_RTL),
    FlightMode.MISSION: (mavutil.PX4_CUSTOM_MAIN_MODE_AUTO, mavutil.PX4_CUSTOM_SUB_MODE_AUTO_MISSION),
    FlightMode.OFFBOARD: (mavutil.PX4_CUSTOM_MAIN_MODE_OFFBOARD, 0),
}
_BY_PX4 = {px4: mode for mode, px4 in _PX4_MODES.items()}

#: LandedState -> MAV_LANDED_STATE.
LANDED_STATES = {
    LandedState.ON_GROUND: mavlink.MAV_LANDED_STATE_ON_GROUND,
    LandedState.IN_AIR: mavlink.MAV_LANDED_STATE_IN_AIR,
    LandedState.TAKEOFF: mavlink.MAV_LANDED_STATE_TAKEOFF,
    LandedState.LANDING: mavlink.MAV_LANDED_STATE_LANDING,
}


def custom_mode(mode: FlightMode) -> int:
    """HEARTBEAT.custom_mode of ``mode``."""
    main, sub = _PX4_MODES[FlightMode(mode)]
    return (main << 16) | (sub << 24)


def base_mode(armed: bool) -> int:
    """HEARTBEAT.base_mode: custom mode on, PX4's flags for its autonomous modes, and the armed flag."""
    flags = mavlink.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED | mavutil.auto_mode_flags
    return flags | (mavlink.MAV_MODE_FLAG_SAFETY_ARMED if armed else 0)


def mode_of(main_mode: int, sub_mode: int) -> FlightMode | None:
    """The FlightMode PX4's (main, sub) mode names (DO_SET_MODE's param2, param3), None if not flown here.
    Offboard's sub mode is ignored (PX4 has only one)."""
    if main_mode == mavutil.PX4_CUSTOM_MAIN_MODE_OFFBOARD:
        return FlightMode.OFFBOARD
    return _BY_PX4.get((int(main_mode), int(sub_mode)))


def mode_name(mode: FlightMode) -> str:
    """The name PX4 tools show (pymavlink's ``interpret_px4_mode``), e.g. LOITER for Hold."""
    return str(mavutil.interpret_px4_mode(base_mode(False), custom_mode(mode)))

"""The 17 guidance modes of ireland_2016's mission state machine (section 5.1, Figure 5), numbered as there.

``MODES[n - 1]`` is mode n's name; ``mode_number(name)`` the inverse. The names are what results.csv's
``mode_path``, transitions.csv and ``uavN/mission/mode`` carry.
"""

from __future__ import annotations

MODES: tuple[str, ...] = (
    "idle",                # 1
    "take_off",            # 2
    "initialise",          # 3
    "search",              # 4
    "identify",            # 5
    "hover_above_target",  # 6
    "descend_to_grasp",    # 7
    "grasp",               # 8
    "ascend",              # 9
    "transport",           # 10
    "descend_to_drop",     # 11
    "drop",                # 12
    "return_to_search",    # 13
    "return_to_base",      # 14
    "land",                # 15
    "reacquire_target",    # 16
    "emergency_land",      # 17
)
_NUMBERS = {name: i + 1 for i, name in enumerate(MODES)}

#: Modes a low-battery warning does not interrupt (section 5.2.1: the path from Return to base to Idle).
NO_LOW_BATTERY_EXIT = ("return_to_base", "land", "emergency_land", "idle")
#: Modes an actuator fault does not interrupt (section 5.2.2).
NO_ACTUATOR_EXIT = ("emergency_land", "idle")

#: Why a mission is over (the guidance's own view; the referee scores the outcome from it and the world).
MISSION_COMPLETE = "complete"              # every target deposited, landed at base
MISSION_END_OF_PATH = "end_of_search_path"  # the last waypoint reached with targets left (section 5.1.4)
MISSION_TIME_LIMIT = "time_limit"          # T_max reached (section 5.1.4)
MISSION_SYSTEM_FAULT = "system_fault"      # the self-test failed and ``system_fault: abort``
MISSION_ACTUATOR_FAULT = "actuator_fault"  # emergency landing after a rotor loss (section 5.2.2)
MISSION_ENDS = (MISSION_COMPLETE, MISSION_END_OF_PATH, MISSION_TIME_LIMIT, MISSION_SYSTEM_FAULT,
                MISSION_ACTUATOR_FAULT)


def mode_number(name: str) -> int:
    """Mode ``name``'s number 1..17 (Figure 5); KeyError naming it if unknown."""
    try:
        return _NUMBERS[name]
    except KeyError:
        raise KeyError(f"unknown mission mode {name!r} (one of {', '.join(MODES)})") from None

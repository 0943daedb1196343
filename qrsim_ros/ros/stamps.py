"""Message stamps: the one tick <-> stamp pair of the ROS boundary (built on ``core.common.ticks``).

Every message of the simulator is stamped with the simulated time of the tick it belongs to,
``t_k = k * 0.02 s``, as exact integer nanoseconds; a node reading a stamp gets its tick back, or None
when the stamp is off the tick grid (a message that does not come from the simulator's clock).
"""

from __future__ import annotations

from typing import Any

from builtin_interfaces.msg import Time

from qrsim_ros.core.common.ticks import tick_ns, tick_of_ns

NS_PER_S = 1_000_000_000


def stamp_from_tick(tick: int) -> Time:
    """builtin_interfaces/Time of tick ``tick`` (t_k = k * 0.02 s), exact."""
    return stamp_from_ns(tick_ns(tick))


def stamp_from_ns(ns: int) -> Time:
    """builtin_interfaces/Time of a simulated time in integer nanoseconds (on the tick grid or not: a
    lidar sweep's first ray), exact."""
    ns = int(ns)
    return Time(sec=ns // NS_PER_S, nanosec=ns % NS_PER_S)


def tick_of_stamp(stamp: Any) -> int | None:
    """The tick a stamp belongs to, or None when it is not an exact multiple of 0.02 s (or negative)."""
    return tick_of_ns(stamp_ns(stamp))


def stamp_ns(stamp: Any) -> int:
    """A builtin_interfaces/Time as integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def stamp_from_seconds(t_s: float) -> Time:
    """builtin_interfaces/Time of a time in seconds that need not be on the tick grid (diagnostics)."""
    ns = round(t_s * NS_PER_S)
    return Time(sec=ns // NS_PER_S, nanosec=ns % NS_PER_S)


def seconds_of_stamp(stamp: Any) -> float:
    """A builtin_interfaces/Time in seconds (float)."""
    return stamp.sec + stamp.nanosec * 1e-9

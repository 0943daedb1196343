"""The simulator's clock (spec 1.1, 1.5): one base tick of 0.02 s, and the one conversion between a
tick number and simulated time in integer nanoseconds.

Every rate in QRSim is a whole number of ticks; components gate themselves on the tick counter k (no
floating-point modulo). Tick k is at ``t_k = k * BASE_DT_S`` seconds, exactly ``k * TICK_NS`` ns, which
is what every ROS stamp carries (``qrsim_ros.ros.stamps``).
"""

from __future__ import annotations

#: The base tick [s].
BASE_DT_S = 0.02
#: The base tick [ns] (integer: stamps built from it are exact at any simulated time).
TICK_NS = 20_000_000


def tick_ns(tick: int) -> int:
    """Simulated time of tick ``tick`` in integer nanoseconds."""
    return int(tick) * TICK_NS


def tick_of_ns(ns: int) -> int | None:
    """The tick whose time is exactly ``ns`` nanoseconds, or None when ``ns`` is off the tick grid or
    negative."""
    k, rest = divmod(int(ns), TICK_NS)
    return k if rest == 0 and k >= 0 else None

"""The air velocity as vehicle_dynamics takes it: ``uavN/wind`` from wind_field, checked and held.

``uavN/wind`` (geometry_msgs/Vector3Stamped, ``map``, ENU air velocity) stamped t_k is the air velocity
for the step t_k -> t_k+1 (vehicle_dynamics rotates it into the body frame with the exact state).
Non-finite or not in ``map``: rejected (counted, a throttled warning), the held wind stays. In lockstep
only the wind of the current tick is taken, and a second, different wind for the same tick (a second
wind_field in the domain) is counted and ignored; free running, the latest wind is held.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from geometry_msgs.msg import Vector3Stamped

from qrsim_ros.core.common.frames import enu_to_ned
from qrsim_ros.core.common.ticks import TICK_NS
from qrsim_ros.ros.names import MAP_FRAME
from qrsim_ros.ros.node import Warn
from qrsim_ros.ros.stamps import stamp_ns


class WindIntake:
    """The held air velocity of N vehicles (NED [m/s]) and the tick each was stamped with."""

    def __init__(self, names: Sequence[str], lockstep: bool, warn: Warn) -> None:
        n = len(names)
        self.names = list(names)
        self.lockstep = lockstep
        self._warn = warn
        self.wind_ned = np.zeros((n, 3))
        self.tick = np.full(n, -1, np.int64)  # the tick of the held wind; -1: none this episode
        self._received_enu = np.full((n, 3), np.nan)  # the held wind as received (lockstep repeats)
        self.wind_rejected = np.zeros(n, np.int64)  # since start

    def restart_episode(self) -> None:
        """A new episode: no wind of its ticks yet (the held values stay until one comes)."""
        self.tick[:] = -1

    def receive(self, i: int, msg: Vector3Stamped, k: int) -> bool:
        """Take vehicle ``i``'s wind at the tick ``k``; True when it is lockstep's awaited wind of t_k
        (arrived, even if rejected: the held one then stands for it)."""
        v = msg.vector
        w: np.ndarray | None = np.array([v.x, v.y, v.z], float)
        if msg.header.frame_id.lstrip("/") != MAP_FRAME or not np.all(np.isfinite(w)):
            self.wind_rejected[i] += 1
            self._warn(f"wind{i}", f"{self.names[i]}/wind rejected: frame_id {msg.header.frame_id!r} "
                                   f"(must be {MAP_FRAME!r}), vector {w.tolist()} "
                                   f"({self.wind_rejected[i]} so far)")
            w = None
        t_ns = stamp_ns(msg.header.stamp)
        tick, rest = divmod(t_ns, TICK_NS)
        if not self.lockstep:
            if w is not None and tick >= self.tick[i]:
                self.wind_ned[i] = enu_to_ned(w)
                self.tick[i] = tick
            return False
        if tick == self.tick[i] and not rest:
            if w is not None and not np.array_equal(w, self._received_enu[i]):  # not a plain repeat
                self.wind_rejected[i] += 1
                self._warn(f"wind2{i}", f"{self.names[i]}/wind: two different winds stamped "
                                        f"{t_ns * 1e-9:.2f} s (is a second wind_field running in this "
                                        "ROS domain?); the first is kept")
            return False
        if rest or tick != k:
            return False  # an older tick (or from before a reset): already used
        if w is not None:
            self.wind_ned[i] = enu_to_ned(w)
            self._received_enu[i] = w
        self.tick[i] = tick
        return True

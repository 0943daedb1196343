"""The air velocity as vehicle_dynamics takes it: from wind_field, checked and held.

wind_field sends every vehicle's in one ``/sim/fleet/wind`` (qrsim_ros/FleetSamples, ``fleet_topics``) per
tick; each row is taken as that vehicle's ``uavN/wind`` would be (``receive_fleet``, ``receive``).

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
        w = np.array([v.x, v.y, v.z], float)
        frame = msg.header.frame_id
        ok = frame.lstrip("/") == MAP_FRAME
        return self._take(i, w, ok, stamp_ns(msg.header.stamp), k,
                          f"frame_id {frame!r} (must be {MAP_FRAME!r}), vector")

    def receive_fleet(self, vehicles: np.ndarray, winds_enu: np.ndarray, t_ns: int, k: int) -> bool:
        """Take the rows of a /sim/fleet/wind message (``fleet_topics.read_samples``: vehicles (M,), map
        ENU air velocities (M, 3)) stamped ``t_ns`` at the tick ``k``, each as a ``uavN/wind``; True when
        one of them is lockstep's awaited wind of t_k."""
        awaited = False
        for i, w in zip(vehicles.tolist(), winds_enu, strict=True):
            awaited |= self._take(i, w, True, t_ns, k, "vector")
        return awaited

    def _take(self, i: int, w: np.ndarray, frame_ok: bool, t_ns: int, k: int, what: str) -> bool:
        """Vehicle ``i``'s wind ``w`` (ENU) stamped ``t_ns`` (rejected, counted and warned if not
        ``frame_ok`` or not finite; ``what`` names the rejected values)."""
        held: np.ndarray | None = w
        if not frame_ok or not np.all(np.isfinite(w)):
            self.wind_rejected[i] += 1
            self._warn(f"wind{i}", f"{self.names[i]}/wind rejected: {what} {w.tolist()} "
                                   f"({self.wind_rejected[i]} so far)")
            held = None
        tick, rest = divmod(t_ns, TICK_NS)
        if not self.lockstep:
            if held is not None and tick >= self.tick[i]:
                self.wind_ned[i] = enu_to_ned(held)
                self.tick[i] = tick
            return False
        if tick == self.tick[i] and not rest:
            if held is not None and not np.array_equal(held, self._received_enu[i]):  # not a plain repeat
                self.wind_rejected[i] += 1
                self._warn(f"wind2{i}", f"{self.names[i]}/wind: two different winds stamped "
                                        f"{t_ns * 1e-9:.2f} s (is a second wind_field running in this "
                                        "ROS domain?); the first is kept")
            return False
        if rest or tick != k:
            return False  # an older tick (or from before a reset): already used
        if held is not None:
            self.wind_ned[i] = enu_to_ned(held)
            self._received_enu[i] = held
        self.tick[i] = tick
        return True

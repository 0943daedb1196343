"""The estimated state eX (N, 20) (spec 2.1) assembled from the public sensor topics.

This is the ROS side of ``Simulator._assemble_estimated_state``: the same 20 columns, written through
the same layout (``core.vehicles.estimated_state``), filled from the messages an autopilot may read
(never the ground truth):

======  =========================================  =====================================================
eX      Simulator source                           message
======  =========================================  =====================================================
0:3     ``gps.position_ned``                       ``gps/fix`` NavSatFix -> ``geodesy.lla_to_ned(origin)``
3:6     ``ahars.orientation`` (ZYX, NED/FRD)       ``imu/data`` orientation (FLU in ENU) -> Euler NED/FRD
6:9     0                                          --
9:12    ``ahars.angular_velocity`` (FRD)           ``imu/data`` angular_velocity (FLU) -> FRD
12      0                                          --
13:16   ``ahars.acceleration`` (FRD specific f.)   ``imu/data`` linear_acceleration (FLU) -> FRD
16      ``ahars.height_m``                         ``altimeter`` height
17:19   ``gps.velocity_ned[:, 0:2]``               ``gps/vel`` twist.linear (ENU) -> north, east
19      ``ahars.vertical_speed_mps``               ``altimeter`` vertical_speed
======  =========================================  =====================================================

Rows of invalid vehicles are NaN (``estimated_state(valid)``), as in the Simulator.

Round trips (measured, see test_node_control): the GPS position goes NED -> WGS-84 (gps node) -> NED
here through the UTM projection: the residual is below 5e-9 m (3e-9 m typical in north) over a
600 m x 600 m area, i.e. the ROS graph's eX differs from the Simulator's by that much; the attitude goes
Euler -> quaternion -> Euler with a residual of a few 1e-16 rad, and the yaw comes back wrapped to
(-pi, pi] (the core leaves it unwrapped; the controllers only use its sine, cosine and wrapped
differences, so their output does not change).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partialmethod
from typing import Any

import numpy as np
from geometry_msgs.msg import TwistStamped
from numpy.typing import ArrayLike, NDArray
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Imu, NavSatFix

from qrsim_ros.core.common.frames import enu_to_ned, flu_to_frd, quaternion_enu_flu_to_euler_ned_frd
from qrsim_ros.core.common.geodesy import GeodeticOrigin, lla_to_ned
from qrsim_ros.core.vehicles.estimated_state import empty_estimated_state, fill_estimated_state
from qrsim_ros.msg import Altitude

Array = NDArray[np.float64]

#: The message type of each kind of input (``set_*`` may be given them serialized).
MESSAGE_TYPES: dict[str, Any] = {"imu": Imu, "fix": NavSatFix, "vel": TwistStamped, "alt": Altitude}


def _rows(pairs: Sequence[tuple[int, Any]]) -> NDArray[np.intp]:
    return np.fromiter((i for i, _ in pairs), np.intp, len(pairs))


class EstimatedStateAssembler:
    """Holds the latest sensor values of N vehicles and assembles eX (N, 20) like the Simulator.

    ``set_*`` take the vehicle index and one ROS message, or its serialized bytes (a raw subscription),
    and keep it until eX is read; only the latest message of each sensor and vehicle is then converted,
    all of a kind in one ``update`` call (an autopilot that reads eX at 5 Hz does not pay for converting
    50 Hz IMU messages one by one). ``update`` converts the messages it is given right away. Either way a
    value is held until the next message of that sensor (sample-and-hold, as the core sensors). ``has_*``
    tell whether a vehicle has reported that sensor since ``clear``.
    """

    def __init__(self, num_vehicles: int, origin: GeodeticOrigin) -> None:
        self.num_vehicles = int(num_vehicles)
        self.origin = origin
        self._ex = empty_estimated_state(self.num_vehicles)
        self.clear()
        # The first conversion imports scipy's rotations and builds the UTM projection (0.3-1 s): done now,
        # at the node's start, not on the first tick of a clock that may not wait (free-running).
        quaternion_enu_flu_to_euler_ned_frd(np.array([[0.0, 0.0, 0.0, 1.0]]))
        lla_to_ned(np.array([[origin.lat_deg, origin.lon_deg, origin.alt_m]]), origin)

    def clear(self) -> None:
        """Forget every value (new episode): NaN until the sensors report again."""
        self._ex[:] = empty_estimated_state(self.num_vehicles)
        n = self.num_vehicles
        #: the latest message per kind and vehicle not converted yet (set_*; converted by _flush)
        self._unconverted: dict[str, dict[int, Any]] = {"imu": {}, "fix": {}, "vel": {}, "alt": {}}
        self.has_imu = np.zeros(n, bool)
        self.has_gps_fix = np.zeros(n, bool)
        self.has_gps_vel = np.zeros(n, bool)
        self.has_altitude = np.zeros(n, bool)
        #: the receivers' fix status as the fleet GPS message last said (True until told otherwise)
        self.gps_fix = np.ones(n, bool)
        self._reported = {"imu": self.has_imu, "fix": self.has_gps_fix, "vel": self.has_gps_vel,
                          "alt": self.has_altitude}

    # --- messages ---------------------------------------------------------------------------------
    def _keep(self, kind: str, i: int, msg: Any) -> None:
        """Keep the latest message of ``kind`` (``MESSAGE_TYPES``) of vehicle ``i``, or its serialized bytes,
        until eX is read; the vehicle has reported that sensor from now on."""
        self._unconverted[kind][i] = msg
        self._reported[kind][i] = True

    #: sensor_msgs/Imu: orientation (FLU in ENU), angular velocity and specific force (FLU).
    set_imu = partialmethod(_keep, "imu")
    #: sensor_msgs/NavSatFix: WGS-84 latitude, longitude, ellipsoidal altitude -> QRSim NED.
    set_gps_fix = partialmethod(_keep, "fix")
    #: geometry_msgs/TwistStamped: GPS ground velocity in ``map`` (ENU) -> north, east.
    set_gps_velocity = partialmethod(_keep, "vel")
    #: qrsim_ros/Altitude: height above ground [m, up] and vertical speed [m/s, up].
    set_altitude = partialmethod(_keep, "alt")

    def _flush(self) -> None:
        """Convert the messages ``set_*`` kept (the latest of each sensor and vehicle); serialized ones
        (``bytes``, from a raw subscription) are deserialized first, only these."""
        pending = self._unconverted
        if any(pending.values()):
            batches = {kind: [(i, deserialize_message(m, MESSAGE_TYPES[kind]) if isinstance(m, bytes) else m)
                              for i, m in msgs.items()] for kind, msgs in pending.items()}
            for msgs in pending.values():
                msgs.clear()
            self.update(**batches)

    def update(self, imu: Sequence[tuple[int, Any]] = (), fix: Sequence[tuple[int, Any]] = (),
               vel: Sequence[tuple[int, Any]] = (), alt: Sequence[tuple[int, Any]] = ()) -> None:
        """Take (vehicle index, message) pairs of each kind, converted together (one rotation and one
        projection call for the whole fleet: the per-message cost of scipy/pyproj dominates otherwise).

        A NavSatFix whose latitude/longitude are not finite or out of range (no solution yet: the core
        receiver reports NaN before its first fix) gives a NaN position. The fix status is not read:
        without a fix the receiver repeats its last solution, which is what the Simulator's eX holds.
        """
        for kind, given in (("imu", imu), ("fix", fix), ("vel", vel), ("alt", alt)):
            kept = self._unconverted[kind]
            for i, _ in given if kept else ():  # messages set_* kept are older than these: forget them
                kept.pop(i, None)
        if imu:
            self._fill_imu(_rows(imu), np.array(
                [[m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w, m.angular_velocity.x,
                  m.angular_velocity.y, m.angular_velocity.z, m.linear_acceleration.x,
                  m.linear_acceleration.y, m.linear_acceleration.z] for _, m in imu], float))
        if fix:
            lla = np.array([[m.latitude, m.longitude, m.altitude] for _, m in fix], float)
            self._fill_fix(_rows(fix), lla)
        if vel:
            self._fill_vel(_rows(vel), np.array([[m.twist.linear.x, m.twist.linear.y, m.twist.linear.z]
                                                 for _, m in vel], float))
        if alt:
            self._fill_alt(_rows(alt), np.array([[m.height, m.vertical_speed] for _, m in alt], float))

    def update_fleet(self, kind: str, vehicles: NDArray[np.intp], values: Array) -> None:
        """Take one fleet message's rows (``ros.fleet_topics``: ``read_samples``) of ``kind``: "imu"
        (IMU_COLUMNS), "gps" (GPS_COLUMNS: the fix and the velocity), "alt" (ALTIMETER_COLUMNS). The
        values are those of the per-vehicle messages, converted by the same code (the same eX)."""
        kept = self._unconverted
        for sub in ("fix", "vel") if kind == "gps" else (kind,):
            for i in vehicles.tolist() if kept[sub] else ():
                kept[sub].pop(i, None)
        if not vehicles.size:
            return
        if kind == "imu":
            self._fill_imu(vehicles, values)
        elif kind == "gps":
            self._fill_fix(vehicles, values[:, 0:3])
            self._fill_vel(vehicles, values[:, 4:7])
            self.gps_fix[vehicles] = values[:, 3] != 0.0
        else:
            self._fill_alt(vehicles, values)

    def _fill_imu(self, rows: NDArray[np.intp], values: Array) -> None:
        """``imu/data``'s values (M, 10): orientation quaternion x y z w (FLU in ENU), angular velocity
        and specific force (FLU)."""
        fill_estimated_state(self._ex, rows, euler=quaternion_enu_flu_to_euler_ned_frd(values[:, 0:4]),
                             angular_velocity_frd=flu_to_frd(values[:, 4:7]),
                             specific_force_frd=flu_to_frd(values[:, 7:10]))
        self.has_imu[rows] = True

    def _fill_fix(self, rows: NDArray[np.intp], lla: Array) -> None:
        """``gps/fix``'s latitude, longitude [deg], altitude [m] (M, 3)."""
        ok = np.all(np.isfinite(lla), axis=1) & (np.abs(lla[:, 0]) <= 90.0) & (np.abs(lla[:, 1]) <= 180.0)
        ned = np.full((len(rows), 3), np.nan)
        if ok.any():
            ned[ok] = lla_to_ned(lla[ok], self.origin).reshape(-1, 3)
        fill_estimated_state(self._ex, rows, position_ned=ned)
        self.has_gps_fix[rows] = True

    def _fill_vel(self, rows: NDArray[np.intp], v_enu: Array) -> None:
        """``gps/vel``'s ground velocity, map ENU [m/s] (M, 3)."""
        fill_estimated_state(self._ex, rows, ground_velocity_ne=enu_to_ned(v_enu)[:, 0:2])
        self.has_gps_vel[rows] = True

    def _fill_alt(self, rows: NDArray[np.intp], values: Array) -> None:
        """``altimeter``'s height [m, up] and vertical speed [m/s, up] (M, 2)."""
        fill_estimated_state(self._ex, rows, height_m=values[:, 0], vertical_speed_mps=values[:, 1])
        self.has_altitude[rows] = True

    # --- output -------------------------------------------------------------------------------------
    def estimated_state(self, valid: ArrayLike | None = None) -> Array:
        """eX (N, 20) (a copy); rows of vehicles that are not ``valid`` (N,) are NaN."""
        self._flush()
        ex = self._ex.copy()
        if valid is not None:
            ex[~np.asarray(valid, bool)] = np.nan
        return ex

"""Ground truth at the ROS boundary: core states (NED world, FRD body) <-> messages (map ENU, base_link FLU).

The core keeps QRSim's state ``X`` (N, 13) = [px py pz (NED, m)  phi theta psi (ZYX, rad)  u v w (FRD,
m/s)  p q r (FRD, rad/s)  thrust (N)]. The nodes publish it as

- ``nav_msgs/Odometry`` ``map`` -> ``uavN/base_link``: pose = position in ENU and the attitude of the
  FLU body in ENU (quaternion x, y, z, w); twist in the *child* frame (nav_msgs convention, REP-105):
  body FLU linear velocity and body FLU rates. Covariances are zero (ground truth).
- ``geometry_msgs/AccelStamped`` in ``uavN/base_link``: the body specific force in FLU (REP-145: +9.81
  on z at rest), i.e. QRSim's ``a`` (``PelicanFleet.accel_body``, FRD) with y and z negated; the
  angular part is zero (the core does not expose the angular acceleration).
- ``geometry_msgs/TransformStamped`` ``map`` -> ``uavN/base_link`` for /tf, and the static frames.

Every rotation comes from ``qrsim_ros.core.common.frames`` (ENU/NED and FLU/FRD axis maps,
Euler -> quaternion).
The way back is ``sensor_messages.state_from_odometry`` / ``specific_force_from_accel`` (wrapped here;
quaternion -> Euler by ``estimated_state.quaternion_enu_flu_to_euler_ned_frd``). Stamps are built
from the integer tick (``stamp_from_tick``), exact at any simulated time.

Round trip X -> Odometry -> X: position, body velocity and rates are exact (axis permutations and sign
flips); the Euler angles come back within a few 1e-16 rad, with psi wrapped to (-pi, pi].
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import AccelStamped, TransformStamped
from nav_msgs.msg import Odometry
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import (
    dcm_ned_to_body,
    euler_ned_frd_to_quaternion_enu_flu,
    frd_to_flu,
    ned_to_enu,
    rotation_matrix_to_quaternion,
)
from qrsim_ros.core.common.validation import BASE_DT_S
from qrsim_ros.nodes.common import (
    MAP_FRAME,
    MAP_NED_FRAME,
    base_link_frame,
    base_link_frd_frame,
    vehicle_namespace,
)

__all__ = [
    "TICK_NS",
    "accel_message",
    "camera_optical_frame",
    "fill_accel",
    "fill_ground_truth",
    "fill_odometry",
    "fill_transform",
    "fleet_arrays",
    "float64_array",
    "odometry_from_state",
    "odometry_message",
    "quaternions_enu_flu",
    "specific_force_from_accel",
    "stamp_from_tick",
    "stamp_ns",
    "state_from_odometry",
    "static_transforms",
    "tick_of_stamp",
    "transform",
]

Array = NDArray[np.float64]

#: Nanoseconds per base tick (0.02 s).
TICK_NS = round(BASE_DT_S * 1e9)


def camera_optical_frame(index: int) -> str:
    """Frame of vehicle ``index``'s camera (REP-103 optical: z along the optical axis, x right, y down)."""
    return f"{vehicle_namespace(index)}/camera_optical"


# --- fleet arrays (VehicleStatus.state / .specific_force) -------------------------------------------

def float64_array(values: ArrayLike) -> array.array:
    """A float64[] message field from any array, row-major (assigning ``array('d')`` skips rclpy's
    per-element type check)."""
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return out


def fleet_arrays(msg: Any, num_vehicles: int) -> tuple[Array, Array] | str:
    """(state (N, 13), specific force (N, 3)) from a qrsim_ros/VehicleStatus's ``state`` and
    ``specific_force`` (core layout: NED/FRD, see VehicleStatus.msg), or the reason they are unusable."""
    n = int(num_vehicles)
    if len(msg.state) != 13 * n or len(msg.specific_force) != 3 * n:
        return (f"carries {len(msg.state)} state and {len(msg.specific_force)} specific-force values, "
                f"not {13 * n} and {3 * n} for {n} vehicles")
    x = np.frombuffer(msg.state, dtype=np.float64).reshape(n, 13).copy()
    a = np.frombuffer(msg.specific_force, dtype=np.float64).reshape(n, 3).copy()
    return x, a


# --- stamps ---------------------------------------------------------------------------------------

def stamp_from_tick(tick: int) -> Time:
    """builtin_interfaces/Time of tick ``tick`` (t_k = k * 0.02 s), exact (integer nanoseconds)."""
    ns = int(tick) * TICK_NS
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def stamp_ns(stamp: Any) -> int:
    """A builtin_interfaces/Time as integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def tick_of_stamp(stamp: Any) -> int | None:
    """The tick a stamp belongs to, or None when it is not an exact multiple of 0.02 s."""
    k, rest = divmod(stamp_ns(stamp), TICK_NS)
    return k if rest == 0 else None


# --- the way back (one implementation, in sensor_messages; imported when first used) ---------------

def state_from_odometry(msg: Odometry) -> Array:
    """Core state row (13,) from an Odometry (``sensor_messages.state_from_odometry``): NED position,
    ZYX Euler angles (psi in (-pi, pi]), FRD body velocity and rates, thrust 0 (not carried)."""
    from qrsim_ros.nodes.sensor_messages import state_from_odometry as convert

    return convert(msg)


def specific_force_from_accel(msg: AccelStamped) -> Array:
    """QRSim's ``a`` (3,) (body FRD specific force [m/s^2]) from a ground_truth/accel message
    (``sensor_messages.specific_force_from_accel``)."""
    from qrsim_ros.nodes.sensor_messages import specific_force_from_accel as convert

    return convert(msg)


# --- attitude ---------------------------------------------------------------------------------------

def quaternions_enu_flu(x: ArrayLike) -> Array:
    """Quaternions (N, 4) (x, y, z, w) of the FLU bodies in ENU for states (N, >=6); NaN rows for
    non-finite attitudes (a vehicle frozen in a diverged state)."""
    x = np.atleast_2d(np.asarray(x, float))
    q = np.full((x.shape[0], 4), np.nan)
    ok = np.all(np.isfinite(x[:, 3:6]), axis=1)
    if ok.any():
        q[ok] = euler_ned_frd_to_quaternion_enu_flu(x[ok, 3], x[ok, 4], x[ok, 5])
    return q


# --- odometry -----------------------------------------------------------------------------------------

def odometry_message(index: int) -> Odometry:
    """An Odometry with vehicle ``index``'s frame ids, to be filled by ``fill_odometry`` every tick."""
    msg = Odometry()
    msg.header.frame_id = MAP_FRAME
    msg.child_frame_id = base_link_frame(index)
    return msg


def fill_odometry(msg: Odometry, x: ArrayLike, q_xyzw: ArrayLike, stamp: Time) -> Odometry:
    """Fill ``msg`` from one true state x (13,) (NED/FRD) and its quaternion (4,) (``quaternions_enu_flu``).

    Pose: ENU position, FLU-in-ENU attitude. Twist (child frame base_link): FLU body velocity and rates.
    """
    x = np.asarray(x, float)
    p = ned_to_enu(x[0:3])
    v = frd_to_flu(x[6:9])
    w = frd_to_flu(x[9:12])
    msg.header.stamp = stamp
    pose = msg.pose.pose
    pose.position.x, pose.position.y, pose.position.z = float(p[0]), float(p[1]), float(p[2])
    o = pose.orientation
    o.x, o.y, o.z, o.w = (float(c) for c in q_xyzw)
    t = msg.twist.twist
    t.linear.x, t.linear.y, t.linear.z = float(v[0]), float(v[1]), float(v[2])
    t.angular.x, t.angular.y, t.angular.z = float(w[0]), float(w[1]), float(w[2])
    return msg


def fill_ground_truth(odom: Sequence[Odometry], accel: Sequence[AccelStamped],
                      transforms: Sequence[TransformStamped] | None, x: ArrayLike, a_frd: ArrayLike,
                      stamp: Time) -> None:
    """Fill one tick's messages of every vehicle from the true states x (N, 13) and the specific forces
    a (N, 3) (FRD): ``fill_odometry``, ``fill_accel`` and ``fill_transform`` with the conversions done
    once for the whole fleet. ``transforms``: the map -> base_link transforms, or None."""
    x = np.atleast_2d(np.asarray(x, float))
    q = quaternions_enu_flu(x).tolist()
    p = ned_to_enu(x[:, 0:3]).tolist()
    v = frd_to_flu(x[:, 6:9]).tolist()
    w = frd_to_flu(x[:, 9:12]).tolist()
    f = frd_to_flu(np.asarray(a_frd, float)).tolist()
    for i, m in enumerate(odom):
        m.header.stamp = stamp
        pose = m.pose.pose
        pose.position.x, pose.position.y, pose.position.z = p[i]
        o = pose.orientation
        o.x, o.y, o.z, o.w = q[i]
        t = m.twist.twist
        t.linear.x, t.linear.y, t.linear.z = v[i]
        t.angular.x, t.angular.y, t.angular.z = w[i]
        am = accel[i]
        am.header.stamp = stamp
        lin = am.accel.linear
        lin.x, lin.y, lin.z = f[i]
        if transforms is not None:
            tf = transforms[i]
            tf.header.stamp = stamp
            tr = tf.transform.translation
            tr.x, tr.y, tr.z = p[i]
            r = tf.transform.rotation
            r.x, r.y, r.z, r.w = q[i]


def odometry_from_state(index: int, x: ArrayLike, stamp: Time) -> Odometry:
    """nav_msgs/Odometry of vehicle ``index`` from its true state x (13,) (see the module doc)."""
    x = np.asarray(x, float)
    return fill_odometry(odometry_message(index), x, quaternions_enu_flu(x[None, :])[0], stamp)


# --- specific force -------------------------------------------------------------------------------------

def accel_message(index: int) -> AccelStamped:
    """An AccelStamped in vehicle ``index``'s base_link, to be filled by ``fill_accel``."""
    msg = AccelStamped()
    msg.header.frame_id = base_link_frame(index)
    return msg


def fill_accel(msg: AccelStamped, a_frd: ArrayLike, stamp: Time) -> AccelStamped:
    """Fill ``msg`` with the body specific force a (3,) FRD [m/s^2] (QRSim's ``a``), converted to FLU."""
    f = frd_to_flu(np.asarray(a_frd, float))
    msg.header.stamp = stamp
    lin = msg.accel.linear
    lin.x, lin.y, lin.z = float(f[0]), float(f[1]), float(f[2])
    return msg


# --- transforms ------------------------------------------------------------------------------------------

def transform(parent: str, child: str, translation: ArrayLike, q_xyzw: ArrayLike, stamp: Time
              ) -> TransformStamped:
    """A TransformStamped parent -> child: the child's origin and attitude expressed in the parent."""
    t = TransformStamped()
    t.header.frame_id = parent
    t.header.stamp = stamp
    t.child_frame_id = child
    tr = t.transform.translation
    tr.x, tr.y, tr.z = (float(c) for c in np.asarray(translation, float))
    r = t.transform.rotation
    r.x, r.y, r.z, r.w = (float(c) for c in np.asarray(q_xyzw, float))
    return t


def fill_transform(t: TransformStamped, x: ArrayLike, q_xyzw: ArrayLike, stamp: Time) -> TransformStamped:
    """Fill a ``map`` -> ``uavN/base_link`` transform from a true state x (13,) and its quaternion."""
    p = ned_to_enu(np.asarray(x, float)[0:3])
    t.header.stamp = stamp
    tr = t.transform.translation
    tr.x, tr.y, tr.z = float(p[0]), float(p[1]), float(p[2])
    r = t.transform.rotation
    r.x, r.y, r.z, r.w = (float(c) for c in q_xyzw)
    return t


#: ENU <-> NED and FLU <-> FRD axis maps as rotation matrices (both proper rotations, each its own inverse):
#: the columns of _R_ENU_NED are the NED axes in ENU, those of _R_FLU_FRD the FRD axes in FLU.
_R_ENU_NED = np.stack([ned_to_enu(e) for e in np.eye(3)], axis=1)
_R_FLU_FRD = np.stack([frd_to_flu(e) for e in np.eye(3)], axis=1)


def static_transforms(num_vehicles: int, camera_r_body_rad: ArrayLike, stamp: Time) -> list[TransformStamped]:
    """/tf_static: ``map`` -> ``map_ned``; per vehicle ``base_link`` -> ``base_link_frd`` and
    ``base_link`` -> ``camera_optical``.

    The camera is mounted with QRSim's Euler angles r (``camera_geometry.camera_rotation``: body FRD ->
    camera, optical axis camera z, image u along camera x and v along camera y, i.e. the REP-103
    optical convention); the camera's axes in FLU are ``R_flu_frd @ R_cb^T``.
    """
    r = np.asarray(camera_r_body_rad, float)
    r_cb = dcm_ned_to_body(r[0], r[1], r[2])  # body FRD -> camera, as camera_geometry.camera_rotation
    q_map_ned = rotation_matrix_to_quaternion(_R_ENU_NED)
    q_frd = rotation_matrix_to_quaternion(_R_FLU_FRD)
    q_cam = rotation_matrix_to_quaternion(_R_FLU_FRD @ r_cb.T)
    out = [transform(MAP_FRAME, MAP_NED_FRAME, np.zeros(3), q_map_ned, stamp)]
    for i in range(num_vehicles):
        out.append(transform(base_link_frame(i), base_link_frd_frame(i), np.zeros(3), q_frd, stamp))
        out.append(transform(base_link_frame(i), camera_optical_frame(i), np.zeros(3), q_cam, stamp))
    return out

"""Rotations and frame conversions: the one place for them (spec section 9).

QRSim's conventions, kept inside the core:
- world frame NED (x north, y east, z down), body frame FRD (x forward, y right, z down);
- attitude as ZYX Euler angles (phi roll, theta pitch, psi yaw) [rad];
- ``dcm_ned_to_body(phi, theta, psi) = R_x(phi) R_y(theta) R_z(psi)`` maps NED vectors to body.

ROS uses ENU (REP-103) for ``map`` and FLU for ``base_link``; the ``*_enu``/``*_flu`` helpers convert
at the node boundary. Every function is vectorised over a leading axis of vehicles.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]


def dcm_ned_to_body(phi: ArrayLike, theta: ArrayLike, psi: ArrayLike) -> Array:
    """Direction cosine matrices NED -> body FRD for ZYX Euler angles [rad].

    Returns shape ``broadcast(phi, theta, psi).shape + (3, 3)``.
    """
    phi, theta, psi = np.broadcast_arrays(
        np.asarray(phi, float), np.asarray(theta, float), np.asarray(psi, float)
    )
    sph, cph = np.sin(phi), np.cos(phi)
    sth, cth = np.sin(theta), np.cos(theta)
    sps, cps = np.sin(psi), np.cos(psi)
    d = np.empty((*phi.shape, 3, 3))
    d[..., 0, 0] = cth * cps
    d[..., 0, 1] = cth * sps
    d[..., 0, 2] = -sth
    d[..., 1, 0] = -cph * sps + sph * sth * cps
    d[..., 1, 1] = cph * cps + sph * sth * sps
    d[..., 1, 2] = sph * cth
    d[..., 2, 0] = sph * sps + cph * sth * cps
    d[..., 2, 1] = -sph * cps + cph * sth * sps
    d[..., 2, 2] = cph * cth
    return d


def dcm_from_state(x: ArrayLike) -> Array:
    """NED -> body DCMs for states of shape (N, >=6) (Euler angles in columns 3:6)."""
    x = np.asarray(x, float)
    return dcm_ned_to_body(x[..., 3], x[..., 4], x[..., 5])


def ned_to_body(dcm: Array, v_ned: ArrayLike) -> Array:
    """Rotate NED vectors (N, 3) into body frames given NED->body DCMs (N, 3, 3)."""
    return np.einsum("...ij,...j->...i", dcm, np.asarray(v_ned, float))


def body_to_ned(dcm: Array, v_body: ArrayLike) -> Array:
    """Rotate body vectors (N, 3) into NED given NED->body DCMs (N, 3, 3) (uses the transpose)."""
    return np.einsum("...ji,...j->...i", dcm, np.asarray(v_body, float))


def wrap_angle(angle: ArrayLike) -> Array:
    """Wrap angles [rad] to (-pi, pi]."""
    a = np.asarray(angle, float)
    wrapped = np.mod(a + np.pi, 2.0 * np.pi) - np.pi
    return np.where(wrapped == -np.pi, np.pi, wrapped)


# --- ROS boundary: ENU / FLU (REP-103) ----------------------------------------------------------

def interpolate_pose(x0: ArrayLike, x1: ArrayLike, fraction: ArrayLike) -> Array:
    """Poses (..., 6) [m, rad] between states x0 and x1 (..., >=6: NED position, ZYX Euler angles) at
    ``fraction`` (broadcast over the leading axes; 0: x0, 1: x1): position and angles linear, the yaw
    change wrapped to (-pi, pi]. Over one 0.02 s tick this is the pose to well below a millimetre and a
    millidegree. The lidar's rays and the cameras' frames between ticks use it."""
    a = np.asarray(x0, float)[..., :6]
    d = np.asarray(x1, float)[..., :6] - a
    d[..., 5] = wrap_angle(d[..., 5])
    return a + np.asarray(fraction, float)[..., None] * d


def ned_to_enu(v_ned: ArrayLike) -> Array:
    """NED vectors (..., 3) -> ENU vectors (..., 3). The map is its own inverse."""
    v = np.asarray(v_ned, float)
    return np.stack([v[..., 1], v[..., 0], -v[..., 2]], axis=-1)


enu_to_ned = ned_to_enu


def frd_to_flu(v_frd: ArrayLike) -> Array:
    """Body FRD vectors (..., 3) -> body FLU vectors (..., 3). The map is its own inverse."""
    v = np.asarray(v_frd, float)
    return np.stack([v[..., 0], -v[..., 1], -v[..., 2]], axis=-1)


flu_to_frd = frd_to_flu

#: The same axis maps as matrices: the columns of R_ENU_NED are the NED axes in ENU, those of R_FLU_FRD
#: the FRD axes in FLU (each matrix is its own inverse).
R_ENU_NED = np.stack([ned_to_enu(e) for e in np.eye(3)], axis=1)
R_FLU_FRD = np.stack([frd_to_flu(e) for e in np.eye(3)], axis=1)


#: Quaternions (x, y, z, w) of the fixed frame changes: ENU <- NED is a half turn about (x + y)/sqrt 2,
#: FRD <- FLU a half turn about x.
_Q_ENU_NED = np.array([np.sqrt(0.5), np.sqrt(0.5), 0.0, 0.0])
_Q_FRD_FLU = np.array([1.0, 0.0, 0.0, 0.0])


def quaternion_multiply(a: ArrayLike, b: ArrayLike) -> Array:
    """Hamilton products a * b of quaternions (..., 4) ordered (x, y, z, w) (rotation b, then a)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    ax, ay, az, aw = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bx, by, bz, bw = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz], axis=-1)


def euler_to_quaternion(phi: ArrayLike, theta: ArrayLike, psi: ArrayLike) -> Array:
    """Attitude of the FRD body in the NED world as quaternions (x, y, z, w) from ZYX Euler angles [rad]
    (the quaternion of ``dcm_ned_to_body(...).T``; closed form, half angles; MAVLink's attitude)."""
    phi, theta, psi = np.broadcast_arrays(
        np.asarray(phi, float), np.asarray(theta, float), np.asarray(psi, float)
    )
    c1, s1 = np.cos(phi / 2), np.sin(phi / 2)
    c2, s2 = np.cos(theta / 2), np.sin(theta / 2)
    c3, s3 = np.cos(psi / 2), np.sin(psi / 2)
    return np.stack([s1 * c2 * c3 - c1 * s2 * s3,
                     c1 * s2 * c3 + s1 * c2 * s3,
                     c1 * c2 * s3 - s1 * s2 * c3,
                     c1 * c2 * c3 + s1 * s2 * s3], axis=-1)


def quaternion_to_euler(q_xyzw: ArrayLike) -> Array:
    """ZYX Euler angles ``[phi, theta, psi]`` (..., 3) [rad] of the FRD body in the NED world from its
    attitude quaternions (..., 4) ``(x, y, z, w)`` (MAVLink's attitude; the inverse of
    ``euler_to_quaternion``). Quaternions need not be unit; a zero or non-finite one gives NaN angles."""
    q_enu_flu = quaternion_multiply(quaternion_multiply(_Q_ENU_NED, q_xyzw), _Q_FRD_FLU)
    return quaternion_enu_flu_to_euler_ned_frd(q_enu_flu)


def euler_ned_frd_to_quaternion_enu_flu(phi: ArrayLike, theta: ArrayLike, psi: ArrayLike) -> Array:
    """Attitude of FLU body in ENU world as quaternions (x, y, z, w), w >= 0, from QRSim ZYX Euler angles.

    R_enu_flu = T_enu_ned @ R_ned_frd @ T_frd_flu with R_ned_frd = dcm_ned_to_body(...).T: the ZYX
    quaternion of R_ned_frd (``euler_to_quaternion``) between the two fixed half turns. Closed form
    rather than through a rotation matrix: the nodes convert every vehicle every tick.
    """
    q_ned_frd = euler_to_quaternion(phi, theta, psi)
    q = quaternion_multiply(quaternion_multiply(_Q_ENU_NED, q_ned_frd), _Q_FRD_FLU)
    return np.where(q[..., 3:4] < 0, -q, q)


def rotation_matrix_to_quaternion(r: ArrayLike) -> Array:
    """Rotation matrices (..., 3, 3) -> unit quaternions (..., 4) ordered (x, y, z, w), w >= 0."""
    from scipy.spatial.transform import Rotation

    r = np.asarray(r, float)
    q = Rotation.from_matrix(r.reshape(-1, 3, 3)).as_quat()
    q = np.where(q[:, 3:4] < 0, -q, q)
    return q.reshape((*r.shape[:-2], 4))


def quaternion_enu_flu_to_euler_ned_frd(q_xyzw: ArrayLike) -> Array:
    """ZYX Euler angles ``[phi, theta, psi]`` (..., 3) [rad] of the FRD body in the NED world, from
    quaternions (..., 4) ``(x, y, z, w)`` of the FLU body in the ENU world (sensor_msgs/Imu,
    nav_msgs/Odometry, geometry_msgs/Pose).

    The inverse of ``euler_ned_frd_to_quaternion_enu_flu``: ``R_ned_frd = R_ENU_NED R_enu_flu R_FLU_FRD`` and
    the angles of ``dcm = R_ned_frd^T`` (``dcm_ned_to_body``): ``phi = atan2(d12, d22)``,
    ``theta = -asin(d02)``, ``psi = atan2(d01, d00)`` (psi in (-pi, pi]). Quaternions need not be unit
    (they are normalised); a zero or non-finite quaternion gives NaN angles.
    """
    from scipy.spatial.transform import Rotation

    q = np.asarray(q_xyzw, float)
    flat = q.reshape(-1, 4)
    norm = np.linalg.norm(flat, axis=1)
    ok = np.isfinite(norm) & (norm > 1e-12)
    out = np.full((flat.shape[0], 3), np.nan)
    if ok.any():
        r_enu_flu = Rotation.from_quat(flat[ok] / norm[ok, None]).as_matrix()
        dcm = np.swapaxes(R_ENU_NED @ r_enu_flu @ R_FLU_FRD, -1, -2)  # NED -> body FRD
        out[ok, 0] = np.arctan2(dcm[:, 1, 2], dcm[:, 2, 2])
        out[ok, 1] = -np.arcsin(np.clip(dcm[:, 0, 2], -1.0, 1.0))
        out[ok, 2] = np.arctan2(dcm[:, 0, 1], dcm[:, 0, 0])
    return out.reshape((*q.shape[:-1], 3))

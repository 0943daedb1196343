"""Pinhole geometry of the downward camera and its window grid (spec 3.5, ``cam_prj``, ``inv_cam_prjZ0``).

Frames: world NED [m], body FRD, camera frame ``p_cam = R_cb @ p_body`` with the optical axis along
camera z. Pixels: ``u`` along camera x, ``v`` along camera y, principal point ``c`` [px], focal lengths
``f`` [px]; a pixel is in the image when ``0 <= uv <= 2c`` (QRSim assumes the principal point at the
sensor centre). With QRSim's mounting ``r = [0, 0, pi/2]``: camera x = body y (right), camera y = -body x
(backwards), optical axis = body z (down).

The ground is the plane z = 0 (NED), as in QRSim. Everything here is for one vehicle state ``x``
(13,) (only ``x[0:6]`` are used) and vectorised over points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.frames import Array, dcm_ned_to_body

#: Corner offsets of a square ground patch of unit side, QRSim's order (``Person.m``): columns are
#: (+x,-y), (+x,+y), (-x,-y), (-x,+y), so corners 0-3 and 1-2 are the diagonals.
_UNIT_SQUARE_NE = 0.5 * np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, -1.0], [-1.0, 1.0]])


def camera_rotation(r_body_rad: ArrayLike) -> Array:
    """Body -> camera rotation for QRSim's camera Euler angles ``r = [r1, r2, r3]`` [rad].

    QRSim builds ``angleToDcm(r3, r2, r1, 'ZYX')``, i.e. yaw r3, pitch r2, roll r1 with the same
    convention as the vehicle attitude, hence ``dcm_ned_to_body(phi=r1, theta=r2, psi=r3)``.
    """
    r = np.asarray(r_body_rad, float)
    return dcm_ned_to_body(r[0], r[1], r[2])


def square_corners(centres_ned: ArrayLike, side_m: float) -> Array:
    """Corners (P, 4, 3) of axis-aligned (north/east) square ground patches of side ``side_m`` [m].

    Corner order as QRSim's person bounding box; the corners keep each centre's z.
    """
    c = np.atleast_2d(np.asarray(centres_ned, float))
    corners = np.repeat(c[:, None, :], 4, axis=1)
    corners[:, :, :2] += side_m * _UNIT_SQUARE_NE
    return corners


def quad_area(corners_px: ArrayLike) -> Array:
    """Area [px^2] of convex quadrilaterals (..., 4, 2) in QRSim's corner order: half |diag x diag|."""
    q = np.asarray(corners_px, float)
    ac = q[..., 0, :] - q[..., 3, :]
    bd = q[..., 1, :] - q[..., 2, :]
    return 0.5 * np.abs(ac[..., 0] * bd[..., 1] - ac[..., 1] * bd[..., 0])


class CameraGeometry:
    """Projection NED -> pixels and back onto the ground for one camera model.

    f_px: (2,) focal lengths [px]; c_px: (2,) principal point [px]; r_body_rad: (3,) camera mounting
    Euler angles [rad] (QRSim's ``r``).
    """

    def __init__(self, f_px: ArrayLike, c_px: ArrayLike, r_body_rad: ArrayLike) -> None:
        self.f_px = np.asarray(f_px, float).reshape(2)
        self.c_px = np.asarray(c_px, float).reshape(2)
        #: Body -> camera rotation (3, 3).
        self.rotation = camera_rotation(r_body_rad)

    @property
    def image_size_px(self) -> Array:
        """Sensor size 2c [px] (width along u, height along v)."""
        return 2.0 * self.c_px

    @property
    def fov_rad(self) -> Array:
        """Full fields of view (2,) [rad] along u and v: 2 atan(c / f)."""
        return 2.0 * np.arctan(self.c_px / self.f_px)

    def world_to_camera(self, x: ArrayLike) -> tuple[Array, Array]:
        """(M, tp): rotation NED -> camera ``R @ dcm(x)`` (3, 3) and camera position ``x[0:3]`` (NED, m)."""
        x = np.asarray(x, float)
        rp = dcm_ned_to_body(x[3], x[4], x[5])
        return self.rotation @ rp, x[:3].copy()

    def project(self, points_ned: ArrayLike, x: ArrayLike) -> tuple[Array, NDArray[np.bool_]]:
        """Project NED points (M, 3) into the image of the vehicle in state ``x`` (spec ``cam_prj``).

        ``p3 = R Rp (P - tp)``; a point is visible iff ``p3_z > 0`` (in front of the camera; QRSim lets
        ``p3_z == 0`` through to a division by zero) and its pixel lies in ``[0, 2c]``.
        Returns ``uv`` (M, 2) [px], NaN where not visible, and ``visible`` (M,).
        """
        m, tp = self.world_to_camera(x)
        p3 = (np.atleast_2d(np.asarray(points_ned, float)) - tp) @ m.T
        in_front = p3[:, 2] > 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            uv = self.f_px * p3[:, :2] / p3[:, 2:3] + self.c_px
        visible = in_front & np.all((uv >= 0.0) & (uv <= self.image_size_px), axis=1)
        uv[~visible] = np.nan
        return uv, visible

    def ground_intersection(self, uv_px: ArrayLike, x: ArrayLike) -> Array:
        """Ground points (M, 3) where the rays through pixels ``uv`` (M, 2) meet z = 0 (``inv_cam_prjZ0``).

        The ray direction in NED is ``Rp^T R^T [(uv - c) / f, 1]``. Rays that do not reach the ground
        in front of the camera (parallel or pointing up, or a camera at or below the ground) give NaN;
        QRSim returned the intersection behind the camera there.
        """
        m, tp = self.world_to_camera(x)
        uv = np.atleast_2d(np.asarray(uv_px, float))
        # row-wise m.T @ [(uv - c) / f, 1]
        rays_ned = ((uv - self.c_px) / self.f_px) @ m[:2] + m[2]
        with np.errstate(divide="ignore", invalid="ignore"):
            s = -tp[2] / rays_ned[:, 2]
        s[~((rays_ned[:, 2] > 0.0) & (s > 0.0) & np.isfinite(s))] = np.nan
        out = np.empty((len(uv), 3))
        out[:, :2] = tp[:2] + s[:, None] * rays_ned[:, :2]
        out[:, 2] = s * 0.0  # 0 on the ground, NaN for misses
        return out


@dataclass(frozen=True)
class WindowGrid:
    """Grid of classifier windows over the image (spec 3.5 update step 2).

    nf: windows along (u, v) (QRSim's ``gridDims``); df: window side [px]; offf: offset of the grid [px].
    Window (j, i) (0-based, j along u, i along v) spans ``offf + [j df1, (j+1) df1] x [i df2, (i+1) df2]``.
    """

    nf: tuple[int, int]
    df: tuple[int, int]
    offf: tuple[int, int]

    @classmethod
    def from_window_side(cls, side_px: float, c_px: ArrayLike, min_side_px: float) -> WindowGrid:
        """QRSim's grid for a projected person of side ``side_px``: nf = round(2c / side),
        df = floor(2c / nf), offf = floor(rem(2c, df) / 2). ``side_px`` is first raised to ``min_side_px``
        (caps the grid size).
        """
        size = 2.0 * np.asarray(c_px, float)
        side = max(float(side_px), float(min_side_px)) if np.isfinite(side_px) else float(min_side_px)
        nf = np.maximum(1.0, np.floor(size / side + 0.5))  # MATLAB round (half away from zero), >= 1
        df = np.floor(size / nf)
        offf = np.floor(np.fmod(size, df) / 2.0)
        return cls(
            nf=(int(nf[0]), int(nf[1])), df=(int(df[0]), int(df[1])), offf=(int(offf[0]), int(offf[1]))
        )

    @property
    def num_windows(self) -> int:
        return self.nf[0] * self.nf[1]

    def corners_px(self) -> Array:
        """Window corners (nf1+1, nf2+1, 2) [px]: corner (j, i) = offf + (j df1, i df2)."""
        j = np.arange(self.nf[0] + 1, dtype=float)[:, None]
        i = np.arange(self.nf[1] + 1, dtype=float)[None, :]
        u = np.broadcast_to(self.offf[0] + j * self.df[0], (self.nf[0] + 1, self.nf[1] + 1))
        v = np.broadcast_to(self.offf[1] + i * self.df[1], (self.nf[0] + 1, self.nf[1] + 1))
        return np.stack([u, v], axis=-1)

    def centres_px(self) -> Array:
        """Window centres (nf1, nf2, 2) [px]: offf + df / 2 + (j df1, i df2)."""
        return self.corners_px()[:-1, :-1] + 0.5 * np.asarray(self.df, float)

    def window_of(self, uv_px: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """0-based window indices (j, i) of in-image pixels (M, 2): QRSim's ``ceil((uv - offf) / df)``
        (1-based) with each index clamped to its own axis' range (QRSim clamped the wrong element, spec 10.9):
        pixels in the margins left by ``offf`` belong to the nearest border window.
        """
        uv = np.atleast_2d(np.asarray(uv_px, float))
        idx = np.ceil((uv - np.asarray(self.offf, float)) / np.asarray(self.df, float)).astype(np.int64) - 1
        j = np.clip(idx[:, 0], 0, self.nf[0] - 1)
        i = np.clip(idx[:, 1], 0, self.nf[1] - 1)
        return j, i

"""The retrieve mission's downward pinhole camera: which targets are in its field of view
(ireland_2016 section 4.6.3, eq. 12-14).

The camera sits at ``position_m`` in the vehicle's FRD body frame and looks straight down. Its frame C
has x along the optical axis (body z, down), y along body y (right) and z = x cross y (body -x, back),
so the image coordinates of a point at v_C = [v_x, v_y, v_z] are (eq. 13)

    x_c = f v_y / v_x  (image right = body right),    y_c = -f v_z / v_x  (image up = body forward),

with the focal length f (``focal_length``, in the paper's image units). A point is visible when it is in
front of the camera (v_x > 0) and inside the frame of eq. 14: |x_c| <= f tan(lambda) and
|y_c| <= (f / A) tan(lambda), lambda the field of view ``fov_rad`` and A the aspect ratio. Eq. 14 bounds
the image by f tan(lambda) itself, so lambda acts as the half-angle of the horizontal view (45 deg:
a 90 deg wide, 73.7 deg tall view); this follows the equation as printed. Occlusion is not modelled (the
paper's targets lie on an open floor). Vectorised over vehicles and points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, F8_3D_IN, njit


@dataclass(frozen=True)
class TargetCameraParams:
    """ireland_2016 Table 3: focal length f, field of view lambda [rad], aspect ratio A, camera position in
    the FRD body frame [m]."""

    focal_length: float = 400.0
    fov_rad: float = math.radians(45.0)
    aspect_ratio: float = 4.0 / 3.0
    position_m: tuple[float, float, float] = (0.0, 0.0, 0.1)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.focal_length) and self.focal_length > 0):
            raise ValueError(f"camera.focal_length={self.focal_length!r} must be > 0")
        if not 0 < self.fov_rad < math.pi / 2:
            raise ValueError(f"camera.fov_rad={self.fov_rad!r} must be in (0, pi/2) (eq. 14 takes its "
                             "tangent)")
        if not (math.isfinite(self.aspect_ratio) and self.aspect_ratio > 0):
            raise ValueError(f"camera.aspect_ratio={self.aspect_ratio!r} must be > 0")


def image_coordinates(x: ArrayLike, points_ned_m: ArrayLike, params: TargetCameraParams
                      ) -> tuple[Array, NDArray[np.bool_]]:
    """Image coordinates (N, M, 2) [x_c, y_c] of M NED points seen from N vehicle states x (N, 13) (eq.
    12-13), and (N, M) whether each point is in front of the camera (v_x > 0; elsewhere NaN)."""
    x = np.atleast_2d(np.asarray(x, float))
    pts = np.atleast_2d(np.asarray(points_ned_m, float))
    if x.shape[1] < 6 or pts.shape[1] != 3:
        raise ValueError(f"x must have shape (N, 13) and points (M, 3), got {x.shape}, {pts.shape}")
    coords = np.empty((x.shape[0], pts.shape[0], 2))
    front = np.empty((x.shape[0], pts.shape[0]), np.bool_)
    _image_kernel(x, pts, np.asarray(params.position_m, float), float(params.focal_length), coords, front)
    return coords, front


@njit(f"void({F8_2D_IN}, {F8_2D_IN}, {F8_1D_IN}, float64, float64[:, :, :], boolean[:, :])")
def _image_kernel(x, pts, camera_m, focal, coords, front):
    """``image_coordinates`` in one pass: body = dcm (pts - position) - camera_m (``dcm_ned_to_body``'s
    entries, each row summed as numpy's einsum does, (d0 r0 + d2 r2) + d1 r1, so bit-identical); camera
    frame vx, vy, vz = body z, body y, -body x; coords (f vy / vx, -f vz / vx), NaN behind the camera."""
    for n in range(x.shape[0]):
        sph, cph = np.sin(x[n, 3]), np.cos(x[n, 3])
        sth, cth = np.sin(x[n, 4]), np.cos(x[n, 4])
        sps, cps = np.sin(x[n, 5]), np.cos(x[n, 5])
        for m in range(pts.shape[0]):
            r0, r1, r2 = pts[m, 0] - x[n, 0], pts[m, 1] - x[n, 1], pts[m, 2] - x[n, 2]
            b0 = ((cth * cps * r0 + -sth * r2) + cth * sps * r1) - camera_m[0]
            b1 = (((-cph * sps + sph * sth * cps) * r0 + sph * cth * r2) + (cph * cps + sph * sth * sps) * r1
                  - camera_m[1])
            b2 = (((sph * sps + cph * sth * cps) * r0 + cph * cth * r2) + (-sph * cps + cph * sth * sps) * r1
                  - camera_m[2])
            vx, vy, vz = b2, b1, -b0
            front[n, m] = vx > 0
            if vx > 0:
                coords[n, m, 0] = focal * vy / vx
                coords[n, m, 1] = -focal * vz / vx
            else:
                coords[n, m, 0] = np.nan
                coords[n, m, 1] = np.nan


class TargetCamera:
    """One camera's image points of the targets it sees, for a tick loop: ``image_coordinates`` and
    ``in_view`` with the parameters' derived values computed once (the same kernels, so the same
    points)."""

    def __init__(self, params: TargetCameraParams) -> None:
        self.params = params
        self._position_m = np.asarray(params.position_m, float)
        self._focal = float(params.focal_length)
        self._half_w, self._half_h = _half_extents(params)

    def seen_px(self, x: Array, points_ned_m: Array) -> Array:
        """Image points (K, 2) [x right, y up] of the points (M, 3) NED in view from the one vehicle state
        ``x`` (1, 13), in the points' order."""
        m = points_ned_m.shape[0]
        coords, front, seen = np.empty((1, m, 2)), np.empty((1, m), np.bool_), np.empty((1, m), np.bool_)
        _image_kernel(x, points_ned_m, self._position_m, self._focal, coords, front)
        _in_view_kernel(coords, front, self._half_w, self._half_h, seen)
        return coords[0][seen[0]]


def _half_extents(params: TargetCameraParams) -> tuple[float, float]:
    """Eq. 14's bounds on |x_c| and |y_c|: f tan(lambda) and f tan(lambda) / A."""
    half_w = params.focal_length * math.tan(params.fov_rad)
    return half_w, half_w / params.aspect_ratio


def visible(x: ArrayLike, points_ned_m: ArrayLike, params: TargetCameraParams) -> NDArray[np.bool_]:
    """(N, M) bool: point m is in vehicle n's camera view (eq. 14)."""
    return in_view(*image_coordinates(x, points_ned_m, params), params)


def in_view(coords: Array, front: NDArray[np.bool_], params: TargetCameraParams) -> NDArray[np.bool_]:
    """(N, M) bool: which of ``image_coordinates``' points (``coords`` (N, M, 2), ``front`` (N, M)) are in
    the camera's view (eq. 14: in front, |x_c| <= f tan(lambda), |y_c| <= (f / A) tan(lambda))."""
    half_w, half_h = _half_extents(params)
    out = np.empty(front.shape, np.bool_)
    _in_view_kernel(coords, front, half_w, half_h, out)
    return out


@njit(f"void({F8_3D_IN}, Array(boolean, 2, 'A', readonly=True), float64, float64, boolean[:, :])")
def _in_view_kernel(coords, front, half_w, half_h, out):
    """``in_view`` in one pass (NaN coordinates, behind the camera, are out of view)."""
    for n in range(front.shape[0]):
        for m in range(front.shape[1]):
            out[n, m] = front[n, m] and abs(coords[n, m, 0]) <= half_w and abs(coords[n, m, 1]) <= half_h

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

from qrsim_ros.core.common.frames import Array, dcm_from_state, ned_to_body


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
    dcm = dcm_from_state(x)  # (N, 3, 3) NED -> body
    rel = pts[None, :, :] - x[:, None, 0:3]  # (N, M, 3) NED
    body = ned_to_body(dcm[:, None, :, :], rel) - np.asarray(params.position_m, float)
    vx, vy, vz = body[..., 2], body[..., 1], -body[..., 0]  # camera frame C (module docstring)
    front = vx > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        coords = np.stack([params.focal_length * vy / vx, -params.focal_length * vz / vx], axis=-1)
    coords[~front] = np.nan
    return coords, front


def visible(x: ArrayLike, points_ned_m: ArrayLike, params: TargetCameraParams) -> NDArray[np.bool_]:
    """(N, M) bool: point m is in vehicle n's camera view (eq. 14)."""
    coords, front = image_coordinates(x, points_ned_m, params)
    half_w = params.focal_length * math.tan(params.fov_rad)
    half_h = half_w / params.aspect_ratio
    with np.errstate(invalid="ignore"):
        return front & (np.abs(coords[..., 0]) <= half_w) & (np.abs(coords[..., 1]) <= half_h)

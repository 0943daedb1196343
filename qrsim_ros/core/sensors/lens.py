"""Camera lens models: projection of 3-D points to pixels and the unit ray of every pixel (beyond QRSim;
docs/CAMERAS.md).

Frame: the camera's optical frame (REP-103): z along the optical axis, x right, y down; pixels (u, v)
with u along x and v along y, pixel (column j, row i) centred at (u, v) = (j, i) (OpenCV's and ROS
CameraInfo's convention: the top-left pixel's centre is (0, 0)). Intrinsics in pixels: focal lengths
fx, fy and principal point cx, cy, no skew.

Two models, with the conventions of OpenCV and of sensor_msgs/CameraInfo, so that a consumer that
rectifies from the published K and D (image_proc, ``cv2.fisheye``) sees the lens the renderer used:

- ``EquidistantLens``: the equidistant fisheye with Kannala-Brandt distortion (``distortion_model``
  "equidistant", D = k1..k4; OpenCV's ``cv2.fisheye``; Kannala and Brandt, "A generic camera model and
  calibration method for conventional, wide-angle, and fish-eye lenses", IEEE PAMI 2006). A point at
  angle theta from the optical axis lands at radius
  ``theta_d = theta (1 + k1 theta^2 + k2 theta^4 + k3 theta^6 + k4 theta^8)`` (normalised units) in the
  direction of its (x, y): ``u = fx theta_d x / r + cx``, ``v = fy theta_d y / r + cy``, r = |(x, y)|.
  theta is ``atan2(r, z)``, so the model covers fields of view beyond 180 degrees (VIO rigs use 185-195
  degree lenses); ``cv2.fisheye`` computes theta as ``atan(r / z)``, which agrees for points in front
  of the camera (theta < 90 degrees). Points beyond the field of view (theta > fov / 2) are not imaged,
  and pixels outside the image circle (theta_d > theta_d(fov / 2)) have no ray.
- ``PlumbBobLens``: the pinhole with Brown-Conrady radial and tangential distortion (``distortion_model``
  "plumb_bob", D = k1, k2, p1, p2, k3; OpenCV's ``cv2.projectPoints``): for x = X / Z, y = Y / Z,
  r^2 = x^2 + y^2, ``x' = x (1 + k1 r^2 + k2 r^4 + k3 r^6) + 2 p1 x y + p2 (r^2 + 2 x^2)``,
  ``y' = y (1 + k1 r^2 + k2 r^4 + k3 r^6) + p1 (r^2 + 2 y^2) + 2 p2 x y``, ``u = fx x' + cx``,
  ``v = fy y' + cy``. Radial distortion folds back beyond the radius where ``d r'/d r`` vanishes
  (``1 + 3 k1 r^2 + 5 k2 r^4 + 7 k3 r^6 = 0``): points beyond it are not imaged and pixels whose
  inverse lies beyond it have no ray.

Rays from pixels: the lens model itself is inverted per pixel, once per camera (``pixel_rays``): for the
fisheye, the monotone polynomial theta -> theta_d is solved for theta by a bracketed Newton iteration
to machine precision (1e-12 is the contract; the residual is a few 1e-16); for the plumb bob, the 2-D
distortion map by Newton's method on its analytic Jacobian. The images are therefore rendered through
the lens directly, never as a pinhole image warped afterwards, and ``project(pixel_rays(uv)) == uv``
to about 1e-12 px.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.validation import ConfigError, finite

#: Lens models by their CameraInfo ``distortion_model`` name.
LENS_MODELS = ("equidistant", "plumb_bob")
#: Number of distortion coefficients of each model (CameraInfo D).
DISTORTION_SIZE = {"equidistant": 4, "plumb_bob": 5}
#: Newton iterations of the per-pixel inversion (it converges in fewer than 10 for real lenses).
MAX_NEWTON_ITERATIONS = 60
#: Largest residual [normalised image units] of a pixel's inversion for its ray to count.
INVERSION_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Lens:
    """What both lens models share: intrinsics [px], image size [px] and distortion (CameraInfo D)."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int
    distortion: tuple[float, ...]
    name: str = "camera"
    _rays: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    distortion_model = ""

    def __post_init__(self) -> None:
        n = self.name
        for key in ("fx", "fy"):
            if not finite(f"{n}.{key}_px", getattr(self, key)) > 0.0:
                raise ConfigError(f"{n}.{key}_px={getattr(self, key)!r} must be > 0")
        for key in ("cx", "cy"):
            finite(f"{n}.{key}_px", getattr(self, key))
        for key in ("width", "height"):
            v = getattr(self, key)
            LIMITS["image_size_px"].check(v, f"{n}.{key}_px")
        size = DISTORTION_SIZE[self.distortion_model]
        if len(self.distortion) != size:
            raise ConfigError(f"{n}.distortion={list(self.distortion)!r} must have {size} coefficients "
                              f"for the {self.distortion_model} model")
        for i, d in enumerate(self.distortion):
            finite(f"{n}.distortion[{i}]", d)

    # --- CameraInfo -----------------------------------------------------------------------------------
    @property
    def K(self) -> Array:  # noqa: N802 (the name of the matrix in CameraInfo and OpenCV)
        """The camera matrix (3, 3) [px]."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def D(self) -> Array:  # noqa: N802
        """The distortion coefficients in CameraInfo's (and OpenCV's) order."""
        return np.array(self.distortion, float)

    @property
    def P(self) -> Array:  # noqa: N802
        """CameraInfo's projection matrix (3, 4) of the rectified image: K with a zero fourth column (a
        monocular camera rectified onto its own intrinsics)."""
        return np.hstack([self.K, np.zeros((3, 1))])

    # --- the model ------------------------------------------------------------------------------------
    def project(self, points_cam: ArrayLike) -> Array:
        """Pixels (M, 2) [px] of points (M, 3) in the optical frame; NaN for points not imaged (behind a
        pinhole, beyond the fisheye's field of view, beyond a fold of the distortion, at the origin).
        The pixel may lie outside the image bounds."""
        raise NotImplementedError

    def pixel_rays(self, uv: ArrayLike) -> Array:
        """Unit rays (M, 3) in the optical frame of pixel coordinates (M, 2) [px]; NaN rows where the
        lens forms no image (outside the image circle, beyond a fold)."""
        raise NotImplementedError

    def rays(self) -> Array:
        """The unit ray of every pixel (height * width, 3), row-major (pixel (i, j) at i * width + j),
        NaN rows for pixels with no ray. Computed once per lens (a read-only array)."""
        if "all" not in self._rays:
            v, u = np.mgrid[0:self.height, 0:self.width]
            r = self.pixel_rays(np.column_stack([u.ravel(), v.ravel()]).astype(float))
            r.flags.writeable = False
            self._rays["all"] = r
        return self._rays["all"]

    def _normalised(self, uv: ArrayLike) -> tuple[Array, Array]:
        p = np.asarray(uv, float).reshape(-1, 2)
        return (p[:, 0] - self.cx) / self.fx, (p[:, 1] - self.cy) / self.fy

    def _to_pixels(self, a: Array, b: Array) -> Array:
        return np.column_stack([self.fx * a + self.cx, self.fy * b + self.cy])


@dataclass(frozen=True)
class EquidistantLens(Lens):
    """Equidistant (Kannala-Brandt) fisheye, ``distortion_model`` "equidistant" (module docstring).

    fov_rad: the full field of view [rad]: rays up to fov / 2 from the optical axis are imaged.
    """

    fov_rad: float = math.radians(185.0)
    distortion_model = "equidistant"

    def __post_init__(self) -> None:
        super().__post_init__()
        fov = finite(f"{self.name}.fov_deg", self.fov_rad)
        if not 0.0 < fov <= math.radians(300.0):
            raise ConfigError(f"{self.name}.fov_deg={math.degrees(fov)!r} must be in (0, 300] for a fisheye")
        # theta -> theta_d must increase over the field of view, or pixels would have two rays
        theta = np.linspace(0.0, self.max_theta_rad, 4001)
        slope = self.theta_d_slope(theta)
        if not np.all(slope > 0.0):
            bad = float(np.degrees(theta[np.argmax(slope <= 0.0)]))
            raise ConfigError(f"{self.name}.distortion={list(self.distortion)!r}: theta_d(theta) stops "
                              f"increasing at theta = {bad:.1f} deg, inside the field of view "
                              f"({math.degrees(fov):.1f} deg): the lens would image two rays on one pixel")

    @property
    def max_theta_rad(self) -> float:
        """Largest angle from the optical axis that is imaged [rad] (fov / 2)."""
        return 0.5 * self.fov_rad

    @property
    def max_theta_d(self) -> float:
        """Radius of the image circle in normalised units (theta_d at fov / 2)."""
        return float(self.theta_d(np.array([self.max_theta_rad]))[0])

    def theta_d(self, theta: ArrayLike) -> Array:
        """The distorted angle theta (1 + k1 theta^2 + k2 theta^4 + k3 theta^6 + k4 theta^8)."""
        t = np.asarray(theta, float)
        k1, k2, k3, k4 = self.distortion
        t2 = t * t
        return t * (1.0 + t2 * (k1 + t2 * (k2 + t2 * (k3 + t2 * k4))))

    def theta_d_slope(self, theta: ArrayLike) -> Array:
        """d theta_d / d theta = 1 + 3 k1 theta^2 + 5 k2 theta^4 + 7 k3 theta^6 + 9 k4 theta^8."""
        t2 = np.asarray(theta, float) ** 2
        k1, k2, k3, k4 = self.distortion
        return 1.0 + t2 * (3.0 * k1 + t2 * (5.0 * k2 + t2 * (7.0 * k3 + t2 * 9.0 * k4)))

    def theta_of(self, theta_d: ArrayLike) -> tuple[Array, NDArray[np.bool_]]:
        """theta of distorted angles theta_d (bracketed Newton on the monotone polynomial, to machine
        precision) and which of them lie in the image circle (0 <= theta_d <= theta_d(fov / 2))."""
        td = np.asarray(theta_d, float)
        inside = (td >= 0.0) & (td <= self.max_theta_d)
        lo = np.zeros_like(td)
        hi = np.full_like(td, self.max_theta_rad)
        theta = np.clip(td, lo, hi)
        active = np.flatnonzero(inside)
        for _ in range(MAX_NEWTON_ITERATIONS):
            if active.size == 0:
                break
            t, d = theta[active], td[active]
            f = self.theta_d(t) - d
            hi[active] = np.where(f > 0.0, t, hi[active])
            lo[active] = np.where(f <= 0.0, t, lo[active])
            step = t - f / self.theta_d_slope(t)
            a, b = lo[active], hi[active]
            new = np.where((step >= a) & (step <= b), step, 0.5 * (a + b))  # out of the bracket: bisect
            theta[active] = new
            active = active[np.abs(new - t) > 1e-15 * np.maximum(1.0, t)]
        residual = np.abs(self.theta_d(theta) - td)
        return theta, inside & (residual <= INVERSION_TOLERANCE)

    def project(self, points_cam: ArrayLike) -> Array:
        p = np.asarray(points_cam, float).reshape(-1, 3)
        r = np.hypot(p[:, 0], p[:, 1])
        theta = np.arctan2(r, p[:, 2])
        ok = (theta <= self.max_theta_rad) & (np.linalg.norm(p, axis=1) > 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(r > 0.0, self.theta_d(theta) / np.where(r > 0.0, r, 1.0), 0.0)
        uv = self._to_pixels(scale * p[:, 0], scale * p[:, 1])
        uv[~ok] = np.nan
        return uv

    def pixel_rays(self, uv: ArrayLike) -> Array:
        a, b = self._normalised(uv)
        td = np.hypot(a, b)
        theta, ok = self.theta_of(td)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(td > 0.0, np.sin(theta) / np.where(td > 0.0, td, 1.0), 0.0)
        rays = np.column_stack([s * a, s * b, np.cos(theta)])
        rays[~ok] = np.nan
        return rays


@dataclass(frozen=True)
class PlumbBobLens(Lens):
    """Pinhole with radial and tangential distortion, ``distortion_model`` "plumb_bob" (module docstring)."""

    distortion_model = "plumb_bob"

    @property
    def max_radius2(self) -> float:
        """Squared normalised radius where the radial distortion folds back (inf if it never does): the
        smallest positive root s of 1 + 3 k1 s + 5 k2 s^2 + 7 k3 s^3."""
        k1, k2, _, _, k3 = self.distortion
        roots = np.roots(np.trim_zeros([7.0 * k3, 5.0 * k2, 3.0 * k1, 1.0], "f"))
        real = roots[np.abs(roots.imag) <= 1e-12 * np.maximum(1.0, np.abs(roots))].real
        pos = real[real > 0.0]
        return float(pos.min()) if pos.size else math.inf

    def distort(self, x: ArrayLike, y: ArrayLike) -> tuple[Array, Array]:
        """Normalised undistorted (x, y) -> distorted (x', y') (module docstring)."""
        x, y = np.asarray(x, float), np.asarray(y, float)
        k1, k2, p1, p2, k3 = self.distortion
        r2 = x * x + y * y
        radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
        return (x * radial + 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x),
                y * radial + p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y)

    def project(self, points_cam: ArrayLike) -> Array:
        p = np.asarray(points_cam, float).reshape(-1, 3)
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.where(p[:, 2] > 0.0, p[:, 2], np.nan)
            x, y = p[:, 0] / z, p[:, 1] / z
        xd, yd = self.distort(x, y)
        uv = self._to_pixels(xd, yd)
        uv[~(x * x + y * y < self.max_radius2)] = np.nan
        return uv

    def pixel_rays(self, uv: ArrayLike) -> Array:
        xd, yd = self._normalised(uv)
        k1, k2, p1, p2, k3 = self.distortion
        x, y = xd.copy(), yd.copy()
        active = np.flatnonzero(np.isfinite(xd) & np.isfinite(yd))
        for _ in range(MAX_NEWTON_ITERATIONS):
            if active.size == 0:
                break
            xa, ya = x[active], y[active]
            r2 = xa * xa + ya * ya
            radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
            dradial = k1 + r2 * (2.0 * k2 + 3.0 * r2 * k3)  # d radial / d r^2
            ex, ey = self.distort(xa, ya)
            ex, ey = ex - xd[active], ey - yd[active]
            jxx = radial + 2.0 * xa * xa * dradial + 2.0 * p1 * ya + 6.0 * p2 * xa
            jxy = 2.0 * xa * ya * dradial + 2.0 * p1 * xa + 2.0 * p2 * ya  # = d y' / d x
            jyy = radial + 2.0 * ya * ya * dradial + 6.0 * p1 * ya + 2.0 * p2 * xa
            det = jxx * jyy - jxy * jxy
            with np.errstate(invalid="ignore", divide="ignore"):
                dx = (jyy * ex - jxy * ey) / det
                dy = (jxx * ey - jxy * ex) / det
            x[active], y[active] = xa - dx, ya - dy
            moving = np.abs(dx) + np.abs(dy) > 1e-15 * (1.0 + np.abs(xa) + np.abs(ya))
            active = active[moving & np.isfinite(dx) & np.isfinite(dy)]
        ex, ey = self.distort(x, y)
        ok = (np.hypot(ex - xd, ey - yd) <= INVERSION_TOLERANCE) & (x * x + y * y < self.max_radius2)
        rays = np.column_stack([x, y, np.ones_like(x)])
        rays /= np.linalg.norm(rays, axis=1)[:, None]
        rays[~ok] = np.nan
        return rays


def make_lens(model: str, fx: float, fy: float, cx: float, cy: float, width: int, height: int,
              distortion: tuple[float, ...], fov_rad: float, name: str = "camera") -> Lens:
    """The lens of CameraInfo ``distortion_model`` ``model`` (``LENS_MODELS``)."""
    if model == "equidistant":
        return EquidistantLens(fx, fy, cx, cy, width, height, tuple(distortion), name, fov_rad=fov_rad)
    if model == "plumb_bob":
        return PlumbBobLens(fx, fy, cx, cy, width, height, tuple(distortion), name)
    raise ConfigError(f"{name}.lens={model!r} must be one of {', '.join(LENS_MODELS)}")

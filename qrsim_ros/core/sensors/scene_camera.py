"""Rendered cameras over the 3-D scene: a fisheye (equidistant / Kannala-Brandt) and a pinhole
(plumb bob), each with an optional depth image from the same rays (beyond QRSim; docs/CAMERAS.md).

Every ``dt_s`` each valid vehicle's camera takes a frame (at its own time f * dt_s: between two ticks
when dt_s is not a multiple of 0.02 s, rendered at the next tick from the pose interpolated to that
instant and stamped with it; docs/CAMERAS.md "Frame times"): the unit ray of every pixel (``lens``: from
the lens model, computed once per camera; pixels outside a fisheye's image circle have none) is turned
into the world by the mount and the vehicle's attitude, all rays of all vehicles are cast into the
scene in one ``Scene.cast`` call, and the hits are shaded (``render``: textured ground with the terrain
classes, Lambert-shaded obstacles and persons, sky). Then the exposure gain, Gaussian pixel noise (when
``on``) and quantisation to 8 bits (rgb8, or mono8 as ITU-R BT.601 luminance). Pixels with no ray are
black (the dark corners of a circular fisheye).

Frames and units: NED world, FRD body [m, rad] as the rest of the core. The camera's optical frame
(REP-103: z along the optical axis, x right, y down; ``lens``) is placed by the mount: ``mount_xyz_m``
is its origin in the body FRD frame and ``mount_rpy_rad`` = (roll, pitch, yaw) the ZYX Euler angles of a
"camera link" frame (x along the optical axis, y right, z down: FRD-like) relative to the body FRD
frame, with the vehicle's angle conventions; a zero mount looks forward, pitch -pi/4 looks 45 degrees
down, pitch -pi/2 straight down (the top of the image forward).

Depth (``depth: true``): a float32 image of the range [m] along each pixel's ray from the optical
centre to the first hit, NaN for pixels with no ray and +inf where nothing is hit within
``depth_max_range_m``. REP-118 defines a depth image's value as the z coordinate (distance along the
optical axis) instead: ``z = range * ray_z``, with ``ray_z`` the optical-axis component of the pixel's
unit ray (cos theta). ``depth_kind: z`` publishes that for the pinhole (what ``depth_image_proc``
expects); a fisheye's rays beyond 90 degrees have no positive z, so its depth is always the range.
Depth is an option of a camera rather than a sensor of its own because it is the same rays: one cast
gives both images, pixel-aligned and of the same instant (a depth node of its own would cast every ray
again in a second process).

Intrinsics: given (``fx_px``, ``fy_px``, ``cx_px``, ``cy_px``, all four) or derived from the field of
view: a fisheye's image circle (``fov_deg``) inscribed in the image's shorter side, a pinhole's
horizontal field of view across its width, both centred ((width - 1) / 2, (height - 1) / 2).

Noise: ``sigma_dn`` digital numbers of Gaussian noise per pixel and channel, from the vehicle's own
stream (``<sensor>.pixels``), drawn as float32 (width x height x channels values per frame). The
ground's texture is seeded from the scenario's stream ``scene.texture``, shared by all cameras, so
every camera of a run sees the same world. Same seed, same images.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array, dcm_from_state, dcm_ned_to_body, interpolate_pose
from qrsim_ros.core.common.jit import F8_2D_IN, njit
from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S, TICK_NS
from qrsim_ros.core.common.validation import (
    ConfigError,
    finite,
    flag,
    set_frozen_field,
    shape,
    single_non_negative,
)
from qrsim_ros.core.sensors import render
from qrsim_ros.core.sensors.lens import Lens, make_lens
from qrsim_ros.core.vehicles.pelican import STATE_POSE, STATE_POSITION_NED
from qrsim_ros.core.world.calibration_target import pack_targets
from qrsim_ros.core.world.scene import Scene

#: Name of the texture seed's stream (shared by every camera).
TEXTURE_STREAM = "scene.texture"
#: Pixel encodings (sensor_msgs/Image).
ENCODINGS = ("rgb8", "mono8")
#: What a depth pixel holds.
DEPTH_KINDS = ("range", "z")
#: The optical frame in the camera-link frame: optical x = link y, optical y = link z, optical z = link x.
R_LINK_OPTICAL = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


@dataclass(frozen=True)
class SceneCameraParams:
    """A rendered camera (module docstring). The fields, with the fisheye's defaults:

    on: Gaussian pixel noise (``sigma_dn``) if true, else a noiseless image. dt_s: frame period [s], at
    least the 0.02 s tick (any value: frames fall between ticks when it is not a multiple; module
    docstring). width_px, height_px: image size. fov_deg: the fisheye's field of view (its image
    circle) or the pinhole's horizontal one [deg]. fx_px, fy_px, cx_px, cy_px: intrinsics [px] (all four,
    or none: derived from fov_deg). distortion: CameraInfo D (k1..k4 for the fisheye, k1, k2, p1, p2, k3
    for the pinhole; default zeros). mount_xyz_m: optical centre in the body FRD frame [m].
    mount_rpy_rad: attitude of the camera link in the body (module docstring) [rad]. encoding: rgb8 or
    mono8. sigma_dn: pixel noise standard deviation [DN, of 255]. exposure_gain: factor on the linear
    brightness before noise and clipping. depth: also produce the depth image. depth_max_range_m:
    beyond it a depth pixel is +inf [m]. depth_kind: ``range`` along the ray, or ``z`` (REP-118; pinhole
    only).
    """

    SENSOR: ClassVar[str] = "fisheye"
    LENS: ClassVar[str] = "equidistant"

    on: bool = False
    dt_s: float = 0.05
    width_px: int = 640
    height_px: int = 480
    fov_deg: float = 185.0
    fx_px: float | None = None
    fy_px: float | None = None
    cx_px: float | None = None
    cy_px: float | None = None
    distortion: tuple[float, ...] | None = None
    mount_xyz_m: tuple[float, float, float] = (0.10, 0.0, 0.05)
    mount_rpy_rad: tuple[float, float, float] = (0.0, -math.pi / 4, 0.0)
    encoding: str = "rgb8"
    sigma_dn: float = 2.0
    exposure_gain: float = 1.0
    depth: bool = False
    depth_max_range_m: float = 100.0
    depth_kind: str = "range"

    def __post_init__(self) -> None:
        n = self.SENSOR
        set_frozen_field(self, "on", flag(f"{n}.on", self.on))
        set_frozen_field(self, "depth", flag(f"{n}.depth", self.depth))
        dt = finite(f"{n}.dt_s", self.dt_s)
        if not BASE_DT_S - 1e-12 <= dt <= 3600.0:
            raise ConfigError(f"{n}.dt_s={dt!r} must be in [{BASE_DT_S}, 3600] s (at most one frame per "
                              "0.02 s tick)")
        fov = finite(f"{n}.fov_deg", self.fov_deg)
        limit = 300.0 if self.LENS == "equidistant" else 170.0
        if not 0.0 < fov <= limit:
            raise ConfigError(f"{n}.fov_deg={fov!r} must be in (0, {limit:g}] for a {self.LENS} lens")
        given = [k for k in ("fx_px", "fy_px", "cx_px", "cy_px") if getattr(self, k) is not None]
        if given and len(given) != 4:
            missing = sorted({"fx_px", "fy_px", "cx_px", "cy_px"} - set(given))
            raise ConfigError(f"{n}: intrinsics need all of fx_px, fy_px, cx_px, cy_px or none "
                              f"(missing {', '.join(missing)})")
        shape(f"{n}.mount_xyz_m", self.mount_xyz_m, (3,))
        shape(f"{n}.mount_rpy_rad", self.mount_rpy_rad, (3,))
        if self.encoding not in ENCODINGS:
            raise ConfigError(f"{n}.encoding={self.encoding!r} must be one of {', '.join(ENCODINGS)}")
        single_non_negative(f"{n}.sigma_dn", self.sigma_dn)
        if not finite(f"{n}.exposure_gain", self.exposure_gain) > 0.0:
            raise ConfigError(f"{n}.exposure_gain={self.exposure_gain!r} must be > 0")
        if not finite(f"{n}.depth_max_range_m", self.depth_max_range_m) > 0.0:
            raise ConfigError(f"{n}.depth_max_range_m={self.depth_max_range_m!r} must be > 0")
        if self.depth_kind not in DEPTH_KINDS:
            raise ConfigError(f"{n}.depth_kind={self.depth_kind!r} must be one of {', '.join(DEPTH_KINDS)}")
        if self.depth_kind == "z" and self.LENS == "equidistant":
            raise ConfigError(f"{n}.depth_kind='z': a fisheye's depth is the range along the ray "
                              "(its rays beyond 90 degrees have no positive z)")
        self.lens()  # checks the intrinsics, the size and the distortion

    @property
    def channels(self) -> int:
        return 3 if self.encoding == "rgb8" else 1

    def lens(self) -> Lens:
        """The lens model with the given or derived intrinsics (module docstring)."""
        n = self.SENSOR
        size = 4 if self.LENS == "equidistant" else 5
        dist = tuple(float(d) for d in (self.distortion if self.distortion is not None else (0.0,) * size))
        w, h = self.width_px, self.height_px
        for key, v in (("width_px", w), ("height_px", h)):
            LIMITS["image_size_px"].check(v, f"{n}.{key}")
        fov = math.radians(self.fov_deg)
        if self.fx_px is not None:
            fx, fy, cx, cy = (float(v) for v in (self.fx_px, self.fy_px, self.cx_px, self.cy_px))  # type: ignore[arg-type]
        else:
            cx, cy = 0.5 * (w - 1), 0.5 * (h - 1)
            if self.LENS == "equidistant":  # the image circle inscribed in the shorter side
                probe = make_lens(self.LENS, 1.0, 1.0, 0.0, 0.0, w, h, dist, fov, n)
                fx = fy = 0.5 * min(w, h) / probe.max_theta_d  # type: ignore[attr-defined]
            else:  # the horizontal field of view across the width
                fx = fy = 0.5 * w / math.tan(0.5 * fov)
        return make_lens(self.LENS, fx, fy, cx, cy, w, h, dist, fov, n)

    def body_from_optical(self) -> Array:
        """Rotation (3, 3) of optical-frame vectors into the body FRD frame."""
        r = np.asarray(self.mount_rpy_rad, float)
        return dcm_ned_to_body(r[0], r[1], r[2]).T @ R_LINK_OPTICAL


@dataclass(frozen=True)
class PinholeCameraParams(SceneCameraParams):
    """The pinhole camera (plumb bob): the fields of ``SceneCameraParams`` with a pinhole's defaults: 90
    degrees across 640 x 480, 10 Hz, looking straight down from under the body."""

    SENSOR: ClassVar[str] = "camera"
    LENS: ClassVar[str] = "plumb_bob"

    dt_s: float = 0.1
    fov_deg: float = 90.0
    mount_xyz_m: tuple[float, float, float] = (0.0, 0.0, 0.08)
    mount_rpy_rad: tuple[float, float, float] = (0.0, -math.pi / 2, 0.0)


def check_depth_outputs(sensors: Mapping[str, Any]) -> None:
    """The scenario's cameras may not both publish the one depth image (``uavN/depth/image_raw``)."""
    with_depth = sorted(name for name, p in sensors.items() if isinstance(p, SceneCameraParams) and p.depth)
    if len(with_depth) > 1:
        raise ConfigError(f"depth is set on {' and '.join(with_depth)}: one camera per vehicle publishes "
                          "the depth image (uavN/depth/image_raw)")


class SceneCamera:
    """The camera ``params.SENSOR`` on N vehicles, rendered every ``dt_s`` (module docstring).

    ``images[i]``: vehicle i's latest frame (height, width, 3) rgb8 or (height, width) mono8 uint8, None
    before the first; ``depth_m[i]``: its depth image (height, width) float32 (with ``depth``).
    Invalid vehicles hold their last frame.
    """

    def __init__(self, num_vehicles: int, params: SceneCameraParams, streams: RandomStreams | None,
                 scene: Scene) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        streams = streams if streams is not None else RandomStreams(0)
        self.params = params
        self.name = params.SENSOR
        self.num_vehicles = int(num_vehicles)
        self.scene = scene
        #: the frame period [ns]; frame f is taken at f * period_ns (between ticks when dt_s is not a
        #: multiple of 0.02 s, from the pose interpolated to that instant)
        self.period_ns = round(params.dt_s * 1e9)
        #: when the latest frame was taken [ns since the episode's start] (its messages' stamp)
        self.frame_ns = 0
        self._x_prev: Array | None = None  # the states of the last tick given, and its time [ns]
        self._t_prev_ns = 0
        self.lens = params.lens()
        # the ray table: only the pixels that have a ray, in the body frame, with each pixel's angle
        rays = self.lens.rays()
        self.pixels = np.flatnonzero(np.isfinite(rays[:, 0]))
        self._background = np.flatnonzero(~np.isfinite(rays[:, 0]))  # outside the image circle: noise only
        self.rays_optical = np.ascontiguousarray(rays[self.pixels])
        self._rays_body = self.rays_optical @ params.body_from_optical().T
        self.pixel_angle_rad = _pixel_angles(self.lens, self.pixels)
        self._mount = np.asarray(params.mount_xyz_m, float)
        self._seed = int(streams.get(TEXTURE_STREAM).integers(0, 2**31 - 1))
        self._noise_rngs = streams.per_vehicle(f"{self.name}.pixels", self.num_vehicles)
        self._targets = _targets_of(scene)
        self.images: list[NDArray[np.uint8] | None] = [None] * self.num_vehicles
        self.depth_m: list[NDArray[np.float32] | None] = [None] * self.num_vehicles
        #: Wall time of the last frame's phases [ms] (rays into the world, cast, shade, image = noise and
        #: quantisation, depth) and the number of rays it cast: for benchmarks and diagnostics.
        self.last_timing_ms: dict[str, float] = {}
        self.last_rays = 0

    @property
    def shape(self) -> tuple[int, ...]:
        """An image's shape: (height, width, 3) for rgb8, (height, width) for mono8."""
        p = self.params
        return (p.height_px, p.width_px, 3) if p.channels == 3 else (p.height_px, p.width_px)

    def due_frame_ns(self, k: int) -> int | None:
        """The time [ns] of the latest frame due at tick k (taken after the last tick given and at or
        before tick k), None if none."""
        t_ns = k * TICK_NS
        frame_ns = (t_ns // self.period_ns) * self.period_ns
        return frame_ns if frame_ns > self._t_prev_ns else None

    def reset(self, x: ArrayLike) -> None:
        """A frame at once from the initial states (the episode's tick 0)."""
        self.images = [None] * self.num_vehicles
        self.depth_m = [None] * self.num_vehicles
        xs = np.atleast_2d(np.asarray(x, float))
        self._render(xs)
        self.frame_ns = 0
        self._x_prev, self._t_prev_ns = xs.copy(), 0

    def step(self, k: int, x: ArrayLike, valid: ArrayLike | None = None) -> bool:
        """Render the frame due at tick k, if any, from the pose interpolated between the last tick's
        states and x (N, 13) to the frame's time; invalid vehicles hold their frame. Returns whether the
        camera updated."""
        xs = np.atleast_2d(np.asarray(x, float))
        frame_ns = self.due_frame_ns(k)
        t_ns = k * TICK_NS
        if frame_ns is not None:
            x0 = self._x_prev if self._x_prev is not None else xs
            span = t_ns - self._t_prev_ns
            fraction = (frame_ns - self._t_prev_ns) / span if span > 0 else 1.0
            self._render(xs if fraction >= 1.0 else interpolate_pose(x0, xs, fraction), valid)
            self.frame_ns = frame_ns
        self._x_prev, self._t_prev_ns = xs.copy(), t_ns
        return frame_ns is not None

    # --- rendering ------------------------------------------------------------------------------------
    def rays_ned(self, x: ArrayLike) -> tuple[Array, Array]:
        """Origins (3,) and unit directions (P, 3) in NED of one vehicle's pixel rays (``pixels``) from
        its state x (13,)."""
        x = np.asarray(x, float)
        r_ned_body = dcm_from_state(x[None, STATE_POSE])[0].T
        out = np.empty_like(self._rays_body)
        _rotate_rows(self._rays_body, r_ned_body, out)  # not a BLAS product: no thread pool to contend
        return x[STATE_POSITION_NED] + r_ned_body @ self._mount, out

    def _render(self, x: ArrayLike, valid: ArrayLike | None = None) -> None:
        xs = np.atleast_2d(np.asarray(x, float))
        if xs.shape[0] != self.num_vehicles or xs.shape[1] < 6:
            raise ValueError(f"x must have shape ({self.num_vehicles}, 13), got {xs.shape}")
        ok = np.ones(self.num_vehicles, bool) if valid is None else np.asarray(valid, bool).reshape(-1)
        live = [i for i in range(self.num_vehicles) if ok[i] and np.all(np.isfinite(xs[i, STATE_POSE]))]
        if not live:
            return
        # one vehicle after another: the rays' origin is one point (a broadcast view, not a copy of it
        # per ray), and the arrays of a frame stay the size of one image
        timing = dict.fromkeys(("rays", "cast", "shade", "image", "depth"), 0.0)
        terrain, n0, e0 = _terrain_of(self.scene)
        linear = np.empty((len(self.pixels), 3), np.float32)
        for i in live:
            t0 = time.perf_counter()
            origin, dirs = self.rays_ned(xs[i])
            origins = np.broadcast_to(origin, dirs.shape)
            t1 = time.perf_counter()
            hits = self.scene.cast(origins, dirs)
            t2 = time.perf_counter()
            render.shade(hits.face, hits.range_m, hits.normal, origins, dirs, self.pixel_angle_rad,
                         self.scene.face_label, terrain, n0, e0, render.CLASS_COLOURS, render.LABEL_COLOURS,
                         self._targets, render.SUN_TOWARDS_NED, float(self.params.exposure_gain), self._seed,
                         linear)
            t3 = time.perf_counter()
            self.images[i] = self._finish(linear, self._noise_rngs[i])
            t4 = time.perf_counter()
            if self.params.depth:
                self.depth_m[i] = self._depth(hits.range_m)
            t5 = time.perf_counter()
            for key, dt_s in zip(timing, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
                timing[key] += 1e3 * dt_s
        self.last_timing_ms = timing
        self.last_rays = len(live) * len(self.pixels)

    def _finish(self, linear: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.uint8]:
        """Quantised image (with noise) from the linear colours of the pixels with a ray."""
        prm = self.params
        h, w, c = prm.height_px, prm.width_px, prm.channels
        if prm.on and prm.sigma_dn > 0.0:  # 16 uniform bits per value from the stream's raw output
            words = -(-h * w * c // 4)
            raw = rng.bit_generator.random_raw(words).astype("<u8", copy=False)  # no copy on little endian
            bits = raw.view("<u2")[:h * w * c].reshape(h * w, c)
        else:
            bits = _NO_NOISE
        out = np.empty((h * w, c), np.uint8)
        render.quantise(linear, self.pixels, self._background, bits, render.normal_quantiles(),
                        float(prm.sigma_dn), c == 1, out)
        return out.reshape(self.shape)

    def _depth(self, range_m: Array) -> NDArray[np.float32]:
        prm = self.params
        d = np.where(range_m <= prm.depth_max_range_m, range_m, np.inf)
        if prm.depth_kind == "z":
            d = d * self.rays_optical[:, 2]
        full = np.full(prm.height_px * prm.width_px, np.nan, np.float32)
        full[self.pixels] = d
        return full.reshape(prm.height_px, prm.width_px)


@njit(f"void({F8_2D_IN}, {F8_2D_IN}, float64[:, ::1])")
def _rotate_rows(v, r, out):
    """out[i] = r @ v[i] for rows v (M, 3)."""
    for i in range(v.shape[0]):
        a, b, c = v[i, 0], v[i, 1], v[i, 2]
        for k in range(3):
            out[i, k] = r[k, 0] * a + r[k, 1] * b + r[k, 2] * c


def _pixel_angles(lens: Lens, pixels: NDArray[np.intp]) -> Array:
    """The angle [rad] each pixel spans: between the rays of its left and right edges (u -+ 1/2), the
    scale of the texture's level of detail."""
    w = lens.width
    v, u = np.divmod(pixels, w)
    uv = np.column_stack([u, v]).astype(float)
    half = np.array([0.5, 0.0])
    left, right = lens.pixel_rays(uv - half), lens.pixel_rays(uv + half)
    cos = np.clip(np.einsum("ij,ij->i", left, right), -1.0, 1.0)
    angle = np.arccos(cos)
    fallback = 1.0 / lens.fx  # a pixel at the rim of the image circle: the central pixel's angle
    return np.ascontiguousarray(np.where(np.isfinite(angle) & (angle > 0.0), angle, fallback))


def _terrain_of(scene: Scene) -> tuple[NDArray[np.int64], float, float]:
    """The terrain class grid (rows north, columns east, 1 m) and its first cell's corner; a 1 x 1 grid
    of class 0 without terrain."""
    terrain = scene.terrain
    if terrain is None:
        return _NO_TERRAIN, 0.0, 0.0
    grid = np.ascontiguousarray(terrain.grid, np.int64)
    return grid, float(terrain.limits[0]), float(terrain.limits[2])


_NO_TERRAIN = np.zeros((1, 1), np.int64)
_NO_NOISE = np.zeros((0, 3), np.uint16)


def _targets_of(scene: Scene) -> Array:
    return pack_targets(scene.params.calibration_targets)

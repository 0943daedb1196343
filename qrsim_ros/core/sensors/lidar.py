"""Scanning lidar of N vehicles in the 3-D scene (beyond QRSim; after the SIL simulator of
Mathiesen 2017, chapter 6, with per-ray timing instead of its frustum subdivision).

Models (``MODELS``), with the geometry and timing of their data sheets and user manuals:

- ``vlp16``: Velodyne VLP-16 (Puck). 16 beams at -15..+15 deg, 2 deg apart, fired one at a time in the
  interleaved order of the manual's laser table (-15, +1, -13, +3, ..., -1, +15), 2.304 us apart; a
  firing cycle of 55.296 us, so 1808 columns (0.199 deg, the data sheet's "0.2 deg at 10 Hz") per
  rotation at 10 Hz; 5-20 Hz (300-1200 RPM); 100 m; accuracy "up to +-3 cm (typical)", taken as sigma.
  About 289,000 points/s (data sheet: ~300,000 single return).
- ``hdl32e``: Velodyne HDL-32E. 32 beams -30.67..+10.67 deg, 1.33 deg apart (interleaved firing order of
  the manual: -30.67, -9.33, -29.33, -8.00, ...), 1.152 us apart in a 46.08 us cycle: 2170 columns
  (0.166 deg) per rotation at 10 Hz; 5-20 Hz; 100 m; accuracy < 2 cm (1 sigma at 25 m). About 694,000
  points/s (data sheet: ~700,000).
- ``os1_64``: Ouster OS1-64 (Gen 2 and later, uniform beams). 64 beams over a 45 deg vertical field
  (+22.5..-22.5 deg, 0.714 deg apart) fired together at every column; lidar modes 512, 1024 (default)
  or 2048 columns at 10 or 20 Hz (not 2048 x 20); 120 m; precision taken as sigma 3 cm (the data
  sheets give 1.5-5 cm depending on range and revision); minimum range 0.5 m (the revisions give
  0.3-0.8 m: override it). Ideal geometry: the per-beam azimuth offsets and the 15.8 mm beam origin
  offset of the real calibration are not modelled.
- ``utm30lx``: Hokuyo UTM-30LX, planar. 270 deg in 0.25 deg steps (1081 steps, -135..+135 deg, counter-
  clockwise), 25 ms per scan (40 Hz; the mirror turns 360 deg per scan, so a step takes
  25 ms / 1440 = 17.36 us, the ``time_increment`` urg_node reports); 0.1-30 m; accuracy +-30 mm up to
  10 m (+-50 mm to 30 m), taken as sigma 3 cm. Published as sensor_msgs/LaserScan.

Frames. Rays are defined in the sensor frame ``lidar`` (x forward, y left, z up, as the Velodyne and
Ouster drivers' frames and REP-103): a beam at elevation e and azimuth a points along
(cos e cos a, cos e sin a, sin e). The mount is given in the body FRD frame: ``mount_position_m`` [m]
and ``mount_rpy_rad`` (ZYX roll, pitch, yaw [rad] of the sensor's own FRD axes relative to the body's,
the same convention as the vehicle's attitude). With zero angles the sensor stands upright, x forward.
The spinning models turn clockwise seen from above (azimuth decreasing), starting each sweep at
``cut_azimuth_rad`` (default pi: behind the vehicle, so the seam of the cloud is at the back); the
planar scanner turns counter-clockwise from -135 deg, as urg_node reports it.

Motion during a sweep. Every ray has its own time within the sweep: column c of a sweep fires at
``c T_col`` and beam n of the column ``n`` firing slots later (``ray_time_s``); its azimuth is where the
head is at that time. Sweep s starts at ``s / rate_hz`` after the episode's tick 0 (sweeps follow each
other without a gap, as the sensor spins continuously). At tick k the model casts, in one
``scene.cast``, every ray whose time falls in (t_{k-1}, t_k], from the vehicle pose interpolated to
the ray's time between tick k-1's and tick k's true states (position linearly, the Euler angles
linearly with yaw wrapped: over 0.02 s this is the pose to well below a millimetre and a millidegree
at the rates a multirotor turns). A sweep is reported at the tick in which its last ray falls
(``step`` returns True; ``new_sweep``). Its points are each in the sensor frame at their own time: the
cloud is not de-skewed, as a real sensor's is not; ``time`` is each ray's time since the sweep's first
ray. The periods need not be multiples of the 0.02 s tick (the UTM-30LX scans every 25 ms): sweeps keep
their own schedule, a tick may finish one sweep and start the next, and every sweep is reported
exactly once, at the first tick at or after its last ray.

Stamps. A sweep's stamp is the time of its first ray (``sweep_start_ns``, exact integer nanoseconds
since the episode's tick 0), as the Velodyne driver stamps a scan with its first packet and urg_node a
LaserScan with its first step; ``stamp + time`` is the time every point was measured, which is what
de-skewing consumers (LIO pipelines) read. For a period that is a multiple of 0.02 s the stamp is a
tick's time; for others (40 Hz) it falls between ticks. The message is published later, at the tick
that completes the sweep.

Measurement. The true range r is the first hit within ``max_range_m``; the reading is ``r + sigma_m eta``
(eta ~ N(0, 1), the vehicle's stream ``lidar``). A ray gives no return when nothing is hit, when the
reading exceeds ``max_range_m``, when it is below ``min_range_m`` (status TOO_CLOSE, REP-117's -inf), or
at a dropout (probability ``dropout_probability``, stream ``lidar.dropout``; REP-117's NaN). Intensity
is a calibrated reflectivity on the Velodyne scale (0-100 for diffuse surfaces):
``100 rho cos(incidence)``, with rho the surface's ``reflectivity`` by label (ground, box, cylinder,
building, person) and the incidence angle between the ray and the face normal (Lambert's cosine; the
range falloff is taken as calibrated out, as the Velodyne "calibrated reflectivity" is).
Points: reading x the ray's unit direction in the sensor frame; ``ring`` numbers the beams by
ascending elevation from 0 (the Velodyne driver's convention, for every model).

A vehicle that is invalid (or has a non-finite state) during any tick of a sweep gets no cloud for
that sweep. Noise draws do not depend on the states or validity (same seed, same clouds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import (
    R_FLU_FRD,
    Array,
    dcm_from_state,
    dcm_ned_to_body,
    interpolate_pose,
    wrap_angle,
)
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import TICK_NS
from qrsim_ros.core.common.validation import (
    ConfigError,
    finite,
    flag,
    set_frozen_field,
    shape,
    single_non_negative,
)
from qrsim_ros.core.vehicles.pelican import STATE_POSE, STATE_POSITION_NED
from qrsim_ros.core.world.scene import LABELS, Scene

#: Name of the range noise streams (one per vehicle) and of the dropout streams.
NOISE_STREAM = "lidar"
DROPOUT_STREAM = "lidar.dropout"

#: Status of a ray: a return, nothing hit / beyond the range (REP-117 +inf), closer than the minimum
#: (-inf), a dropout (NaN), not measured (the vehicle was invalid).
OK, NO_RETURN, TOO_CLOSE, DROPOUT, NOT_MEASURED = range(5)

#: Scale of the intensity (the Velodyne calibrated reflectivity: 0-100 for diffuse reflectors).
INTENSITY_SCALE = 100.0

#: One point of a cloud, in the layout of the Velodyne ROS driver's XYZIRT cloud (packed, little endian).
POINT_DTYPE = np.dtype({"names": ["x", "y", "z", "intensity", "ring", "time"],
                        "formats": ["<f4", "<f4", "<f4", "<f4", "<u2", "<f4"],
                        "offsets": [0, 4, 8, 12, 16, 18], "itemsize": 22})

_NS = 1e9

#: The surfaces a reflectivity is given for: the scene's face labels, in their order.
SURFACES = LABELS


@dataclass(frozen=True)
class LidarModelSpec:
    """A real sensor's geometry, timing and limits (see the module docstring for the sources).

    elevations_deg: beam elevations [deg] in firing order within a column. fire_spacing_s: time between
    successive beams of a column [s] (0: all at once). cycle_s: a fixed firing cycle [s] (Velodyne: the
    columns per sweep follow from the rate); columns: the column counts a user may choose (the first is
    the default; Ouster lidar modes); step_deg with fov_deg: a planar scanner's step and field [deg].
    rate_hz: default rate; rates_hz: (min, max) allowed, or choices when ``rate_choices``.
    max_points_per_s: a limit on columns x rate (Ouster). direction: +1 counter-clockwise seen from
    above, -1 clockwise. start_azimuth_deg: the first column's azimuth. planar: a LaserScan sensor.
    """

    name: str
    description: str
    elevations_deg: tuple[float, ...]
    fire_spacing_s: float
    rate_hz: float
    rates_hz: tuple[float, ...]
    rate_choices: bool
    min_range_m: float
    max_range_m: float
    sigma_m: float
    direction: int
    start_azimuth_deg: float
    cycle_s: float | None = None
    columns: tuple[int, ...] | None = None
    max_columns_x_rate: float | None = None
    step_deg: float | None = None
    fov_deg: float = 360.0
    planar: bool = False


_VLP16 = (-15.0, 1.0, -13.0, 3.0, -11.0, 5.0, -9.0, 7.0, -7.0, 9.0, -5.0, 11.0, -3.0, 13.0, -1.0, 15.0)
_HDL32 = (-30.67, -9.33, -29.33, -8.00, -28.00, -6.67, -26.67, -5.33, -25.33, -4.00, -24.00, -2.67,
          -22.67, -1.33, -21.33, 0.00, -20.00, 1.33, -18.67, 2.67, -17.33, 4.00, -16.00, 5.33,
          -14.67, 6.67, -13.33, 8.00, -12.00, 9.33, -10.67, 10.67)

#: The sensors a scenario can name (``model``).
MODELS: dict[str, LidarModelSpec] = {s.name: s for s in (
    LidarModelSpec("vlp16", "Velodyne VLP-16", _VLP16, 2.304e-6, 10.0, (5.0, 20.0), False,
                   0.9, 100.0, 0.03, -1, 180.0, cycle_s=55.296e-6),
    LidarModelSpec("hdl32e", "Velodyne HDL-32E", _HDL32, 1.152e-6, 10.0, (5.0, 20.0), False,
                   0.9, 100.0, 0.02, -1, 180.0, cycle_s=46.08e-6),
    LidarModelSpec("os1_64", "Ouster OS1-64", tuple(np.linspace(22.5, -22.5, 64).round(6).tolist()),
                   0.0, 10.0, (10.0, 20.0), True, 0.5, 120.0, 0.03, -1, 180.0,
                   columns=(1024, 512, 2048), max_columns_x_rate=20480.0),
    LidarModelSpec("utm30lx", "Hokuyo UTM-30LX", (0.0,), 0.0, 40.0, (40.0,), True,
                   0.1, 30.0, 0.03, +1, -135.0, step_deg=0.25, fov_deg=270.0, planar=True),
)}

#: Default reflectivity by surface (SURFACES order: ground, box, cylinder, building, person).
DEFAULT_REFLECTIVITY = (0.25, 0.5, 0.3, 0.6, 0.4)


@dataclass(frozen=True)
class LidarParams:
    """One lidar per vehicle (see the module docstring). None: the model's data-sheet value.

    model: a key of MODELS. rate_hz: sweeps per second (Velodyne 5-20, Ouster 10 or 20, Hokuyo 40).
    columns: columns per sweep (Ouster lidar modes 512/1024/2048 only; the others follow from the rate).
    sigma_m: range noise standard deviation [m]. dropout_probability: chance a ray gives no return.
    min_range_m / max_range_m: measurable range [m]. mount_position_m: the sensor's origin in the body
    FRD frame [m] (default 10 cm above the centre). mount_rpy_rad: its ZYX roll, pitch, yaw relative to
    the body [rad]. organized: keep every ray in a rings x columns cloud (no-return points NaN) rather
    than a list of returns. cut_azimuth_rad: where a spinning sweep starts in the sensor frame (the
    Velodyne driver's cut angle) [rad]. reflectivity: rho per surface label (ground, box, cylinder,
    building, person), in [0, 1].
    """

    model: str = "vlp16"
    rate_hz: float | None = None
    columns: int | None = None
    sigma_m: float | None = None
    dropout_probability: float = 0.0
    min_range_m: float | None = None
    max_range_m: float | None = None
    mount_position_m: tuple[float, float, float] = (0.0, 0.0, -0.1)
    mount_rpy_rad: tuple[float, float, float] = (0.0, 0.0, 0.0)
    organized: bool = False
    cut_azimuth_rad: float | None = None
    reflectivity: tuple[float, float, float, float, float] = DEFAULT_REFLECTIVITY

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ConfigError(f"lidar.model={self.model!r} must be one of {', '.join(sorted(MODELS))}")
        spec = MODELS[self.model]
        rate = spec.rate_hz if self.rate_hz is None else finite("lidar.rate_hz", self.rate_hz)
        if spec.rate_choices and not any(abs(rate - r) < 1e-9 for r in spec.rates_hz):
            raise ConfigError(f"lidar.rate_hz={rate!r} must be one of {list(spec.rates_hz)} for {self.model}")
        if not spec.rate_choices and not spec.rates_hz[0] <= rate <= spec.rates_hz[1]:
            raise ConfigError(f"lidar.rate_hz={rate!r} must be in [{spec.rates_hz[0]}, {spec.rates_hz[1]}] "
                              f"for {self.model}")
        set_frozen_field(self, "rate_hz", float(rate))
        if spec.columns is None:
            if self.columns is not None:
                raise ConfigError(f"lidar.columns: {self.model} has no column modes (its columns follow "
                                  "from rate_hz)")
        else:
            cols = spec.columns[0] if self.columns is None else self.columns
            if cols not in spec.columns:
                raise ConfigError(f"lidar.columns={cols!r} must be one of {sorted(spec.columns)} for "
                                  f"{self.model}")
            if spec.max_columns_x_rate is not None and cols * rate > spec.max_columns_x_rate + 1e-6:
                raise ConfigError(f"lidar.columns={cols} at rate_hz={rate} is not a mode of {self.model} "
                                  f"(columns x rate <= {spec.max_columns_x_rate:g})")
            set_frozen_field(self, "columns", int(cols))
        sigma = spec.sigma_m if self.sigma_m is None else self.sigma_m
        set_frozen_field(self, "sigma_m", single_non_negative("lidar.sigma_m", sigma))
        p = finite("lidar.dropout_probability", self.dropout_probability)
        if not 0.0 <= p < 1.0:
            raise ConfigError(f"lidar.dropout_probability={p!r} must be in [0, 1)")
        lo = finite("lidar.min_range_m", spec.min_range_m if self.min_range_m is None else self.min_range_m)
        hi = finite("lidar.max_range_m", spec.max_range_m if self.max_range_m is None else self.max_range_m)
        if not 0.0 <= lo < hi:
            raise ConfigError(f"lidar: min_range_m={lo!r} and max_range_m={hi!r} must satisfy "
                              "0 <= min_range_m < max_range_m")
        set_frozen_field(self, "min_range_m", lo)
        set_frozen_field(self, "max_range_m", hi)
        for name in ("mount_position_m", "mount_rpy_rad"):
            set_frozen_field(self, name, tuple(shape(f"lidar.{name}", getattr(self, name), (3,)).tolist()))
        set_frozen_field(self, "organized", flag("lidar.organized", self.organized))
        if self.cut_azimuth_rad is not None:
            if spec.planar:
                raise ConfigError(f"lidar.cut_azimuth_rad: {self.model} is a planar scanner (its scan "
                                  f"runs from {spec.start_azimuth_deg} deg)")
            finite("lidar.cut_azimuth_rad", self.cut_azimuth_rad)
        refl = shape("lidar.reflectivity", self.reflectivity, (len(SURFACES),))
        if np.any(refl < 0) or np.any(refl > 1):
            raise ConfigError(f"lidar.reflectivity={refl.tolist()!r} must be {len(SURFACES)} values in "
                              f"[0, 1] ({', '.join(SURFACES)})")
        set_frozen_field(self, "reflectivity", tuple(refl.tolist()))

    @property
    def spec(self) -> LidarModelSpec:
        return MODELS[self.model]

    @property
    def period_s(self) -> float:
        assert self.rate_hz is not None
        return 1.0 / self.rate_hz


def mount_rotation(params: LidarParams) -> Array:
    """The 3 x 3 matrix taking a vector in the sensor frame (x forward, y left, z up) to the body FRD
    frame: the sensor's FRD axes are ``dcm_ned_to_body(roll, pitch, yaw)`` of the body's, and its frame
    is their FLU form."""
    r_sb = dcm_ned_to_body(*params.mount_rpy_rad)  # body FRD -> sensor FRD
    return r_sb.T @ R_FLU_FRD


@dataclass(frozen=True)
class RayTable:
    """Every ray of one sweep, in time order (computed once per sensor).

    time_s: time since the sweep's first ray [s]; ring: beam index by ascending elevation; column:
    column index; azimuth_rad, elevation_rad: direction in the sensor frame; direction: unit vectors in
    the sensor frame (R, 3); direction_body: the same in the body FRD frame. rings, columns: the sweep's
    size. column_period_s: time between columns [s]; azimuth_step_rad: the azimuth from one column to
    the next [rad] (negative for a clockwise spin).
    """

    time_s: Array
    time_ns: Array
    ring: NDArray[np.uint16]
    column: NDArray[np.int64]
    azimuth_rad: Array
    elevation_rad: Array
    direction: Array
    direction_body: Array
    rings: int
    columns: int
    column_period_s: float
    azimuth_step_rad: float

    @classmethod
    def build(cls, params: LidarParams) -> RayTable:
        spec = params.spec
        period = params.period_s
        if spec.cycle_s is not None:  # a fixed firing cycle: the faster the spin, the fewer columns
            t_col = spec.cycle_s
            columns = math.floor(period / t_col + 1e-9)
        elif spec.planar:
            assert spec.step_deg is not None
            t_col = period * spec.step_deg / 360.0
            columns = round(spec.fov_deg / spec.step_deg) + 1
        else:
            assert params.columns is not None
            columns = int(params.columns)
            t_col = period / columns
        elev = np.radians(np.asarray(spec.elevations_deg, float))
        fire = np.arange(len(elev))
        ring_of_beam = np.argsort(np.argsort(elev, kind="stable"), kind="stable").astype(np.uint16)
        t = (np.arange(columns)[:, None] * t_col + fire[None, :] * spec.fire_spacing_s).ravel()
        col = np.repeat(np.arange(columns), len(elev))
        beam = np.tile(fire, columns)
        order = np.argsort(t, kind="stable")
        t, col, beam = t[order], col[order], beam[order]
        start = (math.radians(spec.start_azimuth_deg) if params.cut_azimuth_rad is None
                 else float(params.cut_azimuth_rad))
        az = wrap_angle(start + spec.direction * 2.0 * math.pi * t / period)
        el = elev[beam]
        d = np.column_stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        return cls(time_s=t, time_ns=t * _NS, ring=ring_of_beam[beam], column=col, azimuth_rad=az,
                   elevation_rad=el, direction=d, direction_body=d @ mount_rotation(params).T,
                   rings=len(elev), columns=columns, column_period_s=t_col,
                   azimuth_step_rad=spec.direction * 2.0 * math.pi * t_col / period)

    @property
    def size(self) -> int:
        return len(self.time_s)


class _Sweep:
    """One sweep in progress for every vehicle (the per-ray readings as they are cast)."""

    def __init__(self, n: int, rays: int) -> None:
        self.range_m = np.full((n, rays), np.nan)
        self.intensity = np.zeros((n, rays), np.float32)
        self.status = np.full((n, rays), NOT_MEASURED, np.int8)
        self.ok = np.ones(n, bool)
        self.index = 0
        self.next_ray = 0

    def start(self, index: int) -> None:
        self.range_m.fill(np.nan)
        self.intensity.fill(0.0)
        self.status.fill(NOT_MEASURED)
        self.ok.fill(True)
        self.index = index
        self.next_ray = 0


class Lidar:
    """A lidar of ``params.model`` on each of N vehicles in ``scene`` (see the module docstring)."""

    def __init__(self, num_vehicles: int, params: LidarParams | None, streams: RandomStreams | None,
                 scene: Scene) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        self.params = params if params is not None else LidarParams()
        self.num_vehicles = n = int(num_vehicles)
        self.scene = scene
        self.rays = RayTable.build(self.params)
        streams = streams if streams is not None else RandomStreams(0)
        self._noise = streams.per_vehicle(NOISE_STREAM, n)
        self._drop = streams.per_vehicle(DROPOUT_STREAM, n)
        self._reflectivity = np.asarray(self.params.reflectivity, float)
        self._mount = np.asarray(self.params.mount_position_m, float)
        self._sweeps = (_Sweep(n, self.rays.size), _Sweep(n, self.rays.size))
        self._done: _Sweep | None = None
        self._out = _Sweep(n, self.rays.size)
        self.new_sweep = False
        self.sweep_index = -1
        self.sweep_start_ns = 0
        self.complete = np.zeros(n, bool)
        self._current = 0
        self._t_ns = 0
        self._k = 0
        self._x = np.full((n, 13), np.nan)

    # --- the schedule ----------------------------------------------------------------------------------
    def sweep_start(self, index: int) -> int:
        """Start of sweep ``index`` [ns since the episode's tick 0]."""
        return round(index * _NS / float(self.params.rate_hz))

    @property
    def period_s(self) -> float:
        return self.params.period_s

    # --- the model interface ---------------------------------------------------------------------------
    def reset(self, x: ArrayLike) -> None:
        """A new episode at tick 0 with the initial states (N, 13): sweep 0 starts now (its rays at time
        0 are cast from these states)."""
        x = np.atleast_2d(np.asarray(x, float))
        for s in self._sweeps:
            s.start(0)
        self._current = 0
        self.new_sweep = False
        self.complete = np.zeros(self.num_vehicles, bool)
        self.sweep_index = -1
        self._k = 0
        self._t_ns = -1  # the interval (-1 ns, 0]: the rays at time 0
        self._x = x.copy()
        self._advance(0, x, x, None)
        self._t_ns = 0

    def step(self, k: int, x: ArrayLike, valid: ArrayLike | None = None) -> bool:
        """Cast the rays whose times fall between the last tick handled and tick k, from the pose
        interpolated between their states; True when a sweep was completed (``new_sweep``)."""
        self.new_sweep = False
        if k <= self._k:
            return False
        x = np.atleast_2d(np.asarray(x, float))
        t_ns = int(k) * TICK_NS
        self._advance(t_ns, self._x, x, None if valid is None else np.asarray(valid, bool))
        self._x = x.copy()
        self._k = int(k)
        self._t_ns = t_ns
        return self.new_sweep

    # --- readings of the latest complete sweep -------------------------------------------------------
    @property
    def range_m(self) -> Array:
        """Readings of the latest sweep (N, R) [m] in ray order (``rays``); NaN without a return."""
        return self._out.range_m.copy()

    @property
    def status(self) -> NDArray[np.int8]:
        """Status of every ray of the latest sweep (N, R): OK, NO_RETURN, TOO_CLOSE, DROPOUT, NOT_MEASURED."""
        return self._out.status.copy()

    @property
    def intensity(self) -> NDArray[np.float32]:
        """Intensity of every ray of the latest sweep (N, R) (0 without a return)."""
        return self._out.intensity.copy()

    def points(self, vehicle: int, organized: bool | None = None) -> NDArray[np.void]:
        """The latest sweep's cloud of ``vehicle`` as POINT_DTYPE records in the sensor frame: the
        returns in time order, or (``organized``, default the parameter) rings x columns with NaN
        coordinates where there is no return (row = ring, column = column)."""
        organized = self.params.organized if organized is None else organized
        rays = self.rays
        r = self._out.range_m[vehicle]
        xyz = rays.direction * r[:, None]
        values = {"x": xyz[:, 0], "y": xyz[:, 1], "z": xyz[:, 2], "intensity": self._out.intensity[vehicle],
                  "ring": rays.ring, "time": rays.time_s}
        if organized:
            out = np.zeros((rays.rings, rays.columns), POINT_DTYPE)
            rows, cols = rays.ring.astype(np.int64), rays.column
            for name, v in values.items():
                out[name][rows, cols] = v
            return out
        sel = np.flatnonzero(self._out.status[vehicle] == OK)
        out = np.zeros(len(sel), POINT_DTYPE)
        for name, v in values.items():
            out[name] = v[sel]
        return out

    def scan(self, vehicle: int) -> tuple[Array, NDArray[np.float32]]:
        """The latest sweep of a planar scanner as LaserScan ranges and intensities, in angle order from
        the first step: the reading, +inf for no return (or beyond the range), -inf closer than the
        minimum, NaN for a dropout or a ray not measured (REP-117)."""
        out = self._out
        r = out.range_m[vehicle].copy()
        st = out.status[vehicle]
        r[st == NO_RETURN] = np.inf
        r[st == TOO_CLOSE] = -np.inf
        r[(st == DROPOUT) | (st == NOT_MEASURED)] = np.nan
        order = np.argsort(self.rays.column, kind="stable")
        return r[order], out.intensity[vehicle][order].copy()

    # --- casting ---------------------------------------------------------------------------------------
    def _advance(self, t_ns: int, x0: Array, x1: Array, valid: NDArray[np.bool_] | None) -> None:
        """Cast the rays with times in (self._t_ns, t_ns] from states interpolated between x0 (at
        self._t_ns, or t_ns itself at a reset) and x1 (at t_ns); finish the sweeps that end."""
        rays = self.rays
        pieces: list[tuple[_Sweep, int, int, int]] = []  # (sweep, first ray, end ray, sweep start ns)
        while True:
            sweep = self._sweeps[self._current]
            start_ns = self.sweep_start(sweep.index)
            end = int(np.searchsorted(rays.time_ns, t_ns - start_ns, side="right"))
            if end > sweep.next_ray:
                pieces.append((sweep, sweep.next_ray, end, start_ns))
                sweep.next_ray = end
            if sweep.next_ray < rays.size:
                break
            # the sweep is complete: the next one starts (it may have rays in this interval too)
            self._done = sweep
            self._current = 1 - self._current
            self._sweeps[self._current].start(sweep.index + 1)
        if pieces:
            self._cast(pieces, t_ns, x0, x1, valid)
        if self._done is not None:
            self._finish(self._done)
            self._done = None

    def _cast(self, pieces: list[tuple[_Sweep, int, int, int]], t_ns: int, x0: Array, x1: Array,
              valid: NDArray[np.bool_] | None) -> None:
        rays = self.rays
        p = self.params
        n = self.num_vehicles
        idx = np.concatenate([np.arange(a, b) for _, a, b, _ in pieces])
        abs_ns = np.concatenate([start + rays.time_ns[a:b] for _, a, b, start in pieces])
        m = len(idx)
        span = t_ns - self._t_ns
        f = np.clip((abs_ns - self._t_ns) / span, 0.0, 1.0) if span > 0 else np.ones(m)
        ok = np.all(np.isfinite(x0[:, STATE_POSE]), axis=1) & np.all(np.isfinite(x1[:, STATE_POSE]), axis=1)
        if valid is not None:
            ok &= valid
        live = np.flatnonzero(ok)
        # draws first, for every vehicle, in a fixed amount per tick (independent of the states)
        eta = np.stack([g.standard_normal(m) for g in self._noise])
        u = np.stack([g.random(m) for g in self._drop])
        rng = np.full((n, m), np.inf)
        inten = np.zeros((n, m), np.float32)
        if len(live):
            # the pose of every vehicle at every ray's time (L, m, 6)
            pose = interpolate_pose(x0[live, None, STATE_POSE], x1[live, None, STATE_POSE], f[None, :])
            dcm = dcm_from_state(pose)  # NED -> body, (L, m, 3, 3)
            d_ned = np.einsum("lmji,mj->lmi", dcm, rays.direction_body[idx])
            o_ned = pose[..., STATE_POSITION_NED] + np.einsum("lmji,j->lmi", dcm, self._mount)
            hits = self.scene.cast(o_ned.reshape(-1, 3), d_ned.reshape(-1, 3), p.max_range_m)
            rng[live] = hits.range_m.reshape(len(live), m)
            hit = hits.hit
            cos_inc = np.abs(np.einsum("ij,ij->i", hits.normal, d_ned.reshape(-1, 3)))
            refl = np.zeros(len(hit))
            refl[hit] = self._reflectivity[self.scene.face_label[hits.face[hit]]]
            inten[live] = (INTENSITY_SCALE * refl * cos_inc).reshape(len(live), m)
        reading = rng + p.sigma_m * eta
        status = np.full((n, m), OK, np.int8)
        status[~np.isfinite(rng) | (reading > p.max_range_m)] = NO_RETURN
        status[np.isfinite(rng) & (reading < p.min_range_m)] = TOO_CLOSE
        status[u < p.dropout_probability] = DROPOUT
        status[~ok] = NOT_MEASURED
        reading = np.where(status == OK, reading, np.nan)
        inten = np.where(status == OK, inten, np.float32(0.0)).astype(np.float32)
        col = 0
        for sweep, a, b, _ in pieces:
            w = b - a
            sweep.range_m[:, a:b] = reading[:, col:col + w]
            sweep.intensity[:, a:b] = inten[:, col:col + w]
            sweep.status[:, a:b] = status[:, col:col + w]
            sweep.ok &= ok
            col += w

    def _finish(self, sweep: _Sweep) -> None:
        out = self._out
        out.range_m[:] = sweep.range_m
        out.intensity[:] = sweep.intensity
        out.status[:] = sweep.status
        out.ok[:] = sweep.ok
        out.index = sweep.index
        self.complete = sweep.ok.copy()
        self.sweep_index = sweep.index
        self.sweep_start_ns = self.sweep_start(sweep.index)
        self.new_sweep = True

    @property
    def sweep_start_s(self) -> float:
        """Time of the latest sweep's first ray [s since the episode's tick 0]."""
        return self.sweep_start_ns / _NS

"""AHARS of the AscTec Pelican: accelerometer, gyroscope, orientation estimator, altimeter (spec 3.1).

Four sensors, each vectorised over N vehicles, each with its own period ``dt_s`` (a multiple of the
0.02 s base tick), its own ``on`` flag and its own named random streams, and a composite ``Ahars``
(QRSim's ``AHARSPelican``) that steps them together and assembles QRSim's 11 AHARS outputs.

Models (per vehicle, per axis, per update of the sensor; eta ~ N(0, 1)):

- Accelerometer (``AccelerometerG``): ``meas = a + bias + SIGMA eta`` where ``a`` is the Pelican's
  body-frame (FRD) specific force ``PelicanFleet.accel_body`` [m/s^2] (about [0, 0, -9.81] at hover).
- Gyroscope (``GyroscopeG``): ``meas = [p q r] + bias + SIGMA eta`` [rad/s].
- Orientation estimator (``OrientationEstimatorGM``): an Ornstein-Uhlenbeck error per Euler angle,
  ``n <- n exp(-BETA dt) + SIGMA sqrt((1 - exp(-2 BETA dt)) / (2 BETA)) eta``, ``meas = [phi theta psi] + n``
  [rad] (angles are not wrapped, as in QRSim and as in the true state).
- Altimeter (``AltimeterGM``): ``n <- n exp(-TAU dt) + SIGMA eta`` with QRSim's ``TAU`` used as a *rate*
  [1/s] (hence the parameter name ``decay_rate_per_s``), height above the ground reference
  ``h = ground_z_ned_m - pz + n`` [m, up] and vertical speed ``(h - h_prev) / dt`` [m/s, up].
  The noiseless altimeter outputs the true height and ``-(D^T [u v w])_z`` (spec 3.1, ``Altimeter.m``).

Off (``on=False``, or ``Ahars`` with ``on=False``) is QRSim's noiseless base class: the true value,
sampled and held at the sensor's rate, no random draws at all.

Random streams (``RandomStreams`` names, one Generator per vehicle each): ``<name>`` for the per-update
noise, ``<name>.reset`` for reset draws (spin-up counts and spin-up noise, the reset noise sample),
``<name>.bias`` / ``<name>.bias.reset`` for the optional bias random walk and the turn-on bias. Default
names: ``accelerometer``, ``gyroscope``, ``orientation_estimator``, ``altimeter``. A reset of one
vehicle draws only from that vehicle's reset streams, so it never changes another vehicle's noise.

Timing: ``step(k, ...)`` with the base tick counter k >= 1 (t = 0.02 k s) updates on ticks where
``k % ticks_per_update == 0`` and returns whether it did; outputs are held between updates.
``reset(x, vehicles)`` re-initialises vehicles from their true states (QRSim's ``setState`` + ``reset``).

Deliberate differences from QRSim (spec 10.6, 10.7):
- After a reset the accelerometer reads the specific force of a vehicle at rest in its attitude,
  ``D [0 0 -g]`` (plus one noise sample), not ~0 until its first update.
- The altimeter's initial vertical speed is ``-(NED down velocity)`` (QRSim forgot the sign).
- Optional gyro/accelerometer bias random walk and turn-on bias (REP-145 users expect them); both
  default to 0, which leaves QRSim's numbers unchanged (no draws at all).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array, body_to_ned, dcm_from_state, ned_to_body
from qrsim_ros.core.common.noise import GaussMarkov, PerVehicleNormals, ou_coefficients
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ConfigError, finite, non_negative, positive, ticks_per_update
from qrsim_ros.core.vehicles.pelican import G_MS2

#: QRSim spins the Gauss-Markov processes up for randi(1..1000) iterations at every reset (spec 3.1).
SPIN_UP_MAX_STEPS = 1000

#: Column ranges of the true state X (N, 13) (spec 2.1).
_ANGLES = slice(3, 6)
_BODY_VELOCITY = slice(6, 9)
_BODY_RATES = slice(9, 12)


# --- parameter helpers ---------------------------------------------------------------------------

def _flag(name: str, value: object) -> bool:
    """A boolean switch; also accepts 0/1 (QRSim configs and YAML write ``on: 1``)."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
        return bool(value)
    raise ConfigError(f"{name}={value!r} must be a boolean (true/false or 1/0)")


def _per_axis(name: str, value: ArrayLike, strictly_positive: bool = False) -> tuple[float, float, float]:
    """A scalar or 3-vector of finite values >= 0 (> 0 if ``strictly_positive``), as an (x, y, z) tuple."""
    a = positive(name, value) if strictly_positive else non_negative(name, value)
    if a.ndim == 0:
        a = np.full(3, float(a))
    if a.shape != (3,):
        raise ConfigError(f"{name}={np.asarray(value).tolist()!r} must be a scalar or 3 values (x, y, z)")
    return (float(a[0]), float(a[1]), float(a[2]))


def _scalar_non_negative(name: str, value: float) -> float:
    a = non_negative(name, value)
    if a.ndim != 0:
        raise ConfigError(f"{name}={np.asarray(value).tolist()!r} must be a single number")
    return float(a)


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)  # normalising a frozen dataclass field in __post_init__


# --- parameters ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class AccelerometerParams:
    """Accelerometer (spec 3.1, ``pelican_config.m`` defaults).

    on: noisy model if true, else the true value (sample-and-hold).
    dt_s: update period [s], multiple of 0.02.
    sigma_ms2: white-noise std per axis (scalar or x, y, z) [m/s^2].
    bias_random_walk_sigma: bias random-walk intensity [m/s^2/sqrt(s)] (0 = no walk; not in QRSim).
    initial_bias_sigma: std of the turn-on bias drawn at each reset [m/s^2] (0 = none; not in QRSim).
    """

    on: bool = True
    dt_s: float = 0.02
    sigma_ms2: float | tuple[float, float, float] = 0.0025
    bias_random_walk_sigma: float = 0.0
    initial_bias_sigma: float = 0.0

    def __post_init__(self) -> None:
        _set(self, "on", _flag("accelerometer.on", self.on))
        ticks_per_update("accelerometer.dt_s", self.dt_s)
        _set(self, "sigma_ms2", _per_axis("accelerometer.sigma_ms2", self.sigma_ms2))
        _set(self, "bias_random_walk_sigma",
             _scalar_non_negative("accelerometer.bias_random_walk_sigma", self.bias_random_walk_sigma))
        _set(self, "initial_bias_sigma",
             _scalar_non_negative("accelerometer.initial_bias_sigma", self.initial_bias_sigma))


@dataclass(frozen=True)
class GyroscopeParams:
    """Gyroscope (spec 3.1, ``pelican_config.m`` defaults).

    on, dt_s: as for the accelerometer.
    sigma_rads: white-noise std per axis [rad/s].
    bias_random_walk_sigma: bias random-walk intensity [rad/s/sqrt(s)] (0 = none; not in QRSim).
    initial_bias_sigma: std of the turn-on bias drawn at each reset [rad/s] (0 = none; not in QRSim).
    """

    on: bool = True
    dt_s: float = 0.02
    sigma_rads: float | tuple[float, float, float] = 0.0002
    bias_random_walk_sigma: float = 0.0
    initial_bias_sigma: float = 0.0

    def __post_init__(self) -> None:
        _set(self, "on", _flag("gyroscope.on", self.on))
        ticks_per_update("gyroscope.dt_s", self.dt_s)
        _set(self, "sigma_rads", _per_axis("gyroscope.sigma_rads", self.sigma_rads))
        _set(self, "bias_random_walk_sigma",
             _scalar_non_negative("gyroscope.bias_random_walk_sigma", self.bias_random_walk_sigma))
        _set(self, "initial_bias_sigma",
             _scalar_non_negative("gyroscope.initial_bias_sigma", self.initial_bias_sigma))


@dataclass(frozen=True)
class OrientationEstimatorParams:
    """Orientation estimator: Ornstein-Uhlenbeck error per Euler angle (spec 3.1).

    beta_per_s: mean-reversion rate BETA [1/s] (> 0), per axis or scalar.
    sigma: OU diffusion SIGMA [rad/sqrt(s)]; stationary std is SIGMA / sqrt(2 BETA) (3.54e-3 rad default).
    """

    on: bool = True
    dt_s: float = 0.02
    beta_per_s: float | tuple[float, float, float] = 1.0 / 100.0
    sigma: float | tuple[float, float, float] = 0.0005

    def __post_init__(self) -> None:
        _set(self, "on", _flag("orientation_estimator.on", self.on))
        ticks_per_update("orientation_estimator.dt_s", self.dt_s)
        beta = _per_axis("orientation_estimator.beta_per_s", self.beta_per_s, strictly_positive=True)
        _set(self, "beta_per_s", beta)
        _set(self, "sigma", _per_axis("orientation_estimator.sigma", self.sigma))


@dataclass(frozen=True)
class AltimeterParams:
    """Altimeter: first-order Gauss-Markov height error (spec 3.1).

    decay_rate_per_s: QRSim's ``TAU``, which QRSim uses as a *rate*: coefficient exp(-rate dt) [1/s, > 0].
        The default 300 makes the error practically white (coefficient 0.0025 at 0.02 s).
    sigma_m: driving-noise std per update SIGMA [m].
    ground_z_ned_m: NED z of the ground the height is measured from [m] (QRSim: 0).
    """

    on: bool = True
    dt_s: float = 0.02
    decay_rate_per_s: float = 300.0
    sigma_m: float = 0.003
    ground_z_ned_m: float = 0.0

    def __post_init__(self) -> None:
        _set(self, "on", _flag("altimeter.on", self.on))
        ticks_per_update("altimeter.dt_s", self.dt_s)
        rate = positive("altimeter.decay_rate_per_s", self.decay_rate_per_s)
        if rate.ndim != 0:
            raise ConfigError(f"altimeter.decay_rate_per_s={self.decay_rate_per_s!r} must be a single number")
        _set(self, "decay_rate_per_s", float(rate))
        _set(self, "sigma_m", _scalar_non_negative("altimeter.sigma_m", self.sigma_m))
        _set(self, "ground_z_ned_m", finite("altimeter.ground_z_ned_m", self.ground_z_ned_m))


@dataclass(frozen=True)
class AharsParams:
    """The four AHARS sensors; ``on=False`` forces all four noiseless (spec 3.1, ``AHARSPelican.m:41-46``)."""

    on: bool = True
    accelerometer: AccelerometerParams = field(default_factory=AccelerometerParams)
    gyroscope: GyroscopeParams = field(default_factory=GyroscopeParams)
    orientation_estimator: OrientationEstimatorParams = field(default_factory=OrientationEstimatorParams)
    altimeter: AltimeterParams = field(default_factory=AltimeterParams)

    def __post_init__(self) -> None:
        _set(self, "on", _flag("ahars.on", self.on))
        expected = {"accelerometer": AccelerometerParams, "gyroscope": GyroscopeParams,
                    "orientation_estimator": OrientationEstimatorParams, "altimeter": AltimeterParams}
        for name, cls in expected.items():
            value = getattr(self, name)
            if not isinstance(value, cls):
                raise ConfigError(f"ahars.{name} must be a {cls.__name__}, got {type(value).__name__}")


@dataclass(frozen=True)
class AharsVariances:
    """Per-axis error variances of the AHARS outputs (diagonals for sensor_msgs/Imu covariances).

    orientation: stationary OU variance SIGMA^2 / (2 BETA) per Euler angle [rad^2].
    angular_velocity: gyro SIGMA^2 (+ turn-on bias variance) [rad^2/s^2].
    linear_acceleration: accelerometer SIGMA^2 (+ turn-on bias variance) [m^2/s^4].
    height: stationary altimeter error variance SIGMA^2 / (1 - a^2), a = exp(-rate dt) [m^2].
    vertical_speed: variance of the finite-difference error, 2 var_h (1 - a) / dt^2 [m^2/s^2].
    All zero for sensors that are off. The bias random walk's growth after reset is not included.
    Diagonal variances are unchanged by the FRD -> FLU axis flips.
    """

    orientation: Array
    angular_velocity: Array
    linear_acceleration: Array
    height: float
    vertical_speed: float


# --- common machinery ----------------------------------------------------------------------------

def _check_tick(k: int) -> None:
    if k < 1:
        raise ValueError(f"tick k must be >= 1 (k = 1 is t = {BASE_DT_S} s), got {k}")


def _reset_rows(x: ArrayLike, vehicles: ArrayLike | None, num_vehicles: int, min_cols: int
                ) -> tuple[NDArray[np.intp], Array]:
    """Vehicle indices and their rows of ``x``.

    ``x`` is either the whole fleet's array (N rows, indexed by vehicle) or one row per vehicle in
    ``vehicles`` (as ``PelicanFleet.set_state`` takes it); N rows always means the whole fleet.
    """
    idx = np.arange(num_vehicles) if vehicles is None else np.atleast_1d(np.asarray(vehicles, dtype=np.intp))
    if idx.ndim != 1 or np.any(idx < 0) or np.any(idx >= num_vehicles):
        raise ValueError(f"vehicles must be indices in [0, {num_vehicles}), got {vehicles!r}")
    arr = np.atleast_2d(np.asarray(x, float))
    if arr.ndim != 2 or arr.shape[1] < min_cols:
        raise ValueError(f"states must have shape (rows, >={min_cols}), got {arr.shape}")
    if arr.shape[0] == num_vehicles:
        return idx, arr[idx]
    if arr.shape[0] == idx.size:
        return idx, arr
    raise ValueError(f"got {arr.shape[0]} state rows for {idx.size} vehicles of a fleet of {num_vehicles}")


def _fleet_array(name: str, value: ArrayLike, num_vehicles: int, min_cols: int) -> Array:
    if (type(value) is np.ndarray and value.dtype == np.float64 and value.ndim == 2
            and value.shape[0] == num_vehicles and value.shape[1] >= min_cols):
        return value  # the simulator's per-tick case, without conversions
    arr = np.asarray(value, float)
    if arr.ndim == 1 and num_vehicles == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] != num_vehicles or arr.shape[1] < min_cols:
        raise ValueError(f"{name} must have shape ({num_vehicles}, >={min_cols}), got {arr.shape}")
    return arr


def _vertical_speed_up(x: Array) -> Array:
    """True vertical speed [m/s, up] = -(NED down velocity) of states (M, >=9)."""
    return -body_to_ned(dcm_from_state(x), x[:, _BODY_VELOCITY])[:, 2]


class _Sensor:
    """Rate gating and stream bookkeeping shared by the AHARS sensors."""

    def __init__(self, num_vehicles: int, dt_s: float, on: bool, name: str) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        self.num_vehicles = int(num_vehicles)
        self.stream_name = name
        self.dt_s = float(dt_s)
        self.on = bool(on)
        #: Base ticks between updates (QRSim's Steppable gating with integer ticks).
        self.ticks_per_update = ticks_per_update(f"{name}.dt_s", dt_s)

    def due(self, k: int) -> bool:
        """Whether tick ``k`` (>= 1) is an update tick of this sensor."""
        if k < 1:
            _check_tick(k)
        return k % self.ticks_per_update == 0


class _WhiteNoiseVectorSensor(_Sensor):
    """3-axis white noise plus optional bias random walk (accelerometer and gyroscope)."""

    def __init__(self, num_vehicles: int, dt_s: float, on: bool, sigma: ArrayLike,
                 bias_rw_sigma: float, initial_bias_sigma: float, streams: RandomStreams | None,
                 name: str) -> None:
        super().__init__(num_vehicles, dt_s, on, name)
        self._sigma = np.asarray(sigma, float)
        self._bias_rw = float(bias_rw_sigma) if self.on else 0.0
        self._bias_init = float(initial_bias_sigma) if self.on else 0.0
        # A random walk is a Gauss-Markov process with a = 1: b += rw sqrt(dt) eta at each update.
        self._bias = GaussMarkov(self.num_vehicles, np.ones(3), self._bias_rw * np.sqrt(self.dt_s))
        self._meas = np.zeros((self.num_vehicles, 3))
        self.reseed(streams if streams is not None else RandomStreams(0))

    def reseed(self, streams: RandomStreams) -> None:
        """Take fresh generators from ``streams`` (call ``reset`` afterwards, as after QRSim's resetSeed)."""
        n, name = self.num_vehicles, self.stream_name
        self._normals = PerVehicleNormals(streams.per_vehicle(name, n), 3) if self.on else None
        self._reset_rngs = streams.per_vehicle(f"{name}.reset", n) if self.on else []
        self._bias_normals = (PerVehicleNormals(streams.per_vehicle(f"{name}.bias", n), 3)
                              if self._bias_rw > 0 else None)
        self._bias_reset_rngs = streams.per_vehicle(f"{name}.bias.reset", n) if self._bias_init > 0 else []

    @property
    def measurement(self) -> Array:
        """Last measurement (N, 3), body FRD (a copy)."""
        return self._meas.copy()

    @property
    def bias(self) -> Array:
        """Current bias (N, 3) (zero unless the bias model is enabled) (a copy)."""
        return self._bias.state.copy()

    def variance(self) -> Array:
        """Per-axis error variance right after reset: SIGMA^2 + initial_bias_sigma^2 (0 when off)."""
        if not self.on:
            return np.zeros(3)
        return self._sigma**2 + self._bias_init**2

    def _update(self, truth: Array) -> None:
        if not self.on:
            self._meas = truth.copy()
            return
        if self._bias_normals is not None:
            self._bias.step(self._bias_normals.next())
        if self._bias_rw == 0.0 and self._bias_init == 0.0:  # no bias model: the bias is always zero
            self._meas = truth + self._sigma * self._normals.next()
        else:
            self._meas = truth + self._bias.state + self._sigma * self._normals.next()

    def _reset(self, idx: NDArray[np.intp], truth: Array) -> None:
        if not self.on:
            self._meas[idx] = truth
            return
        for row, i in enumerate(idx):
            if self._bias_init > 0:
                self._bias.state[i] = self._bias_init * self._bias_reset_rngs[i].standard_normal(3)
            else:
                self._bias.state[i] = 0.0
            # QRSim's reset adds one noise sample to the initial reading.
            eta = self._reset_rngs[i].standard_normal(3)
            self._meas[i] = truth[row] + self._bias.state[i] + self._sigma * eta


# --- the four sensors ----------------------------------------------------------------------------

class Accelerometer(_WhiteNoiseVectorSensor):
    """Body-frame (FRD) specific-force sensor [m/s^2] for N vehicles (spec 3.1, ``AccelerometerG``)."""

    def __init__(self, num_vehicles: int, params: AccelerometerParams | None = None,
                 streams: RandomStreams | None = None, stream_name: str = "accelerometer") -> None:
        self.params = params if params is not None else AccelerometerParams()
        p = self.params
        super().__init__(num_vehicles, p.dt_s, p.on, p.sigma_ms2, p.bias_random_walk_sigma,
                         p.initial_bias_sigma, streams, stream_name)

    def step(self, k: int, accel_body: ArrayLike) -> bool:
        """Measure ``accel_body`` (N, 3) (``PelicanFleet.accel_body``) if tick k is due; returns whether
        it did."""
        if not self.due(k):
            return False
        self._update(_fleet_array("accel_body", accel_body, self.num_vehicles, 3)[:, :3])
        return True

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise vehicles from true states (N or len(vehicles), >=6): the reading becomes the
        specific force at rest in the vehicle's attitude, D [0 0 -g] (plus one noise sample when on)."""
        idx, rows = _reset_rows(x, vehicles, self.num_vehicles, 6)
        at_rest = ned_to_body(dcm_from_state(rows), np.array([0.0, 0.0, -G_MS2]))
        self._reset(idx, at_rest)


class Gyroscope(_WhiteNoiseVectorSensor):
    """Body rates [p q r] sensor [rad/s] for N vehicles (spec 3.1, ``GyroscopeG``)."""

    def __init__(self, num_vehicles: int, params: GyroscopeParams | None = None,
                 streams: RandomStreams | None = None, stream_name: str = "gyroscope") -> None:
        self.params = params if params is not None else GyroscopeParams()
        p = self.params
        super().__init__(num_vehicles, p.dt_s, p.on, p.sigma_rads, p.bias_random_walk_sigma,
                         p.initial_bias_sigma, streams, stream_name)

    def step(self, k: int, x: ArrayLike) -> bool:
        """Measure the body rates of true states ``x`` (N, >=12) if tick k is due."""
        if not self.due(k):
            return False
        self._update(_fleet_array("x", x, self.num_vehicles, 12)[:, _BODY_RATES])
        return True

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise vehicles: reading = true rates (+ one noise sample and the turn-on bias when on)."""
        idx, rows = _reset_rows(x, vehicles, self.num_vehicles, 12)
        self._reset(idx, rows[:, _BODY_RATES])


class OrientationEstimator(_Sensor):
    """ZYX Euler angles [phi theta psi] with an Ornstein-Uhlenbeck error [rad] (spec 3.1,
    ``OrientationEstimatorGM``)."""

    def __init__(self, num_vehicles: int, params: OrientationEstimatorParams | None = None,
                 streams: RandomStreams | None = None, stream_name: str = "orientation_estimator") -> None:
        self.params = params if params is not None else OrientationEstimatorParams()
        p = self.params
        super().__init__(num_vehicles, p.dt_s, p.on, stream_name)
        self._beta = np.asarray(p.beta_per_s, float)
        self._sigma = np.asarray(p.sigma, float)
        a, b = ou_coefficients(self._beta, self._sigma, self.dt_s)
        self._error = GaussMarkov(self.num_vehicles, a, b)
        self._meas = np.zeros((self.num_vehicles, 3))
        self.reseed(streams if streams is not None else RandomStreams(0))

    def reseed(self, streams: RandomStreams) -> None:
        """Take fresh generators from ``streams`` (call ``reset`` afterwards)."""
        n, name = self.num_vehicles, self.stream_name
        self._normals = PerVehicleNormals(streams.per_vehicle(name, n), 3) if self.on else None
        self._reset_rngs = streams.per_vehicle(f"{name}.reset", n) if self.on else []

    @property
    def measurement(self) -> Array:
        """Last estimated Euler angles (N, 3) [rad] (a copy)."""
        return self._meas.copy()

    @property
    def error(self) -> Array:
        """Current OU error state (N, 3) [rad] (a copy)."""
        return self._error.state.copy()

    def variance(self) -> Array:
        """Stationary error variance per angle SIGMA^2 / (2 BETA) [rad^2] (0 when off)."""
        return self._sigma**2 / (2.0 * self._beta) if self.on else np.zeros(3)

    def step(self, k: int, x: ArrayLike) -> bool:
        """Estimate the attitude of true states ``x`` (N, >=6) if tick k is due."""
        if not self.due(k):
            return False
        angles = _fleet_array("x", x, self.num_vehicles, 6)[:, _ANGLES]
        if self.on:
            self._meas = angles + self._error.step(self._normals.next())
        else:
            self._meas = angles.copy()
        return True

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise vehicles: error spun up from zero for randi(1..1000) steps (reset stream)."""
        idx, rows = _reset_rows(x, vehicles, self.num_vehicles, 6)
        if self.on:
            for i in idx:
                rng = self._reset_rngs[i]
                self._error.spin_up(int(i), int(rng.integers(1, SPIN_UP_MAX_STEPS + 1)), rng)
            self._meas[idx] = rows[:, _ANGLES] + self._error.state[idx]
        else:
            self._meas[idx] = rows[:, _ANGLES]


class Altimeter(_Sensor):
    """Height above the ground reference [m, up] and vertical speed [m/s, up] (spec 3.1, ``AltimeterGM``)."""

    def __init__(self, num_vehicles: int, params: AltimeterParams | None = None,
                 streams: RandomStreams | None = None, stream_name: str = "altimeter") -> None:
        self.params = params if params is not None else AltimeterParams()
        p = self.params
        super().__init__(num_vehicles, p.dt_s, p.on, stream_name)
        self._a = float(np.exp(-p.decay_rate_per_s * self.dt_s))
        self._sigma = float(p.sigma_m)
        self._error = GaussMarkov(self.num_vehicles, [self._a], [self._sigma])
        self._height = np.zeros(self.num_vehicles)
        self._speed = np.zeros(self.num_vehicles)
        self.reseed(streams if streams is not None else RandomStreams(0))

    def reseed(self, streams: RandomStreams) -> None:
        """Take fresh generators from ``streams`` (call ``reset`` afterwards)."""
        n, name = self.num_vehicles, self.stream_name
        self._normals = PerVehicleNormals(streams.per_vehicle(name, n), 1) if self.on else None
        self._reset_rngs = streams.per_vehicle(f"{name}.reset", n) if self.on else []

    @property
    def height_m(self) -> Array:
        """Last height above the ground reference (N,) [m, up] (a copy)."""
        return self._height.copy()

    @property
    def vertical_speed_mps(self) -> Array:
        """Last vertical speed (N,) [m/s, up] (a copy)."""
        return self._speed.copy()

    @property
    def error(self) -> Array:
        """Current Gauss-Markov height error (N,) [m] (a copy)."""
        return self._error.state[:, 0].copy()

    def variances(self) -> tuple[float, float]:
        """Stationary error variances (height [m^2], vertical speed [m^2/s^2]); (0, 0) when off."""
        if not self.on:
            return 0.0, 0.0
        var_h = self._sigma**2 / (1.0 - self._a**2)
        return var_h, 2.0 * var_h * (1.0 - self._a) / self.dt_s**2

    def _true_height(self, x: Array) -> Array:
        return self.params.ground_z_ned_m - x[:, 2]

    def step(self, k: int, x: ArrayLike) -> bool:
        """Measure height and vertical speed of true states ``x`` (N, >=9) if tick k is due."""
        if not self.due(k):
            return False
        x = _fleet_array("x", x, self.num_vehicles, 9)
        if self.on:
            height = self._true_height(x) + self._error.step(self._normals.next())[:, 0]
            self._speed = (height - self._height) / self.dt_s
            self._height = height
        else:
            self._height = self._true_height(x)
            self._speed = _vertical_speed_up(x)
        return True

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise vehicles: true height and vertical speed (-(NED down velocity)), plus, when on,
        the spun-up error n and its last increment (n - n_prev) / dt (QRSim ``AltimeterGM.reset``)."""
        idx, rows = _reset_rows(x, vehicles, self.num_vehicles, 9)
        height, speed = self._true_height(rows), _vertical_speed_up(rows)
        if self.on:
            for row, i in enumerate(idx):
                rng = self._reset_rngs[i]
                steps = int(rng.integers(1, SPIN_UP_MAX_STEPS + 1))
                self._error.spin_up(int(i), steps - 1, rng)
                n_prev = float(self._error.state[i, 0])
                self._error.step_rows([i], rng.standard_normal((1, 1)))
                n = float(self._error.state[i, 0])
                height[row] += n
                speed[row] += (n - n_prev) / self.dt_s
        self._height[idx] = height
        self._speed[idx] = speed


# --- the composite -------------------------------------------------------------------------------

class Ahars:
    """QRSim's ``AHARSPelican`` for N vehicles: the four sensors stepped together (spec 3.1).

    ``step(k, x, accel_body)`` steps each sensor with its own rate gating; the outputs are the
    sensors' held measurements. ``measurement`` assembles QRSim's 11 values per vehicle.
    """

    def __init__(self, num_vehicles: int, params: AharsParams | None = None,
                 streams: RandomStreams | None = None) -> None:
        p = params if params is not None else AharsParams()
        if not p.on:  # QRSim instantiates all four as their noiseless base classes
            p = replace(p, accelerometer=replace(p.accelerometer, on=False),
                        gyroscope=replace(p.gyroscope, on=False),
                        orientation_estimator=replace(p.orientation_estimator, on=False),
                        altimeter=replace(p.altimeter, on=False))
        self.params = p
        self.num_vehicles = int(num_vehicles)
        streams = streams if streams is not None else RandomStreams(0)
        self.accelerometer = Accelerometer(num_vehicles, p.accelerometer, streams)
        self.gyroscope = Gyroscope(num_vehicles, p.gyroscope, streams)
        self.orientation_estimator = OrientationEstimator(num_vehicles, p.orientation_estimator, streams)
        self.altimeter = Altimeter(num_vehicles, p.altimeter, streams)
        #: The composite's period: the fastest sensor's (``AHARSPelican.m:126-127``).
        self.dt_s = min(s.dt_s for s in self._sensors)

    @property
    def on(self) -> bool:
        return self.params.on

    @property
    def _sensors(self) -> tuple[_Sensor, ...]:
        return (self.accelerometer, self.gyroscope, self.orientation_estimator, self.altimeter)

    def reseed(self, streams: RandomStreams) -> None:
        """Give every sensor fresh generators from ``streams`` (call ``reset`` afterwards)."""
        for sensor in self._sensors:
            sensor.reseed(streams)  # type: ignore[attr-defined]

    def step(self, k: int, x: ArrayLike, accel_body: ArrayLike) -> bool:
        """Step all four sensors at tick k with true states ``x`` (N, 13) and the Pelican's body
        acceleration ``accel_body`` (N, 3); returns whether any sensor updated."""
        updated = self.accelerometer.step(k, accel_body)
        updated |= self.gyroscope.step(k, x)
        updated |= self.orientation_estimator.step(k, x)
        updated |= self.altimeter.step(k, x)
        return updated

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise the given vehicles (default all) from true states, in QRSim's order
        (accelerometer, gyroscope, altimeter, orientation estimator)."""
        self.accelerometer.reset(x, vehicles)
        self.gyroscope.reset(x, vehicles)
        self.altimeter.reset(x, vehicles)
        self.orientation_estimator.reset(x, vehicles)

    @property
    def orientation(self) -> Array:
        """Estimated ZYX Euler angles (N, 3) [rad]."""
        return self.orientation_estimator.measurement

    @property
    def angular_velocity(self) -> Array:
        """Measured body rates (N, 3), FRD [rad/s]."""
        return self.gyroscope.measurement

    @property
    def acceleration(self) -> Array:
        """Measured specific force (N, 3), FRD [m/s^2] (about [0, 0, -9.81] at rest)."""
        return self.accelerometer.measurement

    @property
    def height_m(self) -> Array:
        """Measured height above the ground reference (N,) [m, up]."""
        return self.altimeter.height_m

    @property
    def vertical_speed_mps(self) -> Array:
        """Measured vertical speed (N,) [m/s, up]."""
        return self.altimeter.vertical_speed_mps

    @property
    def measurement(self) -> Array:
        """QRSim's AHARS output (N, 11): [phi theta psi, p q r, ax ay az, h, hdot] (eX 4:6, 10:12, 14:17,
        20 in QRSim's 1-based numbering)."""
        return np.hstack([self.orientation, self.angular_velocity, self.acceleration,
                          self.height_m[:, None], self.vertical_speed_mps[:, None]])

    def noise_covariances(self) -> AharsVariances:
        """Per-axis error variances of the outputs (zeros for sensors that are off)."""
        var_h, var_hdot = self.altimeter.variances()
        return AharsVariances(
            orientation=self.orientation_estimator.variance(),
            angular_velocity=self.gyroscope.variance(),
            linear_acceleration=self.accelerometer.variance(),
            height=var_h,
            vertical_speed=var_hdot,
        )

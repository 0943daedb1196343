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
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.accessors import copy_of, forwarded
from qrsim_ros.core.common.frames import Array, dcm_from_state, ned_to_body
from qrsim_ros.core.common.jit import F8_2D_IN, njit
from qrsim_ros.core.common.noise import GaussMarkov, PerVehicleNormals, ou_coefficients
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import (
    ConfigError,
    finite,
    flag,
    non_negative,
    positive,
    set_frozen_field,
    single_non_negative,
    single_positive,
)
from qrsim_ros.core.sensors.sampled import (
    SampledSensor,
    SampledSensorParams,
    check_tick,
    fleet_array,
    reset_rows,
)
from qrsim_ros.core.vehicles.pelican import G_MS2, STATE_DOWN

#: QRSim spins the Gauss-Markov processes up for randi(1..1000) iterations at every reset (spec 3.1).
SPIN_UP_MAX_STEPS = 1000

#: Column ranges of the true state X (N, 13) (spec 2.1).
_ANGLES = slice(3, 6)
_BODY_VELOCITY = slice(6, 9)
_BODY_RATES = slice(9, 12)


# --- parameters ----------------------------------------------------------------------------------

def _per_axis(name: str, value: ArrayLike, strictly_positive: bool = False) -> tuple[float, float, float]:
    """A scalar or 3-vector of finite values >= 0 (> 0 if ``strictly_positive``), as an (x, y, z) tuple."""
    a = positive(name, value) if strictly_positive else non_negative(name, value)
    if a.ndim == 0:
        a = np.full(3, float(a))
    if a.shape != (3,):
        raise ConfigError(f"{name}={np.asarray(value).tolist()!r} must be a scalar or 3 values (x, y, z)")
    return (float(a[0]), float(a[1]), float(a[2]))


@dataclass(frozen=True)
class _WhiteNoiseVectorParams(SampledSensorParams):
    """A 3-axis white-noise sensor with an optional bias (accelerometer and gyroscope, spec 3.1).

    The white-noise std per axis (scalar or x, y, z) is the subclass's field named ``sigma_field``.
    bias_random_walk_sigma: bias random-walk intensity [unit/sqrt(s)] (0 = no walk; not in QRSim).
    initial_bias_sigma: std of the turn-on bias drawn at each reset [unit] (0 = none; not in QRSim).
    """

    sigma_field: ClassVar[str] = "sigma"

    bias_random_walk_sigma: float = 0.0
    initial_bias_sigma: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        sigma = self.sigma_field  # the field's name
        set_frozen_field(self, sigma, _per_axis(f"{self.section}.{sigma}", getattr(self, sigma)))
        for name in ("bias_random_walk_sigma", "initial_bias_sigma"):
            set_frozen_field(self, name, single_non_negative(f"{self.section}.{name}", getattr(self, name)))


@dataclass(frozen=True)
class AccelerometerParams(_WhiteNoiseVectorParams):
    """Accelerometer (spec 3.1, ``pelican_config.m`` defaults).

    on: noisy model if true, else the true value (sample-and-hold).
    dt_s: update period [s], multiple of 0.02.
    sigma_ms2: white-noise std per axis (scalar or x, y, z) [m/s^2].
    bias_random_walk_sigma: bias random-walk intensity [m/s^2/sqrt(s)] (0 = no walk; not in QRSim).
    initial_bias_sigma: std of the turn-on bias drawn at each reset [m/s^2] (0 = none; not in QRSim).
    """

    section: ClassVar[str] = "accelerometer"
    sigma_field: ClassVar[str] = "sigma_ms2"

    sigma_ms2: float | tuple[float, float, float] = 0.0025


@dataclass(frozen=True)
class GyroscopeParams(_WhiteNoiseVectorParams):
    """Gyroscope (spec 3.1, ``pelican_config.m`` defaults).

    on, dt_s: as for the accelerometer.
    sigma_rads: white-noise std per axis [rad/s].
    bias_random_walk_sigma: bias random-walk intensity [rad/s/sqrt(s)] (0 = none; not in QRSim).
    initial_bias_sigma: std of the turn-on bias drawn at each reset [rad/s] (0 = none; not in QRSim).
    """

    section: ClassVar[str] = "gyroscope"
    sigma_field: ClassVar[str] = "sigma_rads"

    sigma_rads: float | tuple[float, float, float] = 0.0002


@dataclass(frozen=True)
class OrientationEstimatorParams(SampledSensorParams):
    """Orientation estimator: Ornstein-Uhlenbeck error per Euler angle (spec 3.1).

    on, dt_s: see ``SampledSensorParams``.
    beta_per_s: mean-reversion rate BETA [1/s] (> 0), per axis or scalar.
    sigma: OU diffusion SIGMA [rad/sqrt(s)]; stationary std is SIGMA / sqrt(2 BETA) (3.54e-3 rad default).
    """

    section: ClassVar[str] = "orientation_estimator"

    beta_per_s: float | tuple[float, float, float] = 1.0 / 100.0
    sigma: float | tuple[float, float, float] = 0.0005

    def __post_init__(self) -> None:
        super().__post_init__()
        beta = _per_axis("orientation_estimator.beta_per_s", self.beta_per_s, strictly_positive=True)
        set_frozen_field(self, "beta_per_s", beta)
        set_frozen_field(self, "sigma", _per_axis("orientation_estimator.sigma", self.sigma))


@dataclass(frozen=True)
class AltimeterParams(SampledSensorParams):
    """Altimeter: first-order Gauss-Markov height error (spec 3.1).

    on, dt_s: see ``SampledSensorParams``.
    decay_rate_per_s: QRSim's ``TAU``, which QRSim uses as a *rate*: coefficient exp(-rate dt) [1/s, > 0].
        The default 300 makes the error practically white (coefficient 0.0025 at 0.02 s).
    sigma_m: driving-noise std per update SIGMA [m].
    ground_z_ned_m: NED z of the ground the height is measured from [m] (QRSim: 0).
    """

    section: ClassVar[str] = "altimeter"

    decay_rate_per_s: float = 300.0
    sigma_m: float = 0.003
    ground_z_ned_m: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        rate = single_positive("altimeter.decay_rate_per_s", self.decay_rate_per_s)
        set_frozen_field(self, "decay_rate_per_s", rate)
        set_frozen_field(self, "sigma_m", single_non_negative("altimeter.sigma_m", self.sigma_m))
        set_frozen_field(self, "ground_z_ned_m", finite("altimeter.ground_z_ned_m", self.ground_z_ned_m))


#: The four sensors of ``AharsParams``, by field name, in QRSim's order.
_SENSOR_PARAMS: dict[str, type[SampledSensorParams]] = {
    "accelerometer": AccelerometerParams, "gyroscope": GyroscopeParams,
    "orientation_estimator": OrientationEstimatorParams, "altimeter": AltimeterParams,
}


@dataclass(frozen=True)
class AharsParams:
    """The four AHARS sensors; ``on=False`` forces all four noiseless (spec 3.1, ``AHARSPelican.m:41-46``)."""

    on: bool = True
    accelerometer: AccelerometerParams = field(default_factory=AccelerometerParams)
    gyroscope: GyroscopeParams = field(default_factory=GyroscopeParams)
    orientation_estimator: OrientationEstimatorParams = field(default_factory=OrientationEstimatorParams)
    altimeter: AltimeterParams = field(default_factory=AltimeterParams)

    def __post_init__(self) -> None:
        set_frozen_field(self, "on", flag("ahars.on", self.on, allow_01=True))
        for name, cls in _SENSOR_PARAMS.items():
            value = getattr(self, name)
            if not isinstance(value, cls):
                raise ConfigError(f"ahars.{name} must be a {cls.__name__}, got {type(value).__name__}")

    def noiseless(self) -> AharsParams:
        """The same parameters with all four sensors off (QRSim's noiseless base classes)."""
        return replace(self, **{name: replace(getattr(self, name), on=False) for name in _SENSOR_PARAMS})


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


def _vertical_speed_up(x: Array) -> Array:
    """True vertical speed [m/s, up] = -(NED down velocity) of states (M, >=9)."""
    return _vertical_speed_kernel(np.asarray(x, float))


@njit(f"float64({F8_2D_IN}, int64)")
def _vertical_speed_row(x, i):
    """-(down row of ``body_to_ned(dcm_from_state(x), x[:, 6:9])``) of vehicle i [m/s, up]: the DCM's third
    column times the body velocity, summed in einsum's order for this (transposed) product, so
    bit-identical; one pass instead of the full DCM (a few us of numpy per call)."""
    sph, cph = np.sin(x[i, 3]), np.cos(x[i, 3])
    sth, cth = np.sin(x[i, 4]), np.cos(x[i, 4])
    return -((-sth * x[i, 6] + sph * cth * x[i, 7]) + cph * cth * x[i, 8])


@njit(f"float64[:]({F8_2D_IN})")
def _vertical_speed_kernel(x):
    """``_vertical_speed_row`` of every vehicle (M,)."""
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = _vertical_speed_row(x, i)
    return out


@njit(f"void({F8_2D_IN}, {F8_2D_IN}, boolean, boolean, boolean, boolean, float64[:, :], float64[:, :], "
      "float64[:, :], float64[:], float64[:], float64)", writable_twins=True)
def _noiseless_step_kernel(x, accel_body, acc_due, gyro_due, euler_due, alt_due, acc, gyro, euler, height,
                           speed, ground_z_ned_m):
    """The four noiseless, unfaulted AHARS sensors' updates in place (``Ahars.step``): each due sensor
    takes its true value -- specific force, body rates x[:, 9:12], Euler angles x[:, 3:6], height
    ``ground_z_ned_m - x[:, 2]`` [m, up] and ``_vertical_speed_row``."""
    for i in range(x.shape[0]):
        for j in range(3):
            if acc_due:
                acc[i, j] = accel_body[i, j]
            if gyro_due:
                gyro[i, j] = x[i, 9 + j]
            if euler_due:
                euler[i, j] = x[i, 3 + j]
        if alt_due:
            height[i] = ground_z_ned_m - x[i, 2]
            speed[i] = _vertical_speed_row(x, i)


#: ``_noiseless_faulted_kernel``'s bits: ``due`` (which sensor updates this tick) and ``add`` (which
#: sensor has a bias or offset); the columns of its packed fault values and stuck rows.
_ACC, _GYRO, _EULER, _ALT = 1, 2, 4, 8
_ACC_BIAS, _GYRO_BIAS, _ALT_OFFSET = 0, 3, 6  # first columns (biases: 3 each)
_ACC_STUCK, _GYRO_STUCK, _ALT_STUCK = 0, 1, 2
#: The fault states (accelerometer, gyroscope, altimeter) of sensors without a fault.
_UNFAULTED = (None, None, None)


@njit(f"void({F8_2D_IN}, {F8_2D_IN}, int64, float64[:, :], float64[:, :], float64[:, :], float64[:], "
      "float64[:], float64, int64, float64[:, ::1], boolean[:, ::1])", writable_twins=True)
def _noiseless_faulted_kernel(x, accel_body, due, acc, gyro, euler, height, speed, ground_z_ned_m, add,
                              fault_value, stuck):
    """``_noiseless_step_kernel`` with faults, as each sensor's noiseless ``step`` applies them
    (``set_fault_state``): a stuck row keeps its reading (a stuck altimeter's speed is 0); otherwise the
    true value plus the bias or offset where ``add`` has the sensor's bit (the sum only then: a -0.0
    reading stays -0.0). ``due`` and ``add``: bit masks (``_ACC`` ...); ``fault_value`` (N, 7): the
    accelerometer's and the gyroscope's biases and the altimeter's offset; ``stuck`` (N, 3) bool:
    accelerometer, gyroscope, altimeter (packed: numba's dispatch costs about 0.1 us per argument)."""
    acc_due, gyro_due = due & _ACC != 0, due & _GYRO != 0
    euler_due, alt_due = due & _EULER != 0, due & _ALT != 0
    acc_add, gyro_add, alt_add = add & _ACC != 0, add & _GYRO != 0, add & _ALT != 0
    for i in range(x.shape[0]):
        for j in range(3):
            if acc_due and not stuck[i, _ACC_STUCK]:
                acc[i, j] = accel_body[i, j] + fault_value[i, _ACC_BIAS + j] if acc_add else accel_body[i, j]
            if gyro_due and not stuck[i, _GYRO_STUCK]:
                gyro[i, j] = x[i, 9 + j] + fault_value[i, _GYRO_BIAS + j] if gyro_add else x[i, 9 + j]
            if euler_due:
                euler[i, j] = x[i, 3 + j]
        if alt_due:
            if stuck[i, _ALT_STUCK]:
                speed[i] = 0.0
            else:
                h = ground_z_ned_m - x[i, 2]
                height[i] = h + fault_value[i, _ALT_OFFSET] if alt_add else h
                speed[i] = _vertical_speed_row(x, i)


# --- the sensors ---------------------------------------------------------------------------------

#: A sensor's fault state (``set_fault_state``): the value added to its reading and its stuck rows.
_FaultState = tuple[Array | None, NDArray[np.bool_] | None]


def _fault_state(added: ArrayLike | None, stuck: ArrayLike | None, shape: tuple[int, ...]
                 ) -> _FaultState | None:
    """The fault state of a sensor of N vehicles: ``added`` (a bias or offset in the sensor's unit and
    frame) as float ``shape`` (N, ...) and ``stuck`` as bool (N,), each None when not given or all zero;
    None (no fault) when both are."""
    value = None if added is None else np.asarray(added, float).reshape(shape)
    rows = None if stuck is None else np.asarray(stuck, bool).reshape(shape[0])
    if value is not None and not value.any():
        value = None
    if rows is not None and not rows.any():
        rows = None
    return None if value is None and rows is None else (value, rows)


class _WhiteNoiseVectorSensor(SampledSensor):
    """3-axis white noise plus optional bias random walk (accelerometer and gyroscope)."""

    noise_width = 3

    def __init__(self, num_vehicles: int, params: _WhiteNoiseVectorParams, streams: RandomStreams | None,
                 name: str) -> None:
        self.params = params
        super().__init__(num_vehicles, params.dt_s, params.on, name)
        self._sigma = np.asarray(getattr(params, params.sigma_field), float)
        self._bias_rw = float(params.bias_random_walk_sigma) if self.on else 0.0
        self._bias_init = float(params.initial_bias_sigma) if self.on else 0.0
        # A random walk is a Gauss-Markov process with a = 1: b += rw sqrt(dt) eta at each update.
        self._bias = GaussMarkov(self.num_vehicles, np.ones(3), self._bias_rw * np.sqrt(self.dt_s))
        self._meas = np.zeros((self.num_vehicles, 3))
        self._fault: _FaultState | None = None  # set_fault_state
        self.reseed(streams if streams is not None else RandomStreams(0))

    def set_fault_state(self, bias: ArrayLike | None = None, stuck: ArrayLike | None = None) -> None:
        """Faults from the next update on (docs/FAULTS.md "Effects"): ``bias`` (N, 3) added to
        the reading (a bias step, FRD body, the sensor's unit); ``stuck`` (N,) bool: the reading repeats
        the last one (the noise is still drawn, so the streams stay aligned). None and None: no fault."""
        self._fault = _fault_state(bias, stuck, (self.num_vehicles, 3))

    def _faulted(self, meas: Array) -> Array:
        """``meas`` with the fault state applied (see ``set_fault_state``)."""
        if self._fault is None:
            return meas
        bias, stuck = self._fault
        if bias is not None:
            meas = meas + bias
        if stuck is not None:
            meas[stuck] = self._meas[stuck]
        return meas

    def reseed(self, streams: RandomStreams) -> None:
        """Take fresh generators from ``streams`` (call ``reset`` afterwards, as after QRSim's resetSeed),
        with the bias streams where the bias model is enabled."""
        super().reseed(streams)
        n, name = self.num_vehicles, self.stream_name
        self._bias_normals = (PerVehicleNormals(streams.per_vehicle(f"{name}.bias", n), 3)
                              if self._bias_rw > 0 else None)
        self._bias_reset_rngs = streams.per_vehicle(f"{name}.bias.reset", n) if self._bias_init > 0 else []

    measurement = copy_of("_meas", "Last measurement (N, 3), body FRD (a copy).")
    bias = copy_of("_bias.state", "Current bias (N, 3) (zero unless the bias model is enabled) (a copy).")

    def variance(self) -> Array:
        """Per-axis error variance right after reset: SIGMA^2 + initial_bias_sigma^2 (0 when off)."""
        if not self.on:
            return np.zeros(3)
        return self._sigma**2 + self._bias_init**2

    def _measure(self, k: int, name: str, value: ArrayLike, width: int, columns: slice) -> bool:
        """Measure ``columns`` of the fleet array ``value`` (N, >= width; ``name`` in errors), in the
        sensor's unit and frame, if tick k is due; returns whether it did."""
        if not self.due(k):
            return False
        self._update(fleet_array(name, value, self.num_vehicles, width)[:, columns])
        return True

    def _update(self, truth: Array) -> None:
        if not self.on:
            self._meas = self._faulted(truth.copy())
            return
        if self._bias_normals is not None:
            self._bias.step(self._bias_normals.next())
        if self._bias_rw == 0.0 and self._bias_init == 0.0:  # no bias model: the bias is always zero
            meas = truth + self._sigma * self._normals.next()
        else:
            meas = truth + self._bias.state + self._sigma * self._normals.next()
        self._meas = self._faulted(meas)

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


class Accelerometer(_WhiteNoiseVectorSensor):
    """Body-frame (FRD) specific-force sensor [m/s^2] for N vehicles (spec 3.1, ``AccelerometerG``)."""

    def __init__(self, num_vehicles: int, params: AccelerometerParams | None = None,
                 streams: RandomStreams | None = None, stream_name: str = "accelerometer") -> None:
        super().__init__(num_vehicles, params if params is not None else AccelerometerParams(), streams,
                         stream_name)

    def step(self, k: int, accel_body: ArrayLike) -> bool:
        """Measure ``accel_body`` (N, 3) (``PelicanFleet.accel_body``) if tick k is due; returns whether
        it did."""
        return self._measure(k, "accel_body", accel_body, 3, slice(0, 3))

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise vehicles from true states (N or len(vehicles), >=6): the reading becomes the
        specific force at rest in the vehicle's attitude, D [0 0 -g] (plus one noise sample when on)."""
        idx, rows = reset_rows(x, vehicles, self.num_vehicles, 6)
        at_rest = ned_to_body(dcm_from_state(rows), np.array([0.0, 0.0, -G_MS2]))
        self._reset(idx, at_rest)


class Gyroscope(_WhiteNoiseVectorSensor):
    """Body rates [p q r] sensor [rad/s] for N vehicles (spec 3.1, ``GyroscopeG``)."""

    def __init__(self, num_vehicles: int, params: GyroscopeParams | None = None,
                 streams: RandomStreams | None = None, stream_name: str = "gyroscope") -> None:
        super().__init__(num_vehicles, params if params is not None else GyroscopeParams(), streams,
                         stream_name)

    def step(self, k: int, x: ArrayLike) -> bool:
        """Measure the body rates of true states ``x`` (N, >=12) if tick k is due."""
        return self._measure(k, "x", x, 12, _BODY_RATES)

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise vehicles: reading = true rates (+ one noise sample and the turn-on bias when on)."""
        idx, rows = reset_rows(x, vehicles, self.num_vehicles, 12)
        self._reset(idx, rows[:, _BODY_RATES])


class OrientationEstimator(SampledSensor):
    """ZYX Euler angles [phi theta psi] with an Ornstein-Uhlenbeck error [rad] (spec 3.1,
    ``OrientationEstimatorGM``)."""

    noise_width = 3

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

    measurement = copy_of("_meas", "Last estimated Euler angles (N, 3) [rad] (a copy).")
    error = copy_of("_error.state", "Current OU error state (N, 3) [rad] (a copy).")

    def variance(self) -> Array:
        """Stationary error variance per angle SIGMA^2 / (2 BETA) [rad^2] (0 when off)."""
        return self._sigma**2 / (2.0 * self._beta) if self.on else np.zeros(3)

    def step(self, k: int, x: ArrayLike) -> bool:
        """Estimate the attitude of true states ``x`` (N, >=6) if tick k is due."""
        if not self.due(k):
            return False
        angles = fleet_array("x", x, self.num_vehicles, 6)[:, _ANGLES]
        if self.on:
            self._meas = angles + self._error.step(self._normals.next())
        else:
            self._meas = angles.copy()
        return True

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise vehicles: error spun up from zero for randi(1..1000) steps (reset stream)."""
        idx, rows = reset_rows(x, vehicles, self.num_vehicles, 6)
        if self.on:
            for i in idx:
                rng = self._reset_rngs[i]
                self._error.spin_up(int(i), int(rng.integers(1, SPIN_UP_MAX_STEPS + 1)), rng)
            self._meas[idx] = rows[:, _ANGLES] + self._error.state[idx]
        else:
            self._meas[idx] = rows[:, _ANGLES]


class Altimeter(SampledSensor):
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
        self._fault: _FaultState | None = None  # set_fault_state
        self.reseed(streams if streams is not None else RandomStreams(0))

    def set_fault_state(self, offset_m: ArrayLike | None = None, stuck: ArrayLike | None = None) -> None:
        """Faults from the next update on (docs/FAULTS.md "Effects"): ``offset_m`` (N,) [m]
        added to the height (noisy: the vertical speed, a difference of heights, sees the step once;
        noiseless: the true vertical speed is kept); ``stuck`` (N,) bool: the height repeats the last one
        and the vertical speed is 0 (the error process still steps: the streams stay aligned). None and
        None: no fault."""
        self._fault = _fault_state(offset_m, stuck, (self.num_vehicles,))

    height_m = copy_of("_height", "Last height above the ground reference (N,) [m, up] (a copy).")
    vertical_speed_mps = copy_of("_speed", "Last vertical speed (N,) [m/s, up] (a copy).")

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
        return self.params.ground_z_ned_m - x[:, STATE_DOWN]

    def step(self, k: int, x: ArrayLike) -> bool:
        """Measure height and vertical speed of true states ``x`` (N, >=9) if tick k is due."""
        if not self.due(k):
            return False
        x = fleet_array("x", x, self.num_vehicles, 9)
        if self.on:
            height = self._true_height(x) + self._error.step(self._normals.next())[:, 0]
            if self._fault is not None:
                height = self._faulted_height(height)
            self._speed = (height - self._height) / self.dt_s
            self._height = height
        else:
            height = self._true_height(x)
            speed = _vertical_speed_up(x)
            if self._fault is not None:
                height = self._faulted_height(height)
                stuck = self._fault[1]
                if stuck is not None:
                    speed[stuck] = 0.0
            self._height = height
            self._speed = speed
        return True

    def _faulted_height(self, height: Array) -> Array:
        """``height`` with the fault state applied (see ``set_fault_state``)."""
        offset, stuck = self._fault  # type: ignore[misc]
        if offset is not None:
            height = height + offset
        if stuck is not None:
            height[stuck] = self._height[stuck]
        return height

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise vehicles: true height and vertical speed (-(NED down velocity)), plus, when on,
        the spun-up error n and its last increment (n - n_prev) / dt (QRSim ``AltimeterGM.reset``)."""
        idx, rows = reset_rows(x, vehicles, self.num_vehicles, 9)
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
            p = p.noiseless()
        self.params = p
        self.num_vehicles = int(num_vehicles)
        streams = streams if streams is not None else RandomStreams(0)
        self.accelerometer = Accelerometer(num_vehicles, p.accelerometer, streams)
        self.gyroscope = Gyroscope(num_vehicles, p.gyroscope, streams)
        self.orientation_estimator = OrientationEstimator(num_vehicles, p.orientation_estimator, streams)
        self.altimeter = Altimeter(num_vehicles, p.altimeter, streams)
        #: The composite's period: the fastest sensor's (``AHARSPelican.m:126-127``).
        self.dt_s = min(s.dt_s for s in self._sensors)
        self._ticks_per_update = tuple(s.ticks_per_update for s in self._sensors)
        #: ``_noiseless_faulted_kernel``'s packed faults and the sensors' fault states they were packed from
        self._fault_pack: tuple[tuple[Any, Any, Any], int, Array, NDArray[np.bool_]] | None = None

    on = forwarded("params.on", "Whether the AHARS is noisy (False: all four sensors noiseless).")

    @property
    def _sensors(self) -> tuple[SampledSensor, ...]:
        return (self.accelerometer, self.gyroscope, self.orientation_estimator, self.altimeter)

    def reseed(self, streams: RandomStreams) -> None:
        """Give every sensor fresh generators from ``streams`` (call ``reset`` afterwards)."""
        for sensor in self._sensors:
            sensor.reseed(streams)

    def step(self, k: int, x: ArrayLike, accel_body: ArrayLike) -> bool:
        """Step all four sensors at tick k with true states ``x`` (N, 13) and the Pelican's body
        acceleration ``accel_body`` (N, 3); returns whether any sensor updated."""
        if not self.on:
            return self._step_noiseless(k, x, accel_body)
        updated = self.accelerometer.step(k, accel_body)
        updated |= self.gyroscope.step(k, x)
        updated |= self.orientation_estimator.step(k, x)
        updated |= self.altimeter.step(k, x)
        return updated

    def _step_noiseless(self, k: int, x: ArrayLike, accel_body: ArrayLike) -> bool:
        """``step`` of four noiseless sensors: the true values in one kernel (the sensors' own ``step`` do
        the same, a few numpy calls each); with faults, ``_noiseless_faulted_kernel`` applies them as each
        sensor's own noiseless ``step`` would."""
        if k < 1:
            check_tick(k)
        ta, tg, te, th = self._ticks_per_update  # each sensor's ``due`` (a generator costs a microsecond)
        acc_due, gyro_due, euler_due, alt_due = k % ta == 0, k % tg == 0, k % te == 0, k % th == 0
        if not (acc_due or gyro_due or euler_due or alt_due):
            return False
        n = self.num_vehicles
        x = fleet_array("x", x, n, 12)
        accel = fleet_array("accel_body", accel_body, n, 3)
        acc, gyro, alt = self.accelerometer, self.gyroscope, self.altimeter
        outputs = (acc._meas, gyro._meas, self.orientation_estimator._meas, alt._height, alt._speed,
                   alt.params.ground_z_ned_m)
        faults = acc._fault, gyro._fault, alt._fault
        if faults == _UNFAULTED:  # (a tuple of Nones: compared by identity, element by element)
            _noiseless_step_kernel(x, accel, acc_due, gyro_due, euler_due, alt_due, *outputs)
            return True
        add, fault_value, stuck = self._packed_faults(faults)
        due = (_ACC if acc_due else 0) | (_GYRO if gyro_due else 0) | (_EULER if euler_due else 0) | (
            _ALT if alt_due else 0)
        _noiseless_faulted_kernel(x, accel, due, *outputs, add, fault_value, stuck)
        return True

    def _packed_faults(self, states: tuple[Any, Any, Any]) -> tuple[int, Array, NDArray[np.bool_]]:
        """The fault states ``states`` of the accelerometer, gyroscope and altimeter as
        ``_noiseless_faulted_kernel`` takes them (``add``, ``fault_value``, ``stuck``), packed again only
        when a ``set_fault_state`` changed one (it sets a new tuple)."""
        pack = self._fault_pack
        if pack is not None:
            seen = pack[0]
            if seen[0] is states[0] and seen[1] is states[1] and seen[2] is states[2]:
                return pack[1], pack[2], pack[3]
        n = self.num_vehicles
        value, stuck, add = np.zeros((n, 7)), np.zeros((n, 3), bool), 0
        for bit, col, width, row, state in ((_ACC, _ACC_BIAS, 3, _ACC_STUCK, states[0]),
                                            (_GYRO, _GYRO_BIAS, 3, _GYRO_STUCK, states[1]),
                                            (_ALT, _ALT_OFFSET, 1, _ALT_STUCK, states[2])):
            if state is None:
                continue
            offset, stuck_rows = state
            if offset is not None:
                value[:, col:col + width] = np.reshape(offset, (n, width))
                add |= bit
            if stuck_rows is not None:
                stuck[:, row] = stuck_rows
        self._fault_pack = (states, add, value, stuck)
        return add, value, stuck

    def outputs_view(self) -> tuple[Array, Array, Array, Array, Array]:
        """``orientation``, ``angular_velocity``, ``acceleration``, ``height_m`` and ``vertical_speed_mps``
        without copies, for a per-tick reader that only reads them (the estimated state); they change at
        the next ``step`` or ``reset``."""
        alt = self.altimeter
        return (self.orientation_estimator._meas, self.gyroscope._meas, self.accelerometer._meas, alt._height,
                alt._speed)

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise the given vehicles (default all) from true states, in QRSim's order
        (accelerometer, gyroscope, altimeter, orientation estimator)."""
        self.accelerometer.reset(x, vehicles)
        self.gyroscope.reset(x, vehicles)
        self.altimeter.reset(x, vehicles)
        self.orientation_estimator.reset(x, vehicles)

    orientation = forwarded("orientation_estimator.measurement", "Estimated ZYX Euler angles (N, 3) [rad].")
    angular_velocity = forwarded("gyroscope.measurement", "Measured body rates (N, 3), FRD [rad/s].")
    acceleration = forwarded("accelerometer.measurement", "Measured specific force (N, 3), FRD [m/s^2] "
                                                          "(about [0, 0, -9.81] at rest).")
    height_m = forwarded("altimeter.height_m", "Measured height above the ground reference (N,) [m, up].")
    vertical_speed_mps = forwarded("altimeter.vertical_speed_mps", "Measured vertical speed (N,) [m/s, up].")

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

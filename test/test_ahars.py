"""Tests of the AHARS sensors (spec 3.1, 8.1 testSensorsNoiseModels, 8.3 item 6, 10.6, 10.7).

Expected values come from the spec's formulas restated here (noise models, QRSim's regression fits,
rotation of gravity / velocity written out by hand), never from running the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.sensors.ahars import (
    SPIN_UP_MAX_STEPS,
    Accelerometer,
    AccelerometerParams,
    Ahars,
    AharsParams,
    Altimeter,
    AltimeterParams,
    Gyroscope,
    GyroscopeParams,
    OrientationEstimator,
    OrientationEstimatorParams,
)
from qrsim_ros.core.vehicles.pelican import HOVER_THROTTLE, PelicanFleet

G = 9.81
MASS = 1.68
DT = 0.02


# --- helpers written from the spec ---------------------------------------------------------------

def hover_state(n: int = 1, z: float = -20.0) -> np.ndarray:
    x = np.zeros((n, 13))
    x[:, 2] = z
    x[:, 12] = MASS * G
    return x


def moving_state(k: int, n: int = 2) -> np.ndarray:
    """A smoothly varying true state (every column changes with k), different per vehicle."""
    t = k * DT + np.arange(n)[:, None]
    x = np.zeros((n, 13))
    x[:, 0:3] = np.hstack([np.sin(t), np.cos(t), -10 - np.sin(0.5 * t)])
    x[:, 3:6] = np.hstack([0.1 * np.sin(t), 0.2 * np.cos(t), 0.3 * t])
    x[:, 6:9] = np.hstack([np.cos(t), 0.5 * np.sin(t), -0.3 * np.cos(2 * t)])
    x[:, 9:12] = np.hstack([0.4 * np.cos(t), -0.2 * np.sin(t), 0.1 * np.cos(3 * t)])
    x[:, 12] = MASS * G
    return x


def moving_accel(k: int, n: int = 2) -> np.ndarray:
    t = k * DT + np.arange(n)[:, None]
    return np.hstack([0.3 * np.sin(t), 0.2 * np.cos(t), -G + 0.1 * np.sin(2 * t)])


def down_velocity(x: np.ndarray) -> np.ndarray:
    """NED down velocity: third column of the NED->body DCM (spec 2.3) dotted with [u v w]."""
    phi, theta = x[:, 3], x[:, 4]
    col = np.stack([-np.sin(theta), np.sin(phi) * np.cos(theta), np.cos(phi) * np.cos(theta)], axis=1)
    return np.sum(col * x[:, 6:9], axis=1)


def specific_force_at_rest(x: np.ndarray) -> np.ndarray:
    """D [0 0 -g]: -g times the third column of the NED->body DCM."""
    phi, theta = x[:, 3], x[:, 4]
    return -G * np.stack([-np.sin(theta), np.sin(phi) * np.cos(theta), np.cos(phi) * np.cos(theta)], axis=1)


def fit_ar1(s: np.ndarray) -> tuple[float, float, float]:
    """Least-squares fit s[i+1] = a s[i] + b + e, as QRSim's computeGMparameters.m: (a, b, std(e))."""
    x, y = s[:-1], s[1:]
    n = x.size
    sx, sy, sxx, sxy, syy = x.sum(), y.sum(), (x * x).sum(), (x * y).sum(), (y * y).sum()
    a = (n * sxy - sx * sy) / (n * sxx - sx**2)
    b = (sy - a * sx) / n
    sd = math.sqrt((n * syy - sy**2 - a * (n * sxy - sx * sy)) / n / (n - 2))
    return a, b, sd


def ou_parameters(s: np.ndarray, dt: float) -> tuple[float, float, float]:
    """(mu, sigma, lambda) of an Ornstein-Uhlenbeck series by the same regression (computeOUparameters):
    lambda = -ln(a)/dt, mu = b/(1-a), sigma = std(e) sqrt(2 lambda / (1 - a^2))."""
    a, b, sd = fit_ar1(s)
    lam = -math.log(a) / dt
    return b / (1 - a), sd * math.sqrt(2 * lam / (1 - a * a)), lam


def gm_parameters(s: np.ndarray, dt: float) -> tuple[float, float, float]:
    """(mu, sigma, tau) of a first-order Gauss-Markov series: sigma = residual std, tau = -ln(a)/dt."""
    a, b, sd = fit_ar1(s)
    return b / (1 - a), sd, -math.log(a) / dt


# --- spec 8.1 testSensorsNoiseModels / 8.3 item 6 ------------------------------------------------

N_STEPS = 50000
TOLFACTOR = 0.4
MEANTOL = 1e-2
TEST_CONFIG = AharsParams(  # pelican_test_sensors_config
    accelerometer=AccelerometerParams(sigma_ms2=0.0025),
    gyroscope=GyroscopeParams(sigma_rads=0.0002),
    orientation_estimator=OrientationEstimatorParams(beta_per_s=1 / 8, sigma=0.003),
    altimeter=AltimeterParams(decay_rate_per_s=1 / 3, sigma_m=0.003),
)


@pytest.fixture(scope="module")
def hover_errors() -> dict[str, np.ndarray]:
    """50000 hover steps (seed 12345, setX [0 0 -20 0 0 0]): measurement minus truth per output.

    The truth is the constant hover state and a = [0 0 -g] (a noiseless hovering Pelican stays there).
    """
    ahars = Ahars(1, TEST_CONFIG, RandomStreams(12345))
    x, a = hover_state(), np.array([[0.0, 0.0, -G]])
    ahars.reset(x)
    out = np.empty((N_STEPS, 11))
    for k in range(1, N_STEPS + 1):
        ahars.step(k, x, a)
        out[k - 1] = ahars.measurement[0]
    return {
        "orientation": out[:, 0:3] - x[0, 3:6],
        "gyro": out[:, 3:6] - x[0, 9:12],
        "accel": out[:, 6:9] - a[0],
        "height": out[:, 9] + x[0, 2],  # eX17 + X3
    }


def test_accelerometer_noise_std(hover_errors: dict[str, np.ndarray]) -> None:
    std = hover_errors["accel"].std(axis=0, ddof=1)
    assert np.all(np.abs(std - 0.0025) < TOLFACTOR * 0.0025)
    # Tighter: the std of 50000 Gaussian samples has relative std 1/sqrt(2n) = 0.3 %; 3 % is 10 of those.
    np.testing.assert_allclose(std, 0.0025, rtol=0.03)
    # White: lag-1 autocorrelation has std 1/sqrt(n) = 0.0045; 0.025 is 5.6 of those.
    e = hover_errors["accel"]
    r1 = np.sum(e[1:] * e[:-1], axis=0) / np.sum(e * e, axis=0)
    assert np.all(np.abs(r1) < 0.025)


def test_gyroscope_noise_std(hover_errors: dict[str, np.ndarray]) -> None:
    std = hover_errors["gyro"].std(axis=0, ddof=1)
    assert np.all(np.abs(std - 0.0002) < TOLFACTOR * 0.0002)
    np.testing.assert_allclose(std, 0.0002, rtol=0.03)  # as for the accelerometer


def test_orientation_estimator_is_ornstein_uhlenbeck(hover_errors: dict[str, np.ndarray]) -> None:
    for axis in range(3):
        mu, sigma, lam = ou_parameters(hover_errors["orientation"][:, axis], DT)
        assert abs(mu) < MEANTOL
        assert abs(sigma - 0.003) < TOLFACTOR * 0.003
        assert abs(lam - 1 / 8) < TOLFACTOR * (1 / 8)
        # sigma comes from the residual std (0.3 % relative error) times a factor insensitive to lambda:
        # 5 % is ample; lambda's own estimate has ~13 % relative std here, so the 40 % above stays.
        assert abs(sigma - 0.003) < 0.05 * 0.003


def test_altimeter_is_gauss_markov_with_rate_tau(hover_errors: dict[str, np.ndarray]) -> None:
    mu, sigma, tau = gm_parameters(hover_errors["height"], DT)
    assert abs(mu) < MEANTOL
    assert abs(sigma - 0.003) < TOLFACTOR * 0.003
    assert abs(tau - 1 / 3) < TOLFACTOR * (1 / 3)  # TAU is a rate [1/s], as QRSim uses it
    assert abs(sigma - 0.003) < 0.03 * 0.003  # residual std of 50000 samples: 0.3 % relative std


# --- sample-and-hold, on/off ---------------------------------------------------------------------

def _step(sensor: object, k: int, x: np.ndarray, a: np.ndarray) -> bool:
    return sensor.step(k, a) if isinstance(sensor, Accelerometer) else sensor.step(k, x)  # type: ignore[attr-defined]


def _read(sensor: object) -> np.ndarray:
    if isinstance(sensor, Altimeter):
        return np.stack([sensor.height_m, sensor.vertical_speed_mps], axis=1)
    return sensor.measurement  # type: ignore[attr-defined]


def _truth(sensor: object, x: np.ndarray, a: np.ndarray) -> np.ndarray:
    if isinstance(sensor, Accelerometer):
        return a
    if isinstance(sensor, Gyroscope):
        return x[:, 9:12]
    if isinstance(sensor, OrientationEstimator):
        return x[:, 3:6]
    return np.stack([-x[:, 2], -down_velocity(x)], axis=1)  # noiseless altimeter


SENSORS = [
    (Accelerometer, AccelerometerParams),
    (Gyroscope, GyroscopeParams),
    (OrientationEstimator, OrientationEstimatorParams),
    (Altimeter, AltimeterParams),
]


@pytest.mark.parametrize("on", [True, False])
@pytest.mark.parametrize(("cls", "params_cls"), SENSORS)
def test_sample_and_hold_at_sensor_rate(cls: type, params_cls: type, on: bool) -> None:
    sensor = cls(2, params_cls(on=on, dt_s=0.1), RandomStreams(3))
    sensor.reset(moving_state(0))
    previous = _read(sensor)
    for k in range(1, 31):
        x, a = moving_state(k), moving_accel(k)
        updated = _step(sensor, k, x, a)
        out = _read(sensor)
        assert updated == (k % 5 == 0)  # 0.1 s = 5 base ticks; first update at t = 0.1 s
        if not updated:
            np.testing.assert_array_equal(out, previous)
        elif on:
            assert np.all(out != previous)
            assert np.all(out != _truth(sensor, x, a))
        else:
            np.testing.assert_allclose(out, _truth(sensor, x, a), rtol=0, atol=1e-12)
        previous = out


def test_noisy_altimeter_vertical_speed_is_the_difference_of_heights() -> None:
    alt = Altimeter(2, AltimeterParams(dt_s=0.04), RandomStreams(5))
    alt.reset(moving_state(0))
    heights = [alt.height_m]
    for k in range(1, 41):
        if alt.step(k, moving_state(k)):
            expected = (alt.height_m - heights[-1]) / 0.04
            np.testing.assert_allclose(alt.vertical_speed_mps, expected, rtol=1e-12)
            heights.append(alt.height_m)
    assert len(heights) == 21


def test_ahars_off_forces_all_four_noiseless() -> None:
    noisy_children = AharsParams(on=False)  # children keep their noisy defaults (on=True)
    assert noisy_children.accelerometer.on
    ahars = Ahars(2, noisy_children, RandomStreams(1))
    x0 = moving_state(0)
    ahars.reset(x0)
    np.testing.assert_allclose(ahars.acceleration, specific_force_at_rest(x0), atol=1e-12)
    np.testing.assert_array_equal(ahars.orientation, x0[:, 3:6])
    for k in range(1, 20):
        x, a = moving_state(k), moving_accel(k)
        assert ahars.step(k, x, a)
        np.testing.assert_array_equal(ahars.acceleration, a)
        np.testing.assert_array_equal(ahars.angular_velocity, x[:, 9:12])
        np.testing.assert_array_equal(ahars.orientation, x[:, 3:6])
        np.testing.assert_array_equal(ahars.height_m, -x[:, 2])
        np.testing.assert_allclose(ahars.vertical_speed_mps, -down_velocity(x), atol=1e-12)
    cov = ahars.noise_covariances()
    assert np.all(cov.orientation == 0) and np.all(cov.angular_velocity == 0)
    assert np.all(cov.linear_acceleration == 0) and cov.height == 0 and cov.vertical_speed == 0


def test_composite_rate_and_update_flag() -> None:
    p = AharsParams(accelerometer=AccelerometerParams(dt_s=0.04), gyroscope=GyroscopeParams(dt_s=0.1),
                    orientation_estimator=OrientationEstimatorParams(dt_s=0.1),
                    altimeter=AltimeterParams(dt_s=0.2))
    ahars = Ahars(1, p, RandomStreams(2))
    assert ahars.dt_s == pytest.approx(0.04)
    ahars.reset(hover_state())
    x, a = hover_state(), np.array([[0.0, 0.0, -G]])
    flags = [ahars.step(k, x, a) for k in range(1, 11)]
    assert flags == [k % 2 == 0 or k % 5 == 0 for k in range(1, 11)]
    gyro_before = ahars.angular_velocity
    assert ahars.step(12, x, a)  # accelerometer tick only
    np.testing.assert_array_equal(ahars.angular_velocity, gyro_before)
    with pytest.raises(ValueError, match="tick"):
        ahars.step(0, x, a)


# --- reset semantics -----------------------------------------------------------------------------

def test_accelerometer_reads_gravity_at_reset_not_zero() -> None:
    """Spec 10.7 fixed: right after reset the reading is D [0 0 -g] (+ noise), not ~0."""
    x = hover_state(2)
    x[:, 3:6] = [[0.2, -0.1, 1.0], [0.0, 0.4, -2.0]]
    off = Accelerometer(2, AccelerometerParams(on=False))
    off.reset(x)
    np.testing.assert_allclose(off.measurement, specific_force_at_rest(x), atol=1e-12)
    on = Accelerometer(2, AccelerometerParams(), RandomStreams(4))
    on.reset(x)
    assert np.all(np.abs(on.measurement - specific_force_at_rest(x)) < 6 * 0.0025)  # 6-sigma bound


@pytest.mark.parametrize("on", [True, False])
def test_altimeter_initial_vertical_speed_sign(on: bool) -> None:
    """Spec 10.6 fixed: climbing gives a positive initial vertical speed."""
    x = hover_state(2)
    x[0, 8] = -2.0  # level, w = -2 m/s (NED down velocity -2): climbing at 2 m/s
    x[1, 4], x[1, 6] = 0.3, 1.0  # nose up 0.3 rad, flying forward at 1 m/s: climbing at sin(0.3)
    alt = Altimeter(2, AltimeterParams(on=on, sigma_m=0.0), RandomStreams(6))
    alt.reset(x)
    np.testing.assert_allclose(alt.vertical_speed_mps, [2.0, math.sin(0.3)], atol=1e-12)
    np.testing.assert_allclose(alt.height_m, [20.0, 20.0], atol=1e-12)


def test_altimeter_ground_reference() -> None:
    alt = Altimeter(1, AltimeterParams(on=False, ground_z_ned_m=-5.0))
    alt.reset(hover_state(1, z=-20.0))
    assert alt.height_m[0] == pytest.approx(15.0)


def test_orientation_spin_up_variance_at_reset() -> None:
    """The error after reset is an OU process spun up from 0 for m ~ U{1..1000} steps: its variance is
    b^2/(1-a^2) * (1 - mean_m a^(2m)) with a, b of spec 3.1."""
    beta, sigma = 1 / 8, 0.003
    a = math.exp(-beta * DT)
    b = sigma * math.sqrt((1 - math.exp(-2 * beta * DT)) / (2 * beta))
    m = np.arange(1, SPIN_UP_MAX_STEPS + 1)
    expected = b * b / (1 - a * a) * (1 - np.mean(a ** (2 * m)))
    oe = OrientationEstimator(300, OrientationEstimatorParams(beta_per_s=beta, sigma=sigma), RandomStreams(9))
    x = hover_state(300)
    oe.reset(x)
    errors = oe.measurement - x[:, 3:6]
    # 900 samples of a scale mixture (kurtosis ~4): relative std of the variance ~6 %; 20 % is 3.4 of those.
    assert np.mean(errors**2) == pytest.approx(expected, rel=0.2)


def test_reset_of_one_vehicle_leaves_the_others_noise_unchanged() -> None:
    def run(reset_vehicle_1: bool) -> np.ndarray:
        ahars = Ahars(3, streams=RandomStreams(11))
        ahars.reset(moving_state(0, 3))
        rows = []
        for k in range(1, 101):
            if reset_vehicle_1 and k == 50:
                ahars.reset(moving_state(k, 3)[1:2], vehicles=[1])
            ahars.step(k, moving_state(k, 3), moving_accel(k, 3))
            rows.append(ahars.measurement)
        return np.array(rows)

    plain, with_reset = run(False), run(True)
    np.testing.assert_array_equal(with_reset[:, [0, 2]], plain[:, [0, 2]])
    np.testing.assert_array_equal(with_reset[:49, 1], plain[:49, 1])
    assert np.all(with_reset[49:, 1, 0:3] != plain[49:, 1, 0:3])  # the reset vehicle's OU error changed


def test_reset_accepts_fleet_or_selected_rows() -> None:
    x = moving_state(0, 3)
    a1, a2 = Ahars(3, streams=RandomStreams(13)), Ahars(3, streams=RandomStreams(13))
    a1.reset(x, vehicles=[2, 0])
    a2.reset(x[[2, 0]], vehicles=[2, 0])
    np.testing.assert_array_equal(a1.measurement, a2.measurement)
    with pytest.raises(ValueError, match="rows"):
        a1.reset(x[:2], vehicles=[0])


# --- determinism and streams ---------------------------------------------------------------------

def _run(seed: int, params: AharsParams | None = None, steps: int = 200) -> np.ndarray:
    ahars = Ahars(2, params, RandomStreams(seed))
    ahars.reset(moving_state(0))
    out = []
    for k in range(1, steps + 1):
        if k == 120:
            ahars.reset(moving_state(k))
        ahars.step(k, moving_state(k), moving_accel(k))
        out.append(ahars.measurement)
    return np.array(out)


def test_same_seed_identical_different_seed_different() -> None:
    np.testing.assert_array_equal(_run(42), _run(42))
    assert np.all(_run(42)[:, :, :10] != _run(43)[:, :, :10])


def test_white_noise_is_sigma_times_the_named_stream() -> None:
    """Accelerometer error = SIGMA * the 'accelerometer' stream's normals; the reset sample comes
    from 'accelerometer.reset' (documented stream names)."""
    seed, n, steps, sigma = 21, 3, 100, 0.0025
    acc = Accelerometer(n, AccelerometerParams(), RandomStreams(seed))
    x = hover_state(n)
    acc.reset(x)
    streams = RandomStreams(seed)
    reset_eta = np.array([streams.get("accelerometer.reset", i).standard_normal(3) for i in range(n)])
    expected_at_reset = specific_force_at_rest(x) + sigma * reset_eta
    np.testing.assert_allclose(acc.measurement, expected_at_reset, rtol=0, atol=1e-15)
    eta = np.stack([streams.get("accelerometer", i).standard_normal((steps, 3)) for i in range(n)], axis=1)
    zero = np.zeros((n, 3))
    for k in range(1, steps + 1):
        acc.step(k, zero)
        np.testing.assert_array_equal(acc.measurement, sigma * eta[k - 1])


def test_bias_off_by_default_and_constant_turn_on_bias_adds_an_offset() -> None:
    """Bias off (default) is the plain white-noise path; a turn-on bias without a walk shifts every
    reading by the same per-vehicle constant and leaves the white noise sequence untouched."""
    n, steps = 4, 50
    plain = Gyroscope(n, GyroscopeParams(), RandomStreams(8))
    biased = Gyroscope(n, GyroscopeParams(initial_bias_sigma=0.01), RandomStreams(8))
    assert GyroscopeParams().bias_random_walk_sigma == 0 and GyroscopeParams().initial_bias_sigma == 0
    x = hover_state(n)
    plain.reset(x)
    biased.reset(x)
    assert np.all(plain.bias == 0)
    offsets = []
    for k in range(1, steps + 1):
        plain.step(k, x)
        biased.step(k, x)
        offsets.append(biased.measurement - plain.measurement)
    offsets = np.array(offsets)
    np.testing.assert_allclose(offsets, np.broadcast_to(biased.bias, offsets.shape), atol=1e-15)
    assert np.all(biased.bias != 0)


def test_bias_random_walk_grows_like_sigma_sqrt_t() -> None:
    n, rw = 400, 0.01  # rad/s/sqrt(s)
    gyro = Gyroscope(n, GyroscopeParams(sigma_rads=0.0, bias_random_walk_sigma=rw), RandomStreams(17))
    x = hover_state(n)
    gyro.reset(x)
    snapshots = {}
    for k in range(1, 2501):
        gyro.step(k, x)
        if k in (250, 1000, 2500):
            snapshots[k * DT] = gyro.measurement.copy()
    # 1200 samples: the std estimate has relative std 1/sqrt(2400) = 2 %; 10 % is 5 of those.
    for t, bias in snapshots.items():
        assert np.std(bias) == pytest.approx(rw * math.sqrt(t), rel=0.1)
        assert abs(np.mean(bias)) < 5 * rw * math.sqrt(t) / math.sqrt(bias.size)
    increment = snapshots[50.0] - snapshots[20.0]  # independent increments of a random walk
    assert np.std(increment) == pytest.approx(rw * math.sqrt(30.0), rel=0.1)


# --- variances for sensor_msgs/Imu ---------------------------------------------------------------

def test_noise_covariances_defaults() -> None:
    cov = Ahars(1, streams=RandomStreams(1)).noise_covariances()
    np.testing.assert_allclose(cov.orientation, 0.0005**2 / (2 / 100))
    np.testing.assert_allclose(cov.angular_velocity, 0.0002**2)
    np.testing.assert_allclose(cov.linear_acceleration, 0.0025**2)
    a = math.exp(-300 * DT)
    var_h = 0.003**2 / (1 - a * a)
    assert cov.height == pytest.approx(var_h)
    assert cov.vertical_speed == pytest.approx(2 * var_h * (1 - a) / DT**2)
    assert math.sqrt(cov.vertical_speed) == pytest.approx(0.003 * math.sqrt(2) / DT, rel=0.01)  # spec: ~0.21


def test_altimeter_empirical_variances_match_the_covariances() -> None:
    n, steps = 100, 500
    alt = Altimeter(n, AltimeterParams(), RandomStreams(23))
    x = hover_state(n)
    alt.reset(x)
    h, hdot = [], []
    for k in range(1, steps + 1):
        alt.step(k, x)
        h.append(alt.height_m - 20.0)
        hdot.append(alt.vertical_speed_mps)
    var_h, var_hdot = alt.variances()
    # 50000 nearly independent samples: relative std of a variance ~0.6 % (hdot: neighbours correlate
    # at -0.5, ~1 %); 5 % is ample.
    assert np.var(h) == pytest.approx(var_h, rel=0.05)
    assert np.var(hdot) == pytest.approx(var_hdot, rel=0.05)


def test_turn_on_bias_enters_the_variance() -> None:
    acc = Accelerometer(1, AccelerometerParams(initial_bias_sigma=0.01))
    np.testing.assert_allclose(acc.variance(), 0.0025**2 + 0.01**2)


# --- with the Pelican ----------------------------------------------------------------------------

def test_measures_a_hovering_pelican_fleet() -> None:
    fleet = PelicanFleet(2)
    fleet.set_state(hover_state(2, z=-10.0)[:, :6])
    ahars_off = Ahars(2, AharsParams(on=False))
    ahars_on = Ahars(2, streams=RandomStreams(31))
    ahars_off.reset(fleet.state)
    ahars_on.reset(fleet.state)
    u = np.tile([0.0, 0.0, HOVER_THROTTLE, 0.0, 11.0], (2, 1))
    for k in range(1, 51):
        fleet.step(u)
        ahars_off.step(k, fleet.state, fleet.accel_body)
        ahars_on.step(k, fleet.state, fleet.accel_body)
    np.testing.assert_array_equal(ahars_off.acceleration, fleet.accel_body)
    np.testing.assert_allclose(ahars_off.acceleration, [[0, 0, -G]] * 2, atol=1e-3)  # hover: a ~ [0 0 -g]
    np.testing.assert_array_equal(ahars_off.height_m, -fleet.state[:, 2])
    # Noisy errors within 6 standard deviations of the defaults (orientation: stationary std 3.5e-3).
    assert np.all(np.abs(ahars_on.acceleration - fleet.accel_body) < 6 * 0.0025)
    assert np.all(np.abs(ahars_on.orientation - fleet.state[:, 3:6]) < 6 * 0.0005 / math.sqrt(2 / 100))


# --- configuration errors ------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: AccelerometerParams(sigma_ms2=-0.1), "accelerometer.sigma_ms2"),
        (lambda: AccelerometerParams(sigma_ms2=[0.1, 0.2]), "accelerometer.sigma_ms2"),
        (lambda: AccelerometerParams(bias_random_walk_sigma=-1e-3), "accelerometer.bias_random_walk_sigma"),
        (lambda: GyroscopeParams(dt_s=0.03), "gyroscope.dt_s"),
        (lambda: GyroscopeParams(initial_bias_sigma=float("nan")), "gyroscope.initial_bias_sigma"),
        (lambda: OrientationEstimatorParams(beta_per_s=0.0), "orientation_estimator.beta_per_s"),
        (lambda: OrientationEstimatorParams(beta_per_s=[0.1, -0.1, 0.1]), "orientation_estimator.beta_per_s"),
        (lambda: OrientationEstimatorParams(sigma=-0.1), "orientation_estimator.sigma"),
        (lambda: AltimeterParams(decay_rate_per_s=0.0), "altimeter.decay_rate_per_s"),
        (lambda: AltimeterParams(sigma_m=-0.003), "altimeter.sigma_m"),
        (lambda: AltimeterParams(dt_s=0.0), "altimeter.dt_s"),
        (lambda: AharsParams(on="yes"), "ahars.on"),
        (lambda: AharsParams(gyroscope=AccelerometerParams()), "ahars.gyroscope"),
    ],
)
def test_config_errors_name_the_parameter(make: object, name: str) -> None:
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        make()  # type: ignore[operator]


def test_params_accept_qrsim_style_values() -> None:
    p = OrientationEstimatorParams(on=1, beta_per_s=[1 / 100] * 3, sigma=0.0005)
    assert p.on is True and p.beta_per_s == (0.01, 0.01, 0.01) and p.sigma == (0.0005,) * 3


def test_noiseless_ahars_applies_faults_like_its_sensors() -> None:
    """Noiseless sensors with faults (imu_bias_step, gyro_stuck, altimeter offset/stuck): the
    composite's one-kernel path gives what each fault means, sensor by sensor, at each sensor's rate."""
    p = AharsParams(on=False, accelerometer=AccelerometerParams(dt_s=0.02),
                    gyroscope=GyroscopeParams(dt_s=0.04), altimeter=AltimeterParams(dt_s=0.08))
    ahars = Ahars(2, p, RandomStreams(3))
    ahars.reset(moving_state(0))
    for k in range(1, 4):  # unfaulted to begin with
        ahars.step(k, moving_state(k), moving_accel(k))
    accel_bias = np.array([[0.1, -0.2, 0.3], [0.0, 0.0, 0.0]])
    gyro_bias = np.array([[0.0, 0.0, 0.0], [0.01, 0.02, -0.03]])
    ahars.accelerometer.set_fault_state(bias=accel_bias)
    ahars.gyroscope.set_fault_state(bias=gyro_bias, stuck=np.array([True, False]))
    ahars.altimeter.set_fault_state(offset_m=np.array([0.0, 1.5]), stuck=np.array([True, False]))
    gyro_held = ahars.angular_velocity[0].copy()
    height_held = float(ahars.height_m[0])
    for k in range(4, 25):
        x, a = moving_state(k), moving_accel(k)
        ahars.step(k, x, a)
        np.testing.assert_array_equal(ahars.acceleration, a + accel_bias)  # every tick (20 ms)
        last_gyro_k = k - k % 2
        np.testing.assert_array_equal(ahars.angular_velocity[0], gyro_held)  # stuck: never changes
        np.testing.assert_array_equal(ahars.angular_velocity[1],
                                      moving_state(last_gyro_k)[1, 9:12] + gyro_bias[1])
        last_alt_k = k - k % 4
        if last_alt_k >= 4:  # the altimeter has updated under the fault
            assert ahars.height_m[0] == height_held and ahars.vertical_speed_mps[0] == 0.0
            assert ahars.height_m[1] == -moving_state(last_alt_k)[1, 2] + 1.5
            assert ahars.vertical_speed_mps[1] == pytest.approx(-down_velocity(moving_state(last_alt_k))[1],
                                                               abs=1e-12)

"""Tests of the plume concentration sensor (spec 3.4).

The concentration fields here are simple analytic functions of position and time written in the test,
so every expected reading is computed independently of the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.sensors.plume_sensor import PlumeSensor, PlumeSensorParams

DT = 0.02


def field(points: np.ndarray, t: float) -> np.ndarray:
    """A time-varying test field: c = 1 + 0.1 x - 0.05 y + 0.02 z + 0.3 t."""
    return 1.0 + 0.1 * points[:, 0] - 0.05 * points[:, 1] + 0.02 * points[:, 2] + 0.3 * t


def states(k: int, n: int = 3) -> np.ndarray:
    """True states (n, 13) moving with k, distinct per vehicle."""
    x = np.zeros((n, 13))
    t = k * DT
    x[:, 0] = 2.0 * t + np.arange(n)
    x[:, 1] = -1.0 * t + 3.0 * np.arange(n)
    x[:, 2] = -10.0 - 0.5 * t
    x[:, 3:6] = 0.1  # the attitude must not matter
    return x


def test_defaults_are_qrsims_noisy_config() -> None:
    p = PlumeSensorParams()
    assert (p.on, p.dt_s, p.sigma) == (True, 0.5, 0.01)
    q = PlumeSensorParams.noiseless()
    assert (q.on, q.dt_s) == (False, 0.02)


@pytest.mark.parametrize("on", [True, False])
def test_sample_and_hold_at_sensor_rate_and_true_position(on: bool) -> None:
    sensor = PlumeSensor(3, PlumeSensorParams(on=on), RandomStreams(1))
    sensor.reset(states(0), concentration=field, t_s=0.0)
    previous = sensor.concentration
    for k in range(1, 101):
        x = states(k)
        updated = sensor.step(k, x, field)
        assert updated == (k % 25 == 0)  # 0.5 s = 25 base ticks; first update at t = 0.5 s
        truth = field(x[:, :3], k * DT)  # true position, time of the update tick
        if not updated:
            np.testing.assert_array_equal(sensor.concentration, previous)
        elif on:
            assert np.all(sensor.concentration != truth)
            assert np.all(np.abs(sensor.concentration - truth) < 6 * 0.01)  # 6-sigma bound
        else:
            np.testing.assert_allclose(sensor.concentration, truth, rtol=0, atol=1e-12)
        previous = sensor.concentration


def test_noise_is_white_gaussian_with_sigma() -> None:
    n, updates = 200, 100
    sensor = PlumeSensor(n, PlumeSensorParams(), RandomStreams(2))
    x = states(0, n)
    sensor.reset(x, concentration=field)
    errors = []
    for k in range(25, 25 * updates + 1, 25):
        assert sensor.step(k, x, field)
        errors.append(sensor.concentration - field(x[:, :3], k * DT))
    e = np.array(errors)
    # 20000 samples: std has relative std 0.5 % (3 % is 6 of those); the mean has std 7e-5.
    assert e.std() == pytest.approx(0.01, rel=0.03)
    assert abs(e.mean()) < 5 * 0.01 / np.sqrt(e.size)
    r1 = np.sum(e[1:] * e[:-1]) / np.sum(e[1:] ** 2)  # lag-1 autocorrelation, std 1/sqrt(19800)
    assert abs(r1) < 0.04
    assert sensor.variance == pytest.approx(1e-4)
    assert PlumeSensor(1, PlumeSensorParams.noiseless()).variance == 0.0


def test_reset_reads_at_once_or_nan_without_a_field() -> None:
    off = PlumeSensor(3, PlumeSensorParams.noiseless())
    x = states(7)
    off.reset(x, concentration=field, t_s=1.5)
    np.testing.assert_allclose(off.concentration, field(x[:, :3], 1.5), atol=1e-12)
    off.reset(x, vehicles=[1])
    assert np.isnan(off.concentration[1]) and np.all(np.isfinite(off.concentration[[0, 2]]))
    assert off.step(1, x, field)  # noiseless: every 0.02 s
    np.testing.assert_allclose(off.concentration, field(x[:, :3], DT), atol=1e-12)
    noisy = PlumeSensor(3, PlumeSensorParams(), RandomStreams(3))
    noisy.reset(x, concentration=field, t_s=1.5)
    err = noisy.concentration - field(x[:, :3], 1.5)
    assert np.all(err != 0) and np.all(np.abs(err) < 6 * 0.01)


def test_field_receives_true_positions_and_time() -> None:
    calls: list[tuple[np.ndarray, float]] = []

    def recording(points: np.ndarray, t: float) -> np.ndarray:
        calls.append((points.copy(), t))
        return np.zeros(len(points))

    sensor = PlumeSensor(3, PlumeSensorParams(dt_s=0.04), RandomStreams(4))
    x = states(2)
    sensor.step(2, x, recording)
    sensor.step(4, x, recording, t_s=100.0)
    np.testing.assert_array_equal(calls[0][0], x[:, :3])
    assert calls[0][1] == pytest.approx(0.04) and calls[1][1] == 100.0


def _run(seed: int) -> np.ndarray:
    sensor = PlumeSensor(3, PlumeSensorParams(dt_s=0.1), RandomStreams(seed))
    sensor.reset(states(0), concentration=field)
    out = []
    for k in range(1, 201):
        if k == 100:
            sensor.reset(states(k), concentration=field, t_s=k * DT)
        sensor.step(k, states(k), field)
        out.append(sensor.concentration)
    return np.array(out)


def test_determinism() -> None:
    np.testing.assert_array_equal(_run(5), _run(5))
    assert np.all(_run(5) != _run(6))


def test_reset_of_one_vehicle_leaves_the_others_unchanged() -> None:
    def run(reset: bool) -> np.ndarray:
        sensor = PlumeSensor(3, PlumeSensorParams(dt_s=0.1), RandomStreams(7))
        sensor.reset(states(0), concentration=field)
        out = []
        for k in range(1, 101):
            if reset and k == 48:  # between update ticks (every 5 ticks)
                sensor.reset(states(k)[1:2], vehicles=[1], concentration=field, t_s=k * DT)
            sensor.step(k, states(k), field)
            out.append(sensor.concentration)
        return np.array(out)

    plain, with_reset = run(False), run(True)
    np.testing.assert_array_equal(with_reset[:, [0, 2]], plain[:, [0, 2]])
    assert np.all(with_reset[47:49, 1] != plain[47:49, 1])  # k = 48, 49 hold the reset reading
    # White noise has no state and the reset drew from the reset stream: from the next update tick
    # on the reset vehicle reads exactly as without the reset.
    np.testing.assert_array_equal(with_reset[49:, 1], plain[49:, 1])


def test_bad_field_output_is_rejected() -> None:
    sensor = PlumeSensor(2, PlumeSensorParams.noiseless())
    with pytest.raises(ValueError, match="concentration field"):
        sensor.step(1, states(1, 2), lambda p, t: np.zeros(3))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"sigma": -0.01}, "plume_sensor.sigma"), ({"dt_s": 0.03}, "plume_sensor.dt_s"),
     ({"dt_s": 0.0}, "plume_sensor.dt_s"), ({"on": "no"}, "plume_sensor.on"),
     ({"sigma": float("inf")}, "plume_sensor.sigma")],
)
def test_config_errors(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        PlumeSensorParams(**kwargs)  # type: ignore[arg-type]

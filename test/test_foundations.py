"""Seeded streams, noise processes and parameter validation (the shared foundations of every model)."""

from __future__ import annotations

import numpy as np
import pytest

from qrsim_ros.core.common import noise, rng, validation


def test_named_streams_are_reproducible_and_independent_of_request_order() -> None:
    a = rng.RandomStreams(7)
    b = rng.RandomStreams(7)
    first = a.get("gyroscope", 2).standard_normal(5)
    b.get("accelerometer", 0).standard_normal(100)  # another component asked first: no effect
    assert np.array_equal(first, b.get("gyroscope", 2).standard_normal(5))


def test_streams_differ_by_name_vehicle_and_seed() -> None:
    s = rng.RandomStreams(7)
    draws = [s.get("gyroscope", 0), s.get("gyroscope", 1), s.get("altimeter", 0),
             rng.RandomStreams(8).get("gyroscope", 0)]
    values = [g.standard_normal(1000) for g in draws]
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            assert not np.array_equal(values[i], values[j])
            # independent N(0,1) samples: |corr| ~ 1/sqrt(1000) = 0.03; 0.15 is ~5 sigma
            assert abs(np.corrcoef(values[i], values[j])[0, 1]) < 0.15


def test_seed_zero_draws_entropy_from_the_clock_and_records_it() -> None:
    a, b = rng.RandomStreams(0), rng.RandomStreams(0)
    assert a.entropy != b.entropy
    replay = rng.RandomStreams(a.entropy)
    assert np.array_equal(a.get("x").standard_normal(3), replay.get("x").standard_normal(3))


@pytest.mark.parametrize("bad", [-1, 1.5, "3"])
def test_bad_seed_rejected(bad) -> None:
    with pytest.raises(ValueError, match="seed"):
        rng.RandomStreams(bad)


def test_buffered_normals_equal_unbuffered_draws() -> None:
    streams = rng.RandomStreams(3)
    buffered = noise.PerVehicleNormals(streams.per_vehicle("n", 3), width=4, block_steps=5)
    got = np.stack([buffered.next() for _ in range(12)], axis=1)  # (3, 12, 4)
    for i, g in enumerate(streams.per_vehicle("n", 3)):
        assert np.array_equal(got[i], g.standard_normal((12, 4)))


def test_ou_coefficients_give_the_stationary_std() -> None:
    beta, sigma, dt = 0.5, 0.2, 0.02
    a, b = noise.ou_coefficients(beta, sigma, dt)
    assert a == pytest.approx(np.exp(-beta * dt))
    # stationary variance of n <- a n + b eta is b^2 / (1 - a^2), which must equal sigma^2 / (2 beta)
    assert b**2 / (1 - a**2) == pytest.approx(sigma**2 / (2 * beta), rel=1e-12)


def test_gauss_markov_statistics_and_spin_up() -> None:
    gm = noise.GaussMarkov(1, a=[0.9], b=[1.0])
    g = np.random.default_rng(1)
    xs = np.array([gm.step(g.standard_normal((1, 1)))[0, 0] for _ in range(40000)])
    # AR(1): lag-1 autocorrelation a, variance b^2/(1-a^2) = 5.263; 5 % covers the sampling error
    assert np.corrcoef(xs[:-1], xs[1:])[0, 1] == pytest.approx(0.9, abs=0.01)
    assert xs.var() == pytest.approx(1 / (1 - 0.81), rel=0.05)
    gm.spin_up(0, 0, g)
    assert gm.state[0, 0] == 0.0


def test_ticks_per_update() -> None:
    assert validation.ticks_per_update("dt", 0.02) == 1
    assert validation.ticks_per_update("dt", 0.2) == 10
    assert validation.ticks_per_update("dt", 1.0) == 50
    for bad in (0.0, -0.02, 0.03, float("nan"), "x"):
        with pytest.raises(validation.ConfigError, match="dt"):
            validation.ticks_per_update("dt", bad)


def test_validators_name_the_parameter() -> None:
    with pytest.raises(validation.ConfigError, match=r"sigma=\[-1\.0\] must be finite and >= 0"):
        validation.non_negative("sigma", [-1.0])
    with pytest.raises(validation.ConfigError, match="beta"):
        validation.positive("beta", 0.0)
    for text in ("fast", [1.0, "x"]):  # not numbers at all: ConfigError too, not a ValueError
        with pytest.raises(validation.ConfigError, match=r"k_f=.* must be a number or a list of numbers"):
            validation.positive("k_f", text)
        with pytest.raises(validation.ConfigError, match=r"sigma=.* must be a number or a list of numbers"):
            validation.non_negative("sigma", text)
    with pytest.raises(validation.ConfigError, match="k_f=None must be finite"):
        validation.positive("k_f", None)
    with pytest.raises(validation.ConfigError, match=r"mask=95 must be in \[0, 90\]"):
        validation.in_range("mask", 95, 0, 90)
    with pytest.raises(validation.ConfigError, match="limits"):
        validation.area_limits("limits", [0, -1, 0, 1, 0, 1])
    assert validation.area_limits("limits", [-1, 1, -2, 2, -80, 0]).tolist() == [-1, 1, -2, 2, -80, 0]


def test_buffered_normals_rewind_gives_the_same_draws_again() -> None:
    normals = noise.PerVehicleNormals(rng.RandomStreams(4).per_vehicle("n", 2), width=3, block_steps=8)
    normals.next()
    second = normals.next().copy()
    normals.rewind(1)
    assert np.array_equal(normals.next(), second)
    with pytest.raises(ValueError, match="rewind"):
        normals.rewind(5)


def test_euler_to_enu_flu_quaternion_matches_scipy_on_the_rotation_matrix() -> None:
    """The closed-form quaternion equals scipy's quaternion of T_enu_ned R_ned_frd T_frd_flu (R_ned_frd
    the transpose of QRSim's DCM), with w >= 0, over random attitudes and the edge cases."""
    from scipy.spatial.transform import Rotation

    from qrsim_ros.core.common.frames import dcm_ned_to_body, euler_ned_frd_to_quaternion_enu_flu

    rng = np.random.default_rng(4)
    e = np.vstack([rng.uniform([-np.pi, -np.pi / 2, -np.pi], [np.pi, np.pi / 2, np.pi], (500, 3)),
                   [[0.0, 0.0, 0.0], [0.0, 0.0, np.pi], [0.0, np.pi / 2, 0.3], [np.pi, 0.0, -np.pi]]])
    t = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
    s = np.diag([1.0, -1.0, -1.0])
    r = t @ np.swapaxes(dcm_ned_to_body(e[:, 0], e[:, 1], e[:, 2]), -1, -2) @ s
    want = Rotation.from_matrix(r).as_quat()
    want[want[:, 3] < 0] *= -1
    got = euler_ned_frd_to_quaternion_enu_flu(e[:, 0], e[:, 1], e[:, 2])
    assert got.shape == (len(e), 4) and np.all(got[:, 3] >= 0)
    # sign is free where w = 0 (a half turn): compare the rotations there
    same = np.minimum(np.abs(got - want).max(axis=1), np.abs(got + want).max(axis=1))
    assert same.max() < 1e-12
    assert np.allclose(Rotation.from_quat(got).as_matrix(), r, atol=1e-12)
    assert euler_ned_frd_to_quaternion_enu_flu(0.1, 0.2, 0.3).shape == (4,)

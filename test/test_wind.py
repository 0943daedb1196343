"""Mean wind with the logarithmic shear profile (spec 4.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.world.wind import MeanWind, MeanWindParams


def _profile(h_m: float) -> float:
    """The spec's profile written out independently: W20 ln(h_ft/Z0)/ln(20/Z0) in ft, Z0 = 0.15 ft."""
    h_ft = h_m / 0.3048
    return math.log(h_ft / 0.15) / math.log(20.0 / 0.15)


def test_speed_at_6m_is_the_spec_example() -> None:
    wind = MeanWind(w6_mps=3.0, direction_rad=0.4)
    v = wind.velocity_ned([6.0])
    assert v.shape == (1, 3)
    # spec 4.1: 6 m = 19.685 ft, so the speed is 0.99676 W6
    assert np.linalg.norm(v[0]) == pytest.approx(0.99676 * 3.0, rel=2e-5)
    assert np.linalg.norm(v[0]) == pytest.approx(3.0 * _profile(6.0), rel=1e-12)
    # at the 20 ft reference height the speed is W6 itself
    assert np.linalg.norm(wind.velocity_ned([20 * 0.3048])[0]) == pytest.approx(3.0, rel=1e-12)


def test_direction_is_where_the_wind_blows_from() -> None:
    s = 2.0 * _profile(10.0)
    from_north = MeanWind(2.0, direction_rad=0.0).velocity_ned([10.0])[0]
    np.testing.assert_allclose(from_north, [-s, 0.0, 0.0], atol=1e-12)  # blows towards the south
    from_east = MeanWind(2.0, direction_rad=math.pi / 2).velocity_ned([10.0])[0]
    np.testing.assert_allclose(from_east, [0.0, -s, 0.0], atol=1e-12)  # blows towards the west
    from_sw = MeanWind(2.0, direction_rad=math.radians(225)).velocity_ned([10.0])[0]
    np.testing.assert_allclose(from_sw, s * np.array([1, 1, 0]) / math.sqrt(2), atol=1e-12)


def test_zero_at_and_below_ground_and_monotone_above() -> None:
    wind = MeanWind(5.0, direction_rad=1.0)
    v = wind.velocity_ned([0.0, -1.0, -100.0, 0.01, 0.15 * 0.3048])
    assert np.all(v == 0.0)  # below the roughness height Z0 = 0.15 ft = 4.6 cm there is no wind
    # continuous at Z0 (QRSim returned a reversed wind between 0.05 and 0.15 ft)
    assert np.linalg.norm(wind.velocity_ned([0.15 * 0.3048 * (1 + 1e-6)])) < 1e-5
    heights = np.linspace(0.05, 80.0, 400)
    speed = np.linalg.norm(wind.velocity_ned(heights), axis=1)
    assert np.all(np.diff(speed) > 0)
    assert np.all(wind.velocity_ned(heights)[:, 2] == 0.0)


def test_non_finite_height_gives_no_wind_and_no_warning() -> None:
    with np.errstate(all="raise"):
        v = MeanWind(2.0, direction_rad=0.0).velocity_ned([np.nan, 3.0])
    assert np.all(v[0] == 0.0) and v[1, 0] < 0


def test_body_frame_with_yaw_90() -> None:
    wind = MeanWind(2.0, direction_rad=0.0)  # from the north, blowing south
    x = np.zeros((1, 13))
    x[0, 2] = -6.0
    x[0, 5] = math.pi / 2  # heading east: body x = east, body y (right) = south
    s = 2.0 * _profile(6.0)
    np.testing.assert_allclose(wind.velocity_body(x)[0], [0.0, s, 0.0], atol=1e-12)
    np.testing.assert_allclose(wind.rotational_body(x), np.zeros((1, 3)))


def test_body_frame_with_pitch_tilts_the_wind() -> None:
    wind = MeanWind(2.0, direction_rad=math.pi)  # from the south, blowing north
    x = np.zeros((1, 13))
    x[0, 2] = -6.0
    x[0, 4] = math.pi / 2  # nose straight up: body x = up (-z NED), body z = north
    s = 2.0 * _profile(6.0)
    np.testing.assert_allclose(wind.velocity_body(x)[0], [0.0, 0.0, s], atol=1e-12)


def test_height_is_measured_from_the_ground_plane() -> None:
    wind = MeanWind(1.0, direction_rad=0.0, z_origin_m=20.0)  # ground at z = +20 m
    x = np.zeros((2, 13))
    x[:, 2] = [14.0, 21.0]  # 6 m above ground; 1 m below ground
    v = wind.velocity_body(x)
    assert np.linalg.norm(v[0]) == pytest.approx(0.99676, rel=2e-5)
    assert np.all(v[1] == 0.0)


def test_random_direction_is_drawn_at_reset_and_seeded() -> None:
    a = MeanWind(2.0, direction_rad=None, streams=RandomStreams(11))
    b = MeanWind(2.0, direction_rad=None, streams=RandomStreams(11))
    c = MeanWind(2.0, direction_rad=None, streams=RandomStreams(12))
    assert a.direction_rad == 0.0  # QRSim's placeholder until the first reset
    dirs_a, dirs_b, dirs_c = [], [], []
    for _ in range(5):
        a.reset(), b.reset(), c.reset()
        dirs_a.append(a.direction_rad), dirs_b.append(b.direction_rad), dirs_c.append(c.direction_rad)
    assert dirs_a == dirs_b
    assert dirs_a != dirs_c
    assert len(set(dirs_a)) == 5
    assert all(0.0 <= d < 2 * math.pi for d in dirs_a)
    # the field follows the drawn direction
    v = a.velocity_ned([6.0])[0]
    assert math.atan2(-v[1], -v[0]) % (2 * math.pi) == pytest.approx(a.direction_rad, abs=1e-12)


def test_fixed_direction_survives_reset() -> None:
    w = MeanWind(2.0, direction_rad=0.7, streams=RandomStreams(3))
    w.reset()
    assert w.direction_rad == 0.7


def test_off_gives_zero_wind() -> None:
    w = MeanWind(5.0, direction_rad=None, on=False, streams=RandomStreams(3))
    w.reset()
    assert np.all(w.velocity_ned([1.0, 10.0, 50.0]) == 0.0)
    assert w.speed_and_direction_at(6.0)[0] == 0.0


def test_speed_and_direction_for_the_plume_models() -> None:
    w = MeanWind(3.0, direction_rad=2.0)
    speed, direction = w.speed_and_direction_at(6.0)
    assert speed == pytest.approx(0.99676 * 3.0, rel=2e-5)
    assert direction == 2.0
    np.testing.assert_allclose(w.downwind_unit_ned(), [-math.cos(2.0), -math.sin(2.0), 0.0])
    # the plume models' downwind vector is the normalised wind at 6 m
    v = w.velocity_ned([6.0])[0]
    np.testing.assert_allclose(v / np.linalg.norm(v), w.downwind_unit_ned(), atol=1e-12)


def test_from_params_and_validation() -> None:
    w = MeanWind.from_params(MeanWindParams(w6_mps=1.5, direction_rad=0.0))
    assert w.w6_mps == 1.5 and w.on
    for kwargs, name in (
        (dict(w6_mps=-1.0), "w6_mps"),
        (dict(w6_mps=float("nan")), "w6_mps"),
        (dict(w6_mps=1.0, direction_rad=float("inf")), "direction_rad"),
        (dict(w6_mps=1.0, z_origin_m=float("nan")), "z_origin_m"),
    ):
        with pytest.raises(ConfigError, match=name):
            MeanWind(**kwargs)
    with pytest.raises(ValueError, match="shape"):
        MeanWind(1.0, 0.0).velocity_ned(np.zeros((2, 2)))

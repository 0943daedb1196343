"""Seeded streams, noise processes and parameter validation (the shared foundations of every model)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from qrsim_ros.core.common import noise, rng, validation
from qrsim_ros.core.sensors.range_finder import RangeFinderParams
from qrsim_ros.core.vehicles.battery import BatteryParams
from qrsim_ros.core.vehicles.emergency_land import EmergencyLandParams
from qrsim_ros.core.vehicles.energy import BatterySettings
from qrsim_ros.core.vehicles.power import PelicanPowerParams
from qrsim_ros.core.world.turbulence import TurbulenceParams
from qrsim_ros.core.world.wind import MeanWindParams
from qrsim_ros.policies.search_pattern import SearchPatternParams
from qrsim_ros.policies.team_search.params import TeamSearchParams


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
    with pytest.raises(validation.ConfigError, match="k_f=None must be a number or a list of numbers"):
        validation.positive("k_f", None)
    # true/false and numeric strings are refused, as the scenario loader refuses them, not read as numbers
    for coerced in (True, "12", [1.0, True], ["1", "2"]):
        with pytest.raises(validation.ConfigError, match="must be a number"):
            validation.positive("k_f", coerced)
    for coerced in (True, False, "12", "1e3", None):
        with pytest.raises(validation.ConfigError, match=r"^x=.* must be a number$"):
            validation.finite("x", coerced)
    assert validation.finite("x", 3) == 3.0 and validation.finite("x", np.float32(0.5)) == 0.5
    with pytest.raises(validation.ConfigError, match=r"mask=95 must be in \[0, 90\]"):
        validation.in_range("mask", 95, 0, 90)
    with pytest.raises(validation.ConfigError, match="limits"):
        validation.area_limits("limits", [0, -1, 0, 1, 0, 1])
    assert validation.area_limits("limits", [-1, 1, -2, 2, -80, 0]).tolist() == [-1, 1, -2, 2, -80, 0]


# --- checks declared with the fields (checked / check_fields) ------------------------------------------

_SEEN: list[str] = []


def _spy(name: str, value: object) -> object:
    _SEEN.append(name)
    return value


@dataclass(frozen=True)
class _Demo:
    on: bool = validation.checked(False, validation.flag, store=True)
    dt_s: float = validation.checked(0.02, validation.ticks_per_update)
    gain: float = validation.checked(1.0, validation.finite, validation.single_positive, store=True)
    sigma: float = validation.checked(0.0, validation.non_negative)
    fraction: float = validation.checked(0.5, validation.between(0.0, 1.0), store=True)
    speed: float | None = validation.checked(None, validation.optional(validation.positive))
    steps: int = validation.checked(3, validation.integer_at_least(1), store=True)
    free: object = None  # no rule: never looked at

    def __post_init__(self) -> None:
        validation.check_fields(self, "demo")


@dataclass(frozen=True)
class _Pack:
    cells: int = validation.checked(3, _spy, validation.integer_at_least(1), store=True)

    def __post_init__(self) -> None:
        validation.check_fields(self, "pack", _Pack)


@dataclass(frozen=True)
class _Settings(_Pack):
    margin: float = validation.checked(1.5, _spy, validation.single_positive, store=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        validation.check_fields(self, "", _Settings)


@pytest.mark.parametrize(("key", "bad", "message"), [
    ("on", 1, "demo.on=1 must be true or false"),
    ("dt_s", 0.03, "demo.dt_s=0.03 s must be a positive multiple of 0.02 s"),
    ("gain", "x", "demo.gain='x' must be a number"),
    ("gain", float("inf"), "demo.gain=inf must be finite"),
    ("gain", -1, "demo.gain=-1.0 must be finite and > 0"),  # single_positive gets finite's float
    ("gain", [1.0], "demo.gain=[1.0] must be a number"),
    ("sigma", -1, "demo.sigma=-1 must be finite and >= 0"),
    ("fraction", 2, "demo.fraction=2 must be in [0.0, 1.0]"),
    ("speed", 0.0, "demo.speed=0.0 must be finite and > 0"),
    ("steps", True, "demo.steps=True must be an integer >= 1"),
    ("steps", 0, "demo.steps=0 must be an integer >= 1"),
])
def test_checked_fields_raise_the_checkers_message_under_section_and_field(key, bad, message) -> None:
    with pytest.raises(validation.ConfigError) as err:
        _Demo(**{key: bad})
    assert str(err.value) == message


def test_checked_fields_store_the_normalised_value_only_where_asked() -> None:
    d = _Demo(on=np.bool_(True), gain=2, sigma=1, fraction=1, speed=3, steps=np.int64(4), free="anything")
    assert (d.on, d.gain, d.fraction, d.steps) == (True, 2.0, 1.0, 4)
    assert (type(d.on), type(d.gain), type(d.fraction), type(d.steps)) == (bool, float, float, int)
    assert type(d.sigma) is int and type(d.speed) is int and d.free == "anything"  # checked, kept as given
    assert _Demo().speed is None  # optional: None passes


def test_checked_fields_run_in_declaration_order() -> None:
    with pytest.raises(validation.ConfigError, match=r"^demo\.on="):
        _Demo(steps=0, gain=0, on=2)
    with pytest.raises(validation.ConfigError, match=r"^demo\.gain="):
        _Demo(steps=0, gain=0)


def test_check_fields_with_an_owner_checks_its_own_fields_once_under_its_section() -> None:
    _SEEN.clear()
    s = _Settings(cells=np.int64(2), margin=2)
    assert _SEEN == ["pack.cells", "margin"]  # no field twice, each under its own class's section
    assert (type(s.cells), type(s.margin)) == (int, float)
    with pytest.raises(validation.ConfigError, match=r"^pack\.cells=0 must be an integer >= 1$"):
        _Settings(cells=0)
    with pytest.raises(validation.ConfigError, match=r"^margin=0 must be finite and > 0$"):
        _Settings(margin=0)


def test_between_and_optional_are_the_plain_checkers() -> None:
    assert validation.between(1, 20)("layers", 3) == 3.0
    with pytest.raises(validation.ConfigError, match=r"^layers=0 must be in \[1, 20\]$"):
        validation.between(1, 20)("layers", 0)
    assert validation.optional(validation.positive)("speed", None) is None
    assert validation.optional(validation.finite, validation.single_positive)("speed", 2) == 2.0


# The messages from before the checks were declared with the fields.
@pytest.mark.parametrize(("cls", "kwargs", "message"), [
    (RangeFinderParams, {"on": 1}, "range_finder.on=1 must be true or false"),
    (RangeFinderParams, {"dt_s": 0.03}, "range_finder.dt_s=0.03 s must be a positive multiple of 0.02 s"),
    (RangeFinderParams, {"min_range_m": 5, "max_range_m": 5},
     "range_finder: min_range_m=5.0 and max_range_m=5.0 must satisfy 0 <= min_range_m < max_range_m"),
    (RangeFinderParams, {"field_of_view_rad": 4}, "range_finder.field_of_view_rad=4.0 must be in (0, pi)"),
    (RangeFinderParams, {"sigma_m": -1}, "range_finder.sigma_m=-1 must be finite and >= 0"),
    (RangeFinderParams, {"dropout_probability": 1}, "range_finder.dropout_probability=1.0 must be in [0, 1)"),
    (EmergencyLandParams, {"max_descent_mps": -1},
     "emergency_land.max_descent_mps=-1.0 must be finite and > 0"),
    (EmergencyLandParams, {"min_tilt_cos": 2}, "emergency_land.min_tilt_cos=2 must be in (0, 1]"),
    (BatteryParams, {"model": "nimh"}, "battery.model='nimh' must be one of ('lipo', 'linear')"),
    (BatteryParams, {"cells": 0}, "battery.cells=0 must be an integer >= 1"),
    (BatteryParams, {"internal_resistance_ohm": -1},
     "battery.internal_resistance_ohm=-1 must be finite and >= 0"),
    (BatteryParams, {"initial_soc": 2}, "battery.initial_soc=2 must be in [0.0, 1.0]"),
    (BatteryParams, {"linear_discharge_v_per_s": 1},
     "battery.linear_discharge_v_per_s=1.0 must be < 0 (a discharge rate)"),
    (BatterySettings, {"low_battery_failsafe": "x"},
     "low_battery_failsafe='x' must be one of return, land, off"),
    (BatterySettings, {"rotor_motor_efficiency": 0}, "rotor_motor_efficiency=0.0 must be finite and > 0"),
    (BatterySettings, {"cells": 0}, "battery.cells=0 must be an integer >= 1"),
    (BatterySettings, {"reserve": 0.7},
     "thresholds must satisfy land_below <= reserve <= return_below, got 0.05, 0.7, 0.6"),
    (PelicanPowerParams, {"figure_of_merit": 2}, "power.figure_of_merit=2.0 must be in [0.0, 1.0]"),
    (TurbulenceParams, {"w6_mps": [[1.0]]},
     "turbulence.w6_mps=[[1.0]] must be a number or a list of numbers"),
    (TurbulenceParams, {"direction_rad": float("nan")},
     "turbulence.direction_rad=nan must be finite, or None"),
    (TurbulenceParams, {"velocity_offset_mps": -1},
     "turbulence.velocity_offset_mps=-1.0 must be finite and >= 0"),
    (TurbulenceParams, {"min_height_ft": 10, "max_height_ft": 5},
     "turbulence.max_height_ft=5 must be in [10.0, 1000.0]"),
    (TurbulenceParams, {"spin_up_steps": -1}, "turbulence.spin_up_steps=-1 must be an integer >= 0"),
    (TurbulenceParams, {"on": 1}, "turbulence.on=1 must be true or false"),
    (MeanWindParams, {"w6_mps": -1}, "wind.w6_mps=-1 must be finite and >= 0"),
    (MeanWindParams, {"direction_rad": float("inf")}, "wind.direction_rad=inf must be finite"),
    (SearchPatternParams, {"search_height_m": 1}, "search_pattern.search_height_m=1 must be in [2.0, 500.0]"),
    (SearchPatternParams, {"speed_mps": 0}, "search_pattern.speed_mps=0 must be finite and > 0"),
    (SearchPatternParams, {"inspect_height_m": 2},
     "search_pattern.inspect_height_m=2 must be in [3.0, 500.0]"),
    (TeamSearchParams, {"layers": 0}, "team_search.layers=0 must be in [1, 20]"),
    (TeamSearchParams, {"near_broadcast_period_s": 0},
     "team_search.near_broadcast_period_s=0 must be finite and > 0"),
])
def test_model_parameters_keep_their_messages(cls, kwargs, message) -> None:
    with pytest.raises(validation.ConfigError) as err:
        cls(**kwargs)
    assert str(err.value) == message


def test_model_parameters_keep_their_normalised_types() -> None:
    assert type(RangeFinderParams(on=np.bool_(True)).on) is bool
    assert type(RangeFinderParams(min_range_m=1).min_range_m) is int  # checked, not stored
    b = BatterySettings(cells=np.int64(2), capacity_ah=5, linear_discharge_v_per_s=-1, return_margin=2)
    assert (type(b.cells), type(b.capacity_ah), type(b.linear_discharge_v_per_s), type(b.return_margin)) == (
        int, float, float, float)
    assert type(PelicanPowerParams(avionics_w=0).avionics_w) is float
    assert type(TeamSearchParams(layers=4).layers) is int
    assert type(TurbulenceParams(on=np.bool_(False)).on) is np.bool_  # checked, not stored


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

"""MIL-F-8785C / Dryden turbulence (spec 4.2), PSD check (spec 8.3 item 4), low-altitude safety."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.signal import welch

from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.world.turbulence import DrydenTurbulence, TurbulenceParams
from qrsim_ros.core.world.wind import MeanWind

FT = 0.3048

# testWind.m's ten "theoretical" cases: (W20 ft/s, V ft/s, h ft)
PSD_CASES = [(1, 1, 5), (10, 10, 20), (10, 100, 50), (10, 10, 5), (10, 10, 100),
             (10, 30, 100), (20, 20, 500), (1, 10, 10), (10, 10, 10), (100, 10, 10)]
PSD_T_S, PSD_N = 0.01, 20000


def _dryden_psd(w_rad_s: np.ndarray, w20: float, v: float, h: float) -> np.ndarray:
    """Dryden PSDs (u, v, w) of the spec (one-sided, per rad/s), written out from its formulae."""
    sw = 0.1 * w20
    su = sw / (0.177 + 0.000823 * h) ** 0.4
    lw = h
    lu = h / (0.177 + 0.000823 * h) ** 1.2
    xu, xw = lu * w_rad_s / v, lw * w_rad_s / v
    puu = (2 * su**2 * lu / (math.pi * v)) / (1 + xu**2)
    pvv = (su**2 * lu / (math.pi * v)) * (1 + 3 * xu**2) / (1 + xu**2) ** 2
    pww = (sw**2 * lw / (math.pi * v)) * (1 + 3 * xw**2) / (1 + xw**2) ** 2
    return np.stack([puu, pvv, pww], axis=-1)


@pytest.fixture(scope="module")
def psd_run() -> np.ndarray:
    """The ten cases as ten vehicles of one object, driven with the prescribed V and h (Vof = 0,
    direction 0, T = 0.01 s), spun up as QRSim does at reset; returns the gusts (N, 10, 3) [ft/s]."""
    w20 = np.array([c[0] for c in PSD_CASES], float)
    v = np.array([c[1] for c in PSD_CASES], float)
    h = np.array([c[2] for c in PSD_CASES], float)
    params = TurbulenceParams(w6_mps=tuple(w20 * FT), direction_rad=0.0, velocity_offset_mps=0.0)
    turb = DrydenTurbulence(len(PSD_CASES), params, RandomStreams(1))
    turb.spin_up(v, h, dt_s=PSD_T_S)
    out = np.empty((PSD_N, len(PSD_CASES), 3))
    for i in range(PSD_N):
        out[i] = turb.advance(v, h, dt_s=PSD_T_S)
    return out


def test_psd_original_criterion(psd_run: np.ndarray) -> None:
    """spec 8.3 item 4 exactly as testWind.m: Welch, rectangular 4096 window, no overlap, no detrend,
    PSD x 0.25, mean |10 log10 ratio| < 6 dB per axis for every case.

    About x 0.25: Welch gives a one-sided density per Hz, the formulae a one-sided density per rad/s,
    so the consistent factor is 1/(2 pi) (-7.98 dB); QRSim's 0.25 (-6.02 dB) leaves a +1.96 dB bias
    that the 6 dB tolerance absorbs. With a rectangular window and no detrending each 41 s segment's
    slow drift leaks into every bin, so the u axis (longest correlation) varies from seed to seed:
    over 60 seeds u/v/w averaged 4.0/2.8/2.4 dB and 43 % of seeds had at least one of the 30 values
    >= 6 dB (the original test shares this). The seed is fixed; the Hann-window test below is the
    seed-robust check of the same run.
    """
    f, p = welch(psd_run, fs=1 / PSD_T_S, window="boxcar", nperseg=4096, noverlap=0, detrend=False, axis=0)
    p = p * 0.25
    for i, (w20, v, h) in enumerate(PSD_CASES):
        theory = _dryden_psd(2 * math.pi * f, w20, v, h)
        err_db = np.mean(np.abs(10 * np.log10(p[:, i, :]) - 10 * np.log10(theory)), axis=0)
        assert np.all(err_db < 6.0), f"case {PSD_CASES[i]}: mean |dB| = {err_db}"


def test_psd_matches_dryden_with_consistent_scaling(psd_run: np.ndarray) -> None:
    """Hann window (no leakage of the slow drift), density scaled by 1/(2 pi) (per Hz -> per rad/s).

    The floor of mean |10 log10(P_hat / P)| for a perfect model is E|10 log10(chi2_8 / 8)| (4 segments
    x 2 dof per bin) = 1.84 dB, computed below. Over 200 runs (20 seeds x 10 cases) the measured
    values were 2.05-2.32 dB on every axis (discretisation and first-order v/w filters add ~0.4 dB),
    so 2.7 dB leaves > 0.35 dB margin; with sigma^2 off by 3 dB the same run gives 2.6-4.0 dB and with
    h off by a factor 2 up to 3.9 dB, so either fails.
    """
    floor = np.mean(np.abs(10 * np.log10(np.random.default_rng(0).chisquare(8, 400_000) / 8)))
    assert floor == pytest.approx(1.84, abs=0.02)
    f, p = welch(psd_run, fs=1 / PSD_T_S, window="hann", nperseg=4096, noverlap=0, detrend=False, axis=0)
    p = p[1:] / (2 * math.pi)  # the DC bin of a finite zero-mean record is not an estimate of P(0)
    for i, (w20, v, h) in enumerate(PSD_CASES):
        theory = _dryden_psd(2 * math.pi * f[1:], w20, v, h)
        err_db = np.mean(np.abs(10 * np.log10(p[:, i, :]) - 10 * np.log10(theory)), axis=0)
        assert np.all(err_db < 2.7), f"case {PSD_CASES[i]}: mean |dB| = {err_db}"
        assert np.all(err_db > floor - 0.3)  # no smoother than chance allows


def _hover_states(n: int, height_m: float, z_origin_m: float = 0.0) -> np.ndarray:
    x = np.zeros((n, 13))
    x[:, 2] = z_origin_m - height_m
    return x


def test_body_gust_axes_follow_the_mean_wind_convention() -> None:
    rng = np.random.default_rng(4)
    n = 6
    directions = rng.uniform(0, 2 * math.pi, n)
    turb = DrydenTurbulence(n, TurbulenceParams(direction_rad=tuple(directions)), RandomStreams(5))
    x = _hover_states(n, 10.0)
    x[:, 3:6] = rng.uniform(-0.5, 0.5, (n, 3))  # some attitude
    x[:, 6:9] = rng.uniform(-2, 2, (n, 3))
    turb.reset(x)
    assert turb.step(1, x)
    g = turb.gust_windframe_fts
    v_ned = body_to_ned(dcm_from_state(x), turb.velocity_body)
    for i in range(n):
        downwind = MeanWind(1.0, direction_rad=float(directions[i])).downwind_unit_ned()
        lateral = np.cross([0.0, 0.0, 1.0], downwind)  # 90 deg clockwise of downwind, seen from above
        # a positive longitudinal gust blows along the mean wind; positive vertical gust is upwards
        assert v_ned[i] @ downwind == pytest.approx(FT * g[i, 0], abs=1e-12)
        assert v_ned[i] @ lateral == pytest.approx(FT * g[i, 1], abs=1e-12)
        assert v_ned[i, 2] == pytest.approx(-FT * g[i, 2], abs=1e-12)


def test_zero_attitude_direction_zero_is_minus_g_in_metres() -> None:
    turb = DrydenTurbulence(2, TurbulenceParams(direction_rad=0.0), RandomStreams(6))
    x = _hover_states(2, 5.0)
    turb.reset(x)
    turb.step(1, x)
    np.testing.assert_allclose(turb.velocity_body, -FT * turb.gust_windframe_fts, atol=1e-15)
    assert np.all(turb.rotational_body == 0.0)


def test_recursion_is_the_spec_formula() -> None:
    """One step from a known state, with the normals replayed from the same named stream."""
    params = TurbulenceParams(w6_mps=2.0, direction_rad=0.0)
    turb = DrydenTurbulence(1, params, RandomStreams(21))
    x = _hover_states(1, 10.0)
    x[0, 6:9] = [3.0, 4.0, 0.0]  # 5 m/s
    turb.reset(x)
    g0 = turb.gust_windframe_fts[0]
    turb.step(1, x)
    eta = RandomStreams(21).get("turbulence", 0).standard_normal(3)
    v = (0.5 + 5.0) / FT
    h = 10.0 / FT
    w20 = 2.0 / FT
    sw = 0.1 * w20
    su = sw / (0.177 + 0.000823 * h) ** 0.4
    lu = h / (0.177 + 0.000823 * h) ** 1.2
    sigma = np.array([su, su, sw])
    length = np.array([lu, lu, h])
    expected = (1 - v * 0.02 / length) * g0 + np.sqrt(2 * v * 0.02 / length) * sigma * eta
    np.testing.assert_allclose(turb.gust_windframe_fts[0], expected, rtol=1e-12)


def test_low_altitude_never_blows_up() -> None:
    heights_m = np.array([0.0, -1.0, -50.0, 1e-9, 0.01, 0.1])  # on, below and just above the ground
    w6 = 2.0
    n = heights_m.size
    turb = DrydenTurbulence(n, TurbulenceParams(w6_mps=w6, direction_rad=0.0), RandomStreams(8))
    x = _hover_states(n, 0.0)
    x[:, 2] = -heights_m
    x[:, 6] = 15.0  # the fastest the Pelican may fly
    gw = np.empty((5000, n))
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        turb.reset(x)
        for k in range(1, 5001):
            turb.step(k, x)
            gw[k - 1] = turb.gust_windframe_fts[:, 2]
        assert np.all(np.isfinite(turb.velocity_body))
    # the formulas see h = 1 ft, V dt / L = 1.02 capped at 0.5: an AR(1) with pole 0.5 and stationary
    # std sigma_w / sqrt(1 - 0.5/2); 5000 samples with correlation time ~2 steps estimate the std to
    # ~2 %, so +/- 10 % is safe. (QRSim's pole here is 1 - V dt / L < -1: exponential blow-up.)
    sigma_w = 0.1 * w6 / FT
    np.testing.assert_allclose(np.std(gw, axis=0), sigma_w / math.sqrt(0.75), rtol=0.10)


@pytest.mark.parametrize("speed_mps", [1e3, 1e9])
def test_huge_speeds_stay_finite(speed_mps: float) -> None:
    turb = DrydenTurbulence(2, TurbulenceParams(direction_rad=0.0), RandomStreams(9))
    x = _hover_states(2, 20.0)
    x[:, 7] = speed_mps
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        turb.reset(x)
        for k in range(1, 200):
            turb.step(k, x)
    assert np.all(np.isfinite(turb.velocity_body))
    # the step fraction is capped at 0.5, so the std stays within sqrt(4/3) of sigma (< 1.2 ft/s
    # at 20 m for W6 = 2 m/s); 10 ft/s is > 8 sigma
    assert np.all(np.abs(turb.gust_windframe_fts) < 10.0)


def test_high_altitude_is_clamped_to_the_1000ft_model() -> None:
    """Above 1000 ft the formulas use h = 1000 ft (L_u = L_w = 1000 ft, sigma_u = sigma_w)."""
    a = DrydenTurbulence(1, TurbulenceParams(direction_rad=0.0))
    a_hi, b_hi = a.coefficients(np.array([20.0]), np.array([5000.0]), 0.02)
    a_1k, b_1k = a.coefficients(np.array([20.0]), np.array([1000.0]), 0.02)
    np.testing.assert_array_equal(a_hi, a_1k)
    np.testing.assert_array_equal(b_hi, b_1k)
    np.testing.assert_allclose(a_1k[0], 1 - 20.0 * 0.02 / 1000.0, rtol=1e-12)  # L = 1000 ft on all axes
    np.testing.assert_allclose(b_1k[0, 0], b_1k[0, 2], rtol=1e-12)


def test_same_seed_same_gusts_and_independent_vehicle_streams() -> None:
    def run(seed: int, reset_vehicle_1_at: int | None = None) -> np.ndarray:
        turb = DrydenTurbulence(3, TurbulenceParams(), RandomStreams(seed))
        x = _hover_states(3, 10.0)
        x[:, 6] = [0.0, 1.0, 2.0]
        turb.reset(x)
        out = []
        for k in range(1, 101):
            if k == reset_vehicle_1_at:
                turb.reset(x[1:2], vehicles=[1])
            turb.step(k, x)
            out.append(turb.velocity_body)
        return np.array(out)

    a, b, c = run(31), run(31), run(32)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    # resetting vehicle 1 mid-run redraws only vehicle 1 (its own reset stream), the others are untouched
    d = run(31, reset_vehicle_1_at=50)
    np.testing.assert_array_equal(d[:, [0, 2]], a[:, [0, 2]])
    assert not np.allclose(d[50:, 1], a[50:, 1])


def test_random_direction_per_vehicle_redrawn_at_reset() -> None:
    turb = DrydenTurbulence(4, TurbulenceParams(direction_rad=None), RandomStreams(12))
    x = _hover_states(4, 10.0)
    turb.reset(x)
    first = turb.direction_rad
    assert len(set(first.tolist())) == 4
    assert np.all((first >= 0) & (first < 2 * math.pi))
    turb.reset(x)
    assert np.all(turb.direction_rad != first)
    turb.set_direction(1.25, vehicles=[2])
    assert turb.direction_rad[2] == 1.25


def test_spin_up_reaches_the_stationary_level() -> None:
    """After the 1001-step spin-up at V dt / L = 0.05 (pole 0.95) the state is stationary:
    std over 2000 vehicles ~ sigma / sqrt(1 - 0.05/2) (sampling error of the std ~1.6 %, tolerance 6 %)."""
    n = 2000
    dt = 0.02
    h_ft, w6 = 20.0, 2.0
    v_fts = 0.05 * h_ft / dt  # w axis: L_w = h
    turb = DrydenTurbulence(n, TurbulenceParams(w6_mps=w6, direction_rad=0.0), RandomStreams(13))
    turb.spin_up(np.full(n, v_fts), np.full(n, h_ft))
    sigma_w = 0.1 * w6 / FT
    assert np.std(turb.gust_windframe_fts[:, 2]) == pytest.approx(sigma_w / math.sqrt(1 - 0.025), rel=0.06)


def test_rate_sample_and_hold_and_off() -> None:
    turb = DrydenTurbulence(2, TurbulenceParams(dt_s=0.04, direction_rad=0.0), RandomStreams(14))
    x = _hover_states(2, 10.0)
    turb.reset(x)
    held = turb.velocity_body
    assert not turb.step(1, x)
    np.testing.assert_array_equal(turb.velocity_body, held)
    assert turb.step(2, x)
    assert not np.array_equal(turb.velocity_body, held)

    off = DrydenTurbulence(2, TurbulenceParams(on=False), RandomStreams(14))
    off.reset(x)
    assert off.step(1, x)
    assert np.all(off.velocity_body == 0.0)


def test_inactive_or_non_finite_vehicles_hold_their_gust() -> None:
    turb = DrydenTurbulence(3, TurbulenceParams(direction_rad=0.0), RandomStreams(15))
    x = _hover_states(3, 10.0)
    turb.reset(x)
    turb.step(1, x)
    before = turb.velocity_body
    x2 = x.copy()
    x2[2, :] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        turb.step(2, x2, active=[True, False, True])
    after = turb.velocity_body
    assert not np.array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1:], before[1:])


def test_parameter_validation() -> None:
    for kwargs, name in (
        (dict(dt_s=0.03), "dt_s"),
        (dict(w6_mps=-1.0), "w6_mps"),
        (dict(velocity_offset_mps=-0.1), "velocity_offset_mps"),
        (dict(min_height_ft=0.0), "min_height_ft"),
        (dict(min_height_ft=10.0, max_height_ft=5.0), "max_height_ft"),
        (dict(max_step_fraction=1.5), "max_step_fraction"),
        (dict(spin_up_steps=-1), "spin_up_steps"),
        (dict(direction_rad=float("nan")), "direction_rad"),
    ):
        with pytest.raises(ConfigError, match=name):
            TurbulenceParams(**kwargs)
    with pytest.raises(ConfigError, match="w6_mps"):
        DrydenTurbulence(3, TurbulenceParams(w6_mps=(1.0, 2.0)))
    with pytest.raises(ValueError, match="dt_s"):
        DrydenTurbulence(1).advance([1.0], [10.0], dt_s=0.0)

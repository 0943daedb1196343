"""Tests of qrsim_ros.core.sensors.gps: space segment (spec 3.2), receiver (3.3), sharing (1.7), 8.3 item 5.

Expected values come from the spec's equations and numbers, from the logged GPS data, or from
geometry recomputed here; statistical tests use fixed seeds and say why their tolerances hold.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import solve_discrete_lyapunov

from qrsim_ros.core.common import geodesy
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.sensors.gps import (
    GpsReceiver,
    GpsReceiverParams,
    GpsSpaceSegment,
    GpsSpaceSegmentParams,
    NominalConstellation,
    Sp3Error,
    Sp3Orbits,
)
from qrsim_ros.core.sensors.gps_orbits import QRSIM_DEFAULT_SVS, gps_seconds

SP3_NAME = "ngs15992_16to17.sp3"
GPS_TICKS = 10  # 0.2 s / 0.02 s
ORIGIN = geodesy.QRSIM_ORIGIN


@pytest.fixture(scope="module")
def sp3(qrsim_data_dir: Path) -> Sp3Orbits:
    return Sp3Orbits(qrsim_data_dir / SP3_NAME)


@pytest.fixture(scope="module")
def nominal() -> NominalConstellation:
    return NominalConstellation()


def state(pos_ned, vel_body=(0.0, 0.0, 0.0), psi: float = 0.0) -> np.ndarray:
    """True states (N, 13) with the given NED positions, yaw and body velocities."""
    pos = np.atleast_2d(np.asarray(pos_ned, float))
    x = np.zeros((pos.shape[0], 13))
    x[:, :3] = pos
    x[:, 5] = psi
    x[:, 6:9] = vel_body
    return x


def make(seed: int, n: int = 1, orbits=None, space: dict | None = None, rx: dict | None = None,
         first_vehicle: int = 0) -> tuple[GpsSpaceSegment, GpsReceiver]:
    streams = RandomStreams(seed)
    seg = GpsSpaceSegment(GpsSpaceSegmentParams(**(space or {})), streams, orbits)
    rec = GpsReceiver(n, seg, GpsReceiverParams(**(rx or {})), streams, first_vehicle=first_vehicle)
    return seg, rec


def up_and_site(pos_ned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ECEF position and geodetic up vector of NED points (independent of the receiver's helpers)."""
    lla = geodesy.ned_to_lla(pos_ned, ORIGIN)
    lat, lon = np.radians(lla[:, 0]), np.radians(lla[:, 1])
    up = np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    return geodesy.lla_to_ecef(lla), up


def elevations(seg: GpsSpaceSegment, pos_ned: np.ndarray, prns) -> np.ndarray:
    site, up = up_and_site(np.atleast_2d(pos_ned))
    index = [seg.prns.index(p) for p in prns]
    los = seg.positions_ecef[index] - site[0]
    return np.degrees(np.arcsin(los @ up[0] / np.linalg.norm(los, axis=1)))


# --- parameters ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"pr_sigma_m": -0.1}, "pr_sigma_m"),
        ({"dt_s": 0.03}, "dt_s"),
        ({"dt_s": 0.0}, "dt_s"),
        ({"pr_beta1": 0.99}, "pr_beta1"),
        ({"pr_beta1": float("nan")}, "pr_beta1"),
        ({"pr_beta2_s": 0.0}, "pr_beta2_s"),
        ({"svs": (1, 2, 3)}, "svs"),
        ({"svs": (1, 2, 3, 3)}, "svs"),
        ({"spin_up_max_steps": -1}, "spin_up_max_steps"),
        ({"start_window_s": (10.0, 5.0)}, "start_window_s"),
    ],
)
def test_space_segment_params_rejected(kwargs: dict, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        GpsSpaceSegmentParams(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"r_sigma_m": -0.002}, "r_sigma_m"),
        ({"dt_s": 0.21}, "dt_s"),
        ({"elevation_mask_deg": -1.0}, "elevation_mask_deg"),
        ({"elevation_mask_deg": 90.0}, "elevation_mask_deg"),
        ({"elevation_mask_deg": float("nan")}, "elevation_mask_deg"),
        ({"min_max_num_sv": (3, 13)}, "min_max_num_sv"),
        ({"min_max_num_sv": (12, 10)}, "min_max_num_sv"),
        ({"min_max_num_sv": (10.5, 13)}, "min_max_num_sv"),
        ({"min_max_num_sv": (10,)}, "min_max_num_sv"),
        ({"delay_samples": -1}, "delay_samples"),
        ({"delay_samples": 1.5}, "delay_samples"),
        ({"gauss_newton_iterations": 0}, "gauss_newton_iterations"),
    ],
)
def test_receiver_params_rejected(kwargs: dict, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        GpsReceiverParams(**kwargs)


def test_configuration_errors_across_objects(sp3: Sp3Orbits, nominal: NominalConstellation,
                                             tmp_path: Path) -> None:
    streams = RandomStreams(1)
    with pytest.raises(ConfigError, match=r"satellites \[1\] are not in the orbit source"):
        GpsSpaceSegment(GpsSpaceSegmentParams(svs=(1, 2, 3, 4)), streams, sp3)
    with pytest.raises(ConfigError, match="t_start_s"):
        GpsSpaceSegment(GpsSpaceSegmentParams(t_start_s=gps_seconds(2010, 8, 31, 19)), streams, sp3)
    with pytest.raises(ConfigError, match="start_window_s"):
        GpsSpaceSegment(GpsSpaceSegmentParams(start_window_s=(0.0, 1.0)), streams, sp3)
    seg = GpsSpaceSegment(GpsSpaceSegmentParams(), streams, nominal)
    with pytest.raises(ConfigError, match="needs a GpsSpaceSegment"):
        GpsReceiver(1, None, GpsReceiverParams(), streams)
    with pytest.raises(ConfigError, match="dt_s"):
        GpsReceiver(1, seg, GpsReceiverParams(dt_s=0.4), streams)
    small = GpsSpaceSegment(GpsSpaceSegmentParams(svs=(1, 2, 3, 4, 5)), streams, nominal)
    with pytest.raises(ConfigError, match="tracks only 5 satellites"):
        GpsReceiver(1, small, GpsReceiverParams(), streams)
    # missing and malformed orbit files named by the parameter path
    with pytest.raises(Sp3Error, match=r"missing\.sp3"):
        GpsSpaceSegment(GpsSpaceSegmentParams(orbit_file=str(tmp_path / "missing.sp3")), streams)
    bad = tmp_path / "bad.sp3"
    bad.write_text("#aP2010  8 31 15  0  0.00000000      96\n*  2010  8 31 15  0  x\n", encoding="ascii")
    with pytest.raises(Sp3Error, match="line 2: malformed epoch line"):
        GpsSpaceSegment(GpsSpaceSegmentParams(orbit_file=str(bad)), streams)


def test_orbit_source_selection(qrsim_data_dir: Path) -> None:
    streams = RandomStreams(3)
    seg = GpsSpaceSegment(GpsSpaceSegmentParams(), streams)
    assert isinstance(seg.orbits, NominalConstellation) and seg.prns == tuple(range(1, 25))
    seg = GpsSpaceSegment(GpsSpaceSegmentParams(orbit_file=str(qrsim_data_dir / SP3_NAME)), streams)
    assert isinstance(seg.orbits, Sp3Orbits) and seg.prns == QRSIM_DEFAULT_SVS


# --- space segment ------------------------------------------------------------------------------------

def test_stationary_pseudorange_variance() -> None:
    # Independent: the 2-state recursion s <- A s + B w, s = [prns, prns1], A = [[1/b1, 1], [0, a2]],
    # has the stationary covariance P = A P A^T + B B^T (discrete Lyapunov equation).
    p = GpsSpaceSegmentParams(pr_sigma_m=QRSIM_PR_SIGMA_M)  # the spec quotes figures for QRSim's 0.003 m
    a2 = math.exp(-p.dt_s / p.pr_beta2_s)
    cov = solve_discrete_lyapunov(np.array([[1.0 / p.pr_beta1, 1.0], [0.0, a2]]),
                                  np.diag([0.0, p.pr_sigma_m**2]))
    assert p.stationary_variance_m2() == pytest.approx(cov[0, 0], rel=1e-9)
    assert math.sqrt(cov[1, 1]) == pytest.approx(0.00972, abs=1e-5)  # spec 3.2
    assert math.sqrt(p.stationary_variance_m2()) == pytest.approx(0.589, abs=1e-3)  # spec 3.2
    assert GpsSpaceSegmentParams(on=False).stationary_variance_m2() == 0.0


def test_gm2_recursion_exact(nominal: NominalConstellation) -> None:
    # With no spin-up the errors after n updates follow spec 3.2 from the per-satellite streams:
    # prns <- prns / PR_BETA1 + prns1 (old prns1), then prns1 <- prns1 exp(-dt/PR_BETA2) + PR_SIGMA w.
    t0 = gps_seconds(2022, 2, 2, 2)
    params = GpsSpaceSegmentParams(spin_up_max_steps=0, t_start_s=t0, pr_sigma_m=QRSIM_PR_SIGMA_M)
    seg = GpsSpaceSegment(params, RandomStreams(11), nominal)
    seg.reset()
    np.testing.assert_array_equal(seg.pseudorange_errors_m, 0.0)
    n = 150
    for k in range(1, n * GPS_TICKS + 1):
        updated = seg.step(k)
        assert updated == (k % GPS_TICKS == 0)
    streams = RandomStreams(11)
    for j, prn in enumerate(seg.prns):
        w = streams.get("gps_space_segment.pseudorange", prn).standard_normal(n)
        e1 = e2 = 0.0
        for i in range(n):
            e1, e2 = e1 / 1.005 + e2, e2 * math.exp(-0.2 / 4.0) + 0.003 * w[i]
        assert seg.pseudorange_errors_m[j] == pytest.approx(e1, rel=1e-12, abs=1e-15)
    # satellites are placed at GPS time t_start + k 0.02 s
    np.testing.assert_allclose(seg.positions_ecef, nominal.positions_ecef(seg.prns, t0 + n * 0.2), atol=1e-6)
    assert seg.gps_time_s(n * GPS_TICKS) == pytest.approx(t0 + 30.0)


def test_random_start_time_and_spin_up(sp3: Sp3Orbits) -> None:
    seg = GpsSpaceSegment(GpsSpaceSegmentParams(), RandomStreams(5), sp3)
    starts = []
    for _ in range(3):
        seg.reset()
        starts.append(seg.t_start_s)
        assert np.all(seg.pseudorange_errors_m != 0.0)  # spun up
    b, e = sp3.valid_span_s
    assert all(b <= t <= e - 1800.0 for t in starts)  # spec 3.2: tStart in [b, e - TBEFOREEND]
    assert len(set(starts)) == 3  # drawn again at every reset
    again = GpsSpaceSegment(GpsSpaceSegmentParams(), RandomStreams(5), sp3)
    again.reset()
    assert again.t_start_s == starts[0]
    off = GpsSpaceSegment(GpsSpaceSegmentParams(on=False), RandomStreams(5), sp3)
    off.reset()
    assert off.t_start_s == b
    for k in range(1, 101):
        off.step(k)
    np.testing.assert_array_equal(off.pseudorange_errors_m, 0.0)


def test_space_segment_step_before_reset_raises(nominal: NominalConstellation) -> None:
    seg = GpsSpaceSegment(GpsSpaceSegmentParams(), RandomStreams(1), nominal)
    with pytest.raises(RuntimeError, match="before reset"):
        seg.step(10)


# --- receiver: delay, noiseless, determinism ----------------------------------------------------------

@pytest.mark.parametrize("delay", [0, 1, 2])
@pytest.mark.parametrize("space_off", [False, True])
def test_delay_with_noiseless_pseudoranges(nominal: NominalConstellation, delay: int,
                                           space_off: bool) -> None:
    # Without pseudorange and receiver noise the fix is exact, so at constant velocity the output lags
    # the truth by delay * 0.2 s: error = -v * delay * 0.2 s (spec 3.3).
    space = {"on": False} if space_off else {"pr_sigma_m": 0.0}
    seg, rec = make(2, 1, nominal, space=space, rx={"r_sigma_m": 0.0, "delay_samples": delay})
    psi, vb = 0.7, np.array([3.0, -2.0, 0.5])
    v_ned = np.array([vb[0] * math.cos(psi) - vb[1] * math.sin(psi),
                      vb[0] * math.sin(psi) + vb[1] * math.cos(psi), vb[2]])  # yaw-only rotation
    p0 = np.array([10.0, -5.0, -20.0])
    seg.reset()
    rec.reset(state(p0, vb, psi))
    lag = v_ned * delay * 0.2
    assert np.abs(rec.position_ned[0] - (p0 - lag)).max() < 0.01
    np.testing.assert_allclose(rec.velocity_ned[0], v_ned, atol=0.01)
    held = None
    for k in range(1, 301):
        t = k * 0.02
        seg.step(k)
        updated = rec.step(k, state(p0 + v_ned * t, vb, psi))
        if updated:
            assert np.abs(rec.position_ned[0] - (p0 + v_ned * t - lag)).max() < 0.01
            np.testing.assert_allclose(rec.velocity_ned[0], v_ned, atol=0.01)
            held = rec.position_ned.copy()
        else:
            np.testing.assert_array_equal(rec.position_ned, held if held is not None else rec.position_ned)
    assert rec.has_fix.all()
    np.testing.assert_allclose(rec.lla, geodesy.ned_to_lla(rec.position_ned, ORIGIN), atol=1e-12)


def test_noiseless_receiver_is_truth_sampled_at_5hz() -> None:
    outputs = []
    for seed in (1, 2):  # no random draws at all: the seed does not matter
        rec = GpsReceiver(2, None, GpsReceiverParams(on=False), RandomStreams(seed))
        p0 = np.array([[0.0, 0.0, -20.0], [30.0, 40.0, -10.0]])
        vb = np.array([[1.0, 2.0, -0.5], [0.0, -1.0, 0.0]])
        psi = 0.3
        v_ned = np.column_stack([vb[:, 0] * math.cos(psi) - vb[:, 1] * math.sin(psi),
                                 vb[:, 0] * math.sin(psi) + vb[:, 1] * math.cos(psi), vb[:, 2]])
        rec.reset(state(p0, vb, psi))
        np.testing.assert_allclose(rec.position_ned, p0, atol=1e-12)
        run = []
        for k in range(1, 101):
            truth = p0 + v_ned * k * 0.02
            rec.step(k, state(truth, vb, psi))
            sample_k = k - k % GPS_TICKS
            np.testing.assert_allclose(rec.position_ned, p0 + v_ned * sample_k * 0.02, atol=1e-12)
            np.testing.assert_allclose(rec.velocity_ned, v_ned, atol=1e-12)
            run.append(rec.position_ned.copy())
        np.testing.assert_allclose(rec.lla, geodesy.ned_to_lla(rec.position_ned, ORIGIN), atol=1e-12)
        np.testing.assert_array_equal(rec.position_variance_ned, 0.0)
        assert rec.has_fix.all()
        outputs.append(np.array(run))
    np.testing.assert_array_equal(outputs[0], outputs[1])


def run_receivers(seed: int, n: int, steps: int, orbits, x_of_k) -> np.ndarray:
    seg, rec = make(seed, n, orbits)
    seg.reset()
    rec.reset(x_of_k(0))
    out = []
    for k in range(1, steps + 1):
        seg.step(k)
        if rec.step(k, x_of_k(k)):
            out.append(np.concatenate([rec.position_ned, rec.velocity_ned, rec.lla], axis=1))
    return np.array(out)


def test_determinism(nominal: NominalConstellation) -> None:
    def x_of_k(k: int) -> np.ndarray:
        return state([[0.0, 0.0, -20.0], [5.0, 1.0, -10.0]])

    a = run_receivers(7, 2, 300, nominal, x_of_k)
    b = run_receivers(7, 2, 300, nominal, x_of_k)
    c = run_receivers(8, 2, 300, nominal, x_of_k)
    assert np.array_equal(a, b)
    assert np.all(np.isfinite(a))
    assert not np.allclose(a, c)


def test_velocity_is_finite_difference_of_fixes(nominal: NominalConstellation) -> None:
    seg, rec = make(4, 2, nominal)
    x = state([[0.0, 0.0, -20.0], [100.0, -50.0, -30.0]])
    seg.reset()
    rec.reset(x)
    previous = rec.position_ned.copy()
    for k in range(1, 201):
        seg.step(k)
        if rec.step(k, x):
            expected = (rec.position_ned - previous) / 0.2
            np.testing.assert_allclose(rec.velocity_ned, expected, rtol=0, atol=1e-9)
            previous = rec.position_ned.copy()
    assert np.abs(rec.velocity_ned).max() > 0.0


# --- receiver: vectorisation and resets ---------------------------------------------------------------

def test_vectorised_equals_separate_receivers(nominal: NominalConstellation) -> None:
    n = 4
    p0 = np.array([[0.0, 0.0, -20.0], [500.0, -300.0, -40.0], [-2000.0, 1500.0, -10.0], [10.0, 10.0, -60.0]])
    vb = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [-1.0, -1.0, 0.2], [0.0, 0.0, 0.0]])

    def x_of_k(k: int) -> np.ndarray:
        return state(p0 + vb * k * 0.02, vb)

    streams = RandomStreams(21)
    seg = GpsSpaceSegment(GpsSpaceSegmentParams(), streams, nominal)
    together = GpsReceiver(n, seg, GpsReceiverParams(), streams)
    alone = [GpsReceiver(1, seg, GpsReceiverParams(), streams, first_vehicle=i) for i in range(n)]
    seg.reset()
    together.reset(x_of_k(0))
    for i, r in enumerate(alone):
        r.reset(x_of_k(0)[i:i + 1])
    for k in range(1, 401):
        seg.step(k)
        together.step(k, x_of_k(k))
        for i, r in enumerate(alone):
            r.step(k, x_of_k(k)[i:i + 1])
        if k % 50 == 0:
            for i, r in enumerate(alone):
                np.testing.assert_allclose(together.position_ned[i], r.position_ned[0], rtol=0, atol=1e-9)
                np.testing.assert_allclose(together.velocity_ned[i], r.velocity_ned[0], rtol=0, atol=1e-9)
                np.testing.assert_allclose(together.lla[i], r.lla[0], rtol=0, atol=1e-12)
                np.testing.assert_allclose(together.position_variance_ned[i], r.position_variance_ned[0],
                                           rtol=1e-9)
                assert together.satellites_used[i] == r.satellites_used[0]


def test_reset_of_one_vehicle_leaves_the_others_alone(nominal: NominalConstellation) -> None:
    x = state([[0.0, 0.0, -20.0], [50.0, 0.0, -20.0], [0.0, 80.0, -30.0]])
    runs = []
    for reset_middle in (False, True):
        seg, rec = make(9, 3, nominal)
        seg.reset()
        rec.reset(x)
        out = []
        for k in range(1, 301):
            seg.step(k)
            if k == 150 and reset_middle:
                rec.reset(state([20.0, 20.0, -5.0]), vehicles=[1])
            rec.step(k, x)
            out.append(rec.position_ned.copy())
        runs.append(np.array(out))
    np.testing.assert_array_equal(runs[0][:, [0, 2]], runs[1][:, [0, 2]])
    assert not np.array_equal(runs[0][150:, 1], runs[1][150:, 1])


def test_no_fix_and_hold_last_fix(nominal: NominalConstellation) -> None:
    # Mask 80 deg: the cap above 80 deg is 0.4 % of the sky (0.1 satellites on average): no fix.
    seg, rec = make(3, 1, nominal, rx={"elevation_mask_deg": 80.0})
    seg.reset()
    rec.reset(state([0.0, 0.0, -20.0]))
    assert not rec.has_fix[0] and np.all(np.isnan(rec.position_ned))
    seg.step(10)
    rec.step(10, state([0.0, 0.0, -20.0]))
    assert not rec.has_fix[0]
    # A vehicle whose true state turns non-finite (invalid platform) holds its last fix.
    seg, rec = make(3, 2, nominal)
    x = state([[0.0, 0.0, -20.0], [10.0, 0.0, -20.0]])
    seg.reset()
    rec.reset(x)
    for k in range(1, 51):
        seg.step(k)
        rec.step(k, x)
    held = rec.position_ned[1].copy()
    bad = x.copy()
    bad[1, :] = np.nan
    for k in range(51, 101):
        seg.step(k)
        rec.step(k, bad)
        if k >= 60:  # from the first update with the bad state on
            assert not rec.has_fix[1] and rec.has_fix[0]
        np.testing.assert_array_equal(rec.position_ned[1], held)
    seg.step(110)
    rec.step(110, x)
    assert rec.has_fix.all()
    np.testing.assert_array_equal(rec.velocity_ned[1], 0.0)  # no finite difference across a gap
    assert np.abs(rec.position_ned[1] - x[1, :3]).max() < 5.0


def test_reset_and_step_input_checks(nominal: NominalConstellation) -> None:
    seg, rec = make(1, 2, nominal)
    with pytest.raises(RuntimeError, match="reset the GPS space segment"):
        rec.reset(state([[0.0, 0.0, -1.0], [0.0, 0.0, -1.0]]))
    seg.reset()
    with pytest.raises(ValueError, match="expected states"):
        rec.reset(state([0.0, 0.0, -1.0]))
    with pytest.raises(ValueError, match="finite"):
        rec.reset(np.full((2, 13), np.nan))
    rec.reset(state([[0.0, 0.0, -1.0], [0.0, 0.0, -1.0]]))
    with pytest.raises(RuntimeError, match="step the GPS space segment"):
        rec.step(10, state([[0.0, 0.0, -1.0], [0.0, 0.0, -1.0]]))


# --- satellite choice and visibility ------------------------------------------------------------------

def test_elevation_mask_respected_as_satellites_rise_and_set(nominal: NominalConstellation) -> None:
    mask = 10.0
    pos = np.array([[0.0, 0.0, -20.0], [2000.0, -3000.0, -100.0], [-5000.0, 4000.0, -50.0]])
    seg, rec = make(12, 3, nominal, rx={"elevation_mask_deg": mask})
    seg.reset()
    rec.reset(state(pos))
    seen = [set(rec.satellites_used[i]) for i in range(3)]
    changes = 0
    for k in range(3000, 4 * 3600 * 50 + 1, 3000):  # one update per simulated minute over 4 h
        seg.step(k)
        rec.step(k, state(pos))
        assert rec.has_fix.all()
        for i in range(3):
            used = rec.satellites_used[i]
            el_all = elevations(seg, pos[i], seg.prns)
            visible = int((el_all >= mask).sum())
            assert np.all(elevations(seg, pos[i], used) >= mask)
            assert len(used) == len(set(used))
            if visible <= 10:
                assert len(used) == visible  # fewer visible than the minimum of 10: all of them
            else:
                assert 10 <= len(used) <= min(13, visible)
            changes += set(used) != seen[i]
            seen[i] = set(used)
    assert changes > 10  # the test did exercise satellites setting and rising


def test_random_subsets_without_mask(sp3: Sp3Orbits) -> None:
    # QRSim's choice (no visibility check): nsv ~ U{10..13} of the 13 satellites, random subset.
    seg, rec = make(6, 8, sp3, rx={"elevation_mask_deg": None})
    seg.reset()
    rec.reset(state(np.tile([0.0, 0.0, -20.0], (8, 1))))
    used = rec.satellites_used
    assert all(10 <= len(u) <= 13 and set(u) <= set(QRSIM_DEFAULT_SVS) for u in used)
    assert len({frozenset(u) for u in used}) > 1
    assert len({len(u) for u in used}) > 1


# --- shared errors, receiver noise and covariance -----------------------------------------------------

def test_shared_space_segment_correlates_vehicles(nominal: NominalConstellation) -> None:
    # Two vehicles at the same place see the same satellites (fewer than 10 are visible, so both use
    # all of them) with the same pseudorange errors: their errors are nearly identical; what differs
    # is the receiver noise, independent between them. 600 updates (2 min) per run.
    seg, rec = make(31, 2, nominal)
    x = state([[0.0, 0.0, -20.0], [0.0, 0.0, -20.0]])
    seg.reset()
    rec.reset(x)
    err = []
    for k in range(1, 600 * GPS_TICKS + 1):
        seg.step(k)
        if rec.step(k, x):
            assert set(rec.satellites_used[0]) == set(rec.satellites_used[1])
            err.append(rec.position_ned - x[:, :3])
    err = np.array(err)  # (T, 2, 3)
    diff, common = err[:, 0] - err[:, 1], 0.5 * (err[:, 0] + err[:, 1])
    for axis in range(3):
        assert np.corrcoef(err[:, 0, axis], err[:, 1, axis])[0, 1] > 0.9
        # the white receiver-noise difference is uncorrelated with the common part: |r| < 4/sqrt(600)
        assert abs(np.corrcoef(diff[:, axis], common[:, axis])[0, 1]) < 0.16
    # receiver-noise level: var(diff) = 2 R_SIGMA^2 * DOP^2 per axis; the DOP comes from the variance
    # output divided by UERE^2 (the geometry changes little in 2 min); 600 samples: +-6 % (1 sigma)
    dop2 = rec.position_variance_ned[0] / rec.uere_variance_m2
    expected = np.sqrt(2.0 * 0.002**2 * dop2)
    np.testing.assert_allclose(diff.std(axis=0), expected, rtol=0.25)


def test_position_variance_is_uere_times_dop(nominal: NominalConstellation) -> None:
    seg, rec = make(17, 2, nominal, space={"pr_sigma_m": QRSIM_PR_SIGMA_M})
    pos = np.array([[0.0, 0.0, -20.0], [3000.0, 2000.0, -100.0]])
    seg.reset()
    rec.reset(state(pos))
    for k in range(1, 51):
        seg.step(k)
        rec.step(k, state(pos))
    site, up = up_and_site(pos)
    lla = geodesy.ned_to_lla(pos, ORIGIN)
    uere2 = 0.589**2 + 0.002**2  # spec 3.2 stationary pseudorange std for 0.003 m, plus receiver noise
    for i in range(2):
        index = [seg.prns.index(p) for p in rec.satellites_used[i]]
        los = seg.positions_ecef[index] - site[i]
        g = np.column_stack([-los / np.linalg.norm(los, axis=1, keepdims=True), np.ones(len(index))])
        q = np.linalg.inv(g.T @ g)[:3, :3]
        lat, lon = np.radians(lla[i, 0]), np.radians(lla[i, 1])
        north = np.array([-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon), np.cos(lat)])
        east = np.array([-np.sin(lon), np.cos(lon), 0.0])
        ned = np.stack([north, east, -up[i]])
        expected = uere2 * np.diag(ned @ q @ ned.T)
        np.testing.assert_allclose(rec.position_variance_ned[i], expected, rtol=2e-3)
    assert np.all(rec.vertical_variance_m2 > rec.horizontal_variance_m2)  # VDOP > HDOP, satellites above


# --- Allan deviation against the logged GPS (spec 8.1 testGPSNoiseModels, 8.3 item 5) ------------------

def allan_deviation(y: np.ndarray, m: int) -> float:
    """Non-overlapping Allan deviation with m samples per bin (M. Hopcroft's allan.m, QRSim's test)."""
    bins = y[: y.size - y.size % m].reshape(-1, m).mean(axis=1)
    return float(np.sqrt(0.5 * np.mean(np.diff(bins) ** 2)))


LOG_TAUS_S = 0.4 * 2.0 ** np.arange(6)  # 0.4 .. 12.8 s (spec 8.3: tau <= 12.8 s)
SPEC_LOG_ADEV_M = np.array([0.0071, 0.0133, 0.0250, 0.0458, 0.0788, 0.1085])  # spec 8.3 item 5, east
#: The default PR_SIGMA is re-fitted for the default 10 deg mask and the nominal constellation:
#: QRSim's 0.003 m was tuned with satellites all over the sky (no mask); masked geometry has ~1.7x DOP.
DEFAULT_PR_SIGMA_M = GpsSpaceSegmentParams().pr_sigma_m
QRSIM_PR_SIGMA_M = 0.003


@pytest.fixture(scope="module")
def log_adev(qrsim_data_dir: Path) -> np.ndarray:
    d = np.loadtxt(qrsim_data_dir / "gpslog_hover_2p5Hz.csv", delimiter=",")[:350]
    enh, _ = geodesy.lla_to_utm(np.column_stack([d[:, 3] / 1e7, d[:, 4] / 1e7, d[:, 5] / 1e3]))
    east = enh[:, 0] - enh[0, 0]
    return np.array([allan_deviation(east, 2**k) for k in range(LOG_TAUS_S.size)])


def test_log_allan_deviation_matches_spec(log_adev: np.ndarray) -> None:
    np.testing.assert_allclose(log_adev, SPEC_LOG_ADEV_M, atol=6e-5)  # spec rounds to 1e-4


def simulated_north_error(seed: int, orbits, mask: float | None, pr_sigma_m: float) -> np.ndarray:
    """TestGPSTask: hover truth at z = -20, 7000 steps of 0.02 s, eX sampled every 10 steps (700)."""
    seg, rec = make(seed, 1, orbits, space={"pr_sigma_m": pr_sigma_m}, rx={"elevation_mask_deg": mask})
    x = state([0.0, 0.0, -20.0])
    seg.reset()
    rec.reset(x)
    north = []
    for k in range(1, 7001):
        seg.step(k)
        rec.step(k, x)
        if (k - 1) % GPS_TICKS == 0:  # QRSim samples eX(1:K:end)
            north.append(rec.position_ned[0, 0] - x[0, 0])
    return np.array(north)


@pytest.mark.parametrize(
    ("source", "mask", "pr_sigma_m", "per_seed"),
    [
        ("sp3", None, QRSIM_PR_SIGMA_M, True),  # QRSim's setup (no visibility check)
        ("nominal", None, QRSIM_PR_SIGMA_M, True),
        ("nominal", 10.0, DEFAULT_PR_SIGMA_M, False),  # qrsim_ros's defaults
    ],
)
def test_allan_deviation_matches_log(source: str, mask: float | None, pr_sigma_m: float, per_seed: bool,
                                     sp3: Sp3Orbits, nominal: NominalConstellation,
                                     log_adev: np.ndarray) -> None:
    # The simulated north error sampled at 0.2 s, tau = 0.2 2^k, is compared with the log's east
    # coordinate at 0.4 s, tau = 0.4 2^k (the original compares retvals(2:end) with retvalt).
    # Criteria (spec 8.3 item 5): |dADEV| < 0.1 m for tau <= 12.8 s for every seed where the original
    # criterion applies (QRSim's geometry passes it for every seed), and the 4-seed mean within 25 %
    # for tau <= 3.2 s, where each seed has >= 43 bins (ADEV sampling error ~ 1/sqrt(2 bins) < 11 %).
    orbits = sp3 if source == "sp3" else nominal
    adev = []
    for seed in (1, 2, 3, 4):
        north = simulated_north_error(seed, orbits, mask, pr_sigma_m)
        assert north.size == 700
        adev.append([allan_deviation(north, 2 ** (k + 1)) for k in range(LOG_TAUS_S.size)])
    adev = np.array(adev)
    if per_seed:
        assert np.abs(adev - log_adev).max() < 0.1
    mean = adev.mean(axis=0)
    assert np.abs(mean - log_adev).max() < 0.1
    np.testing.assert_allclose(mean[:4], log_adev[:4], rtol=0.25)

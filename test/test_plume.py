"""The three plume models, reference locations and samples (spec 4.4, 5.4, 8.1 testPlume)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import optimize, stats

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.tasks.kl import plume_mse_reward
from qrsim_ros.core.world.plume import (
    GaussianDispersionPlume,
    GaussianPlume,
    GaussianPuffPlume,
)

LIMITS = (-140.0, 140.0, -140.0, 140.0, -80.0, 0.0)  # the plume tasks' area (spec 5.4)
A, B = 0.33, 0.86


def downwind_unit(wind_from_rad: float) -> np.ndarray:
    """Horizontal unit vector the wind blows towards (it blows FROM wind_from, clockwise from north)."""
    return np.array([math.cos(wind_from_rad + math.pi), math.sin(wind_from_rad + math.pi)])


def stockie(points: np.ndarray, source: np.ndarray, q: float, u: float, wind_from: float,
            a: float, b: float) -> np.ndarray:
    """Stockie (2011) Gaussian plume with ground reflection, written with heights above ground and
    sigma_y^2 = sigma_z^2 = s2 = a x^b:
    Q / (2 pi u s2) exp(-y^2 / 2 s2) [exp(-(h - H)^2 / 2 s2) + exp(-(h + H)^2 / 2 s2)]."""
    e = downwind_unit(wind_from)
    n = np.array([-e[1], e[0]])
    d = points[:, :2] - source[:2]
    x, y = d @ e, d @ n
    h, big_h = -points[:, 2], -source[2]
    out = np.zeros(len(points))
    ok = x > 0
    s2 = a * x[ok] ** b
    out[ok] = (q / (2 * math.pi * u * s2) * np.exp(-y[ok] ** 2 / (2 * s2))
               * (np.exp(-(h[ok] - big_h) ** 2 / (2 * s2)) + np.exp(-(h[ok] + big_h) ** 2 / (2 * s2))))
    return out


# --- static Gaussian -----------------------------------------------------------------------------------

def test_gaussian_peak_and_mahalanobis_contours() -> None:
    yaw, sig = 0.7, np.array([12.0, 4.0, 7.0])
    src = np.array([10.0, -20.0, -30.0])
    plume = GaussianPlume(src, sig, yaw, q0=2.5, area_limits_ned=LIMITS)
    assert plume.concentration(src)[0] == 2.5
    rng = np.random.default_rng(0)
    others = src + rng.normal(scale=10.0, size=(500, 3))
    assert np.all(plume.concentration(others) < 2.5)
    # Principal axes written independently: body axis i of a yaw-only rotation, in NED.
    axes = np.array([[math.cos(yaw), math.sin(yaw), 0.0], [-math.sin(yaw), math.cos(yaw), 0.0], [0, 0, 1.0]])
    for k_sigma in (1.0, 2.0):
        # Any point k sigma away along a combination of principal axes lies on the same contour.
        v = rng.normal(size=(50, 3))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        pts = src + k_sigma * (v * sig) @ axes
        np.testing.assert_allclose(plume.concentration(pts), 2.5 * math.exp(-0.5 * k_sigma**2), rtol=1e-12)


def test_gaussian_rotation_is_yaw_only() -> None:
    yaw, sig = 2.0, np.array([15.0, 3.0, 6.0])
    plume = GaussianPlume([0.0, 0.0, -20.0], sig, yaw)
    cov = plume.covariance_m2
    assert cov[0, 2] == 0.0 and cov[1, 2] == 0.0 and cov[2, 2] == pytest.approx(36.0, rel=1e-14)
    major = np.array([math.cos(yaw), math.sin(yaw)])
    np.testing.assert_allclose(cov[:2, :2] @ major, 225.0 * major, rtol=1e-12)
    assert sorted(np.linalg.eigvalsh(cov[:2, :2])) == pytest.approx([9.0, 225.0], rel=1e-12)


def test_gaussian_sample_ranges_and_determinism() -> None:
    for seed in range(10):
        plume = GaussianPlume.sample(np.random.default_rng(seed), LIMITS)
        assert 0.0 <= plume.yaw_rad < math.pi
        assert np.all((plume.sigmas_m >= 3.0) & (plume.sigmas_m <= 20.0))
        s = plume.sources_ned[0]
        assert abs(s[0]) <= 112.0 and abs(s[1]) <= 112.0 and -72.0 <= s[2] <= -8.0  # central 80 % box
        assert plume.q0 == 1.0 and plume.c_eps == pytest.approx(1e-3)
    a = GaussianPlume.sample(RandomStreams(5))
    b = GaussianPlume.sample(RandomStreams(5))
    c = GaussianPlume.sample(RandomStreams(6))
    np.testing.assert_array_equal(a.sources_ned, b.sources_ned)
    assert a.yaw_rad == b.yaw_rad and a.yaw_rad != c.yaw_rad


# --- Gaussian dispersion -------------------------------------------------------------------------------

WIND_FROM = 2.3
U = 2.9


def _dispersion(sources: list[list[float]], rates: list[float]) -> GaussianDispersionPlume:
    return GaussianDispersionPlume(np.array(sources), rates, U, WIND_FROM, A, B, area_limits_ned=LIMITS)


def test_dispersion_matches_independent_stockie_formula() -> None:
    src = np.array([5.0, -10.0, -12.0])
    plume = _dispersion([list(src)], [1.7])
    rng = np.random.default_rng(1)
    e = downwind_unit(WIND_FROM)
    n = np.array([-e[1], e[0]])
    along = rng.uniform(-30.0, 120.0, 400)
    across = rng.normal(scale=8.0, size=400)
    pts = np.column_stack([src[0] + along * e[0] + across * n[0], src[1] + along * e[1] + across * n[1],
                           rng.uniform(-40.0, 0.0, 400)])
    expected = stockie(pts, src, 1.7, U, WIND_FROM, A, B)
    assert np.count_nonzero(expected > 1e-6) > 100  # a real comparison, not zeros against zeros
    got = plume.concentration(pts)
    # exp(-E) carries a relative rounding error of ~E x 1e-16, so far in the tails (values < 1e-30,
    # E > 69) the two implementations may differ by more than 1e-12 relative.
    body = expected > 1e-30
    np.testing.assert_allclose(got[body], expected[body], rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(got[~body], expected[~body], rtol=1e-9, atol=0.0)


def test_dispersion_is_zero_upwind() -> None:
    src = np.array([0.0, 0.0, -20.0])
    plume = _dispersion([list(src)], [2.0])
    rng = np.random.default_rng(2)
    pts = np.column_stack([rng.uniform(-100, 100, (1000, 2)), rng.uniform(-60, 0, 1000)])
    x_down = (pts[:, :2] - src[:2]) @ downwind_unit(WIND_FROM)
    c = plume.concentration(pts)
    assert np.all(c[x_down < 0] == 0.0)
    assert np.all(c[x_down > 0] >= 0.0) and np.any(c[x_down > 0] > 1e-4)


def test_dispersion_symmetric_across_plume_axis() -> None:
    src = np.array([-20.0, 30.0, -15.0])
    plume = _dispersion([list(src)], [1.0])
    e = downwind_unit(WIND_FROM)
    n = np.array([-e[1], e[0]])
    x = np.linspace(1.0, 150.0, 60)[:, None]
    # Crosswind offsets of 0.25 .. 3 plume widths sigma = sqrt(a x^b) (beyond that the values underflow
    # towards 1e-300 where exp's relative rounding, ~exponent x 1e-16, exceeds 1e-12).
    y = np.linspace(0.25, 3.0, 7)[None, :] * np.sqrt(A * x**B)
    xs, ys = np.broadcast_arrays(x, y)
    plus = np.column_stack([src[0] + xs.ravel() * e[0] + ys.ravel() * n[0],
                            src[1] + xs.ravel() * e[1] + ys.ravel() * n[1], np.full(xs.size, -10.0)])
    minus = plus.copy()
    minus[:, :2] = 2 * (src[:2] + xs.ravel()[:, None] * e) - plus[:, :2]  # mirror across the axis
    c_plus, c_minus = plume.concentration(plus), plume.concentration(minus)
    assert np.all(c_plus > 0)
    np.testing.assert_allclose(c_minus, c_plus, rtol=1e-12)


def test_dispersion_ground_reflection() -> None:
    src = np.array([0.0, 0.0, -8.0])
    plume = _dispersion([list(src)], [1.0])
    e = downwind_unit(WIND_FROM)
    rng = np.random.default_rng(3)
    along = rng.uniform(5.0, 100.0, 200)
    pts = np.column_stack([along * e[0], along * e[1], -rng.uniform(0.0, 30.0, 200)])
    mirrored = pts * [1.0, 1.0, -1.0]
    # The image source makes c an even function of z: c(z) == c(-z), hence dc/dz = 0 on the ground.
    np.testing.assert_allclose(plume.concentration(mirrored), plume.concentration(pts), rtol=1e-12)
    # Without the image term the ground value would be half of it: check the reflection doubles it.
    ground = pts * [1.0, 1.0, 0.0]
    x = along
    den = 2 * A * x**B
    direct = 1.0 / (math.pi * U * den) * np.exp(-(src[2] ** 2) / den)
    np.testing.assert_allclose(plume.concentration(ground), 2 * direct, rtol=1e-12)


def test_dispersion_sources_add_linearly() -> None:
    s1, s2 = [10.0, 0.0, -10.0], [-30.0, 20.0, -40.0]
    both = _dispersion([s1, s2], [0.5, 2.0])
    rng = np.random.default_rng(4)
    pts = np.column_stack([rng.uniform(-140, 140, (500, 2)), rng.uniform(-80, 0, 500)])
    total = _dispersion([s1], [0.5]).concentration(pts) + _dispersion([s2], [2.0]).concentration(pts)
    assert np.count_nonzero(total > 1e-6) > 20
    np.testing.assert_allclose(both.concentration(pts), total, rtol=1e-12)
    assert both.c_eps == pytest.approx(0.5e-3)


def test_dispersion_sample() -> None:
    counts = set()
    for seed in range(40):
        plume = GaussianDispersionPlume.sample(np.random.default_rng(seed), LIMITS, wind_speed_mps=3.0,
                                               wind_direction_rad=1.0, num_sources_range=(1, 5))
        counts.add(plume.num_sources)
        assert np.all((plume.emission_rates >= 0.1) & (plume.emission_rates <= 2.5))
        s = plume.sources_ned
        assert np.all(np.abs(s[:, :2]) <= 112.0) and np.all((s[:, 2] >= -72.0) & (s[:, 2] <= -8.0))
        assert plume.c_eps == pytest.approx(1e-3 * plume.emission_rates.min())
        assert (plume.a, plume.b) == (0.33, 0.86)
    assert counts == {1, 2, 3, 4, 5}
    fixed = GaussianDispersionPlume.sample(np.random.default_rng(0), wind_speed_mps=3.0,
                                           wind_direction_rad=0.0, num_sources_range=(3, 3))
    assert fixed.num_sources == 3
    np.testing.assert_allclose(fixed.wind_velocity_ned, [-3.0, 0.0, 0.0], atol=1e-15)


def test_fit_q_a_b_along_the_plume_axis() -> None:
    """testPlume strengthened: fly a straight line along the plume axis, fit [Q, a, b] to the noiseless
    concentrations (independent Stockie model in the fit) and recover them within 10 %; the fitted model
    then predicts the task's reference samples (MSE reward ~ 0)."""
    truth = {"q": 1.7, "a": A, "b": B}
    src = np.array([-60.0, -40.0, -20.0])
    wind_from = 0.4 + math.pi
    plume = GaussianDispersionPlume([src], [truth["q"]], U, wind_from, truth["a"], truth["b"],
                                    area_limits_ned=LIMITS)
    e = downwind_unit(wind_from)
    n = np.array([-e[1], e[0]])
    # Straight line parallel to the axis, 3 m crosswind and 2 m above the source, 5..120 m downwind,
    # one sample per second at 1.5 m/s.
    s = np.arange(5.0, 120.0, 1.5)
    path = np.column_stack([src[0] + s * e[0] + 3.0 * n[0], src[1] + s * e[1] + 3.0 * n[1],
                            np.full(s.size, src[2] - 2.0)])
    measured = plume.concentration(path)
    assert np.all(measured > 0)

    def residuals(theta: np.ndarray) -> np.ndarray:
        q, a, b = theta
        return np.log(stockie(path, src, q, U, wind_from, a, b)) - np.log(measured)

    fit = optimize.least_squares(residuals, x0=[1.0, 0.2, 0.6], bounds=([1e-6] * 3, [np.inf] * 3))
    q, a, b = fit.x
    assert q == pytest.approx(truth["q"], rel=0.1)
    assert a == pytest.approx(truth["a"], rel=0.1)
    assert b == pytest.approx(truth["b"], rel=0.1)
    locations = plume.reference_locations(100, np.random.default_rng(9))
    predicted = stockie(locations, src, q, U, wind_from, a, b)[None, :]
    assert plume_mse_reward(plume.reference_samples(locations), predicted) > -1e-6


# --- Gaussian puff dispersion --------------------------------------------------------------------------

def test_puff_peak_moves_downwind_at_wind_speed() -> None:
    u, wind_from = 3.0, 2.0 * math.pi / 3
    src = np.array([10.0, 5.0, -40.0])
    plume = GaussianPuffPlume([src], u, wind_from, puffs=[[0, 0.0, 1.0]], area_limits_ned=LIMITS)
    e = downwind_unit(wind_from)
    step = 0.05
    s = np.arange(step, 200.0, step)
    axis = np.column_stack([src[0] + s * e[0], src[1] + s * e[1], np.full(s.size, src[2])])
    t1, t2 = 20.0, 50.0
    peak1 = s[np.argmax(plume.concentration(axis, t1))]
    peak2 = s[np.argmax(plume.concentration(axis, t2))]
    # The 1/D^1.5 prefactor (D grows with x') pulls the peak ~0.2 m upwind of u t, nearly uniformly
    # (0.24 m at 60 m, 0.21 m at 150 m), so the displacement equals u dt within the two argmax roundings
    # (one grid step) plus 0.05 m.
    assert abs(peak1 - u * t1) < 0.5 and abs(peak2 - u * t2) < 0.5
    assert abs((peak2 - peak1) - u * (t2 - t1)) <= step + 0.05
    # It is on the axis: a point 5 m crosswind of the peak sees less.
    n = np.array([-e[1], e[0]])
    peak_pt = np.array([[src[0] + peak2 * e[0], src[1] + peak2 * e[1], src[2]]])
    side = peak_pt + np.array([[5 * n[0], 5 * n[1], 0.0]])
    assert plume.concentration(side, t2)[0] < plume.concentration(peak_pt, t2)[0]


def test_puff_concentration_formula() -> None:
    u, wind_from = 2.0, 0.3
    src = np.array([0.0, 0.0, -10.0])
    puffs = np.array([[0, 3.0, 1.2], [0, 10.0, 0.4]])
    plume = GaussianPuffPlume([src], u, wind_from, puffs=puffs, area_limits_ned=LIMITS)
    e = downwind_unit(wind_from)
    n = np.array([-e[1], e[0]])
    # Downwind distance, crosswind offset, z: near the first puff, upwind, between the two puffs.
    layout = [(40.0, 2.0, -12.0), (-5.0, 2.0, -10.0), (25.0, -3.0, -6.0)]
    pts = np.array([[x * e[0] + y * n[0], x * e[1] + y * n[1], z] for x, y, z in layout])
    t = 25.0
    expected = np.zeros(3)
    for i, p in enumerate(pts):
        x, y = (p[:2] - src[:2]) @ e, (p[:2] - src[:2]) @ n
        if x <= 0:
            continue
        den = 2 * A * x**B
        for _, tk, qk in puffs:
            blob = math.exp(-((x - u * (t - tk)) ** 2 + y**2) / den)
            vertical = math.exp(-((p[2] - src[2]) ** 2) / den) + math.exp(-((p[2] + src[2]) ** 2) / den)
            expected[i] += qk / (2 * math.pi * den) ** 1.5 * blob * vertical
    assert expected[0] > 1e-6 and expected[1] == 0.0 and expected[2] > 1e-6
    np.testing.assert_allclose(plume.concentration(pts, t), expected, rtol=1e-12)


def _windy_puff_model(seed: int) -> GaussianPuffPlume:
    return GaussianPuffPlume.sample(np.random.default_rng(seed), LIMITS, wind_speed_mps=3.0,
                                    wind_direction_rad=1.1, num_sources_range=(2, 4))


def test_puff_replay_from_explicit_lists() -> None:
    live = _windy_puff_model(7)
    for k in range(1, 50 * 150 + 1):
        live.step(k)
    assert live.time_s == 150.0 and len(live.puffs) > 5
    pts = live.reference_locations(30, np.random.default_rng(8))
    t = live.time_s + 0.5
    c_live = live.concentration(pts, t)
    assert np.count_nonzero(c_live > 1e-9) > 5
    # Exact replay from the active puff list ...
    frozen = GaussianPuffPlume(live.sources_ned, 3.0, 1.1, puffs=live.puffs, time_s=live.time_s,
                               area_limits_ned=LIMITS)
    np.testing.assert_array_equal(frozen.concentration(pts, t), c_live)
    # ... and of the whole run from the emission log, stepped at the same ticks.
    replay = GaussianPuffPlume(live.sources_ned, 3.0, 1.1, emissions=live.emission_log,
                               area_limits_ned=LIMITS)
    for k in range(1, 50 * 150 + 1):
        replay.step(k)
    np.testing.assert_array_equal(replay.puffs, live.puffs)
    np.testing.assert_array_equal(replay.concentration(pts, t), c_live)


def test_puffs_dropped_when_trailing_edge_leaves_area() -> None:
    u = 2.0
    # Wind from north: puffs travel south (-x) from a source at x = 0 towards xmin = -140.
    plume = GaussianPuffPlume([[0.0, 0.0, -20.0]], u, 0.0, puffs=[[0, 0.0, 1.0], [0, 10.0, 1.0]],
                              emissions=np.empty((0, 3)), area_limits_ned=LIMITS)

    def edge_past_limit(t: float) -> float:
        travelled = u * t
        return travelled - math.sqrt(-math.log(0.01) * 2 * A * travelled**B) - 140.0

    t_leave = optimize.brentq(edge_past_limit, 1.0, 500.0)
    assert t_leave > 140.0 / u + 1.0  # the centre leaves first; the puff stays until its trailing edge does
    plume.propagate_to(140.0 / u + 1.0)
    assert len(plume.puffs) == 2
    plume.propagate_to(t_leave - 0.5)
    assert len(plume.puffs) == 2
    plume.propagate_to(t_leave + 0.5)
    np.testing.assert_array_equal(plume.puffs, [[0, 10.0, 1.0]])
    plume.propagate_to(t_leave + 10.5)
    assert len(plume.puffs) == 0
    with pytest.raises(ValueError, match="back in time"):
        plume.propagate_to(1.0)


def test_puff_emissions_exponential_and_uniform_masses() -> None:
    mu = 5.0
    plume = GaussianPuffPlume([[0.0, 0.0, -20.0]], 3.0, 0.0, mu_s=mu, q_range=(0.1, 2.5),
                              rng=np.random.default_rng(21), area_limits_ned=LIMITS)
    plume.propagate_to(20_000.0)
    log = plume.emission_log
    assert np.all(log[:, 0] == 0)
    times = log[:, 1]
    assert np.all(times < 20_000.0) and plume.next_emission_times_s[0] >= 20_000.0
    intervals = np.diff(np.concatenate([[0.0], times]))
    n = intervals.size
    assert 3600 < n < 4400  # Poisson(4000): +-10 std
    # Mean of n exponentials has std mu/sqrt(n) (~0.08 s): 4 std.
    assert abs(intervals.mean() - mu) < 4 * mu / math.sqrt(n)
    # Shape: Kolmogorov-Smirnov against Exp(mu); a wrong law (e.g. uniform, fixed) gives p ~ 0.
    assert stats.kstest(intervals, "expon", args=(0, mu)).pvalue > 1e-3
    masses = log[:, 2]
    assert masses.min() >= 0.1 and masses.max() <= 2.5
    # Uniform mean 1.3, std 2.4/sqrt(12) = 0.69 -> std of the mean ~0.011: 4 std.
    assert abs(masses.mean() - 1.3) < 4 * 0.69 / math.sqrt(n)
    assert stats.kstest(masses, "uniform", args=(0.1, 2.4)).pvalue > 1e-3


def test_puff_step_timing() -> None:
    plume = _windy_puff_model(3)
    assert not any(plume.step(k) for k in range(1, 50))
    assert plume.time_s == 0.0 and len(plume.puffs) == 0
    assert plume.step(50) and plume.time_s == 1.0
    assert not plume.step(51)


def test_puff_reference_samples() -> None:
    plume = _windy_puff_model(5)
    for k in range(1, 50 * 20 + 1):
        plume.step(k)
    before = plume.puffs
    locations = plume.reference_locations(40, np.random.default_rng(1))
    ref = plume.reference_samples(locations, 30, np.random.default_rng(2))
    assert ref.shape == (30, 40)
    assert np.all(ref >= 0) and np.all(np.isfinite(ref))
    assert np.count_nonzero(ref > 1e-9) > 0.2 * ref.size
    assert len(np.unique(ref.round(12), axis=0)) == 30  # the samples change from one minute to the next
    np.testing.assert_array_equal(plume.puffs, before)  # the live puff list is untouched
    np.testing.assert_array_equal(ref, plume.reference_samples(locations, 30, np.random.default_rng(2)))
    assert not np.array_equal(ref, plume.reference_samples(locations, 30, np.random.default_rng(3)))


def test_puff_average_model_and_sample() -> None:
    plume = GaussianPuffPlume.sample(np.random.default_rng(0), LIMITS, wind_speed_mps=2.0,
                                     wind_direction_rad=0.5, num_sources_range=(1, 4), mu_s=5.0)
    avg = plume.average_model()
    np.testing.assert_allclose(avg.emission_rates, 2.5 / 5.0)
    np.testing.assert_array_equal(avg.sources_ned, plume.sources_ned)
    assert plume.c_eps == pytest.approx(1e-4)
    assert np.all(plume.next_emission_times_s > 0) and len(plume.next_emission_times_s) == plume.num_sources


# --- reference locations (all models) ------------------------------------------------------------------

MODELS = {
    "gaussian": lambda rng: GaussianPlume.sample(rng, LIMITS),
    "dispersion": lambda rng: GaussianDispersionPlume.sample(
        rng, LIMITS, wind_speed_mps=3.0, wind_direction_rad=4.0, num_sources_range=(1, 5)),
    "puff": lambda rng: GaussianPuffPlume.sample(rng, LIMITS, wind_speed_mps=1.0, wind_direction_rad=0.3),
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_reference_locations(kind: str) -> None:
    plume = MODELS[kind](np.random.default_rng(10))
    m = 100
    locs = plume.reference_locations(m, np.random.default_rng(20))
    assert locs.shape == (m, 3)
    lim = np.array(LIMITS).reshape(3, 2)
    assert np.all((locs >= lim[:, 0]) & (locs <= lim[:, 1]))
    n_uniform = math.ceil(0.2 * m)
    # The first ceil(0.2 M) are the first uniform draws of the generator, whatever their concentration.
    first = np.random.default_rng(20).random((n_uniform, 3))
    expected_uniform = lim.mean(axis=1) + (lim[:, 1] - lim[:, 0]) * (first - 0.5)
    np.testing.assert_array_equal(locs[:n_uniform], expected_uniform)
    # The others are inside the support.
    if kind == "puff":
        assert np.all(plume.average_model().concentration(locs[n_uniform:]) >= plume.c_eps)
    else:
        assert np.all(plume.concentration(locs[n_uniform:]) > plume.c_eps)
    # ... which most of the box is not (so the rejection step really selects).
    box = np.random.default_rng(30).uniform(lim[:, 0], lim[:, 1], (2000, 3))
    assert np.mean(plume.support_concentration(box) > plume.c_eps) < 0.5
    np.testing.assert_array_equal(locs, plume.reference_locations(m, np.random.default_rng(20)))
    assert not np.array_equal(locs, plume.reference_locations(m, np.random.default_rng(21)))
    assert len(plume.reference_locations(3, np.random.default_rng(1))) == 3


def test_static_reference_samples_are_the_concentration() -> None:
    plume = MODELS["dispersion"](np.random.default_rng(2))
    locs = plume.reference_locations(50, np.random.default_rng(3))
    ref = plume.reference_samples(locs)
    assert ref.shape == (1, 50)
    np.testing.assert_array_equal(ref[0], plume.concentration(locs))
    assert not plume.step(50)  # static: nothing to update


# --- validation ----------------------------------------------------------------------------------------

SRC = [[0.0, 0.0, -10.0]]


@pytest.mark.parametrize("make", [
    lambda: GaussianPlume([0, 0, -10], [3, 0, 4], 0.0),
    lambda: GaussianPlume([0, 0, -10], [3, -1, 4], 0.0),
    lambda: GaussianPlume([0, 0, -10], [3, 4], 0.0),
    lambda: GaussianPlume([[0, 0, -10], [1, 1, -10]], [3, 3, 4], 0.0),
    lambda: GaussianPlume([0, 0, -10], [3, 3, 4], 0.0, q0=0.0),
    lambda: GaussianPlume.sample(np.random.default_rng(0), sigma_range_m=(0.0, 5.0)),
    lambda: GaussianDispersionPlume(SRC, [1.0], 0.0, 0.0),
    lambda: GaussianDispersionPlume(SRC, [1.0], -2.0, 0.0),
    lambda: GaussianDispersionPlume(SRC, [1.0], 3.0, 0.0, a=0.0),
    lambda: GaussianDispersionPlume(SRC, [1.0], 3.0, 0.0, b=-0.86),
    lambda: GaussianDispersionPlume(SRC, [0.0], 3.0, 0.0),
    lambda: GaussianDispersionPlume(SRC, [1.0, 2.0], 3.0, 0.0),
    lambda: GaussianDispersionPlume(np.empty((0, 3)), [], 3.0, 0.0),
    lambda: GaussianDispersionPlume([[0.0, 0.0]], [1.0], 3.0, 0.0),
    lambda: GaussianDispersionPlume([[0.0, np.nan, -1.0]], [1.0], 3.0, 0.0),
    lambda: GaussianDispersionPlume(SRC, [1.0], 3.0, 0.0, area_limits_ned=(1, -1, 0, 1, -1, 0)),
    lambda: GaussianDispersionPlume.sample(np.random.default_rng(0), wind_speed_mps=3, wind_direction_rad=0,
                                           num_sources_range=(0, 2)),
    lambda: GaussianDispersionPlume.sample(np.random.default_rng(0), wind_speed_mps=3, wind_direction_rad=0,
                                           num_sources_range=(3, 2)),
    lambda: GaussianDispersionPlume.sample(np.random.default_rng(0), wind_speed_mps=3, wind_direction_rad=0,
                                           q_range=(-0.1, 2.5)),
    lambda: GaussianPuffPlume(SRC, 3.0, 0.0, mu_s=0.0),
    lambda: GaussianPuffPlume(SRC, 3.0, 0.0, q_range=(2.5, 0.1)),
    lambda: GaussianPuffPlume(SRC, 0.0, 0.0),
    lambda: GaussianPuffPlume(SRC, 3.0, 0.0, area_dt_s=0.03),
    lambda: GaussianPuffPlume(SRC, 3.0, 0.0, puffs=[[1, 0.0, 1.0]]),
    lambda: GaussianPuffPlume(SRC, 3.0, 0.0, puffs=[[0, 0.0, -1.0]]),
    lambda: GaussianPuffPlume(SRC, 3.0, 0.0, puffs=[[0, 0.0]]),
    lambda: GaussianPuffPlume(SRC, 3.0, 0.0, rng=np.random.default_rng(0), emissions=np.empty((0, 3))),
    lambda: GaussianPuffPlume(SRC, 3.0, 0.0, next_emission_times_s=[1.0]),
    lambda: GaussianPlume([0, 0, -10], [3, 3, 4], 0.0).reference_locations(0, np.random.default_rng(0)),
])
def test_invalid_parameters_raise_config_error(make: Callable[[], object]) -> None:
    with pytest.raises(ConfigError):
        make()


def test_bad_query_points() -> None:
    plume = GaussianPlume([0, 0, -10], [3, 3, 4], 0.0)
    with pytest.raises(ValueError, match="points_ned"):
        plume.concentration(np.zeros((4, 2)))
    with pytest.raises(TypeError, match="Generator"):
        plume.reference_locations(5, "42")  # type: ignore[arg-type]


def test_models_sample_from_an_integer_seed() -> None:
    # "sampled from a seed": an int is the scenario seed (named streams), so it reproduces exactly.
    kw = {"wind_speed_mps": 3.0, "wind_direction_rad": 0.3}
    a, b = GaussianDispersionPlume.sample(5, **kw), GaussianDispersionPlume.sample(5, **kw)
    c = GaussianDispersionPlume.sample(6, **kw)
    assert np.array_equal(a.sources_ned, b.sources_ned)
    assert not np.array_equal(a.sources_ned, c.sources_ned)
    assert np.array_equal(GaussianPlume.sample(5).covariance_m2, GaussianPlume.sample(5).covariance_m2)
    p, q = GaussianPuffPlume.sample(5, **kw), GaussianPuffPlume.sample(5, **kw)
    p.propagate_to(60.0)
    q.propagate_to(60.0)
    assert np.array_equal(p.puffs, q.puffs) and len(p.puffs) > 0

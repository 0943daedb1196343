"""Camera with person classifier (spec 3.5, 8.1 tests/camera, 10.9).

Expected values come from the spec's formulas or first principles: a level camera with QRSim's mounting
(camera x = body y, camera y = -body x) at height h and yaw 0 maps the ground point (N, E) to the pixel
u = c1 + f1 E / h, v = c2 - f2 N / h.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy.stats import norm

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.sensors.camera import CameraObservation, CameraParams, CameraWithClassifier
from qrsim_ros.core.sensors.camera_geometry import CameraGeometry, WindowGrid
from qrsim_ros.core.sensors.obs_model import IndepObsModel

F, C = 2280.0, np.array([640.0, 480.0])
TICK_1S = 50  # the camera updates every 50 base ticks of 0.02 s


def state(h: float, n: float = 0.0, e: float = 0.0, phi: float = 0.0, theta: float = 0.0, psi: float = 0.0):
    x = np.zeros(13)
    x[:6] = [n, e, -h, phi, theta, psi]
    return x


def ground_of_pixel(u: float, v: float, h: float) -> list[float]:
    """Ground point (NED) seen at pixel (u, v) from a level camera at height h over the origin, yaw 0."""
    return [-(v - C[1]) * h / F, (u - C[0]) * h / F, 0.0]


def camera(seed: int = 1, n: int = 1, **kw) -> CameraWithClassifier:
    return CameraWithClassifier(n, CameraParams(**kw), RandomStreams(seed))


def one_frame(x, persons=None, terrain=None, seed: int = 1) -> CameraObservation:
    cam = camera(seed)
    assert cam.step(TICK_1S, x[None], [True], persons, terrain)
    obs = cam.observations[0]
    assert obs is not None
    return obs


# --- spec formulas, written independently of the code under test -----------------------------------

def spec_pos(h, c):
    h = np.clip(h, 0, 50)
    m = np.where(h <= 11, 0.55 + 0.11 * np.cos(np.pi * (1 + h / 11)), 0.66 - 0.005 * (h - 11))
    m = m - 0.1 * (c == 2)
    return m, (7.4e-5 * h - 0.0061) * h + 0.16


def spec_neg(h, c):
    h = np.clip(h, 0, 50)
    return np.where(h <= 11, 0.34 + 0.076 / 11 * h, 0.416), (2.4e-5 * h - 0.0016) * h + 0.09 + 0.04 * (c == 1)


# --- geometry ----------------------------------------------------------------------------------------

def test_camera_rotation_fov_and_footprint() -> None:
    geo = CameraGeometry([F, F], C, [0.0, 0.0, np.pi / 2])
    np.testing.assert_allclose(geo.rotation, [[0, 1, 0], [-1, 0, 0], [0, 0, 1]], atol=1e-15)
    fov_deg = np.degrees(2 * np.arctan(C / F))
    np.testing.assert_allclose(fov_deg, [31.4, 23.8], atol=0.05)
    np.testing.assert_allclose(np.degrees(geo.fov_rad), fov_deg, rtol=1e-12)
    # footprint at 45 m from the image corners projected to the ground: 2 h c / f across (east) x along
    corners = geo.ground_intersection([[0.0, 0.0], [2 * C[0], 2 * C[1]]], state(45.0))
    extent_ne = np.abs(corners[1, :2] - corners[0, :2])
    np.testing.assert_allclose(extent_ne[::-1], 2 * 45 * C / F, rtol=1e-12)
    np.testing.assert_allclose(extent_ne[::-1], [25.3, 18.9], atol=0.06)


def test_projection_matches_first_principles_and_round_trips() -> None:
    geo = CameraGeometry([F, F], C, [0.0, 0.0, np.pi / 2])
    h = 30.0
    pts = np.array([[3.0, -4.0, 0.0], [-2.5, 6.0, 0.0], [0.0, 0.0, 0.0]])
    uv, vis = geo.project(pts, state(h))
    assert vis.all()
    np.testing.assert_allclose(uv, np.column_stack([C[0] + F * pts[:, 1] / h, C[1] - F * pts[:, 0] / h]))
    # yaw 90 deg: body x = east, body y = south -> u = c1 - f N / h, v = c2 - f E / h
    uv, _ = geo.project(pts, state(h, psi=np.pi / 2))
    np.testing.assert_allclose(uv, np.column_stack([C[0] - F * pts[:, 0] / h, C[1] - F * pts[:, 1] / h]),
                               atol=1e-9)

    # round trip at a general attitude: ground -> pixel -> ground
    x = state(37.0, n=5.0, e=-8.0, phi=0.12, theta=-0.2, psi=2.3)
    rng = np.random.default_rng(0)
    uv_in = rng.uniform([50, 50], [1230, 910], size=(200, 2))
    ground = geo.ground_intersection(uv_in, x)
    assert np.all(np.isfinite(ground)) and np.all(ground[:, 2] == 0.0)
    uv_back, vis = geo.project(ground, x)
    assert vis.all()
    np.testing.assert_allclose(uv_back, uv_in, atol=1e-8)
    np.testing.assert_allclose(geo.ground_intersection(uv_back, x), ground, atol=1e-9)


def test_points_behind_or_outside_the_image_are_rejected() -> None:
    geo = CameraGeometry([F, F], C, [0.0, 0.0, np.pi / 2])
    x = state(20.0)
    pts = [[0.0, 0.0, -30.0],  # above the camera (behind it)
           [0.0, 0.0, -20.0],  # in the camera's own plane
           [0.0, 50.0, 0.0],   # on the ground, far outside the footprint
           [0.0, 0.0, 0.0]]    # straight below: visible
    uv, vis = geo.project(pts, x)
    assert vis.tolist() == [False, False, False, True]
    assert np.isnan(uv[:3]).all() and np.isfinite(uv[3]).all()
    # rays pointing above the horizon never reach the ground
    assert np.isnan(geo.ground_intersection(C, state(20.0, phi=1.8))).all()
    # a camera on the ground sees no ground in front of it
    assert np.isnan(geo.ground_intersection(C, state(0.0))).all()


@pytest.mark.parametrize(
    ("h", "nf", "df", "offf"), [(45.0, (51, 38), (25, 25), (2, 5)), (25.0, (28, 21), (45, 45), (10, 7))]
)
def test_grid_sizes_when_level_match_the_spec(h, nf, df, offf) -> None:
    obs = one_frame(state(h, n=3.0, e=-2.0, psi=0.7))  # the person patch is N/E aligned: any yaw works
    assert (obs.grid_dims, obs.window_px, obs.offset_px) == (nf, df, offf)
    assert obs.reference_area_px2 == pytest.approx((0.5 * F / h) ** 2, rel=1e-9)
    n1, n2 = nf
    assert obs.llkd.shape == (n1 * n2,) and obs.cg.shape == (n1 * n2, 3)
    assert obs.wg.shape == (3, (n1 + 1) * (n2 + 1))
    assert obs.window_valid.all() and np.isfinite(obs.llkd).all()


def test_flat_layouts_follow_the_spec_indexing() -> None:
    obs = one_frame(state(45.0))
    n1, n2 = obs.grid_dims
    df, off = np.array(obs.window_px), np.array(obs.offset_px)
    for j, i in [(0, 0), (7, 30), (n1 - 1, n2 - 1)]:
        k = j * n2 + i
        assert obs.llkd[k] == obs.llkd_grid[j, i]
        np.testing.assert_array_equal(obs.centres_px[j, i], off + df / 2 + df * [j, i])
        corners = obs.wg[:, obs.corner_columns(j, i)].T
        np.testing.assert_array_equal(corners[0], obs.corners_ned[j, i])
        np.testing.assert_array_equal(corners[3], obs.corners_ned[j + 1, i + 1])
        # level camera over level ground is affine: the ground centre is the mean of the ground corners
        np.testing.assert_allclose(obs.cg[k], corners.mean(axis=0), atol=1e-9)
        # and it is where the first-principles mapping puts the pixel centre
        np.testing.assert_allclose(obs.cg[k], ground_of_pixel(*obs.centres_px[j, i], 45.0), atol=1e-9)


def test_grid_is_capped_at_high_altitude() -> None:
    obs = one_frame(state(1000.0))
    assert obs.grid_dims == (160, 120) and obs.window_px == (8, 8)


# --- persons and classifier -------------------------------------------------------------------------

def test_person_under_the_camera_raises_its_window_llkd() -> None:
    h = 25.0
    person = [[0.1, 0.13, 0.0]]
    u, v = C[0] + F * 0.13 / h, C[1] - F * 0.1 / h
    j, i = int((u - 10) // 45), int((v - 7) // 45)  # spec grid at 25 m: offf (10, 7), df 45
    # P(llkd of a positive window > median llkd of negatives) at h ~ 25 m is 0.9994 under the model
    # (Monte Carlo of the spec formulas), so all 10 fixed seeds are expected to pass (P ~ 0.994).
    for seed in range(10):
        obs = one_frame(state(h), person, seed=seed)
        assert obs.person_index[j, i] == 0
        lo = np.array([obs.corners_px[j, i], obs.corners_px[j + 1, i + 1]])
        assert np.all(lo[0] <= [u, v]) and np.all([u, v] <= lo[1])
        assert obs.llkd_grid[j, i] > np.median(obs.llkd)
        assert obs.person_distance_px[j, i] == pytest.approx(np.hypot(*(obs.centres_px[j, i] - [u, v])))
        assert obs.person_area_px2[j, i] == pytest.approx((0.5 * F / h) ** 2, rel=1e-9)
        # the person covers about one window: only windows next to its centre see it
        assigned = np.argwhere(obs.person_index == 0)
        assert 1 <= len(assigned) <= 4 and np.abs(assigned - [j, i]).max() <= 1
        assert np.isnan(obs.person_distance_px[obs.person_index < 0]).all()


def test_llkd_is_the_spec_log_likelihood_difference_of_the_score() -> None:
    obs = one_frame(state(45.0, phi=0.3), [[0.0, 0.0, 0.0], [5.0, 15.0, 0.0]],
                    lambda p: (np.arange(len(p)) % 3))
    r = np.linalg.norm(state(45.0)[:3] - obs.centres_ned, axis=-1)
    np.testing.assert_allclose(obs.range_m, r, rtol=1e-12)
    mp, sp = spec_pos(r, obs.terrain_class)
    mn, sn = spec_neg(r, obs.terrain_class)
    expected = norm.logpdf(obs.score, mp, sp) - norm.logpdf(obs.score, mn, sn)
    np.testing.assert_allclose(obs.llkd_grid, expected, rtol=1e-10, atol=1e-10)
    tc = state(45.0)[:3] - obs.centres_ned
    np.testing.assert_allclose(obs.inclination_rad, np.arccos(-tc[..., 2] / r), atol=1e-12)
    np.testing.assert_allclose(obs.sin_azimuth, tc[..., 1] / np.hypot(tc[..., 0], tc[..., 1]), atol=1e-12)


def test_scores_use_one_normal_per_window_positives_first() -> None:
    seed, h = 3, 45.0
    obs = one_frame(state(h), [[0.0, 0.0, 0.0], [4.0, -6.0, 0.0]], seed=seed)
    eta = RandomStreams(seed).get("camera", 0).standard_normal(obs.num_windows)
    pos = (obs.person_index >= 0).ravel()
    assert 2 <= pos.sum() <= 8
    r, cls = obs.range_m.ravel(), obs.terrain_class.ravel()
    mp, sp = spec_pos(r[pos], cls[pos])
    mn, sn = spec_neg(r[~pos], cls[~pos])
    np.testing.assert_allclose(obs.score.ravel()[pos], mp + sp * eta[: pos.sum()], rtol=1e-12)
    np.testing.assert_allclose(obs.score.ravel()[~pos], mn + sn * eta[pos.sum():], rtol=1e-12)


def test_obs_model_hand_values() -> None:
    m = IndepObsModel
    mean, std = m.positive_stats([0.0, 11.0, 50.0, 80.0, -3.0], [0, 0, 0, 0, 2])
    np.testing.assert_allclose(mean, [0.44, 0.66, 0.465, 0.465, 0.34])  # 0.55 - 0.11; h clipped to 50 / 0
    np.testing.assert_allclose(std, [0.16, (7.4e-5 * 11 - 0.0061) * 11 + 0.16, 0.04, 0.04, 0.16])
    mean, std = m.negative_stats([0.0, 11.0, 30.0], [1, 0, 1])
    np.testing.assert_allclose(mean, [0.34, 0.416, 0.416])
    np.testing.assert_allclose(std, [0.13, (2.4e-5 * 11 - 0.0016) * 11 + 0.09, 0.0636 + 0.04], rtol=1e-12)


def test_terrain_class_per_patch_and_clutter_widens_negatives() -> None:
    obs = one_frame(state(45.0), None, lambda p: (p[:, 0] > 0).astype(int), seed=4)
    clutter = obs.terrain_class == 1
    np.testing.assert_array_equal(clutter, obs.centres_ned[..., 0] > 0)
    assert 0.4 < clutter.mean() < 0.6
    mn, sn = spec_neg(obs.range_m, obs.terrain_class)
    z = (obs.score - mn) / sn
    # ~970 windows per class: the std of N(0,1) samples has s.e. 1/sqrt(2n) ~ 0.023; 0.1 is > 4 s.e.
    for cls in (0, 1):
        assert np.std(z[obs.terrain_class == cls]) == pytest.approx(1.0, abs=0.1)
        assert abs(np.mean(z[obs.terrain_class == cls])) < 0.15  # s.e. 0.032
    # raw spread: expected ratio (0.067 + 0.04) / 0.067 ~ 1.6
    assert np.std(obs.score[clutter]) > 1.3 * np.std(obs.score[~clutter])


def test_nearer_person_centre_wins_a_shared_window() -> None:
    h = 45.0  # windows (25, 17) and (26, 17) have pixel centres u = 639.5 and 664.5, v = 442.5
    a = ground_of_pixel(647.5, 442.5, h)  # 8 px right of window (25, 17)'s centre
    b = ground_of_pixel(647.5 + F * 0.1 / h, 442.5, h)  # 0.1 m (5.07 px) further east
    for persons, ia, ib in (([a, b], 0, 1), ([b, a], 1, 0)):
        obs = one_frame(state(h), persons)
        # both persons mark both windows; (25, 17): A at 8 px vs B at 13.1 px; (26, 17): A 17 vs B 11.9
        assert obs.person_index[25, 17] == ia
        assert obs.person_index[26, 17] == ib


def test_person_at_the_image_border_is_clamped_into_the_last_window() -> None:
    h = 45.0  # grid 51 x 38, df 25, offf (2, 5): pixels u > 1277 or v > 955 lie beyond the last window
    cases = {(1279.0, 959.0): (50, 37), (640.0, 959.0): (25, 37), (1279.0, 480.0): (50, 19),
             (0.5, 0.5): (0, 0)}
    for (u, v), window in cases.items():
        obs = one_frame(state(h), [ground_of_pixel(u, v, h)])
        assigned = np.argwhere(obs.person_index == 0)
        assert window in {tuple(w) for w in assigned}
        # the person (25 px across) marks only windows next to the one holding its centre (QRSim's
        # clamp moved the centre of a person beyond the bottom margin to window row j = nf2)
        assert np.abs(assigned - window).max() <= 1
        # the partial-view area of a square seen level equals its full area, (s f / h)^2
        assert obs.person_area_px2[window] == pytest.approx((0.5 * F / h) ** 2, rel=1e-9)


def test_person_out_of_view_is_ignored() -> None:
    obs = one_frame(state(45.0), [[100.0, 0.0, 0.0], ground_of_pixel(-3.0, 480.0, 45.0)])
    assert (obs.person_index == -1).all()


# --- robustness (spec 10.9) --------------------------------------------------------------------------

def test_principal_ray_above_the_horizon_gives_an_empty_observation() -> None:
    cam = camera(seed=5)
    assert cam.step(TICK_1S, state(30.0, phi=1.8)[None], [True], [[0.0, 0.0, 0.0]])
    obs = cam.observations[0]
    assert obs is not None and obs.empty and obs.reason
    assert obs.llkd.shape == (0,) and obs.wg.shape == (3, 0)
    # an empty frame draws nothing: the next frame equals the first frame of a fresh camera
    cam.step(2 * TICK_1S, state(30.0)[None])
    fresh = camera(seed=5)
    fresh.step(TICK_1S, state(30.0)[None])
    np.testing.assert_array_equal(cam.observations[0].score, fresh.observations[0].score)


def test_steep_attitude_frame_keeps_only_windows_that_see_the_ground() -> None:
    x = state(45.0, phi=1.4)
    geo = CameraGeometry([F, F], C, [0.0, 0.0, np.pi / 2])
    probe = one_frame(x)
    # a person far away, seen inside a window that straddles the horizon (its centre sees sky)
    straddling = ~probe.window_valid & np.isfinite(probe.corners_ned[1:, :-1, 0])
    j, i = np.argwhere(straddling)[0]
    pixel = probe.corners_px[j + 1, i] + [-1.0, 1.0]  # just inside the window from its ground-seeing corner
    far_person = geo.ground_intersection(pixel, x)
    assert np.isfinite(far_person).all()

    obs = one_frame(x, [[0.0, 0.0, 0.0], far_person[0]], lambda p: np.zeros(len(p), int))
    valid = obs.window_valid
    assert 0 < valid.sum() < valid.size
    assert not valid[j, i] and obs.person_index[j, i] == -1  # no score model for a window without range
    np.testing.assert_array_equal(valid, np.isfinite(obs.centres_ned[..., 0]))
    assert np.isfinite(obs.llkd_grid[valid]).all() and np.isnan(obs.llkd_grid[~valid]).all()
    assert (obs.terrain_class[~valid] == -1).all() and (obs.terrain_class[valid] == 0).all()


def test_close_range_frame_uses_one_window() -> None:
    # at 1 m the 0.5 m reference patch (0.56 x 0.42 m footprint) is not fully visible: QRSim's intended
    # guard makes one window covering the whole image; the person below is seen by it
    obs = one_frame(state(1.0), [[0.0, 0.0, 0.0]])
    assert obs.grid_dims == (1, 1) and obs.reference_area_px2 == 4 * C.prod()
    assert obs.person_index[0, 0] == 0 and np.isfinite(obs.llkd).all()
    # no corner of the person is visible -> its area is the whole image
    assert obs.person_area_px2[0, 0] == 4 * C.prod()


# --- timing, streams, determinism ---------------------------------------------------------------------

def test_sample_and_hold_at_one_hertz() -> None:
    cam = camera(n=2)
    x = np.stack([state(45.0), state(25.0, n=10.0)])
    assert not cam.step(TICK_1S - 1, x)
    assert cam.observations == [None, None]
    assert cam.step(TICK_1S, x)
    held = list(cam.observations)
    assert [o.t_s for o in held] == [1.0, 1.0] and [o.vehicle for o in held] == [0, 1]
    assert not cam.step(TICK_1S + 1, x)
    assert all(a is b for a, b in zip(cam.observations, held, strict=True))
    cam.reset(x, vehicles=[1])
    assert cam.observations[0] is held[0] and cam.observations[1] is None


def test_camera_off_produces_nothing() -> None:
    cam = camera(on=False)
    assert not cam.step(TICK_1S, state(45.0)[None])
    assert cam.observations == [None]


def test_determinism_streams_and_invalid_vehicles() -> None:
    x = np.stack([state(45.0)] * 3)

    def run(seed, valid):
        cam = camera(seed, n=3)
        cam.step(TICK_1S, x, valid)
        cam.step(2 * TICK_1S, x, valid)
        return cam.observations

    a, b, c = run(7, [True] * 3), run(7, [True] * 3), run(8, [True] * 3)
    for oa, ob in zip(a, b, strict=True):
        np.testing.assert_array_equal(oa.score, ob.score)
    assert not np.array_equal(a[0].score, c[0].score)
    # same state, different vehicles: independent streams
    assert not np.array_equal(a[0].score, a[1].score)
    assert abs(np.corrcoef(a[0].score.ravel(), a[1].score.ravel())[0, 1]) < 0.15  # n ~ 1900: 6 s.e.
    # an invalid vehicle gets no observation and does not disturb the others' streams
    d = run(7, [True, False, True])
    assert d[1] is None
    np.testing.assert_array_equal(d[0].score, a[0].score)
    np.testing.assert_array_equal(d[2].score, a[2].score)


# --- configuration --------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kw", "match"),
    [({"dt_s": 0.03}, "dt_s"), ({"obs_model": "GPObsModel"}, "GPObsModel"),
     ({"f_px": (-1.0, 2280.0)}, "f_px"), ({"c_px": (640.0,)}, "c_px"),
     ({"min_window_px": 0.5}, "min_window_px"), ({"on": "yes"}, "on"),
     ({"person_size_m": 0.0}, "person_size_m"), ({"r_body_rad": (0.0, np.nan, 0.0)}, "r_body_rad")],
)
def test_bad_parameters_are_rejected(kw, match) -> None:
    with pytest.raises(ConfigError, match=match):
        CameraParams(**kw)


def test_window_grid_rounds_half_away_from_zero() -> None:
    # 1280 / 512 = 2.5 -> 3 (numpy's round-half-even would give 2); 960 / 512 = 1.875 -> 2
    grid = WindowGrid.from_window_side(512.0, C, 8.0)
    assert grid.nf == (3, 2) and grid.df == (426, 480) and grid.offf == (1, 0)


# --- cost ------------------------------------------------------------------------------------------------

def test_per_frame_cost(capsys) -> None:
    cam = camera()
    rng = np.random.default_rng(0)
    persons = np.column_stack([rng.uniform(-5, 5, (10, 2)), np.zeros(10)])
    terrain = lambda p: (p[:, 0] > 0).astype(int)  # noqa: E731
    costs = {}
    for h in (25.0, 45.0):
        x = state(h, psi=0.4)
        n = 30
        t0 = time.perf_counter()
        for _ in range(n):
            obs = cam.frame(x, persons, terrain, rng)
        costs[h] = (time.perf_counter() - t0) / n
        assert obs.num_windows > 500 and (obs.person_index >= 0).any()
    with capsys.disabled():
        text = ", ".join(f"{h:.0f} m: {c * 1e3:.2f} ms" for h, c in costs.items())
        print(f"\ncamera frame cost per vehicle: {text}")
    assert max(costs.values()) < 0.5  # generous: a frame must stay far below the 1 s camera period

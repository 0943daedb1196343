"""The rendered cameras (core.sensors.lens, core.sensors.scene_camera, core.sensors.render) and their
messages.

Lens: rays and projections round-trip to 1e-9 px; the equidistant model against its closed form and
against OpenCV's ``cv2.fisheye`` / ``cv2.projectPoints`` with the same K and D. Renderer: checkerboard
corners found by OpenCV in rendered images lie where OpenCV projects their known 3-D positions (poses
written out here, not taken from the code under test); a fisheye calibration with ``cv2.fisheye.calibrate``
on rendered views recovers the configured intrinsics within 1 %; the depth image against a plane at a
known height; texture for feature detectors; terrain classes as ground colours; determinism and
pixel-noise statistics; validation. Integration: the scenario section, the Simulator, the persons the
classifier camera reports at their pixels in the rendered image, and the fisheye node over DDS.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from rosenv import launch_recorded, scenario_with_sensors, sensor_updates

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.sensors import render
from qrsim_ros.core.sensors.lens import EquidistantLens, PlumbBobLens
from qrsim_ros.core.sensors.registry import SENSORS
from qrsim_ros.core.sensors.scene_camera import PinholeCameraParams, SceneCamera, SceneCameraParams
from qrsim_ros.core.world.calibration_target import CalibrationTargetParams
from qrsim_ros.core.world.scene import Scene, SceneParams

cv2 = pytest.importorskip("cv2")

LIMITS = (-60.0, 60.0, -60.0, 60.0, -60.0, 0.0)
DOWN = (0.0, -math.pi / 2, 0.0)  # a mount looking straight down, the top of the image forward


def _scene(*targets: CalibrationTargetParams, **kw: object) -> Scene:
    return Scene(SceneParams(calibration_targets=targets, **kw), LIMITS, 0.0, RandomStreams(5))  # type: ignore[arg-type]


def _state(n: float = 0.0, e: float = 0.0, h: float = 10.0, roll: float = 0.0, pitch: float = 0.0,
           yaw: float = 0.0) -> np.ndarray:
    x = np.zeros(13)
    x[:6] = n, e, -h, roll, pitch, yaw
    return x


def _all_pixels(w: int, h: int) -> np.ndarray:
    v, u = np.mgrid[0:h, 0:w]
    return np.column_stack([u.ravel(), v.ravel()]).astype(float)


# --- lenses ---------------------------------------------------------------------------------------

FISHEYE = EquidistantLens(152.0, 150.5, 321.3, 238.2, 640, 480, (0.03, -0.012, 0.004, -0.0006),
                          fov_rad=math.radians(185.0))
PINHOLE = PlumbBobLens(410.0, 412.0, 318.7, 241.6, 640, 480, (-0.25, 0.07, 0.0012, -0.0009, -0.01))


@pytest.mark.parametrize("lens", [FISHEYE, PINHOLE], ids=["equidistant", "plumb_bob"])
def test_rays_and_projection_round_trip(lens: EquidistantLens | PlumbBobLens) -> None:
    uv = _all_pixels(lens.width, lens.height)
    rays = lens.rays()
    ok = np.isfinite(rays[:, 0])
    assert ok.sum() > 0.5 * len(uv)
    np.testing.assert_allclose(np.linalg.norm(rays[ok], axis=1), 1.0, atol=1e-14)
    np.testing.assert_allclose(lens.project(rays[ok]), uv[ok], rtol=0, atol=1e-9)
    # any point along the ray lands on the same pixel; sub-pixel positions too
    np.testing.assert_allclose(lens.project(37.5 * rays[ok]), uv[ok], rtol=0, atol=1e-9)
    sub = uv[ok][::97] + np.array([0.37, -0.21])
    back = lens.project(lens.pixel_rays(sub))
    good = np.isfinite(back[:, 0])
    np.testing.assert_allclose(back[good], sub[good], rtol=0, atol=1e-9)


def test_equidistant_fisheye_is_its_closed_form_and_cuts_at_the_field_of_view() -> None:
    f, c, fov = 150.0, (319.5, 239.5), math.radians(185.0)
    lens = EquidistantLens(f, f, c[0], c[1], 640, 480, (0.0, 0.0, 0.0, 0.0), fov_rad=fov)
    uv = _all_pixels(640, 480)
    rho = np.hypot(uv[:, 0] - c[0], uv[:, 1] - c[1])
    theta = rho / f  # equidistant: the radius is f theta
    rays = lens.rays()
    inside = theta <= 0.5 * fov
    # a pixel has a ray exactly when it lies in the image circle of radius f fov / 2
    edge = np.abs(theta - 0.5 * fov) < 1e-9
    np.testing.assert_array_equal(np.isfinite(rays[~edge, 0]), inside[~edge])
    np.testing.assert_allclose(rays[inside, 2], np.cos(theta[inside]), atol=1e-12)
    # beyond 90 degrees the rays point backwards (a 185 degree lens sees a little behind itself)
    assert rays[inside, 2].min() == pytest.approx(math.cos(0.5 * fov), abs=2e-3)
    # a point beyond the field of view is not imaged; the principal point is the optical axis
    assert np.isnan(lens.project([[0.0, -1.0, -0.2]])).all()
    np.testing.assert_allclose(lens.project([[0.0, 0.0, 3.0]]), [c], atol=1e-12)


@pytest.mark.parametrize("lens", [FISHEYE, PINHOLE], ids=["equidistant", "plumb_bob"])
def test_projection_equals_opencv_with_the_same_k_and_d(lens: EquidistantLens | PlumbBobLens) -> None:
    rng = np.random.default_rng(3)
    pts = rng.uniform([-4.0, -3.0, 0.5], [4.0, 3.0, 6.0], size=(400, 3))  # in front (cv2.fisheye: < 90 deg)
    mine = lens.project(pts)
    ok = np.isfinite(mine[:, 0])
    assert ok.sum() > 300
    if lens.distortion_model == "equidistant":
        ref, _ = cv2.fisheye.projectPoints(pts[ok].reshape(-1, 1, 3), np.zeros(3), np.zeros(3), lens.K,
                                           lens.D)
    else:
        ref, _ = cv2.projectPoints(pts[ok], np.zeros(3), np.zeros(3), lens.K, lens.D)
    np.testing.assert_allclose(mine[ok], ref.reshape(-1, 2), rtol=0, atol=1e-7)


def test_plumb_bob_fold_leaves_pixels_without_rays() -> None:
    # k1 = -0.5 folds back where 1 - 1.5 r^2 = 0: r^2 = 2/3; pixels beyond the fold's image have no ray
    lens = PlumbBobLens(300.0, 300.0, 319.5, 239.5, 640, 480, (-0.5, 0.0, 0.0, 0.0, 0.0))
    assert lens.max_radius2 == pytest.approx(2.0 / 3.0)
    r_fold = math.sqrt(2.0 / 3.0) * (1.0 - 0.5 * 2.0 / 3.0)  # distorted radius of the fold
    uv = _all_pixels(640, 480)
    rho = np.hypot(uv[:, 0] - 319.5, uv[:, 1] - 239.5) / 300.0
    rays = lens.rays()
    assert np.isfinite(rays[rho < 0.98 * r_fold, 0]).all()
    assert np.isnan(rays[rho > 1.02 * r_fold, 0]).all()


# --- rendering: corners, calibration, depth ---------------------------------------------------------

def _corners(image: np.ndarray, pattern: tuple[int, int]) -> np.ndarray | None:
    """OpenCV's sub-pixel corners (rows of ``pattern[0]``), ordered as the target's inner corners up to
    a half turn (the orientation of a board seen from above is kept by every view)."""
    grey = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    flags = cv2.CALIB_CB_ADAPTIVE_THRESH | cv2.CALIB_CB_NORMALIZE_IMAGE
    found, corners = cv2.findChessboardCorners(grey, pattern, flags=flags)
    if not found:
        return None
    crit = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 100, 1e-5)
    c = cv2.cornerSubPix(grey, corners, (3, 3), (-1, -1), crit).reshape(pattern[1], pattern[0], 2)
    a, b = c[0, 1] - c[0, 0], c[1, 0] - c[0, 0]
    if a[0] * b[1] - a[1] * b[0] < 0.0:  # a mirrored order: reverse the rows
        c = c[:, ::-1]
    return c.reshape(-1, 2)


def _match(found: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """The found corners in the order of ``expected`` (the board's order or its half turn)."""
    straight = np.abs(found - expected).max()
    turned = np.abs(found[::-1] - expected).max()
    return found if straight <= turned else found[::-1]


def _rodrigues_of_rows(rows: np.ndarray) -> np.ndarray:
    return cv2.Rodrigues(np.asarray(rows, float))[0]


@pytest.mark.parametrize("kind", ["fisheye", "pinhole"])
def test_rendered_corners_lie_where_opencv_projects_them(kind: str) -> None:
    target = CalibrationTargetParams(center_ne_m=(3.0, -2.0), squares=(7, 5), square_m=0.3, yaw_rad=0.4)
    scene = _scene(target)
    if kind == "fisheye":
        params = SceneCameraParams(mount_xyz_m=(0.0, 0.0, 0.0), mount_rpy_rad=DOWN, encoding="mono8",
                                   distortion=(0.02, -0.008, 0.001, -0.0002))
    else:
        params = PinholeCameraParams(mount_xyz_m=(0.0, 0.0, 0.0), encoding="mono8",
                                     distortion=(-0.2, 0.05, 0.001, -0.0015, 0.0))
    cam = SceneCamera(1, params, RandomStreams(2), scene)
    k, d = cam.lens.K, cam.lens.D
    world = np.column_stack([target.inner_corners_ne(), np.zeros(24)])
    checked = 0
    # level with yaw psi: optical x = body right, optical y = body backwards, optical z = down (NED)
    for n, e, h, roll, yaw in [(3.0, -2.0, 3.0, 0.0, 0.0), (2.5, -1.0, 3.5, 0.0, 1.1),
                               (3.2, -2.4, 3.0, 0.5, -0.7), (3.0, -2.0, 4.0, -0.45, 2.5)]:
        cam.reset(_state(n, e, h, roll=roll, yaw=yaw)[None])
        cy, sy, cr, sr = math.cos(yaw), math.sin(yaw), math.cos(roll), math.sin(roll)
        x_b = np.array([cy, sy, 0.0])  # body axes in NED for yaw then roll (ZYX, no pitch)
        y_b = np.array([-sy * cr, cy * cr, sr])
        z_b = np.array([sy * sr, -cy * sr, cr])
        r_opt_ned = np.array([y_b, -x_b, z_b])
        t = -r_opt_ned @ np.array([n, e, -h])
        rvec = _rodrigues_of_rows(r_opt_ned)
        if kind == "fisheye":
            ref, _ = cv2.fisheye.projectPoints(world.reshape(-1, 1, 3), rvec, t, k, d)
        else:
            ref, _ = cv2.projectPoints(world, rvec, t, k, d)
        found = _corners(cam.images[0], target.pattern_size)
        if kind == "pinhole" and roll != 0.0 and found is None:
            continue  # the board left the pinhole's narrower view
        assert found is not None, (n, e, h, roll, yaw)
        err = np.linalg.norm(_match(found, ref.reshape(-1, 2)) - ref.reshape(-1, 2), axis=1)
        assert err.max() < 0.3, err.max()  # sub-pixel
        assert np.sqrt(np.mean(err**2)) < 0.12
        checked += 1
    assert checked >= 3


def test_fisheye_calibration_recovers_the_intrinsics() -> None:
    """Calibrate the rendered fisheye as one calibrates a real one: a checkerboard (9 x 7 squares of
    25 cm on the ground) seen from 2 and 2.8 m with the vehicle tilted up to 55 degrees, so the board
    covers the image out to about 70 degrees from the axis; OpenCV's fisheye model from a nominal guess
    (the 185 degree circle on 480 px, no distortion)."""
    target = CalibrationTargetParams(squares=(9, 7), square_m=0.25)
    params = SceneCameraParams(mount_xyz_m=(0.0, 0.0, 0.0), mount_rpy_rad=DOWN, encoding="mono8",
                               distortion=(0.03, -0.01, 0.002, -0.0003))
    cam = SceneCamera(1, params, RandomStreams(2), _scene(target))
    obj = np.column_stack([target.inner_corners_ne(), np.zeros(48)]).reshape(1, -1, 3)
    objs, imgs = [], []
    for h in (2.0, 2.8):
        for tilt in (0.0, 20.0, 40.0, 55.0):
            for k, a in enumerate(np.linspace(0.0, 2.0 * math.pi, 6, endpoint=False)):
                t = math.radians(tilt)
                cam.reset(_state(0.0, 0.0, h, roll=t * math.cos(a), pitch=t * math.sin(a), yaw=0.9 * k)[None])
                found = _corners(cam.images[0], target.pattern_size)
                if found is not None:
                    objs.append(obj)
                    imgs.append(found.reshape(1, -1, 2).astype(float))
                if tilt == 0.0:
                    break
    assert len(objs) >= 30
    guess = 240.0 / math.radians(92.5)
    k0 = np.array([[guess, 0.0, 320.0], [0.0, guess, 240.0], [0.0, 0.0, 1.0]])
    flags = cv2.CALIB_RECOMPUTE_EXTRINSIC | cv2.CALIB_FIX_SKEW | cv2.CALIB_USE_INTRINSIC_GUESS
    crit = (cv2.TERM_CRITERIA_COUNT + cv2.TERM_CRITERIA_EPS, 100, 1e-6)
    _, k, d, rvecs, tvecs = cv2.fisheye.calibrate(objs, imgs, (640, 480), k0, np.zeros((4, 1)), flags=flags,
                                                  criteria=crit)
    lens = cam.lens
    configured = np.array([lens.fx, lens.fy, lens.cx, lens.cy])
    got = np.array([k[0, 0], k[1, 1], k[0, 2], k[1, 2]])
    np.testing.assert_allclose(got, configured, rtol=0.01)
    err = np.concatenate([
        np.linalg.norm(cv2.fisheye.projectPoints(o.reshape(-1, 1, 3), r, t, k, d)[0].reshape(-1, 2)
                       - i.reshape(-1, 2), axis=1)
        for o, i, r, t in zip(objs, imgs, rvecs, tvecs, strict=True)])
    assert np.sqrt(np.mean(err**2)) < 0.2  # px: the renderer is the model OpenCV fits


def test_depth_is_the_range_to_a_plane_at_known_height() -> None:
    h, max_range = 10.0, 100.0
    params = SceneCameraParams(mount_xyz_m=(0.0, 0.0, 0.0), mount_rpy_rad=DOWN, depth=True,
                               depth_max_range_m=max_range)
    cam = SceneCamera(1, params, RandomStreams(2), _scene())
    cam.reset(_state(h=h)[None])
    depth = cam.depth_m[0]
    assert depth.dtype == np.float32 and depth.shape == (480, 640)
    # the derived lens: the 185 degree circle inscribed in 480 px, no distortion
    f = 240.0 / math.radians(92.5)
    uv = _all_pixels(640, 480)
    theta = np.hypot(uv[:, 0] - 319.5, uv[:, 1] - 239.5) / f
    d = depth.ravel()
    outside = theta > math.radians(92.5) + 1e-9
    assert np.isnan(d[outside]).all() and not np.isnan(d[~outside]).any()
    expected = np.where(theta < math.pi / 2, h / np.cos(np.minimum(theta, 1.5)), np.inf)
    expected = np.where(expected <= max_range, expected, np.inf)
    near = (~outside) & (np.abs(expected - max_range) > 0.5)  # away from the cut at the maximum range
    finite = near & np.isfinite(expected)
    np.testing.assert_allclose(d[finite], expected[finite], rtol=2e-6)
    assert np.isinf(d[near & ~np.isfinite(expected)]).all()
    assert np.isfinite(d[finite]).sum() > 100_000
    # the pinhole's REP-118 z depth of a plane parallel to the image plane is the height everywhere
    z = SceneCamera(1, PinholeCameraParams(mount_xyz_m=(0.0, 0.0, 0.0), depth=True, depth_kind="z"),
                    RandomStreams(2), _scene())
    z.reset(_state(h=h)[None])
    np.testing.assert_allclose(z.depth_m[0], h, rtol=2e-6)


# --- texture, terrain, determinism, noise ------------------------------------------------------------

def test_ground_has_corners_for_feature_trackers_at_every_height() -> None:
    fast = cv2.FastFeatureDetector_create(threshold=12)
    orb = cv2.ORB_create(nfeatures=1000)
    for kind, params in (("pinhole", PinholeCameraParams(encoding="mono8")),
                         ("fisheye", SceneCameraParams(encoding="mono8"))):
        cam = SceneCamera(1, params, RandomStreams(2), _scene())
        for h in (10.0, 40.0):
            cam.reset(_state(h=h)[None])
            img = cam.images[0]
            assert len(fast.detect(img)) > 300, (kind, h)
            assert len(orb.detect(img)) > 200, (kind, h)


def test_terrain_classes_colour_the_ground() -> None:
    sim = Simulator.from_scenario("search_rescue_2a", {
        "seed": 4, "scene": {}, "vehicle": {"sensors": {"camera": {"mount_xyz_m": [0, 0, 0], "width_px": 320,
                                                                   "height_px": 240, "fov_deg": 90.0}}}})
    cam = sim.sensor("camera")
    terrain = sim.world.persons_area.terrain
    # look down from 60 m over every place in the area until all three classes were seen
    colour_sums = {c: np.zeros(3) for c in range(3)}
    counts = dict.fromkeys(range(3), 0)
    f = 160.0 / math.tan(math.radians(45.0))
    for n in np.linspace(-100.0, 100.0, 5):
        for e in np.linspace(-100.0, 100.0, 5):
            cam.reset(_state(n, e, 60.0)[None])
            img = cam.images[0].reshape(-1, 3).astype(float)
            uv = _all_pixels(320, 240)
            # level, yaw 0, looking down: image right = east, image down = south
            north = n - 60.0 * (uv[:, 1] - 119.5) / f
            east = e + 60.0 * (uv[:, 0] - 159.5) / f
            cls = terrain.class_at(np.column_stack([north, east]))
            for c in range(3):
                sel = cls == c
                colour_sums[c] += img[sel].sum(axis=0)
                counts[c] += int(sel.sum())
    means = {c: colour_sums[c] / max(counts[c], 1) for c in range(3)}
    assert min(counts.values()) > 1000
    # grass is greener than brush, forest darker than grass: the palette's order, through the texture
    assert means[0][1] / means[0][0] > 1.25 > means[1][1] / means[1][0]
    assert means[2].sum() < 0.75 * means[0].sum()


def test_same_seed_same_images_and_noise_statistics() -> None:
    x = np.vstack([_state(h=20.0), _state(h=20.0)])  # two vehicles in the same place

    def frame(seed: int, on: bool) -> SceneCamera:
        cam = SceneCamera(2, SceneCameraParams(on=on, sigma_dn=3.0, depth=True, width_px=320, height_px=240),
                          RandomStreams(seed), _scene())
        cam.reset(x)
        return cam

    a, b, c = frame(9, True), frame(9, True), frame(10, True)
    np.testing.assert_array_equal(a.images[0], b.images[0])
    np.testing.assert_array_equal(a.depth_m[0], b.depth_m[0])
    assert not np.array_equal(a.images[0], c.images[0])
    assert not np.array_equal(a.images[0], a.images[1])  # each vehicle draws its own noise
    clean = frame(9, False)
    np.testing.assert_array_equal(clean.images[0], clean.images[1])
    diff = a.images[0].astype(float) - clean.images[0].astype(float)
    unclipped = (clean.images[0] > 12) & (clean.images[0] < 243)
    # noise of sigma 3 DN; rounding the noisy value adds at most 1/12 + 1/12 DN^2 of variance
    assert abs(diff[unclipped].mean()) < 0.05
    assert 2.95 < diff[unclipped].std() < math.sqrt(9.0 + 1.0 / 6.0) + 0.05
    # the noise is white: neighbouring pixels are uncorrelated
    dr = diff[:, :-1, 0][unclipped[:, :-1, 0] & unclipped[:, 1:, 0]]
    dn = diff[:, 1:, 0][unclipped[:, :-1, 0] & unclipped[:, 1:, 0]]
    assert abs(np.corrcoef(dr, dn)[0, 1]) < 0.02


def test_mono8_is_the_luminance_of_rgb8() -> None:
    scene = _scene()
    rgb = SceneCamera(1, SceneCameraParams(width_px=320, height_px=240), RandomStreams(2), scene)
    mono = SceneCamera(1, SceneCameraParams(width_px=320, height_px=240, encoding="mono8"), RandomStreams(2),
                       scene)
    for cam in (rgb, mono):
        cam.reset(_state(h=15.0)[None])
    assert mono.images[0].shape == (240, 320) and rgb.images[0].shape == (240, 320, 3)
    lum = rgb.images[0].astype(float) @ np.array([0.299, 0.587, 0.114])
    assert np.abs(lum - mono.images[0]).max() <= 1.0  # each was rounded once


def test_invalid_vehicles_hold_their_frame_and_rates_follow_dt() -> None:
    cam = SceneCamera(2, SceneCameraParams(dt_s=0.06, width_px=64, height_px=48), RandomStreams(1), _scene())
    x = np.vstack([_state(h=5.0), _state(h=8.0)])
    cam.reset(x)
    held = cam.images[1].copy()
    x2 = np.vstack([_state(h=6.0), _state(h=30.0)])
    updates = [k for k in range(1, 10) if cam.step(k, x2, valid=[True, False])]
    assert updates == [3, 6, 9]
    np.testing.assert_array_equal(cam.images[1], held)
    assert not np.array_equal(cam.images[0], held)


def test_20_hz_frames_fall_between_ticks_at_their_own_time_and_pose() -> None:
    """dt_s 0.05 on the 0.02 s tick: frames at 0.05, 0.10, 0.15 s..., each rendered at the first tick at
    or after it from the pose interpolated to its time, and stamped with it."""
    params = SceneCameraParams(dt_s=0.05, width_px=64, height_px=48)
    cam = SceneCamera(1, params, RandomStreams(1), _scene())
    heights = {k: 5.0 + 1.0 * k for k in range(0, 11)}  # climbing 1 m per tick (50 m/s: a clear change)
    cam.reset(_state(h=heights[0])[None])
    frames = {}
    for k in range(1, 11):
        if cam.step(k, _state(h=heights[k])[None]):
            frames[k] = (cam.frame_ns, cam.images[0].copy())
    assert sorted(frames) == [3, 5, 8, 10]
    assert [frames[k][0] for k in sorted(frames)] == [50_000_000, 100_000_000, 150_000_000, 200_000_000]
    # the frame of t = 0.05 s is the one a camera at the height of that instant (halfway from tick 2 to
    # tick 3: 7.5 m) renders
    still = SceneCamera(1, params, RandomStreams(1), _scene())
    still.reset(_state(h=7.5)[None])
    np.testing.assert_array_equal(frames[3][1], still.images[0])
    still.reset(_state(h=heights[3])[None])
    assert not np.array_equal(frames[3][1], still.images[0])


# --- validation ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "match"), [
    ({"fov_deg": 0.0}, r"fisheye\.fov_deg"),
    ({"fov_deg": 320.0}, r"fisheye\.fov_deg"),
    ({"fx_px": 100.0}, r"missing cx_px, cy_px, fy_px"),
    ({"encoding": "bgr8"}, r"fisheye\.encoding"),
    ({"dt_s": 0.01}, r"fisheye\.dt_s.*at most one frame per"),
    ({"distortion": (0.1, 0.0)}, r"fisheye\.distortion.*4 coefficients"),
    ({"distortion": (0.0, -0.2, 0.0, 0.0)}, r"stops increasing"),
    ({"depth_kind": "z"}, r"fisheye\.depth_kind"),
    ({"width_px": 0}, r"fisheye\.width_px"),
    ({"sigma_dn": -1.0}, r"fisheye\.sigma_dn"),
    ({"exposure_gain": 0.0}, r"fisheye\.exposure_gain"),
    ({"mount_rpy_rad": (0.0, 1.0)}, r"fisheye\.mount_rpy_rad"),
])
def test_bad_fisheye_parameters_are_one_clear_error(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        SceneCameraParams(**kwargs)


def test_bad_pinhole_and_target_parameters() -> None:
    with pytest.raises(ConfigError, match=r"camera\.fov_deg"):
        PinholeCameraParams(fov_deg=175.0)
    with pytest.raises(ConfigError, match=r"camera\.distortion.*5 coefficients"):
        PinholeCameraParams(distortion=(0.1, 0.0, 0.0, 0.0))
    with pytest.raises(ConfigError, match=r"calibration_targets\.squares"):
        CalibrationTargetParams(squares=(1, 5))
    with pytest.raises(ConfigError, match=r"calibration_targets\.square_m"):
        CalibrationTargetParams(square_m=0.0)


def _sensors(**sections: dict) -> dict:
    return {"scene": {}, "vehicle": {"sensors": sections}}


def test_scenario_sections_and_errors() -> None:
    assert {"fisheye", "camera"} <= set(SENSORS)
    sc = load_scenario("search_rescue_2a",
                       _sensors(fisheye={"depth": True, "width_px": 320, "height_px": 240}, camera={}))
    assert isinstance(sc.vehicle.sensors["fisheye"], SceneCameraParams)
    assert isinstance(sc.vehicle.sensors["camera"], PinholeCameraParams)
    with pytest.raises(ScenarioError, match=r"vehicle\.sensors\.(camera|fisheye): depth is set on camera and "
                                            r"fisheye"):
        load_scenario("search_rescue_2a", _sensors(fisheye={"depth": True}, camera={"depth": True}))
    with pytest.raises(ScenarioError, match=r"vehicle\.sensors\.fisheye\.lens: unknown key"):
        load_scenario("search_rescue_2a", _sensors(fisheye={"lens": "plumb_bob"}))
    with pytest.raises(ScenarioError, match=r"vehicle\.sensors\.fisheye: fisheye\.fov_deg"):
        load_scenario("search_rescue_2a", _sensors(fisheye={"fov_deg": -3}))
    with pytest.raises(ScenarioError, match=r"scene\.calibration_targets\[0\]\.squares"):
        load_scenario("search_rescue_2a", {"scene": {"calibration_targets": [{"squares": [3, 3, 3]}]}})
    with pytest.raises(ScenarioError, match=r"vehicle\.sensors\.fisheye looks at the 3-D scene"):
        Simulator.from_scenario("search_rescue_2a", {"vehicle": {"sensors": {"fisheye": {}}}})


def test_simulator_renders_the_registered_cameras() -> None:
    sim = Simulator.from_scenario("search_rescue_2a", {
        "seed": 3, **_sensors(fisheye={"depth": True, "width_px": 160, "height_px": 120, "dt_s": 0.1},
                              camera={"width_px": 160, "height_px": 120, "dt_s": 0.2})})
    fe, pin = sim.sensor("fisheye"), sim.sensor("camera")
    assert fe.images[0].shape == (120, 160, 3) and fe.depth_m[0].shape == (120, 160)
    first = fe.images[0].copy()
    sim.step([[0.0, 0.0, 0.0]])  # one task step: 1 s, 10 fisheye and 5 camera frames
    # the same seed renders the same first frame again
    again = Simulator.from_scenario("search_rescue_2a", {
        "seed": 3, **_sensors(fisheye={"depth": True, "width_px": 160, "height_px": 120, "dt_s": 0.1},
                              camera={"width_px": 160, "height_px": 120, "dt_s": 0.2})})
    np.testing.assert_array_equal(again.sensor("fisheye").images[0], first)
    assert pin.images[0] is not None


def test_classifier_persons_are_the_bodies_the_images_show() -> None:
    """The classifier camera reports a person in a window; that person's body (an upright cylinder of
    the scene) is drawn in the rendered image at the pixel where the person's mid-height projects."""
    persons = [[10.0, 5.0, 0.0], [-30.0, 20.0, 0.0]]
    sim = Simulator.from_scenario("search_rescue_2a", {
        "seed": 8, "area": {"persons_ned": persons},
        "vehicle": {"initial_states": [[12.0, 3.0, -25.0, 0.0, 0.0, 0.4]],
                    "sensors": {"camera": {"mount_xyz_m": [0, 0, 0], "fov_deg": 70.0}}},
        "scene": {}})
    sim.step([[0.0, 0.0, 0.0]])  # one task step of 1 s: the classifier's first frame
    obs = sim.camera_observations()[0]
    seen = sorted({int(i) for i in obs.person_index[obs.person_index >= 0]})
    assert seen == [0]
    cam = sim.sensor("camera")
    x = sim.true_state()[0]
    cam.step(0, x[None])  # render the same instant
    p = np.asarray(persons[seen[0]], float) + np.array([0.0, 0.0, -0.9])  # mid-height of the 1.8 m body
    # the camera looks straight down: optical x = body right, optical y = body backwards, z = body down
    phi, theta, psi = x[3:6]
    from qrsim_ros.core.common.frames import dcm_ned_to_body

    r_body = dcm_ned_to_body(phi, theta, psi)
    q = r_body @ (p - x[:3])
    u, v = cam.lens.project(np.array([[q[1], -q[0], q[2]]]))[0]
    i, j = round(v), round(u)
    patch = cam.images[0][i - 1:i + 2, j - 1:j + 2].reshape(-1, 3)
    person = render.LABEL_COLOURS[4]
    # high-visibility orange, Lambert-shaded: red well above green above blue
    assert (patch[:, 0] > 150).all() and (patch[:, 2] < 60).all(), patch
    assert np.allclose(patch[:, 1] / patch[:, 0], person[1] / person[0], atol=0.12)


# --- the fisheye node over DDS -----------------------------------------------------------------------

def _scenario_file(tmp_path: Path, section: dict, **extra: object) -> Path:
    return scenario_with_sensors(tmp_path, "search_rescue_2a", "search_rescue_fisheye", {"fisheye": section},
                                 scene={"generate": {"count": 20}}, **extra)


@pytest.mark.graph
@pytest.mark.timeout(300)
def test_fisheye_node_publishes_the_core_models_images(tmp_path: Path) -> None:
    from rosenv import require_ros

    require_ros()
    from rosbags.highlevel import AnyReader

    from qrsim_ros.bag.types import typestore
    from qrsim_ros.core.engine.builders import build_registered_sensor
    from qrsim_ros.core.engine.world import ScenarioWorld

    section = {"on": True, "depth": True, "width_px": 96, "height_px": 72, "dt_s": 0.1}
    scenario = _scenario_file(tmp_path, section, num_vehicles=2)
    seed = 12
    bag = launch_recorded(scenario, tmp_path, seed, 2)

    truth: dict[int, np.ndarray] = {}
    images: dict[tuple[int, int], np.ndarray] = {}
    depths: dict[tuple[int, int], np.ndarray] = {}
    infos: list = []
    statics: dict[str, object] = {}
    with AnyReader([bag], default_typestore=typestore()) as reader:
        for conn, _, raw in reader.messages(connections=reader.connections):
            topic = conn.topic
            if topic == "/sim/vehicle_status":
                msg = reader.deserialize(raw, conn.msgtype)
                truth[int(msg.tick)] = np.asarray(msg.state, float).reshape(-1, 13)
            elif topic == "/tf_static":
                for t in reader.deserialize(raw, conn.msgtype).transforms:
                    statics[t.child_frame_id] = t
            elif topic.startswith("/uav") and ("/fisheye/" in topic or "/depth/" in topic):
                msg = reader.deserialize(raw, conn.msgtype)
                vehicle = int(topic.split("/")[1][3:]) - 1
                assert msg.header.frame_id == f"uav{vehicle + 1}/fisheye_optical_frame"
                k = (msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec) // 20_000_000
                if topic.endswith("/fisheye/image_raw"):
                    assert conn.msgtype == "sensor_msgs/msg/Image" and msg.encoding == "rgb8"
                    assert msg.step == 96 * 3
                    images[(vehicle, k)] = np.frombuffer(bytes(msg.data), np.uint8).reshape(72, 96, 3)
                elif topic.endswith("/depth/image_raw"):
                    assert msg.encoding == "32FC1" and msg.is_bigendian == 0 and msg.step == 96 * 4
                    depths[(vehicle, k)] = np.frombuffer(bytes(msg.data), "<f4").reshape(72, 96)
                else:
                    assert conn.msgtype == "sensor_msgs/msg/CameraInfo"
                    infos.append(msg)
    # CameraInfo: the fisheye's own lens, equidistant with k1..k4
    params = load_scenario(str(scenario)).vehicle.sensors["fisheye"]
    lens = params.lens()
    assert infos and all(i.distortion_model == "equidistant" for i in infos)
    np.testing.assert_allclose(np.asarray(infos[0].k).reshape(3, 3), lens.K)
    np.testing.assert_allclose(infos[0].d, lens.D)
    np.testing.assert_allclose(np.asarray(infos[0].p).reshape(3, 4)[:, :3], lens.K)
    # /tf_static: base_link (FLU) -> optical; the default mount looks 45 degrees down, forward
    t = statics["uav2/fisheye_optical_frame"]
    assert t.header.frame_id == "uav2/base_link"
    q = t.transform.rotation
    rot = _quaternion_matrix(q.x, q.y, q.z, q.w)
    s = math.sqrt(0.5)
    np.testing.assert_allclose(rot @ [0, 0, 1], [s, 0.0, -s], atol=1e-9)  # optical z: forward and down (FLU)
    np.testing.assert_allclose(rot @ [1, 0, 0], [0.0, -1.0, 0.0], atol=1e-9)  # optical x: right = -y (FLU)
    tr = t.transform.translation
    np.testing.assert_allclose([tr.x, tr.y, tr.z], [0.10, 0.0, -0.05], atol=1e-12)  # FRD (0.1, 0, 0.05)
    # the images equal the core model's, stepped on the recorded ground truth with the scenario's seed
    sc = load_scenario(str(scenario))
    streams = RandomStreams(seed)
    world = ScenarioWorld(sc, streams, plume=False)
    world.new_episode()
    model = build_registered_sensor(sc, "fisheye", streams, world.scene)
    checked = 0
    for k in sensor_updates(model, truth):
        for i in range(2):
            if k in truth and (i, k) in images:
                np.testing.assert_array_equal(images[(i, k)], model.images[i])
                np.testing.assert_array_equal(depths[(i, k)], model.depth_m[i])
                checked += 1
    assert checked >= 0.8 * 2 * (max(truth) // 5)
    # and the Simulator with the same seed renders the first frame the graph published
    sim = Simulator.from_scenario(str(scenario), {"seed": seed})
    np.testing.assert_array_equal(sim.sensor("fisheye").images[0], images[(0, 0)])


def _quaternion_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])

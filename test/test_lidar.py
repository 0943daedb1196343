"""The scanning lidar (core.sensors.lidar, ros.conversions.lidar; docs/SCENE.md).

Geometry against analytic scenes with the expected values worked out here from the data-sheet angles:
ring radii over flat ground, a box face and a cylinder at known places, every point on a surface, the
planar scan of two walls. Noise and dropout statistics, seeded determinism, motion during a sweep (a
vehicle flying at a wall), the sweep schedule and stamps at 10 and 40 Hz. The ROS side: the PointCloud2
bytes decoded with numpy from the field offsets, the LaserScan fields, the mount's static transform, and
the node over DDS against the in-process Simulator's model with the same seed.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from rosenv import LIDAR_OBSTACLES, launch_recorded, lidar_scenario, sensor_updates

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.sensors.lidar import (
    DROPOUT,
    MODELS,
    OK,
    TOO_CLOSE,
    Lidar,
    LidarParams,
    mount_rotation,
)
from qrsim_ros.core.sensors.registry import SENSORS
from qrsim_ros.core.world.scene import ObstacleParams, Scene, SceneParams

LIMITS = (-150.0, 150.0, -150.0, 150.0, -60.0, 0.0)
AT_CENTRE = (0.0, 0.0, 0.0)  # the sensor at the vehicle's centre: heights and distances are the vehicle's


def _scene(*obstacles: ObstacleParams) -> Scene:
    return Scene(SceneParams(obstacles=tuple(obstacles)), LIMITS, 0.0, RandomStreams(7))


def _state(n: float = 0.0, e: float = 0.0, d: float = -10.0, phi: float = 0.0, theta: float = 0.0,
           psi: float = 0.0) -> np.ndarray:
    x = np.zeros((1, 13))
    x[0, :6] = (n, e, d, phi, theta, psi)
    return x


def _one_sweep(lidar: Lidar, x: np.ndarray) -> int:
    """Reset on x and step on it until the first sweep is complete; the tick it completed at."""
    lidar.reset(x)
    for k in range(1, 100):
        if lidar.step(k, x):
            return k
    raise AssertionError("no sweep")


# --- the model table ---------------------------------------------------------------------------------

def test_the_models_have_their_data_sheet_geometry() -> None:
    vlp = Lidar(1, LidarParams(model="vlp16"), RandomStreams(1), _scene()).rays
    np.testing.assert_allclose(np.unique(np.degrees(vlp.elevation_rad)), np.arange(-15, 16, 2), atol=1e-9)
    assert vlp.columns == 1808  # 0.1 s / 55.296 us firing cycle
    assert abs(vlp.azimuth_step_rad) == pytest.approx(math.radians(0.2), abs=math.radians(0.002))
    assert vlp.size / 0.1 == pytest.approx(300_000, rel=0.04)  # data sheet: ~300,000 points/s
    hdl = Lidar(1, LidarParams(model="hdl32e"), RandomStreams(1), _scene()).rays
    el = np.unique(np.degrees(hdl.elevation_rad))
    assert len(el) == 32 and el[0] == pytest.approx(-30.67) and el[-1] == pytest.approx(10.67)
    np.testing.assert_allclose(np.diff(el), 1.333, atol=0.011)
    assert abs(np.degrees(hdl.azimuth_step_rad)) == pytest.approx(0.16, abs=0.01)
    assert hdl.size / 0.1 == pytest.approx(700_000, rel=0.01)  # data sheet: ~700,000 points/s
    os1 = Lidar(1, LidarParams(model="os1_64"), RandomStreams(1), _scene()).rays
    el = np.degrees(os1.elevation_rad)
    assert os1.rings == 64 and os1.columns == 1024 and el.max() - el.min() == pytest.approx(45.0)
    assert MODELS["os1_64"].max_range_m == 120.0
    utm = Lidar(1, LidarParams(model="utm30lx"), RandomStreams(1), _scene()).rays
    assert utm.rings == 1 and utm.columns == 1081
    assert utm.azimuth_step_rad == pytest.approx(math.radians(0.25))
    assert utm.column_period_s == pytest.approx(0.025 / 1440)
    p = LidarParams(model="utm30lx")
    assert (p.min_range_m, p.max_range_m, p.rate_hz) == (0.1, 30.0, 40.0)
    # the spinning models turn clockwise seen from above, from behind; the VLP-16 fires its 16 lasers
    # 2.304 us apart in each column
    assert vlp.azimuth_rad[0] == pytest.approx(math.pi) and vlp.azimuth_step_rad < 0
    np.testing.assert_allclose(vlp.time_s[:16], np.arange(16) * 2.304e-6)
    np.testing.assert_allclose(np.degrees(vlp.elevation_rad[:4]), [-15.0, 1.0, -13.0, 3.0])
    assert vlp.ring[:4].tolist() == [0, 8, 1, 9]  # rings by ascending elevation


# --- geometry ----------------------------------------------------------------------------------------

def test_vlp16_over_flat_ground_gives_the_ring_radii() -> None:
    h, sigma = 10.0, 0.02
    lidar = Lidar(1, LidarParams(sigma_m=sigma, mount_position_m=AT_CENTRE), RandomStreams(3), _scene())
    _one_sweep(lidar, _state(d=-h))
    pts = lidar.points(0)
    # the data sheet's downward beams -15, -13, ..., -7 deg reach the ground within 100 m; -5 deg and
    # above do not (10 m / sin 5 deg = 115 m)
    expected = {ring: h / math.tan(math.radians(angle))
                for ring, angle in enumerate([15.0, 13.0, 11.0, 9.0, 7.0])}
    assert sorted(set(pts["ring"].tolist())) == list(expected)
    for ring, radius in expected.items():
        sel = pts[pts["ring"] == ring]
        assert len(sel) == 1808  # every column returns
        r = np.hypot(sel["x"], sel["y"])
        angle = math.atan2(h, radius)
        assert abs(r.mean() - radius) < 4 * sigma * math.cos(angle) / math.sqrt(len(r))
        assert np.abs(r - radius).max() < 5 * sigma
        np.testing.assert_allclose(sel["z"], -h, atol=5 * sigma)
        # intensity: 100 x ground reflectivity 0.25 x cos(incidence) = 25 sin(depression)
        np.testing.assert_allclose(sel["intensity"], 25.0 * math.sin(angle), rtol=1e-4)
        az = np.unwrap(np.arctan2(sel["y"], sel["x"]).astype(float))
        # 1807 column steps of 360 deg x 55.296 us / 0.1 s (the firing cycle's share of a turn)
        assert np.ptp(az) == pytest.approx(1807 * 2 * math.pi * 55.296e-6 / 0.1, abs=1e-5)


def test_a_box_face_and_a_cylinder_give_their_exact_ranges() -> None:
    box = ObstacleParams(type="building", center_ne_m=(25.0, 0.0), size_m=(10.0, 12.0, 40.0))  # face at 20 m
    cyl = ObstacleParams(type="cylinder", center_ne_m=(0.0, -15.0), radius_m=1.5, height_m=40.0)  # west
    lidar = Lidar(1, LidarParams(sigma_m=0.0, mount_position_m=AT_CENTRE), RandomStreams(1), _scene(box, cyl))
    _one_sweep(lidar, _state(d=-10.0))
    rays = lidar.rays
    r = lidar.range_m[0]
    el, az = rays.elevation_rad, rays.azimuth_rad
    # the face north = 20 m, east in (-6, 6): range 20 / (cos el cos az) (sensor x forward = north)
    y_face = 20.0 * np.tan(az)
    on_face = (np.abs(az) < math.pi / 2) & (np.abs(y_face) < 5.9) & (np.abs(el) < math.radians(14))
    assert on_face.sum() > 200
    np.testing.assert_allclose(r[on_face], 20.0 / (np.cos(el) * np.cos(az))[on_face], rtol=2e-6)
    # the cylinder: 1.5 m around (north 0, east -15), i.e. 15 m to the sensor's left (+y)
    u = np.column_stack([np.cos(az), np.sin(az)])  # horizontal direction in the sensor frame
    centre = np.array([0.0, 15.0])
    b = u @ centre
    disc = b**2 - centre @ centre + 1.5**2
    # rays meeting the surface at less than 60 deg from its normal (cos incidence = sqrt(disc) / radius)
    sees = (disc > (0.5 * 1.5) ** 2) & (b > 0) & (np.abs(el) < math.radians(14))
    assert sees.sum() > 100
    expected = (b - np.sqrt(np.where(sees, disc, 0.0))) / np.cos(el)
    # within the mesh's chord error (2 mm) along a ray at up to 60 deg incidence and 14 deg elevation
    np.testing.assert_allclose(r[sees], expected[sees], atol=0.002 / 0.5 / math.cos(math.radians(14)) + 1e-4)


def _signed_distance(p: np.ndarray, obstacles: list[ObstacleParams]) -> np.ndarray:
    """Distance (M,) of NED points to the nearest surface of the flat ground (z = 0) and the obstacles
    (standing on it), worked out analytically."""
    best = np.abs(p[:, 2])
    up = -p[:, 2]
    for ob in obstacles:
        rel = p[:, :2] - np.asarray(ob.center_ne_m)
        if ob.type == "cylinder":
            dxy = np.hypot(rel[:, 0], rel[:, 1]) - ob.radius_m
            dz = up - ob.height_m
            outside = np.where(dz > 0, np.hypot(dxy, dz), dxy)
            d = np.where(dxy > 0, outside, np.where(dz > 0, dz, np.maximum(dxy, dz)))
        else:
            c, s = math.cos(ob.yaw_rad), math.sin(ob.yaw_rad)
            local = np.column_stack([c * rel[:, 0] + s * rel[:, 1], -s * rel[:, 0] + c * rel[:, 1],
                                     up - 0.5 * ob.size_m[2]])
            q = np.abs(local) - 0.5 * np.asarray(ob.size_m)
            d = np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(axis=1), 0.0)
        best = np.minimum(best, np.abs(d))
    return best


def test_every_point_lands_on_a_surface() -> None:
    obstacles = [ObstacleParams(type="box", center_ne_m=(12.0, 5.0), size_m=(3.0, 4.0, 3.0), yaw_rad=0.4),
                 ObstacleParams(type="building", center_ne_m=(-20.0, -10.0), size_m=(8.0, 6.0, 20.0),
                                yaw_rad=-0.7),
                 ObstacleParams(type="cylinder", center_ne_m=(5.0, -12.0), radius_m=0.4, height_m=8.0)]
    x = _state(n=1.0, e=2.0, d=-6.0, phi=0.1, theta=-0.05, psi=0.8)
    params = LidarParams(model="hdl32e", sigma_m=0.0, mount_position_m=(0.1, -0.05, -0.2),
                         mount_rpy_rad=(0.0, 0.2, 0.3))
    lidar = Lidar(1, params, RandomStreams(1), _scene(*obstacles))
    _one_sweep(lidar, x)
    pts = lidar.points(0)
    assert len(pts) > 30_000
    # the sensor's pose in NED: body rotation (ZYX Euler angles, written out) then the mount
    from qrsim_ros.core.common.frames import dcm_ned_to_body

    r_nb = dcm_ned_to_body(*x[0, 3:6]).T
    origin = x[0, :3] + r_nb @ np.array(params.mount_position_m)
    xyz = np.column_stack([pts["x"], pts["y"], pts["z"]]).astype(float)
    ned = origin + xyz @ (r_nb @ mount_rotation(params)).T
    assert np.all(_signed_distance(ned, obstacles) < 3e-3)


def test_noise_and_dropout_statistics() -> None:
    h, sigma, p = 10.0, 0.05, 0.2
    lidar = Lidar(1, LidarParams(sigma_m=sigma, dropout_probability=p, mount_position_m=AT_CENTRE),
                  RandomStreams(11), _scene())
    x = _state(d=-h)
    lidar.reset(x)
    errors, dropped, rays = [], 0, 0
    down = lidar.rays.elevation_rad < math.radians(-6)  # the rings that reach the ground
    true = h / np.sin(-lidar.rays.elevation_rad)
    for k in range(1, 21):
        if lidar.step(k, x):
            st = lidar.status[0][down]
            dropped += int((st == DROPOUT).sum())
            rays += int(down.sum())
            ok = st == OK
            errors.append(lidar.range_m[0][down][ok] - true[down][ok])
    err = np.concatenate(errors)
    assert rays == 4 * 5 * 1808  # four sweeps in 0.4 s
    # dropout: binomial 99.9 % interval around 0.2 of 36,160 rays (+-0.0069)
    assert abs(dropped / rays - p) < 0.0075
    assert abs(err.std() - sigma) < 0.02 * sigma and abs(err.mean()) < 0.001


def test_same_seed_same_clouds_and_other_seeds_differ() -> None:
    scene = _scene(ObstacleParams(type="box", center_ne_m=(10.0, 0.0), size_m=(2.0, 2.0, 30.0)))
    params = LidarParams(model="os1_64", sigma_m=0.03, dropout_probability=0.1)
    a, b, c = (Lidar(2, params, RandomStreams(s), scene) for s in (5, 5, 6))
    xs = [np.vstack([_state(n=0.1 * k, d=-5.0), _state(e=-0.1 * k, d=-7.0, psi=0.02 * k)]) for k in range(12)]
    for m in (a, b, c):
        m.reset(xs[0])
    ticks = [k for k in range(1, 12) if a.step(k, xs[k]) | b.step(k, xs[k]) | c.step(k, xs[k])]
    assert ticks == [5, 10]
    np.testing.assert_array_equal(a.range_m, b.range_m)
    np.testing.assert_array_equal(a.points(1), b.points(1))
    finite = np.isfinite(a.range_m) & np.isfinite(c.range_m)
    assert not np.array_equal(a.range_m[finite], c.range_m[finite])


def test_motion_during_the_sweep_shifts_the_points_with_their_time() -> None:
    """A vehicle flying north at 10 m/s at a wall 50 m ahead: every point on the wall is in the sensor
    frame at its own time, x = 50 - v (sweep start + time), so x falls through the sweep."""
    v = 10.0
    wall = ObstacleParams(type="building", center_ne_m=(60.0, 0.0), size_m=(20.0, 200.0, 40.0))
    lidar = Lidar(1, LidarParams(sigma_m=0.0, mount_position_m=AT_CENTRE), RandomStreams(1), _scene(wall))

    def x_at(k: int) -> np.ndarray:
        x = _state(n=v * 0.02 * k, d=-5.0)
        x[0, 6] = v
        return x

    lidar.reset(x_at(0))
    sweeps = 0
    for k in range(1, 11):
        if not lidar.step(k, x_at(k)):
            continue
        sweeps += 1
        pts = lidar.points(0)
        on_wall = pts[(pts["x"] > 40.0) & (pts["z"] > -4.9)]  # not the ground, 5 m below
        assert len(on_wall) > 2000
        t = lidar.sweep_start_s + on_wall["time"].astype(float)
        np.testing.assert_allclose(on_wall["x"], 50.0 - v * t, atol=1e-3)
        assert np.ptp(on_wall["x"]) > 0.2  # the wall is seen over ~35 ms: 0.35 m of flight
        assert np.polyfit(t, on_wall["x"].astype(float), 1)[0] == pytest.approx(-v, rel=1e-3)
    assert sweeps == 2


def test_sweeps_keep_their_own_schedule_at_10_and_40_hz() -> None:
    x = _state(d=-1.0)
    vlp = Lidar(1, LidarParams(sigma_m=0.0), RandomStreams(1), _scene())
    utm = Lidar(1, LidarParams(model="utm30lx", sigma_m=0.0), RandomStreams(1), _scene())
    vlp.reset(x)
    utm.reset(x)
    vlp_ticks, utm_sweeps = [], []
    for k in range(1, 51):  # one second
        if vlp.step(k, x):
            vlp_ticks.append((k, vlp.sweep_index, vlp.sweep_start_ns))
        if utm.step(k, x):
            utm_sweeps.append((k, utm.sweep_index, utm.sweep_start_ns))
    # 10 Hz: sweep s starts at tick 5 s and is complete at tick 5 (s + 1)
    assert vlp_ticks == [(5 * (s + 1), s, 100_000_000 * s) for s in range(10)]
    # 40 Hz: every sweep once, in order, stamped 25 ms apart (between ticks), reported at the first tick
    # at or after its last step (18.75 ms after its start)
    assert [s for _, s, _ in utm_sweeps] == list(range(40))
    assert [ns for _, _, ns in utm_sweeps] == [25_000_000 * s for s in range(40)]
    assert [k for k, _, _ in utm_sweeps] == [math.ceil((25.0 * s + 18.75) / 20.0) for s in range(40)]


def test_a_vehicle_invalid_during_a_sweep_has_no_cloud_for_it() -> None:
    lidar = Lidar(2, LidarParams(sigma_m=0.0), RandomStreams(1), _scene())
    x = np.vstack([_state(d=-5.0), _state(n=10.0, d=-5.0)])
    lidar.reset(x)
    complete = []
    for k in range(1, 11):
        valid = np.array([True, k != 3])
        if lidar.step(k, x, valid):
            complete.append(lidar.complete.tolist())
    assert complete == [[True, False], [True, True]]


# --- the planar scanner ---------------------------------------------------------------------------------

def test_the_planar_scan_of_two_walls() -> None:
    front = ObstacleParams(type="building", center_ne_m=(15.0, 0.0), size_m=(10.0, 40.0, 10.0))  # north 10
    left = ObstacleParams(type="building", center_ne_m=(0.0, -13.0), size_m=(40.0, 10.0, 10.0))  # east -8
    lidar = Lidar(1, LidarParams(model="utm30lx", sigma_m=0.0, mount_position_m=AT_CENTRE), RandomStreams(1),
                  _scene(front, left))
    _one_sweep(lidar, _state(d=-1.0))
    ranges, intensity = lidar.scan(0)
    a = np.radians(-135.0 + 0.25 * np.arange(1081))  # the data sheet's steps, counter-clockwise
    assert len(ranges) == 1081
    corner = math.atan2(8.0, 10.0)  # the two walls meet at (10, +8) in the sensor frame (y left)
    on_front = (a > math.atan2(-20.0, 10.0) + 0.01) & (a < corner - 0.01)
    on_left = (a > corner + 0.01)
    np.testing.assert_allclose(ranges[on_front], 10.0 / np.cos(a[on_front]), rtol=2e-6)
    np.testing.assert_allclose(ranges[on_left], 8.0 / np.sin(a[on_left]), rtol=2e-6)
    np.testing.assert_allclose(intensity[on_front], 100 * 0.6 * np.cos(a[on_front]), rtol=1e-4)
    assert np.all(np.isposinf(ranges[a < math.atan2(-20.0, 10.0) - 0.01]))  # open to the right: +inf
    # 5 cm from the front wall: closer than the 0.1 m minimum, -inf; dropouts are NaN
    close = Lidar(1, LidarParams(model="utm30lx", sigma_m=0.0, dropout_probability=0.3,
                                 mount_position_m=AT_CENTRE), RandomStreams(2), _scene(front, left))
    _one_sweep(close, _state(n=9.95, d=-1.0))
    r, _ = close.scan(0)
    st = close.status[0]
    ahead = np.abs(a) < math.radians(55)  # 0.05 m / cos a < 0.1 m
    assert np.all(np.isneginf(r[ahead & ~np.isnan(r)])) and (st == TOO_CLOSE).sum() > 300
    assert np.array_equal(np.isnan(r), st == DROPOUT) and 0.25 < np.isnan(r).mean() < 0.35


# --- parameters -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("section", "message"), [
    ({"model": "vlp32"}, r"lidar.model='vlp32' must be one of hdl32e, os1_64, utm30lx, vlp16"),
    ({"rate_hz": 25.0}, r"lidar.rate_hz=25.0 must be in \[5.0, 20.0\] for vlp16"),
    ({"model": "os1_64", "rate_hz": 15.0}, r"lidar.rate_hz=15.0 must be one of \[10.0, 20.0\]"),
    ({"model": "os1_64", "columns": 2048, "rate_hz": 20.0},
     r"lidar.columns=2048 at rate_hz=20.0 is not a mode"),
    ({"columns": 1024}, r"lidar.columns: vlp16 has no column modes"),
    ({"dropout_probability": 1.0}, r"lidar.dropout_probability=1.0 must be in \[0, 1\)"),
    ({"sigma_m": -0.1}, r"lidar.sigma_m=-0.1 must be finite and >= 0"),
    ({"min_range_m": 5.0, "max_range_m": 2.0}, r"lidar: min_range_m=5.0 and max_range_m=2.0"),
    ({"mount_rpy_rad": [0.0, 0.1]}, r"lidar.mount_rpy_rad must be a finite array of shape \(3,\)"),
    ({"mount_position_m": [0.0, math.nan, 0.0]}, r"lidar.mount_position_m must be finite"),
    ({"reflectivity": [0.2, 0.3, 0.4, 1.5, 0.1]}, r"lidar.reflectivity=.* must be 5 values in \[0, 1\]"),
    ({"model": "utm30lx", "cut_azimuth_rad": 1.0}, r"lidar.cut_azimuth_rad: utm30lx is a planar scanner"),
])
def test_bad_parameters_are_one_clear_error(section: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LidarParams(**section)
    if "mount_rpy_rad" not in section:  # a list of the wrong length is the loader's error (below)
        with pytest.raises(ScenarioError, match=r"keep_spot.yaml: vehicle.sensors.lidar: " + message):
            load_scenario("keep_spot", _with_lidar(section))


def test_the_scenario_section_names_the_key() -> None:
    sc = load_scenario("keep_spot", _with_lidar({"model": "os1_64", "columns": 2048}))
    params = sc.vehicle.sensors["lidar"]
    assert isinstance(params, LidarParams)
    assert (params.columns, params.rate_hz, params.sigma_m) == (2048, 10.0, 0.03)  # data-sheet defaults
    with pytest.raises(ScenarioError, match=r"keep_spot.yaml: vehicle.sensors.lidar.reflectivity: expected a "
                                            r"list of 5 values, got 2"):
        load_scenario("keep_spot", _with_lidar({"reflectivity": [0.2, 0.3]}))
    with pytest.raises(ScenarioError, match=r"keep_spot.yaml: vehicle.sensors.lidar.rate: unknown key"):
        load_scenario("keep_spot", _with_lidar({"rate": 10}))


def test_the_mount_turns_the_rays_into_the_body() -> None:
    # pitched up 0.5 rad (FRD pitch: nose up) and 0.1 m forward, 0.2 m right, 0.3 m up
    params = LidarParams(mount_position_m=(0.1, 0.2, -0.3), mount_rpy_rad=(0.0, 0.5, 0.0))
    m = mount_rotation(params)
    np.testing.assert_allclose(m @ [1, 0, 0], [math.cos(0.5), 0.0, -math.sin(0.5)], atol=1e-12)  # FRD: up -z
    np.testing.assert_allclose(m @ [0, 1, 0], [0.0, -1.0, 0.0], atol=1e-12)  # sensor left = body -right
    yawed = mount_rotation(LidarParams(mount_rpy_rad=(0.0, 0.0, math.pi / 2)))  # sensor x to the right
    np.testing.assert_allclose(yawed @ [1, 0, 0], [0.0, 1.0, 0.0], atol=1e-12)


# --- the scenario and the Simulator ----------------------------------------------------------------------

def _with_lidar(section: dict | None = None, scene: dict | None = None) -> dict:
    return {"scene": scene if scene is not None else {"obstacles": LIDAR_OBSTACLES},
            "vehicle": {"sensors": {"lidar": section or {}}}}


def test_the_simulator_builds_and_steps_the_registered_lidar() -> None:
    assert SENSORS["lidar"].uses_scene
    sim = Simulator.from_scenario("keep_spot", {"seed": 3, **_with_lidar({"sigma_m": 0.0})})
    lidar = sim.sensor("lidar")
    assert isinstance(lidar, Lidar)
    sweeps = []
    for k in range(1, 11):
        sim.step([[0.05, -0.03, 0.62, 0.2, 12.0]])
        if lidar.new_sweep:
            sweeps.append(k)
    assert sweeps == [5, 10] and lidar.complete.all()
    pts = lidar.points(0)
    # the cylinder 12 m north, 6 m east of a vehicle near the origin: points ~13 m away, to the right
    near = pts[(np.hypot(pts["x"], pts["y"]) < 15.0) & (pts["z"] > -5.0)]
    assert len(near) > 50 and np.all(near["y"] < 0)
    with pytest.raises(ScenarioError, match=r"vehicle.sensors.lidar looks at the 3-D scene: the scenario "
                                            r"needs a 'scene' section"):
        Simulator.from_scenario("keep_spot", {"vehicle": {"sensors": {"lidar": {}}}})


def test_launch_plan_adds_the_lidar_node(tmp_path: Path) -> None:
    from qrsim_ros.launch_plan import GROUND_TRUTH_CONSUMERS, plan

    path = lidar_scenario(tmp_path, "keep_spot", {})
    assert "lidar" in [s.name for s in plan(str(path), autopilot=False)] and "lidar" in GROUND_TRUTH_CONSUMERS


# --- the ROS messages -------------------------------------------------------------------------------------

_PF_TYPES = {4: "<u2", 7: "<f4"}  # sensor_msgs/PointField UINT16, FLOAT32


def _decode(msg: object) -> np.ndarray:
    """A PointCloud2's points as a numpy record array built from its own field list."""
    fields = msg.fields
    dtype = np.dtype({"names": [f.name for f in fields], "formats": [_PF_TYPES[f.datatype] for f in fields],
                      "offsets": [f.offset for f in fields], "itemsize": msg.point_step})
    assert not msg.is_bigendian and msg.row_step == msg.point_step * msg.width
    return np.frombuffer(bytes(msg.data), dtype).reshape(msg.height, msg.width)


def test_the_pointcloud2_layout_is_the_velodyne_drivers() -> None:
    from rosenv import require_ros

    require_ros()
    from qrsim_ros.ros.conversions import lidar as conv

    x = _state(d=-8.0)
    for organized in (False, True):
        lidar = Lidar(1, LidarParams(organized=organized, dropout_probability=0.1), RandomStreams(4),
                      _scene(ObstacleParams(type="box", center_ne_m=(6.0, 0.0), size_m=(2.0, 2.0, 20.0))))
        k = _one_sweep(lidar, x)
        [(i, key, msg)] = conv.messages(lidar, lidar.params, None, [0])
        assert (i, key, msg.header.frame_id) == (0, "points", "uav1/lidar_link")
        assert [(f.name, f.offset, f.datatype) for f in msg.fields] == [
            ("x", 0, 7), ("y", 4, 7), ("z", 8, 7), ("intensity", 12, 7), ("ring", 16, 4), ("time", 18, 7)]
        assert msg.point_step == 22
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (0, 0) and k == 5  # the first ray's time
        pts = _decode(msg)
        if organized:
            assert (msg.height, msg.width) == (16, 1808) and not msg.is_dense
            assert np.isnan(pts["x"]).any()
            # row = ring: every point of row 3 is ring 3 at the elevation -9 deg
            assert np.all(pts["ring"][3] == 3)
            row = pts[3][np.isfinite(pts[3]["x"])]
            el = np.degrees(np.arctan2(row["z"], np.hypot(row["x"], row["y"])))
            np.testing.assert_allclose(el, -9.0, atol=1e-3)
        else:
            assert msg.height == 1 and msg.is_dense and np.all(np.isfinite(pts["x"]))
            ref = lidar.points(0)
            for name in ("x", "y", "z", "intensity", "ring", "time"):
                np.testing.assert_array_equal(pts[name][0], ref[name])
            assert np.all(np.diff(pts["time"][0]) >= 0) and pts["time"][0].max() < 0.1
    # no sweep completed at this tick: nothing to publish
    assert lidar.step(k + 1, x) is False and conv.messages(lidar, lidar.params, None, [0]) == []


def test_the_laserscan_fields_and_the_stamp_between_ticks() -> None:
    from rosenv import require_ros

    require_ros()
    from qrsim_ros.ros.conversions import lidar as conv

    lidar = Lidar(2, LidarParams(model="utm30lx"), RandomStreams(4),
                  _scene(ObstacleParams(type="building", center_ne_m=(15.0, 0.0), size_m=(10.0, 40.0, 10.0))))
    x = np.vstack([_state(d=-1.0), _state(n=2.0, d=-1.0)])
    lidar.reset(x)
    msgs = []
    for k in range(1, 4):
        if lidar.step(k, x):
            msgs += conv.messages(lidar, lidar.params, None, [0, 1])
    assert conv.publications(lidar.params) == {"scan": (conv.LaserScan, "scan")}
    assert [(i, key) for i, key, _ in msgs] == [(0, "scan"), (1, "scan"), (0, "scan"), (1, "scan")]
    scan = msgs[2][2]  # sweep 1 of uav1: started at 25 ms, between ticks 1 and 2
    assert (scan.header.stamp.sec, scan.header.stamp.nanosec) == (0, 25_000_000)
    assert scan.header.frame_id == "uav1/lidar_link" and msgs[3][2].header.frame_id == "uav2/lidar_link"
    assert scan.angle_min == pytest.approx(-0.75 * math.pi, abs=1e-6)
    assert scan.angle_max == pytest.approx(0.75 * math.pi, abs=1e-6)
    assert scan.angle_increment == pytest.approx(math.radians(0.25), abs=1e-8)
    assert scan.time_increment == pytest.approx(1.736e-5, rel=1e-3) and scan.scan_time == pytest.approx(0.025)
    assert (scan.range_min, scan.range_max) == (pytest.approx(0.1), pytest.approx(30.0))
    assert len(scan.ranges) == len(scan.intensities) == 1081
    ranges, _ = lidar.scan(0)
    np.testing.assert_array_equal(np.asarray(scan.ranges), ranges.astype(np.float32))
    assert scan.ranges[540] == pytest.approx(10.0, abs=0.15)  # straight ahead: the wall, with noise


def test_the_static_transform_is_the_mount_in_flu() -> None:
    from rosenv import require_ros

    require_ros()
    from scipy.spatial.transform import Rotation

    from qrsim_ros.ros.conversions import lidar as conv

    params = LidarParams(mount_position_m=(0.1, 0.2, -0.3), mount_rpy_rad=(0.0, 0.5, 0.0))
    tfs = conv.static_transforms(2, None, params)
    assert [(t.header.frame_id, t.child_frame_id) for t in tfs] == [
        ("uav1/base_link", "uav1/lidar_link"), ("uav2/base_link", "uav2/lidar_link")]
    tr, q = tfs[1].transform.translation, tfs[1].transform.rotation
    assert (tr.x, tr.y, tr.z) == (pytest.approx(0.1), pytest.approx(-0.2), pytest.approx(0.3))  # FLU
    rot = Rotation.from_quat([q.x, q.y, q.z, q.w])
    # pitched nose-up 0.5 rad: the sensor's x axis points forward and up in FLU
    np.testing.assert_allclose(rot.apply([1, 0, 0]), [math.cos(0.5), 0.0, math.sin(0.5)], atol=1e-12)
    np.testing.assert_allclose(rot.apply([0, 1, 0]), [0.0, 1.0, 0.0], atol=1e-12)


# --- the generic sensor node over DDS ----------------------------------------------------------------------

@pytest.mark.graph
@pytest.mark.timeout(300)
def test_lidar_node_publishes_the_simulators_clouds(tmp_path: Path) -> None:
    from rosenv import require_ros

    require_ros()
    from rosbags.highlevel import AnyReader

    from qrsim_ros.bag.types import typestore

    section = {"sigma_m": 0.03, "dropout_probability": 0.05, "mount_position_m": [0.05, 0.0, -0.12]}
    scenario = lidar_scenario(tmp_path, "keep_spot_x10", section, num_vehicles=2)
    seed = 17
    bag = launch_recorded(scenario, tmp_path, seed, 2)

    truth: dict[int, np.ndarray] = {}
    clouds: dict[tuple[int, int], np.ndarray] = {}
    statics = {}
    types = {}
    with AnyReader([bag], default_typestore=typestore()) as reader:
        for conn, _, raw in reader.messages(connections=reader.connections):
            types[conn.topic] = conn.msgtype
            if conn.topic == "/sim/vehicle_status":
                msg = reader.deserialize(raw, conn.msgtype)
                truth[int(msg.tick)] = np.asarray(msg.state, float).reshape(-1, 13)
            elif conn.topic.endswith("/lidar/points"):
                msg = reader.deserialize(raw, conn.msgtype)
                vehicle = int(conn.topic.split("/")[1][3:]) - 1
                assert msg.header.frame_id == f"uav{vehicle + 1}/lidar_link"
                ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
                assert ns % 100_000_000 == 0  # 10 Hz sweeps start on ticks
                clouds[(vehicle, ns // 100_000_000)] = _decode(msg)[0]
            elif conn.topic == "/tf_static":
                msg = reader.deserialize(raw, conn.msgtype)
                for t in msg.transforms:
                    statics[t.child_frame_id] = t
    assert types["/uav1/lidar/points"] == types["/uav2/lidar/points"] == "sensor_msgs/msg/PointCloud2"
    for i in (1, 2):
        t = statics[f"uav{i}/lidar_link"]
        assert t.header.frame_id == f"uav{i}/base_link"
        tr = t.transform.translation
        assert (tr.x, tr.y, tr.z) == (pytest.approx(0.05), pytest.approx(0.0), pytest.approx(0.12))
    # the in-process Simulator's lidar with the same seed, stepped on the recorded ground truth
    sim = Simulator.from_scenario(str(scenario), {"seed": seed})
    model = sim.sensor("lidar")
    np.testing.assert_array_equal(sim.true_state(), truth[0])  # it was reset on the same initial states
    compared = 0
    for _ in sensor_updates(model, truth, reset=False):
        s = model.sweep_index  # equal only when every tick of the sweep was recorded
        if not all(j in truth for j in range(5 * s, 5 * s + 6)):
            continue
        for i in range(2):
            if (i, s) in clouds:
                expected = model.points(i)
                for name in ("x", "y", "z", "intensity", "ring", "time"):
                    np.testing.assert_array_equal(clouds[(i, s)][name], expected[name])
                compared += 1
    assert compared >= 2 * 15  # 2 s: 19 or 20 complete sweeps per vehicle, nearly all recorded

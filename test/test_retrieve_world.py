"""The retrieve mission's world models (ireland_2016 sections 4.5.2, 4.6.3, 4.7): the grasper
point, retrievable targets (tethered, free fall and floor contact, rest) and the downward target camera.
Checked against first principles computed here: ballistic fall times and ranges, the static compression
m g / k of the floor spring, the pinhole geometry of the field of view, scipy's rotations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from qrsim_ros.core.sensors.target_camera import TargetCameraParams, image_coordinates, visible
from qrsim_ros.core.world.targets import FREE, RESTING, TETHERED, TargetParams, Targets, grasper_point

P = TargetParams()


def state(n: float = 0.0, e: float = 0.0, d: float = -2.0, phi: float = 0.0, theta: float = 0.0,
          psi: float = 0.0, v_body: tuple[float, float, float] = (0.0, 0.0, 0.0),
          w_body: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    return np.array([[n, e, d, phi, theta, psi, *v_body, *w_body, 0.0]])


def test_the_grasper_point_is_the_rigid_bodys_point() -> None:
    x = state(1.0, 2.0, -3.0, 0.1, -0.2, 0.7, v_body=(1.0, 0.5, -0.2), w_body=(0.3, -0.1, 0.4))
    pos, vel = grasper_point(x, P.grasper_position_m)
    rot = Rotation.from_euler("ZYX", [0.7, -0.2, 0.1])  # body FRD -> NED
    r = np.array(P.grasper_position_m)
    np.testing.assert_allclose(pos[0], np.array([1.0, 2.0, -3.0]) + rot.apply(r), atol=1e-12)
    np.testing.assert_allclose(vel[0], rot.apply(np.array([1.0, 0.5, -0.2]) + np.cross([0.3, -0.1, 0.4], r)),
                               atol=1e-12)
    # level and still: 0.2 m below the centre of mass
    np.testing.assert_allclose(grasper_point(state(d=-1.0), P.grasper_position_m)[0][0], [0.0, 0.0, -0.8])


def test_a_dropped_target_falls_ballistically_and_rests_on_the_floor_spring() -> None:
    targets = Targets(P, [[0.0, 0.0, -P.radius_m]])
    x = state(d=-1.5, v_body=(0.5, 0.0, 0.0))  # flying north at 0.5 m/s, grasper 1.3 m up
    targets.tether(0, 0, x)
    assert targets.phase[0] == TETHERED and targets.carried_by(0) == 0
    np.testing.assert_allclose(targets.position_ned_m[0], [0.0, 0.0, -1.3])
    targets.release(0)
    assert targets.phase[0] == FREE
    # free fall from 1.3 m until the centre is one radius above the floor: t = sqrt(2 h / g)
    drop_m = 1.3 - P.radius_m
    t_fall = math.sqrt(2 * drop_m / P.gravity_ms2)
    ticks = 0
    while targets.position_ned_m[0, 2] < -P.radius_m:
        targets.step(x)
        ticks += 1
    assert abs(ticks * 0.02 - t_fall) <= 0.02
    # it kept its horizontal release speed until the floor: landed 0.5 t_fall north
    assert targets.position_ned_m[0, 0] == pytest.approx(0.5 * t_fall, abs=0.5 * 0.02 + 0.01)
    for _ in range(200):
        targets.step(x)
        if targets.phase[0] == RESTING:
            break
    assert targets.phase[0] == RESTING
    # at rest the spring carries the weight: compressed by m g / k below the undisturbed contact
    assert targets.position_ned_m[0, 2] == pytest.approx(-P.radius_m + P.mass_kg * P.gravity_ms2
                                                         / P.floor_stiffness_n_m, abs=2e-4)
    # the floor's damping stopped the slide within a few centimetres (friction, eq. 16)
    assert 0.5 * t_fall <= targets.position_ned_m[0, 0] < 0.5 * t_fall + 0.1
    resting = targets.position_ned_m.copy()
    targets.step(x)  # a resting target does not move
    np.testing.assert_array_equal(targets.position_ned_m, resting)


def test_release_all_and_the_drop_site() -> None:
    targets = Targets(P, [[1.0, 1.0, -P.radius_m], [-1.0, 0.5, -P.radius_m]])
    x = np.vstack([state(1.0, 1.0, -0.5), state(3.0, 3.0, -2.0)])
    targets.tether(0, 0, x)
    with pytest.raises(ValueError, match="already tethered to vehicle 0"):
        targets.tether(0, 1, x)
    assert targets.release_all(1) == [] and targets.release_all(0) == [0]
    for _ in range(100):
        targets.step(x)
    assert targets.phase.tolist() == [RESTING, RESTING]
    # the drop site (north, east) = (1, 1), radius 0.25 m: the first target, dropped over it, is inside
    assert targets.inside([1.0, 1.0], 0.25).tolist() == [True, False]
    with pytest.raises(ValueError, match="finite and > 0"):
        TargetParams(mass_kg=0.0)


def test_the_camera_field_of_view_is_the_pinhole_frame_of_eq_14() -> None:
    cam = TargetCameraParams()
    h = 2.0 - cam.position_m[2] - P.radius_m  # optical-axis distance to a target centre below
    half_w = h * math.tan(cam.fov_rad)  # 45 deg: as far right as it is below
    half_h = half_w / cam.aspect_ratio
    x = state(d=-2.0)
    pts = [[0.0, 0.0, -P.radius_m],
           [0.0, 0.99 * half_w, -P.radius_m], [0.0, 1.01 * half_w, -P.radius_m],   # right (east)
           [0.99 * half_h, 0.0, -P.radius_m], [1.01 * half_h, 0.0, -P.radius_m],   # forward (north)
           [-0.99 * half_h, 0.0, -P.radius_m],
           [0.0, 0.0, -3.0]]                                                       # above: behind the lens
    assert visible(x, pts, cam)[0].tolist() == [True, True, False, True, False, True, False]
    coords, front = image_coordinates(x, pts, cam)
    # image right = body right, image up = body forward, scaled by f / distance
    np.testing.assert_allclose(coords[0, 1], [cam.focal_length * 0.99 * half_w / h, 0.0], atol=1e-9)
    np.testing.assert_allclose(coords[0, 3], [0.0, cam.focal_length * 0.99 * half_h / h], atol=1e-9)
    assert not front[0, 6] and np.isnan(coords[0, 6]).all()
    # yawed 90 deg (facing east): a target to the east is ahead, up in the image
    east = visible(state(d=-2.0, psi=math.pi / 2), [[0.0, 0.9 * half_h, -P.radius_m]], cam)
    assert east[0, 0]
    c, _ = image_coordinates(state(d=-2.0, psi=math.pi / 2), [[0.0, 0.9 * half_h, -P.radius_m]], cam)
    assert c[0, 0, 1] > 0 and abs(c[0, 0, 0]) < 1e-9

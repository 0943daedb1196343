"""The 3-D scene (core.world.scene) and its ray caster (core.common.raycast): analytic geometry,
height maps, generated obstacles, collisions, and the scene in the Simulator."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from qrsim_ros.core.common.raycast import NO_HIT, RayCaster
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.world.scene import (
    BOX,
    CRASH_REASON,
    CYLINDER,
    CYLINDER_CHORD_ERROR_M,
    GROUND,
    PERSON,
    GenerateParams,
    GroundParams,
    ObstacleParams,
    PersonBodyParams,
    Scene,
    SceneParams,
)

LIMITS = (-100.0, 100.0, -100.0, 100.0, -60.0, 0.0)


def scene(**kw: object) -> Scene:
    return Scene(SceneParams(**kw), LIMITS, 0.0, RandomStreams(7))  # type: ignore[arg-type]


def test_a_single_triangle_by_hand() -> None:
    caster = RayCaster([[0, 0, 5], [2, 0, 5], [0, 2, 5]], [[0, 1, 2]])
    hits = caster.cast([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [3.0, 3.0, 0.0]],
                       [[0, 0, 1], [0, 0, -1], [0, 0, 1]])
    assert hits.range_m[0] == pytest.approx(5.0, abs=1e-6)
    assert list(hits.face) == [0, NO_HIT, NO_HIT] and np.isinf(hits.range_m[1:]).all()
    np.testing.assert_allclose(hits.normal[0], [0, 0, -1])  # facing the ray's origin
    assert caster.cast([[0.5, 0.5, 0.0]], [[0, 0, 1]], max_range_m=4.0).face[0] == NO_HIT


def test_flat_ground_range_is_height_over_cosine() -> None:
    s = scene()
    angles = np.radians([0.0, 10.0, 30.0, 60.0, 80.0])
    d = np.column_stack([np.sin(angles), np.zeros(5), np.cos(angles)])
    hits = s.cast(np.tile([3.0, -4.0, -12.5], (5, 1)), d)
    np.testing.assert_allclose(hits.range_m, 12.5 / np.cos(angles), rtol=2e-6)
    assert (s.face_label[hits.face] == GROUND).all()
    np.testing.assert_allclose(hits.points(np.tile([3.0, -4.0, -12.5], (5, 1)), d)[:, 2], 0.0, atol=1e-4)
    # the ground reaches far beyond the area: a shallow ray still finds it
    far = s.cast([[0.0, 0.0, -10.0]], [[math.cos(0.01), 0.0, math.sin(0.01)]])
    assert far.range_m[0] == pytest.approx(10.0 / math.sin(0.01), rel=1e-4)


def test_box_and_yawed_box_faces() -> None:
    s = scene(obstacles=(ObstacleParams(type="box", center_ne_m=(20.0, 0.0), size_m=(2.0, 4.0, 10.0)),
                         ObstacleParams(type="building", center_ne_m=(0.0, -30.0), size_m=(6.0, 6.0, 20.0),
                                        yaw_rad=math.pi / 4)))
    hits = s.cast([[0.0, 0.0, -5.0], [0.0, 0.0, -5.0], [0.0, 0.0, -11.0]], [[1, 0, 0], [0, -1, 0], [1, 0, 0]])
    assert hits.range_m[0] == pytest.approx(19.0, abs=1e-5)  # the near face at north 19
    assert s.face_label[hits.face[0]] == BOX
    # a square turned 45 degrees shows its corner: 30 - 3 sqrt(2)
    assert hits.range_m[1] == pytest.approx(30.0 - 3.0 * math.sqrt(2.0), abs=1e-5)
    assert hits.face[2] == NO_HIT  # level, 1 m over the box's top: nothing
    np.testing.assert_allclose(hits.normal[0], [-1.0, 0.0, 0.0], atol=1e-9)


@pytest.mark.parametrize("radius_m", [0.2, 1.0, 5.0])
def test_cylinder_within_the_chord_error(radius_m: float) -> None:
    s = scene(obstacles=(ObstacleParams(type="cylinder", center_ne_m=(0.0, 30.0), radius_m=radius_m,
                                        height_m=8.0),))
    a = np.linspace(0.0, 2 * math.pi, 360, endpoint=False)
    # rays from a ring around the axis, pointing at the axis: range = ring radius - cylinder radius
    ring = 10.0
    origins = np.column_stack([ring * np.cos(a), 30.0 + ring * np.sin(a), np.full(a.size, -4.0)])
    hits = s.cast(origins, -np.column_stack([np.cos(a), np.sin(a), np.zeros(a.size)]))
    err = hits.range_m - (ring - radius_m)
    assert (s.face_label[hits.face] == CYLINDER).all()
    assert np.all(err >= -1e-5) and np.all(err <= CYLINDER_CHORD_ERROR_M + 1e-5), (err.min(), err.max())
    # the top at 8 m: a ray straight down onto it
    top = s.cast([[0.0, 30.0, -20.0]], [[0.0, 0.0, 1.0]])
    assert top.range_m[0] == pytest.approx(12.0, abs=1e-5)


def test_height_map_mesh_equals_its_interpolation(tmp_path: Path) -> None:
    heights = ((0.0, 1.0, 2.0), (1.0, 2.0, 5.0), (2.0, 3.0, 4.0))
    s = scene(ground=GroundParams(type="heightmap", heights_m=heights, cell_size_m=10.0,
                                  origin_ne_m=(0.0, 0.0)))
    rng = np.random.default_rng(1)
    pts = rng.uniform(-15.0, 35.0, size=(500, 2))
    hits = s.cast(np.column_stack([pts, np.full(len(pts), -50.0)]), np.tile([0.0, 0.0, 1.0], (len(pts), 1)))
    np.testing.assert_allclose(50.0 - hits.range_m, s.ground.height_m(pts[:, 0], pts[:, 1]), atol=2e-5)
    # the samples themselves (not computed by the code under test)
    for r, row in enumerate(heights):
        for c, h in enumerate(row):
            assert s.ground.height_m(10.0 * r, 10.0 * c) == pytest.approx(h)
    assert s.ground.height_m(-500.0, 700.0) == 0.0  # flat far outside the map
    # the same grid from a file gives the same ground
    np.savetxt(tmp_path / "h.csv", np.array(heights), delimiter=",")
    s2 = Scene(SceneParams(ground=GroundParams(type="heightmap", file="h.csv", cell_size_m=10.0,
                                               origin_ne_m=(0.0, 0.0))), LIMITS, 0.0, RandomStreams(7),
               base_dir=tmp_path)
    np.testing.assert_array_equal(s2.vertices, s.vertices)


def test_height_map_errors_name_what_and_where(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"heights_m.*different lengths"):
        GroundParams(type="heightmap", heights_m=((0.0, 1.0), (1.0,)))
    with pytest.raises(ConfigError, match=r"height \[1\]\[0\] is nan"):
        GroundParams(type="heightmap", heights_m=((0.0, 1.0), (math.nan, 1.0)))
    with pytest.raises(ConfigError, match="exactly one of"):
        GroundParams(type="heightmap")
    (tmp_path / "bad.csv").write_text("1,2\n3,x\n")
    for name, match in (("missing.csv", "file not found"), ("bad.csv", "malformed")):
        with pytest.raises(ConfigError, match=match):
            Scene(SceneParams(ground=GroundParams(type="heightmap", file=name)), LIMITS, 0.0,
                  RandomStreams(1), base_dir=tmp_path)


def test_generated_obstacles_are_seeded_inside_and_clear_of_the_start() -> None:
    params = SceneParams(generate=GenerateParams(count=120, keep_out_m=20.0, keep_out_ne_m=((10.0, -10.0),)))
    a = Scene(params, LIMITS, 0.0, RandomStreams(3))
    b = Scene(params, LIMITS, 0.0, RandomStreams(3))
    c = Scene(params, LIMITS, 0.0, RandomStreams(4))
    assert a.obstacles == b.obstacles and a.obstacles != c.obstacles
    np.testing.assert_array_equal(a.vertices, b.vertices)
    assert len(a.obstacles) == 120 and {o.type for o in a.obstacles} == {"box", "cylinder", "building"}
    for o in a.obstacles:
        n, e = o.center_ne_m
        assert math.hypot(n - 10.0, e + 10.0) > 20.0 + o.footprint_radius_m
        assert LIMITS[0] + o.footprint_radius_m <= n <= LIMITS[1] - o.footprint_radius_m
    # the keep-out disc is free: no ray from its centre hits an obstacle closer than keep_out_m
    az = np.linspace(0, 2 * math.pi, 720, endpoint=False)
    level = np.column_stack([np.cos(az), np.sin(az), 0 * az])
    hits = a.cast(np.tile([10.0, -10.0, -1.0], (az.size, 1)), level)
    assert np.all(hits.range_m[a.face_label[hits.face] != GROUND] > 20.0)
    with pytest.raises(ConfigError, match="no place for obstacle"):
        Scene(SceneParams(generate=GenerateParams(count=5, keep_out_m=500.0)), LIMITS, 0.0, RandomStreams(1))


def test_collisions_with_the_vehicle_radius() -> None:
    s = scene(obstacles=(ObstacleParams(type="box", center_ne_m=(20.0, 0.0), size_m=(2.0, 4.0, 10.0)),
                         ObstacleParams(type="cylinder", center_ne_m=(0.0, 30.0), radius_m=1.0, height_m=8.0),
                         ObstacleParams(type="box", center_ne_m=(-40.0, 0.0), size_m=(10.0, 2.0, 5.0),
                                        yaw_rad=math.pi / 2)),
              vehicle_radius_m=0.3)
    pts = [[20.0, 0.0, -5.0],    # inside the box
           [20.0, 2.25, -5.0],   # 0.25 m off its east face: within the vehicle's radius
           [20.0, 2.35, -5.0],   # 0.35 m off: clear
           [0.0, 30.0, -8.2],    # 0.2 m over the cylinder's top
           [0.0, 30.0, -8.4],    # 0.4 m over: clear
           [-40.0, 4.9, -1.0],   # in the turned box (10 m long east-west)
           [-44.9, 0.0, -1.0]]   # where it would be without the yaw: clear
    assert s.collides(pts).tolist() == [True, True, False, True, False, True, False]
    assert s.crashes(pts, [True, True, False, True, True, True, True]).tolist() == [0, 1, 3, 5]
    hm = scene(ground=GroundParams(type="heightmap", heights_m=((5.0, 5.0), (5.0, 5.0)),
                                   origin_ne_m=(0.0, 0.0)))
    assert hm.collides([[0.5, 0.5, -4.0], [0.5, 0.5, -6.0]]).tolist() == [True, False]
    assert not scene(solid=False, obstacles=s.obstacles).crashes(pts, [True] * 7).size


def test_persons_stand_on_the_ground_and_are_replaced() -> None:
    s = scene(persons=PersonBodyParams(height_m=1.8, radius_m=0.25))
    s.set_persons([[5.0, 5.0, 0.0], [-10.0, 3.0, 0.0]])
    down = s.cast([[5.0, 5.0, -10.0], [-10.0, 3.0, -10.0]], [[0, 0, 1.0], [0, 0, 1.0]])
    np.testing.assert_allclose(down.range_m, 10.0 - 1.8, atol=1e-5)
    assert (s.face_label[down.face] == PERSON).tolist() == [True, True]
    assert sorted(s.face_object[down.face]) == [0, 1]
    s.set_persons(np.zeros((0, 3)))
    assert s.face_label[s.cast([[5.0, 5.0, -10.0]], [[0, 0, 1.0]]).face[0]] == GROUND
    capsule = scene(persons=PersonBodyParams(shape="capsule", height_m=1.8, radius_m=0.3))
    capsule.set_persons([[0.0, 0.0, 0.0]])
    assert capsule.cast([[0.0, 0.0, -10.0]], [[0, 0, 1.0]]).range_m[0] == pytest.approx(8.2, abs=1e-3)


def _scene_scenario(**scene: object) -> object:
    return load_scenario("search_rescue_2a", {
        "num_vehicles": 2, "task": {"duration_steps": 100},
        "scene": {"obstacles": [{"type": "building", "center_ne_m": [0.0, 20.0],
                                 "size_m": [10.0, 10.0, 30.0]}], **scene},
        "vehicle": {"initial_states": [[0.0, 0.0, -10.0, 0, 0, 0], [30.0, 40.0, -10.0, 0, 0, 0]]}})


def test_the_simulator_invalidates_a_vehicle_that_flies_into_a_building() -> None:
    from qrsim_ros.core.engine.simulator import Simulator

    sim = Simulator(_scene_scenario())
    sim.reset()
    for _ in range(10):
        sim.step(np.array([[0.0, 3.0, 0.0], [0.0, -3.0, 0.0]]))  # uav1 east into the wall at 15 m
        if not sim.fleet.valid[0]:
            break
    assert sim.fleet.valid.tolist() == [False, True]
    assert sim.fleet.invalid_reason[0] == CRASH_REASON
    assert 14.0 < sim.fleet.state[0, 1] < 15.0  # stopped at the wall, within one step of it


def test_the_simulators_scene_holds_the_episodes_persons() -> None:
    from qrsim_ros.core.engine.simulator import Simulator

    sim = Simulator(_scene_scenario())
    for _ in range(2):
        sim.reset()
        persons = sim.world.persons_area.persons_position_ned
        assert len(persons) > 0
        np.testing.assert_array_equal(sim.world.scene.persons_ne, persons[:, :2])
    no_scene = Simulator(load_scenario("search_rescue_2a"))
    assert no_scene.world.scene is None


def test_a_bad_scene_section_names_the_file_and_key() -> None:
    with pytest.raises(ScenarioError, match=r"scene\.obstacles\[0\]: type=.tree. must be one of"):
        load_scenario("search_rescue_2a", {"scene": {"obstacles": [{"type": "tree"}]}})
    with pytest.raises(ScenarioError, match=r"scene\.generate\.cont: unknown key"):
        load_scenario("search_rescue_2a", {"scene": {"generate": {"cont": 3}}})
    with pytest.raises(ScenarioError,
                       match=r"scene\.obstacles\[0\]: center_ne_m must be finite, got \[nan, 0\.0\]"):
        load_scenario("search_rescue_2a", {"scene": {"obstacles": [{"center_ne_m": [math.nan, 0.0]}]}})


def test_sizes_are_bounded_and_the_largest_obstacle_reads_its_true_range() -> None:
    """Sizes beyond the limits table's ``scene_size_m`` are refused naming the key: a cylinder of radius
    1e30 raised ZeroDivisionError while its mesh was built, and a box of height 1e20 19 m ahead read inf.
    The largest allowed box reads its range as a small one does; a circle too large for the chord error
    gets the most sections instead of a division by zero."""
    from qrsim_ros.core.common.limits import LIMITS as TABLE
    from qrsim_ros.core.world.scene import MAX_SECTIONS, sections_for

    top = TABLE["scene_size_m"].hi
    refused = [(lambda: ObstacleParams(type="cylinder", radius_m=1e30), "radius_m=1e+30"),
               (lambda: ObstacleParams(type="box", size_m=(2.0, 4.0, 1e20)), "size_m=1e+20"),
               (lambda: PersonBodyParams(radius_m=1e14), "radius_m=100000000000000.0"),
               (lambda: GenerateParams(count=1, building_height_m=(6.0, 1e12)),
                "building_height_m=1000000000000.0")]
    for build, name in refused:
        with pytest.raises(ConfigError, match=rf"^{re.escape(name)} must be a number in \[0, 10000\] m"):
            build()
    tall = scene(obstacles=(ObstacleParams(type="box", center_ne_m=(20.0, 0.0), size_m=(2.0, 4.0, top)),))
    hits = tall.cast([[0.0, 0.0, -5.0], [0.0, 0.0, -9000.0]], [[1, 0, 0], [1, 0, 0]])
    np.testing.assert_allclose(hits.range_m, [19.0, 19.0], atol=2e-3)
    assert sections_for(top) == MAX_SECTIONS and sections_for(1e30) == MAX_SECTIONS

"""Flight areas, terrain classes and persons (spec 4.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN, GeodeticOrigin
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.world.area import BoxArea, BoxWithPersonsArea, PersonsAreaParams
from qrsim_ros.core.world.terrain import (
    PourTerrain,
    make_terrain,
    pour_coarse_map,
    upsample_nearest,
)

D_SR = math.sqrt(200 * 25 * 3)  # single-UAV SR area half-width (spec 5.3): 122.47 m
SR_LIMITS = (-D_SR, D_SR, -D_SR, D_SR, -80.0, 0.0)


# --- BoxArea ------------------------------------------------------------------------------------

def test_box_area_limits_origin_and_ground() -> None:
    area = BoxArea([-10, 20, -7, 7, -20, 0])
    assert area.origin == QRSIM_ORIGIN
    assert area.ground_z_m == 0.0
    np.testing.assert_array_equal(area.contains([[0, 0, -5], [21, 0, -5], [0, 0, 0.1], [20, 7, -20]]),
                                  [True, False, False, True])
    assert not area.step(50)
    other = GeodeticOrigin(45.0, 7.0, 100.0)
    assert BoxArea([-1, 1, -1, 1, -1, 0], origin=other).origin is other


@pytest.mark.parametrize("limits", [[-10, -20, -7, 7, -20, 0], [0, 1, 2, 3, 4], [0, 1, 0, 1, 0, np.nan]])
def test_bad_limits_rejected(limits) -> None:
    with pytest.raises(ConfigError, match="limits"):
        BoxArea(limits)
    with pytest.raises(ConfigError, match="limits"):
        PersonsAreaParams(limits_ned=tuple(limits))


# --- terrain -------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_terrain_class_fractions(seed: int) -> None:
    """The SR terrain (20 % clutter, 5 % occlusion) on the 245 x 245 m single-UAV area.

    Each class gets exactly ceil(2500 p) of the 2500 coarse cells; the nearest-neighbour upsampling
    gives the border coarse rows/columns half the weight of the others (2.5 vs ~4.9 fine rows), which
    moves a fraction by well under a point (measured max 0.6 over 40 seeds). Tolerance 2 points.
    """
    terrain = PourTerrain(SR_LIMITS, [0.2, 0.05], np.random.default_rng(seed))
    terrain.reset()
    grid = terrain.grid
    assert grid.shape == (245, 245)
    assert set(np.unique(grid).tolist()) == {0, 1, 2}
    assert abs((grid == 1).mean() - 0.2) < 0.02
    assert abs((grid == 2).mean() - 0.05) < 0.02


def test_terrain_is_seeded_and_changes_at_reset() -> None:
    def grid(seed: int, resets: int = 1) -> np.ndarray:
        t = PourTerrain(SR_LIMITS, [0.2, 0.05], RandomStreams(seed).get("area.terrain"))
        for _ in range(resets):
            t.reset()
        return t.grid

    np.testing.assert_array_equal(grid(7), grid(7))
    assert (grid(7) != grid(8)).mean() > 0.1
    assert (grid(7) != grid(7, resets=2)).mean() > 0.1


def test_coarse_pouring_gives_each_class_its_cells() -> None:
    rng = np.random.default_rng(3)
    p = [0.3, 0.1, 0.017]
    coarse = pour_coarse_map(p, 1.0 - rng.random(10_000), rng.integers(0, 50, (3, 2)))
    assert coarse.shape == (50, 50)
    for c, pc in enumerate(p, start=1):
        assert (coarse == c).sum() == math.ceil(pc * 2500)
    # poured regions are blobs, not salt and pepper: most class-1 cells have a class-1 4-neighbour
    one = coarse == 1
    neighbour = np.zeros_like(one)
    neighbour[1:] |= one[:-1]
    neighbour[:-1] |= one[1:]
    neighbour[:, 1:] |= one[:, :-1]
    neighbour[:, :-1] |= one[:, 1:]
    assert (one & neighbour).sum() > 0.9 * one.sum()


def test_pouring_continues_with_refilled_uniforms() -> None:
    """A vector that runs out is continued by refill(): same map as one long vector."""
    u = 1.0 - np.random.default_rng(0).random(200_000)
    whole = pour_coarse_map([0.2, 0.05], u, [[10, 10], [40, 3]])
    chunks = iter(np.split(u[997:], [1000 * i for i in range(1, 199)]))
    pieces = pour_coarse_map([0.2, 0.05], u[:997], [[10, 10], [40, 3]], refill=lambda: next(chunks))
    np.testing.assert_array_equal(whole, pieces)
    for c, pc in ((1, 0.2), (2, 0.05)):
        assert (whole == c).sum() == math.ceil(pc * 2500)


def test_small_area_terrain_terminates() -> None:
    """A 6 x 5 m area has only 30 uniforms per class: the pouring needs far more (refilled)."""
    terrain = PourTerrain([0, 6, 0, 5, -10, 0], [0.3, 0.2], np.random.default_rng(2))
    terrain.reset()
    assert terrain.grid.shape == (6, 5)


def _eager_terrain(limits: list[float], p: list[float], rng: np.random.Generator) -> np.ndarray:
    """The pouring as QRSim draws it: the whole block of nr nc K uniforms, the start cells, a fresh whole
    block for each refill; then the nearest-neighbour upsampling."""
    rows, cols = math.ceil(limits[1] - limits[0]), math.ceil(limits[3] - limits[2])
    n = rows * cols * len(p)
    uniforms = 1.0 - rng.random(n)
    starts = rng.integers(0, 50, size=(len(p), 2))
    coarse = pour_coarse_map(p, uniforms, starts, refill=lambda: 1.0 - rng.random(n))
    return upsample_nearest(coarse, rows, cols)


@pytest.mark.parametrize("limits", [SR_LIMITS, [0, 6, 0, 5, -10, 0], [0, 400, 0, 300, -10, 0]])
def test_terrain_read_in_chunks_equals_the_whole_block_drawn(limits: list[float]) -> None:
    """The terrain reads its blocks of uniforms lazily; the map, and where its Generator is left (the
    next reset), equal drawing every block whole. The 6 x 5 m area refills many times; the 400 x 300 m
    one has blocks of 240,000 read in chunks."""
    p = [0.2, 0.05]
    reference_rng = np.random.default_rng(11)
    terrain = PourTerrain(limits, p, np.random.default_rng(11))
    for _ in range(3):
        terrain.reset()
        np.testing.assert_array_equal(terrain.grid, _eager_terrain(limits, p, reference_rng))
    assert terrain._rng.random() == reference_rng.random()


def test_upsampling_is_nearest_neighbour() -> None:
    coarse = np.arange(50)[:, None] * 100 + np.arange(50)[None, :]
    fine = upsample_nearest(coarse, 245, 120)
    assert fine.shape == (245, 120)
    # fine row i lies at i * 245/244 on [0, 245]; coarse rows at j * 245/49: nearest j = round(i 49/244)
    for i in (0, 1, 2, 3, 100, 122, 243, 244):
        for j in (0, 1, 59, 119):
            assert fine[i, j] == math.floor(i * 49 / 244 + 0.5) * 100 + math.floor(j * 49 / 119 + 0.5)


def test_class_at_uses_ceil_indexing_and_clamps() -> None:
    limits = [-10.5, 10.0, 0.0, 7.2, -20, 0]
    terrain = PourTerrain(limits, [0.3], np.random.default_rng(1))
    terrain.reset()
    grid = terrain.grid
    assert grid.shape == (21, 8)  # ceil(20.5), ceil(7.2)
    g = terrain.geometry
    assert (g.xmin_m, g.ymin_m, g.rows, g.cols, g.cell_size_m) == (-10.5, 0.0, 21, 8, 1.0)
    rows, cols = np.meshgrid(np.arange(21), np.arange(8), indexing="ij")
    centres = np.column_stack([-10.5 + rows.ravel() + 0.5, cols.ravel() + 0.5])
    np.testing.assert_array_equal(terrain.class_at(centres), grid.ravel())
    # cell r covers (xmin + r, xmin + r + 1]: the upper edge belongs to the cell
    assert terrain.class_at([[-10.5 + 3.0, 2.0, -5.0]])[0] == grid[2, 1]
    # outside (and exactly on the lower edge, where QRSim indexed 0 and crashed) -> nearest border cell
    assert terrain.class_at([[-10.5, 0.0]])[0] == grid[0, 0]
    assert terrain.class_at([[-100.0, 50.0]])[0] == grid[0, 7]
    assert terrain.class_at([[100.0, -50.0]])[0] == grid[20, 0]


def test_terrain_validation() -> None:
    for bad in ([-0.1], [0.6, 0.4], [0.5, np.nan], [], [[0.1, 0.2]], "x"):
        with pytest.raises(ConfigError, match="classpercentages"):
            PourTerrain(SR_LIMITS, bad, np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"terrain\.type"):
        make_terrain("PerlinTerrain", SR_LIMITS, [0.2], np.random.default_rng(0))
    assert isinstance(make_terrain("PourTerrain", SR_LIMITS, [0.2], np.random.default_rng(0)), PourTerrain)


# --- persons -------------------------------------------------------------------------------------

def _area(seed: int = 1, num_vehicles: int = 2, **kwargs) -> BoxWithPersonsArea:
    area = BoxWithPersonsArea(num_vehicles, PersonsAreaParams(**kwargs), RandomStreams(seed))
    area.reset()
    return area


def test_persons_count_class_and_placement() -> None:
    counts = []
    for seed in range(1, 9):
        area = _area(seed)
        pos = area.persons_position_ned
        counts.append(area.num_persons)
        assert 5 <= area.num_persons <= 10
        assert np.all(area.persons_class == 0)  # the SR tasks put every person on class 0
        np.testing.assert_array_equal(area.terrain.class_at(pos), area.persons_class)
        assert np.all(np.abs(pos[:, :2]) <= 0.4 * 2 * D_SR)  # the central 80 %
        assert np.all(pos[:, 2] == 0.0)  # on the ground
        assert not area.found.any()
        assert area.persons_just_found().shape == (2, area.num_persons)
    assert len(set(counts)) > 1


def test_persons_on_requested_classes() -> None:
    area = _area(3, class_percentages=(0.2, 0.05), person_in_class_prob=(0.0, 1.0), num_persons_range=(8, 8))
    assert area.num_persons == 8
    assert np.all(area.persons_class == 2)
    np.testing.assert_array_equal(area.terrain.class_at(area.persons_position_ned), np.full(8, 2))


def test_person_class_probabilities() -> None:
    """QRSim's cumulative rule gives class c >= 1 with probability p_c and 0 with 1 - sum(p).
    20000 draws: binomial std <= 0.0036, tolerance 0.015 (> 4 sigma)."""
    area = BoxWithPersonsArea(1, PersonsAreaParams(class_percentages=(0.2, 0.05),
                                                   person_in_class_prob=(0.3, 0.2)), RandomStreams(4))
    draws = np.array([area.draw_person_class() for _ in range(20_000)])
    freq = np.bincount(draws, minlength=3) / draws.size
    np.testing.assert_allclose(freq, [0.5, 0.3, 0.2], atol=0.015)


def test_persons_reproducible_and_seed_dependent() -> None:
    a, b, c = _area(5), _area(5), _area(6)
    np.testing.assert_array_equal(a.persons_position_ned, b.persons_position_ned)
    np.testing.assert_array_equal(a.terrain.grid, b.terrain.grid)
    assert a.num_persons != c.num_persons or not np.allclose(a.persons_position_ned, c.persons_position_ned)
    before = a.persons_position_ned
    a.reset()
    assert a.persons_position_ned.shape != before.shape or not np.allclose(a.persons_position_ned, before)


def test_bounding_boxes() -> None:
    area = _area(1, person_size_m=0.5)
    area.set_persons([[1.0, 2.0]])
    bb = area.persons_bounding_boxes
    assert bb.shape == (1, 4, 3)
    expected = [[1.25, 1.75, 0], [1.25, 2.25, 0], [0.75, 1.75, 0], [0.75, 2.25, 0]]
    np.testing.assert_allclose(bb[0], expected)


def test_explicit_persons() -> None:
    area = _area(1)
    area.set_persons([[0.0, 0.0, -3.0], [10.0, 50.0, 0.0]], classes=[2, 0])
    np.testing.assert_array_equal(area.persons_position_ned, [[0, 0, 0], [10, 50, 0]])  # z to the ground
    np.testing.assert_array_equal(area.persons_class, [2, 0])
    area.set_persons([[1.5, -3.5]])
    assert area.persons_class[0] == area.terrain.class_at([[1.5, -3.5]])[0]
    with pytest.raises(ValueError, match="classes"):
        area.set_persons([[0.0, 0.0]], classes=[3])


def _states(positions, speeds=None) -> np.ndarray:
    x = np.zeros((len(positions), 13))
    x[:, 0:3] = positions
    if speeds is not None:
        x[:, 6] = speeds
    return x


def test_found_rule_at_the_area_rate() -> None:
    area = _area(1, num_vehicles=2)  # dt 1 s = 50 ticks
    area.set_persons([[0.0, 0.0], [10.0, 50.0]])
    # vehicle 0 exactly 5 m above person 0 and still; vehicle 1 over person 1 but moving at 0.2 m/s
    x = _states([[0.0, 0.0, -5.0], [10.0, 50.0, -1.0]], speeds=[0.0, 0.2])
    for k in range(1, 50):
        assert not area.step(k, x)
    assert not area.found.any()
    assert area.step(50, x)
    np.testing.assert_array_equal(area.found, [True, False])
    np.testing.assert_array_equal(area.persons_just_found(), [[True, False], [False, False]])
    np.testing.assert_array_equal(area.persons_just_found(), np.zeros((2, 2), bool))  # cleared
    # a found person is not flagged again; vehicle 1 slows to exactly the threshold and finds person 1
    x = _states([[0.0, 0.0, -5.0], [10.0, 50.0, -1.0]], speeds=[0.0, 0.1])
    area.step(100, x)
    np.testing.assert_array_equal(area.persons_just_found(), [[False, False], [False, True]])
    assert area.found.all()


def test_found_needs_3d_distance_and_a_valid_vehicle() -> None:
    area = _area(1, num_vehicles=3)
    area.set_persons([[0.0, 0.0]])
    x = _states([[0.0, 0.0, -5.01], [3.0, 4.0, -0.01], [0.0, 0.0, -1.0]])
    area.step(50, x, valid=[True, True, False])  # 5.01 m up: too far; 5.00001 m away: too far; invalid
    assert not area.found.any()
    x = _states([[0.0, 0.0, -5.0], [3.0, 4.0, 0.0], [0.0, 0.0, -1.0]])
    area.step(100, x, valid=[True, True, False])
    np.testing.assert_array_equal(area.persons_just_found(), [[True], [True], [False]])  # both credited


def test_finds_accumulate_until_read() -> None:
    area = _area(1, num_vehicles=1)
    area.set_persons([[0.0, 0.0], [20.0, 0.0]])
    area.step(50, _states([[0.0, 0.0, -2.0]]))
    area.step(100, _states([[20.0, 0.0, -2.0]]))
    np.testing.assert_array_equal(area.persons_just_found(), [[True, True]])


def test_non_finite_states_do_not_find() -> None:
    area = _area(1, num_vehicles=2)
    area.set_persons([[0.0, 0.0]])
    x = _states([[np.nan, 0.0, -2.0], [0.0, 0.0, -2.0]])
    x[1, 6] = np.inf
    area.step(50, x)
    assert not area.found.any()


def test_persons_area_validation() -> None:
    for kwargs, name in (
        (dict(person_in_class_prob=(0.7, 0.4)), "personinclassprob"),
        (dict(person_in_class_prob=(0.1,)), "personinclassprob"),
        (dict(person_in_class_prob=(-0.1, 0.0)), "personinclassprob"),
        (dict(class_percentages=(0.2, 0.0), person_in_class_prob=(0.0, 0.5)), "personinclassprob"),
        (dict(class_percentages=(0.9, 0.2)), "classpercentages"),
        (dict(num_persons_range=(5, 3)), "numpersonsrange"),
        (dict(num_persons_range=(1.5, 3)), "numpersonsrange"),
        (dict(person_size_m=0.0), "personsize"),
        (dict(found_distance_m=-1.0), "personfounddistancethreshold"),
        (dict(found_speed_mps=float("nan")), "personfoundspeedthreshold"),
        (dict(dt_s=0.03), "dt_s"),
        (dict(terrain_type="Flat"), r"terrain\.type"),
    ):
        with pytest.raises(ConfigError, match=name):
            BoxWithPersonsArea(1, PersonsAreaParams(**kwargs), RandomStreams(1))


def test_rejection_sampling_gives_up_with_a_clear_error() -> None:
    # class 1 covers one coarse cell (~25 m^2 of 60 000), one try per person: the draw misses it
    params = PersonsAreaParams(class_percentages=(0.0004,), person_in_class_prob=(1.0,),
                               max_placement_tries=1)
    area = BoxWithPersonsArea(1, params, RandomStreams(2))
    with pytest.raises(ConfigError, match="no cell of terrain class 1"):
        area.reset()

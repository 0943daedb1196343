"""Scenario files (config/*.yaml): every variant loads and runs, carries the parameters of spec section 5,
rejects every kind of bad input with one ScenarioError naming the file and the key path, and takes
overrides (the knobs a regression test fixes).

Expected values are spelled out here from the spec's tables (5.2-5.5, 3.x configs), not read back from
the files or the code.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state
from qrsim_ros.core.config.loader import ScenarioError, load_yaml
from qrsim_ros.core.config.scenario import Scenario, available_scenarios, load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.tasks.rules import scattered_start_states

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
CONFIG_FILES = sorted(CONFIG_DIR.glob("*.yaml"))
VARIANTS = [
    "keep_spot", "keep_spot_x10", "goto_waypoint", "keep_velocity",
    "cats_mouse_1a", "cats_mouse_1b", "cats_mouse_1c",
    "search_rescue_2a", "search_rescue_2b", "search_rescue_2c", "search_rescue_2d", "search_rescue_scene",
    "plume_3a", "plume_3b", "plume_3c", "plume_3d", "plume_3e", "plume_3f", "plume_3g",
    "retrieve_full", "retrieve_simplified", "team_search", "px4_sitl",
]
DEG45 = math.pi / 4
MASS_G_N = 1.68 * 9.81  # thrust of a 12-element state (spec 2.7): m g = 16.4808 N


def hover_actions(sim: Simulator) -> np.ndarray:
    """One action row per agent vehicle: hover throttle for attitude rows, zeros for set-point modes."""
    spec = sim.action_spec
    a = np.zeros((len(spec["vehicles"]), spec["width"]))
    for r, mode in enumerate(spec["modes"]):
        if mode == "attitude":
            a[r, :5] = [0.0, 0.0, 0.59, 0.0, 12.0]
    return a


# --- every file -----------------------------------------------------------------------------------------

def test_every_variant_has_its_file() -> None:
    assert sorted(p.stem for p in CONFIG_FILES) == sorted(VARIANTS)
    assert available_scenarios() == sorted(VARIANTS)


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.stem)
def test_file_loads_builds_and_steps(path: Path) -> None:
    sc = load_scenario(path, {"seed": 11})
    assert sc.name == path.stem and sc.source == str(path)
    assert sc.description
    sim = Simulator(sc)
    n = sc.num_vehicles
    assert sim.true_state().shape == (n, 13) and sim.estimated_state().shape == (n, 20)
    a = hover_actions(sim)
    for _ in range(3):
        r = sim.step(a)
        assert math.isfinite(r)
    assert sim.time == pytest.approx(3 * sc.task.dt_s, abs=1e-12)
    assert sim.valid.all() and not sim.done
    assert np.all(np.isfinite(sim.estimated_state()))


def test_yaml_uses_yaml12_booleans_only() -> None:
    """The files read the same in ROS 2's YAML 1.2 parser: booleans are true/false, never the YAML 1.1
    words (yes/no/on/off), which 1.2 reads as strings."""
    yaml11_words = {"yes", "no", "on", "off", "y", "n"}

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                assert isinstance(k, str), f"{where}: key {k!r} is not a string"
                walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")
        else:
            assert not (isinstance(node, str) and node.lower() in yaml11_words), f"{where}: {node!r}"

    for path in CONFIG_FILES:
        walk(load_yaml(path.read_text()), path.stem)


# --- spec values per variant ------------------------------------------------------------------------------

NOISY = {"dyn": 0.2, "sensors": True}
NOISELESS = {"dyn": 0.0, "sensors": False}
# (num_vehicles, task type, task dt, duration, limits or None, wind (w6, dir) or None, gps, platform,
#  turbulence W6 or None)
GENERIC_LIMITS = (-10.0, 20.0, -10.0, 10.0, -20.0, 0.0)
SPEC = {
    "keep_spot": (1, "keep_spot", 0.02, None, GENERIC_LIMITS, None, True, NOISY, 2.0),
    "keep_spot_x10": (10, "keep_spot_x10", 0.02, None, (-120.0, 120.0, -10.0, 10.0, -40.0, 0.0), None, True,
                      NOISY, 2.0),
    "goto_waypoint": (1, "goto_waypoint", 0.02, None, (-70.0, 70.0, -70.0, 70.0, -50.0, 0.0), None, True,
                      NOISY, 2.0),
    "keep_velocity": (1, "keep_velocity", 0.02, None, GENERIC_LIMITS, (2.5, DEG45), True, NOISY, 2.0),
    "cats_mouse_1a": (4, "cats_mouse", 1.0, 1000, (-140.0, 140.0, -140.0, 140.0, -40.0, 0.0), None, False,
                      NOISELESS, None),
    "cats_mouse_1b": (4, "cats_mouse", 1.0, 1000, (-140.0, 140.0, -140.0, 140.0, -40.0, 0.0), None, True,
                      NOISY, None),
    "cats_mouse_1c": (4, "cats_mouse", 1.0, 1000, (-140.0, 140.0, -140.0, 140.0, -40.0, 0.0), (1.0, None),
                      True, NOISY, 2.0),
    "search_rescue_2a": (1, "search_rescue", 1.0, 200, None, None, False, NOISELESS, None),
    "search_rescue_2b": (1, "search_rescue", 1.0, 200, None, None, True, NOISY, None),
    "search_rescue_2c": (3, "search_rescue", 1.0, 200, None, None, False, NOISELESS, None),
    "search_rescue_2d": (3, "search_rescue", 1.0, 200, None, (2.0, DEG45), True, NOISY, 2.0),
    # beyond QRSim: 2B's noisy platform, two vehicles, in a 3-D scene (docs/SCENE.md)
    "search_rescue_scene": (2, "search_rescue", 1.0, 200, None, None, True, NOISY, None),
    "plume_3a": (1, "plume", 1.0, 1000, None, None, False, NOISELESS, None),
    "plume_3b": (1, "plume", 1.0, 1000, None, (3.0, None), True, NOISY, 2.0),
    "plume_3c": (1, "plume", 1.0, 1000, None, (2.0, None), True, NOISY, 2.0),
    "plume_3d": (3, "plume", 1.0, 1000, None, (3.0, None), True, NOISY, 2.0),
    "plume_3e": (1, "plume", 1.0, 1000, None, (1.0, None), True, NOISY, 2.0),
    "plume_3f": (1, "plume", 1.0, 1000, None, (3.0, None), True, NOISY, 2.0),
    "plume_3g": (3, "plume", 1.0, 1000, None, (3.0, None), True, NOISY, 2.0),
}


@pytest.mark.parametrize("name", sorted(SPEC))  # QRSim's own variants (retrieve: test_retrieve_mission)
def test_variant_parameters_match_spec(name: str) -> None:
    n, task_type, dt, duration, limits, wind, gps, platform, turbulence = SPEC[name]
    sc = load_scenario(name)
    assert sc.seed == 0  # every shipped QRSim task: seed from the clock (spec 5.1)
    assert sc.num_vehicles == n
    assert sc.task.type == task_type
    assert sc.task.dt_s == dt
    if duration is not None:
        assert sc.task.duration_steps == duration
    if limits is not None:
        assert sc.area_limits_ned == pytest.approx(limits)
    if wind is None:
        assert not sc.wind.on
    else:
        assert sc.wind.on and sc.wind.w6_mps == wind[0]
        if wind[1] is None:
            assert sc.wind.direction_rad is None
        else:
            assert sc.wind.direction_rad == pytest.approx(wind[1], abs=1e-15)
    assert sc.gps.on is gps
    v = sc.vehicle
    assert v.dyn_noise == (platform["dyn"],) * 6
    assert v.ahars.on is platform["sensors"] and v.gps_receiver.on is platform["sensors"]
    if turbulence is None:
        assert not v.turbulence.on
    else:
        assert v.turbulence.on and v.turbulence.w6_mps == turbulence and v.turbulence.direction_rad is None
    # every platform config of spec 3: collision distance 2 m, velocity limits 15 m/s, rate limits 3 rad/s
    assert (v.collision_distance_m, v.velocity_limit_mps, v.rate_limit_rads) == (2.0, 15.0, 3.0)


@pytest.mark.parametrize("name, num_vehicles, half_width_m, start_z_m",
                         [("search_rescue_2a", 1, 122.474, -45.0), ("search_rescue_2b", 1, 122.474, -25.0),
                          ("search_rescue_2c", 3, 212.132, -45.0), ("search_rescue_2d", 3, 212.132, -25.0)])
def test_search_rescue_area_and_placement(name: str, num_vehicles: int, half_width_m: float,
                                          start_z_m: float) -> None:
    """Spec 5.3: D = 122.474 m (1 UAV) / 212.132 m (3 UAVs), 5-10 persons, found within 5 m below
    0.1 m/s; UAVs in the central 90 % at the start height, headings in [0, pi), camera on at 1 Hz."""
    sc = load_scenario(name, {"seed": 3})
    d = half_width_m
    assert sc.area_limits_ned == pytest.approx((-d, d, -d, d, -80.0, 0.0), abs=1e-3)
    a = sc.area
    assert (a.type, a.dt_s, a.num_persons_range, a.person_size_m) == ("box_with_persons", 1.0, (5, 10), 0.5)
    assert (a.found_distance_m, a.found_speed_mps) == (5.0, 0.1)
    assert a.class_percentages == (0.2, 0.05) and a.person_in_class_prob == (0.0, 0.0)
    assert sc.task.start_z_ned_m == start_z_m
    cam = sc.vehicle.camera
    assert cam.on and cam.dt_s == 1.0 and cam.f_px == (2280.0, 2280.0) and cam.c_px == (640.0, 480.0)
    assert sc.control_modes() == ("velocity",) * num_vehicles
    sim = Simulator(sc)
    x = sim.true_state()
    assert np.all(np.abs(x[:, 0:2]) <= 0.45 * 2 * d)
    np.testing.assert_array_equal(x[:, 2], start_z_m)
    assert np.all((x[:, 5] >= 0) & (x[:, 5] < math.pi))
    assert 5 <= sim.area.num_persons <= 10
    assert np.all(np.abs(sim.area.persons_position_ned[:, 0:2]) <= 0.4 * 2 * d)
    assert sim.action_spec["width"] == 3


@pytest.mark.parametrize("name", ["search_rescue_2c", "plume_3g"])
def test_scattered_vehicles_start_two_collision_distances_apart(name: str) -> None:
    """Random placement (search and rescue, plume): no two vehicles start closer than 2 x the collision
    distance (QRSim's plain uniform draw put two within 2 m, both invalid at the first tick, about once
    in 500 episodes of plume_3g); a draw that needs no redraw is the plain one. Eight vehicles in a 30 m
    square make close draws common."""
    overrides: dict[str, Any] = {"num_vehicles": 8,
                                 "area": {"limits_ned": [-15.0, 15.0, -15.0, 15.0, -80.0, 0.0]}}
    if name.startswith("search_rescue"):
        overrides["area"]["num_persons_range"] = [1, 1]
    sc = load_scenario(name, overrides)
    separation_m = 2 * sc.vehicle.collision_distance_m
    pairs = np.triu_indices(8, 1)
    redrawn = 0
    for seed in range(40):
        x = scattered_start_states(sc, -10.0, np.random.default_rng(seed))
        rng = np.random.default_rng(seed)
        plain = np.column_stack([(rng.random(8) - 0.5) * 27.0, (rng.random(8) - 0.5) * 27.0])
        d = np.hypot(*(x[:, None, 0:2] - x[None, :, 0:2]).transpose(2, 0, 1))[pairs]
        assert d.min() >= separation_m, (seed, d.min())
        assert np.all(np.abs(x[:, 0:2]) <= 13.5) and np.all(x[:, 2] == -10.0)
        # vehicles up to the first one too close to an earlier one are the plain draw's
        close = [i for i in range(1, 8) if np.hypot(*(plain[:i] - plain[i]).T).min() < separation_m]
        first = close[0] if close else 8
        np.testing.assert_array_equal(x[:first, 0:2], plain[:first])
        redrawn += bool(close)
    assert redrawn >= 10, redrawn  # the redraw is exercised
    sim = Simulator.from_scenario(name, {**overrides, "seed": 5})
    assert sim.fleet.valid.all()


def test_scattered_placement_that_cannot_fit_names_the_cause() -> None:
    with pytest.raises(ValueError, match=r"could not place vehicle .* area_limits_ned too small"):
        Simulator.from_scenario("plume_3g", {"seed": 1, "num_vehicles": 30, "area": {
            "limits_ned": [-5.0, 5.0, -5.0, 5.0, -80.0, 0.0]}})


@pytest.mark.parametrize("name, kind, num_sources, m, k, mu",
                         [("plume_3a", "gaussian", None, 100, 1, None),
                          ("plume_3b", "gaussian_dispersion", (1, 1), 100, 1, None),
                          ("plume_3c", "gaussian_dispersion", (1, 5), 100, 1, None),
                          ("plume_3d", "gaussian_dispersion", (1, 5), 100, 1, None),
                          ("plume_3e", "gaussian_puff", (1, 1), 25, 3000, 5.0),
                          ("plume_3f", "gaussian_puff", (1, 4), 100, 500, 5.0),
                          ("plume_3g", "gaussian_puff", (1, 4), 100, 500, 5.0)])
def test_plume_variant_parameters(name: str, kind: str, num_sources: tuple[int, int] | None, m: int, k: int,
                                  mu: float | None) -> None:
    """Spec 5.4: model, sources, M x K, a = 0.33, b = 0.86, Q in [0.1, 2.5], start at z = -10 in
    [-140 140 -140 140 -80 0]; plume sensor noisy (dt 0.5, sigma 0.01) or noiseless (dt 0.02, off)."""
    sc = load_scenario(name)
    p = sc.plume
    assert p is not None and p.type == kind
    assert (sc.task.num_reference_locations, sc.task.samples_per_location) == (m, k)
    assert sc.task.start_z_ned_m == -10.0
    assert sc.area_limits_ned == (-140.0, 140.0, -140.0, 140.0, -80.0, 0.0)
    assert sc.control_modes() == ("velocity",) * sc.num_vehicles
    if kind == "gaussian":
        assert p.sigma_range_m == (3.0, 20.0)
    else:
        assert p.num_sources_range == num_sources
        assert (p.a, p.b, p.q_range) == (0.33, 0.86, (0.1, 2.5))
    if mu is not None:
        assert p.mu_s == mu and p.area_dt_s == 1.0
    ps = sc.vehicle.plume_sensor
    if sc.vehicle.ahars.on:
        assert (ps.on, ps.dt_s, ps.sigma) == (True, 0.5, 0.01)
    else:
        assert (ps.on, ps.dt_s) == (False, 0.02)


def test_generic_and_cats_mouse_task_values() -> None:
    """Spec 5.2 and 5.5 constants."""
    wp = load_scenario("goto_waypoint").task
    assert wp.waypoint_ned == (-50.0, -50.0, -10.0) and wp.start_z_ned_m == -10.0
    assert load_scenario("keep_velocity").task.target_velocity_ned == (0.0, 0.0, 0.0)
    sim = Simulator.from_scenario("keep_spot_x10", {"seed": 2})
    expected_x = [-100.0 + 20.0 * i for i in range(1, 11)]
    np.testing.assert_array_equal(sim.true_state()[:, 0], expected_x)
    np.testing.assert_array_equal(sim.true_state()[:, 1:3], [[0.0, -10.0]] * 10)
    cm = load_scenario("cats_mouse_1a")
    t = cm.task
    assert (t.num_cats, t.cat_mouse_distance_range_m, t.min_inter_cat_distance_m) == (3, (14.0, 20.0), 22.0)
    assert (t.mouse_speed_factor, t.flight_z_ned_m) == (1.0, -10.0)
    assert cm.control_modes() == ("velocity_height",) * 4
    sim = Simulator(load_scenario("cats_mouse_1a", {"seed": 9}))
    x = sim.true_state()
    np.testing.assert_array_equal(x[3, 0:3], [0.0, 0.0, -10.0])  # the mouse
    d_mouse = np.linalg.norm(x[:3, 0:2] - x[3, 0:2], axis=1)
    assert np.all((d_mouse >= 14.0) & (d_mouse <= 20.0))
    for i in range(3):
        for j in range(i):
            assert np.linalg.norm(x[i, 0:3] - x[j, 0:3]) >= 22.0
    assert sim.action_spec["vehicles"] == [0, 1, 2] and sim.action_spec["width"] == 2


def test_search_rescue_2b_documented_wind_is_an_option() -> None:
    """QRSim documents 2B as windy but its code has the wind off (spec 10.3): off by default, one
    override turns on the task's own setting (W6 0.5 m/s from 45 deg)."""
    assert not load_scenario("search_rescue_2b").wind.on
    sim = Simulator.from_scenario("search_rescue_2b", {"seed": 4, "wind": {"on": True}})
    assert sim.wind.on and sim.wind.w6_mps == 0.5 and sim.wind.direction_rad == pytest.approx(DEG45)
    # the wind acts: at 25 m it blows towards the south-west (from 45 deg), shear factor > 1
    v = sim.wind.velocity_ned(np.array([25.0]))[0]
    assert v[0] < -0.35 and v[1] < -0.35 and v[0] == pytest.approx(v[1])


# --- bad input ----------------------------------------------------------------------------------------------

def write_scenario(tmp_path: Path, base: str, changes: dict[str, Any], name: str = "bad.yaml") -> Path:
    """A copy of config/<base>.yaml with ``changes`` (dotted key -> value; value None deletes) applied."""
    data = load_yaml((CONFIG_DIR / f"{base}.yaml").read_text())
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


BAD_INPUT = [
    # (base file, changes, substrings the message must contain)
    ("search_rescue_2a", {"sed": 3}, ["sed", "unknown key", "seed"]),
    ("search_rescue_2a", {"vehicle.ahars.gyroscope.sigmaa": 0.1},
     ["vehicle.ahars.gyroscope.sigmaa", "unknown key", "sigma_rads"]),
    ("search_rescue_2a", {"task.durations_steps": 10}, ["task.durations_steps", "duration_steps"]),
    ("search_rescue_2a", {"vehicle.gps_receiver.r_sigma_m": "small"},
     ["vehicle.gps_receiver.r_sigma_m", "expected a number", "'small'"]),
    ("search_rescue_2a", {"area.num_persons_range": 5}, ["area.num_persons_range", "expected a list"]),
    ("search_rescue_2a", {"num_vehicles": 1.5}, ["num_vehicles", "expected an integer", "1.5"]),
    ("search_rescue_2a", {"task.duration_steps": 200.0}, ["task.duration_steps", "expected an integer"]),
    ("search_rescue_2a", {"seed": True}, ["seed", "expected an integer"]),
    ("search_rescue_2a", {"wind.on": "yes"}, ["wind.on", "true or false", "'yes'"]),
    ("search_rescue_2a", {"area.limits_ned": [1.0, 2.0, 3.0]}, ["area.limits_ned", "6 values"]),
    ("search_rescue_2a", {"vehicle.ahars.gyroscope.sigma_rads": -0.1},
     ["vehicle.ahars.gyroscope", "sigma_rads=-0.1", ">= 0"]),
    ("search_rescue_2a", {"vehicle.gps_receiver.r_sigma_m": -1.0}, ["vehicle.gps_receiver", "r_sigma_m"]),
    ("search_rescue_2a", {"task.dt_s": 0.03}, ["task.dt_s=0.03", "multiple of 0.02"]),
    ("search_rescue_2a", {"vehicle.plume_sensor.dt_s": 0.05}, ["vehicle.plume_sensor", "dt_s=0.05"]),
    ("search_rescue_2a", {"task.type": "fly"}, ["task.type='fly'", "search_rescue", "plume"]),
    ("search_rescue_2a", {"seed": -1}, ["seed=-1", ">= 0"]),
    ("search_rescue_2a", {"num_vehicles": 0}, ["num_vehicles=0"]),
    ("search_rescue_2a", {"area.limits_ned": [10.0, -10.0, -10.0, 10.0, -80.0, 0.0]},
     ["area.limits_ned", "min < max"]),
    ("search_rescue_2a", {"area.type": "box"}, ["search_rescue", "box_with_persons"]),
    ("search_rescue_2a", {"area.person_in_class_prob": [0.7, 0.7]}, ["area", "personinclassprob"]),
    ("search_rescue_2a", {"vehicle.control": "fly"}, ["vehicle.control='fly'", "waypoint"]),
    ("search_rescue_2a", {"vehicle.control": ["velocity", "velocity"]}, ["vehicle.control", "2 modes"]),
    ("search_rescue_2a", {"vehicle.initial_states": [[0.0, 0.0, -10.0, 0.0, 0.0]]},
     ["vehicle.initial_states[0]", "5 values"]),
    ("search_rescue_2a", {"vehicle.initial_states": [[0.0, 0.0, -10.0, 0, 0, 0], [5.0, 0.0, -10.0, 0, 0, 0]]},
     ["vehicle.initial_states", "2 rows", "1 vehicles"]),
    ("keep_spot", {"area.persons_ned": [[0.0, 0.0, 0.0]]}, ["area.persons_ned", "box_with_persons"]),
    ("cats_mouse_1a", {"num_vehicles": 3}, ["num_vehicles=3", "num_cats"]),
    ("cats_mouse_1a", {"vehicle.control": "velocity"}, ["vehicle.control", "mouse", "velocity_height"]),
    ("plume_3b", {"wind.on": False}, ["gaussian_dispersion", "wind.on"]),
    ("plume_3b", {"plume.q_range": [2.5, 0.1]}, ["plume.q_range", "min <= max"]),
    ("plume_3b", {"plume.sources_ned": [[0.0, 0.0, -10.0]]}, ["plume.sources_ned", "emission_rates"]),
    ("plume_3b", {"plume.sources_ned": [[0.0, 0.0, -10.0]], "plume.emission_rates": [1.0, 2.0]},
     ["plume.emission_rates", "2 values", "1 sources"]),
    ("plume_3e", {"plume.sources_ned": [[0.0, 0.0, -10.0]], "plume.emission_rates": [1.0]},
     ["plume.emission_rates", "gaussian_puff"]),
    ("plume_3a", {"plume": None}, ["plume"]),
]


@pytest.mark.parametrize("base, changes, expected", BAD_INPUT,
                         ids=[",".join(c) for _, c, _ in BAD_INPUT])
def test_bad_input_gives_one_error_naming_file_and_key(tmp_path: Path, base: str, changes: dict[str, Any],
                                                        expected: list[str]) -> None:
    path = write_scenario(tmp_path, base, changes)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:"), msg
    for part in expected:
        assert part in msg, f"{part!r} not in {msg!r}"
    assert msg.count(str(path)) == 1, msg
    assert not re.search(r"(\b[\w.\[\]]+): \1: ", msg), f"key path repeated: {msg}"


def test_bad_override_names_the_file_and_key() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario("search_rescue_2a", {"task": {"duration_steps": "long"}})
    msg = str(info.value)
    assert msg.startswith(str(CONFIG_DIR / "search_rescue_2a.yaml"))
    assert "task.duration_steps: expected an integer, got 'long'" in msg
    with pytest.raises(ScenarioError, match=r"wind\.w6: unknown key"):
        Simulator.from_scenario("keep_velocity", {"wind": {"w6": 1.0}})


def test_malformed_yaml_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("seed: 0\nnum_vehicles: 1\ntask: type: keep_spot\n")  # a mapping value inline: line 3
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: line 3, column ") and "malformed YAML" in msg


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- task\n- seed\n")
    with pytest.raises(ScenarioError, match="must be a mapping"):
        load_scenario(path)


def test_missing_file_and_unknown_name(tmp_path: Path) -> None:
    missing = tmp_path / "nothing_here.yaml"
    with pytest.raises(ScenarioError, match="scenario file not found") as info:
        load_scenario(missing)
    assert str(missing) in str(info.value)
    with pytest.raises(ScenarioError) as info:
        Simulator.from_scenario("search_rescue_9z")
    msg = str(info.value)
    assert "unknown scenario 'search_rescue_9z'" in msg
    for name in VARIANTS:
        assert name in msg


def test_initial_state_outside_the_area_names_the_key() -> None:
    with pytest.raises(ScenarioError, match=r"keep_spot\.yaml: vehicle\.initial_states: .*outside"):
        Simulator.from_scenario("keep_spot", {"vehicle": {"initial_states": [[50.0, 0.0, -10.0, 0, 0, 0]]}})


# --- overrides ----------------------------------------------------------------------------------------------

def test_seed_override() -> None:
    sc = load_scenario("keep_spot", {"seed": 1234})
    assert isinstance(sc, Scenario) and sc.seed == 1234
    runs = []
    for seed in (1234, 1234, 1235):
        sim = Simulator.from_scenario("keep_spot", {"seed": seed, "task": {"duration_steps": 20}})
        assert sim.seed_entropy == seed
        for _ in range(10):
            sim.step(hover_actions(sim))
        runs.append(sim.estimated_state())
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_num_vehicles_override_resizes_the_search_area() -> None:
    """SR's area grows with the number of UAVs (D = sqrt(200*25*3*N), spec 5.3): N = 2 gives 173.205 m."""
    sim = Simulator.from_scenario("search_rescue_2a", {"seed": 5, "num_vehicles": 2})
    d = 173.20508  # sqrt(30000)
    np.testing.assert_allclose(sim.area.limits, [-d, d, -d, d, -80.0, 0.0], atol=1e-5)
    assert sim.true_state().shape == (2, 13)
    assert np.all(np.abs(sim.true_state()[:, 0:2]) <= 0.9 * d)
    sim.step(np.zeros((2, 3)))
    with pytest.raises(ValueError):
        sim.step(np.zeros((1, 3)))


def test_number_of_cats_override() -> None:
    sim = Simulator.from_scenario("cats_mouse_1b", {"seed": 4, "num_vehicles": 3, "task": {"num_cats": 2}})
    assert sim.action_spec["vehicles"] == [0, 1]
    r = sim.step(np.zeros((2, 2)))
    x = sim.true_state()
    assert r == pytest.approx(-float(np.sum((x[0:2, 0:2] - x[2, 0:2]) ** 2)), rel=1e-12)


def test_initial_states_override() -> None:
    sim = Simulator.from_scenario("keep_spot", {"seed": 2, "vehicle": {
        "initial_states": [[1.0, 2.0, -5.0, 0.01, -0.02, 0.5, 0.3, 0.0, -0.1, 0.0, 0.0, 0.05]]}})
    x = sim.true_state()[0]
    np.testing.assert_array_equal(x[:12], [1.0, 2.0, -5.0, 0.01, -0.02, 0.5, 0.3, 0.0, -0.1, 0.0, 0.0, 0.05])
    assert x[12] == pytest.approx(MASS_G_N, abs=1e-9)


def test_persons_override() -> None:
    persons = [[10.0, 20.0, 0.0], [-30.0, 5.0, 0.0], [0.0, -40.0, 0.0]]
    sim = Simulator.from_scenario("search_rescue_2a", {"seed": 5, "area": {"persons_ned": persons}})
    np.testing.assert_array_equal(sim.area.persons_position_ned, persons)
    sim.reset()
    np.testing.assert_array_equal(sim.area.persons_position_ned, persons)
    assert not sim.area.found.any()


def test_plume_sources_rates_and_wind_override() -> None:
    """A fixed dispersion source with a fixed wind gives the concentration of the formula of spec 4.4
    evaluated here: c = Q/(pi u D) [exp(-(z - zs)^2/D) + exp(-(z + zs)^2/D)], D = 2 a x'^b, on the
    plume axis; u = the mean wind at 6 m (spec 4.1 shear)."""
    src, q = [10.0, 20.0, -15.0], 1.5
    sim = Simulator.from_scenario("plume_3b", {
        "seed": 8,
        "plume": {"sources_ned": [src], "emission_rates": [q]},
        "wind": {"w6_mps": 2.0, "direction_rad": 0.0},  # from the north: the plume goes south (-x)
    })
    np.testing.assert_array_equal(sim.plume.sources_ned, [src])
    np.testing.assert_array_equal(sim.plume.emission_rates, [q])
    assert sim.wind.w6_mps == 2.0 and sim.wind.direction_rad == 0.0
    z0_ft = 0.15
    u = 2.0 * math.log((6.0 / 0.3048) / z0_ft) / math.log(20.0 / z0_ft)
    x_down = 30.0
    point = [src[0] - x_down, src[1], src[2]]
    d = 2 * 0.33 * x_down**0.86
    expected = q / (math.pi * u * d) * (1.0 + math.exp(-((point[2] + src[2]) ** 2) / d))
    assert sim.plume.concentration(np.array([point]))[0] == pytest.approx(expected, rel=1e-9)
    # upwind: nothing
    assert sim.plume.concentration(np.array([[src[0] + 10.0, src[1], src[2]]]))[0] == 0.0


def test_gaussian_and_puff_source_overrides() -> None:
    sim = Simulator.from_scenario("plume_3a", {"seed": 8, "plume": {"sources_ned": [[5.0, -6.0, -20.0]],
                                                                     "emission_rates": [2.0]}})
    np.testing.assert_array_equal(sim.plume.sources_ned, [[5.0, -6.0, -20.0]])
    assert sim.plume.concentration(np.array([[5.0, -6.0, -20.0]]))[0] == 2.0  # the peak Q0
    sim = Simulator.from_scenario("plume_3e", {"seed": 8, "task": {"samples_per_location": 5},
                                               "plume": {"sources_ned": [[0.0, 0.0, -20.0]]}})
    np.testing.assert_array_equal(sim.plume.sources_ned, [[0.0, 0.0, -20.0]])
    assert sim.plume_reference_samples.shape == (5, 25)


def test_wind_override_changes_the_air_velocity() -> None:
    """keep_velocity's wind, moved to 3 m/s from the east (pi/2): at 6 m it blows towards the west
    at 3 * ln(19.685/0.15)/ln(20/0.15) = 2.9903 m/s (spec 4.1)."""
    sim = Simulator.from_scenario("keep_velocity",
                                  {"seed": 1, "wind": {"w6_mps": 3.0, "direction_rad": math.pi / 2}})
    v = sim.wind.velocity_ned(np.array([6.0]))[0]
    speed = 3.0 * math.log((6.0 / 0.3048) / 0.15) / math.log(20.0 / 0.15)
    np.testing.assert_allclose(v, [0.0, -speed, 0.0], atol=1e-12)


def test_duration_override_ends_the_episode() -> None:
    sim = Simulator.from_scenario("search_rescue_2a", {"seed": 5, "task": {"duration_steps": 3}})
    for _ in range(2):
        sim.step(np.zeros((1, 3)))
        assert not sim.done
    sim.step(np.zeros((1, 3)))
    assert sim.done and sim.done_reason == "time_limit" and sim.time == pytest.approx(3.0)
    with pytest.raises(RuntimeError):
        sim.step(np.zeros((1, 3)))


def test_sensor_switches_override() -> None:
    """With the sensors off (QRSim's noiseless base classes) eX is the true state sampled at the sensor
    rates: after 0.2 s (a GPS tick) position, attitude and height are exact; with them on, they are not."""
    off = {"seed": 6, "gps": {"on": False},
           "vehicle": {"dyn_noise": [0.0] * 6, "ahars": {"on": False}, "gps_receiver": {"on": False},
                       "turbulence": {"on": False}}}
    on = {"seed": 6, "vehicle": {"dyn_noise": [0.0] * 6, "turbulence": {"on": False}}}
    results = []
    for ov in (off, on):
        sim = Simulator.from_scenario("keep_spot", ov)
        for _ in range(10):
            sim.step([[0.02, -0.01, 0.6, 0.1, 12.0]])
        x, ex = sim.true_state()[0], sim.estimated_state()[0]
        results.append((x, ex))
    x, ex = results[0]
    np.testing.assert_array_equal(ex[0:3], x[0:3])
    np.testing.assert_array_equal(ex[3:6], x[3:6])
    np.testing.assert_array_equal(ex[9:12], x[9:12])
    assert ex[16] == -x[2]
    v_ned = body_to_ned(dcm_from_state(x[None]), x[None, 6:9])[0]
    np.testing.assert_allclose(ex[17:19], v_ned[:2], atol=1e-12)
    x_on, ex_on = results[1]
    np.testing.assert_array_equal(x_on, x)  # same dynamics: no noise, no wind, same controls
    assert not np.array_equal(ex_on[0:3], x_on[0:3]) and not np.array_equal(ex_on[3:6], x_on[3:6])

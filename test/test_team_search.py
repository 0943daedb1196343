"""The team_search scenario (config/team_search.yaml, docs/TEAMS.md) in process: the team takes off
from its base on a grid (``task.placement: base``), the generated obstacles keep clear of it, 1 to 50
vehicles build and fly, a lost vehicle costs the penalty once and the team goes on, and the episode's
result scores vehicles lost and messages sent like the referee's TaskStatus."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.policies.episode import run_episode

BASE_NE = (-130.0, -130.0)  # config/team_search.yaml, bases[0]


@pytest.mark.parametrize("n", [1, 4, 9, 50])
def test_the_team_starts_on_a_grid_around_its_base(n: int) -> None:
    sim = Simulator.from_scenario("team_search", {"num_vehicles": n, "seed": 2})
    x = sim.true_state()
    side = math.ceil(math.sqrt(n))
    # the grid's geometry from its definition: rows and columns 4 m apart, centred on the base
    expected_n = BASE_NE[0] + 4.0 * (np.arange(n) // side - (side - 1) / 2)
    expected_e = BASE_NE[1] + 4.0 * (np.arange(n) % side - (side - 1) / 2)
    np.testing.assert_allclose(x[:, 0], expected_n, atol=1e-12)
    np.testing.assert_allclose(x[:, 1], expected_e, atol=1e-12)
    assert np.all(x[:, 2] == -20.0) and np.all(sim.valid)
    if n > 1:  # nobody starts on another's spot, and the nearest neighbour is exactly the spacing away
        d = np.hypot(x[:, None, 0] - x[None, :, 0], x[:, None, 1] - x[None, :, 1]) + np.eye(n) * 1e9
        assert d.min() == pytest.approx(4.0)
    # the obstacles keep 30 m (plus their footprint) clear of the base: none within 30 m of it
    centres = np.array([ob.center_ne_m for ob in sim.world.scene.obstacles])
    assert len(centres) == 60
    assert np.hypot(*(centres - np.array(BASE_NE)).T).min() > 30.0
    assert not sim.world.scene.collides(x).any()


def test_fifty_vehicles_fly_and_talk() -> None:
    sim = Simulator.from_scenario("team_search", {"num_vehicles": 50, "seed": 4})
    a = np.zeros((50, sim.action_spec["width"]))
    a[:, 0] = 1.0  # north at 1 m/s: the grid stays 4 m apart
    for k in range(10):
        for i in range(50):
            sim.send(i, -1, f"{i}:{k}".encode())
        sim.step(a)
    assert np.all(sim.valid)
    heard = [sim.receive(i) for i in range(50)]
    # every other vehicle is within 100 m (the grid spans 28 m x 28 m) and the base area is clear: each
    # vehicle heard all 49 others' broadcasts of every step but the last ones still in flight
    assert all(len({p.source for p in h}) == 49 for h in heard)
    assert int(sim.comms.sends.sum()) == 500


def test_a_lost_vehicle_costs_the_penalty_once_and_the_team_goes_on() -> None:
    sim = Simulator.from_scenario("team_search",
                                  {"num_vehicles": 3, "seed": 5, "task": {"duration_steps": 80}})
    a = np.zeros((3, sim.action_spec["width"]))
    a[0, 1] = -3.0  # vehicle 0 flies west out of the area (20 m away): lost after about 7 s
    rewards = [sim.step(a) for _ in range(80)]
    assert not sim.valid[0] and sim.valid[1:].all()
    assert sim.done_reason == "time_limit"  # not "invalid_vehicle": the search goes on
    penalties = [r for r in rewards if r < -100]
    assert len(penalties) == 1 and penalties[0] == pytest.approx(-1000.0 - 1.0 / 80)


def test_run_episode_scores_vehicles_lost_and_messages_sent() -> None:
    sim = Simulator.from_scenario("team_search",
                                  {"num_vehicles": 2, "seed": 6, "task": {"duration_steps": 5}})
    result = run_episode(sim, "hover")
    assert result.vehicles_lost == 0 and result.messages_sent == 0
    assert result.persons_total is not None and result.persons_total >= 5


def _load(**task: object) -> None:
    load_scenario("team_search", {"task": task})


def test_bad_placements_give_one_clear_error() -> None:
    with pytest.raises(ScenarioError, match=r"task\.placement='corner' must be one of random, base"):
        _load(placement="corner")
    with pytest.raises(ScenarioError, match=r"base_spacing_m=0\.0 must be > 0"):
        _load(base_spacing_m=0.0)
    centre = [{"position_ned_m": [0.0, 0.0, 0.0], "radius_m": 20.0}]
    # 50 vehicles 6 m apart: the grid's corner is 3.5 * 6 * sqrt(2) = 29.7 m out, + 0.4 m of vehicle > 30 m
    with pytest.raises(ScenarioError, match=r"beyond scene\.generate\.keep_out_m=30"):
        load_scenario("team_search", {"num_vehicles": 50, "task": {"base_spacing_m": 6.0}, "bases": centre})
    load_scenario("team_search", {"num_vehicles": 50, "task": {"base_spacing_m": 5.9}, "bases": centre})
    with pytest.raises(ScenarioError, match="leave the area"):
        load_scenario("team_search", {"num_vehicles": 50, "task": {"base_spacing_m": 8.0},
                                      "scene": {"generate": {"keep_out_m": 100.0}}})
    with pytest.raises(ScenarioError, match="needs a charging base"):
        load_scenario("team_search", {"bases": []})
    with pytest.raises(ScenarioError, match="placement: base is for search_rescue"):
        load_scenario("keep_spot", {"task": {"placement": "base"}, "bases": [{"position_ned_m": [0, 0, 0]}]})


def test_auto_flies_the_team_search_on_a_team_scenario_only() -> None:
    from qrsim_ros.policies import BUILTIN_POLICIES, is_team, make_factory

    assert is_team(load_scenario("team_search"))
    assert not is_team(load_scenario("search_rescue_2a"))
    assert not is_team(load_scenario("team_search", {"comms": {"on": False}}))
    team = load_scenario("team_search")
    assert make_factory("auto", team.task.type, team=is_team(team)) is BUILTIN_POLICIES["team-search"]
    assert make_factory("auto", "search_rescue") is BUILTIN_POLICIES["search-pattern"]

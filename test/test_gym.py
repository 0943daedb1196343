"""Tests of the Gymnasium environments (qrsim_ros/gym/): registration, gymnasium's env checker, spaces,
seeding and the termination/truncation mapping."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

import qrsim_ros.gym  # noqa: E402,F401  (registers the ids)
from qrsim_ros.gym import ENV_IDS, INVALID_SENTINEL, SearchRescueEnv  # noqa: E402
from qrsim_ros.policies import make_policy  # noqa: E402

SHORT = {"task": {"duration_steps": 20}}


def checked(env: gymnasium.Env) -> list[str]:
    """Run gymnasium's checker; return the warnings it gave other than the documented infinite bounds."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    return [str(w.message) for w in caught if "infinity" not in str(w.message)]


@pytest.mark.parametrize(("env_id", "scenario"), [
    ("qrsim_ros/SearchRescue-v0", None),
    ("qrsim_ros/SearchRescue-v0", "search_rescue_2d"),
    ("qrsim_ros/Plume-v0", None),
    ("qrsim_ros/CatsMouse-v0", "cats_mouse_1c"),
    ("qrsim_ros/KeepSpot-v0", None),
    ("qrsim_ros/GotoWaypoint-v0", None),
    ("qrsim_ros/KeepVelocity-v0", None),
])
def test_env_checker_passes(env_id: str, scenario: str | None) -> None:
    kwargs = {"overrides": SHORT} if scenario is None else {"scenario": scenario, "overrides": SHORT}
    env = gymnasium.make(env_id, **kwargs)
    assert checked(env) == []
    env.close()


def test_every_id_is_registered_and_makes() -> None:
    for env_id in ENV_IDS:
        env = gymnasium.make(env_id)
        obs, info = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        assert info["done_reason"] == "" and info["sim_seed"] == 1  # gym seed s -> simulator seed s + 1
        env.close()


def test_spaces_follow_the_scenario() -> None:
    sr = gymnasium.make("qrsim_ros/SearchRescue-v0", scenario="search_rescue_2c")  # 3 UAVs, velocity
    assert sr.action_space.shape == (3, 3)
    v = np.float32(3 * np.sqrt(2))  # per body component 3 m/s: the NED bounding box (mode_bounds)
    np.testing.assert_array_equal(sr.action_space.high, np.tile(np.float32([v, v, 3.0]), (3, 1)))
    np.testing.assert_array_equal(sr.action_space.low, -sr.action_space.high)
    obs_space = sr.observation_space
    assert obs_space["estimated_state"].shape == (3, 20) and obs_space["valid"].n == 3
    assert obs_space["camera_max_llkd_ne"].shape == (3, 2)
    assert obs_space["time_s"].high[0] == 200.0  # 200 steps of 1 s
    cats = gymnasium.make("qrsim_ros/CatsMouse-v0")
    assert cats.action_space.shape == (3, 2)  # three cats, (vn, ve); the mouse is not controlled
    assert cats.observation_space["estimated_state"].shape == (4, 20)
    keep = gymnasium.make("qrsim_ros/KeepSpot-v0", scenario="keep_spot_x10")
    assert keep.action_space.shape == (10, 5)
    np.testing.assert_array_equal(keep.action_space.low[0], np.float32([-0.9, -0.9, 0.0, -4.5, 9.0]))
    plume = gymnasium.make("qrsim_ros/Plume-v0", scenario="plume_3d")
    assert plume.observation_space["plume_reading"].shape == (3,)
    with pytest.raises(ValueError, match="task type"):
        gymnasium.make("qrsim_ros/SearchRescue-v0", scenario="keep_spot")


def rollout(env: gymnasium.Env, seed: int, steps: int) -> tuple[list, list]:
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(99)
    observations, rewards = [obs], []
    for _ in range(steps):
        obs, reward, *_ = env.step(env.action_space.sample())
        observations.append(obs)
        rewards.append(reward)
    return observations, rewards


def test_reset_seed_is_reproducible() -> None:
    env = gymnasium.make("qrsim_ros/CatsMouse-v0", scenario="cats_mouse_1b", overrides=SHORT)
    a_obs, a_rew = rollout(env, 7, 5)
    b_obs, b_rew = rollout(env, 7, 5)
    c_obs, _ = rollout(env, 8, 5)
    assert a_rew == b_rew
    for x, y in zip(a_obs, b_obs, strict=True):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key])
    assert not np.array_equal(a_obs[0]["estimated_state"], c_obs[0]["estimated_state"])  # new placement
    # reset() without a seed continues the streams: a different episode
    obs, _ = env.reset()
    assert not np.array_equal(obs["estimated_state"], a_obs[0]["estimated_state"])


def test_time_limit_truncates() -> None:
    env = gymnasium.make("qrsim_ros/KeepSpot-v0", overrides={"task": {"duration_steps": 3}})
    env.reset(seed=1)
    hover = np.array([[0.0, 0.0, 0.59, 0.0, 12.0]], np.float32)
    flags = [env.step(hover)[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]
    with pytest.raises(RuntimeError, match="over"):  # stepping a finished episode is refused
        env.step(hover)


def test_invalid_vehicle_terminates_with_the_sentinel() -> None:
    # 2 m above the ground, commanded down at 3 m/s: the vehicle hits the ground (pz > 0) and is invalid
    env = SearchRescueEnv(overrides={"task": {"start_z_ned_m": -2.0, "duration_steps": 20}})
    env.reset(seed=3)
    down = np.array([[0.0, 0.0, 3.0]], np.float32)
    for _ in range(5):
        obs, reward, terminated, truncated, info = env.step(down)
        if terminated or truncated:
            break
    assert terminated and not truncated
    assert info["done_reason"] == "invalid_vehicle" and reward == -1000.0
    assert obs["valid"].tolist() == [0]
    assert np.all(obs["estimated_state"] == INVALID_SENTINEL)
    assert env.observation_space.contains(obs)


def test_search_rescue_observation_matches_the_camera() -> None:
    env = SearchRescueEnv(overrides=SHORT)
    obs, _ = env.reset(seed=5)
    assert obs["camera_valid"].tolist() == [0] and obs["camera_max_llkd"][0] == 0.0  # no frame at t = 0
    obs, *_ = env.step(np.zeros((1, 3), np.float32))
    frame = env.sim.camera_observations()[0]
    k = int(np.nanargmax(frame.llkd))
    assert obs["camera_valid"].tolist() == [1]
    assert obs["camera_max_llkd"][0] == np.float32(frame.llkd[k])
    np.testing.assert_array_equal(obs["camera_max_llkd_ne"][0], frame.cg[k, 0:2].astype(np.float32))
    assert obs["num_persons"][0] == env.sim.area.num_persons
    np.testing.assert_array_equal(obs["estimated_state"], env.sim.estimated_state().astype(np.float32))


def test_actions_are_clipped_to_the_box() -> None:
    env = gymnasium.make("qrsim_ros/KeepSpot-v0", overrides=SHORT)
    env.reset(seed=2)
    # throttle 5 is outside [0, 1]: the simulator would reject it; the env clips it to 1
    _, _, terminated, truncated, _ = env.step(np.array([[0.0, 0.0, 5.0, 0.0, 12.0]], np.float32))
    assert not terminated and not truncated


def test_plume_info_and_estimates() -> None:
    env = gymnasium.make("qrsim_ros/Plume-v0", overrides=SHORT)
    _, info = env.reset(seed=4)
    locations = info["plume_locations"]
    assert locations.shape == (100, 3) and info["samples_per_location"] == 1
    # a perfect estimate of a static plume scores 0 (spec 5.4)
    truth = env.unwrapped.sim.plume_reference_samples
    assert env.unwrapped.submit_plume_estimates(truth) == 0.0


def test_baseline_policy_drives_an_env() -> None:
    env = SearchRescueEnv(overrides=SHORT)
    env.reset(seed=3)
    policy = make_policy("search-pattern", env.view)
    total = 0.0
    for _ in range(20):
        _, reward, terminated, truncated, _ = env.step(np.asarray(policy(env.view), np.float32))
        total += reward
        if terminated or truncated:
            break
    assert truncated and total == pytest.approx(env.sim.total_reward)

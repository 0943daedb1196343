"""Task semantics of the in-process Simulator, ported from QRSim's test suite (spec 8.1: testSR, testSeed,
testSetReset, testCollision, testLimits) plus the rewards of spec 5 and the fixes of spec 10.

Every expected value is computed here from the spec's formulas and the simulator's true states, never
pasted from a run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state
from qrsim_ros.core.engine.simulator import ActionError, Simulator

HOVER = [0.0, 0.0, 0.59, 0.0, 12.0]  # attitude action: level, nominal hover throttle (spec 5.2 u0)
PENALTY = -1000.0
#: Steady-state gains of the identified attitude loops (spec 2.4, derived): attitude = 0.744983 x the
#: commanded angle, yaw rate = 0.435803 x the commanded yaw rate.
ATTITUDE_GAIN = 0.744983
YAW_RATE_GAIN = 0.435803
#: R of the generic tasks' control cost (spec 5.2): diag(2/pi, 2/pi, 0.5, 1) on U(1:4) - [0 0 0.59 0].
R_COST = np.array([2 / math.pi, 2 / math.pi, 0.5, 1.0])
QUIET = {"dyn_noise": [0.0] * 6, "turbulence": {"on": False}}  # deterministic dynamics


def run_episode(sim: Simulator, actions: np.ndarray, steps: int) -> list[float]:
    return [sim.step(actions) for _ in range(steps)]


# --- search and rescue (testSR) -----------------------------------------------------------------------------

def test_search_rescue_two_persons_found_with_the_proportional_rule() -> None:
    """testSR: 2 UAVs at (-10,-10,-45) and (20,20,-45), heading 0, exactly 2 persons at (0,0,0) and
    (10,50,0), GPS on, noisy camera config, no wind, D = sqrt(100*75); every 10 steps
    U_i = 0.1 (target_i - X_i(1:3)) towards (0,0,-4), (10,50,-4). Both persons are found: the finds
    add up to exactly 2 (QRSim's test task had no -1/T term; here every other step scores -1/100)."""
    d = math.sqrt(100 * 75)
    sim = Simulator.from_scenario("search_rescue_2b", {
        "seed": 1234, "num_vehicles": 2,
        "task": {"duration_steps": 100},
        "area": {"limits_ned": [-d, d, -d, d, -80.0, 0.0], "persons_ned": [[0, 0, 0], [10, 50, 0]]},
        "vehicle": {"initial_states": [[-10, -10, -45, 0, 0, 0], [20, 20, -45, 0, 0, 0]]},
    })
    assert sim.scenario.gps.on and sim.scenario.vehicle.gps_receiver.on and not sim.scenario.wind.on
    assert sim.camera is not None and sim.area.num_persons == 2
    targets = np.array([[0.0, 0.0, -4.0], [10.0, 50.0, -4.0]])
    u = np.zeros((2, 3))
    rewards = []
    while not sim.done:
        if sim.step_count % 10 == 0:
            u = 0.1 * (targets - sim.true_state()[:, 0:3])
        rewards.append(sim.step(u))
    r = np.array(rewards)
    assert r[r > 0].sum() == 2.0
    assert set(r[r > 0].tolist()) <= {1.0, 2.0}
    np.testing.assert_array_equal(r[r <= 0], -1.0 / 100)
    assert sim.total_reward == pytest.approx(2.0 - (r <= 0).sum() / 100, abs=1e-12)
    assert sim.area.found.all()
    assert sim.done_reason == "all_persons_found" and len(r) < 100
    # found means within 5 m of the person and slower than 0.1 m/s (spec 4.3)
    assert np.all(np.linalg.norm(sim.true_state()[:, 0:3] - [[0, 0, 0], [10, 50, 0]], axis=1) <= 5.0 + 0.1)


def test_search_rescue_placement_is_seeded() -> None:
    """Spec 10.3: SR initial positions and headings come from the seeded task stream (QRSim used the
    unseeded global generator)."""
    states = [Simulator.from_scenario("search_rescue_2c", {"seed": s}).true_state() for s in (21, 21, 22)]
    np.testing.assert_array_equal(states[0], states[1])
    assert not np.array_equal(states[0][:, [0, 1, 5]], states[2][:, [0, 1, 5]])
    assert len(set(states[0][:, 5].tolist())) == 3  # one heading per UAV


# --- validity: limits and collisions (testLimits, testCollision) --------------------------------------------

def leave_area_scenario(stop_on_invalid: bool) -> Simulator:
    """keep_spot (x in [-10, 20]) with the vehicle at x = 18 flying north at 5 m/s."""
    return Simulator.from_scenario("keep_spot", {
        "seed": 3, "task": {"stop_on_invalid": stop_on_invalid, "duration_steps": 500},
        "vehicle": {**QUIET, "initial_states": [[18.0, 0.0, -10.0, 0, 0, 0, 5.0, 0, 0, 0, 0, 0]]},
    })


def test_leaving_the_area_penalises_and_freezes() -> None:
    sim = leave_area_scenario(stop_on_invalid=False)
    rewards = []
    while sim.valid.all():
        rewards.append(sim.step([HOVER]))
        assert len(rewards) < 100, "the vehicle never left the area"
    assert rewards[-1] == PENALTY and all(r > PENALTY for r in rewards[:-1])
    frozen = sim.true_state()
    assert frozen[0, 0] > 20.0  # frozen at the offending state (spec 2.7)
    assert np.all(np.isnan(sim.estimated_state()))
    assert not sim.done and sim.done_reason == ""  # stop_on_invalid off: the episode goes on
    for _ in range(5):
        assert sim.step([[0.5, 0.5, 1.0, 1.0, 12.0]]) == PENALTY
        np.testing.assert_array_equal(sim.true_state(), frozen)
        assert np.all(np.isnan(sim.estimated_state()))
    # the default stops the episode on the step the vehicle became invalid
    sim = leave_area_scenario(stop_on_invalid=True)
    steps = 0
    while not sim.done:
        reward = sim.step([HOVER])
        steps += 1
    assert steps == len(rewards) and reward == PENALTY and sim.done_reason == "invalid_vehicle"
    with pytest.raises(RuntimeError):
        sim.step([HOVER])


@pytest.mark.parametrize("separation_m, collide", [(1.5, True), (2.5, False)])
def test_collision_invalidates_both_vehicles(separation_m: float, collide: bool) -> None:
    """testCollision: two vehicles closer than the collision distance (2 m) are both invalid after a step."""
    sim = Simulator.from_scenario("keep_spot", {
        "seed": 4, "num_vehicles": 2,
        "area": {"limits_ned": [-50.0, 50.0, -50.0, 50.0, -40.0, 0.0]},
        "vehicle": {**QUIET, "initial_states": [[0.0, 0.0, -10.0, 0, 0, 0],
                                                 [0.0, separation_m, -10.0, 0, 0, 0]]},
    })
    r = sim.step([HOVER, HOVER])
    if collide:
        assert r == PENALTY and not sim.valid.any()
        assert np.all(np.isnan(sim.estimated_state()))
        assert sim.done and sim.done_reason == "invalid_vehicle"
    else:
        assert r > PENALTY and sim.valid.all() and not sim.done


def test_flying_into_each_other_is_a_collision() -> None:
    """Two vehicles 12 m apart commanded towards each other at 2 m/s collide; the penalty comes on the
    step of the collision and both freeze closer than 2 m apart."""
    sim = Simulator.from_scenario("keep_spot", {
        "seed": 5, "num_vehicles": 2,
        "task": {"dt_s": 1.0, "duration_steps": 30, "stop_on_invalid": False},
        "area": {"limits_ned": [-50.0, 50.0, -50.0, 50.0, -40.0, 0.0]},
        "vehicle": {**QUIET, "control": "velocity",
                    "initial_states": [[0.0, -6.0, -10.0, 0, 0, 0], [0.0, 6.0, -10.0, 0, 0, 0]]},
    })
    actions = np.array([[0.0, 2.0, 0.0], [0.0, -2.0, 0.0]])
    rewards = []
    while sim.valid.all() and len(rewards) < 20:
        rewards.append(sim.step(actions))
    assert not sim.valid.any() and rewards[-1] == PENALTY
    x = sim.true_state()
    assert np.linalg.norm(x[0, 0:3] - x[1, 0:3]) < 2.0
    # invalid vehicles' rows are ignored, NaN or not
    assert sim.step(np.full((2, 3), np.nan)) == PENALTY
    np.testing.assert_array_equal(sim.true_state(), x)


# --- determinism (testSeed, testSetReset) -------------------------------------------------------------------

def noisy_episode(sim: Simulator, steps: int) -> tuple[np.ndarray, np.ndarray, list[float], list[np.ndarray]]:
    """Fly SR 2D's three UAVs with varying velocity commands; return X, eX, rewards and camera llkd."""
    rewards, llkd = [], []
    for k in range(steps):
        a = np.array([[math.sin(0.3 * k), math.cos(0.2 * k), 0.1], [-1.0, 0.5, 0.0], [0.5, -0.5, -0.2]])
        rewards.append(sim.step(a))
        llkd.extend(obs.llkd for obs in sim.camera_observations() if obs is not None)
    return sim.true_state(), sim.estimated_state(), rewards, llkd


def test_fixed_seed_reproduces_states_exactly() -> None:
    """testSeed / testSetReset with a fixed seed: a noisy, windy, turbulent scenario with GPS and camera
    gives bit-identical X, eX, rewards and camera outputs in two simulators and after reset(seed)."""
    overrides = {"seed": 12345, "task": {"duration_steps": 50}}
    sim_a = Simulator.from_scenario("search_rescue_2d", overrides)
    sim_b = Simulator.from_scenario("search_rescue_2d", overrides)
    x0 = sim_a.true_state()
    first = noisy_episode(sim_a, 12)
    second = noisy_episode(sim_b, 12)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert first[2] == second[2]
    assert len(first[3]) == 36 and all(np.array_equal(p, q) for p, q in zip(first[3], second[3], strict=True))
    assert not np.allclose(first[0][:, 0:3], x0[:, 0:3])  # they did fly
    # reset(seed) rebuilds every stream: the same episode again
    sim_a.reset(seed=12345)
    np.testing.assert_array_equal(sim_a.true_state(), x0)
    again = noisy_episode(sim_a, 12)
    np.testing.assert_array_equal(again[0], first[0])
    np.testing.assert_array_equal(again[1], first[1])
    # reset() continues the streams: a different episode (new placement, new noise)
    sim_b.reset()
    assert not np.array_equal(sim_b.true_state()[:, 0:2], x0[:, 0:2])
    other = noisy_episode(sim_b, 12)
    assert not np.array_equal(other[1], first[1])


def test_reset_without_seed_draws_a_new_plume() -> None:
    """reset() continues every random stream, the plume's included (3A's Gaussian and 3B's sources)."""
    for name in ("plume_3a", "plume_3b"):
        sim = Simulator.from_scenario(name, {"seed": 5})
        sources, ref = sim.plume.sources_ned.copy(), sim.plume_reference_samples.copy()
        sim.reset()
        assert not np.array_equal(sim.plume.sources_ned, sources)
        assert not np.array_equal(sim.plume_reference_samples, ref)
        sim.reset(seed=5)
        np.testing.assert_array_equal(sim.plume.sources_ned, sources)
        np.testing.assert_array_equal(sim.plume_reference_samples, ref)


def test_seed_zero_differs_in_estimates_only() -> None:
    """testSeed with seed 0 (from the clock), no dynamic noise and no turbulence: the same hover actions
    give identical true states but different estimated states."""
    runs = []
    for _ in range(2):
        sim = Simulator.from_scenario("keep_spot", {"seed": 0, "task": {"duration_steps": 60},
                                                    "vehicle": QUIET})
        run_episode(sim, np.array([HOVER]), 50)
        runs.append((sim.true_state(), sim.estimated_state(), sim.seed_entropy))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][2] != runs[1][2]
    assert not np.array_equal(runs[0][1], runs[1][1])
    assert not np.array_equal(runs[0][1][:, 0:3], runs[1][1][:, 0:3])  # GPS
    assert not np.array_equal(runs[0][1][:, 3:6], runs[1][1][:, 3:6])  # orientation estimator


# --- plume rewards ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["plume_3a", "plume_3b"])
def test_static_plume_reward_is_zero_for_a_perfect_estimate(name: str) -> None:
    """3A/3B: -sum (ref - est)^2 (spec 5.4): the plume model's own concentrations score exactly 0, an
    estimate off by 10 % scores -sum (0.1 ref)^2, and any error scores below 0."""
    sim = Simulator.from_scenario(name, {"seed": 17})
    ref = sim.plume_reference_samples
    assert ref.shape == (1, 100)
    truth = sim.plume.concentration(sim.plume_locations)[None, :]
    assert sim.submit_plume_estimates(truth) == 0.0
    assert sim.submit_plume_estimates(ref) == 0.0
    off = sim.submit_plume_estimates(1.1 * ref)
    assert off == pytest.approx(-np.sum((0.1 * ref) ** 2), rel=1e-9) and off < 0
    assert sim.submit_plume_estimates(np.zeros_like(ref)) < off
    with pytest.raises(ValueError, match="shape"):
        sim.submit_plume_estimates(np.zeros((2, 100)))


@pytest.mark.parametrize("name, overrides",
                         [("plume_3e", {}), ("plume_3f", {"task": {"samples_per_location": 200}})])
def test_puff_plume_kl_reward_ranks_estimates(name: str, overrides: dict) -> None:
    """3E/3F: -KL(ref || est) (spec 5.4). Samples of the same plume from an independent emission stream
    (a good estimate) score far above noise at the reference's scale or another plume's samples."""
    sim = Simulator.from_scenario(name, {"seed": 3, **overrides})
    ref = sim.plume_reference_samples
    k, m = ref.shape
    assert m == (25 if name == "plume_3e" else 100)
    good = sim.plume.reference_samples(sim.plume_locations, k, np.random.default_rng(99))
    noise = np.abs(np.random.default_rng(5).normal(0.0, ref.std(), ref.shape))
    other = Simulator.from_scenario(name, {"seed": 103, "task": {"samples_per_location": 2}})
    wrong_plume = other.plume.reference_samples(sim.plume_locations, k, np.random.default_rng(7))
    r_good = sim.submit_plume_estimates(good)
    r_noise = sim.submit_plume_estimates(noise)
    r_wrong = sim.submit_plume_estimates(wrong_plume)
    # the 1-NN estimate of KL between two samples of one distribution is near 0 (a few nats at most in
    # 25-100 dimensions); the bad estimates are tens of nats away
    assert abs(r_good) < 5.0
    assert r_good > r_noise + 20.0 and r_good > r_wrong + 20.0
    assert sim.plume_reward == r_wrong


# --- cats and mouse -----------------------------------------------------------------------------------------

def test_cats_mouse_reward_sums_all_cats_and_the_mouse_flees() -> None:
    """Spec 5.5 / 10.1: reward = -sum over ALL cats of the squared 2-D cat-mouse distance (QRSim's code
    counted cat 1 only); the mouse flies away from the cats at 3 m/s."""
    sim = Simulator.from_scenario("cats_mouse_1a", {"seed": 31})
    x = sim.true_state()
    d0 = np.linalg.norm(x[:3, 0:2] - x[3, 0:2], axis=1)
    for _ in range(6):
        r = sim.step(np.zeros((3, 2)))  # the cats hover
        x = sim.true_state()
        expected = -sum(float(np.sum((x[i, 0:2] - x[3, 0:2]) ** 2)) for i in range(3))
        assert r == pytest.approx(expected, rel=1e-12)
        cat1_only = -float(np.sum((x[0, 0:2] - x[3, 0:2]) ** 2))
        assert r < cat1_only - 100.0
    d = np.linalg.norm(x[:3, 0:2] - x[3, 0:2], axis=1)
    # it flees the cats together (v ~ sum (m - c)/|m - c|^2): farther from each, the nearest cat first
    assert np.all(d > d0) and d.min() > d0.min() + 5.0 and d.mean() > d0.mean() + 5.0
    v_mouse = body_to_ned(dcm_from_state(x[3:4]), x[3:4, 6:9])[0]
    assert np.linalg.norm(v_mouse[0:2]) == pytest.approx(3.0, abs=0.3)
    # at hfix = 10 m; 1 m: the altitude PID sags while the mouse tilts to accelerate (testPIDs allows
    # 0.3 m only after 14 s of steady flight)
    assert x[3, 2] == pytest.approx(-10.0, abs=1.0)


# --- keep spot x10 ------------------------------------------------------------------------------------------

def test_keep_spot_x10_reward_sums_own_displacements() -> None:
    """Spec 5.2 / 10.2: control cost sum_t sum_i |R (U_i(1:4) - u0)|^2 DT plus, at the end,
    -sum_i |p_i - p_i0|^2 over each vehicle's OWN start point (QRSim's column-minus-row bug fixed)."""
    steps = 50
    sim = Simulator.from_scenario("keep_spot_x10", {"seed": 8, "task": {"duration_steps": steps},
                                                    "vehicle": QUIET})
    start = sim.true_state()[:, 0:3]
    actions = np.tile(HOVER, (10, 1))
    actions[:, 0] = np.linspace(-0.1, 0.1, 10)  # different pitch for each vehicle: different drifts
    actions[:, 3] = 0.05
    rewards = run_episode(sim, actions, steps)
    assert sim.done and sim.done_reason == "time_limit"
    p = sim.true_state()[:, 0:3]
    du = (actions[:, 0:4] - [0.0, 0.0, 0.59, 0.0]) * R_COST
    cost_per_tick = float(np.sum(du * du)) * 0.02
    terminal = -float(np.sum((p - start) ** 2))
    np.testing.assert_allclose(rewards[:-1], -cost_per_tick, rtol=1e-12)
    assert rewards[-1] == pytest.approx(-cost_per_tick + terminal, rel=1e-12)
    assert sim.total_reward == pytest.approx(-steps * cost_per_tick + terminal, rel=1e-12)
    # the drifts differ, so QRSim's broadcast (every vehicle against every start) would differ greatly
    broadcast = -float(np.sum((p[:, None, :] - start[None, :, :]) ** 2))
    assert abs(broadcast - terminal) > 1000.0
    assert terminal < -0.01


# --- control modes ------------------------------------------------------------------------------------------

def test_control_modes_fly_as_intended() -> None:
    """One vehicle per mode: attitude settles at the identified loop's gain x the command (spec 2.4),
    velocity reaches its NED set point (testPIDs tolerance 0.15 m/s), waypoint reaches its target."""
    sim = Simulator.from_scenario("keep_spot", {
        "seed": 11, "num_vehicles": 3,
        "task": {"dt_s": 1.0, "duration_steps": 30},
        "area": {"limits_ned": [-60.0, 60.0, -60.0, 60.0, -40.0, 0.0]},
        "vehicle": {**QUIET, "control": ["attitude", "velocity", "waypoint"],
                    "initial_states": [[0, -20, -10, 0, 0, 0], [0, 0, -10, 0, 0, 0], [0, 20, -10, 0, 0, 0]]},
    })
    assert sim.action_spec["width"] == 5 and sim.action_spec["modes"] == ["attitude", "velocity", "waypoint"]
    pitch, roll, yaw_rate = 0.05, -0.03, 0.2
    waypoint = [20.0, 35.0, -15.0, 0.5]
    actions = np.array([[pitch, roll, 0.59, yaw_rate, 12.0], [1.0, -0.5, 0.0, 0, 0], [*waypoint, 0.0]])
    run_episode(sim, actions, 20)
    x = sim.true_state()
    assert sim.valid.all()
    # attitude: the steady angles are 0.745 x the commands; 0.2 x 0.05 = 1e-2 tolerance for the small
    # cross-coupling of the Euler kinematics at a non-zero yaw rate
    assert x[0, 4] == pytest.approx(ATTITUDE_GAIN * pitch, abs=1e-3)
    assert x[0, 3] == pytest.approx(ATTITUDE_GAIN * roll, abs=1e-3)
    assert x[0, 11] == pytest.approx(YAW_RATE_GAIN * yaw_rate, abs=1e-3)
    v = body_to_ned(dcm_from_state(x[1:2]), x[1:2, 6:9])[0]
    np.testing.assert_allclose(v, [1.0, -0.5, 0.0], atol=0.15)
    assert np.linalg.norm(x[2, 0:3] - waypoint[:3]) < 2.0
    assert x[2, 5] == pytest.approx(0.5, abs=math.pi / 36)


# --- action validation --------------------------------------------------------------------------------------

def test_actions_are_validated() -> None:
    sim = Simulator.from_scenario("search_rescue_2c", {"seed": 2})
    with pytest.raises(ActionError, match=r"shape \(3, 3\)"):
        sim.step(np.zeros((2, 3)))
    with pytest.raises(ActionError, match=r"shape \(3, 3\)"):
        sim.step(np.zeros((3, 2)))
    bad = np.zeros((3, 3))
    bad[1, 2] = np.nan
    with pytest.raises(ActionError, match=r"row 1 .*not finite"):
        sim.step(bad)
    with pytest.raises(ActionError, match="numeric"):
        sim.step([["a", "b", "c"]] * 3)
    assert sim.step_count == 0 and sim.time == 0.0  # nothing was stepped
    sim = Simulator.from_scenario("keep_spot", {"seed": 2})
    for j, value, name in [(0, 1.2, "pitch"), (1, -0.95, "roll"), (2, 1.5, "throttle"), (3, 5.0, "yaw"),
                           (4, 8.0, "battery")]:
        a = np.array([HOVER])
        a[0, j] = value
        with pytest.raises(ActionError, match=rf"row 0 .*{name}"):
            sim.step(a)
    # mixed modes: every row needs the widest mode's columns
    sim = Simulator.from_scenario("keep_spot", {
        "seed": 2, "num_vehicles": 2, "area": {"limits_ned": [-50.0, 50.0, -50.0, 50.0, -40.0, 0.0]},
        "vehicle": {"control": ["velocity", "attitude"],
                    "initial_states": [[0, 0, -10, 0, 0, 0], [0, 10, -10, 0, 0, 0]]}})
    with pytest.raises(ActionError, match=r"shape \(2, 5\)"):
        sim.step(np.zeros((2, 3)))
    sim.step([[0.0, 0.0, 0.0, 0.0, 0.0], HOVER])
    assert sim.step_count == 1

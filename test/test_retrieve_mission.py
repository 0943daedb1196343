"""The retrieve mission: ireland_2016's 17-mode guidance, the retrieve task's world and referee,
and a batch's mission statistics as ``qrsim verify`` reads them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from qrsim_ros.batch.jobs import make_jobs, run_job
from qrsim_ros.batch.missions import mode_statistics, parse_mode_path, retrieve_columns, retrieve_report
from qrsim_ros.batch.summary import summarise
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.mission.guidance import (
    TABLE2_WAYPOINTS_NE_M,
    GuidanceInputs,
    GuidanceParams,
    MissionGuidance,
    drop_site_image_px,
)
from qrsim_ros.core.mission.modes import MODES, mode_number
from qrsim_ros.policies.episode import run_episode

BASE = (-1.8795, -2.5936)
DROP = (1.3303, -1.3307)


def _inputs(t: float, r, v=(0.0, 0.0, 0.0), *, battery_v: float = 11.0, centroids=(), holding=False,
            rotor_failed=False, heading=0.0) -> GuidanceInputs:
    return GuidanceInputs(time_s=t, position_ned_m=np.array(r, float), velocity_ned_mps=np.array(v, float),
                          heading_rad=heading, battery_v=battery_v,
                          centroids_px=np.array(centroids, float).reshape(-1, 2), holding=holding,
                          rotor_failed=rotor_failed)


def _guidance(self_test=lambda: True, **params) -> MissionGuidance:
    return MissionGuidance(GuidanceParams(**params), BASE, DROP, 2, self_test)


def _fly_to_search(g: MissionGuidance) -> float:
    """Idle -> take-off -> initialise -> search, the vehicle placed where each mode asks."""
    hover = [*BASE, -1.0]
    assert g.update(_inputs(0.0, [*BASE, -0.2]), 0.1).mode == "take_off"
    assert g.update(_inputs(0.1, hover), 0.1).mode == "initialise"
    return 0.2


# --- the guidance alone ---------------------------------------------------------------------------------

def test_modes_are_figure_5s_seventeen_numbered_in_order():
    assert len(MODES) == 17 and len(set(MODES)) == 17
    assert mode_number("idle") == 1 and mode_number("search") == 4 and mode_number("emergency_land") == 17
    with pytest.raises(KeyError, match="unknown mission mode 'hover'"):
        mode_number("hover")


def test_position_loop_is_eq_21_with_the_speed_limit():
    g = _guidance()
    r = np.array([0.0, 0.0, -1.0])
    near = g._goto(r, [0.1, -0.2, -1.05])  # small error: K_pr (r_d - r)
    np.testing.assert_allclose(near, 0.975 * np.array([0.1, -0.2, -0.05]))
    far = g._goto(r, [30.0, 40.0, -1.0])  # large: along the error, |v| = v_max
    assert math.isclose(float(np.linalg.norm(far)), 5.0) and math.isclose(far[0] / far[1], 0.75)
    assert math.isclose(float(np.linalg.norm(g._goto(r, [30.0, 40.0, -1.0], 2.0))), 2.0)


def test_take_off_initialise_and_the_self_test():
    g = _guidance()
    _fly_to_search(g)
    assert g.update(_inputs(0.2, [*BASE, -1.0]), 0.1).mode == "search"
    bad = _guidance(lambda: False)
    _fly_to_search(bad)
    assert bad.update(_inputs(0.2, [*BASE, -1.0]), 0.1).mode == "land" and bad.system_faults == 1
    # retry (Figure 9): lands, and takes off again once the battery is full; the mission is not over
    assert bad.update(_inputs(5.0, [*BASE, -0.2]), 0.1).mode == "idle" and bad.mission_over == ""
    assert bad.update(_inputs(5.1, [*BASE, -0.2], battery_v=10.9), 0.1).mode == "idle"
    assert bad.update(_inputs(9.0, [*BASE, -0.2], battery_v=11.0), 0.1).mode == "take_off"
    abort = _guidance(lambda: False, system_fault="abort")
    _fly_to_search(abort)
    abort.update(_inputs(0.2, [*BASE, -1.0]), 0.1)
    assert abort.update(_inputs(5.0, [*BASE, -0.2]), 0.1).mode == "idle"
    assert abort.mission_over == "system_fault"


def test_initialise_waits_for_a_self_test_answer_the_graph_has_not_received_yet():
    answers = iter([None, None, True])  # the graph's uavN/self_test: two periods without an answer
    calls = []
    g = _guidance(lambda: calls.append(1) or next(answers))
    _fly_to_search(g)
    hover = [*BASE, -1.0]
    assert g.update(_inputs(0.2, hover), 0.1).mode == "initialise"
    assert g.update(_inputs(0.3, hover), 0.1).mode == "initialise" and g.system_faults == 0
    cmd = g.update(_inputs(0.4, hover), 0.1)
    assert cmd.mode == "search" and len(calls) == 3


def test_search_follows_table_2_and_ends_at_the_last_waypoint():
    g = _guidance()
    t = _fly_to_search(g)
    g.update(_inputs(t, [*BASE, -1.0]), 0.1)
    assert g.mode == "search"
    cmd = g.update(_inputs(t, [*BASE, -1.0]), 0.1)
    to_first = np.array([*TABLE2_WAYPOINTS_NE_M[0], -2.0]) - np.array([*BASE, -1.0])
    np.testing.assert_allclose(cmd.velocity_ned_mps, 0.975 * to_first)  # 1.79 m/s: under Search's 2 m/s
    for k, (n, e) in enumerate(TABLE2_WAYPOINTS_NE_M):
        t += 1.0
        mode = g.update(_inputs(t, [n, e, -2.0]), 0.1).mode
        assert g.last_waypoint == k
        assert mode == ("search" if k < len(TABLE2_WAYPOINTS_NE_M) - 1 else "return_to_base")
    # landing at the base ends the mission: the end of the search path with targets left
    assert g.update(_inputs(t + 1, [*BASE, -1.0]), 0.1).mode == "land"
    assert g.update(_inputs(t + 2, [*BASE, -0.2]), 0.1).mode == "idle"
    assert g.mission_over == "end_of_search_path"


def test_object_tracking_ignores_the_drop_zone_and_targets_off_centre():
    g = _guidance()
    r = np.array([DROP[0], DROP[1] - 0.5, -2.0])  # 0.5 m west of the drop site, heading north
    ds_px, h = drop_site_image_px(r, 0.0, DROP, 0.1, 400.0)
    assert math.isclose(h, 1.9) and math.isclose(ds_px[0], 400 * 0.5 / 1.9) and abs(ds_px[1]) < 1e-12
    near_drop = ds_px + np.array([3.0, 0.0])
    assert g.tracked_centroid(_inputs(0, r, centroids=[near_drop])) is None  # inside R_ds,C = f R_ds / h
    assert g.tracked_centroid(_inputs(0, r, centroids=[[0.0, 150.0]])) is None  # outside R_c = 100 px
    chosen = g.tracked_centroid(_inputs(0, r, centroids=[[0.0, 90.0], [-20.0, 10.0], near_drop]))
    np.testing.assert_array_equal(chosen, [-20.0, 10.0])
    # tracking (hover, descend) takes a target anywhere in the image
    np.testing.assert_array_equal(g.tracked_centroid(_inputs(0, r, centroids=[[0.0, 150.0]]), math.inf),
                                  [0.0, 150.0])


def test_visual_controller_is_eq_29():
    g = _guidance()
    s = _inputs(0.0, [0.0, 0.0, -2.1], heading=math.pi / 2)  # camera 2.0 m above the floor, facing east
    v = g._visual(s, np.array([40.0, 80.0]), 0.1)  # 80 px up = forward = east, 40 px right = south
    e = 2.0 / 400.0 * np.array([80.0, 40.0])  # [forward, right] [m]
    u = 0.341 * e + 0.0001 * e * 0.1
    np.testing.assert_allclose(v, [-u[1], u[0]], atol=1e-12)


def test_low_battery_and_actuator_fault_interrupt_as_section_5_2():
    g = _guidance()
    t = _fly_to_search(g)
    g.update(_inputs(t, [*BASE, -1.0]), 0.1)
    g.mode, g.grasper_closed = "transport", True
    assert g.update(_inputs(t, [0.0, 0.0, -1.0], battery_v=10.5, holding=True), 0.1).mode == "return_to_base"
    assert not g.grasper_closed  # the target is let go: the battery comes first
    # in Return to base the warning does not interrupt again; an actuator fault does
    assert g.update(_inputs(t, [0.0, 0.0, -1.0], battery_v=10.4), 0.1).mode == "return_to_base"
    assert g.update(_inputs(t, [0.0, 0.0, -1.0], rotor_failed=True), 0.1).mode == "emergency_land"
    assert g.update(_inputs(t, [0.3, 0.1, -0.2]), 0.1).mode == "idle"
    assert g.mission_over == "actuator_fault"


def test_grasp_carry_drop_and_a_dropped_target_is_reacquired():
    g = _guidance()
    g.mode = "descend_to_grasp"
    g._last_seen_s = 0.0
    over = [0.5, 0.5, g.params.grasp_z_ned_m]
    assert g.update(_inputs(0.1, over, centroids=[[0.0, 0.0]]), 0.1).mode == "grasp" and g.grasper_closed
    assert g.update(_inputs(0.2, over, holding=True), 0.1).mode == "ascend"
    # the grasper lets go in Ascend: back to where it happened, then hover if the target is seen
    entry = [0.5, 0.5, -0.6]
    assert g.update(_inputs(0.3, entry, holding=False), 0.1).mode == "reacquire_target"
    assert not g.grasper_closed
    assert g.update(_inputs(0.4, entry, centroids=[[5.0, 5.0]]), 0.1).mode == "hover_above_target"
    # a drop at the drop site counts the target and, with one left, returns to search
    g.mode, g.grasper_closed = "descend_to_drop", True
    assert g.update(_inputs(1.0, [*DROP, g.params.grasp_z_ned_m], holding=True), 0.1).mode == "drop"
    assert g.update(_inputs(1.1, [*DROP, g.params.grasp_z_ned_m]), 0.1).mode == "return_to_search"
    assert g.deposited == 1
    # dropped early in Descend to drop: recorded as deposited (section 5.1.11), all found: home
    g.mode, g.grasper_closed = "descend_to_drop", True
    assert g.update(_inputs(2.0, [*DROP, -0.6], holding=False), 0.1).mode == "return_to_search"
    assert g.deposited == 2
    assert g.update(_inputs(2.1, [*DROP, -2.0]), 0.1).mode == "search"
    assert g.update(_inputs(2.2, [*DROP, -2.0]), 0.1).mode == "return_to_base"


def test_guidance_parameters_are_checked():
    with pytest.raises(ValueError, match=r"guidance\.search_z_ned_m=2\.0 must be < 0"):
        GuidanceParams(search_z_ned_m=2.0)
    with pytest.raises(ValueError, match=r"guidance\.low_battery_v=12\.0"):
        GuidanceParams(low_battery_v=12.0)
    with pytest.raises(ValueError, match=r"guidance\.system_fault='ignore'"):
        GuidanceParams(system_fault="ignore")


# --- the task: placement, grasper, faults, referee ---------------------------------------------------------

def test_simplified_placement_is_section_6_2_and_targets_are_seeded():
    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 7})
    task = sim.task
    np.testing.assert_allclose(task.landing_site_ne, BASE)
    np.testing.assert_allclose(task.drop_site_ne, DROP)
    x = sim.true_state()[0]
    np.testing.assert_allclose(x[0:2], BASE, atol=1e-9)
    assert math.isclose(x[5], 0.9305, abs_tol=1e-9)
    p = task.targets.position_ned_m
    assert p.shape == (2, 3) and np.all(p[:, 2] == -0.05)
    assert np.all((p[:, 0] >= -1.9) & (p[:, 0] <= 1.9) & (p[:, 1] >= -3.4) & (p[:, 1] <= 3.4))
    again = Simulator.from_scenario("retrieve_simplified", {"seed": 7}).task.targets.position_ned_m
    other = Simulator.from_scenario("retrieve_simplified", {"seed": 8}).task.targets.position_ned_m
    np.testing.assert_array_equal(p, again)
    assert not np.allclose(p, other)
    # the landing site is the charging base
    (base,) = sim.battery.bases
    np.testing.assert_allclose(base.position_ned_m[0:2], BASE)


def test_full_variant_places_base_and_drop_site_at_random_in_their_boxes():
    sites = []
    for seed in (1, 2, 3):
        task = Simulator.from_scenario("retrieve_full", {"seed": seed}).task
        b, d = task.landing_site_ne, task.drop_site_ne
        assert -1.9 <= b[0] <= 1.9 and -3.4 <= b[1] <= 3.4
        assert -1.5 <= d[0] <= 1.5 and -3.0 <= d[1] <= 3.0
        assert task.targets.count == 3
        sites.append((*b, *d))
    assert len(set(sites)) == 3


def test_retrieve_section_is_required_and_checked():
    with pytest.raises(ScenarioError, match="retrieve task needs a 'retrieve' section"):
        load_scenario("retrieve_simplified", {"retrieve": None})
    with pytest.raises(ScenarioError, match=r"retrieve.num_targets=0 must be an integer in \[1, 50\]"):
        load_scenario("retrieve_simplified", {"retrieve": {"num_targets": 0}})
    with pytest.raises(ScenarioError, match=r"retrieve.drop_site_ne_m: expected a list of 2 values, got 1"):
        load_scenario("retrieve_simplified", {"retrieve": {"drop_site_ne_m": [1.0]}})
    with pytest.raises(ScenarioError, match=r"retrieve.drop_site_ne_m=\[nan, 1.0\] must be \[north, east\]"):
        load_scenario("retrieve_simplified", {"retrieve": {"drop_site_ne_m": [float("nan"), 1.0]}})
    with pytest.raises(ScenarioError, match="unknown key"):
        load_scenario("retrieve_simplified", {"retrieve": {"guidance": {"hover_height": 1.0}}})


def _hover_over_target(sim: Simulator, k: int, dz: float) -> None:
    """Place vehicle 0 (at rest, level) so its grasper point is ``dz`` above target k's top."""
    t = sim.task.targets
    top = t.position_ned_m[k] - [0.0, 0.0, t.params.radius_m]
    x = sim.fleet.state.copy()
    x[0, 0:3] = top - [0.0, 0.0, dz + 0.2]
    x[0, 3:5] = 0.0
    x[0, 6:12] = 0.0
    sim.episode.observe(x, sim.fleet.valid)


def test_grasper_takes_a_target_only_within_tolerance_and_a_grasper_fault_drops_it():
    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 3, "faults": []})
    task = sim.task
    _hover_over_target(sim, 0, 0.2)  # 20 cm above: out of reach
    task.command_grasper(0, True)
    task.on_tick(np.zeros((1, 5)))
    assert not task.holding(0)
    task.command_grasper(0, False)
    task.on_tick(np.zeros((1, 5)))
    _hover_over_target(sim, 0, 0.01)
    task.command_grasper(0, True)
    task.on_tick(np.zeros((1, 5)))
    assert task.holding(0) and task.targets.carried_by(0) == 0 and task.ever_grasped[0]
    # a grasper fault (as the fault schedule starts it) drops the target: it falls from the grasper
    from qrsim_ros.core.faults.schedule import ActiveFault

    task.on_fault_started((ActiveFault("grasper", 0, "grasper_release", {}, 1.0, 1.02),))
    assert not task.holding(0) and task.grasper_drops == 1 and task.dropped_away[0]
    assert task.faults_seen["grasper"] == 1


def test_referee_scores_a_target_left_in_the_drop_zone_as_unreachable():
    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 3, "faults": []})
    task = sim.task
    task.targets.position_ned_m[1, 0:2] = task.drop_site_ne + np.array([0.1, 0.0])  # placed in the zone
    assert task.in_drop_zone().tolist() == [False, True]
    task.report_mission(0, "idle", "end_of_search_path", 50.0)
    assert task.done_reason() == "target_unreachable"
    sim2 = Simulator.from_scenario("retrieve_simplified", {"seed": 3, "faults": []})
    sim2.task.dropped_away[0] = True  # grasped, then dropped away from the zone
    sim2.task.report_mission(0, "idle", "end_of_search_path", 50.0)
    assert sim2.task.done_reason() == "target_lost"
    sim3 = Simulator.from_scenario("retrieve_simplified", {"seed": 3, "faults": []})
    sim3.task.report_mission(0, "idle", "end_of_search_path", 50.0)
    assert sim3.task.done_reason() == "end_of_search_path"
    sim4 = Simulator.from_scenario("retrieve_simplified", {"seed": 3, "faults": []})
    sim4.task.report_mission(0, "idle", "complete", 50.0)  # claims complete; the world disagrees
    assert sim4.task.done_reason() == "target_lost"
    with pytest.raises(ValueError, match="unknown mission end 'won'"):
        sim4.task.report_mission(0, "idle", "won", 50.0)


# --- whole missions in process ------------------------------------------------------------------------------

def _segments_sum(record) -> float:
    return sum(t for _, t, _ in parse_mode_path(record["mode_path"]))


def test_a_mission_retrieves_both_targets_and_lands_at_base():
    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 3, "faults": []})
    result = run_episode(sim, "mission")
    assert result.outcome == "success"
    task = sim.task
    # the world, checked independently: both targets rest within R_ds of the drop site, the vehicle at base
    d = np.hypot(*(task.targets.position_ned_m[:, 0:2] - DROP).T)
    assert np.all(d <= 0.25) and np.all(task.targets.phase == 0)
    x = sim.true_state()[0]
    assert math.hypot(x[0] - BASE[0], x[1] - BASE[1]) < 0.25 and x[2] > -0.3
    record = retrieve_columns(sim, result)
    assert math.isclose(_segments_sum(record), record["mission_time_s"], rel_tol=1e-9)
    modes = [m for m, _, _ in parse_mode_path(record["mode_path"])]
    assert modes[:4] == ["idle", "take_off", "initialise", "search"] and modes[-2:] == ["land", "idle"]
    assert modes.count("grasp") == 2 and modes.count("drop") == 2 and set(modes) <= set(MODES)
    assert record["fault_system"] == record["fault_actuator"] == record["fault_grasper"] == 0


def test_a_rotor_loss_ends_the_mission_in_an_emergency_landing():
    fault = {"id": "actuator", "kind": "rotor_loss", "rotor": 0, "trigger": {"at_time_s": 8.0}}
    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 3, "faults": [fault]})
    result = run_episode(sim, "mission")
    assert result.outcome == "actuator_fault"
    record = retrieve_columns(sim, result)
    assert record["fault_actuator"] == 1
    segments = parse_mode_path(record["mode_path"])
    assert ("emergency_land", "actuator") in [(m, e) for m, _, e in segments]
    assert result.sim_time_s < 30.0  # it did not fly on


def test_an_airborne_fault_clock_waits_for_the_lift_off():
    """A rotor loss certain at every tick of its clock, with ``clock: airborne``, starts at the first
    tick that begins off the pad (section 5.2.2: no actuator fault in Idle), not at t = 0.02 s."""
    fault = {"id": "actuator", "kind": "rotor_loss", "rotor": 0,
             "trigger": {"probabilistic": {"probability": 1.0, "period_s": 60.0, "clock": "airborne"}}}
    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 3, "faults": [fault]})
    rest_z = sim.true_state()[0, 2]
    heights: list[tuple[float, float]] = []
    result = run_episode(sim, "mission", on_step=lambda s, _: heights.append((s.time, s.true_state()[0, 2])))
    assert result.outcome == "actuator_fault"
    (start,) = [e for e in sim.fault_log() if e.event == "started"]
    t_fault = start.fault.since_s
    # the first task step (0.1 s) that ends 5 cm or more above the pad (Airframes.on_ground's tolerance)
    t_lift = next(t for t, z in heights if z < rest_z - 0.05)
    assert t_fault > 0.1 and t_lift - 0.1 < t_fault <= t_lift + 0.02, (t_fault, t_lift)


def test_a_failing_self_test_with_abort_is_a_system_fault():
    sim = Simulator.from_scenario("retrieve_simplified", {
        "seed": 3, "faults": [],
        "retrieve": {"self_test_failure_probability": 1.0, "guidance": {"system_fault": "abort"}}})
    result = run_episode(sim, "mission")
    assert result.outcome == "system_fault"
    record = retrieve_columns(sim, result)
    assert record["fault_system"] == 1 and record["system_faults"] == 1
    assert [m for m, _, _ in parse_mode_path(record["mode_path"])] == [
        "idle", "take_off", "initialise", "land", "idle"]


# --- a batch's mission statistics ---------------------------------------------------------------------------

def test_batch_records_give_transitions_that_verify_reads(tmp_path):
    from qrsim_ros.verification.formats import read_batch

    scenario = load_scenario("retrieve_simplified")
    jobs = make_jobs(scenario, "mission", [3, 4, 5], retrieve_columns)
    records = [run_job(j) for j in jobs]
    assert [r["episode"] for r in records] == [0, 1, 2]
    assert all(math.isclose(_segments_sum(r), r["mission_time_s"], rel_tol=1e-9) for r in records)
    stats = mode_statistics(records)
    assert stats.transitions["start", "idle", ""] == 3
    assert sum(n for (a, b, _), n in stats.transitions.items() if b.startswith("end:")) == 3
    part = retrieve_report(records, summarise(records))
    from qrsim_ros.batch.report import results_csv

    (tmp_path / "results.csv").write_bytes(results_csv(records))
    for name, data in part.files.items():
        (tmp_path / name).write_bytes(data)
    batch = read_batch(tmp_path)  # the checks of qrsim verify: mode times add up to mission times
    assert len(batch.episodes) == 3


def test_qrsim_batch_then_verify_a_retrieve_batch(tmp_path, capsys):
    """The issue's command on a small batch: the report holds the mission files, and Storm's values from
    the abstract model lie in the Monte Carlo intervals of the same runs."""
    from qrsim_ros.cli.main import main

    out = tmp_path / "report"
    rc = main(["batch", "retrieve_simplified", "--runs", "3", "--seed", "3", "--policy", "mission",
               "--workers", "1", "--no-progress", "--report", str(out)])
    assert rc == 0, capsys.readouterr()
    for name in ("results.csv", "transitions.csv", "mode_times.csv", "summary.json", "report.md"):
        assert (out / name).stat().st_size > 0, name
    header = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert {"episode", "seed", "outcome", "mission_time_s", "fault_system", "fault_actuator",
            "fault_grasper", "mode_path"} <= set(header)
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    text = capsys.readouterr().out
    assert "every model-checked value lies in its Monte Carlo interval" in text, text
    assert "P(success)" in text and "E[mission time]" in text


def test_distances_per_mode_add_up_to_the_distance_flown():
    from qrsim_ros.batch.missions import parse_mode_distances

    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 4, "faults": []})
    sim_positions = []

    def on_step(s, _r):
        sim_positions.append(s.true_state()[0, 0:3].copy())

    run_episode(sim, "mission", on_step=on_step)
    record = retrieve_columns(sim, None)  # type: ignore[arg-type]
    per_mode = parse_mode_distances(record["mode_distances"])
    assert set(per_mode) <= set(MODES) and per_mode["search"] > 5.0 and per_mode["transport"] > 1.0
    assert math.isclose(sum(per_mode.values()), record["distance_m"], rel_tol=1e-12)
    # at least the distance between the task steps' positions (ticks in between only add)
    steps = np.linalg.norm(np.diff(np.array(sim_positions), axis=0), axis=1).sum()
    assert steps <= record["distance_m"] <= steps * 1.2
    with pytest.raises(ValueError, match="not mode=metres"):
        parse_mode_distances("search:3")


def test_a_grasper_fault_in_transport_is_recovered_by_reacquiring_the_target():
    fault = {"id": "grasper", "kind": "grasper_release", "trigger": {"at_time_s": 24.0}, "duration_s": 0.02}
    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 3, "faults": [fault]})
    result = run_episode(sim, "mission")
    record = retrieve_columns(sim, result)
    segments = parse_mode_path(record["mode_path"])
    assert ("transport", "reacquire_target", "grasper") in [
        (a[0], b[0], b[2]) for a, b in itertools.pairwise(segments)]
    assert record["fault_grasper"] == 1 and result.outcome == "success"
    assert [m for m, _, _ in segments].count("grasp") == 3  # the dropped target was grasped again


def test_a_partly_charged_pack_charges_in_idle_before_the_take_off():
    # a pack 0.38 V short of full: Idle exits only at V_max (section 5.1.1), at 0.025 V/s
    sim = Simulator.from_scenario("retrieve_simplified", {
        "seed": 3, "faults": [], "vehicle": {"battery": {"linear_initial_v": 10.62}}})
    result = run_episode(sim, "mission")
    segments = parse_mode_path(retrieve_columns(sim, result)["mode_path"])
    first_idle = segments[0]
    assert first_idle[0] == "idle" and math.isclose(first_idle[1], (11.0 - 10.62) / 0.025, abs_tol=2.0)
    take_off = segments[1]
    assert take_off[0] == "take_off" and take_off[1] < 3.0  # no wound-up loop to unwind after charging
    assert result.outcome == "success"


def test_low_battery_returns_to_base_recharges_and_resumes_the_search():
    # warning at 10.9 V: 20 s of flight at -0.005 V/s
    sim = Simulator.from_scenario("retrieve_simplified", {
        "seed": 3, "faults": [], "retrieve": {"guidance": {"low_battery_v": 10.9}}})
    volts = []
    run_episode(sim, "mission", on_step=lambda s, _r: volts.append(float(s.battery.voltage_v[0])))
    segments = parse_mode_path(retrieve_columns(sim, None)["mode_path"])  # type: ignore[arg-type]
    modes = [m for m, _, _ in segments]
    k = modes.index("return_to_base")
    assert modes[k + 1:k + 6] == ["land", "idle", "take_off", "initialise", "search"]
    assert min(volts) <= 10.9 + 1e-9 and max(volts[len(volts) // 4:]) == pytest.approx(11.0, abs=0.01)
    assert modes.count("take_off") >= 2


def test_summary_lists_the_missions_outcomes_and_fault_events_with_intervals():
    from qrsim_ros.batch.summary import outcomes_for, summarise, table_lines
    from qrsim_ros.core.common.intervals import wilson_interval

    records = [{"episode": i, "seed": i, "outcome": o, "fault_actuator": a, "fault_grasper": 0}
               for i, (o, a) in enumerate([("success", 0), ("actuator_fault", 1), ("success", 0)])]
    s = summarise(records, outcomes_for("retrieve"))
    names = [o.name for o in s.outcomes]
    assert names[:2] == ["success", "actuator_fault"] and "all_persons_found" not in names
    events = {e.name: e for e in s.events}
    assert events["fault_actuator"].count == 1 and events["fault_actuator"].wilson95 == wilson_interval(1, 3)
    assert events["fault_grasper"].count == 0
    assert any(line.startswith("fault_actuator") for line in table_lines(s))


def test_transition_probabilities_are_each_modes_exit_shares():
    from qrsim_ros.batch.missions import transition_probabilities, transition_tables
    from qrsim_ros.verification.records import ModeStatistics

    stats = ModeStatistics()
    stats.add_episode([("idle", 0.0, ""), ("take_off", 1.0, ""), ("search", 5.0, ""),
                       ("return_to_base", 2.0, ""), ("land", 1.0, ""), ("idle", 0.1, "")],
                      "end_of_search_path")
    stats.add_episode([("idle", 0.0, ""), ("take_off", 1.0, ""), ("search", 3.0, ""),
                       ("emergency_land", 2.0, "actuator"), ("idle", 0.1, "")], "actuator_fault")
    p = transition_probabilities(stats)
    assert p["search", "return_to_base"] == (1, 0.5) and p["search", "emergency_land"] == (1, 0.5)
    assert p["idle", "take_off"] == (2, 0.5)  # idle's 4 exits: 2 take-offs, 2 episode ends
    assert p["start", "idle"] == (2, 1.0)
    table6 = "\n".join(transition_tables(stats))
    assert "| search | 0.5000 | 0.5000 |" in table6

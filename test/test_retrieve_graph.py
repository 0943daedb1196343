"""The retrieve mission over the node graph: mission_autopilot flies ireland_2016's 17-mode
mission through the flight controller, reading only sensor topics and the retrieve devices the referee
serves; the referee places the world as the in-process Simulator does and scores the episode."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from qrsim_ros.core.config.loader import load_yaml
from qrsim_ros.core.config.scenario import scenario_path
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.mission.modes import MODES

MODE_LINE = re.compile(r"\[mission_autopilot\] .*uav1: mode (\w+) \((\d+)\) at t=([\d.]+) s"
                       r"(?:, mission over: (\w+))?")
BRIEFING_LINE = re.compile(r"\[referee\] .*episode 1: landing site \(([-\d.]+), ([-\d.]+)\), drop site "
                           r"\(([-\d.]+), ([-\d.]+)\), targets (.*) \(north, east; m\)")


RECORD_LINE = re.compile(r"\[referee\] .*mission record: (.*)$", re.MULTILINE)


def _record(out: str) -> dict[str, object]:
    """The referee's mission record (results.csv's columns, floats as repr) of the run's episode."""
    m = RECORD_LINE.search(out)
    assert m, out[-5000:]
    return {key: ast.literal_eval(value) for key, value in
            (item.split("=", 1) for item in re.split(r", (?=\w+=)", m[1]))}


def _modes(out: str) -> list[tuple[str, int, float, str]]:
    return [(m[1], int(m[2]), float(m[3]), m[4] or "") for m in MODE_LINE.finditer(out)]


def _run(tmp_path: Path, scenario: str, seed: int,
         extra: tuple[str, ...] = ()) -> tuple[str, list[tuple[str, int, float, str]]]:
    from rosenv import assert_children_gone, require_nodes, require_ros, run_launch

    require_ros()
    require_nodes("vehicle_dynamics", "referee", "flight_controller", "mission_autopilot")
    # as fast as it goes: the mission reports its progress and the lockstep window waits for its answer to
    # every task step, so the pace cannot make its set points late (docs/RETRIEVE.md)
    argv = [scenario, "--seed", str(seed), "--lockstep", "--real-time-factor", "0", *extra]
    rc, out = run_launch(tmp_path, argv, timeout_s=400)
    assert rc == 0, out[-5000:]
    assert_children_gone(out, 8 + ("--record" in extra))
    modes = _modes(out)
    # every reported mode is one of Figure 5's, under its number, reported once per change
    assert modes and all(MODES[n - 1] == name for name, n, _, _ in modes), modes
    assert all(a[0:2] != b[0:2] or a[3] != b[3] for a, b in itertools.pairwise(modes)), modes
    assert [t for _, _, t, _ in modes] == sorted(t for _, _, t, _ in modes), modes
    return out, modes


@pytest.mark.graph
@pytest.mark.timeout(500)
def test_the_mission_autopilot_retrieves_both_targets_over_the_graph(tmp_path: Path) -> None:
    # seed 7: a 65 s mission in process, well inside the battery's 100 s to the low-voltage return
    bag = tmp_path / "bag"
    out, modes = _run(tmp_path, "retrieve", 7, ("--record", str(bag)))
    # the referee placed the world as the Simulator does for this seed (the task's placement stream)
    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 7})
    m = BRIEFING_LINE.search(out)
    assert m, out[-5000:]
    np.testing.assert_allclose([float(v) for v in m.groups()[0:4]],
                               [*sim.task.landing_site_ne, *sim.task.drop_site_ne], atol=1e-4)
    targets = [float(v) for v in re.findall(r"[-\d.]+", m[5])]
    np.testing.assert_allclose(targets, sim.task.targets.position_ned_m[:, 0:2].ravel(), atol=1e-4)
    # Figure 5's path of a clean mission: take-off, self-test passed, two grasps and drops, home
    names = [name for name, _, _, _ in modes]
    assert names[0:3] == ["take_off", "initialise", "search"], names
    assert names.count("grasp") == 2 and names.count("drop") == 2, names
    assert names[-3:] == ["return_to_base", "land", "idle"] and modes[-1][3] == "complete", names
    summary = [line for line in out.splitlines() if line.startswith("Summary: ")]
    assert len(summary) == 1 and "episode done (success)" in summary[0], out[-3000:]
    commands = _assert_flies_the_in_process_mission(out, sim)
    # the recorded bag gives the paper's single-run figures (Figures 8-10) from the graph's topics
    from qrsim_ros.plots import MISSION_FIGURES, render
    from qrsim_ros.plots.mission_bag import load_mission_bag

    run = load_mission_bag(bag)
    assert run is not None and run.targets_in_drop_zone() == 2
    # the bag's modes are the reported ones, up to the last the recorder got before the graph stopped (on a
    # loaded CI machine the recorder, stopped with the graph, missed the last 0.3 s: 'idle')
    segments = [m for m, _, _ in run.mode_segments()]
    assert segments == names[:len(segments)] and segments.count("drop") == 2, (segments, names)
    # Figure 9's dashed line: the mode's height command on uav1/mission/mode is the in-process guidance's
    # (the CSV's zcmd_0), mode segment by mode segment; the set-point modes' heights are parameters (equal
    # to the bit), Identify's and Reacquire target's the z the mode was entered at, an estimated position
    # (the lockstep agreement's 1e-9: the geodesy round trip of the GPS changes its last bits)
    got = [k for k, _ in itertools.groupby(zip(run.modes, run.zcmd_ned_m.tolist(), strict=True))]
    assert np.all(np.isfinite(run.zcmd_ned_m)) and len(got) <= len(commands), (got, commands)
    assert [m for m, _ in got] == [m for m, _ in commands[:len(got)]], (got, commands)
    for (mode, z_got), (_, z_want) in zip(got, commands, strict=False):
        if mode in ("identify", "reacquire_target"):
            assert z_got == pytest.approx(z_want, abs=1e-9), (mode, z_got, z_want)
        else:
            assert z_got == z_want, (mode, z_got, z_want)
    np.testing.assert_allclose(run.landing_ne_m, sim.task.landing_site_ne, atol=1e-9)
    assert run.battery_low_v == sim.task.retrieve.guidance.low_battery_v
    written = render(bag, tmp_path / "plots").written
    assert set(MISSION_FIGURES) <= set(written) and all(p.stat().st_size > 10_000 for p in written.values())


def _assert_flies_the_in_process_mission(out: str, sim: Simulator) -> list[tuple[str, float]]:
    # lockstep: the mission is a lockstep input (its inputs, set points and grasper commands of every task
    # step awaited), so the graph flies the in-process mission: the same mode path, every mode entered at
    # the same task step (times equal to the bit), and the same distance flown, a sum over every tick's
    # position, to the lockstep agreement's 1e-9 (the estimated position crosses the topics as GPS
    # latitude/longitude: the geodesy round trip changes the last bits)
    from qrsim_ros.policies.base import AutopilotView
    from qrsim_ros.policies.episode import run_episode
    from qrsim_ros.policies.mission import Mission

    policies: list[Mission] = []
    steps: list[tuple[str, float]] = []  # uav1's mode and height command after every task step (zcmd_0)

    def factory(view: AutopilotView) -> Mission:
        policies.append(Mission(view))
        return policies[-1]

    def on_step(_sim: Simulator, _reward: float) -> None:
        g = policies[0].guidance[0]
        steps.append((g.mode, g.height_command_z_ned_m()))

    result = run_episode(sim, "mission", factory=factory, on_step=on_step)
    summary = [line for line in out.splitlines() if line.startswith("Summary: ")]
    assert f"episode done ({result.outcome})" in summary[0], (result.outcome, summary)
    want = sim.task.mission_record(float(sim.time))
    got = _record(out)
    assert got["mode_path"] == want["mode_path"], (got["mode_path"], want["mode_path"])
    assert got["distance_m"] == pytest.approx(want["distance_m"], rel=1e-9, abs=1e-9)
    from qrsim_ros.batch.missions import parse_mode_distances

    got_d, want_d = parse_mode_distances(got["mode_distances"]), parse_mode_distances(want["mode_distances"])
    assert got_d == pytest.approx(want_d, abs=1e-8)  # [m] (a hover's distance: a sum of tiny steps)
    assert got["mission_time_s"] == pytest.approx(want["mission_time_s"], abs=1e-9)
    faults = ("fault_system", "fault_actuator", "fault_grasper", "system_faults", "targets_in_drop_zone")
    assert {k: got[k] for k in faults} == {k: want[k] for k in faults}
    return [k for k, _ in itertools.groupby(steps)]


@pytest.mark.graph
@pytest.mark.timeout(500)
def test_faults_over_the_lockstep_graph_fly_as_in_process(tmp_path: Path) -> None:
    """A grasper release while the first target is carried, then a rotor loss: the referee drops the target
    at the fault's tick, the flight controller's emergency landing is the detected actuator fault, and the
    mission (no set point while it lands: NaN answers) ends as in process."""
    with scenario_path("retrieve_simplified").open(encoding="utf-8") as f:
        data = load_yaml(f)
    data["faults"] = [
        {"id": "grasper", "kind": "grasper_release", "trigger": {"at_time_s": 32.0}},
        {"id": "actuator", "kind": "rotor_loss", "rotor": 0, "trigger": {"at_time_s": 45.0}},
    ]
    scenario = tmp_path / "retrieve_faults.yaml"
    scenario.write_text(yaml.safe_dump(data), encoding="utf-8")
    out, modes = _run(tmp_path, str(scenario), 7)
    names = [name for name, _, _, _ in modes]
    assert "reacquire_target" in names and names[-1] == "emergency_land", names
    _assert_flies_the_in_process_mission(out, Simulator.from_scenario(str(scenario), {"seed": 7}))


@pytest.mark.graph
@pytest.mark.timeout(500)
def test_a_failed_self_test_over_the_graph_aborts_the_mission(tmp_path: Path) -> None:
    """P_s = 1 and system_fault: abort: the referee's uavN/self_test service answers 'failed', the mission
    lands at once and reports the system fault, and the referee scores it."""
    with scenario_path("retrieve_simplified").open(encoding="utf-8") as f:
        data = load_yaml(f)
    data["retrieve"]["self_test_failure_probability"] = 1.0
    data["retrieve"]["guidance"]["system_fault"] = "abort"
    data["faults"] = []
    scenario = tmp_path / "retrieve_system_fault.yaml"
    scenario.write_text(yaml.safe_dump(data), encoding="utf-8")
    out, modes = _run(tmp_path, str(scenario), 3)
    names = [name for name, _, _, _ in modes]
    assert names == ["take_off", "initialise", "land", "idle"], names
    assert modes[-1][3] == "system_fault"
    summary = [line for line in out.splitlines() if line.startswith("Summary: ")]
    assert len(summary) == 1 and "episode done (system_fault)" in summary[0], out[-3000:]


@pytest.mark.graph
def test_the_referee_ignores_a_mode_with_a_non_finite_height_command(capfd: pytest.CaptureFixture[str]
                                                                     ) -> None:
    """uavN/mission/mode is validated on receipt: a non-finite height command is ignored with a warning
    naming the topic (as a bad mode number or mission end), a finite one is the mode report. The referee
    part runs on a real rclpy node that has what the referee node gives it (run id, counters)."""
    from rosenv import free_domain, require_ros

    require_ros()
    import rclpy
    from qrsim_ros.msg import GrasperCommand, MissionMode
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions
    from visualization_msgs.msg import MarkerArray

    from qrsim_ros.ros.node import Counters
    from qrsim_ros.ros.retrieve_referee import RetrieveReferee
    from qrsim_ros.ros.stamps import stamp_from_tick

    class RefereeHost(Node):
        run_id = "test-run"
        tick = 0  # the last tick the referee stepped

        def __init__(self, context: rclpy.Context) -> None:
            super().__init__("retrieve_referee_host", context=context)
            self.counters = Counters(self, ["modes_rejected", "modes_late"])

        def foreign_run(self, msg_run_id: str, topic: str) -> bool:
            return False

    sim = Simulator.from_scenario("retrieve_simplified", {"seed": 7})
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=free_domain(), signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = RefereeHost(context)
        referee = RetrieveReferee(node, sim.task, node.create_publisher(MarkerArray, "markers", 1))
        number = MODES.index("take_off") + 1
        referee._on_mode(0, MissionMode(mode="take_off", number=number, height_command_z_ned_m=float("nan")))
        assert sim.task.mode[0] == "idle"
        assert node.counters.values["modes_rejected"] == 1
        err = capfd.readouterr().err
        assert "uav1/mission/mode: height_command_z_ned_m is not finite (nan)" in err, err[-2000:]
        referee._on_mode(0, MissionMode(mode="take_off", number=number, height_command_z_ned_m=-1.0))
        assert sim.task.mode[0] == "idle"  # stamped t_0: it holds from tick 1
        referee.apply_modes(1)
        assert sim.task.mode[0] == "take_off" and node.counters.values["modes_rejected"] == 1

        # a report is booked from the tick after its stamp, whenever it arrives; one that arrives after
        # that tick was stepped counts from now, and is counted
        def mode(name: str, sequence: int, tick: int) -> MissionMode:
            msg = MissionMode(mode=name, number=MODES.index(name) + 1, sequence=sequence,
                              height_command_z_ned_m=-1.0)
            msg.header.stamp = stamp_from_tick(tick)
            return msg

        node.tick = 3
        referee._on_mode(0, mode("initialise", 2, 5))
        referee.apply_modes(5)
        assert sim.task.mode[0] == "take_off"
        referee.apply_modes(6)
        assert sim.task.mode[0] == "initialise" and node.counters.values["modes_late"] == 0
        node.tick = 10
        referee._on_mode(0, mode("search", 3, 7))
        assert sim.task.mode[0] == "search" and node.counters.values["modes_late"] == 1
        # lockstep: a grasper command naming report 4 is in only once report 4 is
        command = GrasperCommand(closed=False, mode_sequence=4)
        command.header.stamp = stamp_from_tick(50)
        referee._on_grasper_command(0, command)
        assert not referee.commands_in(50)
        referee._on_mode(0, mode("identify", 4, 50))
        assert referee.commands_in(50) and sim.task.mode[0] == "search"
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)

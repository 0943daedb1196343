"""Faults over the node graph (docs/FAULTS.md "Graph"): real processes, real DDS.

vehicle_dynamics owns the scenario's fault schedule (``FaultEffects``, built as the Simulator's) and
applies the fleet's effects; it publishes the active faults on ``/sim/faults`` (latched) and serves
``/sim/inject_fault`` and ``/sim/clear_fault``.

1. Lockstep with wind_field (test_lockstep_agreement's set-up: keep_spot_x10, 2 vehicles, constant
   attitude commands held from tick 0), the scenario file with a timed rotor_loss then a motor_stuck on
   vehicle 0 and a permanent comm_loss then a rotor_degradation on vehicle 1: the ground truth on
   /sim/vehicle_status equals the Simulator's for the same file and seed through the onsets and the
   end of the rotor fault (each fault changes the flight from its tick on), and /sim/faults goes
   through the expected sets at the expected ticks (the triggers' documented rule: the first tick
   whose time is >= T; a fault of duration D ends at the first tick >= since + D).
2. Free running, one vehicle: a malformed injection or clearing is answered success=false with a
   message and the node goes on; an injected rotor_loss appears on /sim/faults and cuts the thrust;
   clearing it empties /sim/faults; an injected comm_loss makes the node ignore a new cmd/attitude,
   which acts once the fault is cleared and the command sent again.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from rosenv import free_domain, require_ros, ros_env, scenario_file, send_attitude_until
from test_lockstep_agreement import ACTIONS, SEED, TOLERANCE
from test_node_dynamics import NodeProcess, Probe, latched, lockstep_run, reliable, stop_all, wait_for

from qrsim_ros.ros.qos import QOS_LATCHED_STREAM

pytestmark = pytest.mark.graph

#: The scenario's faults: vehicle 0 loses rotor 1 from t = 0.5 s for 1 s, then its rotor 3 sticks at
#: t = 1.6 s; vehicle 1's link is lost from t = 0.3 s on and its rotor 0 degrades to 70 % at t = 1.2 s.
FAULTS = [
    {"id": "rotor0", "kind": "rotor_loss", "vehicles": [0], "rotor": 1, "trigger": {"at_time_s": 0.5},
     "duration_s": 1.0},
    {"id": "link1", "kind": "comm_loss", "vehicles": [1], "trigger": {"at_time_s": 0.3}},
    {"id": "weak1", "kind": "rotor_degradation", "vehicles": [1], "rotor": 0, "factor": 0.7,
     "trigger": {"at_time_s": 1.2}},
    {"id": "stuck0", "kind": "motor_stuck", "vehicles": [0], "rotor": 3, "trigger": {"at_time_s": 1.6}},
]
DURATION_S = 2.0


def faulty_scenario(tmp_path: Path, faults: list[dict[str, Any]] = FAULTS, name: str = "faults",
                    rotor_loss_failsafe: str = "none") -> Path:
    """keep_spot_x10 with ``faults`` and commands held forever (vehicle.command_timeout_s 0, as the node's
    command_timeout_s 0 in the lockstep set-up, so both front ends hold the last command alike)."""
    return scenario_file(tmp_path, "keep_spot_x10", f"keep_spot_x10_{name}", faults=faults,
                         vehicle={"command_timeout_s": 0.0, "rotor_loss_failsafe": rotor_loss_failsafe})


def simulate(scenario: str, n_ticks: int) -> dict[int, np.ndarray]:
    """The Simulator's true states (N, 13) after every tick 0 .. n_ticks with ACTIONS held."""
    from qrsim_ros.core.engine.simulator import Simulator

    sim = Simulator.from_scenario(scenario, {"seed": SEED, "num_vehicles": len(ACTIONS)})
    assert sim.ticks_per_task_step == 1
    out = {0: sim.true_state().copy()}
    for k in range(1, n_ticks + 1):
        sim.step(ACTIONS)
        out[k] = sim.true_state().copy()
    return out


def fault_set(msg: Any) -> list[tuple[str, int, str]]:
    return [(f.id, f.vehicle, f.kind) for f in msg.faults]


@pytest.mark.parametrize("rotor_loss_failsafe", ["none", "emergency_land"])
def test_lockstep_faults_agree_with_the_simulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  rotor_loss_failsafe: str) -> None:
    """With ``emergency_land`` vehicle 0 flies ireland_2016's emergency controller from the rotor loss on
    (latched after the fault ends), in the node as in the Simulator, and says so in its status."""
    require_ros()
    from qrsim_ros.msg import ActiveFaults, AttitudeCommand, TickProgress, VehicleStatus

    from qrsim_ros.ros.from_messages import fleet_arrays
    from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC
    from qrsim_ros.ros.qos import QOS_TICK_PROGRESS
    from qrsim_ros.ros.stamps import tick_of_stamp

    n = len(ACTIONS)
    scenario = str(faulty_scenario(tmp_path, rotor_loss_failsafe=rotor_loss_failsafe))
    states: dict[int, np.ndarray] = {}
    status_faults: dict[int, list[tuple[str, int, str]]] = {}  # the faults each tick's status carries
    failsafes: dict[int, list[str]] = {}
    moved = threading.Event()
    faults: list[tuple[int, Any]] = []  # (tick of the stamp, message) in arrival order
    total = round(DURATION_S / 0.02)
    with lockstep_run(tmp_path, monkeypatch, scenario, n, DURATION_S, SEED) as run:
        node = run.node
        # a lockstep consumer: the clock runs at most the lockstep window ahead of the statuses taken here,
        # so the status writer's history (100) never overwrites one this probe has not taken yet
        progress = node.create_publisher(TickProgress, TICK_PROGRESS_TOPIC, QOS_TICK_PROGRESS)
        complete = [-1]

        def on_status(msg: Any) -> None:
            arrays = fleet_arrays(msg, n)
            assert not isinstance(arrays, str), arrays
            states.setdefault(int(msg.tick), arrays[0])
            status_faults.setdefault(int(msg.tick), fault_set(msg) if msg.faults_listed else None)
            failsafes.setdefault(int(msg.tick), list(msg.failsafe))
            if msg.tick >= 1:
                moved.set()
            k = complete[0]
            while k + 1 in states:
                k += 1
            if k > complete[0]:
                complete[0] = k
                progress.publish(TickProgress(node="/test_probe", episode=1, tick=k))

        node.create_subscription(VehicleStatus, "/sim/vehicle_status", on_status, reliable())
        # every change, as a fault log reads it (the writer keeps the last 100 changes; a depth-1 reader
        # could drop one that the executor had not taken yet)
        node.create_subscription(ActiveFaults, "/sim/faults",
                                 lambda m: faults.append((tick_of_stamp(m.header.stamp), m)),
                                 QOS_LATCHED_STREAM)
        pubs = [node.create_publisher(AttitudeCommand, f"/uav{i + 1}/cmd/attitude", reliable(10))
                for i in range(n)]
        # the clock is held at tick 0 until every vehicle has a command: send them once tick 0 and the
        # latched fault set of tick 0 are here, again and again (stamp 0, held forever) until it moves
        wait_for(lambda: 0 in states and faults, 60, "tick 0 and /sim/faults", run.procs)
        send_attitude_until(lambda: 1 in states, pubs, ACTIONS, moved)
        run.wait_for_the_end(60)
        wait_for(lambda: all(k in states for k in range(total + 1)), 10, "every tick's status")

    # /sim/faults: the set at tick 0 (none), then each change at its tick, nothing else
    changes = [(k, fault_set(m)) for k, m in faults]
    assert changes == [
        (0, []),
        (15, [("link1", 1, "comm_loss")]),                            # 0.3 s
        (25, [("rotor0", 0, "rotor_loss"), ("link1", 1, "comm_loss")]),  # 0.5 s
        (60, [("rotor0", 0, "rotor_loss"), ("link1", 1, "comm_loss"), ("weak1", 1, "rotor_degradation")]),
        (75, [("link1", 1, "comm_loss"), ("weak1", 1, "rotor_degradation")]),  # 0.5 s + 1.0 s
        (80, [("link1", 1, "comm_loss"), ("weak1", 1, "rotor_degradation"), ("stuck0", 0, "motor_stuck")]),
    ], changes
    at25 = {f.id: f for f in faults[2][1].faults}
    assert at25["rotor0"].since_s == pytest.approx(0.5) and at25["rotor0"].until_s == pytest.approx(1.5)
    assert yaml.safe_load(at25["rotor0"].params_yaml) == {"rotor": 1}
    assert at25["link1"].since_s == pytest.approx(0.3) and math.isnan(at25["link1"].until_s)
    assert all(m.episode == 1 for _, m in faults)
    # /sim/vehicle_status lists the set active at a tick (what the sensor nodes apply) on the ticks it
    # changed and once a second (multiples of 50); on the others its list is empty and not listed
    change_ticks = {t for t, _ in changes}
    for k in range(total + 1):
        if k in change_ticks or k % 50 == 0:
            assert status_faults[k] == [s for t, s in changes if t <= k][-1], k
        else:
            assert status_faults[k] is None, k

    # the ground truth: the Simulator's, tick by tick, through the onsets and the end of the rotor fault
    ref = simulate(scenario, total)
    err = max(float(np.max(np.abs(states[k] - ref[k]))) for k in range(total + 1))
    assert err <= TOLERANCE, err
    # not vacuous: without the faults vehicle 0 flies differently from tick 25 on (and not before)
    plain = simulate("keep_spot_x10", total)
    np.testing.assert_array_equal(plain[24], ref[24])
    assert np.abs(plain[total][0] - ref[total][0]).max() > 1e-3
    assert ref[30][0, 12] < 0.9 * plain[30][0, 12]  # three rotors of four (two with the failsafe)
    expected = "emergency_land" if rotor_loss_failsafe == "emergency_land" else ""
    assert failsafes[24][0] == "" and failsafes[25][0] == expected and failsafes[total][0] == expected
    # vehicle 1 (its held commands are unaffected by the link loss) changes with its weak rotor at tick 60
    np.testing.assert_array_equal(plain[59][1], ref[59][1])
    assert np.abs(plain[total][1] - ref[total][1]).max() > 1e-3
    if rotor_loss_failsafe == "none":  # vehicle 0's stuck motor from tick 80 (not emergency landing)
        unstuck = simulate(str(faulty_scenario(tmp_path, FAULTS[:3], "unstuck")), total)
        np.testing.assert_array_equal(unstuck[79], ref[79])
        assert np.abs(unstuck[total][0] - ref[total][0]).max() > 1e-4


def call(client: Any, request: Any, procs: list[NodeProcess]) -> Any:
    future = client.call_async(request)
    wait_for(future.done, 10, f"the answer of {client.srv_name}", procs)
    return future.result()


def test_inject_and_clear_faults_through_the_services(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    require_ros()
    from qrsim_ros.msg import ActiveFaults, AttitudeCommand, VehicleStatus
    from qrsim_ros.srv import ClearFault, InjectFault

    from qrsim_ros.ros.from_messages import fleet_arrays
    from qrsim_ros.ros.stamps import tick_of_stamp

    domain_id = free_domain()
    env = ros_env(tmp_path, domain_id)
    # keep_spot: one vehicle; no wind_field (the wind stays 0); commands held forever
    params = {"scenario": "keep_spot", "seed": SEED, "lockstep": False, "real_time_factor": 1.0,
              "command_timeout_s": 0.0, "tf_every_n_ticks": 0}
    procs = [NodeProcess("vehicle_dynamics", params, env, tmp_path)]
    probe = Probe(tmp_path, domain_id, monkeypatch)
    status: dict[int, np.ndarray] = {}  # tick -> state (13,) of vehicle 0
    latest: list[Any] = []
    lock = threading.Lock()
    try:
        node = probe.node

        def on_status(msg: Any) -> None:
            arrays = fleet_arrays(msg, 1)
            assert not isinstance(arrays, str), arrays
            with lock:
                status[int(msg.tick)] = arrays[0][0]

        def last_tick() -> int:
            with lock:
                return max(status, default=-1)

        node.create_subscription(VehicleStatus, "/sim/vehicle_status", on_status, reliable())
        node.create_subscription(ActiveFaults, "/sim/faults", latest.append, latched())
        cmd_pub = node.create_publisher(AttitudeCommand, "/uav1/cmd/attitude", reliable(10))
        inject = node.create_client(InjectFault, "/sim/inject_fault")
        clear = node.create_client(ClearFault, "/sim/clear_fault")
        wait_for(lambda: inject.service_is_ready() and clear.service_is_ready() and last_tick() >= 0
                 and latest, 60, "the services, the status and /sim/faults", procs)
        assert fault_set(latest[-1]) == []

        def command(throttle: float) -> None:
            m = AttitudeCommand()
            m.header.frame_id = "uav1/base_link_frd"
            m.throttle, m.battery_voltage = throttle, 12.0
            cmd_pub.publish(m)
            assert cmd_pub.wait_for_all_acked(rclpy_duration(5.0))

        def wait_ticks(count: int) -> int:
            start = last_tick()
            wait_for(lambda: last_tick() >= start + count, 30, f"{count} more ticks", procs)
            return last_tick()

        def inject_yaml(text: str) -> Any:
            return call(inject, InjectFault.Request(fault_yaml=text), procs)

        def clear_req(fault_id: str = "", kind: str = "", vehicle: int = -1) -> Any:
            return call(clear, ClearFault.Request(id=fault_id, kind=kind, vehicle=vehicle), procs)

        # malformed requests: success=false, one message each, the node goes on
        bad = {"kind: [": "not valid YAML",
               "[1, 2]": "mapping",
               "{kind: rotor_los, vehicles: [0]}": "rotor_los",
               "{kind: rotor_loss, vehicles: [3], rotor: 1}": "vehicles",
               "{kind: rotor_loss, vehicles: [0], rotor: 7}": "rotor",
               "{kind: gps_degradation, vehicles: [0], sigma_factor: abc}": "sigma_factor",
               "!!python/object/apply:os.system [echo]": "not valid YAML",
               "{kind: comm_loss, vehicles: {a: 1}}": "vehicles",
               "{kind: comm_loss, trigger: {at_time_s: .nan}}": "at_time_s"}
        for text, words in bad.items():
            r = inject_yaml(text)
            assert not r.success and r.id == "" and words in r.message, (text, r.message)
        for req, words in ((("", "", -1), "id or a kind"), (("nope", "", -1), "nothing to clear"),
                           (("", "bogus", -1), "bogus"), (("", "comm_loss", 4), "vehicle 4")):
            r = clear_req(*req)
            assert not r.success and words in r.message, (req, r.message)
        wait_ticks(5)
        assert procs[0].proc.poll() is None

        # the status stream may lag the node: every check is at a tick counted from a /sim/faults
        # change (stamped with the tick it acted at), never from when a message arrived here
        def state_at(k: int) -> np.ndarray:
            wait_for(lambda: k in status, 30, f"the status of tick {k}", procs)
            return status[k]

        def change(expected: list[tuple[str, int, str]], what: str) -> int:
            wait_for(lambda: fault_set(latest[-1]) == expected, 10, what, procs)
            return tick_of_stamp(latest[-1].header.stamp)

        # hover, then an injected rotor loss: on /sim/faults, and the thrust drops (3 rotors of 4)
        command(0.59)
        k0 = last_tick()
        thrust_before = state_at(k0 + 50)[12]
        r = inject_yaml("{id: lost_rotor, kind: rotor_loss, vehicles: [0], rotor: 1}")
        assert r.success and r.id == "lost_rotor", r.message
        k1 = change([("lost_rotor", 0, "rotor_loss")], "the injected fault on /sim/faults")
        assert k1 > k0 + 50
        f = latest[-1].faults[0]
        assert math.isnan(f.until_s) and yaml.safe_load(f.params_yaml) == {"rotor": 1}
        assert f.since_s == pytest.approx(k1 * 0.02)
        assert state_at(k1 - 1)[12] == pytest.approx(thrust_before, rel=0.02)
        assert state_at(k1 + 25)[12] < 0.85 * thrust_before, (thrust_before, status[k1 + 25][12])
        assert abs(state_at(k1 + 25)[11]) > 0.2  # the unbalanced rotors spin it (yaw rate, rad/s)
        r = clear_req("lost_rotor")
        assert r.success and "lost_rotor" in r.message, r.message
        k2 = change([], "the cleared fault gone from /sim/faults")
        assert state_at(k2 + 40)[12] == pytest.approx(thrust_before, rel=0.05)

        # comm_loss: a cmd/attitude that arrives while the link is down is ignored (also after the link
        # returns: it was never taken); one sent after flies
        r = inject_yaml("{kind: comm_loss, vehicles: [0]}")
        assert r.success and r.id.startswith("comm_loss."), r.message
        k3 = change([(r.id, 0, "comm_loss")], "comm_loss on /sim/faults")
        command(0.75)  # delivered (acknowledged by the node's reader) after tick k3, while the link is lost
        r = clear_req(kind="comm_loss", vehicle=0)
        assert r.success, r.message
        k4 = change([], "comm_loss gone from /sim/faults")
        assert k4 > k3
        assert state_at(k4 + 25)[12] == pytest.approx(thrust_before, rel=0.02)
        command(0.75)
        # a fault without effect here (keep_spot's task has no grasper; the retrieve task's drops what it
        # carries) marks a tick after the command arrived
        r = inject_yaml("{id: mark, kind: grasper_release, vehicles: [0]}")
        assert r.success, r.message
        k5 = change([("mark", 0, "grasper_release")], "the mark on /sim/faults")
        assert state_at(k5 + 25)[12] > 1.1 * thrust_before, (thrust_before, status[k5 + 25][12])
        # a sensor fault is accepted like any other (the sensor nodes act on it: test_sensor_faults_graph)
        r = inject_yaml("{kind: gps_outage, vehicles: [0]}")
        assert r.success and r.id.startswith("gps_outage."), r.message
        change([("mark", 0, "grasper_release"), (r.id, 0, "gps_outage")],
               "the injected outage on /sim/faults")
        assert procs[0].proc.poll() is None
    finally:
        probe.close()
        codes = stop_all(procs)
    assert codes == [0], procs[0].stderr()


def rclpy_duration(seconds: float) -> Any:
    from rclpy.duration import Duration

    return Duration(nanoseconds=int(seconds * 1e9))


def test_self_test_and_cell_failures_act_in_vehicle_dynamics(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-off fleet effects in the graph: a failed self test (vehicle 1, from the start-up step)
    leaves the vehicle invalid from tick 0 with the reason ``self_test_failure``; a cell failure of
    1.0 V on vehicle 0 at t = 1 s (tick 50) drops its pack's voltage on uav1/battery by that step
    (and a little more: the same load draws more current through the pack's resistance)."""
    require_ros()
    from qrsim_ros.msg import ActiveFaults, VehicleStatus
    from sensor_msgs.msg import BatteryState

    from qrsim_ros.ros.stamps import tick_of_stamp

    path = scenario_file(tmp_path, "keep_spot_x10", "keep_spot_x10_one_offs", faults=[
        {"id": "selftest", "kind": "self_test_failure", "vehicles": [1], "trigger": {"at_step": 0}},
        {"id": "cell", "kind": "battery_cell_failure", "vehicles": [0], "voltage_step_v": 1.0,
         "trigger": {"at_time_s": 1.0}},
    ])
    domain_id = free_domain()
    env = ros_env(tmp_path, domain_id)
    params = {"scenario": str(path), "seed": SEED, "num_vehicles": 2, "lockstep": False,
              "real_time_factor": 1.0, "tf_every_n_ticks": 0, "battery_every_n_ticks": 5, "duration_s": 2.0,
              "start_subscribers": 1}  # tick 0 waits for this test's status subscription
    procs = [NodeProcess("vehicle_dynamics", params, env, tmp_path)]
    probe = Probe(tmp_path, domain_id, monkeypatch)
    status: dict[int, Any] = {}
    volts: dict[int, float] = {}
    latest: list[Any] = []
    try:
        node = probe.node
        node.create_subscription(VehicleStatus, "/sim/vehicle_status",
                                 lambda m: status.setdefault(int(m.tick), m), reliable())
        node.create_subscription(BatteryState, "/uav1/battery",
                                 lambda m: volts.setdefault(tick_of_stamp(m.header.stamp), m.voltage),
                                 reliable())
        node.create_subscription(ActiveFaults, "/sim/faults", latest.append, latched())
        dyn = procs[0]
        wait_for(lambda: dyn.proc.poll() is not None, 60, "vehicle_dynamics to finish duration_s")
        assert dyn.proc.returncode == 0, dyn.stderr()
        wait_for(lambda: latest and any(k >= 60 for k in volts) and max(status, default=-1) >= 60, 10,
                 "/sim/faults, the battery and the status")
    finally:
        probe.close()
        codes = stop_all(procs)
    assert codes == [0], procs[0].stderr()
    # the self test: invalid from tick 0 on
    assert min(status) == 0
    for k in sorted(status):
        assert list(status[k].valid) == [True, False], k
        assert status[k].invalid_reason[1] == "self_test_failure", (k, status[k].invalid_reason)
    # the last /sim/faults: both faults active (permanent), the self test since t = 0
    assert sorted(fault_set(latest[-1])) == [("cell", 0, "battery_cell_failure"),
                                             ("selftest", 1, "self_test_failure")]
    since = {f.id: f.since_s for f in latest[-1].faults}
    assert since == pytest.approx({"cell": 1.0, "selftest": 0.0})
    # the cell failure: 1 V less from tick 50 on
    before = [k for k in volts if k < 50]
    after = [k for k in volts if 50 <= k <= 60]
    assert before and after, sorted(volts)
    drop = volts[max(before)] - volts[min(after)]
    assert 1.0 <= drop < 1.15, drop  # the step, plus the higher current under the same load

"""The battery over the node graph (issue 14, "Energy"): real processes, real DDS.

vehicle_dynamics steps the same ``FleetEnergy`` as the in-process Simulator and publishes
``uavN/battery`` (sensor_msgs/BatteryState) every 5 ticks. In lockstep with the same seed and commands
(test_lockstep_agreement's set-up: wind_field + vehicle_dynamics, constant attitude commands held from
tick 0), every message carries the Simulator's pack values of that tick, and the fields follow the
message's conventions (current negative while discharging, percentage 0..1, charge in Ah, LIPO,
present, one voltage per cell, frame ``uavN/base_link``, stamp = the tick's simulated time).

On the rotor airframe the pack's voltage caps the motor speed (docs/ENERGY.md "Motor speed"): a rotor
vehicle whose pack empties in flight falls and becomes invalid on the ground in vehicle_dynamics tick for
tick as in the Simulator (``test_a_rotor_vehicle_whose_pack_empties_falls_in_the_graph_as_in_process``).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from rosenv import free_domain, require_ros, ros_env, send_attitude_until
from test_node_dynamics import NodeProcess, Probe, reliable, stop_all, wait_for

from qrsim_ros.core.config.loader import load_yaml
from qrsim_ros.core.config.scenario import scenario_path

pytestmark = pytest.mark.ros

SEED = 4242
SCENARIO = "keep_spot_x10"
#: Attitude actions (FRD) per vehicle: different throttles, so the two packs differ.
ACTIONS = np.array([[0.02, -0.015, 0.60, 0.10, 12.0],
                    [-0.01, 0.02, 0.64, -0.20, 11.5]])
DURATION_S = 4.0
EVERY = 5


def simulate(n_ticks: int) -> dict[int, dict[str, np.ndarray]]:
    """The Simulator's pack values after every tick (0 .. n_ticks)."""
    from qrsim_ros.core.engine.simulator import Simulator

    sim = Simulator.from_scenario(SCENARIO, {"seed": SEED, "num_vehicles": len(ACTIONS)})
    assert sim.ticks_per_task_step == 1 and sim.battery.on

    def read() -> dict[str, np.ndarray]:
        b = sim.battery
        return {"voltage": b.voltage_v, "current": b.current_a, "percentage": b.percentage}

    out = {0: read()}
    for k in range(1, n_ticks + 1):
        sim.step(ACTIONS)
        out[k] = read()
    assert sim.valid.all()
    return out


def test_lockstep_graph_publishes_the_simulators_battery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    require_ros()
    from nav_msgs.msg import Odometry
    from qrsim_ros.msg import AttitudeCommand
    from sensor_msgs.msg import BatteryState

    from qrsim_ros.ros.stamps import tick_of_stamp

    n = len(ACTIONS)
    domain_id = free_domain()
    env = ros_env(tmp_path, domain_id)
    common = {"scenario": SCENARIO, "seed": SEED, "num_vehicles": n}
    dynamics = {**common, "lockstep": True, "real_time_factor": 0.0, "wait_for_commands": True,
                "command_timeout_s": 0.0, "duration_s": DURATION_S, "tf_every_n_ticks": 0,
                "battery_every_n_ticks": EVERY}
    procs = [NodeProcess("wind_field", common, env, tmp_path),
             NodeProcess("vehicle_dynamics", dynamics, env, tmp_path)]
    probe = Probe(tmp_path, domain_id, monkeypatch)
    batteries: dict[tuple[int, int], Any] = {}
    odom0: set[int] = set()
    moved = threading.Event()
    stop = threading.Event()
    total = round(DURATION_S / 0.02)
    try:
        node = probe.node

        def on_battery(i: int, msg: Any) -> None:
            batteries[(tick_of_stamp(msg.header.stamp), i)] = msg

        def on_odom(i: int, msg: Any) -> None:
            k = tick_of_stamp(msg.header.stamp)
            if k == 0:
                odom0.add(i)
            elif i == 0:
                moved.set()

        for i in range(n):
            node.create_subscription(BatteryState, f"/uav{i + 1}/battery", lambda m, i=i: on_battery(i, m),
                                     reliable())
            node.create_subscription(Odometry, f"/uav{i + 1}/ground_truth/odom", lambda m, i=i: on_odom(i, m),
                                     reliable())
        pubs = [node.create_publisher(AttitudeCommand, f"/uav{i + 1}/cmd/attitude", reliable(10))
                for i in range(n)]
        # the clock is held at tick 0 until every vehicle has a command; send them once our battery
        # subscriptions are matched (the publishers are discovered), then until the clock moves
        wait_for(lambda: all(node.count_publishers(f"/uav{i + 1}/battery") >= 1 for i in range(n))
                 and len(odom0) == n, 60, "the battery publishers and tick 0", procs)
        send_attitude_until(moved.is_set, pubs, ACTIONS, moved)
        dyn = procs[1]
        wait_for(lambda: dyn.proc.poll() is not None, 60, "vehicle_dynamics to finish duration_s", procs[:1])
        assert dyn.proc.returncode == 0, dyn.stderr()
        expected = [(k, i) for k in range(EVERY, total + 1, EVERY) for i in range(n)]
        wait_for(lambda: all(key in batteries for key in expected), 10, "every battery message")
    finally:
        stop.set()
        probe.close()
        codes = stop_all(procs)
    assert codes == [0, 0], [p.stderr() for p in procs]
    assert all(k % EVERY == 0 for k, _ in batteries)  # published every 5 ticks only

    ref = simulate(total)
    f32 = np.float32
    for (k, i), msg in sorted(batteries.items()):
        r = ref[k]
        # same seed, same commands: the Simulator's values, to the message's float32
        assert msg.voltage == f32(r["voltage"][i]), (k, i, msg.voltage, r["voltage"][i])
        assert msg.current == f32(-r["current"][i]), (k, i)
        assert msg.percentage == f32(r["percentage"][i]), (k, i)
        # sensor_msgs/BatteryState conventions
        assert msg.header.frame_id == f"uav{i + 1}/base_link"
        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == k * 20_000_000
        # discharging: negative current (tick 0, after the reset, carries no load yet: 0 A)
        assert (msg.current < 0 if k else msg.current == 0.0)
        assert msg.power_supply_status == BatteryState.POWER_SUPPLY_STATUS_DISCHARGING
        assert 0.0 <= msg.percentage <= 1.0
        assert msg.design_capacity == f32(6.0) and msg.capacity == f32(6.0)
        assert msg.charge == pytest.approx(msg.percentage * 6.0, rel=1e-6)
        assert msg.power_supply_technology == BatteryState.POWER_SUPPLY_TECHNOLOGY_LIPO and msg.present
        assert msg.power_supply_health == BatteryState.POWER_SUPPLY_HEALTH_GOOD
        assert len(msg.cell_voltage) == 3 and sum(msg.cell_voltage) == pytest.approx(msg.voltage, rel=1e-6)
        assert msg.location == f"uav{i + 1}" and msg.serial_number
        assert np.isnan(msg.temperature)
    # not vacuous: the packs drain, and differently (different throttles)
    last = max(k for k, _ in batteries)
    first = min(k for k, _ in batteries)
    for i in range(n):
        assert batteries[(last, i)].percentage < batteries[(first, i)].percentage
    assert batteries[(last, 0)].voltage != batteries[(last, 1)].voltage


#: The hover row of the identified model (the rotor airframe's controller flies it as a hover).
HOVER_ROW = np.array([[0.0, 0.0, 0.59004353928, 0.0, 12.0]])
EMPTY_DURATION_S = 7.6  # the pack empties at 5.04 s, the vehicle touches the ground at 7.20 s


def empty_rotor_scenario(tmp_path: Path) -> Path:
    """keep_spot_x10 (wind, turbulence, noisy sensors) on the rotor airframe with a pack at soc 0.03 and
    no low-battery failsafe: it runs empty in flight."""
    with scenario_path(SCENARIO).open(encoding="utf-8") as f:
        data = load_yaml(f)  # the project's reader: "on" is a key, not YAML 1.1's True
    data["name"] = "keep_spot_x10_empty_rotor"
    vehicle = data.setdefault("vehicle", {})
    vehicle["airframe"] = "rotor"
    vehicle["battery"] = {"initial_soc": 0.03, "low_battery_failsafe": "off"}
    path = tmp_path / "keep_spot_x10_empty_rotor.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_rotor_vehicle_whose_pack_empties_falls_in_the_graph_as_in_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vehicle_dynamics (lockstep, with wind_field) flies one rotor vehicle on the hover row until its pack
    empties and it falls: every tick's ground truth, validity and reason on /sim/vehicle_status and every
    uavN/battery message equal the in-process Simulator's (same scenario file, seed and commands), the
    motors stop and the vehicle is invalid (``EMPTY_PACK_REASON``) from the same tick on."""
    require_ros()
    from qrsim_ros.msg import AttitudeCommand, VehicleStatus
    from sensor_msgs.msg import BatteryState

    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.core.vehicles.airframes import EMPTY_PACK_REASON
    from qrsim_ros.ros.stamps import tick_of_stamp

    scenario = str(empty_rotor_scenario(tmp_path))
    domain_id = free_domain()
    env = ros_env(tmp_path, domain_id)
    common = {"scenario": scenario, "seed": SEED, "num_vehicles": 1}
    dynamics = {**common, "lockstep": True, "real_time_factor": 0.0, "wait_for_commands": True,
                "command_timeout_s": 0.0, "duration_s": EMPTY_DURATION_S, "tf_every_n_ticks": 0,
                "battery_every_n_ticks": EVERY}
    procs = [NodeProcess("wind_field", common, env, tmp_path),
             NodeProcess("vehicle_dynamics", dynamics, env, tmp_path)]
    probe = Probe(tmp_path, domain_id, monkeypatch)
    statuses: dict[int, Any] = {}
    batteries: dict[int, Any] = {}
    moved = threading.Event()
    total = round(EMPTY_DURATION_S / 0.02)
    try:
        node = probe.node

        def on_status(msg: Any) -> None:
            statuses[int(msg.tick)] = (np.array(msg.state).reshape(-1, 13)[0].copy(), bool(msg.valid[0]),
                                       str(msg.invalid_reason[0]))
            if msg.tick > 0:
                moved.set()

        def on_battery(msg: Any) -> None:
            batteries[tick_of_stamp(msg.header.stamp)] = msg

        node.create_subscription(VehicleStatus, "/sim/vehicle_status", on_status, reliable())
        node.create_subscription(BatteryState, "/uav1/battery", on_battery, reliable())
        pub = node.create_publisher(AttitudeCommand, "/uav1/cmd/attitude", reliable(10))
        wait_for(lambda: node.count_publishers("/uav1/battery") >= 1 and 0 in statuses, 60,
                 "the battery publisher and tick 0", procs)
        send_attitude_until(moved.is_set, [pub], HOVER_ROW, moved)
        dyn = procs[1]
        wait_for(lambda: dyn.proc.poll() is not None, 90, "vehicle_dynamics to finish duration_s", procs[:1])
        assert dyn.proc.returncode == 0, dyn.stderr()
        wait_for(lambda: all(k in statuses for k in range(total + 1))
                 and all(k in batteries for k in range(EVERY, total + 1, EVERY)), 20, "every tick's status")
    finally:
        probe.close()
        codes = stop_all(procs)
    assert codes == [0, 0], [p.stderr() for p in procs]

    sim = Simulator.from_scenario(scenario, {"seed": SEED, "num_vehicles": 1})
    assert sim.fleet.rotor is not None and sim.battery.on
    ref = {0: (sim.true_state()[0].copy(), True, "", float(sim.battery.voltage_v[0]))}
    emptied = None
    while not sim.done:
        sim.step(HOVER_ROW)
        k = sim.tick
        ref[k] = (sim.true_state()[0].copy(), bool(sim.valid[0]), sim.fleet.invalid_reason[0],
                  float(sim.battery.voltage_v[0]))
        if emptied is None and sim.battery.empty[0]:
            emptied = k
    fell = max(ref)  # the episode ends (invalid vehicle) at the tick the vehicle touches the ground
    assert emptied is not None and 200 < emptied < fell <= total, (emptied, fell, total)
    assert ref[fell][1] is False and ref[fell][2] == EMPTY_PACK_REASON
    for k in range(fell + 1):
        x, valid, reason = statuses[k]
        rx, rvalid, rreason, volts = ref[k]
        np.testing.assert_allclose(x, rx, rtol=0, atol=1e-9, err_msg=f"tick {k}")
        assert (valid, reason) == (rvalid, rreason), k
        if k in batteries:
            assert batteries[k].voltage == np.float32(volts), k
    # the motors stopped: the thrust (element 12, the rotors' k_f sum omega^2) fell from the weight to ~0
    assert statuses[emptied][0][12] > 10.0 and statuses[fell][0][12] < 1e-6
    assert batteries[(fell // EVERY) * EVERY].power_supply_health == BatteryState.POWER_SUPPLY_HEALTH_DEAD
    for k in range(fell, total + 1):  # frozen and invalid until the end of the run
        assert statuses[k][1] is False and statuses[k][2] == EMPTY_PACK_REASON
        np.testing.assert_array_equal(statuses[k][0], statuses[fell][0])

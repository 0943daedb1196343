"""The battery over the node graph (issue 14, "Energy"): real processes, real DDS.

vehicle_dynamics steps the same ``FleetEnergy`` as the in-process Simulator and publishes
``uavN/battery`` (sensor_msgs/BatteryState) every 5 ticks. In lockstep with the same seed and commands
(test_lockstep_agreement's set-up: wind_field + vehicle_dynamics, constant attitude commands held from
tick 0), every message carries the Simulator's pack values of that tick, and the fields follow the
message's conventions (current negative while discharging, percentage 0..1, charge in Ah, LIPO,
present, one voltage per cell, frame ``uavN/base_link``, stamp = the tick's simulated time).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosenv import free_domain, require_ros, ros_env, send_attitude_until
from test_node_dynamics import NodeProcess, Probe, reliable, stop_all, wait_for

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

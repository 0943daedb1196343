"""The battery over the node graph: real processes, real DDS.

vehicle_dynamics steps the same ``FleetEnergy`` as the in-process Simulator and publishes
``uavN/battery`` (sensor_msgs/BatteryState) every 5 ticks. In lockstep with the same seed and commands
(test_lockstep_agreement's set-up: wind_field + vehicle_dynamics, constant attitude commands held from
tick 0), every message carries the Simulator's pack values of that tick, and the fields follow the
message's conventions (current negative while discharging, percentage 0..1, charge in Ah, LIPO,
present, one voltage per cell, frame ``uavN/base_link``, stamp = the tick's simulated time), and
/sim/vehicle_status carries every pack's charge of every tick.

On the rotor airframe the pack's voltage caps the motor speed (docs/ENERGY.md "Motor speed"): a rotor
vehicle whose pack empties in flight falls and becomes invalid on the ground in vehicle_dynamics tick for
tick as in the Simulator (``test_a_rotor_vehicle_whose_pack_empties_falls_in_the_graph_as_in_process``).

The low-battery failsafe (docs/ENERGY.md) flies in vehicle_dynamics: a vehicle whose pack reaches the return
threshold flies to its base ('return'), lands there ('battery_land'), disarms and charges, as seen on
/sim/vehicle_status, ground_truth/odom and uavN/battery, tick for tick as in the Simulator
(``test_low_battery_returns_to_base_lands_disarms_and_charges_in_the_graph``).
"""

from __future__ import annotations

import threading
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosenv import require_ros, scenario_file, send_attitude_until
from test_node_dynamics import lockstep_run, reliable, wait_for

pytestmark = pytest.mark.graph

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
    from qrsim_ros.msg import AttitudeCommand, VehicleStatus
    from sensor_msgs.msg import BatteryState

    from qrsim_ros.ros.stamps import tick_of_stamp

    n = len(ACTIONS)
    batteries: dict[tuple[int, int], Any] = {}
    fleet_fractions: dict[int, list[float]] = {}  # /sim/vehicle_status battery_fraction, by tick
    odom0: set[int] = set()
    moved = threading.Event()
    total = round(DURATION_S / 0.02)
    with lockstep_run(tmp_path, monkeypatch, SCENARIO, n, DURATION_S, SEED,
                      battery_every_n_ticks=EVERY) as run:
        node = run.node

        def on_battery(i: int, msg: Any) -> None:
            batteries[(tick_of_stamp(msg.header.stamp), i)] = msg

        def on_odom(i: int, msg: Any) -> None:
            k = tick_of_stamp(msg.header.stamp)
            if k == 0:
                odom0.add(i)
            elif i == 0:
                moved.set()

        node.create_subscription(VehicleStatus, "/sim/vehicle_status",
                                 lambda m: fleet_fractions.__setitem__(m.tick, list(m.battery_fraction)),
                                 reliable())
        for i in range(n):
            node.create_subscription(BatteryState, f"/uav{i + 1}/battery", lambda m, i=i: on_battery(i, m),
                                     reliable())
            node.create_subscription(Odometry, f"/uav{i + 1}/ground_truth/odom", lambda m, i=i: on_odom(i, m),
                                     reliable())
        pubs = [node.create_publisher(AttitudeCommand, f"/uav{i + 1}/cmd/attitude", reliable(10))
                for i in range(n)]
        # the clock is held at tick 0 (published again while it waits) until every vehicle has a command;
        # send them once tick 0 came on each of our subscriptions (each is matched both ways: a graph that
        # only lists the publishers can still lose the first ticks under load), then until the clock moves
        wait_for(lambda: all((0, i) in batteries for i in range(n)) and len(odom0) == n, 60,
                 "tick 0 on every subscription", run.procs)
        send_attitude_until(moved.is_set, pubs, ACTIONS, moved)
        run.wait_for_the_end(60)
        expected = [(k, i) for k in range(EVERY, total + 1, EVERY) for i in range(n)]
        wait_for(lambda: all(key in batteries for key in expected), 10, "every battery message")
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
    # /sim/vehicle_status carries every pack's charge at every tick: the Simulator's, to float32
    assert len(fleet_fractions) > total // 2, sorted(fleet_fractions)
    for k, fractions in fleet_fractions.items():
        assert fractions == [f32(p) for p in ref[k]["percentage"]], (k, fractions)
    # not vacuous: the packs drain, and differently (different throttles)
    last = max(k for k, _ in batteries)
    first = min(k for k, _ in batteries)
    for i in range(n):
        assert batteries[(last, i)].percentage < batteries[(first, i)].percentage
    assert batteries[(last, 0)].voltage != batteries[(last, 1)].voltage


#: The hover row of the identified model (the rotor airframe's controller flies it as a hover).
HOVER_ROW = np.array([[0.0, 0.0, 0.59004353928, 0.0, 12.0]])
EMPTY_DURATION_S = 7.6  # the pack empties at 5.04 s, the vehicle touches the ground at 7.20 s


#: One vehicle's /sim/vehicle_status of a tick: state (13), valid, invalid reason, failsafe, failsafe onsets.
Status = tuple[np.ndarray, bool, str, str, int]


def hover_in_the_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str, duration_s: float,
                       end_timeout_s: float, with_odom: bool = False
                       ) -> tuple[dict[int, Status], dict[int, Any], dict[int, np.ndarray]]:
    """vehicle_dynamics (lockstep, with wind_field) flies the one vehicle of ``scenario`` on HOVER_ROW (held
    from tick 0) for ``duration_s``: every tick's status, every uav1/battery message and (``with_odom``)
    every tick's ground-truth position (ENU), by tick; waits up to ``end_timeout_s`` for the run's end."""
    from nav_msgs.msg import Odometry
    from qrsim_ros.msg import AttitudeCommand, TickProgress, VehicleStatus
    from sensor_msgs.msg import BatteryState

    from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC
    from qrsim_ros.ros.qos import QOS_TICK_PROGRESS
    from qrsim_ros.ros.stamps import tick_of_stamp

    statuses: dict[int, Status] = {}
    batteries: dict[int, Any] = {}
    odom: dict[int, np.ndarray] = {}
    moved = threading.Event()
    total = round(duration_s / 0.02)
    with lockstep_run(tmp_path, monkeypatch, scenario, 1, duration_s, SEED,
                      battery_every_n_ticks=EVERY) as run:
        node = run.node
        # The probe is a lockstep consumer: it reports the last tick up to which it has every message, so
        # the clock runs at most the lockstep window ahead of it. A run at real_time_factor 0 is otherwise
        # faster than this process takes its messages, and the writers' history (100) overwrote ticks the
        # probe had not acknowledged yet (a CI run waited for them in vain).
        progress = node.create_publisher(TickProgress, TICK_PROGRESS_TOPIC, QOS_TICK_PROGRESS)
        complete = [-1]  # every message of the ticks up to this one is in

        def report() -> None:
            k = complete[0] + 1
            while k in statuses and (k in odom or not with_odom) and (k == 0 or k % EVERY or k in batteries):
                k += 1
            if k - 1 > complete[0]:
                complete[0] = k - 1
                progress.publish(TickProgress(node="/test_probe", episode=1, tick=k - 1))

        def on_status(msg: Any) -> None:
            statuses[int(msg.tick)] = (np.array(msg.state).reshape(-1, 13)[0].copy(), bool(msg.valid[0]),
                                       str(msg.invalid_reason[0]), str(msg.failsafe[0]),
                                       int(msg.failsafe_onsets[0]))
            if msg.tick > 0:
                moved.set()
            report()

        def on_battery(msg: Any) -> None:
            batteries[tick_of_stamp(msg.header.stamp)] = msg
            report()

        def on_odom(msg: Any) -> None:
            p = msg.pose.pose.position
            odom[tick_of_stamp(msg.header.stamp)] = np.array([p.x, p.y, p.z])
            report()

        node.create_subscription(VehicleStatus, "/sim/vehicle_status", on_status, reliable())
        node.create_subscription(BatteryState, "/uav1/battery", on_battery, reliable())
        topics = ["/uav1/battery"]
        if with_odom:
            node.create_subscription(Odometry, "/uav1/ground_truth/odom", on_odom, reliable())
            topics.append("/uav1/ground_truth/odom")
        pub = node.create_publisher(AttitudeCommand, "/uav1/cmd/attitude", reliable(10))
        # tick 0 (published again while the clock waits for the first command) on each subscription: each
        # is matched both ways, so no later tick is lost (listed publishers were not enough under load)
        wait_for(lambda: 0 in statuses and 0 in batteries and (0 in odom or not with_odom), 60,
                 f"tick 0 on /sim/vehicle_status and {topics}", run.procs)
        send_attitude_until(moved.is_set, [pub], HOVER_ROW, moved)
        run.wait_for_the_end(end_timeout_s)
        wait_for(lambda: all(k in statuses and (k in odom or not with_odom) for k in range(total + 1))
                 and all(k in batteries for k in range(EVERY, total + 1, EVERY)), 20, "every tick's messages")
    return statuses, batteries, odom


def empty_rotor_scenario(tmp_path: Path) -> Path:
    """keep_spot_x10 (wind, turbulence, noisy sensors) on the rotor airframe with a pack at soc 0.03 and
    no low-battery failsafe: it runs empty in flight."""
    return scenario_file(tmp_path, SCENARIO, "keep_spot_x10_empty_rotor", vehicle={
        "airframe": "rotor", "battery": {"initial_soc": 0.03, "low_battery_failsafe": "off"}})


def test_a_rotor_vehicle_whose_pack_empties_falls_in_the_graph_as_in_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vehicle_dynamics (lockstep, with wind_field) flies one rotor vehicle on the hover row until its pack
    empties and it falls: every tick's ground truth, validity and reason on /sim/vehicle_status and every
    uavN/battery message equal the in-process Simulator's (same scenario file, seed and commands), the
    motors stop and the vehicle is invalid (``EMPTY_PACK_REASON``) from the same tick on."""
    require_ros()
    from sensor_msgs.msg import BatteryState

    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.core.vehicles.airframes import EMPTY_PACK_REASON

    scenario = str(empty_rotor_scenario(tmp_path))
    statuses, batteries, _ = hover_in_the_graph(tmp_path, monkeypatch, scenario, EMPTY_DURATION_S, 90)
    total = round(EMPTY_DURATION_S / 0.02)

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
        x, valid, reason = statuses[k][:3]
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


#: The low-battery failsafe's scenario (keep_spot without noise): one Pelican hovering 3 m up at the
#: origin, a charging base 4 m north, the pack at 10.9 %. The default thresholds (docs/ENERGY.md
#: "Low-battery failsafe": reserve 10 %, margin 1.5, return speed 2 m/s) and a land rate of 1 m/s give
#: t_return = 4 m / 2 m/s + 3 m / 1 m/s = 5 s, so the return starts near 10 % + 1.5 x drain x 5 s.
BASE_NORTH_M, BASE_RADIUS_M, HOVER_HEIGHT_M, LAND_RATE_MPS = 4.0, 1.0, 3.0, 1.0
RESERVE, MARGIN, RETURN_SPEED_MPS = 0.1, 1.5, 2.0
LOW_SOC = 0.109
LOW_DURATION_S = 8.4  # the return starts at ~1.5 s, the vehicle disarms on the base at ~7.3 s, then charges
DISARM_HEIGHT_M = 0.3  # the land failsafe's touch-down height (docs/ENERGY.md)
LANDED_REASON = "landed (failsafe land)"


def low_battery_scenario(tmp_path: Path) -> Path:
    """keep_spot with the noise off (no dynamic noise, turbulence or wind, exact AHARS, a noiseless GPS
    updated every tick), so the in-process Simulator's estimated state is the exact state the graph's
    vehicle_dynamics flies its failsafe on: the two must then agree tick for tick through the failsafe."""
    def hover_low(data: dict[str, Any]) -> None:
        data["task"].update(start_z_ned_m=-HOVER_HEIGHT_M, flight_z_ned_m=-HOVER_HEIGHT_M,
                            duration_steps=100000)

    return scenario_file(
        tmp_path, "keep_spot", "keep_spot_low_battery", hover_low, seed=SEED, wind={"on": False},
        vehicle={"dyn_noise": [0.0] * 6, "turbulence": {"on": False}, "ahars": {"on": False},
                 "gps_receiver": {"on": False, "dt_s": 0.02}, "failsafe_land_rate_m_s": LAND_RATE_MPS,
                 "battery": {"initial_soc": LOW_SOC}},
        bases=[{"position_ned_m": [BASE_NORTH_M, 0.0, 0.0], "radius_m": BASE_RADIUS_M}])


def test_low_battery_returns_to_base_lands_disarms_and_charges_in_the_graph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vehicle_dynamics (lockstep, with wind_field) hovers one Pelican on a held attitude command until its
    pack falls to the return threshold: /sim/vehicle_status shows 'return', the vehicle flies to the base
    at its height, 'battery_land' within the base's radius, disarms at the touch-down height; uavN/battery
    then says CHARGING and its percentage rises at the charge current. Every tick equals the in-process
    Simulator's (same file, seed and commands; its estimated state is exact here)."""
    require_ros()
    from sensor_msgs.msg import BatteryState

    from qrsim_ros.core.engine.simulator import Simulator

    scenario = str(low_battery_scenario(tmp_path))
    statuses, batteries, odom = hover_in_the_graph(tmp_path, monkeypatch, scenario, LOW_DURATION_S, 120,
                                                   with_odom=True)
    total = round(LOW_DURATION_S / 0.02)

    # --- the graph alone, against the documented rules ---
    modes = [statuses[k][3] for k in range(total + 1)]
    never = total + 1  # a mode that never came: the order check below fails with the ticks

    returned = modes.index("return") if "return" in modes else never
    landing = modes.index("battery_land") if "battery_land" in modes else never
    disarmed = next((k for k in range(total + 1) if not statuses[k][1]), never)
    assert 0 < returned < landing < disarmed < total - 2 * EVERY, (returned, landing, disarmed, modes[-1])
    assert set(modes[:returned]) == {""} and set(modes[returned:landing]) == {"return"}
    assert set(modes[landing:]) == {"battery_land"}  # latched, also once landed
    assert statuses[total][4] == 1  # one failsafe onset: return and its landing are one episode of it

    def north_east(k: int) -> np.ndarray:
        return statuses[k][0][0:2]

    def to_base(k: int) -> float:
        return float(np.hypot(north_east(k)[0] - BASE_NORTH_M, north_east(k)[1]))

    # the return starts once the charge no longer covers the way home plus the reserve: the drain from the
    # hover's battery messages (every 0.1 s), the way home from the vehicle's position and height
    pct = {k: float(m.percentage) for k, m in batteries.items()}
    drain = (pct[EVERY] - pct[2 * EVERY]) / (EVERY * 0.02)
    t_return = to_base(0) / RETURN_SPEED_MPS + HOVER_HEIGHT_M / LAND_RATE_MPS
    threshold = RESERVE + MARGIN * drain * t_return
    before, after = (returned - 1) // EVERY * EVERY, (returned // EVERY + 1) * EVERY
    assert pct[before] > threshold - EVERY * 0.02 * drain, (pct[before], threshold)
    assert pct[after] <= threshold, (pct[after], threshold)
    assert pct[before] > RESERVE + 0.005  # well above the reserve: not a 'land at the reserve'
    # the return: at the flight height, towards the base, until within its radius (decided on the state
    # at the start of the tick, i.e. the previous tick's)
    assert to_base(returned - 1) == pytest.approx(BASE_NORTH_M, abs=0.01)
    assert all(abs(statuses[k][0][2] + HOVER_HEIGHT_M) < 0.3 for k in range(returned, landing))
    assert to_base(landing - 1) <= BASE_RADIUS_M < to_base(landing - 2), (to_base(landing - 1),
                                                                          to_base(landing - 2))
    # the landing: straight down on the base, disarmed at the touch-down height, then frozen
    height = {k: -statuses[k][0][2] for k in statuses}
    assert height[disarmed - 1] <= DISARM_HEIGHT_M < height[disarmed - 2], (height[disarmed - 1],
                                                                            height[disarmed - 2])
    assert statuses[disarmed][2] == LANDED_REASON
    for k in range(disarmed, total + 1):
        assert not statuses[k][1] and statuses[k][2] == LANDED_REASON, k
        np.testing.assert_array_equal(statuses[k][0], statuses[disarmed][0])
    assert to_base(disarmed) <= BASE_RADIUS_M
    # the odometry (ENU: east, north, up) says the same: on the base, on the ground
    east, north, up = odom[total]
    assert np.hypot(north - BASE_NORTH_M, east) <= BASE_RADIUS_M and 0.0 <= up <= DISARM_HEIGHT_M
    np.testing.assert_allclose(odom[total], [statuses[total][0][1], statuses[total][0][0],
                                             -statuses[total][0][2]], rtol=0, atol=1e-9)
    # the battery: discharging until the touch-down, charging on the base from then on
    flying = [k for k in sorted(batteries) if 0 < k < disarmed]  # tick 0 carries no load yet (0 A)
    charging = [k for k in sorted(batteries) if k >= disarmed]
    assert len(charging) >= 10
    for k in flying:
        assert batteries[k].power_supply_status == BatteryState.POWER_SUPPLY_STATUS_DISCHARGING, k
        assert batteries[k].current < 0, k
    assert all(pct[a] > pct[b] for a, b in pairwise(flying))
    for k in charging:
        assert batteries[k].power_supply_status == BatteryState.POWER_SUPPLY_STATUS_CHARGING, k
        assert batteries[k].current > 0, k  # the message's convention: positive while charging
    assert all(pct[a] < pct[b] for a, b in pairwise(charging))
    assert pct[flying[-1]] > RESERVE - 0.02  # landed with (nearly) the reserve left
    # coulomb counting: the charge rises at the charge current over the capacity (6 Ah)
    first, last = charging[0], charging[-1]
    amps = np.mean([batteries[k].current for k in charging[1:]])
    rate = (pct[last] - pct[first]) / ((last - first) * 0.02)
    assert rate == pytest.approx(amps / (3600.0 * 6.0), rel=1e-3), (rate, amps)

    # --- the in-process Simulator: the same file, seed and commands, tick for tick ---
    sim = Simulator.from_scenario(scenario, {"seed": SEED, "num_vehicles": 1})
    assert sim.battery.on
    ref = {0: (sim.true_state()[0].copy(), True, "", "", float(sim.battery.percentage[0]))}
    while not sim.done:
        sim.step(HOVER_ROW)
        ref[sim.tick] = (sim.true_state()[0].copy(), bool(sim.valid[0]), sim.fleet.invalid_reason[0],
                         sim.failsafe[0], float(sim.battery.percentage[0]))
    assert max(ref) == disarmed  # its only vehicle landed: the episode ends there
    for k in range(disarmed + 1, total + 1):  # the pack goes on charging on the base, as in vehicle_dynamics
        sim.battery.step(sim.fleet, 0.02)
        ref[k] = (*ref[disarmed][:4], float(sim.battery.percentage[0]))
    for k in range(total + 1):
        x, valid, reason, mode, _ = statuses[k]
        rx, rvalid, rreason, rmode, rpct = ref[k]
        np.testing.assert_allclose(x, rx, rtol=0, atol=1e-9, err_msg=f"tick {k}")
        assert (valid, reason, mode) == (rvalid, rreason, rmode), k
        if k in batteries:
            assert batteries[k].percentage == np.float32(rpct), k

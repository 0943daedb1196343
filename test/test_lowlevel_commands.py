"""The rotor airframe's lower-level inputs over real DDS: ``uavN/cmd/rates_thrust``
(qrsim_ros/RatesThrustCommand) and ``uavN/cmd/motors`` (qrsim_ros/MotorCommand) into vehicle_dynamics.

One vehicle_dynamics process (no wind_field: still air) flies three vehicles of keep_spot_x10 (no
turbulence): uav1 and uav2 on the rotor airframe (``pelican`` rotor set), uav3 on the identified Pelican.
A test-side rclpy node publishes the commands and records /sim/vehicle_status; every wait is on a message.

Phase A (deterministic: ``wait_for_commands`` holds the clock at tick 0 until every vehicle has its
command, all stamped 0): uav1 gets equal motor commands at the hover value, uav2 body rates (yaw rate
-0.5 rad/s in FLU, i.e. +0.5 FRD) with the hover thrust m g, uav3 a hover cmd/attitude. Expected from
first principles (the rotor set's m, k_f, omega range and g): uav1 stays put, uav2's yaw rate goes to
+0.5 rad/s (clockwise from above) while it holds its height; and the node's trajectories equal an
in-process ``Airframes`` stepped with the same inputs from the same tick-0 state.
Phase B: uav1 with an unequal pair (the clockwise rotors faster) yaws anticlockwise; bad commands are
rejected and counted (NaN, wrong frame, wrong count, future, older than the held one, stale, any on the
Pelican), out-of-range ones clamped and counted; uav2's command expires into the scenario's failsafe.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosenv import free_domain, require_ros, ros_env, scenario_file
from test_node_dynamics import NodeProcess, Probe, reliable, stop_all, wait_for

pytestmark = pytest.mark.graph

G = 9.81  # [m/s^2], the core's gravity
#: command_timeout_s of the run [s of simulated time]: longer than phase B takes before the rejections
#: are counted, beside 2 CPU burners too (uav2's command must hold until then)
TIMEOUT_S = 6.0
YAW_RATE_FRD = 0.5  # uav2's yaw-rate command [rad/s], FRD (sent as -0.5 in FLU)
PHASE_A_TICKS = 100  # 2 s


def lowlevel_scenario(tmp_path: Path) -> Path:
    """keep_spot_x10 with three vehicles [rotor, rotor, pelican], no turbulence."""
    return scenario_file(tmp_path, "keep_spot_x10", "keep_spot_lowlevel", num_vehicles=3, vehicle={
        "airframe": ["rotor", "rotor", "pelican"], "turbulence": {"on": False}, "failsafe": "hold"})


def test_rates_thrust_and_motors_fly_the_rotor_airframe(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    require_ros()
    from builtin_interfaces.msg import Time
    from qrsim_ros.msg import AttitudeCommand, MotorCommand, RatesThrustCommand, VehicleStatus

    from qrsim_ros.core.common.rng import RandomStreams
    from qrsim_ros.core.config.scenario import load_scenario
    from qrsim_ros.core.engine.builders import build_fleet
    from qrsim_ros.core.vehicles.rotor_params import rotor_preset
    from qrsim_ros.ros.from_messages import fleet_arrays

    rp = rotor_preset("pelican")
    omega_hover = math.sqrt(rp.mass_kg * G / (4.0 * rp.k_f))  # 4 k_f omega^2 = m g
    c_hover = (omega_hover - rp.omega_min_rads) / (rp.omega_max_rads - rp.omega_min_rads)
    thrust_hover = rp.mass_kg * G
    max_thrust = 4.0 * rp.k_f * rp.omega_max_rads ** 2
    assert 0.3 < c_hover < 0.9

    scenario = lowlevel_scenario(tmp_path)
    domain = free_domain()
    env = ros_env(tmp_path, domain)
    params = {"scenario": str(scenario), "real_time_factor": 1.0, "wait_for_commands": True,
              "command_timeout_s": TIMEOUT_S, "start_subscribers": 1, "tf_every_n_ticks": 0}
    probe = Probe(tmp_path, domain, monkeypatch)
    statuses: dict[int, Any] = {}
    lock = threading.Lock()

    def on_status(msg: Any) -> None:
        with lock:
            statuses.setdefault(int(msg.tick), msg)  # one episode; a re-sent tick is the same

    node = probe.node
    node.create_subscription(VehicleStatus, "/sim/vehicle_status", on_status, reliable())
    procs = [NodeProcess("vehicle_dynamics", params, env, tmp_path)]
    try:
        att = node.create_publisher(AttitudeCommand, "/uav3/cmd/attitude", reliable(10))
        rates = {i: node.create_publisher(RatesThrustCommand, f"/uav{i}/cmd/rates_thrust", reliable(10))
                 for i in (1, 2, 3)}
        motors = {i: node.create_publisher(MotorCommand, f"/uav{i}/cmd/motors", reliable(10))
                  for i in (1, 2, 3)}
        pubs = [att, *rates.values(), *motors.values()]
        wait_for(lambda: all(p.get_subscription_count() >= 1 for p in pubs), 30,
                 "vehicle_dynamics' command subscriptions", procs)

        def stamp(t_s: float) -> Time:
            ns = round(t_s * 1e9)
            return Time(sec=ns // 10**9, nanosec=ns % 10**9)

        def motor_cmd(vehicle: int, values: list[float], t_s: float, frame: str = "") -> None:
            m = MotorCommand(normalised=[float(v) for v in values])
            m.header.stamp, m.header.frame_id = stamp(t_s), frame
            motors[vehicle].publish(m)

        def rates_cmd(vehicle: int, pqr: tuple[float, float, float], thrust: float, t_s: float,
                      frame: str) -> None:
            m = RatesThrustCommand(roll_rate_radps=pqr[0], pitch_rate_radps=pqr[1], yaw_rate_radps=pqr[2],
                                   thrust_n=thrust)
            m.header.stamp, m.header.frame_id = stamp(t_s), frame
            rates[vehicle].publish(m)

        def latest() -> Any:
            with lock:
                return statuses[max(statuses)] if statuses else None

        def state(msg: Any) -> np.ndarray:
            arrays = fleet_arrays(msg, 3)
            assert not isinstance(arrays, str), arrays
            return arrays[0]

        # --- phase A: every vehicle's command stamped 0, before the clock moves ------------------------
        wait_for(lambda: 0 in statuses, 30, "tick 0", procs)
        hover_motors = [c_hover] * 4
        a = AttitudeCommand(throttle=0.59004353928, battery_voltage=12.0)
        a.header.frame_id = "uav3/base_link_frd"
        repeat = threading.Event()  # never set: the interval of the repeats
        # the same commands until the clock moves (a repeat with the same stamp and values changes nothing)
        deadline = time.monotonic() + 30.0
        while 1 not in statuses:
            assert procs[0].proc.poll() is None, procs[0].stderr()
            assert time.monotonic() < deadline, "the clock stayed at tick 0:\n" + procs[0].stderr()[-3000:]
            motor_cmd(1, hover_motors, 0.0, "uav1/base_link_frd")
            rates_cmd(2, (0.0, 0.0, -YAW_RATE_FRD), thrust_hover, 0.0, "uav2/base_link")  # FLU
            att.publish(a)
            repeat.wait(0.05)
        wait_for(lambda: all(k in statuses for k in range(PHASE_A_TICKS + 1)), 60,
                 f"ticks 0..{PHASE_A_TICKS}", procs)
        run = {k: state(statuses[k]) for k in range(PHASE_A_TICKS + 1)}
        end = statuses[PHASE_A_TICKS]
        assert list(end.commands_rejected) == [0, 0, 0] and list(end.commands_clamped) == [0, 0, 0]
        assert list(end.valid) == [True, True, True] and list(end.command_fresh) == [True, True, True]
        x0, xa = run[0], run[PHASE_A_TICKS]
        # uav1, equal motor commands at the hover value: stays where it is, level
        np.testing.assert_allclose(xa[0, 0:6], x0[0, 0:6], atol=1e-6)
        np.testing.assert_allclose(xa[0, 6:12], 0.0, atol=1e-6)
        # uav2, yaw rate +0.5 rad/s FRD (clockwise from above) at the hover thrust: the rate settles there
        # (rate loop 5.09 1/s: e^-10 of the step left after 2 s), level, at its height
        assert abs(xa[1, 11] - YAW_RATE_FRD) < 0.01, xa[1, 9:12]
        assert np.all(np.abs(xa[1, 9:11]) < 0.01) and np.all(np.abs(xa[1, 3:5]) < 0.01), xa[1]
        assert abs(xa[1, 2] - x0[1, 2]) < 0.05, (x0[1, 2], xa[1, 2])
        yaw_turned = math.remainder(xa[1, 5] - x0[1, 5], 2 * math.pi)
        assert 0.5 < yaw_turned < YAW_RATE_FRD * PHASE_A_TICKS * 0.02, yaw_turned

        # the same inputs through Airframes in this process, from the node's tick-0 state
        sc = load_scenario(str(scenario))
        fleet = build_fleet(sc, RandomStreams(sc.seed))
        fleet.set_state(x0)
        controls = np.tile([0.0, 0.0, 0.59004353928, 0.0, 12.0], (3, 1))
        rt = np.full((3, 4), np.nan)
        rt[1] = [0.0, 0.0, YAW_RATE_FRD, thrust_hover]
        mo = np.full((3, 4), np.nan)
        mo[0] = hover_motors
        worst = 0.0
        for k in range(1, PHASE_A_TICKS + 1):
            fleet.step(controls, np.zeros((3, 3)), rates_thrust=rt, motors=mo)
            worst = max(worst, float(np.abs(fleet.state[:2, :12] - run[k][:2, :12]).max()))
        print(f"\nrotor vehicles over DDS vs in-process Airframes, {PHASE_A_TICKS} ticks: "
              f"max abs error {worst:g}")
        assert worst <= 1e-9

        # --- phase B ------------------------------------------------------------------------------------
        # stamped with the latest /clock (the probe's status list may lag the node by seconds under load)
        now_s = probe.sim_time_s()
        faster = [c_hover + 0.05 if s > 0 else c_hover - 0.05 for s in rp.spin]  # clockwise rotors faster
        motor_cmd(1, faster, now_s)
        rates_cmd(2, (0.0, 0.0, -YAW_RATE_FRD), thrust_hover, now_s, "uav2/base_link")  # uav2's, renewed
        # (if uav2's first command expired meanwhile, its rate settles back at the renewed one)
        wait_for(lambda: state(latest())[1, 11] > 0.45, 10, "uav2 yawing clockwise", procs)
        # their drag reaction turns the body anticlockwise from above: r < 0 in FRD
        wait_for(lambda: state(latest())[0, 11] < -0.1, 10, "uav1 yawing anticlockwise", procs)
        assert abs(state(latest())[0, 3]) < 0.01 and abs(state(latest())[0, 4]) < 0.01
        bad_before = latest()
        motor_cmd(1, hover_motors, now_s - 0.1)  # older than the held command
        motor_cmd(1, [c_hover, math.nan, c_hover, c_hover], now_s)  # non-finite
        motor_cmd(1, [c_hover] * 3, now_s)  # not 4 values
        rates_cmd(2, (0.0, 0.0, 0.0), math.nan, now_s, "")  # non-finite
        rates_cmd(2, (0.0, 0.0, 0.0), thrust_hover, now_s, "uav3/base_link_frd")  # another vehicle's frame
        rates_cmd(2, (0.0, 0.0, 0.0), thrust_hover, now_s + 10.0, "")  # ahead of the simulated time
        motor_cmd(3, hover_motors, now_s)  # a Pelican: no rotors
        rates_cmd(3, (0.0, 0.0, 0.0), thrust_hover, now_s, "")
        wait_for(lambda: list(latest().commands_rejected) == [3, 3, 2], 10, "the rejections", procs)
        # nothing of it was flown: at the tick that counted them, uav1 still yaws anticlockwise, uav2 still
        # clockwise (its command renewed at now_s holds until now_s + TIMEOUT_S)
        with lock:
            k_rejected = min(k for k, m in statuses.items() if list(m.commands_rejected) == [3, 3, 2])
            at_rejection = state(statuses[k_rejected])
        assert k_rejected * 0.02 < now_s + TIMEOUT_S, (k_rejected, now_s)
        assert at_rejection[0, 11] < -0.1 and at_rejection[1, 11] > 0.4, at_rejection[:2, 9:12]
        assert list(bad_before.commands_clamped) == [0, 0, 0]
        # uav1 back to hover: the faster pair's extra thrust climbs it slowly, out of the area if the rest
        # of the phase takes long in wall time (real_time_factor 1 on a loaded machine: a CI run lost it)
        wait_for(lambda: latest().tick * 0.02 > now_s, 10, "a tick after uav1's command", procs)
        motor_cmd(1, hover_motors, probe.sim_time_s())
        # uav2's command (stamped now_s) expires after TIMEOUT_S: the scenario's failsafe, counted
        wait_for(lambda: latest().failsafe[1] == "hold" and not latest().command_fresh[1]
                 and latest().command_timeouts[1] >= 1, 30, "uav2's command timeout: hold", procs)
        rates_cmd(2, (0.0, 0.0, 0.0), thrust_hover, 0.02, "")  # older than the held one, and stale
        wait_for(lambda: latest().commands_rejected[1] == 4, 10, "the stale rejection", procs)
        # out of range: clamped (to the rotors' maximum thrust), counted, flown: uav2 climbs
        rates_cmd(2, (0.0, 0.0, 0.0), 10.0 * max_thrust, probe.sim_time_s(), "")
        wait_for(lambda: latest().commands_clamped[1] == 1, 10, "the clamp", procs)
        wait_for(lambda: state(latest())[1, 8] < -1.0, 10, "uav2 climbing (NED w < -1 m/s)", procs)
        last = latest()
        assert last.failsafe[1] == "" and last.command_fresh[1], (last.failsafe, last.command_fresh)
        assert list(last.commands_clamped) == [0, 1, 0] and list(last.commands_rejected) == [3, 4, 2]
        assert list(last.valid) == [True, True, True]
    finally:
        probe.close()
        codes = stop_all(procs)
    assert codes == [0], procs[0].stderr()
    log = procs[0].stderr()
    assert "uav3/cmd/motors rejected: uav3 flies the identified Pelican airframe" in log

"""Sensor faults in the node graph (docs/FAULTS.md "Graph"): real node processes, DDS.

vehicle_dynamics puts the tick's active faults on its /sim/vehicle_status (``faults``); every sensor node
applies them (``FaultEffects.follower`` + ``apply_active``) before it steps its models on that tick. As in
test_node_sensors, the test stands in for vehicle_dynamics: it publishes the in-process Simulator's ground
truth *and active faults* tick by tick, in lockstep with the imu, gps, altimeter and camera_detector
nodes, so each node's output must equal the Simulator's sensors under the same faults (same streams, same
ticks). First-principles checks on top, from the fault windows alone: NO_FIX during the outage, the
altimeter frozen or shifted by the offset, the accelerometer biased, no camera frame while it is off.
The lidar_off kind is checked through a recorded launch (the generic sensor node, a scene with a lidar).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosenv import free_domain, launch_recorded, lidar_scenario, require_ros, ros_env
from test_node_sensors import (
    DT,
    GroundTruthPublisher,
    Harness,
    NodeProcess,
    drive,
    record_simulator,
    stop_all,
    wait_for_graph,
)

pytestmark = pytest.mark.graph

SCENARIO, SEED, N = "search_rescue_2b", 11, 2

#: Every sensor fault kind of the four nodes, on both vehicles, with windows in whole ticks (at_time_s:
#: the first tick whose time is >= T; a fault of duration D ends at the first tick >= since + D).
FAULTS = [
    {"id": "outage", "kind": "gps_outage", "vehicles": [0], "trigger": {"at_time_s": 0.5}, "duration_s": 1.0},
    {"id": "degraded", "kind": "gps_degradation", "vehicles": [1], "sigma_factor": 3.0,
     "bias_ned_m": [4.0, -2.0, 0.0], "satellites_lost": 2, "trigger": {"at_time_s": 0.4}},
    {"id": "imu_bias", "kind": "imu_bias_step", "vehicles": [0], "accelerometer_bias_mps2": [0.5, 0.0, 0.0],
     "gyro_bias_radps": [0.0, 0.1, 0.0], "trigger": {"at_time_s": 0.3}, "duration_s": 1.0},
    {"id": "gyro", "kind": "gyro_stuck", "vehicles": [1], "trigger": {"at_time_s": 0.6}, "duration_s": 0.5},
    {"id": "alt_offset", "kind": "altimeter_offset", "vehicles": [0], "offset_m": 3.0,
     "trigger": {"at_time_s": 0.7}},
    {"id": "alt_stuck", "kind": "altimeter_stuck", "vehicles": [1], "trigger": {"at_time_s": 0.2},
     "duration_s": 1.0},
    {"id": "camera", "kind": "camera_off", "vehicles": [0], "trigger": {"at_time_s": 0.9}, "duration_s": 1.2},
]
#: Active ticks [first, last] of the faults above (1 tick = 0.02 s).
OUTAGE, IMU_BIAS, ALT_STUCK, CAMERA_OFF = (25, 74), (15, 64), (10, 59), (45, 104)
ALT_OFFSET_FROM = 35
EPISODE_TICKS = [150, 60]


def _camera_off(i: int, k: int) -> bool:
    return i == 0 and CAMERA_OFF[0] <= k <= CAMERA_OFF[1]


def test_sensor_nodes_apply_the_ticks_faults_as_the_simulator(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    require_ros()
    from geometry_msgs.msg import TwistStamped
    from qrsim_ros.msg import Altitude
    from sensor_msgs.msg import Imu, NavSatFix, NavSatStatus, PointCloud2

    from qrsim_ros.core.common.frames import euler_ned_frd_to_quaternion_enu_flu, frd_to_flu, ned_to_enu
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.ros.from_messages import cloud_points

    base = {"seed": SEED, "num_vehicles": N, "task": {"dt_s": DT, "duration_steps": 100000}}
    x0 = [[0.0, 0.0, -25.0, 0.0, 0.0, 0.2], [10.0, 5.0, -25.0, 0.0, 0.0, -0.4]]
    overrides = {**base, "vehicle": {"initial_states": x0}, "faults": FAULTS}
    sim = Simulator.from_scenario(SCENARIO, overrides)

    def record(s: Any) -> dict[str, Any]:
        return {"euler": s.ahars.orientation, "gyro": s.ahars.angular_velocity, "acc": s.ahars.acceleration,
                "h": s.ahars.height_m, "hdot": s.ahars.vertical_speed_mps, "lla": s.gps.lla.copy(),
                "gvel": s.gps.velocity_ned.copy(), "fix": s.gps.has_fix.copy(),
                "cam": s.camera_observations(), "faults": list(s.active_faults)}

    episodes = record_simulator(sim, EPISODE_TICKS, record)
    # the Simulator itself flew the windows above (the test's arithmetic of the trigger rule)
    assert {f.id for f in episodes[0][OUTAGE[0]]["faults"]} >= {"outage", "imu_bias", "alt_stuck"}
    assert "outage" not in {f.id for f in episodes[0][OUTAGE[1] + 1]["faults"]}

    def due(k: int) -> list[str]:
        kinds = ["imu/data", "altimeter"] + (["gps/fix", "gps/vel"] if k % 10 == 0 else [])
        topics = [f"/uav{i + 1}/{t}" for i in range(N) for t in kinds]
        return topics + [f"/uav{i + 1}/camera/detections" for i in range(N) if k % 50 == 0
                         and not _camera_off(i, k)]

    topics = {f"/uav{i + 1}/{t}": typ for i in range(N) for t, typ in
              (("imu/data", Imu), ("altimeter", Altitude), ("gps/fix", NavSatFix), ("gps/vel", TwistStamped),
               ("camera/detections", PointCloud2))}
    domain = free_domain()
    env = ros_env(tmp_path, domain)
    params = {"scenario": SCENARIO, "seed": SEED, "num_vehicles": N, "use_sim_time": True}
    names = ("imu", "gps", "altimeter", "camera_detector")
    procs: list[NodeProcess] = []
    harness = Harness(tmp_path, domain, monkeypatch)
    try:
        procs += [NodeProcess(exe, params, env, tmp_path / "logs") for exe in names]
        for topic, typ in topics.items():
            harness.subscribe(typ, topic)
        truth = GroundTruthPublisher(harness, N)
        wait_for_graph(harness, truth, len(names), list(topics), procs)
        drive(harness, truth, episodes, due, procs)
        codes = stop_all(procs)
    finally:
        stop_all(procs)
        harness.close()
    assert codes == dict.fromkeys(names, 0), codes

    got = harness.got
    for e, rows in enumerate(episodes, start=1):
        for i in range(N):
            ns = f"/uav{i + 1}"
            for k, row in enumerate(rows):
                m = got[(e, f"{ns}/imu/data", k)][0]
                alt = got[(e, f"{ns}/altimeter", k)][0]
                q = euler_ned_frd_to_quaternion_enu_flu(*row["euler"][i])
                o, w, f = m.orientation, m.angular_velocity, m.linear_acceleration
                assert np.allclose([o.x, o.y, o.z, o.w], q, rtol=0, atol=1e-12), (e, i, k)
                assert np.allclose([w.x, w.y, w.z], frd_to_flu(row["gyro"][i]), rtol=0, atol=1e-12), (e, i, k)
                assert np.allclose([f.x, f.y, f.z], frd_to_flu(row["acc"][i]), rtol=0, atol=1e-12), (e, i, k)
                assert abs(alt.height - row["h"][i]) <= 1e-12, (e, i, k)
                assert abs(alt.vertical_speed - row["hdot"][i]) <= 1e-9, (e, i, k)
                if k % 10 == 0:
                    fix = got[(e, f"{ns}/gps/fix", k)][0]
                    vel = got[(e, f"{ns}/gps/vel", k)][0].twist.linear
                    assert fix.status.status == (NavSatStatus.STATUS_FIX if row["fix"][i] else -1), (e, i, k)
                    assert np.allclose([fix.latitude, fix.longitude], row["lla"][i, :2], rtol=0, atol=1e-12)
                    assert np.allclose([vel.x, vel.y, vel.z], ned_to_enu(row["gvel"][i]), rtol=0, atol=1e-9)
                cams = got.get((e, f"{ns}/camera/detections", k), [])
                if k % 50 == 0 and _camera_off(i, k):
                    assert cams == [], (e, i, k)  # switched off: nothing published
                elif k % 50 == 0 and k > 0:
                    obs = row["cam"][i]
                    pts = cloud_points(cams[0])
                    assert pts.shape == obs.grid_dims[::-1]
                    assert np.allclose(pts["llkd"], obs.llkd_grid.T, rtol=1e-6, atol=1e-5, equal_nan=True)

    # first principles, from the fault windows alone (episode 1)
    def series(topic: str, field: Any, ticks: range) -> np.ndarray:
        return np.array([field(got[(1, topic, k)][0]) for k in ticks])

    status = {k: series("/uav1/gps/fix", lambda m: m.status.status, range(k, k + 1))[0]
              for k in range(0, 151, 10)}
    assert [k for k, st in status.items() if st != NavSatStatus.STATUS_FIX] == list(range(30, 71, 10))
    # the velocity (eX's ground velocity in the graph) during the outage: held at the last fix's (tick 20),
    # no dead reckoning; the first fix after it (tick 80) has zero velocity, the next a real one again
    # (docs/FAULTS.md, gps_outage; search_rescue_2b's receiver is the noisy one)
    gvel = {k: series("/uav1/gps/vel", lambda m: [m.twist.linear.x, m.twist.linear.y, m.twist.linear.z],
                      range(k, k + 1))[0] for k in range(0, 151, 10)}
    assert np.all(gvel[20][:2] != 0.0)
    for k in range(30, 71, 10):
        np.testing.assert_array_equal(gvel[k], gvel[20], err_msg=f"tick {k}")
    assert np.array_equal(gvel[80], [0.0, 0.0, 0.0]) and np.all(gvel[90][:2] != 0.0)
    stuck = series("/uav2/altimeter", lambda m: m.height, range(ALT_STUCK[0], ALT_STUCK[1] + 1))
    assert np.all(stuck == stuck[0]) and stuck[0] != got[(1, "/uav2/altimeter", ALT_STUCK[1] + 1)][0].height
    assert np.all(series("/uav2/altimeter", lambda m: m.vertical_speed, range(ALT_STUCK[0] + 1, ALT_STUCK[1]))
                  == 0.0)
    # the altimeter's error against the true height (-z: flat ground at 0) is its noise and drift (well
    # under 0.5 m here) before the offset, and 3 m more after it (the vehicle reacts: its height changes)
    def height_error(ticks: range) -> np.ndarray:
        true_down_m = np.array([episodes[0][k]["x"][0, 2] for k in ticks])
        return series("/uav1/altimeter", lambda m: m.height, ticks) + true_down_m

    assert abs(np.mean(height_error(range(1, ALT_OFFSET_FROM)))) < 0.5
    assert abs(np.mean(height_error(range(ALT_OFFSET_FROM, 151))) - 3.0) < 0.5
    # the accelerometer's x (forward, FLU as FRD) carries the 0.5 m/s^2 bias inside its window only
    ax_in = series("/uav1/imu/data", lambda m: m.linear_acceleration.x, range(IMU_BIAS[0], IMU_BIAS[1] + 1))
    ax_out = series("/uav1/imu/data", lambda m: m.linear_acceleration.x, range(IMU_BIAS[1] + 1, 151))
    assert abs(np.mean(ax_in) - np.mean(ax_out) - 0.5) < 0.1
    # the camera of uav1 is off at ticks 50 and 100 of episode 1 (and 50 of episode 2), back at 150
    assert got.get((1, "/uav1/camera/detections", 150)) and got.get((1, "/uav2/camera/detections", 100))


@pytest.mark.timeout(300)
def test_lidar_off_silences_the_lidar_node(tmp_path: Path) -> None:
    """A recorded launch (keep_spot_x10 with a lidar, two vehicles): vehicle 0's lidar off from 0.5 s to
    1.3 s publishes no sweep of that vehicle started in the window; vehicle 1's lidar goes on."""
    require_ros()
    from rosbags.highlevel import AnyReader

    from qrsim_ros.bag.types import typestore

    faults = [{"id": "lidar", "kind": "lidar_off", "vehicles": [0], "trigger": {"at_time_s": 0.5},
               "duration_s": 0.8}]
    scenario = lidar_scenario(tmp_path, "keep_spot_x10", {"sigma_m": 0.0}, num_vehicles=2, faults=faults)
    bag = launch_recorded(scenario, tmp_path, 5, 2)
    sweeps: dict[int, list[float]] = {0: [], 1: []}
    with AnyReader([bag], default_typestore=typestore()) as reader:
        for conn, _, raw in reader.messages(connections=reader.connections):
            if conn.topic.endswith("/lidar/points"):
                msg = reader.deserialize(raw, conn.msgtype)
                sweeps[int(conn.topic.split("/")[1][3:]) - 1].append(
                    msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)
    # 10 Hz sweeps stamped at their start: vehicle 1 all of them, vehicle 0 none that ends inside the window
    # (a sweep is published at the tick it completes, 0.1 s after its stamp)
    assert len(sweeps[1]) >= 15
    off = [t for t in sweeps[0] if 0.5 - 1e-9 <= t + 0.1 < 1.3 - 1e-9]
    assert off == [], off
    assert any(t + 0.1 < 0.5 for t in sweeps[0]) and any(t + 0.1 >= 1.3 for t in sweeps[0])
    assert len(sweeps[0]) <= len(sweeps[1]) - 6

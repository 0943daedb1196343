"""The downward range finder, and through it the sensor registry (docs/EXTENDING.md's worked example).

Core model: the slant range over the flat ground from geometry worked out here, the limits and the
REP-117 infinities, noise and dropout statistics, determinism. Registry: the scenario section is
validated onto the registered parameters; the Simulator builds and steps the model; the launch plan
adds its node. Graph: the generic sensor node, launched by ``qrsim launch`` in lockstep and recorded,
publishes sensor_msgs/Range whose readings equal the core model's stepped on the recorded ground truth
with the same seed, and the mount's static transform.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from rosenv import launch_recorded, scenario_with_sensors, sensor_updates

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.sensors.range_finder import RangeFinder, RangeFinderParams, true_range_m
from qrsim_ros.core.sensors.registry import SENSORS


def _states(rows: list[tuple[float, float, float]]) -> np.ndarray:
    """States (N, 13) at height h [m] above z = 0 with roll phi and pitch theta [rad]."""
    x = np.zeros((len(rows), 13))
    for i, (h, phi, theta) in enumerate(rows):
        x[i, 2], x[i, 3], x[i, 4] = -h, phi, theta
    return x


# --- the core model -------------------------------------------------------------------------------

def test_true_range_is_the_slant_range_to_the_ground() -> None:
    x = _states([(10.0, 0.0, 0.0), (10.0, 0.3, 0.0), (5.0, 0.2, -0.4), (10.0, math.pi, 0.0), (-1.0, 0, 0)])
    r = true_range_m(x)
    assert r[0] == pytest.approx(10.0, abs=1e-12)
    assert r[1] == pytest.approx(10.0 / math.cos(0.3), abs=1e-12)
    assert r[2] == pytest.approx(5.0 / (math.cos(0.2) * math.cos(-0.4)), abs=1e-12)
    assert r[3] == math.inf  # upside down: the beam points at the sky
    assert r[4] == -math.inf  # below the ground plane
    # another ground plane (the area's zmax): the height is measured from it
    assert true_range_m(_states([(10.0, 0, 0)]), ground_z_ned_m=2.0)[0] == pytest.approx(12.0)


def test_limits_give_the_rep117_infinities() -> None:
    p = RangeFinderParams(on=False, min_range_m=0.5, max_range_m=20.0)
    rf = RangeFinder(3, p)
    rf.reset(_states([(0.2, 0, 0), (10.0, 0, 0), (25.0, 0, 0)]))
    np.testing.assert_array_equal(rf.range_m, [-math.inf, 10.0, math.inf])
    assert rf.variance_m2 == 0.0


def test_noise_and_dropout_statistics() -> None:
    p = RangeFinderParams(on=True, sigma_m=0.1, dropout_probability=0.2)
    n = 4
    rf = RangeFinder(n, p, RandomStreams(11))
    x = _states([(10.0, 0.0, 0.0)] * n)
    rf.reset(x)
    readings = []
    for k in range(1, 5001):
        assert rf.step(k, x)
        readings.append(rf.range_m)
    r = np.array(readings).ravel()
    dropped = np.isinf(r)
    # dropout: binomial 95 % interval around 0.2 of 20000 updates (+-0.0055)
    assert abs(dropped.mean() - 0.2) < 0.0075
    err = r[~dropped] - 10.0
    assert abs(err.std() - 0.1) < 0.005 and abs(err.mean()) < 0.005
    assert rf.variance_m2 == pytest.approx(0.01)


def test_same_seed_same_readings_and_rates() -> None:
    p = RangeFinderParams(on=True, dt_s=0.1)
    a, b, c = (RangeFinder(2, p, RandomStreams(s)) for s in (5, 5, 6))
    x = _states([(8.0, 0.1, 0.0), (12.0, 0.0, 0.1)])
    for m in (a, b, c):
        m.reset(x)
    updates = [k for k in range(1, 21) if a.step(k, x) | b.step(k, x) | c.step(k, x)]
    assert updates == [5, 10, 15, 20]  # 0.1 s = every 5 ticks
    np.testing.assert_array_equal(a.range_m, b.range_m)
    assert not np.array_equal(a.range_m, c.range_m)


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"min_range_m": 5.0, "max_range_m": 1.0}, "min_range_m"),
    ({"dropout_probability": 1.5}, "dropout_probability"),
    ({"dt_s": 0.03}, "dt_s"),
])
def test_bad_parameters_are_one_clear_error(kwargs: dict[str, float], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        RangeFinderParams(**kwargs)


# --- the registration, in the scenario, the Simulator and the launch plan --------------------------

def _with_range_finder(section: dict | None = None) -> dict:
    return {"vehicle": {"sensors": {"range_finder": section or {}}}}


def test_scenario_section_is_validated_onto_the_registered_parameters() -> None:
    assert "range_finder" in SENSORS
    sc = load_scenario("keep_spot", _with_range_finder({"sigma_m": 0.3}))
    params = sc.vehicle.sensors["range_finder"]
    assert isinstance(params, RangeFinderParams) and params.sigma_m == 0.3
    assert params.ground_z_ned_m == sc.ground_z_ned_m
    with pytest.raises(ScenarioError,
                       match=r"keep_spot.yaml: vehicle.sensors.range_finder.sigma: unknown key"):
        load_scenario("keep_spot", _with_range_finder({"sigma": 0.3}))
    with pytest.raises(ScenarioError,
                       match=r"vehicle.sensors.sonar: unknown sensor \(registered: .*range_finder"):
        load_scenario("keep_spot", {"vehicle": {"sensors": {"sonar": {}}}})
    assert load_scenario("keep_spot").vehicle.sensors == {}


def test_simulator_builds_and_steps_the_registered_sensor() -> None:
    sim = Simulator.from_scenario("keep_spot", {"seed": 3, **_with_range_finder({"on": False})})
    rf = sim.sensor("range_finder")
    for _ in range(20):
        sim.step([[0.05, -0.03, 0.62, 0.2, 12.0]])
        np.testing.assert_allclose(rf.range_m, true_range_m(sim.true_state(), sim.scenario.ground_z_ned_m),
                                   rtol=0, atol=1e-12)
    with pytest.raises(KeyError, match="no sensor 'lidar'"):
        sim.sensor("lidar")
    # a scenario without the section has no such sensor, and its episodes are unchanged by the registry
    assert Simulator.from_scenario("keep_spot").sensors == {}


def test_launch_plan_adds_a_node_per_listed_sensor(tmp_path: Path) -> None:
    from qrsim_ros.launch_plan import GROUND_TRUTH_CONSUMERS, plan

    path = _scenario_file(tmp_path, "keep_spot", {"on": True})
    specs = plan(str(path), autopilot=False)
    names = [s.name for s in specs]
    assert "range_finder" in names and "range_finder" in GROUND_TRUTH_CONSUMERS
    gate = next(s for s in specs if s.name == "vehicle_dynamics").parameters["start_subscribers"]
    assert gate == sum(n in GROUND_TRUTH_CONSUMERS for n in names)
    assert "range_finder" not in [s.name for s in plan("keep_spot", autopilot=False)]


def _scenario_file(tmp_path: Path, base: str, section: dict, **extra: object) -> Path:
    return scenario_with_sensors(tmp_path, base, f"{base}_range_finder", {"range_finder": section}, **extra)


# --- the generic sensor node over DDS ----------------------------------------------------------------

@pytest.mark.graph
@pytest.mark.timeout(300)
def test_sensor_node_publishes_the_core_models_readings(tmp_path: Path) -> None:
    from rosenv import require_ros

    require_ros()
    from rosbags.highlevel import AnyReader

    from qrsim_ros.bag.types import typestore

    section = {"on": True, "sigma_m": 0.05, "dropout_probability": 0.1, "dt_s": 0.04}
    scenario = _scenario_file(tmp_path, "keep_spot_x10", section, num_vehicles=2)
    seed = 21
    bag = launch_recorded(scenario, tmp_path, seed, 4)

    truth: dict[int, np.ndarray] = {}
    ranges: dict[tuple[int, int], float] = {}
    statics = []
    with AnyReader([bag], default_typestore=typestore()) as reader:
        for conn, _, raw in reader.messages(connections=reader.connections):
            if conn.topic == "/sim/vehicle_status":
                msg = reader.deserialize(raw, conn.msgtype)
                truth[int(msg.tick)] = np.asarray(msg.state, float).reshape(-1, 13)
            elif conn.topic.endswith("/range_finder"):
                msg = reader.deserialize(raw, conn.msgtype)
                assert msg.header.frame_id == conn.topic.strip("/").split("/")[0] + "/range_finder_link"
                assert (msg.min_range, msg.max_range) == (pytest.approx(0.05), pytest.approx(40.0))
                k = (msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec) // 20_000_000
                ranges[(int(conn.topic.split("/")[1][3:]) - 1, k)] = msg.range
            elif conn.topic == "/tf_static":
                msg = reader.deserialize(raw, conn.msgtype)
                statics += [t.child_frame_id for t in msg.transforms]
    assert {"uav1/range_finder_link", "uav2/range_finder_link"} <= set(statics)
    # the core model stepped on the recorded ground truth with the scenario's seed and streams
    params = load_scenario(str(scenario)).vehicle.sensors["range_finder"]
    model = RangeFinder(2, params, RandomStreams(seed))
    checked = 0
    for k in sensor_updates(model, truth):  # compared where the bag holds the tick's ground truth
        for i in range(2):
            if k in truth and (i, k) in ranges:
                expected = float(np.float32(model.range_m[i]))  # Range.range is float32
                assert ranges[(i, k)] == expected, (i, k)
                checked += 1
    assert checked >= 0.8 * 2 * (max(truth) // 2)  # every second tick (0.04 s), nearly all recorded
    assert any(math.isinf(v) for v in ranges.values())  # dropouts show as +inf

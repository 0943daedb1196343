"""Range finders over the 3-D scene (core.sensors.scene_range_finders): beams against known geometry,
attitude, limits and noise through the downward range finder's reading, their messages' frames, and the
node over DDS equal to the core model stepped on the recorded ground truth."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from rosenv import launch_recorded, scenario_with_sensors, sensor_updates

from qrsim_ros.core.common.frames import frd_to_flu
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.builders import build_registered_sensor, build_scene
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.sensors.range_finder import RangeFinderParams
from qrsim_ros.core.sensors.scene_range_finders import BEAM_AXES, RangeFindersParams, SceneRangeFinders
from qrsim_ros.core.world.scene import GroundParams, ObstacleParams, Scene, SceneParams

LIMITS = (-100.0, 100.0, -100.0, 100.0, -60.0, 0.0)
ALL_BEAMS = {b: RangeFinderParams(max_range_m=80.0) for b in BEAM_AXES}


def _scene() -> Scene:
    # a wall 20 m north (its face at north 19.5), a pole 12 m east, flat ground; nothing west or south
    return Scene(SceneParams(obstacles=(
        ObstacleParams(type="box", center_ne_m=(20.0, 0.0), size_m=(1.0, 40.0, 30.0)),
        ObstacleParams(type="cylinder", center_ne_m=(0.0, 12.0), radius_m=0.5, height_m=20.0))),
        LIMITS, 0.0, RandomStreams(1))


def _state(h: float, phi: float = 0.0, theta: float = 0.0, psi: float = 0.0) -> np.ndarray:
    x = np.zeros((1, 13))
    x[0, 2:6] = -h, phi, theta, psi
    return x


def test_every_beam_against_the_scene() -> None:
    rf = SceneRangeFinders(1, RangeFindersParams(**ALL_BEAMS), RandomStreams(1), _scene())
    rf.reset(_state(10.0))
    assert rf.range_m("down")[0] == pytest.approx(10.0, abs=1e-4)
    assert rf.range_m("front")[0] == pytest.approx(19.5, abs=1e-4)
    assert rf.range_m("right")[0] == pytest.approx(11.5, abs=3e-3)  # a 24+-gon of a 0.5 m pole
    assert math.isinf(rf.range_m("up")[0]) and math.isinf(rf.range_m("back")[0])
    assert math.isinf(rf.range_m("left")[0])
    # the 45 deg beams: the wall's face along the diagonals, the ground 10 m below along the front-down
    assert rf.range_m("front_left")[0] == pytest.approx(19.5 * math.sqrt(2.0), abs=1e-4)
    assert rf.range_m("front_right")[0] == pytest.approx(19.5 * math.sqrt(2.0), abs=1e-4)
    assert rf.range_m("front_down")[0] == pytest.approx(10.0 * math.sqrt(2.0), abs=1e-4)
    # yawed 90 degrees right: the front beam looks east at the pole, the left beam north at the wall
    rf.reset(_state(10.0, psi=math.pi / 2))
    assert rf.range_m("front")[0] == pytest.approx(11.5, abs=3e-3)
    assert rf.range_m("left")[0] == pytest.approx(19.5, abs=1e-4)
    # rolled 0.3 rad: the downward beam's slant range
    rf.reset(_state(10.0, phi=0.3))
    assert rf.range_m("down")[0] == pytest.approx(10.0 / math.cos(0.3), abs=1e-4)


def test_a_height_map_under_the_downward_beam() -> None:
    scene = Scene(SceneParams(ground=GroundParams(type="heightmap", heights_m=((4.0, 4.0), (4.0, 4.0)),
                                                  cell_size_m=10.0, origin_ne_m=(0.0, 0.0))),
                  LIMITS, 0.0, RandomStreams(1))
    rf = SceneRangeFinders(2, RangeFindersParams(), RandomStreams(1), scene)
    x = np.vstack([_state(10.0), _state(10.0)])
    x[0, :2] = 5.0, 5.0  # over the 4 m plateau
    x[1, :2] = -50.0, -50.0  # over the flat ground
    rf.reset(x)
    np.testing.assert_allclose(rf.range_m("down"), [6.0, 10.0], atol=1e-4)


def test_limits_rates_noise_and_the_hold_of_invalid_vehicles() -> None:
    beams = {"down": RangeFinderParams(min_range_m=1.0, max_range_m=20.0, dt_s=0.04),
             "front": RangeFinderParams(on=True, sigma_m=0.1, dt_s=0.02, max_range_m=80.0)}
    rf = SceneRangeFinders(2, RangeFindersParams(**beams), RandomStreams(5), _scene())
    x = np.vstack([_state(0.5), _state(30.0)])
    rf.reset(x)
    assert rf.range_m("down").tolist() == [-math.inf, math.inf]  # too close, too far (REP-117)
    assert rf.step(1, x) and rf.updated == ("front",)  # the 0.04 s beam waits for tick 2
    assert rf.step(2, x) and rf.updated == ("down", "front")
    held = rf.range_m("front")
    rf.step(3, x, valid=[False, True])
    assert rf.range_m("front")[0] == held[0] and rf.range_m("front")[1] != held[1]
    errors = []
    for k in range(4, 2004):
        rf.step(k, x)
        errors.append(rf.range_m("front")[1] - 19.5)
    assert np.std(errors) == pytest.approx(0.1, rel=0.1)
    assert abs(np.mean(errors)) < 0.02
    other = SceneRangeFinders(2, RangeFindersParams(**beams), RandomStreams(6), _scene())
    other.reset(x)
    other.step(1, x)
    fresh = SceneRangeFinders(2, RangeFindersParams(**beams), RandomStreams(5), _scene())
    fresh.reset(x)
    fresh.step(1, x)
    twin = SceneRangeFinders(2, RangeFindersParams(**beams), RandomStreams(5), _scene())
    twin.reset(x)
    twin.step(1, x)
    assert fresh.range_m("front").tolist() == twin.range_m("front").tolist()
    assert fresh.range_m("front").tolist() != other.range_m("front").tolist()


def test_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="no beam fitted"):
        RangeFindersParams(down=None)
    with pytest.raises(ScenarioError, match="range_finders looks at the 3-D scene: the scenario needs"):
        Simulator(load_scenario("keep_spot", {"vehicle": {"sensors": {"range_finders": {}}}}))
    with pytest.raises(ScenarioError, match=r"vehicle\.sensors\.range_finders\.front\.sigma: unknown key"):
        load_scenario("keep_spot", {"vehicle": {"sensors": {"range_finders": {"front": {"sigma": 1}}}}})


def test_beam_frames_point_their_x_axis_along_the_beam() -> None:
    pytest.importorskip("geometry_msgs.msg", reason="needs the ROS 2 message packages (./qrsim test)")
    from qrsim_ros.ros.conversions.range_finders import static_transforms

    params = RangeFindersParams(**ALL_BEAMS)
    transforms = static_transforms(2, None, params)
    assert len(transforms) == 2 * len(BEAM_AXES)
    for t in transforms:
        beam = t.child_frame_id.split("/range_")[1][:-len("_link")]
        q = t.transform.rotation
        u, w = np.array([q.x, q.y, q.z]), q.w
        x_axis = np.array([1.0, 0.0, 0.0])
        rotated = x_axis + 2.0 * np.cross(u, np.cross(u, x_axis) + w * x_axis)
        np.testing.assert_allclose(rotated, frd_to_flu(np.array(BEAM_AXES[beam])), atol=1e-12)


# --- the node over DDS ------------------------------------------------------------------------------

@pytest.mark.graph
@pytest.mark.timeout(300)
def test_the_node_publishes_the_core_models_readings(tmp_path: Path) -> None:
    from rosenv import require_ros

    require_ros()
    from rosbags.highlevel import AnyReader

    from qrsim_ros.bag.types import typestore

    beams = {"down": {"on": True, "sigma_m": 0.05}, "right": {"on": True, "sigma_m": 0.05, "dt_s": 0.04}}
    wall = {"type": "box", "center_ne_m": [0.0, 8.0], "size_m": [300.0, 1.0, 30.0]}
    scenario = scenario_with_sensors(tmp_path, "keep_spot_x10", "keep_spot_walls", {"range_finders": beams},
                                     num_vehicles=2, scene={"obstacles": [wall]})
    seed = 8
    bag = launch_recorded(scenario, tmp_path, seed, 2)

    truth: dict[int, np.ndarray] = {}
    ranges: dict[tuple[str, int, int], float] = {}
    statics: list[str] = []
    with AnyReader([bag], default_typestore=typestore()) as reader:
        for conn, _, raw in reader.messages(connections=reader.connections):
            if conn.topic == "/sim/vehicle_status":
                msg = reader.deserialize(raw, conn.msgtype)
                truth[int(msg.tick)] = np.asarray(msg.state, float).reshape(-1, 13)
            elif "/range/" in conn.topic:
                msg = reader.deserialize(raw, conn.msgtype)
                _, uav, _, beam = conn.topic.split("/")
                assert conn.msgtype == "sensor_msgs/msg/Range"
                assert msg.header.frame_id == f"{uav}/range_{beam}_link"
                k = (msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec) // 20_000_000
                ranges[(beam, int(uav[3:]) - 1, k)] = msg.range
            elif conn.topic == "/tf_static":
                statics += [t.child_frame_id for t in reader.deserialize(raw, conn.msgtype).transforms]
    assert {"uav1/range_down_link", "uav2/range_right_link"} <= set(statics)
    sc = load_scenario(str(scenario), {"seed": seed})
    # the core model with the scenario's scene and streams, as the node builds it
    scene = build_scene(sc, RandomStreams(seed))
    model = build_registered_sensor(sc, "range_finders", RandomStreams(seed), scene)
    checked = 0
    for k in sensor_updates(model, truth):
        for beam in model.updated:
            for i in range(2):
                if k in truth and (beam, i, k) in ranges:
                    assert ranges[(beam, i, k)] == float(np.float32(model.range_m(beam)[i])), (beam, i, k)
                    checked += 1
    assert checked >= 0.8 * (2 * 100 + 2 * 50)
    right = [v for (b, _, _), v in ranges.items() if b == "right"]
    east = np.array([truth[k][:, 1] for k in sorted(truth)])
    assert np.median(right) == pytest.approx(7.5 - np.median(east), abs=0.5)  # the wall's face at east 7.5

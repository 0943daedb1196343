"""RViz configurations, the Pelican URDF and the visualisation topics.

- Pure: every rviz/<family>.rviz is an RViz 2 YAML config (panels, fixed frame ``map``, displays of
  rviz_default_plugins with a topic and full QoS); the URDF has QRSim's graphics dimensions (spec 2.4)
  and is a well-formed robot for robot_state_publisher; the message builders of
  ``qrsim_ros.nodes.markers`` and the throttle, against values worked out here.
- Live (one launch per family, shared by its tests; each in a free ROS_DOMAIN_ID): ``qrsim launch <family>
  --single-process`` runs the family's default variant for a few simulated seconds at the wall-clock
  pace (so that the wall-clock throttles do not thin the messages) while the probe records the graph;
  the probe joins the run (``rosenv.RunJoiner``), so the run's clock starts only once it is matched.
  Every topic a config references must be published with the type its display needs and compatible
  QoS, every frame it references (fixed frame, RobotModel TF prefix + URDF links, the messages' frame
  ids) must exist on /tf or /tf_static, and the visualisation topics must respect their throttles
  (stamps at least a period apart, in simulated time, and no message repeating the previous one's
  content).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rosenv
import yaml
from rosenv import REPO_ROOT, free_domain, require_ros, ros_env

#: the module's shared run is paid for by the first test that reads it (its set-up is in its budget)
pytestmark = pytest.mark.timeout(300)

RVIZ_DIR = REPO_ROOT / "rviz"
URDF = REPO_ROOT / "urdf" / "pelican.urdf"
FAMILIES = ("search_rescue", "plume", "cats_mouse", "keep_spot")
#: Every shipped config: the families' and the scene variant's (rviz/search_rescue_scene.rviz: lidar,
#: fisheye, depth and range displays over the 3-D scene, docs/SCENE.md).
CONFIGS = (*FAMILIES, "search_rescue_scene", "team_search")
#: Vehicles of each family's default variant (2c, 3a, 1a, keep_spot) and of the scene variant.
DEFAULT_VEHICLES = {"search_rescue": 3, "plume": 1, "cats_mouse": 4, "keep_spot": 1, "search_rescue_scene": 2,
                    "team_search": 4}
#: A Foxglove layout beside each config (foxglove_layouts/<family>.json; docs/FOXGLOVE.md), checked against
#: the same runs: every topic it names is in the graph, with a type its panel shows.
LAYOUT_DIR = REPO_ROOT / "foxglove_layouts"
LAYOUTS = CONFIGS
#: The message types each layout panel (Foxglove's and Lichtblick's panel type ids) can show.
PANEL_TYPES = {
    "3D": {"visualization_msgs/msg/MarkerArray", "sensor_msgs/msg/PointCloud2", "nav_msgs/msg/OccupancyGrid",
           "nav_msgs/msg/Path"},
    "ImageViewPanel": {"sensor_msgs/msg/Image"},
    "RosOut": {"rcl_interfaces/msg/Log"},
}
#: Simulated seconds each family runs (long enough for ~16 periods of the 0.5 s throttle).
RUN_S = 6.0
#: Wall-clock deadlines: discovery of every referenced topic, and the whole run.
DISCOVERY_S = 90.0
RUN_DEADLINE_S = 150.0

#: The message type each RViz display class subscribes to (rviz_default_plugins' plugin description).
DISPLAY_TYPES = {
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
    "rviz_default_plugins/Marker": "visualization_msgs/msg/Marker",
    "rviz_default_plugins/PointCloud2": "sensor_msgs/msg/PointCloud2",
    "rviz_default_plugins/Map": "nav_msgs/msg/OccupancyGrid",
    "rviz_default_plugins/Path": "nav_msgs/msg/Path",
    "rviz_default_plugins/RobotModel": "std_msgs/msg/String",
    "rviz_default_plugins/Image": "sensor_msgs/msg/Image",
    "rviz_default_plugins/Range": "sensor_msgs/msg/Range",
}
#: Display classes without a topic.
TOPICLESS = {"rviz_default_plugins/Grid", "rviz_default_plugins/TF", "rviz_common/Group"}
QOS_KEYS = {"Value", "Depth", "Durability Policy", "Reliability Policy", "History Policy"}

#: The scene variant's sensor streams its RViz config shows, and their periods (the scenario's rates).
SENSOR_PERIODS_S = {"/lidar/points": 0.1, "/range/down": 0.02, "/fisheye/image_raw": 0.05,
                    "/depth/image_raw": 0.05, "/range/front": 0.1, "/range/left": 0.1, "/range/right": 0.1}


def expected_period_s(topic: str) -> float | None:
    """Least simulated time between two messages of a visualisation topic [s], from the nodes' defaults
    (viz_period_s 0.5; the referee's marker_period_s and path_period_s 1.0; plume_field's
    field_period_s 2.0); None: one message per episode (or once)."""
    if topic == "/plume/field":
        return 2.0
    if topic == "/referee/markers" or topic.endswith("/ground_truth/path"):
        return 1.0
    if topic.startswith("/viz/") and topic != "/viz/terrain":
        return 0.5
    if topic.endswith("/camera/detections"):
        return 1.0  # a sensor at 1 Hz, not throttled, but never faster
    for suffix, period_s in SENSOR_PERIODS_S.items():
        if topic.endswith(suffix):
            return period_s
    return None


# --- the .rviz files ----------------------------------------------------------------------------------

def load_rviz(family: str) -> dict[str, Any]:
    return yaml.safe_load((RVIZ_DIR / f"{family}.rviz").read_text())


def walk_displays(displays: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every display, groups flattened."""
    for d in displays:
        yield d
        if d.get("Class") == "rviz_common/Group":
            yield from walk_displays(d.get("Displays", []))


def topic_properties(node: Any) -> Iterator[dict[str, Any]]:
    """Every topic property (a mapping with a Value and QoS keys) anywhere below ``node``."""
    if isinstance(node, dict):
        if "Durability Policy" in node or "Reliability Policy" in node:
            yield node
        for v in node.values():
            yield from topic_properties(v)
    elif isinstance(node, list):
        for v in node:
            yield from topic_properties(v)


@dataclass(frozen=True)
class Ref:
    """One topic a config references: its display class, QoS and the display's settings."""

    topic: str
    display: str
    msg_type: str
    durability: str
    reliability: str
    settings: dict[str, Any] = field(hash=False, compare=False, default_factory=dict)


def topic_refs(family: str) -> list[Ref]:
    cfg = load_rviz(family)
    refs = []
    for d in walk_displays(cfg["Visualization Manager"]["Displays"]):
        cls = d["Class"]
        if cls in TOPICLESS:
            continue
        props = list(topic_properties(d))
        assert len(props) == 1, f"{family}: display {d.get('Name')!r} has {len(props)} topic properties"
        t = props[0]
        refs.append(Ref(t["Value"], cls, DISPLAY_TYPES[cls], t["Durability Policy"], t["Reliability Policy"],
                        d))
    return refs


def frame_refs(family: str) -> set[str]:
    """Frames a config references: the fixed frame, view/grid frames, RobotModel prefix + URDF links."""
    cfg = load_rviz(family)
    vm = cfg["Visualization Manager"]
    frames = {vm["Global Options"]["Fixed Frame"]}
    links = urdf_links()
    for d in walk_displays(vm["Displays"]):
        for key in ("Reference Frame", "Target Frame"):
            if key in d and d[key] != "<Fixed Frame>":
                frames.add(d[key])
        if d["Class"] == "rviz_default_plugins/RobotModel":
            frames |= {f"{d['TF Prefix']}/{link}" for link in links}
    target = vm["Views"]["Current"].get("Target Frame", "<Fixed Frame>")
    if target != "<Fixed Frame>":
        frames.add(target)
    return frames


@dataclass(frozen=True)
class LayoutRef:
    """One topic a Foxglove layout names: the panel (type!id), and for a plot the field path after it."""

    topic: str
    panel: str
    field_path: tuple[str, ...] = ()
    settings: dict[str, Any] = field(hash=False, compare=False, default_factory=dict)


def layout_leaves(tree: Any) -> list[str]:
    """The panel ids of a layout's split tree, left to right."""
    if isinstance(tree, str):
        return [tree]
    assert set(tree) >= {"first", "second", "direction"} and tree["direction"] in ("row", "column"), tree
    return layout_leaves(tree["first"]) + layout_leaves(tree["second"])


def layout_refs(family: str) -> list[LayoutRef]:
    doc = json.loads((LAYOUT_DIR / f"{family}.json").read_text())
    refs = []
    for panel, cfg in doc["configById"].items():
        kind = panel.split("!")[0]
        if kind == "3D":
            refs += [LayoutRef(t, panel, settings=v) for t, v in cfg["topics"].items()]
            refs += [LayoutRef(layer["topic"], "3D urdf layer") for layer in cfg["layers"].values()
                     if layer.get("sourceType") == "topic"]
        elif kind == "ImageViewPanel":
            refs.append(LayoutRef(cfg["imageMode"]["imageTopic"], panel))
        elif kind == "Plot":
            for series in cfg["paths"]:
                topic, *path = series["value"].split(".")
                refs.append(LayoutRef(topic, panel, tuple(path)))
        elif kind == "RawMessages":
            refs.append(LayoutRef(cfg["topicPath"], panel))
        elif kind == "RosOut":
            refs.append(LayoutRef("/rosout", panel))
        else:
            raise AssertionError(f"{family}: panel {panel!r} of a type the test does not know")
    return refs


@pytest.mark.parametrize("family", LAYOUTS)
def test_foxglove_layout_is_a_layout_file(family: str) -> None:
    """The format Foxglove and Lichtblick export and import: panels by "type!id" in configById, arranged
    by a tree of splits whose leaves are exactly those panels."""
    doc = json.loads((LAYOUT_DIR / f"{family}.json").read_text())
    assert set(doc) >= {"configById", "layout", "globalVariables", "userNodes", "playbackConfig"}
    leaves = layout_leaves(doc["layout"])
    assert sorted(leaves) == sorted(doc["configById"]) and len(set(leaves)) == len(leaves)
    kinds = {panel.split("!")[0] for panel in leaves}
    assert {"3D", "Plot", "RawMessages", "RosOut"} <= kinds, kinds
    refs = layout_refs(family)
    vehicles = DEFAULT_VEHICLES[family]
    # every vehicle of the family's default variant: its model, path, height and battery
    for i in range(1, vehicles + 1):
        for part in ("robot_description", "ground_truth/path", "ground_truth/odom", "battery"):
            assert f"/uav{i}/{part}" in {r.topic for r in refs}, (family, i, part)
    assert "/referee/status" in {r.topic for r in refs}


def _field_value(msg_type: str, path: tuple[str, ...]) -> Any:
    value = _msg_class(msg_type)()
    for part in path:
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("family", CONFIGS)
def test_rviz_file_is_an_rviz2_config(family: str) -> None:
    cfg = load_rviz(family)
    panels = {p["Class"] for p in cfg["Panels"]}
    assert {"rviz_common/Displays", "rviz_common/Views", "rviz_common/Time"} <= panels
    vm = cfg["Visualization Manager"]
    assert vm["Global Options"]["Fixed Frame"] == "map"
    assert vm["Views"]["Current"]["Class"].startswith("rviz_default_plugins/")
    classes = [d["Class"] for d in walk_displays(vm["Displays"])]
    assert all(c in DISPLAY_TYPES or c in TOPICLESS for c in classes), classes
    assert {"rviz_default_plugins/Grid", "rviz_default_plugins/TF"} <= set(classes)
    for props in topic_properties(vm):
        assert set(props) >= QOS_KEYS, props
        assert props["Value"].startswith("/"), props  # absolute names: RViz's node is in the root namespace
        assert props["Durability Policy"] in ("Volatile", "Transient Local")
        assert props["Reliability Policy"] in ("Reliable", "Best Effort")
        assert props["History Policy"] == "Keep Last" and props["Depth"] >= 1
    # a RobotModel (from its topic, TF prefix uavN) and a ground-truth path for every default vehicle
    robots = [d for d in walk_displays(vm["Displays"]) if d["Class"] == "rviz_default_plugins/RobotModel"]
    n = DEFAULT_VEHICLES[family]
    assert sorted(d["TF Prefix"] for d in robots) == [f"uav{i}" for i in range(1, n + 1)]
    for d in robots:
        assert d["Description Source"] == "Topic"
        assert d["Description Topic"]["Value"] == f"/{d['TF Prefix']}/robot_description"
        assert d["Description Topic"]["Durability Policy"] == "Transient Local"
    topics = {r.topic for r in topic_refs(family)}
    assert {f"/uav{i}/ground_truth/path" for i in range(1, n + 1)} <= topics
    assert {"/viz/task_status", "/viz/gps", "/viz/wind"} <= topics
    per_family = {"search_rescue": {"/viz/terrain", "/referee/markers", "/viz/camera_footprints",
                                    *(f"/uav{i}/camera/detections" for i in range(1, n + 1))},
                  "plume": {"/plume/field", "/plume/markers"},
                  "cats_mouse": {"/referee/markers"}, "keep_spot": {"/referee/markers"},
                  "search_rescue_scene": {"/scene/markers", "/referee/markers", "/uav1/fisheye/image_raw",
                                          *(f"/uav{i}/lidar/points" for i in range(1, n + 1)),
                                          *(f"/uav{i}/range/down" for i in range(1, n + 1))},
                  "team_search": {"/scene/markers", "/referee/markers", "/viz/comms",
                                  *(f"/uav{i}/range/{beam}" for i in range(1, n + 1)
                                    for beam in ("front", "left", "right", "down"))}}[family]
    assert per_family <= topics


def test_launch_plan_starts_rviz_with_the_family_config() -> None:
    from qrsim_ros.launch_plan import plan

    cases = (("search_rescue", "2a"), ("plume", "3e"), ("cats_mouse", None), ("keep_spot", None))
    for family, variant in cases:
        (rviz,) = [s for s in plan(family, variant=variant, seed=3, use_rviz=True) if s.name == "rviz2"]
        assert rviz.arguments[0] == "-d" and Path(rviz.arguments[1]).name == f"{family}.rviz"
        assert Path(rviz.arguments[1]).is_file() and rviz.parameters["use_sim_time"] is True
    (rviz,) = [s for s in plan("search_rescue", variant="scene", seed=3, use_rviz=True) if s.name == "rviz2"]
    assert Path(rviz.arguments[1]).name == "search_rescue_scene.rviz"
    # the generic tasks take keep_spot's view
    (rviz,) = [s for s in plan("goto_waypoint", seed=3, use_rviz=True) if s.name == "rviz2"]
    assert Path(rviz.arguments[1]).name == "keep_spot.rviz"


# --- the URDF -----------------------------------------------------------------------------------------

def urdf_links() -> list[str]:
    return [link.get("name") for link in ET.parse(URDF).getroot().iter("link")]


def test_urdf_is_a_well_formed_robot() -> None:
    root = ET.parse(URDF).getroot()
    assert root.tag == "robot" and root.get("name")
    links = urdf_links()
    assert len(links) == len(set(links)) and "base_link" in links
    joints = list(root.iter("joint"))
    children = [j.find("child").get("link") for j in joints]
    parents = [j.find("parent").get("link") for j in joints]
    # a tree with one root (robot_state_publisher's KDL parser needs it), every joint between known links
    assert set(children) | set(parents) <= set(links)
    assert [link for link in links if link not in children] == ["base_link"]
    materials = {m.get("name") for m in root.findall("material")}
    for v in root.iter("visual"):
        m = v.find("material")
        assert m is not None and m.get("name") in materials


def _xyz(el: ET.Element | None) -> np.ndarray:
    return np.zeros(3) if el is None else np.array([float(v) for v in el.get("xyz", "0 0 0").split()])


def test_urdf_has_qrsims_graphics_dimensions() -> None:
    """spec 2.4 / pelican_config.m: arm length AL 0.4 m rotor axis to rotor axis (PelicanGraphics
    puts the rotors at +-AL/2), arm width 0.01, thickness 0.02, body 0.12 x 0.12 x 0.08, rotor
    radius 0.08 m, rotors 0.02 m above the truss (FLU: +z)."""
    visuals = list(ET.parse(URDF).getroot().find("link[@name='base_link']").iter("visual"))
    rotors = [v for v in visuals if v.find("geometry/cylinder") is not None]
    boxes = [v for v in visuals if v.find("geometry/box") is not None]
    centres = sorted(tuple(np.round(_xyz(v.find("origin")), 6)) for v in rotors)
    assert centres == sorted([(0.2, 0.0, 0.02), (-0.2, 0.0, 0.02), (0.0, 0.2, 0.02), (0.0, -0.2, 0.02)])
    assert all(float(v.find("geometry/cylinder").get("radius")) == 0.08 for v in rotors)
    sizes = sorted(tuple(sorted(float(s) for s in v.find("geometry/box").get("size").split())) for v in boxes)
    assert sizes == sorted([(0.01, 0.02, 0.4), (0.01, 0.02, 0.4), (0.08, 0.12, 0.12)])
    for v in boxes:  # the arms lie along x and y through the centre, 0.01 wide and 0.02 thick
        size = [float(s) for s in v.find("geometry/box").get("size").split()]
        if 0.4 in size:
            assert size[2] == 0.02 and np.allclose(_xyz(v.find("origin")), 0)


# --- message builders (pure) --------------------------------------------------------------------------

def test_throttle_publishes_at_most_once_per_period_and_only_changes() -> None:
    from qrsim_ros.ros.markers import VizThrottle

    th = VizThrottle(0.5, min_wall_s=0.0)
    published = []
    content = 0
    for k in range(0, 200):  # 4 s of ticks; the content changes every 0.3 s, then stops at 2 s
        t = k * 0.02
        if k % 15 == 0 and t < 2.0:
            content += 1
        if th.due(t) and th.changed(t, content):
            published.append(round(t, 2))
    # due at 0, 0.5, 1.0, ...; published when the content differs from the last published one
    assert published == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert th.published == 5
    # checked at 3.5 (unchanged: not published): the next check is due at 4.0
    assert not th.due(3.98) and th.due(4.0) and not th.changed(4.0, content)
    assert th.due(0.0)  # time went back (a new episode): due at once
    th.reset()
    assert th.due(4.5) and th.changed(4.5, content)  # forgot the content: publishes the same again
    with pytest.raises(ValueError):
        VizThrottle(-1.0)


def test_throttle_also_caps_the_wall_clock_rate() -> None:
    """20x faster than real time (a tick every 1 ms of wall time): the 0.5 s simulated period alone
    would allow 40 messages per wall second; the 0.2 s wall minimum allows 5."""
    from qrsim_ros.ros.markers import VizThrottle

    wall = [0.0]
    th = VizThrottle(0.5, min_wall_s=0.2, clock=lambda: wall[0])
    published = []
    for k in range(1000):  # 20 s simulated in 1 s of wall time
        wall[0] = k * 0.001
        if th.due(k * 0.02) and th.changed(k * 0.02, k):
            published.append((round(k * 0.02, 2), round(wall[0], 3)))
    # every 0.2 s of wall time, to within one tick (1 ms; float sums land either side)
    assert np.allclose([w for _, w in published], [0.0, 0.2, 0.4, 0.6, 0.8], atol=0.0011)
    assert all(b[0] - a[0] >= 0.5 for a, b in itertools.pairwise(published))
    assert th.due(0.0)  # a new episode is due at once, whatever the wall clock


def test_content_key_ignores_changes_below_its_resolution() -> None:
    from qrsim_ros.ros.markers import content_key

    a = np.array([[1.0, 2.0, np.nan]])
    assert content_key(a) == content_key(a + 0.004)  # 1 cm resolution: 4 mm is no change
    assert content_key(a) != content_key(a + 0.006)
    assert content_key(a, "x", 1.0) != content_key(a, "y", 1.0)


def test_persons_markers_colours_and_positions() -> None:
    require_ros()
    from visualization_msgs.msg import Marker

    from qrsim_ros.ros.markers import persons_markers

    centres_ned = np.array([[10.0, -5.0, 0.0], [-3.0, 4.0, 0.0]])
    arr = persons_markers(centres_ned, [False, True], 0.5, "map", None)
    clear, *persons = arr.markers
    assert clear.action == Marker.DELETEALL
    assert [m.id for m in persons] == [0, 1] and all(m.type == Marker.CYLINDER for m in persons)
    # NED (n, e, d) -> ENU (e, n, -d); the cylinder stands on the ground: centre at half its height
    assert (persons[0].pose.position.x, persons[0].pose.position.y) == (-5.0, 10.0)
    assert persons[0].pose.position.z == pytest.approx(0.9)
    assert persons[0].color.r > 0.5 > persons[0].color.g  # not found: red
    assert persons[1].color.g > 0.5 > persons[1].color.r  # found: green


def test_retrieve_markers_show_the_sites_and_each_targets_state() -> None:
    require_ros()
    from visualization_msgs.msg import Marker

    from qrsim_ros.ros.markers import retrieve_markers

    targets_ned = np.array([[1.0, -2.0, -0.05], [0.5, 0.5, -0.6], [-1.0, 3.0, -0.05]])
    sites = [((-1.8, -2.5), 0.25, (0.0, 0.0, 1.0, 0.5)), ((1.3, -1.3), 0.25, (0.0, 1.0, 0.0, 0.3))]
    arr = retrieve_markers(targets_ned, [False, True, False], [True, False, False], 0.05, sites, "map", None)
    clear, *rest = arr.markers
    assert clear.action == Marker.DELETEALL
    discs = [m for m in rest if m.ns == "sites"]
    balls = [m for m in rest if m.ns == "targets"]
    assert len(discs) == 2 and all(m.type == Marker.CYLINDER for m in discs)
    # NED (n, e) -> ENU (e, n); a disc of the site's diameter flat on the floor
    assert (discs[1].pose.position.x, discs[1].pose.position.y) == (-1.3, 1.3)
    assert discs[1].scale.x == discs[1].scale.y == pytest.approx(0.5) and discs[1].scale.z < 0.05
    assert [m.id for m in balls] == [0, 1, 2] and all(m.type == Marker.SPHERE for m in balls)
    assert balls[1].pose.position.z == pytest.approx(0.6) and balls[1].scale.x == pytest.approx(0.1)
    assert balls[0].color.g > 0.5 > balls[0].color.r  # deposited: green
    assert balls[1].color.r > 0.5 and balls[1].color.g > 0.5  # carried: yellow
    assert balls[2].color.r > 0.5 > balls[2].color.g  # waiting: red


def test_arrow_footprint_gps_and_target_markers() -> None:
    require_ros()
    from visualization_msgs.msg import Marker

    from qrsim_ros.ros.markers import (
        TrackHistory,
        arrow_markers,
        footprint_markers,
        footprint_outline_ned,
        gps_markers,
        target_markers,
    )

    arr = arrow_markers([[0, 0, 10], [np.nan, 0, 0]], [[1.0, -2.0, 0.5], [1, 1, 1]], "map", None, scale_s=2.0)
    (arrow,) = arr.markers[1:]  # the vehicle without a position is left out
    assert arrow.type == Marker.ARROW
    assert [(p.x, p.y, p.z) for p in arrow.points] == [(0, 0, 10), (2.0, -4.0, 11.0)]

    # a 2 x 3 window grid: corners (3, 4, 3) NED; the outline walks the border once and closes
    n, e = np.meshgrid(np.arange(3.0), np.arange(4.0), indexing="ij")
    corners = np.stack([n, e, np.zeros_like(n)], axis=-1)
    corners[1, 3] = np.nan  # a corner that misses the ground
    ring = footprint_outline_ned(corners)
    border = {(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (2, 3), (0, 3), (0, 2), (0, 1)}
    assert {tuple(p[:2].astype(int)) for p in ring} == border
    assert np.array_equal(ring[0], ring[-1]) and len(ring) == len(border) + 1
    fp = footprint_markers([ring, None], "map", None).markers[1:]
    assert len(fp) == 1 and fp[0].type == Marker.LINE_STRIP and fp[0].id == 0
    assert (fp[0].points[1].x, fp[0].points[1].y, fp[0].points[1].z) == (0.0, 1.0, pytest.approx(0.1))

    tracks = TrackHistory(2, max_points=3)
    for k in range(5):
        tracks.append([[k, 0, 0], [np.nan, 0, 0]])
    assert tracks.tracks == [[[2, 0, 0], [3, 0, 0], [4, 0, 0]], []]
    g = gps_markers([[1.0, 2.0, -3.0], [np.nan, 0, 0]], tracks, "map", None).markers[1:]
    assert [(m.ns, m.id) for m in g] == [("gps_estimate", 0), ("gps_track", 0)]
    assert (g[0].pose.position.x, g[0].pose.position.y, g[0].pose.position.z) == (2.0, 1.0, 3.0)

    t = target_markers([[0.0, 0.0, -10.0]], "map", None).markers[1:]
    assert t[0].type == Marker.SPHERE and t[0].pose.position.z == 10.0
    assert [(p.z) for p in t[1].points] == [10.0, 0.0]  # a pole down to the ground


def test_path_history_is_bounded_and_in_map() -> None:
    require_ros()
    from qrsim_ros.ros.markers import PathHistory

    h = PathHistory(2, "map", max_poses=4)
    for k in range(6):
        h.append(None, [[k, 0, 0], [0, k, 0]], [[0, 0, 0, 1]] * 2, vehicles=[0] if k == 5 else None)
    assert [p.pose.position.x for p in h.paths[0].poses] == [2, 3, 4, 5]  # the oldest went first
    assert [p.pose.position.y for p in h.paths[1].poses] == [1, 2, 3, 4]  # vehicle 1 not at k = 5
    assert all(p.header.frame_id == "map" for p in h.paths[0].poses) and h.paths[0].header.frame_id == "map"
    h.clear()
    assert h.paths[0].poses == [] and h.paths[1].poses == []


def test_field_cloud_and_sampler() -> None:
    require_ros()
    from qrsim_ros.ros.markers import FieldSampler, cloud_array, field_cloud

    msg = field_cloud([[1, 2, 3], [4, 5, 6]], [0.5, 2.0], "map", None)
    assert [f.name for f in msg.fields] == ["x", "y", "z", "concentration"]
    pts = cloud_array(msg)
    assert pts["x"].tolist() == [1, 4] and pts["concentration"].tolist() == [0.5, 2.0]
    assert msg.point_step == 16 and msg.row_step == 32 and msg.is_dense

    # a ball of radius 7 m at the origin of a 100 x 100 x 50 m box: the refined points inside the
    # ball (value 1) are kept; their spacing is the coarse cell / 3
    limits = [-50.0, 50.0, -50.0, 50.0, -50.0, 0.0]
    fs = FieldSampler(limits, 5.0, 5000)
    assert len(fs.coarse_ned) <= 5000

    def ball(p: np.ndarray) -> np.ndarray:
        return (np.linalg.norm(p - [0.0, 0.0, -25.0], axis=1) <= 7.0).astype(float)

    points, values = fs.sample(ball, 0.5)
    assert len(points) > 0 and np.all(values == 1.0)
    assert np.all(np.linalg.norm(points - [0.0, 0.0, -25.0], axis=1) <= 7.0)
    # the refined grid covers the ball's volume: kept points x fine cell volume ~ 4/3 pi 7^3
    volume = len(points) * float(np.prod(fs.fine_spacing_m))
    assert volume == pytest.approx(4 / 3 * math.pi * 7.0**3, rel=0.25)


def test_terrain_display_grid_spreads_the_classes() -> None:
    require_ros()
    from nav_msgs.msg import OccupancyGrid

    from qrsim_ros.ros.markers import terrain_display_grid

    g = OccupancyGrid()
    g.header.frame_id = "map"
    g.info.width, g.info.height = 2, 2
    g.data = [0, 1, 2, 2]
    out = terrain_display_grid(g, 2)
    # RViz's costmap scheme: 0 transparent; 1..98 blue -> red: classes 1, 2 of 2 -> 49, 98
    assert list(out.data) == [0, 49, 98, 98] and out.info.width == 2 and out.header.frame_id == "map"


def test_task_status_text() -> None:
    require_ros()
    from qrsim_ros.msg import TaskStatus

    from qrsim_ros.ros.markers import task_status_text

    s = TaskStatus(scenario="search_rescue_2c", step=12, time=12.0, reward=1.0, cumulative_reward=3.0,
                   persons_found=2, persons_total=8, vehicle_names=["uav1", "uav2"],
                   vehicle_valid=[True, False], done=True, done_reason="time_limit")
    text = task_status_text(s)
    assert text.splitlines() == ["search_rescue_2c   t = 12.0 s   step 12", "reward 1   total 3",
                                 "persons found 2 / 8", "invalid: uav2", "DONE: time_limit"]


def test_robot_description_lookup(tmp_path: Path) -> None:
    from qrsim_ros.ros.markers import load_robot_description, robot_description_candidates

    assert load_robot_description() == URDF.read_text()  # found (share dir or source tree)
    assert any(c == URDF for c in robot_description_candidates())
    with pytest.raises(FileNotFoundError, match=r"nope\.urdf"):
        load_robot_description(tmp_path / "nope.urdf")


@pytest.mark.graph
def test_referee_with_a_missing_urdf_exits_with_one_line(tmp_path: Path) -> None:
    require_ros()
    env = ros_env(tmp_path)  # a free domain
    proc = subprocess.run([sys.executable, "-m", "qrsim_ros.nodes.referee", "--ros-args", "-p",
                           "scenario:=keep_spot", "-p", f"robot_description_file:={tmp_path}/none.urdf"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "robot_description_file" in line]
    assert len(lines) == 1 and "none.urdf" in lines[0] and "not found" in lines[0], proc.stderr


# --- live: one launch per family ------------------------------------------------------------------------

@dataclass
class LiveRun:
    family: str
    publishers: dict[str, list[Any]]  # topic -> TopicEndpointInfo of its publishers (at discovery)
    messages: dict[str, list[Any]]  # topic -> messages received
    frames: set[str]
    status: int
    output: str
    wall_s: float
    discovery_s: float
    run_id: str  # the run the probe joined ('' : none)
    graph_types: dict[str, list[str]]  # every topic of the graph -> its types (once the layout's were found)


def _qos(durability: str) -> Any:
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if durability == "Transient Local"
                      else DurabilityPolicy.VOLATILE)


def _msg_class(type_name: str) -> Any:
    import importlib

    pkg, _, name = type_name.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


def _launch_and_record(family: str, tmp_path: Path) -> LiveRun:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from tf2_msgs.msg import TFMessage

    refs = topic_refs(family)
    domain = free_domain()
    env = ros_env(tmp_path, domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(f"rviz_probe_{family}", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    messages: dict[str, list[Any]] = {r.topic: [] for r in refs}
    frames: set[str] = set()

    def on_tf(msg: Any) -> None:
        for t in msg.transforms:
            frames.update((t.header.frame_id, t.child_frame_id))

    # subscribed before the launch: every message counts (transient local where the display is, so a
    # latched message published before the match arrives too)
    for r in refs:
        node.create_subscription(_msg_class(r.msg_type), r.topic, messages[r.topic].append,
                                 _qos(r.durability))
    node.create_subscription(TFMessage, "/tf", on_tf, _qos("Volatile"))
    node.create_subscription(TFMessage, "/tf_static", on_tf, _qos("Transient Local"))
    # last: the run's clock starts once this probe's subscriptions are matched (none misses tick 0)
    joiner = rosenv.RunJoiner(node)

    def spin_until(cond: Callable[[], bool], timeout_s: float) -> bool:
        return rosenv.spin_until(executor, cond, timeout_s, 0.05)

    log = tmp_path / f"{family}.log"
    t0 = time.monotonic()
    argv = [family, "--single-process", "--seed", "5", "--duration", str(RUN_S), "--real-time-factor", "1",
            *rosenv.RunJoiner.gate_argv(family, seed=5, real_time_factor=1.0, duration_s=RUN_S)]
    proc = rosenv.TestProcess([sys.executable, "-m", "qrsim_ros.cli.main", "launch", *argv], env, tmp_path,
                              log=log)
    publishers: dict[str, list[Any]] = {}
    t_discovered = math.nan
    try:
        def discovered() -> bool:  # the event: every referenced topic has a publisher other than us
            for r in refs:
                infos = [i for i in node.get_publishers_info_by_topic(r.topic)
                         if i.node_name != node.get_name()]
                if not infos:
                    return False
                publishers[r.topic] = infos
            graph_types.update(node.get_topic_names_and_types())
            return all(topic in graph_types for topic in layout_topics)

        layout_topics = {r.topic for r in layout_refs(family)}
        graph_types: dict[str, list[str]] = {}

        spin_until(lambda: discovered() or proc.proc.poll() is not None, DISCOVERY_S)
        t_discovered = time.monotonic() - t0
        spin_until(lambda: proc.proc.poll() is not None, RUN_DEADLINE_S - (time.monotonic() - t0))
        spin_until(lambda: False, 0.3)  # the last messages in flight
    finally:
        proc.close()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    return LiveRun(family, publishers, messages, frames, proc.proc.returncode, proc.output,
                   time.monotonic() - t0, t_discovered, joiner.run_id, graph_types)


@pytest.fixture(scope="module", params=CONFIGS)
@rosenv.launches_graph
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LiveRun:
    require_ros()
    family = request.param
    run = _launch_and_record(family, tmp_path_factory.mktemp(family))
    print(f"\n{family}: every referenced topic published after {run.discovery_s:.1f} s; launched, recorded "
          f"and stopped in {run.wall_s:.1f} s of wall time (load {os.getloadavg()[0]:.1f})")
    return run


def _stamp_s(stamp: Any) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def _stamp_of(msg: Any) -> float | None:
    if hasattr(msg, "header"):
        return _stamp_s(msg.header.stamp)
    if hasattr(msg, "markers") and msg.markers:
        return max(_stamp_s(m.header.stamp) for m in msg.markers)
    return None


@pytest.mark.graph
def test_every_referenced_topic_is_published_with_the_displays_type(live: LiveRun) -> None:
    assert live.status == 0, live.output[-3000:]
    refs = topic_refs(live.family)
    missing = [r.topic for r in refs if r.topic not in live.publishers]
    assert not missing, f"{live.family}: topics in the config that nobody published: {missing}"
    from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

    for r in refs:
        for info in live.publishers[r.topic]:
            assert info.topic_type == r.msg_type, (r.topic, info.topic_type, r.display)
            # QoS: a transient-local (reliable) display needs a transient-local (reliable) publisher
            if r.durability == "Transient Local":
                assert info.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL, r.topic
            if r.reliability == "Reliable":
                assert info.qos_profile.reliability == ReliabilityPolicy.RELIABLE, r.topic
        assert live.messages[r.topic], f"{r.topic}: published but no message arrived"
        if r.display == "rviz_default_plugins/PointCloud2":  # the colour channel exists in the cloud
            channel = r.settings["Channel Name"]
            clouds = [m for m in live.messages[r.topic] if m.width * m.height > 0]
            assert clouds, f"{r.topic}: only empty clouds"
            assert all(channel in [f.name for f in m.fields] for m in clouds), (r.topic, channel)
        if r.display == "rviz_default_plugins/RobotModel":
            assert live.messages[r.topic][-1].data == URDF.read_text()


@pytest.mark.graph
def test_every_foxglove_layout_topic_is_served_with_the_panels_type(live: LiveRun) -> None:
    """The family's Foxglove layout names only topics the run has, that the foxglove_bridge serves (not
    left out by its default exclude), of a type its panel shows; a plot's field path is a number of that
    type; a cloud's colour field is a field of the clouds the run sent."""
    assert live.status == 0, live.output[-3000:]
    from qrsim_ros.bag.topics import left_out
    from qrsim_ros.nodes.foxglove_bridge import DEFAULT_EXCLUDE

    refs = layout_refs(live.family)
    missing = sorted({r.topic for r in refs} - set(live.graph_types))
    assert not missing, f"{live.family}: topics in the layout the run did not have: {missing}"
    for r in refs:
        assert not left_out(r.topic, re.compile(DEFAULT_EXCLUDE)), r.topic
        (msg_type,) = live.graph_types[r.topic]
        kind = r.panel.split("!")[0]
        if kind == "3D urdf layer":
            assert msg_type == "std_msgs/msg/String", (r.topic, msg_type)
        elif kind in PANEL_TYPES:
            assert msg_type in PANEL_TYPES[kind], (r.panel, r.topic, msg_type)
        if r.field_path:
            value = _field_value(msg_type, r.field_path)
            assert isinstance(value, int | float) and not isinstance(value, bool), (r.topic, r.field_path)
        if "colorField" in r.settings:
            clouds = [m for m in live.messages.get(r.topic, []) if m.width * m.height > 0]
            assert clouds, f"{r.topic}: no cloud to check the layout's colour field against"
            assert all(r.settings["colorField"] in [f.name for f in m.fields] for m in clouds), r.topic


@pytest.mark.graph
def test_every_referenced_frame_exists(live: LiveRun) -> None:
    assert live.status == 0, live.output[-3000:]
    missing = frame_refs(live.family) - live.frames
    assert not missing, f"{live.family}: frames in the config not on /tf or /tf_static: {missing}"
    # every visualisation message is in a frame that exists (map)
    for topic, msgs in live.messages.items():
        frames = set()
        for m in msgs:
            if hasattr(m, "markers"):
                frames |= {mk.header.frame_id for mk in m.markers}
            elif hasattr(m, "header") and not topic.endswith("robot_description"):
                frames.add(m.header.frame_id)
            if hasattr(m, "poses"):
                frames |= {p.header.frame_id for p in m.poses}
        assert frames <= live.frames, (topic, frames - live.frames)


def _content(msg: Any) -> Any:
    """What a display shows of a message (stamps left out)."""
    if hasattr(msg, "markers"):
        return [(m.ns, m.id, m.type, m.action, m.text, round(m.pose.position.x, 3),
                 round(m.pose.position.y, 3), round(m.pose.position.z, 3),
                 tuple((round(p.x, 3), round(p.y, 3)) for p in m.points), (m.color.r, m.color.g, m.color.b))
                for m in msg.markers]
    if hasattr(msg, "poses"):
        return [(round(p.pose.position.x, 3), round(p.pose.position.y, 3)) for p in msg.poses]
    return bytes(msg.data)


@pytest.mark.graph
def test_visualisation_topics_respect_their_throttle(live: LiveRun) -> None:
    """Distinct stamps at least a period apart in simulated time (so at most RUN_S / period + 1
    messages), each showing something new; per-episode topics once. The run's clock waited for the
    probe (a member of the run), so every message of the run was received."""
    assert live.status == 0, live.output[-3000:]
    assert live.run_id and "starting with" not in live.output, live.output[-3000:]
    counts = {}
    for topic, msgs in live.messages.items():
        if topic.endswith("robot_description"):
            assert len(msgs) == 1, topic  # published once, at start
            continue
        by_stamp: dict[float, Any] = {}
        for m in msgs:  # a repeated tick may re-send a message: the same stamp, the same content
            by_stamp.setdefault(_stamp_of(m), m)
        stamps = sorted(s for s in by_stamp if s is not None)
        counts[topic] = len(stamps)
        period = expected_period_s(topic)
        if period is None:
            assert len(stamps) == 1, (topic, stamps)  # once per episode (one episode here)
            continue
        gaps = np.diff(stamps)
        assert np.all(gaps >= period - 1e-6), (topic, stamps)
        assert len(stamps) <= RUN_S / period + 1, (topic, len(stamps))
        if topic.endswith("/camera/detections") or any(topic.endswith(k) for k in SENSOR_PERIODS_S):
            continue  # sensor data: published at every sensor update (a hovering vehicle may see the same)
        ordered = [by_stamp[s] for s in stamps]
        for a, b in itertools.pairwise(ordered):
            assert _content(a) != _content(b), (topic, "a message repeated the previous one")
    # the moving things were shown more than once during the run
    moving = [t for t in counts if t.endswith("/ground_truth/path") or t in ("/viz/gps", "/viz/wind")]
    assert all(counts[t] >= 3 for t in moving), counts
    print(f"{live.family}: messages per topic over {RUN_S} s simulated: {counts}")


def _path_positions(live: LiveRun) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Vehicle index -> (stamps, ENU positions) of its ground-truth path (all poses received)."""
    out = {}
    for topic, msgs in live.messages.items():
        if topic.endswith("/ground_truth/path") and msgs:
            i = int(topic.split("/")[1][3:]) - 1
            poses = {_stamp_s(p.header.stamp): (p.pose.position.x, p.pose.position.y, p.pose.position.z)
                     for m in msgs for p in m.poses}
            t = np.array(sorted(poses))
            out[i] = (t, np.array([poses[s] for s in t]))
    return out


@pytest.mark.graph
def test_markers_are_where_the_vehicles_are(live: LiveRun) -> None:
    """The GPS estimates and the wind arrows' tails, in map, are where the ground-truth path puts the
    vehicle at the marker's time (linear interpolation between the path's poses, 1 s apart, is off by
    at most |a| dt^2 / 8: 1 m allowed, for accelerations up to 8 m/s^2 at take-off): the arrows start
    at the true position, the GPS estimates within its error too (a few metres; 6 m more allowed). A
    frame mix-up (NED for ENU, a missing z flip) would be tens of metres off. The camera's detection
    patches of a frame lie inside that frame's footprint (search and rescue)."""
    assert live.status == 0, live.output[-3000:]
    paths = _path_positions(live)
    assert paths, "no ground-truth path received"
    checked = 0
    for topic, ns, tolerance in (("/viz/gps", "gps_estimate", 7.0), ("/viz/wind", "air_velocity", 1.0)):
        for msg in live.messages[topic]:
            for m in msg.markers:
                if m.ns != ns or m.id not in paths:
                    continue
                t_path, p_path = paths[m.id]
                t = _stamp_s(m.header.stamp)
                if not t_path[0] <= t <= t_path[-1]:
                    continue
                truth = np.array([np.interp(t, t_path, p_path[:, a]) for a in range(3)])
                p = m.points[0] if m.type == m.ARROW else m.pose.position
                assert np.linalg.norm(np.array([p.x, p.y, p.z]) - truth) <= tolerance, (topic, m.id, t)
                checked += 1
    assert checked >= 4
    if live.family != "search_rescue":
        return
    from qrsim_ros.ros.from_messages import cloud_points

    footprints = {(_stamp_of(a), m.id): np.array([[p.x, p.y] for p in m.points])
                  for a in live.messages["/viz/camera_footprints"] for m in a.markers if m.points}
    inside = 0
    for i in range(DEFAULT_VEHICLES["search_rescue"]):
        for cloud in live.messages[f"/uav{i + 1}/camera/detections"]:
            ring = footprints.get((_stamp_s(cloud.header.stamp), i))
            if ring is None or cloud.width * cloud.height == 0:
                continue
            pts = cloud_points(cloud).ravel()
            xy = np.column_stack([pts["x"], pts["y"]])[np.isfinite(pts["x"])]
            lo, hi = ring.min(axis=0) - 1e-3, ring.max(axis=0) + 1e-3
            assert np.all((xy >= lo) & (xy <= hi)), (i, cloud.header.stamp)
            inside += 1
    assert inside >= 3


@pytest.mark.graph
def test_referee_visualisation_restarts_with_an_episode(tmp_path: Path) -> None:
    """A referee fed one vehicle's ground truth and status for episode 1 (ticks 0..60), then episode 2
    (ticks 0..3): the persons of episode 2 (the area's second draw, as the core's BoxWithPersonsArea
    reset twice gives them) are on /referee/markers at its tick 0 (the marker period restarts with
    the tick numbers), /viz/terrain comes once per episode, and the path restarts empty."""
    require_ros()
    import rclpy
    from nav_msgs.msg import OccupancyGrid, Odometry
    from nav_msgs.msg import Path as PathMsg
    from qrsim_ros.msg import TaskStatus, VehicleStatus
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from visualization_msgs.msg import MarkerArray

    from qrsim_ros.core.common.frames import ned_to_enu
    from qrsim_ros.core.common.rng import RandomStreams
    from qrsim_ros.core.config.scenario import load_scenario
    from qrsim_ros.core.world.area import BoxWithPersonsArea
    from qrsim_ros.ros.stamps import stamp_from_tick
    from qrsim_ros.ros.to_messages import odometry_from_state

    seed, scenario = 3, "search_rescue_2a"
    sc = load_scenario(scenario, {"seed": seed})
    area = BoxWithPersonsArea(sc.num_vehicles, sc.persons_area_params(), RandomStreams(seed))
    persons = []
    for _ in range(2):
        area.reset()
        persons.append(ned_to_enu(area.persons_position_ned))
    domain = free_domain()
    env = ros_env(tmp_path, domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    log = open(tmp_path / "referee.log", "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([sys.executable, "-m", "qrsim_ros.nodes.referee", "--ros-args", "-p",
                             f"scenario:={scenario}", "-p", f"seed:={seed}", "-p", "use_sim_time:=true"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("viz_reset_probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    markers: list[Any] = []
    terrain: list[Any] = []
    paths: list[Any] = []
    node.create_subscription(MarkerArray, "/referee/markers", markers.append, _qos("Volatile"))
    node.create_subscription(OccupancyGrid, "/viz/terrain", terrain.append, _qos("Volatile"))
    node.create_subscription(PathMsg, "/uav1/ground_truth/path", paths.append, _qos("Volatile"))
    status: list[Any] = []
    node.create_subscription(TaskStatus, "/referee/status", status.append, _qos("Transient Local"))
    odom_pub = node.create_publisher(Odometry, "/uav1/ground_truth/odom", _qos("Volatile"))
    status_pub = node.create_publisher(VehicleStatus, "/sim/vehicle_status", _qos("Volatile"))

    def spin_until(cond: Callable[[], bool], timeout_s: float) -> bool:
        return rosenv.spin_until(executor, cond, timeout_s, 0.02)

    def feed(episode: int, ticks: range) -> None:
        x = np.zeros(13)
        x[2] = -25.0  # hovering 25 m up at the origin: finds nobody
        for k in ticks:
            executor.spin_once(timeout_sec=0.0)
            x[0] = 0.1 * k  # moving north slowly, so the path changes
            odom_pub.publish(odometry_from_state(0, x, stamp_from_tick(k)))
            st = VehicleStatus(episode=episode, tick=k, names=["uav1"], valid=[True], invalid_reason=[""],
                               command_fresh=[True])
            st.header.stamp = stamp_from_tick(k)
            if hasattr(st, "state"):
                st.state, st.specific_force = x.tolist(), [0.0, 0.0, -9.81]
            status_pub.publish(st)

    try:
        # the referee takes the ground truth from the fleet status (vehicle_dynamics' state arrays) when
        # VehicleStatus carries them, else from the odometry: both are fed
        fleet = hasattr(VehicleStatus(), "state")
        assert spin_until(lambda: status_pub.get_subscription_count() >= 1
                          and (fleet or odom_pub.get_subscription_count() >= 1)
                          and len(node.get_publishers_info_by_topic("/referee/markers")) >= 1, 60), \
            (tmp_path / "referee.log").read_text()
        feed(1, range(61))
        # episode 1 refereed up to its task step 1 (tick 50)
        assert spin_until(lambda: any(st.step == 1 for st in status), 60)
        feed(2, range(4))
        assert spin_until(lambda: len(markers) >= 2 and len(terrain) >= 2, 60), (len(markers), len(terrain))
        spin_until(lambda: False, 0.5)
    finally:
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
        log.close()
    assert code == 0, (tmp_path / "referee.log").read_text()
    assert len(markers) == 2 and len(terrain) == 2  # nobody found: once per episode
    for episode, arr in enumerate(markers):
        shown = [m for m in arr.markers if m.action == m.ADD]
        assert _stamp_s(shown[0].header.stamp) == 0.0  # at the episode's tick 0
        xy = np.array([[m.pose.position.x, m.pose.position.y] for m in shown])
        assert np.allclose(xy, persons[episode][:, 0:2], atol=1e-9)  # that episode's persons, all red
        assert all(m.color.r > 0.5 > m.color.g for m in shown)
    assert persons[0].shape != persons[1].shape or not np.allclose(persons[0], persons[1])  # a new draw
    # episode 1's path grew from its tick 0 (ENU y = north = 0.1 m per tick); episode 2's restarts
    # with one pose, at its tick 0, back at y = 0
    assert len(paths) >= 2 and _stamp_s(paths[0].poses[0].header.stamp) == 0.0
    ys = [p.pose.position.y for p in paths[-2].poses]  # episode 1's last path
    assert ys == sorted(ys) and _stamp_s(paths[-2].poses[0].header.stamp) == 0.0
    last = paths[-1]
    assert len(last.poses) == 1 and _stamp_s(last.poses[0].header.stamp) == 0.0
    assert last.poses[0].pose.position.y == 0.0

"""What the referee shows in RViz: the Pelican URDF, ground-truth paths, the task status as text, the cats'
and mouse's labels, the targets of the generic tasks and the terrain in RViz's colours.

Nothing here changes the task: the referee node keeps the rules (``core.tasks.episode.Episode``) and hands
this display the ground truth of every tick. Topics (all latched; each message at most once per its
period of simulated time and only when its content changed, ``markers.VizThrottle``):

- ``uavN/robot_description`` (std_msgs/String, once): the Pelican URDF (``robot_description_file`` or the
  package's urdf/pelican.urdf), for RViz's RobotModel display with TF prefix ``uavN``;
- ``uavN/ground_truth/path`` (nav_msgs/Path): one pose per ``path_period_s``, the last ``path_max_poses``
  poses of the valid vehicles' ground truth;
- ``/viz/task_status`` (visualization_msgs/MarkerArray): the TaskStatus as a text above the area, at
  most once per ``viz_period_s`` (0: no status text, paths or labels);
- ``/referee/markers`` (shared with the referee's persons markers): the cats' and mouse's labels (at most
  once per ``marker_period_s``) and, at an episode start, the targets of keep spot / goto waypoint;
- ``/viz/terrain`` (nav_msgs/OccupancyGrid): /area/terrain with its classes spread over RViz's colours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from nav_msgs.msg import OccupancyGrid, Path
from rclpy.node import Node
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from qrsim_ros.core.common.frames import Array, ned_to_enu
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.config.scenario import Scenario
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED
from qrsim_ros.ros import markers as viz
from qrsim_ros.ros.names import MAP_FRAME
from qrsim_ros.ros.parameters import ParameterError
from qrsim_ros.ros.qos import QOS_LATCHED
from qrsim_ros.ros.stamps import stamp_from_tick
from qrsim_ros.ros.to_messages import quaternions_enu_flu


class RefereeDisplay:
    """The referee's visualisation (see the module docstring), published through ``node``.

    ``params``: the referee's parameter struct (``viz_period_s``, ``path_period_s``, ``path_max_poses``,
    ``marker_period_s``, ``robot_description_file``); ``names``: the vehicle namespaces; ``mouse``: the
    mouse's index in cats and mouse, else None; ``markers_pub``: the /referee/markers publisher.
    Raises ParameterError when a given ``robot_description_file`` cannot be read.
    """

    def __init__(self, node: Node, scenario: Scenario, params: Any, names: Sequence[str], mouse: int | None,
                 markers_pub: Any) -> None:
        self.node = node
        self.scenario = scenario
        self.num_vehicles = len(names)
        self.mouse = mouse
        self._markers_pub = markers_pub
        self.enabled = params.viz_period_s > 0
        #: the latest TaskStatus (the referee sets it), shown as text
        self.last_status: Any = None
        self._terrain_pub = node.create_publisher(OccupancyGrid, "/viz/terrain", QOS_LATCHED)
        self._text_pub = node.create_publisher(MarkerArray, "/viz/task_status", QOS_LATCHED)
        self._path_pubs = [node.create_publisher(Path, f"{ns}/ground_truth/path", QOS_LATCHED)
                           for ns in names]
        self._paths = viz.PathHistory(self.num_vehicles, MAP_FRAME, params.path_max_poses)
        self._path_viz = viz.VizThrottle(params.path_period_s)
        self._text_viz = viz.VizThrottle(params.viz_period_s)
        # the cats' and mouse's labels go on /referee/markers: that topic's period
        self._labels_viz = viz.VizThrottle(params.marker_period_s) if mouse is not None else None
        self._text_anchor, self._text_height_m = viz.status_text_anchor(scenario.area_limits_ned)
        self._publish_robot_description(names, params.robot_description_file)

    def _publish_robot_description(self, names: Sequence[str], path: str) -> None:
        try:
            urdf = viz.load_robot_description(path or None)
        except (FileNotFoundError, OSError) as exc:
            if path:
                raise ParameterError(f"parameter 'robot_description_file': {exc}") from None
            self.node.get_logger().error(f"{exc}: uavN/robot_description not published (RViz's RobotModel "
                                         "will show nothing; the simulation is not affected)")
            return
        description = viz.robot_description_message(urdf)
        self._description_pubs = [self.node.create_publisher(String, f"{ns}/robot_description", QOS_LATCHED)
                                  for ns in names]
        for pub in self._description_pubs:
            pub.publish(description)

    def publish_terrain(self, terrain_grid: OccupancyGrid, max_class: int) -> None:
        """/viz/terrain from the episode's /area/terrain grid (classes 0..max_class)."""
        self._terrain_pub.publish(viz.terrain_display_grid(terrain_grid, max_class))

    def new_episode(self, x: Array, tick: int) -> None:
        """A new episode: empty paths, the status text and labels at once, the task's targets."""
        self._paths.clear()
        for throttle in (self._path_viz, self._text_viz, self._labels_viz):
            if throttle is not None:
                throttle.reset()
        task = self.scenario.task
        if task.type in ("keep_spot", "keep_spot_x10", "goto_waypoint"):
            # the targets of the terminal reward (GenericTask): the start points, or the waypoint
            targets = (np.asarray(task.waypoint_ned, float).reshape(1, 3) if task.type == "goto_waypoint"
                       else np.asarray(x, float)[:, STATE_POSITION_NED])
            self._markers_pub.publish(viz.target_markers(targets, MAP_FRAME, stamp_from_tick(tick)))

    def on_tick(self, k: int, x: Array, valid: Array) -> None:
        """Tick k's ground truth: three comparisons; the messages at most once per their periods."""
        if not self.enabled:
            return
        t_s = k * BASE_DT_S
        if self._path_viz.due(t_s):
            self._publish_paths(k, x, valid)
        if self._text_viz.due(t_s):
            self._publish_status_text(k)
        if self._labels_viz is not None and self._labels_viz.due(t_s):
            self._publish_labels(k, x, valid)

    def _publish_paths(self, k: int, x: Array, valid: Array) -> None:
        key = viz.content_key(np.where(valid[:, None], x[:, STATE_POSITION_NED], np.nan))
        if not self._path_viz.changed(k * BASE_DT_S, key):
            return
        stamp = stamp_from_tick(k)
        vehicles = np.flatnonzero(valid).tolist()
        self._paths.append(stamp, ned_to_enu(x[:, STATE_POSITION_NED]), quaternions_enu_flu(x), vehicles)
        for i in vehicles:
            self._path_pubs[i].publish(self._paths.paths[i])

    def _publish_status_text(self, k: int) -> None:
        if self.last_status is None:
            return
        text = viz.task_status_text(self.last_status)
        if self._text_viz.changed(k * BASE_DT_S, text):
            self._text_pub.publish(viz.text_markers(text, self._text_anchor, self._text_height_m, MAP_FRAME,
                                                    stamp_from_tick(k)))

    def _publish_labels(self, k: int, x: Array, valid: Array) -> None:
        """Cats and mouse: labels above the vehicles (those still valid) and a sphere on the mouse."""
        assert self._labels_viz is not None and self.mouse is not None
        pos = np.where(valid[:, None], x[:, STATE_POSITION_NED], np.nan)
        if not self._labels_viz.changed(k * BASE_DT_S, viz.content_key(pos, resolution=0.05)):
            return
        labels = [f"cat {i + 1}" for i in range(self.num_vehicles)]
        labels[self.mouse] = "mouse"
        self._markers_pub.publish(viz.vehicle_label_markers(pos, labels, MAP_FRAME, stamp_from_tick(k),
                                                            highlight=self.mouse))

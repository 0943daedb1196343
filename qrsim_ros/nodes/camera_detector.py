"""The ``camera_detector`` node: the downward camera with person classifier of every vehicle (spec 3.5).

Subscribes ``uavN/ground_truth/odom`` and ``/sim/vehicle_status`` (validity of the tick; not awaited
when nobody publishes it); on every camera tick (1 Hz with the QRSim configs) publishes
``uavN/camera/detections`` (sensor_msgs/PointCloud2, frame ``map``) stamped t_k: an organised cloud of
the camera's window grid, height = nf2 rows (image v), width = nf1 columns (image u), e.g. 28 x 21 at
25 m. Per point (``sensor_messages.DETECTION_DTYPE``): x, y, z of the window's ground centre in map
ENU [m] (float32), llkd = log likelihood difference "person vs no person" (float32), terrain_class
(int32), and the window's 4 ground corners c0..c3 x, y, z (float32). Windows that miss the ground
have NaN coordinates and llkd and class -1. An empty cloud (0 x 0) is published at an episode start,
when the camera sees no ground and for a vehicle that is invalid (``/sim/vehicle_status``: the
Simulator's cameras skip invalid vehicles). A camera switched off by a ``camera_off`` fault (the tick's
/sim/vehicle_status; docs/FAULTS.md) publishes nothing for that vehicle. Which person a window sees is ground
truth and is not published.

Persons and terrain: the node builds the area itself, as the Simulator does: ``BoxWithPersonsArea``
with the scenario's parameters and ``RandomStreams(seed)`` (streams ``area.persons``,
``area.terrain``), redrawn at every episode start (or the scenario's fixed ``area.persons_ned``).
Same seed, same episodes -> the same persons as the Simulator and the referee, without a topic to
wait for. Frames draw from the Simulator's ``camera`` streams, so they equal the Simulator's.
Parameters: ``scenario``, ``seed``, ``num_vehicles``, ``viz_period_s``. A scenario without a camera
(not search and rescue, or ``vehicle.camera.on: false``) leaves the node idle with a warning.

Visualisation: ``/viz/camera_footprints`` (visualization_msgs/MarkerArray, latched,
``markers.footprint_markers``): on camera ticks, the outline of every vehicle's window grid on the
ground, at most once per ``viz_period_s`` of simulated time (0: off) and only when changed. The
detection patches themselves are ``uavN/camera/detections`` (RViz: PointCloud2, channel ``llkd``).
"""

from __future__ import annotations

import sys

import numpy as np

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.engine.builders import build_camera, has_camera
from qrsim_ros.core.engine.world import ScenarioWorld
from qrsim_ros.core.sensors.camera import CameraWithClassifier
from qrsim_ros.core.world.area import BoxWithPersonsArea
from qrsim_ros.ros import markers as viz
from qrsim_ros.ros.ground_truth import GROUND_TRUTH_NODE_PARAMETERS, GroundTruthNode, Outgoing
from qrsim_ros.ros.names import MAP_FRAME
from qrsim_ros.ros.node import run_node
from qrsim_ros.ros.parameters import Param, ParamTable
from qrsim_ros.ros.qos import QOS_LATCHED
from qrsim_ros.ros.stamps import stamp_from_tick
from qrsim_ros.ros.to_messages import detection_fields, detections_message

PARAMETERS = ParamTable(
    "camera_detector", *GROUND_TRUTH_NODE_PARAMETERS,
    Param("viz_period_s", viz.VIZ_PERIOD_S,
          "least simulated time between two /viz/camera_footprints (0: off) [s]", lo=0.0, hi=3600.0),
)


class CameraDetectorNode(GroundTruthNode):
    """The persons area and N cameras; publishes ``uavN/camera/detections``."""

    def __init__(self) -> None:
        super().__init__("camera_detector", PARAMETERS)
        from sensor_msgs.msg import PointCloud2

        sc, streams = self.scenario, self.streams
        self.camera: CameraWithClassifier | None = None
        self.area: BoxWithPersonsArea | None = None
        if not has_camera(sc):
            self.get_logger().warning(f"scenario {sc.name!r} has no camera (task {sc.task.type!r}, "
                                      f"camera.on={sc.vehicle.camera.on}): nothing to do")
            return
        # as the Simulator: the episode's area (terrain and persons) and the cameras
        self.world = ScenarioWorld(sc, streams, plume=False)
        self.area = self.world.persons_area
        self.camera = build_camera(sc, streams)
        self._fields = detection_fields()
        self._pubs = self.per_vehicle_publishers(PointCloud2, "camera/detections")
        from visualization_msgs.msg import MarkerArray

        self._viz = viz.VizThrottle(self.params.viz_period_s)
        self._viz_pub = self.create_publisher(MarkerArray, "/viz/camera_footprints", QOS_LATCHED)
        self.follow_ground_truth("persons area and cameras with classifier")

    def on_tick(self, k: int, x: Array, accel: Array | None, present: np.ndarray, valid: np.ndarray,
                 reset: bool) -> Outgoing:
        cam, area = self.camera, self.area
        assert cam is not None and area is not None
        if reset:  # a new episode: new terrain and persons (Simulator.reset), cameras forget their frames
            self.world.new_episode()
            cam.reset(x)
            if not cam.is_update_tick(k):
                return []
        else:
            valid = self.faults.sensor_valid("camera_classifier", valid)  # camera_off: as invalid
            if not cam.step(k, x, valid, area.persons_position_ned, area.terrain_class_at):
                return []
        stamp = stamp_from_tick(k)
        on = self.faults.sensor_valid("camera_classifier", present)  # camera_off: nothing published
        out = [(self._pubs[i], detections_message(stamp, MAP_FRAME, cam.observations[i], self._fields))
               for i in np.flatnonzero(on)]
        if self._viz.period_s > 0 and self._viz.due(k * BASE_DT_S):  # camera ticks only (1 Hz)
            outlines = [viz.footprint_outline_ned(obs.corners_ned) if present[i] and obs is not None
                        and not obs.empty else None for i, obs in enumerate(cam.observations)]
            key = tuple(None if o is None else viz.content_key(o, resolution=0.05) for o in outlines)
            if self._viz.changed(k * BASE_DT_S, key):
                out.append((self._viz_pub, viz.footprint_markers(outlines, MAP_FRAME, stamp)))
        return out


def main() -> int:
    return run_node(CameraDetectorNode)


if __name__ == "__main__":
    sys.exit(main())

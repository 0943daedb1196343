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
Simulator's cameras skip invalid vehicles). Which person a window sees is ground truth and is not published.

Persons and terrain: the node builds the area itself, as the Simulator does: ``BoxWithPersonsArea``
with the scenario's parameters and ``RandomStreams(seed)`` (streams ``area.persons``,
``area.terrain``), redrawn at every episode start (or the scenario's fixed ``area.persons_ned``).
Same seed, same episodes -> the same persons as the Simulator and the referee, without a topic to
wait for. Frames draw from the Simulator's ``camera`` streams, so they equal the Simulator's.
Parameters: ``scenario``, ``seed``, ``num_vehicles``. A scenario without a camera (not search and
rescue, or ``vehicle.camera.on: false``) leaves the node idle with a warning.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
from rclpy.node import Node

from qrsim_ros.core.area import BoxWithPersonsArea
from qrsim_ros.core.camera import CameraWithClassifier
from qrsim_ros.core.frames import Array
from qrsim_ros.core.rng import RandomStreams
from qrsim_ros.nodes.common import MAP_FRAME, QOS_RELIABLE, declare_scenario, run_node, vehicle_namespace
from qrsim_ros.nodes.sensor_messages import (
    GroundTruthSync,
    Outgoing,
    detection_fields,
    detections_message,
    time_of_tick,
)


class CameraDetectorNode(Node):
    """The persons area and N cameras; publishes ``uavN/camera/detections``."""

    def __init__(self) -> None:
        super().__init__("camera_detector")
        from sensor_msgs.msg import PointCloud2

        sc = declare_scenario(self)
        self.scenario = sc
        n = sc.num_vehicles
        streams = RandomStreams(sc.seed)
        self.camera: CameraWithClassifier | None = None
        self.area: BoxWithPersonsArea | None = None
        if not (sc.vehicle.camera.on and sc.task.type == "search_rescue"):
            self.get_logger().warning(f"scenario {sc.name!r} has no camera (task {sc.task.type!r}, "
                                      f"camera.on={sc.vehicle.camera.on}): nothing to do")
            return
        # as Simulator._build: the area's streams, then the camera with the area's person size
        self.area = BoxWithPersonsArea(n, sc.persons_area_params(), streams)
        self.camera = CameraWithClassifier(n, replace(sc.vehicle.camera, person_size_m=sc.area.person_size_m),
                                           streams)
        self._fields = detection_fields()
        self._pubs = [self.create_publisher(PointCloud2, f"{vehicle_namespace(i)}/camera/detections",
                                            QOS_RELIABLE) for i in range(n)]
        self.sync = GroundTruthSync(self, n, self._on_tick, with_status=True)
        self.get_logger().info(f"camera_detector: {n} vehicles, scenario {sc.name!r}, "
                               f"seed entropy {streams.entropy}")

    def _on_tick(self, k: int, x: Array, accel: Array | None, present: np.ndarray, valid: np.ndarray,
                 reset: bool) -> Outgoing:
        cam, area = self.camera, self.area
        assert cam is not None and area is not None
        if reset:  # a new episode: new terrain and persons (Simulator.reset), cameras forget their frames
            area.reset()
            if self.scenario.area.persons_ned is not None:
                area.set_persons(np.asarray(self.scenario.area.persons_ned, float))
            cam.reset(x)
            if not cam.is_update_tick(k):
                return []
        elif not cam.step(k, x, valid, area.persons_position_ned, area.terrain_class_at):
            return []
        stamp = time_of_tick(k)
        return [(self._pubs[i], detections_message(stamp, MAP_FRAME, cam.observations[i], self._fields))
                for i in np.flatnonzero(present)]


def main() -> int:
    return run_node(CameraDetectorNode)


if __name__ == "__main__":
    sys.exit(main())

"""The generic sensor node: one registered sensor model (``core.sensors.registry``) of every vehicle.

Run as the executable named after the registration (``range_finder``, ...): the node takes that name,
declares ``scenario``, ``seed``, ``num_vehicles`` and ``ground_truth_source``, builds the model with the
Simulator's named streams from the scenario's ``vehicle.sensors.<name>`` section, steps it on the
per-tick ground truth (``ros.ground_truth.GroundTruthSync``: /sim/vehicle_status, or the per-vehicle
odometry), and publishes what the sensor's conversion module makes of it on ``uavN/<TOPIC>``, stamped
with the tick's time; the mount's static transforms (if any) go on /tf_static once. A sensor that looks
at the 3-D scene (``uses_scene``) keeps its own copy of the scenario's world (``ScenarioWorld``: ground,
obstacles, and the persons redrawn at every reset), as camera_detector does. With the same seed
and ground truth the readings equal the in-process Simulator's (``Simulator.sensor(name)``). A sensor
switched off by a fault of the tick's /sim/vehicle_status (its registration's ``off_fault``: camera_off,
lidar_off; docs/FAULTS.md) steps that vehicle as invalid and publishes nothing for it.
A scenario that does not list the sensor leaves the node idle with a warning.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import numpy as np

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.engine.builders import build_registered_sensor, step_registered_sensor
from qrsim_ros.core.engine.world import ScenarioWorld
from qrsim_ros.core.sensors.registry import SENSORS
from qrsim_ros.ros.ground_truth import GroundTruthNode, Outgoing
from qrsim_ros.ros.node import run_node
from qrsim_ros.ros.qos import QOS_LATCHED
from qrsim_ros.ros.stamps import stamp_from_tick


class SensorNode(GroundTruthNode):
    """One registered sensor model for all vehicles (see the module docstring)."""

    def __init__(self, sensor: str) -> None:
        super().__init__(sensor)
        self.registration = SENSORS[sensor]
        self.conversion = importlib.import_module(self.registration.ros_conversion)
        sc = self.scenario
        if sensor not in sc.vehicle.sensors:
            self.get_logger().warning(f"scenario {sc.name!r} lists no vehicle.sensors.{sensor}: "
                                      "nothing to do")
            return
        n = self.num_vehicles
        # a sensor that looks at the 3-D scene holds the world as the Simulator does: the same ground and
        # obstacles, and the same persons episode after episode (redrawn at every reset)
        self.world = ScenarioWorld(sc, self.streams, plume=False) if self.registration.uses_scene else None
        self.model = build_registered_sensor(sc, sensor, self.streams,
                                             self.world.scene if self.world is not None else None)
        self.sensor_params = sc.vehicle.sensors[sensor]
        conv = self.conversion
        # one topic (MESSAGE_TYPE on uavN/TOPIC), or several: publications(params) -> {key: (type, topic)}
        # and messages(...) -> (vehicle, key, message)
        self._many = hasattr(conv, "publications")
        if self._many:
            self._pubs_by_key = {key: self.per_vehicle_publishers(msg_type, topic)
                                 for key, (msg_type, topic) in conv.publications(self.sensor_params).items()}
        else:
            self._pubs = self.per_vehicle_publishers(conv.MESSAGE_TYPE, conv.TOPIC)
        if hasattr(conv, "static_transforms"):
            from tf2_msgs.msg import TFMessage

            self._tf_static = self.create_publisher(TFMessage, "/tf_static", QOS_LATCHED)
            self._tf_static.publish(TFMessage(transforms=conv.static_transforms(
                n, stamp_from_tick(0), self.sensor_params)))
        self.follow_ground_truth(self.registration.summary, with_accel=self.registration.reads_specific_force)

    def on_tick(self, k: int, x: Array, accel: Array | None, present: np.ndarray, valid: np.ndarray,
                 reset: bool) -> Outgoing:
        if reset:
            if self.world is not None:
                self.world.new_episode()
            self.model.reset(x)
        else:
            valid = self.faults.sensor_valid(self.registration.name, valid)  # camera_off, lidar_off
            if not step_registered_sensor(self.registration.name, self.model, k, x, valid, accel):
                return []
        on = self.faults.sensor_valid(self.registration.name, present)  # a sensor off publishes nothing
        msgs = self.conversion.messages(self.model, self.sensor_params, stamp_from_tick(k),
                                        np.flatnonzero(on))
        if self._many:
            return [(self._pubs_by_key[key][i], m) for i, key, m in msgs]
        return [(self._pubs[i], m) for i, m in msgs]


def main(argv: Sequence[str] | None = None, sensor: str | None = None) -> int:
    """Run the node of registered sensor ``sensor`` (default: the executable's name)."""
    from pathlib import Path

    name = sensor or Path(sys.argv[0]).name
    if name not in SENSORS:
        print(f"sensor node: {name!r} is not a registered sensor ({', '.join(sorted(SENSORS))})",
              file=sys.stderr)
        return 2
    def factory() -> SensorNode:
        return SensorNode(name)

    factory.__name__ = name  # named in a start-up error line
    return run_node(factory, argv)


if __name__ == "__main__":
    sys.exit(main())

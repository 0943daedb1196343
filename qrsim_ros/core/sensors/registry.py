"""The sensor registry: one registration per sensor model, from which both front ends serve it.

A registration says what the model is called, which parameters it takes, how it is built and what it
reads, and where its ROS message conversion lives. From it follow, with no further code:

- the scenario section ``vehicle.sensors.<name>`` (validated onto ``params_type``, errors naming the file
  and key path; a sensor runs in a scenario when its section is present);
- the in-process ``Simulator``: the model built with the scenario's streams, reset on the initial states
  and stepped every tick after the dynamics (``Simulator.sensor(name)``);
- the ROS graph: a node named ``<name>`` (the generic ``qrsim_ros.nodes.sensor`` node, executable
  ``<name>``) that steps the same model on the per-tick ground truth and publishes what the conversion
  module makes of it, planned by the launch plan for every scenario that lists the sensor, and counted
  among the ground-truth consumers the start gate waits for.

A model implements ``reset(x)`` (the episode's initial states, N x 13) and ``step(k, x, valid) -> bool``
(tick k's true states and validity; True when it produced a new reading), with
``step(k, x, valid, specific_force=a)`` when ``reads_specific_force``. See docs/EXTENDING.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.sensors.lidar import Lidar, LidarParams, RayTable
from qrsim_ros.core.sensors.range_finder import RangeFinder, RangeFinderParams
from qrsim_ros.core.sensors.scene_camera import (
    PinholeCameraParams,
    SceneCamera,
    SceneCameraParams,
    check_depth_outputs,
)
from qrsim_ros.core.sensors.scene_range_finders import RangeFindersParams, SceneRangeFinders


class SensorModel(Protocol):
    """What a registered sensor model implements (vectorised over the N vehicles)."""

    def reset(self, x: Any) -> None: ...

    def step(self, k: int, x: Any, valid: Any) -> bool: ...


@dataclass(frozen=True)
class SensorRegistration:
    """One sensor model (see the module docstring).

    name: the scenario key ``vehicle.sensors.<name>``, the node's name and its executable.
    summary: one line for docs and logs. params_type: the dataclass of its parameters (a field
    ``ground_z_ned_m`` is set from the scenario's area). build(params, num_vehicles, streams): the model.
    ros_conversion: dotted module path of its ROS message conversion (loaded by the node only; see
    ``qrsim_ros.ros.sensor_conversions``). reads_specific_force: the model's step takes the body
    specific force too. uses_scene: the model looks at the scenario's 3-D scene (``core.world.scene``):
    built as ``build(params, num_vehicles, streams, scene)``, and only in a scenario with a ``scene``.
    check_scenario(sensors): checks the sensor against the scenario's other registered sensors (their
    parameters by name), raising ConfigError (two cameras may not both publish the one depth image).
    off_fault: the fault kind (``core.faults.KINDS``) that switches the sensor off on a vehicle (None:
    none does): while it is active the model steps that vehicle as invalid (no new reading) and its node
    publishes nothing for it (docs/FAULTS.md "Effects"). memory_bytes(params): what one vehicle's copy
    of the model holds at most [bytes], for the scenario's memory estimate (``core.engine.memory``; None:
    too little to count).
    """

    name: str
    summary: str
    params_type: type
    build: Callable[[Any, int, RandomStreams], SensorModel]
    ros_conversion: str
    reads_specific_force: bool = False
    uses_scene: bool = False
    check_scenario: Callable[[dict[str, Any]], None] | None = None
    off_fault: str | None = None
    memory_bytes: Callable[[Any], float] | None = None


#: One vehicle's scene camera per pixel of its image: the rays, their hits, the image and the depth
#: image (105 B measured: 2 fisheyes with depth, 1024^2 -> 2048^2 pixels, 399 -> 1,061 MB).
SCENE_PIXEL_BYTES = 110.0
#: One vehicle's lidar per ray of a sweep: the sweep in progress (range, intensity, status: 13 B), the
#: finished one and the cloud made of it.
LIDAR_RAY_BYTES = 40.0

#: Every registered sensor, by name.
SENSORS: dict[str, SensorRegistration] = {}


def register(registration: SensorRegistration) -> SensorRegistration:
    """Add a sensor to the registry (names are unique)."""
    if registration.name in SENSORS:
        raise ValueError(f"sensor {registration.name!r} is registered twice")
    SENSORS[registration.name] = registration
    return registration


register(SensorRegistration(
    name="range_finder",
    summary="downward laser range finder over the flat ground (sensor_msgs/Range on uavN/range_finder)",
    params_type=RangeFinderParams,
    build=lambda params, n, streams: RangeFinder(n, params, streams),
    ros_conversion="qrsim_ros.ros.conversions.range_finder",
))

def _scene_sensor(name: str, summary: str, model: Callable[..., SensorModel], params_type: type,
                  **options: Any) -> SensorRegistration:
    """The registration of a sensor model that looks at the 3-D scene: built as ``model(num_vehicles,
    params, streams, scene)``, its ROS conversion ``qrsim_ros.ros.conversions.<name>``; ``options``: the
    registration's further fields (``off_fault``, ``check_scenario``)."""
    return SensorRegistration(
        name=name,
        summary=summary,
        params_type=params_type,
        build=lambda params, n, streams, scene: model(n, params, streams, scene),
        ros_conversion=f"qrsim_ros.ros.conversions.{name}",
        uses_scene=True,
        **options,
    )


def _scene_camera(name: str, summary: str, params_type: type) -> SensorRegistration:
    """The registration of a ``SceneCamera`` with the lens of ``params_type`` (``_scene_sensor``): it may
    publish the depth image (one camera at most, ``check_depth_outputs``) and is switched off by the
    ``camera_off`` fault."""
    return _scene_sensor(name, summary, SceneCamera, params_type, check_scenario=check_depth_outputs,
                         off_fault="camera_off",
                         memory_bytes=lambda p: SCENE_PIXEL_BYTES * p.width_px * p.height_px)


register(_scene_sensor(
    "range_finders",
    "laser range finders over the 3-D scene: down and optional up/front/back/right/left beams "
    "(sensor_msgs/Range on uavN/range/<beam>)",
    SceneRangeFinders,
    RangeFindersParams,
))

register(_scene_sensor(
    "lidar",
    "scanning lidar in the 3-D scene: VLP-16, HDL-32E, OS1-64 (sensor_msgs/PointCloud2 on "
    "uavN/lidar/points) or the planar UTM-30LX (sensor_msgs/LaserScan on uavN/scan)",
    Lidar,
    LidarParams,
    off_fault="lidar_off",
    memory_bytes=lambda p: LIDAR_RAY_BYTES * RayTable.build(p).time_s.size,
))

register(_scene_camera(
    "fisheye",
    "fisheye camera over the 3-D scene, equidistant 185 deg, optional depth from the same rays "
    "(sensor_msgs/Image + CameraInfo on uavN/fisheye/..., uavN/depth/...)",
    SceneCameraParams,
))

register(_scene_camera(
    "camera",
    "pinhole camera (plumb bob) over the 3-D scene, optional depth from the same rays "
    "(sensor_msgs/Image + CameraInfo on uavN/camera/..., uavN/depth/...)",
    PinholeCameraParams,
))

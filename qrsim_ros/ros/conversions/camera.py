"""The pinhole camera's messages: sensor_msgs/Image + sensor_msgs/CameraInfo on ``uavN/camera/image_raw`` and
``uavN/camera/camera_info`` (and ``uavN/depth/...`` with ``depth``), frame ``uavN/camera_optical_frame``
(see ``scene_camera`` in this package)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from geometry_msgs.msg import TransformStamped

from qrsim_ros.core.sensors.scene_camera import PinholeCameraParams, SceneCamera
from qrsim_ros.ros.conversions import scene_camera

SENSOR = "camera"


def publications(params: PinholeCameraParams) -> dict[str, tuple[type, str]]:
    return scene_camera.publications(SENSOR, params)


def messages(model: SceneCamera, params: PinholeCameraParams, stamp: Any,
             vehicles: Sequence[int]) -> list[tuple[int, str, Any]]:
    return scene_camera.messages(SENSOR, model, params, stamp, vehicles)


def static_transforms(num_vehicles: int, stamp: Any, params: PinholeCameraParams | None = None,
                      ) -> list[TransformStamped]:
    return scene_camera.static_transforms(SENSOR, num_vehicles, stamp, params or PinholeCameraParams())

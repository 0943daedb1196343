"""The fisheye camera's messages: sensor_msgs/Image + sensor_msgs/CameraInfo on ``uavN/fisheye/image_raw`` and
``uavN/fisheye/camera_info`` (and ``uavN/depth/...`` with ``depth``), frame ``uavN/fisheye_optical_frame``
(see ``scene_camera`` in this package)."""

from __future__ import annotations

from qrsim_ros.core.sensors.scene_camera import SceneCameraParams
from qrsim_ros.ros.conversions.scene_camera import conversion

#: ``publications``, ``messages`` and ``static_transforms`` (the package docstring) of sensor ``fisheye``.
publications, messages, static_transforms = conversion(SceneCameraParams)

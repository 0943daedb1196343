"""The pinhole camera's messages: sensor_msgs/Image + sensor_msgs/CameraInfo on ``uavN/camera/image_raw`` and
``uavN/camera/camera_info`` (and ``uavN/depth/...`` with ``depth``), frame ``uavN/camera_optical_frame``
(see ``scene_camera`` in this package)."""

from __future__ import annotations

from qrsim_ros.core.sensors.scene_camera import PinholeCameraParams
from qrsim_ros.ros.conversions.scene_camera import conversion

#: ``publications``, ``messages`` and ``static_transforms`` (the package docstring) of sensor ``camera``.
publications, messages, static_transforms = conversion(PinholeCameraParams)

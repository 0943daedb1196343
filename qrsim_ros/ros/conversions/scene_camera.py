"""Shared by the rendered cameras' conversions (``fisheye``, ``camera``): sensor_msgs/Image and
sensor_msgs/CameraInfo of ``core.sensors.scene_camera`` frames, and the mount's static transform.

Topics (relative to ``uavN/``): ``<sensor>/image_raw`` (rgb8 or mono8) and ``<sensor>/camera_info``;
with ``depth``, ``depth/image_raw`` (32FC1, metres: the range along each pixel's ray, or the z depth
of REP-118 with ``depth_kind: z``; NaN where the pixel has no ray, +inf beyond ``depth_max_range_m``) and
``depth/camera_info`` (the same lens: the depth image is pixel-aligned with the colour image). Frame:
``uavN/<sensor>_optical_frame`` (REP-103 optical: z forward along the optical axis, x right, y down), for
the depth image too; published as a static transform from ``uavN/base_link`` (FLU).

CameraInfo: ``distortion_model`` "equidistant" with D = k1..k4 (the fisheye) or "plumb_bob" with
D = k1, k2, p1, p2, k3 (the pinhole), K the camera matrix, R the identity, P = [K | 0], so
image_proc-style consumers (``cv2.fisheye`` for "equidistant") rectify with the lens the renderer used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np
from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import CameraInfo, Image

from qrsim_ros.core.common.frames import R_FLU_FRD, frd_to_flu, rotation_matrix_to_quaternion
from qrsim_ros.core.sensors.scene_camera import SceneCamera, SceneCameraParams
from qrsim_ros.ros.names import base_link_frame, vehicle_namespace
from qrsim_ros.ros.stamps import stamp_from_ns
from qrsim_ros.ros.to_messages import transform

#: The depth image's topic (relative to uavN/), whichever camera produces it.
DEPTH_TOPIC = "depth"


def optical_frame(sensor: str, index: int) -> str:
    """The optical frame of camera ``sensor`` of vehicle ``index``."""
    return f"{vehicle_namespace(index)}/{sensor}_optical_frame"


def publications(sensor: str, params: SceneCameraParams) -> dict[str, tuple[type, str]]:
    """The topics of camera ``sensor``: image and camera_info, and the depth pair with ``depth``."""
    out: dict[str, tuple[type, str]] = {"image": (Image, f"{sensor}/image_raw"),
                                        "info": (CameraInfo, f"{sensor}/camera_info")}
    if params.depth:
        out["depth"] = (Image, f"{DEPTH_TOPIC}/image_raw")
        out["depth_info"] = (CameraInfo, f"{DEPTH_TOPIC}/camera_info")
    return out


def camera_info(model: SceneCamera, frame: str, stamp: Any) -> CameraInfo:
    """The CameraInfo of the camera's lens (module docstring)."""
    lens = model.lens
    msg = CameraInfo()
    msg.header.stamp = stamp
    msg.header.frame_id = frame
    msg.width, msg.height = int(lens.width), int(lens.height)
    msg.distortion_model = lens.distortion_model
    msg.d = [float(v) for v in lens.D]
    msg.k = lens.K.ravel()
    msg.r = np.eye(3).ravel()
    msg.p = lens.P.ravel()
    return msg


def image_message(pixels: np.ndarray, encoding: str, frame: str, stamp: Any) -> Image:
    """A sensor_msgs/Image of an (H, W[, C]) array: uint8 rgb8 / mono8 or float32 32FC1 (little endian)."""
    msg = Image()
    msg.header.stamp = stamp
    msg.header.frame_id = frame
    msg.height, msg.width = int(pixels.shape[0]), int(pixels.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = int(pixels.strides[0])
    msg.data = np.ascontiguousarray(pixels, pixels.dtype.newbyteorder("<")).tobytes()
    return msg


def messages(sensor: str, model: SceneCamera, params: SceneCameraParams, stamp: Any,
             vehicles: Sequence[int]) -> list[tuple[int, str, Any]]:
    """(vehicle, key, message) of the latest frame of every vehicle in ``vehicles`` that has one, stamped
    with the frame's own time (``model.frame_ns``: between ticks when the period is not a multiple of
    0.02 s; the tick's ``stamp`` is not used)."""
    stamp = stamp_from_ns(model.frame_ns)
    out: list[tuple[int, str, Any]] = []
    for i in (int(v) for v in vehicles):
        image = model.images[i]
        if image is None:
            continue
        frame = optical_frame(sensor, i)
        out.append((i, "image", image_message(image, params.encoding, frame, stamp)))
        info = camera_info(model, frame, stamp)
        out.append((i, "info", info))
        depth = model.depth_m[i]
        if params.depth and depth is not None:
            out.append((i, "depth", image_message(depth, "32FC1", frame, stamp)))
            out.append((i, "depth_info", info))
    return out


def static_transforms(sensor: str, num_vehicles: int, stamp: Any,
                      params: SceneCameraParams) -> list[TransformStamped]:
    """``uavN/base_link`` (FLU) -> ``uavN/<sensor>_optical_frame`` of every vehicle: the mount."""
    q = rotation_matrix_to_quaternion(R_FLU_FRD @ params.body_from_optical())
    xyz = frd_to_flu(np.asarray(params.mount_xyz_m, float))
    return [transform(base_link_frame(i), optical_frame(sensor, i), xyz, q, stamp)
            for i in range(num_vehicles)]


class Conversion(NamedTuple):
    """The conversion functions of one camera (``conversions`` package docstring), its sensor name bound."""

    publications: Callable[[SceneCameraParams], dict[str, tuple[type, str]]]
    messages: Callable[[SceneCamera, SceneCameraParams, Any, Sequence[int]], list[tuple[int, str, Any]]]
    static_transforms: Callable[..., list[TransformStamped]]


def conversion(params_type: type[SceneCameraParams]) -> Conversion:
    """The conversion functions of the camera whose parameters are ``params_type`` (sensor
    ``params_type.SENSOR``): ``publications(params)``, ``messages(model, params, stamp, vehicles)`` and
    ``static_transforms(num_vehicles, stamp, params=None)``, whose parameters default to ``params_type()``."""
    sensor = params_type.SENSOR

    def mount(num_vehicles: int, stamp: Any,
              params: SceneCameraParams | None = None) -> list[TransformStamped]:
        return static_transforms(sensor, num_vehicles, stamp, params or params_type())

    return Conversion(partial(publications, sensor), partial(messages, sensor), mount)

"""The lidar's messages: sensor_msgs/PointCloud2 on ``uavN/lidar/points`` (spinning models) or
sensor_msgs/LaserScan on ``uavN/scan`` (planar models), in the frame ``uavN/lidar_link``.

Frame ``uavN/lidar_link``: x forward, y left, z up of the sensor (core.sensors.lidar), published as a
static transform from ``uavN/base_link`` (FLU) built from the mount, which the scenario gives in the body
FRD frame (position and ZYX angles; converted with the frames helpers).

PointCloud2: the layout of the Velodyne ROS driver's XYZIRT cloud, so existing pipelines take it:
fields x, y, z, intensity (float32), ring (uint16), time (float32), packed (offsets 0, 4, 8, 12, 16, 18;
point_step 22), little endian. ``time`` [s] is each point's time since the sweep's first ray, and the
header stamp is that first ray's time (the driver's convention: stamp + time is when the point was
measured). Unorganised (height 1, the returns in firing order, dense) or, with ``organized``, rings x
columns (row = ring, ascending elevation) with NaN coordinates where there is no return (not dense).

LaserScan (REP-117): angle_min .. angle_max in steps of angle_increment [rad] in lidar_link's x-y plane;
``time_increment`` the time between steps and ``scan_time`` the sweep period [s]; ranges +inf for no
return or beyond range_max, -inf closer than range_min, NaN for a dropout; intensities as the cloud's.
The stamp is the first step's time, as urg_node stamps a scan.

Stamps therefore follow the sweep schedule (core.sensors.lidar): on the 0.02 s tick grid when the period
is a multiple of it, between ticks otherwise (the UTM-30LX's 25 ms); a message is published at the tick
that completes its sweep.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import LaserScan, PointCloud2

from qrsim_ros.core.common.frames import R_FLU_FRD, frd_to_flu, rotation_matrix_to_quaternion
from qrsim_ros.core.sensors.lidar import POINT_DTYPE, Lidar, LidarParams, mount_rotation
from qrsim_ros.ros.names import base_link_frame, vehicle_namespace
from qrsim_ros.ros.stamps import stamp_from_ns
from qrsim_ros.ros.to_messages import point_fields, structured_cloud, transform

#: Topics (under ``uavN/``) of the cloud and of the planar scan.
POINTS_TOPIC = "lidar/points"
SCAN_TOPIC = "scan"

def frame(index: int) -> str:
    """The lidar's frame of vehicle ``index``."""
    return f"{vehicle_namespace(index)}/lidar_link"


def publications(params: LidarParams) -> dict[str, tuple[Any, str]]:
    """The cloud for a spinning lidar, the scan for a planar one."""
    if params.spec.planar:
        return {"scan": (LaserScan, SCAN_TOPIC)}
    return {"points": (PointCloud2, POINTS_TOPIC)}


#: sensor_msgs/PointField list of POINT_DTYPE (the Velodyne driver's XYZIRT layout), built once.
FIELDS = point_fields(POINT_DTYPE)


def cloud_message(model: Lidar, vehicle: int, stamp: Any) -> PointCloud2:
    """The latest sweep of ``vehicle`` as a PointCloud2 (see the module docstring)."""
    return structured_cloud(model.points(vehicle), frame(vehicle), stamp, FIELDS)


def scan_message(model: Lidar, params: LidarParams, vehicle: int, stamp: Any) -> LaserScan:
    """The latest sweep of ``vehicle`` as a LaserScan (see the module docstring)."""
    rays = model.rays
    ranges, intensities = model.scan(vehicle)
    step = rays.azimuth_step_rad
    m = LaserScan()
    m.header.stamp = stamp
    m.header.frame_id = frame(vehicle)
    m.angle_min = float(rays.azimuth_rad[np.argmin(rays.column)])
    m.angle_increment = step
    m.angle_max = float(m.angle_min + step * (rays.columns - 1))
    m.time_increment = float(rays.column_period_s)
    m.scan_time = float(params.period_s)
    m.range_min = float(params.min_range_m)
    m.range_max = float(params.max_range_m)
    m.ranges = array.array("f", ranges.astype(np.float32).tobytes())
    m.intensities = array.array("f", intensities.astype(np.float32).tobytes())
    return m


def messages(model: Lidar, params: LidarParams, stamp: Any, vehicles: Sequence[int]
             ) -> list[tuple[int, str, Any]]:
    """The sweep completed at this tick (if any) of every vehicle in ``vehicles`` that was valid all
    through it, stamped with the sweep's first ray (``stamp``, the tick's, is not used)."""
    if not model.new_sweep:
        return []
    sweep_stamp = stamp_from_ns(model.sweep_start_ns)
    out: list[tuple[int, str, Any]] = []
    for i in vehicles:
        i = int(i)
        if not model.complete[i]:
            continue
        if params.spec.planar:
            out.append((i, "scan", scan_message(model, params, i, sweep_stamp)))
        else:
            out.append((i, "points", cloud_message(model, i, sweep_stamp)))
    return out


def static_transforms(num_vehicles: int, stamp: Any, params: LidarParams | None = None
                      ) -> list[TransformStamped]:
    """``uavN/base_link`` -> ``uavN/lidar_link`` of every vehicle, from the mount (given in FRD)."""
    params = params if params is not None else LidarParams()
    translation = frd_to_flu(np.asarray(params.mount_position_m, float))
    q = rotation_matrix_to_quaternion(R_FLU_FRD @ mount_rotation(params))  # lidar axes in FLU
    return [transform(base_link_frame(i), frame(i), translation, q, stamp) for i in range(num_vehicles)]

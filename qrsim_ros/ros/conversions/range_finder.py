"""The range finder's messages: sensor_msgs/Range on ``uavN/range_finder`` (REP-117).

Frame ``uavN/range_finder_link``: x along the beam (the body's down axis), published as a static
transform from ``uavN/base_link`` (FLU: a quarter turn about y). ``range`` is the reading [m]: +inf for
no return or beyond ``max_range``, -inf closer than ``min_range`` (REP-117); ``radiation_type`` INFRARED
(a laser), ``field_of_view`` the beam's cone angle [rad].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import Range

from qrsim_ros.core.sensors.range_finder import RangeFinder, RangeFinderParams
from qrsim_ros.ros.names import base_link_frame, vehicle_namespace

MESSAGE_TYPE = Range
TOPIC = "range_finder"


def frame(index: int) -> str:
    """The beam's frame of vehicle ``index``."""
    return f"{vehicle_namespace(index)}/range_finder_link"


def messages(model: RangeFinder, params: RangeFinderParams, stamp: Any,
             vehicles: Sequence[int]) -> list[tuple[int, Range]]:
    """One Range per vehicle in ``vehicles`` with its latest reading."""
    r = model.range_m
    out = []
    for i in vehicles:
        msg = Range()
        msg.header.stamp = stamp
        msg.header.frame_id = frame(int(i))
        msg.radiation_type = Range.INFRARED
        msg.field_of_view = float(params.field_of_view_rad)
        msg.min_range = float(params.min_range_m)
        msg.max_range = float(params.max_range_m)
        msg.range = float(r[i])
        out.append((int(i), msg))
    return out


def static_transforms(num_vehicles: int, stamp: Any, params: RangeFinderParams | None = None,
                      ) -> list[TransformStamped]:
    """``uavN/base_link`` -> ``uavN/range_finder_link`` of every vehicle: x turned to point down."""
    out = []
    for i in range(num_vehicles):
        t = TransformStamped()
        t.header.stamp = stamp
        t.header.frame_id = base_link_frame(i)
        t.child_frame_id = frame(i)
        t.transform.rotation.y = math.sqrt(0.5)
        t.transform.rotation.w = math.sqrt(0.5)
        out.append(t)
    return out

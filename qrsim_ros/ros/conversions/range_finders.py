"""The scene range finders' messages: sensor_msgs/Range on ``uavN/range/<beam>`` (down, up, front, back,
right, left, front_left, front_right, front_down), REP-117 infinities, each in frame
``uavN/range_<beam>_link`` whose x axis is the beam (static transforms from ``uavN/base_link``, FLU).
Only the beams that updated at a tick are published.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import Range

from qrsim_ros.core.sensors.scene_range_finders import RangeFindersParams, SceneRangeFinders
from qrsim_ros.ros.names import base_link_frame, vehicle_namespace

H = math.sqrt(0.5)
S8, C8 = math.sin(math.pi / 8), math.cos(math.pi / 8)
#: The rotation (x, y, z, w) of each beam's frame in base_link (FLU): its x axis onto the beam.
BEAM_ROTATIONS_FLU = {
    "down": (0.0, H, 0.0, H),     # +90 deg about y: x -> -z
    "up": (0.0, -H, 0.0, H),      # -90 deg about y: x -> +z
    "front": (0.0, 0.0, 0.0, 1.0),
    "back": (0.0, 0.0, 1.0, 0.0),  # 180 deg about z
    "left": (0.0, 0.0, H, H),     # +90 deg about z: x -> +y (left)
    "right": (0.0, 0.0, -H, H),   # -90 deg about z: x -> -y (right)
    "front_left": (0.0, 0.0, S8, C8),    # +45 deg about z
    "front_right": (0.0, 0.0, -S8, C8),  # -45 deg about z
    "front_down": (0.0, S8, 0.0, C8),    # +45 deg about y: x -> (x - z) / sqrt 2
}


def frame(index: int, beam: str) -> str:
    return f"{vehicle_namespace(index)}/range_{beam}_link"


def publications(params: RangeFindersParams) -> dict[str, tuple[Any, str]]:
    """One Range topic per fitted beam: ``range/<beam>``."""
    return {beam: (Range, f"range/{beam}") for beam in params.beams}


def messages(model: SceneRangeFinders, params: RangeFindersParams, stamp: Any,
             vehicles: Sequence[int]) -> list[tuple[int, str, Range]]:
    """A Range per vehicle in ``vehicles`` for every beam that updated."""
    out = []
    for beam in model.updated:
        p = params.beams[beam]
        r = model.range_m(beam)
        for i in vehicles:
            msg = Range()
            msg.header.stamp = stamp
            msg.header.frame_id = frame(int(i), beam)
            msg.radiation_type = Range.INFRARED
            msg.field_of_view = float(p.field_of_view_rad)
            msg.min_range = float(p.min_range_m)
            msg.max_range = float(p.max_range_m)
            msg.range = float(r[i])
            out.append((int(i), beam, msg))
    return out


def static_transforms(num_vehicles: int, stamp: Any, params: RangeFindersParams) -> list[TransformStamped]:
    """``uavN/base_link`` -> ``uavN/range_<beam>_link`` for every vehicle and fitted beam."""
    out = []
    for i in range(num_vehicles):
        for beam in params.beams:
            t = TransformStamped()
            t.header.stamp = stamp
            t.header.frame_id = base_link_frame(i)
            t.child_frame_id = frame(i, beam)
            q = t.transform.rotation
            q.x, q.y, q.z, q.w = BEAM_ROTATIONS_FLU[beam]
            out.append(t)
    return out

"""Serialised messages built with numpy for a whole fleet: the per-vehicle sensor topics published as bytes.

A sensor node publishes one message per vehicle per tick on its per-vehicle topics (``uavN/imu/data``,
``uavN/altimeter`` at 50 Hz). Filling a Python message and letting rclpy convert and serialise it costs
tens of microseconds each: at 100 vehicles, most of the imu and altimeter nodes' time. rclpy publishes
bytes as they are (``Publisher.publish(bytes)``: the serialised message), so messages whose CDR is a
``std_msgs/Header`` followed by float64 fields only (sensor_msgs/Imu, qrsim_ros/Altitude,
geometry_msgs/TwistStamped) are built here: the fixed part per vehicle once, the float64 block of every
vehicle from one array. The bytes are rclpy's own serialisation of the same message
(test_cdr checks them against ``rclpy.serialization.serialize_message``; the padding after the frame id
is zeros here, whatever rclpy's buffer held there).

The layout (plain CDR, little endian, as rmw_fastrtps writes it): a 4-byte encapsulation header
(``00 01 00 00``), the stamp (int32 sec, uint32 nanosec), the frame id (uint32 length counting the NUL,
the characters, the NUL), padding to 8 bytes from the start of the payload, the float64 fields.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

#: CDR, little endian, no options.
ENCAPSULATION_LE = b"\x00\x01\x00\x00"
_STAMP = {0: struct.Struct(">iI"), 1: struct.Struct("<iI")}  # by the encapsulation's byte order


def header_stamp_ns(raw: bytes) -> int:
    """The ``header.stamp`` [ns] of a serialised message whose first field is a std_msgs/Header (read
    without deserialising the rest: a lockstep reader wants only the tick of most samples)."""
    sec, nanosec = _STAMP[raw[1] & 1].unpack_from(raw, 4)
    return sec * 1_000_000_000 + nanosec


class HeaderFloat64Messages:
    """Serialised messages of one type whose fields after ``header`` are ``count`` float64 values, one
    per vehicle; ``frames[i]`` is vehicle i's ``header.frame_id``."""

    def __init__(self, frames: Sequence[str], count: int) -> None:
        self.count = count
        self._tails: list[bytes] = []
        for frame in frames:
            text = frame.encode("utf-8") + b"\x00"
            end = 8 + 4 + len(text)  # payload offset after sec, nanosec, length and the characters
            self._tails.append(struct.pack("<I", len(text)) + text + b"\x00" * (-end % 8))

    def encode(self, sec: int, nanosec: int, vehicles: Sequence[int] | NDArray[np.intp],
               values: NDArray[np.float64]) -> list[bytes]:
        """The serialised message of each vehicle in ``vehicles``, stamped (sec, nanosec), whose float64
        fields are the matching row of ``values`` (len(vehicles), count), in the message's field order."""
        block = np.ascontiguousarray(values, dtype="<f8")
        if block.shape != (len(vehicles), self.count):
            raise ValueError(f"values of shape {block.shape}, expected ({len(vehicles)}, {self.count})")
        head = ENCAPSULATION_LE + struct.pack("<iI", sec, nanosec)
        raw = block.tobytes()
        size = 8 * self.count
        tails = self._tails
        return [b"".join((head, tails[i], raw[r * size:(r + 1) * size]))
                for r, i in enumerate(np.asarray(vehicles, np.intp).tolist())]

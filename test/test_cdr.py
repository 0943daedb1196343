"""The per-vehicle sensor messages serialised with numpy (qrsim_ros/ros/cdr.py) are the bytes rclpy's own
serialisation gives the same message, built field by field here (but the padding after the frame id,
which rclpy does not clear), and rclpy reads them back."""

from __future__ import annotations

import numpy as np
import pytest
from rosenv import require_ros

from qrsim_ros.ros.cdr import HeaderFloat64Messages

FRAMES = ["uav1/base_link", "uav10/base_link", "uav100/base_link", "", "u", "uav1000/base_link_frd"]


def _unpadded(raw: bytes, frame: str) -> bytes:
    """``raw`` with the padding after the frame id zeroed: rclpy leaves whatever its buffer held there (seen:
    ``0f 74 25 00``), so only the other bytes are the message's."""
    end = 4 + 12 + len(frame.encode()) + 1  # encapsulation, stamp, length, characters, NUL
    pad = -(end - 4) % 8
    return raw[:end] + b"\x00" * pad + raw[end + pad:]


def _stamp(sec: int, nanosec: int):  # type: ignore[no-untyped-def]
    from builtin_interfaces.msg import Time

    return Time(sec=sec, nanosec=nanosec)


def test_imu_bytes_are_rclpys_serialisation() -> None:
    require_ros()
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import Imu

    from qrsim_ros.ros.to_messages import IMU_FLOAT64_FIELDS, imu_float64_block

    rng = np.random.default_rng(3)
    columns = rng.normal(size=(len(FRAMES), 10)) * 10.0 ** rng.integers(-8, 8, size=(len(FRAMES), 10))
    var_o, var_w, var_a = rng.uniform(0, 1, 3), rng.uniform(0, 1, 3), rng.uniform(0, 1, 3)
    vehicles = np.arange(len(FRAMES))
    got = HeaderFloat64Messages(FRAMES, IMU_FLOAT64_FIELDS).encode(
        1234, 567_000_000, vehicles, imu_float64_block(columns, var_o, var_w, var_a))
    for i, raw in enumerate(got):
        m = Imu()
        m.header.stamp = _stamp(1234, 567_000_000)
        m.header.frame_id = FRAMES[i]
        c = columns[i].tolist()
        m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w = c[0:4]
        m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z = c[4:7]
        m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z = c[7:10]
        for field, var in (("orientation_covariance", var_o), ("angular_velocity_covariance", var_w),
                           ("linear_acceleration_covariance", var_a)):
            cov = np.zeros(9)
            cov[[0, 4, 8]] = var
            setattr(m, field, cov)
        assert raw == _unpadded(bytes(serialize_message(m)), FRAMES[i]), FRAMES[i]
        back = deserialize_message(raw, Imu)
        assert back.header.frame_id == FRAMES[i] and back.orientation.w == c[3]


def test_altitude_and_twist_bytes_are_rclpys_serialisation() -> None:
    require_ros()
    from geometry_msgs.msg import TwistStamped
    from qrsim_ros.msg import Altitude
    from rclpy.serialization import serialize_message

    from qrsim_ros.ros.to_messages import ALTITUDE_FLOAT64_FIELDS, altitude_message

    rng = np.random.default_rng(4)
    values = rng.normal(size=(len(FRAMES), 3))
    vehicles = [5, 0, 3]  # any subset, in any order
    got = HeaderFloat64Messages(FRAMES, ALTITUDE_FLOAT64_FIELDS).encode(7, 20_000_000, vehicles,
                                                                         values[vehicles])
    for raw, i in zip(got, vehicles, strict=True):
        want = altitude_message(_stamp(7, 20_000_000), FRAMES[i], *values[i].tolist())
        assert raw == _unpadded(bytes(serialize_message(want)), FRAMES[i])
        assert isinstance(want, Altitude)
    twist = rng.normal(size=(1, 6))
    (raw,) = HeaderFloat64Messages(["map"], 6).encode(-3, 999_999_999, [0], twist)
    m = TwistStamped()
    m.header.stamp, m.header.frame_id = _stamp(-3, 999_999_999), "map"
    m.twist.linear.x, m.twist.linear.y, m.twist.linear.z, m.twist.angular.x, m.twist.angular.y, \
        m.twist.angular.z = twist[0].tolist()
    assert raw == _unpadded(bytes(serialize_message(m)), "map")


def test_a_block_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"values of shape \(2, 3\), expected \(2, 37\)"):
        HeaderFloat64Messages(FRAMES, 37).encode(0, 0, [0, 1], np.zeros((2, 3)))


def test_the_stamp_is_read_from_a_serialised_message_without_deserialising_it() -> None:
    require_ros()
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import NavSatFix

    from qrsim_ros.ros.cdr import header_stamp_ns

    m = NavSatFix()
    m.header.stamp = _stamp(12, 340_000_000)
    m.header.frame_id = "uav7/gps"
    assert header_stamp_ns(bytes(serialize_message(m))) == 12_340_000_000
    # big-endian CDR (encapsulation 00 00), as another DDS vendor may send it
    big = b"\x00\x00\x00\x00" + (-2).to_bytes(4, "big", signed=True) + (5).to_bytes(4, "big") + b"\x00" * 8
    assert header_stamp_ns(big) == -2 * 1_000_000_000 + 5

"""The radio's rx messages written and read as CDR (qrsim_ros/ros/comms_messages.py): the bytes rclpy's
own serialisation gives the same message (but its padding, which rclpy does not clear), read back to the
same packet, whatever the frame id; bytes that are no CommsPacket are refused with a reason."""

from __future__ import annotations

import math

import pytest
from rosenv import require_ros

from qrsim_ros.core.comms import Packet

PACKETS = [
    Packet(0, -1, 3, 0, "datagram", b"", 0.0, 0.02),
    Packet(4, 7, 7, 12, "reliable", b"P\x01\x02\x03", 1.0, 1.04),
    Packet(49, -1, 0, 2**32 - 1, "datagram", bytes(range(256)) * 3, 0.5, 600.0),
]


def _masked(raw: bytes) -> bytes:
    """``raw`` with the padding bytes zeroed (after the empty frame id, after the mode)."""
    b = bytearray(raw)
    b[17:20] = b"\x00\x00\x00"  # after the frame id's NUL (at 16)
    b[33:36] = b"\x00\x00\x00"  # after the mode (at 32)
    return bytes(b)


@pytest.mark.parametrize("p", PACKETS, ids=lambda p: f"{p.mode}-{len(p.payload)}")
def test_rx_bytes_are_rclpys_serialisation_and_read_back(p: Packet) -> None:
    require_ros()
    from qrsim_ros.msg import CommsPacket
    from rclpy.serialization import deserialize_message, serialize_message

    from qrsim_ros.ros.comms_messages import packet_message, packet_of_bytes, packet_of_message, rx_bytes

    k = round(p.delivered_s / 0.02)
    raw = rx_bytes(p, k)
    assert _masked(raw) == _masked(bytes(serialize_message(packet_message(p, k))))
    back = deserialize_message(raw, CommsPacket)  # rclpy reads ours
    assert (back.source, back.destination, back.sequence, bytes(back.payload)) == (
        p.source, p.destination, p.sequence, p.payload)
    ours, theirs = packet_of_bytes(raw, p.receiver), packet_of_message(back, p.receiver)
    assert ours[:6] == theirs[:6] and ours.delivered_s == theirs.delivered_s and math.isnan(ours.sent_s)
    assert ours[:6] == p[:6]


def test_a_frame_id_is_skipped_whatever_its_length() -> None:
    require_ros()
    from rclpy.serialization import serialize_message

    from qrsim_ros.ros.comms_messages import packet_message, packet_of_bytes

    p = PACKETS[1]
    for frame in ("", "a", "ab", "abc", "abcd", "uav12/base_link"):
        msg = packet_message(p, 52)
        msg.header.frame_id = frame
        got = packet_of_bytes(bytes(serialize_message(msg)), p.receiver)
        assert got[:6] == p[:6], frame
        assert got.delivered_s == pytest.approx(52 * 0.02)


def test_bytes_that_are_no_packet_are_refused() -> None:
    from qrsim_ros.ros.comms_messages import packet_of_bytes, rx_bytes

    raw = rx_bytes(PACKETS[1], 52)
    with pytest.raises(ValueError, match="not a serialised CommsPacket"):
        packet_of_bytes(raw[:-1], 0)  # a payload cut short
    with pytest.raises(ValueError, match="not a serialised CommsPacket"):
        packet_of_bytes(raw[:20], 0)  # the fields missing

"""qrsim_ros/CommsPacket <-> the core radio's packets (docs/COMMS.md): one place for the mode mapping
and the tx/rx message layout, used by the comms node and the autopilots.

The rx side also comes serialised: at 50 vehicles the radio delivers about 2,500 packets per 0.2 s task
step (every broadcast heard by every other vehicle), one ``uavN/comms/rx`` message each; building each
as a Python message and letting rclpy convert it took most of the comms node's time and of the
autopilot's answer. ``rx_bytes`` writes the message's CDR directly and ``packet_of_bytes`` reads it
(plain CDR, little endian, as rmw_fastrtps writes it: the ``ros.cdr`` header, then source, destination,
sequence, mode and the payload's length and bytes; test_comms_messages checks both against rclpy's own
serialisation).
"""

from __future__ import annotations

import math
import struct
from typing import Any

from qrsim_ros.core.comms import Packet
from qrsim_ros.msg import CommsPacket
from qrsim_ros.ros.cdr import ENCAPSULATION_LE
from qrsim_ros.ros.stamps import seconds_of_stamp, stamp_from_tick

#: CommsPacket.mode -> the core's mode (None: the scenario's ``comms.mode``).
MODE_OF_MESSAGE: dict[int, str | None] = {CommsPacket.MODE_DEFAULT: None,
                                          CommsPacket.MODE_DATAGRAM: "datagram",
                                          CommsPacket.MODE_RELIABLE: "reliable"}
#: The core's mode -> CommsPacket.mode.
MESSAGE_MODE: dict[str | None, int] = {mode: value for value, mode in MODE_OF_MESSAGE.items()}


def tx_message(stamp: Any, source: int, destination: int, payload: bytes, mode: str | None) -> CommsPacket:
    """A packet to send on ``uavN/comms/tx``, sent at ``stamp`` (a tick time)."""
    m = CommsPacket()
    m.header.stamp = stamp
    m.source, m.destination = int(source), int(destination)
    m.mode = MESSAGE_MODE[mode]
    m.payload = bytes(payload)
    return m


def packet_message(p: Packet, k: int) -> CommsPacket:
    """The rx message of a delivered packet, stamped with the delivery tick ``k``."""
    m = CommsPacket()
    m.header.stamp = stamp_from_tick(k)
    m.source = int(p.source)
    m.destination = int(p.destination)
    m.sequence = int(p.sequence)
    m.mode = MESSAGE_MODE[p.mode]
    m.payload = p.payload
    return m


def packet_of_message(msg: Any, receiver: int) -> Packet:
    """The packet an rx message of ``receiver`` delivered (``sent_s`` NaN: the message carries the delivery
    time only)."""
    return Packet(int(msg.source), int(msg.destination), receiver, int(msg.sequence),
                  MODE_OF_MESSAGE.get(msg.mode) or "datagram", bytes(msg.payload), math.nan,
                  seconds_of_stamp(msg.header.stamp))


#: After the stamp: an empty frame id (length 1: the NUL) padded to 4 bytes.
_EMPTY_FRAME = struct.pack("<I", 1) + b"\x00\x00\x00\x00"
#: The fields after the header: source, destination, sequence, mode (padded), the payload's length.
_FIELDS = struct.Struct("<IiIB3xI")
_STAMP = struct.Struct("<iI")
_LENGTH = struct.Struct("<I")


def rx_bytes(p: Packet, k: int) -> bytes:
    """``packet_message(p, k)``, serialised (what rclpy would send for it)."""
    stamp = stamp_from_tick(k)
    return b"".join((ENCAPSULATION_LE, _STAMP.pack(stamp.sec, stamp.nanosec), _EMPTY_FRAME,
                     _FIELDS.pack(p.source, p.destination, p.sequence, MESSAGE_MODE[p.mode], len(p.payload)),
                     p.payload))


def packet_of_bytes(raw: bytes, receiver: int) -> Packet:
    """``packet_of_message`` of a serialised rx message (any frame id; a big-endian one is deserialised by
    rclpy). ValueError for bytes that are no CommsPacket."""
    if raw[:4] != ENCAPSULATION_LE:
        from rclpy.serialization import deserialize_message

        return packet_of_message(deserialize_message(raw, CommsPacket), receiver)
    try:
        sec, nanosec = _STAMP.unpack_from(raw, 4)
        (frame_length,) = _LENGTH.unpack_from(raw, 12)
        at = 16 + frame_length
        at += -(at - 4) % 4  # the fields align to 4 from the payload's start (after the encapsulation)
        source, destination, sequence, mode, length = _FIELDS.unpack_from(raw, at)
    except struct.error as exc:
        raise ValueError(f"not a serialised CommsPacket: {exc}") from None
    payload = raw[at + _FIELDS.size:at + _FIELDS.size + length]
    if len(payload) != length:
        raise ValueError(f"not a serialised CommsPacket: a payload of {length} bytes in {len(raw)}")
    return Packet(source, destination, receiver, sequence, MODE_OF_MESSAGE.get(mode) or "datagram", payload,
                  math.nan, sec + nanosec * 1e-9)

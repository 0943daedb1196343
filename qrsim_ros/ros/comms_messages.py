"""qrsim_ros/CommsPacket <-> the core radio's packets (docs/COMMS.md): one place for the mode mapping
and the tx/rx message layout, used by the comms node and the autopilots."""

from __future__ import annotations

import math
from typing import Any

from qrsim_ros.core.comms import Packet
from qrsim_ros.msg import CommsPacket
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

"""A radio packet as delivered, and the per-vehicle inboxes that hold deliveries until they are read."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


def vehicle_index(name: str, value: object, num_vehicles: int) -> int:
    """``value`` as a vehicle index in [0, num_vehicles), else ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < num_vehicles:
        raise ValueError(f"{name}={value!r} must be a vehicle index in [0, {num_vehicles - 1}]")
    return int(value)


class Packet(NamedTuple):
    """One delivered packet.

    source: the sending vehicle (0-based index; namespace ``uav<source + 1>``). destination: the vehicle
    it was sent to, or ``params.BROADCAST``. receiver: the vehicle it was delivered to (the destination,
    or one of a broadcast's receivers). sequence: the sender's sequence number (per sender, from 0 after
    every reset; ``Radio.send`` returns it). mode: ``datagram`` or ``reliable``. payload: the bytes sent.
    sent_s / delivered_s: simulated times of the send and of the delivery (the tick's time) [s].
    (A named tuple: immutable and cheap to make, a tick can deliver thousands.)
    """

    source: int
    destination: int
    receiver: int
    sequence: int
    mode: str
    payload: bytes
    sent_s: float
    delivered_s: float


class Inboxes:
    """Every vehicle's received packets, in delivery order, until read (``drain``)."""

    def __init__(self, num_vehicles: int) -> None:
        self._boxes: list[list[Packet]] = [[] for _ in range(num_vehicles)]

    def put(self, packets: list[Packet]) -> None:
        """Add delivered packets to their receivers' inboxes."""
        for p in packets:
            self._boxes[p.receiver].append(p)

    def drain(self, vehicle: int) -> list[Packet]:
        """The packets vehicle ``vehicle`` received since the last drain (its inbox is emptied); ValueError
        for an index that is not a vehicle's."""
        v = vehicle_index("vehicle", vehicle, len(self._boxes))
        out, self._boxes[v] = self._boxes[v], []
        return out

    def clear(self) -> None:
        """Empty every inbox."""
        for box in self._boxes:
            box.clear()

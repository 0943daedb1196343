"""A recorded bag served on a Foxglove WebSocket at its own pace (``qrsim play``): the channels, schemas
and serialised messages a live run's ``foxglove_bridge`` serves, so a recorded run is watched the same way.

Every topic of the bag (but those ``exclude`` matches) is one channel: its type, its ``ros2msg``
definition as the bag stores it (an MCAP bag's schema; the installed ``.msg`` files for a bag without
definitions) and ``cdr``. Messages go out in log-time order, raw, with their log time; the app's clock
follows the bag's log time (the simulated time for a bag recorded by ``qrsim launch --record``). The
pace: ``rate`` times the bag's (0: as fast as it goes). No rclpy here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qrsim_ros.bag.foxglove_endpoint import FoxgloveEndpoint
from qrsim_ros.bag.topics import ensure_type, left_out, message_definition


class PlayError(Exception):
    """A bag that cannot be played: one line naming it."""


@dataclass
class PlayStats:
    """One pass over the bag: messages sent, their log-time span [ns] (first, last), the wall time [s]."""

    messages: int = 0
    span_ns: tuple[int, int] | None = None
    wall_s: float = 0.0

    @property
    def bag_s(self) -> float:
        """The bag's time the pass covered [s]."""
        return 0.0 if self.span_ns is None else (self.span_ns[1] - self.span_ns[0]) * 1e-9


def _definition(conn: Any, store: Any) -> str | None:
    """The connection's ros2msg definition: the bag's own, else the installed type's (None: unknown)."""
    msgdef = getattr(conn, "msgdef", None)
    if msgdef is not None and msgdef.data and getattr(msgdef.format, "name", "") == "MSG":
        return str(msgdef.data)
    if ensure_type(store, conn.msgtype):
        return message_definition(store, conn.msgtype)
    return None


class BagPlayer:
    """The bag at ``path`` (a rosbag2 directory or a file in one), opened; ``play`` serves it."""

    def __init__(self, path: str | Path, exclude: re.Pattern[str] | None = None) -> None:
        from rosbags.rosbag2 import Reader

        from qrsim_ros.bag.types import private_typestore

        bag = Path(path)
        if bag.is_file():
            bag = bag.parent
        if not (bag / "metadata.yaml").is_file():
            raise PlayError(f"{path}: not a rosbag2 bag (no metadata.yaml)")
        try:
            self._reader = Reader(bag)
            self._reader.open()
        except Exception as exc:  # rosbags raises several unrelated types
            raise PlayError(f"{path}: cannot read the bag: {' '.join(str(exc).split())}") from None
        store = private_typestore()
        self.path = bag
        self.connections = []
        self.definitions: dict[str, tuple[str, str]] = {}  # topic -> (type, definition)
        self.unknown: list[str] = []
        for conn in self._reader.connections:
            if left_out(conn.topic, exclude) or conn.topic in self.definitions:
                continue
            definition = _definition(conn, store)
            if definition is None:
                self.unknown.append(f"{conn.topic} ({conn.msgtype})")
                continue
            self.definitions[conn.topic] = (conn.msgtype, definition)
            self.connections.append(conn)

    def close(self) -> None:
        self._reader.close()

    def advertise(self, endpoint: FoxgloveEndpoint) -> None:
        """A channel on ``endpoint`` for each of the bag's topics not advertised yet."""
        for topic, (msgtype, definition) in self.definitions.items():
            if topic not in endpoint.channels:
                endpoint.add_channel(topic, msgtype, definition)

    def messages(self) -> Iterator[tuple[str, int, bytes]]:
        """(topic, log time [ns], raw CDR) in log-time order."""
        for conn, t_ns, raw in self._reader.messages(connections=self.connections):
            yield conn.topic, int(t_ns), bytes(raw)

    def play(self, endpoint: FoxgloveEndpoint, rate: float, stop: Callable[[], bool],
             sleep: Callable[[float], None] = time.sleep) -> PlayStats:
        """Advertise the bag's topics on ``endpoint`` and send its messages, ``rate`` times the bag's pace
        (0: no pacing), until the bag ends or ``stop()`` is true."""
        self.advertise(endpoint)
        stats = PlayStats()
        t_wall0 = time.monotonic()
        first_ns: int | None = None
        for topic, t_ns, raw in self.messages():
            if first_ns is None:
                first_ns = t_ns
            if rate > 0:
                due = t_wall0 + (t_ns - first_ns) * 1e-9 / rate
                while (ahead := due - time.monotonic()) > 0 and not stop():
                    sleep(min(ahead, 0.1))  # pacing to the bag's clock, looking at stop() at least at 10 Hz
            if stop():
                break
            endpoint.time(t_ns)
            endpoint.log(topic, raw, t_ns)
            stats.messages += 1
            stats.span_ns = (first_ns, t_ns)
        stats.wall_s = time.monotonic() - t_wall0
        return stats

"""A Foxglove WebSocket endpoint serving ROS 2 topics as foxglove_bridge serves them (package
``foxglove-sdk``): shared by the ``foxglove_bridge`` node (a live graph) and ``qrsim play`` (a bag).

- A channel per topic: the topic's type as the schema name, its ``ros2msg`` definition (the text rosbag2
  writes into MCAP: ``topics.message_definition``) and the ``cdr`` message encoding; messages are logged as
  serialised, never deserialised.
- Time: the server has the Time capability; ``time(t_ns)`` broadcasts the data's time at most every
  ``TIME_PERIOD_NS`` of it (and at every jump back), because the server queues time messages with its
  control messages, which disconnect a client whose queue is full.
- A slow client: at most ``message_backlog`` messages are queued per client, the oldest dropped beyond
  that; the SDK's warnings go to ``log`` and are counted (``drop_warnings``).
No rclpy here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

#: Data time between two time broadcasts [ns].
TIME_PERIOD_NS = 100_000_000


class EndpointError(Exception):
    """The server cannot be started (address in use, bad address): one line."""


class FoxgloveEndpoint:
    """A started Foxglove WebSocket server on ``host:port`` (port 0: any free one; ``port`` is the bound
    one). ``info`` and ``warning`` take one line of text each (the node's logger, or stderr)."""

    def __init__(self, host: str, port: int, message_backlog: int, info: Callable[[str], None],
                 warning: Callable[[str], None], name: str = "qrsim_ros") -> None:
        import foxglove
        from foxglove.websocket import Capability

        self._foxglove = foxglove
        self.sdk_log = SdkLog(info, warning)
        sdk_logger = logging.getLogger("foxglove")
        sdk_logger.addHandler(self.sdk_log)
        sdk_logger.propagate = False
        foxglove.set_log_level("INFO")  # before the server starts, or the SDK logs nothing
        self.context = foxglove.Context()
        try:
            self.server = foxglove.start_server(name=name, host=host, port=port,
                                                capabilities=[Capability.Time], context=self.context,
                                                message_backlog_size=message_backlog)
        except Exception as exc:  # the SDK raises its own error types (address in use, bad address)
            raise EndpointError(f"cannot serve on {host}:{port}: {exc}") from None
        self.host, self.port = host, int(self.server.port)
        self.channels: dict[str, Any] = {}
        self.forwarded = 0
        self._time_sent_ns = -1

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def add_channel(self, topic: str, msgtype: str, definition: str) -> Any:
        """Advertise ``topic`` of ROS 2 type ``msgtype`` (``pkg/msg/Name``), ros2msg ``definition``."""
        schema = self._foxglove.Schema(name=msgtype, encoding="ros2msg", data=definition.encode("utf-8"))
        channel = self._foxglove.Channel(topic, schema=schema, message_encoding="cdr", context=self.context)
        self.channels[topic] = channel
        return channel

    def log(self, topic: str, data: bytes, log_time_ns: int) -> None:
        """Send one serialised message of ``topic`` to the clients that subscribe to it."""
        self.channels[topic].log(data, log_time=log_time_ns)
        self.forwarded += 1

    def watched(self) -> bool:
        """Some client subscribes to some channel."""
        return any(channel.has_sinks() for channel in self.channels.values())

    def time(self, t_ns: int) -> None:
        """The data's time is ``t_ns``: broadcast it if ``TIME_PERIOD_NS`` passed since the last broadcast."""
        if self._time_sent_ns < 0 or not 0 <= t_ns - self._time_sent_ns < TIME_PERIOD_NS:
            self._time_sent_ns = t_ns
            self.server.broadcast_time(t_ns)

    def summary(self) -> str:
        return (f"forwarded {self.forwarded} messages on {len(self.channels)} channels; "
                f"{self.sdk_log.drop_warnings} warnings of messages dropped for slow clients")

    def stop(self) -> None:
        """Stop the server: the clients see the socket close."""
        self.server.stop()
        logging.getLogger("foxglove").removeHandler(self.sdk_log)


class SdkLog(logging.Handler):
    """The SDK's log records (its Rust core logs through Python's ``logging``, logger ``foxglove...``),
    counting the warnings of messages dropped for a slow client."""

    def __init__(self, info: Callable[[str], None], warning: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self._info, self._warning = info, warning
        self.drop_warnings = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = f"{record.name}: {record.getMessage()}"
        if "full" in text or "dropp" in text:
            self.drop_warnings += 1
        (self._warning if record.levelno >= logging.WARNING else self._info)(text)

"""The ``foxglove_bridge`` node: the running graph on a Foxglove WebSocket, for Foxglove or Lichtblick with
no ROS install on the viewer's side (the Foxglove SDK's server, package ``foxglove-sdk``).

Started by ``qrsim launch ... --foxglove [PORT]`` and the launch files' ``foxglove:=true``, or alone:
``foxglove_bridge --ros-args -p port:=8765 -p use_sim_time:=true``; then open ``ws://localhost:8765``.

- Channels: every topic of the graph, discovered as the recorder discovers them (every
  ``discovery_period_s`` of wall time; not the ones matching ``exclude``, not hidden ones), is advertised
  as one channel the way foxglove_bridge advertises a ROS 2 topic: the topic's type as the schema name,
  its ``ros2msg`` definition (the installed ``.msg`` file, then each type it uses after a line of 80 ``=``
  and ``MSG: pkg/Name``: ``bag.topics.message_definition``, as rosbag2 writes MCAP schemas) and the
  ``cdr`` message encoding. A topic whose type is not installed here is not advertised (one warning).
- Messages: passed through as received (raw CDR), never deserialised. A topic is subscribed only while
  some client subscribes to its channel (looked at every ``HOUSEKEEPING_S`` of wall time), so a run with
  no client pays for the discovery alone. Subscriptions take the QoS every publisher can match (reliable
  and transient local where all publishers offer it, so latched topics such as /tf_static arrive), history
  ``queue_depth``. A message's log time is the node's clock: the simulated time with ``use_sim_time``.
- Time: the server declares the Time capability and broadcasts the simulated time from /clock, at most
  every ``bag.foxglove_endpoint.TIME_PERIOD_NS`` of it, so the app's clock follows the simulation. (The
  server queues time messages as control messages, which disconnect a client when its queue is full: one
  per 20 ms tick filled a 1024 queue in 20 s of a stalled client.)
- A slow client: the server queues at most ``message_backlog`` messages per client and drops the oldest
  beyond that (the graph never waits for a client); the SDK logs the drops on the node's stderr
  (``outbox for client ... full``, then a count of the messages dropped since its last warning).

Parameters: ``port`` (0: any free port; the port bound is logged), ``address`` (``127.0.0.1``; ``0.0.0.0``
to serve other machines), ``exclude``, ``queue_depth``, ``message_backlog``, ``discovery_period_s``.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from typing import Any

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from qrsim_ros.bag.foxglove_endpoint import EndpointError, FoxgloveEndpoint
from qrsim_ros.bag.topics import (
    bag_qos,
    clock_ns,
    ensure_type,
    left_out,
    message_definition,
    subscription_policy,
)
from qrsim_ros.bag.types import private_typestore
from qrsim_ros.core.common.limits import FOXGLOVE_PORT
from qrsim_ros.ros.message_types import message_class
from qrsim_ros.ros.node import ParameterError, run_node
from qrsim_ros.ros.parameters import Param, ParamTable, declare_parameters

#: Wall seconds between two looks at the clients' subscriptions [s].
HOUSEKEEPING_S = 0.1
CLOCK_TOPIC = "/clock"
#: Not advertised by default: ROS's parameter events and the lockstep progress reports (one per node per
#: tick). The fleet topics are advertised: the plot panels can read a whole fleet from one message.
DEFAULT_EXCLUDE = "^/(parameter_events|sim/tick_progress)$"

#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "foxglove_bridge",
    Param("port", FOXGLOVE_PORT, "TCP port of the WebSocket server (0: any free port, logged)",
          lo=0, hi=65535),
    Param("address", "127.0.0.1", "address the server binds (0.0.0.0: every interface, other machines too)"),
    Param("exclude", DEFAULT_EXCLUDE, "regular expression of topics not to advertise (empty: none)"),
    Param("queue_depth", 10, "history depth of each subscription (messages held while busy)",
          lo=1, hi=100_000),
    Param("message_backlog", 1024, "messages queued per client before the oldest are dropped",
          lo=1, hi=1_000_000),
    Param("discovery_period_s", 0.5, "wall seconds between two looks at the graph for new topics [s]",
          lo=0.05, hi=60.0),
)


class FoxgloveBridgeNode(Node):
    """Serves the graph's topics on a Foxglove WebSocket (module docstring)."""

    NODE_NAME = "foxglove_bridge"

    def __init__(self) -> None:
        super().__init__(self.NODE_NAME)
        p = self.params = declare_parameters(self, PARAMETERS)
        try:
            self._exclude = re.compile(p.exclude) if p.exclude else None
        except re.error as exc:
            raise ParameterError(f"parameter 'exclude'={p.exclude!r} is not a regular expression: "
                                 f"{exc}") from None
        self._store = private_typestore()
        log = self.get_logger()
        try:
            self.endpoint = FoxgloveEndpoint(p.address, p.port, p.message_backlog, log.info, log.warning)
        except EndpointError as exc:
            raise ParameterError(f"parameters 'address'={p.address!r}, 'port'={p.port}: {exc}") from None
        self._channels = self.endpoint.channels
        self._types: dict[str, str] = {}
        self._subs: dict[str, Any] = {}
        self._ignored: set[str] = set()
        self._next_discovery = 0.0
        # /clock is always read: the server broadcasts the simulated time whether or not it is watched
        self._discover()
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._timer = self.create_timer(HOUSEKEEPING_S, self._housekeeping, clock=steady)
        self.get_logger().info(f"Foxglove WebSocket server on {self.endpoint.url} "
                               "(open it in Foxglove or Lichtblick)")

    # --- discovery ------------------------------------------------------------------------------------

    def _discover(self) -> None:
        """Advertise a channel for each new topic that has a publisher and a type installed here."""
        for name, types in self.get_topic_names_and_types():
            if name in self._channels or name in self._ignored:
                continue
            if left_out(name, self._exclude):
                self._ignored.add(name)
                continue
            if len(types) != 1 or not self.count_publishers(name):
                continue  # several types: not advertised until one is left; no publisher: nothing yet
            msgtype = types[0]
            if message_class(msgtype) is None or not ensure_type(self._store, msgtype):
                self.get_logger().warning(f"not advertising {name}: message type {msgtype} is unknown here")
                self._ignored.add(name)
                continue
            self.endpoint.add_channel(name, msgtype, message_definition(self._store, msgtype))
            self._types[name] = msgtype
        if CLOCK_TOPIC in self._channels and CLOCK_TOPIC not in self._subs:
            self._subscribe(CLOCK_TOPIC)

    def _housekeeping(self) -> None:
        now = time.monotonic()
        if now >= self._next_discovery:
            self._next_discovery = now + self.params.discovery_period_s
            self._discover()
        for name, channel in self._channels.items():
            watched = channel.has_sinks()
            if watched and name not in self._subs:
                self._subscribe(name)
            elif not watched and name in self._subs and name != CLOCK_TOPIC:
                self.destroy_subscription(self._subs.pop(name))

    def _subscribe(self, name: str) -> None:
        infos = self.get_publishers_info_by_topic(name)
        reliable, transient_local = subscription_policy([bag_qos(info.qos_profile) for info in infos])
        qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=self.params.queue_depth,
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if transient_local else DurabilityPolicy.VOLATILE)
        callback = self._on_clock if name == CLOCK_TOPIC else self._forward(name)
        self._subs[name] = self.create_subscription(message_class(self._types[name]), name, callback, qos,
                                                    raw=True)

    # --- messages -------------------------------------------------------------------------------------

    def _forward(self, name: str) -> Callable[[bytes], None]:
        now, log = self.get_clock().now, self.endpoint.log

        def on_message(data: bytes) -> None:
            log(name, data, now().nanoseconds)

        return on_message

    def _on_clock(self, data: bytes) -> None:
        t_ns = clock_ns(data)
        if self._channels[CLOCK_TOPIC].has_sinks():
            self.endpoint.log(CLOCK_TOPIC, data, t_ns)
        self.endpoint.time(t_ns)

    def close_outputs(self) -> None:
        """Stop the server (run_node calls it once the spin ended): the clients see the socket close."""
        self.get_logger().info(self.endpoint.summary())
        self.endpoint.stop()


def main(argv: list[str] | None = None) -> int:
    return run_node(FoxgloveBridgeNode, argv, events_executor=True)


if __name__ == "__main__":
    sys.exit(main())

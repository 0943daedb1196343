"""Subscriptions read on demand: the latest sample of each, taken when the reader needs it.

A node that reads a stream only now and then (example_autopilot asks its policy at the 5 Hz task steps,
but IMU and altimeter come at 50 Hz per vehicle, each range beam at 10 Hz) would pay the executor's
cost (~50 us in rclpy) for every message if it subscribed the usual way: at 50 vehicles about 10,000
callbacks per simulated second whose values are overwritten before they are read. ``LatestSamples``
subscribes from a helper node that no executor spins, with a queue of one (``QOS_LATEST``); ``take()``
takes what is queued and hands the latest of each subscription to its store, when asked.

The helper node (``<node>_latest``) takes no process-wide ROS arguments (``-r __node:=...`` would rename
it to its owner's name): its topics are the owner's resolved names (``Node.resolve_topic_name``, so
remappings of the owner apply) and it sits in the owner's namespace. An ``accept`` filter sees each
sample's MessageInfo, as the owner's own subscriptions' run isolation does (``run_identity``); with a
queue of one, another run's sample can displace this run's latest until the next one arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.node import Node

from qrsim_ros.ros.qos import QOS_LATEST

#: The helper node's name is its owner's with this suffix (a launcher waiting for the owner's
#: subscriptions looks at both).
HELPER_NODE_SUFFIX = "_latest"


def helper_node_name(owner_name: str) -> str:
    """The name of ``owner_name``'s helper node."""
    return f"{owner_name}{HELPER_NODE_SUFFIX}"


class LatestSamples:
    """Latest-sample subscriptions of ``owner``'s topics (module docstring)."""

    def __init__(self, owner: Node, accept: Callable[[Any, str], bool] | None = None) -> None:
        """``accept(info, topic)``: whether a sample (its MessageInfo) counts (another run's are skipped
        with ``RunMemberNode.from_this_run``); None: all."""
        self.owner = owner
        self.accept = accept
        self.node = Node(helper_node_name(owner.get_name()), namespace=owner.get_namespace(),
                         context=owner.context, use_global_arguments=False, enable_rosout=False,
                         start_parameter_services=False)
        self._subscriptions: list[tuple[Any, str, Callable[[Any], None]]] = []

    def add(self, msg_type: Any, topic: str, store: Callable[[Any], None], raw: bool = False) -> None:
        """Subscribe to ``topic`` (resolved as ``owner`` would); ``store(msg)`` gets its latest sample at
        each ``take()`` that finds one (its serialized bytes with ``raw``)."""
        name = self.owner.resolve_topic_name(topic)
        sub = self.node.create_subscription(msg_type, name, _never_called, QOS_LATEST, raw=raw)
        self._subscriptions.append((sub, topic, store))

    def take(self) -> int:
        """Take every queued sample; store the latest accepted one of each subscription. Returns how many
        were stored."""
        stored = 0
        for sub, topic, store in self._subscriptions:
            latest = None
            with sub.handle:
                while (taken := sub.handle.take_message(sub.msg_type, sub.raw)) is not None:
                    if self.accept is None or self.accept(taken[1], topic):
                        latest = taken[0]
            if latest is not None:
                store(latest)
                stored += 1
        return stored

    def destroy(self) -> None:
        """Destroy the helper node (and its subscriptions)."""
        self._subscriptions.clear()
        self.node.destroy_node()


def _never_called(_msg: Any) -> None:  # pragma: no cover - the helper node is never spun
    raise AssertionError("LatestSamples' helper node is not spun")

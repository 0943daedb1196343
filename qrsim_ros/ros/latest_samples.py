"""Subscriptions read on demand: the latest sample of each (or every one), taken when the reader needs it.

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

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from rclpy.node import Node

from qrsim_ros.ros.qos import QOS_INBOX, QOS_LATEST

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
        self._subscriptions: list[tuple[Any, str, Callable[[Any], None], bool]] = []
        self._by_key: dict[Hashable, tuple[Any, str, Callable[[Any], None], bool]] = {}

    def add(self, msg_type: Any, topic: str, store: Callable[[Any], None], raw: bool = False,
            key: Hashable | None = None, every: bool = False) -> None:
        """Subscribe to ``topic`` (resolved as ``owner`` would); ``store(msg)`` gets its latest sample at
        each ``take()`` that finds one (its serialized bytes with ``raw``); with ``every``, each sample
        queued since the last ``take()``, in order (the reader keeps up to 1,000: ``QOS_INBOX``). ``key``: a
        name for ``take(keys)`` to take this one alone."""
        name = self.owner.resolve_topic_name(topic)
        qos = QOS_INBOX if every else QOS_LATEST
        sub = self.node.create_subscription(msg_type, name, _never_called, qos, raw=raw)
        self._subscriptions.append((sub, topic, store, every))
        if key is not None:
            self._by_key[key] = self._subscriptions[-1]

    def take(self, keys: Iterable[Hashable] | None = None) -> int:
        """Take every queued sample (only those of the subscriptions added with ``keys``, when given);
        store the latest accepted one of each subscription. Returns how many were stored."""
        chosen = self._subscriptions if keys is None else [self._by_key[k] for k in keys if k in self._by_key]
        stored = 0
        for sub, topic, store, every in chosen:
            latest = None
            with sub.handle:
                while (taken := sub.handle.take_message(sub.msg_type, sub.raw)) is not None:
                    if self.accept is None or self.accept(taken[1], topic):
                        if every:
                            store(taken[0])
                            stored += 1
                        else:
                            latest = taken[0]
            if latest is not None:
                store(latest)
                stored += 1
        return stored

    def destroy(self) -> None:
        """Destroy the helper node (and its subscriptions)."""
        self._subscriptions.clear()
        self._by_key.clear()
        self.node.destroy_node()


def _never_called(_msg: Any) -> None:  # pragma: no cover - the helper node is never spun
    raise AssertionError("LatestSamples' helper node is not spun")

"""``qrsim_ros.ros.latest_samples.LatestSamples`` over real DDS: the latest sample of a topic, taken on
demand from an unspun helper node, with the owner's remappings applied."""

from __future__ import annotations

from typing import Any

import pytest
from rosenv import spin_until

pytestmark = pytest.mark.graph

MESSAGES = 50


@pytest.mark.parametrize("raw", [False, True])
def test_take_stores_only_the_latest_sample_of_the_remapped_topic(rclpy_context: Any, raw: bool) -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.serialization import deserialize_message
    from std_msgs.msg import Int32

    from qrsim_ros.ros.latest_samples import LatestSamples
    from qrsim_ros.ros.qos import QOS_RELIABLE

    # the owner's own remapping: its "uav1/value" is /fleet/uav1/counter
    owner = rclpy.create_node("owner", namespace="/fleet", context=rclpy_context,
                              cli_args=["--ros-args", "-r", "uav1/value:=uav1/counter"])
    talker = rclpy.create_node("talker", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    for node in (owner, talker):
        executor.add_node(node)
    latest = LatestSamples(owner)
    try:
        assert (latest.node.get_name(), latest.node.get_namespace()) == ("owner_latest", "/fleet")
        stored: list[int] = []
        latest.add(Int32, "uav1/value",
                   lambda m: stored.append(deserialize_message(m, Int32).data if raw else m.data), raw=raw)
        seen: list[int] = []  # an ordinary subscription of the owner's: when every message is out
        owner.create_subscription(Int32, "uav1/value", lambda m: seen.append(m.data), QOS_RELIABLE)
        pub = talker.create_publisher(Int32, "/fleet/uav1/counter", QOS_RELIABLE)
        assert spin_until(executor, lambda: pub.get_subscription_count() == 2, 20.0, 0.05)
        assert latest.take() == 0 and stored == []  # nothing published yet

        for value in range(1, MESSAGES + 1):
            pub.publish(Int32(data=value))
        assert spin_until(executor, lambda: seen[-1:] == [MESSAGES], 20.0, 0.05), seen[-5:]
        takes = 0

        def took_the_last() -> bool:
            nonlocal takes
            takes += latest.take()
            return stored[-1:] == [MESSAGES]

        assert spin_until(executor, took_the_last, 20.0, 0.05), stored
        # one sample per take at most (a queue of one), the intermediate ones dropped, in order
        assert len(stored) == takes < MESSAGES and stored == sorted(stored)
        assert latest.take() == 0 and stored[-1] == MESSAGES  # taken: nothing new

        # a filter on the samples' MessageInfo (run isolation): what it refuses is never stored
        infos: list[tuple[Any, str]] = []
        latest.accept = lambda info, topic: infos.append((info, topic)) is not None
        pub.publish(Int32(data=MESSAGES + 1))
        assert spin_until(executor, lambda: seen[-1:] == [MESSAGES + 1], 20.0, 0.05)
        assert spin_until(executor, lambda: latest.take() == 0 and bool(infos), 20.0, 0.05)
        assert stored[-1] == MESSAGES and infos[-1][1] == "uav1/value"
        assert bytes(infos[-1][0]["publisher_gid"]["data"])  # the publisher (what run isolation reads)
    finally:
        latest.destroy()
        executor.shutdown(timeout_sec=2.0)
        for node in (owner, talker):
            node.destroy_node()


def test_every_sample_in_order_and_a_take_of_some_keys(rclpy_context: Any) -> None:
    """``every``: each sample queued since the last take, in order; ``take(keys)`` takes only the
    subscriptions added with those keys (the others keep theirs for a later take)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Int32

    from qrsim_ros.ros.latest_samples import LatestSamples
    from qrsim_ros.ros.qos import QOS_RELIABLE

    owner = rclpy.create_node("inbox_owner", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(owner)
    latest = LatestSamples(owner)
    try:
        inbox: list[int] = []
        a: list[int] = []
        b: list[int] = []
        latest.add(Int32, "inbox", lambda m: inbox.append(m.data), every=True)
        latest.add(Int32, "a", lambda m: a.append(m.data), key=("a", 0))
        latest.add(Int32, "b", lambda m: b.append(m.data), key=("b", 0))
        seen: list[int] = []
        owner.create_subscription(Int32, "inbox", lambda m: seen.append(m.data), QOS_RELIABLE)
        pubs = {t: owner.create_publisher(Int32, t, QOS_RELIABLE) for t in ("inbox", "a", "b")}
        assert spin_until(executor, lambda: pubs["inbox"].get_subscription_count() == 2
                          and all(p.get_subscription_count() == 1 for t, p in pubs.items() if t != "inbox"),
                          20.0, 0.05)
        for value in range(1, MESSAGES + 1):
            pubs["inbox"].publish(Int32(data=value))
        pubs["a"].publish(Int32(data=7))
        pubs["b"].publish(Int32(data=8))
        assert spin_until(executor, lambda: seen[-1:] == [MESSAGES], 20.0, 0.05)

        assert spin_until(executor, lambda: latest.take([("a", 0)]) > 0 or a == [7], 20.0, 0.05)
        assert a == [7] and b == [] and inbox == []  # only the key asked for
        assert spin_until(executor, lambda: latest.take() >= 0 and inbox[-1:] == [MESSAGES] and b == [8],
                          20.0, 0.05), (inbox[-3:], b)
        assert inbox == list(range(1, MESSAGES + 1))  # every one, in order, none twice
        assert latest.take([("no such key", 1)]) == 0
    finally:
        latest.destroy()
        executor.shutdown(timeout_sec=2.0)
        owner.destroy_node()

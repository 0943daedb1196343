"""QoS profiles of the simulator's topics (reliable streams, latched data, /clock, ground truth)."""

from __future__ import annotations

from typing import Any

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSCompatibility,
    QoSProfile,
    ReliabilityPolicy,
    qos_check_compatible,
)

#: Sensor streams and commands: reliable so lockstep never loses an input. The writer keeps 100
#: samples for retransmission: a reader that stalls for a moment (the recorder while it closes a
#: split file) still gets every tick.
QOS_RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


#: Latched data (robot_description, terrain grid, /tf_static).
QOS_LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)


#: A reader of a latched stream that must not drop a sample: the latest one on joining (a late match
#: loses nothing that matters), then every one, queued as QOS_RELIABLE (example_autopilot's
#: /referee/status: it paces the lockstep window on the task steps it answered).
QOS_LATCHED_STREAM = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)


#: A reader that wants only the latest sample of a stream, taken when it is needed (``LatestSamples``):
#: the reader's queue keeps one.
QOS_LATEST = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
#: A reader that wants every sample of a stream, taken when it is needed (``LatestSamples``, ``every``):
#: the reader's queue keeps the latest 1,000 until then (the radio's rx: 20 task steps of every other
#: vehicle's broadcast at 50 vehicles). Not KEEP_ALL: a reliable writer would block on a reader whose
#: queue is full, so a reader that stopped taking could stall the graph.
QOS_INBOX = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


#: /clock: reliable, with a writer history for a recorder that must not miss a tick (time sources
#: subscribe with depth 1 and take the latest).
QOS_CLOCK = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


#: Reader queue of the ground-truth and status subscriptions [ticks]. Lockstep waits only for the wind
#: (and controlled vehicles' commands), so a consumer that is slower than that loop (the referee at
#: real_time_factor 0 on a busy machine) falls behind; DDS acknowledges the samples at once, and this
#: queue keeps them until the node catches up instead of dropping ticks: 60 s of simulated time.
GROUND_TRUTH_QUEUE = 3000


QOS_GROUND_TRUTH = QoSProfile(depth=GROUND_TRUTH_QUEUE, reliability=ReliabilityPolicy.RELIABLE,
                              history=HistoryPolicy.KEEP_LAST)

#: A consumer's progress: reliable (the last tick's report must arrive), a few deep (the latest counts),
#: transient local (latched per consumer): a report sent before the consumer's writer has discovered
#: vehicle_dynamics' reader is delivered when it does. Volatile, such reports were lost, and a consumer
#: that had handled every tick it was sent never reported again: lockstep waited on it for ever (what
#: test_a_progress_report_sent_before_vehicle_dynamics_subscribed_counts shows). Latched, they can also
#: be read again by a new subscription (vehicle_dynamics' ``_resubscribe_progress``).
QOS_TICK_PROGRESS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                               history=HistoryPolicy.KEEP_LAST, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def unmatched_subscriptions(node: Any, publisher: Any) -> int:
    """How many subscriptions the graph lists for ``publisher``'s topic, of its type and with a QoS it can
    serve, that the publisher has not matched yet (never negative). Discovery is asymmetric: the graph
    (and a reader) can know of the match before this writer does, and a volatile writer sends nothing to
    a reader it has not matched."""
    cls = publisher.msg_type
    type_name = f"{cls.__module__.split('.')[0]}/msg/{cls.__name__}"
    offered = publisher.qos_profile
    listed = sum(info.topic_type == type_name
                 and qos_check_compatible(offered, info.qos_profile)[0] != QoSCompatibility.ERROR
                 for info in node.get_subscriptions_info_by_topic(publisher.topic_name))
    return max(0, listed - publisher.get_subscription_count())

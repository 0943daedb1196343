"""Run identity: which simulator graph (run) a message belongs to, so that two graphs sharing a ROS domain
never mix (docs/ARCHITECTURE.md "Run identity and isolation").

Every launched node gets the run's ``run_id`` parameter (``launch_plan``: a random 64-bit hex string
per launch, or given). A node of a run (``run_id`` not empty):

- announces itself once on ``/sim/run_members`` (qrsim_ros/RunMember, transient local: late joiners get
  it too);
- learns, from every announcement's ``MessageInfo`` publisher GID, which DDS participant (the first 12
  bytes of a Fast DDS GID: one per process) belongs to which run;
- ignores every message, on any topic it subscribes (``/clock`` of rclpy's time source included), whose
  publisher's participant announced another run, and counts it (``foreign_run_messages`` on
  /diagnostics, status ``<node>/run``; the first one of a topic is logged, then at most every 10 s);
- ignores ``/sim/vehicle_status`` and ``/referee/status`` whose ``run_id`` field names another run
  (``foreign_run``, counted the same way).

Messages of a participant that announced nothing (a user's own autopilot, a node started by hand with
an empty ``run_id``) are accepted. A node with an empty ``run_id`` announces nothing and filters nothing
(the behaviour before run identities).

Limits: a message of another run that arrives before that run's announcement (a window of one DDS
discovery, milliseconds) is accepted; anyone can announce any run_id (this keeps graphs apart, it is no
security boundary); the participant is per process, so nodes of two runs in one process cannot be told
apart (``qrsim launch --single-process`` runs one run per process).

rclpy workaround: Kilted's EventsExecutor calls a callback that wants the ``MessageInfo`` with one
argument, the ``(msg, info)`` tuple, while the SingleThreadedExecutor passes two; the filtering callback
takes either (``_filtered``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.subscription import Subscription

#: Where every simulator node of a run announces itself.
RUN_MEMBERS_TOPIC = "/sim/run_members"
#: Bytes of a GID that name its DDS participant (Fast DDS: the GUID prefix).
PARTICIPANT_BYTES = 12
#: The counters of a node's run isolation (on /diagnostics, status ``<node>/run``).
RUN_COUNTERS = ("foreign_run_messages",)
#: Least wall time between two warnings about the same topic [s].
WARN_PERIOD_S = 10.0

#: The announcement: sent once, kept for late joiners.
QOS_ANNOUNCE = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
#: The announcements of every node (one sample per announcing writer).
QOS_MEMBERS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)


def participant_of(gid: Any) -> bytes:
    """The DDS participant of a GID (MessageInfo's ``publisher_gid['data']`` or a graph endpoint's
    ``endpoint_gid``)."""
    return bytes(gid[:PARTICIPANT_BYTES])


def _message_and_info(args: tuple[Any, ...]) -> tuple[Any, Any]:
    """(msg, info) from a callback's arguments: ``(msg, info)`` (SingleThreadedExecutor) or
    ``((msg, info),)`` (Kilted's EventsExecutor)."""
    return (args[0], args[1]) if len(args) == 2 else (args[0][0], args[0][1])


def _want_info(sub: Subscription) -> Subscription:
    """Make the executor hand ``sub``'s callback the MessageInfo (its ``*args`` signature reads as
    message-only to rclpy)."""
    sub._callback_type = Subscription.CallbackType.WithMessageInfo
    return sub


class RunIsolation:
    """A node's run: its announcement, the runs of the participants seen, the counting of foreign
    messages (see the module docstring)."""

    def __init__(self, node: Node, run_id: str, counters: Any) -> None:
        from qrsim_ros.msg import RunMember

        self.node = node
        self.run_id = run_id
        #: participant (GID prefix) -> the run it announced
        self.runs: dict[bytes, str] = {}
        #: participant -> the node names it announced
        self.members: dict[bytes, set[str]] = {}
        self.ignored: dict[str, int] = {}  # per topic
        self._warned_at: dict[str, float] = {}
        fqn = node.get_fully_qualified_name()
        self.counters = counters  # a ``node.Counters`` of RUN_COUNTERS
        self._announce = node.create_publisher(RunMember, RUN_MEMBERS_TOPIC, QOS_ANNOUNCE)
        _want_info(Node.create_subscription(node, RunMember, RUN_MEMBERS_TOPIC, self._on_member, QOS_MEMBERS))
        self._announce.publish(RunMember(run_id=run_id, node=fqn))

    def _on_member(self, *args: Any) -> None:
        msg, info = _message_and_info(args)
        gid = (info or {}).get("publisher_gid")
        if not gid:
            return
        key = participant_of(gid["data"])
        self.runs[key] = msg.run_id
        self.members.setdefault(key, set()).add(msg.node)

    def is_foreign(self, info: Any, topic: str) -> bool:
        """Whether a message (its MessageInfo) comes from a participant of another run; counted."""
        gid = info.get("publisher_gid") if info else None
        if not gid:
            return False
        key = participant_of(gid["data"])
        run = self.runs.get(key)
        if run is None or run == self.run_id:
            return False
        self.count(topic, run, ", ".join(sorted(self.members.get(key, ()))))
        return True

    def count(self, topic: str, run: str, who: str = "") -> None:
        """Count one ignored message of ``run`` on ``topic``; warn once per topic, then at most every
        WARN_PERIOD_S."""
        total = self.counters.count("foreign_run_messages")
        self.ignored[topic] = self.ignored.get(topic, 0) + 1
        now = time.monotonic()
        if now - self._warned_at.get(topic, -1e18) >= WARN_PERIOD_S:
            self._warned_at[topic] = now
            self.node.get_logger().warning(
                f"ignoring {topic} of run {run!r}{f' ({who})' if who else ''}: another simulator graph "
                f"shares this ROS domain; this node belongs to run {self.run_id!r} "
                f"(foreign_run_messages: {total}; choose another ROS_DOMAIN_ID)")

    def member_subscriptions(self, topic: str) -> int:
        """Subscriptions of ``topic`` in the graph whose participant announced this run."""
        return sum(1 for e in self.node.get_subscriptions_info_by_topic(topic)
                   if self.runs.get(participant_of(e.endpoint_gid)) == self.run_id)


class RunMemberNode(Node):
    """A Node whose subscriptions ignore (and count) the messages of other runs once ``join_run`` named
    its run (before that, and with an empty run_id, every message is delivered)."""

    run_isolation: RunIsolation | None = None

    @property
    def run_id(self) -> str:
        """The node's run ('' : none)."""
        return self.run_isolation.run_id if self.run_isolation is not None else ""

    def join_run(self, run_id: str, counters_factory: Callable[..., Any]) -> None:
        """Announce membership of ``run_id`` and start ignoring other runs' messages ('' : no run);
        ``counters_factory(name=status_name)`` makes the ``node.Counters`` of RUN_COUNTERS."""
        if run_id:
            counters = counters_factory(name=f"{self.get_fully_qualified_name()}/run")
            self.run_isolation = RunIsolation(self, run_id, counters)

    def foreign_run(self, msg_run_id: str, topic: str) -> bool:
        """Whether a message carrying ``run_id`` (VehicleStatus, TaskStatus) belongs to another run;
        counted and warned like a foreign publisher's."""
        iso = self.run_isolation
        if iso is None or msg_run_id == iso.run_id:
            return False
        iso.count(topic, msg_run_id)
        return True

    def from_this_run(self, info: Any, topic: str) -> bool:
        """Whether a message on ``topic`` (its MessageInfo) is this run's or no run's (a foreign one is
        counted)."""
        iso = self.run_isolation
        return iso is None or not iso.is_foreign(info, topic)

    def create_subscription(self, msg_type: Any, topic: str, callback: Callable[..., Any],  # type: ignore[override]
                            qos_profile: Any, **kwargs: Any) -> Subscription:
        """``Node.create_subscription`` whose callback gets only the messages of this run's (or no run's)
        publishers."""
        deliver = callback

        def _filtered(*args: Any) -> Any:
            msg, info = _message_and_info(args)
            if not self.from_this_run(info, topic):
                return None
            return deliver(msg)

        return _want_info(super().create_subscription(msg_type, topic, _filtered, qos_profile, **kwargs))

"""Input subscriptions a lockstep consumer makes again when one goes deaf.

In lockstep a consumer waits for each input of a tick; vehicle_dynamics re-sends a tick whose answers
are late and the sensor nodes answer it again (docs/NODE_GRAPH.md, "Per tick k"). That repairs a lost
message, not a subscription that receives nothing at all: in a CI run the flight controller waited 285 s
for ``uav1/imu/data`` while the imu node published every re-sent tick (the recorder got all 282 of them)
and its ``uav2/imu/data``, from the same process, arrived. A new subscription (a new DDS reader, matched
afresh, hooked into the executor afresh) is the repair, as vehicle_dynamics already does for the latched
progress reports (``lockstep.LockstepGate.resubscribe_progress``).

``RenewableInputs`` keeps what each subscription was made from and renews the ones named, on a backoff
(``RENEW_AFTER_S``, doubling while the same wait goes on) so that a graph that is only slow (discovery
under load) is not kept from matching by renewals. The flight controller renews its sensor inputs this
way, vehicle_dynamics its lockstep inputs (``cmd/attitude`` and ``wind``), each once a tick has waited
``RENEW_AFTER_S`` since it first went out.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

#: Wall seconds an input may be missing before its subscription is made again; doubled after each
#: renewal while the same wait goes on.
RENEW_AFTER_S = 5.0


@dataclass(frozen=True)
class _Spec:
    msg_type: Any
    topic: str
    callback: Callable[[Any], None]
    qos: Any


class RenewableInputs:
    """A node's input subscriptions by key (e.g. ``("imu", 0)``), each of which can be made again."""

    def __init__(self, node: Any, renew_after_s: float = RENEW_AFTER_S) -> None:
        self._node = node
        self._specs: dict[Hashable, _Spec] = {}
        self._subs: dict[Hashable, Any] = {}
        self.renew_after_s = renew_after_s
        self._next_renewal_s = renew_after_s

    def create(self, key: Hashable, msg_type: Any, topic: str, callback: Callable[[Any], None],
               qos: Any) -> Any:
        """``node.create_subscription(msg_type, topic, callback, qos)``, kept under ``key``."""
        self._specs[key] = _Spec(msg_type, topic, callback, qos)
        self._subs[key] = self._make(key)
        return self._subs[key]

    def __getitem__(self, key: Hashable) -> Any:
        """The current subscription under ``key``."""
        return self._subs[key]

    def _make(self, key: Hashable) -> Any:
        spec = self._specs[key]
        return self._node.create_subscription(spec.msg_type, spec.topic, spec.callback, spec.qos)

    def wait_went_on(self, waited_s: float, missing: Iterable[Hashable]) -> list[str]:
        """Called while a tick waits (``waited_s`` wall seconds so far) for the inputs ``missing``: once
        the wait reaches the next renewal time, make the known ones among them again. Returns, for the
        log, each renewed topic with the number of publishers its old subscription had matched (0: it
        never matched the writer; more: matched, yet nothing arrived) and the publishers' nodes this
        node's graph lists for it: a writer listed but not matched points at QoS or the reader, one not
        listed at discovery (its announcement never reached this participant)."""
        if waited_s < self._next_renewal_s:
            return []
        self._next_renewal_s = 2.0 * waited_s
        renewed = []
        for key in missing:
            old = self._subs.get(key)
            if old is None:
                continue
            topic, matched = old.topic_name, old.get_publisher_count()
            listed = self._listed_publishers(topic)
            self._node.destroy_subscription(old)
            self._subs[key] = self._make(key)
            renewed.append(f"{topic} ({matched} publisher{'s' if matched != 1 else ''} matched; "
                           f"the graph lists {listed})")
        return renewed

    def _listed_publishers(self, topic: str) -> str:
        """The nodes of ``topic``'s publishers as this node's graph (DDS discovery) knows them."""
        names = sorted(f"{i.node_namespace.rstrip('/')}/{i.node_name}"
                       for i in self._node.get_publishers_info_by_topic(topic))
        return ", ".join(names) if names else "no publisher"

    def wait_ended(self) -> None:
        """The wait is over: the next one starts from ``renew_after_s`` again."""
        self._next_renewal_s = self.renew_after_s

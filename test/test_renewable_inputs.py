"""RenewableInputs' schedule: which subscriptions are made again, when, and how the wait's backoff resets.
(The renewal over DDS, a renewed subscription receiving: test_node_control's fake-sensor test.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from qrsim_ros.ros.renewable_inputs import RenewableInputs


@dataclass
class _Subscription:
    topic_name: str
    publishers: int
    destroyed: bool = False

    def get_publisher_count(self) -> int:
        assert not self.destroyed, "read after destroy"
        return self.publishers


@dataclass
class _Node:
    """The calls RenewableInputs makes on a node, recorded; ``listed``: the publishers' nodes its graph
    knows, as (namespace, name)."""

    made: list[_Subscription] = field(default_factory=list)
    publishers: int = 1
    listed: list[tuple[str, str]] = field(default_factory=list)

    def get_publishers_info_by_topic(self, topic: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(node_namespace=ns, node_name=name) for ns, name in self.listed]

    def create_subscription(self, msg_type: Any, topic: str, callback: Any, qos: Any) -> _Subscription:
        sub = _Subscription(topic, self.publishers)
        self.made.append(sub)
        return sub

    def destroy_subscription(self, sub: _Subscription) -> None:
        sub.destroyed = True


def test_missing_inputs_are_renewed_after_the_wait_then_on_a_doubling_backoff() -> None:
    node = _Node(listed=[("/", "imu")])
    inputs = RenewableInputs(node, renew_after_s=5.0)
    inputs.create(("imu", 0), object, "/uav1/imu/data", print, None)
    inputs.create(("fix", 0), object, "/uav1/gps/fix", print, None)
    node.publishers = 0
    assert inputs.wait_went_on(4.9, [("imu", 0)]) == []
    # only the missing input with a subscription here is made again; a key never created is skipped
    assert inputs.wait_went_on(6.0, [("imu", 0), ("status", -1)]) == ["/uav1/imu/data (1 publisher matched; "
                                                                         "the graph lists /imu)"]
    assert [s.topic_name for s in node.made] == ["/uav1/imu/data", "/uav1/gps/fix", "/uav1/imu/data"]
    assert node.made[0].destroyed and not node.made[1].destroyed and not node.made[2].destroyed
    # the same wait goes on: next at twice the wait of the last renewal (12 s)
    assert inputs.wait_went_on(11.0, [("imu", 0)]) == []
    node.listed = []
    assert inputs.wait_went_on(12.5, [("imu", 0)]) == ["/uav1/imu/data (0 publishers matched; "
                                                       "the graph lists no publisher)"]
    assert len(node.made) == 4
    # a new wait starts from renew_after_s again
    inputs.wait_ended()
    node.listed = [("/", "gps"), ("/team", "relay")]
    assert inputs.wait_went_on(5.0, [("fix", 0)]) == ["/uav1/gps/fix (1 publisher matched; "
                                                      "the graph lists /gps, /team/relay)"]
    assert len(node.made) == 5

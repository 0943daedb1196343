"""Publish one AttitudeCommand on cmd/attitude once a subscriber matched; exit when it was acked (the stop
rules of stop_rules.py: a deadline for the whole program, no DDS teardown)."""

import rclpy
from qrsim_ros.msg import AttitudeCommand
from rclpy.duration import Duration
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from stop_rules import finish, start_deadline


def main() -> int:
    watchdog = start_deadline()
    watchdog.step = "starting DDS"
    rclpy.init()
    node = rclpy.create_node("attitude_pub", namespace="/uav1")
    qos = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    matched = []
    pub = node.create_publisher(
        AttitudeCommand, "cmd/attitude", qos,
        event_callbacks=PublisherEventCallbacks(matched=lambda info: matched.append(info.current_count)),
    )
    msg = AttitudeCommand()
    msg.header.frame_id = "uav1/base_link_frd"
    msg.roll, msg.pitch, msg.yaw_rate, msg.throttle, msg.battery_voltage = 0.1, -0.2, 0.3, 0.59004353928, 11.5
    pub.publish(msg)
    deadline = node.get_clock().now() + Duration(seconds=30)
    while not (matched and matched[-1] > 0) and node.get_clock().now() < deadline:
        rclpy.spin_once(node, timeout_sec=0.5)
    ok = bool(matched) and pub.wait_for_all_acked(Duration(seconds=30))
    return 0 if ok else 3


if __name__ == "__main__":
    finish(main())

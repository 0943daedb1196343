"""Print the first AttitudeCommand received on cmd/attitude as JSON, then exit (3 on timeout; the
stop rules of stop_rules.py: a deadline for the whole program, no DDS teardown)."""

import json

import rclpy
from qrsim_ros.msg import AttitudeCommand
from rclpy.duration import Duration
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from stop_rules import finish, start_deadline


def main() -> int:
    watchdog = start_deadline()
    watchdog.step = "starting DDS"
    rclpy.init()
    node = rclpy.create_node("attitude_sub", namespace="/uav1")
    qos = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    got: list[AttitudeCommand] = []
    node.create_subscription(AttitudeCommand, "cmd/attitude", got.append, qos)
    deadline = node.get_clock().now() + Duration(seconds=30)
    while not got and node.get_clock().now() < deadline:
        rclpy.spin_once(node, timeout_sec=0.5)
    if got:
        m = got[0]
        print(json.dumps({
            "frame_id": m.header.frame_id, "roll": m.roll, "pitch": m.pitch, "yaw_rate": m.yaw_rate,
            "throttle": m.throttle, "battery_voltage": m.battery_voltage,
        }))
    return 0 if got else 3


if __name__ == "__main__":
    finish(main())

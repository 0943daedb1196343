"""Publish one AttitudeCommand on cmd/attitude once a subscriber matched; exit when it was acked (the stop
rules of stop_rules.py: a deadline for the whole program, no DDS teardown)."""

from qrsim_ros.msg import AttitudeCommand
from rclpy.duration import Duration
from rclpy.event_handler import PublisherEventCallbacks
from stop_rules import finish, latched_qos, spin_until, start_node


def main() -> int:
    _watchdog, node = start_node("attitude_pub", "/uav1")
    matched = []
    pub = node.create_publisher(
        AttitudeCommand, "cmd/attitude", latched_qos(),
        event_callbacks=PublisherEventCallbacks(matched=lambda info: matched.append(info.current_count)),
    )
    msg = AttitudeCommand()
    msg.header.frame_id = "uav1/base_link_frd"
    msg.roll, msg.pitch, msg.yaw_rate, msg.throttle, msg.battery_voltage = 0.1, -0.2, 0.3, 0.59004353928, 11.5
    pub.publish(msg)
    spin_until(node, lambda: bool(matched) and matched[-1] > 0, 30)
    ok = bool(matched) and pub.wait_for_all_acked(Duration(seconds=30))
    return 0 if ok else 3


if __name__ == "__main__":
    finish(main())

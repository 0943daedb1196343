"""Print the first AttitudeCommand received on cmd/attitude as JSON, then exit (3 on timeout; the
stop rules of stop_rules.py: a deadline for the whole program, no DDS teardown)."""

import json

from qrsim_ros.msg import AttitudeCommand
from stop_rules import finish, latched_qos, spin_until, start_node


def main() -> int:
    _watchdog, node = start_node("attitude_sub", "/uav1")
    got: list[AttitudeCommand] = []
    node.create_subscription(AttitudeCommand, "cmd/attitude", got.append, latched_qos())
    spin_until(node, lambda: bool(got), 30)
    if got:
        m = got[0]
        print(json.dumps({
            "frame_id": m.header.frame_id, "roll": m.roll, "pitch": m.pitch, "yaw_rate": m.yaw_rate,
            "throttle": m.throttle, "battery_voltage": m.battery_voltage,
        }))
    return 0 if got else 3


if __name__ == "__main__":
    finish(main())

"""A node whose constructor rejects a parameter after it created its entities, run by
``qrsim_ros.ros.node.run_node`` as every node executable is: prints run_node's status and whether the
half-built node was destroyed (no publishers, subscriptions or timers left), then exits with that status.
"""

from __future__ import annotations

import sys

from stop_rules import finish, start_deadline


def main() -> None:
    watchdog = start_deadline()
    from rclpy.node import Node
    from std_msgs.msg import String

    from qrsim_ros.ros.node import run_node
    from qrsim_ros.ros.parameters import ParameterError

    built: list[Node] = []

    class RejectingNode(Node):
        def __init__(self) -> None:
            super().__init__("half_built")
            built.append(self)
            self.create_publisher(String, "out", 10)
            self.create_subscription(String, "in", lambda _msg: None, 10)
            self.create_timer(0.1, lambda: None)
            raise ParameterError("parameter 'seed'=-7 outside [-1, 2147483647]")

    status = run_node(RejectingNode, ["half_built_node"], exit_process=False)
    node = built[0]
    left = sum(1 for _ in (*node.publishers, *node.subscriptions, *node.timers))
    print(f"status {status}, entities left {left}", flush=True)
    watchdog.cancel()
    finish(status)


if __name__ == "__main__":
    sys.exit(main())

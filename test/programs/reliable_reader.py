"""A reliable reader of std_msgs/UInt32 on ``acked``: prints ``ready`` once it has matched a writer, then
spins (the test stops it with SIGSTOP/SIGCONT and ends it with SIGKILL; the program's deadline ends it
otherwise)."""

from std_msgs.msg import UInt32
from stop_rules import finish, spin_until, start_node


def main() -> int:
    _watchdog, node = start_node("reliable_reader", "/")
    sub = node.create_subscription(UInt32, "acked", lambda _msg: None, 100)
    spin_until(node, lambda: sub.get_publisher_count() > 0, 30)
    print("ready" if sub.get_publisher_count() > 0 else "no writer", flush=True)
    spin_until(node, lambda: False, 40)
    return 0


if __name__ == "__main__":
    finish(main())

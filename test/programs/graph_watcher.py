"""Watch the live graph of this program's ROS domain: print ``node NAME`` for every node that appears
and ``topic NAME HASH`` for every topic once a publisher (not this program) announces its type hash,
polled every 0.2 s, until SIGINT, which ends it at once (the stop rules of stop_rules.py: no DDS
teardown, which was seen to hang in the test process itself). argv[1]: the program's deadline [s]."""

import signal
import sys
import time

from stop_rules import finish, start_deadline


def main() -> int:
    stop: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: stop.append(signum))
    watchdog = start_deadline(float(sys.argv[1]))
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    watchdog.step = "starting DDS"
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("recording_test_graph_watcher", start_parameter_services=False)
    watchdog.step = "watching"
    nodes: set[str] = set()
    topics: set[str] = set()
    while not stop:
        for name in sorted(set(node.get_node_names()) - nodes):
            nodes.add(name)
            print(f"node {name}", flush=True)
        for topic, _types in node.get_topic_names_and_types():
            if topic in topics:
                continue
            infos = [i for i in node.get_publishers_info_by_topic(topic) if i.node_name != node.get_name()]
            if infos:
                topics.add(topic)
                print(f"topic {topic} {infos[0].topic_type_hash}", flush=True)
        time.sleep(0.2)  # the polling period (the graph has no event for a new publisher's type hash)
    return 0


if __name__ == "__main__":
    finish(main())

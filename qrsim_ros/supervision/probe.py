"""A launcher's or a test's own window on a running graph: an rclpy node in a context of its own.

``qrsim launch`` polls one for its status line (``cli.launch.StatusListener``), scripts/soak.py spins
one in a thread to watch a run and inject faults into it. Each has its own ``rclpy.Context`` (so it can
be closed while the process goes on, and several can watch several domains), never installs rclpy's
signal handlers (the launcher stops its children in its own order on SIGINT/SIGTERM), and is closed in
one call: executor, node, context, then its spinning thread. rclpy is imported only when one is made.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any


class ProbeNode:
    """An rclpy node ``name`` of its own context (in ROS domain ``domain_id``; None: the environment's)
    with a single-threaded executor; ``spin_in_thread`` spins it until ``close``."""

    def __init__(self, name: str, domain_id: int | None = None) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        self._rclpy = rclpy
        self.context = rclpy.Context()
        domain = {} if domain_id is None else {"domain_id": domain_id}
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO, **domain)
        self.node: Any = rclpy.create_node(name, context=self.context, start_parameter_services=False)
        self.executor: Any = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread: threading.Thread | None = None

    def spin_in_thread(self, thread_name: str) -> None:
        """Spin the node in a daemon thread (callbacks then run there) until ``close``."""
        def spin() -> None:
            with contextlib.suppress(Exception):  # the context going down ends the loop
                while self.context.ok():
                    self.executor.spin_once(timeout_sec=0.1)

        self._thread = threading.Thread(target=spin, daemon=True, name=thread_name)
        self._thread.start()

    def close(self) -> None:
        """Shut the executor down, destroy the node, shut the context down and join the spinning thread."""
        with contextlib.suppress(Exception):
            self.executor.shutdown(timeout_sec=1.0)
        with contextlib.suppress(Exception):
            self.node.destroy_node()
        self._rclpy.try_shutdown(context=self.context)
        if self._thread is not None:
            self._thread.join(timeout=3.0)

"""The project's stop rules for the test programs (as ``qrsim_ros.ros.node.run_node`` gives the nodes):
a deadline for the whole program, after which the stop watchdog prints the step it is stuck in and every
thread's stack and ends it (exit status ``ExitStatus.STOP_DEADLINE``, 4), and a hard exit once the result is
printed: DDS teardown is not what these programs test, and under load it was seen to hang past the
test's own limits. Also the programs' common start (``start_node``), QoS and bounded spin."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from qrsim_ros.ros.node import StopWatchdog

#: Wall seconds a test program may run in all: its own waits (30 s) and start-up, with room to spare.
PROGRAM_DEADLINE_S = 50.0


def start_deadline(deadline_s: float = PROGRAM_DEADLINE_S) -> StopWatchdog:
    """Arm the watchdog for the whole program (call it first)."""
    watchdog = StopWatchdog(deadline_s=deadline_s, teardown_deadline_s=deadline_s)
    watchdog.start(f"the program started (its {deadline_s:g} s deadline)")
    watchdog.step = "running"
    return watchdog


def finish(status: int) -> NoReturn:
    """End the process with ``status`` now that its result is printed (no DDS teardown)."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


def start_node(name: str, namespace: str) -> tuple[StopWatchdog, Any]:
    """Arm the program's deadline, start DDS and create the rclpy node ``name`` in ``namespace``: (the
    watchdog, the node)."""
    import rclpy

    watchdog = start_deadline()
    watchdog.step = "starting DDS"
    rclpy.init()
    return watchdog, rclpy.create_node(name, namespace=namespace)


def latched_qos() -> Any:
    """Reliable, transient local, depth 1: a late subscriber still gets the last message."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


def spin_until(node: Any, done: Callable[[], bool], timeout_s: float) -> None:
    """Spin ``node`` until ``done()`` or ``timeout_s`` seconds of its clock have passed."""
    import rclpy
    from rclpy.duration import Duration

    deadline = node.get_clock().now() + Duration(seconds=timeout_s)
    while not done() and node.get_clock().now() < deadline:
        rclpy.spin_once(node, timeout_sec=0.5)

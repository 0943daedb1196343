"""Helpers for tests that run real ROS 2 processes (rclpy over Fast DDS)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def require_ros() -> None:
    """Skip unless rclpy and the generated qrsim_ros messages import (i.e. under ./qrsim test)."""
    try:
        import qrsim_ros.msg  # noqa: F401
        import rclpy  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on how pytest was started
        pytest.skip(f"needs the colcon build and the ROS 2 wheels (run ./qrsim test): {exc}")


def ros_env(tmp_path: Path, domain_id: int | None = None) -> dict[str, str]:
    """Environment for child ROS processes: own DDS domain, localhost discovery, logs in tmp_path."""
    env = dict(os.environ)
    # A venv Python re-executes itself with its library path set; let the child do that itself.
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    env["ROS_DOMAIN_ID"] = str(domain_id if domain_id is not None else 191 + os.getpid() % 40)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_LOG_DIR"] = str(tmp_path / "ros_log")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def python() -> str:
    """The interpreter running the tests (the project venv's under ./qrsim test)."""
    return sys.executable


def interrupt(proc: subprocess.Popen[Any], timeout_s: float) -> None:
    """End ``proc`` as Ctrl-C does if it still runs: SIGINT, wait up to ``timeout_s``, then kill it
    (a last resort only)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def spin_until(executor: Any, condition: Callable[[], bool], timeout_s: float, step_s: float) -> bool:
    """Spin an rclpy ``executor`` (``step_s`` per spin) until ``condition()`` holds: True, or False once
    ``timeout_s`` of wall-clock time has passed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        executor.spin_once(timeout_sec=step_s)
    return True


#: Domains this test process has handed out (a graph's processes may outlive its test by a moment).
_DOMAINS_TAKEN: set[int] = set()


def free_domain() -> int:
    """A ROS_DOMAIN_ID that no DDS participant on this machine uses now, for one test's graph.

    Fast DDS's first participant of domain d binds UDP port 7410 + 250 d (unicast discovery); if that
    port can be bound, nobody is on the domain. The search starts at a place that depends on the pid, so
    two test suites running at once on one machine probe different domains first.
    """
    import socket

    start = os.getpid() % 200
    for j in range(200):
        domain = 1 + (start + 7 * j) % 200
        if domain in _DOMAINS_TAKEN:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("", 7410 + 250 * domain))
            except OSError:
                continue
        _DOMAINS_TAKEN.add(domain)
        return domain
    raise RuntimeError("no free ROS_DOMAIN_ID in 1..200")

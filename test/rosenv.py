"""Helpers for tests that run real ROS 2 processes (rclpy over Fast DDS)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
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
    """Environment for child ROS processes: own DDS domain (a free one unless given), Fast DDS on
    loopback only (qrsim_ros.dds.dds_environment, as ``qrsim launch`` sets it), logs in tmp_path."""
    from qrsim_ros.dds import dds_environment

    env = dict(os.environ)
    # A venv Python re-executes itself with its library path set; let the child do that itself.
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)  # the tests check the project's own profile
    env = dds_environment(env, domain_id if domain_id is not None else free_domain())
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


def free_domain() -> int:
    """A ROS_DOMAIN_ID for one test's graph: unused by any DDS participant on this machine and claimed
    for this test process until it ends (``qrsim_ros.dds.free_domain``), so two tests never share one,
    not even in two test suites running at once."""
    from qrsim_ros.dds import free_domain as claim

    return claim()


def inet_sockets(pid: int) -> list[tuple[str, str, int]]:
    """The UDP and TCP sockets process ``pid`` holds, as (protocol, local address, local port): its
    /proc/<pid>/fd socket inodes matched against /proc/net/{udp,udp6,tcp,tcp6}."""
    import ipaddress

    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    out = []
    for proto in ("udp", "udp6", "tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{proto}", encoding="ascii") as f:
            next(f)
            for line in f:
                fields = line.split()
                if int(fields[9]) not in inodes:
                    continue
                hex_addr, hex_port = fields[1].split(":")
                # the kernel prints the address as 32-bit words in host (little-endian) order
                raw = b"".join(int(hex_addr[i:i + 8], 16).to_bytes(4, "little")
                               for i in range(0, len(hex_addr), 8))
                out.append((proto, str(ipaddress.ip_address(raw)), int(hex_port, 16)))
    return out


def scenario_with_sensors(tmp_path: Path, base: str, name: str, sensors: dict[str, Any],
                          **top: Any) -> Path:
    """A scenario file ``tmp_path/<name>.yaml``: config/<base>.yaml (read as YAML 1.2, as the project
    does) with the ``vehicle.sensors`` sections ``sensors`` added and the top-level keys ``top`` (e.g.
    ``num_vehicles``, ``scene``) replaced."""
    import yaml

    from qrsim_ros.core.config.loader import load_yaml

    data = load_yaml((REPO_ROOT / "config" / f"{base}.yaml").read_text(encoding="utf-8"))
    data.setdefault("vehicle", {}).setdefault("sensors", {}).update(sensors)
    data.update(top)
    data["name"] = name
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def launch_recorded(scenario: Path, tmp_path: Path, seed: int, duration_s: float,
                    timeout_s: float = 600.0) -> Path:
    """Run ``qrsim launch <scenario>`` in lockstep as fast as possible, without the autopilot, recorded,
    in a free ROS domain; assert it ended cleanly; return the bag's directory. A run that has not ended
    after ``timeout_s`` is interrupted (Ctrl-C) and the test fails with the tail of its log, which names
    what lockstep was waiting for."""
    bag = tmp_path / "bag"
    log_path = tmp_path / "launch.log"
    cmd = [python(), str(REPO_ROOT / "install/qrsim_ros/lib/qrsim_ros/qrsim"), "launch", str(scenario),
           "--seed", str(seed), "--no-autopilot", "--lockstep", "--real-time-factor", "0",
           "--duration", f"{duration_s:g}", "--record", str(bag)]
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, env=ros_env(tmp_path, free_domain()), cwd=tmp_path, stdout=log,
                                stderr=subprocess.STDOUT, text=True)
        try:
            proc.wait(timeout=timeout_s)
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
            interrupt(proc, 60.0)
    tail = log_path.read_text(encoding="utf-8", errors="replace")[-6000:]
    assert not hung, f"qrsim launch had not ended after {timeout_s:g} s (interrupted); its log ends:\n{tail}"
    assert proc.returncode == 0, tail
    return bag


def sensor_updates(model: Any, truth: dict[int, Any], *, reset: bool = True) -> Iterator[int]:
    """Step a core sensor model on recorded ground truth (tick -> states (N, 13)) as its node did:
    reset on tick 0 (unless ``reset`` is False: already reset), then every tick in order; a tick the
    recorder missed is stepped on the last recorded states, so the noise streams stay aligned (their draws
    do not depend on the states). Yields every tick at which the model produced a reading (0 first when
    it resets here); the caller compares only ticks whose states are in ``truth``."""
    if reset:
        model.reset(truth[0])
        yield 0
    x = truth[0]
    for k in range(1, max(truth) + 1):
        x = truth.get(k, x)
        if model.step(k, x):
            yield k


def send_attitude_until(done: Callable[[], bool], pubs: list[Any], rows: Any, moved: Any) -> None:
    """Publish every vehicle's AttitudeCommand (FRD, stamp 0: held until it expires) from ``rows`` (one
    [pitch, roll, throttle, yaw_rate, battery_v] per publisher) again and again, every 50 ms or when the
    event ``moved`` is set, until ``done()``: releases a clock held at tick 0 by ``wait_for_commands``."""
    from qrsim_ros.msg import AttitudeCommand

    while not done():
        for i, pub in enumerate(pubs):
            m = AttitudeCommand()
            m.header.frame_id = f"uav{i + 1}/base_link_frd"
            m.pitch, m.roll, m.throttle, m.yaw_rate, m.battery_voltage = (float(v) for v in rows[i])
            pub.publish(m)
        moved.wait(0.05)

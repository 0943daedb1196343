"""Helpers for tests that run real ROS 2 processes (rclpy over Fast DDS)."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qrsim_ros.supervision import process_group

REPO_ROOT = Path(__file__).resolve().parents[1]


def launches_graph(func: Any) -> Any:
    """Mark a module- or session-scoped fixture as one that launches a graph which several tests read
    (the tier guard then accepts a ``graph`` test that starts nothing itself). Put it under
    ``@pytest.fixture``."""
    func.launches_graph = True
    return func


def require_ros() -> None:
    """Skip unless rclpy and the generated qrsim_ros messages import (i.e. under ./qrsim test)."""
    try:
        import qrsim_ros.msg  # noqa: F401
        import rclpy  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on how pytest was started
        pytest.skip(f"needs the colcon build and the ROS 2 wheels (run ./qrsim test): {exc}")


def sensor_messages(sim: Any, has_fix: Any = None) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """The per-vehicle messages the sensor nodes publish for a Simulator's latest readings, unstamped:
    (sensor_msgs/Imu, the altimeter's Altitude, NavSatFix, TwistStamped velocity), one per vehicle;
    ``has_fix`` (N,) bools, default all."""
    import numpy as np
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Imu

    from qrsim_ros.ros.cdr import HeaderFloat64Messages
    from qrsim_ros.ros.to_messages import (
        IMU_FLOAT64_FIELDS,
        altitude_message,
        imu_columns,
        imu_float64_block,
        navsatfix_message,
        velocity_message,
    )

    n, a, g = sim.num_vehicles, sim.ahars, sim.gps
    fix = np.ones(n, bool) if has_fix is None else has_fix
    imu = imu_float64_block(imu_columns(a.orientation, a.angular_velocity, a.acceleration), np.zeros(3),
                            np.zeros(3), np.zeros(3))
    imus = [deserialize_message(raw, Imu) for raw in
            HeaderFloat64Messages(["f"] * n, IMU_FLOAT64_FIELDS).encode(0, 0, range(n), imu)]
    alts = [altitude_message(None, "f", a.height_m[i], a.vertical_speed_mps[i], 0.0) for i in range(n)]
    fixes = [navsatfix_message(None, "f", g.lla[i], g.position_variance_ned[i], fix[i]) for i in range(n)]
    vels = [velocity_message(None, "map", g.velocity_ned[i]) for i in range(n)]
    return imus, alts, fixes, vels


def node_output_lines(log: str) -> list[str]:
    """The non-blank lines a node wrote itself: Fast DDS's own ``[RTPS_...]`` diagnostics are dropped.
    They are Fast DDS's, not the node's: e.g. under Fast DDS's default transports, two participants of
    one domain that start at once can pick the same participant id, and the loser logs
    ``Failed init_port ...: open_and_lock_file failed`` before it takes the next id (a benign race)."""
    return [ln for ln in log.splitlines() if ln.strip() and "[RTPS_" not in re.sub(r"\x1b\[[0-9;]*m", "", ln)]


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
    process_group.stop([proc], ((signal.SIGINT, timeout_s), (signal.SIGKILL, 30.0)))
    proc.wait()


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, *, poll_s: float = 0.01,
               detail: Callable[[], str] | None = None) -> None:
    """Wait until ``condition()`` holds, for state that offers no event to await (another process's
    file, log or /proc entry); the test fails naming ``what`` (and ``detail()``) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}"
                                 + (f":\n{detail()}" if detail is not None else ""))
        time.sleep(poll_s)  # the poll's pace (there is nothing to wait on), bounded by the deadline


#: Seconds after which ``ask`` sends a query again (see there).
QUERY_RESEND_AFTER_S = 3.0


def ask(client: Any, request: Any, what: str, *, timeout_s: float = 30.0) -> Any:
    """The answer of a query service (one whose answer does not depend on how often it is asked:
    describe or get parameters, a status): its client is spun elsewhere (a background executor).

    rmw_fastrtps' server waits only 100 ms for the client's response reader to match before it drops a
    response ("failed to send response (timeout)"), and under load that direction of discovery can lag
    behind the one ``wait_for_service`` sees; so the request is sent again every
    ``QUERY_RESEND_AFTER_S`` until an answer arrives. (A command such as a reset is not a query: it is
    sent once.)"""
    assert client.wait_for_service(timeout_sec=60.0), f"no service for {what}"
    answered = threading.Event()
    futures: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            future = client.call_async(request)
            future.add_done_callback(lambda _f: answered.set())
            futures.append(future)
            left_s = deadline - time.monotonic()
            if answered.wait(max(0.0, min(QUERY_RESEND_AFTER_S, left_s))):
                return next(f.result() for f in futures if f.done() and f.result() is not None)
            if left_s <= QUERY_RESEND_AFTER_S:
                raise AssertionError(f"no answer to {what} within {timeout_s:g} s ({len(futures)} requests)")
    finally:
        for future in futures:
            if not future.done():
                client.remove_pending_request(future)


def spin_until(executor: Any, condition: Callable[[], bool], timeout_s: float, step_s: float) -> bool:
    """Spin an rclpy ``executor`` (``step_s`` per spin) until ``condition()`` holds: True, or False once
    ``timeout_s`` of wall-clock time has passed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        executor.spin_once(timeout_sec=step_s)
    return True


class RunJoiner:
    """Makes a test's probe node a member of the run launched in its domain, so that the run's start gate
    (``vehicle_dynamics``' ``start_subscribers``, which counts only the subscriptions of run members)
    waits for the probe: tick 0 goes out only once the probe's ``/sim/vehicle_status`` subscription is
    matched. Create the probe's other subscriptions first: a participant's subscriptions are announced
    in order, so the graph has matched them all by then. ``step()`` (call it while spinning) announces
    the probe as soon as a node of the run has announced the run's id."""

    def __init__(self, node: Any) -> None:
        from qrsim_ros.msg import RunMember, VehicleStatus

        from qrsim_ros.ros.run_identity import QOS_ANNOUNCE, QOS_MEMBERS, RUN_MEMBERS_TOPIC

        self.node = node
        self.run_id = ""
        self._member = RunMember
        self._announce = node.create_publisher(RunMember, RUN_MEMBERS_TOPIC, QOS_ANNOUNCE)
        node.create_subscription(RunMember, RUN_MEMBERS_TOPIC, self._on_member, QOS_MEMBERS)
        self.status = node.create_subscription(VehicleStatus, "/sim/vehicle_status", lambda _msg: None,
                                               reliable_qos(10))

    def _on_member(self, msg: Any) -> None:
        if not self.run_id and msg.run_id:
            self.run_id = msg.run_id
            self._announce.publish(self._member(run_id=msg.run_id, node=self.node.get_fully_qualified_name()))

    @staticmethod
    def gate_argv(scenario: str, **plan_args: Any) -> list[str]:
        """``qrsim launch`` arguments that make the start gate wait for one more subscriber (this probe)
        than ``launch_plan.plan(scenario, **plan_args)`` counts, for as long as a loaded machine needs."""
        from qrsim_ros.launch_plan import plan

        dynamics = next(s for s in plan(scenario, **plan_args) if s.name == "vehicle_dynamics").parameters
        return ["--param", f"vehicle_dynamics:start_subscribers={dynamics['start_subscribers'] + 1}",
                "--param", "vehicle_dynamics:start_timeout_s=120"]


def dump_stacks_and_kill(proc: subprocess.Popen[Any], log: Path, timeout_s: float = 5.0) -> None:
    """A hung node executable: ask for every thread's stack (SIGUSR1, faulthandler; the installed
    executables register it) and wait until it is in ``log`` (the process's output), at most
    ``timeout_s``; then SIGKILL and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGUSR1)
        with contextlib.suppress(AssertionError):  # no dump (an executable without the handler): kill
            wait_until(lambda: proc.poll() is not None or "most recent call first" in log.read_text(
                errors="replace"), timeout_s, "a stack dump")
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


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


def scenario_file(tmp_path: Path, base: str, name: str, edit: Callable[[dict[str, Any]], None] | None = None,
                  *, vehicle: dict[str, Any] | None = None, **top: Any) -> Path:
    """A scenario file ``tmp_path/<name>.yaml``: config/<base>.yaml (read as YAML 1.2, as the project does:
    ``on`` is a key, not YAML 1.1's True) changed by ``edit(data)``, with the keys ``vehicle`` of its
    ``vehicle`` section and the top-level keys ``top`` (e.g. ``num_vehicles``, ``faults``) replaced."""
    import yaml

    from qrsim_ros.core.config.loader import load_yaml

    data = load_yaml((REPO_ROOT / "config" / f"{base}.yaml").read_text(encoding="utf-8"))
    if edit is not None:
        edit(data)
    data.setdefault("vehicle", {}).update(vehicle or {})
    data.update(top)
    data["name"] = name
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def scenario_with_sensors(tmp_path: Path, base: str, name: str, sensors: dict[str, Any],
                          **top: Any) -> Path:
    """A scenario file ``tmp_path/<name>.yaml``: config/<base>.yaml with the ``vehicle.sensors`` sections
    ``sensors`` added and the top-level keys ``top`` (e.g. ``num_vehicles``, ``scene``) replaced."""
    def add(data: dict[str, Any]) -> None:
        data.setdefault("vehicle", {}).setdefault("sensors", {}).update(sensors)

    return scenario_file(tmp_path, base, name, add, **top)


#: The lidar tests' scene: one cylinder 12 m north and 6 m east of the origin, 20 m high.
LIDAR_OBSTACLES = [{"type": "cylinder", "center_ne_m": [12.0, 6.0], "radius_m": 0.5, "height_m": 20.0}]


def lidar_scenario(tmp_path: Path, base: str, section: dict[str, Any], **extra: Any) -> Path:
    """Scenario ``base`` with a lidar (its ``vehicle.sensors.lidar`` section ``section``) in the scene of
    ``LIDAR_OBSTACLES``, the top-level keys ``extra`` replaced (``<base>_lidar.yaml`` in ``tmp_path``)."""
    return scenario_with_sensors(tmp_path, base, f"{base}_lidar", {"lidar": section},
                                 scene={"obstacles": LIDAR_OBSTACLES}, **extra)


def require_nodes(*executables: str) -> None:
    """Skip unless every node executable named is installed (``qrsim launch`` finds it)."""
    from qrsim_ros.cli.launch import find_executable
    from qrsim_ros.launch_plan import NodeSpec

    missing = [e for e in executables if find_executable(NodeSpec(e, e)) is None]
    if missing:
        pytest.skip(f"node executables not written yet: {', '.join(missing)}")


def reliable_qos(depth: int = 1000) -> Any:
    """A reliable, keep-last QoS profile of ``depth`` for a test's rclpy subscription or publisher."""
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


def grid_tick(stamp: Any) -> int:
    """The tick of a message stamp, which must be on the 0.02 s tick grid (the test fails otherwise)."""
    ns = stamp.sec * 1_000_000_000 + stamp.nanosec
    assert ns % 20_000_000 == 0, f"stamp {ns} ns is not on the 0.02 s tick grid"
    return ns // 20_000_000


def close_graph(graph: Any, probe: Any | None, sig: int = signal.SIGINT) -> dict[str, int]:
    """Close a test's probe (an rclpy node with ``close()``, if it was created), then stop the graph's nodes
    with ``sig`` (``graph.stop(sig)``); returns their exit codes by name."""
    if probe is not None:
        probe.close()
    return graph.stop(sig)


def assert_exit_0(graph: Any, codes: dict[str, int]) -> None:
    """Every node exited with 0 (else: the codes and the end of the failed nodes' logs, ``graph.log``)."""
    assert all(code == 0 for code in codes.values()), (codes, {
        name: graph.log(name)[-3000:] for name, code in codes.items() if code != 0})


#: ``qrsim launch``'s line for each process it started (its name and pid).
STARTED_LINE = re.compile(r"\[qrsim launch\] started (\S+) \(pid (\d+)\)")
#: The signals of a native crash (``qrsim launch``'s "killed by SIG..."), after which a core file is read.
CRASH_SIGNALS = ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE")
_CRASH_LINE = re.compile(rf"killed by ({'|'.join(CRASH_SIGNALS)})")
#: Every TestProcess not yet ended and checked (``crash_reports``): a test's failure report gets the native
#: backtrace of any of them that crashed.
_RUNNING: list[TestProcess] = []


def _core_limit_prefix() -> list[str]:
    """``prlimit`` raising the core-file limit to its hard limit for the program and what it starts
    (a test's cwd, ``tmp_path``, holds the cores), so that a native crash leaves a core gdb can read.
    Empty where there is no prlimit or the hard limit is 0."""
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    prlimit = shutil.which("prlimit")
    if prlimit is None or hard == 0:
        return []
    limit = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    return [prlimit, f"--core={limit}", "--"]


def native_backtrace(core: Path, timeout_s: float = 120.0) -> str:
    """gdb's thread list and the crashing thread's native stack from ``core`` (a Python process of this
    venv: a node, ``qrsim launch``): which library a crash in a thread without Python code (Fast DDS,
    rclpy's executor) happened in, which faulthandler's Python stacks cannot tell."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return f"(a core file is at {core}; no gdb to read it)"
    exe = os.path.realpath(sys.executable)  # the venv's python is a link; gdb needs the real binary
    try:
        res = subprocess.run([gdb, "-batch", "-nx", "-ex", "set pagination off", "-ex", "info threads",
                              "-ex", "bt 40", exe, str(core)], capture_output=True, text=True,
                             timeout=timeout_s, errors="replace")
    except subprocess.TimeoutExpired:
        return f"(gdb did not read {core} within {timeout_s:g} s)"
    keep = [ln for ln in res.stdout.splitlines()
            if not ln.startswith(("[New LWP", "[Thread debugging", "warning:", "Using host libthread"))]
    return f"gdb {exe} {core}:\n" + "\n".join(keep)


def crash_reports() -> str:
    """The native backtraces of the TestProcesses that crashed (``CRASH_SIGNALS``: a line of ``qrsim
    launch`` or the program's own exit status) and are not yet reported, read from the core files in
    their working directories."""
    return "\n\n".join(text for text in (proc.native_backtraces() for proc in _RUNNING) if text)


def forget_ended() -> None:
    """Drop the TestProcesses that have ended from ``crash_reports``'s list (after each test)."""
    _RUNNING[:] = [proc for proc in _RUNNING if proc.proc.poll() is None]


def _start_time(pid: int) -> int | None:
    """The kernel's start time of process ``pid`` (clock ticks since boot), or None once it is gone:
    with the pid it names one process, never a later one that reused the number."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


class TestProcess:
    """A program a test starts (``qrsim launch``, a node, a test program), as one launcher for every test:
    in a session and process group of its own, its output read line by line in a thread (kept in
    ``lines`` and, when ``log`` is given, written there; its standard error goes there too unless
    ``stderr_log`` names a file of its own), its end awaited with a deadline. ``close``
    (also on leaving the ``with`` block) always reaps: Ctrl-C as a user stops it, then SIGKILL to its
    process group and to every process it reported starting (``qrsim launch``'s nodes run in sessions of
    their own) that is still there, so nothing outlives the test; if the test's process dies first, the
    program gets SIGTERM (``die_with_parent``)."""

    __test__ = False  # (not a test class)

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, *, log: Path | None = None,
                 stderr_log: Path | None = None) -> None:
        self.argv = [str(a) for a in argv]
        self.cwd = cwd
        self.lines: list[str] = []
        self._crash_reported = False
        self._seen = threading.Condition()
        self._children: dict[int, int | None] = {}  # pid -> start time, of what it reported starting
        self._log = open(log, "w", encoding="utf-8") if log is not None else None  # noqa: SIM115
        if stderr_log is not None:
            with open(stderr_log, "w", encoding="utf-8") as err:
                self.proc = self._start(env, cwd, err)
        else:
            self.proc = self._start(env, cwd, subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"read-{Path(argv[0]).name}")
        self._reader.start()
        _RUNNING.append(self)

    def _start(self, env: dict[str, str], cwd: Path, stderr: Any) -> subprocess.Popen[str]:
        # die_with_parent: a test worker killed (a stopped flake hunt, CI's limit) takes its programs with
        # it; a node started here once ran on, orphaned, for 38 min after its hunt was stopped
        argv = [*_core_limit_prefix(), *self.argv]
        return process_group.start(argv, die_with_parent=True, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                   stderr=stderr, text=True, errors="replace")

    def native_backtraces(self) -> str:
        """Once, if it or a process it started died of a native crash: the crash and gdb's reading of the
        core files in its working directory (``native_backtrace``); else empty."""
        rc = self.proc.poll()
        died_by = signal.Signals(-rc).name if rc is not None and rc < 0 else None
        crashed = _CRASH_LINE.search(self.output)
        if self._crash_reported or not (crashed or died_by in CRASH_SIGNALS):
            return ""
        self._crash_reported = True
        what = crashed.group(0) if crashed else f"{Path(self.argv[0]).name} killed by {died_by}"
        cores = sorted(self.cwd.glob("core*"))
        if not cores:
            pattern = Path("/proc/sys/kernel/core_pattern")
            where = pattern.read_text().strip() if pattern.exists() else "?"
            return f"{what}: no core file in {self.cwd} (kernel.core_pattern {where!r})"
        return f"{what}:\n" + "\n\n".join(native_backtrace(core) for core in cores)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            m = STARTED_LINE.search(line)
            if m:
                pid = int(m.group(2))
                self._children[pid] = _start_time(pid)
            if self._log is not None:
                self._log.write(line)
                self._log.flush()
            with self._seen:
                self.lines.append(line)
                self._seen.notify_all()
        with self._seen:
            self._seen.notify_all()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def tail(self, chars: int = 6000) -> str:
        return self.output[-chars:]

    def wait_for_line(self, pattern: re.Pattern[str] | str, timeout_s: float) -> str:
        """The first output line matching ``pattern`` (waited for up to ``timeout_s``); the test fails
        with the output so far if the program ended or the time ran out first."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout_s
        checked = 0
        with self._seen:
            while True:
                for line in self.lines[checked:]:
                    if rx.search(line):
                        return line
                checked = len(self.lines)
                left = deadline - time.monotonic()
                ended = not self._reader.is_alive()
                assert not ended and left > 0, (
                    f"no line matching {rx.pattern!r} within {timeout_s:g} s "
                    f"({'it ended' if ended else 'still running'}); its output ends:\n{self.tail()}")
                self._seen.wait(min(left, 1.0))

    def wait(self, timeout_s: float) -> int:
        """Its exit status, once it ends by itself within ``timeout_s``; else the test fails with the end
        of its output, which holds every thread's stack (SIGUSR1: ``qrsim`` and the node executables
        print them), after it is stopped. Its output is read to the end before this returns."""
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.ask_for_stacks()
            self.close()
            raise AssertionError(f"{Path(self.argv[0]).name} {' '.join(self.argv[1:4])} had not ended after "
                                 f"{timeout_s:g} s (stopped); its output ends:\n{self.tail()}") from None
        self._reader.join(timeout=30)
        return rc

    def ask_for_stacks(self, timeout_s: float = 5.0) -> bool:
        """SIGUSR1, and up to ``timeout_s`` for the stack dump it prints (faulthandler); whether it came."""
        start = len(self.lines)
        self.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        with self._seen:
            while not any("most recent call first" in line for line in self.lines[start:]):
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    return False
                self._seen.wait(min(left, 0.5))
        return True

    def send_signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def child_pids(self) -> dict[str, int]:
        """The processes it reported starting (``qrsim launch``'s lines), by name."""
        return {m.group(1): int(m.group(2)) for m in map(STARTED_LINE.search, self.lines) if m}

    def close(self, stop_s: float = 30.0) -> None:
        """Stop it if it still runs (SIGINT, then SIGKILL after ``stop_s``) and kill whatever is left of
        its process group and of the processes it started."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=stop_s)
        process_group.kill_group(self.proc)
        for pid, started in list(self._children.items()):
            if started is not None and _start_time(pid) == started:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._reader.join(timeout=30)
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> TestProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def qrsim_launch(tmp_path: Path, argv: list[str], *, domain_id: int | None = None,
                 extra_env: dict[str, str] | None = None, log: Path | None = None) -> TestProcess:
    """``qrsim launch ARGV`` in a free ROS domain (unless ``domain_id``), loopback DDS, run in ``tmp_path``
    (use it in a ``with`` block: it is always reaped)."""
    env = ros_env(tmp_path, domain_id)
    env.update(extra_env or {})
    return TestProcess([python(), "-m", "qrsim_ros.cli.main", "launch", *argv], env, tmp_path, log=log)


def run_launch(tmp_path: Path, argv: list[str], *, timeout_s: float = 150.0, domain_id: int | None = None,
               on_line: re.Pattern[str] | str | None = None,
               action: Callable[[TestProcess], None] | None = None,
               extra_env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``qrsim launch ARGV`` to its end (``timeout_s``); once a line matches ``on_line``, call
    ``action(process)`` (default: Ctrl-C). Returns the exit status and the whole output."""
    with qrsim_launch(tmp_path, argv, domain_id=domain_id, extra_env=extra_env) as run:
        if on_line is not None:
            run.wait_for_line(on_line, timeout_s)
            (action or (lambda p: p.send_signal(signal.SIGINT)))(run)
        rc = run.wait(timeout_s)
        return rc, run.output


def assert_children_gone(output: str, expected: int | None = None) -> None:
    """Every process ``qrsim launch`` reported starting has ended (``expected``: how many it started)."""
    pids = [int(m.group(2)) for m in map(STARTED_LINE.search, output.splitlines()) if m]
    assert pids and (expected is None or len(pids) == expected), output[-6000:]
    for pid in pids:
        assert _start_time(pid) is None or process_ended(pid), f"pid {pid} still runs:\n{output[-6000:]}"


def process_ended(pid: int) -> bool:
    """Whether process ``pid`` has ended: gone, or a zombie its parent has not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def launch_recorded(scenario: Path, tmp_path: Path, seed: int, duration_s: float,
                    timeout_s: float = 240.0) -> Path:
    """Run ``qrsim launch <scenario>`` in lockstep as fast as possible, without the autopilot, recorded,
    in a free ROS domain; assert it ended cleanly; return the bag's directory. A run that has not ended
    after ``timeout_s`` is interrupted (Ctrl-C) and the test fails with the tail of its log, which names
    what lockstep was waiting for (the default fits the callers' 300 s budgets, which also read the bag)."""
    bag = tmp_path / "bag"
    argv = [str(scenario), "--seed", str(seed), "--no-autopilot", "--lockstep", "--real-time-factor", "0",
            "--duration", f"{duration_s:g}", "--record", str(bag)]
    with qrsim_launch(tmp_path, argv, log=tmp_path / "launch.log") as run:
        rc = run.wait(timeout_s)
        assert rc == 0, run.tail()
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

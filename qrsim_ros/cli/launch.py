"""``qrsim launch``: start a scenario's ROS 2 node graph without a ROS distribution (the embedded launcher).

    qrsim launch search_rescue --variant 2c --num-vehicles 3 --record
    qrsim launch keep_spot --duration 20 --no-autopilot --real-time-factor 0
    qrsim launch plume --variant 3b --single-process

SCENARIO is a family (search_rescue, plume, cats_mouse, keep_spot, retrieve; --variant picks 2a-2d or
scene, 3a-3g, 1a-1c, simplified or full; keep_spot has none), another scenario name from config/ or a
scenario YAML path. The node set and every node's name, namespace and parameters come from
``qrsim_ros.launch_plan.plan``, the function the launch files (``ros2 launch qrsim_ros
<family>.launch.py``) use too, so both start the same graph.

Each node runs as its own process with this environment's Python (or, with --single-process, all of
them in one process on one executor; the recorder of --record keeps its own process). Every line a
node prints is forwarded prefixed with ``[node_name]``. A status line shows simulated time, real-time
factor, reward and persons found (redrawn in place on a terminal, one line every few seconds
otherwise). The run stops on Ctrl-C or
SIGTERM, after --duration simulated seconds, or when the referee reports the episode done: the nodes
get SIGINT, then SIGTERM, then SIGKILL after timeouts (the recorder last, once the others have
exited, so the bag holds their final messages), and a one-paragraph summary follows (persons found,
reward, real-time factor, bag path, messages and size).

Seed -1 (the default) takes the scenario file's seed; 0 (or a file's 0) draws one from the clock, once,
for every node: the summary prints it so the run can be repeated. ``--param NODE:NAME=VALUE`` sets
any node parameter (YAML value; repeatable), e.g. ``--param vehicle_dynamics:lockstep_timeout_s=5``.

--plot renders the figures of ``qrsim plot`` from the run's bag into BAG/plots once every process has
stopped; it implies --record (to the default bag directory unless --record DIR is given).

Exit status: 0 after a clean run (the end of the episode or of --duration, Ctrl-C, SIGTERM to the
launcher); 1 if a node stopped before the launcher asked it to (for any reason: a crash, a SIGTERM or
SIGKILL from outside, a status 0), exited with an error while stopping, had to be killed with SIGKILL,
or the recording failed with --record-required, or --plot could not render any figure (every such node
is named in the summary); 2 for bad arguments, missing node executables or a record directory that
cannot be written; 3 if the run went to its end but the recorder had stopped early (a full disk: the
bag holds its complete files up to then).

Before starting, the launcher removes what killed runs left behind: its own scratch directories
($TMPDIR/qrsim_launch_*) and Fast DDS's shared-memory files in /dev/shm whose owner is dead (their lock
is not held); a live run's are never touched.

DDS: the graph runs in ROS_DOMAIN_ID (default 0, or --domain-id N; --domain-id auto picks a free one and
prints it, so an external autopilot joins with ``export ROS_DOMAIN_ID=N``). Before any node starts, the
launcher looks for another simulator in that domain (a vehicle_dynamics node, a /sim/vehicle_status
publisher or another launcher) and refuses with one line if it finds one (exit status 2): two graphs in
one domain fly each other's commands. Fast DDS binds to loopback only (the profile
config/fastdds_localhost.xml, through FASTDDS_DEFAULT_PROFILES_FILE, unless you set one);
--network opens every interface (Fast DDS's built-in UDPv4 transport, discovery range SUBNET) for an
autopilot on another machine; neither uses Fast DDS's shared memory (docs/LAUNCH.md says why).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from qrsim_ros.bag.info import describe_bag
from qrsim_ros.cli import CliError, finish_parser, report
from qrsim_ros.cli.commands import HELP_LINES
from qrsim_ros.cli.leftovers import LockedTempDir, remove_stale_shm, remove_stale_tempdirs
from qrsim_ros.cli.subcommand import Subcommand
from qrsim_ros.core.common.limits import FOXGLOVE_PORT, LIMITS
from qrsim_ros.core.common.validation import shorten
from qrsim_ros.core.config.loader import load_yaml
from qrsim_ros.dds import (
    DOMAIN_RANGE_HELP,
    DomainError,
    claim_graph,
    count_participants,
    dds_environment,
    domain_id_from_environment,
    free_domain,
    parse_domain_id,
)
from qrsim_ros.launch_plan import (
    PACKAGE,
    NodeSpec,
    PlanError,
    ResolvedScenario,
    bag_dir,
    plan,
    resolve_scenario,
)
from qrsim_ros.launch_setup import check_record_dir, node_environment
from qrsim_ros.ros.names import vehicle_namespace
from qrsim_ros.supervision import process_group
from qrsim_ros.supervision.exits import ExitStatus, classify_exit, describe_exit, normal_end_processes
from qrsim_ros.supervision.fork_server import ForkServer
from qrsim_ros.supervision.probe import ProbeNode

PROG = "qrsim launch"
#: Wall seconds the launcher's status listener gets to close (its DDS teardown) once the run is over.
LISTENER_CLOSE_DEADLINE_S = 10.0
#: Wall seconds the clock owner gets to end a --duration run by itself before everything is signalled.
DURATION_GRACE_S = 5.0
#: Wall seconds between status lines when stdout is not a terminal.
STATUS_PERIOD_S = 5.0
#: The node that publishes /clock: started last, once every other node is subscribed.
CLOCK_OWNER = "vehicle_dynamics"
#: The node that records the bag: stopped last, after the nodes it records.
RECORDER = "recorder"
#: Nodes the clock owner does not wait for: they read no input of the simulation before it runs.
NOT_AWAITED = ("foxglove_bridge",)
#: Wall seconds to wait for the other nodes before starting the clock owner anyway.
STARTUP_TIMEOUT_S = 60.0
#: Wall seconds the launcher listens at most for another simulator in its domain (only while DDS
#: participants that were there before it are not all discovered: 0.03-0.2 s when idle, seconds under load;
#: over 10 s for a running 1-vehicle graph on 2 cores beside a test suite and two CPU burners).
DOMAIN_CHECK_S = 30.0
#: What the fork server imports once for every node it starts (``supervision.fork_server``): rclpy, numpy,
#: numba and the scenario, parameter and ground-truth modules each node process would import itself.
FORK_SERVER_PRELOAD = ("rclpy", "rclpy.node", "rclpy.executors", "qrsim_ros.ros.node",
                       "qrsim_ros.ros.ground_truth", "qrsim_ros.core.engine.builders")
#: Prefix of the launcher's own rclpy node (followed by its pid).
LISTENER_PREFIX = "qrsim_launch_"


# --- arguments ---------------------------------------------------------------------------------------

def _add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("scenario", metavar="SCENARIO",
                   help="search_rescue | plume | cats_mouse | keep_spot | retrieve | a config name | "
                        "a YAML path")
    p.add_argument("--variant", default=None, metavar="V",
                   help="variant of the family (2a-2d or scene, 3a-3g, 1a-1c; default 2c, 3a, 1a)")
    p.add_argument("--num-vehicles", type=int, default=0, metavar="N",
                   help="number of vehicles (default 0: the scenario file's)")
    p.add_argument("--seed", type=int, default=-1, metavar="S",
                   help="random seed (-1: the scenario file's, the default; 0: from the clock, drawn once "
                   "for every node; 1..2147483647: that seed)")
    p.add_argument("--use-rviz", action="store_true", help="start rviz2 too (needs an rviz2 on PATH)")
    p.add_argument("--record", nargs="?", const=True, default=False, metavar="DIR",
                   help="record a rosbag2 bag (to DIR; default bags/<scenario>_<time>)")
    p.add_argument("--foxglove", nargs="?", type=int, const=FOXGLOVE_PORT, default=None, metavar="PORT",
                   help=f"serve the graph on a Foxglove WebSocket (default port {FOXGLOVE_PORT}; 0: any free "
                   "one) for Foxglove or Lichtblick; 127.0.0.1 only unless --network")
    p.add_argument("--record-required", action="store_true",
                   help="if the recorder cannot write the bag (a full disk), stop the run as a failure "
                   "(exit status 1; default: the simulation goes on without it, exit status 3); implies "
                   "--record")
    p.add_argument("--plot", action="store_true",
                   help="after the run, render the figures of 'qrsim plot' from its bag into BAG/plots "
                   "(implies --record)")
    p.add_argument("--no-autopilot", dest="autopilot", action="store_false",
                   help="do not start the built-in example autopilot")
    p.add_argument("--mavlink", action="store_true",
                   help="every agent vehicle a PX4 vehicle on MAVLink, as PX4 SITL instance i (API link "
                   "udp 14540+i, ground station 14550; sets mavlink.on; docs/MAVLINK.md): the mavlink_bridge "
                   "node flies them, no example autopilot; with --network its links bind every interface")
    p.add_argument("--duration", type=float, default=0.0, metavar="SEC",
                   help="stop after SEC simulated seconds (default 0: when the episode ends)")
    p.add_argument("--real-time-factor", type=float, default=None, metavar="R",
                   help="simulation pace (1 = wall clock, 0 = as fast as possible; default: the node's)")
    p.add_argument("--lockstep", action=argparse.BooleanOptionalAction, default=None,
                   help="deterministic lockstep (default: the node's)")
    p.add_argument("--single-process", action="store_true",
                   help="run every node in one process on one executor (faster, one log stream)")
    p.add_argument("--param", action="append", default=[], metavar="NODE:NAME=VALUE", dest="params",
                   help="set a node parameter (YAML value; repeatable)")
    p.add_argument("--domain-id", default=None, metavar="N|auto",
                   help=f"ROS_DOMAIN_ID of the graph ({DOMAIN_RANGE_HELP}; default: the environment's "
                   "ROS_DOMAIN_ID, else 0); auto: a free one, printed")
    p.add_argument("--network", action="store_true",
                   help="let nodes on other machines join: Fast DDS's UDPv4 on every interface, discovery "
                   "range SUBNET (default: loopback only)")
    return finish_parser(p, run, PROG)


#: ``qrsim launch``: ``build_parser`` registers it on the ``qrsim`` parser, ``main`` runs it standalone.
COMMAND = Subcommand(PROG, HELP_LINES["launch"], __doc__, _add_arguments)
build_parser, main = COMMAND.build_parser, COMMAND.main


def parse_node_parameters(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``["imu:rate=2"]`` -> ``{"imu": {"rate": 2}}`` (YAML values)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        node, sep1, rest = item.partition(":")
        key, sep2, text = rest.partition("=")
        if not (sep1 and sep2 and node.strip() and key.strip()):
            raise CliError(f"--param {item!r}: expected NODE:NAME=VALUE, e.g. "
                           "vehicle_dynamics:lockstep=false")
        try:
            value = load_yaml(text) if text.strip() else ""  # size- and alias-limited
        except yaml.YAMLError as exc:
            raise CliError(f"--param {shorten(item)}: the value is not valid YAML: "
                           f"{getattr(exc, 'problem', exc)}") from None
        out.setdefault(node.strip(), {})[key.strip()] = value
    return out


# --- where the node executables are --------------------------------------------------------------------

def executable_dirs() -> list[Path]:
    """Directories searched for qrsim_ros node executables, in order."""
    dirs = []
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            dirs.append(Path(prefix) / "lib" / PACKAGE)
    repo = Path(__file__).resolve().parents[2]
    dirs.append(repo / "install" / PACKAGE / "lib" / PACKAGE)  # generated by CMakeLists.txt
    return dirs


def find_executable(spec: NodeSpec) -> str | None:
    """Path of a node's executable (qrsim_ros scripts in the install, others on PATH), or None."""
    if spec.package != PACKAGE:
        return shutil.which(spec.executable)
    for d in executable_dirs():
        if (d / spec.executable).is_file():
            return str(d / spec.executable)
    return None


def child_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of node processes.

    Children run this process's Python. The ROS wheels' bootstrapper re-executes a venv Python with
    its LD_LIBRARY_PATH and marks that with _ROS_WHEELS_BOOTSTRAP_COMPLETE: inheriting both is right
    for the same venv (no second exec), but a marker from another interpreter's environment must be
    dropped, or the child would run without its own library path (notes/ROS2_ON_PIP.md). The DDS
    settings (domain, loopback profile) are the launcher's own: ``apply_dds_environment`` put them in
    os.environ. The Python settings are ``launch_setup.node_environment``'s (as under ``ros2 launch``).
    """
    env = dict(os.environ if base is None else base)
    ours = os.path.join(sys.prefix, "lib")
    if env.get("_ROS_WHEELS_BOOTSTRAP_COMPLETE") and ours not in env.get("LD_LIBRARY_PATH", "").split(
            os.pathsep):
        env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
        env.pop("LD_LIBRARY_PATH", None)
    env["PYTHONUNBUFFERED"] = "1"  # lines reach the launcher as they are printed
    env.setdefault("RCUTILS_LOGGING_BUFFERED_STREAM", "1")
    return node_environment(env)


def resolve_domain(args: argparse.Namespace) -> tuple[int, bool]:
    """(ROS_DOMAIN_ID of the run, whether --domain-id auto chose it): --domain-id N, auto (a free
    domain, claimed for this process), else the environment's ROS_DOMAIN_ID (0 if unset). A domain
    outside 0..232 is a CliError."""
    choice = getattr(args, "domain_id", None)
    hint = "; choose one with --domain-id N or --domain-id auto"
    try:
        if choice is None:
            return domain_id_from_environment(), False
        if str(choice).strip().lower() == "auto":
            return free_domain(), True
        return parse_domain_id(choice, "--domain-id"), False
    except DomainError as exc:
        raise CliError(f"{exc}{hint}") from None


def apply_dds_environment(domain_id: int, network: bool) -> None:
    """Put the run's DDS settings in os.environ, for the launcher's own rclpy node and every child
    (``qrsim_ros.dds.dds_environment``: the domain; loopback only, or every interface with --network)."""
    env = dds_environment(os.environ, domain_id, network=network)
    for key in set(os.environ) - set(env):
        del os.environ[key]
    os.environ.update(env)


def other_simulator(node: Any, own_name: str) -> str | None:
    """What shows another simulator graph in ``node``'s domain (a vehicle_dynamics node, a
    /sim/vehicle_status publisher, another launcher's listener), or None."""
    for name, namespace in node.get_node_names_and_namespaces():
        if name == CLOCK_OWNER:
            return f"node {namespace.rstrip('/')}/{name}"
        if name.startswith(LISTENER_PREFIX) and name != own_name:
            return f"another qrsim launch (node {name})"
    if node.count_publishers("/sim/vehicle_status") > 0:
        return "a /sim/vehicle_status publisher"
    return None


def domain_taken(domain_id: int, found: str) -> CliError:
    """The one-line refusal to start a graph where another simulator (``found``) runs."""
    return CliError(f"ROS_DOMAIN_ID {domain_id} is taken: another simulator runs in it ({found}); "
                    "choose another with --domain-id N (0..232) or --domain-id auto, or stop that one")


def check_domain_free(listener: StatusListener, domain_id: int, participants: int,
                      wait_s: float = DOMAIN_CHECK_S) -> str:
    """CliError (one line) if another simulator graph runs in ``domain_id``. ``participants``: the DDS
    participants that were there before the launcher's own (``dds.count_participants``). The graph is
    listened to until as many other nodes as that were discovered (every participant holds at least
    one node), at most ``wait_s``: a free domain costs nothing, a loaded machine gets the time its
    discovery takes. Returns a warning ('' if none) when some were still unknown after ``wait_s``."""
    if participants <= 0:
        return ""
    deadline = time.monotonic() + wait_s
    while True:
        found = other_simulator(listener.node, listener.node.get_name())
        if found is None and len(listener.node.get_node_names_and_namespaces()) - 1 >= participants:
            # all there (the nodes of one process arrive together): one more look after a moment
            listener.spin_once(0.2)
            found = other_simulator(listener.node, listener.node.get_name())
            if found is None:
                return ""
        if found is not None:
            raise domain_taken(domain_id, found)
        if time.monotonic() >= deadline:
            known = len(listener.node.get_node_names_and_namespaces()) - 1
            return (f"ROS_DOMAIN_ID {domain_id}: {participants} DDS participant(s) were there, {known} "
                    f"node(s) discovered in {wait_s:g} s, none of a simulator; starting")
        listener.spin_once(0.05)


# --- console: forwarded logs + a status line -----------------------------------------------------------

class Console:
    """Serialises node output and the status line (redrawn with \\r on a terminal)."""

    def __init__(self, stream: TextIO = sys.stdout) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._lock = threading.Lock()
        self._status = ""

    def line(self, text: str) -> None:
        with self._lock:
            if self.tty and self._status:
                self.stream.write("\r\033[K")
            self.stream.write(text + "\n")
            if self.tty and self._status:
                self.stream.write(self._status)
            self.stream.flush()

    def status(self, text: str) -> None:
        if not self.tty:
            self.line(text)
            return
        with self._lock:
            self._status = text
            self.stream.write("\r\033[K" + text)
            self.stream.flush()

    def clear_status(self) -> None:
        with self._lock:
            if self.tty and self._status:
                self.stream.write("\r\033[K")
                self.stream.flush()
            self._status = ""


#: Log format of the single process: the node's name first, as the launcher's own prefix would be.
SINGLE_PROCESS_LOG_FORMAT = "[{name}] [{severity}] [{time}]: {message}"


def _forward(proc: subprocess.Popen[bytes], name: str, console: Console,
             own_prefixes: tuple[str, ...] = ()) -> None:
    """Forward every line prefixed ``[name]``; lines already starting with one of ``own_prefixes``
    (the single process's nodes, logging with SINGLE_PROCESS_LOG_FORMAT) are forwarded as they are."""
    assert proc.stdout is not None
    for raw in iter(proc.stdout.readline, b""):
        text = raw.decode("utf-8", errors="replace").rstrip()
        console.line(text if own_prefixes and text.startswith(own_prefixes) else f"[{name}] {text}")
    proc.stdout.close()


# --- the run's progress (fed by a small rclpy node) -------------------------------------------------------

@dataclass
class RunProgress:
    """Simulated time (summed over resets), real-time factor and the last task status."""

    sim_elapsed_s: float = 0.0
    first_wall: float | None = None
    last_wall: float | None = None
    first_sim_s: float = 0.0
    _last_clock_s: float | None = None
    _offset_s: float = 0.0
    _window: collections.deque[tuple[float, float]] = field(default_factory=lambda: collections.deque())
    status: Any = None
    done: bool = False
    vehicle_status: Any = None  # the latest /sim/vehicle_status (failsafes, input counters, batteries)
    faults: Any = None  # the latest /sim/faults (qrsim_ros/ActiveFaults: the active set)

    def on_clock(self, t_s: float, wall: float) -> None:
        if self._last_clock_s is not None and t_s < self._last_clock_s - 1e-9:
            self._offset_s += self._last_clock_s  # the episode was reset: /clock restarted
        self._last_clock_s = t_s
        self.sim_elapsed_s = self._offset_s + t_s
        if self.first_wall is None:
            self.first_wall, self.first_sim_s = wall, self.sim_elapsed_s
        self.last_wall = wall
        self._window.append((wall, self.sim_elapsed_s))
        while len(self._window) > 2 and wall - self._window[0][0] > 3.0:
            self._window.popleft()

    def on_vehicle_status(self, msg: Any) -> None:
        self.vehicle_status = msg

    def failsafe_text(self) -> str:
        """'uav2 hold, uav5 land' for the vehicles flying their failsafe now ('' if none)."""
        vs = self.vehicle_status
        if vs is None:
            return ""
        active = [f"{n} {f}" for n, f in zip(vs.names, vs.failsafe, strict=False) if f]
        return ", ".join(active[:3]) + (f" +{len(active) - 3}" if len(active) > 3 else "")

    def on_faults(self, msg: Any) -> None:
        self.faults = msg

    def faults_text(self) -> str:
        """'uav1 rotor_loss, uav2 gps_outage' for the active faults (up to three; more: '5 active on 3
        vehicles'); '' when none is active or /sim/faults was not heard."""
        active = list(self.faults.faults) if self.faults is not None else []
        if len(active) > 3:
            vehicles = len({int(f.vehicle) for f in active})
            return f"{len(active)} active on {vehicles} vehicle{'s' * (vehicles != 1)}"
        return ", ".join(f"{vehicle_namespace(int(f.vehicle))} {f.kind}" for f in active)

    def battery_text(self) -> str:
        """'42 % (uav2)': the lowest charge of the packs in /sim/vehicle_status ('' with none: no status
        yet, or the scenario's battery is off)."""
        vs = self.vehicle_status
        if vs is None:
            return ""
        known = {n: float(p) for n, p in zip(vs.names, vs.battery_fraction, strict=False) if math.isfinite(p)}
        if not known:
            return ""
        name = min(known, key=lambda n: (known[n], n))
        return f"{100.0 * known[name]:.0f} %" + (f" ({name})" if len(known) > 1 else "")

    def command_faults(self) -> str:
        """Failsafe onsets and rejected/clamped set points and commands since start ('' if none)."""
        vs = self.vehicle_status
        if vs is None:
            return ""
        onsets = [n for n, c in zip(vs.names, vs.failsafe_onsets, strict=False) if c]
        counts = {"failsafe onsets": sum(vs.failsafe_onsets),
                  "set points rejected": sum(vs.setpoints_rejected),
                  "set points clamped": sum(vs.setpoints_clamped),
                  "commands rejected": sum(vs.commands_rejected),
                  "commands clamped": sum(vs.commands_clamped)}
        text = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        return text + (f" ({', '.join(onsets)})" if onsets else "") if text else ""

    def on_status(self, msg: Any) -> None:
        self.status = msg
        if msg.done:
            self.done = True

    @property
    def real_time_factor(self) -> float | None:
        """Simulated over wall seconds since the first /clock message."""
        if self.first_wall is None or self.last_wall is None or self.last_wall <= self.first_wall:
            return None
        return (self.sim_elapsed_s - self.first_sim_s) / (self.last_wall - self.first_wall)

    @property
    def recent_real_time_factor(self) -> float | None:
        if len(self._window) < 2 or self._window[-1][0] <= self._window[0][0]:
            return None
        (w0, s0), (w1, s1) = self._window[0], self._window[-1]
        return (s1 - s0) / (w1 - w0)

    def line(self) -> str:
        parts = [f"sim {self.sim_elapsed_s:8.2f} s"]
        rtf = self.recent_real_time_factor
        parts.append(f"rtf {rtf:5.2f}" if rtf is not None else "rtf   -  ")
        st = self.status
        if st is None:
            parts.append("waiting for /referee/status")
        else:
            parts.append(f"reward {st.reward:.4g} (total {st.cumulative_reward:.4g})")
            if st.persons_total:
                parts.append(f"persons {st.persons_found}/{st.persons_total}")
            parts.append(f"step {st.step}")
            if st.done:
                parts.append(f"done: {st.done_reason or 'yes'}")
        failsafe = self.failsafe_text()
        if failsafe:
            parts.append(f"failsafe {failsafe}")
        faults = self.faults_text()
        if faults:
            parts.append(f"faults: {faults}")
        battery = self.battery_text()
        if battery:
            parts.append(f"battery min {battery}")
        return " | ".join(parts)


class StatusListener:
    """A small rclpy node in the launcher: /clock, /referee/status, /sim/vehicle_status (which also
    carries the batteries: no subscription per vehicle) and /sim/faults feed a RunProgress.

    It is polled (``spin_once``: take what is there, then wait), not spun per message: every
    subscription keeps only the latest message, so the launcher costs the graph a few callbacks a
    second instead of one per tick. The real-time factor uses the /clock messages' source timestamps
    (the wall time vehicle_dynamics published them), so polling does not blur it.
    """

    def __init__(self, progress: RunProgress, run_id: str = "") -> None:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock

        from qrsim_ros.msg import ActiveFaults, TaskStatus

        # its own context, no rclpy signal handlers: the launcher stops its children in its own order
        self._probe = ProbeNode(f"{LISTENER_PREFIX}{os.getpid()}")
        self.node = self._probe.node
        # Best effort, depth 1: the status line needs the latest time, not every tick.
        clock_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT,
                               history=HistoryPolicy.KEEP_LAST)
        # The referee latches its status (transient local): a late listener still gets the latest.
        status_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
        self.node.create_subscription(Clock, "/clock", lambda m, info: progress.on_clock(
            m.clock.sec + m.clock.nanosec * 1e-9, info["source_timestamp"] * 1e-9), clock_qos)
        self.node.create_subscription(TaskStatus, "/referee/status", self._ours(progress.on_status),
                                      status_qos)
        # /sim/faults is latched too (vehicle_dynamics publishes it when the active set changes)
        self.node.create_subscription(ActiveFaults, "/sim/faults", self._ours(progress.on_faults), status_qos)
        self._subscriptions = 4  # and /sim/vehicle_status, created once the clock runs
        self._progress = progress
        self._run_id = run_id
        self._vehicle_status_sub: Any = None  # once the clock runs (see spin_once)
        # a wait-set executor: a poll takes only the latest sample of each subscription
        self.executor = self._probe.executor

    def spin_once(self, timeout_s: float) -> None:
        """Handle what has arrived (at most a few callbacks), then sleep out the rest of timeout_s."""
        deadline = time.monotonic() + timeout_s
        if self._vehicle_status_sub is None and self._progress.first_wall is not None:
            # only after the start gate opened (it counts the subscribers of /sim/vehicle_status)
            from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

            from qrsim_ros.msg import VehicleStatus

            qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT,
                             history=HistoryPolicy.KEEP_LAST)
            self._vehicle_status_sub = self.node.create_subscription(
                VehicleStatus, "/sim/vehicle_status", self._ours(self._progress.on_vehicle_status), qos)
        self._take_ready()
        left = deadline - time.monotonic()
        if left > 0:
            time.sleep(left)

    def _take_ready(self) -> None:
        """Run every callback ready now, from one wait set (``spin_once`` would build a wait set of
        every subscription for each one)."""
        from rclpy.executors import ShutdownException, TimeoutException

        # subscriptions of depth 1: at most one callback each is ready; a second wait set ends the poll
        for _ in range(self._subscriptions + 1):
            try:
                handler, _entity, _node = self.executor.wait_for_ready_callbacks(timeout_sec=0.0)
            except (TimeoutException, ShutdownException):
                return
            handler()
            handler.result()  # raise what the callback raised

    def _ours(self, callback: Callable[[Any], None]) -> Callable[[Any], None]:
        """``callback`` for the messages of this run only (run_id; another run's in the domain: ignored)."""
        def filtered(msg: Any) -> None:
            if not self._run_id or msg.run_id in ("", self._run_id):
                callback(msg)
        return filtered

    def close(self) -> None:
        self._probe.close()


# --- processes ------------------------------------------------------------------------------------------

@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    thread: threading.Thread | None = None
    required: bool = True  # (not used for the verdict: supervision.exits.classify_exit decides by name)
    signalled: bool = False  # the launcher asked it to stop
    exit_seen: bool = False  # its exit was judged (classify_exit)
    stop_s: float | None = None  # wall seconds from the launcher's SIGINT to its exit


class Launcher:
    """Starts the planned nodes, watches them, and stops them all."""

    def __init__(self, specs: list[NodeSpec], resolved: ResolvedScenario, args: argparse.Namespace,
                 console: Console, fork_server: ForkServer | None = None) -> None:
        self.specs = specs
        self.resolved = resolved
        self.args = args
        self.console = console
        self.children: list[Child] = []
        self.died: list[tuple[str, int]] = []
        self.killed: list[str] = []  # needed SIGKILL: a failure (it also leaves DDS files in /dev/shm)
        self.unclean: list[str] = []  # exited with an error while stopping: a failure
        self.record_failed = False  # the recorder stopped early (its bag could not be written)
        self.record_required = bool(getattr(args, "record_required", False))
        self.normal_end = normal_end_processes(specs)  # whose status 0 ends the run normally
        self.progress = RunProgress()
        self.stop_reason: str | None = None
        self._signals = 0
        self.fork_server: ForkServer | None = fork_server  # starts the nodes (None: as programs)
        # locked while this launcher lives: a later launcher removes it if this one is SIGKILLed
        self._tmpdir = LockedTempDir()
        self._tmp = self._tmpdir.path

    # commands
    def commands(self) -> list[tuple[str, list[str], bool]]:
        """(name, argv, required) per process."""
        if self.args.single_process:
            plan_file = self._tmp / "plan.json"
            # The recorder keeps its own process: it must not share the simulation's executor, and it
            # is stopped after the nodes it records.
            qrsim_specs = [s for s in self.specs if s.package == PACKAGE and s.executable != RECORDER]
            plan_file.write_text(json.dumps([s.to_dict() for s in qrsim_specs], indent=1), encoding="utf-8")
            out = [("single_process", [sys.executable, "-m", "qrsim_ros.ros.single_process",
                                       "--plan", str(plan_file)], True)]
            others = [s for s in self.specs if s not in qrsim_specs]
        else:
            out, others = [], self.specs
        for spec in others:
            exe = find_executable(spec)
            assert exe is not None
            params = self._tmp / f"{spec.name}.yaml"
            params.write_text(yaml.safe_dump(spec.params_file_content(), sort_keys=False), encoding="utf-8")
            argv = [sys.executable, exe] if spec.package == PACKAGE else [exe]
            out.append((spec.name, [*argv, *spec.arguments, *spec.ros_arguments(params)],
                        spec.package == PACKAGE))
        return out

    def _spawn(self, commands: list[tuple[str, list[str], bool]]) -> None:
        for name, argv, required in commands:
            env = child_environment()
            own: tuple[str, ...] = ()
            if name == "single_process":
                env.setdefault("RCUTILS_CONSOLE_OUTPUT_FORMAT", SINGLE_PROCESS_LOG_FORMAT)
                own = tuple(f"[{s.name}] " for s in self.specs if s.package == PACKAGE)
            proc = self._forked(argv, env) if name != "single_process" else None
            if proc is None:
                proc = process_group.start(argv, die_with_parent=True, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, env=env)
            thread = threading.Thread(target=_forward, args=(proc, name, self.console, own), daemon=True,
                                      name=f"fwd-{name}")
            thread.start()
            self.children.append(Child(name, proc, thread, required))
            self.console.line(f"[{PROG}] started {name} (pid {proc.pid})")

    def _forked(self, argv: list[str], env: dict[str, str]) -> Any:
        """A child of the fork server running ``argv`` (``python PROGRAM ARGS``: our nodes), or None: not
        ours, no server, or it failed (said once; every node then starts as a program)."""
        server = self.fork_server
        if server is None or len(argv) < 2 or argv[0] != sys.executable:
            return None
        try:
            server.wait_ready()
            return server.spawn(argv[1:], env)
        except OSError as exc:
            self.console.line(f"[{PROG}] fork server: {exc}; starting the nodes as programs")
            self.fork_server = None
            return None

    def _ready(self, listener: StatusListener, spec: NodeSpec) -> bool:
        """The node exists in the graph and has subscribed to a vehicle topic or the fleet's ground truth
        (/sim/vehicle_status): its inputs are up. /sim/run_members does not count: every node subscribes
        to it first thing, before it has read its parameters and scenario (a node that is about to fail
        on a bad parameter must not release the clock owner)."""
        # rclpy: only once a listener runs
        from qrsim_ros.ros.latest_samples import helper_node_name
        from qrsim_ros.ros.run_identity import RUN_MEMBERS_TOPIC

        # A node's on-demand inputs are subscribed by its unspun helper node (LatestSamples).
        for name in (spec.name, helper_node_name(spec.name)):
            try:
                subs = listener.node.get_subscriber_names_and_types_by_node(name, spec.namespace)
            except Exception:  # not discovered yet (or no such helper)
                continue
            if any(topic.startswith(("/uav", "/sim/")) and topic != RUN_MEMBERS_TOPIC for topic, _ in subs):
                return True
        return False

    def start(self, listener: StatusListener | None) -> None:
        """Start every node; the clock owner last, once the others are subscribed to their inputs.

        Without that barrier the clock would run before slow starters (scenario loading, terrain
        generation) subscribe, and they would miss the first ticks. Single-process mode orders the
        construction instead.
        """
        commands = self.commands()
        first = [c for c in commands if c[0] != CLOCK_OWNER]
        last = [c for c in commands if c[0] == CLOCK_OWNER]
        self._spawn(first)
        if not last:
            return
        skip = (CLOCK_OWNER, *NOT_AWAITED)
        awaited = [s for s in self.specs if s.package == PACKAGE and s.name not in skip]
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        next_status = 0.0
        while listener is not None and self.stop_reason is None:
            waiting = [s.name for s in awaited if not self._ready(listener, s)]
            if not waiting:
                break
            now = time.monotonic()
            if now > deadline:
                self.console.line(f"[{PROG}] after {STARTUP_TIMEOUT_S:g} s still waiting for "
                                  f"{', '.join(waiting)}: starting {CLOCK_OWNER} anyway")
                break
            if now >= next_status:
                self.console.status(f"[{PROG}] starting: waiting for {', '.join(waiting)}")
                next_status = now + (0.25 if self.console.tty else STATUS_PERIOD_S)
            listener.spin_once(0.05)
            self._check_children()
        if self.stop_reason is None:
            self._spawn(last)

    # main loop
    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals += 1
        if self.stop_reason is None:
            self.stop_reason = "interrupted (SIGINT)" if signum == signal.SIGINT else "terminated (SIGTERM)"

    def _check_children(self) -> None:
        """Judge every child that ended before the launcher asked it to (``supervision.exits.classify_exit``):
        the clock owner's status 0 is the normal end; any other node's end, status 0 or a SIGTERM from
        outside included, is a failure that stops the run (the recorder's full disk only with
        --record-required)."""
        duration = float(self.args.duration or 0.0)
        for child in self.children:
            if child.exit_seen or child.signalled:
                continue
            rc = child.proc.poll()
            if rc is None:
                continue
            child.exit_seen = True
            verdict = classify_exit(child.name, rc, requested=False, record_required=self.record_required,
                                    normal_end=self.normal_end)
            if verdict.failure and not verdict.ends_run:  # the recorder's full disk: go on without it
                self.record_failed = True
                self.console.line(f"[{PROG}] {verdict.reason}")
            elif verdict.failure:
                self.died.append((child.name, rc))
            reason = verdict.reason
            if not verdict.failure and child.name in (CLOCK_OWNER, "single_process") and duration > 0:
                reason = f"--duration {duration:g} s reached"
            if verdict.ends_run and self.stop_reason is None:
                self.stop_reason = reason

    def watch(self, listener: StatusListener | None) -> None:
        duration = float(self.args.duration or 0.0)
        next_status = 0.0
        while self.stop_reason is None:
            if listener is not None:
                listener.spin_once(0.05)
            else:
                time.sleep(0.05)
            self._check_children()
            if duration > 0 and self.progress.sim_elapsed_s >= duration - 1e-9:
                self.stop_reason = self.stop_reason or f"--duration {duration:g} s reached"
            if self.progress.done:
                reason = self.progress.status.done_reason or "done"
                self.stop_reason = self.stop_reason or f"episode done ({reason})"
            now = time.monotonic()
            if now >= next_status:
                self.console.status(f"[{PROG}] {self.progress.line()}")
                next_status = now + (0.25 if self.console.tty else STATUS_PERIOD_S)

    def stop(self, listener: StatusListener | None) -> None:
        """SIGINT every child, then SIGTERM, then SIGKILL after the timeouts; reap them all."""
        self.console.clear_status()
        escalated: dict[str, str] = {}
        if self.stop_reason is not None and self.stop_reason.startswith("--duration"):
            # The clock owner ends a --duration run by itself (it flushes its last messages first):
            # give it that moment before the others are signalled.
            owner = [c for c in self.children if c.name in (CLOCK_OWNER, "single_process")]
            deadline = time.monotonic() + DURATION_GRACE_S
            while any(c.proc.poll() is None for c in owner) and time.monotonic() < deadline \
                    and self._signals == 0:
                if listener is not None:
                    listener.spin_once(0.05)
                else:
                    time.sleep(0.05)
                self._check_children()
        # The recorder last: it takes the others' final messages before it closes the bag.
        for group in ([c for c in self.children if c.name != RECORDER],
                      [c for c in self.children if c.name == RECORDER]):
            self._stop_group(group, escalated, listener)
        timed = [c for c in self.children if c.stop_s is not None]
        if timed:
            slowest = max(timed, key=lambda c: c.stop_s or 0.0)
            self.console.line(f"[{PROG}] {len(timed)} process{'es' * (len(timed) != 1)} stopped after "
                              f"SIGINT; slowest {slowest.name} in {slowest.stop_s:.2f} s")
        for c in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.proc.wait(timeout=5.0)
            if c.thread is not None:
                c.thread.join(timeout=2.0)
            rc = c.proc.returncode
            if c.exit_seen:  # ended before it was asked to: judged already
                continue
            if rc is None or escalated.get(c.name) == "SIGKILL":
                self.killed.append(c.name)
                continue
            c.exit_seen = True
            # Exiting by the signal we sent is a clean stop; any other status is not.
            verdict = classify_exit(c.name, rc, requested=True, record_required=self.record_required)
            if verdict.failure and c.name == RECORDER and rc == ExitStatus.RECORDER_FAILED \
                    and not self.record_required:
                self.record_failed = True  # the last file did not fit
            elif verdict.failure:
                self.unclean.append(verdict.reason)

    def _stop_group(self, children: list[Child], escalated: dict[str, str],
                    listener: StatusListener | None) -> None:
        """SIGINT, then SIGTERM, then SIGKILL after the timeouts, until these children have exited."""
        self._check_children()  # one that ended by itself meanwhile is judged as such, not as stopped
        running = [c for c in children if c.proc.poll() is None]
        for c in running:
            c.signalled = True
        seen = [self._signals]  # another Ctrl-C while waiting: escalate at once
        names = {c.proc.pid: c.name for c in running}

        def escalate(sig: signal.Signals, procs: list[subprocess.Popen[bytes]]) -> None:
            seen[0] = self._signals
            who = [names[p.pid] for p in procs]
            self.console.line(f"[{PROG}] sending {sig.name} to " + ", ".join(who))
            escalated.update((name, sig.name) for name in who)

        def idle(seconds: float) -> None:
            if listener is not None:
                listener.spin_once(seconds)
            else:
                time.sleep(seconds)

        exited_s = process_group.stop([c.proc for c in running], idle=idle, on_escalate=escalate,
                                    interrupted=lambda: self._signals != seen[0])
        for c in running:
            c.stop_s = exited_s.get(c.proc.pid)

    def cleanup(self) -> None:
        self._tmpdir.cleanup()

    def exit_status(self) -> int:
        """The command's exit status for what happened (the module docstring's table), --plot aside."""
        if self.died or self.killed or self.unclean:
            return ExitStatus.FAILED
        return ExitStatus.RECORDER_FAILED if self.record_failed else ExitStatus.OK

    # summary
    def summary(self, wall_s: float) -> str:
        r, p, st = self.resolved, self.progress, self.progress.status
        name = Path(r.config).stem
        lockstep = {None: "", True: ", lockstep", False: ", free-running"}[self.args.lockstep]
        mode = "one process" if self.args.single_process else f"{len(self.children)} processes"
        text = [f"Summary: {name} (seed {r.seed}, {r.num_vehicles} vehicle{'s' * (r.num_vehicles != 1)}"
                f"{lockstep}, {mode}) stopped: {self.stop_reason}."]
        rtf = p.real_time_factor
        if p.first_wall is None and st is not None:
            # a short fast run can end before this listener's /clock subscription is discovered; the
            # referee's latched status still arrives (transient local)
            text.append(f"It simulated {st.time:.2f} s in {wall_s:.1f} s of wall time (the referee's last "
                        "status; no /clock reached the launcher, so no real-time factor).")
        elif p.first_wall is None:
            text.append(f"No /clock was received in {wall_s:.1f} s of wall time.")
        else:
            rtf_text = f"real-time factor {rtf:.2f}" if rtf is not None else "real-time factor n/a"
            text.append(f"It simulated {p.sim_elapsed_s:.2f} s in {wall_s:.1f} s of wall time "
                        f"({rtf_text} while the clock ran).")
        if st is None:
            text.append("No task status was received from the referee.")
        else:
            if r.task_type == "search_rescue" or st.persons_total:
                text.append(f"Persons found: {st.persons_found} of {st.persons_total}.")
            text.append(f"Reward: {st.cumulative_reward:.6g} after {st.step} task steps"
                        f"{' (episode done: ' + st.done_reason + ')' if st.done else ''}.")
        faults = p.command_faults()
        if faults:
            text.append(f"Commands: {faults}.")
        bag = bag_dir(self.specs)
        if bag is not None:
            text.append(f"Bag: {bag} ({describe_bag(bag)}).")
        if self.died:
            text.append("Died: " + ", ".join(f"{n} ({describe_exit(rc)})" for n, rc in self.died) + ".")
        if self.killed:
            text.append("Needed SIGKILL: " + ", ".join(self.killed) + ".")
        if self.unclean:
            text.append("Exited with an error while stopping: " + ", ".join(self.unclean) + ".")
        if self.record_failed:
            text.append("Recording failed: the recorder could not write the bag and stopped early (its "
                        "complete files are kept; see its error line above).")
        if not self.died and not self.unclean and not self.killed and not self.record_failed:
            text.append(f"All {len(self.children)} process{'es' * (len(self.children) != 1)} "
                        "stopped cleanly.")
        return " ".join(text)


# --- the command -------------------------------------------------------------------------------------------

def plan_for_args(args: argparse.Namespace) -> tuple[list[NodeSpec], ResolvedScenario]:
    """``launch_plan.plan`` for the command-line arguments (the launch files' call, typed)."""
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration >= 0):
        raise CliError(f"--duration {args.duration!r} must be a number of simulated seconds >= 0")
    for option, name in (("--num-vehicles", "num_vehicles"), ("--real-time-factor", "real_time_factor"),
                         ("--duration", "duration_s")):  # the nodes' ranges (core.common.limits)
        value, limit = getattr(args, name.removesuffix("_s")), LIMITS[name]
        if value is not None and not limit.contains(value):
            raise CliError(f"{option} {shorten(value)} must be {limit.allowed()} ({limit.reason})")
    record: bool | str = args.record if isinstance(args.record, bool) else str(args.record)
    if (getattr(args, "plot", False) or getattr(args, "record_required", False)) and record is False:
        record = True  # --plot / --record-required without --record: the default bag directory
    try:
        mavlink = bool(getattr(args, "mavlink", False))
        resolved = resolve_scenario(args.scenario, args.variant, args.num_vehicles, args.seed,
                                    mavlink=mavlink)
        node_parameters = parse_node_parameters(args.params)
        if resolved.mavlink and getattr(args, "network", False):  # MAVLink clients on other machines too
            node_parameters.setdefault("mavlink_bridge", {}).setdefault("mavlink_network", True)
        specs = plan(args.scenario, args.variant, args.num_vehicles, args.seed, use_rviz=args.use_rviz,
                     record=record, autopilot=args.autopilot, lockstep=args.lockstep,
                     real_time_factor=args.real_time_factor, duration_s=float(args.duration or 0.0),
                     node_parameters=node_parameters, resolved=resolved, mavlink=mavlink,
                     foxglove=getattr(args, "foxglove", None),
                     foxglove_address="0.0.0.0" if getattr(args, "network", False) else "127.0.0.1")
    except PlanError as exc:
        raise CliError(str(exc)) from None
    return specs, resolved


def prepare(args: argparse.Namespace) -> tuple[list[NodeSpec], ResolvedScenario, list[str]]:
    """The plan for the arguments, minus nodes that cannot start here (with a note for each)."""
    specs, resolved = plan_for_args(args)
    notes: list[str] = []
    keep: list[NodeSpec] = []
    missing: list[str] = []
    for spec in specs:
        if find_executable(spec) is not None:
            keep.append(spec)
        elif spec.executable == "rviz2":
            notes.append("rviz2 is not on PATH (it needs a ROS 2 distribution): not starting RViz")
        else:
            missing.append(spec.executable)
    if missing:
        raise CliError(f"node executable(s) not installed: {', '.join(missing)} (searched "
                       f"{', '.join(str(d) for d in executable_dirs())}; after adding a node to "
                       "QRSIM_NODES in CMakeLists.txt run './qrsim exec -- true' to refresh the colcon "
                       "install)")
    bag = bag_dir(keep)
    if bag is not None:
        try:  # before any node starts: writable, not a bag already, some free space
            check_record_dir(bag)
        except PlanError as exc:
            raise CliError(str(exc).replace("record=", "--record ", 1)) from None
    return keep, resolved, notes


def remove_leftovers(console: Console) -> None:
    """Remove what killed runs left behind (stale scratch directories, dead DDS processes' shared
    memory; ``cli.leftovers``) and say so in one line."""
    dirs = remove_stale_tempdirs()
    shm = remove_stale_shm()
    if dirs or shm:
        console.line(f"[{PROG}] removed leftovers of killed runs: {len(dirs)} scratch "
                     f"director{'ies' if len(dirs) != 1 else 'y'}, {len(shm)} shared-memory file"
                     f"{'s' * (len(shm) != 1)} of dead DDS processes")


def run(args: argparse.Namespace) -> int:
    """Plan, start, watch, stop, summarise. 0 clean, 1 a node died or needed SIGKILL, 2 bad input."""
    # first: its imports run while the launcher plans and checks the domain
    fork_server = None if args.single_process else ForkServer.start(FORK_SERVER_PRELOAD, child_environment())
    try:
        return _run(args, fork_server)
    finally:
        if fork_server is not None:
            fork_server.close()


def _run(args: argparse.Namespace, fork_server: ForkServer | None) -> int:
    try:
        specs, resolved, notes = prepare(args)
        domain_id, auto = resolve_domain(args)
        if not claim_graph(domain_id):  # a graph of this machine: known at once, whatever the load
            raise domain_taken(domain_id, "another qrsim launch on this machine")
    except CliError as exc:
        return report(PROG, exc)
    network = bool(getattr(args, "network", False))
    apply_dds_environment(domain_id, network)
    console = Console(sys.stdout)
    remove_leftovers(console)
    for note in notes:
        console.line(f"[{PROG}] {note}")
    launcher = Launcher(specs, resolved, args, console, fork_server)
    participants = count_participants(domain_id)  # before the launcher's own participant binds its ports
    listener: StatusListener | None = None
    try:
        listener = StatusListener(launcher.progress, resolved.run_id)
    except Exception as exc:  # the run goes on without a status line (and a start-up barrier)
        console.line(f"[{PROG}] no status line: {exc}")
    if listener is not None:
        try:
            unsure = check_domain_free(listener, domain_id, participants)
            if unsure:
                console.line(f"[{PROG}] warning: {unsure}")
        except CliError as exc:  # nothing started yet
            listener.close()
            launcher.cleanup()
            return report(PROG, exc)
    chosen = " (free, chosen by --domain-id auto)" if auto else ""
    console.line(f"[{PROG}] DDS: ROS_DOMAIN_ID {domain_id}{chosen}, "
                 + ("every interface (--network)" if network else "loopback only")
                 + f"; an autopilot joins with: export ROS_DOMAIN_ID={domain_id}")
    console.line(f"[{PROG}] {Path(resolved.config).stem}: seed {resolved.seed}, {resolved.num_vehicles} "
                 f"vehicle(s), run id {resolved.run_id}; nodes: {', '.join(s.name for s in specs)}"
                 f"{' (one process)' if args.single_process else ''}")
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, launcher._on_signal)
    t0 = time.monotonic()
    try:
        launcher.start(listener)
        launcher.watch(listener)
    finally:
        if launcher.stop_reason is None:
            launcher.stop_reason = "launcher error"
        launcher.stop(listener)
        launcher.cleanup()
        # The run is over: later SIGINT/SIGTERMs are ignored, not put back to Python's handlers. A Ctrl-C
        # that races the episode's own end would otherwise raise KeyboardInterrupt, or during the
        # interpreter's shutdown (which resets handled signals to SIG_DFL, ignored ones stay) kill the
        # process, and turn a clean run's exit status into -2.
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        console.clear_status()
        # the summary before the listener's DDS teardown, which is the one step left that can block
        print(launcher.summary(time.monotonic() - t0), flush=True)
        if listener is not None:
            close_listener(listener, launcher.exit_status())
    status = launcher.exit_status()
    if getattr(args, "plot", False):
        status = max(status, plot_run(specs))
    return status


def close_listener(listener: StatusListener, status: int) -> None:
    """Close the status listener (its DDS participant) within ``LISTENER_CLOSE_DEADLINE_S``: a teardown
    that blocks (in DDS, under load) ends the launcher with the run's ``status``, a warning line and
    every thread's stack, since every node has stopped and the summary is out."""
    from qrsim_ros.ros.node import StopWatchdog

    deadline = StopWatchdog(LISTENER_CLOSE_DEADLINE_S, LISTENER_CLOSE_DEADLINE_S, owner="the launcher")
    deadline.teardown(status)
    deadline.step = "closing the status listener"
    deadline.start("the run's end")
    try:
        listener.close()
    finally:
        deadline.cancel()


def plot_run(specs: Sequence[NodeSpec]) -> int:
    """--plot: render the run's bag with ``qrsim plot`` (into BAG/plots); 1 if nothing could be drawn."""
    from qrsim_ros.cli.plot import render_bag

    bag = bag_dir(specs)
    if bag is None:
        print(f"{PROG}: --plot: the run recorded no bag, nothing to plot", file=sys.stderr)
        return 1
    return render_bag(bag, prefix=f"[{PROG}] plot")


if __name__ == "__main__":
    sys.exit(main())

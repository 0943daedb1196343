"""What both launchers do around the launch plan (``launch_plan.plan``): the launch files' string
arguments and their meaning, the node processes' environment, and the checks made before any node
starts (the record directory, third-party executables, installed executables). Nothing here imports
rclpy or launch: ``launch_description`` (``ros2 launch``) and ``cli.launch`` (``qrsim launch``) call it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from qrsim_ros.core.common.limits import FOXGLOVE_PORT
from qrsim_ros.dds import DomainError, dds_environment, domain_id_from_environment
from qrsim_ros.launch_plan import (
    FAMILY_VARIANTS,
    LAUNCH_FAMILIES,
    PACKAGE,
    NodeSpec,
    PlanError,
    plan,
)

#: The launch files' arguments: (name, description). Defaults come from ``launch_defaults``.
LAUNCH_ARGUMENTS: tuple[tuple[str, str], ...] = (
    ("variant", "scenario variant, e.g. 2c for search_rescue (empty: the family's default; "
                "keep_spot has none)"),
    ("num_vehicles", "number of vehicles (0: the scenario file's)"),
    ("seed", "random seed (-1: the scenario file's; 0: from the clock, resolved once for all nodes; "
             "1..2147483647: that seed)"),
    ("use_rviz", "start RViz (true/false)"),
    ("record", "record a rosbag2 bag: false, true (bags/<scenario>_<time>) or an output directory"),
    ("autopilot", "fly the built-in example autopilot (true/false)"),
    ("mavlink", "every agent vehicle a PX4 vehicle on MAVLink, as PX4 SITL instance i (API link udp 14540+i, "
                "ground station 14550; true/false; docs/MAVLINK.md)"),
    ("foxglove", f"serve the graph on a Foxglove WebSocket on 127.0.0.1: false, true (port {FOXGLOVE_PORT}) "
                 "or a port (0: any free one); open ws://localhost:PORT in Foxglove or Lichtblick"),
)

#: Launch arguments of the supervision (how a launch ends), not of the plan: (name, description).
#: Defaults: ``SUPERVISION_DEFAULTS``.
SUPERVISION_ARGUMENTS: tuple[tuple[str, str], ...] = (
    ("keep_alive", "keep the graph running after the episode is done (true/false; default false: the end "
                   "of the episode ends the launch, as with qrsim launch)"),
    ("record_required", "end the whole launch, as a failure, if the recorder cannot write the bag (a full "
                        "disk) (true/false; default false: the simulation goes on without the recorder)"),
)
SUPERVISION_DEFAULTS = {"keep_alive": "false", "record_required": "false"}


def launch_defaults(family: str) -> dict[str, str]:
    """The launch files' default argument values (strings)."""
    if family not in LAUNCH_FAMILIES:
        raise PlanError(f"no launch file for {family!r}; families: {', '.join(LAUNCH_FAMILIES)}")
    return {"variant": FAMILY_VARIANTS[family][1] or "", "num_vehicles": "0", "seed": "-1",
            "use_rviz": "false", "record": "false", "autopilot": "true", "mavlink": "false",
            "foxglove": "false"}


def parse_bool(name: str, text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    t = str(text).strip().lower()
    if t in ("true", "1", "yes", "on"):
        return True
    if t in ("false", "0", "no", "off", ""):
        return False
    raise PlanError(f"{name}={text!r} must be true or false")


def parse_int(name: str, text: str | int) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise PlanError(f"{name}={text!r} must be an integer") from None


def parse_record(text: str | bool) -> bool | str:
    if isinstance(text, bool):
        return text
    t = str(text).strip()
    if t.lower() in ("true", "1", "yes", "on"):
        return True
    if t.lower() in ("false", "0", "no", "off", ""):
        return False
    return t


def parse_foxglove(text: str | bool) -> int | None:
    """The launch files' ``foxglove``: false/no/off/'' (None: no bridge), true/yes/on (``FOXGLOVE_PORT``)
    or a port number (0 included: any free port)."""
    if isinstance(text, bool):
        return FOXGLOVE_PORT if text else None
    t = str(text).strip().lower()
    if t in ("true", "yes", "on"):
        return FOXGLOVE_PORT
    if t in ("false", "no", "off", ""):
        return None
    return parse_int("foxglove", text)


def plan_from_launch_arguments(family: str, values: Mapping[str, str]) -> list[NodeSpec]:
    """``plan`` from the launch files' string arguments (``ros2 launch ... seed:=3 use_rviz:=true``)."""
    args = {**launch_defaults(family), **{k: v for k, v in values.items() if v is not None}}
    unknown = sorted(set(args) - {name for name, _ in LAUNCH_ARGUMENTS})
    if unknown:
        raise PlanError(f"unknown launch argument(s): {', '.join(unknown)}")
    return plan(
        family,
        variant=args["variant"] or None,
        num_vehicles=parse_int("num_vehicles", args["num_vehicles"]),
        seed=parse_int("seed", args["seed"]),
        use_rviz=parse_bool("use_rviz", args["use_rviz"]),
        record=parse_record(args["record"]),
        autopilot=parse_bool("autopilot", args["autopilot"]),
        mavlink=parse_bool("mavlink", args["mavlink"]),
        foxglove=parse_foxglove(args["foxglove"]),
    )


def split_installed(specs: Iterable[NodeSpec], lib_dir: str | os.PathLike[str]) -> tuple[
        list[NodeSpec], list[NodeSpec]]:
    """(specs whose qrsim_ros executable exists in ``lib_dir``, specs whose executable is missing).

    Third-party nodes (rviz2) are always in the first list: their packages are looked up elsewhere.
    """
    present, missing = [], []
    for s in specs:
        if s.package != PACKAGE or (Path(lib_dir) / s.executable).is_file():
            present.append(s)
        else:
            missing.append(s)
    return present, missing


def node_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the Python settings of the node processes (both launchers): ``PYTHONOPTIMIZE=1``
    unless ``env`` sets PYTHONOPTIMIZE itself (kept, "0" or "" included: the user's choice).

    Why -O: the message classes rclpy generates check every assigned field with ``assert`` (type and
    range, element by element for arrays), on every message built or received; the graph's traffic is
    thousands of messages per simulated second, and those checks measured about 15 % of its CPU with 20
    vehicles (docs/TEAMS.md "Scale"). Our nodes assign converted values (``float()``, ``int()``,
    ``array('d')``), and the C conversion at publish time still rejects a value of the wrong kind. The
    asserts in qrsim_ros itself only narrow types for the checker."""
    out = dict(env)
    out.setdefault("PYTHONOPTIMIZE", "1")
    return out


def launch_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables the launch files set for their nodes, given the environment ``env`` of ``ros2
    launch``: Fast DDS on loopback only (``qrsim_ros.dds.dds_environment``; a Fast DDS profile the user
    set is kept) and ``node_environment``'s. PlanError, one line, if ``env``'s ROS_DOMAIN_ID is not
    0..232."""
    try:
        domain_id_from_environment(env)
    except DomainError as exc:
        raise PlanError(f"{exc}; choose another, e.g. ROS_DOMAIN_ID=42 ros2 launch ...") from None
    full = node_environment(dds_environment(env))
    return {k: v for k, v in full.items() if env.get(k) != v}


def parse_supervision(values: Mapping[str, str | bool]) -> dict[str, bool]:
    """``keep_alive`` and ``record_required`` from the launch files' strings (``SUPERVISION_ARGUMENTS``)."""
    args = {**SUPERVISION_DEFAULTS, **{k: v for k, v in values.items() if v is not None}}
    return {name: parse_bool(name, args[name]) for name, _ in SUPERVISION_ARGUMENTS}


def end_with_episode(specs: Iterable[NodeSpec], keep_alive: bool = False) -> list[NodeSpec]:
    """The plan for a launcher that learns of the episode's end from a process exit (``ros2 launch``):
    the referee gets ``exit_when_done`` (it exits with status 0 once the episode is done), unless
    ``keep_alive``."""
    out = list(specs)
    if keep_alive:
        return out
    return [NodeSpec(s.executable, s.name, s.namespace, {**s.parameters, "exit_when_done": True},
                     s.remappings, s.arguments, s.package) if s.executable == "referee" else s for s in out]


def missing_third_party(specs: Iterable[NodeSpec], find: Callable[[NodeSpec], bool]) -> list[str]:
    """The third-party executables of a plan (rviz2) that ``find`` does not find, with what needs them."""
    return [f"{s.executable} (package {s.package}; use_rviz:=true needs a ROS 2 distribution with it)"
            if s.executable == "rviz2" else f"{s.executable} (package {s.package})"
            for s in specs if s.package != PACKAGE and not find(s)]


#: The least free space a record directory must have before a run starts [bytes].
MIN_RECORD_FREE_BYTES = 1_000_000


def check_record_dir(bag: str | os.PathLike[str], min_free_bytes: int = MIN_RECORD_FREE_BYTES) -> None:
    """PlanError unless the bag directory ``bag`` can be created and written: it must not exist or be an
    empty directory, its nearest existing parent must be a writable directory, with at least
    ``min_free_bytes`` free. Checked before any node starts."""

    path = Path(os.path.abspath(os.fspath(bag)))
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise PlanError(f"record={path}: exists and is not an empty directory (a bag is never overwritten)")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise PlanError(f"record={path}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PlanError(f"record={path}: directory {existing} is not writable")
    try:
        free = shutil.disk_usage(existing).free
    except OSError as exc:
        raise PlanError(f"record={path}: cannot tell the free space of {existing}: {exc.strerror}") from None
    if free < min_free_bytes:
        raise PlanError(f"record={path}: only {free / 1e6:.2f} MB free on the file system of {existing} "
                        f"(at least {min_free_bytes / 1e6:.2f} MB needed)")

"""What every qrsim_ros node shares: the scenario parameter, typed parameter declaration, QoS, the
per-vehicle namespaces, stamps, and ``run_node`` (init, spin, clean shutdown on SIGINT/SIGTERM).

Nodes are thin: they declare parameters, load the scenario (the same YAML the in-process Simulator
uses), convert messages at the boundary with ``qrsim_ros.core.frames`` and call the core models.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from qrsim_ros.core.config_loader import ScenarioError
from qrsim_ros.core.scenario import Scenario, load_scenario
from qrsim_ros.core.validation import ConfigError

#: Sensor streams and commands: reliable so lockstep never loses an input; shallow queues.
QOS_RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
#: Latched data (robot_description, terrain grid, /tf_static).
QOS_LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)
#: /clock, as ROS 2's clock publishers use.
QOS_CLOCK = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)

MAP_FRAME = "map"
MAP_NED_FRAME = "map_ned"


class ParameterError(ValueError):
    """A node parameter is invalid; the message names it, its value and what is allowed."""


def vehicle_namespace(index: int) -> str:
    """Namespace of vehicle ``index`` (0-based): ``uav1`` ... ``uavN`` (no leading slash)."""
    return f"uav{index + 1}"


def base_link_frame(index: int) -> str:
    return f"{vehicle_namespace(index)}/base_link"


def base_link_frd_frame(index: int) -> str:
    return f"{vehicle_namespace(index)}/base_link_frd"


def stamp_from_seconds(t_s: float) -> Any:
    """builtin_interfaces/Time for a simulated time [s] (exact for multiples of 0.02 s)."""
    from builtin_interfaces.msg import Time

    ns = round(t_s * 1e9)
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def seconds_from_stamp(stamp: Any) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def tick_from_stamp(stamp: Any, dt_s: float = 0.02) -> int:
    """The simulator tick a stamp belongs to (stamps are exact multiples of dt)."""
    return round((stamp.sec * 1_000_000_000 + stamp.nanosec) / round(dt_s * 1e9))


def declare(node: Node, name: str, default: Any, description: str, *,
            lo: float | None = None, hi: float | None = None, read_only: bool = True,
            choices: Sequence[str] | None = None) -> Any:
    """Declare a typed parameter with a description (and range) and return its value, validated.

    Raises ParameterError naming the parameter, its value and the allowed range or choices.
    """
    desc = ParameterDescriptor(description=description, read_only=read_only)
    if lo is not None and hi is not None:
        if isinstance(default, bool):
            pass
        elif isinstance(default, int):
            desc.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
        elif isinstance(default, float):
            desc.floating_point_range = [
                FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)
            ]
    if choices:
        desc.additional_constraints = "one of: " + ", ".join(choices)
    try:
        value = node.declare_parameter(name, default, desc).value
    except Exception as exc:  # rclpy raises several types for a value outside the descriptor
        raise ParameterError(f"parameter {name!r}: {exc}") from None
    if lo is not None and hi is not None and not isinstance(value, (bool, str)) and not lo <= value <= hi:
        raise ParameterError(f"parameter {name!r}={value!r} outside [{lo}, {hi}]")
    if choices and value not in choices:
        raise ParameterError(f"parameter {name!r}={value!r} must be one of {', '.join(choices)}")
    return value


def declare_scenario(node: Node) -> Scenario:
    """Declare ``scenario`` (name or YAML path), ``seed`` and ``num_vehicles`` and load the scenario.

    ``seed`` -1 / ``num_vehicles`` 0 keep the file's values. Raises ParameterError on a bad scenario.
    """
    name = declare(node, "scenario", "search_rescue_2c",
                   "scenario name (config/<name>.yaml) or path to a scenario YAML file")
    seed = declare(node, "seed", -1, "random seed (-1: the scenario file's; 0: from the clock)",
                   lo=-1, hi=2**31 - 1)
    num = declare(node, "num_vehicles", 0, "number of vehicles (0: the scenario file's)", lo=0, hi=1000)
    overrides: dict[str, Any] = {}
    if seed >= 0:
        overrides["seed"] = seed
    if num > 0:
        overrides["num_vehicles"] = num
    try:
        scenario = load_scenario(name, overrides)
    except (ScenarioError, ConfigError) as exc:
        raise ParameterError(f"parameter 'scenario'={name!r}: {exc}") from None
    return scenario


def with_seed(scenario: Scenario, seed: int) -> Scenario:
    return replace(scenario, seed=seed)


def run_node(factory: Callable[[], Node], argv: Sequence[str] | None = None) -> int:
    """Create the node, spin it until SIGINT/SIGTERM or shutdown, clean up; return the exit status.

    A bad parameter (ParameterError/ConfigError at construction) prints one line and returns 1.
    """
    rclpy.init(args=list(argv) if argv is not None else sys.argv)
    # SIGTERM like SIGINT: rclpy's signal handler shuts the context down and the spin returns.
    signal.signal(signal.SIGTERM, lambda *_: rclpy.try_shutdown())
    node: Node | None = None
    try:
        node = factory()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (ParameterError, ConfigError) as exc:
        name = node.get_name() if node is not None else getattr(factory, "__name__", "node")
        print(f"[{name}] error: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0

"""Every node of a launch plan in one process, on one executor (``qrsim launch --single-process``).

    python -m qrsim_ros.ros.single_process --plan plan.json [--executor events|single]

``plan.json`` is a list of ``NodeSpec.to_dict()`` (``qrsim_ros.launch_plan``). Each spec's module
``qrsim_ros.nodes.<executable>`` must define one ``rclpy.node.Node`` subclass (or name it in a module
attribute ``NODE_CLASS``); it is constructed without arguments, as ``run_node`` does. Names, namespaces
and parameters reach the nodes through the process's global ROS arguments: one parameter file keyed
by every node's fully qualified name, so a node class needs no constructor arguments. A node whose
class name differs from the plan's name gets a node-specific ``__node`` remapping.

One process saves the ~70 MB and the DDS traffic of every extra process; the executor is
``rclpy.experimental.EventsExecutor`` (about 5x the callback throughput of the default) unless it is
not available, then ``SingleThreadedExecutor`` (``--executor single``). A bad parameter stops the
process at start with one line naming the node (exit status 1); SIGINT/SIGTERM, or a node setting its
``exit_status`` (vehicle_dynamics at ``duration_s``), end the spin: every node waits for its readers'
acknowledgements, is destroyed, then the context is shut down (exit status 0, or the node's).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from qrsim_ros.core.common.jit import load_kernels_reachable_from
from qrsim_ros.launch_plan import PACKAGE, NodeSpec

#: The node that publishes /clock (constructed last).
CLOCK_OWNER = "vehicle_dynamics"


class SingleProcessError(RuntimeError):
    """A planned node cannot be built in this process; the message names it."""


def node_class(module_name: str) -> type:
    """The Node subclass a node module defines (``NODE_CLASS`` if set, else the only one)."""
    from rclpy.node import Node

    module = importlib.import_module(module_name)
    named = getattr(module, "NODE_CLASS", None)
    if isinstance(named, type) and issubclass(named, Node):
        return named
    classes = [obj for obj in vars(module).values()
               if inspect.isclass(obj) and issubclass(obj, Node) and obj is not Node
               and obj.__module__ == module.__name__]
    if len(classes) != 1:
        found = ", ".join(c.__name__ for c in classes) or "none"
        raise SingleProcessError(f"{module_name}: expected one rclpy Node subclass (or NODE_CLASS), "
                                 f"found {found}")
    return classes[0]


def node_factory(spec: NodeSpec) -> Any:
    """What builds the node of ``spec``: its module's Node class, or for a registered sensor
    (``core.sensors.registry``) the generic sensor node bound to its name."""
    from qrsim_ros.core.sensors.registry import SENSORS

    if spec.executable in SENSORS:
        sensor_node = importlib.import_module(f"{PACKAGE}.nodes.sensor").SensorNode
        return functools.partial(sensor_node, spec.executable)
    return node_class(spec.module or "")


def load_plan(path: str | os.PathLike[str]) -> list[NodeSpec]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    specs = [NodeSpec.from_dict(d) for d in data]
    foreign = [s.name for s in specs if s.package != PACKAGE]
    if foreign:
        raise SingleProcessError(f"only qrsim_ros nodes run in one process, not: {', '.join(foreign)}")
    return specs


def global_ros_arguments(specs: Sequence[NodeSpec], classes: Sequence[type],
                         params_file: str | os.PathLike[str]) -> list[str]:
    """``--ros-args`` for rclpy.init: one parameter file for all nodes, node-specific renames."""
    content: dict[str, Any] = {}
    for spec in specs:
        content.update(spec.params_file_content())
    Path(params_file).write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
    args = ["--ros-args", "--params-file", os.fspath(params_file)]
    for spec, cls in zip(specs, classes, strict=True):
        default = _default_name(cls)
        if default is not None and default != spec.name:
            args += ["-r", f"{default}:__node:={spec.name}"]
        if spec.namespace not in ("", "/"):
            args += ["-r", f"{spec.name}:__ns:={spec.namespace}"]
    return args


def _default_name(cls: type) -> str | None:
    return getattr(cls, "NODE_NAME", None)


def make_executor(kind: str = "events") -> Any:
    """EventsExecutor when asked for and available, else SingleThreadedExecutor."""
    from rclpy.executors import SingleThreadedExecutor

    if kind == "events":
        try:
            from rclpy.experimental import EventsExecutor

            return EventsExecutor()
        except Exception:  # an rclpy without a working experimental executor
            pass
    return SingleThreadedExecutor()


def run(specs: Sequence[NodeSpec], executor_kind: str = "events") -> int:
    """Build every node, spin them on one executor until SIGINT/SIGTERM; the exit status."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.signals import SignalHandlerOptions

    from qrsim_ros.core.common.validation import ConfigError
    from qrsim_ros.ros.node import ACK_WAIT_S, ParameterError, wait_for_readers

    # The clock owner last: every other node exists (and subscribes) before the clock starts.
    specs = sorted(specs, key=lambda s: s.executable == CLOCK_OWNER)
    try:
        classes = [node_factory(spec) for spec in specs]
    except (ImportError, SingleProcessError) as exc:
        print(f"[single_process] error: {exc}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="qrsim_single_") as tmp:
        # SIGINT/SIGTERM only ask the loop below to stop: the nodes are destroyed while the context is
        # still valid (they may publish or log on the way out), then the context is shut down.
        stop: list[int] = []
        rclpy.init(args=[sys.argv[0], *global_ros_arguments(specs, classes, Path(tmp) / "params.yaml")],
                   signal_handler_options=SignalHandlerOptions.NO)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, _frame: stop.append(signum))
        nodes: list[Any] = []
        current = "single_process"
        context = rclpy.get_default_context()
        try:
            for spec, cls in zip(specs, classes, strict=True):
                current = spec.name
                nodes.append(cls())
            current = "single_process"
            load_kernels_reachable_from(*nodes)  # now, not in the first tick
            executor = make_executor(executor_kind)
            for node in nodes:
                executor.add_node(node)
            # spin_once with a timeout in a loop: EventsExecutor.spin() (Kilted wheels) neither runs
            # timers nor returns on shutdown; spin_once(timeout_sec) does both. A node also ends the
            # run by setting its ``exit_status`` (vehicle_dynamics after its duration_s), as in run_node.
            context = nodes[0].context if nodes else context
            while context.ok() and not stop and node_exit_status(nodes) is None:
                executor.spin_once(timeout_sec=0.1)
            if context.ok() and not stop:  # a node ended the run: what it published is handled first
                drain(executor)
        except (ParameterError, ConfigError) as exc:
            print(f"[{current}] error: {exc}", file=sys.stderr)
            return 1
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        finally:
            # what the nodes published reaches their readers first (wait_for_readers' docstring)
            if context.ok():
                try:
                    wait_for_readers(nodes, ACK_WAIT_S)
                except Exception as exc:  # a context going down under it: nothing left to wait for
                    print(f"[single_process] warning: while stopping: {exc!r}", file=sys.stderr)
            for node in reversed(nodes):
                try:
                    node.destroy_node()
                except Exception as exc:  # one node's cleanup must not keep the others alive
                    print(f"[{node.get_name()}] error while stopping: {exc}", file=sys.stderr)
            rclpy.try_shutdown()
    return node_exit_status(nodes) or 0


#: A drain ends after this long without a callback [s, wall] ...
DRAIN_IDLE_S = 0.1
#: ... or after this long in all [s, wall].
DRAIN_LIMIT_S = 2.0


def drain(executor: Any, idle_s: float = DRAIN_IDLE_S, limit_s: float = DRAIN_LIMIT_S) -> None:
    """Run the callbacks already due (the other nodes' handling of the clock owner's last ticks: a
    free-running run's sensors may lag a tick or two behind it) until none came for ``idle_s``, at most
    ``limit_s`` (spin_once returns early when it ran a callback)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        before = time.monotonic()
        executor.spin_once(timeout_sec=idle_s)
        if time.monotonic() - before >= idle_s:
            return


def node_exit_status(nodes: Sequence[Any]) -> int | None:
    """The first ``exit_status`` a node set to end the run (``run_node``'s rule), or None."""
    for node in nodes:
        own = getattr(node, "exit_status", None)
        if isinstance(own, int):
            return own
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qrsim_ros.ros.single_process",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", required=True, help="JSON list of NodeSpec dicts")
    parser.add_argument("--executor", choices=("events", "single"), default="events",
                        help="rclpy.experimental.EventsExecutor (default) or SingleThreadedExecutor")
    # ROS arguments, if any, are the nodes' business (given through the plan), not ours.
    args, _ros = parser.parse_known_args(argv)
    try:
        specs = load_plan(args.plan)
    except (OSError, ValueError, KeyError, SingleProcessError) as exc:
        print(f"[single_process] error: plan {args.plan}: {exc}", file=sys.stderr)
        return 1
    return run(specs, args.executor)


if __name__ == "__main__":
    sys.exit(main())

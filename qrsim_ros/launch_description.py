"""The launch description every ``launch/<family>.launch.py`` returns (ROS 2 distributions only).

The six launch arguments (variant, num_vehicles, seed, use_rviz, record, autopilot) are declared from
``launch_setup.LAUNCH_ARGUMENTS``; at launch time ``launch_setup.plan_from_launch_arguments`` computes the
node set, namespaces, remappings and parameters — the same plan the embedded launcher
(``qrsim launch``) starts — and each planned node becomes a ``launch_ros.actions.Node``. The nodes get
the DDS environment of ``launch_setup.launch_environment`` (Fast DDS on loopback only; ROS_DOMAIN_ID
checked, 0..232).
Imports ``launch``/``launch_ros``, so it is only importable where those exist.

Supervision (arguments ``keep_alive`` and ``record_required``, ``launch_setup.SUPERVISION_ARGUMENTS``),
the rules of ``qrsim launch`` through the same function (``supervision.exits.classify_exit``):

- Checked before any node starts, each a one-line error and nothing started: a third-party executable
  the plan needs (rviz2 for ``use_rviz:=true``) is not installed; the record directory is not writable,
  not empty or nearly full.
- Every node has an ``OnProcessExit`` handler. The end of the run (the referee exiting 0 once the
  episode is done: it gets ``exit_when_done`` unless ``keep_alive:=true``; vehicle_dynamics at its
  ``duration_s``; the user closing RViz) shuts the launch down. Any node ending before it was asked to
  (a crash, status 0, a SIGTERM from outside) shuts the whole launch down as a failure, as does the
  recorder's full disk with ``record_required:=true`` (without it the simulation goes on; the failure is
  reported when the run ends).
- The exit status of ``ros2 launch`` is ``LaunchService.run()``'s: 0 unless an exception escaped while
  the launch processed an event, then 1. A failure is therefore raised (``LaunchFailedError``) from the
  exit handler: launch logs it as one line ("Caught exception in launch ...: node wind_field died
  (exit status 1)"), shuts everything down and returns 1.
"""

from __future__ import annotations

import os
from typing import Any

from ament_index_python.packages import PackageNotFoundError, get_package_prefix
from launch.actions import (
    DeclareLaunchArgument,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
    SetEnvironmentVariable,
    Shutdown,
)
from launch.event_handlers import OnProcessExit
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from qrsim_ros import launch_plan, launch_setup
from qrsim_ros.supervision import exits


class LaunchFailedError(RuntimeError):
    """Raised from an event handler: launch prints it as one line, shuts down and returns status 1."""


def _installed(spec: launch_plan.NodeSpec) -> bool:
    """The node's executable is in its package's lib directory (the lookup launch_ros does)."""
    try:
        prefix = get_package_prefix(spec.package)
    except (PackageNotFoundError, ValueError):
        return False
    return os.access(os.path.join(prefix, "lib", spec.package, spec.executable), os.X_OK)


def generate(family: str) -> LaunchDescription:
    """The launch description of scenario family ``family`` (search_rescue, plume, ...)."""
    deferred: list[str] = []  # failures that did not end the run (the recorder's full disk)
    normal_end: list[str] = []  # the plan's processes whose status 0 ends the run normally

    def on_exit(name: str, record_required: bool, event: Any, context: Any) -> list[Any] | None:
        requested = bool(getattr(context, "is_shutdown", False))  # the launch is stopping everything
        verdict = exits.classify_exit(name, int(event.returncode), requested=requested,
                                            record_required=record_required, normal_end=normal_end)
        if verdict.failure and (verdict.ends_run or requested):
            raise LaunchFailedError(verdict.reason)
        if verdict.failure:
            deferred.append(verdict.reason)
            return [LogInfo(msg=verdict.reason)]
        if verdict.ends_run:
            if deferred:  # the run ended, but not everything went well: status 1
                raise LaunchFailedError(f"{verdict.reason}, but: {'; '.join(deferred)}")
            return [Shutdown(reason=verdict.reason)]
        return None

    def nodes(context: Any, *args: Any, **kwargs: Any) -> list[Any]:
        values = {name: LaunchConfiguration(name).perform(context)
                  for name, _ in launch_setup.LAUNCH_ARGUMENTS}
        # checked first: a bad ROS_DOMAIN_ID is one error line and nothing starts
        environment = [SetEnvironmentVariable(name, value) for name, value
                       in launch_setup.launch_environment({**os.environ, **context.environment}).items()]
        supervision = launch_setup.parse_supervision({name: LaunchConfiguration(name).perform(context)
                                                     for name, _ in launch_setup.SUPERVISION_ARGUMENTS})
        specs = launch_setup.plan_from_launch_arguments(family, values)
        specs = launch_setup.end_with_episode(specs, keep_alive=supervision["keep_alive"])
        normal_end[:] = exits.normal_end_processes(specs)
        # Everything is checked before the first node starts: a refusal leaves nothing running.
        absent = launch_setup.missing_third_party(specs, _installed)
        if absent:
            raise LaunchFailedError(f"not installed: {', '.join(absent)}; nothing was started")
        bag = launch_plan.bag_dir(specs)
        if bag is not None:
            launch_setup.check_record_dir(bag)
        lib_dir = f"{get_package_prefix('qrsim_ros')}/lib/qrsim_ros"
        specs, missing = launch_setup.split_installed(specs, lib_dir)
        notes = [LogInfo(msg=f"{s.executable} is not installed: not started") for s in missing]
        actions: list[Any] = []
        for spec in specs:
            node = Node(**spec.launch_kwargs())
            handler = OnProcessExit(target_action=node, on_exit=lambda event, ctx, name=spec.name: on_exit(
                name, supervision["record_required"], event, ctx))
            actions += [RegisterEventHandler(handler), node]
        return environment + notes + actions

    defaults = launch_setup.launch_defaults(family)
    arguments = [DeclareLaunchArgument(name, default_value=defaults[name], description=description)
                 for name, description in launch_setup.LAUNCH_ARGUMENTS]
    arguments += [DeclareLaunchArgument(name, default_value=launch_setup.SUPERVISION_DEFAULTS[name],
                                        description=description)
                  for name, description in launch_setup.SUPERVISION_ARGUMENTS]
    return LaunchDescription([*arguments, OpaqueFunction(function=nodes)])

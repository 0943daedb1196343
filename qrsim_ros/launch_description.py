"""The launch description every ``launch/<family>.launch.py`` returns (ROS 2 distributions only).

The six launch arguments (variant, num_vehicles, seed, use_rviz, record, autopilot) are declared from
``launch_plan.LAUNCH_ARGUMENTS``; at launch time ``launch_plan.plan_from_launch_arguments`` computes the
node set, namespaces, remappings and parameters — the same plan the embedded launcher
(``qrsim launch``) starts — and each planned node becomes a ``launch_ros.actions.Node``. The nodes get
the DDS environment of ``launch_plan.launch_environment`` (Fast DDS on loopback only; ROS_DOMAIN_ID
checked, 0..232).
Imports ``launch``/``launch_ros``, so it is only importable where those exist.
"""

from __future__ import annotations

import os
from typing import Any

from ament_index_python.packages import get_package_prefix
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, SetEnvironmentVariable
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from qrsim_ros import launch_plan


def generate(family: str) -> LaunchDescription:
    """The launch description of scenario family ``family`` (search_rescue, plume, ...)."""

    def nodes(context: Any, *args: Any, **kwargs: Any) -> list[Any]:
        values = {name: LaunchConfiguration(name).perform(context)
                  for name, _ in launch_plan.LAUNCH_ARGUMENTS}
        # checked first: a bad ROS_DOMAIN_ID is one error line and nothing starts
        environment = [SetEnvironmentVariable(name, value) for name, value
                       in launch_plan.launch_environment({**os.environ, **context.environment}).items()]
        specs = launch_plan.plan_from_launch_arguments(family, values)
        lib_dir = f"{get_package_prefix('qrsim_ros')}/lib/qrsim_ros"
        specs, missing = launch_plan.split_installed(specs, lib_dir)
        notes = [LogInfo(msg=f"{s.executable} is not installed: not started") for s in missing]
        return environment + notes + [Node(**spec.launch_kwargs()) for spec in specs]

    defaults = launch_plan.launch_defaults(family)
    arguments = [DeclareLaunchArgument(name, default_value=defaults[name], description=description)
                 for name, description in launch_plan.LAUNCH_ARGUMENTS]
    return LaunchDescription([*arguments, OpaqueFunction(function=nodes)])

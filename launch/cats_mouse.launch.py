"""Cats and mouse (QRSim 1A-1C, default 1a): the nodes of config/cats_mouse_<variant>.yaml.

    ros2 launch qrsim_ros cats_mouse.launch.py [variant:=1c use_rviz:=true]

Arguments: variant, num_vehicles, seed, use_rviz, record, autopilot (``ros2 launch qrsim_ros
cats_mouse.launch.py --show-args``). The node set, namespaces, remappings and parameters come from
``qrsim_ros.launch_plan.plan``, the same function the embedded launcher (``qrsim launch cats_mouse``) uses.
"""

from ament_index_python.packages import get_package_prefix
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from qrsim_ros import launch_plan

FAMILY = "cats_mouse"


def _nodes(context, *args, **kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name, _ in launch_plan.LAUNCH_ARGUMENTS}
    specs = launch_plan.plan_from_launch_arguments(FAMILY, values)
    lib_dir = f"{get_package_prefix('qrsim_ros')}/lib/qrsim_ros"
    specs, missing = launch_plan.split_installed(specs, lib_dir)
    notes = [LogInfo(msg=f"{s.executable} is not installed: not started") for s in missing]
    return notes + [Node(**spec.launch_kwargs()) for spec in specs]


def generate_launch_description():
    defaults = launch_plan.launch_defaults(FAMILY)
    arguments = [DeclareLaunchArgument(name, default_value=defaults[name], description=description)
                 for name, description in launch_plan.LAUNCH_ARGUMENTS]
    return LaunchDescription([*arguments, OpaqueFunction(function=_nodes)])

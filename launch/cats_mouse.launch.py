"""Cats and mouse (QRSim 1A-1C, default 1a): the nodes of config/cats_mouse_<variant>.yaml.

    ros2 launch qrsim_ros cats_mouse.launch.py [variant:=1c use_rviz:=true]

Arguments: variant, num_vehicles, seed, use_rviz, record, autopilot (``ros2 launch qrsim_ros
cats_mouse.launch.py --show-args``). The node set, namespaces, remappings and parameters come from
``qrsim_ros.launch_plan.plan``, the same function the embedded launcher (``qrsim launch cats_mouse``) uses.
"""

from qrsim_ros import launch_description

FAMILY = "cats_mouse"


def generate_launch_description():
    return launch_description.generate(FAMILY)

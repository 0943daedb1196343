"""Plume mapping (QRSim 3A-3G, default 3a): the nodes of config/plume_<variant>.yaml.

    ros2 launch qrsim_ros plume.launch.py [variant:=3b seed:=7]

Arguments: variant, num_vehicles, seed, use_rviz, record, autopilot (``ros2 launch qrsim_ros
plume.launch.py --show-args``). The node set, namespaces, remappings and parameters come from
``qrsim_ros.launch_plan.plan``, the same function the embedded launcher (``qrsim launch plume``) uses.
"""

from qrsim_ros import launch_description

FAMILY = "plume"


def generate_launch_description():
    return launch_description.generate(FAMILY)

"""Search and rescue (QRSim 2A-2D, default 2c): the nodes of config/search_rescue_<variant>.yaml.

    ros2 launch qrsim_ros search_rescue.launch.py [variant:=2c num_vehicles:=3 record:=true]

Arguments: variant, num_vehicles, seed, use_rviz, record, autopilot (``ros2 launch qrsim_ros
search_rescue.launch.py --show-args``). The node set, namespaces, remappings and parameters come from
``qrsim_ros.launch_plan.plan``, the same function the embedded launcher (``qrsim launch search_rescue``) uses.
"""

from qrsim_ros import launch_description

FAMILY = "search_rescue"


def generate_launch_description():
    return launch_description.generate(FAMILY)

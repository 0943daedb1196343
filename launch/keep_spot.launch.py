"""Keep spot (QRSim TaskKeepSpot, no variants): the nodes of config/keep_spot.yaml.

    ros2 launch qrsim_ros keep_spot.launch.py [autopilot:=false seed:=3]

Arguments: variant, num_vehicles, seed, use_rviz, record, autopilot (``ros2 launch qrsim_ros
keep_spot.launch.py --show-args``). The node set, namespaces, remappings and parameters come from
``qrsim_ros.launch_plan.plan``, the same function the embedded launcher (``qrsim launch keep_spot``) uses.
"""

from qrsim_ros import launch_description

FAMILY = "keep_spot"


def generate_launch_description():
    return launch_description.generate(FAMILY)

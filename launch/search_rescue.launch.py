"""Search and rescue (QRSim 2A-2D): ``ros2 launch qrsim_ros search_rescue.launch.py [variant:=2c]``.

Nodes from ``qrsim_ros.launch_plan.plan`` (as ``qrsim launch search_rescue``); arguments: --show-args.
"""

from qrsim_ros import launch_description

FAMILY = "search_rescue"


def generate_launch_description():
    return launch_description.generate(FAMILY)

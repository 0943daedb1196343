"""Keep spot (QRSim TaskKeepSpot): ``ros2 launch qrsim_ros keep_spot.launch.py [seed:=3]``.

Nodes from ``qrsim_ros.launch_plan.plan`` (as ``qrsim launch keep_spot``); arguments: --show-args.
"""

from qrsim_ros import launch_description

FAMILY = "keep_spot"


def generate_launch_description():
    return launch_description.generate(FAMILY)

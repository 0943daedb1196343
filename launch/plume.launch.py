"""Plume mapping (QRSim 3A-3G): ``ros2 launch qrsim_ros plume.launch.py [variant:=3b seed:=7]``.

Nodes from ``qrsim_ros.launch_plan.plan`` (as ``qrsim launch plume``); arguments: --show-args.
"""

from qrsim_ros import launch_description

FAMILY = "plume"


def generate_launch_description():
    return launch_description.generate(FAMILY)

"""Cats and mouse (QRSim 1A-1C): ``ros2 launch qrsim_ros cats_mouse.launch.py [variant:=1c]``.

Nodes from ``qrsim_ros.launch_plan.plan`` (as ``qrsim launch cats_mouse``); arguments: --show-args.
"""

from qrsim_ros import launch_description

FAMILY = "cats_mouse"


def generate_launch_description():
    return launch_description.generate(FAMILY)

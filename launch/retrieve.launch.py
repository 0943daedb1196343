"""Search and retrieve (ireland_2016): ``ros2 launch qrsim_ros retrieve.launch.py [variant:=full] [seed:=3]``.

Nodes from ``qrsim_ros.launch_plan.plan`` (as ``qrsim launch retrieve``), the 17-mode mission flown by
mission_autopilot; variants ``simplified`` (section 6.2, the default) and ``full`` (section 6.1);
arguments: --show-args.
"""

from qrsim_ros import launch_description

FAMILY = "retrieve"


def generate_launch_description():
    return launch_description.generate(FAMILY)

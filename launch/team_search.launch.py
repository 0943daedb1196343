"""Team search (docs/TEAMS.md): ``ros2 launch qrsim_ros team_search.launch.py [num_vehicles:=10]``.

Nodes from ``qrsim_ros.launch_plan.plan`` (as ``qrsim launch team_search``); arguments: --show-args.
"""

from qrsim_ros import launch_description

FAMILY = "team_search"


def generate_launch_description():
    return launch_description.generate(FAMILY)

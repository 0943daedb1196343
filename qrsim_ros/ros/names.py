"""Names of the ROS graph: vehicle namespaces, frames and the simulator's own topics (DESIGN.md "Frames
and conventions"; REP-103/105).

Vehicles are ``uav1`` ... ``uavN`` (0-based index i -> ``uav{i+1}``); the world frame is ``map`` (ENU) with
``map_ned`` beside it, each vehicle's body ``uavN/base_link`` (FLU) with ``uavN/base_link_frd`` (FRD).
"""

from __future__ import annotations

#: The world frame (ENU).
MAP_FRAME = "map"
#: The world frame with the core's NED axes (a static transform from ``map``).
MAP_NED_FRAME = "map_ned"


def vehicle_namespace(index: int) -> str:
    """Namespace of vehicle ``index`` (0-based): ``uav1`` ... ``uavN`` (no leading slash)."""
    return f"uav{index + 1}"


def base_link_frame(index: int) -> str:
    """Body frame (FLU) of vehicle ``index``."""
    return f"{vehicle_namespace(index)}/base_link"


def base_link_frd_frame(index: int) -> str:
    """Body frame (FRD, QRSim's) of vehicle ``index``."""
    return f"{vehicle_namespace(index)}/base_link_frd"


def camera_optical_frame(index: int) -> str:
    """Frame of vehicle ``index``'s camera (REP-103 optical: z along the optical axis, x right, y down)."""
    return f"{vehicle_namespace(index)}/camera_optical"


#: Topic of vehicle_dynamics' per-tick fleet status (validity).
VEHICLE_STATUS_TOPIC = "/sim/vehicle_status"
#: Where every ground-truth consumer reports the last tick it handled (qrsim_ros/TickProgress).
TICK_PROGRESS_TOPIC = "/sim/tick_progress"
#: The number ``/sim/episode`` gives the episode started at launch (+1 per reset).
FIRST_EPISODE = 1

"""Messages -> core arrays: ground truth and fleet status back into the core's layout (NED world, FRD body).

The core keeps QRSim's state ``X`` (N, 13) = [px py pz (NED, m)  phi theta psi (ZYX, rad)  u v w (FRD,
m/s)  p q r (FRD, rad/s)  thrust (N)]. From ``nav_msgs/Odometry`` (pose in map ENU, twist in base_link
FLU) the position, velocity and rates come back exactly (axis swaps and sign flips) and the angles
within a few 1e-16 rad (psi wrapped to (-pi, pi]); thrust is not carried (0). The way there is
``to_messages``; every rotation comes from ``qrsim_ros.core.common.frames``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from qrsim_ros.core.common.frames import Array, enu_to_ned, flu_to_frd, quaternion_enu_flu_to_euler_ned_frd
from qrsim_ros.core.config.loader import load_yaml
from qrsim_ros.core.faults import ActiveFault
from qrsim_ros.core.vehicles.pelican import (
    STATE_EULER,
    STATE_POSITION_NED,
    STATE_RATES_FRD,
    STATE_VELOCITY_FRD,
)
from qrsim_ros.ros.to_messages import DETECTION_DTYPE


def fleet_arrays(msg: Any, num_vehicles: int) -> tuple[Array, Array] | str:
    """(state (N, 13), specific force (N, 3)) from a qrsim_ros/VehicleStatus's ``state`` and
    ``specific_force`` (core layout: NED/FRD, see VehicleStatus.msg), or the reason they are unusable."""
    n = int(num_vehicles)
    if len(msg.state) != 13 * n or len(msg.specific_force) != 3 * n:
        return (f"carries {len(msg.state)} state and {len(msg.specific_force)} specific-force values, "
                f"not {13 * n} and {3 * n} for {n} vehicles")
    x = np.frombuffer(msg.state, dtype=np.float64).reshape(n, 13).copy()
    a = np.frombuffer(msg.specific_force, dtype=np.float64).reshape(n, 3).copy()
    return x, a


def _vec3(v: Any) -> Array:
    return np.array([v.x, v.y, v.z], float)


#: Columns of the raw odometry rows kept per tick: ENU position, quaternion (x, y, z, w), FLU linear
#: velocity, FLU rates (converted for all vehicles at once when the tick is complete).
RAW_ODOM_WIDTH = 13


def raw_odometry(msg: Any) -> list[float]:
    p, q = msg.pose.pose.position, msg.pose.pose.orientation
    v, w = msg.twist.twist.linear, msg.twist.twist.angular
    return [p.x, p.y, p.z, q.x, q.y, q.z, q.w, v.x, v.y, v.z, w.x, w.y, w.z]


def states_from_raw_odometry(raw: Array) -> Array:
    """Core states (M, 13) from raw odometry rows (M, 13) [ENU position, quaternion x y z w of FLU in
    ENU, FLU linear velocity, FLU rates] (see ``state_from_odometry``); vectorised over vehicles."""
    raw = np.atleast_2d(np.asarray(raw, float))
    x = np.zeros((raw.shape[0], 13))
    x[:, STATE_POSITION_NED] = enu_to_ned(raw[:, 0:3])
    x[:, STATE_EULER] = quaternion_enu_flu_to_euler_ned_frd(raw[:, 3:7])
    x[:, STATE_VELOCITY_FRD] = flu_to_frd(raw[:, 7:10])
    x[:, STATE_RATES_FRD] = flu_to_frd(raw[:, 10:13])
    return x


def state_from_odometry(msg: Any) -> Array:
    """Core state row (13,) from nav_msgs/Odometry (pose in map ENU, twist in base_link FLU).

    NED position, ZYX Euler angles of FRD in NED (yaw in (-pi, pi]), FRD body velocity and rates,
    thrust 0. Position, velocity and rates are exact (axis swaps and sign flips); the angles come
    back from the quaternion with a residual of a few 1e-16 rad.
    """
    return states_from_raw_odometry(np.array(raw_odometry(msg), float))[0]


def specific_force_from_accel(msg: Any) -> Array:
    """FRD specific force (3,) [m/s^2] (the core's ``a``) from geometry_msgs/AccelStamped (FLU)."""
    return flu_to_frd(_vec3(msg.accel.linear))


def cloud_points(msg: Any) -> NDArray[np.void]:
    """The (height, width) structured array of a ``camera/detections`` message (for consumers/tests)."""
    names = [f.name for f in msg.fields]
    if msg.point_step != DETECTION_DTYPE.itemsize or names != list(DETECTION_DTYPE.names):
        raise ValueError("not a camera/detections cloud (unexpected fields or point_step)")
    return np.frombuffer(bytes(msg.data), DETECTION_DTYPE).reshape(msg.height, msg.width)


def active_faults(msg: Any) -> list[ActiveFault]:
    """The active faults of a qrsim_ros/ActiveFaults (/sim/faults) as the core's ``ActiveFault`` (for
    ``FaultEffects.apply_active``): ``active_faults_of``."""
    return active_faults_of(msg.faults)


def listed_faults(status: Any) -> Sequence[Any] | None:
    """A /sim/vehicle_status's ActiveFault messages when it lists the active set, else None (the last
    listed set holds)."""
    return status.faults if status.faults_listed else None


def active_faults_of(faults: Sequence[Any]) -> list[ActiveFault]:
    """qrsim_ros/ActiveFault messages (of /sim/faults or /sim/vehicle_status) as the core's
    ``ActiveFault``: parameters parsed from YAML (lists as tuples), until_s NaN -> None."""
    out = []
    for f in faults:
        params = yaml.safe_load(f.params_yaml) or {}
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
        until = None if math.isnan(f.until_s) else float(f.until_s)
        out.append(ActiveFault(f.id, int(f.vehicle), f.kind, params, float(f.since_s), until))
    return out


def fault_request(fault_yaml: str) -> dict[str, Any] | str:
    """The fault of an InjectFault request (one ``faults:`` item as YAML) as a mapping for
    ``FaultEffects.inject``, or why it is not one (the schedule checks the item itself). Read as a
    scenario file is (``load_yaml``: YAML 1.2, so ``1e3`` is a number; size and aliases bounded, so a
    small request cannot expand into gigabytes)."""
    try:
        item = load_yaml(fault_yaml)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"fault_yaml is not valid YAML: {first}"
    if not isinstance(item, dict):
        return ("fault_yaml must be one faults: item, a mapping such as "
                f"'{{kind: gps_outage, vehicles: [0]}}', not {type(item).__name__}")
    return item

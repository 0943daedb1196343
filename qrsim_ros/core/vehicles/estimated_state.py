"""QRSim's estimated state eX (N, 20) (spec 2.1): the one layout every controller, policy and autopilot reads.

The columns, per vehicle (NED world, FRD body, ZYX Euler angles):

======  ==========================  ==========================================================
eX      name                        source
======  ==========================  ==========================================================
0:3     ``POSITION_NED``            GPS position [m]
3:6     ``EULER``                   orientation estimator: phi, theta, psi [rad]
6:9     (zero)                      QRSim leaves them 0
9:12    ``ANGULAR_VELOCITY_FRD``    gyroscope [rad/s]
12      (zero)                      QRSim leaves it 0
13:16   ``SPECIFIC_FORCE_FRD``      accelerometer [m/s^2]
16      ``HEIGHT``                  altimeter: height above ground [m, up]
17:19   ``GROUND_VELOCITY_NE``      GPS velocity, north and east [m/s]
19      ``VERTICAL_SPEED``          altimeter: vertical speed [m/s, up]
======  ==========================  ==========================================================

Rows of invalid vehicles are NaN. The in-process Simulator fills eX from its sensor models
(``fill_estimated_state``), the ROS nodes from the sensor topics (``qrsim_ros.ros.estimated_state``):
both write the same columns through this module.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, njit
from qrsim_ros.core.vehicles.pelican import (
    STATE_DOWN,
    STATE_EULER,
    STATE_POSITION_NED,
    STATE_RATES_FRD,
    STATE_VELOCITY_FRD,
)

Array = NDArray[np.float64]

#: Width of eX.
ESTIMATED_STATE_SIZE = 20
POSITION_NED = slice(0, 3)
NORTH_EAST = slice(0, 2)
NORTH = 0
EAST = 1
EULER = slice(3, 6)
ROLL = 3
PITCH = 4
HEADING = 5
#: Position and Euler angles: the pose a DCM (``dcm_from_state``) is built from.
POSE = slice(0, 6)
ANGULAR_VELOCITY_FRD = slice(9, 12)
SPECIFIC_FORCE_FRD = slice(13, 16)
HEIGHT = 16
GROUND_VELOCITY_NE = slice(17, 19)
VERTICAL_SPEED = 19
#: Columns QRSim leaves at zero (body velocity and one spare).
ZERO_COLUMNS = (6, 7, 8, 12)
#: The columns ``fill_estimated_state`` writes, in the order of its keyword arguments.
_FILLED_COLUMNS = (POSITION_NED, EULER, ANGULAR_VELOCITY_FRD, SPECIFIC_FORCE_FRD, HEIGHT, GROUND_VELOCITY_NE,
                   VERTICAL_SPEED)


def velocity_ned(ex: Array) -> Array:
    """NED velocity (N, 3) [m/s] of estimated states eX (N, 20): the GPS ground velocity north and east,
    and the altimeter's vertical speed (positive up) turned down."""
    out = np.empty((ex.shape[0], 3))
    out[:, 0:2] = ex[:, GROUND_VELOCITY_NE]
    out[:, 2] = -ex[:, VERTICAL_SPEED]
    return out


def empty_estimated_state(num_vehicles: int) -> Array:
    """eX (N, 20) before any sensor reported: NaN, with QRSim's zero columns at 0."""
    ex = np.full((int(num_vehicles), ESTIMATED_STATE_SIZE), np.nan)
    ex[:, ZERO_COLUMNS] = 0.0
    return ex


def fill_estimated_state(ex: Array, rows: ArrayLike | slice = slice(None), *,
                         position_ned: ArrayLike | None = None, euler: ArrayLike | None = None,
                         angular_velocity_frd: ArrayLike | None = None,
                         specific_force_frd: ArrayLike | None = None, height_m: ArrayLike | None = None,
                         ground_velocity_ne: ArrayLike | None = None,
                         vertical_speed_mps: ArrayLike | None = None) -> None:
    """Write the given sensor values into rows ``rows`` of eX, in place (the others are left as they are)."""
    values = (position_ned, euler, angular_velocity_frd, specific_force_frd, height_m, ground_velocity_ne,
              vertical_speed_mps)
    for columns, value in zip(_FILLED_COLUMNS, values, strict=True):
        if value is not None:
            ex[rows, columns] = value


@njit(f"void(float64[:, :], Array(boolean, 1, 'A', readonly=True), {F8_2D_IN}, {F8_2D_IN}, {F8_2D_IN}, "
      f"{F8_2D_IN}, {F8_1D_IN}, {F8_2D_IN}, {F8_1D_IN})", writable_twins=True)
def assemble_estimated_state(ex, valid, position_ned, euler, angular_velocity_frd, specific_force_frd,
                             height_m, velocity_ned, vertical_speed_mps):
    """Every row of eX (N, 20) in place from the fleet's sensor values (the ``fill_estimated_state``
    arguments of the same names, N rows each; ``velocity_ned`` (N, 3) [m/s] gives the ground velocity
    north and east) with QRSim's zero columns at 0; rows of invalid vehicles (``valid`` False) NaN."""
    for i in range(ex.shape[0]):
        if not valid[i]:
            for j in range(ex.shape[1]):
                ex[i, j] = np.nan
            continue
        for j in range(3):
            ex[i, j] = position_ned[i, j]
            ex[i, 3 + j] = euler[i, j]
            ex[i, 6 + j] = 0.0
            ex[i, 9 + j] = angular_velocity_frd[i, j]
            ex[i, 13 + j] = specific_force_frd[i, j]
        ex[i, 12] = 0.0
        ex[i, HEIGHT] = height_m[i]
        ex[i, 17] = velocity_ned[i, 0]
        ex[i, 18] = velocity_ned[i, 1]
        ex[i, VERTICAL_SPEED] = vertical_speed_mps[i]


def hold_pose(ex: ArrayLike) -> Array:
    """The pose (N, 4) a waypoint controller holds to stay where it is: estimated north, east, down
    (minus the altimeter height) [m] and heading [rad]."""
    e = np.atleast_2d(np.asarray(ex, float))
    return np.column_stack([e[:, NORTH], e[:, EAST], -e[:, HEIGHT], e[:, HEADING]])


def exact_estimated_state(x: ArrayLike, specific_force_frd: ArrayLike) -> Array:
    """eX (N, 20) built from true states X (N, 13) and the FRD specific force (N, 3) [m/s^2]: what
    perfect sensors would report (height = -down, the ground reference at NED z = 0). Used where only
    the ground truth is at hand (vehicle_dynamics' failsafe of attitude-mode vehicles)."""
    x = np.atleast_2d(np.asarray(x, float))
    v_ned = body_to_ned(dcm_from_state(x), x[:, STATE_VELOCITY_FRD])
    ex = empty_estimated_state(x.shape[0])
    fill_estimated_state(ex, position_ned=x[:, STATE_POSITION_NED], euler=x[:, STATE_EULER],
                         angular_velocity_frd=x[:, STATE_RATES_FRD],
                         specific_force_frd=specific_force_frd, height_m=-x[:, STATE_DOWN],
                         ground_velocity_ne=v_ned[:, 0:2], vertical_speed_mps=-v_ned[:, 2])
    return ex

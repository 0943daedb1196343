"""The mixer of the rotor-level airframe: body wrench <-> rotor thrusts, for the X and + layouts.

The wrench is ``w = [T, tau_x, tau_y, tau_z]``: collective thrust T [N] (along -z body, i.e. up when
level) and the roll, pitch, yaw torques [N m] about the FRD body axes (positive roll = right side down,
positive pitch = nose up, positive yaw = clockwise seen from above). With rotor thrusts F (4,) [N],
rotor i at body (x_i, y_i) and spin s_i (see ``rotor_params``)::

    T     = sum F_i
    tau_x = -sum y_i F_i              (thrust -F_i z_body at (x_i, y_i, 0): r x f)
    tau_y =  sum x_i F_i
    tau_z = -sum s_i (k_m / k_f) F_i  (drag reaction of a clockwise rotor turns the body anticlockwise)

so ``w = M F`` with the 4x4 allocation matrix M (ireland_2016 eq. 18 is the same map for its "+"
numbering; mathiesen_2017 section 3.2 derives it for a general rotor set). For two rotors of each spin
with opposite rotors alike, M is invertible and ``F = M^-1 w`` exactly (``mixer_matrices``).

Clipping: ``wrench_to_thrusts(..., clip=True)`` clips each rotor's thrust to the motors' range
[k_f omega_min^2, k_f omega_max^2] independently after the inversion. Inside the range the round trip
is exact; a wrench outside the achievable set is not redistributed (no priority of thrust over
torques), so a saturated wrench differs from the one asked for. Callers that need priorities (an
attitude controller keeping roll/pitch authority) limit the wrench before mixing.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.vehicles.rotor_params import RotorParams


def mixer_matrices(params: RotorParams) -> tuple[Array, Array]:
    """(M, M_inv): the allocation matrix M (4, 4) with ``w = M F`` and its inverse (see module doc)."""
    pos = params.rotor_positions_m
    m = np.empty((4, 4))
    m[0] = 1.0
    m[1] = -pos[:, 1]
    m[2] = pos[:, 0]
    m[3] = -params.spin * (params.k_m / params.k_f)
    m_inv = np.linalg.inv(m)
    m.flags.writeable = False
    m_inv.flags.writeable = False
    return m, m_inv


def thrusts_to_wrench(params: RotorParams, thrusts_n: ArrayLike) -> Array:
    """Body wrench(es) (..., 4) [T, tau_x, tau_y, tau_z] [N, N m] of rotor thrusts (..., 4) [N]."""
    m, _ = mixer_matrices(params)
    return np.asarray(thrusts_n, float) @ m.T


def wrench_to_thrusts(params: RotorParams, wrench: ArrayLike, clip: bool = True) -> Array:
    """Rotor thrusts (..., 4) [N] producing the wrench(es) (..., 4); clipped to the motors' range
    [k_f omega_min^2, k_f omega_max^2] when ``clip`` (module doc)."""
    _, m_inv = mixer_matrices(params)
    f = np.asarray(wrench, float) @ m_inv.T
    if clip:
        f = np.clip(f, params.k_f * params.omega_min_rads ** 2, params.k_f * params.omega_max_rads ** 2)
    return f


def thrusts_to_speeds(params: RotorParams, thrusts_n: ArrayLike) -> Array:
    """Rotor speeds sqrt(F / k_f) [rad/s] of thrusts (..., 4) [N] (negative thrusts give 0)."""
    return np.sqrt(np.maximum(np.asarray(thrusts_n, float), 0.0) / params.k_f)


def wrench_to_speeds(params: RotorParams, wrench: ArrayLike) -> Array:
    """Rotor speed commands (..., 4) [rad/s] for the wrench(es) (..., 4), clipped to the motors' range."""
    return thrusts_to_speeds(params, wrench_to_thrusts(params, wrench, clip=True))


def normalised_to_speeds(params: RotorParams, command: ArrayLike) -> Array:
    """Normalised motor commands (..., 4) in [0, 1] -> rotor speeds omega_min + c (omega_max - omega_min)
    [rad/s] (linear in speed, as an ESC with speed feedback: mathiesen_2017 eq. 3.4). Commands outside
    [0, 1] are clipped."""
    c = np.clip(np.asarray(command, float), 0.0, 1.0)
    return params.omega_min_rads + c * (params.omega_max_rads - params.omega_min_rads)

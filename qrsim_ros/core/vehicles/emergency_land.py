"""ireland_2016's emergency landing controller after a rotor loss (section 5.3.4 "Emergency Controller",
section 5.1.17 "Emergency Land"; the failsafe reaction to ``rotor_loss``). Docs: docs/FAULTS.md.

When a single rotor is lost and known, the controller disables the opposite rotor, neglects attitude
control (the roll, pitch and yaw pseudo-inputs are 0) and lets the remaining pair share the collective
(eq. 26): each carries half of

    u_col = m (g - z''_d) / (cos(phi) cos(theta))                       (eq. 22, K_T folded into thrust [N])

with the cascaded height loop of eq. 20-21 on the true state (ireland's perfect reconstruction):

    z'_d = clip(K_pr (z_d - z), -v_max, v_max),   z''_d = K_dr (z'_d - z')  (NED, z down, SI)

towards ``z_d = ground - R`` (the centre of mass of a vehicle of radius R resting on the ground). The
vehicle returns to Idle, here: it is disarmed (frozen, invalid with ``LANDED_REASON``) as the ``land``
failsafe does, once ``z >= z_d - touchdown_tolerance_m`` (section 5.1.17's ``|z_Q + R_Q| < tol``).

Deviations from the paper, both for the simulated airframes:

- ``max_descent_mps`` (default 1 m/s) instead of the paper's v_max = 5 m/s: two rotors give at most
  about m g on the shipped rotor sets (2 k_f omega_max^2 / m g = 1.00 pelican, 1.00 ireland_2016, 1.36
  crazyflie_2; 2/4 of the identified Pelican's 32.85 N cap: 1.00), so a descent cannot be braked by
  thrust, only by the drag; ireland's missions fly 1-2 m high, where its K_pr never asks for more.
- the tilt compensation 1 / (cos(phi) cos(theta)) is capped at 1 / ``min_tilt_cos`` (2 by default): a
  tumbling vehicle is not given full thrust sideways.

The remaining pair of a quadrotor has the same spin (opposite rotors alike), so its reaction torques do
not cancel: the vehicle yaws up at 2 k_m F / I_zz with F the pair's per-rotor thrust (no yaw damping
in the rotor model); ireland's model shows the same (its rotors are instantaneous and the vehicle level
at the fault, so it never tips). Rotor numbering, spins and layouts: ``rotor_params``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array, body_to_ned, dcm_from_state
from qrsim_ros.core.common.validation import ConfigError, check_fields, checked, finite, single_positive
from qrsim_ros.core.vehicles.pelican import (
    CONTROL_LIMITS,
    CTH0,
    CTH1,
    CTH2,
    G_MS2,
    SI_TO_FIRMWARE,
    STATE_DOWN,
    STATE_PITCH,
    STATE_ROLL,
    STATE_VELOCITY_FRD,
)

#: ``vehicle.rotor_loss_failsafe`` values: the emergency landing controller, or none (the vehicle flies
#: on with the rotor lost, as before).
ROTOR_LOSS_FAILSAFES = ("emergency_land", "none")
#: The failsafe name shown for a vehicle in emergency landing (``VehicleStatus.failsafe``).
EMERGENCY_LAND = "emergency_land"
#: Invalid reason of a vehicle that touched down in emergency landing (Idle, motors off).
LANDED_REASON = "landed (emergency land)"
#: Rotor directions of the quadrotor the identified Pelican approximates (+1 clockwise seen from above;
#: opposite rotors alike), the rotor model's default (``rotor_params.RotorParams.spin``).
ROTOR_SPIN = np.array([1.0, -1.0, 1.0, -1.0])
#: Yaw-rate command of a fully unbalanced quadrotor [rad/s]: the control's limit (spec 2.1).
MAX_YAW_RATE_RADPS = float(CONTROL_LIMITS[3, 1])


@dataclass(frozen=True)
class EmergencyLandParams:
    """Gains and limits of the emergency controller (module doc); SI units, NED.

    position_gain_per_s: K_pr of eq. 21 [1/s] (ireland_2016 Table 4: 0.975).
    velocity_gain_per_s: K_dr of eq. 20 [1/s] (Table 4: 3.9).
    max_descent_mps: limit of the commanded vertical speed [m/s] (not Table 4's 5 m/s: module doc).
    touchdown_tolerance_m: Idle once within this of z_d (or below) [m].
    min_tilt_cos: floor of cos(phi) cos(theta) in eq. 22 (in (0, 1]).
    """

    position_gain_per_s: float = checked(0.975, finite, single_positive)
    velocity_gain_per_s: float = checked(3.9, finite, single_positive)
    max_descent_mps: float = checked(1.0, finite, single_positive)
    touchdown_tolerance_m: float = checked(0.05, finite, single_positive)
    min_tilt_cos: float = checked(0.5, finite, single_positive)

    def __post_init__(self) -> None:
        check_fields(self, "emergency_land")
        if self.min_tilt_cos > 1.0:
            raise ConfigError(f"emergency_land.min_tilt_cos={self.min_tilt_cos!r} must be in (0, 1]")


def opposite_rotor(rotor: ArrayLike) -> NDArray[np.int64]:
    """The rotor opposite ``rotor`` (0..3): rotors are numbered clockwise around the body in both layouts
    (``rotor_params``), so it is two on."""
    return (np.asarray(rotor, np.int64) + 2) % 4


def collective_thrust_n(x: Array, z_target_ned_m: ArrayLike, mass_kg: ArrayLike,
                        params: EmergencyLandParams) -> Array:
    """Eq. 20-22: the collective thrust [N] (M,) >= 0 of vehicles with true states ``x`` (M, 13) descending
    to ``z_target_ned_m`` (M,) [m, NED z], mass ``mass_kg`` [kg] (scalar or (M,))."""
    v_down = body_to_ned(dcm_from_state(x), x[:, STATE_VELOCITY_FRD])[:, 2]
    v_max = params.max_descent_mps
    z_error_m = np.asarray(z_target_ned_m, float) - x[:, STATE_DOWN]
    vz_d = np.clip(params.position_gain_per_s * z_error_m, -v_max, v_max)
    az_d = params.velocity_gain_per_s * (vz_d - v_down)
    tilt = np.maximum(np.cos(x[:, STATE_ROLL]) * np.cos(x[:, STATE_PITCH]), params.min_tilt_cos)
    return np.maximum(np.asarray(mass_kg, float) * (G_MS2 - az_d) / tilt, 0.0)


def pair_thrusts_n(thrust_n: ArrayLike, failed_rotor: ArrayLike) -> Array:
    """Eq. 26: rotor thrusts (M, 4) [N]: the failed rotor and its opposite 0, the remaining two half of
    ``thrust_n`` (M,) each."""
    t = np.asarray(thrust_n, float)
    failed = np.asarray(failed_rotor, np.int64)
    out = np.repeat(0.5 * t[:, None], 4, axis=1)
    rows = np.arange(t.size)
    out[rows, failed] = 0.0
    out[rows, opposite_rotor(failed)] = 0.0
    return out


def pair_factors(failed_rotor: ArrayLike) -> Array:
    """Rotor factors (M, 4) of the disabled pair: 0 for the failed rotor and its opposite, else 1."""
    return (pair_thrusts_n(np.full(np.size(failed_rotor), 2.0), failed_rotor) > 0.0).astype(float)


def unbalanced_yaw_rate_radps(factors: ArrayLike) -> Array:
    """The identified Pelican's rotor-fault approximation of the reaction-torque imbalance (docs/FAULTS.md):
    rotor factors f (N, 4) -> yaw-rate command disturbance (N,) [rad/s], ``-sum(spin_i f_i) / 2 x 4.5``
    (+-1 x the limit when both rotors of one spin are off)."""
    f = np.asarray(factors, float)
    return -(f @ ROTOR_SPIN) / (0.5 * f.shape[-1]) * MAX_YAW_RATE_RADPS


def pelican_throttle(steady_thrust_n: ArrayLike) -> Array:
    """The SI throttle in [0, 1] whose steady thrust (the identified map, spec 2.3) is ``steady_thrust_n``
    [N] (the map's inverse, clipped to the throttle's range)."""
    t = np.asarray(steady_thrust_n, float)
    disc = np.maximum(CTH1 * CTH1 - 4.0 * CTH2 * (CTH0 - t), 0.0)
    th_fw = (-CTH1 + np.sqrt(disc)) / (2.0 * CTH2)
    return np.clip(th_fw / SI_TO_FIRMWARE[2], 0.0, 1.0)


def touched_down(z_ned_m: ArrayLike, z_target_ned_m: ArrayLike,
                 params: EmergencyLandParams) -> NDArray[np.bool_]:
    """Section 5.1.17's Idle condition: within ``touchdown_tolerance_m`` of z_d, or below it."""
    return np.asarray(z_ned_m, float) >= np.asarray(z_target_ned_m, float) - params.touchdown_tolerance_m


def emergency_failsafe(failsafe: list[str], fleet: object) -> list[str]:
    """The per-vehicle failsafe names ``failsafe`` with ``EMERGENCY_LAND`` for the vehicles of ``fleet``
    (an ``Airframes``; anything else: unchanged) that fly, or flew, an emergency landing this episode."""
    if not getattr(fleet, "any_emergency_land", True):  # none this episode (every tick of most episodes)
        return failsafe
    rotor = getattr(fleet, "emergency_land_rotor", None)
    if rotor is None or not (rotor >= 0).any():
        return failsafe
    return [EMERGENCY_LAND if r >= 0 else f for f, r in zip(failsafe, rotor, strict=True)]

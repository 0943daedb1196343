"""Electrical power a vehicle draws from its battery [W], for ``battery.BatteryBank.step``.

Two models, one per airframe:

1. ``momentum_theory_power`` -- the identified Pelican, which has no rotor model (spec 2.4): its total
   thrust F (state element 12, [N]) is shared by four rotors, T = F / 4, and each rotor's ideal induced
   power from actuator-disc momentum theory (Leishman, "Principles of Helicopter Aerodynamics", 2nd ed.,
   2006, ch. 2: P_ideal = T^1.5 / sqrt(2 rho A)) is divided by the figure of merit FM (ideal / actual shaft
   power) and by the motor-and-controller efficiency:

       P = 4 * (F/4)^1.5 / (FM * eta_drive * sqrt(2 rho A)) + P_avionics          [W]

   The formula uses the hover relation for any thrust, so it ignores climb and forward-flight power (at
   the Pelican's few m/s the induced power changes by a few per cent); negative thrust counts as 0.
2. ``rotor_power`` -- a rotor-level airframe: each rotor's shaft power is its drag torque times its speed,
   k_m w^2 * |w| = k_m |w|^3 (mathiesen_2017 ch. 3, drag torque k_m w^2), divided by the motor efficiency:

       P = sum_rotors k_m |w_j|^3 / eta_motor + P_avionics                           [W]

Pelican figures (``PelicanPowerParams``): rotors of 10 inch (0.254 m) diameter, A = pi 0.127^2 =
0.0507 m^2 (AscTec's Pelican flies 10-inch propellers; QRSim's rotor radius 0.08 m is a drawing size,
spec 2.4); sea-level ISA air density 1.225 kg/m^3; FM 0.55 (small rotors reach 0.5-0.6, Leishman ch. 2);
drive efficiency 0.8 and avionics 10 W are assumed typical values. At the hover thrust m g = 16.48 N this
gives 4 * 23.7 W / (0.55 * 0.8) + 10 = 226 W.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, njit
from qrsim_ros.core.common.validation import (
    between,
    check_fields,
    checked,
    set_frozen_field,
    single_non_negative,
    single_positive,
)

#: Sea-level ISA air density [kg/m^3].
AIR_DENSITY_KGM3 = 1.225
#: The Pelican's rotor radius [m]: 10-inch propellers.
PELICAN_ROTOR_RADIUS_M = 0.127
NUM_ROTORS = 4


@dataclass(frozen=True)
class PelicanPowerParams:
    """Momentum-theory power of the identified Pelican (module doc, model 1).

    rotor_radius_m [m]; air_density_kgm3 [kg/m^3]; figure_of_merit (0, 1]; drive_efficiency (0, 1]
    (motor x speed controller); avionics_w [W] (drawn whatever the thrust). ConfigError names the field.
    """

    rotor_radius_m: float = checked(PELICAN_ROTOR_RADIUS_M, single_positive, store=True)
    air_density_kgm3: float = checked(AIR_DENSITY_KGM3, single_positive, store=True)
    figure_of_merit: float = checked(0.55, single_positive, between(0.0, 1.0), store=True)
    drive_efficiency: float = checked(0.8, single_positive, between(0.0, 1.0), store=True)
    avionics_w: float = checked(10.0, single_non_negative, store=True)
    #: P_induced(F) = coefficient * F^1.5 for a total thrust F over the four rotors [W / N^1.5]:
    #: 4 / (4^1.5 FM eta sqrt(2 rho A)) (derived from the fields, once).
    coefficient: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_fields(self, "power")
        set_frozen_field(self, "coefficient", NUM_ROTORS / (
            NUM_ROTORS ** 1.5 * self.figure_of_merit * self.drive_efficiency
            * math.sqrt(2.0 * self.air_density_kgm3 * self.disc_area_m2)))

    @property
    def disc_area_m2(self) -> float:
        """Area of one rotor disc, pi r^2 [m^2]."""
        return math.pi * self.rotor_radius_m ** 2



#: The default Pelican figures (module doc).
DEFAULT_PELICAN_POWER = PelicanPowerParams()


def momentum_theory_power(thrust_n: ArrayLike, params: PelicanPowerParams | None = None,
                          motors_on: ArrayLike | None = None) -> Array:
    """Electrical power [W] (N,) of Pelicans producing total thrusts ``thrust_n`` (N,) [N] (module doc, 1);
    ``motors_on`` (N,) bool (default all): a vehicle whose motors are off draws only its avionics."""
    p = params if params is not None else DEFAULT_PELICAN_POWER
    f = np.asarray(thrust_n, float)
    if f.ndim != 1:
        raise ValueError(f"thrust_n must have shape (N,), got {f.shape}")
    on = np.ones(f.shape[0], np.bool_) if motors_on is None else np.asarray(motors_on, np.bool_)
    if on.shape != f.shape:
        raise ValueError(f"motors_on must have shape {f.shape}, got {on.shape}")
    return _momentum_power(f, on, p.coefficient, p.avionics_w)


@njit(f"float64[:]({F8_1D_IN}, Array(boolean, 1, 'A', readonly=True), float64, float64)")
def _momentum_power(thrust_n, motors_on, coefficient, avionics_w):
    out = np.empty(thrust_n.shape[0])
    for i in range(thrust_n.shape[0]):
        f = thrust_n[i] if motors_on[i] and thrust_n[i] > 0.0 else 0.0
        out[i] = coefficient * f * math.sqrt(f) + avionics_w
    return out


def rotor_power(omega_rads: ArrayLike, k_m: float | ArrayLike, motor_efficiency: float,
                avionics_w: float = 0.0) -> Array:
    """Electrical power [W] (N,) of rotor-level vehicles with rotor speeds ``omega_rads`` (N, R) [rad/s]
    (either sign) and drag-torque coefficients ``k_m`` [N m s^2] (a number or one per rotor, (R,)):
    sum_j k_m |w_j|^3 / motor_efficiency + avionics_w (module doc, 2)."""
    w = np.asarray(omega_rads, float)
    if w.ndim != 2:
        raise ValueError(f"omega_rads must have shape (N, rotors), got {w.shape}")
    km = np.asarray(k_m, float)
    if km.shape != (w.shape[1],):
        km = np.full(w.shape[1], float(km))  # one coefficient for every rotor (a size-1 value)
    eta = float(motor_efficiency)
    if not 0.0 < eta <= 1.0:
        raise ValueError(f"motor_efficiency={motor_efficiency!r} must be in (0, 1]")
    return _rotor_power(w, km, eta, float(avionics_w))


@njit(f"float64[:]({F8_2D_IN}, {F8_1D_IN}, float64, float64)")
def _rotor_power(omega, k_m, efficiency, avionics_w):
    out = np.empty(omega.shape[0])
    for i in range(omega.shape[0]):
        shaft = 0.0
        for j in range(omega.shape[1]):
            w = abs(omega[i, j])
            shaft += k_m[j] * w * w * w
        out[i] = shaft / efficiency + avionics_w
    return out

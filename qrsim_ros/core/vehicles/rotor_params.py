"""Parameters of the rotor-level quadrotor airframe and its three named parameter sets.

Frames and conventions are the project's: NED world, FRD body, SI units. Rotors are numbered 0..3
clockwise seen from above, starting at the front:

- layout ``"+"``: 0 front (+x), 1 right (+y), 2 back, 3 left, each ``arm_m`` from the centre of mass;
- layout ``"x"``: 0 front-right, 1 back-right, 2 back-left, 3 front-left, at (±a, ±a), a = arm_m/sqrt(2).

``spin[i] = +1`` means rotor i turns clockwise seen from above (its angular velocity points along +z
body, i.e. down); its drag reaction on the body is then a yaw torque of -k_m omega^2 (anticlockwise
seen from above), and +k_m omega^2 for ``spin[i] = -1``. Opposite rotors share a direction, so a
balanced set has two of each.

Rotor model (mathiesen_2017 section 3.3, eq. 3.2-3.5): thrust k_f omega^2 along -z body, drag torque
k_m omega^2 (mathiesen writes Q = K_Q F, so k_m = K_Q k_f), first-order motor speed response with time
constant ``motor_tau_s`` towards the commanded speed clipped to [omega_min, omega_max]. Ground contact
(ireland_2016 section 4.5.1, eq. 4): a spring-damper along NED z that acts once the sphere of radius
``contact_radius_m`` around the centre of mass touches the ground.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.validation import (
    ConfigError,
    finite,
    set_frozen_field,
    shape,
    single_non_negative,
    single_positive,
)
from qrsim_ros.core.vehicles.pelican import CVB0, CVB1, FULL_BATTERY_V, G_MS2, KUV, KW, MASS_KG, TAU1

LAYOUTS = ("x", "+")


@dataclass(frozen=True)
class RotorParams:
    """One quadrotor airframe at rotor level (shared by every vehicle of a fleet).

    name: label of the parameter set.
    mass_kg: vehicle mass [kg].
    inertia_kgm2: (3,) principal moments of inertia about the FRD body axes [kg m^2] (diagonal tensor).
    arm_m: distance from the centre of mass to each rotor axis [m].
    layout: ``"x"`` or ``"+"`` (see module doc for the rotor numbering).
    spin: (4,) rotor directions, +1 clockwise / -1 anticlockwise seen from above; two of each.
    k_f: thrust coefficient [N/(rad/s)^2]: rotor thrust = k_f omega^2.
    k_m: drag-torque coefficient [N m/(rad/s)^2]: rotor reaction torque = k_m omega^2.
    motor_tau_s: time constant of the first-order motor speed response [s].
    omega_min_rads, omega_max_rads: range of the commanded rotor speed [rad/s] (commands are clipped).
    drag_per_s: (3,) linear drag in body FRD axes [1/s]: acceleration = -drag * (body velocity - wind).
    contact_stiffness_n_m, contact_damping_n_s_m: ground spring k [N/m] and damper c [N s/m].
    contact_radius_m: effective radius R: contact once the centre of mass is within R of the ground [m].
    gravity_ms2: gravitational acceleration [m/s^2].
    """

    name: str = "custom"
    mass_kg: float = MASS_KG
    inertia_kgm2: Array = field(default_factory=lambda: np.array([0.0085, 0.0085, 0.015]))
    arm_m: float = 0.2
    layout: str = "+"
    spin: Array = field(default_factory=lambda: np.array([1.0, -1.0, 1.0, -1.0]))
    k_f: float = 1.0e-5
    k_m: float = 1.6e-7
    motor_tau_s: float = 0.05
    omega_min_rads: float = 0.0
    omega_max_rads: float = 900.0
    drag_per_s: Array = field(default_factory=lambda: np.array([-KUV, -KUV, -KW]))
    contact_stiffness_n_m: float = 2500.0 * MASS_KG
    contact_damping_n_s_m: float = 50.0 * MASS_KG
    contact_radius_m: float = 0.2
    gravity_ms2: float = G_MS2

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ConfigError(f"rotor.name={self.name!r} must be a string")
        for key in ("mass_kg", "arm_m", "k_f", "k_m", "motor_tau_s", "omega_max_rads", "gravity_ms2",
                    "contact_radius_m"):
            value = finite(f"rotor.{key}", getattr(self, key))
            set_frozen_field(self, key, single_positive(f"rotor.{key}", value))
        for key in ("omega_min_rads", "contact_stiffness_n_m", "contact_damping_n_s_m"):
            value = finite(f"rotor.{key}", getattr(self, key))
            set_frozen_field(self, key, single_non_negative(f"rotor.{key}", value))
        inertia = shape("rotor.inertia_kgm2", self.inertia_kgm2, (3,))
        if np.any(inertia <= 0):
            raise ConfigError(f"rotor.inertia_kgm2={inertia.tolist()} must be > 0")
        set_frozen_field(self, "inertia_kgm2", _frozen(inertia))
        drag = shape("rotor.drag_per_s", self.drag_per_s, (3,))
        if np.any(drag < 0):
            raise ConfigError(f"rotor.drag_per_s={drag.tolist()} must be >= 0")
        set_frozen_field(self, "drag_per_s", _frozen(drag))
        if self.layout not in LAYOUTS:
            raise ConfigError(f"rotor.layout={self.layout!r} must be one of {LAYOUTS}")
        spin = shape("rotor.spin", self.spin, (4,))
        if not (np.all(np.abs(spin) == 1.0) and spin.sum() == 0.0 and spin[0] == spin[2]):
            raise ConfigError(f"rotor.spin={spin.tolist()} must be +1/-1 with opposite rotors alike and two "
                              "of each direction (e.g. [1, -1, 1, -1])")
        set_frozen_field(self, "spin", _frozen(spin))
        if not self.omega_min_rads < self.omega_max_rads:
            raise ConfigError(f"rotor.omega_min_rads={self.omega_min_rads!r} must be below "
                              f"omega_max_rads={self.omega_max_rads!r}")
        if self.max_thrust_n <= self.mass_kg * self.gravity_ms2:
            raise ConfigError(f"rotor.omega_max_rads={self.omega_max_rads!r}: the maximum thrust "
                              f"4 k_f omega_max^2 = {self.max_thrust_n:.4g} N cannot lift the weight "
                              f"{self.mass_kg * self.gravity_ms2:.4g} N")
        if self.min_thrust_n >= self.mass_kg * self.gravity_ms2:
            raise ConfigError(f"rotor.omega_min_rads={self.omega_min_rads!r}: the minimum thrust "
                              f"{self.min_thrust_n:.4g} N exceeds the weight (the vehicle could never "
                              "descend)")

    # --- derived quantities --------------------------------------------------------------------
    @property
    def hover_omega_rads(self) -> float:
        """Rotor speed of a level hover, sqrt(m g / (4 k_f)) [rad/s]."""
        return math.sqrt(self.mass_kg * self.gravity_ms2 / (4.0 * self.k_f))

    @property
    def max_thrust_n(self) -> float:
        """Total thrust with every rotor at omega_max [N]."""
        return 4.0 * self.k_f * self.omega_max_rads ** 2

    @property
    def min_thrust_n(self) -> float:
        """Total thrust with every rotor at omega_min [N]."""
        return 4.0 * self.k_f * self.omega_min_rads ** 2

    @property
    def rotor_positions_m(self) -> Array:
        """(4, 2) rotor positions [x forward, y right] in the body frame [m] (module doc numbering)."""
        if self.layout == "+":
            unit = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
            return unit * self.arm_m
        a = self.arm_m / math.sqrt(2.0)
        return np.array([[a, a], [-a, a], [-a, -a], [a, -a]])

    def replace(self, **changes: Any) -> RotorParams:
        """A copy with some fields changed (validated again)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"rotor: unknown key(s) {sorted(unknown)} (allowed: "
                              f"{', '.join(f.name for f in dataclasses.fields(self))})")
        return dataclasses.replace(self, **changes)


def _frozen(a: Array) -> Array:
    a = np.array(a, dtype=np.float64)
    a.flags.writeable = False
    return a


# --- the named parameter sets ----------------------------------------------------------------------

def pelican_rotor_params() -> RotorParams:
    """The AscTec Pelican of QRSim at rotor level (layout "+", as the AscTec autopilot flies it).

    - mass 1.68 kg (spec 2.4, ``Pelican.m``); arm 0.2 m (pelican_config.m's 0.4 m rotor axis to rotor
      axis, spec 2.4; the project's URDF reads it the same way); ground contact radius 0.2 m.
    - Inertia (0.0085, 0.0085, 0.015) kg m^2: QRSim has no inertia tensor, so it is estimated from the
      spec's geometry: four motor+propeller point masses of 0.075 kg (assumed) at 0.2 m, plus the
      rest (1.38 kg) as the 0.12 x 0.12 x 0.08 m body box: Ixx = 2 * 0.075 * 0.2^2 + 1.38 (0.12^2 +
      0.08^2) / 12 = 0.0084, Izz = 4 * 0.075 * 0.2^2 + 1.38 (0.12^2 + 0.12^2) / 12 = 0.0153.
    - omega_max 900 rad/s (about 8600 rpm for 10" propellers, assumed) and k_f fitted so that the
      maximum thrust equals the identified model's maximum thrust at a full 12 V battery,
      4 k_f omega_max^2 = Cvb0 + Cvb1 * 12 = 32.85 N (spec 2.4) -> k_f = 1.014e-5 N/(rad/s)^2; the
      hover speed is then 637 rad/s and hover thrust m g is reached at 71 % of omega_max.
    - k_m = 0.016 m * k_f (a torque-to-thrust ratio typical of 10" propellers, assumed).
    - Motor time constant fitted to the identified thrust slew limit: the initial thrust rate of a
      full step from hover, 2 k_f omega_h (omega_max - omega_h) / tau, equals tau1 = 46.8 N/s (spec
      2.4) -> tau = 0.073 s.
    - Linear drag: the identified model's KUV, KW (spec 2.4): 0.497, 0.497, 1.353 1/s.
    - Ground contact: ireland_2016's spring and damper scaled to the mass (k/m = 3775/1.51 = 2500
      1/s^2, c/m = 75.5/1.51 = 50 1/s: natural frequency 50 rad/s, damping ratio 0.5).

    Attitude plausibility against the identified closed loop (spec 2.4): a full 0.9 rad roll command
    asks for an initial angular acceleration of PQ1 * PQ0 * 2063 = 120 rad/s^2; this airframe can
    produce L k_f omega_max^2 / Ixx = 0.2 * 8.2 / 0.0085 = 193 rad/s^2 around hover (right rotor
    stopped, left at full speed, collective still m g).
    A full 4.5 rad/s yaw-rate command asks for R0 * 2072 = 10 rad/s^2; the rotors give up to
    (k_m/k_f) * 4 * 4.1 N / Izz = 17.6 rad/s^2.
    """
    omega_max = 900.0
    k_f = (CVB0 + CVB1 * FULL_BATTERY_V) / (4.0 * omega_max ** 2)
    omega_h = math.sqrt(MASS_KG * G_MS2 / (4.0 * k_f))
    tau = 2.0 * k_f * omega_h * (omega_max - omega_h) / TAU1
    return RotorParams(
        name="pelican", mass_kg=MASS_KG, inertia_kgm2=np.array([0.0085, 0.0085, 0.015]), arm_m=0.2,
        layout="+", spin=np.array([1.0, -1.0, 1.0, -1.0]), k_f=k_f, k_m=0.016 * k_f, motor_tau_s=tau,
        omega_min_rads=0.0, omega_max_rads=omega_max, drag_per_s=np.array([-KUV, -KUV, -KW]),
        contact_stiffness_n_m=2500.0 * MASS_KG, contact_damping_n_s_m=50.0 * MASS_KG, contact_radius_m=0.2,
    )


def ireland_2016_params() -> RotorParams:
    """The quadrotor of ireland_2016 (Table 3, identified on a Quanser Qball-X4), layout "+" (eq. 5).

    From Table 3: mass 1.51 kg, inertia (0.03, 0.03, 0.04) kg m^2, rotor moment arm 0.2 m, floor spring
    3775 N/m and damper 75.5 N s/m, effective radius 0.2 m, g = 9.81; no aerodynamic drag in eq. 5
    (drag 0). The paper's rotors are linear in the PWM input (thrust = K_T u, torque = K_Q u) and
    instantaneous. Mapped onto k_f omega^2: its two gains (listed as 120 N and 0.2 N m; the table's
    labels read swapped against their units) give the ratio torque/thrust = 0.2/120 m, so
    k_m = k_f / 600 m. Not in the paper, assumed: omega_max = 1000 rad/s with a thrust-to-weight ratio
    of 2 (k_f = 2 m g / (4 omega_max^2) = 7.41e-6 N/(rad/s)^2), and a motor time constant of 1/15 s
    (the Qball-X4's actuator bandwidth of 15 rad/s; ireland treats the rotors as instantaneous).
    Table 4 holds the controller's gains (max roll/pitch command 20 deg etc.), not the airframe's.
    """
    mass = 1.51
    omega_max = 1000.0
    k_f = 2.0 * mass * G_MS2 / (4.0 * omega_max ** 2)
    return RotorParams(
        name="ireland_2016", mass_kg=mass, inertia_kgm2=np.array([0.03, 0.03, 0.04]), arm_m=0.2,
        layout="+", spin=np.array([1.0, -1.0, 1.0, -1.0]), k_f=k_f, k_m=k_f * 0.2 / 120.0,
        motor_tau_s=1.0 / 15.0, omega_min_rads=0.0, omega_max_rads=omega_max, drag_per_s=np.zeros(3),
        contact_stiffness_n_m=3775.0, contact_damping_n_s_m=75.5, contact_radius_m=0.2, gravity_ms2=G_MS2,
    )


#: (60 / (2 pi))^2: converts a coefficient per rpm^2 into one per (rad/s)^2.
_PER_RPM2_TO_PER_RADS2 = (60.0 / (2.0 * math.pi)) ** 2


def crazyflie_2_params() -> RotorParams:
    """A small quad: the Bitcraze Crazyflie 2.0 (27 g), layout "x".

    Published figures (J. Förster, "System Identification of the Crazyflie 2.0 Nano Quadrocopter",
    BSc thesis, ETH Zurich 2015): thrust coefficient 3.1582e-10 N/rpm^2 and torque coefficient
    7.9379e-12 N m/rpm^2 (converted to per (rad/s)^2: k_f = 2.880e-8, k_m = 7.238e-10), principal
    inertia about (16.6, 16.6, 29.3)e-6 kg m^2 (the diagonal of the identified tensor); Bitcraze's
    figures: mass 27 g, 92 mm between diagonal motor axes (arm 0.046 m). Assumed (not from the
    thesis): omega_max 2500 rad/s (about 24,000 rpm; thrust-to-weight 2.7), motor time constant
    0.03 s, linear drag 0.3 1/s on every axis, contact radius 0.02 m, and ireland_2016's contact
    per unit mass (k/m = 2500 1/s^2, c/m = 50 1/s).
    """
    mass = 0.027
    return RotorParams(
        name="crazyflie_2", mass_kg=mass, inertia_kgm2=np.array([16.6e-6, 16.6e-6, 29.3e-6]), arm_m=0.046,
        layout="x", spin=np.array([1.0, -1.0, 1.0, -1.0]), k_f=3.1582e-10 * _PER_RPM2_TO_PER_RADS2,
        k_m=7.9379e-12 * _PER_RPM2_TO_PER_RADS2, motor_tau_s=0.03, omega_min_rads=0.0, omega_max_rads=2500.0,
        drag_per_s=np.full(3, 0.3), contact_stiffness_n_m=2500.0 * mass, contact_damping_n_s_m=50.0 * mass,
        contact_radius_m=0.02,
    )


#: The named parameter sets: ``PRESETS[name]()`` builds one.
PRESETS = {
    "pelican": pelican_rotor_params,
    "ireland_2016": ireland_2016_params,
    "crazyflie_2": crazyflie_2_params,
}


def rotor_preset(name: str, **overrides: Any) -> RotorParams:
    """The named parameter set ``name`` (see PRESETS), with ``overrides`` of some fields."""
    if name not in PRESETS:
        raise ConfigError(f"rotor.preset={name!r} unknown (allowed: {', '.join(PRESETS)})")
    params = PRESETS[name]()
    return params.replace(**overrides) if overrides else params

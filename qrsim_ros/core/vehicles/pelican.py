"""The identified AscTec Pelican model of QRSim, vectorised over vehicles (spec sections 2.1-2.7).

State ``X`` per vehicle (13): ``[px py pz  phi theta psi  u v w  p q r  thrust]`` -- NED position [m],
ZYX Euler angles [rad], FRD body velocity [m/s], body rates [rad/s], total thrust [N].
Controls ``U`` per vehicle (5): ``[pitch, roll, throttle, yaw_rate, battery]`` -- attitude commands [rad]
(positive pitch = nose up, which accelerates the vehicle towards -x body; positive roll = right side
down), throttle [0..1], yaw-rate command [rad/s] (positive = clockwise seen from above), battery [V].

The rotational part is the identified closed loop of vehicle + on-board attitude controller, the
translational part a point mass with linear drag; there is no inertia tensor or rotor model.
Fleet arrays have a leading vehicle axis: ``X`` is (N, 13), ``U`` is (N, 5).

The model is written once, per vehicle, in the kernels below (explicit loops over vehicles, compiled
by numba through ``qrsim_ros.core.common.jit``; plain Python with ``QRSIM_DISABLE_JIT=1``).
``pelican_derivative``, ``heun_step`` and ``PelicanFleet.step`` all run on them; a fleet step (checks,
noise, Heun integration, validity and collisions) is a single kernel call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, njit
from qrsim_ros.core.common.rng import clock_generators
from qrsim_ros.core.common.ticks import BASE_DT_S

# --- constants of the identified model (spec 2.2, 2.4) ------------------------------------------
G_MS2 = 9.81
MASS_KG = 1.68
HOVER_THRUST_N = MASS_KG * G_MS2
HOVER_THROTTLE = 0.59004353928  # throttle whose steady thrust equals m*g
#: Full battery [V]: what every controller and fallback sends (never caps the thrust).
FULL_BATTERY_V = 12.0
#: The hover control row [pitch, roll, throttle, yaw_rate, battery]: level, hover throttle, full battery.
#: The one "hover" of the project: fallbacks (expired commands, frozen or uncontrolled vehicles, a
#: policy's stop) use it. QRSim's controllers and control cost carry their own 0.59 (a PID offset and a
#: reward offset, spec 5.2 and 6), which are theirs and are kept.
HOVER_CONTROL = np.array([0.0, 0.0, HOVER_THROTTLE, 0.0, FULL_BATTERY_V])
HOVER_CONTROL.flags.writeable = False
#: The control row of a disarmed vehicle: level, zero throttle, full battery (the motors stopped).
MOTORS_OFF_CONTROL = np.array([0.0, 0.0, 0.0, 0.0, FULL_BATTERY_V])
MOTORS_OFF_CONTROL.flags.writeable = False

STATE_SIZE = 13
CONTROL_SIZE = 5
STATE_NAMES = ("px", "py", "pz", "phi", "theta", "psi", "u", "v", "w", "p", "q", "r", "thrust")
#: The true state's columns by name (STATE_NAMES): NED position [m] (north-east, down), ZYX Euler angles
#: [rad] (heading last), FRD body velocity [m/s], FRD body rates [rad/s], thrust [N].
STATE_POSITION_NED = slice(0, 3)
STATE_NORTH_EAST = slice(0, 2)
STATE_NORTH = 0
STATE_EAST = 1
STATE_DOWN = 2
STATE_EULER = slice(3, 6)
STATE_ROLL = 3
STATE_PITCH = 4
STATE_ROLL_PITCH = slice(3, 5)  # the tilt: roll and pitch, without the heading
STATE_HEADING = 5
STATE_VELOCITY_FRD = slice(6, 9)
STATE_RATES_FRD = slice(9, 12)
STATE_THRUST = 12
#: Position and Euler angles: the pose a DCM (``dcm_from_state``) and an interpolated pose are built from.
STATE_POSE = slice(0, 6)
#: Position, Euler angles and FRD body velocity: every column but the rates and the thrust.
STATE_POSE_AND_VELOCITY = slice(0, 9)
#: Every column but the thrust (pose, body velocity and rates): the columns the state limits bound.
STATE_KINEMATIC = slice(0, 12)
CONTROL_NAMES = ("pitch", "roll", "throttle", "yaw_rate", "battery")

#: Allowed control ranges (the code's values, spec 2.1), rows in CONTROL_NAMES order: [lo, hi].
CONTROL_LIMITS = np.array([[-0.9, 0.9], [-0.9, 0.9], [0.0, 1.0], [-4.5, 4.5], [9.0, 12.0]])

#: SI -> firmware units: 1 pitch/roll unit = 0.025 deg, throttle 0..4096, 1 yaw unit = 254.760/2047 deg/s.
SI_TO_FIRMWARE = np.array(
    [
        -1.0 / np.deg2rad(0.025),
        -1.0 / np.deg2rad(0.025),
        4097.0,
        -1.0 / np.deg2rad(254.760 / 2047.0),
        1.0,
    ]
)
FIRMWARE_TO_SI = 1.0 / SI_TO_FIRMWARE

LOW_THROTTLE_LIMIT_RAW = 300.0
MAX_ANGVEL_RADS = np.deg2rad(150.0)
PQ0 = -3.25060e-04
PQ1 = 1.79797e02
PQ2 = -24.3536
R0 = -4.81783e-03
R1 = -5.08944
#: The identified attitude loop's steady state (spec 2.3): a roll or pitch command settles to this
#: fraction of itself, a yaw-rate command to ``STEADY_YAW_RATE_GAIN`` of itself (an autopilot that
#: tracks an attitude divides by them).
STEADY_TILT_GAIN = float(PQ0 * SI_TO_FIRMWARE[1])
STEADY_YAW_RATE_GAIN = float(-R0 * SI_TO_FIRMWARE[3] / R1)
CTH0, CTH1, CTH2 = 6.63881e-01, 7.44649e-04, 2.39855e-06
CVB0, CVB1 = -18.0007, 4.23754
TAU0 = 3.07321
TAU1 = 46.8004
KUV = -4.97391e-01
KW = -1.35341


class PelicanInputError(ValueError):
    """A control or state given to the model is malformed, non-finite or out of range."""


def default_state_limits(area_limits_ned: ArrayLike, rate_limit_rads: float = 3.0) -> Array:
    """State limits (12, 2) of the default pelican configuration (spec 2.7).

    ``area_limits_ned`` = [xmin xmax ymin ymax zmin zmax] (NED, m). Angles +/-pi (yaw +/-10 pi),
    body velocities +/-15 m/s, body rates +/-``rate_limit_rads``. Thrust is never checked.
    """
    a = np.asarray(area_limits_ned, float).reshape(3, 2)
    rate = float(rate_limit_rads)
    return np.vstack(
        [
            a,
            [[-np.pi, np.pi], [-np.pi, np.pi], [-10 * np.pi, 10 * np.pi]],
            [[-15.0, 15.0]] * 3,
            [[-rate, rate]] * 3,
        ]
    )


@dataclass(frozen=True)
class PelicanParams:
    """Configuration of a fleet of Pelicans (one value shared by all vehicles).

    dt_s: integration step [s] (0.02 in every QRSim configuration).
    mass_kg: vehicle mass [kg].
    state_limits: (12, 2) limits of X[0:12]; leaving them invalidates (and freezes) the vehicle.
    collision_distance_m: vehicles closer than this (3-D, true positions) are both invalid.
    dyn_noise: (6,) std of the dynamic noise added to [du dv dw dp dq dr] [m/s^2, rad/s^2].
    """

    dt_s: float = BASE_DT_S
    mass_kg: float = MASS_KG
    state_limits: Array = field(
        default_factory=lambda: default_state_limits([-1000, 1000, -1000, 1000, -1000, 0])
    )
    collision_distance_m: float = 2.0
    dyn_noise: Array = field(default_factory=lambda: np.zeros(6))


def check_controls(u: ArrayLike) -> Array:
    """Validate SI controls (N, 5); raise PelicanInputError naming vehicle and control."""
    u = np.atleast_2d(np.asarray(u, float))
    if u.ndim != 2 or u.shape[1] != CONTROL_SIZE:
        raise PelicanInputError(f"controls must have shape (N, 5) {CONTROL_NAMES}, got {u.shape}")
    bad = first_bad_control(u, np.ones(u.shape[0], np.bool_), CONTROL_LIMITS)
    if bad >= 0:
        raise _control_error(u, bad)
    return u


def check_live_controls(u: Array, live: Array) -> None:
    """Raise PelicanInputError (naming vehicle and control) if a control of a ``live`` vehicle of the
    float64 (N, 5) SI controls ``u`` is non-finite or outside CONTROL_LIMITS (as ``PelicanFleet.step``)."""
    bad = first_bad_control(u, np.ascontiguousarray(live, dtype=np.bool_), CONTROL_LIMITS)
    if bad >= 0:
        raise _control_error(u, bad)


def _control_error(u: Array, flat_index: int) -> PelicanInputError:
    i, j = divmod(int(flat_index), CONTROL_SIZE)
    lo, hi = CONTROL_LIMITS[j]
    return PelicanInputError(
        f"vehicle {i}: control {CONTROL_NAMES[j]}={float(u[i, j])!r} outside [{lo}, {hi}]"
    )


def expand_state(x: ArrayLike, mass_kg: float = MASS_KG) -> Array:
    """Expand states of length 6, 12 or 13 to full (N, 13) states (spec 2.7, setX).

    6: position and attitude, velocities and rates zero, thrust m*g; 12: thrust m*g; 13: as given.
    """
    x = np.atleast_2d(np.asarray(x, float))
    n, k = x.shape
    if k not in (6, 12, 13):
        raise PelicanInputError(f"a state must have 6, 12 or 13 elements, got {k}")
    full = np.zeros((n, STATE_SIZE))
    full[:, :k] = x
    if k < 13:
        full[:, STATE_THRUST] = mass_kg * G_MS2
    return full


def checked_state_limits(state_limits: ArrayLike, error: type[PelicanInputError]) -> Array:
    """``state_limits`` as the C-contiguous float64 (12, 2) array [lo, hi] of x[:, 0:12] (state units) a
    fleet keeps; raise ``error`` if its shape is not (12, 2)."""
    limits = np.asarray(state_limits, float)
    if limits.shape != (12, 2):
        raise error(f"state_limits must have shape (12, 2), got {limits.shape}")
    return np.ascontiguousarray(limits)


def initial_states(x: ArrayLike, mass_kg: float, vehicles: Array, limits: Array,
                   error: type[PelicanInputError]) -> Array:
    """The full (M, 13) states (``expand_state`` with ``mass_kg`` [kg]) a ``set_state`` gives the M fleet
    rows ``vehicles``; raise ``error`` if there are not M states, or naming the vehicle (its fleet index)
    and element of the first value of x[:, 0:12] that is non-finite or outside ``limits`` (12, 2)."""
    full = expand_state(x, mass_kg)
    if full.shape[0] != vehicles.size:
        raise error(f"got {full.shape[0]} states for {vehicles.size} vehicles")
    kinematic = full[:, STATE_KINEMATIC]
    bad = ~np.isfinite(kinematic) | (kinematic < limits[:, 0]) | (kinematic > limits[:, 1])
    if bad.any():
        i, j = np.argwhere(bad)[0]
        lo, hi = limits[j]
        raise error(f"vehicle {int(vehicles[i])}: initial {STATE_NAMES[j]}={float(full[i, j])!r} "
                    f"outside [{lo}, {hi}]")
    return full


def collision_reason(distance_m: float) -> str:
    """``invalid_reason`` of a vehicle that came closer than ``distance_m`` [m] to another."""
    return f"collision (closer than {distance_m} m to another vehicle)"


# --- kernels (spec 2.3, 2.5, 2.7): the model's one formula, explicit loops over vehicles -----------
# Compiled by numba when available (qrsim_ros.core.common.jit); plain Python otherwise. Rows are 1-D float64
# views of the fleet arrays; "_into" kernels write their results into the arrays they are given.

_IN = F8_1D_IN  # a row the kernel reads
_OUT = "float64[:]"  # a row the kernel writes


@njit("UniTuple(float64, 9)(float64, float64, float64, float64, float64, float64)")
def _dcm_from_sines(sph: float, cph: float, sth: float, cth: float, sps: float, cps: float
                    ) -> tuple[float, ...]:
    return (
        cth * cps, cth * sps, -sth,
        -cph * sps + sph * sth * cps, cph * cps + sph * sth * sps, sph * cth,
        sph * sps + cph * sth * cps, -sph * cps + cph * sth * sps, cph * cth,
    )


@njit("UniTuple(float64, 9)(float64, float64, float64)")
def dcm_ned_to_body_entries(phi: float, theta: float, psi: float) -> tuple[float, ...]:
    """``frames.dcm_ned_to_body`` for one vehicle as 9 scalars (row-major d00 d01 ... d22), for kernels."""
    return _dcm_from_sines(math.sin(phi), math.cos(phi), math.sin(theta), math.cos(theta),
                           math.sin(psi), math.cos(psi))


@njit(f"UniTuple(float64, 9)({_IN}, {_OUT})")
def pose_rates_into(x, xdot):
    """The pose rates of one vehicle's state row x (x[0:12] as in the 13-element state) into xdot[0:6]:
    the NED velocity D^T [u v w] [m/s] and the ZYX Euler angle rates [rad/s] of the FRD body rates
    [p q r] (singular at pitch +-90 deg). Returns D (NED -> body, ``dcm_ned_to_body_entries``) of x's
    attitude, for the rest of the right-hand side."""
    phi, theta = x[3], x[4]
    u, v, w = x[6], x[7], x[8]
    p, q, r = x[9], x[10], x[11]
    sph, cph = math.sin(phi), math.cos(phi)
    sth, cth, tth = math.sin(theta), math.cos(theta), math.tan(theta)
    d = _dcm_from_sines(sph, cph, sth, cth, math.sin(x[5]), math.cos(x[5]))
    d00, d01, d02, d10, d11, d12, d20, d21, d22 = d
    xdot[0] = d00 * u + d10 * v + d20 * w  # NED velocity = D^T [u v w]
    xdot[1] = d01 * u + d11 * v + d21 * w
    xdot[2] = d02 * u + d12 * v + d22 * w
    xdot[3] = p + q * sph * tth + r * cph * tth
    xdot[4] = q * cph - r * sph
    xdot[5] = q * sph / cth + r * cph / cth
    return d


@njit(f"void({F8_2D_IN}, {F8_2D_IN}, float64[:, ::1])")
def body_to_ned_rows(x, v_body, v_ned):
    """``frames.body_to_ned(frames.dcm_from_state(x), v_body)`` in a kernel, bit-identical: each vehicle's
    body-axes vector v_body (N, 3) rotated to NED with its attitude x[:, 3:6] into v_ned (N, 3) (the numpy
    version costs more than the whole tick of a small fleet)."""
    for i in range(x.shape[0]):
        d00, d01, d02, d10, d11, d12, d20, d21, d22 = dcm_ned_to_body_entries(x[i, 3], x[i, 4], x[i, 5])
        w0, w1, w2 = v_body[i, 0], v_body[i, 1], v_body[i, 2]
        v_ned[i, 0] = d00 * w0 + d10 * w1 + d20 * w2
        v_ned[i, 1] = d01 * w0 + d11 * w1 + d21 * w2
        v_ned[i, 2] = d02 * w0 + d12 * w1 + d22 * w2


@njit("UniTuple(float64, 3)(float64, float64, float64, float64, float64, float64, float64, float64)")
def attitude_loop(pt_fw: float, rl_fw: float, ya_fw: float, phi: float, theta: float, p: float, q: float,
                  r: float) -> tuple[float, float, float]:
    """The identified attitude loop (spec 2.3): body angular accelerations (pdot, qdot, rdot) [rad/s^2]
    for pitch, roll, yaw-rate commands in firmware units and the attitude [rad] and body rates [rad/s].
    The rate clamp only stops a roll/pitch rate that is already beyond MAX_ANGVEL_RADS from growing.
    The rotor airframe's onboard controller (``rotor_control``) asks its rotors for these accelerations."""
    pdot = PQ1 * (PQ0 * rl_fw - phi) + PQ2 * p
    if (p > MAX_ANGVEL_RADS and pdot > 0.0) or (p < -MAX_ANGVEL_RADS and pdot < 0.0):
        pdot = 0.0
    qdot = PQ1 * (PQ0 * pt_fw - theta) + PQ2 * q
    if (q > MAX_ANGVEL_RADS and qdot > 0.0) or (q < -MAX_ANGVEL_RADS and qdot < 0.0):
        qdot = 0.0
    rdot = R0 * ya_fw + R1 * r
    return pdot, qdot, rdot


@njit("float64(float64)")
def steady_thrust_n(th_fw: float) -> float:
    """The identified thrust map (spec 2.3): the thrust [N] the model settles to at throttle ``th_fw``
    (firmware units 0..4097)."""
    return CTH0 + CTH1 * th_fw + CTH2 * th_fw * th_fw


@njit("float64(float64)")
def battery_max_thrust_n(vb: float) -> float:
    """The identified battery cap (spec 2.3): the largest thrust [N] at battery voltage ``vb`` [V]."""
    return CVB0 + CVB1 * vb


@njit("float64(float64, float64, float64, float64, float64, float64)")
def thrust_rate(th_fw: float, vb: float, fth: float, dt_s: float, thrust_scale: float,
                thrust_offset_n: float) -> float:
    """The identified thrust dynamics (spec 2.3): d(thrust)/dt [N/s] at thrust ``fth`` [N] for throttle
    ``th_fw`` (firmware units) and battery ``vb`` [V]: below the low-throttle limit a first order towards
    the thrust map, else slew-limited (TAU1 N/s) towards it and capped by the battery's maximum thrust.
    ``thrust_scale`` and ``thrust_offset_n`` [N] map the thrust the rotors can give (the map's value and
    the battery's cap) to ``scale * value + offset``: 1 and 0 leave the identified model exactly as it is
    (rotor faults, ``PelicanFleet.set_thrust_fault``).
    The rotor airframe's onboard controller (``rotor_control``) asks its rotors for this thrust change."""
    df = (thrust_scale * steady_thrust_n(th_fw) + thrust_offset_n) - fth
    if abs(df) < TAU1 * dt_s:
        tau = df / dt_s
    elif df > 0.0:
        tau = TAU1
    elif df < 0.0:
        tau = -TAU1
    else:
        tau = df * TAU1  # NaN stays NaN (sign(NaN) * TAU1)
    if th_fw < LOW_THROTTLE_LIMIT_RAW:
        return TAU0 * df
    f_max = thrust_scale * battery_max_thrust_n(vb) + thrust_offset_n
    return (f_max - fth) / dt_s if fth + tau * dt_s > f_max else tau


def steady_thrust_si(throttle: float) -> float:
    """``steady_thrust_n`` of a throttle in [0, 1] (SI controls) [N]."""
    return float(steady_thrust_n(float(throttle) * SI_TO_FIRMWARE[2]))


@njit(f"void({_IN}, {_IN}, {_IN}, {_IN}, float64, float64, float64, float64, {_OUT}, {_OUT})")
def _derivative_into(x, u_fw, wind, noise, mass_kg, dt_s, thrust_scale, thrust_offset_n, xdot, a):
    """Right-hand side of one vehicle (spec 2.3): xdot (13) and ``a`` (3); see ``pelican_derivative``.
    ``thrust_scale``, ``thrust_offset_n``: see ``thrust_rate`` (1 and 0: the identified model)."""
    phi, theta = x[3], x[4]
    u, v, w = x[6], x[7], x[8]
    p, q, r = x[9], x[10], x[11]
    fth = x[12]
    pt, rl, th, ya, vb = u_fw[0], u_fw[1], u_fw[2], u_fw[3], u_fw[4]
    _, _, d02, _, _, d12, _, _, d22 = pose_rates_into(x, xdot)

    pdot, qdot, rdot = attitude_loop(pt, rl, ya, phi, theta, p, q, r)

    fdot = thrust_rate(th, vb, fth, dt_s, thrust_scale, thrust_offset_n)

    g0, g1, g2 = G_MS2 * d02, G_MS2 * d12, G_MS2 * d22  # gravity in body axes
    acc0 = -q * w + r * v + g0 + KUV * (u - wind[0])
    acc1 = -r * u + p * w + g1 + KUV * (v - wind[1])
    acc2 = -p * v + q * u + (g2 - (fth + fdot * dt_s) / mass_kg) + KW * (w - wind[2])
    a[0] = acc0 - g0  # QRSim's accelerometer input: before the noise, without omega x v
    a[1] = acc1 - g1
    a[2] = acc2 - g2

    xdot[6] = acc0 + noise[0]
    xdot[7] = acc1 + noise[1]
    xdot[8] = acc2 + noise[2]
    xdot[9] = pdot + noise[3]
    xdot[10] = qdot + noise[4]
    xdot[11] = rdot + noise[5]
    xdot[12] = fdot


@njit(f"void({_IN}, {_IN}, {_IN}, {_IN}, float64, float64, float64, float64, {_OUT}, {_OUT}, "
      f"{_OUT}, {_OUT}, {_OUT}, {_OUT}, {_OUT})")
def _heun_into(x, u_fw, wind, noise, mass_kg, dt_s, thrust_scale, thrust_offset_n, x_next, a, k1, k2, x1, a1,
               a2):
    """One Heun step of one vehicle (spec 2.5); k1, k2, x1 (13), a1, a2 (3) are scratch.

    ``x_next`` may be ``x`` itself (the fleet integrates in place).
    """
    _derivative_into(x, u_fw, wind, noise, mass_kg, dt_s, thrust_scale, thrust_offset_n, k1, a1)
    for j in range(STATE_SIZE):
        x1[j] = x[j] + k1[j] * dt_s
    _derivative_into(x1, u_fw, wind, noise, mass_kg, dt_s, thrust_scale, thrust_offset_n, k2, a2)
    half_dt = 0.5 * dt_s
    for j in range(STATE_SIZE):
        x_next[j] = x[j] + (k1[j] + k2[j]) * half_dt
    for j in range(3):
        a[j] = 0.5 * (a1[j] + a2[j])


_MAT_IN = F8_2D_IN
_MAT_OUT = "float64[:, ::1]"


@njit(f"void({_MAT_IN}, {_MAT_IN}, {_MAT_IN}, {_MAT_IN}, float64, float64, {_MAT_OUT}, {_MAT_OUT})")
def _derivative_rows(x, u_fw, wind, noise, mass_kg, dt_s, xdot, a):
    for i in range(x.shape[0]):
        _derivative_into(x[i], u_fw[i], wind[i], noise[i], mass_kg, dt_s, 1.0, 0.0, xdot[i], a[i])


@njit(f"void({_MAT_IN}, {_MAT_IN}, {_MAT_IN}, {_MAT_IN}, float64, float64, {_MAT_OUT}, {_MAT_OUT})")
def _heun_rows(x, u_fw, wind, noise, mass_kg, dt_s, x_next, a):
    k1, k2, x1 = np.empty(STATE_SIZE), np.empty(STATE_SIZE), np.empty(STATE_SIZE)
    a1, a2 = np.empty(3), np.empty(3)
    for i in range(x.shape[0]):
        _heun_into(x[i], u_fw[i], wind[i], noise[i], mass_kg, dt_s, 1.0, 0.0, x_next[i], a[i], k1, k2, x1, a1,
                   a2)


@njit(f"int64({_MAT_IN}, boolean[::1], {_MAT_IN})")
def first_bad_control(u, live, limits):
    """Flat index i * 5 + j of the first control (row-major) of a live vehicle that is non-finite or
    outside ``limits`` (5, 2) [lo, hi], or -1."""
    for i in range(u.shape[0]):
        if live[i]:
            for j in range(CONTROL_SIZE):
                value = u[i, j]
                if not (limits[j, 0] <= value <= limits[j, 1]):
                    return i * CONTROL_SIZE + j
    return -1


@njit(f"void({_MAT_IN}, float64, boolean[::1])")
def collisions_into(x, distance_m, near):
    """near[i] = another vehicle's position (x[:, 0:3], NED) is closer than ``distance_m``.

    Vehicles with a non-finite position are never near. Sort-and-sweep along north: only pairs whose
    north separation is below the distance are examined (O(N log N) for spread-out fleets).
    """
    n = x.shape[0]
    rows = np.empty(n, np.int64)
    north = np.empty(n)
    m = 0
    for i in range(n):
        near[i] = False
        if math.isfinite(x[i, 0]) and math.isfinite(x[i, 1]) and math.isfinite(x[i, 2]):
            rows[m] = i
            north[m] = x[i, 0]
            m += 1
    order = np.argsort(north[:m])
    for s in range(m):
        i = rows[order[s]]
        for t in range(s + 1, m):
            j = rows[order[t]]
            dx = x[j, 0] - x[i, 0]
            if dx >= distance_m:  # sorted: every later vehicle is at least as far north
                break
            dy = x[j, 1] - x[i, 1]
            dz = x[j, 2] - x[i, 2]
            if math.sqrt(dx * dx + dy * dy + dz * dz) < distance_m:
                near[i] = True
                near[j] = True


#: Reason codes written by ``_fleet_step`` (2 + j: state element j outside its limits).
REASON_NON_FINITE = 1
REASON_OUTSIDE = 2
REASON_COLLISION = 2 + STATE_SIZE


@njit(f"int64({_MAT_IN}, {_MAT_IN}, boolean[::1], int64[::1], boolean[::1], {_MAT_IN}, float64)")
def invalidate_into(x, extra, valid, reason, near, state_limits, collision_distance_m):
    """The validity check after a fleet step (spec 2.7), in place on valid (N,), reason (N,), near (N,).

    A valid vehicle becomes invalid with reason code ``REASON_NON_FINITE`` if its state x (N, 13) or
    its row of ``extra`` (N, K: other integrated values, the rotor speeds [rad/s]; K = 0 for none) is
    non-finite, ``REASON_OUTSIDE + j`` if state element j < 12 leaves ``state_limits`` (12, 2) [lo, hi]
    (thrust is never checked), ``REASON_COLLISION`` if another vehicle is closer than
    ``collision_distance_m`` [m] (``collisions_into``). Returns the number of vehicles made invalid.
    """
    n = x.shape[0]
    if n > 1:
        collisions_into(x, collision_distance_m, near)
    invalid = 0
    for i in range(n):
        if not valid[i]:
            continue
        code = 0
        for j in range(STATE_SIZE):
            if not math.isfinite(x[i, j]):
                code = REASON_NON_FINITE
                break
        for j in range(extra.shape[1]):
            if not math.isfinite(extra[i, j]):
                code = REASON_NON_FINITE
        if code == 0:
            for j in range(STATE_SIZE - 1):  # thrust is never checked
                if x[i, j] < state_limits[j, 0] or x[i, j] > state_limits[j, 1]:
                    code = REASON_OUTSIDE + j
                    break
        if code == 0 and n > 1 and near[i]:
            code = REASON_COLLISION
        if code != 0:
            valid[i] = False
            reason[i] = code
            invalid += 1
    return invalid


@njit("UniTuple(int64, 3)(float64[:, ::1], float64[:, ::1], boolean[::1], int64[::1], boolean[::1], "
      f"{_MAT_IN}, {_MAT_IN}, {_IN}, {_MAT_IN}, {_MAT_IN}, {_IN}, "
      f"float64[:, :, ::1], int64[::1], float64, float64, float64, {_IN}, {_IN})")
def _fleet_step(x, accel, valid, reason, near, u_si, wind, si_to_fw, control_limits, state_limits,
                dyn_noise, normals, normals_used, mass_kg, dt_s, collision_distance_m, thrust_scale,
                thrust_offset_n):
    """``PelicanFleet.step`` for all vehicles (spec 2.7), in place on x, accel, valid, reason.

    Returns (first bad control i * 5 + j or -1, vehicles that became invalid, noise buffers that
    ran empty). Nothing changes if a control is bad. ``normals`` (N, B, 6) are buffered standard
    normals, row ``normals_used[i]`` is vehicle i's next; B == 0 means no dynamic noise.
    ``thrust_scale``, ``thrust_offset_n`` (N,): each vehicle's rotor-fault thrust map (``_derivative_into``).
    """
    bad = first_bad_control(u_si, valid, control_limits)
    if bad >= 0:
        return bad, 0, 0
    n = x.shape[0]
    block = normals.shape[1]
    u_fw, noise = np.empty(CONTROL_SIZE), np.zeros(6)
    k1, k2, x1 = np.empty(STATE_SIZE), np.empty(STATE_SIZE), np.empty(STATE_SIZE)
    a1, a2 = np.empty(3), np.empty(3)
    moved = 0
    emptied = 0
    for i in range(n):
        reason[i] = 0
        if not valid[i]:
            continue  # frozen: ignores its controls, as in QRSim
        moved += 1
        for j in range(CONTROL_SIZE):
            u_fw[j] = u_si[i, j] * si_to_fw[j]
        if block > 0:
            row = normals_used[i]
            for j in range(6):
                noise[j] = dyn_noise[j] * normals[i, row, j]
            normals_used[i] = row + 1
            if row + 1 >= block:
                emptied += 1
        _heun_into(x[i], u_fw, wind[i], noise, mass_kg, dt_s, thrust_scale[i], thrust_offset_n[i], x[i],
                   accel[i], k1, k2, x1, a1, a2)
    if moved == 0:
        return -1, 0, emptied
    return -1, invalidate_into(x, x[:, :0], valid, reason, near, state_limits, collision_distance_m), emptied


# --- numpy-facing API -----------------------------------------------------------------------------

def _rows(value: ArrayLike, n: int, width: int) -> Array:
    """``value`` as float64 (n, width), broadcast if needed (numpy's rules, as the vectorised model)."""
    arr = np.asarray(value, dtype=np.float64)
    return arr if arr.shape == (n, width) else np.broadcast_to(arr, (n, width))


def _run_rows(kernel: Callable[..., None], x: ArrayLike, u_fw: ArrayLike, wind_body: ArrayLike,
              noise: ArrayLike, mass_kg: float, dt_s: float) -> tuple[Array, Array]:
    """Call a row kernel (``_derivative_rows`` or ``_heun_rows``) on the inputs shaped (N, width) and
    return its outputs: the new (N, 13) state-sized array and ``a`` (N, 3)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = x.shape[0]
    out, a = np.empty((n, STATE_SIZE)), np.empty((n, 3))
    kernel(_rows(x, n, STATE_SIZE), _rows(u_fw, n, CONTROL_SIZE), _rows(wind_body, n, 3), _rows(noise, n, 6),
           float(mass_kg), float(dt_s), out, a)
    return out, a


def pelican_derivative(
    x: Array, u_fw: Array, wind_body: Array, noise: Array, mass_kg: float, dt_s: float
) -> tuple[Array, Array]:
    """ODE right-hand side of the identified model (spec 2.3) for N vehicles.

    x: (N, 13) states; u_fw: (N, 5) controls in firmware units (see SI_TO_FIRMWARE);
    wind_body: (N, 3) air velocity in body FRD [m/s]; noise: (N, 6) accelerations added to
    [du dv dw dp dq dr]. Returns (xdot (N, 13), a (N, 3)); ``a`` is body acceleration minus gravity,
    computed before the noise (QRSim's accelerometer input; it omits the omega x v term).
    """
    return _run_rows(_derivative_rows, x, u_fw, wind_body, noise, mass_kg, dt_s)


def heun_step(
    x: Array, u_fw: Array, wind_body: Array, noise: Array, mass_kg: float, dt_s: float
) -> tuple[Array, Array]:
    """One Heun (explicit RK2) step with inputs held over the step (spec 2.5).

    Returns (x_next (N, 13), a (N, 3)) where ``a`` is the mean of the two stages' ``a``.
    """
    return _run_rows(_heun_rows, x, u_fw, wind_body, noise, mass_kg, dt_s)


class FleetValidity:
    """Per-vehicle validity of a fleet, shared by ``PelicanFleet`` and ``rotor.RotorFleet``: a fleet keeps
    ``_valid`` (N,) bool, ``_invalid_reason`` (N,) str, ``_reason_code`` (N,) int64 (``invalidate_into``'s
    codes of its last step), its states ``_x`` (N, 13) and their limits ``_limits`` (12, 2)."""

    _valid: NDArray[np.bool_]
    _invalid_reason: list[str]
    _reason_code: NDArray[np.int64]
    _x: Array
    _limits: Array

    valid = copy_of("_valid", "Per-vehicle validity (N,).")
    invalid_reason = copy_of("_invalid_reason",
                             "Per-vehicle reason (N,) the vehicle became invalid ('' while valid).")

    def disarm(self, vehicles: ArrayLike, reason: str = "landed (failsafe land)") -> None:
        """Motors off for good: the ``vehicles`` become invalid (frozen where they are, as any invalid
        vehicle, until ``set_state``) with ``reason`` (a failsafe landing that touched down)."""
        for i in np.atleast_1d(vehicles):
            if self._valid[int(i)]:
                self._valid[int(i)] = False
                self._invalid_reason[int(i)] = reason

    def _record_invalid_reasons(self, collision_distance_m: float) -> None:
        """The reasons of the vehicles the last step made invalid (its nonzero ``_reason_code``), with
        ``collision_distance_m`` [m] as the collision reason states it."""
        for i in np.flatnonzero(self._reason_code):
            code = int(self._reason_code[i])
            if code == REASON_NON_FINITE:
                self._invalid_reason[i] = "non-finite state"
            elif code == REASON_COLLISION:
                self._invalid_reason[i] = collision_reason(collision_distance_m)
            else:
                j = code - REASON_OUTSIDE
                lo, hi = self._limits[j]
                self._invalid_reason[i] = f"{STATE_NAMES[j]}={self._x[i, j]:.6g} outside [{lo:.6g}, {hi:.6g}]"


class PelicanFleet(FleetValidity):
    """N Pelicans integrated together (spec 2.7 update order, vectorised).

    Per ``step``: controls are checked and scaled, dynamic noise drawn (one seeded stream per
    vehicle), every valid vehicle integrated with Heun RK2, then validity is evaluated: a vehicle
    whose state is non-finite, outside ``state_limits`` or closer than ``collision_distance_m`` to
    any other vehicle becomes invalid and stays frozen at that state until ``set_state``.
    """

    #: Dynamic-noise normals drawn per generator call (one block of 6-vectors per vehicle). numpy's
    #: Generator yields the same values in blocks as one 6-vector at a time, so this only saves calls.
    NOISE_BLOCK_STEPS = 64

    def __init__(
        self,
        num_vehicles: int,
        params: PelicanParams | None = None,
        noise_rngs: list[np.random.Generator] | None = None,
    ) -> None:
        if num_vehicles < 1:
            raise PelicanInputError(f"num_vehicles must be >= 1, got {num_vehicles}")
        self.params = params or PelicanParams()
        self.num_vehicles = n = int(num_vehicles)
        self._limits = checked_state_limits(self.params.state_limits, PelicanInputError)
        self._dyn_noise = np.broadcast_to(np.asarray(self.params.dyn_noise, float), (6,)).copy()
        if noise_rngs is None:
            noise_rngs = clock_generators(num_vehicles)
        if len(noise_rngs) != num_vehicles:
            raise PelicanInputError("one dynamic-noise generator per vehicle is required")
        self._noise_rngs = noise_rngs
        self._x = expand_state(np.zeros((num_vehicles, 6)), self.params.mass_kg)
        self._a = np.zeros((num_vehicles, 3))
        self._valid = np.zeros(num_vehicles, bool)
        self._invalid_reason = [""] * num_vehicles
        # Buffered dynamic noise: vehicle i's next normals are _normals[i, _normals_used[i]]. A vehicle
        # draws (a block) only when it moves with an empty buffer, like QRSim's per-step draw; with a
        # generator shared by several vehicles the block is one step, which keeps QRSim's draw order.
        if np.any(self._dyn_noise):
            shared = len({id(r) for r in noise_rngs}) < n
            block = 1 if shared else self.NOISE_BLOCK_STEPS
        else:
            block = 0  # no dynamic noise: no draws at all
        self._normals = np.zeros((n, block, 6))
        self._normals_used = np.full(n, block, dtype=np.int64)
        self._noise_buffers_empty = block > 0
        # scratch of the step kernel
        self._reason_code = np.zeros(n, dtype=np.int64)
        self._near = np.zeros(n, dtype=bool)
        self._still_air = np.zeros((n, 3))
        self._mass_kg = float(self.params.mass_kg)
        self._dt_s = float(self.params.dt_s)
        self._collision_distance_m = float(self.params.collision_distance_m)
        # rotor faults' thrust map per vehicle (``set_thrust_fault``): 1 and 0 = the identified model
        self._thrust_scale = np.ones(n)
        self._thrust_offset_n = np.zeros(n)

    # --- accessors --------------------------------------------------------------------------
    state = copy_of("_x", "True states (N, 13) (a copy).")
    accel_body = copy_of("_a", "RK2-averaged ``a`` (N, 3) of the last step: body acceleration minus gravity "
                               "[m/s^2].")

    # --- state setting ----------------------------------------------------------------------
    def set_state(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Set states of length 6, 12 or 13 (spec 2.7 setX) and mark those vehicles valid.

        ``vehicles`` selects which rows (default: all, and ``x`` must have N rows). A state outside
        the limits raises PelicanInputError naming the vehicle and element.
        """
        idx = np.arange(self.num_vehicles) if vehicles is None else np.atleast_1d(vehicles)
        full = initial_states(x, self.params.mass_kg, idx, self._limits, PelicanInputError)
        if not np.all(np.isfinite(full[:, STATE_THRUST])):
            raise PelicanInputError("initial thrust must be finite")
        self._x[idx] = full
        self._a[idx] = 0.0
        self._valid[idx] = True
        for i in idx:
            self._invalid_reason[int(i)] = ""

    def set_thrust_fault(self, scale: ArrayLike | None = None, offset_n: ArrayLike | None = None) -> None:
        """Rotor faults on the identified model (docs/FAULTS.md, "Effects"): from the next ``step`` each
        vehicle's available thrust, both the throttle's steady thrust and the battery's cap, becomes
        ``scale * value + offset_n`` [N]. ``scale`` (N,) in [0, 1], ``offset_n`` (N,) >= 0 [N]; None: 1 / 0
        (no fault). The Pelican has no rotors: this is the collective-thrust approximation of a lost,
        degraded or stuck rotor (``core.engine.faults``)."""
        n = self.num_vehicles
        s = np.ones(n) if scale is None else np.asarray(scale, float)
        b = np.zeros(n) if offset_n is None else np.asarray(offset_n, float)
        if s.shape != (n,) or b.shape != (n,) or not (np.all((s >= 0) & (s <= 1)) and np.all(b >= 0)):
            raise PelicanInputError(f"thrust fault: scale must be (N,) in [0, 1] and offset_n (N,) >= 0, "
                                    f"got {s.tolist()!r}, {b.tolist()!r}")
        self._thrust_scale[:] = s
        self._thrust_offset_n[:] = b

    @property
    def thrust_scale(self) -> Array:
        """Each vehicle's thrust scale of ``set_thrust_fault`` (N,) (a copy; 1: no rotor fault)."""
        return self._thrust_scale.copy()

    # --- stepping ---------------------------------------------------------------------------
    def step(self, controls: ArrayLike, wind_body: ArrayLike | None = None) -> None:
        """Advance every valid vehicle by ``dt_s``.

        controls: (N, 5) SI controls (see module doc); wind_body: (N, 3) air velocity in body FRD
        [m/s] (mean wind + turbulence), default still air.
        """
        n = self.num_vehicles
        u = controls
        if type(u) is not np.ndarray or u.dtype != np.float64 or u.ndim != 2:
            u = np.atleast_2d(np.asarray(controls, float))
        if u.ndim != 2 or u.shape[1] != CONTROL_SIZE:
            raise PelicanInputError(f"controls must have shape (N, 5) {CONTROL_NAMES}, got {u.shape}")
        if u.shape[0] != n:
            raise PelicanInputError(f"controls for {u.shape[0]} vehicles, fleet has {n}")
        if wind_body is None:
            wind = self._still_air
        else:
            wind = wind_body
            if type(wind) is not np.ndarray or wind.dtype != np.float64 or wind.shape != (n, 3):
                wind = np.asarray(wind_body, float).reshape(n, 3)
        if self._noise_buffers_empty:
            self._refill_noise()
        # Invalid vehicles are frozen and ignore their controls, as in QRSim (no check either).
        bad, invalid, emptied = _fleet_step(
            self._x, self._a, self._valid, self._reason_code, self._near, u, wind, SI_TO_FIRMWARE,
            CONTROL_LIMITS, self._limits, self._dyn_noise, self._normals, self._normals_used,
            self._mass_kg, self._dt_s, self._collision_distance_m, self._thrust_scale, self._thrust_offset_n,
        )
        if bad >= 0:
            raise _control_error(u, bad)
        if emptied:
            self._noise_buffers_empty = True
        if invalid:
            self._record_invalid_reasons(self.params.collision_distance_m)

    def _refill_noise(self) -> None:
        """Draw a new block of normals for every valid vehicle whose buffer is used up."""
        block = self._normals.shape[1]
        empty = self._normals_used >= block
        for i in np.flatnonzero(empty & self._valid):
            self._normals[i] = self._noise_rngs[i].standard_normal((block, 6))
            self._normals_used[i] = 0
        # invalid vehicles draw when they move again (after set_state)
        self._noise_buffers_empty = bool(np.any(empty & ~self._valid))

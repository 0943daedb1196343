"""The onboard controller of the rotor-level airframe: every input a vehicle can be given,
turned into rotor speed commands (N, 4) [rad/s] for ``RotorFleet.step``, vectorised over vehicles
(numba kernels, ``core.common.jit``). Docs: docs/ROTOR.md.

Three inputs (frames: FRD body, NED world, SI units, as the rest of the core):

- **the Pelican control row** ``[pitch, roll, throttle, yaw_rate, battery]`` (``pelican.CONTROL_NAMES``,
  ranges ``pelican.CONTROL_LIMITS``): what ``FleetControl`` produces for every mode (attitude, velocity,
  waypoint, failsafes) and what ``cmd/attitude`` carries. The controller keeps the identified Pelican's
  meaning of it as closely as the structure allows, by asking the rotors for what the identified model
  would do next:
  - attitude: the body angular accelerations of the identified closed loop (``pelican.attitude_loop``:
    PD on the angle error towards 0.745 x the command, the yaw-rate first order, the 150 deg/s rate
    clamp), evaluated at the attitude and rates predicted ``lookahead_ticks`` of a tick ahead (the
    rates from the angular acceleration the measured rotor speeds produce now: this compensates the
    zero-order hold of the tick and the motors' lag), the clamp applied to the rate a tick ahead;
  - thrust: the measured collective k_f sum(omega_i^2) plus one tick of the identified thrust dynamics
    (``pelican.thrust_rate``: the throttle's thrust map, the 46.8 N/s slew limit, the low-throttle first
    order, the battery cap). Not tilt-compensated (as on the identified model).
- **body rates + collective thrust** ``[p, q, r, T]`` (rad/s, FRD; N, >= 0): a P loop on the body rates,
  angular acceleration = ``rate_gain_per_s`` x (commanded - measured rate), and T as the collective.
- **normalised motor commands** ``[c0, c1, c2, c3]`` in [0, 1] (rotor numbering of ``rotor_params``):
  straight to the motors as omega_min + c (omega_max - omega_min) (``rotor_mixer.normalised_to_speeds``).

Torques from angular accelerations alpha: tau = I alpha + omega_b x I omega_b (the rigid body's
gyroscopic term cancelled; diagonal inertia). The wrench [T, tau] goes through the mixer's inverse with
priorities, as an autopilot's mixer: the collective thrust is clipped to the rotors' range first, then
roll and pitch torques are scaled down together until every rotor thrust is inside
[k_f omega_min^2, k_f omega_max^2], then the yaw torque. Last, the motor controllers' speed loop
(``speed_gain``) turns the desired speeds into the commands. The controller reads the true state and
the rotor speeds (ideal sensing, as the identified model's attitude loop) and has no memory of its own.

Free parameters (``RotorControlParams``, defaults chosen against the identified model, docs/ROTOR.md):
``attitude_gain`` and ``yaw_gain`` scale the identified loops, ``lookahead_ticks`` the prediction,
``speed_gain`` the speed loop, ``rate_gain_per_s`` the rates input's loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, njit
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ConfigError, finite, shape, single_positive
from qrsim_ros.core.vehicles.pelican import (
    CONTROL_LIMITS,
    CONTROL_SIZE,
    MAX_ANGVEL_RADS,
    PQ2,
    R1,
    SI_TO_FIRMWARE,
    attitude_loop,
    thrust_rate,
)
from qrsim_ros.core.vehicles.rotor_mixer import mixer_matrices, normalised_to_speeds
from qrsim_ros.core.vehicles.rotor_params import RotorParams

#: Width of the lower-level inputs: body rates + collective thrust, and normalised motor commands.
RATES_THRUST_SIZE = 4
MOTORS_SIZE = 4
RATES_THRUST_NAMES = ("p_rads", "q_rads", "r_rads", "thrust_n")
MOTORS_NAMES = ("motor0", "motor1", "motor2", "motor3")
#: The rotor-level inputs by name (the ``rates_thrust`` and ``motors`` control modes, the
#: cmd/rates_thrust and cmd/motors topics) and their columns.
LOW_LEVEL_INPUTS = {"rates_thrust": RATES_THRUST_NAMES, "motors": MOTORS_NAMES}
#: Limits of the body-rate input [rad/s], FRD p, q, r: the identified attitude loop's rate limit for roll
#: and pitch (150 deg/s, spec 2.1) and the yaw-rate command's limit (4.5 rad/s).
RATE_LIMITS_RADPS = np.array([MAX_ANGVEL_RADS, MAX_ANGVEL_RADS, CONTROL_LIMITS[3, 1]])


def low_level_bounds(mode: str, rotor: RotorParams) -> tuple[Array, Array]:
    """(low, high) of a rotor-level input's columns: ``rates_thrust``: |p|, |q| <= 2.618, |r| <= 4.5
    [rad/s] (``RATE_LIMITS_RADPS``) and collective thrust 0 .. ``rotor.max_thrust_n`` [N]; ``motors``: each
    normalised command in [0, 1]. The one definition both front ends check (and clamp) against."""
    if mode == "rates_thrust":
        return np.append(-RATE_LIMITS_RADPS, 0.0), np.append(RATE_LIMITS_RADPS, rotor.max_thrust_n)
    if mode == "motors":
        return np.zeros(MOTORS_SIZE), np.ones(MOTORS_SIZE)
    raise ValueError(f"{mode!r} is not a rotor-level input (one of {', '.join(LOW_LEVEL_INPUTS)})")


def hover_low_level(mode: str, rotor: RotorParams) -> Array:
    """The rotor-level input that holds a level vehicle in still air: ``rates_thrust`` zero rates and the
    weight m g [N]; ``motors`` every rotor at the hover speed sqrt(m g / (4 k_f)) (open loop: it drifts)."""
    if mode == "rates_thrust":
        return np.array([0.0, 0.0, 0.0, rotor.mass_kg * rotor.gravity_ms2])
    if mode == "motors":
        span = rotor.omega_max_rads - rotor.omega_min_rads
        return np.full(MOTORS_SIZE, (rotor.hover_omega_rads - rotor.omega_min_rads) / span)
    raise ValueError(f"{mode!r} is not a rotor-level input (one of {', '.join(LOW_LEVEL_INPUTS)})")


@dataclass(frozen=True)
class RotorControlParams:
    """Gains of the onboard controller (module doc).

    attitude_gain: factor on the identified roll/pitch loop's angular accelerations (1: the identified
    loop, PQ1 = 179.8 1/s^2 on the angle error, PQ2 = -24.4 1/s on the rate).
    yaw_gain: factor on the identified yaw-rate loop (R0 on the command, R1 = -5.09 1/s on the rate).
    rate_gain_per_s: (3,) P gains of the body-rates input [1/s] (default: the identified loops' rate
    damping, -PQ2, -PQ2, -R1).
    speed_gain: the speed loop of the motor controllers (ESCs with speed feedback): the command sent to
    motor i is omega_i + speed_gain (omega_des_i - omega_i), omega_i the measured speed (>= 0 after
    that; the motor clips it to [omega_min, omega_max]). 1: the desired speed itself (an open-loop ESC);
    larger values hide the motor's time constant for small changes while a large step still saturates
    at omega_max (so the thrust slew limit the time constant was fitted to is kept). Held over a tick of
    dt with a motor time constant tau, the speed error shrinks by 1 - speed_gain (1 - exp(-dt/tau)) per
    tick: 1/(1 - exp(-dt/tau)) (4.2 for the pelican set) reaches the desired speed in one tick (the
    default, None), twice that is unstable.
    lookahead_ticks: how far ahead (in ticks, >= 0) the attitude loop is evaluated on the predicted
    attitude and rates (module doc); 0.5 matches the identified step responses best (docs/ROTOR.md).
    """

    attitude_gain: float = 1.0
    yaw_gain: float = 1.0
    speed_gain: float | None = None
    lookahead_ticks: float = 0.5
    rate_gain_per_s: Array = field(default_factory=lambda: np.array([-PQ2, -PQ2, -R1]))

    def __post_init__(self) -> None:
        for key in ("attitude_gain", "yaw_gain", "speed_gain"):
            if getattr(self, key) is not None:
                single_positive(f"rotor_control.{key}", finite(f"rotor_control.{key}", getattr(self, key)))
        look = finite("rotor_control.lookahead_ticks", self.lookahead_ticks)
        if look < 0:
            raise ConfigError(f"rotor_control.lookahead_ticks={look!r} must be >= 0")
        gains = shape("rotor_control.rate_gain_per_s", self.rate_gain_per_s, (3,))
        if not np.all(np.isfinite(gains)) or np.any(gains <= 0):
            raise ConfigError(f"rotor_control.rate_gain_per_s={gains.tolist()} must be finite and > 0")
        object.__setattr__(self, "rate_gain_per_s", gains)


# packed controller vector the kernels read (``_pack``)
_IXX, _IYY, _IZZ, _FLO, _FHI, _KF, _ATT, _YAW, _KP, _KQ, _KR, _KW, _LOOK = range(13)
_MINV = 13  # 16 entries, row-major
_M = 29  # 16 entries, row-major
_NPRM = 45


def deadbeat_speed_gain(rotor: RotorParams, dt_s: float = BASE_DT_S) -> float:
    """The speed-loop gain that brings a motor to its desired speed in one tick (``RotorControlParams``)."""
    return 1.0 / (1.0 - math.exp(-dt_s / rotor.motor_tau_s))


def _pack(rotor: RotorParams, gains: RotorControlParams, dt_s: float) -> Array:
    c = np.zeros(_NPRM)
    c[_IXX:_IZZ + 1] = rotor.inertia_kgm2
    c[_FLO] = rotor.k_f * rotor.omega_min_rads ** 2
    c[_FHI] = rotor.k_f * rotor.omega_max_rads ** 2
    c[_KF] = rotor.k_f
    c[_ATT], c[_YAW] = gains.attitude_gain, gains.yaw_gain
    c[_KP:_KR + 1] = gains.rate_gain_per_s
    c[_KW] = deadbeat_speed_gain(rotor, dt_s) if gains.speed_gain is None else gains.speed_gain
    m, m_inv = mixer_matrices(rotor)
    c[_MINV:_MINV + 16] = m_inv.ravel()
    c[_M:_M + 16] = m.ravel()
    c[_LOOK] = gains.lookahead_ticks * dt_s
    return c


@njit(f"float64({F8_1D_IN}, {F8_1D_IN}, float64, float64, float64)")
def _largest_scale(base, extra, lo, hi, s_max):
    """Largest s in [0, s_max] with lo <= base_i + s extra_i <= hi for every rotor i (base inside)."""
    s = s_max
    for i in range(4):
        e = extra[i]
        if e > 0.0:
            s = min(s, (hi - base[i]) / e)
        elif e < 0.0:
            s = min(s, (lo - base[i]) / e)
    return max(s, 0.0)


@njit(f"void(float64, float64, float64, float64, float64, float64, float64, {F8_1D_IN}, {F8_1D_IN}, "
      "float64[::1], float64[::1], float64[::1])")
def _wrench_to_speeds(thrust, ax, ay, az, p, q, r, omega, c, out, f_rp, f_y):
    """Rotor speed commands ``out`` (4) [rad/s] for collective ``thrust`` [N] and body angular
    accelerations (ax, ay, az) [rad/s^2] at body rates (p, q, r), with the mixer's priorities, through
    the speed loop from the measured speeds ``omega`` (4) (module doc). f_rp, f_y (4) are scratch."""
    ixx, iyy, izz = c[_IXX], c[_IYY], c[_IZZ]
    tx = ixx * ax + (izz - iyy) * q * r
    ty = iyy * ay + (ixx - izz) * r * p
    tz = izz * az + (iyy - ixx) * p * q
    lo, hi = c[_FLO], c[_FHI]
    t = min(max(thrust, 4.0 * lo), 4.0 * hi)
    for i in range(4):
        out[i] = c[_MINV + 4 * i] * t
        f_rp[i] = c[_MINV + 4 * i + 1] * tx + c[_MINV + 4 * i + 2] * ty
        f_y[i] = c[_MINV + 4 * i + 3] * tz
    s = _largest_scale(out, f_rp, lo, hi, 1.0)
    for i in range(4):
        out[i] += s * f_rp[i]
    s = _largest_scale(out, f_y, lo, hi, 1.0)
    for i in range(4):
        f = min(max(out[i] + s * f_y[i], lo), hi)  # rounding only
        desired = math.sqrt(f / c[_KF])
        out[i] = max(omega[i] + c[_KW] * (desired - omega[i]), 0.0)


@njit("float64(float64, float64, float64)")
def _rate_clamped(accel, rate, dt_s):
    """The identified loop's rate clamp (``pelican.attitude_loop``) applied to the rate a tick ahead: an
    angular acceleration [rad/s^2] held over the tick that would take a roll/pitch rate beyond
    MAX_ANGVEL_RADS is cut to the one that reaches it (0 if the rate is already beyond)."""
    ahead = rate + accel * dt_s
    if ahead > MAX_ANGVEL_RADS and accel > 0.0:
        return max(0.0, (MAX_ANGVEL_RADS - rate) / dt_s)
    if ahead < -MAX_ANGVEL_RADS and accel < 0.0:
        return min(0.0, (-MAX_ANGVEL_RADS - rate) / dt_s)
    return accel


@njit(f"void({F8_2D_IN}, {F8_2D_IN}, {F8_2D_IN}, boolean[::1], {F8_1D_IN}, {F8_1D_IN}, float64, "
      "float64[:, ::1])")
def control_rows_to_speeds(u_si, x, omega, live, si_to_fw, c, dt_s, omega_cmd):
    """The Pelican control rows (N, 5) SI of the ``live`` vehicles -> rotor speed commands (N, 4)."""
    f_rp, f_y = np.empty(4), np.empty(4)
    for i in range(u_si.shape[0]):
        if not live[i]:
            continue
        pt, rl = u_si[i, 0] * si_to_fw[0], u_si[i, 1] * si_to_fw[1]
        th, ya, vb = u_si[i, 2] * si_to_fw[2], u_si[i, 3] * si_to_fw[3], u_si[i, 4] * si_to_fw[4]
        p, q, r = x[i, 9], x[i, 10], x[i, 11]
        # the body's angular acceleration now, from the measured rotor speeds (the torque being made)
        measured, tx, ty = 0.0, 0.0, 0.0
        for j in range(4):
            f = c[_KF] * omega[i, j] * omega[i, j]
            measured += f
            tx += c[_M + 4 + j] * f
            ty += c[_M + 8 + j] * f
        h = c[_LOOK]
        p_ahead = p + h * (tx - (c[_IZZ] - c[_IYY]) * q * r) / c[_IXX]
        q_ahead = q + h * (ty - (c[_IXX] - c[_IZZ]) * r * p) / c[_IYY]
        phi_ahead = x[i, 3] + h * p
        theta_ahead = x[i, 4] + h * q
        pdot, qdot, rdot = attitude_loop(pt, rl, ya, phi_ahead, theta_ahead, p_ahead, q_ahead, r)
        pdot = _rate_clamped(c[_ATT] * pdot, p_ahead, dt_s)
        qdot = _rate_clamped(c[_ATT] * qdot, q_ahead, dt_s)
        thrust = measured + thrust_rate(th, vb, measured, dt_s, 1.0, 0.0) * dt_s
        _wrench_to_speeds(thrust, pdot, qdot, c[_YAW] * rdot, p, q, r, omega[i], c,
                          omega_cmd[i], f_rp, f_y)


@njit(f"void({F8_2D_IN}, {F8_2D_IN}, {F8_2D_IN}, boolean[::1], {F8_1D_IN}, float64[:, ::1])")
def _rates_thrust_to_speeds(cmd, x, omega, live, c, omega_cmd):
    """Body rates + collective thrust rows (N, 4) of the ``live`` vehicles -> rotor speed commands."""
    f_rp, f_y = np.empty(4), np.empty(4)
    for i in range(cmd.shape[0]):
        if not live[i]:
            continue
        p, q, r = x[i, 9], x[i, 10], x[i, 11]
        ax, ay, az = c[_KP] * (cmd[i, 0] - p), c[_KQ] * (cmd[i, 1] - q), c[_KR] * (cmd[i, 2] - r)
        _wrench_to_speeds(cmd[i, 3], ax, ay, az, p, q, r, omega[i], c, omega_cmd[i], f_rp, f_y)


class RotorControlInputError(ValueError):
    """A lower-level input (rates + thrust, motor commands) is malformed, non-finite or out of range."""


class RotorControl:
    """The onboard controller of N rotor-level vehicles of one parameter set (module doc).

    Each method takes the inputs of all N vehicles, their true states ``x`` (N, 13), measured rotor
    speeds ``omega`` (N, 4) [rad/s] and which of them to compute (``live`` (N,) bool; the other rows of
    the result are the hover speed) and returns rotor speed commands (N, 4) [rad/s]. Inputs of live
    vehicles are checked; the Pelican control rows are checked by the caller
    (``pelican.check_live_controls``), as on the Pelican. ``dt_s``: the tick [s].
    """

    def __init__(self, rotor: RotorParams, gains: RotorControlParams | None = None,
                 dt_s: float = BASE_DT_S) -> None:
        self.rotor = rotor
        self.dt_s = float(dt_s)
        self.gains = gains if gains is not None else RotorControlParams()
        self._c = _pack(rotor, self.gains, self.dt_s)
        self._si_to_fw = np.ascontiguousarray(SI_TO_FIRMWARE)

    def kernel_args(self) -> tuple[Array, Array, float, float]:
        """``control_rows_to_speeds``'s constants (``si_to_fw``, ``c``, ``dt_s``) and the hover speed the
        rows of vehicles not computed get (``from_controls``), for a caller that runs the kernel inside its
        own (``airframes.Airframes.step``)."""
        return self._si_to_fw, self._c, self.dt_s, self.rotor.hover_omega_rads

    def _out(self, n: int) -> Array:
        out = np.empty((n, 4))
        out.fill(self.rotor.hover_omega_rads)
        return out

    def from_controls(self, u_si: Array, x: Array, omega: Array, live: ArrayLike) -> Array:
        """Pelican control rows (N, 5) ``[pitch, roll, throttle, yaw_rate, battery]`` (SI) -> speeds."""
        u = np.asarray(u_si, np.float64).reshape(-1, CONTROL_SIZE)
        out = self._out(u.shape[0])
        control_rows_to_speeds(u, np.asarray(x, np.float64), np.asarray(omega, np.float64),
                                np.ascontiguousarray(live, np.bool_), self._si_to_fw, self._c, self.dt_s, out)
        return out

    def from_rates_thrust(self, cmd: ArrayLike, x: Array, omega: Array, live: ArrayLike) -> Array:
        """Body rates [rad/s] (FRD) + collective thrust [N] (N, 4) -> speeds. Rates must be finite, the
        thrust finite and >= 0 (thrust beyond the rotors' range is clipped, like any saturation)."""
        c = np.asarray(cmd, np.float64).reshape(-1, RATES_THRUST_SIZE)
        lv = np.ascontiguousarray(live, np.bool_)
        bad = lv[:, None] & ~np.isfinite(c)
        bad[:, 3] |= lv & (c[:, 3] < 0)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            what = "finite and >= 0" if j == 3 else "finite"
            name = RATES_THRUST_NAMES[j]
            raise RotorControlInputError(f"vehicle {int(i)}: {name}={float(c[i, j])!r} must be {what}")
        out = self._out(c.shape[0])
        _rates_thrust_to_speeds(c, np.asarray(x, np.float64), np.asarray(omega, np.float64), lv, self._c,
                                out)
        return out

    def from_rotor_thrusts(self, thrusts_n: ArrayLike, omega: Array) -> Array:
        """Rotor thrusts (M, 4) [N] (clipped to the rotors' range) -> speed commands (M, 4) [rad/s] through
        the motor controllers' speed loop from the measured speeds ``omega`` (M, 4), as the other inputs'
        last step: the emergency landing controller's output (``emergency_land``, eq. 26). A thrust of 0
        commands 0 (with omega_min = 0 the motor spins down at its own time constant)."""
        c = self._c
        desired = np.sqrt(np.clip(np.asarray(thrusts_n, np.float64), c[_FLO], c[_FHI]) / c[_KF])
        om = np.asarray(omega, np.float64)
        return np.maximum(om + c[_KW] * (desired - om), 0.0)

    def from_motors(self, cmd: ArrayLike, live: ArrayLike) -> Array:
        """Normalised motor commands (N, 4) in [0, 1] -> speeds (``rotor_mixer.normalised_to_speeds``)."""
        c = np.asarray(cmd, np.float64).reshape(-1, MOTORS_SIZE)
        lv = np.ascontiguousarray(live, np.bool_)
        bad = lv[:, None] & ~((c >= 0.0) & (c <= 1.0))
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise RotorControlInputError(f"vehicle {int(i)}: {MOTORS_NAMES[j]}={float(c[i, j])!r} must be in "
                                         "[0, 1]")
        out = self._out(c.shape[0])
        out[lv] = normalised_to_speeds(self.rotor, c[lv])
        return out

"""QRSim's discrete PID flight controllers, vectorised over vehicles (spec section 6).

Every controller holds per-vehicle PID state (arrays with a leading vehicle axis), is advanced once
per control step of ``dt_s`` (default the tick ``BASE_DT_S`` = 0.02 s) by ``compute(...)`` and returns SI
controls (N, 5) ``[pitch, roll, throttle, yaw_rate, battery]`` (see ``pelican``) with the battery
forced to 12 V so the model's voltage cap never limits the thrust.

Inputs are given explicitly per vehicle: ``position_ned`` (N, 3) [m], ``euler`` (N, 3) ZYX angles
``[phi theta psi]`` [rad] and ``velocity_body`` (N, 3) FRD [m/s]. ``state_view(X)`` builds them from
true states (N, 13), ``estimated_state_view(eX)`` from estimated states (N, 20) (spec 2.1); each
controller also has ``compute_from_state`` / ``compute_from_estimated_state`` shortcuts.

Deliberate differences from the MATLAB original (all documented where they occur):

1. The heading error ``psi_des - psi`` is wrapped to (-pi, pi] (``frames.wrap_angle``) so the vehicle
   turns the short way; the original uses the raw difference (spec 9).
2. ``estimated_state_view`` rotates the estimated NED velocity into the body frame with the
   *estimated* attitude ``eX[3:6]``. This is what the original controllers do with eX
   (``dcm(eX)``); QRSim's ``getEXasX`` differs and uses the true attitude.
3. ``AnglesHeightPID`` is broken in the original (undefined ``seros`` and ``z``); this is a working
   version: pitch/roll pass-through, the altitude PID of ``VelocityHeightPID``, the common yaw loop.
4. The returned controls are clamped to ``pelican.CONTROL_LIMITS`` so they are always valid model
   inputs. A vehicle whose inputs are not finite (an invalid platform has ``eX = NaN``) gets the
   neutral control ``[0, 0, HOVER_THROTTLE, 0, 12]`` and its PID state is left untouched, so NaNs
   never enter an integrator.
5. One controller object holds independent state per vehicle (the original TCP server shared a
   single PID object between all UAVs, spec 10 item 12).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.frames import Array, dcm_ned_to_body, ned_to_body, wrap_angle
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, njit
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.vehicles.estimated_state import (
    ESTIMATED_STATE_SIZE,
    EULER,
    GROUND_VELOCITY_NE,
    HEIGHT,
    NORTH_EAST,
    velocity_ned,
)
from qrsim_ros.core.vehicles.pelican import (
    CONTROL_LIMITS,
    FULL_BATTERY_V,
    HOVER_CONTROL,
    STATE_EULER,
    STATE_POSITION_NED,
    STATE_SIZE,
    STATE_VELOCITY_FRD,
)

# --- original constants (spec 6) -----------------------------------------------------------------
TH_HOVER = 0.59  # QRSim's throttle offset of every vertical loop (a PID term; the model hovers at 0.59004)
MAX_TILT_RAD = 0.34  # pitch/roll command clamp of the velocity/waypoint loops
K_YAW_PER_S = 6.0  # yaw-rate command per heading error [1/s]
MAX_YAW_RATE_RADS = 4.4  # yaw-rate command clamp [rad/s]
MAX_SPEED_MPS = 3.0  # clamp of each body component of a desired velocity [m/s]
WAYPOINT_MAX_SPEED_MPS = 5.0  # clamp of each body component of the waypoint loop's desired velocity



@dataclass(frozen=True)
class VelocityGains:
    """Velocity PID gains (``VelocityPID.m``, also the xy loop of ``VelocityHeightPID.m``).

    The integral term is a plain sum of errors (not multiplied by dt), so ``kvi``/``kwi`` are per
    control step. xy: error in body [m/s] -> attitude command [rad]; z: error in body w [m/s] ->
    throttle [0..1] (negative gains: a too-slow descent needs less throttle).
    """

    kvp: float = 0.25  # [rad/(m/s)]
    kvi: float = 0.003  # [rad/(m/s)] per step
    kvd: float = 0.05  # [rad/(m/s^2)]
    kwp: float = -0.2  # [1/(m/s)]
    kwi: float = -0.002  # [1/(m/s)] per step
    kwd: float = -0.0  # [s/m]
    th_hover: float = TH_HOVER
    max_tilt_rad: float = MAX_TILT_RAD
    max_speed_mps: float = MAX_SPEED_MPS


@dataclass(frozen=True)
class AltitudeGains:
    """Altitude PID gains (``VelocityHeightPID``, ``WaypointPID``, ``AnglesHeightPID``).

    Error ``ez = z - z_des`` [m] (NED, positive when below the target), integral ``iz`` in [m s].
    ``anti_windup`` is the factor of the back-calculation ``iz -= anti_windup * (th_des - th)``.
    """

    kpz: float = 0.03  # [1/m]
    kiz: float = 0.0008  # [1/(m s)]
    kdz: float = 0.04  # [s/m]
    th_hover: float = TH_HOVER
    anti_windup: float = 2.0


@dataclass(frozen=True)
class WaypointGains:
    """Horizontal waypoint loop gains (``WaypointPID.m``): position P -> velocity P -> attitude."""

    kxy: float = 0.9  # desired body speed per body-frame distance [1/s]
    kv: float = 0.09  # attitude command per speed error [rad/(m/s)]
    max_speed_mps: float = WAYPOINT_MAX_SPEED_MPS
    max_tilt_rad: float = MAX_TILT_RAD


@dataclass(frozen=True)
class YawGains:
    """Heading P loop common to all controllers: ``ya = clamp(k * wrap(psi_des - psi), +/-max)``."""

    k_per_s: float = K_YAW_PER_S
    max_rate_rads: float = MAX_YAW_RATE_RADS


class ControllerView(NamedTuple):
    """What the controllers read of a vehicle: NED position [m], ZYX Euler angles [rad], FRD body
    velocity [m/s], each (N, 3)."""

    position_ned: Array
    euler: Array
    velocity_body: Array


def state_view(x: ArrayLike) -> ControllerView:
    """Controller inputs from true states X (N, 13) (spec 2.1): X[0:3], X[3:6], X[6:9]."""
    x = np.atleast_2d(np.asarray(x, float))
    if x.shape[1] != STATE_SIZE:
        raise ValueError(f"true states must have shape (N, {STATE_SIZE}), got {x.shape}")
    return ControllerView(x[:, STATE_POSITION_NED].copy(), x[:, STATE_EULER].copy(),
                          x[:, STATE_VELOCITY_FRD].copy())


def estimated_state_view(ex: ArrayLike) -> ControllerView:
    """Controller inputs from estimated states eX (N, 20) (spec 2.1, as the original PIDs read eX).

    position_ned = [eX1, eX2, -eX17] (GPS north/east, altimeter height turned into NED z);
    euler = eX4..6; velocity_body = dcm(eX4..6) · [eX18, eX19, -eX20] (GPS NED velocity, altimeter
    rate turned into NED down). 1-based indices as in the spec. The rotation uses the *estimated*
    attitude, as the original controllers do; QRSim's ``getEXasX`` uses the true attitude instead.
    """
    ex = np.atleast_2d(np.asarray(ex, float))
    if ex.shape[1] != ESTIMATED_STATE_SIZE:
        raise ValueError(f"estimated states must have shape (N, {ESTIMATED_STATE_SIZE}), got {ex.shape}")
    position_ned = np.column_stack([ex[:, NORTH_EAST], -ex[:, HEIGHT]])
    euler = ex[:, EULER].copy()
    velocity_body = ned_to_body(dcm_ned_to_body(euler[:, 0], euler[:, 1], euler[:, 2]), velocity_ned(ex))
    return ControllerView(position_ned, euler, velocity_body)


def estimated_ground_speed(ex: ArrayLike) -> Array:
    """Horizontal ground speed ‖[eX18, eX19]‖ (N,) [m/s] from estimated states (N, 20)."""
    ex = np.atleast_2d(np.asarray(ex, float))
    v_ne = ex[:, GROUND_VELOCITY_NE]
    return np.hypot(v_ne[:, 0], v_ne[:, 1])


# --- building blocks -----------------------------------------------------------------------------


def _yaw_rate_command(psi_des: Array, psi: Array, gains: YawGains) -> Array:
    """Yaw-rate command [rad/s]; the heading error is wrapped to (-pi, pi] (deliberate difference)."""
    return np.clip(gains.k_per_s * wrap_angle(psi_des - psi), -gains.max_rate_rads, gains.max_rate_rads)


def _finalise(pitch: Array, roll: Array, throttle: Array, yaw_rate: Array, ok: Array) -> Array:
    """Stack into (N, 5) SI controls, clamp to the model's limits, neutral control where not ok."""
    u = np.column_stack([pitch, roll, throttle, yaw_rate, np.full(pitch.shape, FULL_BATTERY_V)])
    u = np.clip(u, CONTROL_LIMITS[:, 0], CONTROL_LIMITS[:, 1])
    u[~ok] = HOVER_CONTROL  # non-finite inputs (see module doc, difference 4)
    return u


class _Controller:
    """Shared plumbing: vehicle count, dt, the yaw loop's gains, argument shaping, finite-input mask,
    and the ``compute_from_state`` / ``compute_from_estimated_state`` shortcuts of ``compute``."""

    def __init__(self, num_vehicles: int, dt_s: float, yaw_gains: YawGains | None) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        if not dt_s > 0:
            raise ValueError(f"dt_s must be > 0, got {dt_s}")
        self.num_vehicles = int(num_vehicles)
        self.dt_s = float(dt_s)
        self.yaw_gains = yaw_gains or YawGains()

    #: One control step, ``compute(position_ned, euler, velocity_body, *set_points)`` -> SI controls (N, 5)
    #: (each controller defines it with its own set points).
    compute: Callable[..., Array]

    def compute_from_state(self, x: ArrayLike, *set_points: ArrayLike) -> Array:
        """``compute`` on true states X (N, 13), with the set points of the controller's ``compute``."""
        return self.compute(*state_view(x), *set_points)

    def compute_from_estimated_state(self, ex: ArrayLike, *set_points: ArrayLike) -> Array:
        """``compute`` on estimated states eX (N, 20) (see ``estimated_state_view``), with the set points
        of the controller's ``compute``."""
        return self.compute(*estimated_state_view(ex), *set_points)

    def _rows(self, vehicles: ArrayLike | None) -> Array:
        return np.arange(self.num_vehicles) if vehicles is None else np.atleast_1d(vehicles)

    def _per_vehicle(self, value: ArrayLike, width: int | None, name: str, check_finite: bool) -> Array:
        """Broadcast an input to (N,) or (N, width) floats; set points must be finite."""
        shape = (self.num_vehicles,) if width is None else (self.num_vehicles, width)
        try:
            out = np.broadcast_to(np.asarray(value, float), shape).copy()
        except ValueError as exc:
            raise ValueError(f"{name} must broadcast to {shape}, got {np.shape(value)}") from exc
        if check_finite and not np.all(np.isfinite(out)):
            raise ValueError(f"{name} must be finite")
        return out

    def _vehicle_inputs(
        self, position_ned: ArrayLike, euler: ArrayLike, velocity_body: ArrayLike | None
    ) -> tuple[Array, Array, Array, Array]:
        """(position_ned, euler, velocity_body, ok) with ok = all inputs of the vehicle finite."""
        pos = self._per_vehicle(position_ned, 3, "position_ned", False)
        eul = self._per_vehicle(euler, 3, "euler", False)
        vel = (
            np.zeros((self.num_vehicles, 3))
            if velocity_body is None
            else self._per_vehicle(velocity_body, 3, "velocity_body", False)
        )
        ok = np.all(np.isfinite(np.hstack([pos, eul, vel])), axis=1)
        return pos, eul, vel, ok


class _AltitudePID:
    """Altitude PID of spec 6 (VelocityHeightPID/WaypointPID), per vehicle.

    ``ez = -(z_des - z)``; ``iz += ez*dt``; ``dez = 0`` on a set-point change else ``(ez - ez_prev)/dt``;
    ``th_des = th_hover + kpz ez + kiz iz + kdz dez``; ``th = clamp(th_des, 0, 1)``;
    anti-windup ``iz -= 2 (th_des - th)``. Note the integral is updated *before* it is used.
    """

    def __init__(self, num_vehicles: int, gains: AltitudeGains) -> None:
        self.gains = gains
        self.iz_m_s = np.zeros(num_vehicles)
        self.ez_prev_m = np.zeros(num_vehicles)

    def reset(self, rows: Array) -> None:
        self.iz_m_s[rows] = 0.0
        self.ez_prev_m[rows] = 0.0

    def step(self, z_ned: Array, z_des_ned: Array, sp_change: Array, ok: Array, dt_s: float) -> Array:
        g = self.gains
        ez = -(z_des_ned - z_ned)
        iz = self.iz_m_s + ez * dt_s
        dez = np.where(sp_change, 0.0, (ez - self.ez_prev_m) / dt_s)
        th_des = g.th_hover + g.kpz * ez + g.kiz * iz + g.kdz * dez
        th = np.clip(th_des, 0.0, 1.0)
        iz = iz - g.anti_windup * (th_des - th)
        self.iz_m_s = np.where(ok, iz, self.iz_m_s)
        self.ez_prev_m = np.where(ok, ez, self.ez_prev_m)
        return th


def _set_point_change(previous: Array, new: Array) -> Array:
    """Per-vehicle 'set point changed' flags (exact comparison, as the original)."""
    return np.any(previous != new, axis=1)


class _HeightController(_Controller):
    """A controller with the altitude loop ``_AltitudePID`` (VelocityHeightPID, WaypointPID,
    AnglesHeightPID); ``reset`` clears it and the subclass's own state (``_clear``)."""

    def __init__(self, num_vehicles: int, dt_s: float, altitude_gains: AltitudeGains | None,
                 yaw_gains: YawGains | None) -> None:
        super().__init__(num_vehicles, dt_s, yaw_gains)
        self._altitude = _AltitudePID(self.num_vehicles, altitude_gains or AltitudeGains())

    def reset(self, vehicles: ArrayLike | None = None) -> None:
        """Clear the altitude integrator and past error, and the controller's own PID state and stored
        set points, of ``vehicles`` (default all)."""
        rows = self._rows(vehicles)
        self._clear(rows)
        self._altitude.reset(rows)

    def _clear(self, rows: Array) -> None:
        raise NotImplementedError

    def _controls(self, pitch: Array, roll: Array, pos: Array, z_des_ned: Array, z_change: Array,
                  psi_des: Array, eul: Array, ok: Array) -> Array:
        """SI controls (N, 5) from ``pitch``, ``roll`` (N,) [rad], the altitude PID's throttle for NED
        z_des_ned (N,) [m] (derivative reset where ``z_change``) and the yaw loop's rate for ``psi_des``
        (N,) [rad], at positions ``pos`` (N, 3) NED [m] and attitudes ``eul`` (N, 3) [rad] (``_finalise``:
        the hover control where not ``ok``)."""
        throttle = self._altitude.step(pos[:, 2], z_des_ned, z_change, ok, self.dt_s)
        yaw_rate = _yaw_rate_command(psi_des, eul[:, 2], self.yaw_gains)
        return _finalise(pitch, roll, throttle, yaw_rate, ok)


class _BodyVelocityPID:
    """PID on body-velocity errors, per vehicle and axis (``VelocityPID.m``; the xy loop of
    ``VelocityHeightPID.m``).

    The integral is a plain sum of the errors [m/s] (per control step), used before it is updated; the
    derivative is reset to 0 on the step where the set point changes. The state of vehicles whose
    inputs are not finite is left untouched. Initial set point and past errors are zero (as the original).
    """

    def __init__(self, num_vehicles: int, axes: int, set_point_size: int) -> None:
        self.ei = np.zeros((num_vehicles, axes))  # plain sums of the body-velocity errors [m/s]
        self.e_prev = np.zeros((num_vehicles, axes))
        self.sp = np.zeros((num_vehicles, set_point_size))  # last set point

    def reset(self, rows: Array) -> None:
        self.ei[rows] = 0.0
        self.e_prev[rows] = 0.0
        self.sp[rows] = 0.0

    def set_point_change(self, sp: Array) -> Array:
        """Per-vehicle flags: ``sp`` differs from the stored set point."""
        return _set_point_change(self.sp, sp)

    def step(self, e: Array, sp: Array, sp_change: Array, ok: Array, kp: ArrayLike, ki: ArrayLike,
             kd: ArrayLike, dt_s: float) -> Array:
        """PID outputs (N, axes) for the errors ``e``; stores ``sp`` and the new integral and past error
        of the vehicles where ``ok``."""
        de = np.where(sp_change[:, None], 0.0, (e - self.e_prev) / dt_s)
        out = kp * e + ki * self.ei + kd * de  # integral used before it is updated (as original)
        self.sp = np.where(ok[:, None], sp, self.sp)
        self.ei = np.where(ok[:, None], self.ei + e, self.ei)
        self.e_prev = np.where(ok[:, None], e, self.e_prev)
        return out


def _body_velocity_error(euler: Array, velocity_body: Array, v_des_ned: Array, max_speed_mps: float
                         ) -> Array:
    """Body-velocity errors (N, 3) [m/s]: ``vt - [u v w]`` with ``vt = Cbn · v_des_ned`` (Cbn = NED->body
    DCM of the attitude), each body component of ``vt`` clamped to ±max_speed_mps. The x error is
    negated: nose up (positive pitch) accelerates backwards (towards -x body)."""
    vt = ned_to_body(dcm_ned_to_body(euler[:, 0], euler[:, 1], euler[:, 2]), v_des_ned)
    vt = np.clip(vt, -max_speed_mps, max_speed_mps)
    v = velocity_body
    return np.column_stack([-(vt[:, 0] - v[:, 0]), vt[:, 1] - v[:, 1], vt[:, 2] - v[:, 2]])


def _tilt_commands(out: Array, max_tilt_rad: float) -> tuple[Array, Array]:
    """(pitch, roll) [rad]: the first two PID outputs clamped to ±max_tilt_rad."""
    return np.clip(out[:, 0], -max_tilt_rad, max_tilt_rad), np.clip(out[:, 1], -max_tilt_rad, max_tilt_rad)


# --- VelocityPID's fused kernel ------------------------------------------------------------------
# numpy's per-call overhead (about 1 us per operation) dominated VelocityPID on a few vehicles; the kernel
# is the same arithmetic in the same order as the numpy building blocks (``dcm_ned_to_body``,
# ``ned_to_body``'s einsum, ``_BodyVelocityPID.step``, ``_yaw_rate_command``, ``_finalise``), so the
# results are bit-identical. numpy's einsum sums a row of 3 products as (d0 v0 + d2 v2) + d1 v1
# (its SIMD pairs), which ``rotate_ned_to_body`` copies.


def is_f8(a: object, shape: tuple[int, ...]) -> bool:
    """Whether ``a`` is a float64 array of exactly ``shape`` (what the kernels take without a copy)."""
    return isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == shape


@njit("UniTuple(float64, 3)(float64, float64, float64, float64, float64, float64)")
def rotate_ned_to_body(phi, theta, psi, vn, ve, vd):
    """``ned_to_body(dcm_ned_to_body(phi, theta, psi), [vn, ve, vd])`` for one vector, bit-identical."""
    sph, cph = np.sin(phi), np.cos(phi)
    sth, cth = np.sin(theta), np.cos(theta)
    sps, cps = np.sin(psi), np.cos(psi)
    return ((cth * cps * vn + -sth * vd) + cth * sps * ve,
            ((-cph * sps + sph * sth * cps) * vn + sph * cth * vd) + (cph * cps + sph * sth * sps) * ve,
            ((sph * sps + cph * sth * cps) * vn + cph * cth * vd) + (-sph * cps + cph * sth * sps) * ve)


@njit(f"void({F8_2D_IN}, float64[:, :], float64[:, :], float64[:, :])")
def estimated_view_kernel(ex, pos, eul, vel):
    """``estimated_state_view`` into (N, 3) buffers: pos [m], euler [rad], body velocity [m/s]."""
    for i in range(ex.shape[0]):
        phi, theta, psi = ex[i, 3], ex[i, 4], ex[i, 5]
        pos[i, 0], pos[i, 1], pos[i, 2] = ex[i, 0], ex[i, 1], -ex[i, 16]
        eul[i, 0], eul[i, 1], eul[i, 2] = phi, theta, psi
        v = rotate_ned_to_body(phi, theta, psi, ex[i, 17], ex[i, 18], -ex[i, 19])  # NED velocity, down
        vel[i, 0], vel[i, 1], vel[i, 2] = v


@njit(f"int64({F8_2D_IN}, {F8_2D_IN}, {F8_2D_IN}, {F8_2D_IN}, {F8_1D_IN}, float64[:, :], float64[:, :], "
      f"float64[:, :], {F8_1D_IN}, {F8_2D_IN}, {F8_1D_IN}, float64, float64[:, :])")
def velocity_pid_kernel(pos, eul, vel, v_des, psi_des, sp, ei, e_prev, g, limits, hover, dt_s, u):
    """One ``VelocityPID.compute`` over N vehicles (class doc): controls into ``u`` (N, 5), PID state
    ``sp``/``ei``/``e_prev`` (N, 3) updated where the inputs are finite. ``g``: kvp, kvi, kvd, kwp, kwi,
    kwd, th_hover, max_tilt_rad, max_speed_mps, k_per_s, max_rate_rads, battery [V]. Returns 1 (nothing
    done) if a set point is not finite, else 0."""
    n = pos.shape[0]
    for i in range(n):
        if not (np.isfinite(psi_des[i]) and np.isfinite(v_des[i, 0]) and np.isfinite(v_des[i, 1])
                and np.isfinite(v_des[i, 2])):
            return 1
    kp = (g[0], g[0], g[3])
    ki = (g[1], g[1], g[4])
    kd = (g[2], g[2], g[5])
    th_hover, tilt, vmax, k_yaw, max_yaw = g[6], g[7], g[8], g[9], g[10]
    e = np.empty(3)
    out = np.empty(3)
    c = np.empty(5)
    for i in range(n):
        ok = True
        for j in range(3):
            if not (np.isfinite(pos[i, j]) and np.isfinite(eul[i, j]) and np.isfinite(vel[i, j])):
                ok = False
        change = sp[i, 0] != v_des[i, 0] or sp[i, 1] != v_des[i, 1] or sp[i, 2] != v_des[i, 2]
        vt0, vt1, vt2 = rotate_ned_to_body(eul[i, 0], eul[i, 1], eul[i, 2], v_des[i, 0], v_des[i, 1],
                                            v_des[i, 2])
        vt0 = min(max(vt0, -vmax), vmax)
        vt1 = min(max(vt1, -vmax), vmax)
        vt2 = min(max(vt2, -vmax), vmax)
        e[0] = -(vt0 - vel[i, 0])  # nose up accelerates backwards
        e[1] = vt1 - vel[i, 1]
        e[2] = vt2 - vel[i, 2]
        for j in range(3):
            de = 0.0 if change else (e[j] - e_prev[i, j]) / dt_s
            out[j] = kp[j] * e[j] + ki[j] * ei[i, j] + kd[j] * de  # integral used before it is updated
        if ok:
            for j in range(3):
                sp[i, j] = v_des[i, j]
                ei[i, j] = ei[i, j] + e[j]
                e_prev[i, j] = e[j]
        c[0] = min(max(out[0], -tilt), tilt)
        c[1] = min(max(out[1], -tilt), tilt)
        c[2] = min(max(th_hover + out[2], 0.0), 1.0)
        w = (psi_des[i] - eul[i, 2] + np.pi) % (2.0 * np.pi) - np.pi
        if w == -np.pi:
            w = np.pi
        c[3] = min(max(k_yaw * w, -max_yaw), max_yaw)
        c[4] = g[11]
        for j in range(5):
            u[i, j] = min(max(c[j], limits[j, 0]), limits[j, 1]) if ok else hover[j]
    return 0


# --- controllers -----------------------------------------------------------------------------------


class VelocityPID(_Controller):
    """Velocity controller (``VelocityPID.m``, spec 6): desired NED velocity and heading -> controls.

    Per vehicle: ``vt = Cbn · v_des_ned`` (Cbn = NED->body DCM of the given attitude), each body
    component clamped to ±3 m/s; PID per axis on the body-velocity error with a plain-sum integral
    and the derivative reset to 0 on the step where the set point changes:
    ``theta = clamp(PID(-(vt_x - u)), ±0.34)``, ``phi = clamp(PID(vt_y - v), ±0.34)``,
    ``th = clamp(0.59 + PID_w(vt_z - w), 0, 1)``; yaw ``clamp(6·wrap(psi_des - psi), ±4.4)``
    (the original does not wrap). Initial set point and past errors are zero (as the original).
    """

    def __init__(
        self,
        num_vehicles: int = 1,
        dt_s: float = BASE_DT_S,
        gains: VelocityGains | None = None,
        yaw_gains: YawGains | None = None,
    ) -> None:
        super().__init__(num_vehicles, dt_s, yaw_gains)
        self.gains = g = gains or VelocityGains()
        self._loop = _BodyVelocityPID(self.num_vehicles, 3, 3)  # set point: v_des_ned
        y = self.yaw_gains
        self._kernel_gains = np.array([g.kvp, g.kvi, g.kvd, g.kwp, g.kwi, g.kwd, g.th_hover, g.max_tilt_rad,
                                       g.max_speed_mps, y.k_per_s, y.max_rate_rads, FULL_BATTERY_V])
        n = self.num_vehicles  # buffers of the estimated-state view, filled per call
        self._pos, self._eul, self._vel = np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 3))

    def reset(self, vehicles: ArrayLike | None = None) -> None:
        """Clear integrators, past errors and stored set points of ``vehicles`` (default all)."""
        self._loop.reset(self._rows(vehicles))

    def compute(
        self,
        position_ned: ArrayLike,
        euler: ArrayLike,
        velocity_body: ArrayLike,
        velocity_des_ned: ArrayLike,
        psi_des: ArrayLike,
    ) -> Array:
        """One control step. velocity_des_ned (N, 3) [m/s] NED; psi_des (N,) heading [rad].

        ``position_ned`` is unused (kept for a uniform interface). Returns SI controls (N, 5).
        """
        pos = self._per_vehicle(position_ned, 3, "position_ned", False)
        eul = self._per_vehicle(euler, 3, "euler", False)
        vel = self._per_vehicle(velocity_body, 3, "velocity_body", False)
        v_des = self._per_vehicle(velocity_des_ned, 3, "velocity_des_ned", True)
        psi_des = self._per_vehicle(psi_des, None, "psi_des", True)
        return self._run_kernel(pos, eul, vel, v_des, psi_des)

    def compute_from_estimated_state(self, ex: ArrayLike, *set_points: ArrayLike) -> Array:
        """``compute`` on estimated states eX (N, 20) (see ``estimated_state_view``) with the set points
        ``velocity_des_ned`` (N, 3) [m/s] and ``psi_des`` (N,) [rad]. Float arrays of exactly these shapes
        go straight to the kernel (the fleet's per-tick call); anything else through ``compute``'s
        broadcasting."""
        n = self.num_vehicles
        if (len(set_points) == 2 and is_f8(ex, (n, ESTIMATED_STATE_SIZE)) and is_f8(set_points[0], (n, 3))
                and is_f8(set_points[1], (n,))):
            estimated_view_kernel(ex, self._pos, self._eul, self._vel)  # type: ignore[arg-type]
            return self._run_kernel(self._pos, self._eul, self._vel, *set_points)  # type: ignore[arg-type]
        return super().compute_from_estimated_state(ex, *set_points)

    def _run_kernel(self, pos: Array, eul: Array, vel: Array, v_des: Array, psi_des: Array) -> Array:
        """The fused kernel on shaped inputs; controls (N, 5), PID state updated (class doc)."""
        loop = self._loop
        u = np.empty((self.num_vehicles, 5))
        if velocity_pid_kernel(pos, eul, vel, v_des, psi_des, loop.sp, loop.ei, loop.e_prev,
                                self._kernel_gains, CONTROL_LIMITS, HOVER_CONTROL, self.dt_s, u):
            raise self.set_point_error(psi_des)
        return u

    @staticmethod
    def set_point_error(psi_des: Array) -> ValueError:
        """The error of a kernel call that found a set point not finite (``psi_des`` or the velocity)."""
        bad = "psi_des" if not np.all(np.isfinite(psi_des)) else "velocity_des_ned"
        return ValueError(f"{bad} must be finite")

    def kernel_state(self) -> tuple[Array, ...]:
        """The fused kernel's buffers and state, in its argument order after the set points (``pos``,
        ``eul``, ``vel``, ``sp``, ``ei``, ``e_prev``, gains): for a caller that runs the kernel inside its
        own (``fleet_control``'s per-tick kernel); the arrays are updated in place."""
        loop = self._loop
        return self._pos, self._eul, self._vel, loop.sp, loop.ei, loop.e_prev, self._kernel_gains


class VelocityHeightPID(_HeightController):
    """Horizontal velocity + altitude controller (``VelocityHeightPID.m``, spec 6).

    xy: the ``VelocityPID`` loop on ``vt = Cbn · [vx_des, vy_des, 0]`` (±3 m/s, ±0.34 rad);
    altitude: the PID of ``_AltitudePID`` on NED z [m]; yaw as ``VelocityPID`` (wrapped error).
    The set-point-change flag (derivative reset for both loops) compares ``[vx_des, vy_des, z_des]``.
    """

    def __init__(
        self,
        num_vehicles: int = 1,
        dt_s: float = BASE_DT_S,
        gains: VelocityGains | None = None,
        altitude_gains: AltitudeGains | None = None,
        yaw_gains: YawGains | None = None,
    ) -> None:
        super().__init__(num_vehicles, dt_s, altitude_gains, yaw_gains)
        self.gains = gains or VelocityGains()
        self._loop = _BodyVelocityPID(self.num_vehicles, 2, 3)  # set point: [vx_des, vy_des, z_des]

    def _clear(self, rows: Array) -> None:
        self._loop.reset(rows)

    def compute(
        self,
        position_ned: ArrayLike,
        euler: ArrayLike,
        velocity_body: ArrayLike,
        velocity_des_ne: ArrayLike,
        z_des_ned: ArrayLike,
        psi_des: ArrayLike,
    ) -> Array:
        """One control step. velocity_des_ne (N, 2) [m/s] north/east; z_des_ned (N,) [m] (negative
        is up); psi_des (N,) [rad]. Returns SI controls (N, 5)."""
        g = self.gains
        pos, eul, vel, ok = self._vehicle_inputs(position_ned, euler, velocity_body)
        v_des = self._per_vehicle(velocity_des_ne, 2, "velocity_des_ne", True)
        z_des = self._per_vehicle(z_des_ned, None, "z_des_ned", True)
        psi_des = self._per_vehicle(psi_des, None, "psi_des", True)

        sp = np.column_stack([v_des, z_des])
        sp_change = self._loop.set_point_change(sp)
        v_des3 = np.column_stack([v_des, np.zeros(self.num_vehicles)])
        e = _body_velocity_error(eul, vel, v_des3, g.max_speed_mps)[:, 0:2]
        out = self._loop.step(e, sp, sp_change, ok, g.kvp, g.kvi, g.kvd, self.dt_s)

        pitch, roll = _tilt_commands(out, g.max_tilt_rad)
        return self._controls(pitch, roll, pos, z_des, sp_change, psi_des, eul, ok)


class WaypointPID(_HeightController):
    """Waypoint controller (``WaypointPID.m``, spec 6): NED waypoint and heading -> controls.

    Horizontal: the waypoint in the heading frame ``b = d·[cos a, sin a]`` with ``d`` the horizontal
    distance and ``a = atan2(dy, dx) - psi``; desired body speed ``clamp(0.9 b, ±5)`` m/s;
    ``theta = clamp(0.09·(-(u_des - u)), ±0.34)``, ``phi = clamp(0.09·(v_des - v), ±0.34)`` (P only).
    With true states ``[u, v]`` is the body velocity; with estimated states the original uses
    ``vel = ‖eX18:19‖, u = vel cos a, v = vel sin a`` (the ground speed projected on the bearing
    to the waypoint) -- reproduced in ``compute_from_estimated_state``. Altitude: ``_AltitudePID``
    with ``z_des = waypoint z`` and the derivative reset when the waypoint changes. Yaw: wrapped P.
    """

    def __init__(
        self,
        num_vehicles: int = 1,
        dt_s: float = BASE_DT_S,
        gains: WaypointGains | None = None,
        altitude_gains: AltitudeGains | None = None,
        yaw_gains: YawGains | None = None,
    ) -> None:
        super().__init__(num_vehicles, dt_s, altitude_gains, yaw_gains)
        self.gains = gains or WaypointGains()
        self._wp = np.zeros((self.num_vehicles, 3))

    def _clear(self, rows: Array) -> None:
        self._wp[rows] = 0.0

    def compute(
        self,
        position_ned: ArrayLike,
        euler: ArrayLike,
        velocity_body: ArrayLike,
        waypoint_ned: ArrayLike,
        psi_des: ArrayLike,
    ) -> Array:
        """One control step. waypoint_ned (N, 3) [m]; psi_des (N,) [rad]. Returns controls (N, 5).

        Uses ``velocity_body[:, 0:2]`` as ``[u, v]`` (the original's true-state branch).
        """
        return self._compute(position_ned, euler, velocity_body, None, waypoint_ned, psi_des)

    def compute_from_estimated_state(  # type: ignore[override]
        self, ex: ArrayLike, waypoint_ned: ArrayLike, psi_des: ArrayLike
    ) -> Array:
        """The original's eX branch: position [eX1, eX2, -eX17], heading eX6 and
        ``[u, v] = ‖eX18:19‖·[cos a, sin a]`` (see class doc)."""
        view = estimated_state_view(ex)
        return self._compute(
            view.position_ned, view.euler, None, estimated_ground_speed(ex), waypoint_ned, psi_des
        )

    def _compute(
        self,
        position_ned: ArrayLike,
        euler: ArrayLike,
        velocity_body: ArrayLike | None,
        ground_speed_mps: Array | None,
        waypoint_ned: ArrayLike,
        psi_des: ArrayLike,
    ) -> Array:
        g = self.gains
        pos, eul, vel, ok = self._vehicle_inputs(position_ned, euler, velocity_body)
        wp = self._per_vehicle(waypoint_ned, 3, "waypoint_ned", True)
        psi_des = self._per_vehicle(psi_des, None, "psi_des", True)

        wp_change = _set_point_change(self._wp, wp)
        dx, dy = wp[:, 0] - pos[:, 0], wp[:, 1] - pos[:, 1]
        d = np.hypot(dx, dy)
        a = np.arctan2(dy, dx) - eul[:, 2]  # bearing to the waypoint relative to the heading
        bx, by = d * np.cos(a), d * np.sin(a)
        if ground_speed_mps is None:
            u, v = vel[:, 0], vel[:, 1]
        else:
            speed = np.asarray(ground_speed_mps, float)
            ok &= np.isfinite(speed)
            u, v = speed * np.cos(a), speed * np.sin(a)

        u_des = np.clip(g.kxy * bx, -g.max_speed_mps, g.max_speed_mps)
        v_des = np.clip(g.kxy * by, -g.max_speed_mps, g.max_speed_mps)
        pitch = np.clip(g.kv * (-(u_des - u)), -g.max_tilt_rad, g.max_tilt_rad)
        roll = np.clip(g.kv * (v_des - v), -g.max_tilt_rad, g.max_tilt_rad)
        self._wp = np.where(ok[:, None], wp, self._wp)
        return self._controls(pitch, roll, pos, wp[:, 2], wp_change, psi_des, eul, ok)


class AnglesHeightPID(_HeightController):
    """Attitude pass-through + altitude controller: a working ``AnglesHeightPID.m`` (spec 6, 10.11).

    The desired pitch and roll [rad] are passed through (clamped to the model's ±0.9 rad control
    limits); throttle from the altitude PID of ``VelocityHeightPID`` (derivative reset when z_des
    changes); yaw from the common wrapped P loop. The original is unusable (undefined ``seros`` in
    the constructor, undefined ``z`` in ``computeU``).
    """

    def __init__(
        self,
        num_vehicles: int = 1,
        dt_s: float = BASE_DT_S,
        altitude_gains: AltitudeGains | None = None,
        yaw_gains: YawGains | None = None,
    ) -> None:
        super().__init__(num_vehicles, dt_s, altitude_gains, yaw_gains)
        self._z_sp = np.zeros(self.num_vehicles)

    def _clear(self, rows: Array) -> None:
        self._z_sp[rows] = 0.0

    def compute(
        self,
        position_ned: ArrayLike,
        euler: ArrayLike,
        velocity_body: ArrayLike | None,
        pitch_des: ArrayLike,
        roll_des: ArrayLike,
        z_des_ned: ArrayLike,
        psi_des: ArrayLike,
    ) -> Array:
        """One control step. pitch_des, roll_des (N,) [rad] (positive pitch = nose up);
        z_des_ned (N,) [m]; psi_des (N,) [rad]. ``velocity_body`` is unused (may be None)."""
        pos, eul, _, ok = self._vehicle_inputs(position_ned, euler, None)
        pitch = self._per_vehicle(pitch_des, None, "pitch_des", True)
        roll = self._per_vehicle(roll_des, None, "roll_des", True)
        z_des = self._per_vehicle(z_des_ned, None, "z_des_ned", True)
        psi_des = self._per_vehicle(psi_des, None, "psi_des", True)

        z_change = self._z_sp != z_des
        self._z_sp = np.where(ok, z_des, self._z_sp)
        return self._controls(pitch, roll, pos, z_des, z_change, psi_des, eul, ok)

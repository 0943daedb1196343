"""The rotor-level quadrotor airframe, vectorised over N vehicles: a second vehicle model next
to the identified Pelican (``pelican.py``), which stays the default.

State: the project's 13-element layout ``x`` (N, 13) = ``[n e d phi theta psi u v w p q r thrust]`` --
NED position [m], ZYX Euler angles [rad], FRD body velocity [m/s], body rates [rad/s], total thrust [N]
-- plus the rotor speeds ``omega`` (N, 4) [rad/s] in a separate array (rotor numbering in
``rotor_params``). Element 12 is not integrated: it is the thrust the rotors produce at the end of the
tick, sum_i h_i k_f omega_i^2, so every consumer of ``x[:, 12]`` reads what it reads on the Pelican.

Inputs per tick (held over the tick): commanded rotor speeds (N, 4) [rad/s] (``step``) or normalised
motor commands in [0, 1] (``step_normalised``, mapped linearly onto [omega_min, omega_max]); the rotor
health h (N, 4) in [0, 1] (thrust and drag torque of rotor i are multiplied by h_i: 1 healthy, 0 lost,
ireland_2016 section 4.5.5); the wind (N, 3) in NED [m/s] (mean wind + turbulence; drag acts on the
airspeed, body velocity minus the wind in body axes).

Model per vehicle (mathiesen_2017 chapters 2-3, ireland_2016 section 4.5.1):

- motors: d omega_i/dt = (clip(omega_cmd_i, omega_min, omega_cap) - omega_i) / tau (mathiesen eq. 3.4);
  omega_cap = omega_max unless the vehicle's supply voltage caps it lower (``set_speed_cap``: a DC
  motor's no-load speed scales with its voltage, docs/ENERGY.md; 0 with an empty pack: the motors stop);
- rotor i: thrust F_i = h_i k_f omega_i^2 along -z body, reaction yaw torque -s_i h_i k_m omega_i^2
  (``rotor_mixer`` gives the map from F to the body wrench);
- translation in body axes: dv/dt = f/m + D g_ned - omega_b x v, with f = thrust + linear drag
  -m drag (v - D wind_ned) + ground contact; position rate D^T v (D: NED -> body, ``frames``);
- ground contact (ireland eq. 4): once the sphere of radius R around the centre of mass reaches the
  ground at NED z = ground_z, penetration d = z - (ground_z - R) > 0, the ground pushes along -z NED
  with k d + c dz/dt, and never pulls (the force is 0 when that sum is negative; ireland's floor would
  pull on a vehicle lifting off). It acts at the centre of mass (no moment, as ireland); there is no
  friction, so a vehicle landing with horizontal speed slides until the linear drag stops it;
- rotation (Euler's equations, diagonal inertia): I domega_b/dt = tau - omega_b x I omega_b; Euler angle
  rates as in the Pelican model (singular at pitch +-90 deg, as QRSim's state layout).

Rotor inertia (mathiesen's I domega/dt reaction torque) and gyroscopic rotor effects are neglected.

Integration: classical fourth-order Runge-Kutta on the 16 states (12 rigid body + 4 rotor speeds) with
``substeps`` equal sub-steps per 0.02 s tick; by default the smallest number that keeps each sub-step
below half of the fastest time scale among the motor time constant tau, the contact's 1/sqrt(k/m) and
m/c (2 for every named parameter set). ``accel_body`` is the specific force [m/s^2] (what an ideal
accelerometer measures, body FRD) averaged over the tick with the Runge-Kutta weights.

Validity follows ``PelicanFleet``: a vehicle whose state becomes non-finite, leaves ``state_limits``
(12, 2) or comes closer than ``collision_distance_m`` to another becomes invalid and stays frozen.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, all_finite, njit
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.vehicles.pelican import (
    STATE_THRUST,
    FleetValidity,
    PelicanInputError,
    body_to_ned_rows,
    checked_state_limits,
    default_state_limits,
    expand_state,
    initial_states,
    invalidate_into,
    pose_rates_into,
)
from qrsim_ros.core.vehicles.rotor_mixer import normalised_to_speeds
from qrsim_ros.core.vehicles.rotor_params import RotorParams, pelican_rotor_params

#: Integrated states per vehicle: 12 rigid-body states and 4 rotor speeds.
_S = 16

# indices of the packed parameter vector the kernels read (``pack_params``)
_MASS, _IXX, _IYY, _IZZ, _KF, _KM, _TAU, _WMIN, _WMAX = range(9)
_DRAG = 9  # 3 entries
_KC, _CC, _RC, _G, _GROUND = 12, 13, 14, 15, 16
_POSX, _POSY, _SPIN = 17, 21, 25  # 4 entries each
_NPARAMS = 29


class RotorInputError(PelicanInputError):
    """A command, health factor, wind or state given to the rotor model is malformed or out of range (a
    ``PelicanInputError``, so the front ends handle both airframes' input errors alike)."""


def pack_params(params: RotorParams, ground_z_ned_m: float = 0.0) -> Array:
    """The parameters as the flat float64 vector (29,) the kernels read."""
    p = np.zeros(_NPARAMS)
    p[_MASS] = params.mass_kg
    p[_IXX:_IZZ + 1] = params.inertia_kgm2
    p[_KF], p[_KM], p[_TAU] = params.k_f, params.k_m, params.motor_tau_s
    p[_WMIN], p[_WMAX] = params.omega_min_rads, params.omega_max_rads
    p[_DRAG:_DRAG + 3] = params.drag_per_s
    p[_KC], p[_CC] = params.contact_stiffness_n_m, params.contact_damping_n_s_m
    p[_RC] = params.contact_radius_m
    p[_G], p[_GROUND] = params.gravity_ms2, ground_z_ned_m
    pos = params.rotor_positions_m
    p[_POSX:_POSX + 4] = pos[:, 0]
    p[_POSY:_POSY + 4] = pos[:, 1]
    p[_SPIN:_SPIN + 4] = params.spin
    return p


def default_substeps(params: RotorParams, dt_s: float = BASE_DT_S) -> int:
    """Sub-steps per tick: each at most half of the fastest time scale (module doc)."""
    m = params.mass_kg
    rate = max(1.0 / params.motor_tau_s, math.sqrt(params.contact_stiffness_n_m / m),
               params.contact_damping_n_s_m / m)
    return max(1, math.ceil(dt_s * rate / 0.5 - 1e-9))


# --- kernels: the model's one formula, explicit loops over vehicles ----------------------------------
_IN = F8_1D_IN
_OUT = "float64[:]"


@njit(f"void({_IN}, {_IN}, {_IN}, {_IN}, {_IN}, {_OUT}, {_OUT})")
def _rotor_rhs(s, target, health, wind_ned, prm, ds, sf):
    """Right-hand side of one vehicle: ds (16) and the specific force sf (3, body FRD) of state s (16),
    clipped speed targets (4), health (4), wind (3, NED) and packed parameters."""
    u, v, w = s[6], s[7], s[8]
    p, q, r = s[9], s[10], s[11]
    d00, d01, d02, d10, d11, d12, d20, d21, d22 = pose_rates_into(s, ds)

    mass, kf, km, tau = prm[_MASS], prm[_KF], prm[_KM], prm[_TAU]
    thrust = 0.0
    tx = 0.0
    ty = 0.0
    tz = 0.0
    for i in range(4):
        om = s[12 + i]
        sq = health[i] * om * abs(om)
        f = kf * sq
        thrust += f
        tx -= prm[_POSY + i] * f
        ty += prm[_POSX + i] * f
        tz -= prm[_SPIN + i] * km * sq
        ds[12 + i] = (target[i] - om) / tau

    # specific force [m/s^2]: thrust, linear drag on the airspeed, ground contact
    wb0 = d00 * wind_ned[0] + d01 * wind_ned[1] + d02 * wind_ned[2]
    wb1 = d10 * wind_ned[0] + d11 * wind_ned[1] + d12 * wind_ned[2]
    wb2 = d20 * wind_ned[0] + d21 * wind_ned[1] + d22 * wind_ned[2]
    f0 = -prm[_DRAG] * (u - wb0)
    f1 = -prm[_DRAG + 1] * (v - wb1)
    f2 = -prm[_DRAG + 2] * (w - wb2) - thrust / mass
    penetration = s[2] - (prm[_GROUND] - prm[_RC])
    if penetration > 0.0:
        fc = -prm[_KC] * penetration - prm[_CC] * ds[2]  # NED z force [N]; the ground only pushes
        if fc < 0.0:
            fc /= mass
            f0 += d02 * fc
            f1 += d12 * fc
            f2 += d22 * fc
    sf[0] = f0
    sf[1] = f1
    sf[2] = f2

    g = prm[_G]
    ds[6] = f0 + g * d02 - q * w + r * v
    ds[7] = f1 + g * d12 - r * u + p * w
    ds[8] = f2 + g * d22 - p * v + q * u

    ixx, iyy, izz = prm[_IXX], prm[_IYY], prm[_IZZ]
    ds[9] = (tx - (izz - iyy) * q * r) / ixx
    ds[10] = (ty - (ixx - izz) * r * p) / iyy
    ds[11] = (tz - (iyy - ixx) * p * q) / izz


@njit(f"void(float64[::1], {_IN}, {_IN}, {_IN}, {_IN}, float64, int64, float64[::1], float64[:, ::1])")
def _rk4_tick(s, target, health, wind_ned, prm, dt_s, substeps, sf_mean, work):
    """Advance one vehicle's 16 states ``s`` in place by dt_s with ``substeps`` RK4 sub-steps; write the
    RK4-weighted mean specific force of the tick into sf_mean (3). ``work`` (9, 16) is scratch."""
    h = dt_s / substeps
    k1, k2, k3, k4, tmp = work[0], work[1], work[2], work[3], work[4]
    a1, a2, a3, a4 = work[5], work[6], work[7], work[8]
    for j in range(3):
        sf_mean[j] = 0.0
    for _ in range(substeps):
        _rotor_rhs(s, target, health, wind_ned, prm, k1, a1)
        for j in range(_S):
            tmp[j] = s[j] + 0.5 * h * k1[j]
        _rotor_rhs(tmp, target, health, wind_ned, prm, k2, a2)
        for j in range(_S):
            tmp[j] = s[j] + 0.5 * h * k2[j]
        _rotor_rhs(tmp, target, health, wind_ned, prm, k3, a3)
        for j in range(_S):
            tmp[j] = s[j] + h * k3[j]
        _rotor_rhs(tmp, target, health, wind_ned, prm, k4, a4)
        for j in range(_S):
            s[j] += h / 6.0 * (k1[j] + 2.0 * k2[j] + 2.0 * k3[j] + k4[j])
        for j in range(3):
            sf_mean[j] += (a1[j] + 2.0 * a2[j] + 2.0 * a3[j] + a4[j]) / (6.0 * substeps)


@njit(f"int64({F8_2D_IN}, {F8_2D_IN}, boolean[::1])")
def _first_bad_input(omega_cmd, health, live):
    """Flat index i * 8 + j of the first bad input of a live vehicle (j < 4: speed command j non-finite
    or negative; j >= 4: health j - 4 outside [0, 1]), or -1. Commands above omega_max are clipped,
    not bad (the motor saturates)."""
    for i in range(omega_cmd.shape[0]):
        if live[i]:
            for j in range(4):
                c = omega_cmd[i, j]
                if not (0.0 <= c < math.inf):
                    return i * 8 + j
            for j in range(4):
                if not (0.0 <= health[i, j] <= 1.0):
                    return i * 8 + 4 + j
    return -1


@njit("UniTuple(int64, 2)(float64[:, ::1], float64[:, ::1], float64[:, ::1], boolean[::1], int64[::1], "
      f"boolean[::1], {F8_2D_IN}, {F8_2D_IN}, {F8_2D_IN}, {_IN}, {_IN}, float64, int64, {F8_2D_IN}, float64)")
def rotor_fleet_step(x, omega, accel, valid, reason, near, omega_cmd, health, wind_ned, prm, cap, dt_s,
                      substeps, state_limits, collision_distance_m):
    """``RotorFleet.step`` for all vehicles, in place on x (N, 13), omega (N, 4), accel, valid, reason.
    Speed commands are clipped to [omega_min, cap_i]: ``cap`` (N,) [rad/s] is each vehicle's attainable
    speed (omega_max, or less on a sagging pack: ``RotorFleet.set_speed_cap``; 0: motors off).

    Returns (first bad input i * 8 + j or -1, vehicles that became invalid); nothing changes on a bad
    input. Invalid vehicles are frozen and ignore their inputs (no checks either).
    """
    bad = _first_bad_input(omega_cmd, health, valid)
    if bad >= 0:
        return bad, 0
    n = x.shape[0]
    s = np.empty(_S)
    target = np.empty(4)
    work = np.empty((9, _S))
    sf = np.empty(3)
    moved = 0
    for i in range(n):
        reason[i] = 0
        if not valid[i]:
            continue
        moved += 1
        for j in range(12):
            s[j] = x[i, j]
        for j in range(4):
            s[12 + j] = omega[i, j]
            target[j] = min(max(omega_cmd[i, j], prm[_WMIN]), cap[i])
        _rk4_tick(s, target, health[i], wind_ned[i], prm, dt_s, substeps, sf, work)
        thrust = 0.0
        for j in range(4):
            omega[i, j] = s[12 + j]
            thrust += health[i, j] * prm[_KF] * s[12 + j] * abs(s[12 + j])
        for j in range(12):
            x[i, j] = s[j]
        x[i, 12] = thrust
        for j in range(3):
            accel[i, j] = sf[j]
    if moved == 0:
        return -1, 0
    return -1, invalidate_into(x, omega, valid, reason, near, state_limits, collision_distance_m)


# --- numpy-facing API ------------------------------------------------------------------------------

class RotorFleet(FleetValidity):
    """N rotor-level quadrotors integrated together (module doc), the same interface as
    ``PelicanFleet`` where it can be: ``set_state``, ``step``, ``state``, ``accel_body``, ``valid``,
    ``invalid_reason``, ``disarm``; plus ``omega`` (rotor speeds) and ``step_normalised``.

    num_vehicles: N >= 1; params: the airframe (default: ``pelican_rotor_params()``);
    ground_z_ned_m: NED z of the ground [m] (the area's ground, 0 in every QRSim scenario);
    state_limits: (12, 2) limits of x[:, 0:12] (default: ``default_state_limits`` of a 1 km area, the
    ground as its zmax); collision_distance_m: as the Pelican's; dt_s: the tick [s];
    substeps: RK4 sub-steps per tick (default ``default_substeps``).
    """

    def __init__(self, num_vehicles: int, params: RotorParams | None = None, *, ground_z_ned_m: float = 0.0,
                 state_limits: ArrayLike | None = None, collision_distance_m: float = 2.0,
                 dt_s: float = BASE_DT_S, substeps: int | None = None) -> None:
        if num_vehicles < 1:
            raise RotorInputError(f"num_vehicles must be >= 1, got {num_vehicles}")
        self.params = params if params is not None else pelican_rotor_params()
        self.num_vehicles = n = int(num_vehicles)
        self.ground_z_ned_m = float(ground_z_ned_m)
        if state_limits is None:
            state_limits = default_state_limits([-1000, 1000, -1000, 1000, -1000, self.ground_z_ned_m])
        self._limits = checked_state_limits(state_limits, RotorInputError)
        self.dt_s = float(dt_s)
        self.substeps = default_substeps(self.params, self.dt_s) if substeps is None else int(substeps)
        if self.substeps < 1:
            raise RotorInputError(f"substeps must be >= 1, got {substeps}")
        self._prm = pack_params(self.params, self.ground_z_ned_m)
        self._collision_distance_m = float(collision_distance_m)
        self._x = expand_state(np.zeros((n, 6)), self.params.mass_kg)
        self._omega = np.zeros((n, 4))
        self._a = np.zeros((n, 3))
        self._valid = np.zeros(n, bool)
        self._invalid_reason = [""] * n
        self._reason_code = np.zeros(n, dtype=np.int64)
        self._near = np.zeros(n, dtype=bool)
        self._still_air = np.zeros((n, 3))
        self._healthy = np.ones((n, 4))
        self._cap = np.full(n, self.params.omega_max_rads)  # attainable speed per vehicle (set_speed_cap)

    # --- accessors ----------------------------------------------------------------------------------
    state = copy_of("_x", "True states (N, 13) (a copy); element 12 is the rotors' total thrust [N].")
    omega = copy_of("_omega", "Rotor speeds (N, 4) [rad/s] (a copy).")
    accel_body = copy_of("_a", "Specific force (N, 3) of the last tick, body FRD [m/s^2] (RK4-weighted "
                               "mean).")

    def state_view(self) -> Array:
        """``state`` without a copy, for a caller that only reads it before the next ``step``."""
        return self._x

    def omega_view(self) -> Array:
        """``omega`` without a copy, for a caller that only reads it before the next ``step``."""
        return self._omega

    @property
    def speed_cap_radps(self) -> Array:
        """Attainable rotor speed per vehicle (N,) [rad/s] (a copy): omega_max unless ``set_speed_cap``
        lowered it."""
        return self._cap.copy()

    def set_speed_cap(self, cap_radps: ArrayLike) -> None:
        """Each vehicle's attainable rotor speed (N,) [rad/s], clipped into [0, omega_max], from the next
        ``step`` on: every speed command is clipped to it (the supply voltage's limit, docs/ENERGY.md; 0:
        the motors are off and spin down at their time constant). ``set_state`` restores omega_max."""
        c = np.asarray(cap_radps, float).reshape(self.num_vehicles)
        if np.isnan(c).any():
            raise RotorInputError(f"speed cap must not be NaN, got {c.tolist()}")
        np.clip(c, 0.0, self.params.omega_max_rads, out=self._cap)

    def speed_cap_view(self) -> Array:
        """The attainable speeds (N,) without a copy, written in place by a caller that owns the supply
        (``airframes.Airframes.set_motor_supply``); each value in [0, omega_max]."""
        return self._cap

    @property
    def hover_omega_rads(self) -> float:
        """Rotor speed of a level hover [rad/s]."""
        return self.params.hover_omega_rads

    # --- state setting ------------------------------------------------------------------------------
    def set_state(self, x: ArrayLike, omega: ArrayLike | None = None,
                  vehicles: ArrayLike | None = None) -> None:
        """Set states of length 6, 12 or 13 (as ``PelicanFleet.set_state``) and the rotor speeds
        ``omega`` (N, 4) or (4,) [rad/s] (default: the hover speed, spinning, as QRSim starts a Pelican
        in flight with thrust m g); mark those vehicles valid. Element 12 is recomputed from omega."""
        idx = np.arange(self.num_vehicles) if vehicles is None else np.atleast_1d(vehicles)
        full = initial_states(x, self.params.mass_kg, idx, self._limits, RotorInputError)
        om = np.full((idx.size, 4), self.hover_omega_rads) if omega is None else np.broadcast_to(
            np.asarray(omega, float), (idx.size, 4))
        if not np.all(np.isfinite(om)) or np.any(om < 0) or np.any(om > self.params.omega_max_rads):
            raise RotorInputError(f"rotor speeds must be in [0, {self.params.omega_max_rads}] rad/s, got "
                                  f"{om.tolist()}")
        full[:, STATE_THRUST] = self.params.k_f * np.sum(om ** 2, axis=1)
        self._x[idx] = full
        self._omega[idx] = om
        self._a[idx] = 0.0
        self._valid[idx] = True
        self._cap[idx] = self.params.omega_max_rads
        for i in idx:
            self._invalid_reason[int(i)] = ""

    # --- stepping -----------------------------------------------------------------------------------
    def step(self, omega_cmd: ArrayLike, wind_ned: ArrayLike | None = None, health: ArrayLike | None = None,
             *, wind_body: ArrayLike | None = None) -> None:
        """Advance every valid vehicle by one tick.

        omega_cmd: (N, 4) commanded rotor speeds [rad/s], >= 0 (clipped to [omega_min, omega_max], or
        to the lower ``speed_cap_radps``);
        wind_ned: (N, 3) wind in NED [m/s] (default still air); or ``wind_body`` (N, 3) in body FRD at
        the start of the tick (the Pelican's input; rotated to NED with the tick's initial attitude);
        health: (N, 4) rotor factors in [0, 1] (default all 1).
        """
        cmd = self._rows(omega_cmd, 4, "omega_cmd")
        if wind_body is not None:
            if wind_ned is not None:
                raise RotorInputError("give wind_ned or wind_body, not both")
            wind = np.empty((self.num_vehicles, 3))
            body_to_ned_rows(self._x, self._rows(wind_body, 3, "wind_body"), wind)
        else:
            wind = self._still_air if wind_ned is None else self._rows(wind_ned, 3, "wind_ned")
        if not all_finite(wind):
            raise RotorInputError("wind must be finite")
        hl = self._healthy if health is None else self._rows(health, 4, "health")
        bad, invalid = rotor_fleet_step(
            self._x, self._omega, self._a, self._valid, self._reason_code, self._near, cmd, hl, wind,
            self._prm, self._cap, self.dt_s, self.substeps, self._limits, self._collision_distance_m)
        if bad >= 0:
            i, j = divmod(int(bad), 8)
            if j < 4:
                raise RotorInputError(f"vehicle {i}: omega_cmd[{j}]={float(cmd[i, j])!r} must be finite "
                                      "and >= 0")
            raise RotorInputError(f"vehicle {i}: health[{j - 4}]={float(hl[i, j - 4])!r} must be in [0, 1]")
        if invalid:
            self.record_invalid()

    def kernel_state(self) -> tuple[Any, ...]:
        """``rotor_fleet_step``'s arguments but the inputs (``omega_cmd``, ``health``, ``wind_ned``), with
        the default health (all 1) first: for a caller that runs the step inside its own kernel
        (``airframes.Airframes.step``) and then calls ``record_invalid`` if a vehicle became invalid."""
        return (self._healthy, self._x, self._omega, self._a, self._valid, self._reason_code, self._near,
                self._prm, self._cap, self.dt_s, self.substeps, self._limits, self._collision_distance_m)

    def record_invalid(self) -> None:
        """The reasons of the vehicles the last step made invalid (``rotor_fleet_step``'s codes)."""
        self._record_invalid_reasons(self._collision_distance_m)

    def step_normalised(self, command: ArrayLike, wind_ned: ArrayLike | None = None,
                        health: ArrayLike | None = None) -> None:
        """``step`` with normalised motor commands (N, 4) in [0, 1] (``rotor_mixer.normalised_to_speeds``)."""
        c = self._rows(command, 4, "command")
        if not np.all(np.isfinite(c)) or np.any(c < 0) or np.any(c > 1):
            raise RotorInputError(f"normalised motor commands must be in [0, 1], got {c.tolist()}")
        self.step(normalised_to_speeds(self.params, c), wind_ned, health)

    def _rows(self, value: ArrayLike, width: int, name: str) -> Array:
        a = value
        if type(a) is not np.ndarray or a.dtype != np.float64 or a.shape != (self.num_vehicles, width):
            a = np.asarray(value, dtype=np.float64)
            try:
                a = np.broadcast_to(a, (self.num_vehicles, width))
            except ValueError:
                raise RotorInputError(f"{name} must have shape ({self.num_vehicles}, {width}), "
                                      f"got {a.shape}") from None
        return a

"""Retrievable targets: small rigid bodies a grasper picks up, carries and drops (ireland_2016 section 4.7).

Each target is a point mass ``mass_kg`` with an effective radius ``radius_m`` (its centre rests at
z = -radius_m NED above the flat floor z = 0). It is in one of three phases:

- **resting** on the floor (or wherever it came to rest): not integrated at all (the common case, free);
- **tethered** to a vehicle's grasper (section 4.7.1 eq. 15): it moves with the grasper point
  ``r_G = r_Q + R r_G/Q`` (``grasper_position_m``, FRD body), its velocity the grasper point's;
- **free**: released (a drop, a grasper fault, a low-battery release) it follows gravity and the floor model
  of eq. 16, F_f = -k (R + z) z_hat - c r_dot while z >= -R (spring on the penetration, viscous damping on
  every component: the horizontal part is the floor's friction), from the grasper's position and velocity
  at release; once in contact and slower than ``rest_speed_mps`` it rests again.

The floor contact is stiff (k / m = 2500 s^-2, a 0.13 s period with the paper's 1000 N/m and 0.4 kg), so a
free target is integrated with ``substeps`` semi-implicit Euler sub-steps per tick (1 ms with the default
20 at 50 Hz), stable for this spring and damper. Vectorised over targets.

Frames: NED world [m], FRD body; the vehicle's state row is the core's 13-column state (position,
ZYX Euler angles, body velocity, body rates, thrust).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, njit
from qrsim_ros.core.common.ticks import BASE_DT_S

RESTING, TETHERED, FREE = 0, 1, 2
_TETHERED_BIT, _FREE_BIT = 1 << TETHERED, 1 << FREE
PHASES = ("resting", "tethered", "free")


@dataclass(frozen=True)
class TargetParams:
    """Targets of the retrieve mission (defaults: ireland_2016 Table 3).

    mass_kg: target mass m_T [kg]; radius_m: effective radius R_T [m]; floor_stiffness_n_m: k_T [N/m];
    floor_damping_n_s_m: c_T [N s/m]; grasper_position_m: r_G/Q, the grasper in the vehicle's FRD body
    frame [m]; gravity_ms2: g [m/s^2]; rest_speed_mps: a free target in floor contact slower than this
    rests [m/s]; substeps: integration sub-steps per tick of a free target.
    """

    mass_kg: float = 0.4
    radius_m: float = 0.05
    floor_stiffness_n_m: float = 1000.0
    floor_damping_n_s_m: float = 20.0
    grasper_position_m: tuple[float, float, float] = (0.0, 0.0, 0.2)
    gravity_ms2: float = 9.81
    rest_speed_mps: float = 1e-3
    substeps: int = 20

    def __post_init__(self) -> None:
        for name in ("mass_kg", "radius_m", "floor_stiffness_n_m", "gravity_ms2", "rest_speed_mps"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"targets.{name}={value!r} must be finite and > 0")
        if not (np.isfinite(self.floor_damping_n_s_m) and self.floor_damping_n_s_m >= 0):
            raise ValueError(f"targets.floor_damping_n_s_m={self.floor_damping_n_s_m!r} must be >= 0")
        if len(self.grasper_position_m) != 3 or not np.all(np.isfinite(self.grasper_position_m)):
            raise ValueError(f"targets.grasper_position_m={self.grasper_position_m!r} must be 3 finite "
                             "values")
        if int(self.substeps) != self.substeps or not 1 <= self.substeps <= 1000:
            raise ValueError(f"targets.substeps={self.substeps!r} must be an integer in [1, 1000]")


def grasper_point(x: Array, grasper_position_m: ArrayLike) -> tuple[Array, Array]:
    """The grasper point's NED position [m] and velocity [m/s] of each vehicle state row x (N, 13):
    r_G = r_Q + R r_G/Q and v_G = R (v_body + omega x r_G/Q) (section 4.5.2, the rigid body's point)."""
    x = np.atleast_2d(np.asarray(x, float))
    if x.shape[1] < 12:
        raise ValueError(f"states must have shape (N, 13), got {x.shape}")
    r = np.empty((x.shape[0], 3))
    r[:] = grasper_position_m  # one row per vehicle (np.broadcast_to costs more than the kernel)
    pos, vel = np.empty((x.shape[0], 3)), np.empty((x.shape[0], 3))
    _grasper_point_kernel(x, r, pos, vel)
    return pos, vel


@njit("int64(Array(int8, 1, 'A', readonly=True))", writable_twins=True)
def _phases_present(phase):
    """Bit mask of the phases present: bit p set if some target is in phase p."""
    bits = 0
    for i in range(phase.shape[0]):
        bits |= 1 << phase[i]
    return bits


@njit(f"void({F8_2D_IN}, int64, float64, float64, float64, float64[:, :], float64[:, :], int64)")
def _grasper_point_row(x, i, r0, r1, r2, pos, vel, j):
    """The grasper point of state row ``x[i]`` with the grasper at [r0, r1, r2] (FRD body) into row ``j``
    of ``pos`` and ``vel``: the numpy formula ``x[:, 0:3] + body_to_ned(dcm, r)`` and
    ``body_to_ned(dcm, x[:, 6:9] + np.cross(x[:, 9:12], r))`` with the same operations in the same order
    (``dcm_ned_to_body``'s entries; einsum sums the transposed product row by row in order), so the
    results are bit-identical."""
    sph, cph = np.sin(x[i, 3]), np.cos(x[i, 3])
    sth, cth = np.sin(x[i, 4]), np.cos(x[i, 4])
    sps, cps = np.sin(x[i, 5]), np.cos(x[i, 5])
    d = ((cth * cps, cth * sps, -sth),
         (-cph * sps + sph * sth * cps, cph * cps + sph * sth * sps, sph * cth),
         (sph * sps + cph * sth * cps, -sph * cps + cph * sth * sps, cph * cth))
    w0, w1, w2 = x[i, 9], x[i, 10], x[i, 11]
    b0 = x[i, 6] + (w1 * r2 - w2 * r1)  # body velocity + omega x r
    b1 = x[i, 7] + (w2 * r0 - w0 * r2)
    b2 = x[i, 8] + (w0 * r1 - w1 * r0)
    for k in range(3):
        pos[j, k] = x[i, k] + ((d[0][k] * r0 + d[1][k] * r1) + d[2][k] * r2)
        vel[j, k] = (d[0][k] * b0 + d[1][k] * b1) + d[2][k] * b2


@njit(f"void({F8_2D_IN}, {F8_2D_IN}, float64[:, :], float64[:, :])")
def _grasper_point_kernel(x, r, pos, vel):
    """``grasper_point`` in one pass (``_grasper_point_row`` per vehicle)."""
    for i in range(x.shape[0]):
        _grasper_point_row(x, i, r[i, 0], r[i, 1], r[i, 2], pos, vel, i)


@njit(f"void({F8_2D_IN}, Array(int8, 1, 'A', readonly=True), Array(int64, 1, 'A', readonly=True), "
      f"{F8_1D_IN}, float64[:, :], float64[:, :])", writable_twins=True)
def _follow_kernel(x, phase, carrier, r, position, velocity):
    """Every tethered target at its carrier's grasper point (``_grasper_point_row``), in place."""
    for t in range(phase.shape[0]):
        if phase[t] == 1:  # TETHERED
            _grasper_point_row(x, carrier[t], r[0], r[1], r[2], position, velocity, t)


@njit("void(float64[:, ::1], float64[:, ::1], int64, float64, float64, float64, float64, float64)")
def _fall_kernel(p, v, substeps, h, g, radius, k_m, c_m):
    """Free targets (rows of p, v: NED position [m] and velocity [m/s], in place) over ``substeps``
    semi-implicit Euler steps of ``h`` [s]: velocity first, then position; gravity ``g`` and, in floor
    contact (z >= -radius), the spring k_m (radius + z) and the damper c_m v per unit mass (eq. 16). The
    operations of the vectorised formula, in its order (a contact row's a = [0, 0, g - k_m (R + z)] - c_m
    v), so the results are bit-identical to it."""
    for i in range(p.shape[0]):
        for _ in range(substeps):
            a0, a1, a2 = 0.0, 0.0, g
            if p[i, 2] >= -radius:
                a2 = a2 - k_m * (radius + p[i, 2])
                a0, a1, a2 = a0 - c_m * v[i, 0], a1 - c_m * v[i, 1], a2 - c_m * v[i, 2]
            v[i, 0], v[i, 1], v[i, 2] = v[i, 0] + h * a0, v[i, 1] + h * a1, v[i, 2] + h * a2
            p[i, 0], p[i, 1], p[i, 2] = p[i, 0] + h * v[i, 0], p[i, 1] + h * v[i, 1], p[i, 2] + h * v[i, 2]


class Targets:
    """Every target's position, velocity and phase (see the module docstring).

    ``positions_ned_m`` (M, 3): the targets' centres at the start (resting: z = -radius_m on the floor).
    """

    def __init__(self, params: TargetParams, positions_ned_m: ArrayLike) -> None:
        self.params = params
        self._grasper = np.asarray(params.grasper_position_m, float)
        self.reset(positions_ned_m)

    @property
    def count(self) -> int:
        return int(self.position_ned_m.shape[0])

    def reset(self, positions_ned_m: ArrayLike) -> None:
        """Every target resting at ``positions_ned_m`` (M, 3), none tethered."""
        p = np.array(positions_ned_m, float).reshape(-1, 3)
        if not np.all(np.isfinite(p)):
            raise ValueError("target positions must be finite")
        self.position_ned_m = p
        self.velocity_ned_mps = np.zeros_like(p)
        self.phase = np.full(p.shape[0], RESTING, np.int8)
        self.carrier = np.full(p.shape[0], -1, np.int64)  # the vehicle a tethered target hangs from

    def tether(self, target: int, vehicle: int, x: Array) -> None:
        """Grasp: target ``target`` now moves with vehicle ``vehicle``'s grasper (state rows x (N, 13))."""
        if self.phase[target] == TETHERED:
            raise ValueError(f"target {target} is already tethered to vehicle {int(self.carrier[target])}")
        self.phase[target] = TETHERED
        self.carrier[target] = vehicle
        self._follow(x)

    def release(self, target: int) -> None:
        """Let go of target ``target``: it falls from the grasper with the grasper's velocity (eq. 16)."""
        if self.phase[target] != TETHERED:
            return
        self.phase[target] = FREE
        self.carrier[target] = -1

    def release_all(self, vehicle: int) -> list[int]:
        """Release every target vehicle ``vehicle`` carries (a grasper fault, a low-battery release)."""
        carried = np.flatnonzero((self.phase == TETHERED) & (self.carrier == vehicle)).tolist()
        for t in carried:
            self.release(t)
        return carried

    def carried_by(self, vehicle: int) -> int | None:
        """The target vehicle ``vehicle`` carries, or None."""
        # a few targets: a Python scan costs less than the numpy calls
        carriers = self.carrier.tolist()
        for target, phase in enumerate(self.phase.tolist()):
            carrier = carriers[target]
            if phase == TETHERED and carrier == vehicle:
                return target
        return None

    def step(self, x: Array, dt_s: float = BASE_DT_S) -> None:
        """One tick: tethered targets follow their grasper (vehicle states x (N, 13) at the tick's end),
        free targets fall and meet the floor; resting targets do not move."""
        phases = _phases_present(self.phase)  # every tick: one pass instead of two numpy comparisons
        if phases & _TETHERED_BIT:
            self._follow(x)
        if phases & _FREE_BIT:
            self._integrate(np.flatnonzero(self.phase == FREE), dt_s)

    def _follow(self, x: Array) -> None:
        _follow_kernel(np.asarray(x, float), self.phase, self.carrier, self._grasper, self.position_ned_m,
                       self.velocity_ned_mps)

    def _integrate(self, rows: NDArray[np.intp], dt_s: float) -> None:
        prm = self.params
        h = dt_s / prm.substeps
        p, v = self.position_ned_m[rows], self.velocity_ned_mps[rows]
        k_m, c_m = prm.floor_stiffness_n_m / prm.mass_kg, prm.floor_damping_n_s_m / prm.mass_kg
        _fall_kernel(p, v, int(prm.substeps), h, prm.gravity_ms2, prm.radius_m, k_m, c_m)
        self.position_ned_m[rows], self.velocity_ned_mps[rows] = p, v
        at_rest = (p[:, 2] >= -prm.radius_m - 1e-3) & (np.linalg.norm(v, axis=1) < prm.rest_speed_mps)
        if at_rest.any():
            done = rows[at_rest]
            self.phase[done] = RESTING
            self.velocity_ned_mps[done] = 0.0

    def inside(self, centre_ne_m: ArrayLike, radius_m: float) -> NDArray[np.bool_]:
        """(M,) bool: resting targets whose centre lies within ``radius_m`` of ``centre_ne_m`` (north, east)
        on the floor (a drop site: deposited)."""
        c = np.asarray(centre_ne_m, float)[:2]
        near = np.hypot(*(self.position_ned_m[:, 0:2] - c).T) <= radius_m
        on_floor = self.position_ned_m[:, 2] >= -self.params.radius_m - 0.01
        return (self.phase == RESTING) & near & on_floor

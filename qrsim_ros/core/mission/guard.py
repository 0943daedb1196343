"""Obstacle guarding on top of any set point: AURIS's weighted stop-and-steer (siegemund_2011, section 4.2,
eqs. 4.1-4.3 and Figures 4.2-4.4), pure numpy, vectorised over N vehicles (docs/TEAMS.md).

Inputs per vehicle: range-finder beams (unit directions in the body frame FRD, shared by the fleet, and
their readings [m]), the estimated state eX (spec 2.1: GPS position, estimated Euler angles, the
altimeter's height) and the set point the vehicle would fly (a velocity NED [m/s] or a waypoint).
Output: the guarded set point. Only sensor data and estimates are read.

The model (section 4.2). Each beam i is rotated into NED with the estimated attitude; psi_i [rad] is its
angle from a horizontal reference direction. Then

    w = sum_i f_psi(psi_i) f_d(d_i)                                    (4.1)
    f_psi(psi) = exp(-psi^2)                                           (4.2)
    f_d(d) = (d_max - d) / (d_max - d_min), clipped to [0, 1]          (4.3)

and w is capped at 1 ("even though the maximum value of w_f might exceed 1, it is treated the same").
A return beyond d_max (or no return, +inf) weighs 0, one at or closer than d_min (or -inf, closer than
the sensor's minimum) weighs 1; a beam with no reading yet (NaN) weighs 0.

The paper's two scanners become two groups of beams: *yaw* beams lie in the body's x-y plane (within
``level_tolerance_rad``; front, left, right, back, front_left, front_right) and *pitch* beams do not
(front_down, down, up). w_yaw and w_pitch are eq. 4.1 over each group (each capped at 1), w over all,
with psi measured from the set point's direction of travel.

The reaction:

- steer (yaw beams, Figure 4.4): the weighted obstacle direction o = sum_i f_psi f_d u_i (horizontal
  parts) says on which side of the route the obstacle is; the course turns away from it and from the
  route by psi_a = f_w(w_yaw) = w_yaw * max_steer_rad, to a temporary goal ``detour_distance_m`` along
  that course from the estimated position. While the temporary goal is set the guard flies towards it
  at the set point's speed; it is recomputed whenever a yaw beam weighs again ("if another obstacle is
  detected, the temporary goal will be recalculated"), and dropped when reached (within
  ``goal_radius_m``), after which the set point is flown again;
- stop: the horizontal speed along the course flown is scaled by 1 - w_stop, eq. 4.1 with psi measured
  from that course: zero once an obstacle straight ahead is within d_min ("the critical value of d_min
  ... leads to a complete stop"); and, as the vehicle here can move in any direction, the component of
  the guarded move towards any beam that reads d_min or less is removed (the complete stop per beam);
- climb (pitch beams): the vertical speed becomes at least ``climb_rate_mps * w_pitch`` away from the
  weighted obstacle side (up for an obstacle below or level, down for one above); with both groups the
  two changes combine ("a combined direction change").

What the paper leaves open, and the choices made here:

- f_w is not given: linear, psi_a = w_yaw * max_steer_rad (90 deg by default, at w_yaw = 1).
- the direction of travel: AURIS flies only forwards (body x) and turns to its course; a set point here
  may point anywhere and the guard does not yaw the vehicle, so psi is measured from the set point's
  horizontal course (the velocity's north/east part, or the direction to the waypoint) for steering and
  climbing, and from the course actually flown (to the temporary goal) for stopping. Measuring the steer
  from the route, not from the last detour, keeps psi_a from compounding at every policy step.
- a set point slower than ``min_speed_mps`` (or a waypoint within ``goal_radius_m``) has no direction of
  travel and passes unchanged: vertical-only motion (take-off, landing, the descend-to-confirm of a
  search) is not guarded, as AURIS disables the rule when landing.
- an obstacle dead ahead (no side): the course turns right (positive yaw, the rules-of-the-air side).
- the stop is graded by (1 - w_stop) rather than all-or-nothing (a complete stop at w_stop = 1).
- "after reaching the desired height the forward movement continues": there is no target height; the
  climb lasts while a pitch beam weighs; the pitch beams count in w_stop too, so the advance slows
  while they weigh ("the UAV stops its advance ... and adjust its altitude").
- the ground is an obstacle like any other: a front_down beam sees it within d_max below
  d_max / sqrt(2) of height and the guard climbs; fly higher, or leave that beam out.
- the temporary goal keeps the set point's vertical speed (velocity) or down coordinate (waypoint).

Without any weighing beam and without a temporary goal the set point passes bit-exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.frames import Array, body_to_ned, dcm_from_state
from qrsim_ros.core.common.validation import ConfigError, finite
from qrsim_ros.core.vehicles.estimated_state import HEIGHT, NORTH_EAST, POSE


@dataclass(frozen=True)
class GuardParams:
    """The guard's parameters (see the module docstring).

    d_min_m: distance [m] at which a beam weighs 1 (a complete stop straight ahead). d_max_m: distance
    [m] beyond which it weighs 0 (the paper: the scanner's range). max_steer_rad: course change psi_a
    [rad] at w_yaw = 1 (f_w linear). detour_distance_m: distance [m] of the temporary goal along the new
    course. goal_radius_m: distance [m] at which the temporary goal counts as reached. climb_rate_mps:
    vertical speed [m/s] at w_pitch = 1. min_speed_mps: slowest horizontal set point [m/s] with a
    direction of travel. level_tolerance_rad: largest elevation [rad] of a body beam counted as a yaw
    beam. side_hysteresis_rad: during a detour, the turn keeps its side unless the weighted obstacle
    bearing is more than this [rad] off the route on the side the detour turns to.
    """

    d_min_m: float = 2.0
    d_max_m: float = 10.0
    max_steer_rad: float = math.pi / 2
    detour_distance_m: float = 8.0
    goal_radius_m: float = 1.0
    climb_rate_mps: float = 1.0
    min_speed_mps: float = 0.05
    level_tolerance_rad: float = math.radians(10.0)
    side_hysteresis_rad: float = math.radians(30.0)

    def __post_init__(self) -> None:
        lo, hi = finite("guard.d_min_m", self.d_min_m), finite("guard.d_max_m", self.d_max_m)
        if not 0.0 <= lo < hi:
            raise ConfigError(f"guard: d_min_m={lo!r} and d_max_m={hi!r} [m] must satisfy "
                              "0 <= d_min_m < d_max_m")
        if not 0.0 < finite("guard.max_steer_rad", self.max_steer_rad) <= math.pi:
            raise ConfigError(f"guard.max_steer_rad={self.max_steer_rad!r} [rad] must be in (0, pi]")
        detour = finite("guard.detour_distance_m", self.detour_distance_m)
        radius = finite("guard.goal_radius_m", self.goal_radius_m)
        if not 0.0 < radius < detour:
            raise ConfigError(f"guard: goal_radius_m={radius!r} and detour_distance_m={detour!r} [m] must "
                              "satisfy 0 < goal_radius_m < detour_distance_m")
        if not finite("guard.climb_rate_mps", self.climb_rate_mps) > 0.0:
            raise ConfigError(f"guard.climb_rate_mps={self.climb_rate_mps!r} [m/s] must be > 0")
        if not finite("guard.min_speed_mps", self.min_speed_mps) >= 0.0:
            raise ConfigError(f"guard.min_speed_mps={self.min_speed_mps!r} [m/s] must be >= 0")
        if not 0.0 <= finite("guard.level_tolerance_rad", self.level_tolerance_rad) < math.pi / 2:
            raise ConfigError(f"guard.level_tolerance_rad={self.level_tolerance_rad!r} [rad] must be in "
                              "[0, pi/2)")
        if not 0.0 <= finite("guard.side_hysteresis_rad", self.side_hysteresis_rad) <= math.pi / 2:
            raise ConfigError(f"guard.side_hysteresis_rad={self.side_hysteresis_rad!r} [rad] must be in "
                              "[0, pi/2]")


def angle_weight(psi_rad: ArrayLike) -> Array:
    """Eq. 4.2: f_psi = exp(-psi^2), psi [rad] a beam's angle from the direction of travel."""
    psi = np.asarray(psi_rad, float)
    return np.exp(-psi * psi)


def distance_weight(range_m: ArrayLike, d_min_m: float, d_max_m: float) -> Array:
    """Eq. 4.3: f_d = (d_max - d) / (d_max - d_min) clipped to [0, 1]; +inf (no return) and NaN (no
    reading yet) weigh 0, -inf (closer than the sensor's minimum) weighs 1."""
    d = np.asarray(range_m, float)
    with np.errstate(invalid="ignore"):
        f = np.clip((d_max_m - d) / (d_max_m - d_min_m), 0.0, 1.0)
    return np.where(np.isnan(f), 0.0, f)


def beam_terms(psi_rad: ArrayLike, range_m: ArrayLike, d_min_m: float, d_max_m: float) -> Array:
    """The summands of eq. 4.1, f_psi(psi_i) f_d(d_i), elementwise (broadcast)."""
    return angle_weight(psi_rad) * distance_weight(range_m, d_min_m, d_max_m)


def guard_weight(terms: ArrayLike) -> Array:
    """Eq. 4.1 over the last axis (the beams), capped at 1."""
    return np.minimum(np.sum(np.asarray(terms, float), axis=-1), 1.0)


def _unit2(v: Array) -> tuple[Array, Array]:
    """Unit vectors (N, 2) and norms (N,) of horizontal vectors (zero vectors stay zero)."""
    n = np.hypot(v[:, 0], v[:, 1])
    safe = np.where(n > 0.0, n, 1.0)
    return v / safe[:, None], n


class ObstacleGuard:
    """Guards the set points of N vehicles with fixed body beams (see the module docstring).

    beam_directions_frd: (B, 3) directions in the body frame FRD (normalised here). The guard keeps one
    temporary goal per vehicle (``temporary_goal_ne_m``, NaN when none); ``weight``, ``weight_yaw`` and
    ``weight_pitch`` hold the last step's eq. 4.1 weights (N,).
    """

    def __init__(self, num_vehicles: int, beam_directions_frd: ArrayLike, params: GuardParams | None = None
                 ) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        dirs = np.atleast_2d(np.asarray(beam_directions_frd, float))
        if dirs.ndim != 2 or dirs.shape[1] != 3:
            raise ValueError(f"beam_directions_frd must have shape (B, 3), got {dirs.shape}")
        norm = np.linalg.norm(dirs, axis=1)
        if not np.all(np.isfinite(norm) & (norm > 0.0)):
            raise ValueError("beam_directions_frd: every direction must be finite and non-zero")
        self.params = params if params is not None else GuardParams()
        self.num_vehicles = int(num_vehicles)
        self.beam_directions_frd = dirs / norm[:, None]
        #: yaw beams (in the body x-y plane), the others are pitch beams
        self.yaw_beams = np.abs(self.beam_directions_frd[:, 2]) <= math.sin(self.params.level_tolerance_rad)
        self.temporary_goal_ne_m = np.full((self.num_vehicles, 2), np.nan)
        #: the side the current detour turns to (+1 right, -1 left; 0 none)
        self.turn = np.zeros(self.num_vehicles)
        self.weight = np.zeros(self.num_vehicles)
        self.weight_yaw = np.zeros(self.num_vehicles)
        self.weight_pitch = np.zeros(self.num_vehicles)
        self.weight_stop = np.zeros(self.num_vehicles)
        self._beams_ned = np.zeros((self.num_vehicles, len(self.beam_directions_frd), 3))

    def reset(self) -> None:
        """Forget the temporary goals (a new episode)."""
        self.temporary_goal_ne_m[:] = np.nan
        self.turn[:] = 0.0
        self.weight[:] = 0.0
        self.weight_yaw[:] = 0.0
        self.weight_pitch[:] = 0.0
        self.weight_stop[:] = 0.0

    def _check(self, ex: ArrayLike, range_m: ArrayLike) -> tuple[Array, Array]:
        ex = np.atleast_2d(np.asarray(ex, float))
        r = np.atleast_2d(np.asarray(range_m, float))
        b = len(self.beam_directions_frd)
        if ex.shape[0] != self.num_vehicles or r.shape != (self.num_vehicles, b):
            raise ValueError(f"expected eX ({self.num_vehicles}, 20) and ranges ({self.num_vehicles}, {b}); "
                             f"got {ex.shape} and {r.shape}")
        return ex, r

    def _terms(self, ex: Array, range_m: Array, course_ne: Array, active: Array) -> tuple[Array, Array]:
        """Eq. 4.1's summands (N, B) for the horizontal unit courses (N, 2), and the beams in NED (N, B, 3)
        (rotated by the estimated attitude); rows not ``active`` weigh 0."""
        dcm = dcm_from_state(np.nan_to_num(ex[:, POSE]))
        u = body_to_ned(dcm[:, None], self.beam_directions_frd[None])
        cos_psi = np.clip(u[..., 0] * course_ne[:, None, 0] + u[..., 1] * course_ne[:, None, 1], -1.0, 1.0)
        terms = beam_terms(np.arccos(cos_psi), range_m, self.params.d_min_m, self.params.d_max_m)
        return np.where(active[:, None], terms, 0.0), u

    def _react(self, ex: Array, range_m: Array, travel_ne: Array, active: Array
               ) -> tuple[Array, Array, Array, Array]:
        """The reaction of the vehicles ``active`` whose set points travel along the unit ``travel_ne``
        (N, 2): the course to fly (N, 2, unit), the speed factor 1 - w along it (N,), the climb (N,: -1 up,
        +1 down, scaled by w_pitch; 0 none) and which rows the guard changes (N,)."""
        p = self.params
        pos = ex[:, NORTH_EAST]
        goal = self.temporary_goal_ne_m
        # the weights along the set point's direction of travel: steer and climb
        terms, u = self._terms(ex, range_m, travel_ne, active)
        yaw = self.yaw_beams
        self.weight_yaw = guard_weight(terms[:, yaw])
        self.weight_pitch = guard_weight(terms[:, ~yaw])
        self.weight = guard_weight(terms)
        # steer (Figure 4.4): psi_a away from the weighted obstacle side and from the route, to a new
        # temporary goal detour_distance_m away
        o = np.einsum("nb,nbk->nk", terms[:, yaw], u[:, yaw, :2])
        cross = travel_ne[:, 0] * o[:, 1] - travel_ne[:, 1] * o[:, 0]  # > 0: obstacle on the right
        side = np.sign(cross)
        turn = np.where(side == 0.0, 1.0, -side)  # dead ahead: turn right
        # during a detour keep its side, unless the obstacle is clearly on the side it turns to (a near
        # dead-ahead obstacle would otherwise flip the side with the sensors' noise)
        norm_o = np.hypot(o[:, 0], o[:, 1])
        sin_bearing = cross / np.where(norm_o > 0.0, norm_o, 1.0)
        keep = (self.turn != 0.0) & np.all(np.isfinite(goal), axis=1) & ~(
            self.turn * sin_bearing > math.sin(p.side_hysteresis_rad))
        turn = np.where(keep, self.turn, turn)
        steer = active & (self.weight_yaw > 0.0)
        heading = np.arctan2(travel_ne[:, 1], travel_ne[:, 0]) + turn * self.weight_yaw * p.max_steer_rad
        new_course = np.column_stack([np.cos(heading), np.sin(heading)])
        goal[steer] = pos[steer] + p.detour_distance_m * new_course[steer]
        # a temporary goal reached (or a vehicle without a direction of travel) returns to the set point
        to_goal, dist = _unit2(np.where(np.isfinite(goal), goal - pos, 0.0))
        has_goal = active & np.all(np.isfinite(goal), axis=1) & (steer | (dist >= p.goal_radius_m))
        goal[~has_goal] = np.nan
        self.turn = np.where(steer, turn, np.where(has_goal, self.turn, 0.0))
        course = np.where(has_goal[:, None], to_goal, travel_ne)
        # stop: eq. 4.1 along the course actually flown
        stop_terms, _ = self._terms(ex, range_m, course, active)
        self.weight_stop = guard_weight(stop_terms)
        # climb: away from the weighted vertical side of the pitch beams (level or below: up)
        oz = np.einsum("nb,nb->n", terms[:, ~yaw], u[:, ~yaw, 2])
        climb = np.where(self.weight_pitch > 0.0, np.where(oz < 0.0, 1.0, -1.0) * self.weight_pitch, 0.0)
        touched = active & (has_goal | (self.weight > 0.0) | (self.weight_stop > 0.0))
        self._beams_ned = u
        return course, 1.0 - self.weight_stop, climb, touched

    def _block(self, range_m: Array, move_ne: Array) -> Array:
        """Horizontal moves (N, 2) without their component towards any beam reading at or within d_min
        (f_d = 1; -inf included): the complete stop at d_min, per beam (the beams of the last ``_react``)."""
        u = self._beams_ned[..., :2]
        h, n = _unit2(u.reshape(-1, 2))
        h = h.reshape(u.shape)
        close = (distance_weight(range_m, self.params.d_min_m, self.params.d_max_m) >= 1.0) & (
            n.reshape(u.shape[:2]) > 1e-6)
        out = move_ne.copy()
        for b in range(u.shape[1]):
            along = np.einsum("nk,nk->n", out, h[:, b])
            out -= np.where(close[:, b] & (along > 0.0), along, 0.0)[:, None] * h[:, b]
        return out

    def velocity(self, ex: ArrayLike, range_m: ArrayLike, velocity_ned_mps: ArrayLike) -> Array:
        """Guarded velocity set points (N, 3) [m/s NED] (or (N, 2) north/east for ``velocity_height``,
        which cannot climb) from eX (N, 20), the beams' readings (N, B) [m] and the set points."""
        ex, r = self._check(ex, range_m)
        v = np.atleast_2d(np.asarray(velocity_ned_mps, float))
        out = v.copy()
        valid = np.all(np.isfinite(ex[:, POSE]), axis=1) & np.all(np.isfinite(v[:, :2]), axis=1)
        speed = np.hypot(v[:, 0], v[:, 1])
        active = valid & (speed >= self.params.min_speed_mps)
        travel = v[:, :2] / np.where(speed > 0, speed, 1.0)[:, None]
        course, factor, climb, touched = self._react(ex, r, travel, active)
        t = touched
        out[t, 0:2] = self._block(r, (factor * speed)[:, None] * course)[t]
        if v.shape[1] >= 3:
            vz = self.params.climb_rate_mps * climb
            out[t, 2] = np.where(climb[t] < 0.0, np.minimum(v[t, 2], vz[t]),
                                 np.where(climb[t] > 0.0, np.maximum(v[t, 2], vz[t]), v[t, 2]))
        return out

    def waypoint(self, ex: ArrayLike, range_m: ArrayLike, waypoint_ned: ArrayLike, dt_s: float) -> Array:
        """Guarded waypoints (N, 4) [north, east, down m, heading rad] from eX (N, 20), the beams' readings
        (N, B) [m] and the waypoints: where the guard acts, the north/east become a point towards the
        temporary goal (or the waypoint) at most (1 - w_stop)(d_max - d_min) away, which stays d_min
        short of an obstacle dead ahead on that course (w_stop = 1: hold where it is), without components
        towards a beam within d_min; a climb moves the down coordinate to at least
        ``climb_rate_mps * w_pitch * dt_s`` above the vehicle (``dt_s``: the policy's step [s]).
        Known problem (docs/TEAMS.md): QRSim's waypoint loop on estimated states projects the ground speed
        on the bearing to the waypoint, so it does not brake motion across that bearing and a vehicle
        flown straight at a wide wall still creeps into it; prefer the velocity modes."""
        ex, r = self._check(ex, range_m)
        wp = np.atleast_2d(np.asarray(waypoint_ned, float))
        out = wp.copy()
        pos = ex[:, NORTH_EAST]
        valid = np.all(np.isfinite(ex[:, POSE]), axis=1) & np.all(np.isfinite(wp[:, :3]), axis=1)
        travel, dist = _unit2(np.where(valid[:, None], wp[:, :2] - pos, 0.0))
        active = valid & (dist >= self.params.goal_radius_m)
        course, factor, climb, touched = self._react(ex, r, travel, active)
        t = touched
        goal = self.temporary_goal_ne_m
        target = np.where(np.all(np.isfinite(goal), axis=1)[:, None], goal, wp[:, :2])
        # along the course flown, at most (1 - w_stop)(d_max - d_min) ahead: d_min short of an obstacle
        # dead ahead on it (f_d = 1 - that distance / (d_max - d_min))
        p = self.params
        reach = np.minimum(np.hypot(*(target - pos).T), factor * (p.d_max_m - p.d_min_m))
        out[t, 0:2] = pos[t] + self._block(r, reach[:, None] * course)[t]
        z = -ex[:, HEIGHT]  # the waypoint loops' z: minus the altimeter's height (spec 6)
        dz = self.params.climb_rate_mps * climb * dt_s
        out[t, 2] = np.where(climb[t] < 0.0, np.minimum(wp[t, 2], z[t] + dz[t]),
                             np.where(climb[t] > 0.0, np.maximum(wp[t, 2], z[t] + dz[t]), wp[t, 2]))
        return out

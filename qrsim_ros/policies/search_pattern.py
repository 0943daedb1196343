"""Lawn-mower search for search and rescue: boustrophedon lanes, an evidence map, descend-and-hover.

Lanes. Each vehicle gets a strip of the search region (the area shrunk by ``margin_fraction`` on every
side: the persons are placed in the central 80 %, ``area.PERSONS_CENTRAL_FRACTION``), strips split along
east and assigned by the vehicles' east positions. Inside its strip a vehicle flies parallel lanes along
a body diagonal (heading +- 45 deg): the velocity loop limits each *body* component to 3 m/s
(controllers.MAX_SPEED_MPS), so along a diagonal it can fly sqrt(2) x 3 = 4.24 m/s. The search commands
``SETPOINT_LIMIT_FRACTION`` (0.9) of that on the lanes, 3.82 m/s, and scales every set point, direction
kept, until no body component can exceed 0.9 x 3 m/s at any roll and pitch up to 0.3 rad, which mix the
vertical and horizontal speeds (``policies.base.inside_velocity_limits``): no set point is clamped, for
about the same persons found (docs/results/2026-11-29-example-autopilot.md). The camera footprint (1280 x
960 px, f = 2280 px: 25.3 m x 19.0 m at 45 m) is widest across the track. The lane spacing is the
footprint's width across the track, computed by projecting the image corners onto the ground (z = 0) for
a level vehicle at the search height (camera f, c and mounting), times ``1 - lane_overlap``: a ground
point near a swath edge is seen in few frames. A vehicle starts on the lane nearest to it, flies to its
far end and sweeps the lanes towards the side with more of them.

Evidence. Every camera frame adds its windows' log likelihood differences (llkd, spec 3.5) into a
shared ground map (``EvidenceMap``): the classifier's frames are independent, so summed over frames the
llkd of the window containing a point is the log likelihood ratio "person there" vs "no person". The
windows are about a person wide on the ground at any height (0.5 m), so the map keeps half-window cells
and a point's statistic sums the 2 x 2 cells around it (the windows centred within +-0.25 m of it).

Search height. At QRSim's 45 m start height one window cannot tell a person (llkd at most 1.49; clear
ground gives > 1 for 16 % of windows), and frames are too weak even summed: in 5 episodes of 2A the
persons seen scored 2-7 while ~37 false points per episode scored over 6. At 30 m a person's window
scores +2.9 on average and clear ground -6.0, so the lanes are flown at ``search_height_m`` = 30 m (seeds
1-10 of 2A: 18 persons found at 30 m, 1 at 45 m where the wider swath sees more but can confirm little).

Confirmation. When a point's statistic exceeds ``candidate_llkd`` the nearest free vehicle flies over
it while descending to ``inspect_height_m`` (12 m, where the classifier is most informative: a person
scores ~ +5 per frame, clear ground ~ -3), takes ``inspect_frames`` frames there, then descends to
``confirm_height_m`` and holds still (zero velocity inside a dead band) for ``hold_s`` seconds of low
speed: QRSim's found rule (area update, 1 Hz) needs a vehicle within 5 m (3-D) of the person at
<= 0.1 m/s. Whenever the point's statistic falls below ``reject_llkd`` the candidate is dropped. Either
way the point (and ``exclusion_radius_m`` around it) is not visited again and the vehicle climbs back
and resumes its lanes.

Only estimated states, camera observations (llkd and window ground centres) and the area limits
are used; velocity commands are NED [m/s] (the scenario's ``velocity`` control mode).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qrsim_ros.core.common.paged import paged_zeros
from qrsim_ros.core.common.validation import (
    ConfigError,
    between,
    check_fields,
    checked,
    finite,
    in_range,
    non_negative,
    optional,
    positive,
)
from qrsim_ros.core.sensors.camera_geometry import CameraGeometry
from qrsim_ros.core.vehicles.controllers import MAX_SPEED_MPS
from qrsim_ros.core.vehicles.estimated_state import (
    EAST,
    GROUND_VELOCITY_NE,
    HEADING,
    HEIGHT,
    NORTH_EAST,
    VERTICAL_SPEED,
)
from qrsim_ros.core.vehicles.pelican import STATE_DOWN, STATE_HEADING
from qrsim_ros.policies.base import (
    SETPOINT_LIMIT_FRACTION,
    Array,
    AutopilotView,
    PolicyError,
    inside_velocity_limits,
)

#: Persons lie in this central fraction of the area (``area.PERSONS_CENTRAL_FRACTION``); the lanes
#: cover it and not the rim.
DEFAULT_MARGIN_FRACTION = 0.1


@dataclass(frozen=True)
class SearchPatternParams:
    """Tuning of ``SearchPattern`` (units in the names).

    search_height_m: lane height above ground [m]; None = the task's start height.
    lane_overlap: fraction of the footprint width shared by neighbouring lanes (0 = edge to edge).
    margin_fraction: rim of the area (per side, fraction of its extent) left out of the lanes.
    speed_mps: commanded ground speed on the lanes; None = 0.9 x sqrt(2) x 3 m/s (body-diagonal lanes,
        inside the velocity loops' limits: ``SETPOINT_LIMIT_FRACTION``).
    candidate_llkd / reject_llkd: statistic (2 x 2 cell llkd sum) that sends a vehicle to a point /
        drops the point during the approach.
    confirm_height_m: hover height over a candidate (the found rule needs <= 5 m 3-D).
    hold_s: time spent still (estimated speed < 0.05 m/s) over a candidate once there.
    inspect_height_m / inspect_radius_m / inspect_frames: a vehicle approaching a candidate descends to
        the inspection height and goes lower only after this many frames taken within the radius of
        the point (where the classifier is most informative: llkd of a person ~ +5, of clear ground ~ -3).
    exclusion_radius_m: radius around a visited point not visited again.
    waypoint_radius_m: a lane end counts as reached within this horizontal distance.
    position_gain_per_s: P gain from position error [m] to commanded velocity [m/s].
    within_limits: keep every set point inside the velocity loops' limits (``inside_velocity_limits``;
        lanes at ``SETPOINT_LIMIT_FRACTION`` of the body-diagonal maximum); False: lanes at the maximum,
        the loops clamping what lies beyond (``TeamSearch``, tuned that way).
    """

    search_height_m: float | None = checked(30.0, optional(between(2.0, 500.0)))
    lane_overlap: float = checked(0.25, between(0.0, 0.9))
    margin_fraction: float = checked(DEFAULT_MARGIN_FRACTION, between(0.0, 0.45))
    speed_mps: float | None = checked(None, optional(positive))
    candidate_llkd: float = 9.0
    reject_llkd: float = 2.0  # below candidate_llkd
    confirm_height_m: float = checked(3.0, between(1.0, 4.9))
    inspect_height_m: float = checked(12.0, finite)  # in [confirm_height_m, 500]
    inspect_radius_m: float = checked(2.0, positive)
    inspect_frames: int = checked(2, non_negative)
    hold_s: float = checked(4.0, non_negative)
    exclusion_radius_m: float = checked(4.0, non_negative)
    waypoint_radius_m: float = checked(3.0, positive)
    position_gain_per_s: float = checked(0.6, positive)
    within_limits: bool = True

    def __post_init__(self) -> None:
        check_fields(self, "search_pattern")
        if self.reject_llkd >= self.candidate_llkd:
            raise ConfigError(f"search_pattern.reject_llkd={self.reject_llkd!r} must be below "
                              f"candidate_llkd={self.candidate_llkd!r}")
        in_range("search_pattern.inspect_height_m", self.inspect_height_m, self.confirm_height_m, 500.0)


def check_search_view(view: AutopilotView, policy: str) -> None:
    """PolicyError unless ``view`` flies a search-and-rescue task in the velocity control mode, as the
    lane searches (``policy``: the name in the message) need."""
    modes = view.action_spec["modes"]
    if any(m != "velocity" for m in modes):
        raise PolicyError(f"{policy} needs the velocity control mode, got {modes}")
    if view.task.type != "search_rescue":
        raise PolicyError(f"{policy} is a search-and-rescue policy; task is {view.task.type!r}")


def search_height_m(params: SearchPatternParams, view: AutopilotView) -> float:
    """The lanes' height above ground [m]: ``params.search_height_m``, or the task's start height."""
    if params.search_height_m is not None:
        return params.search_height_m
    return float(view.area_limits_ned[5]) - view.task.start_z_ned_m


def lane_speed_mps(params: SearchPatternParams) -> float:
    """The commanded ground speed on the lanes [m/s]: ``params.speed_mps``, or 0.9 x sqrt(2) x 3 m/s (both
    body components at 0.9 x 3 m/s on a body diagonal: ``SETPOINT_LIMIT_FRACTION``; without
    ``within_limits`` sqrt(2) x 3 m/s, both at the loops' limit)."""
    if params.speed_mps is not None:
        return params.speed_mps
    return (SETPOINT_LIMIT_FRACTION if params.within_limits else 1.0) * math.sqrt(2) * MAX_SPEED_MPS


def goto_velocity(pos_ne: Array, height_m: float, target_ne: Array, target_height_m: float, speed_mps: float,
                  gain_per_s: float) -> Array:
    """NED velocity towards a horizontal target and a height: P control (``gain_per_s``, from position
    error [m] to velocity [m/s]) capped at ``speed_mps`` horizontally and at MAX_SPEED_MPS vertically."""
    err = target_ne - pos_ne
    dist = float(np.linalg.norm(err))
    v_ne = err / dist * min(speed_mps, gain_per_s * dist) if dist > 1e-9 else np.zeros(2)
    vd = float(np.clip(-gain_per_s * (target_height_m - height_m), -MAX_SPEED_MPS, MAX_SPEED_MPS))
    return np.array([v_ne[0], v_ne[1], vd])


# --- geometry -------------------------------------------------------------------------------------------

def footprint_width_m(camera_params, height_m: float, heading_rad: float, track_rad: float) -> float:
    """Width [m] across a track of direction ``track_rad`` (NED, from north) of the ground footprint of
    the camera of a level vehicle with heading ``heading_rad`` at ``height_m`` above the ground (z = 0)."""
    geo = CameraGeometry(camera_params.f_px, camera_params.c_px, camera_params.r_body_rad)
    w, h = geo.image_size_px
    corners_px = np.array([[0.0, 0.0], [w, 0.0], [0.0, h], [w, h]])
    x = np.zeros(13)
    x[STATE_DOWN], x[STATE_HEADING] = -height_m, heading_rad
    ground = geo.ground_intersection(corners_px, x)[:, 0:2]
    if not np.all(np.isfinite(ground)):
        raise PolicyError("search-pattern: the camera does not see the ground from a level vehicle")
    across = np.array([-math.sin(track_rad), math.cos(track_rad)])
    c = ground @ across
    return float(c.max() - c.min())


def lanes_in_rectangle(
    rect: tuple[float, float, float, float], track_rad: float, spacing_m: float
) -> list[tuple[Array, Array]]:
    """Parallel lanes of direction ``track_rad`` covering ``rect`` = (n0, n1, e0, e1) (NED, m).

    Lane offsets across the track run from half a spacing inside one edge to half a spacing inside the
    other (at least one lane), each clipped to the rectangle. Returns (start, end) pairs (2,) in order of
    increasing across-track offset, all pointing along +track.
    """
    n0, n1, e0, e1 = rect
    d = np.array([math.cos(track_rad), math.sin(track_rad)])
    c = np.array([-d[1], d[0]])
    corners = np.array([[n0, e0], [n0, e1], [n1, e0], [n1, e1]])
    proj = corners @ c
    lo, hi = float(proj.min()), float(proj.max())
    span = hi - lo
    count = max(1, math.ceil((span - spacing_m) / spacing_m - 1e-9) + 1) if span > spacing_m else 1
    offsets = [0.5 * (lo + hi)] if count == 1 else list(np.linspace(lo + 0.5 * spacing_m,
                                                                    hi - 0.5 * spacing_m, count))
    lanes = []
    for off in offsets:
        p0 = off * c
        s_lo, s_hi = -math.inf, math.inf  # Liang-Barsky clip of p0 + s d to the rectangle
        for axis, (a, b) in enumerate(((n0, n1), (e0, e1))):
            if abs(d[axis]) < 1e-12:
                if not a <= p0[axis] <= b:
                    s_lo, s_hi = 1.0, 0.0
                continue
            s_a, s_b = (a - p0[axis]) / d[axis], (b - p0[axis]) / d[axis]
            s_lo, s_hi = max(s_lo, min(s_a, s_b)), min(s_hi, max(s_a, s_b))
        if s_hi - s_lo > 1e-6:
            lanes.append((p0 + s_lo * d, p0 + s_hi * d))
    return lanes


def lane_route(lanes: list[tuple[Array, Array]], position_ne: Array) -> list[Array]:
    """Boustrophedon waypoints (2,) through ``lanes`` from ``position_ne``: the nearest lane first, to its
    far end, then the lanes towards the side with more of them, alternating direction, then the others."""
    if not lanes:
        return []
    mids = np.array([(a + b) / 2 for a, b in lanes])
    d = lanes[0][1] - lanes[0][0]
    d = d / np.linalg.norm(d)
    c = np.array([-d[1], d[0]])
    k0 = int(np.argmin(np.abs((mids - position_ne) @ c)))
    up = list(range(k0, len(lanes)))
    down = list(range(k0 - 1, -1, -1))
    order = up + down if len(up) >= len(down) + 1 else [k0, *down, *up[1:]]
    a, b = lanes[k0]
    forward = np.linalg.norm(b - position_ne) >= np.linalg.norm(a - position_ne)
    route: list[Array] = []
    for k in order:
        a, b = lanes[k]
        route += [a, b] if forward else [b, a]
        forward = not forward
    return route


class EvidenceMap:
    """Summed llkd of camera windows on a ground grid over ``limits_ned``.

    Cells are half a window (``cell_m`` = person size / 2); each window's llkd goes into the cell of its
    ground centre. The statistic of a grid point (a corner shared by 2 x 2 cells) sums those 2 x 2 cells:
    the windows centred within +-``cell_m`` of the point, i.e. about one window per frame, the one that
    contains the point.
    """

    def __init__(self, limits_ned: tuple[float, ...], cell_m: float) -> None:
        self.n0, self.e0 = float(limits_ned[0]), float(limits_ned[2])
        self.cell_m = float(cell_m)
        self.shape = (max(2, math.ceil((limits_ned[1] - limits_ned[0]) / cell_m)),
                      max(2, math.ceil((limits_ned[3] - limits_ned[2]) / cell_m)))
        # written one camera frame at a time: memory taken 4 KB at a time (paged_zeros' docstring)
        self.llkd = paged_zeros(self.shape)
        self.blocked = paged_zeros((self.shape[0] - 1, self.shape[1] - 1), bool)

    def add(self, centres_ned: Array, llkd: Array) -> tuple[slice, slice] | None:
        """Add windows' llkd at their ground centres (M, 2|3) [m]; NaN windows and outside are skipped.
        Returns the region of grid points whose statistic changed (None if none)."""
        ok = np.isfinite(llkd) & np.all(np.isfinite(centres_ned[:, 0:2]), axis=1)
        i = np.floor((centres_ned[ok, 0] - self.n0) / self.cell_m).astype(np.int64)
        j = np.floor((centres_ned[ok, 1] - self.e0) / self.cell_m).astype(np.int64)
        inside = (i >= 0) & (i < self.shape[0]) & (j >= 0) & (j < self.shape[1])
        if not inside.any():
            return None
        i, j = i[inside], j[inside]
        # one flat index: numpy's fast path for a 1-D add.at (5-6x the 2-D one), the same sums in order
        np.add.at(self.llkd.reshape(-1), i * self.shape[1] + j, llkd[ok][inside])
        return (slice(max(0, int(i.min()) - 1), min(self.shape[0] - 1, int(i.max()) + 1)),
                slice(max(0, int(j.min()) - 1), min(self.shape[1] - 1, int(j.max()) + 1)))

    def statistics(self, region: tuple[slice, slice]) -> Array:
        """Statistic of the grid points in ``region`` (slices of the (shape - 1) point grid)."""
        si, sj = region
        m = self.llkd[si.start : si.stop + 1, sj.start : sj.stop + 1]
        return m[:-1, :-1] + m[1:, :-1] + m[:-1, 1:] + m[1:, 1:]

    def point(self, index: tuple[int, int]) -> Array:
        """NE position [m] of grid point ``index``."""
        return np.array([self.n0 + (index[0] + 1) * self.cell_m, self.e0 + (index[1] + 1) * self.cell_m])

    def index(self, ne: Array) -> tuple[int, int]:
        """The grid point nearest to ``ne`` [m]."""
        i = int(np.clip(round((ne[0] - self.n0) / self.cell_m) - 1, 0, self.shape[0] - 2))
        j = int(np.clip(round((ne[1] - self.e0) / self.cell_m) - 1, 0, self.shape[1] - 2))
        return i, j

    def statistic_at(self, ne: Array) -> float:
        """The statistic at the grid point nearest to ``ne``."""
        i, j = self.index(ne)
        return float(self.statistics((slice(i, i + 1), slice(j, j + 1)))[0, 0])

    def block(self, ne: Array, radius_m: float) -> None:
        """Never propose grid points within ``radius_m`` of ``ne`` again."""
        r = math.ceil(radius_m / self.cell_m)
        ci, cj = self.index(ne)
        ii, jj = np.mgrid[-r : r + 1, -r : r + 1]
        keep = (ii * ii + jj * jj) * self.cell_m**2 <= radius_m**2
        ii, jj = ii[keep] + ci, jj[keep] + cj
        ok = (ii >= 0) & (ii < self.blocked.shape[0]) & (jj >= 0) & (jj < self.blocked.shape[1])
        self.blocked[ii[ok], jj[ok]] = True


SEARCH, APPROACH, HOLD, CLIMB = "search", "approach", "hold", "climb"


class SearchPattern:
    """The lawn-mower search with descend-and-hover confirmation (see the module docstring)."""

    def __init__(self, view: AutopilotView, params: SearchPatternParams | None = None) -> None:
        check_search_view(view, "search-pattern")
        self.p = params or SearchPatternParams()
        self.rows = np.asarray(view.action_spec["vehicles"], int)
        self.ground_z = float(view.area_limits_ned[5])
        self.search_height_m = search_height_m(self.p, view)
        self.speed_mps = lane_speed_mps(self.p)
        self.dt_s = float(view.task.dt_s)
        self.map = EvidenceMap(view.area_limits_ned, 0.5 * view.camera_params.person_size_m)
        self.camera = view.camera_params
        self.limits = view.area_limits_ned
        self.routes: list[list[Array]] = []
        self.mode = [SEARCH] * len(self.rows)
        self.target: list[Array | None] = [None] * len(self.rows)
        self.hold_left_s = np.zeros(len(self.rows))
        self._last_frame_t = np.full(len(self.rows), -np.inf)
        self.visited: list[Array] = []  # confirmed/dropped points, for inspection
        self.lane_spacing_m: list[float] = []
        self._positions = np.zeros((len(self.rows), 2))
        self._candidates: set[tuple[int, int]] = set()
        self._new_frame = np.zeros(len(self.rows), bool)
        self.frames_over = np.zeros(len(self.rows), int)

    # --- planning (first call: needs the estimated positions and headings) ---------------------------
    def _plan(self, ex: Array) -> None:
        lim, f = self.limits, self.p.margin_fraction
        n0, n1 = lim[0] + f * (lim[1] - lim[0]), lim[1] - f * (lim[1] - lim[0])
        e0, e1 = lim[2] + f * (lim[3] - lim[2]), lim[3] - f * (lim[3] - lim[2])
        k = len(self.rows)
        edges = np.linspace(e0, e1, k + 1)
        by_east = np.argsort(np.nan_to_num(ex[:, EAST]), kind="stable")
        self.routes = [[] for _ in range(k)]
        self.lane_spacing_m = [0.0] * k
        for s, r in enumerate(by_east):
            heading = float(np.nan_to_num(ex[r, HEADING]))
            track = heading + math.pi / 4  # body diagonal: both body components at the 3 m/s clamp
            width = footprint_width_m(self.camera, self.search_height_m, heading, track)
            spacing = width * (1.0 - self.p.lane_overlap)
            lanes = lanes_in_rectangle((n0, n1, edges[s], edges[s + 1]), track, spacing)
            self.routes[r] = lane_route(lanes, np.nan_to_num(ex[r, NORTH_EAST]))
            self.lane_spacing_m[r] = spacing

    # --- evidence ------------------------------------------------------------------------------------
    def _update_map(self, view: AutopilotView) -> None:
        """Add new frames to the map and queue the points whose statistic now exceeds candidate_llkd."""
        self._new_frame[:] = False
        for r, obs in enumerate(view.camera_observations()[i] for i in self.rows):
            if obs is None or obs.empty or obs.t_s <= self._last_frame_t[r]:
                continue
            self._last_frame_t[r] = obs.t_s
            self._new_frame[r] = True
            region = self.map.add(obs.centres_ned.reshape(-1, 3), obs.llkd_grid.reshape(-1))
            if region is None:
                continue
            stat = np.where(self.map.blocked[region], -np.inf, self.map.statistics(region))
            for flat in np.flatnonzero(stat >= self.p.candidate_llkd):
                i, j = np.unravel_index(flat, stat.shape)
                self._candidates.add((int(i) + region[0].start, int(j) + region[1].start))

    def _best_candidate(self) -> tuple[Array, float] | None:
        """The queued point with the highest statistic still above candidate_llkd (stale ones dropped)."""
        best, best_stat = None, -np.inf
        for idx in list(self._candidates):
            point = self.map.point(idx)
            stat = -np.inf if self.map.blocked[idx] else self.map.statistic_at(point)
            if stat < self.p.candidate_llkd:
                self._candidates.discard(idx)
            elif stat > best_stat:
                best, best_stat = point, stat
        return None if best is None else (best, best_stat)

    # --- control -------------------------------------------------------------------------------------
    def goto(self, pos_ne: Array, height_m: float, target_ne: Array, target_height_m: float,
             speed_mps: float) -> Array:
        """NED velocity towards a horizontal target and a height (``goto_velocity`` with this search's
        ``position_gain_per_s``)."""
        return goto_velocity(pos_ne, height_m, target_ne, target_height_m, speed_mps,
                             self.p.position_gain_per_s)

    def __call__(self, view: AutopilotView) -> Array:
        ex = view.estimated_state()[self.rows]
        self._positions = ex[:, NORTH_EAST]
        if not self.routes:
            self._plan(ex)
        self._update_map(view)
        actions = np.zeros((len(self.rows), 3))
        for r in range(len(self.rows)):
            if not (np.all(np.isfinite(ex[r, NORTH_EAST])) and np.isfinite(ex[r, HEIGHT])):
                continue  # invalid vehicle: its row is ignored
            actions[r] = self._vehicle_action(r, ex[r])
            if self.p.within_limits:
                actions[r] = inside_velocity_limits(actions[r], float(ex[r, HEADING]))
        return actions

    def _vehicle_action(self, r: int, ex: Array) -> Array:
        p = self.p
        pos, height = ex[NORTH_EAST], float(ex[HEIGHT])
        v_north, v_east = ex[GROUND_VELOCITY_NE]
        speed = float(math.sqrt(v_north ** 2 + v_east ** 2 + ex[VERTICAL_SPEED] ** 2))
        if self.mode[r] in (SEARCH, CLIMB):
            cand = self._best_candidate()
            if cand is not None and self._nearest_free(cand[0]) == r:
                self.target[r] = cand[0]
                self.map.block(cand[0], p.exclusion_radius_m)  # claimed: no other vehicle takes it
                self.mode[r] = APPROACH
                self.frames_over[r] = 0
        if self.mode[r] == APPROACH:
            target = self.target[r]
            assert target is not None
            horizontal = float(np.linalg.norm(target - pos))
            if horizontal < p.inspect_radius_m and height < p.inspect_height_m + 2.0 and self._new_frame[r]:
                self.frames_over[r] += 1
            if self.map.statistic_at(target) < p.reject_llkd:
                self._done_with_target(r)
            elif horizontal < 1.0 and abs(height - p.confirm_height_m) < 0.5 and speed < 0.3:
                self.mode[r] = HOLD
                self.hold_left_s[r] = p.hold_s
            else:
                # down to the inspection height on the way; lower only once frames taken over the target
                # had their say (the statistic would have dropped below reject_llkd)
                low = horizontal < p.inspect_radius_m and self.frames_over[r] >= p.inspect_frames
                return self.goto(pos, height, target, p.confirm_height_m if low else p.inspect_height_m,
                                 self.speed_mps)
        if self.mode[r] == HOLD:
            if speed < 0.05:
                self.hold_left_s[r] -= self.dt_s
            if self.hold_left_s[r] <= 0:
                self._done_with_target(r)
            else:
                return self._hold(pos, height, self.target[r], p.confirm_height_m)
        if self.mode[r] == CLIMB:
            if abs(height - self.search_height_m) > 2.0:
                return self.goto(pos, height, pos, self.search_height_m, self.speed_mps)
            self.mode[r] = SEARCH
        return self._follow_route(r, pos, height)

    def _hold(self, pos_ne: Array, height_m: float, target_ne: Array | None, target_height_m: float) -> Array:
        """Station keeping: zero velocity inside a dead band (the found rule wants <= 0.1 m/s), slow P
        corrections outside it."""
        err = np.zeros(2) if target_ne is None else target_ne - pos_ne
        dz = target_height_m - height_m
        if float(np.linalg.norm(err)) < 1.5 and abs(dz) < 0.7:
            return np.zeros(3)
        return self.goto(pos_ne, height_m, pos_ne + err, target_height_m, 0.5)

    def _done_with_target(self, r: int) -> None:
        target = self.target[r]
        if target is not None:
            self.visited.append(target)
        self.target[r] = None
        self.mode[r] = CLIMB

    def _nearest_free(self, point: Array) -> int | None:
        """The row of the searching vehicle nearest to ``point`` (None if all are busy)."""
        free = [r for r in range(len(self.rows)) if self.mode[r] in (SEARCH, CLIMB)]
        if not free:
            return None
        # all at once (a fleet of 100 asked this per vehicle and step); the first of equal distances wins
        distance = np.linalg.norm(np.nan_to_num(self._positions[free]) - point, axis=1)
        return free[int(np.argmin(distance))]

    def _follow_route(self, r: int, pos: Array, height: float) -> Array:
        route = self.routes[r]
        while route and float(np.linalg.norm(route[0] - pos)) < self.p.waypoint_radius_m:
            route.pop(0)
        if not route:
            return self.goto(pos, height, pos, self.search_height_m, self.speed_mps)
        target = route[0]
        # fly at full speed until close: the lane ends are turning points, not stops
        err = target - pos
        dist = float(np.linalg.norm(err))
        v_ne = err / dist * self.speed_mps if dist > 1e-9 else np.zeros(2)
        vd = float(np.clip(-self.p.position_gain_per_s * (self.search_height_m - height),
                           -MAX_SPEED_MPS, MAX_SPEED_MPS))
        return np.array([v_ne[0], v_ne[1], vd])


def search_pattern(view: AutopilotView) -> SearchPattern:
    """Factory of ``SearchPattern`` with the default parameters."""
    return SearchPattern(view)

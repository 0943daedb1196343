"""ireland_2016's autonomous guidance (section 5): the 17-mode state machine and its trajectory modules.

``MissionGuidance.update(inputs)`` is called once per control period with what the vehicle senses and
returns what it commands: a velocity set point (NED [m/s]) for the flight controller, the grasper
(closed or open) and the mode. Both front ends fly it: the ``mission`` policy in process and the
``mission_autopilot`` node in the graph.

Control split. The paper's state feedback controller is a cascade: a position loop (eq. 21, ``rdot_d =
K_pr (r_d - r)``, ``|rdot_d| <= v_max``) over a velocity loop with feedback linearisation (eq. 20,
22-25). The position loop and the visual controller (eq. 28-29) are guidance and live here; the velocity
loop is the vehicle's flight controller (``vehicle.control: velocity``), so the mission flies the same
airframe models and controllers as every other scenario (docs/RETRIEVE.md).

Choices where the paper is open (each documented in docs/RETRIEVE.md and tested):

- Object tracking (section 5.3.5): a centroid counts (D = 1) when it is within ``detection_radius_px`` of
  the image centre and not within R_ds,C = f R_ds / h of the drop site's image point (targets already
  deposited are ignored); the one closest to the centre is tracked. R_c gates detection only: Hover above
  target and Descend to grasp track the closest centroid anywhere in the image.
- Identify returns to r_entry and waits there until still (speed below ``speed_tol_mps``), as Reacquire
  target does (section 5.1.16): the flight controller overshoots a stop from search speed.
- Hover above target exits to Descend to grasp when the horizontal speed is below ``speed_tol_mps``
  *and* the tracked centroid is within ``centre_tol_px`` of the centre (on entry the vehicle is already
  still, so the speed alone would descend beside the target).
- "Target lost" (Figure 5): no tracked centroid for ``lost_after_s`` in Hover above target or Descend to
  grasp goes back to Search; "Too long": Descend to grasp lasting ``descend_timeout_s`` does too.
- Grasp lasts one control period (the paper's grasp takes 0.01 s); the grasper reports whether it holds
  a target, and Ascend / Transport read "not holding" as the target dropped (a grasper fault or a missed
  grasp), so both go to Reacquire target.
- Search resumes at the last waypoint reached (section 5.3.3; Figure 8's run flies back to it).
- A system fault found in Initialise lands and, after recharging, tries again (Figure 9); ``abort``
  instead ends the mission (outcome ``system_fault``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.mission.modes import (
    MISSION_ACTUATOR_FAULT,
    MISSION_COMPLETE,
    MISSION_END_OF_PATH,
    MISSION_SYSTEM_FAULT,
    MISSION_TIME_LIMIT,
    NO_ACTUATOR_EXIT,
    NO_LOW_BATTERY_EXIT,
)

Array = NDArray[np.float64]

#: Table 2: the search waypoints (north, east) [m], flown at the search height.
TABLE2_WAYPOINTS_NE_M: tuple[tuple[float, float], ...] = (
    (-1.5, -3.0), (-1.5, 3.0), (-1.0, 3.0), (-1.0, -3.0), (-0.5, -3.0), (-0.5, 3.0), (0.0, 3.0),
    (0.0, -3.0), (0.5, -3.0), (0.5, 3.0), (1.0, 3.0), (1.0, -3.0), (1.5, -3.0), (1.5, 3.0))
SYSTEM_FAULT_POLICIES = ("retry", "abort")


@dataclass(frozen=True)
class GuidanceParams:
    """The guidance's parameters: ireland_2016 Table 4 (heights NED [m], gains), Table 3 (geometry) and
    the tolerances and thresholds the paper leaves open (module docstring, docs/RETRIEVE.md)."""

    hover_z_ned_m: float = -1.0          # z_hvr
    search_z_ned_m: float = -2.0         # z_srch
    transport_z_ned_m: float = -1.0      # z_trnsprt
    max_speed_mps: float = 5.0           # v_max
    search_speed_mps: float = 2.0        # v_max in Search (section 5.1.4)
    position_gain_per_s: float = 0.975   # K_pr
    visual_p_gain_per_s: float = 0.341   # K_pv
    visual_i_gain_per_s2: float = 0.0001  # K_iv
    quad_radius_m: float = 0.2           # R_Q
    target_radius_m: float = 0.05        # R_T
    grasper_z_m: float = 0.2             # z_G/Q (FRD, below the centre of mass)
    camera_z_m: float = 0.1              # z_C/Q
    focal_length_px: float = 400.0       # f
    drop_radius_m: float = 0.25          # R_ds
    waypoints_ne_m: tuple[tuple[float, float], ...] = TABLE2_WAYPOINTS_NE_M
    detection_radius_px: float = 100.0   # R_c (not given in the paper)
    centre_tol_px: float = 10.0
    position_tol_m: float = 0.1
    speed_tol_mps: float = 0.1
    grasp_height_tol_m: float = 0.03
    land_tol_m: float = 0.1
    lost_after_s: float = 1.0
    descend_timeout_s: float = 20.0
    full_battery_v: float = 11.0         # V_max
    low_battery_v: float = 10.5          # V_th (Figure 10: crossed ~100 s after a full charge at 0.005 V/s)
    max_mission_time_s: float = 900.0    # T_max
    system_fault: str = "retry"
    waypoint_tol_m: float = 0.1
    pad_tol_m: float = 0.02

    def __post_init__(self) -> None:
        for name in ("max_speed_mps", "search_speed_mps", "position_gain_per_s", "focal_length_px",
                     "detection_radius_px", "centre_tol_px", "position_tol_m", "speed_tol_mps",
                     "grasp_height_tol_m", "land_tol_m", "lost_after_s", "descend_timeout_s",
                     "max_mission_time_s", "waypoint_tol_m", "drop_radius_m", "full_battery_v",
                     "pad_tol_m"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"guidance.{name}={value!r} must be a finite number > 0")
        for name in ("hover_z_ned_m", "search_z_ned_m", "transport_z_ned_m"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value < 0):
                raise ValueError(f"guidance.{name}={value!r} must be < 0 (NED: above the floor)")
        if not 0 < self.low_battery_v < self.full_battery_v:
            raise ValueError(f"guidance.low_battery_v={self.low_battery_v!r} must be in (0, full_battery_v)")
        if self.system_fault not in SYSTEM_FAULT_POLICIES:
            raise ValueError(f"guidance.system_fault={self.system_fault!r} must be one of "
                             f"{', '.join(SYSTEM_FAULT_POLICIES)}")
        wps = np.asarray(self.waypoints_ne_m, float)
        if wps.ndim != 2 or wps.shape[1] != 2 or wps.shape[0] < 1 or not np.all(np.isfinite(wps)):
            raise ValueError("guidance.waypoints_ne_m must be a non-empty list of finite [north, east] pairs")

    @property
    def grasp_z_ned_m(self) -> float:
        """z_d = -(z_G/Q + 2 R_T): the height at which the grasper touches a target's top (Table 1)."""
        return -(self.grasper_z_m + 2.0 * self.target_radius_m)


@dataclass
class GuidanceInputs:
    """What the vehicle senses at one control period (NED, SI)."""

    time_s: float
    position_ned_m: Array
    velocity_ned_mps: Array
    heading_rad: float
    battery_v: float
    centroids_px: Array  # (K, 2) [x right, y up] of every target the camera sees (eq. 27)
    holding: bool        # the grasper holds a target
    rotor_failed: bool   # an actuator fault was detected (section 5.3.4: and which rotor)


@dataclass
class GuidanceCommand:
    """What the guidance commands: a velocity set point NED [m/s] (NaN: none, in Emergency land), the
    grasper, the mode."""

    velocity_ned_mps: Array
    grasper_closed: bool
    mode: str


def drop_site_image_px(position_ned_m: ArrayLike, heading_rad: float, drop_site_ne_m: ArrayLike,
                       camera_z_m: float, focal_length_px: float) -> tuple[Array, float]:
    """The drop site's image point [x right, y up] and the camera's height above the floor [m] seen by the
    gimballed (level) camera at ``position_ned_m`` with ``heading_rad`` (eq. 12-13 with roll = pitch =
    0, as the gimbal holds them, section 4.5.3)."""
    p = np.asarray(position_ned_m, float)
    height = max(-(p[2] + camera_z_m), 1e-6)
    d = np.asarray(drop_site_ne_m, float) - p[0:2]
    c, s = math.cos(heading_rad), math.sin(heading_rad)
    forward, right = c * d[0] + s * d[1], -s * d[0] + c * d[1]
    return np.array([focal_length_px * right / height, focal_length_px * forward / height]), height


def _norm(v: Array) -> float:
    """``np.linalg.norm`` of a float vector with the same arithmetic (the square root of its dot product),
    without the wrapper's cost (the guidance takes a few per control period)."""
    x = v.ravel(order="K")
    return math.sqrt(x.dot(x))


class MissionGuidance:
    """One vehicle's mission (see the module docstring). ``landing_site_ne_m``: its base (x_0, y_0);
    ``drop_site_ne_m``: (x_ds, y_ds); ``num_targets``: how many to retrieve; ``self_test()``: the
    Initialise self-diagnosis, True = systems okay (drawn by the world, one draw per answered call), None =
    no answer yet (the mission stays in Initialise and calls again next period).
    """

    def __init__(self, params: GuidanceParams, landing_site_ne_m: ArrayLike, drop_site_ne_m: ArrayLike,
                 num_targets: int, self_test: Callable[[], bool | None]) -> None:
        self.params = params
        self.base_ne = np.asarray(landing_site_ne_m, float).copy()
        self.drop_ne = np.asarray(drop_site_ne_m, float).copy()
        self.num_targets = int(num_targets)
        self._self_test = self_test
        self._waypoints = np.asarray(params.waypoints_ne_m, float)
        self.mode = "idle"
        self.mode_since_s = 0.0
        #: '' while the mission goes on, else why it ended (modes.MISSION_ENDS)
        self.mission_over = ""
        #: set when the mission will end on landing (end of path, time limit, system fault abort)
        self._ending = ""
        self.deposited = 0
        self.last_waypoint = -1  # c_wp - 1: the last waypoint reached (-1: none yet)
        self.next_waypoint = 0
        self.system_faults = 0
        self.grasper_closed = False
        self._entry = np.zeros(3)
        self._integral = np.zeros(2)
        self._last_seen_s = 0.0
        self._tracked: dict[float | None, Array | None] = {}  # this period's tracked centroids by radius

    # --- helpers ----------------------------------------------------------------------------------
    def _enter(self, mode: str, t: float) -> None:
        self.mode = mode
        self.mode_since_s = t

    def _base_hover(self) -> Array:
        """The hover point above the base, NED [m]."""
        return np.array([*self.base_ne, self.params.hover_z_ned_m])

    def _goto(self, r: Array, rd: ArrayLike, vmax: float | None = None) -> Array:
        """eq. 21: rdot_d = K_pr (r_d - r), limited to |rdot_d| <= v_max."""
        v = self.params.position_gain_per_s * (np.asarray(rd, float) - r)
        limit = self.params.max_speed_mps if vmax is None else vmax
        norm = _norm(v)
        return v * (limit / norm) if norm > limit else v

    def tracked_centroid(self, inputs: GuidanceInputs, radius_px: float | None = None) -> Array | None:
        """Object tracking (section 5.3.5): the centroid within ``radius_px`` (default R_c: detection, D)
        of the image centre and outside the drop site's image radius that is closest to the centre, or
        None (D = 0). Hover above target and Descend to grasp track a target anywhere in the image
        (``radius_px`` inf): R_c gates the detection, not the tracking of a target already chosen."""
        c = np.asarray(inputs.centroids_px, float).reshape(-1, 2)
        if c.shape[0] == 0:
            return None
        p = self.params
        ds_px, height = drop_site_image_px(inputs.position_ned_m, inputs.heading_rad, self.drop_ne,
                                           p.camera_z_m, p.focal_length_px)
        r = np.hypot(c[:, 0], c[:, 1]).tolist()
        limit = p.detection_radius_px if radius_px is None else radius_px
        from_drop_site = np.hypot(*(c - ds_px).T).tolist()
        drop_radius_px = p.focal_length_px * p.drop_radius_m / height
        best = None  # the first of the closest kept ones (argmin)
        for i, (ri, di) in enumerate(zip(r, from_drop_site, strict=True)):
            if ri < limit and di >= drop_radius_px and (best is None or ri < r[best]):
                best = i
        return None if best is None else c[best]

    def _visual(self, inputs: GuidanceInputs, centroid: Array, dt_s: float) -> Array:
        """eq. 28-29: horizontal velocity NED [m/s] that centres the centroid (PI on the ground error)."""
        p = self.params
        h = abs(-inputs.position_ned_m[2] - p.camera_z_m)
        e = h / p.focal_length_px * np.array([centroid[1], centroid[0]])  # [forward, right] [m]
        self._integral += e * dt_s
        u = p.visual_p_gain_per_s * e + p.visual_i_gain_per_s2 * self._integral
        c, s = math.cos(inputs.heading_rad), math.sin(inputs.heading_rad)
        return np.array([c * u[0] - s * u[1], s * u[0] + c * u[1]])

    # --- the state machine --------------------------------------------------------------------------
    def update(self, inputs: GuidanceInputs, dt_s: float) -> GuidanceCommand:
        """One control period: transitions first (Figure 5's predicates on this period's inputs), then
        the new mode's command (Table 1)."""
        self._tracked = {}
        self._transitions(inputs)
        return GuidanceCommand(self._command(inputs, dt_s), self.grasper_closed, self.mode)

    def _track(self, inputs: GuidanceInputs, radius_px: float | None = None) -> Array | None:
        """``tracked_centroid`` once per period and radius (the transitions and the command both ask)."""
        if radius_px not in self._tracked:
            self._tracked[radius_px] = self.tracked_centroid(inputs, radius_px)
        return self._tracked[radius_px]

    def _transitions(self, s: GuidanceInputs) -> None:
        p, t, r, v = self.params, s.time_s, s.position_ned_m, s.velocity_ned_mps
        mode = self.mode
        # additional transitions (section 5.2), before the mode's own predicates
        if s.rotor_failed and mode not in NO_ACTUATOR_EXIT:
            self.grasper_closed = False
            self._ending = MISSION_ACTUATOR_FAULT
            self._enter("emergency_land", t)
            return
        if s.battery_v <= p.low_battery_v and mode not in NO_LOW_BATTERY_EXIT:
            self.grasper_closed = False  # section 5.2.1: the battery comes first
            self._enter("return_to_base", t)
            return
        if (t >= p.max_mission_time_s and not self._ending and mode not in NO_LOW_BATTERY_EXIT):
            self.grasper_closed = False
            self._ending = MISSION_TIME_LIMIT
            self._enter("return_to_base", t)
            return
        if mode == "idle":
            if not self.mission_over and s.battery_v >= p.full_battery_v - 1e-9:
                self._enter("take_off", t)
        elif mode == "take_off":
            if _norm(r - self._base_hover()) < p.position_tol_m:
                self._enter("initialise", t)
        elif mode == "initialise":
            passed = self._self_test()
            if passed is None:
                pass  # no answer yet (the graph's uavN/self_test service): hold the hover and ask again
            elif passed:
                self._enter("search", t)
                self.next_waypoint = max(self.last_waypoint, 0)
            else:
                self.system_faults += 1
                if p.system_fault == "abort":
                    self._ending = MISSION_SYSTEM_FAULT
                self._enter("land", t)
        elif mode == "search":
            if self.deposited >= self.num_targets:
                self._enter("return_to_base", t)
            elif self._track(s) is not None:
                self._entry = r.copy()
                self._enter("identify", t)
            else:
                wp = np.array([*self._waypoints[self.next_waypoint], p.search_z_ned_m])
                if _norm(r - wp) < p.waypoint_tol_m:
                    self.last_waypoint = self.next_waypoint
                    self.next_waypoint += 1
                    if self.next_waypoint >= len(self._waypoints):
                        self._ending = MISSION_END_OF_PATH
                        self._enter("return_to_base", t)
        elif mode == "identify":
            if _norm(r - self._entry) < p.position_tol_m and _norm(v) < p.speed_tol_mps:
                self._integral[:] = 0.0
                self._last_seen_s = t
                self._enter("hover_above_target", t)
        elif mode in ("hover_above_target", "descend_to_grasp"):
            c = self._track(s, math.inf)
            if c is not None:
                self._last_seen_s = t
            if t - self._last_seen_s >= p.lost_after_s:
                self._enter("search", t)  # target lost
            elif mode == "hover_above_target":
                if (c is not None and math.hypot(v[0], v[1]) < p.speed_tol_mps
                        and math.hypot(c[0], c[1]) < p.centre_tol_px):
                    self._enter("descend_to_grasp", t)
            elif (abs(r[2] - p.grasp_z_ned_m) < p.grasp_height_tol_m
                  and math.hypot(v[0], v[1]) < p.speed_tol_mps):
                self.grasper_closed = True
                self._enter("grasp", t)
            elif t - self.mode_since_s >= p.descend_timeout_s:
                self._enter("search", t)  # too long
        elif mode == "grasp":
            self._enter("ascend", t)  # grabbed (the grasper reports in Ascend)
        elif mode in ("ascend", "transport"):
            if not s.holding:
                self.grasper_closed = False
                self._entry = r.copy()
                self._enter("reacquire_target", t)
            elif mode == "ascend" and abs(r[2] - p.transport_z_ned_m) < p.position_tol_m:
                self._enter("transport", t)
            elif mode == "transport" and _norm(
                    r - np.array([*self.drop_ne, p.transport_z_ned_m])) < p.position_tol_m:
                self._enter("descend_to_drop", t)
        elif mode == "descend_to_drop":
            if not s.holding:  # dropped early: recorded as deposited (section 5.1.11)
                self.grasper_closed = False
                self.deposited += 1
                self._enter("return_to_search", t)
            elif _norm(r - np.array([*self.drop_ne, p.grasp_z_ned_m])) < p.position_tol_m:
                self.grasper_closed = False
                self._enter("drop", t)
        elif mode == "drop":
            self.deposited += 1
            self._enter("return_to_base" if self.deposited >= self.num_targets else "return_to_search", t)
        elif mode == "return_to_search":
            if _norm(r - np.array([*self.drop_ne, p.search_z_ned_m])) < p.position_tol_m:
                self._enter("search", t)
                self.next_waypoint = max(self.last_waypoint, 0)
        elif mode == "return_to_base":
            if _norm(r - self._base_hover()) < p.position_tol_m:
                self._enter("land", t)
        elif mode == "land":
            landed = np.array([*self.base_ne, -p.quad_radius_m])
            if _norm(r - landed) < p.land_tol_m and _norm(v) < p.speed_tol_mps:
                self._enter("idle", t)
                if self.deposited >= self.num_targets:
                    self.mission_over = MISSION_COMPLETE
                elif self._ending:
                    self.mission_over = self._ending
        elif mode == "reacquire_target":
            if _norm(r - self._entry) < p.position_tol_m and _norm(v) < p.speed_tol_mps:
                if self._track(s) is not None:
                    self._integral[:] = 0.0
                    self._last_seen_s = t
                    self._enter("hover_above_target", t)
                else:
                    self._enter("search", t)
                    self.next_waypoint = max(self.last_waypoint, 0)
        elif (mode == "emergency_land" and abs(r[2] + p.quad_radius_m) < p.land_tol_m
              and _norm(v) < p.speed_tol_mps):
            self._enter("idle", t)
            self.mission_over = MISSION_ACTUATOR_FAULT

    def _command(self, s: GuidanceInputs, dt_s: float) -> Array:
        """Table 1: the velocity set point NED [m/s] of the present mode."""
        p, r, mode = self.params, s.position_ned_m, self.mode
        base = self.base_ne
        if mode == "idle":
            # Table 1: u = 0. The rotor airframe has no "motors off" in velocity control, so the vehicle is
            # kept on its pad: pressed down while it is above its resting height, else its own vertical
            # speed is commanded (zero error: the loop's integral, which holds it down, stops growing, so
            # the next take-off does not first unwind a charge-long windup)
            above_pad = r[2] < -p.quad_radius_m - p.pad_tol_m
            return np.array([0.0, 0.0, 0.5 if above_pad else float(s.velocity_ned_mps[2])])
        if mode == "emergency_land":  # the airframe's emergency controller flies: no set point
            return np.full(3, np.nan)
        if mode in ("take_off", "initialise", "return_to_base"):
            return self._goto(r, [*base, p.hover_z_ned_m])
        if mode == "search":
            wp = self._waypoints[self.next_waypoint]
            return self._goto(r, [*wp, p.search_z_ned_m], p.search_speed_mps)
        if mode in ("identify", "reacquire_target"):
            return self._goto(r, self._entry)
        if mode in ("hover_above_target", "descend_to_grasp"):
            zd = p.search_z_ned_m if mode == "hover_above_target" else p.grasp_z_ned_m
            v = self._goto(r, [r[0], r[1], zd])
            c = self._track(s, math.inf)
            if c is not None:
                v[0:2] = self._visual(s, c, dt_s)
            return v
        if mode in ("grasp", "ascend"):
            zd = p.grasp_z_ned_m if mode == "grasp" else p.transport_z_ned_m
            return np.array([0.0, 0.0, p.position_gain_per_s * (zd - r[2])])
        if mode == "transport":
            return self._goto(r, [*self.drop_ne, p.transport_z_ned_m])
        if mode in ("descend_to_drop", "drop"):
            return self._goto(r, [*self.drop_ne, p.grasp_z_ned_m])
        if mode == "return_to_search":
            return self._goto(r, [*self.drop_ne, p.search_z_ned_m])
        if mode == "land":
            return self._goto(r, [*base, -p.quad_radius_m])
        raise AssertionError(mode)

    def height_command_z_ned_m(self) -> float:
        """The height the present mode flies to, as the z (NED [m]) of its position set point (Table 1,
        as ``_command`` flies it): z_hvr in Take-off, Initialise and Return to base; z_srch in Search,
        Hover above target and Return to search; the grasp height z_d (``grasp_z_ned_m``) in Descend to
        grasp, Grasp, Descend to drop and Drop; z_trnsprt in Ascend and Transport; the z where the mode
        was entered in Identify and Reacquire target (they fly back to that point); -R_Q (resting on
        the floor) in Land. Idle and Emergency land have no position set point (the vehicle rests on,
        or the emergency controller descends to, the floor): their height command is the floor's -R_Q
        too, so a plotted command is continuous (ireland_2016 Figure 9's dashed line)."""
        p, mode = self.params, self.mode
        if mode in ("take_off", "initialise", "return_to_base"):
            return p.hover_z_ned_m
        if mode in ("search", "hover_above_target", "return_to_search"):
            return p.search_z_ned_m
        if mode in ("descend_to_grasp", "grasp", "descend_to_drop", "drop"):
            return p.grasp_z_ned_m
        if mode in ("ascend", "transport"):
            return p.transport_z_ned_m
        if mode in ("identify", "reacquire_target"):
            return float(self._entry[2])
        return -p.quad_radius_m  # land, idle, emergency_land

"""Fleet control: every vehicle's controls for one tick from its mode, its target and the estimated state.

The one place where QRSim's per-vehicle control modes are dispatched (spec 1.4, 6), used by the
in-process ``Simulator`` and by the ``flight_controller`` node alike:

- ``attitude``: the target row is the control ``[pitch, roll, throttle, yaw_rate, battery]`` itself;
- ``velocity``: ``VelocityPID`` to the NED velocity target [m/s] (columns 0:3), holding the vehicle's
  heading;
- ``velocity_height``: ``VelocityHeightPID`` to the north/east velocity target [m/s] (columns 0:2) at the
  scenario's flight height ``flight_z_ned_m``, holding the heading;
- ``waypoint``: ``WaypointPID`` to the NED position [m] and heading [rad] target (columns 0:4);
- ``rates_thrust``, ``motors`` (rotor airframe only): the target row is the rotor-level input itself
  (``rotor_control.LOW_LEVEL_INPUTS``); the control row under it is the hover row, and
  ``low_level_inputs`` gives the inputs ``Airframes.step`` flies instead of it.

One controller per mode runs over the vehicles in that mode (vectorised). Invalid vehicles fly zero
targets, as in QRSim (they are frozen by the dynamics anyway), and so does a row whose target is not
finite (no set point yet); an attitude row of an invalid vehicle, or without a finite target, is the
hover row ``pelican.HOVER_CONTROL``.

Expiry and failsafe (not in QRSim): given the time of the tick (``now_s``) and the time each vehicle's
set point was issued (``issued_s``), a set point older than ``command_timeout_s`` puts the vehicle into
its failsafe until a fresh one comes (whatever its mode, attitude included):

- ``hold``: a ``WaypointPID`` to the estimated position, height and heading the vehicle had when the
  set point expired (closed loop on the estimated state);
- ``land``: a ``VelocityPID`` to a descent of ``failsafe_land_rate_m_s`` holding that heading; once the
  estimated height is at most ``LAND_TOUCHDOWN_HEIGHT_M`` the vehicle is ``landed``: throttle off, and
  the front end disarms it (``PelicanFleet.disarm``: frozen, invalid) -- for good, until the next episode;
- ``level``: the open-loop hover row ``pelican.HOVER_CONTROL`` (QRSim-era fallback; it drifts).

Low battery (not in QRSim; siegemund_2011 section 4.5; thresholds in ``energy.BatterySettings``): given
each vehicle's charge left and drain (``update_battery``, once per tick before ``controls``), a vehicle

- ``return``s once its charge is below ``return_below`` and no longer covers the flight home plus the
  ``reserve``: a ``WaypointPID`` that first climbs where the return started to the return height (the
  higher of that height and the flight height ``flight_z_ned_m``; done within
  ``RETURN_CLIMB_TOLERANCE_M``), then flies home at it (heading held), then ``battery_land``s there.
  Home is the nearest charging base: the vehicle's own launch point (its estimated north/east at its
  first tick of the episode, as an autopilot records its home position) if that lies on the base, and
  it lands within ``RETURN_HOME_ARRIVAL_M`` of it (vehicles launched from one base land each on its own
  spot instead of converging on the centre); else the base's centre, landing within its radius;
- ``battery_land``s where it is once its charge is at most ``land_below`` (or, without a base, instead of
  returning): the ``land`` descent above, disarmed on touchdown (resting on a base it charges).

Both are latched for the episode and take precedence over set points and the set-point failsafes.

Velocity set points the controllers will clamp (a body component beyond ``MAX_SPEED_MPS``) are counted
per vehicle in ``setpoints_clamped``, once per clamped set point.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, njit
from qrsim_ros.core.vehicles.controllers import (
    MAX_SPEED_MPS,
    VelocityHeightPID,
    VelocityPID,
    WaypointPID,
    estimated_view_kernel,
    is_f8,
    rotate_ned_to_body,
    velocity_pid_kernel,
)
from qrsim_ros.core.vehicles.energy import BatterySettings, ChargingBase, bases_array
from qrsim_ros.core.vehicles.estimated_state import (
    EAST,
    ESTIMATED_STATE_SIZE,
    HEIGHT,
    NORTH,
    NORTH_EAST,
    POSITION_NED,
    hold_pose,
)
from qrsim_ros.core.vehicles.pelican import CONTROL_LIMITS, FULL_BATTERY_V, HOVER_CONTROL
from qrsim_ros.core.vehicles.rotor_control import LOW_LEVEL_INPUTS

Array = NDArray[np.float64]

#: How an agent's action drives a vehicle (QRSim's three inputs and raw attitude, spec 6/7): each mode
#: with its target columns (what a command of that mode carries).
CONTROL_MODES: dict[str, tuple[str, ...]] = {
    "attitude": ("pitch_rad", "roll_rad", "throttle", "yaw_rate_rads", "battery_v"),
    "velocity": ("vn_mps", "ve_mps", "vd_mps"),
    "velocity_height": ("vn_mps", "ve_mps"),
    "waypoint": ("north_m", "east_m", "down_m", "heading_rad"),
    **LOW_LEVEL_INPUTS,
}
#: Modes flown through a PID controller (attitude and the rotor-level inputs are flown as given).
CONTROLLED_MODES = ("velocity", "velocity_height", "waypoint")
#: The rotor airframe's lower-level inputs (not in QRSim; docs/ROTOR.md): body rates + collective
#: thrust, and normalised motor commands; ``low_level_inputs`` hands them to ``Airframes.step``.
LOW_LEVEL_MODES = tuple(LOW_LEVEL_INPUTS)
#: Width of a target row (the widest mode).
TARGET_WIDTH = 5
#: What a vehicle does once its set point expired (``vehicle.failsafe``; see the module docstring).
FAILSAFES = ("hold", "land", "level")
#: The low-battery failsafes (latched for the episode; see the module docstring).
BATTERY_FAILSAFES = ("return", "battery_land")
#: Every failsafe a vehicle can fly: ``failsafe_code`` c > 0 is ALL_FAILSAFES[c - 1].
ALL_FAILSAFES = FAILSAFES + BATTERY_FAILSAFES
_HOLD, _LAND, _LEVEL, _RETURN, _BATTERY_LAND = range(1, len(ALL_FAILSAFES) + 1)
#: A landing vehicle whose estimated height is at most this has touched down and is disarmed [m].
LAND_TOUCHDOWN_HEIGHT_M = 0.3
#: ``return`` climbs in place until its height is within this of the return height [m].
RETURN_CLIMB_TOLERANCE_M = 1.0
#: A return to the vehicle's own launch point lands within this horizontal distance of it [m].
RETURN_HOME_ARRIVAL_M = 0.5
#: The controls of a disarmed vehicle: level, throttle off.
DISARMED_CONTROL = np.array([0.0, 0.0, 0.0, 0.0, FULL_BATTERY_V])


@njit(f"void({F8_2D_IN}, {F8_2D_IN}, Array(boolean, 1, 'A', readonly=True), Array(int64, 1, 'A', "
      "readonly=True), int64, float64, float64[:, :], int64[:])")
def _count_clamps_kernel(t_all, ex, invalid, rows, width, max_speed_mps, clamped_sp, counts):
    """``FleetControl._count_clamps`` for the vehicles ``rows`` whose velocity targets are the first ``width``
    columns of ``t_all`` (the rest 0): a valid vehicle whose target [m/s] is faster than ``max_speed_mps``
    and has a body component (at the attitude eX[3:6], ``EULER``) beyond it counts once per new set point."""
    for r in rows:
        if invalid[r]:
            continue
        v0 = t_all[r, 0] if width > 0 else 0.0
        v1 = t_all[r, 1] if width > 1 else 0.0
        v2 = t_all[r, 2] if width > 2 else 0.0
        if not np.sqrt(v0 * v0 + v1 * v1 + v2 * v2) > max_speed_mps:  # else never clamped (NaN: no target)
            continue
        b = rotate_ned_to_body(ex[r, 3], ex[r, 4], ex[r, 5], v0, v1, v2)
        clamped = abs(b[0]) > max_speed_mps or abs(b[1]) > max_speed_mps or abs(b[2]) > max_speed_mps
        if clamped and (clamped_sp[r, 0] != v0 or clamped_sp[r, 1] != v1 or clamped_sp[r, 2] != v2):
            counts[r] += 1
            clamped_sp[r, 0], clamped_sp[r, 1], clamped_sp[r, 2] = v0, v1, v2


@njit(f"boolean[:]({F8_1D_IN}, Array(boolean, 1, 'A', readonly=True), float64, float64)")
def _expired_kernel(issued_s, invalid, now_s, timeout_s):
    """(N,) bool: valid vehicles whose set point, issued at ``issued_s`` [s], is older than ``timeout_s``
    at ``now_s`` (NaN: none yet, never expired); one pass (numpy's errstate alone costs microseconds)."""
    out = np.empty(issued_s.shape[0], np.bool_)
    for i in range(issued_s.shape[0]):
        out[i] = not invalid[i] and now_s - issued_s[i] > timeout_s
    return out


@njit(f"float64[:, :]({F8_2D_IN}, Array(boolean, 1, 'A', readonly=True))")
def _flown_targets(t, invalid):
    """A controller's targets (a new array): ``t`` (M, W) with 0 where the vehicle is invalid or the value
    not finite (``np.where(invalid[:, None] | ~np.isfinite(t), 0.0, t)`` in one pass)."""
    out = np.empty((t.shape[0], t.shape[1]))
    for i in range(t.shape[0]):
        for j in range(t.shape[1]):
            v = t[i, j]
            out[i, j] = 0.0 if invalid[i] or not np.isfinite(v) else v
    return out


@njit("boolean(Array(int8, 1, 'A', readonly=True))")
def _any_failsafe(code):
    """``failsafe_code.any()`` without numpy's reduction machinery (every tick)."""
    found = False
    for i in range(code.shape[0]):
        if code[i] != 0:
            found = True
            break
    return found


_B1_IN = "Array(boolean, 1, 'A', readonly=True)"


@njit(f"int64({F8_2D_IN}, {F8_2D_IN}, {_B1_IN}, {F8_1D_IN}, {F8_1D_IN}, float64, boolean, float64, "
      "float64[:, :], float64[:, :], float64[:, :], float64[:, :], float64[:, :], float64[:, :], "
      f"{F8_1D_IN}, float64, float64[:, :], Array(int64, 1, 'A', readonly=True), float64[:, :], int64[:], "
      "boolean[:], Array(int8, 1, 'A', readonly=True))", writable_twins=True)
def _velocity_fleet_kernel(t_all, ex, valid, headings, issued_s, now_s, expire, timeout_s, pos, eul, vel, sp,
                           ei, e_prev, gains, dt_s, u, rows, clamped_sp, counts, expired, code):
    """``FleetControl.controls`` of a fleet that flies ``velocity`` only, up to the failsafes, in one call
    (each Python-level step of the general path costs a microsecond or more, every tick): the same kernels
    in the same order. Controls into ``u`` (N, 5), ``expired`` (N,) written when ``expire``. Returns 1 if
    a set point is not finite (nothing done), else 2 if a set point expired + 4 if a failsafe flies."""
    n = valid.shape[0]
    invalid = np.empty(n, np.bool_)
    for i in range(n):
        invalid[i] = not valid[i]
    t = _flown_targets(t_all[:, 0:3], invalid)  # invalid or no target: zero targets, as QRSim
    estimated_view_kernel(ex, pos, eul, vel)
    if velocity_pid_kernel(pos, eul, vel, t, headings, sp, ei, e_prev, gains, CONTROL_LIMITS, HOVER_CONTROL,
                            dt_s, u):
        return 1
    _count_clamps_kernel(t_all, ex, invalid, rows, 3, MAX_SPEED_MPS, clamped_sp, counts)
    flags = 0
    if expire:
        e = _expired_kernel(issued_s, invalid, now_s, timeout_s)
        for i in range(n):
            expired[i] = e[i]
            if e[i]:
                flags |= 2
    if _any_failsafe(code):
        flags |= 4
    return flags


@njit("boolean(Array(boolean, 1, 'A', readonly=True))", writable_twins=True)
def any_true(flags):
    """``flags.any()`` without numpy's reduction machinery (every tick)."""
    found = False
    for i in range(flags.shape[0]):
        if flags[i]:
            found = True
            break
    return found


@njit(f"void({F8_2D_IN}, float64, float64[:, :], float64[:])", writable_twins=True)
def hold_given(targets, now_s, held, issued_s):
    """Each vehicle's latest set point: the rows of ``targets`` (N, TARGET_WIDTH) with a first value
    (not NaN: a new set point) replace those of ``held`` (N, TARGET_WIDTH), issued at ``now_s`` [s]
    (``issued_s`` (N,))."""
    for i in range(targets.shape[0]):
        if not np.isnan(targets[i, 0]):
            for j in range(targets.shape[1]):
                held[i, j] = targets[i, j]
            issued_s[i] = now_s


class FleetControl:
    """The controllers of a fleet whose vehicles each have a control mode (see the module docstring).

    ``modes``: one mode per vehicle; ``flight_z_ned_m``: the height ``velocity_height`` vehicles hold;
    ``command_timeout_s`` [s, simulated] (0: set points never expire), ``failsafe`` (one of FAILSAFES) and
    ``failsafe_land_rate_m_s`` [m/s]: the scenario's ``vehicle`` settings of the same names; ``battery``
    (``vehicle.battery``) and ``bases`` (the scenario's charging bases) for the low-battery failsafe
    (off without ``battery`` or with its failsafe off).

    Per vehicle, read by the front ends: ``failsafe_code`` (0: flying its set point, else 1 + the index
    in FAILSAFES), ``landed`` (touched down in ``land``: disarm it), counters since construction
    ``failsafe_onsets`` and ``setpoints_clamped``.
    """

    def __init__(self, modes: Sequence[str], flight_z_ned_m: float, command_timeout_s: float = 0.0,
                 failsafe: str = "hold", failsafe_land_rate_m_s: float = 0.5,
                 battery: BatterySettings | None = None, bases: tuple[ChargingBase, ...] = ()) -> None:
        unknown = sorted(set(modes) - set(CONTROL_MODES))
        if unknown:
            raise ValueError(f"unknown control mode(s) {unknown}; one of {', '.join(CONTROL_MODES)}")
        if failsafe not in FAILSAFES:
            raise ValueError(f"failsafe {failsafe!r} must be one of {', '.join(FAILSAFES)}")
        if not (np.isfinite(command_timeout_s) and command_timeout_s >= 0):
            raise ValueError(f"command_timeout_s={command_timeout_s!r} must be >= 0")
        if not (np.isfinite(failsafe_land_rate_m_s) and failsafe_land_rate_m_s > 0):
            raise ValueError(f"failsafe_land_rate_m_s={failsafe_land_rate_m_s!r} must be > 0")
        self.command_timeout_s = float(command_timeout_s)
        self.failsafe_mode = failsafe
        self.failsafe_land_rate_m_s = float(failsafe_land_rate_m_s)
        self.modes = tuple(modes)
        self.num_vehicles = len(self.modes)
        self.flight_z_ned_m = float(flight_z_ned_m)
        self.rows = {m: np.array([i for i, mm in enumerate(self.modes) if mm == m], int)
                     for m in CONTROL_MODES}
        # per tick: the hover rows to start from, the modes that have vehicles, the flight height
        self._hover = np.tile(HOVER_CONTROL, (self.num_vehicles, 1))
        self._active = [(m, r, len(CONTROL_MODES[m])) for m, r in self.rows.items() if r.size]
        # how ``controls`` takes a mode's rows: a slice (views, no copies) when the mode has every vehicle
        self._take = {m: slice(None) if np.array_equal(r, np.arange(len(self.modes))) else r
                      for m, r, _ in self._active}
        self._any_low_level = any(self.rows[m].size for m in LOW_LEVEL_MODES)
        #: every vehicle flies the same controlled mode (``controls`` takes its controller's rows as they are)
        self._one_controlled_mode = len(self._active) == 1 and self._active[0][0] in CONTROLLED_MODES
        #: every vehicle flies ``velocity`` (the retrieve missions): ``controls`` runs one fused kernel
        self._all_velocity = self._one_controlled_mode and self._active[0][0] == "velocity"
        self._flight_z = np.full(self.num_vehicles, self.flight_z_ned_m)
        self._controllers = {
            "velocity": VelocityPID(max(1, len(self.rows["velocity"]))),
            "velocity_height": VelocityHeightPID(max(1, len(self.rows["velocity_height"]))),
            "waypoint": WaypointPID(max(1, len(self.rows["waypoint"]))),
        }
        # failsafe: state per vehicle, its own controllers over the whole fleet
        n = self.num_vehicles
        self.failsafe_code = np.zeros(n, np.int8)
        self.landed = np.zeros(n, bool)
        self.failsafe_onsets = np.zeros(n, np.int64)
        self.setpoints_clamped = np.zeros(n, np.int64)
        self._hold = np.zeros((n, 4))  # NED position [m] and heading [rad] held (hold) / heading (land)
        self._hold_pid = WaypointPID(n)
        self._land_pid = VelocityPID(n)
        self._clamped_sp = np.full((n, 3), np.nan)  # the set point last counted as clamped
        self._expired = np.zeros(n, bool)  # the fused kernel's expiry flags (``_velocity_fleet_kernel``)
        self._velocity_rows = [(r, len(CONTROL_MODES[m])) for m, r, _ in self._active
                               if m in ("velocity", "velocity_height")]
        # low battery: the policy, the bases, each vehicle's target base
        self.battery = battery if battery is not None and battery.failsafe_on else None
        self._bases = bases_array(bases)
        self._base_radii = np.array([b.radius_m for b in bases], float)
        self._target_base = np.full(n, -1, np.int64)
        self._return_pid = WaypointPID(n)
        self._return_climbed = np.zeros(n, bool)  # return: the climb to the return height is done
        # each vehicle's launch point (north, east) [m] (its first tick's estimate; NaN: none yet), where
        # it returns when that lies on its nearest base; the return's target (north, east) and whether
        # it is the launch point
        self._home_ne = np.full((n, 2), np.nan)
        self._home_pending = self.battery is not None and self._bases.size > 0
        self._return_ne = np.zeros((n, 2))
        self._return_home = np.zeros(n, bool)

    @property
    def controlled(self) -> NDArray[np.int_]:
        """Indices of the vehicles flown through a controller (mode other than attitude)."""
        return np.array([i for i, m in enumerate(self.modes) if m in CONTROLLED_MODES], int)

    @property
    def failsafe(self) -> list[str]:
        """Per vehicle: the failsafe it flies ('' while it flies its set point; 'hold', 'land', 'level')."""
        return ["" if c == 0 else ALL_FAILSAFES[c - 1] for c in self.failsafe_code]

    def reset(self) -> None:
        """Forget every controller's state and the failsafes (new episode); the counters stay."""
        for c in (*self._controllers.values(), self._hold_pid, self._land_pid, self._return_pid):
            c.reset()
        self._target_base[:] = -1
        self._return_climbed[:] = False
        self._home_ne[:] = np.nan
        self._home_pending = self.battery is not None and self._bases.size > 0
        self._return_home[:] = False
        self.failsafe_code[:] = 0
        self.landed[:] = False
        self._clamped_sp[:] = np.nan

    def controls(self, targets: ArrayLike, ex: ArrayLike, valid: ArrayLike, headings_rad: ArrayLike,
                 now_s: float | None = None, issued_s: ArrayLike | None = None) -> Array:
        """Controls (N, 5) for this tick.

        ``targets`` (N, >=4): each vehicle's target in its mode's columns (``CONTROL_MODES``); ``ex``
        (N, 20): estimated states; ``valid`` (N,); ``headings_rad`` (N,): the heading each velocity
        controller holds. ``now_s``: the simulated time of the tick [s] (of the state the controls are
        computed from); ``issued_s`` (N,): when each vehicle's set point was issued [s] (NaN: none yet,
        nothing to expire). Without them (or with ``command_timeout_s`` 0) nothing expires.
        """
        if self.home_pending:
            self.record_home(ex, valid)
        if self._all_velocity:
            n = self.num_vehicles
            if (type(targets) is np.ndarray and targets.dtype == np.float64 and targets.ndim == 2
                    and targets.shape[0] == n and targets.shape[1] >= 3
                    and is_f8(ex, (n, ESTIMATED_STATE_SIZE)) and is_f8(headings_rad, (n,))
                    and type(valid) is np.ndarray and valid.dtype == np.bool_ and valid.shape == (n,)
                    and (issued_s is None or is_f8(issued_s, (n,)))):
                return self._velocity_controls(targets, ex, valid, headings_rad, now_s, issued_s)
        t_all = np.asarray(targets, float)
        ex = np.asarray(ex, float)
        invalid = ~np.asarray(valid, bool)
        headings = np.asarray(headings_rad, float)
        u = None if self._one_controlled_mode else self._hover.copy()
        for mode, _, width in self._active:
            rows = self._take[mode]
            t = t_all[rows, :width]
            if mode == "attitude":
                fly = ~invalid[rows] & np.isfinite(t).all(axis=1)
                u[rows] = np.where(fly[:, None], t, u[rows])
                continue
            if mode in LOW_LEVEL_MODES:  # flown by ``low_level_inputs``; the hover row under it
                continue
            t = _flown_targets(t, invalid[rows])  # invalid or no target: zero targets, as QRSim
            e = ex[rows] if isinstance(rows, np.ndarray) else ex
            c = self._controllers[mode]
            if mode == "velocity":
                u_mode = c.compute_from_estimated_state(e, t, headings[rows])
            elif mode == "velocity_height":
                u_mode = c.compute_from_estimated_state(e, t, self._flight_z[rows], headings[rows])
            else:
                u_mode = c.compute_from_estimated_state(e, t[:, 0:3], t[:, 3])
            if u is None:  # every vehicle in this mode: its controls are the fleet's (a new array)
                u = np.array(u_mode, np.float64)
            else:
                u[rows] = u_mode
        if self._velocity_rows:
            self._count_clamps(t_all, ex, invalid)
        if now_s is not None and issued_s is not None and self.command_timeout_s > 0:
            expired = _expired_kernel(np.asarray(issued_s, float), invalid, float(now_s),
                                      self.command_timeout_s + 1e-9)
            self._update_failsafe(expired, ex)
        if _any_failsafe(self.failsafe_code):
            self._failsafe_controls(u, ex, ~invalid)
        return u

    def _velocity_controls(self, t_all: Array, ex: Array, valid: NDArray[np.bool_], headings: Array,
                           now_s: float | None, issued_s: Array | None) -> Array:
        """``controls`` of a fleet that flies ``velocity`` only, on float arrays of the exact shapes: the
        general path's steps in one kernel (``_velocity_fleet_kernel``), then the failsafes if any."""
        c = self._controllers["velocity"]
        u = np.empty((self.num_vehicles, 5))
        expire = now_s is not None and issued_s is not None and self.command_timeout_s > 0
        flags = _velocity_fleet_kernel(
            t_all, ex, valid, headings, self._flight_z if issued_s is None else issued_s,
            0.0 if now_s is None else float(now_s), expire, self.command_timeout_s + 1e-9, *c.kernel_state(),
            c.dt_s, u, self.rows["velocity"], self._clamped_sp, self.setpoints_clamped, self._expired,
            self.failsafe_code)
        if flags == 1:
            raise c.set_point_error(headings)
        if flags:
            if expire:
                self._update_failsafe(self._expired, ex)
            if _any_failsafe(self.failsafe_code):
                self._failsafe_controls(u, ex, valid)
        return u

    def low_level_inputs(self, targets: ArrayLike, valid: ArrayLike) -> tuple[Array | None, Array | None]:
        """``Airframes.step``'s ``rates_thrust`` and ``motors`` (N, 4) for this tick, after ``controls``:
        the targets of the valid vehicles in those modes that have one (finite) and fly no failsafe; NaN
        rows elsewhere (those fly their control row); None when no vehicle flies that input."""
        if not self._any_low_level:  # the common case, every tick: nothing to build
            return None, None
        t_all = np.asarray(targets, float)
        fly = np.asarray(valid, bool) & (self.failsafe_code == 0)
        out: list[Array | None] = []
        for mode in LOW_LEVEL_MODES:
            rows = self.rows[mode]
            if not rows.size:
                out.append(None)
                continue
            t = t_all[rows, : len(CONTROL_MODES[mode])]
            live = fly[rows] & np.isfinite(t).all(axis=1)
            if not live.any():
                out.append(None)
                continue
            a = np.full((self.num_vehicles, len(CONTROL_MODES[mode])), np.nan)
            a[rows[live]] = t[live]
            out.append(a)
        return out[0], out[1]

    def _count_clamps(self, t_all: Array, ex: Array, invalid: NDArray[np.bool_]) -> None:
        """Count the velocity set points the controllers clamp (as ``_body_velocity_error``: a body
        component of the target beyond ``MAX_SPEED_MPS``), once per set point."""
        for rows, width in self._velocity_rows:
            _count_clamps_kernel(t_all, ex, invalid, rows, width, MAX_SPEED_MPS, self._clamped_sp,
                                 self.setpoints_clamped)

    def _update_failsafe(self, expired: NDArray[np.bool_], ex: Array) -> None:
        """Enter the failsafe where a set point expired (holding the pose of now), leave it where a fresh
        one came (the mode's controller starts afresh); a landed vehicle stays landed."""
        code = self.failsafe_code
        if not _any_failsafe(code) and not any_true(expired):  # the common case, every tick: nothing changes
            return
        recovered = ~expired & (code != 0) & (code < _RETURN) & ~self.landed  # battery ones are latched
        if recovered.any():
            code[recovered] = 0
            for mode, rows, _ in self._active:
                if mode in CONTROLLED_MODES:
                    local = np.flatnonzero(recovered[rows])
                    if local.size:
                        self._controllers[mode].reset(local)
        onset = expired & (code == 0)
        if onset.any():
            idx = np.flatnonzero(onset)
            code[idx] = FAILSAFES.index(self.failsafe_mode) + 1
            self.failsafe_onsets[idx] += 1
            self._hold[idx] = hold_pose(ex[idx])
            self._hold_pid.reset(idx)
            self._land_pid.reset(idx)

    @property
    def home_pending(self) -> bool:
        """Whether a valid vehicle has no launch point yet (``record_home``; only with a battery return)."""
        return self._home_pending

    def record_home(self, ex: ArrayLike, valid: ArrayLike) -> None:
        """Each valid vehicle's launch point: its north/east in ``ex`` (N, 20) the first time it is finite.
        ``controls`` calls it; a front end that calls ``controls`` only in a failsafe calls it at the
        episode's first tick."""
        ex = np.asarray(ex, float)
        valid = np.asarray(valid, bool)
        missing = np.isnan(self._home_ne[:, 0]) & valid
        known = missing & np.isfinite(ex[:, NORTH]) & np.isfinite(ex[:, EAST])
        self._home_ne[known] = ex[known, NORTH_EAST]
        self._home_pending = bool((missing & ~known).any())

    def update_battery(self, percentage: ArrayLike, drain_per_s: ArrayLike, ex: ArrayLike,
                       valid: ArrayLike) -> None:
        """The low-battery failsafe's onsets (module docstring), once per tick before ``controls``.

        ``percentage`` (N,): charge left 0..1; ``drain_per_s`` (N,): charge used per second now [1/s]
        (``FleetEnergy``); ``ex`` (N, 20): estimated states; ``valid`` (N,). Does nothing without a battery
        failsafe, or while every charge is above ``return_below`` and ``land_below``.
        """
        b = self.battery
        if b is None:
            return
        pct = np.asarray(percentage, float)
        live = np.asarray(valid, bool) & (self.failsafe_code < _RETURN) & ~self.landed
        with np.errstate(invalid="ignore"):
            low = live & (pct <= max(b.return_below, b.land_below))
        if not low.any():
            return
        ex = np.asarray(ex, float)
        land = low & (pct <= b.land_below)
        if b.low_battery_failsafe == "return" and self._bases.size:
            idx = np.flatnonzero(low & ~land)
            if idx.size:
                pos = ex[idx][:, POSITION_NED]
                d = np.hypot(pos[:, None, 0] - self._bases[None, :, 0],
                             pos[:, None, 1] - self._bases[None, :, 1])
                nearest = np.argmin(d, axis=1)
                target = self._bases[nearest, 0:2].copy()
                home = self._home_ne[idx]
                with np.errstate(invalid="ignore"):
                    on_base = (np.hypot(home[:, 0] - target[:, 0], home[:, 1] - target[:, 1])
                               <= self._base_radii[nearest])
                target[on_base] = home[on_base]
                t_return = (np.hypot(pos[:, 0] - target[:, 0], pos[:, 1] - target[:, 1]) / b.return_speed_mps
                            + np.maximum(ex[idx, HEIGHT], 0.0) / self.failsafe_land_rate_m_s)
                need = b.return_margin * np.asarray(drain_per_s, float)[idx] * t_return
                go = np.isfinite(need) & (pct[idx] - need <= b.reserve)
                self._onset(idx[go], _RETURN, ex)
                self._target_base[idx[go]] = nearest[go]
                self._return_ne[idx[go]] = target[go]
                self._return_home[idx[go]] = on_base[go]
        elif not self._bases.size and b.low_battery_failsafe == "return":
            land |= low & (pct <= b.reserve)  # nowhere to return to: land at the reserve
        self._onset(np.flatnonzero(land), _BATTERY_LAND, ex)

    def _onset(self, idx: NDArray[np.int_], code: int, ex: Array) -> None:
        """Vehicles ``idx`` enter failsafe ``code`` now (holding the heading they have)."""
        if not idx.size:
            return
        self.failsafe_code[idx] = code
        self.failsafe_onsets[idx] += 1
        self._hold[idx] = hold_pose(ex[idx])
        self._land_pid.reset(idx)
        self._return_pid.reset(idx)
        self._return_climbed[idx] = False

    def _failsafe_controls(self, u: Array, ex: Array, valid: NDArray[np.bool_]) -> None:
        """Overwrite the rows of the vehicles in their failsafe (in place)."""
        code = self.failsafe_code
        active = (code != 0) & valid
        if self.battery is not None and (code == _RETURN).any():
            self._return_controls(u, ex, active & (code == _RETURN))
        hold = active & (code == _HOLD)
        if hold.any():
            known = np.all(np.isfinite(self._hold), axis=1)  # no estimate at the onset: level instead
            fly = hold & known
            if fly.any():
                wp = np.where(fly[:, None], self._hold, 0.0)
                u_hold = self._hold_pid.compute_from_estimated_state(ex, wp[:, 0:3], wp[:, 3])
                u[fly] = u_hold[fly]
            u[hold & ~known] = HOVER_CONTROL
        land = active & ((code == _LAND) | (code == _BATTERY_LAND))
        if land.any():
            with np.errstate(invalid="ignore"):
                self.landed |= land & (ex[:, HEIGHT] <= LAND_TOUCHDOWN_HEIGHT_M)
            fly = land & ~self.landed
            if fly.any():
                v = np.zeros((self.num_vehicles, 3))
                v[:, 2] = self.failsafe_land_rate_m_s
                psi = np.where(np.isfinite(self._hold[:, 3]), self._hold[:, 3], 0.0)
                u_land = self._land_pid.compute_from_estimated_state(ex, v, psi)
                u[fly] = u_land[fly]
            u[land & self.landed] = DISARMED_CONTROL
        u[active & (code == _LEVEL)] = HOVER_CONTROL

    def _return_controls(self, u: Array, ex: Array, fly: NDArray[np.bool_]) -> None:
        """``return``: home (the launch point or the base's centre) at the return height; there (within
        ``RETURN_HOME_ARRIVAL_M`` of the launch point, or the base's radius), ``battery_land``."""
        home = self._return_ne
        arrival = np.where(self._return_home, RETURN_HOME_ARRIVAL_M,
                           self._base_radii[np.maximum(self._target_base, 0)])
        with np.errstate(invalid="ignore"):
            there = fly & (np.hypot(ex[:, NORTH] - home[:, 0], ex[:, EAST] - home[:, 1]) <= arrival)
        if there.any():  # over the base: land on it (this tick already)
            idx = np.flatnonzero(there)
            self.failsafe_code[idx] = _BATTERY_LAND
            self._land_pid.reset(idx)
            fly = fly & ~there
        if fly.any():
            # climb first, where the return started, to the higher of that height and the flight height
            # (flying home on the diagonal from a low confirmation hover met the obstacles), then home
            return_z = np.minimum(self._hold[:, 2], self.flight_z_ned_m)
            with np.errstate(invalid="ignore"):
                self._return_climbed |= fly & (-ex[:, HEIGHT] <= return_z + RETURN_CLIMB_TOLERANCE_M)
            target = np.zeros((self.num_vehicles, 3))
            target[:, 0:2] = np.where(self._return_climbed[:, None], home, self._hold[:, 0:2])
            target[:, 2] = return_z
            psi = np.where(np.isfinite(self._hold[:, 3]), self._hold[:, 3], 0.0)
            u_ret = self._return_pid.compute_from_estimated_state(ex, target, psi)
            u[fly] = u_ret[fly]

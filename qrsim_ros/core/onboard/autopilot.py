"""The onboard autopilot of a fleet: PX4's flight modes over the velocity loops (docs/MAVLINK.md).

Per vehicle it keeps what a PX4 commander and navigator keep -- armed or not, the flight mode
(``modes.FlightMode``), the landed state, home, the mission and its current item, the latest offboard set
point -- and each tick turns them into a NED velocity set point [m/s], a heading [rad] and the time the
set point was issued [s], which ``FleetControl`` flies in its ``velocity`` mode (so its set-point expiry
and failsafes stay the guard below the autopilot). It reads only the estimated state eX (N, 20), as a
real autopilot reads only its sensors.

Position-keeping modes (Hold, the transit of RTL, mission items, offboard positions) fly a proportional
position loop (gains MPC_XY_P, MPC_Z_P) whose output is limited in speed (MPC_XY_VEL_MAX, or
MPC_XY_CRUISE for missions and RTL; MPC_Z_VEL_MAX_UP/DN) and whose change per tick is limited by
MPC_ACC_HOR: a set point that ramps, not PX4's jerk-limited trajectories. Takeoff climbs at
MPC_TKO_SPEED to MIS_TAKEOFF_ALT above home and then holds; Land descends at MPC_LAND_SPEED and disarms
COM_DISARM_LAND after touchdown; RTL climbs to RTL_RETURN_ALT above home if lower, flies home and lands.
Offboard needs set points streaming before it is entered; without one for COM_OF_LOSS_T the vehicle
switches to the mode COM_OBL_RC_ACT names (a failsafe onset). Arming runs the preflight checks (a valid
vehicle with a finite position estimate, healthy sensors, battery above its failsafe) and refuses with
a reason; a flying vehicle is disarmed only by force.

Commands return a ``Result`` (accepted, or refused with a reason for STATUSTEXT); what happens during a
tick (mission items reached, mode changes by the autopilot itself, refusals) is queued as ``Event``s for
the front end to send (``drain_events``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.onboard.mission import ItemKind, MissionItem
from qrsim_ros.core.onboard.modes import FlightMode, LandedState
from qrsim_ros.core.onboard.parameters import OFFBOARD_LOSS_ACTIONS, ParameterTable
from qrsim_ros.core.vehicles.estimated_state import HEADING, HEIGHT, POSITION_NED, velocity_ned
from qrsim_ros.core.vehicles.fleet_control import LAND_TOUCHDOWN_HEIGHT_M
from qrsim_ros.core.vehicles.pelican import CONTROL_LIMITS, STEADY_TILT_GAIN, STEADY_YAW_RATE_GAIN

Array = NDArray[np.float64]

#: A vehicle is on the ground when its estimated height is at most this [m] and it is not climbing fast.
ON_GROUND_HEIGHT_M = LAND_TOUCHDOWN_HEIGHT_M
ON_GROUND_MAX_CLIMB_MPS = 0.5
#: Takeoff is done within this of its altitude [m] (then Hold).
TAKEOFF_DONE_M = 0.3
#: RTL lands once home is within this horizontal distance [m].
RTL_ARRIVAL_M = 1.0
#: PX4's magic number for a forced disarm (MAV_CMD_COMPONENT_ARM_DISARM param2).
FORCE_DISARM_MAGIC = 21196
#: STATUSTEXT severities (MAV_SEVERITY's values, which are syslog's).
SEVERITY_CRITICAL, SEVERITY_WARNING, SEVERITY_INFO = 2, 4, 6


@dataclass(frozen=True)
class Result:
    """The answer to a command: accepted, or refused with ``reason`` (a STATUSTEXT line)."""

    accepted: bool
    reason: str = ""


ACCEPTED = Result(True)
_UNSET3 = (math.nan, math.nan, math.nan)


@dataclass(frozen=True)
class Event:
    """Something a tick did that a client is told: ``kind`` 'text' (``severity``, ``text``), 'reached'
    (mission item ``seq``) or 'mode' (the autopilot changed the mode itself: ``text`` says why)."""

    vehicle: int
    kind: str
    text: str = ""
    severity: int = SEVERITY_INFO
    seq: int = -1


@dataclass
class Setpoints:
    """What ``OnboardAutopilot.step`` gives ``FleetControl``: velocity set points (N, 3) NED [m/s],
    headings (N,) [rad], issue times (N,) [s], which vehicles' motors run (N,) (armed), and the attitude
    controls (N, 4) of vehicles flown by offboard attitude set points, in the Pelican's control columns
    (pitch [rad], roll [rad], throttle [0, 1], yaw rate [rad/s]); NaN rows: flown by their velocity."""

    velocity_ned_mps: Array
    heading_rad: Array
    issued_s: Array
    armed: NDArray[np.bool_]
    attitude_control: Array


class OnboardAutopilot:
    """The onboard autopilot of ``num_vehicles`` vehicles (module docstring), stepped every ``dt_s`` [s].

    ``start_armed_in_air``: vehicles that start flying (a QRSim scenario's initial state) start armed in
    Hold where they are; others start disarmed on the ground. Home is a vehicle's first position
    estimate, and again where it arms.
    """

    def __init__(self, num_vehicles: int, dt_s: float, parameters: ParameterTable | None = None,
                 start_armed_in_air: bool = False) -> None:
        n = self.num_vehicles = int(num_vehicles)
        if not (math.isfinite(dt_s) and dt_s > 0):
            raise ValueError(f"dt_s={dt_s!r} must be > 0")
        self.dt_s = float(dt_s)
        self.params = parameters if parameters is not None else ParameterTable(n)
        self.start_armed_in_air = bool(start_armed_in_air)
        self.missions: list[tuple[MissionItem, ...]] = [() for _ in range(n)]
        self.failsafe_onsets = np.zeros(n, np.int64)
        self.reset()

    def reset(self, in_air: ArrayLike | None = None) -> None:
        """A new episode: disarmed (or armed in the air, see the class), Hold, no home, no set point;
        the missions and parameters stay (they are the vehicle's, not the episode's). ``in_air`` (N,):
        which vehicles start flying (armed, holding where they are) instead of ``start_armed_in_air``."""
        n = self.num_vehicles
        flying = np.full(n, self.start_armed_in_air) if in_air is None else (
            np.asarray(in_air, bool).reshape(n).copy())
        self.armed = flying
        self.mode = np.full(n, int(FlightMode.HOLD), np.int8)
        self.landed_state = np.where(flying, int(LandedState.IN_AIR),
                                     int(LandedState.ON_GROUND)).astype(np.int8)
        self.home_ned = np.full((n, 3), np.nan)
        self.home_heading = np.full(n, np.nan)
        self._target_ned = np.full((n, 3), np.nan)  # Hold/Land/Takeoff/RTL's position target
        self._heading = np.full(n, np.nan)  # the heading flown (NaN: take the estimate's at the next tick)
        self._rtl_landing = np.zeros(n, bool)
        self.mission_current = np.zeros(n, np.int64)
        self._mission_takeoff = np.zeros(n, bool)  # a mission started on the ground climbs first
        self._hold_until = np.full(n, np.nan)  # the current item's hold ends then [s]
        self._mission_speed = np.full(n, np.nan)  # a CHANGE_SPEED item's speed (NaN: MPC_XY_CRUISE) [m/s]
        self._sp_position = np.full((n, 3), np.nan)
        self._sp_velocity = np.full((n, 3), np.nan)
        self._sp_accel = np.full((n, 3), np.nan)
        self._sp_yaw = np.full(n, np.nan)
        self._sp_yaw_rate = np.full(n, np.nan)
        self._sp_time = np.full(n, -np.inf)
        #: offboard attitude set points: roll, pitch, yaw [rad], yaw rate [rad/s], thrust [0, 1]
        self._sp_attitude = np.full((n, 5), np.nan)
        self._velocity = np.zeros((n, 3))  # the last velocity set point (the acceleration limit's base)
        self._landed_since = np.full(n, np.nan)
        self._now_s = 0.0
        self._ex: Array | None = None
        self._events: list[Event] = []

    # --- what the autopilot knows of its vehicles ----------------------------------------------------

    def observe(self, now_s: float, ex: ArrayLike, valid: ArrayLike) -> None:
        """The tick's time [s] and estimated states eX (N, 20) (rows of invalid vehicles NaN): commands
        between two ticks are checked against them."""
        self._now_s = float(now_s)
        self._ex = np.asarray(ex, float)
        self._valid = np.asarray(valid, bool)
        pos_ok = np.isfinite(self._ex[:, POSITION_NED]).all(axis=1) & self._valid
        # home: the first position estimate (as PX4 sets it at its first fix), again where it arms
        first = pos_ok & np.isnan(self.home_ned[:, 0])
        if first.any():
            self.home_ned[first] = self._ex[first, POSITION_NED]
            self.home_heading[first] = self._ex[first, HEADING]
            hold = first & (self.mode == FlightMode.HOLD) & np.isnan(self._target_ned[:, 0])
            self._target_ned[hold] = self._ex[hold, POSITION_NED]

    def on_ground(self) -> NDArray[np.bool_]:
        """(N,) vehicles whose estimate says they rest on the ground (``ON_GROUND_HEIGHT_M``)."""
        ex = self._require_ex()
        climb = -velocity_ned(ex)[:, 2]
        with np.errstate(invalid="ignore"):
            return (ex[:, HEIGHT] <= ON_GROUND_HEIGHT_M) & ~(climb > ON_GROUND_MAX_CLIMB_MPS)

    def _require_ex(self) -> Array:
        if self._ex is None:
            raise RuntimeError("OnboardAutopilot: observe() the estimated state before commanding")
        return self._ex

    def _position_ok(self, i: int) -> bool:
        ex = self._require_ex()
        return bool(self._valid[i] and np.isfinite(ex[i, POSITION_NED]).all() and np.isfinite(ex[i, HEIGHT]))

    # --- commands ---------------------------------------------------------------------------------

    def arm(self, i: int, *, sensors_healthy: bool = True, battery_ok: bool = True,
            failed_checks: Sequence[str] = ()) -> Result:
        """Arm vehicle ``i`` after the preflight checks (its position estimate, ``sensors_healthy``,
        ``battery_ok`` and any ``failed_checks`` the front end found, e.g. a failed self-test); home is
        set where it arms. Arming an armed vehicle is accepted and changes nothing."""
        if self.armed[i]:
            return ACCEPTED
        mode = FlightMode(self.mode[i])
        reasons = list(failed_checks)
        if not self._valid[i]:
            reasons.append("vehicle not valid")
        elif not self._position_ok(i):
            reasons.append("no position estimate (GPS)")
        if not sensors_healthy:
            reasons.append("sensors unhealthy")
        if not battery_ok:
            reasons.append("battery low")
        if mode in (FlightMode.LAND, FlightMode.RTL):
            reasons.append(f"not armable in {mode.name}")
        if mode == FlightMode.OFFBOARD and not self._stream_fresh(i):
            reasons.append("no offboard set points")
        if reasons:
            return self._refused(i, "Arming denied: " + "; ".join(reasons))
        ex = self._require_ex()
        self.armed[i] = True
        self.home_ned[i] = ex[i, POSITION_NED]
        self.home_heading[i] = ex[i, HEADING]
        self._target_ned[i] = ex[i, POSITION_NED]
        self._heading[i] = ex[i, HEADING]
        self._velocity[i] = 0.0
        self._landed_since[i] = np.nan
        if mode == FlightMode.MISSION:
            self._mission_takeoff[i] = bool(self.on_ground()[i])
        return ACCEPTED

    def disarm(self, i: int, *, force: bool = False) -> Result:
        """Disarm vehicle ``i``: on the ground, or anywhere with ``force`` (it then falls)."""
        if not self.armed[i]:
            return ACCEPTED
        if not force and not self.on_ground()[i]:
            return self._refused(i, "Disarming denied: not landed")
        self._disarm(i)
        return ACCEPTED

    def set_mode(self, i: int, mode: FlightMode) -> Result:
        """Switch vehicle ``i`` to ``mode`` if its requirements hold (a position estimate; Offboard: set
        points streaming; Mission: a mission; Takeoff: armed; RTL: a home)."""
        mode = FlightMode(mode)
        if not self._position_ok(i):
            return self._refused(i, f"{mode.name} denied: no position estimate")
        if mode == FlightMode.OFFBOARD and not self._stream_fresh(i):
            return self._refused(i, "OFFBOARD denied: no offboard set points streaming")
        if mode == FlightMode.MISSION and not self.missions[i]:
            return self._refused(i, "MISSION denied: no mission uploaded")
        if mode == FlightMode.TAKEOFF and not self.armed[i]:
            return self._refused(i, "TAKEOFF denied: disarmed")
        if mode == FlightMode.RTL and not np.isfinite(self.home_ned[i]).all():
            return self._refused(i, "RTL denied: no home position")
        if mode in (FlightMode.LAND, FlightMode.RTL) and not self.armed[i]:
            return self._refused(i, f"{mode.name} denied: disarmed")
        self._enter(i, mode)
        return ACCEPTED

    def takeoff(self, i: int, altitude_above_home_m: float = math.nan) -> Result:
        """Take off to ``altitude_above_home_m`` [m] (NaN: MIS_TAKEOFF_ALT)."""
        if not (math.isnan(altitude_above_home_m) or 0.0 < altitude_above_home_m <= 1000.0):
            return self._refused(i, f"TAKEOFF denied: altitude {altitude_above_home_m:g} m out of range")
        result = self.set_mode(i, FlightMode.TAKEOFF)
        if result.accepted:
            alt = (altitude_above_home_m if math.isfinite(altitude_above_home_m)
                   else self.params.value("MIS_TAKEOFF_ALT", i))
            self._target_ned[i, 2] = self.home_ned[i, 2] - alt
        return result

    def set_mission(self, i: int, items: Sequence[MissionItem]) -> Result:
        """Replace vehicle ``i``'s mission (an empty one clears it); refused while it flies one."""
        if self.mode[i] == FlightMode.MISSION and self.armed[i] and not self.on_ground()[i]:
            return self._refused(i, "Mission upload denied: flying a mission")
        self.missions[i] = tuple(items)
        self.mission_current[i] = 0
        return ACCEPTED

    def start_mission(self, i: int, first_item: int = 0) -> Result:
        """MISSION_START: fly the mission from item ``first_item``."""
        if not 0 <= first_item < max(1, len(self.missions[i])):
            return self._refused(i, f"MISSION denied: no item {first_item}")
        result = self.set_mode(i, FlightMode.MISSION)
        if result.accepted:
            self.mission_current[i] = first_item
        return result

    def set_current_item(self, i: int, seq: int) -> Result:
        """MISSION_SET_CURRENT: continue the mission at item ``seq``."""
        if not 0 <= seq < len(self.missions[i]):
            return self._refused(i, f"Mission: no item {seq}")
        self.mission_current[i] = seq
        self._hold_until[i] = np.nan
        return ACCEPTED

    def offboard_setpoint(self, i: int, *, position_ned_m: ArrayLike = _UNSET3,
                          velocity_ned_mps: ArrayLike = _UNSET3, accel_ned_mps2: ArrayLike = _UNSET3,
                          yaw_rad: float = math.nan, yaw_rate_rads: float = math.nan) -> Result:
        """The latest offboard set point of vehicle ``i`` at the current tick (NaN: ignored, as a masked
        field of SET_POSITION_TARGET_LOCAL_NED). A position component flies the position loop (with the
        velocity as feed-forward), a velocity alone is flown as it is, an acceleration alone is
        integrated into the velocity set point. Infinite values are refused (no event: a stream of them
        is counted by the front end, not announced at its rate)."""
        values = [np.asarray(v, float).reshape(3) for v in (position_ned_m, velocity_ned_mps, accel_ned_mps2)]
        if any(np.isinf(v).any() for v in values) or math.isinf(yaw_rad) or math.isinf(yaw_rate_rads):
            return Result(False, "Offboard set point refused: infinite value")
        self._sp_position[i], self._sp_velocity[i], self._sp_accel[i] = values
        self._sp_yaw[i], self._sp_yaw_rate[i] = yaw_rad, yaw_rate_rads
        self._sp_attitude[i] = np.nan
        self._sp_time[i] = self._now_s
        return ACCEPTED

    def offboard_attitude(self, i: int, *, roll_rad: float, pitch_rad: float, thrust: float,
                          yaw_rad: float = math.nan, yaw_rate_rads: float = math.nan) -> Result:
        """The latest offboard attitude set point of vehicle ``i`` (SET_ATTITUDE_TARGET): roll and pitch
        [rad] and the collective thrust [0, 1] (the Pelican's throttle: it hovers at MPC_THR_HOVER), flown
        by the airframe's attitude loop; the heading by ``yaw_rate_rads``, else towards ``yaw_rad`` at
        MC_YAW_P, else held. It replaces any position or velocity set point (the latest kind wins, as in
        PX4). The airframe settles to a fixed fraction of its attitude commands
        (``pelican.STEADY_TILT_GAIN``, ``STEADY_YAW_RATE_GAIN``), so the commands are the set points
        divided by it, within the airframe's command limits (tilts beyond 0.67 rad are flown at it)."""
        if not all(math.isfinite(v) for v in (roll_rad, pitch_rad, thrust)) or (
                math.isinf(yaw_rad) or math.isinf(yaw_rate_rads)):
            return Result(False, "Offboard attitude refused: non-finite value")
        tilt_lo, tilt_hi = CONTROL_LIMITS[0]
        self._sp_attitude[i] = (np.clip(roll_rad / STEADY_TILT_GAIN, tilt_lo, tilt_hi),
                                np.clip(pitch_rad / STEADY_TILT_GAIN, tilt_lo, tilt_hi),
                                yaw_rad, yaw_rate_rads, np.clip(thrust, *CONTROL_LIMITS[2]))
        self._sp_position[i] = self._sp_velocity[i] = self._sp_accel[i] = np.nan
        self._sp_yaw[i] = self._sp_yaw_rate[i] = math.nan
        self._sp_time[i] = self._now_s
        return ACCEPTED

    def offboard_thrust(self, i: int) -> float:
        """Vehicle ``i``'s latest offboard attitude thrust [0, 1] (MPC_THR_HOVER before the first)."""
        thrust = self._sp_attitude[i, 4]
        return float(thrust) if math.isfinite(thrust) else self.params.value("MPC_THR_HOVER", i)

    def drain_events(self) -> list[Event]:
        """The events since the last call (oldest first)."""
        events, self._events = self._events, []
        return events

    # --- the tick ---------------------------------------------------------------------------------

    def step(self, now_s: float, ex: ArrayLike, valid: ArrayLike) -> Setpoints:
        """The set points of the tick at ``now_s`` [s] from estimated states ``ex`` (N, 20)."""
        self.observe(now_s, ex, valid)
        ex = self._require_ex()
        n = self.num_vehicles
        pos = ex[:, POSITION_NED]
        first = self.armed & np.isnan(self._heading)
        self._heading[first] = ex[first, HEADING]
        self._check_offboard_loss()
        desired = np.zeros((n, 3))
        attitude = np.full((n, 4), np.nan)
        max_xy = self.params.get("MPC_XY_VEL_MAX").copy()
        cruise = np.minimum(self.params.get("MPC_XY_CRUISE"), max_xy)
        for i in np.flatnonzero(self.armed & self._valid):
            mode = FlightMode(self.mode[i])
            if mode == FlightMode.OFFBOARD and np.isfinite(self._sp_attitude[i, 0]):
                attitude[i] = self._attitude_control(i, ex[i])
                desired[i] = np.nan_to_num(velocity_ned(ex[i : i + 1])[0])  # where a velocity mode starts
            elif mode == FlightMode.OFFBOARD:
                desired[i] = self._offboard_velocity(i, pos[i])
            elif mode == FlightMode.MISSION:
                desired[i] = self._mission_velocity(i, pos[i])
                speed = self._mission_speed[i]
                max_xy[i] = min(speed, max_xy[i]) if math.isfinite(speed) else cruise[i]
            elif mode == FlightMode.RTL:
                desired[i] = self._rtl_velocity(i, pos[i])
                max_xy[i] = cruise[i]
            elif mode == FlightMode.TAKEOFF:
                desired[i] = self._takeoff_velocity(i, pos[i])
            elif mode == FlightMode.LAND:
                desired[i] = self._land_velocity(i, pos[i])
            else:
                desired[i] = self._position_velocity(i, self._target_ned[i], pos[i])
        velocity = self._limited(desired, max_xy)
        velocity[~self.armed] = 0.0
        self._velocity = velocity
        self._update_landed(now_s)
        heading = np.where(np.isfinite(self._heading), self._heading, ex[:, HEADING])
        return Setpoints(velocity.copy(), heading, np.full(n, float(now_s)), self.armed.copy(), attitude)

    def _attitude_control(self, i: int, ex_row: Array) -> Array:
        """Vehicle ``i``'s offboard attitude set point as Pelican controls (pitch, roll, throttle, yaw
        rate); the heading held afterwards is the estimate's."""
        roll, pitch, yaw, yaw_rate, thrust = self._sp_attitude[i]
        heading = ex_row[HEADING]
        self._heading[i] = heading
        if not math.isfinite(yaw_rate):
            yaw_rate = self.params.value("MC_YAW_P", i) * _wrap(yaw - heading) if math.isfinite(yaw) else 0.0
        lo, hi = CONTROL_LIMITS[3]
        return np.array([pitch, roll, thrust, min(max(yaw_rate / STEADY_YAW_RATE_GAIN, lo), hi)])

    def _position_velocity(self, i: int, target: Array, pos: Array) -> Array:
        """The position loop's velocity to ``target`` (NaN components: hold that axis still)."""
        err = np.where(np.isfinite(target), target - pos, 0.0)
        return np.array([err[0] * self.params.value("MPC_XY_P", i), err[1] * self.params.value("MPC_XY_P", i),
                         err[2] * self.params.value("MPC_Z_P", i)])

    def _limited(self, desired: Array, max_xy: Array) -> Array:
        """``desired`` within the speed limits, its change per tick within MPC_ACC_HOR."""
        v = desired.copy()
        xy = np.hypot(v[:, 0], v[:, 1])
        scale = np.where(xy > max_xy, max_xy / np.maximum(xy, 1e-12), 1.0)
        v[:, 0:2] *= scale[:, None]
        v[:, 2] = np.clip(v[:, 2], -self.params.get("MPC_Z_VEL_MAX_UP"), self.params.get("MPC_Z_VEL_MAX_DN"))
        step = self.params.get("MPC_ACC_HOR") * self.dt_s
        dv = v - self._velocity
        norm = np.linalg.norm(dv, axis=1)
        ramp = np.where(norm > step, step / np.maximum(norm, 1e-12), 1.0)
        return self._velocity + dv * ramp[:, None]

    def _takeoff_velocity(self, i: int, pos: Array) -> Array:
        target = self._target_ned[i]
        v = self._position_velocity(i, np.array([target[0], target[1], np.nan]), pos)
        v[2] = -self.params.value("MPC_TKO_SPEED", i)
        if pos[2] <= target[2] + TAKEOFF_DONE_M:
            self._enter(i, FlightMode.HOLD, np.array([pos[0], pos[1], target[2]]))
            self._event(i, "mode", "Takeoff done: holding")
        return v

    def _land_velocity(self, i: int, pos: Array) -> Array:
        target = self._target_ned[i]
        v = self._position_velocity(i, np.array([target[0], target[1], np.nan]), pos)
        v[2] = self.params.value("MPC_LAND_SPEED", i)
        return v

    def _rtl_velocity(self, i: int, pos: Array) -> Array:
        home = self.home_ned[i]
        if self._rtl_landing[i]:
            return self._land_velocity(i, pos)
        return_down = min(self._target_ned[i, 2], home[2] - self.params.value("RTL_RETURN_ALT", i))
        if pos[2] > return_down + TAKEOFF_DONE_M:  # climb in place first
            return self._position_velocity(i, np.array([self._target_ned[i, 0], self._target_ned[i, 1],
                                                        return_down]), pos)
        if np.hypot(*(home[0:2] - pos[0:2])) <= RTL_ARRIVAL_M:
            self._rtl_landing[i] = True
            self._target_ned[i, 0:2] = home[0:2]
            return self._land_velocity(i, pos)
        return self._position_velocity(i, np.array([home[0], home[1], return_down]), pos)

    def _mission_velocity(self, i: int, pos: Array) -> Array:
        items = self.missions[i]
        k = int(self.mission_current[i])
        if k >= len(items):  # done: hold the last position
            return self._position_velocity(i, self._target_ned[i], pos)
        item = items[k]
        if item.kind == ItemKind.CHANGE_SPEED:  # done at once: the next item flies at that speed
            self._mission_speed[i] = item.speed_mps
            self._advance(i, k)
            return self._mission_velocity(i, pos)
        if self._mission_takeoff[i]:  # started on the ground: a vertical climb to the takeoff altitude
            climb_to = self.home_ned[i, 2] - self.params.value("MIS_TAKEOFF_ALT", i)
            if pos[2] > climb_to + TAKEOFF_DONE_M and item.kind != ItemKind.TAKEOFF:
                v = self._position_velocity(i, np.array([self._target_ned[i, 0], self._target_ned[i, 1],
                                                         np.nan]), pos)
                v[2] = -self.params.value("MPC_TKO_SPEED", i)
                return v
            self._mission_takeoff[i] = False
        if item.kind == ItemKind.RTL:
            self._advance(i, k)
            self._enter(i, FlightMode.RTL)
            return self._rtl_velocity(i, pos)
        target = np.array(item.position_ned_m, float)
        if item.kind in (ItemKind.TAKEOFF, ItemKind.LAND):
            target[0:2] = np.where(np.isfinite(target[0:2]), target[0:2], self._target_ned[i, 0:2])
        if item.kind == ItemKind.TAKEOFF:
            down = target[2] if math.isfinite(target[2]) else (
                self.home_ned[i, 2] - self.params.value("MIS_TAKEOFF_ALT", i))
            v = self._position_velocity(i, np.array([target[0], target[1], np.nan]), pos)
            v[2] = -self.params.value("MPC_TKO_SPEED", i)
            if pos[2] <= down + TAKEOFF_DONE_M:
                self._target_ned[i] = [pos[0], pos[1], down]
                self._advance(i, k)
            return v
        if item.kind == ItemKind.LAND:
            self._target_ned[i] = target
            return self._land_velocity(i, pos)
        target[2] = target[2] if math.isfinite(target[2]) else pos[2]
        if math.isfinite(item.yaw_rad):
            self._heading[i] = item.yaw_rad
        radius = (item.acceptance_m if math.isfinite(item.acceptance_m)
                  else self.params.value("NAV_ACC_RAD", i))
        reached = (np.hypot(*(target[0:2] - pos[0:2])) <= radius
                   and abs(target[2] - pos[2]) <= self.params.value("NAV_MC_ALT_RAD", i))
        if reached and np.isnan(self._hold_until[i]):
            self._hold_until[i] = self._now_s + item.hold_s
        if reached or np.isfinite(self._hold_until[i]):
            self._target_ned[i] = target  # where the vehicle holds after the item (or while it waits)
            if self._now_s >= self._hold_until[i]:
                self._advance(i, k)
        return self._position_velocity(i, target, pos)

    def _advance(self, i: int, k: int) -> None:
        """Mission item ``k`` of vehicle ``i`` is done: report it and go on with the next."""
        self._event(i, "reached", f"Mission item {k} reached", seq=k)
        self.mission_current[i] = k + 1
        self._hold_until[i] = np.nan
        if k + 1 == len(self.missions[i]):
            self._event(i, "text", "Mission finished, holding")

    def _offboard_velocity(self, i: int, pos: Array) -> Array:
        p, v, a = self._sp_position[i], self._sp_velocity[i], self._sp_accel[i]
        if math.isfinite(self._sp_yaw[i]):
            self._heading[i] = self._sp_yaw[i]
        elif math.isfinite(self._sp_yaw_rate[i]):
            self._heading[i] = _wrap(self._heading[i] + self._sp_yaw_rate[i] * self.dt_s)
        feed = np.where(np.isfinite(v), v, 0.0)
        if np.isfinite(p).any():
            return self._position_velocity(i, p, pos) + feed
        if np.isfinite(v).any():
            return np.where(np.isfinite(v), v, self._velocity[i])
        if np.isfinite(a).any():
            return self._velocity[i] + np.where(np.isfinite(a), a, 0.0) * self.dt_s
        return np.zeros(3)

    def _stream_fresh(self, i: int) -> bool:
        return self._now_s - self._sp_time[i] <= self.params.value("COM_OF_LOSS_T", i)

    def _check_offboard_loss(self) -> None:
        for i in np.flatnonzero((self.mode == FlightMode.OFFBOARD) & self.armed):
            if self._stream_fresh(int(i)):
                continue
            action = OFFBOARD_LOSS_ACTIONS[int(self.params.value("COM_OBL_RC_ACT", int(i)))]
            self.failsafe_onsets[i] += 1
            self._enter(int(i), FlightMode[action])
            self._event(int(i), "mode", f"Failsafe: offboard set points lost, switching to {action}",
                        SEVERITY_CRITICAL)

    def _update_landed(self, now_s: float) -> None:
        """The landed state of every vehicle; disarm COM_DISARM_LAND after a landing touched down."""
        ground = self.on_ground()
        landing = (self.mode == FlightMode.LAND) | ((self.mode == FlightMode.RTL) & self._rtl_landing) | (
            (self.mode == FlightMode.MISSION) & self._landing_item())
        climbing = (self.mode == FlightMode.TAKEOFF) | self._mission_takeoff
        state = np.where(ground, int(LandedState.ON_GROUND),
                         np.where(landing, int(LandedState.LANDING),
                                  np.where(climbing, int(LandedState.TAKEOFF), int(LandedState.IN_AIR))))
        state = np.where(self.armed & ground & climbing, int(LandedState.TAKEOFF), state)
        self.landed_state[:] = state
        touched = self.armed & ground & landing
        self._landed_since[touched & np.isnan(self._landed_since)] = now_s
        self._landed_since[~touched] = np.nan
        delay = self.params.get("COM_DISARM_LAND")
        for i in np.flatnonzero(touched & (delay >= 0) & (now_s - self._landed_since >= delay - 1e-9)):
            self._disarm(int(i))
            self._event(int(i), "text", "Landing detected: disarmed")

    def _landing_item(self) -> NDArray[np.bool_]:
        out = np.zeros(self.num_vehicles, bool)
        for i, items in enumerate(self.missions):
            k = int(self.mission_current[i])
            out[i] = k < len(items) and items[k].kind == ItemKind.LAND
        return out

    # --- helpers ------------------------------------------------------------------------------------

    def _enter(self, i: int, mode: FlightMode, target: Array | None = None) -> None:
        """Vehicle ``i`` enters ``mode``, its position target where it is (or ``target``)."""
        ex = self._require_ex()
        self.mode[i] = int(mode)
        self._target_ned[i] = ex[i, POSITION_NED] if target is None else target
        self._rtl_landing[i] = False
        self._hold_until[i] = np.nan
        if mode == FlightMode.MISSION:
            self._mission_takeoff[i] = bool(self.armed[i] and self.on_ground()[i])
            self._mission_speed[i] = np.nan

    def _disarm(self, i: int) -> None:
        self.armed[i] = False
        self._velocity[i] = 0.0
        self._landed_since[i] = np.nan
        self._mission_takeoff[i] = False
        if self.mode[i] in (FlightMode.LAND, FlightMode.RTL, FlightMode.TAKEOFF):
            self._enter(i, FlightMode.HOLD)

    def _refused(self, i: int, reason: str) -> Result:
        self._event(i, "text", reason, SEVERITY_WARNING)
        return Result(False, reason)

    def _event(self, i: int, kind: str, text: str, severity: int = SEVERITY_INFO, seq: int = -1) -> None:
        self._events.append(Event(int(i), kind, text, severity, seq))


def _wrap(angle_rad: float) -> float:
    """``angle_rad`` in [-pi, pi)."""
    return (angle_rad + math.pi) % (2.0 * math.pi) - math.pi

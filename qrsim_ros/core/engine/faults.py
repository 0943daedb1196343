"""Faults acting on the models: the scenario's fault schedule and the effects of its active faults
(docs/FAULTS.md "Effects").

``FaultEffects`` owns the ``FaultSchedule`` (``core.faults``: *when* which fault is active) and applies
the active faults to the models it is given (``FaultModels``), each through that model's own small hook,
so a node that wraps one model (vehicle_dynamics the fleet, the gps node the receiver, ...) can apply the
same effect with the same code later:

=========================  ==============================================================================
kind                       effect (model: hook)
=========================  ==============================================================================
gps_outage                 GpsReceiver.set_fault_state(outage): no fix, outputs held at the last fix
gps_degradation            GpsReceiver.set_fault_state(sigma_factor, bias_ned_m, satellites_lost)
imu_bias_step              Accelerometer / Gyroscope.set_fault_state(bias): the bias added to the reading
gyro_stuck                 Gyroscope.set_fault_state(stuck): the reading repeats
altimeter_stuck / _offset  Altimeter.set_fault_state(stuck / offset_m)
camera_off                 the camera (and the registered scene cameras) step the vehicle as invalid:
                           no observation (``off_mask``)
lidar_off                  the registered lidar steps the vehicle as invalid: no cloud (``off_mask``)
rotor_loss / _degradation  PelicanFleet.set_thrust_fault(scale = sum(rotor factors) / 4) and a yaw-rate
                           disturbance on the controls (``adjust_controls``)
motor_stuck                PelicanFleet.set_thrust_fault: the stuck rotor gives a constant quarter-thrust
battery_cell_failure       battery.cell_failure(vehicle, volts) when a battery is given, else recorded
comm_loss                  the vehicle's new set points are dropped (``drop_commands``): it expires and
                           flies its failsafe
grasper_release            none here: the task gets it (``Task.on_fault_started``); the retrieve task's
                           grasper drops what it carries; a task without a grasper only logs it
self_test_failure          PelicanFleet.disarm(vehicle, "self_test_failure"): never flies
=========================  ==============================================================================

The Pelican approximation of rotor faults (the identified model has no rotors, only the closed loop of
airframe and attitude controller): a quadrotor that keeps roll and pitch with a weak or lost rotor gives
up yaw (the rotor pairs that balance the reaction torques no longer can), and it can lift what its rotors
can give. So the thrust the vehicle can make, both the throttle's steady thrust and the battery's cap, is
scaled by the mean rotor factor ``sum(f_i) / 4`` (a lost rotor: 3/4), and the unbalanced reaction torque
``tau_z ~ -sum(spin_i f_i)`` (spin +1: clockwise seen from above, the rotor model's convention) spins the
vehicle: the yaw-rate command gets ``-sum(spin_i f_i) / 2 * 4.5 rad/s`` added (one lost rotor: +-2.25
rad/s; the sum is normalised by the two rotors of each direction; the control's limits clip it). A stuck
motor makes a constant quarter of the thrust: of its command's steady thrust (``command`` given) or of the
vehicle's thrust when the fault starts (``command`` null); its yaw torque is not modelled.

The failsafe reaction to a rotor loss (``rotor_loss_failsafe="emergency_land"``, the scenario's
``vehicle.rotor_loss_failsafe``): when a ``rotor_loss`` starts on a valid vehicle not yet in emergency
landing, the fleet is told (``Airframes.set_emergency_land``) and flies ireland_2016's emergency landing
controller (``vehicles.emergency_land``) until it touches down, latched for the episode even if the
fault ends. On the Pelican approximation the opposite rotor then counts as off too (thrust 2/4, the
yaw imbalance of the remaining same-spin pair, commanded by the fleet's emergency row instead of
added here); on the rotor airframe the controller commands it to 0 and the motor spins down.

Order within a tick (the Simulator's): ``step`` right after time advances, before the environment, the
controls and the dynamics, so a fault that starts at tick k acts on tick k's controls, dynamics and
readings; its conditions read the state at the start of the tick (t_(k-1)). ``begin_episode`` runs the
start-up step (k = 0, ``FaultSchedule.step``) after the initial states are set and before the sensors
reset: a self-test failure disarms the vehicle before anything moves (invalid from t = 0).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.faults import (
    NO_CONDITIONS,
    NO_EVENTS,
    ActiveFault,
    Condition,
    FaultConditions,
    FaultEvents,
    FaultSchedule,
    FaultSpec,
    Probabilistic,
)
from qrsim_ros.core.faults.schedule import condition_field, rotor_thrust_factors
from qrsim_ros.core.sensors.ahars import Ahars
from qrsim_ros.core.sensors.gps import GpsReceiver
from qrsim_ros.core.sensors.registry import SENSORS
from qrsim_ros.core.vehicles.airframes import Airframes
from qrsim_ros.core.vehicles.emergency_land import (
    MAX_YAW_RATE_RADPS,
    ROTOR_LOSS_FAILSAFES,
    ROTOR_SPIN,
    opposite_rotor,
    pair_factors,
    unbalanced_yaw_rate_radps,
)
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED, STATE_THRUST, steady_thrust_si
from qrsim_ros.core.vehicles.rotor_mixer import normalised_to_speeds

#: ``_conditions``'s fast path: the only field the schedule reads is the airborne clock's.
_AIRBORNE_ONLY = frozenset({"airborne"})
#: The ``FaultConditions`` fields a pack bank gives as its own arrays (built once: ``_plan_conditions``).
_BATTERY_FIELDS = frozenset({"battery_v", "battery_fraction"})
#: Invalid reason of a vehicle whose start-up self test failed.
SELF_TEST_FAILURE = "self_test_failure"
#: The fault kinds that switch a sensor off (``off_mask``).
OFF_KINDS = ("camera_off", "lidar_off")
#: Up to this many rows, the yaw disturbance is added with Python floats (``adjust_controls``).
_FEW_ROWS = 16


class Battery(Protocol):
    """What the effects use of a battery bank (``vehicles.battery.BatteryBank``)."""

    voltage_v: Array
    percentage: Array

    def cell_failure(self, vehicle: int, volts_drop: float) -> None: ...


@dataclass(frozen=True)
class FaultModels:
    """The models a ``FaultEffects`` acts on; a front end gives the ones it owns (None: not here)."""

    fleet: Airframes | None = None
    gps: GpsReceiver | None = None
    ahars: Ahars | None = None
    battery: Battery | None = None


@dataclass(frozen=True)
class FaultLogEntry:
    """One start or end of a fault on one vehicle at tick ``tick`` (t = ``tick * dt`` [s]); ``note`` says
    what the effect did where that is not plain (a battery step, a no-op)."""

    tick: int
    event: str  # "started" or "ended"
    fault: ActiveFault
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Plain values for logs and bags."""
        return {"tick": self.tick, "event": self.event, "note": self.note, **self.fault.as_dict()}


class FaultEffects:
    """The fault schedule of a scenario and its effects on the given models (see the module docstring).

    ``specs``: the scenario's faults; ``streams``: the scenario's RandomStreams (the schedule's
    ``fault.<id>`` streams); ``ticks_per_task_step``: for ``at_step`` triggers. Faults off (no specs and
    nothing injected) cost one attribute test per hook: ``any_active`` is False and every hook returns
    its input.
    """

    def __init__(self, specs: Iterable[FaultSpec], num_vehicles: int, streams: RandomStreams | None,
                 models: FaultModels, *, ticks_per_task_step: int, dt_s: float = BASE_DT_S,
                 rotor_loss_failsafe: str = "none",
                 log_entries: int = int(LIMITS["fault_log_entries"].hi)) -> None:
        if rotor_loss_failsafe not in ROTOR_LOSS_FAILSAFES:
            raise ValueError(f"rotor_loss_failsafe={rotor_loss_failsafe!r} must be one of "
                             f"{', '.join(ROTOR_LOSS_FAILSAFES)}")
        #: whether a rotor loss starts the emergency landing controller (module doc)
        self.emergency_land = rotor_loss_failsafe == "emergency_land" and hasattr(models.fleet,
                                                                                  "set_emergency_land")
        self.num_vehicles = n = int(num_vehicles)
        self.dt_s = float(dt_s)
        self.models = models
        self.schedule = FaultSchedule(tuple(specs), n, streams, dt_s=dt_s,
                                      ticks_per_task_step=ticks_per_task_step)
        #: The episode's starts and ends, in order (``FaultLogEntry``): the latest ``log_entries`` of them
        #: (limits table ``fault_log_entries``; 0: none kept, a node that never reads them).
        self.log: deque[FaultLogEntry] = deque(maxlen=LIMITS["fault_log_entries"].check(log_entries,
                                                                                        "log_entries"))
        #: How many older entries the episode's log let go (its bound reached).
        self.log_folded = 0
        #: The last step's events.
        self.last_events: FaultEvents = NO_EVENTS
        #: Whether any fault is active (False: every hook is a no-op).
        self.any_active = False
        self._stuck_thrust_n: dict[tuple[str, int], float] = {}
        self._stuck_speed_radps: dict[tuple[str, int], float] = {}  # rotor airframe: the held motor speed
        self._condition_fields: frozenset[str] = frozenset()
        #: the conditions of every tick when they are the same object throughout (None: built per tick)
        self._fixed_conditions: FaultConditions | None = NO_CONDITIONS
        self._plan_conditions()
        self._lost_at_issue: NDArray[np.bool_] | None = None
        self._reset_state()

    @classmethod
    def follower(cls, num_vehicles: int, models: FaultModels) -> FaultEffects:
        """The effects of a front-end part that does not own the schedule (a sensor node): no faults of
        its own and no random stream; the owner's active faults are given each time they change
        (``apply_active``), and the hooks (``sensor_valid``, the models' fault states) act on them."""
        return cls((), num_vehicles, None, models, ticks_per_task_step=1)

    # --- the schedule ---------------------------------------------------------------------------------
    def begin_episode(self) -> FaultEvents:
        """A new episode: the schedule reset (injected faults dropped), every model's fault state
        cleared, the log emptied, then the start-up step (k = 0) and its effects."""
        self.schedule.reset()
        self.log.clear()
        self.log_folded = 0
        self._stuck_thrust_n = {}
        self._stuck_speed_radps = {}
        latched = False
        if self.emergency_land:  # a latched landing keeps its pair off after its fault ended: undo that too
            latched = bool((self.models.fleet.emergency_land_rotor >= 0).any())  # type: ignore[union-attr]
            self.models.fleet.clear_emergency_land()  # type: ignore[union-attr]
        self._plan_conditions()
        if self.any_active or latched:
            self.any_active = False
            self._reset_state()
            self._push()
        return self.step(0)

    def step(self, k: int) -> FaultEvents:
        """Tick ``k`` (t = k dt): the schedule's step on the models' conditions, then the effects of
        what started and ended (see the module docstring for where in the tick)."""
        # the links as they were at t_(k-1), when this tick's set points were issued (``drop_commands``)
        self._lost_at_issue = self._comm_lost if self.any_active and self._any_comm_lost else None
        conditions = self._fixed_conditions
        if conditions is None:
            conditions = self._conditions()
        events = self.schedule.step(k, k * self.dt_s, conditions)  # no faults: returns at once
        self.last_events = events
        if events is not NO_EVENTS:  # the schedule returns this one object for a tick without events
            self._apply(k, events)
        return events

    def inject(self, fault: FaultSpec | Mapping[str, Any], t_s: float) -> str:
        """``FaultSchedule.inject`` (starts at the next step); returns the fault's id."""
        fault_id = self.schedule.inject(fault, t_s)
        self._plan_conditions()
        return fault_id

    def clear(self, fault_id: str | None = None, *, kind: str | None = None,
              vehicle: int | None = None) -> list[ActiveFault]:
        """``FaultSchedule.clear`` (ends at the next step)."""
        return self.schedule.clear(fault_id, kind=kind, vehicle=vehicle)

    @property
    def active(self) -> list[ActiveFault]:
        """Every active fault (``FaultSchedule.active``)."""
        return self.schedule.active

    # --- hooks the front end calls within the tick ------------------------------------------------------
    def drop_commands(self, targets: Array) -> Array:
        """comm_loss: the set points (N, W) of this tick that reach the vehicles: ``targets`` with the rows
        of vehicles whose link was down when they were issued (``links_lost_at_issue``) set to NaN (no new
        set point: the held one expires after ``command_timeout_s`` and the failsafe flies), a new array;
        ``targets`` itself when every link was up."""
        lost = self._lost_at_issue
        if lost is not None:
            targets = targets.copy()
            targets[lost] = np.nan
        return targets

    @property
    def links_lost_at_issue(self) -> NDArray[np.bool_] | None:
        """(N,) bool: vehicles whose link was down at t_(k-1), when the set points and commands that the
        step to tick k flies were issued (they are dropped); None when every link was up. A set point
        passes if the link is up at the time it is sent: the graph's flight_controller, which computes
        tick k-1's attitude commands knowing the faults of tick k-1 only, applies the same rule."""
        return self._lost_at_issue

    @property
    def links_lost(self) -> NDArray[np.bool_] | None:
        """(N,) bool: vehicles without a link now (after the last ``step`` or ``apply_active``); None when
        every link is up."""
        return self._comm_lost if self.any_active and self._any_comm_lost else None

    def adjust_controls(self, controls: Array) -> Array:
        """Rotor faults: the controls (N, 5) the airframe flies, with the yaw-rate disturbance added and
        clipped to the limits: a new array (``controls``, the commanded ones, is left as it is: the task's
        control cost scores what was commanded); ``controls`` itself when nothing changes."""
        items = self._yaw_items
        if not items or not self.any_active:
            return controls
        controls = controls.copy()
        if len(items) <= _FEW_ROWS:  # a few rows: Python floats cost a fifth of numpy's fancy indexing
            lim = MAX_YAW_RATE_RADPS
            for i, off in items:
                y = controls.item(i, 3) + off
                controls[i, 3] = lim if y > lim else (-lim if y < -lim else y)  # np.minimum/maximum's order
            return controls
        r = self._yaw_rows
        yaw = controls[r, 3] + self._yaw_offset[r]
        np.minimum(yaw, MAX_YAW_RATE_RADPS, out=yaw)  # (np.clip costs ten times more on a few rows)
        np.maximum(yaw, -MAX_YAW_RATE_RADPS, out=yaw)
        controls[r, 3] = yaw
        return controls

    def off_mask(self, kind: str) -> NDArray[np.bool_] | None:
        """(N,) bool: vehicles whose sensor is off by an active fault of ``kind`` (camera_off, lidar_off);
        None when none is."""
        if not self.any_active:
            return None
        return self._off_somewhere.get(kind)  # (only kinds off on a vehicle: a per-tick dict look-up)

    def sensor_valid(self, name: str, valid: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """The validity a sensor steps with: ``valid`` without the vehicles whose sensor ``name`` (the
        classifier camera "camera_classifier", or a registered sensor's name) is off."""
        if not self.any_active or not self._off_somewhere:
            return valid
        kind = "camera_off" if name == "camera_classifier" else SENSORS[name].off_fault
        off = None if kind is None else self.off_mask(kind)
        return valid if off is None else valid & ~off

    # --- internals ------------------------------------------------------------------------------------
    def _plan_conditions(self) -> None:
        """The ``FaultConditions`` fields the schedule's triggers read (the condition triggers' fields,
        and ``airborne`` for a probabilistic trigger with ``clock: airborne``), and whether one object
        serves every tick: none needed, or the battery's alone from a pack bank (its own arrays,
        ``BatteryBank.readings_view``, updated in place; the schedule only reads them)."""
        triggers = [s.trigger for s in self.schedule.specs]
        fields = {condition_field(t) for t in triggers if isinstance(t, Condition)}
        if any(isinstance(t, Probabilistic) and t.airborne_clock for t in triggers):
            fields.add("airborne")
        self._condition_fields = needed = frozenset(fields)
        bank = getattr(self.models.battery, "bank", None)
        if not needed:
            self._fixed_conditions = NO_CONDITIONS
        elif bank is not None and needed <= _BATTERY_FIELDS:
            volts, fraction, _ = bank.readings_view()
            self._fixed_conditions = FaultConditions(volts if "battery_v" in needed else None,
                                                     fraction if "battery_fraction" in needed else None)
        else:
            self._fixed_conditions = None

    def _conditions(self) -> FaultConditions:
        """This tick's conditions (those ``_plan_conditions`` found not fixed): only the fields the
        schedule's triggers read."""
        needed = self._condition_fields
        if needed == _AIRBORNE_ONLY and self.models.fleet is not None:  # the retrieve scenarios' every tick
            return FaultConditions(None, None, None, self.models.fleet.off_ground())
        n = self.num_vehicles
        fleet, battery = self.models.fleet, self.models.battery
        pos = fleet.state[:, STATE_POSITION_NED] if fleet is not None and "position_ned_m" in needed else None
        volts = fraction = None
        if "battery_v" in needed:
            volts = np.full(n, np.nan) if battery is None else battery.voltage_v
        if "battery_fraction" in needed:
            fraction = np.full(n, np.nan) if battery is None else battery.percentage
        airborne = None
        if "airborne" in needed:  # (no fleet: nothing rests on a ground, every vehicle counts as flying)
            airborne = np.ones(n, bool) if fleet is None else fleet.off_ground()
        return FaultConditions(volts, fraction, pos, airborne)

    def _reset_state(self) -> None:
        n = self.num_vehicles
        self._comm_lost = np.zeros(n, bool)
        self._any_comm_lost = False
        self._yaw_offset = np.zeros(n)
        self._yaw_rows = np.zeros(0, np.intp)
        self._yaw_items: list[tuple[int, float]] = []
        self._stuck_speeds = np.full((n, 4), np.nan)  # rotor airframe: held motor speeds [rad/s], NaN free
        self._off: dict[str, NDArray[np.bool_]] = {k: np.zeros(n, bool) for k in OFF_KINDS}
        self._off_somewhere: dict[str, NDArray[np.bool_]] = {}
        self._thrust_scale = np.ones(n)
        self._thrust_offset_n = np.zeros(n)
        self._rotor_health: Array | None = None
        self._gps: dict[str, Any] = {}
        self._accel_bias = np.zeros((n, 3))
        self._gyro_bias = np.zeros((n, 3))
        self._gyro_stuck = np.zeros(n, bool)
        self._alt_offset = np.zeros(n)
        self._alt_stuck = np.zeros(n, bool)

    def _log(self, entry: FaultLogEntry) -> None:
        if len(self.log) == self.log.maxlen:
            self.log_folded += 1  # the oldest goes (or, keeping none, this one)
        self.log.append(entry)

    def _apply(self, k: int, events: FaultEvents) -> None:
        """One-off effects of the events, then every model's fault state from the active set."""
        fleet, battery = self.models.fleet, self.models.battery
        for f in events.ended:
            self._stuck_thrust_n.pop((f.id, f.vehicle), None)
            self._stuck_speed_radps.pop((f.id, f.vehicle), None)
            self._log(FaultLogEntry(k, "ended", f, _ENDED_NOTES.get(f.kind, "")))
        for f in events.started:
            note = ""
            if f.kind == "self_test_failure":
                if fleet is not None:
                    fleet.disarm([f.vehicle], SELF_TEST_FAILURE)
                note = "disarmed: never flies"
            elif f.kind == "battery_cell_failure":
                note = self._cell_failure(f, battery)
            elif f.kind == "grasper_release":
                note = "to the task: its grasper lets go (retrieve); a task without one: recorded only"
            elif f.kind == "motor_stuck":
                command = f.params["command"]
                if command is not None:
                    held = steady_thrust_si(command) / len(ROTOR_SPIN)
                else:
                    thrust_n = float(fleet.state[f.vehicle, STATE_THRUST]) if fleet is not None else 0.0
                    held = thrust_n / len(ROTOR_SPIN)
                self._stuck_thrust_n[(f.id, f.vehicle)] = max(held, 0.0)
                note = f"rotor {f.params['rotor']} held at {held:.3f} N"
                speed = self._stuck_speed(f.vehicle, f.params["rotor"], command)
                if speed is not None:  # rotor airframe: that motor's speed held, exactly
                    self._stuck_speed_radps[(f.id, f.vehicle)] = speed
                    note = f"rotor {f.params['rotor']} held at {speed:.1f} rad/s"
            elif f.kind == "rotor_loss" and self.emergency_land:
                note = self._start_emergency_land(f)
            self._log(FaultLogEntry(k, "started", f, note))
        self.apply_active(self.schedule.active)

    def apply_active(self, active: list[ActiveFault]) -> None:
        """Every model's fault state from the faults ``active`` now (the schedule's, or, in a node that
        does not own the schedule, the list the owner sent): the per-tick hooks and the models' fault
        states. The one-off effects of a start (disarm, cell failure, a stuck motor's held thrust) are
        ``step``'s, in the owner of the schedule."""
        self._reset_state()
        self.any_active = bool(active)
        self._collect(active)
        self._push()

    def _start_emergency_land(self, f: ActiveFault) -> str:
        """A rotor loss on vehicle ``f.vehicle``: its emergency landing (module doc), unless it is frozen
        or already in one."""
        fleet = self.models.fleet
        v, rotor = f.vehicle, int(f.params["rotor"])
        if not fleet.valid[v] or fleet.emergency_land_rotor[v] >= 0:  # type: ignore[union-attr]
            return ""
        fleet.set_emergency_land([v], rotor)  # type: ignore[union-attr]
        return f"emergency land: rotor {rotor} lost, rotor {int(opposite_rotor(rotor))} disabled"

    def _stuck_speed(self, vehicle: int, rotor: int, command: float | None) -> float | None:
        """The speed [rad/s] a stuck motor of a rotor-airframe vehicle holds: its normalised ``command``
        (``rotor_mixer.normalised_to_speeds``), or its speed when the fault starts; None for a Pelican."""
        fleet = self.models.fleet
        speeds = getattr(fleet, "rotor_speeds_radps", None)
        if speeds is None or not np.isfinite(speeds[vehicle, rotor]):
            return None
        if command is None:
            return float(speeds[vehicle, rotor])
        return float(normalised_to_speeds(fleet.rotor.params, command))  # type: ignore[union-attr]

    def _cell_failure(self, f: ActiveFault, battery: Battery | None) -> str:
        volts = f.params["voltage_step_v"]
        if battery is None:
            return "no battery in the simulation: recorded only"
        if volts is None:  # cells_failed cells at the pack's present voltage per cell
            cells = getattr(getattr(battery, "params", None), "cells", None)
            if not cells:
                return "battery without a cell count: recorded only"
            volts = f.params["cells_failed"] * float(battery.voltage_v[f.vehicle]) / cells
        if not (math.isfinite(volts) and volts > 0):
            return "battery voltage not finite: recorded only"
        battery.cell_failure(f.vehicle, volts)
        return f"pack voltage -{volts:.3f} V"

    def _collect(self, active: list[ActiveFault]) -> None:
        """Every model's fault state from the active faults (several of one kind on a vehicle combine:
        factors multiply, biases and offsets add, satellites lost add)."""
        n = self.num_vehicles
        rotor_factor = rotor_thrust_factors(active, n, len(ROTOR_SPIN))  # (N, 4) loss x 0, degradation x k
        stuck_rotor = np.zeros_like(rotor_factor, dtype=bool)
        sigma, bias, lost = np.ones(n), np.zeros((n, 3)), np.zeros(n, np.int64)
        outage = np.zeros(n, bool)
        for f in active:
            v, p = f.vehicle, f.params
            kind = f.kind
            if kind == "comm_loss":
                self._comm_lost[v] = True
            elif kind in OFF_KINDS:
                self._off[kind][v] = True
            elif kind == "gps_outage":
                outage[v] = True
            elif kind == "gps_degradation":
                sigma[v] *= p["sigma_factor"]
                bias[v] += p["bias_ned_m"]
                lost[v] += p["satellites_lost"]
            elif kind == "imu_bias_step":
                self._accel_bias[v] += p["accelerometer_bias_mps2"]
                self._gyro_bias[v] += p["gyro_bias_radps"]
            elif kind == "gyro_stuck":
                self._gyro_stuck[v] = True
            elif kind == "altimeter_stuck":
                self._alt_stuck[v] = True
            elif kind == "altimeter_offset":
                self._alt_offset[v] += p["offset_m"]
            elif kind == "motor_stuck":
                stuck_rotor[v, p["rotor"]] = True
                speed = self._stuck_speed_radps.get((f.id, v))
                if speed is not None:
                    self._stuck_speeds[v, p["rotor"]] = speed
                self._thrust_offset_n[v] += (rotor_factor[v, p["rotor"]]
                                             * self._stuck_thrust_n.get((f.id, v), 0.0))
        rotors = rotor_factor.shape[1]
        airframes = getattr(self.models.fleet, "airframes", None)
        is_rotor = np.array([a == "rotor" for a in airframes], bool) if airframes is not None else None
        if is_rotor is not None:  # rotor-level vehicles fly their rotors' factors exactly, no approximation
            self._rotor_health = rotor_factor.copy() if is_rotor.any() else None
        pelican_factor = rotor_factor
        emergency = np.zeros(n, bool)
        if self.emergency_land:  # the Pelican approximation of the disabled pair (module doc)
            emergency = self.models.fleet.emergency_land_rotor >= 0  # type: ignore[union-attr]
            if is_rotor is not None:  # rotor vehicles: the controller commands the pair off, exactly
                emergency &= ~is_rotor
            if emergency.any():
                pelican_factor = rotor_factor.copy()
                pelican_factor[emergency] *= pair_factors(
                    self.models.fleet.emergency_land_rotor[emergency])  # type: ignore[union-attr]
        self._thrust_scale = np.where(stuck_rotor, 0.0, pelican_factor).sum(axis=1) / rotors
        yaw = unbalanced_yaw_rate_radps(pelican_factor)  # +-4.5 rad/s at most
        yaw[emergency] = 0.0  # the fleet's emergency row commands the whole yaw rate
        if is_rotor is not None:
            yaw[is_rotor] = 0.0
        self._yaw_offset = yaw
        self._yaw_rows = np.flatnonzero(yaw != 0.0)
        self._yaw_items = [(int(i), float(yaw[i])) for i in self._yaw_rows]
        self._gps = {"outage": outage, "sigma_factor": sigma, "bias_ned_m": bias, "satellites_lost": lost}
        self._any_comm_lost = bool(self._comm_lost.any())
        self._off_somewhere = {k: m for k, m in self._off.items() if m.any()}

    def _push(self) -> None:
        """Give every model its fault state (all defaults when nothing is active: the models' own paths)."""
        m = self.models
        if m.fleet is not None:
            m.fleet.set_thrust_fault(self._thrust_scale, self._thrust_offset_n)
            if hasattr(m.fleet, "set_rotor_health"):  # rotor airframe: each rotor's factor, exactly
                m.fleet.set_rotor_health(self._rotor_health)
                stuck = self._stuck_speeds if np.isfinite(self._stuck_speeds).any() else None
                m.fleet.set_stuck_motors(stuck)
        if m.gps is not None:
            m.gps.set_fault_state(**self._gps)
        if m.ahars is not None:
            m.ahars.accelerometer.set_fault_state(bias=self._accel_bias)
            m.ahars.gyroscope.set_fault_state(bias=self._gyro_bias, stuck=self._gyro_stuck)
            m.ahars.altimeter.set_fault_state(offset_m=self._alt_offset, stuck=self._alt_stuck)


_ENDED_NOTES = {
    "self_test_failure": "the vehicle stays disarmed until the next episode",
    "battery_cell_failure": "the pack keeps its voltage drop until the next episode",
}

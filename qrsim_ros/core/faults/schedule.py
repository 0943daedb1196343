"""The fault schedule of N vehicles: evaluates every fault's trigger each tick, starts and ends faults,
and takes faults injected and cleared at run time.

    schedule = FaultSchedule(parse_faults(scenario_faults, num_vehicles=n), n, streams,
                             dt_s=0.02, ticks_per_task_step=m)
    schedule.reset()                                           # at every episode start
    events = schedule.step(k, t_s, FaultConditions(battery_v=v, position_ned_m=x[:, :3]))
    events.started, events.ended                               # ActiveFault tuples, this tick
    schedule.active                                            # every active fault (ActiveFault)

Call ``step`` once per tick, k = 1, 2, ... with t_s = k dt the simulated time of that tick [s]: a
periodic probabilistic trigger makes one trial per call, so after K calls it has fired with probability
1 - (1 - P)^(K dt / T). A front end may first call ``step(0, 0.0)`` at the episode's start (the start-up
check, ireland_2016's Initialise mode; the Simulator does): it evaluates every trigger but the periodic
probabilistic ones (their trials cover the ticks' intervals ((k - 1) dt, k dt], k >= 1), so a one-shot
probabilistic trigger, ``at_time_s: 0``, ``at_step: 0`` and a condition already true start at t = 0.

Within a step: faults cleared since the last step end, timed faults whose end
time has come (t_s >= since + duration_s) end, then every trigger is evaluated and the faults it fires
start (a repeating fault that ended this tick may start again at once). A fault fires at most once per
vehicle unless its spec says ``repeat: true``, and never while it is active on that vehicle.

Randomness: each probabilistic fault draws, for each vehicle it applies to, from its own stream
``fault.<id>`` of ``RandomStreams`` (vehicle = the vehicle index). Its trigger is one Bernoulli(p_dt)
trial per tick whatever the fault's state (a success while the fault is active, or after a fault that
fires once has fired, starts nothing); the trials are drawn as geometric waiting times between
successes (``_BernoulliTicks``), the same process at one draw per success (a new episode draws fresh
waiting times). With ``clock: airborne`` a vehicle's clock stands still on the ticks it starts on the
ground (``FaultConditions.airborne`` False): its waiting time counts airborne ticks only. A one-shot
trigger is the first tick's trial, with p = P. So a fault's firings depend only on the seed, its id,
its trigger and the vehicle: adding another fault changes nothing else. ``reset`` keeps the streams
going (the next episode of the same streams, as the Simulator's other models do) and drops the faults
injected at run time.

Vectorised over vehicles: each fault keeps (N,) arrays (applies, fired, active, since, until); the loop
is over faults, which are few, and skips the array work where scalars say nothing can change (no fault:
``step`` returns at once; a time trigger before its time; no end due; a fault that cannot fire again).

Quiet ticks: after each tick it looks at, ``step`` works out how long nothing can happen (``_plan``):
until a time (the next planned end, the next ``at_time_s``), a tick (the next ``at_step``), a number of
calls (the fewest trials before a periodic trigger's next success) and while a few scalar watches hold
(each "below" condition's field at or above its threshold; every vehicle airborne, for an airborne
clock). A tick within all of them returns at once, counting the call; the trials skipped are counted on
at the next tick looked at, so the draws and firings are those of looking at every tick.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ConfigError, shorten
from qrsim_ros.core.faults.kinds import DEFAULT_NUM_ROTORS, KINDS, integer
from qrsim_ros.core.faults.spec import FaultSpec
from qrsim_ros.core.faults.triggers import TIME_EPS_S, AtStep, AtTime, Condition, Probabilistic

#: Prefix of the fault streams' names (``fault.<id>``, one stream per vehicle).
STREAM_PREFIX = "fault."


@dataclass(frozen=True)
class ActiveFault:
    """One fault active on one vehicle: ``since_s`` its start [s], ``until_s`` its planned end [s] (None:
    permanent), ``params`` the kind's parameters (kinds.py)."""

    id: str
    vehicle: int
    kind: str
    params: Mapping[str, Any]
    since_s: float
    until_s: float | None

    def as_dict(self) -> dict[str, Any]:
        """Plain values (lists for vectors) for messages, bags and logs."""
        return {"id": self.id, "vehicle": self.vehicle, "kind": self.kind, "since_s": self.since_s,
                "until_s": self.until_s,
                "params": {k: list(v) if isinstance(v, tuple) else v for k, v in self.params.items()}}


@dataclass(frozen=True)
class FaultEvents:
    """The faults that started and ended at one tick."""

    started: tuple[ActiveFault, ...] = ()
    ended: tuple[ActiveFault, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.started or self.ended)


NO_EVENTS = FaultEvents()


class FaultConditions(NamedTuple):
    """What triggers read at a tick, per vehicle: ``battery_v`` (N,) terminal voltage [V],
    ``battery_fraction`` (N,) state of charge 0..1, ``position_ned_m`` (N, 3) true position NED [m] (the
    condition triggers), ``airborne`` (N,) bool: off the ground (the clock of a probabilistic trigger with
    ``clock: airborne``). A field left None may only be missing when no trigger needs it. (A named tuple,
    not a frozen dataclass: one is built every tick, and this costs a quarter.)"""

    battery_v: ArrayLike | None = None
    battery_fraction: ArrayLike | None = None
    position_ned_m: ArrayLike | None = None
    airborne: ArrayLike | None = None


NO_CONDITIONS = FaultConditions()
#: The index of each ``FaultConditions`` field (the quiet ticks' watches read them by index).
_FIELD_INDEX = {name: i for i, name in enumerate(FaultConditions._fields)}
#: Up to this many vehicles, a watch reads its field as a Python list (cheaper than numpy's reductions).
_FEW_VEHICLES = 64


class _BernoulliTicks:
    """Independent Bernoulli(p) trials, one per tick and vehicle, each vehicle from its own stream.

    Instead of one uniform per tick, each vehicle draws the number of ticks until its next success, a
    geometric variable (support 1, 2, ...) with the same p: the same process (the waiting times of a
    Bernoulli sequence are i.i.d. geometric), but one draw per success and a scalar comparison per tick.
    """

    def __init__(self, streams: RandomStreams, name: str, vehicles: Array, p: float) -> None:
        self._rngs = [streams.get(name, int(v)) for v in vehicles]
        self._p = float(p)
        self.restart()

    def _wait(self, rng: np.random.Generator) -> float:
        return float(rng.geometric(self._p)) if self._p > 0.0 else math.inf

    def restart(self) -> None:
        """Count ticks from 0 again, with fresh waiting times (the streams go on)."""
        self._tick = 0
        self._next = np.array([self._wait(rng) for rng in self._rngs])
        self._soonest = float(self._next.min())

    def hold(self, held: Array) -> None:
        """Stop the clock of the vehicles ``held`` (bool, one per vehicle) for the next tick: its trial
        is not drawn, so their waiting times count only the ticks they are not held."""
        self._next += held  # +1 where held (numpy's bool-to-float add; no fancy indexing)
        self._soonest = float(self._next.min())

    def skip(self, ticks: int) -> None:
        """Count ``ticks`` ticks in which no vehicle succeeds (``quiet_ticks`` of them at most)."""
        self._tick += ticks

    def quiet_ticks(self) -> float:
        """How many of the next ticks no vehicle succeeds in (inf: none ever does)."""
        return self._soonest - self._tick - 1

    def quiet_tick(self) -> bool:
        """Count the next tick and return True if no vehicle succeeds in it; else False, uncounted (then
        ``trial`` counts it): a tick loop's cheap test before the full trial."""
        if self._tick + 1 < self._soonest:
            self._tick += 1
            return True
        return False

    def trial(self) -> Array | None:
        """The next tick's outcomes (one per vehicle, bool), or None when none succeeds."""
        self._tick += 1
        if self._tick < self._soonest:
            return None
        hit = self._next <= self._tick
        for i in np.flatnonzero(hit):
            self._next[i] = self._tick + self._wait(self._rngs[i])
        self._soonest = float(self._next.min())
        return hit


class _Fault:
    """The state of one fault over the fleet."""

    def __init__(self, spec: FaultSpec, num_vehicles: int, streams: RandomStreams, dt_s: float,
                 ticks_per_task_step: int, injected: bool) -> None:
        self.spec = spec
        self.injected = injected
        self.rows = np.asarray(spec.vehicle_indices(num_vehicles), dtype=np.intp)
        self.applies = np.zeros(num_vehicles, bool)
        self.applies[self.rows] = True
        self.all_rows = bool(np.array_equal(self.rows, np.arange(num_vehicles)))  # every vehicle, in order
        trig = spec.trigger
        self.trials = (_BernoulliTicks(streams, STREAM_PREFIX + spec.id, self.rows, trig.per_tick(dt_s))
                       if isinstance(trig, Probabilistic) else None)
        self.one_shot = isinstance(trig, Probabilistic) and trig.period_s is None
        self.periodic = self.trials is not None and not self.one_shot  # a trial every tick after tick 0
        # ``clock: airborne``: a vehicle's trials stand still on the ticks it starts on the ground
        self.airborne_clock = self.periodic and trig.airborne_clock  # type: ignore[union-attr]
        # a timed trigger is false before its time (s) or tick: ``step`` skips it until then
        self.quiet_before_s = trig.time_s - TIME_EPS_S if isinstance(trig, AtTime) else -math.inf
        self.at_tick = trig.step * ticks_per_task_step if isinstance(trig, AtStep) else -1
        # a "below" condition is false on every vehicle while the field's minimum is at or above the
        # threshold: ``step`` tests that scalar before the array work (a box or NaN takes the full path)
        self.below_field = (_CONDITION_FIELD[trig.kind] if isinstance(trig, Condition)
                            and trig.kind != "inside_box_ned_m" else None)
        self.reset()

    def reset(self) -> None:
        n = self.applies.size
        self.fired = np.zeros(n, bool)
        self.active = np.zeros(n, bool)
        self.clearing = np.zeros(n, bool)
        self.since = np.full(n, np.nan)
        self.until = np.full(n, np.inf)
        self.previous = np.zeros(n, bool)  # a condition trigger's value at the last tick
        self.any_previous = False
        self.evaluated = False
        if self.trials is not None:
            self.trials.restart()
        # scalars that let a tick skip the array work: any vehicle active, a clear pending, the earliest
        # planned end [s], and "armed" (the trigger can still start it: it repeats or has not fired on
        # every vehicle)
        self.any_active = False
        self.any_clearing = False
        self.next_end_s = math.inf
        self.armed = True

    def activation(self, v: int) -> ActiveFault:
        until = None if math.isinf(self.until[v]) else float(self.until[v])
        return ActiveFault(self.spec.id, int(v), self.spec.kind, self.spec.params, float(self.since[v]),
                           until)

    def end(self, t_s: float, ended: list[ActiveFault]) -> None:
        """End the activations cleared or due at ``t_s``."""
        if not (self.any_clearing or t_s >= self.next_end_s - TIME_EPS_S):
            return
        stop = self.active & (self.clearing | (self.until - TIME_EPS_S <= t_s))
        ended.extend(self.activation(v) for v in np.flatnonzero(stop))
        self.active &= ~stop
        self.clearing[:] = False
        self.any_clearing = False
        self._update()

    def start(self, k: int, t_s: float, conditions: FaultConditions, started: list[ActiveFault]) -> None:
        """Evaluate the trigger and start the fault where it fires (the once / active rules applied)."""
        fire = self._fires(k, t_s, conditions)
        if fire is None:
            return
        fire &= ~self.active
        if not self.spec.repeat:
            fire &= ~self.fired
        if not fire.any():
            return
        self.fired |= fire
        self.active |= fire
        self.since[fire] = t_s
        self.until[fire] = t_s + self.spec.duration_s if self.spec.duration_s is not None else math.inf
        started.extend(self.activation(v) for v in np.flatnonzero(fire))
        self._update()

    def _update(self) -> None:
        self.any_active = bool(self.active.any())
        self.next_end_s = float(self.until[self.active].min()) if self.any_active else math.inf
        self.armed = self.spec.repeat or not bool(self.fired[self.rows].all())

    def _fires(self, k: int, t_s: float, conditions: FaultConditions) -> Array | None:
        """(N,) bool (a new array): where the trigger is true at this tick, before the once / active
        rules; None where it is true nowhere."""
        trig = self.spec.trigger
        first = not self.evaluated
        self.evaluated = True
        if isinstance(trig, AtTime):
            return self.applies.copy() if t_s >= trig.time_s - TIME_EPS_S else None
        if isinstance(trig, AtStep):
            return self.applies.copy() if k >= self.at_tick else None
        if isinstance(trig, Probabilistic):
            if self.one_shot and not first:
                return None
            if k == 0 and not self.one_shot:
                return None  # the start-up step: periodic trials cover the ticks' intervals (k-1, k] dt
            hit = self.trials.trial()  # type: ignore[union-attr]
            if hit is None:
                return None
            out = np.zeros(self.applies.size, bool)
            out[self.rows] = hit
            return out
        now = _condition(self.spec.id, trig, conditions, self.applies.size)
        now &= self.applies
        rising = now > self.previous  # true now, false at the last tick
        self.previous = now
        self.any_previous = bool(now.any())
        return rising if rising.any() else None

    def hold_grounded(self, conditions: FaultConditions) -> None:
        """``clock: airborne``: stop the trials' clock of the vehicles on the ground this tick."""
        airborne = conditions.airborne
        if airborne is None:
            raise ValueError(f"fault {self.spec.id!r} (clock: airborne) needs FaultConditions.airborne")
        a = airborne if type(airborne) is np.ndarray and airborne.dtype == np.bool_ else np.asarray(
            airborne, dtype=bool)
        if a.shape != self.applies.shape:
            raise ValueError(f"FaultConditions.airborne must have shape {self.applies.shape}, got {a.shape}")
        if _watch_holds(a, None, self.applies.shape):  # all flying (the common tick)
            return
        self.trials.hold(~a if self.all_rows else ~a[self.rows])  # type: ignore[union-attr]

    def below_quiet(self, conditions: FaultConditions) -> bool:
        """A "below" condition trigger: True when it cannot fire this tick (its field's minimum is at or
        above the threshold and it was false everywhere at the last tick), which ``start`` would find with
        the array work; False when that work must run (also for a missing field: it raises there)."""
        if self.any_previous:
            return False
        low = self.spec.trigger.value  # type: ignore[union-attr]
        return _watch_holds(getattr(conditions, self.below_field), low, self.applies.shape)  # type: ignore[arg-type]


def _watch_holds(value: object, low: float | None, shape: tuple[int, ...]) -> bool:
    """Whether a field of ``FaultConditions`` shows that nothing can fire: an array of ``shape`` whose
    minimum is at or above ``low`` (a "below" condition), or with ``low`` None all true (every vehicle
    airborne, for an airborne clock). False for anything else, so that the full evaluation decides (and
    raises for a missing or malformed field). Python's min over a short list is several times cheaper
    than a numpy reduction; a NaN gives NaN or is passed over, and either is right (NaN never fires;
    NaN >= x sends it the full way)."""
    if type(value) is not np.ndarray or value.shape != shape:
        return False
    if value.size <= _FEW_VEHICLES:
        values = value.tolist()
        return (False not in values) if low is None else bool(min(values) >= low)
    return bool(value.all()) if low is None else bool(value.min() >= low)


#: The FaultConditions field each condition reads.
_CONDITION_FIELD = {"battery_below_v": "battery_v", "battery_below_fraction": "battery_fraction",
                    "inside_box_ned_m": "position_ned_m"}


def condition_field(trig: Condition) -> str:
    """The ``FaultConditions`` field a condition trigger reads."""
    return _CONDITION_FIELD[trig.kind]


def _condition(fault_id: str, trig: Condition, c: FaultConditions, n: int) -> Array:
    """(N,) bool: the condition's value per vehicle (a NaN input is false: no battery never fires)."""
    field = _CONDITION_FIELD[trig.kind]
    value = getattr(c, field)
    if value is None:
        raise ValueError(f"fault {fault_id!r} (condition {trig.kind}) needs FaultConditions.{field}")
    a = np.asarray(value, dtype=float)
    if trig.kind == "inside_box_ned_m":
        if a.shape != (n, 3):
            raise ValueError(f"FaultConditions.position_ned_m must have shape ({n}, 3), got {a.shape}")
        lo, hi = trig.value[0::2], trig.value[1::2]  # type: ignore[index]
        return ((a[:, 0] >= lo[0]) & (a[:, 0] <= hi[0]) & (a[:, 1] >= lo[1]) & (a[:, 1] <= hi[1])
                & (a[:, 2] >= lo[2]) & (a[:, 2] <= hi[2]))
    if a.shape != (n,):
        raise ValueError(f"FaultConditions.{field} must have shape ({n},), got {a.shape}")
    return a < trig.value  # type: ignore[operator]


def rotor_thrust_factors(active: list[ActiveFault] | tuple[ActiveFault, ...], num_vehicles: int,
                         num_rotors: int = DEFAULT_NUM_ROTORS) -> Array:
    """(N, num_rotors) factors on each rotor's thrust from the ``active`` faults: rotor_loss x 0,
    rotor_degradation x factor, multiplied together; 1 where none is active (a front end that gets the
    active faults from elsewhere, e.g. a message, computes them the same way)."""
    out = np.ones((int(num_vehicles), int(num_rotors)))
    for f in active:
        if f.kind == "rotor_loss":
            out[f.vehicle, f.params["rotor"]] = 0.0
        elif f.kind == "rotor_degradation":
            out[f.vehicle, f.params["rotor"]] *= f.params["factor"]
    return out


class FaultSchedule:
    """The faults of N vehicles over an episode (see the module docstring).

    ``specs``: the scenario's faults (``parse_faults``); ``streams``: the scenario's RandomStreams;
    ``dt_s``: the tick [s]; ``ticks_per_task_step``: ticks per task step (for ``at_step``);
    ``num_rotors``: rotors per vehicle (checks the rotor index of injected faults).
    """

    def __init__(self, specs: tuple[FaultSpec, ...] | list[FaultSpec], num_vehicles: int,
                 streams: RandomStreams | None = None, *, dt_s: float = BASE_DT_S,
                 ticks_per_task_step: int = 1, num_rotors: int = DEFAULT_NUM_ROTORS) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        if not dt_s > 0 or ticks_per_task_step < 1:
            raise ValueError(f"dt_s={dt_s} must be > 0 and ticks_per_task_step={ticks_per_task_step} >= 1")
        self.num_vehicles = int(num_vehicles)
        self.num_rotors = int(num_rotors)
        self.dt_s = float(dt_s)
        self.ticks_per_task_step = int(ticks_per_task_step)
        self._streams = streams if streams is not None else RandomStreams(0)
        self._faults: list[_Fault] = []
        #: ``step`` has nothing to look at before this time [s]: no fault armed or clearing, the first
        #: active one ends then (-inf: look; set again after every look, and by reset, inject and clear)
        self._quiet_until_s = -math.inf
        #: the other bounds of the quiet ticks (module docstring): before tick ``_quiet_until_k``, for
        #: ``_quiet_calls`` calls (``_skipped`` of them taken), while every ``_watches`` holds: (index of
        #: a FaultConditions field, threshold: its minimum must be >= it; None: every element true)
        self._quiet_until_k: float = -math.inf
        self._quiet_calls: float = 0.0
        self._skipped = 0
        self._watches: tuple[tuple[int, float | None], ...] = ()
        self._time_only = False  # the time is the only bound (``_plan``)
        self._shape = (self.num_vehicles,)
        self._injections = 0
        for i, spec in enumerate(specs):
            self._add(spec, f"faults[{i}]", injected=False)

    # --- the schedule ---------------------------------------------------------------------------------
    @property
    def specs(self) -> tuple[FaultSpec, ...]:
        """Every fault the schedule holds (the scenario's, then the injected ones)."""
        return tuple(f.spec for f in self._faults)

    def reset(self) -> None:
        """A new episode: no fault active or fired, the injected faults dropped; the streams go on."""
        self._faults = [f for f in self._faults if not f.injected]
        for f in self._faults:
            f.reset()
        self._quiet_until_s = -math.inf
        self._skipped = 0

    def step(self, k: int, t_s: float, conditions: FaultConditions = NO_CONDITIONS) -> FaultEvents:
        """Tick ``k`` at simulated time ``t_s`` [s]: end the cleared and expired faults, evaluate every
        trigger, start the faults fired; returns the tick's events."""
        if t_s < self._quiet_until_s:
            if self._time_only:  # no fault, or only timed ones (ends, at_time_s): the time says it all
                return NO_EVENTS
            if not (k < self._quiet_until_k and self._skipped < self._quiet_calls):
                return self._look(k, t_s, conditions)
            for field, low in self._watches:
                if not _watch_holds(conditions[field], low, self._shape):
                    break
            else:
                self._skipped += 1
                return NO_EVENTS
        return self._look(k, t_s, conditions)

    def _look(self, k: int, t_s: float, conditions: FaultConditions) -> FaultEvents:
        """``step``'s full evaluation of every fault, then the quiet ticks that follow (``_plan``)."""
        self._take_skipped()
        started: list[ActiveFault] = []
        ended: list[ActiveFault] = []
        for f in self._faults:
            if f.any_active and (f.any_clearing or t_s >= f.next_end_s - TIME_EPS_S):  # ``end``'s own test
                f.end(t_s, ended)
            if f.armed:
                if f.airborne_clock and k != 0:
                    f.hold_grounded(conditions)
                if ((f.periodic and k != 0 and f.trials.quiet_tick())  # type: ignore[union-attr]
                        or t_s < f.quiet_before_s or k < f.at_tick
                        or (f.below_field is not None and f.below_quiet(conditions))):
                    f.evaluated = True  # what ``start`` would have done on a tick its trigger is false
                else:
                    f.start(k, t_s, conditions, started)
        self._plan(k, t_s)
        return FaultEvents(tuple(started), tuple(ended)) if started or ended else NO_EVENTS

    def _plan(self, k: int, t_s: float) -> None:
        """The quiet ticks after tick ``k`` (module docstring): the bounds within which no fault can end
        or start, so ``step`` need not look."""
        until_s = until_k = calls = math.inf
        watches: list[tuple[int, float | None]] = []
        for f in self._faults:
            if f.any_clearing:
                calls = 0.0
            if f.any_active:
                until_s = min(until_s, f.next_end_s - TIME_EPS_S)
            if not f.armed or f.one_shot:  # (a one-shot trigger drew at the first tick it was looked at)
                continue
            trig = f.spec.trigger
            if f.periodic:
                calls = min(calls, f.trials.quiet_ticks())  # type: ignore[union-attr]
                if f.airborne_clock:
                    watches.append((_FIELD_INDEX["airborne"], None))
            elif isinstance(trig, AtTime):
                until_s = min(until_s, f.quiet_before_s)  # (at or after it: -inf, look every tick)
            elif isinstance(trig, AtStep):
                until_k = min(until_k, f.at_tick if k < f.at_tick else -math.inf)
            elif f.below_field is not None and not f.any_previous:
                watches.append((_FIELD_INDEX[f.below_field], float(trig.value)))  # type: ignore[union-attr,arg-type]
            else:  # a box, or a "below" condition true somewhere: look every tick
                calls = 0.0
        self._quiet_until_s, self._quiet_until_k, self._quiet_calls = until_s, until_k, calls
        self._watches = tuple(dict.fromkeys(watches))
        self._time_only = until_k == calls == math.inf and not watches

    def _take_skipped(self) -> None:
        """Count the quiet ticks skipped since the last look on the trials that would have run in them."""
        if self._skipped:
            for f in self._faults:
                if f.armed and f.periodic:
                    f.trials.skip(self._skipped)  # type: ignore[union-attr]
            self._skipped = 0

    # --- what is active -------------------------------------------------------------------------------
    @property
    def active(self) -> list[ActiveFault]:
        """Every active fault, by fault (schedule order) then vehicle."""
        return [f.activation(v) for f in self._faults for v in np.flatnonzero(f.active)]

    def active_mask(self, kind: str) -> Array:
        """(N,) bool: vehicles with at least one active fault of ``kind``."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {shorten(kind)} (one of {', '.join(KINDS)})")
        mask = np.zeros(self.num_vehicles, bool)
        for f in self._faults:
            if f.spec.kind == kind:
                mask |= f.active
        return mask

    def rotor_thrust_factors(self) -> Array:
        """(N, num_rotors) factors on each rotor's thrust from the active rotor_loss (x 0) and
        rotor_degradation (x factor) faults, multiplied together; 1 where none is active."""
        return rotor_thrust_factors(self.active, self.num_vehicles, self.num_rotors)

    # --- run time -------------------------------------------------------------------------------------
    def inject(self, fault: FaultSpec | Mapping[str, Any], t_s: float) -> str:
        """Add a fault at run time (the ``/sim/inject_fault`` service, ``Simulator.inject_fault``) at
        simulated time ``t_s`` [s]; returns its id. A mapping is parsed as a ``faults:`` item (errors name
        ``inject.<key>``); without a trigger it starts at the next ``step``; without an id it gets
        ``<kind>.injected<n>``. It is dropped at the next ``reset``."""
        self._injections += 1
        if isinstance(fault, Mapping):
            fault = FaultSpec.from_dict(fault, "inject", num_vehicles=self.num_vehicles,
                                        num_rotors=self.num_rotors,
                                        default_id=f"{fault.get('kind')}.injected{self._injections}",
                                        default_trigger=AtTime(max(float(t_s), 0.0)))
        self._add(fault, "inject", injected=True)
        return fault.id

    def clear(self, fault_id: str | None = None, *, kind: str | None = None,
              vehicle: int | None = None) -> list[ActiveFault]:
        """End active faults at the next ``step`` (reported in its ``ended``): those of id ``fault_id``,
        or else of ``kind``; only on ``vehicle`` if given. Returns the activations that will end (empty
        if none matches). A cleared fault that repeats stays armed; one that fires once stays fired."""
        if (fault_id is None) == (kind is None):
            raise ValueError("clear needs a fault id or a kind (not both)")
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown fault kind {shorten(kind)} (one of {', '.join(KINDS)})")
        if vehicle is not None and not 0 <= vehicle < self.num_vehicles:
            raise ValueError(f"vehicle {vehicle} is not in [0, {self.num_vehicles - 1}]")
        out: list[ActiveFault] = []
        for f in self._faults:
            if f.spec.id == fault_id or f.spec.kind == kind:
                hit = f.active & ~f.clearing
                if vehicle is not None:
                    only = np.zeros_like(hit)
                    only[vehicle] = hit[vehicle]
                    hit = only
                f.clearing |= hit
                f.any_clearing = f.any_clearing or bool(hit.any())
                self._quiet_until_s = -math.inf
                out.extend(f.activation(v) for v in np.flatnonzero(hit))
        return out

    def _add(self, spec: FaultSpec, where: str, *, injected: bool) -> None:
        if any(f.spec.id == spec.id for f in self._faults):
            raise ConfigError(f"{where}.id={spec.id!r} is already the id of a fault in the schedule")
        spec.vehicle_indices(self.num_vehicles, where)  # checks the indices against the fleet
        if "rotor" in spec.params:
            integer(f"{where}.rotor", spec.params["rotor"], 0, self.num_rotors - 1)
        self._take_skipped()  # (the new fault's trials start now, not with the others' skipped ones)
        self._faults.append(_Fault(spec, self.num_vehicles, self._streams, self.dt_s,
                                   self.ticks_per_task_step, injected))
        self._quiet_until_s = -math.inf

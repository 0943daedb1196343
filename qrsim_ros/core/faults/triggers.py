"""When a fault starts: the four trigger types and their checks.

A trigger is written in the scenario as a mapping with exactly one key:

- ``{at_time_s: T}``: at the first tick whose simulated time is >= T [s];
- ``{at_step: S}``: at the first tick of task step S, i.e. tick ``S * ticks_per_task_step`` (the tick at
  which the episode's task-step counter reaches S; with one tick per task step, tick S);
- ``{probabilistic: {probability: P, period_s: T}}``: with probability P per period T [s]; each tick of
  dt [s] draws once, firing with ``p_dt = 1 - (1 - P)^(dt / T)`` (ireland_2016 section 4.8.2), so the
  chance that it has fired by time t = K dt is exactly ``1 - (1 - P)^(t / T)``. Without ``period_s``
  the trigger draws once, at the first tick, with probability P (ireland_2016's system fault: its
  probability is "independent of time", checked once in the Initialise mode). With ``clock: airborne``
  (default ``always``) a periodic trigger's clock runs only on the ticks its vehicle is off the ground:
  a tick that starts with the vehicle resting on the ground draws nothing (ireland_2016 section 5.2.2:
  the actuator fault cannot occur in Idle, the rotors stopped on the landing site);
- ``{condition: {...}}`` with exactly one of ``battery_below_v: V`` (terminal voltage < V [V]),
  ``battery_below_fraction: f`` (state of charge < f, 0..1) or ``inside_box_ned_m: [xmin, xmax, ymin,
  ymax, zmin, zmax]`` (position inside the NED box [m], limits included): fires on the tick the
  condition becomes true (it was false at the previous tick, or this is the first tick evaluated).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qrsim_ros.core.common.validation import (
    ConfigError,
    area_limits,
    finite,
    in_range,
    set_frozen_field,
    shorten,
    single_positive,
)
from qrsim_ros.core.faults.kinds import integer

#: Tolerance of the time comparisons [s] (ticks are 0.02 s; sums of them carry rounding).
TIME_EPS_S = 1e-9


@dataclass(frozen=True)
class AtTime:
    """Fires at the first tick with t >= ``time_s`` [s]."""

    time_s: float

    def __post_init__(self) -> None:
        t = finite("trigger.at_time_s", self.time_s)
        if t < 0:
            raise ConfigError(f"trigger.at_time_s={self.time_s!r} must be >= 0")
        set_frozen_field(self, "time_s", t)


@dataclass(frozen=True)
class AtStep:
    """Fires at the first tick of task step ``step`` (tick ``step * ticks_per_task_step``)."""

    step: int

    def __post_init__(self) -> None:
        set_frozen_field(self, "step", integer("trigger.at_step", self.step, 0))


#: The clocks of a periodic probabilistic trigger: every tick, or the ticks the vehicle is airborne.
CLOCKS = ("always", "airborne")


@dataclass(frozen=True)
class Probabilistic:
    """Probability ``probability`` per ``period_s`` [s] (None: one draw at the first tick) of ``clock``
    time (CLOCKS: "always", or "airborne": only the ticks the vehicle starts off the ground)."""

    probability: float
    period_s: float | None = None
    clock: str = "always"

    def __post_init__(self) -> None:
        set_frozen_field(self, "probability",
                         in_range("trigger.probabilistic.probability", self.probability, 0.0, 1.0))
        if self.period_s is not None:
            period = single_positive("trigger.probabilistic.period_s", self.period_s)
            set_frozen_field(self, "period_s", period)
        if self.clock not in CLOCKS:
            raise ConfigError(f"trigger.probabilistic.clock={shorten(self.clock)} is not one of "
                              f"{', '.join(CLOCKS)}")
        if self.clock != "always" and self.period_s is None:
            raise ConfigError("trigger.probabilistic.clock: only a trigger with period_s has a clock "
                              "(this one draws once, at the first tick)")

    @property
    def airborne_clock(self) -> bool:
        """True when the trials run only on the ticks the vehicle is airborne (``clock: airborne``)."""
        return self.clock == "airborne"

    def per_tick(self, dt_s: float) -> float:
        """Firing probability of one tick of ``dt_s`` [s]: 1 - (1 - P)^(dt/T) (ireland_2016 4.8.2),
        evaluated as -expm1((dt/T) log1p(-P)) to keep small probabilities exact; P itself for a one-shot
        trigger."""
        if self.period_s is None or self.probability >= 1.0:
            return float(self.probability)
        return -math.expm1(dt_s / self.period_s * math.log1p(-self.probability))


#: The keys of a condition trigger.
CONDITIONS = ("battery_below_v", "battery_below_fraction", "inside_box_ned_m")


@dataclass(frozen=True)
class Condition:
    """Fires when ``kind`` (one of CONDITIONS) becomes true; ``value`` its threshold or box limits."""

    kind: str
    value: float | tuple[float, ...]

    def __post_init__(self) -> None:
        name = f"trigger.condition.{self.kind}"
        if self.kind == "battery_below_v":
            v = finite(name, self.value)
            if v <= 0:
                raise ConfigError(f"{name}={self.value!r} must be > 0")
            set_frozen_field(self, "value", v)
        elif self.kind == "battery_below_fraction":
            v = finite(name, self.value)
            if not 0.0 < v <= 1.0:
                raise ConfigError(f"{name}={self.value!r} must be in (0, 1]")
            set_frozen_field(self, "value", v)
        elif self.kind == "inside_box_ned_m":
            set_frozen_field(self, "value", tuple(float(v) for v in area_limits(name, self.value)))
        else:
            raise ConfigError(f"trigger.condition: {self.kind!r} is not a condition (one of "
                              f"{', '.join(CONDITIONS)})")


Trigger = AtTime | AtStep | Probabilistic | Condition
#: The keys of a trigger mapping.
TRIGGERS = ("at_time_s", "at_step", "probabilistic", "condition")


def _renamed(error: ConfigError, where: str) -> ConfigError:
    """The same error with its leading ``trigger`` replaced by ``where`` (the full key path)."""
    text = str(error)
    if text.startswith(where):
        return error
    return ConfigError(where + text[len("trigger"):] if text.startswith("trigger") else f"{where}: {text}")


def _one_key(where: str, value: object, allowed: tuple[str, ...]) -> tuple[str, Any]:
    if not isinstance(value, Mapping) or len(value) != 1:
        raise ConfigError(f"{where}={shorten(value)} must be a mapping with exactly one of "
                          f"{', '.join(allowed)}")
    ((key, inner),) = value.items()
    if key not in allowed:
        raise ConfigError(f"{where}.{key}: unknown (one of {', '.join(allowed)})")
    return str(key), inner


def parse_trigger(where: str, value: object) -> Trigger:
    """A trigger from its scenario mapping (see the module docstring); errors name ``where.<key>``."""
    key, inner = _one_key(where, value, TRIGGERS)
    try:
        if key == "at_time_s":
            return AtTime(finite(f"{where}.at_time_s", inner))
        if key == "at_step":
            return AtStep(integer(f"{where}.at_step", inner, 0))
        if key == "probabilistic":
            if not isinstance(inner, Mapping):
                raise ConfigError(f"{where}.probabilistic={shorten(inner)} must be a mapping "
                                  "{probability: P, period_s: T, clock: C}")
            extra = set(inner) - {"probability", "period_s", "clock"}
            if extra:
                raise ConfigError(f"{where}.probabilistic.{sorted(extra)[0]}: unknown key "
                                  "(allowed: probability, period_s, clock)")
            if "probability" not in inner:
                raise ConfigError(f"{where}.probabilistic.probability: missing")
            return Probabilistic(inner["probability"], inner.get("period_s"), inner.get("clock", "always"))
        cond, limit = _one_key(f"{where}.condition", inner, CONDITIONS)
        return Condition(cond, limit)
    except ConfigError as exc:
        raise _renamed(exc, where) from None


def check_repeat(where: str, trigger: Trigger, repeat: bool) -> None:
    """Only a trigger that can be true again may repeat: a periodic probabilistic one or a condition."""
    if repeat and not (isinstance(trigger, Condition)
                       or (isinstance(trigger, Probabilistic) and trigger.period_s is not None)):
        raise ConfigError(f"{where}.repeat: only a condition or a probabilistic trigger with period_s can "
                          "fire again (this one fires once)")


def trigger_dict(trigger: Trigger) -> dict[str, Any]:
    """The scenario mapping of a trigger (the inverse of ``parse_trigger``)."""
    if isinstance(trigger, AtTime):
        return {"at_time_s": trigger.time_s}
    if isinstance(trigger, AtStep):
        return {"at_step": trigger.step}
    if isinstance(trigger, Probabilistic):
        inner: dict[str, Any] = {"probability": trigger.probability}
        if trigger.period_s is not None:
            inner["period_s"] = trigger.period_s
        if trigger.clock != "always":
            inner["clock"] = trigger.clock
        return {"probabilistic": inner}
    value = list(trigger.value) if isinstance(trigger.value, tuple) else trigger.value
    return {"condition": {trigger.kind: value}}

"""The fault kinds and the parameters each one takes, with their checks.

A kind names what breaks; its parameters say how. The schedule only records them: the models that
apply a fault (rotor model, Pelican, GPS, AHARS, battery, grasper, communications) read the parameters of
the faults active on their vehicles. Units are SI, vectors are NED world (GPS) or FRD body (IMU).

==========================  ==========================================================================
kind                        parameters (required unless a default is given)
==========================  ==========================================================================
rotor_loss                  rotor: index in [0, num_rotors) (its thrust x 0)
rotor_degradation           rotor; factor in [0, 1] (rotor thrust x factor)
motor_stuck                 rotor; command in [0, 1] (normalised motor command held; default None: held
                            at its value when the fault starts)
gps_outage                  (none: no fix)
gps_degradation             sigma_factor >= 1 (noise sigma x k, default 1); bias_ned_m (3,) [m] (a bias
                            step, default 0); satellites_lost integer >= 0 (default 0); at least one given
imu_bias_step               accelerometer_bias_mps2 (3,) [m/s^2] FRD; gyro_bias_radps (3,) [rad/s] FRD
                            (each default 0; at least one given)
gyro_stuck                  (none: the gyroscope repeats its last reading)
altimeter_stuck             (none: the altimeter repeats its last reading)
altimeter_offset            offset_m [m] added to the altitude reading
camera_off, lidar_off       (none: the sensor publishes nothing)
battery_cell_failure        cells_failed integer >= 1 (the pack voltage drops by that many cells' voltage)
                            or voltage_step_v > 0 [V] (a given step); at most one given; neither: one
                            cell (cells_failed 1, voltage_step_v null)
grasper_release             (none: a carried object is dropped; ireland_2016 section 4.8.2)
comm_loss                   (none: the vehicle neither receives commands nor sends telemetry)
self_test_failure           (none: ireland_2016 section 4.8.2's system fault, found in its Initialise mode)
==========================  ==========================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from qrsim_ros.core.common.validation import ConfigError, finite, in_range, shape, shorten

#: Rotors of the quadrotors the project flies (the identified Pelican, the rotor model's X and + quads).
DEFAULT_NUM_ROTORS = 4


def integer(name: str, value: object, lo: int, hi: int | None = None) -> int:
    """``value`` as an int in [lo, hi] (hi None: unbounded); bools and non-integral numbers are refused."""
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if not ok and isinstance(value, (float, np.floating)):
        ok = math.isfinite(value) and float(value).is_integer()
    if not ok or int(value) < lo or (hi is not None and int(value) > hi):
        allowed = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
        raise ConfigError(f"{name}={shorten(value)} must be {allowed}")
    return int(value)


def _vector3(name: str, value: object, _ctx: Context) -> tuple[float, float, float]:
    a = shape(name, value, (3,))
    return (float(a[0]), float(a[1]), float(a[2]))


def _rotor(name: str, value: object, ctx: Context) -> int:
    return integer(name, value, 0, None if ctx.num_rotors is None else ctx.num_rotors - 1)


def _unit(name: str, value: object, _ctx: Context) -> float:
    return in_range(name, value, 0.0, 1.0)


def _sigma_factor(name: str, value: object, _ctx: Context) -> float:
    v = finite(name, value)
    if v < 1.0:
        raise ConfigError(f"{name}={shorten(value)} must be >= 1 (a degradation multiplies the noise sigma)")
    return v


def _count(lo: int) -> Callable[[str, object, Context], int]:
    return lambda name, value, _ctx: integer(name, value, lo)


def _optional(check: Callable[[str, object, Context], Any]) -> Callable[[str, object, Context], Any]:
    return lambda name, value, ctx: None if value is None else check(name, value, ctx)


def _number(name: str, value: object, _ctx: Context) -> float:
    return finite(name, value)


def _positive(name: str, value: object, _ctx: Context) -> float:
    v = finite(name, value)
    if v <= 0.0:
        raise ConfigError(f"{name}={shorten(value)} must be > 0")
    return v


@dataclass(frozen=True)
class Context:
    """What a parameter check needs to know about the fleet: the rotors per vehicle (None: unknown, a
    rotor index is only checked to be >= 0)."""

    num_rotors: int | None = DEFAULT_NUM_ROTORS


_REQUIRED = object()


@dataclass(frozen=True)
class KindParam:
    """One parameter of a kind: its check (name, value, context) -> normalised value, and its default
    (``_REQUIRED``: none, the parameter must be given)."""

    check: Callable[[str, Any, Context], Any]
    default: Any = _REQUIRED

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


@dataclass(frozen=True)
class Kind:
    """A fault kind: its parameters; ``at_least_one`` / ``at_most_one``: groups of optional parameters of
    which at least one / at most one must be given (not null); ``fallback``: a parameter and the value it
    takes when none of the ``at_most_one`` group is given."""

    name: str
    summary: str
    params: Mapping[str, KindParam] = field(default_factory=dict)
    at_least_one: tuple[str, ...] = ()
    at_most_one: tuple[str, ...] = ()
    fallback: tuple[str, Any] | None = None

    def check_params(self, where: str, given: Mapping[str, Any], ctx: Context) -> Mapping[str, Any]:
        """The kind's parameters from ``given`` (only the kind's own keys), checked and with defaults
        filled in, as a read-only mapping. Errors name ``<where>.<key>``."""
        for key in given:
            if key not in self.params:
                allowed = ", ".join(self.params) or "none"
                raise ConfigError(f"{where}.{key}: not a parameter of {self.name} "
                                  f"(its parameters: {allowed})")
        out: dict[str, Any] = {}
        for key, p in self.params.items():
            if key in given:
                out[key] = p.check(f"{where}.{key}", given[key], ctx)
            elif p.required:
                raise ConfigError(f"{where}.{key}: missing ({self.name} needs {key})")
            else:
                out[key] = p.default
        if self.at_least_one and all(given.get(k) is None for k in self.at_least_one):
            raise ConfigError(f"{where}: {self.name} needs at least one of {', '.join(self.at_least_one)}")
        both = [k for k in self.at_most_one if given.get(k) is not None]
        if len(both) > 1:
            raise ConfigError(f"{where}.{both[1]}: {self.name} takes only one of "
                              f"{', '.join(self.at_most_one)}")
        if self.fallback is not None and not both:
            out[self.fallback[0]] = self.fallback[1]
        return MappingProxyType(out)


def _kinds(*kinds: Kind) -> Mapping[str, Kind]:
    return MappingProxyType({k.name: k for k in kinds})


_ZERO3 = (0.0, 0.0, 0.0)

#: Every fault kind by name.
KINDS: Mapping[str, Kind] = _kinds(
    Kind("rotor_loss", "rotor i gives no thrust", {"rotor": KindParam(_rotor)}),
    Kind("rotor_degradation", "rotor i thrust x factor",
         {"rotor": KindParam(_rotor), "factor": KindParam(_unit)}),
    Kind("motor_stuck", "motor i holds its command",
         {"rotor": KindParam(_rotor), "command": KindParam(_optional(_unit), None)}),
    Kind("gps_outage", "the GPS receiver has no fix"),
    Kind("gps_degradation", "GPS noise sigma x k, a bias step, fewer satellites",
         {"sigma_factor": KindParam(_sigma_factor, 1.0), "bias_ned_m": KindParam(_vector3, _ZERO3),
          "satellites_lost": KindParam(_count(0), 0)},
         at_least_one=("sigma_factor", "bias_ned_m", "satellites_lost")),
    Kind("imu_bias_step", "a step in the accelerometer and/or gyroscope bias (FRD body)",
         {"accelerometer_bias_mps2": KindParam(_vector3, _ZERO3),
          "gyro_bias_radps": KindParam(_vector3, _ZERO3)},
         at_least_one=("accelerometer_bias_mps2", "gyro_bias_radps")),
    Kind("gyro_stuck", "the gyroscope repeats its last reading"),
    Kind("altimeter_stuck", "the altimeter repeats its last reading"),
    Kind("altimeter_offset", "an offset added to the altimeter reading", {"offset_m": KindParam(_number)}),
    Kind("camera_off", "the camera publishes nothing"),
    Kind("lidar_off", "the lidar publishes nothing"),
    Kind("battery_cell_failure", "the pack voltage steps down (failed cells or a given step)",
         {"cells_failed": KindParam(_optional(_count(1)), None),
          "voltage_step_v": KindParam(_optional(_positive), None)},
         at_most_one=("cells_failed", "voltage_step_v"), fallback=("cells_failed", 1)),
    Kind("grasper_release", "a carried object is dropped"),
    Kind("comm_loss", "no commands in, no telemetry out"),
    Kind("self_test_failure", "the start-up self test fails"),
)

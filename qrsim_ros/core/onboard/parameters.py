"""The onboard autopilot's parameters by their PX4 names: one value per vehicle, checked on every set.

A MAVLink client reads and writes them with the parameter protocol; a scenario may set them
(``mavlink.parameters``). Defaults are PX4's where they fit this airframe; speeds are bounded by the
Pelican's velocity loops (``controllers.MAX_SPEED_MPS`` = 3 m/s per body axis, kept 10 % inside so that a
tilted body does not see a component beyond it), so PX4's larger defaults become the bound here.
Values hold for the run (a new episode keeps them), as a real vehicle keeps its parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.common.validation import ConfigError, shorten
from qrsim_ros.core.vehicles.pelican import HOVER_THROTTLE


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter: PX4's name (at most 16 characters), default, range, whether it is an integer."""

    name: str
    default: float
    lo: float
    hi: float
    unit: str
    description: str
    integer: bool = False
    choices: tuple[int, ...] = ()


#: Offboard-loss actions supported (COM_OBL_RC_ACT): PX4's value -> the mode the vehicle switches to.
#: 0 (position mode) and 1 (altitude mode) have no pilot here: they hold, as PX4 without RC falls back.
OFFBOARD_LOSS_ACTIONS = {0: "HOLD", 1: "HOLD", 3: "RTL", 4: "LAND", 5: "HOLD"}

SPECS: tuple[ParameterSpec, ...] = (
    ParameterSpec("MIS_TAKEOFF_ALT", 2.5, 0.5, 100.0, "m", "takeoff altitude above home"),
    ParameterSpec("COM_OF_LOSS_T", 1.0, 0.1, 60.0, "s", "offboard set-point stream lost after"),
    ParameterSpec("COM_OBL_RC_ACT", 0, 0, 5, "", "mode after offboard loss (0, 1, 5: Hold; 3: RTL; 4: Land)",
                  integer=True, choices=tuple(OFFBOARD_LOSS_ACTIONS)),
    ParameterSpec("COM_DISARM_LAND", 2.0, -1.0, 20.0, "s", "disarm this long after landing (-1: never)"),
    ParameterSpec("RTL_RETURN_ALT", 60.0, 0.0, 150.0, "m", "return altitude above home"),
    ParameterSpec("NAV_ACC_RAD", 10.0, 0.05, 200.0, "m", "horizontal acceptance radius of a waypoint"),
    ParameterSpec("NAV_MC_ALT_RAD", 0.8, 0.05, 10.0, "m", "vertical acceptance radius of a waypoint"),
    ParameterSpec("MPC_XY_VEL_MAX", 2.7, 0.1, 2.7, "m/s", "largest horizontal speed"),
    ParameterSpec("MPC_XY_CRUISE", 2.7, 0.1, 2.7, "m/s", "horizontal speed of missions and RTL"),
    ParameterSpec("MPC_Z_VEL_MAX_UP", 2.7, 0.1, 2.7, "m/s", "largest climb rate"),
    ParameterSpec("MPC_Z_VEL_MAX_DN", 1.5, 0.1, 2.7, "m/s", "largest descent rate"),
    ParameterSpec("MPC_TKO_SPEED", 1.5, 0.1, 2.7, "m/s", "climb rate of takeoff"),
    ParameterSpec("MPC_LAND_SPEED", 0.7, 0.1, 2.7, "m/s", "descent rate of landing"),
    ParameterSpec("MPC_ACC_HOR", 3.0, 0.5, 15.0, "m/s^2", "largest horizontal acceleration of the set point"),
    ParameterSpec("MPC_XY_P", 0.95, 0.1, 3.0, "1/s", "horizontal position gain"),
    ParameterSpec("MPC_Z_P", 1.0, 0.1, 3.0, "1/s", "vertical position gain"),
    ParameterSpec("MC_YAW_P", 2.8, 0.0, 5.0, "1/s", "yaw gain of attitude set points without a yaw rate"),
    ParameterSpec("MPC_THR_HOVER", HOVER_THROTTLE, HOVER_THROTTLE, HOVER_THROTTLE, "",
                  "the airframe's hover thrust (read only)"),
)
BY_NAME = {spec.name: spec for spec in SPECS}


def check_value(spec: ParameterSpec, value: object, where: str = "") -> float:
    """``value`` as ``spec`` takes it (a float; an integer parameter's value as a whole float), else a
    ConfigError naming the parameter (and ``where``) and the allowed range."""
    name = f"{where}{spec.name}"
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={shorten(value)} is not a number") from None
    if not (np.isfinite(v) and spec.lo <= v <= spec.hi):
        unit = f" {spec.unit}" if spec.unit else ""
        raise ConfigError(f"{name}={shorten(value)} must be in [{spec.lo:g}, {spec.hi:g}]{unit}")
    if spec.integer and (v != round(v) or (spec.choices and int(v) not in spec.choices)):
        allowed = ", ".join(map(str, spec.choices)) if spec.choices else "an integer"
        raise ConfigError(f"{name}={shorten(value)} must be one of {allowed}")
    return v


class ParameterTable:
    """Every vehicle's values (``SPECS``), read as ``table.get(name)`` (N,) or ``table.value(name, i)``."""

    def __init__(self, num_vehicles: int, overrides: dict[str, object] | None = None) -> None:
        self.num_vehicles = int(num_vehicles)
        self._values = {s.name: np.full(self.num_vehicles, float(s.default)) for s in SPECS}
        for name, value in (overrides or {}).items():
            spec = self.spec(name, "mavlink.parameters.")
            self._values[name][:] = check_value(spec, value, "mavlink.parameters.")

    @staticmethod
    def spec(name: str, where: str = "") -> ParameterSpec:
        """The parameter called ``name``, else a ConfigError listing the known ones."""
        spec = BY_NAME.get(name)
        if spec is None:
            raise ConfigError(f"{where}{shorten(name)}: no such parameter; one of {', '.join(BY_NAME)}")
        return spec

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(BY_NAME)

    def get(self, name: str) -> NDArray[np.float64]:
        """Every vehicle's value of ``name`` (N,) (a view: do not write)."""
        return self._values[name]

    def value(self, name: str, vehicle: int) -> float:
        return float(self._values[name][vehicle])

    def set(self, name: str, vehicle: int, value: object) -> float:
        """Set vehicle ``vehicle``'s ``name`` to ``value`` (checked: a ConfigError leaves it unchanged);
        returns the value stored."""
        v = check_value(self.spec(name), value)
        self._values[name][vehicle] = v
        return v

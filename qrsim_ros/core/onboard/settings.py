"""The ``mavlink:`` section of a scenario: every vehicle flown by its onboard autopilot (docs/MAVLINK.md).

With ``on`` every vehicle gets the onboard autopilot of ``core.onboard.autopilot`` (PX4's flight modes over
the velocity loops), vehicle ``i`` is reached as PX4 SITL instance ``i`` on MAVLink by the front ends'
adapters, and the Pelicans rest on the ground instead of leaving the area through it
(``Airframes.ground_rest``). The agent's actions no longer fly the vehicles: their autopilots do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from qrsim_ros.core.common.validation import ConfigError, flag, set_frozen_field
from qrsim_ros.core.onboard.parameters import ParameterTable


@dataclass(frozen=True)
class MavlinkParams:
    """on: the vehicles are flown by their onboard autopilots and speak MAVLink (default off).
    parameters: PX4 parameter values every vehicle starts with (``core.onboard.parameters.SPECS``, e.g.
    ``MIS_TAKEOFF_ALT: 10``); a client may change them at run time with the parameter protocol.
    network: the MAVLink endpoints bind every interface (0.0.0.0) instead of loopback only.
    """

    on: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)
    network: bool = False

    def __post_init__(self) -> None:
        set_frozen_field(self, "on", flag("on", self.on))
        set_frozen_field(self, "network", flag("network", self.network))
        if not isinstance(self.parameters, dict):
            raise ConfigError(f"parameters must be a mapping of PX4 names to values, got {self.parameters!r}")
        try:  # every name and value checked once, at load
            ParameterTable(1, self.parameters)
        except ConfigError as exc:
            raise ConfigError(str(exc).removeprefix("mavlink.")) from None

    def parameter_table(self, num_vehicles: int) -> ParameterTable:
        """The parameters of ``num_vehicles`` vehicles, each starting with ``parameters``."""
        return ParameterTable(num_vehicles, self.parameters)

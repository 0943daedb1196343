"""Faults: the fault kinds and their parameters, the triggers, the scenario's ``faults:``
list parsed into FaultSpecs, and the FaultSchedule that starts and ends them per vehicle (docs/FAULTS.md).

Pure scheduling: this package decides *when* which fault is active on which vehicle; the models that a
fault affects read the active faults. It imports only ``core.common``, so every model layer above it
(vehicles, world, sensors) and the engine may use it.
"""

from qrsim_ros.core.faults.kinds import KINDS
from qrsim_ros.core.faults.schedule import (
    NO_CONDITIONS,
    NO_EVENTS,
    ActiveFault,
    FaultConditions,
    FaultEvents,
    FaultSchedule,
)
from qrsim_ros.core.faults.spec import FaultSpec, parse_faults
from qrsim_ros.core.faults.triggers import AtStep, AtTime, Condition, Probabilistic

__all__ = [
    "KINDS",
    "NO_CONDITIONS",
    "NO_EVENTS",
    "ActiveFault",
    "AtStep",
    "AtTime",
    "Condition",
    "FaultConditions",
    "FaultEvents",
    "FaultSchedule",
    "FaultSpec",
    "Probabilistic",
    "parse_faults",
]

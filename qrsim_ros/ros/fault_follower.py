"""A node's copy of the active faults, from the ``faults`` each /sim/vehicle_status lists (``faults_listed``).

vehicle_dynamics owns the fault schedule; every other node that a fault acts on (the sensor nodes, the
flight_controller) keeps a ``FaultEffects.follower`` over its own models and hands it the tick's list
before it steps on that tick (docs/FAULTS.md "Graph"). The list is converted and applied only when it
changed, so a tick without a change costs one tuple comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qrsim_ros.core.engine.faults import FaultEffects
from qrsim_ros.ros.from_messages import active_faults_of


class FaultFollower:
    """Applies the active faults of each tick's status to ``effects`` (``FaultEffects.apply_active``)."""

    def __init__(self, effects: FaultEffects) -> None:
        self.effects = effects
        self._key: tuple[tuple[str, int, float], ...] = ()  # the set last applied (id, vehicle, since)

    def update(self, faults: Sequence[Any]) -> bool:
        """The tick's qrsim_ros/ActiveFault messages; True if the active set changed (and was applied)."""
        key = tuple((f.id, int(f.vehicle), float(f.since_s)) for f in faults)
        if key == self._key:
            return False
        self._key = key
        self.effects.apply_active(active_faults_of(faults))
        return True

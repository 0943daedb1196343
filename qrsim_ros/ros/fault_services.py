"""The fault services of a running graph: ``/sim/inject_fault`` and ``/sim/clear_fault`` (docs/FAULTS.md
"Graph"), served by vehicle_dynamics on its ``FaultEffects`` as ``Simulator.inject_fault`` /
``clear_fault``: a request acts at the next tick; a bad one answers success=false and a message naming
what is wrong (the scenario checker's words, by key path).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rclpy.node import Node

from qrsim_ros.core.common.validation import ConfigError, shorten
from qrsim_ros.core.engine.faults import FaultEffects
from qrsim_ros.ros.from_messages import fault_request
from qrsim_ros.srv import ClearFault, InjectFault


class FaultServices:
    """Serves the two services on ``faults``. ``now_s``: the simulated time of the current tick [s];
    ``stopping``: whether the node is shutting down (requests are then refused)."""

    def __init__(self, node: Node, faults: FaultEffects, names: Sequence[str], now_s: Callable[[], float],
                 stopping: Callable[[], bool]) -> None:
        self.faults = faults
        self.names = list(names)
        self._now_s = now_s
        self._stopping = stopping
        self._log = node.get_logger()
        node.create_service(InjectFault, "/sim/inject_fault", self.inject)
        node.create_service(ClearFault, "/sim/clear_fault", self.clear)

    def inject(self, request: InjectFault.Request, response: InjectFault.Response) -> InjectFault.Response:
        """/sim/inject_fault: one ``faults:`` item (YAML) added to the schedule, acting from the next tick."""
        response.success, response.id = False, ""
        if self._stopping():
            response.message = "shutting down (duration_s reached)"
            return response
        item = fault_request(request.fault_yaml)
        if isinstance(item, str):
            response.message = item
            return response
        now_s = self._now_s()
        try:
            fault_id = self.faults.inject(item, now_s)
        except (ConfigError, ValueError, TypeError, KeyError) as exc:  # the checker's message, by key path
            response.message = str(exc)
            return response
        response.success, response.id = True, fault_id
        response.message = f"fault {fault_id!r} added at t={now_s:.2f} s (acts from the next tick)"
        self._log.info(f"/sim/inject_fault: {response.message}")
        return response

    def clear(self, request: ClearFault.Request, response: ClearFault.Response) -> ClearFault.Response:
        """/sim/clear_fault: end the active faults of an id or a kind (on one vehicle, or all with -1) at
        the next tick."""
        response.success = False
        fault_id, kind = request.id.strip() or None, request.kind.strip() or None
        vehicle = None if request.vehicle == -1 else int(request.vehicle)
        try:
            cleared = self.faults.clear(fault_id, kind=kind, vehicle=vehicle)
        except ValueError as exc:
            response.message = str(exc)
            return response
        what = f"id={shorten(fault_id)}" if fault_id is not None else f"kind={shorten(kind)}"  # (80 chars)
        where = "" if vehicle is None else f" on vehicle {vehicle}"
        if not cleared:
            response.message = f"no active fault with {what}{where} (nothing to clear)"
            return response
        response.success = True
        response.message = ("ending at the next tick: "
                            + ", ".join(f"{f.id} ({f.kind}) on {self.names[f.vehicle]}" for f in cleared))
        self._log.info(f"/sim/clear_fault: {response.message}")
        return response

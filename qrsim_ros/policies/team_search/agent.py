"""One vehicle of the team: what it knows (from its sensors and the messages it hears) and the view its
own ``SearchPattern`` flies on."""

from __future__ import annotations

import math
from typing import Any

from qrsim_ros.policies.base import Array, AutopilotView
from qrsim_ros.policies.search_pattern import SearchPattern
from qrsim_ros.policies.team_search.messages import ProgressMessage, VehicleState


class OneVehicleView:
    """The view as one vehicle's ``SearchPattern`` sees it: its own action row only."""

    def __init__(self, view: AutopilotView, vehicle: int) -> None:
        self._view = view
        self.action_spec = {"vehicles": [vehicle], "modes": ["velocity"], "width": 3,
                            "columns": view.action_spec["columns"]}
        self.action_rows = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view, name)


class Agent:
    """What one vehicle knows and does (its knowledge comes from its sensors and the messages it hears)."""

    def __init__(self, row: int, vehicle: int, band: list[int], search: SearchPattern) -> None:
        self.row, self.vehicle = row, vehicle
        self.band = list(band)
        self.queue = list(band)          # lanes still to fly, in order
        self.claimed: set[int] = set()   # lanes taken over from gone vehicles
        self.done: set[int] = set()      # lanes known done (own and heard)
        self.gone_announced: set[int] = set()  # vehicles known gone by announcement (gossiped)
        self.timed_out: set[int] = set()       # vehicles silent for lost_timeout_s (local)
        self.heard_s: dict[int, float] = {}
        self.heard: dict[int, ProgressMessage] = {}   # the last message of each vehicle
        self.found: list[tuple[float, float]] = []  # persons known confirmed (own and heard)
        self.confirmed: list[tuple[float, float]] = []  # by this vehicle
        self.search = search
        self.state = VehicleState.SEARCHING
        self.lane: int | None = None      # the lane being flown
        self.rendezvous_left_s = math.nan
        self.last_broadcast_s = -math.inf
        self.charge_history: list[tuple[float, float]] = []
        self.received = 0
        self.reassigned_from: dict[int, list[int]] = {}  # gone vehicle -> lanes this agent took
        self.airborne = False             # climbed to its layer after the take-off
        self.takeoff_ne: Array | None = None  # where it took off (its landing spot)
        self.landing_home = False         # over its take-off spot, descending onto it
        self.landed_home = False          # landed there (motionless from then on)
        self.follow_dir_ne: Array | None = None  # the formation's "behind" (unit, NE)

    @property
    def gone(self) -> set[int]:
        return self.gone_announced | self.timed_out

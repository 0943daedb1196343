"""What vehicle_dynamics' next step waits for: lockstep inputs, first commands, the consumers' window.

``lockstep: true``: step k+1 waits for the wind of t_k of every valid vehicle (not in still air) and,
for the valid vehicles flown through the flight_controller (a control mode other than ``attitude``),
their ``cmd/attitude`` stamped t_k. The clock also runs at most ``lockstep_window_ticks`` ahead of the
slowest ground-truth consumer (their ``/sim/tick_progress``; the plan's ``lockstep_consumers`` must each
have reported), and at ``duration_s`` every consumer is waited for to handle the last tick.
``lockstep: false``: nothing is awaited; the latest inputs are held. ``wait_for_commands: true`` holds
the clock at tick 0 until every valid vehicle has a command (a deterministic start for tests and batch
runs whose commands are published before the start).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from rclpy.node import Node

from qrsim_ros.core.common.ticks import BASE_DT_S, TICK_NS
from qrsim_ros.msg import TickProgress
from qrsim_ros.ros.command_intake import CommandIntake
from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC
from qrsim_ros.ros.qos import QOS_TICK_PROGRESS
from qrsim_ros.ros.wind_intake import WindIntake


class LockstepGate:
    """What step k+1 of the episode waits for (see the module docstring). ``controlled`` (N,) bool: the
    vehicles whose cmd/attitude lockstep awaits; ``still_air``: no wind is awaited."""

    def __init__(self, node: Node, params: Any, names: Sequence[str], controlled: np.ndarray,
                 still_air: bool, commands: CommandIntake, wind: WindIntake,
                 on_progress: Callable[[], None]) -> None:
        self.params = params
        self.names = list(names)
        self.controlled = controlled
        self.still_air = still_air
        self.commands = commands
        self.wind = wind
        #: stamp of the last awaited command of t_k seen per vehicle [ns] (even a rejected one: it leaves
        #: the held command for the tick)
        self.command_seen_ns = np.full(len(names), -1, np.int64)
        #: the ground-truth consumers' progress: node -> (episode, tick) of the last tick handled
        self.progress: dict[str, tuple[int, int]] = {}
        self.progress_resubscriptions = 0
        self._node = node
        self._on_progress = on_progress
        self._progress_sub = (self._subscribe_progress()
                              if params.lockstep and params.lockstep_window_ticks > 0 else None)

    def restart_episode(self) -> None:
        self.command_seen_ns[:] = -1

    def awaits_command(self, i: int, t_ns: int, k: int) -> bool:
        """Whether vehicle ``i``'s command stamped ``t_ns`` is one lockstep awaits for tick ``k`` (noted)."""
        awaited = self.params.lockstep and self.controlled[i] and t_ns == k * TICK_NS
        if awaited:
            self.command_seen_ns[i] = t_ns
        return bool(awaited)

    def awaiting_first_commands(self, valid: np.ndarray) -> bool:
        return bool(self.params.wait_for_commands and not self.commands.held.present[valid].all())

    def ready(self, k: int, episode: int, valid: np.ndarray) -> bool:
        """Whether step k+1 has every input it waits for."""
        if self.awaiting_first_commands(valid):
            return False
        if not self.params.lockstep:
            return True
        if not self.still_air and np.any(valid & (self.wind.tick != k)):
            return False
        if np.any(valid & self.controlled & (self.command_seen_ns != k * TICK_NS)):
            return False
        return not self.lagging(k + 1, self.params.lockstep_window_ticks, episode)

    def lagging(self, tick: int, window: int, episode: int) -> list[str]:
        """Ground-truth consumers more than ``window`` ticks behind ``tick`` of ``episode`` (one of an
        older episode is behind; the planned ones that have not reported yet count once ``tick`` is past
        the window). Empty when the window is off."""
        p = self.params
        if not p.lockstep or p.lockstep_window_ticks <= 0:
            return []
        oldest = tick - window
        behind = [f"{node}@t={their_tick * BASE_DT_S:.2f}"
                  for node, (their_episode, their_tick) in self.progress.items()
                  if their_episode < episode or (their_episode == episode and their_tick < oldest)]
        unheard = p.lockstep_consumers - len(self.progress)
        if unheard > 0 and oldest >= 0:
            behind.append(f"{unheard} more ground-truth consumer{'s' * (unheard > 1)} (none reported yet)")
        return behind

    def missing(self, k: int, episode: int, valid: np.ndarray, consumers: bool = True) -> list[str]:
        """What step k+1 waits for: lockstep inputs of tick k, first commands, and (``consumers``) the
        ground-truth consumers behind the lockstep window."""
        t = f"@t={k * BASE_DT_S:.2f}"
        missing = [f"{self.names[i]}/{topic}{t}" for topic, i in self.late_inputs(k, valid)]
        if consumers:  # (none outside lockstep)
            window = self.params.lockstep_window_ticks
            missing += [f"the consumer {who} (window {window} ticks)"
                        for who in self.lagging(k + 1, window, episode)]
        if self.params.wait_for_commands:
            first = " (a first command)"
            missing += [f"{self.names[i]}/cmd/attitude{first}" if not self.commands.is_rotor[i] else
                        f"{self.names[i]}/cmd/attitude, cmd/rates_thrust or cmd/motors{first}"
                        for i in np.flatnonzero(valid & ~self.commands.held.present)]
        return missing

    def late_inputs(self, k: int, valid: np.ndarray) -> list[tuple[str, int]]:
        """The lockstep inputs of tick k not received yet, as (topic under the vehicle's namespace,
        vehicle index): ``("wind", i)`` and ``("cmd/attitude", i)``."""
        if not self.params.lockstep:
            return []
        windless = valid & (self.wind.tick != k)
        late = [] if self.still_air else [("wind", int(i)) for i in np.flatnonzero(windless)]
        unanswered = valid & self.controlled & (self.command_seen_ns != k * TICK_NS)
        return late + [("cmd/attitude", int(i)) for i in np.flatnonzero(unanswered)]

    def note_progress(self, msg: TickProgress) -> None:
        self.progress[msg.node] = (int(msg.episode), int(msg.tick))

    def resubscribe_progress(self) -> None:
        """Read the consumers' progress reports again from a new subscription: they are latched (the last
        ones of each consumer), so it gets the latest at once. A CI run under load waited 8 minutes for two
        consumers whose reports of later ticks had been sent and were still latched (a probe read them):
        the old subscription no longer delivered them. A slow consumer is only re-read, not hurried."""
        if self._progress_sub is None:
            return
        self._node.destroy_subscription(self._progress_sub)
        self._progress_sub = self._subscribe_progress()
        self.progress_resubscriptions += 1

    def _subscribe_progress(self) -> object:
        def on_progress(msg: TickProgress) -> None:
            self.note_progress(msg)
            self._on_progress()
        return self._node.create_subscription(TickProgress, TICK_PROGRESS_TOPIC, on_progress,
                                              QOS_TICK_PROGRESS)


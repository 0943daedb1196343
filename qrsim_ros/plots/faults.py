"""Fault intervals of a recorded run, rebuilt from the ``/sim/faults`` snapshots (no rclpy, no matplotlib).

``/sim/faults`` (qrsim_ros/ActiveFaults, latched) is published by vehicle_dynamics at tick 0 of every
episode and at every tick the active set changes: each message is the whole active set at that tick.
A fault (its id, vehicle and start time ``since_s``: a repeated fault fires again with a new start) is
active from its ``since_s`` until the first later snapshot of the same episode that no longer holds it
(that snapshot's stamp: the actual end, also when it was cleared early), or until the episode ends (a
reset ends every fault) or the recording ends (``end_s`` NaN: still active in the last message).

Times are simulated seconds. Episodes are laid end to end as the figures' other time axes are: an
episode's ``since_s`` and stamps are shifted by the start of that episode on the time axis of the
vehicle topics (``episode_starts_s``, from bagdata's timelines), or, when those have fewer episodes, by
the last ``/sim/faults`` stamp of the episode before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FaultInterval:
    """One firing of one fault on one vehicle, on the run's time axis [s]."""

    id: str
    vehicle: int           # 0-based vehicle index (ActiveFault.vehicle)
    kind: str
    params_yaml: str       # the kind's parameters, a YAML flow mapping ("{}": none)
    start_s: float         # simulated time it became active [s]
    end_s: float           # when it ended [s]; NaN: still active when the recording ends
    planned_end_s: float   # its until_s on the same axis [s]; NaN: permanent
    episode: int           # 0-based episode index in the bag (order of appearance)

    @property
    def name(self) -> str:
        """The vehicle's namespace, ``uav<vehicle + 1>`` (ros.names.vehicle_namespace)."""
        return f"uav{self.vehicle + 1}"

    @property
    def label(self) -> str:
        """``kind (id)``, or just the kind when the id is the default ``<kind>.<index>``."""
        default = self.id.startswith(f"{self.kind}.") and self.id[len(self.kind) + 1:].isdigit()
        return self.kind if default else f"{self.kind} ({self.id})"


@dataclass
class _Open:
    """A fault seen active and not yet seen ending (times within its episode [s])."""

    fault: Any
    since_s: float
    until_s: float


@dataclass
class FaultLog:
    """Collects ``/sim/faults`` messages in log order and turns them into ``FaultInterval``s."""

    messages: int = 0
    _episode_field: int | None = None              # ActiveFaults.episode of the current episode
    _episode: int = -1                             # its index in the bag (order of appearance)
    _last_stamp_s: float = -math.inf
    _episode_last_s: list[float] = field(default_factory=list)  # last stamp of each episode [s]
    _open: dict[tuple[str, int, float], _Open] = field(default_factory=dict)
    # (episode, fault, since [s], until [s], end within the episode [s] or None: to the episode's end)
    _closed: list[tuple[int, Any, float, float, float | None]] = field(default_factory=list)

    def add(self, stamp_s: float, episode: int, faults: Sequence[Any]) -> None:
        """One ActiveFaults message: its header stamp [s] (within its episode), its ``episode`` field and
        its ``faults`` (ActiveFault: id, vehicle, kind, params_yaml, since_s, until_s)."""
        self.messages += 1
        restarted = stamp_s < self._last_stamp_s
        if self._episode_field is None or restarted or episode != self._episode_field:
            self._close_all()
            self._episode += 1
            self._episode_field = episode
            self._episode_last_s.append(stamp_s)
        self._last_stamp_s = stamp_s
        self._episode_last_s[-1] = max(self._episode_last_s[-1], stamp_s)
        now: dict[tuple[str, int, float], Any] = {}
        for f in faults:
            now[(str(f.id), int(f.vehicle), float(f.since_s))] = f
        for key in [k for k in self._open if k not in now]:
            self._close(key, stamp_s)
        for key, f in now.items():
            if key not in self._open:
                self._open[key] = _Open(f, float(f.since_s), float(f.until_s))

    def _close(self, key: tuple[str, int, float], end_s: float | None) -> None:
        o = self._open.pop(key)
        self._closed.append((self._episode, o.fault, o.since_s, o.until_s, end_s))

    def _close_all(self) -> None:
        """End every open fault with its episode (a reset: they end where the next episode starts)."""
        for key in list(self._open):
            self._close(key, None)

    def intervals(self, episode_starts_s: Sequence[float] = ()) -> list[FaultInterval]:
        """Every interval, by start time then vehicle. ``episode_starts_s[e]``: where episode e starts on
        the run's time axis [s] (bagdata's timelines); missing entries are taken from these messages."""
        starts = list(episode_starts_s)
        for e in range(len(starts), self._episode + 1):
            starts.append(0.0 if e == 0 else starts[e - 1] + self._episode_last_s[e - 1])
        rows = list(self._closed) + [(self._episode, o.fault, o.since_s, o.until_s, math.nan)
                                     for o in self._open.values()]
        out = []
        for episode, f, since, until, end in rows:
            offset = starts[episode]
            if end is None:  # ended by a reset: at the next episode's start (NaN if unknown)
                end_s = starts[episode + 1] if episode + 1 < len(starts) else math.nan
            else:
                end_s = offset + end
            out.append(FaultInterval(str(f.id), int(f.vehicle), str(f.kind), str(f.params_yaml),
                                     offset + since, end_s, offset + until, episode))
        out.sort(key=lambda i: (i.start_s, i.vehicle, i.id))
        return out

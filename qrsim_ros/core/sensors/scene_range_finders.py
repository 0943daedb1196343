"""Range finders of N vehicles over the 3-D scene (beyond QRSim; docs/SCENE.md): a downward laser
altimeter and optional forward, backward, left, right and upward beams, the obstacle-guarding range
sensors of multi-UAV searches (AURIS paper, section on the team's platforms).

Each beam is a single ray from the vehicle's centre along a fixed body (FRD) direction (``BEAM_AXES``),
cast into the scene (ground, obstacles, persons). The range is the first hit's distance [m]; a beam
that hits nothing within ``max_range_m`` gives no return. Readings, noise and limits are those of the
downward range finder (``range_finder.reading_m``: Gaussian noise from the vehicle's own stream
``range_finders.<beam>``, dropouts from ``range_finders.<beam>.dropout``, REP-117 infinities), sampled
and held at each beam's ``dt_s``. The beam is the centre ray of its cone (``field_of_view_rad`` is
reported, not integrated).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.frames import Array, body_to_ned, dcm_from_state
from qrsim_ros.core.common.noise import PerVehicleNormals
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError, ticks_per_update
from qrsim_ros.core.sensors.range_finder import RangeFinderParams, reading_m
from qrsim_ros.core.world.scene import Scene

#: Every beam's direction in the body frame (FRD).
BEAM_AXES = {
    "down": (0.0, 0.0, 1.0),
    "up": (0.0, 0.0, -1.0),
    "front": (1.0, 0.0, 0.0),
    "back": (-1.0, 0.0, 0.0),
    "right": (0.0, 1.0, 0.0),
    "left": (0.0, -1.0, 0.0),
}
STREAM = "range_finders"


@dataclass(frozen=True)
class RangeFindersParams:
    """The beams on board (each a downward range finder's parameters, ``RangeFinderParams``; a beam not
    given is not fitted). Default: the downward one only."""

    down: RangeFinderParams | None = field(default_factory=RangeFinderParams)
    up: RangeFinderParams | None = None
    front: RangeFinderParams | None = None
    back: RangeFinderParams | None = None
    right: RangeFinderParams | None = None
    left: RangeFinderParams | None = None

    def __post_init__(self) -> None:
        if not self.beams:
            raise ConfigError("range_finders: no beam fitted (give at least one of "
                              f"{', '.join(BEAM_AXES)})")

    @property
    def beams(self) -> dict[str, RangeFinderParams]:
        """The fitted beams by name, in BEAM_AXES order."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name in BEAM_AXES and getattr(self, f.name) is not None}


class SceneRangeFinders:
    """The fitted beams of N vehicles over a scene (see the module docstring)."""

    def __init__(self, num_vehicles: int, params: RangeFindersParams, streams: RandomStreams,
                 scene: Scene) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        self.num_vehicles = n = int(num_vehicles)
        self.params = params
        self.scene = scene
        self.beams = params.beams
        self._ticks = {b: ticks_per_update(f"range_finders.{b}.dt_s", p.dt_s) for b, p in self.beams.items()}
        self._normals = {b: PerVehicleNormals(streams.per_vehicle(f"{STREAM}.{b}", n), 1) for b in self.beams}
        self._dropouts = {b: streams.per_vehicle(f"{STREAM}.{b}.dropout", n) for b in self.beams}
        self._range = {b: np.full(n, np.nan) for b in self.beams}
        #: the beams that updated at the last step
        self.updated: tuple[str, ...] = ()

    def range_m(self, beam: str) -> Array:
        """Latest reading of ``beam`` per vehicle (N,) [m] (a copy): +inf no return or beyond the range,
        -inf closer than the minimum, NaN before the first reading."""
        return self._range[beam].copy()

    def reset(self, x: ArrayLike) -> None:
        """Readings of every beam at once from the initial states (the episode's tick 0)."""
        self._measure(tuple(self.beams), x, None)

    def step(self, k: int, x: ArrayLike, valid: ArrayLike | None = None) -> bool:
        """Measure the beams due at tick k from states x (N, 13); invalid vehicles hold their readings.
        Returns whether any beam updated."""
        due = tuple(b for b in self.beams if k % self._ticks[b] == 0)
        if due:
            self._measure(due, x, valid)
        else:
            self.updated = ()
        return bool(due)

    def _measure(self, due: tuple[str, ...], x: ArrayLike, valid: ArrayLike | None) -> None:
        x = np.atleast_2d(np.asarray(x, float))
        n = self.num_vehicles
        dcm = dcm_from_state(x)
        axes = np.array([BEAM_AXES[b] for b in due])  # (B, 3) body
        dirs = np.stack([body_to_ned(dcm, np.broadcast_to(a, (n, 3))) for a in axes])  # (B, N, 3)
        origins = np.broadcast_to(x[:, :3], (len(due), n, 3))
        far = max(self.beams[b].max_range_m for b in due) * 1.01
        hits = self.scene.cast(origins.reshape(-1, 3), dirs.reshape(-1, 3), far)
        true_m = hits.range_m.reshape(len(due), n)
        keep = np.ones(n, bool) if valid is None else np.asarray(valid, bool)
        for j, b in enumerate(due):
            r = reading_m(true_m[j], self.beams[b], self._normals[b], self._dropouts[b])
            self._range[b] = np.where(keep, r, self._range[b])
        self.updated = due

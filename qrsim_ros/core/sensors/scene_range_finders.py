"""Range finders of N vehicles over the 3-D scene (beyond QRSim; docs/SCENE.md): a downward laser
altimeter and optional forward, backward, left, right and upward beams, and three beams 45 degrees off
the nose (front-left, front-right, front-down): the obstacle-guarding range sensors of multi-UAV searches
(AURIS paper, section 4.2; the guard is ``core.mission.guard``).

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
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.frames import Array, body_to_ned, dcm_from_state
from qrsim_ros.core.common.noise import PerVehicleNormals
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError, ticks_per_update
from qrsim_ros.core.sensors.range_finder import RangeFinderParams, reading_m
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED
from qrsim_ros.core.world.scene import Scene

_D = float(np.sqrt(0.5))
#: Every beam's direction in the body frame (FRD), unit vectors.
BEAM_AXES = {
    "down": (0.0, 0.0, 1.0),
    "up": (0.0, 0.0, -1.0),
    "front": (1.0, 0.0, 0.0),
    "back": (-1.0, 0.0, 0.0),
    "right": (0.0, 1.0, 0.0),
    "left": (0.0, -1.0, 0.0),
    "front_left": (_D, -_D, 0.0),   # 45 deg left of the nose, level with it
    "front_right": (_D, _D, 0.0),   # 45 deg right of the nose
    "front_down": (_D, 0.0, _D),    # 45 deg below the nose
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
    front_left: RangeFinderParams | None = None
    front_right: RangeFinderParams | None = None
    front_down: RangeFinderParams | None = None

    def __post_init__(self) -> None:
        if not self.beams:
            raise ConfigError("range_finders: no beam fitted (give at least one of "
                              f"{', '.join(BEAM_AXES)})")

    @property
    def beams(self) -> dict[str, RangeFinderParams]:
        """The fitted beams by name, in BEAM_AXES order."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name in BEAM_AXES and getattr(self, f.name) is not None}


class BeamReadings(NamedTuple):
    """The latest readings of some beams, with their geometry (what an autopilot may read).

    names: the beams (B,). directions_frd: their unit directions in the body frame FRD (B, 3).
    range_m: readings (N, B) [m]: +inf no return or beyond the beam's ``max_range_m``, -inf closer than
    its ``min_range_m`` (REP-117), NaN before the first reading. max_range_m: each beam's (B,) [m].
    """

    names: tuple[str, ...]
    directions_frd: Array
    range_m: Array
    max_range_m: Array


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

    def readings(self, beams: tuple[str, ...] | None = None) -> BeamReadings:
        """The latest readings of ``beams`` (None: every fitted beam), as copies (``BeamReadings``)."""
        names = tuple(self.beams) if beams is None else tuple(beams)
        unknown = [b for b in names if b not in self.beams]
        if unknown:
            raise KeyError(f"range_finders: beam(s) {', '.join(unknown)} not fitted "
                           f"(fitted: {', '.join(self.beams)})")
        return BeamReadings(names, np.array([BEAM_AXES[b] for b in names], float).reshape(-1, 3),
                            np.stack([self._range[b] for b in names], axis=1) if names
                            else np.zeros((self.num_vehicles, 0)),
                            np.array([self.beams[b].max_range_m for b in names], float))

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
        origins = np.broadcast_to(x[:, STATE_POSITION_NED], (len(due), n, 3))
        far = max(self.beams[b].max_range_m for b in due) * 1.01
        hits = self.scene.cast(origins.reshape(-1, 3), dirs.reshape(-1, 3), far)
        true_m = hits.range_m.reshape(len(due), n)
        keep = np.ones(n, bool) if valid is None else np.asarray(valid, bool)
        for j, b in enumerate(due):
            r = reading_m(true_m[j], self.beams[b], self._normals[b], self._dropouts[b])
            self._range[b] = np.where(keep, r, self._range[b])
        self.updated = due

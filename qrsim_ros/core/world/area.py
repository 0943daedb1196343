"""Flight areas (spec 4.3): QRSim's ``BoxArea`` and ``BoxWithPersonsArea``. Shared by all vehicles.

Limits are ``[xmin xmax ymin ymax zmin zmax]`` in the scenario's NED frame [m]; ``zmax`` is the
ground (QRSim ``limits(6)``, 0 in every task) and the reference of the wind's height. The geodetic
origin of the NED frame is a ``geodesy.GeodeticOrigin`` (QRSim's ``originutmcoords``).

``BoxWithPersonsArea`` (search and rescue) adds a terrain class map (``terrain.PourTerrain``) and
persons lying on the ground, and referees their discovery at the area rate (1 s in the SR tasks):
a vehicle finds a not-yet-found person when its true 3-D distance to the person's centre is
<= ``found_distance_m`` (5 m) and its true body speed ``||X[6:9]||`` is <= ``found_speed_mps``
(0.1 m/s). Only valid vehicles find.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN, GeodeticOrigin
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import (
    ConfigError,
    area_limits,
    finite,
    non_negative,
    positive,
    ticks_per_update,
)
from qrsim_ros.core.vehicles.pelican import STATE_POSE_AND_VELOCITY, STATE_POSITION_NED, STATE_VELOCITY_FRD
from qrsim_ros.core.world.terrain import TERRAIN_TYPES, PourTerrain, check_class_percentages, make_terrain

#: Fraction of the x/y extent (centred) in which persons are placed (QRSim: lph +/- 0.4 range).
PERSONS_CENTRAL_FRACTION = 0.8
#: Default bound on rejection-sampling tries per person.
MAX_PLACEMENT_TRIES = 100_000


class BoxArea:
    """A box-shaped flight area (QRSim ``BoxArea``): limits and origin, nothing to step."""

    def __init__(self, limits_ned: ArrayLike, origin: GeodeticOrigin = QRSIM_ORIGIN) -> None:
        self.limits = area_limits("area.limits", limits_ned)
        if not isinstance(origin, GeodeticOrigin):
            raise ConfigError(f"area.origin={origin!r} must be a GeodeticOrigin")
        self.origin = origin

    @property
    def ground_z_m(self) -> float:
        """NED z of the ground plane [m] (``limits[5]``): the wind/turbulence ``z_origin_m``."""
        return float(self.limits[5])

    def contains(self, points_ned: ArrayLike) -> NDArray[np.bool_]:
        """Whether points (M, 3) [m, NED] lie inside the limits (bounds included)."""
        p = np.atleast_2d(np.asarray(points_ned, float))
        lo, hi = self.limits[0::2], self.limits[1::2]
        return np.all((p >= lo) & (p <= hi), axis=1)

    def reset(self) -> None:
        """Nothing to redraw in a plain box."""

    def step(self, k: int, x_true: ArrayLike | None = None, valid: ArrayLike | None = None) -> bool:
        """Static area: never updates (returns False)."""
        return False


@dataclass(frozen=True)
class PersonsSettings:
    """The persons and terrain settings of a search-and-rescue area (spec 4.3, 5.3; defaults = the SR
    tasks), shared by ``PersonsAreaParams`` and the scenario's ``area`` section; checked by
    ``PersonsAreaParams``.

    dt_s: period of the found check [s] (multiple of 0.02; SR tasks 1 s).
    num_persons_range: (min, max) number of persons, drawn uniformly (inclusive) at each reset.
    person_size_m: edge of a person's square footprint [m].
    found_distance_m, found_speed_mps: the found thresholds (QRSim ``personfound*threshold``).
    terrain_type: QRSim ``terrain.type`` (only "PourTerrain").
    class_percentages: area fractions of terrain classes 1..K (QRSim ``terrain.classpercentages``).
    person_in_class_prob: probability that a person lies on class 1..K (sum <= 1; the rest on 0).
    """

    dt_s: float = 1.0
    num_persons_range: tuple[int, int] = (5, 10)
    person_size_m: float = 0.5
    found_distance_m: float = 5.0
    found_speed_mps: float = 0.1
    terrain_type: str = "PourTerrain"
    class_percentages: tuple[float, ...] = (0.2, 0.05)
    person_in_class_prob: tuple[float, ...] = (0.0, 0.0)

    def persons_settings(self) -> dict[str, Any]:
        """These settings by field name (to build a ``PersonsAreaParams`` from a subclass)."""
        return {f.name: getattr(self, f.name) for f in fields(PersonsSettings)}


@dataclass(frozen=True)
class PersonsAreaParams(PersonsSettings):
    """Configuration of a ``BoxWithPersonsArea`` (spec 4.3, 5.3): the ``PersonsSettings`` and these.

    limits_ned: [xmin xmax ymin ymax zmin zmax] [m].
    origin: geodetic origin of the NED frame.
    max_placement_tries: bound on rejection-sampling draws per person.
    """

    limits_ned: tuple[float, ...] = (-122.47448713915891, 122.47448713915891,
                                     -122.47448713915891, 122.47448713915891, -80.0, 0.0)
    origin: GeodeticOrigin = QRSIM_ORIGIN
    max_placement_tries: int = MAX_PLACEMENT_TRIES

    def __post_init__(self) -> None:
        area_limits("area.limits", self.limits_ned)
        ticks_per_update("area.dt_s", self.dt_s)
        r = np.asarray(self.num_persons_range)
        if r.shape != (2,) or not np.all(np.mod(r, 1) == 0) or r[0] < 0 or r[1] < r[0]:
            raise ConfigError(
                f"area.numpersonsrange={np.asarray(self.num_persons_range).tolist()!r} must be two integers "
                "0 <= min <= max"
            )
        positive("area.personsize", finite("area.personsize", self.person_size_m))
        non_negative("area.personfounddistancethreshold", finite("area.personfounddistancethreshold",
                                                                 self.found_distance_m))
        non_negative("area.personfoundspeedthreshold", finite("area.personfoundspeedthreshold",
                                                              self.found_speed_mps))
        if self.terrain_type not in TERRAIN_TYPES:
            raise ConfigError(
                f"area.terrain.type={self.terrain_type!r} is not a known terrain type {TERRAIN_TYPES}"
            )
        p = check_class_percentages("area.terrain.classpercentages", self.class_percentages)
        q = np.atleast_1d(np.asarray(self.person_in_class_prob, float))
        if q.shape != p.shape or not np.all(np.isfinite(q)) or np.any(q < 0) or q.sum() > 1.0:
            raise ConfigError(
                f"area.personinclassprob={np.asarray(self.person_in_class_prob).tolist()!r} must have one "
                f"probability >= 0 per terrain class ({p.size}) with sum <= 1"
            )
        impossible = (q > 0) & (p == 0)
        if impossible.any():
            c = int(np.argmax(impossible)) + 1
            raise ConfigError(
                f"area.personinclassprob puts persons on terrain class {c}, which has 0 % of the area"
            )
        if isinstance(self.max_placement_tries, bool) or int(self.max_placement_tries) < 1:
            raise ConfigError(f"area.max_placement_tries={self.max_placement_tries!r} must be >= 1")


class BoxWithPersonsArea(BoxArea):
    """Search-and-rescue area (spec 4.3): terrain classes, persons, and the found rule.

    Streams: persons from ``streams.get(name + ".persons")``, terrain from ``name + ".terrain"``.
    ``reset()`` pours a new terrain and places new persons (the simulator calls it after
    construction). ``step(k, x_true, valid)`` applies the found rule on ticks ``k % ticks == 0``.
    """

    def __init__(self, num_vehicles: int, params: PersonsAreaParams | None = None,
                 streams: RandomStreams | None = None, name: str = "area") -> None:
        self.params = params or PersonsAreaParams()
        super().__init__(self.params.limits_ned, self.params.origin)
        if num_vehicles < 1:
            raise ConfigError(f"area num_vehicles={num_vehicles!r} must be >= 1")
        self.num_vehicles = int(num_vehicles)
        self.name = name
        self.ticks = ticks_per_update("area.dt_s", self.params.dt_s)
        self._class_prob = np.asarray(self.params.person_in_class_prob, float)
        streams = streams or RandomStreams(0)
        self._rng = streams.get(f"{name}.persons")
        self.terrain: PourTerrain = make_terrain(
            self.params.terrain_type, self.limits, self.params.class_percentages,
            streams.get(f"{name}.terrain"),
        )
        self._centers = np.zeros((0, 3))
        self._classes = np.zeros(0, dtype=np.int_)
        self._found = np.zeros(0, dtype=bool)
        self._just_found = np.zeros((self.num_vehicles, 0), dtype=bool)

    def reseed(self, streams: RandomStreams) -> None:
        """Replace the persons and terrain streams (QRSim ``resetSeed``); call ``reset()`` afterwards."""
        self._rng = streams.get(f"{self.name}.persons")
        self.terrain.reseed(streams.get(f"{self.name}.terrain"))

    # --- persons --------------------------------------------------------------------------------
    @property
    def num_persons(self) -> int:
        return int(self._centers.shape[0])

    persons_position_ned = copy_of("_centers", "Person centres (P, 3) [m, NED], on the ground plane z = "
                                               "``ground_z_m``.")
    persons_class = copy_of("_classes", "Terrain class (P,) each person was placed on.")

    @property
    def person_size_m(self) -> float:
        return float(self.params.person_size_m)

    @property
    def persons_bounding_boxes(self) -> Array:
        """Footprint corners (P, 4, 3) [m, NED]: centre + s/2 [(1,-1), (1,1), (-1,-1), (-1,1)] in x, y."""
        half = 0.5 * self.params.person_size_m
        offsets = half * np.array([[1.0, -1.0, 0.0], [1.0, 1.0, 0.0], [-1.0, -1.0, 0.0], [-1.0, 1.0, 0.0]])
        return self._centers[:, None, :] + offsets[None, :, :]

    found = copy_of("_found", "Per person: found by any vehicle since the last reset (P,).")

    def persons_just_found(self) -> NDArray[np.bool_]:
        """(vehicles x persons) flags of the finds since the last call, then cleared.

        A person is flagged once, at the update where it is first found, for every vehicle that
        satisfied the rule at that update (QRSim ``getPersonsJustFound``; the SR reward sums it).
        Finds accumulate until read (QRSim re-zeroes the matrix at every area update, so a reader
        slower than the area rate lost them).
        """
        out = self._just_found.copy()
        self._just_found[:] = False
        return out

    def terrain_class_at(self, points_ned: ArrayLike) -> NDArray[np.int_]:
        """Terrain class (M,) under points (M, 2 or 3) [m, NED] (QRSim ``getTerrainClass``)."""
        return self.terrain.class_at(points_ned)

    def draw_person_class(self) -> int:
        """Terrain class of a new person (spec 4.3): class c >= 1 with probability p_c, 0 otherwise.

        QRSim's rule: ``pacc(i) = sum_{j >= i} p_j``, r ~ U(0, 1]; class = (first i with pacc(i) < r) - 1
        (1-based i), or K if there is none.
        """
        pacc = np.cumsum(self._class_prob[::-1])[::-1]
        r = 1.0 - float(self._rng.random())
        below = np.flatnonzero(pacc < r)
        return int(below[0]) if below.size else int(pacc.size)

    def _place(self, tclass: int) -> Array:
        lo, hi = self.limits[0:4:2], self.limits[1:4:2]
        centre, half_span = 0.5 * (lo + hi), 0.5 * PERSONS_CENTRAL_FRACTION * (hi - lo)
        for _ in range(int(self.params.max_placement_tries)):
            xy = centre + half_span * (2.0 * self._rng.random(2) - 1.0)
            if int(self.terrain.class_at(xy[None, :])[0]) == tclass:
                return np.array([xy[0], xy[1], self.ground_z_m])
        raise ConfigError(
            f"area: no cell of terrain class {tclass} found in the central "
            f"{PERSONS_CENTRAL_FRACTION:.0%} of the area after {self.params.max_placement_tries} tries "
            f"(classpercentages {list(self.params.class_percentages)}, "
            f"personinclassprob {list(self.params.person_in_class_prob)})"
        )

    def reset(self) -> None:
        """New terrain, then new persons (number, classes, positions), all seeded (spec 4.3)."""
        self.terrain.reset()
        lo, hi = self.params.num_persons_range
        count = int(self._rng.integers(int(lo), int(hi) + 1))
        centers, classes = [], []
        for _ in range(count):
            tclass = self.draw_person_class()
            centers.append(self._place(tclass))
            classes.append(tclass)
        self._set(np.array(centers).reshape(count, 3), np.array(classes, dtype=np.int_))

    def set_persons(self, positions_ned: ArrayLike, classes: ArrayLike | None = None) -> None:
        """Place persons explicitly (tests, regression, replays): positions (P, 2 or 3) [m, NED];
        z is set to the ground. ``classes`` default to the terrain class under each person.
        Clears the found flags."""
        pos = np.asarray(positions_ned, float)
        if pos.ndim == 1 and pos.size == 0:
            pos = pos.reshape(0, 2)
        if pos.ndim != 2 or pos.shape[1] not in (2, 3) or not np.all(np.isfinite(pos)):
            raise ValueError(f"person positions must be finite with shape (P, 2) or (P, 3), got {pos.shape}")
        centers = np.column_stack([pos[:, :2], np.full(pos.shape[0], self.ground_z_m)])
        if classes is None:
            cls = self.terrain.class_at(centers) if len(centers) else np.zeros(0, dtype=np.int_)
        else:
            cls = np.asarray(classes, dtype=np.int_).reshape(-1)
            if cls.shape != (pos.shape[0],) or np.any((cls < 0) | (cls >= self.terrain.num_classes)):
                raise ValueError(
                    f"classes must be {pos.shape[0]} integers in 0..{self.terrain.num_classes - 1}"
                )
        self._set(centers, cls)

    def _set(self, centers: Array, classes: NDArray[np.int_]) -> None:
        self._centers = centers
        self._classes = classes
        self._found = np.zeros(len(centers), dtype=bool)
        self._just_found = np.zeros((self.num_vehicles, len(centers)), dtype=bool)

    # --- refereeing -----------------------------------------------------------------------------
    def step(self, k: int, x_true: ArrayLike | None = None, valid: ArrayLike | None = None) -> bool:
        """On ticks ``k % ticks == 0``, apply the found rule to the true states x_true (N, 13) of the
        valid vehicles (N,) (default all valid). Returns whether it updated."""
        if k % self.ticks != 0:
            return False
        if x_true is None:
            raise ValueError("BoxWithPersonsArea.step needs the true states on its update ticks")
        x = np.atleast_2d(np.asarray(x_true, float))
        if x.shape[0] != self.num_vehicles or x.shape[1] < 9:
            raise ValueError(f"x_true must have shape ({self.num_vehicles}, 13), got {x.shape}")
        ok = np.ones(self.num_vehicles, bool) if valid is None else np.asarray(valid, bool).reshape(-1).copy()
        if ok.shape != (self.num_vehicles,):
            raise ValueError(f"valid must have shape ({self.num_vehicles},), got {np.shape(valid)}")
        ok &= np.all(np.isfinite(x[:, STATE_POSE_AND_VELOCITY]), axis=1)
        if not self.num_persons or not ok.any():
            return True
        dist = np.linalg.norm(x[:, None, STATE_POSITION_NED] - self._centers[None, :, :], axis=2)  # (N, P)
        speed = np.linalg.norm(x[:, STATE_VELOCITY_FRD], axis=1)
        now = (dist <= self.params.found_distance_m) & (speed <= self.params.found_speed_mps)[:, None]
        now &= ok[:, None] & ~self._found[None, :]
        self._just_found |= now
        self._found |= now.any(axis=0)
        return True

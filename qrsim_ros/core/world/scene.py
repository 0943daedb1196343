"""The 3-D scene of a scenario (beyond QRSim; docs/SCENE.md): the ground, the persons as upright bodies
and solid obstacles, as one triangle mesh for the ray-cast sensors (lidar, range finders, cameras) and as
analytic shapes for collisions.

Frames and units: NED metres, as the rest of the core; heights are positive up. The scenario's ground
plane is ``ground_z_ned_m`` (the area's zmax); a height map raises (or lowers) the ground by
``heights_m`` over a grid, and is flat at the plane outside the grid.

- Ground: ``flat`` or ``heightmap`` (a grid in the YAML, ``heights_m``, or a file, ``file``: .csv or
  .npy; rows go north, columns east, ``cell_size_m`` apart, the first sample at ``origin_ne_m``, by
  default the area's (xmin, ymin)). Triangulated as a rectilinear grid that reaches
  ``GROUND_EXTENT_M`` beyond the area on every side, so rays find a ground up to the horizon.
- Persons: a cylinder (or a capsule) of ``height_m`` and ``radius_m`` standing on the ground at each
  person's north/east position; redrawn with the area at every episode (``set_persons``).
- Obstacles: boxes, cylinders (trees, poles) and buildings (tall boxes), listed (``obstacles``) and/or
  generated from the scenario seed (``generate``: count, the mix, size ranges, a keep-out radius around
  given points and a margin inside the area). They stand on the ground (their base sunk to the lowest
  ground under them) and are solid: ``collides(points)`` says which points are inside one (inflated by
  ``vehicle_radius_m``) or under the height-map ground.

Every triangle carries a ``label`` (LABELS) and the index of the object it belongs to (per label), so a
sensor can tell ground from obstacle from person and shade or texture each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.raycast import RayCaster, RayHits
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError, finite, positive, shape
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED
from qrsim_ros.core.world.calibration_target import CalibrationTargetParams, pack_targets
from qrsim_ros.core.world.terrain import PourTerrain

#: What a triangle belongs to (``Scene.face_label``).
LABELS = ("ground", "box", "cylinder", "building", "person")
GROUND, BOX, CYLINDER, BUILDING, PERSON = range(len(LABELS))
OBSTACLE_TYPES = ("box", "cylinder", "building")
PERSON_SHAPES = ("cylinder", "capsule")
GROUND_TYPES = ("flat", "heightmap")
#: How far the ground reaches beyond the area on every side [m].
GROUND_EXTENT_M = 2000.0
#: Largest distance between a cylinder and its polygonal mesh [m] (sets the number of sides).
CYLINDER_CHORD_ERROR_M = 0.002
#: Fewest and most sides of a cylinder's (and a person's) mesh.
MIN_SECTIONS, MAX_SECTIONS = 12, 256
#: Name of the random stream the generated obstacles are drawn from.
OBSTACLE_STREAM = "scene.obstacles"
#: Largest height-map grid (samples) and largest number of obstacles.
MAX_HEIGHTMAP_SAMPLES = 4_000_000
MAX_OBSTACLES = 10_000
#: Tries to place one generated obstacle before giving up.
MAX_PLACEMENT_TRIES = 1000


def _range_pair(name: str, pair: tuple[float, float], lo: float = 0.0) -> None:
    a, b = finite(f"{name}[0]", pair[0]), finite(f"{name}[1]", pair[1])
    if not lo < a <= b:
        raise ConfigError(f"{name}={list(pair)!r} must be a [min, max] pair with {lo} < min <= max")


@dataclass(frozen=True)
class GroundParams:
    """The ground's shape (see the module docstring). type: ``flat`` or ``heightmap``. heights_m: rows
    (north) of heights [m, up] above the ground plane. file: the same grid in a .csv (comma-separated
    rows) or .npy file, relative to the scenario file. cell_size_m: grid spacing [m]. origin_ne_m:
    north/east of sample [0][0] [m] (None: the area's xmin, ymin)."""

    type: str = "flat"
    heights_m: tuple[tuple[float, ...], ...] | None = None
    file: str | None = None
    cell_size_m: float = 1.0
    origin_ne_m: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.type not in GROUND_TYPES:
            raise ConfigError(f"type={self.type!r} must be one of {', '.join(GROUND_TYPES)}")
        positive("cell_size_m", self.cell_size_m)
        if self.type == "heightmap":
            if (self.heights_m is None) == (self.file is None):
                raise ConfigError("type heightmap needs exactly one of heights_m and file")
            if self.heights_m is not None:
                check_heights(np.array(self.heights_m, dtype=object), "heights_m")
        elif self.heights_m is not None or self.file is not None:
            raise ConfigError("heights_m and file need type: heightmap")
        if self.origin_ne_m is not None:
            shape("origin_ne_m", self.origin_ne_m, (2,))


def check_heights(grid: NDArray[np.generic], where: str) -> Array:
    """A height grid (rows x cols, >= 2 x 2, finite) as floats; ConfigError naming ``where``."""
    rows = [len(r) for r in grid] if grid.dtype == object and grid.ndim == 1 else None
    if rows is not None and len(set(rows)) > 1:
        raise ConfigError(f"{where}: rows have different lengths ({sorted(set(rows))})")
    try:
        h = np.array(grid.tolist(), float)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: heights must be numbers") from None
    if h.ndim != 2 or h.shape[0] < 2 or h.shape[1] < 2:
        raise ConfigError(f"{where}: a height map needs at least 2 x 2 samples, got shape {h.shape}")
    if h.size > MAX_HEIGHTMAP_SAMPLES:
        raise ConfigError(f"{where}: {h.size} samples is more than the limit {MAX_HEIGHTMAP_SAMPLES}")
    if not np.all(np.isfinite(h)):
        r, c = np.argwhere(~np.isfinite(h))[0]
        raise ConfigError(f"{where}: height [{r}][{c}] is {float(h[r, c])!r}, not a finite number")
    return h


def load_heights(path: Path) -> Array:
    """A height grid from a .csv or .npy file; ConfigError naming the file."""
    if not path.is_file():
        raise ConfigError(f"ground.file {str(path)!r}: file not found")
    try:
        if path.suffix == ".npy":
            grid = np.load(path, allow_pickle=False)
        elif path.suffix == ".csv":
            grid = np.loadtxt(path, delimiter=",", ndmin=2)
        else:
            raise ConfigError(f"ground.file {str(path)!r}: expected a .csv or .npy file")
    except ValueError as exc:
        raise ConfigError(f"ground.file {str(path)!r}: malformed: {exc}") from None
    return check_heights(np.asarray(grid), f"ground.file {str(path)!r}")


@dataclass(frozen=True)
class PersonBodyParams:
    """How a person is drawn and seen: shape (cylinder or capsule), height_m and radius_m [m]."""

    shape: str = "cylinder"
    height_m: float = 1.8
    radius_m: float = 0.25

    def __post_init__(self) -> None:
        if self.shape not in PERSON_SHAPES:
            raise ConfigError(f"shape={self.shape!r} must be one of {', '.join(PERSON_SHAPES)}")
        positive("height_m", self.height_m)
        positive("radius_m", self.radius_m)
        scene_sizes(("height_m", self.height_m), ("radius_m", self.radius_m))
        if self.shape == "capsule" and 2 * self.radius_m >= self.height_m:
            raise ConfigError("a capsule needs height_m > 2 radius_m")


@dataclass(frozen=True)
class ObstacleParams:
    """One obstacle. type: box, cylinder or building. center_ne_m: north/east of its centre [m].
    size_m: box/building length (north before yaw), width (east) and height [m]. radius_m, height_m:
    a cylinder's [m]. yaw_rad: rotation about the down axis, north towards east [rad]."""

    type: str = "box"
    center_ne_m: tuple[float, float] = (0.0, 0.0)
    size_m: tuple[float, float, float] = (2.0, 2.0, 2.0)
    radius_m: float = 0.5
    height_m: float = 5.0
    yaw_rad: float = 0.0

    def __post_init__(self) -> None:
        if self.type not in OBSTACLE_TYPES:
            raise ConfigError(f"type={self.type!r} must be one of {', '.join(OBSTACLE_TYPES)}")
        shape("center_ne_m", self.center_ne_m, (2,))
        positive("size_m", self.size_m)
        positive("radius_m", self.radius_m)
        positive("height_m", self.height_m)
        scene_sizes(("size_m", self.size_m), ("radius_m", self.radius_m), ("height_m", self.height_m))
        finite("yaw_rad", self.yaw_rad)

    @property
    def height(self) -> float:
        return self.height_m if self.type == "cylinder" else self.size_m[2]

    @property
    def footprint_radius_m(self) -> float:
        """Radius of the circle around the centre that holds the footprint [m]."""
        return self.radius_m if self.type == "cylinder" else 0.5 * math.hypot(self.size_m[0], self.size_m[1])


@dataclass(frozen=True)
class GenerateParams:
    """Obstacles drawn from the scenario seed (stream ``scene.obstacles``). count: how many. mix: the
    fractions of boxes, cylinders and buildings. *_m: [min, max] sizes [m] (uniform). keep_out_m:
    horizontal clearance [m] from every ``keep_out_ne_m`` point (None: the vehicles' listed initial
    positions, else the area's centre). margin_m: clearance from the area's sides [m]."""

    count: int = 0
    mix: tuple[float, float, float] = (0.3, 0.5, 0.2)
    box_size_m: tuple[float, float] = (1.0, 4.0)
    cylinder_radius_m: tuple[float, float] = (0.15, 0.6)
    cylinder_height_m: tuple[float, float] = (3.0, 15.0)
    building_size_m: tuple[float, float] = (6.0, 20.0)
    building_height_m: tuple[float, float] = (6.0, 25.0)
    keep_out_m: float = 15.0
    keep_out_ne_m: tuple[tuple[float, float], ...] | None = None
    margin_m: float = 2.0

    def __post_init__(self) -> None:
        if not 0 <= self.count <= MAX_OBSTACLES:
            raise ConfigError(f"count={self.count!r} must be in [0, {MAX_OBSTACLES}]")
        mix = np.asarray(self.mix, float)
        if not np.all(np.isfinite(mix)) or np.any(mix < 0) or mix.sum() <= 0:
            raise ConfigError(f"mix={list(self.mix)!r} must be 3 non-negative fractions, not all 0")
        for name in ("box_size_m", "cylinder_radius_m", "cylinder_height_m", "building_size_m",
                     "building_height_m"):
            _range_pair(name, getattr(self, name))
            scene_sizes((name, getattr(self, name)))
        if not (math.isfinite(self.keep_out_m) and self.keep_out_m >= 0):
            raise ConfigError(f"keep_out_m={self.keep_out_m!r} must be >= 0")
        if not (math.isfinite(self.margin_m) and self.margin_m >= 0):
            raise ConfigError(f"margin_m={self.margin_m!r} must be >= 0")
        for i, p in enumerate(self.keep_out_ne_m or ()):
            shape(f"keep_out_ne_m[{i}]", p, (2,))


@dataclass(frozen=True)
class SceneParams:
    """The scenario's ``scene`` section (see the module docstring). vehicle_radius_m: how far a
    vehicle's centre must stay from an obstacle's surface [m]. solid: obstacles (and the height-map
    ground) invalidate a vehicle that enters them. calibration_targets: checkerboards painted on the
    ground, seen by the cameras (``core.world.calibration_target``)."""

    ground: GroundParams = field(default_factory=GroundParams)
    persons: PersonBodyParams = field(default_factory=PersonBodyParams)
    obstacles: tuple[ObstacleParams, ...] = ()
    generate: GenerateParams = field(default_factory=GenerateParams)
    vehicle_radius_m: float = 0.3
    solid: bool = True
    calibration_targets: tuple[CalibrationTargetParams, ...] = ()

    def __post_init__(self) -> None:
        pack_targets(self.calibration_targets)  # checks their number
        if not (math.isfinite(self.vehicle_radius_m) and self.vehicle_radius_m >= 0):
            raise ConfigError(f"vehicle_radius_m={self.vehicle_radius_m!r} must be >= 0")
        if len(self.obstacles) + self.generate.count > MAX_OBSTACLES:
            raise ConfigError(f"{len(self.obstacles)} listed + {self.generate.count} generated obstacles "
                              f"is more than the limit {MAX_OBSTACLES}")


class GroundSurface:
    """The ground as a rectilinear grid of heights (flat outside the height map), triangulated with
    each cell split along its (r, c)-(r+1, c+1) diagonal; ``height_m`` interpolates on those triangles,
    so it equals the mesh."""

    def __init__(self, north_m: Array, east_m: Array, heights_m: Array, ground_z_ned_m: float) -> None:
        self.north_m, self.east_m, self.heights_m = north_m, east_m, heights_m
        self.ground_z_ned_m = float(ground_z_ned_m)

    @classmethod
    def build(cls, params: GroundParams, limits_ned: ArrayLike, ground_z_ned_m: float,
              base_dir: Path | None = None) -> GroundSurface:
        lim = np.asarray(limits_ned, float)
        lo_n, hi_n = lim[0] - GROUND_EXTENT_M, lim[1] + GROUND_EXTENT_M
        lo_e, hi_e = lim[2] - GROUND_EXTENT_M, lim[3] + GROUND_EXTENT_M
        if params.type == "flat":
            return cls(np.array([lo_n, hi_n]), np.array([lo_e, hi_e]), np.zeros((2, 2)), ground_z_ned_m)
        if params.heights_m is not None:
            h = check_heights(np.array(params.heights_m, dtype=object), "ground.heights_m")
        else:
            path = Path(str(params.file))
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
            h = load_heights(path)
        n0, e0 = params.origin_ne_m if params.origin_ne_m is not None else (lim[0], lim[2])
        north = n0 + params.cell_size_m * np.arange(h.shape[0])
        east = e0 + params.cell_size_m * np.arange(h.shape[1])
        # a flat ring out to the far edges, one cell beyond the map (the map's border falls to 0)
        pad_n = [lo_n] if lo_n < north[0] - params.cell_size_m else []
        pad_s = [hi_n] if hi_n > north[-1] + params.cell_size_m else []
        pad_w = [lo_e] if lo_e < east[0] - params.cell_size_m else []
        pad_e = [hi_e] if hi_e > east[-1] + params.cell_size_m else []
        north_all = np.concatenate([pad_n, [north[0] - params.cell_size_m], north,
                                    [north[-1] + params.cell_size_m], pad_s])
        east_all = np.concatenate([pad_w, [east[0] - params.cell_size_m], east,
                                   [east[-1] + params.cell_size_m], pad_e])
        heights = np.zeros((len(north_all), len(east_all)))
        r0, c0 = len(pad_n) + 1, len(pad_w) + 1
        heights[r0:r0 + h.shape[0], c0:c0 + h.shape[1]] = h
        return cls(north_all, east_all, heights, ground_z_ned_m)

    @property
    def flat(self) -> bool:
        return not np.any(self.heights_m)

    def mesh(self) -> tuple[Array, NDArray[np.int64]]:
        """Vertices (V, 3) [NED m] and faces (F, 3) of the grid, two per cell."""
        nn, ne = len(self.north_m), len(self.east_m)
        nv, ev = np.meshgrid(self.north_m, self.east_m, indexing="ij")
        verts = np.stack([nv.ravel(), ev.ravel(), self.ground_z_ned_m - self.heights_m.ravel()], axis=1)
        idx = np.arange(nn * ne).reshape(nn, ne)
        a, b = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel()
        c, d = idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
        faces = np.concatenate([np.stack([a, d, b], 1), np.stack([a, c, d], 1)])
        return verts, faces.astype(np.int64)

    def height_m(self, north_m: ArrayLike, east_m: ArrayLike) -> Array:
        """Ground height above the plane [m] at points (interpolated on the mesh's triangles); the
        outermost height beyond the grid."""
        n = np.asarray(north_m, float)
        e = np.asarray(east_m, float)
        if self.flat:
            return np.zeros(np.broadcast(n, e).shape)
        r = np.clip(np.searchsorted(self.north_m, n, side="right") - 1, 0, len(self.north_m) - 2)
        c = np.clip(np.searchsorted(self.east_m, e, side="right") - 1, 0, len(self.east_m) - 2)
        u = np.clip((n - self.north_m[r]) / (self.north_m[r + 1] - self.north_m[r]), 0.0, 1.0)
        v = np.clip((e - self.east_m[c]) / (self.east_m[c + 1] - self.east_m[c]), 0.0, 1.0)
        h = self.heights_m
        h00, h01, h10, h11 = h[r, c], h[r, c + 1], h[r + 1, c], h[r + 1, c + 1]
        # triangle (a, d, b) holds v >= u, triangle (a, c, d) holds u >= v
        upper = h00 + v * (h01 - h00) + u * (h11 - h01)
        lower = h00 + u * (h10 - h00) + v * (h11 - h10)
        return np.where(v >= u, upper, lower)

    def z_ned_m(self, north_m: ArrayLike, east_m: ArrayLike) -> Array:
        """NED z of the ground surface [m]."""
        return self.ground_z_ned_m - self.height_m(north_m, east_m)


def draw_obstacles(params: GenerateParams, limits_ned: ArrayLike, keep_out_ne: ArrayLike,
                   rng: np.random.Generator) -> list[ObstacleParams]:
    """``params.count`` obstacles inside the area (``margin_m`` from its sides), each clear of the
    ``keep_out_ne`` points by ``keep_out_m`` plus its footprint; ConfigError if the area cannot hold
    them. Draws: type, size, yaw, then positions until one fits, from ``rng`` in that order."""
    lim = np.asarray(limits_ned, float)
    keep = np.asarray(keep_out_ne, float).reshape(-1, 2)
    mix = np.asarray(params.mix, float)
    mix = mix / mix.sum()
    out: list[ObstacleParams] = []
    for i in range(params.count):
        kind = OBSTACLE_TYPES[int(rng.choice(3, p=mix))]
        yaw = float(rng.uniform(-math.pi, math.pi))
        if kind == "cylinder":
            radius = float(rng.uniform(*params.cylinder_radius_m))
            height = float(rng.uniform(*params.cylinder_height_m))
            ob = ObstacleParams(type=kind, radius_m=radius, height_m=height, yaw_rad=yaw)
        else:
            sizes = params.box_size_m if kind == "box" else params.building_size_m
            length, width = (float(v) for v in rng.uniform(*sizes, size=2))
            heights = sizes if kind == "box" else params.building_height_m
            height = float(rng.uniform(*heights))
            ob = ObstacleParams(type=kind, size_m=(length, width, height), yaw_rad=yaw)
        reach = ob.footprint_radius_m + params.margin_m
        lo_n, hi_n, lo_e, hi_e = lim[0] + reach, lim[1] - reach, lim[2] + reach, lim[3] - reach
        if lo_n >= hi_n or lo_e >= hi_e:
            raise ConfigError(f"scene.generate: obstacle {i} ({kind}, {2 * ob.footprint_radius_m:.1f} m "
                              "across) does not fit in the area with margin_m")
        for _ in range(MAX_PLACEMENT_TRIES):
            centre = np.array([rng.uniform(lo_n, hi_n), rng.uniform(lo_e, hi_e)])
            clearance = params.keep_out_m + ob.footprint_radius_m
            if not len(keep) or np.min(np.hypot(*(keep - centre).T)) > clearance:
                break
        else:
            raise ConfigError(f"scene.generate: no place for obstacle {i} clear of the keep-out points after "
                              f"{MAX_PLACEMENT_TRIES} tries (lower keep_out_m or count)")
        out.append(ObstacleParams(type=ob.type, center_ne_m=(float(centre[0]), float(centre[1])),
                                  size_m=ob.size_m, radius_m=ob.radius_m, height_m=ob.height_m, yaw_rad=yaw))
    return out


def _yaw_matrix(yaw: float) -> Array:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _prism(footprint_ne: Array, top_z: float, bottom_z: float) -> tuple[Array, NDArray[np.int64]]:
    """A closed vertical prism over a convex footprint polygon (K, 2), counter-clockwise seen from
    above (north, east with down z): sides, top and bottom."""
    k = len(footprint_ne)
    top = np.column_stack([footprint_ne, np.full(k, top_z)])
    bottom = np.column_stack([footprint_ne, np.full(k, bottom_z)])
    centre = footprint_ne.mean(axis=0)
    verts = np.vstack([top, bottom, [[*centre, top_z]], [[*centre, bottom_z]]])
    faces = []
    for i in range(k):
        j = (i + 1) % k
        faces += [[i, j, k + i], [j, k + j, k + i]]  # side
        faces += [[2 * k, j, i], [2 * k + 1, k + i, k + j]]  # top fan, bottom fan
    return verts, np.array(faces, np.int64)


def sections_for(radius_m: float) -> int:
    """Sides of a polygon within CYLINDER_CHORD_ERROR_M of a circle of ``radius_m`` (at most
    MAX_SECTIONS: a circle too large for that many is drawn with them)."""
    if radius_m <= CYLINDER_CHORD_ERROR_M:
        return MIN_SECTIONS
    half_angle = math.acos(1.0 - CYLINDER_CHORD_ERROR_M / radius_m)  # 0 once the ratio is below 1e-16
    if half_angle <= math.pi / MAX_SECTIONS:
        return MAX_SECTIONS
    return int(max(math.ceil(math.pi / half_angle), MIN_SECTIONS))


def scene_sizes(*named: tuple[str, ArrayLike]) -> None:
    """Every size (a number or numbers, [m]) at most ``LIMITS["scene_size_m"]``, else ConfigError naming it:
    the ray caster works in float32, and an obstacle of 1e20 m read inf on a range finder 19 m away."""
    limit = LIMITS["scene_size_m"]
    for name, value in named:
        for v in np.atleast_1d(np.asarray(value, float)).ravel():
            limit.check(float(v), name)


def _circle(radius: float, sections: int | None = None) -> Array:
    sections = sections_for(radius) if sections is None else sections
    a = np.linspace(0.0, 2 * math.pi, sections, endpoint=False)
    return radius * np.column_stack([np.cos(a), np.sin(a)])


def obstacle_mesh(ob: ObstacleParams, base_z_ned_m: float) -> tuple[Array, NDArray[np.int64]]:
    """The closed mesh of an obstacle standing with its base at ``base_z_ned_m``."""
    if ob.type == "cylinder":
        foot = _circle(ob.radius_m)
    else:
        half = 0.5 * np.array(ob.size_m[:2])
        foot = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * half
        foot = foot @ _yaw_matrix(ob.yaw_rad)[:2, :2].T
    verts, faces = _prism(foot + np.asarray(ob.center_ne_m), base_z_ned_m - ob.height, base_z_ned_m)
    return verts, faces


def person_mesh(body: PersonBodyParams, north_m: float, east_m: float,
                ground_z_ned_m: float) -> tuple[Array, NDArray[np.int64]]:
    """The mesh of a person standing on the ground at (north, east)."""
    if body.shape == "capsule":
        import trimesh

        m = trimesh.creation.capsule(height=body.height_m - 2 * body.radius_m, radius=body.radius_m,
                                     count=[12, 12])
        verts = np.asarray(m.vertices, float)
        verts[:, 2] = ground_z_ned_m - (verts[:, 2] - verts[:, 2].min())  # up is -z in NED
        verts[:, :2] += (north_m, east_m)
        return verts, np.asarray(m.faces, np.int64)
    foot = _circle(body.radius_m) + np.array([north_m, east_m])
    return _prism(foot, ground_z_ned_m - body.height_m, ground_z_ned_m)


class Scene:
    """A scenario's 3-D scene (see the module docstring): the static ground and obstacles, the
    episode's persons, and a ray caster over all of them (rebuilt when the persons change)."""

    def __init__(self, params: SceneParams, limits_ned: ArrayLike, ground_z_ned_m: float,
                 streams: RandomStreams, keep_out_ne: ArrayLike | None = None,
                 base_dir: Path | None = None) -> None:
        self.params = params
        self.limits_ned = np.asarray(limits_ned, float)
        self.ground = GroundSurface.build(params.ground, self.limits_ned, ground_z_ned_m, base_dir)
        gp = params.generate
        if gp.keep_out_ne_m is not None:
            keep = np.asarray(gp.keep_out_ne_m, float).reshape(-1, 2)
        elif keep_out_ne is not None:
            keep = np.asarray(keep_out_ne, float).reshape(-1, 2)
        else:
            lim = self.limits_ned
            keep = np.array([[0.5 * (lim[0] + lim[1]), 0.5 * (lim[2] + lim[3])]])
        generated = (draw_obstacles(gp, self.limits_ned, keep, streams.get(OBSTACLE_STREAM))
                     if gp.count else [])
        self.obstacles: tuple[ObstacleParams, ...] = tuple(params.obstacles) + tuple(generated)
        self._base_z = np.array([self._obstacle_base_z(ob) for ob in self.obstacles])
        parts: list[tuple[Array, NDArray[np.int64], int, int]] = []
        verts, faces = self.ground.mesh()
        parts.append((verts, faces, GROUND, 0))
        for i, ob in enumerate(self.obstacles):
            v, f = obstacle_mesh(ob, self._base_z[i])
            parts.append((v, f, OBSTACLE_TYPES.index(ob.type) + BOX, i))
        self._static = _join(parts)
        self._solids = _Solids.of(self.obstacles, self._base_z)
        self.persons_ne = np.zeros((0, 2))
        self._mesh = self._static
        self._caster: RayCaster | None = None
        #: The search-and-rescue area's terrain classes (redrawn in place every episode), the texture of
        #: the ground the cameras see; None: class 0 everywhere (set by ``engine.world.ScenarioWorld``).
        self.terrain: PourTerrain | None = None

    @property
    def obstacle_base_z_ned_m(self) -> Array:
        """NED z of every obstacle's base (the lowest ground under it) [m] (a copy)."""
        return self._base_z.copy()

    def _obstacle_base_z(self, ob: ObstacleParams) -> float:
        """The lowest ground under the obstacle's footprint (NED z: the largest)."""
        if self.ground.flat:
            return self.ground.ground_z_ned_m
        r = ob.footprint_radius_m
        a = np.linspace(0, 2 * math.pi, 16, endpoint=False)
        n = ob.center_ne_m[0] + np.concatenate([[0.0], r * np.cos(a), 0.5 * r * np.cos(a)])
        e = ob.center_ne_m[1] + np.concatenate([[0.0], r * np.sin(a), 0.5 * r * np.sin(a)])
        return float(np.max(self.ground.z_ned_m(n, e)))

    # --- the persons of the episode -------------------------------------------------------------------
    def set_persons(self, positions_ned: ArrayLike) -> None:
        """The episode's persons (M, 2 or 3) [NED m]: bodies standing on the ground at north, east."""
        p = np.asarray(positions_ned, float)
        ne = np.zeros((0, 2)) if p.size == 0 else p.reshape(-1, p.shape[-1])[:, :2].copy()
        if np.array_equal(ne, self.persons_ne):
            return
        self.persons_ne = ne
        parts = [(self._static.vertices, self._static.faces, -1, -1)]
        ground_z = self.ground.z_ned_m(ne[:, 0], ne[:, 1]) if len(ne) else np.zeros(0)
        for j in range(len(ne)):
            v, f = person_mesh(self.params.persons, ne[j, 0], ne[j, 1], float(ground_z[j]))
            parts.append((v, f, PERSON, j))
        joined = _join(parts, base=self._static)
        self._mesh = joined
        self._caster = None

    # --- geometry -------------------------------------------------------------------------------------
    @property
    def vertices(self) -> Array:
        return self._mesh.vertices

    @property
    def faces(self) -> NDArray[np.int64]:
        return self._mesh.faces

    @property
    def face_label(self) -> NDArray[np.int8]:
        """What every face belongs to (LABELS index)."""
        return self._mesh.label

    @property
    def face_object(self) -> NDArray[np.int32]:
        """Index of every face's object among those of its label (obstacle index for obstacles,
        person index for persons, 0 for the ground)."""
        return self._mesh.obj

    @property
    def caster(self) -> RayCaster:
        """The ray caster over the current mesh (built on first use after a change)."""
        if self._caster is None:
            lim = self.limits_ned
            centre = [0.5 * (lim[0] + lim[1]), 0.5 * (lim[2] + lim[3]), self.ground.ground_z_ned_m]
            self._caster = RayCaster(self._mesh.vertices, self._mesh.faces, offset=centre)
        return self._caster

    def cast(self, origins_ned: ArrayLike, directions_ned: ArrayLike, max_range_m: float = np.inf) -> RayHits:
        """First hits of rays in NED (see ``RayCaster.cast``)."""
        return self.caster.cast(origins_ned, directions_ned, max_range_m)

    def collides(self, positions_ned: ArrayLike) -> NDArray[np.bool_]:
        """Which points (N, >=3) [NED m] are inside an obstacle inflated by ``vehicle_radius_m``, or
        under the height-map ground (the flat ground plane is the area's bound, checked there)."""
        p = np.atleast_2d(np.asarray(positions_ned, float))[:, STATE_POSITION_NED]
        out = np.zeros(len(p), bool)
        if not self.ground.flat:
            out |= p[:, 2] > self.ground.z_ned_m(p[:, 0], p[:, 1])
        if not len(self.obstacles):
            return out
        # every point against every obstacle at once (a loop over obstacles cost ~10 us each, every tick)
        sol = self._solids
        rel = p[:, None, :2] - sol.centre_ne[None]  # (N, K, 2)
        along = np.abs(rel[..., 0] * sol.cos_yaw + rel[..., 1] * sol.sin_yaw)  # in the box's axes
        across = np.abs(rel[..., 1] * sol.cos_yaw - rel[..., 0] * sol.sin_yaw)
        d_box = np.hypot(np.maximum(along - sol.half_ne[:, 0], 0.0),
                         np.maximum(across - sol.half_ne[:, 1], 0.0))
        d_cylinder = np.maximum(np.hypot(rel[..., 0], rel[..., 1]) - sol.radius, 0.0)
        d_xy = np.where(sol.cylinder, d_cylinder, d_box)
        z = p[:, 2:3]
        d_z = np.maximum(np.maximum(sol.top_z - z, z - sol.base_z), 0.0)
        out |= (np.hypot(d_xy, d_z) <= self.params.vehicle_radius_m).any(axis=1)
        return out

    def crashes(self, positions_ned: ArrayLike, valid: ArrayLike) -> NDArray[np.intp]:
        """The valid vehicles (indices) whose positions (N, >=3) [NED m] are in a solid part of the
        scene (none unless ``solid``): they become invalid with CRASH_REASON, as at the area bounds."""
        if not self.params.solid:
            return np.zeros(0, np.intp)
        v = np.asarray(valid, bool)
        hit = np.zeros(len(v), bool)
        hit[v] = self.collides(np.atleast_2d(np.asarray(positions_ned, float))[v])
        return np.flatnonzero(hit)


#: Why a vehicle that entered an obstacle (or the height-map ground) became invalid.
CRASH_REASON = "collision with the scene (an obstacle or the ground)"


@dataclass(frozen=True)
class _Solids:
    """The obstacles as arrays (K,) for the collision test: centre north/east [m], yaw's cosine and
    sine, half length/width of boxes and buildings [m], cylinder or not, radius of cylinders [m], NED
    z of top and base [m]."""

    centre_ne: Array
    cos_yaw: Array
    sin_yaw: Array
    half_ne: Array
    cylinder: NDArray[np.bool_]
    radius: Array
    top_z: Array
    base_z: Array

    @classmethod
    def of(cls, obstacles: Sequence[ObstacleParams], base_z: Array) -> _Solids:
        cylinder = np.array([ob.type == "cylinder" for ob in obstacles], bool)
        yaw = np.array([ob.yaw_rad for ob in obstacles], float)
        half = np.array([[0.5 * ob.size_m[0], 0.5 * ob.size_m[1]] for ob in obstacles], float).reshape(-1, 2)
        base = np.asarray(base_z, float)
        return cls(centre_ne=np.array([ob.center_ne_m for ob in obstacles], float).reshape(-1, 2),
                   cos_yaw=np.cos(yaw), sin_yaw=np.sin(yaw), half_ne=half, cylinder=cylinder,
                   radius=np.array([ob.radius_m for ob in obstacles], float),
                   top_z=base - np.array([ob.height for ob in obstacles], float), base_z=base)


@dataclass(frozen=True)
class _Mesh:
    vertices: Array
    faces: NDArray[np.int64]
    label: NDArray[np.int8]
    obj: NDArray[np.int32]


def _join(parts: list[tuple[Array, NDArray[np.int64], int, int]], base: _Mesh | None = None) -> _Mesh:
    """One mesh from parts (vertices, faces, label, object index); a part with label -1 is ``base``."""
    verts, faces, labels, objs = [], [], [], []
    offset = 0
    for v, f, label, obj in parts:
        verts.append(v)
        faces.append(f + offset)
        if label < 0 and base is not None:
            labels.append(base.label)
            objs.append(base.obj)
        else:
            labels.append(np.full(len(f), label, np.int8))
            objs.append(np.full(len(f), obj, np.int32))
        offset += len(v)
    return _Mesh(np.vstack(verts), np.vstack(faces), np.concatenate(labels), np.concatenate(objs))

"""Downward camera with a person classifier, for N vehicles (spec 3.5, QRSim ``CameraWithClassifier``).

Once per ``dt_s`` (1 s), for every valid vehicle, the image is cut into a grid of windows about the size
of a person seen at the principal ray's ground point; every window is projected onto the ground (z = 0),
gets the terrain class of its ground centre, is marked with the person (if any) it sees, and gets a
classifier score drawn from the observation model (``obs_model``) and the log likelihood difference
``llkd`` "person vs no person" of that score. Geometry lives in ``camera_geometry``.

Frames and units: NED [m], pixels [px], ranges [m], angles [rad]. Window (j, i) is 0-based, j along u
(image x = body right), i along v (image y = body backwards). The flat layouts of the spec are kept:
``llkd[j * nf2 + i]`` (QRSim's 1-based ``(j-1) nf2 + i``) and ground corner (j, i) at column
``j * (nf2 + 1) + i`` of ``wg`` (3, (nf1+1)(nf2+1)), so window (j, i) has corners
``j * (nf2 + 1) + i + [0, 1, nf2 + 1, nf2 + 2]``; the 2-D arrays ``*_grid`` hold the same data.

Random draws: one named stream per vehicle (``streams.get("camera", i)``), exactly nf1 * nf2 standard
normals per produced frame; invalid vehicles, frames that see no ground and a camera that is off draw
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.camera_geometry import CameraGeometry, WindowGrid, quad_area, square_corners
from qrsim_ros.core.frames import Array
from qrsim_ros.core.obs_model import OBS_MODELS
from qrsim_ros.core.rng import RandomStreams
from qrsim_ros.core.validation import BASE_DT_S, ConfigError, in_range, positive, shape, ticks_per_update

#: ``terrain_class_fn(points_ned (M, 3)) -> (M,) int`` (QRSim's ``area.getTerrainClass``).
TerrainClassFn = Callable[[Array], ArrayLike]

IntArray = NDArray[np.int64]

#: Assignment helper points: centroids of (corner a, corner b, person centre) for these corner pairs
#: (the four sides of the person's square in QRSim's corner order).
_SIDE_PAIRS = np.array([[3, 2], [1, 0], [2, 0], [3, 1]])


@dataclass(frozen=True)
class CameraParams:
    """Camera configuration; defaults are QRSim's search-and-rescue camera (spec 3.5).

    on: False = no camera: no observations and no random draws (QRSim has no noiseless camera).
    dt_s: frame period [s], a multiple of 0.02 s.
    f_px, c_px: focal lengths and principal point [px]; the image is 2c (1280 x 960).
    r_body_rad: camera mounting Euler angles [r1 r2 r3] [rad] (R = angleToDcm(r3, r2, r1)).
    person_size_m: side of a person's square ground patch [m] (the area's person size).
    obs_model: classifier model name; only 'IndepObsModel' (QRSim's GPObsModel is out of scope).
    min_window_px: smallest window side [px]; caps the grid at round(2c / min_window_px) windows per axis
        (8 px -> 160 x 120; reached above ~142 m when level). Not in QRSim, whose grid grows without bound.
    """

    on: bool = True
    dt_s: float = 1.0
    f_px: tuple[float, float] = (2280.0, 2280.0)
    c_px: tuple[float, float] = (640.0, 480.0)
    r_body_rad: tuple[float, float, float] = (0.0, 0.0, float(np.pi / 2))
    person_size_m: float = 0.5
    obs_model: str = "IndepObsModel"
    min_window_px: float = 8.0

    def __post_init__(self) -> None:
        if not isinstance(self.on, (bool, np.bool_)):
            raise ConfigError(f"camera.on={self.on!r} must be a boolean")
        ticks_per_update("camera.dt_s", self.dt_s)
        f = positive("camera.f_px", shape("camera.f_px", self.f_px, (2,)))
        c = positive("camera.c_px", shape("camera.c_px", self.c_px, (2,)))
        r = shape("camera.r_body_rad", self.r_body_rad, (3,))
        size = float(positive("camera.person_size_m", self.person_size_m))
        if self.obs_model not in OBS_MODELS:
            raise ConfigError(
                f"camera.obs_model={self.obs_model!r} must be one of {sorted(OBS_MODELS)}"
                " (QRSim's GPObsModel is not implemented)"
            )
        min_px = in_range("camera.min_window_px", self.min_window_px, 1.0, float(2.0 * c.min()))
        for name, value in (("f_px", tuple(f.tolist())), ("c_px", tuple(c.tolist())),
                            ("r_body_rad", tuple(r.tolist())), ("person_size_m", size),
                            ("min_window_px", min_px), ("on", bool(self.on))):
            object.__setattr__(self, name, value)


@dataclass(frozen=True, eq=False)
class CameraObservation:
    """One camera frame of one vehicle (QRSim's ``CameraObservation`` plus ground truth for tests/RViz).

    Per-window arrays have shape (nf1, nf2) (``*_grid`` naming where a flat view exists); windows whose
    centre ray misses the ground are invalid: NaN geometry/score/llkd, terrain class -1. An *empty*
    observation (``grid_dims == (0, 0)``, ``reason`` says why) is a frame that sees no ground.
    """

    t_s: float
    vehicle: int
    grid_dims: tuple[int, int]
    window_px: tuple[int, int]  # df
    offset_px: tuple[int, int]  # offf
    reference_area_px2: float  # sigmaf: pixel area of a person at the principal ray's ground point
    principal_ground_ned: Array  # (3,) fcg
    corners_px: Array  # (nf1+1, nf2+1, 2)
    centres_px: Array  # (nf1, nf2, 2)
    corners_ned: Array  # (nf1+1, nf2+1, 3) ground corners (wg)
    centres_ned: Array  # (nf1, nf2, 3) ground centres (cg)
    window_valid: NDArray[np.bool_]  # (nf1, nf2)
    terrain_class: IntArray  # (nf1, nf2), -1 where invalid
    person_index: IntArray  # (nf1, nf2) index into the persons given to step(), -1 = none (ground truth)
    range_m: Array  # (nf1, nf2) slant range r camera -> window centre
    inclination_rad: Array  # acos(-tc_z / r), tc = camera - window centre
    sin_azimuth: Array  # tc_y / |tc_xy| (0 when the window is straight below)
    cos_azimuth: Array  # tc_x / |tc_xy| (1 when the window is straight below)
    person_distance_px: Array  # d: window centre -> assigned person's pixel centre, NaN if none
    person_area_px2: Array  # sigma: assigned person's pixel area, NaN if none
    score: Array  # (nf1, nf2) classifier score y
    llkd_grid: Array  # (nf1, nf2) log likelihood difference
    reason: str = ""

    @property
    def empty(self) -> bool:
        return self.grid_dims == (0, 0)

    @property
    def num_windows(self) -> int:
        return self.grid_dims[0] * self.grid_dims[1]

    @property
    def llkd(self) -> Array:
        """Flat llkd (nf1 * nf2,): window (j, i) at j * nf2 + i (spec layout)."""
        return self.llkd_grid.reshape(-1)

    @property
    def wg(self) -> Array:
        """Ground corners (3, (nf1+1)(nf2+1)) in the spec layout: corner (j, i) at column j (nf2+1) + i."""
        return self.corners_ned.reshape(-1, 3).T

    @property
    def cg(self) -> Array:
        """Ground centres (nf1 * nf2, 3), window (j, i) at row j * nf2 + i."""
        return self.centres_ned.reshape(-1, 3)

    def corner_columns(self, j: int, i: int) -> IntArray:
        """Columns of ``wg`` holding the 4 corners of window (j, i) (0-based)."""
        n2 = self.grid_dims[1]
        return j * (n2 + 1) + i + np.array([0, 1, n2 + 1, n2 + 2])

    @classmethod
    def empty_frame(
        cls, t_s: float, vehicle: int, reason: str, principal_ground_ned: ArrayLike
    ) -> CameraObservation:
        """An observation with no windows (the frame sees no ground); ``reason`` says why."""
        z2, z3 = np.empty((0, 0, 2)), np.empty((0, 0, 3))
        zf, zi = np.empty((0, 0)), np.empty((0, 0), dtype=np.int64)
        return cls(
            t_s=t_s, vehicle=vehicle, grid_dims=(0, 0), window_px=(0, 0), offset_px=(0, 0),
            reference_area_px2=float("nan"), principal_ground_ned=np.asarray(principal_ground_ned, float),
            corners_px=z2, centres_px=z2, corners_ned=z3, centres_ned=z3,
            window_valid=np.empty((0, 0), dtype=bool), terrain_class=zi, person_index=zi.copy(),
            range_m=zf, inclination_rad=zf, sin_azimuth=zf, cos_azimuth=zf, person_distance_px=zf,
            person_area_px2=zf, score=zf, llkd_grid=zf, reason=reason,
        )


class CameraWithClassifier:
    """Cameras with person classifiers on N vehicles (spec 3.5), sample-and-hold at ``dt_s``.

    ``step(k, x, valid, persons_ned, terrain_class_fn)`` updates on ticks with k % (dt_s / 0.02) == 0;
    ``observations[i]`` is vehicle i's latest frame, or None (no frame yet, vehicle invalid at the last
    update, or camera off).
    """

    def __init__(
        self,
        num_vehicles: int,
        params: CameraParams | None = None,
        streams: RandomStreams | None = None,
        stream_name: str = "camera",
    ) -> None:
        if num_vehicles < 0:
            raise ConfigError(f"num_vehicles={num_vehicles!r} must be >= 0")
        params = params or CameraParams()
        streams = streams or RandomStreams(0)
        self.params = params
        self.num_vehicles = int(num_vehicles)
        self.geometry = CameraGeometry(params.f_px, params.c_px, params.r_body_rad)
        self.model = OBS_MODELS[params.obs_model]
        self.ticks_per_update = ticks_per_update("camera.dt_s", params.dt_s)
        self._rngs = streams.per_vehicle(stream_name, self.num_vehicles) if params.on else []
        self.observations: list[CameraObservation | None] = [None] * self.num_vehicles

    def is_update_tick(self, k: int) -> bool:
        return k % self.ticks_per_update == 0

    def step(
        self,
        k: int,
        x: ArrayLike,
        valid: ArrayLike | None = None,
        persons_ned: ArrayLike | None = None,
        terrain_class_fn: TerrainClassFn | None = None,
    ) -> bool:
        """Advance to base tick ``k`` (t = 0.02 k s). Returns True if new frames were produced.

        x: (N, 13) true states; valid: (N,) bool (default all); persons_ned: (P, 3) person centres on the
        ground (NED, m), shared by all vehicles; terrain_class_fn: terrain class of ground points (None =
        class 0 everywhere).
        """
        if not self.params.on or not self.is_update_tick(k):
            return False
        x = np.atleast_2d(np.asarray(x, float))
        if x.shape[0] != self.num_vehicles or x.shape[1] < 6:
            raise ValueError(f"x must have shape ({self.num_vehicles}, 13), got {x.shape}")
        ok = np.ones(self.num_vehicles, bool) if valid is None else np.asarray(valid, bool).reshape(-1)
        if ok.shape != (self.num_vehicles,):
            raise ValueError(f"valid must have shape ({self.num_vehicles},), got {ok.shape}")
        persons = self._persons(persons_ned)
        t_s = k * BASE_DT_S
        for i in range(self.num_vehicles):  # grid size differs per vehicle: frames are built one by one
            self.observations[i] = (
                self.frame(x[i], persons, terrain_class_fn, self._rngs[i], t_s, i) if ok[i] else None
            )
        return True

    def reset(self, x: ArrayLike | None = None, vehicles: Sequence[int] | None = None) -> None:
        """Forget the frames of the given vehicles (default all); the camera has no state to spin up."""
        for i in range(self.num_vehicles) if vehicles is None else vehicles:
            self.observations[int(i)] = None

    @staticmethod
    def _persons(persons_ned: ArrayLike | None) -> Array:
        if persons_ned is None:
            return np.empty((0, 3))
        return np.asarray(persons_ned, float).reshape(-1, 3)

    # --- one frame (spec 3.5 update steps 1-6) -----------------------------------------------------

    def frame(
        self,
        x: ArrayLike,
        persons_ned: ArrayLike | None,
        terrain_class_fn: TerrainClassFn | None,
        rng: np.random.Generator,
        t_s: float = 0.0,
        vehicle: int = 0,
    ) -> CameraObservation:
        """Build one vehicle's frame from its true state ``x`` (13,), drawing the scores from ``rng``."""
        geo, p = self.geometry, self.params
        x = np.asarray(x, float)
        tp = x[:3]
        if not np.all(np.isfinite(x[:6])):
            return CameraObservation.empty_frame(t_s, vehicle, "non-finite vehicle state", np.full(3, np.nan))

        # 1. person scale at the principal ray's ground point
        fcg = geo.ground_intersection(geo.c_px, x)[0]
        if not np.all(np.isfinite(fcg)):
            reason = "the principal ray does not hit the ground"
            return CameraObservation.empty_frame(t_s, vehicle, reason, fcg)
        ref_uv, ref_visible = geo.project(square_corners(fcg, p.person_size_m)[0], x)
        if ref_visible.all():
            sigmaf = float(quad_area(ref_uv))
            side_px = np.sqrt(sigmaf)
        else:  # closer than ~1.2 m: a person is larger than the image (QRSim's intended guard, spec 10.9)
            side_px = float(geo.c_px.sum())
            sigmaf = float(4.0 * geo.c_px.prod())

        # 2. window grid in pixels and on the ground
        grid = WindowGrid.from_window_side(side_px, geo.c_px, p.min_window_px)
        nf1, nf2 = grid.nf
        corners_px, centres_px = grid.corners_px(), grid.centres_px()
        corners_ned = geo.ground_intersection(corners_px.reshape(-1, 2), x).reshape(nf1 + 1, nf2 + 1, 3)
        centres_ned = geo.ground_intersection(centres_px.reshape(-1, 2), x).reshape(nf1, nf2, 3)
        valid = np.isfinite(centres_ned[..., 0])

        # 3. terrain class per window centre
        tclass = np.full((nf1, nf2), -1, dtype=np.int64)
        if terrain_class_fn is None:
            tclass[valid] = 0
        elif valid.any():
            cls = np.asarray(terrain_class_fn(centres_ned[valid]))
            if cls.shape != (int(valid.sum()),):
                raise ValueError(f"terrain_class_fn must return shape ({int(valid.sum())},), got {cls.shape}")
            tclass[valid] = cls.astype(np.int64)

        # 4. persons in view and their windows
        persons = self._persons(persons_ned)
        person_index, pcf, sigma = self._assign_persons(grid, centres_px, persons, x)
        person_index[~valid] = -1
        assigned = person_index >= 0
        d_px = np.full((nf1, nf2), np.nan)
        area_px2 = np.full((nf1, nf2), np.nan)
        d_px[assigned] = np.linalg.norm(centres_px[assigned] - pcf[person_index[assigned]], axis=1)
        area_px2[assigned] = sigma[person_index[assigned]]

        # 5. window geometry seen from the camera
        tc = tp - centres_ned
        r = np.linalg.norm(tc, axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            inc = np.arccos(np.clip(-tc[..., 2] / r, -1.0, 1.0))
        azimuth = np.arctan2(tc[..., 1], tc[..., 0])  # sin/cos of it; defined (0, 1) straight below

        # 6. classifier scores and log likelihood differences
        y = self.model.sample(assigned.reshape(-1), r.reshape(-1), tclass.reshape(-1), rng).reshape(nf1, nf2)
        llkd = self.model.log_likelihood_difference(y, r, tclass)
        y[~valid] = np.nan
        llkd[~valid] = np.nan

        return CameraObservation(
            t_s=t_s, vehicle=vehicle, grid_dims=grid.nf, window_px=grid.df, offset_px=grid.offf,
            reference_area_px2=sigmaf, principal_ground_ned=fcg, corners_px=corners_px,
            centres_px=centres_px, corners_ned=corners_ned, centres_ned=centres_ned, window_valid=valid,
            terrain_class=tclass, person_index=person_index, range_m=r, inclination_rad=inc,
            sin_azimuth=np.where(valid, np.sin(azimuth), np.nan),
            cos_azimuth=np.where(valid, np.cos(azimuth), np.nan),
            person_distance_px=d_px, person_area_px2=area_px2, score=y, llkd_grid=llkd,
        )

    def _assign_persons(
        self, grid: WindowGrid, centres_px: Array, persons: Array, x: Array
    ) -> tuple[IntArray, Array, Array]:
        """Window -> person assignment (spec 3.5 step 4), vectorised over persons and their points.

        Returns person_index (nf1, nf2) (-1 = none), pixel centres (P, 2) and pixel areas (P,) of all
        persons (NaN for persons whose centre is out of view).
        """
        geo = self.geometry
        n_p = len(persons)
        person_index = np.full(grid.nf, -1, dtype=np.int64)
        pcf = np.full((n_p, 2), np.nan)
        sigma = np.full(n_p, np.nan)
        if n_p == 0:
            return person_index, pcf, sigma
        corners_ned = square_corners(persons, self.params.person_size_m)
        pts = np.concatenate([persons[:, None, :], corners_ned], axis=1)
        uv, vis = geo.project(pts.reshape(-1, 3), x)
        uv, vis = uv.reshape(n_p, 5, 2), vis.reshape(n_p, 5)
        seen = np.flatnonzero(vis[:, 0])  # a person counts iff its centre is in the image
        if seen.size == 0:
            return person_index, pcf, sigma
        centre, corners, corner_vis = uv[seen, 0], uv[seen, 1:], vis[seen, 1:]
        pcf[seen] = centre

        # pixel area: exact quadrilateral if all 4 corners are visible, else a square with the mean
        # visible half-diagonal; no corner visible (person larger than the image): the whole image
        full = corner_vis.all(axis=1)
        half_diag = np.linalg.norm(corners - centre[:, None, :], axis=-1)
        n_vis = corner_vis.sum(axis=1)
        with np.errstate(invalid="ignore"):
            mean_half = np.where(corner_vis, half_diag, 0.0).sum(axis=1) / n_vis
        partial = np.where(n_vis > 0, 2.0 * mean_half**2, 4.0 * geo.c_px.prod())
        sigma[seen] = np.where(full, quad_area(np.nan_to_num(corners)), partial)

        # points that mark windows: centre, visible corners, side centroids (corner a + corner b + centre) / 3
        a, b = _SIDE_PAIRS[:, 0], _SIDE_PAIRS[:, 1]
        side_pts = (corners[:, a] + corners[:, b] + centre[:, None, :]) / 3.0
        side_ok = corner_vis[:, a] & corner_vis[:, b]
        points = np.concatenate([centre[:, None, :], corners, side_pts], axis=1)  # (S, 9, 2)
        ok = np.concatenate([np.ones((len(seen), 1), bool), corner_vis, side_ok], axis=1)
        owner = np.broadcast_to(seen[:, None], ok.shape)[ok]
        j, i = grid.window_of(points[ok])
        lin = j * grid.nf[1] + i
        # a window sees the person whose pixel centre is nearest to the window centre (ties: first person),
        # the order-independent form of QRSim's sequential "replace only if strictly nearer"
        dist = np.linalg.norm(centres_px.reshape(-1, 2)[lin] - pcf[owner], axis=1)
        order = np.lexsort((owner, dist, lin))
        lin_sorted = lin[order]
        first = np.concatenate([[True], lin_sorted[1:] != lin_sorted[:-1]])
        person_index.reshape(-1)[lin_sorted[first]] = owner[order][first]
        return person_index, pcf, sigma

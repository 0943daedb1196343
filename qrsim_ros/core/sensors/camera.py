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

Cost: the frames of all vehicles of an update are built together, their windows stacked in flat arrays
(``camera_geometry.FrameBatch``), by a few compiled kernels (``camera_geometry``, ``obs_model``; numba
via ``qrsim_ros.core.common.jit``): about 0.05 ms per vehicle and frame at 25 m (588 windows) instead of about
1 ms of small numpy operations. The terrain function is called once per update, on the valid window
centres of all frames, and each observation's arrays are views of the update's stacked arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import (
    ConfigError,
    flag,
    in_range,
    positive,
    set_frozen_field,
    shape,
    ticks_per_update,
)
from qrsim_ros.core.sensors.camera_geometry import FRAME_NON_FINITE_STATE, FRAME_OK, CameraGeometry
from qrsim_ros.core.sensors.obs_model import OBS_MODELS

#: ``terrain_class_fn(points_ned (M, 3)) -> (M,) int`` (QRSim's ``area.getTerrainClass``). It must be
#: pointwise (each class depends on its own point only): ``step`` evaluates the points of all vehicles'
#: frames in one call. The points may be a read-only array.
TerrainClassFn = Callable[[Array], ArrayLike]

IntArray = NDArray[np.int64]


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
        on = flag("camera.on", self.on)
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
                            ("min_window_px", min_px), ("on", on)):
            set_frozen_field(self, name, value)


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
        class 0 everywhere; see ``TerrainClassFn``: called once, for all vehicles).
        """
        if not self.params.on or not self.is_update_tick(k):
            return False
        x = np.atleast_2d(np.asarray(x, float))
        if x.shape[0] != self.num_vehicles or x.shape[1] < 6:
            raise ValueError(f"x must have shape ({self.num_vehicles}, 13), got {x.shape}")
        ok = np.ones(self.num_vehicles, bool) if valid is None else np.asarray(valid, bool).reshape(-1)
        if ok.shape != (self.num_vehicles,):
            raise ValueError(f"valid must have shape ({self.num_vehicles},), got {ok.shape}")
        t_s = k * BASE_DT_S
        live = np.flatnonzero(ok)
        frames = self._frames(x[live], self._persons(persons_ned), terrain_class_fn,
                              [self._rngs[i] for i in live], t_s, live.tolist())
        new: list[CameraObservation | None] = [None] * self.num_vehicles
        for i, obs in zip(live.tolist(), frames, strict=True):
            new[i] = obs
        self.observations[:] = new  # in place, as before: holders of the list see the new frames
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

    # --- frames (spec 3.5 update steps 1-6) --------------------------------------------------------------

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
        x = np.asarray(x, float)
        if x.ndim != 1 or x.size < 6:
            raise ValueError(f"x must be one state of shape (13,), got {x.shape}")
        persons = self._persons(persons_ned)
        return self._frames(x[None, :], persons, terrain_class_fn, [rng], t_s, [vehicle])[0]

    def _frames(
        self,
        xs: Array,
        persons: Array,
        terrain_class_fn: TerrainClassFn | None,
        rngs: Sequence[np.random.Generator],
        t_s: float,
        vehicles: Sequence[int],
    ) -> list[CameraObservation]:
        """The frames of vehicles in states ``xs`` (V, 13), built together (``camera_geometry.FrameBatch``:
        the windows of all frames stacked), each drawing nf1 nf2 normals from its own ``rngs[v]``.

        ``terrain_class_fn`` is called once, on the valid window centres of all frames stacked: it must
        be pointwise (as a terrain map is).
        """
        geo, p = self.geometry, self.params
        # 1-2, 5: reference person area, window grid, window geometry
        b = geo.frames(xs, p.person_size_m, p.min_window_px)
        w_start = b.w_start
        nw = int(w_start[-1])
        # 3. terrain class per window centre (-1 where the window does not see the ground)
        all_valid = b.n_valid == nw
        if terrain_class_fn is None:
            tclass = np.zeros(nw, np.int64) if all_valid else np.where(b.valid, 0, -1)
        elif b.n_valid == 0:
            tclass = np.full(nw, -1, np.int64)
        else:
            if all_valid:  # a read-only view: the function cannot alter the observations
                query = b.centres_ned.view()
                query.flags.writeable = False
            else:
                query = b.centres_ned[b.valid]
            cls = np.asarray(terrain_class_fn(query))
            if cls.shape != (b.n_valid,):
                raise ValueError(f"terrain_class_fn must return shape ({b.n_valid},), got {cls.shape}")
            if all_valid:
                tclass = cls.astype(np.int64)
            else:
                tclass = np.full(nw, -1, np.int64)
                tclass[b.valid] = cls.astype(np.int64)
        # 4. persons in view and their windows
        person_index, d_px, area_px2, positive = geo.person_windows(b, xs, persons, p.person_size_m)
        # 6. classifier scores and llkd: nf1 nf2 normals per frame from the vehicle's own stream
        ws, cs = w_start.tolist(), b.c_start.tolist()
        eta = np.empty(nw)
        for v, rng in enumerate(rngs):
            if ws[v + 1] > ws[v]:
                rng.standard_normal(ws[v + 1] - ws[v], out=eta[ws[v]:ws[v + 1]])
        y, llkd = self.model.scores_of_frames(positive, b.range_m, tclass, eta, w_start)

        # the observations are views of the stacked arrays (fresh at every update)
        frames = []
        for v, (vehicle, status, grid6, sigmaf) in enumerate(
                zip(vehicles, b.status.tolist(), b.grids.tolist(), b.sigmaf.tolist(), strict=True)):
            if status != FRAME_OK:
                reason = ("non-finite vehicle state" if status == FRAME_NON_FINITE_STATE
                          else "the principal ray does not hit the ground")
                frames.append(CameraObservation.empty_frame(t_s, vehicle, reason, b.fcg[v].copy()))
                continue
            n1, n2, df1, df2, o1, o2 = grid6
            w0, w1, c0, c1 = ws[v], ws[v + 1], cs[v], cs[v + 1]
            grid, corners = (n1, n2), (n1 + 1, n2 + 1)
            frames.append(CameraObservation(
                t_s=t_s, vehicle=vehicle, grid_dims=grid, window_px=(df1, df2), offset_px=(o1, o2),
                reference_area_px2=sigmaf, principal_ground_ned=b.fcg[v].copy(),
                corners_px=b.corners_px[c0:c1].reshape(*corners, 2),
                centres_px=b.centres_px[w0:w1].reshape(*grid, 2),
                corners_ned=b.corners_ned[c0:c1].reshape(*corners, 3),
                centres_ned=b.centres_ned[w0:w1].reshape(*grid, 3),
                window_valid=b.valid[w0:w1].reshape(grid), terrain_class=tclass[w0:w1].reshape(grid),
                person_index=person_index[w0:w1].reshape(grid), range_m=b.range_m[w0:w1].reshape(grid),
                inclination_rad=b.inclination_rad[w0:w1].reshape(grid),
                sin_azimuth=b.sin_azimuth[w0:w1].reshape(grid),
                cos_azimuth=b.cos_azimuth[w0:w1].reshape(grid),
                person_distance_px=d_px[w0:w1].reshape(grid), person_area_px2=area_px2[w0:w1].reshape(grid),
                score=y[w0:w1].reshape(grid), llkd_grid=llkd[w0:w1].reshape(grid),
            ))
        return frames

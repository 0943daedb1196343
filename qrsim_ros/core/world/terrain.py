"""Terrain classes of the search-and-rescue area: QRSim's ``PourTerrain``/``pourMap`` (spec 4.3).

The ground of the flight area is a grid of 1 m x 1 m cells, ``nr = ceil(xmax - xmin)`` rows (north)
by ``nc = ceil(ymax - ymin)`` columns (east). Class 0 is the background; classes 1..K cover
about the fractions ``p_1..p_K`` of the area (sum < 1). In the SR tasks class 1 is clutter, class 2
occlusion.

Map generation ("pouring", spec 4.3) on a 50 x 50 coarse map, for each class c = 1..K in turn:
start at a random cell, then repeat { jump ``d = 4 (-ln rho)`` cells in direction ``alpha = 2 pi rho'``
(wrapping around), pour ``nn = 10 + ceil(100 rho'')`` drops } until ``N_c = 2500 p_c`` cells are
class c. A drop lands on the current cell if that is background, otherwise it random-walks over the
4-neighbourhood (staying inside at the borders) until it finds one. (QRSim lets a drop land on any
cell not yet of class c, so a later class overwrites earlier ones without their counts going down:
with p = [0.2, 0.05] class 1 came out up to 4.9 points short, 1 point on average over 40 seeds.
Here classes never overwrite each other and each gets its ceil(2500 p_c) coarse cells.) The rho's
are read from a pre-drawn vector of ``nr nc K`` uniforms (the SR map uses 20 000-75 000 of its
120 050; QRSim reuses the vector cyclically if it runs out, which can trap a drop's walk in a loop
forever in small areas, so here a fresh block is drawn instead). The coarse map is upsampled to
nr x nc by nearest neighbour: fine row i takes coarse row ``round(i 49 / (nr - 1))`` (ties to the
larger index).

Everything, including the start cells (QRSim: the global RNG), comes from the terrain's own seeded
Generator, so a seed reproduces the map. The blocks of uniforms are read as they are used, in chunks, and
the Generator is advanced past each block as if it had been drawn (the same numbers; the memory no longer
grows with the area: 1,000 vehicles' area held 1.2e8 uniforms). Only the coarse map and the fine rows'
and columns' coarse indices are kept; ``grid`` builds the nr x nc map when asked.

``class_at(points)``: the cell of a point is ``(ceil(x - xmin) - 1, ceil(y - ymin) - 1)`` (0-based),
clamped to the grid, so points outside the area take the class of the nearest border cell.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.validation import ConfigError, area_limits

#: Side of the coarse pouring map [cells] (QRSim ``nr = nc = 50`` in ``pourMap``).
COARSE_CELLS = 50
#: Ground cell size [m].
CELL_SIZE_M = 1.0
#: Known terrain types (QRSim's ``terrain.type``).
TERRAIN_TYPES = ("PourTerrain",)

# the 4-neighbourhood, in QRSim's order (row step, column step)
_STEPS = ((1, 0), (0, 1), (-1, 0), (0, -1))


def check_class_percentages(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Class fractions p_1..p_K: each finite and >= 0, sum < 1, at least one class, and the coarse
    cell counts ``ceil(2500 p_c)`` summing to <= 2500 (so the pouring can always finish)."""
    try:
        p = np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} must be a list of fractions") from None
    if p.ndim != 1 or p.size < 1 or not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() >= 1.0:
        raise ConfigError(
            f"{name}={np.asarray(value).tolist()!r} must be a non-empty list of fractions >= 0 with sum < 1 "
            "(the rest is class 0)"
        )
    cells = COARSE_CELLS * COARSE_CELLS
    if int(np.ceil(p * cells).sum()) > cells:
        raise ConfigError(f"{name}={p.tolist()!r}: the classes need more than the {cells} coarse cells")
    return p


def _round_half_away(v: float) -> int:
    """MATLAB ``round``: halves away from zero."""
    return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)


def _as_uniforms(values: ArrayLike) -> list[float]:
    rnd = [float(u) for u in np.asarray(values, float).ravel()]
    if not rnd or min(rnd) <= 0.0 or max(rnd) > 1.0:
        raise ValueError("uniforms must be a non-empty vector of numbers in (0, 1]")
    return rnd


def pour_coarse_map(class_percentages: ArrayLike, uniforms: ArrayLike, start_cells: ArrayLike,
                    refill: Callable[[], ArrayLike] | None = None,
                    size: int = COARSE_CELLS) -> NDArray[np.int_]:
    """The pouring algorithm on a size x size coarse map (spec 4.3), deterministic given its inputs.

    uniforms: the pre-drawn vector of U(0, 1] numbers; start_cells: (K, 2) 0-based start (row,
    column) per class. When the vector is used up, ``refill()`` supplies the next one; without it the
    vector is reused from its start, as QRSim does (a short vector can then trap a drop's random walk
    in a cycle forever, so ``PourTerrain`` always refills). Returns the (size, size) map of 0..K.
    """
    p = np.asarray(class_percentages, float)
    rnd = _as_uniforms(uniforms)
    pos = 0

    def draw() -> float:
        nonlocal pos, rnd
        if pos == len(rnd):
            pos = 0
            if refill is not None:
                rnd = _as_uniforms(refill())
        u = rnd[pos]
        pos += 1
        return u

    smap = [[0] * size for _ in range(size)]
    last = size - 1
    for c in range(1, p.size + 1):
        target = p[c - 1] * size * size
        count = 0
        x, y = (int(v) for v in start_cells[c - 1])
        while count < target:
            d = 4.0 * (-math.log(draw()))
            alpha = 2.0 * math.pi * draw()
            # QRSim: x = mod(x + round(d sin a), nr) + 1 on 1-based indices, i.e. a jump plus one
            # cell diagonally; kept as is (it is part of the generator's texture).
            x = (x + _round_half_away(d * math.sin(alpha)) + 1) % size
            y = (y - _round_half_away(d * math.cos(alpha)) + 1) % size
            drops = 10 + math.ceil(100.0 * draw())
            for _ in range(drops):
                if count >= target:
                    break
                xx, yy = x, y
                while smap[xx][yy] != 0:
                    if xx == 0 or xx == last or yy == 0 or yy == last:
                        moves = [(dx, dy) for dx, dy in _STEPS
                                 if 0 <= xx + dx <= last and 0 <= yy + dy <= last]
                        dx, dy = moves[math.ceil(len(moves) * draw()) - 1]
                    else:
                        dx, dy = _STEPS[math.ceil(4.0 * draw()) - 1]
                    xx += dx
                    yy += dy
                smap[xx][yy] = c
                count += 1
    return np.array(smap, dtype=np.int_)


def nearest_indices(n_fine: int, n_coarse: int) -> NDArray[np.intp]:
    """Coarse index of each of ``n_fine`` points spanning the same extent as ``n_coarse`` ones (nearest,
    ties to the larger index: QRSim's ``meshgrid`` + ``interp2 'nearest'`` along one axis)."""
    if n_fine == 1:
        return np.zeros(1, np.intp)
    pos = np.arange(n_fine) * ((n_coarse - 1) / (n_fine - 1))
    return np.minimum(np.floor(pos + 0.5).astype(np.intp), n_coarse - 1)


def upsample_nearest(coarse: NDArray[np.int_], rows: int, cols: int) -> NDArray[np.int_]:
    """Nearest-neighbour resampling of a coarse map spanning [0, rows] x [0, cols] onto rows x cols
    points spanning the same extent (QRSim's ``meshgrid`` + ``interp2 'nearest'``)."""
    return coarse[np.ix_(nearest_indices(rows, coarse.shape[0]), nearest_indices(cols, coarse.shape[1]))]


#: Uniforms drawn at a time from a block (the pouring reads 20,000-75,000 of a block).
UNIFORM_CHUNK = 65536


class UniformBlocks:
    """The pouring's blocks of ``n`` U(0, 1] numbers (``1 - rng.random(n)``, as MATLAB's ``rand``), read
    in chunks of ``UNIFORM_CHUNK`` as they are used. ``skip()`` reserves the next block of ``rng``: the
    Generator moves past it as if ``random(n)`` had drawn it (PCG64 spends one 64-bit output per double).
    ``next_chunk()`` returns the current block's next part, reserving the next block of ``rng`` when the
    reserved ones are used up (as a refill drawing ``random(n)`` then would)."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        self._rng = rng
        self._n = int(n)
        self._reserved: deque[np.random.Generator] = deque()
        self._current: np.random.Generator | None = None
        self._left = 0

    def skip(self) -> None:
        """Reserve the next block of ``rng``'s numbers (``rng`` then continues after it)."""
        bit_generator = self._rng.bit_generator
        state = bit_generator.state
        block = np.random.Generator(type(bit_generator)())
        block.bit_generator.state = state
        bit_generator.advance(self._n)
        advanced = bit_generator.state  # advance() empties the 32-bit buffer, which random() leaves alone
        advanced["has_uint32"], advanced["uinteger"] = state["has_uint32"], state["uinteger"]
        bit_generator.state = advanced
        self._reserved.append(block)

    def next_chunk(self) -> NDArray[np.float64]:
        """The next up to ``UNIFORM_CHUNK`` numbers of the stream of blocks."""
        if self._left == 0:
            if not self._reserved:
                self.skip()
            self._current = self._reserved.popleft()
            self._left = self._n
        take = min(UNIFORM_CHUNK, self._left)
        self._left -= take
        return 1.0 - self._current.random(take)  # type: ignore[union-attr]


@dataclass(frozen=True)
class GridGeometry:
    """Where ``grid[r, c]`` lies: north from ``xmin + r`` to ``xmin + r + 1``, east from ``ymin + c``
    to ``ymin + c + 1`` [m, NED]. As a ROS ``nav_msgs/OccupancyGrid`` in the ENU ``map`` frame:
    ``info.origin`` at (east = ymin, north = xmin), width = nc, height = nr, resolution 1 m, and the
    row-major data is ``grid.ravel()`` (rows go north, columns east)."""

    xmin_m: float
    ymin_m: float
    rows: int
    cols: int
    cell_size_m: float = CELL_SIZE_M


class PourTerrain:
    """Terrain class map of a flight area (spec 4.3 ``PourTerrain``); ``reset()`` pours a new map."""

    def __init__(self, limits_ned: ArrayLike, class_percentages: ArrayLike, rng: np.random.Generator) -> None:
        self.limits = area_limits("area.limits", limits_ned)
        self.class_percentages = check_class_percentages("area.terrain.classpercentages", class_percentages)
        self.rows = math.ceil(self.limits[1] - self.limits[0])
        self.cols = math.ceil(self.limits[3] - self.limits[2])
        self.geometry = GridGeometry(float(self.limits[0]), float(self.limits[2]), self.rows, self.cols)
        self._rng = rng
        self._coarse = np.zeros((COARSE_CELLS, COARSE_CELLS), dtype=np.int_)
        self._row_index = nearest_indices(self.rows, COARSE_CELLS)
        self._col_index = nearest_indices(self.cols, COARSE_CELLS)

    @property
    def num_classes(self) -> int:
        """Number of classes including the background class 0."""
        return self.class_percentages.size + 1

    @property
    def grid(self) -> NDArray[np.int_]:
        """Class of every cell, (nr, nc) ints in 0..K (built on each call); geometry in ``geometry``."""
        return self._coarse[np.ix_(self._row_index, self._col_index)]

    def reseed(self, rng: np.random.Generator) -> None:
        """Replace the Generator (QRSim ``resetSeed``); call ``reset()`` afterwards."""
        self._rng = rng

    def reset(self) -> None:
        """Pour a new map: nr nc K uniforms, then the K start cells, from the terrain's Generator
        (then further blocks of nr nc K uniforms if the pouring needs more: only in areas smaller
        than about 150 x 150 m for p = [0.2, 0.05], where QRSim reuses the vector). The blocks are
        read as used (``UniformBlocks``): the Generator ends where drawing them whole leaves it."""
        k = self.class_percentages.size
        blocks = UniformBlocks(self._rng, self.rows * self.cols * k)
        blocks.skip()
        starts = self._rng.integers(0, COARSE_CELLS, size=(k, 2))
        self._coarse = pour_coarse_map(self.class_percentages, blocks.next_chunk(), starts,
                                       refill=blocks.next_chunk)

    def cell_of(self, points_ned: ArrayLike) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """0-based (row, column) of points (M, 2 or 3) [m, NED], clamped to the grid."""
        pts = np.asarray(points_ned, float)
        if pts.ndim == 1:
            pts = pts[None, :]
        if pts.ndim != 2 or pts.shape[1] not in (2, 3) or not np.all(np.isfinite(pts[:, :2])):
            raise ValueError(f"points must be finite with shape (M, 2) or (M, 3), got {pts.shape}")
        r = np.clip(np.ceil(pts[:, 0] - self.limits[0]).astype(np.intp) - 1, 0, self.rows - 1)
        c = np.clip(np.ceil(pts[:, 1] - self.limits[2]).astype(np.intp) - 1, 0, self.cols - 1)
        return r, c

    def class_at(self, points_ned: ArrayLike) -> NDArray[np.int_]:
        """Terrain class (M,) of points (M, 2 or 3) [m, NED] (QRSim ``getClass``, z ignored)."""
        r, c = self.cell_of(points_ned)
        return self._coarse[self._row_index[r], self._col_index[c]]


def make_terrain(terrain_type: str, limits_ned: ArrayLike, class_percentages: ArrayLike,
                 rng: np.random.Generator) -> PourTerrain:
    """Build the terrain named by QRSim's ``terrain.type``; ConfigError for an unknown type."""
    if terrain_type != "PourTerrain":
        raise ConfigError(f"area.terrain.type={terrain_type!r} is not a known terrain type {TERRAIN_TYPES}")
    return PourTerrain(limits_ned, class_percentages, rng)

"""Which radio links are up: range, line of sight, and the loss probability of an up link.

Frames and units: NED positions [m] (the flight-area frame, as the fleet's true state). Pairwise work is
vectorised: the pairs within range come from a k-d tree (``scipy.spatial.cKDTree.query_pairs``, each
unordered pair once, O(N log N + pairs) rather than every pair), and only those pairs are ray cast through
the scene, in one call.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.comms.params import CommsParams
from qrsim_ros.core.world.scene import BOX, BUILDING, CYLINDER, GROUND, LABELS, Scene

#: The scene's face labels that block a radio link (the solids); the ground only when it is a height map
#: (a segment between two points above a flat ground plane cannot cross it; along the plane, between two
#: landed vehicles, a cast would graze it).
BLOCKING_LABELS = (BOX, CYLINDER, BUILDING)
#: Whether a hit blocks, indexed by its face label + 1 (index 0: no hit); the second row with the ground.
_BLOCKS = np.zeros((2, len(LABELS) + 1), bool)
_BLOCKS[:, np.add(BLOCKING_LABELS, 1)] = True
_BLOCKS[1, GROUND + 1] = True
#: A hit closer than this to the far antenna [m] does not block (the surface the vehicle rests on).
END_CLEARANCE_M = 1e-6
#: How many non-blocking surfaces (persons, a grazed flat ground) a line-of-sight ray looks past.
MAX_SEE_THROUGH = 8
#: How far past a non-blocking hit the next cast starts [m].
SEE_THROUGH_STEP_M = 1e-4


def pairs_in_range(positions_ned: ArrayLike, usable: ArrayLike,
                   range_m: float) -> tuple[NDArray[np.intp], Array]:
    """Unordered pairs (P, 2) of usable vehicles, i < j, at distance <= ``range_m`` [m], sorted, with
    their distances (P,) [m]. ``positions_ned`` (N, 3) [NED m]; ``usable`` (N,) bool."""
    p = np.asarray(positions_ned, float)
    idx = np.flatnonzero(np.asarray(usable, bool))
    if idx.size < 2:
        return np.zeros((0, 2), np.intp), np.zeros(0)
    from scipy.spatial import cKDTree  # here: scipy.spatial costs every node process 0.5 s to import

    local = cKDTree(p[idx]).query_pairs(range_m, output_type="ndarray")
    if not len(local):
        return np.zeros((0, 2), np.intp), np.zeros(0)
    pairs = idx[local]
    pairs.sort(axis=1)
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    d = np.linalg.norm(p[pairs[:, 1]] - p[pairs[:, 0]], axis=1)
    return pairs, d


def blocked(scene: Scene, a_ned: Array, b_ned: Array, distance_m: Array) -> NDArray[np.bool_]:
    """Whether the segment from each ``a_ned`` to ``b_ned`` (P, 3) [NED m], of length ``distance_m`` (P,)
    [m], passes through a solid of ``scene`` (BLOCKING_LABELS; a height-map ground too). One ray per
    segment, from a to b; a solid's surface crossed before b blocks. A ray whose first hit does not block
    (a person, the flat ground grazed) is cast again from just past that hit, at most
    MAX_SEE_THROUGH times (after that: not blocked)."""
    out = np.zeros(len(distance_m), bool)
    todo = np.flatnonzero(distance_m > 0)
    if not todo.size:
        return out
    direction = (b_ned[todo] - a_ned[todo]) / distance_m[todo, None]
    start_m = np.zeros(todo.size)  # how far along each ray the cast starts
    labels = scene.face_label
    blocks = _BLOCKS[0 if scene.ground.flat else 1]
    for _ in range(MAX_SEE_THROUGH + 1):
        left_m = distance_m[todo] - start_m
        hits = scene.cast(a_ned[todo] + direction * start_m[:, None], direction, float(left_m.max()))
        before_b = hits.hit & (hits.range_m < left_m - END_CLEARANCE_M)
        label = np.where(before_b, labels[np.maximum(hits.face, 0)], -1)
        solid = blocks[label + 1]
        out[todo[solid]] = True
        again = before_b & ~solid
        if not again.any():
            break
        todo, direction = todo[again], direction[again]
        start_m = start_m[again] + hits.range_m[again] + SEE_THROUGH_STEP_M
    return out


def loss_probability(distance_m: ArrayLike, params: CommsParams) -> Array:
    """Probability that one transmission over an up link of length ``distance_m`` [m] is lost:
    ``loss_probability``, rising linearly from ``loss_start_m`` to 1 at ``range_m`` when a start is set
    (siegemund_2011 section 5.1: the error probability grows towards the edge of the WLAN range)."""
    d = np.asarray(distance_m, float)
    base = params.loss_probability
    if params.loss_start_m is None:
        return np.full(d.shape, base)
    start = params.loss_start_m
    rise = np.clip((d - start) / (params.range_m - start), 0.0, 1.0)
    return base + (1.0 - base) * rise


class LinkState:
    """The links of one tick: which directed links are up (symmetric: a radio link is two-way).

    up: (N, N) bool, up[i, j] for i != j: vehicles i and j are both usable, within ``range_m`` and (with
    ``line_of_sight`` and a scene) no solid between them. pairs (P, 2) / distance_m (P,): the unordered
    up pairs, i < j, and their lengths [m].
    """

    def __init__(self, positions_ned: ArrayLike, usable: ArrayLike, params: CommsParams,
                 scene: Scene | None = None) -> None:
        p = np.asarray(positions_ned, float)
        n = len(p)
        ok = np.asarray(usable, bool) & np.all(np.isfinite(p), axis=1)
        pairs, d = pairs_in_range(p, ok, params.range_m)
        if params.line_of_sight and scene is not None and len(pairs):
            keep = ~blocked(scene, p[pairs[:, 0]], p[pairs[:, 1]], d)
            pairs, d = pairs[keep], d[keep]
        self.pairs = pairs
        self.distance_m = d
        self.up = np.zeros((n, n), bool)
        self.up[pairs[:, 0], pairs[:, 1]] = True
        self.up[pairs[:, 1], pairs[:, 0]] = True

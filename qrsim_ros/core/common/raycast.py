"""First-hit ray casting against a triangle mesh, through Embree (the ``embreex`` bindings): a BVH
built once per geometry, queried with batches of rays.

Every scene sensor (lidar, range finders, cameras, depth) asks one question: along these rays, what is
hit first, how far, and with which face normal. Frames are the caller's (the scene is in NED); ranges
are in metres along unit directions.

Why Embree through ``embreex`` and not Open3D's ``RaycastingScene`` (both measured on this machine,
docs/SCENE.md): Open3D traced about twice as many rays per second on one thread, but its wheel is
400 MB (105 MB for ``open3d-cpu``) and needs system libraries that are not on a fresh machine of this
kind (``libusb-1.0``, ``libudev``, ``libEGL``, ``libGL``, ``libX11``), so a clean clone could not import it.
``embreex`` is a 14 MB self-contained wheel with Embree 4 inside.

Embree works in single precision: a range is exact to about 1e-7 of the distance travelled from the
origin (1 mm at 10 km); origins are given relative to ``offset_ned`` (the scene's centre) to keep them
small.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_2D_IN, njit

#: Embree's "no hit" primitive/geometry id.
NO_HIT = -1


@dataclass(frozen=True)
class RayHits:
    """The first hits of M rays.

    range_m: distance along each unit direction [m], +inf where nothing is hit within the range.
    face: index of the triangle hit (M,), NO_HIT where nothing is hit.
    normal: unit normal of the triangle hit (M, 3), facing the ray's origin; zeros where nothing is hit.
    """

    range_m: Array
    face: NDArray[np.int64]
    normal: Array

    @property
    def hit(self) -> NDArray[np.bool_]:
        return self.face != NO_HIT

    def points(self, origins: ArrayLike, directions: ArrayLike) -> Array:
        """Hit points (M, 3) in the rays' frame; NaN where nothing is hit."""
        o = np.asarray(origins, float)
        d = np.asarray(directions, float)
        r = np.where(self.hit, self.range_m, np.nan)
        return o + d * r[:, None]


class RayCaster:
    """Embree BVH over a triangle mesh (vertices (V, 3), faces (F, 3) of vertex indices).

    ``offset`` is subtracted from the vertices and from every ray origin (single-precision accuracy near
    the scene's centre). The mesh is fixed; build a new caster when the geometry changes (a BVH of a
    few ten thousand triangles takes milliseconds).
    """

    def __init__(self, vertices: ArrayLike, faces: ArrayLike, offset: ArrayLike | None = None) -> None:
        from embreex import rtcore_scene
        from embreex.mesh_construction import TriangleMesh

        v = np.asarray(vertices, float)
        f = np.asarray(faces, np.int64)
        if v.ndim != 2 or v.shape[1] != 3 or f.ndim != 2 or f.shape[1] != 3:
            raise ValueError(f"a mesh needs vertices (V, 3) and faces (F, 3), got {v.shape} and {f.shape}")
        if len(f) and (f.min() < 0 or f.max() >= len(v)):
            raise ValueError("a face refers to a vertex that does not exist")
        if not np.all(np.isfinite(v)):
            raise ValueError("mesh vertices must be finite")
        self.offset = np.zeros(3) if offset is None else np.asarray(offset, float).reshape(3)
        self.num_faces = len(f)
        tri = (v[f] - self.offset).astype(np.float32)
        self._normals = _unit_normals(v[f])
        self._scene = rtcore_scene.EmbreeScene()
        if len(f):
            TriangleMesh(self._scene, tri)

    @property
    def face_normals(self) -> Array:
        """Unit normal of every face (F, 3) (right-handed vertex order)."""
        return self._normals.copy()

    def cast(self, origins: ArrayLike, directions: ArrayLike, max_range_m: float = np.inf) -> RayHits:
        """First hits of rays from ``origins`` (M, 3) along unit ``directions`` (M, 3), up to
        ``max_range_m`` [m] (beyond it: no hit)."""
        o = np.asarray(origins, float).reshape(-1, 3)
        d = np.asarray(directions, float).reshape(-1, 3)
        if o.shape != d.shape:
            raise ValueError(f"origins {o.shape} and directions {d.shape} differ")
        m = len(d)
        if m == 0 or self.num_faces == 0:
            return RayHits(np.full(m, np.inf), np.full(m, NO_HIT, np.int64), np.zeros((m, 3)))
        o32 = np.ascontiguousarray(o - self.offset, np.float32)
        d32 = np.ascontiguousarray(d, np.float32)
        far = None if not np.isfinite(max_range_m) else np.full(m, max_range_m, np.float32)
        out = self._scene.run(o32, d32, dists=far, output=1)
        face = np.asarray(out["primID"], np.int64)
        face[np.asarray(out["geomID"]) == NO_HIT] = NO_HIT
        hit = face != NO_HIT
        rng = np.where(hit, np.asarray(out["tfar"], float), np.inf)
        normal = np.empty((m, 3))
        _facing_normals(face, np.ascontiguousarray(d), self._normals, normal)
        return RayHits(rng, face, normal)


@njit(f"void(int64[::1], {F8_2D_IN}, {F8_2D_IN}, float64[:, ::1])")
def _facing_normals(face, directions, face_normals, out):
    """out[i] = the unit normal of face[i], turned to face the ray (against directions[i]); zeros where
    nothing was hit (face -1). One pass instead of a handful of masked numpy copies (a camera frame
    casts a few hundred thousand rays)."""
    for i in range(face.shape[0]):
        f = face[i]
        if f < 0:
            out[i, 0] = out[i, 1] = out[i, 2] = 0.0
            continue
        n0, n1, n2 = face_normals[f, 0], face_normals[f, 1], face_normals[f, 2]
        if n0 * directions[i, 0] + n1 * directions[i, 1] + n2 * directions[i, 2] > 0.0:
            n0, n1, n2 = -n0, -n1, -n2
        out[i, 0], out[i, 1], out[i, 2] = n0, n1, n2


def _unit_normals(tri: Array) -> Array:
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    length = np.linalg.norm(n, axis=1)
    return n / np.where(length > 0.0, length, 1.0)[:, None]

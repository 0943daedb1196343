"""The ray caster's Embree binding (core.common.raycast): Embree 4's packet queries through ctypes give
the hits Embree's own single-ray query (the embreex package's ``run``) gives, for whole and partial
packets, and no ray slips through the edge two triangles share."""

from __future__ import annotations

import numpy as np
import pytest

from qrsim_ros.core.common.raycast import NO_HIT, RayCaster, embree
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.world.scene import GenerateParams, Scene, SceneParams


def embreex_single_rays(vertices: np.ndarray, faces: np.ndarray, origins: np.ndarray,
                        directions: np.ndarray, far_m: float) -> tuple[np.ndarray, np.ndarray]:
    """(range [m] with +inf for no hit, face) from embreex's own binding, one ray after another."""
    from embreex import rtcore_scene
    from embreex.mesh_construction import TriangleMesh

    reference = rtcore_scene.EmbreeScene()
    TriangleMesh(reference, vertices[faces].astype(np.float32))
    out = reference.run(origins.astype(np.float32), directions.astype(np.float32),
                        dists=np.full(len(origins), far_m, np.float32), output=1)
    hit = np.asarray(out["geomID"]) != -1
    return np.where(hit, np.asarray(out["tfar"], float), np.inf), np.where(hit, out["primID"], NO_HIT)


@pytest.mark.parametrize("num_rays", [1, 15, 16, 17, 1000, 20_011])
def test_packets_give_embrees_single_ray_hits(num_rays: int) -> None:
    scene = Scene(SceneParams(generate=GenerateParams(count=60, keep_out_m=5.0)),
                  (-60.0, 60.0, -60.0, 60.0, -40.0, 0.0), 0.0, RandomStreams(11))
    vertices, faces = scene.vertices, scene.faces
    rng = np.random.default_rng(num_rays)
    origins = rng.uniform([-50, -50, -30], [50, 50, -1], (num_rays, 3))
    directions = rng.normal(size=(num_rays, 3))
    directions /= np.linalg.norm(directions, axis=1)[:, None]
    hits = RayCaster(vertices, faces).cast(origins, directions, 80.0)
    ref_range, ref_face = embreex_single_rays(vertices, faces, origins, directions, 80.0)
    np.testing.assert_array_equal(hits.hit, ref_face != NO_HIT)
    np.testing.assert_allclose(hits.range_m[hits.hit], ref_range[hits.hit], rtol=1e-6, atol=1e-5)
    same_face = hits.face == ref_face  # a ray through an edge may name either face, at the same range
    assert same_face.mean() > 0.999, same_face.mean()
    if hits.hit.any():
        normals = RayCaster(vertices, faces).face_normals[hits.face[hits.hit]]
        facing = np.sign(np.einsum("ij,ij->i", normals, directions[hits.hit]))
        np.testing.assert_allclose(hits.normal[hits.hit], -facing[:, None] * normals)  # against the ray


def test_no_ray_slips_through_a_shared_edge() -> None:
    """A 10 x 10 grid of unit squares (two triangles each) and rays aimed exactly at every vertex and at
    every edge's midpoint, along and across the diagonals: every ray hits the plane."""
    n = 10
    grid = np.stack(np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij"), -1).reshape(-1, 2)
    vertices = np.column_stack([grid, np.zeros(len(grid))])
    corner = (np.arange(n)[:, None] * (n + 1) + np.arange(n)[None, :]).ravel()
    faces = np.concatenate([np.column_stack([corner, corner + n + 1, corner + n + 2]),
                            np.column_stack([corner, corner + n + 2, corner + 1])])
    halves = np.array([[0.0, 0.0], [0.5, 0.0], [0.0, 0.5], [0.5, 0.5]])  # vertices, edges' and faces' middles
    targets = (grid[None] + halves[:, None]).reshape(-1, 2)
    targets = targets[(targets <= n).all(axis=1)]
    caster = RayCaster(vertices, faces)
    for direction in ([0.0, 0.0, 1.0], [1.0, 1.0, 2.0], [1.0, -1.0, 0.5], [0.0, 1.0, 3.0]):
        d = np.asarray(direction) / np.linalg.norm(direction)
        origins = np.column_stack([targets, np.zeros(len(targets))]) - 10.0 * d
        hits = caster.cast(origins, np.tile(d, (len(targets), 1)))
        inside = ((targets > 0) & (targets < n)).all(axis=1)  # the plane's border may be missed or not
        assert hits.hit[inside].all(), (direction, targets[inside][~hits.hit[inside]])
        np.testing.assert_allclose(hits.range_m[inside], 10.0, atol=1e-5)


def test_the_library_is_embree_4_with_packets() -> None:
    api = embree()
    assert api.packet_width in (4, 8, 16)
    assert api.error() == 0

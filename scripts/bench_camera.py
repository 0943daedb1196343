#!/usr/bin/env python3
"""Benchmark: the scene sensors in a scene of 200 obstacles, one function per sensor.

Scene: the search-and-rescue area (245 m x 245 m, its terrain classes and 10 persons) with 200
generated obstacles (boxes, trees, buildings). One vehicle flies a circle of 60 m radius at 20 m,
turning, so every frame sees a different part of the scene.

- ``bench_fisheye``: the default 640 x 480 equidistant 185 degree fisheye (rgb8, pixel noise on, depth
  from the same rays): ms per frame split into the rays into the world, the cast (``Scene.cast``: Embree
  plus the hit bookkeeping), the shading, the image (noise and quantisation) and the depth image; rays
  per second of the cast and of Embree's traversal alone; the share of one core at 20 Hz.

Usage: ./qrsim exec -- python scripts/bench_scene.py [--frames 100]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.sensors.scene_camera import SceneCamera, SceneCameraParams
from qrsim_ros.core.vehicles.pelican import (
    STATE_DOWN,
    STATE_EAST,
    STATE_HEADING,
    STATE_NORTH,
    STATE_PITCH,
    STATE_ROLL,
)
from qrsim_ros.core.world.area import BoxWithPersonsArea, PersonsAreaParams
from qrsim_ros.core.world.scene import GenerateParams, Scene, SceneParams

OBSTACLES = 200


def build_scene(seed: int = 4) -> tuple[Scene, BoxWithPersonsArea]:
    """The benchmark's scene: the default search-and-rescue area, 200 obstacles, its persons."""
    streams = RandomStreams(seed)
    area = BoxWithPersonsArea(1, PersonsAreaParams(num_persons_range=(10, 10)), streams)
    area.reset()
    scene = Scene(SceneParams(generate=GenerateParams(count=OBSTACLES)), area.limits, 0.0, streams)
    scene.set_persons(area.persons_position_ned)
    scene.terrain = area.terrain
    return scene, area


def flight(frames: int, dt_s: float) -> np.ndarray:
    """States (frames, 13) along a circle of 60 m at 20 m height, heading along the circle."""
    t = np.arange(frames) * dt_s
    a = 2.0 * math.pi * t / 30.0
    x = np.zeros((frames, 13))
    x[:, STATE_NORTH], x[:, STATE_EAST], x[:, STATE_DOWN] = 60.0 * np.cos(a), 60.0 * np.sin(a), -20.0
    x[:, STATE_ROLL], x[:, STATE_PITCH], x[:, STATE_HEADING] = 0.05 * np.sin(3 * a), -0.08, a + math.pi / 2
    return x


def bench_fisheye(frames: int) -> None:
    scene, _ = build_scene()
    params = SceneCameraParams(on=True, depth=True)
    cam = SceneCamera(1, params, RandomStreams(1), scene)
    xs = flight(frames + 5, params.dt_s)
    for x in xs[:5]:  # warm up (the first cast builds the BVH)
        cam.reset(x[None])
    parts: dict[str, list[float]] = {}
    totals = []
    for x in xs[5:]:
        t0 = time.perf_counter()
        cam.reset(x[None])
        totals.append(1e3 * (time.perf_counter() - t0))
        for k, v in cam.last_timing_ms.items():
            parts.setdefault(k, []).append(v)
    # the same rays through embreex's own single-ray query (what the caster used before its packets)
    from embreex import rtcore_scene
    from embreex.mesh_construction import TriangleMesh

    o, d = cam.rays_ned(xs[-1])
    caster = scene.caster
    reference = rtcore_scene.EmbreeScene()
    TriangleMesh(reference, (scene.vertices[scene.faces] - caster.offset).astype(np.float32))
    o32 = np.ascontiguousarray(np.broadcast_to(o - caster.offset, d.shape), np.float32)
    d32 = np.ascontiguousarray(d, np.float32)
    raw = []
    for _ in range(10):
        t0 = time.perf_counter()
        reference.run(o32, d32, output=1)
        raw.append(time.perf_counter() - t0)
    rays = cam.last_rays
    med = {k: float(np.median(v)) for k, v in parts.items()}
    total = float(np.median(totals))
    print(f"fisheye {params.width_px}x{params.height_px} equidistant {params.fov_deg:g} deg, rgb8 + noise + "
          f"depth, {len(scene.faces)} triangles ({OBSTACLES} obstacles), {frames} frames, medians:")
    print(f"  rays with a pixel: {rays} of {params.width_px * params.height_px} "
          f"({rays / (params.width_px * params.height_px):.0%})")
    for k in ("rays", "cast", "shade", "image", "depth"):
        print(f"  {k:6s} {med[k]:6.1f} ms")
    print(f"  frame  {total:6.1f} ms  (p90 {np.percentile(totals, 90):.1f} ms)")
    print(f"  cast: {rays / med['cast'] * 1e-3:.2f} M rays/s in packets; embreex's single-ray query: "
          f"{np.median(raw) * 1e3:.1f} ms, {rays / np.median(raw) * 1e-6:.2f} M rays/s (one thread)")
    print(f"  at 20 Hz: {20 * total / 10:.0f} % of one core; at 1 / dt_s = {1 / params.dt_s:g} Hz: "
          f"{total / params.dt_s / 10:.0f} %")


BENCHMARKS: dict[str, Callable[[int], None]] = {"fisheye": bench_fisheye}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=100, help="frames (scans) per sensor")
    p.add_argument("--only", choices=sorted(BENCHMARKS), help="run one sensor's benchmark")
    args = p.parse_args()
    for name, bench in BENCHMARKS.items():
        if args.only in (None, name):
            bench(args.frames)


if __name__ == "__main__":
    main()

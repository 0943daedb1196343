#!/usr/bin/env python3
"""Benchmark: the scene sensors in a generated scene of 200 obstacles (the performance target:
one vehicle with a VLP-16 at 10 Hz and a 640 x 480 fisheye at 20 Hz, both at rate in real time on one
core). One function per sensor, printing ms per scan/frame and rays per second.

- ``cast``: the bare ray caster (Embree through embreex), a 640 x 480 fan of rays from 20 m, for
  reference;
- ``lidar``: the lidar model (core.sensors.lidar) of one vehicle flying slowly through the obstacles at
  8 m, stepped tick by tick for whole seconds (every tick casts its share of the sweep, with the pose
  interpolated per ray), plus building the cloud (``points``, what the PointCloud2 carries).

- ``fisheye``: the default 640 x 480 fisheye with depth (scripts/bench_camera.py, per phase).

Usage: ./qrsim exec -- python scripts/bench_scene.py [--seconds 3] [--model vlp16] [cast] [lidar] [fisheye]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.sensors.lidar import Lidar, LidarParams
from qrsim_ros.core.vehicles.pelican import STATE_POSE
from qrsim_ros.core.world.scene import GenerateParams, Scene, SceneParams

LIMITS = (-150.0, 150.0, -150.0, 150.0, -60.0, 0.0)


def scene_200(seed: int = 3) -> Scene:
    """A generated scene of 200 obstacles (boxes, trees, buildings) around a clear start at the origin."""
    params = SceneParams(generate=GenerateParams(count=200, keep_out_m=10.0, keep_out_ne_m=((0.0, 0.0),)))
    return Scene(params, LIMITS, 0.0, RandomStreams(seed))


def bench_cast(scene: Scene, repeats: int = 5) -> None:
    """The bare caster: 307,200 rays (640 x 480 over 90 x 70 deg, looking down 30 deg) from 20 m."""
    az, el = np.meshgrid(np.radians(np.linspace(-45, 45, 640)), np.radians(np.linspace(-65, 5, 480)))
    d = np.column_stack([(np.cos(el) * np.cos(az)).ravel(), (np.cos(el) * np.sin(az)).ravel(),
                         (-np.sin(el)).ravel()])
    o = np.tile([0.0, 0.0, -20.0], (len(d), 1))
    scene.cast(o, d, 200.0)  # builds the BVH
    t0 = time.perf_counter()
    for _ in range(repeats):
        scene.cast(o, d, 200.0)
    dt = (time.perf_counter() - t0) / repeats
    print(f"cast:  {len(d)} rays in {dt * 1e3:.1f} ms: {len(d) / dt / 1e6:.2f} M rays/s "
          f"({len(scene.faces)} triangles)")


def bench_lidar(scene: Scene, model: str, seconds: float) -> None:
    """One vehicle's lidar stepped tick by tick for ``seconds`` of simulated time."""
    lidar = Lidar(1, LidarParams(model=model), RandomStreams(1), scene)

    def state(k: int) -> np.ndarray:
        t = k * BASE_DT_S
        x = np.zeros((1, 13))
        x[0, STATE_POSE] = (2.0 * t, 1.0 * t, -8.0, 0.02 * math.sin(t), 0.03, 0.2 * t)
        return x

    lidar.reset(state(0))
    ticks = round(seconds / BASE_DT_S)
    sweeps = 0
    points = 0
    cloud_s = 0.0
    t0 = time.perf_counter()
    for k in range(1, ticks + 1):
        if lidar.step(k, state(k)):
            sweeps += 1
            c0 = time.perf_counter()
            points += len(lidar.points(0).tobytes()) // 22
            cloud_s += time.perf_counter() - c0
    total = time.perf_counter() - t0
    rays = lidar.rays.size * seconds * lidar.params.rate_hz
    print(f"lidar {model}: {lidar.rays.size} rays per scan at {lidar.params.rate_hz:g} Hz; "
          f"{total / sweeps * 1e3:.1f} ms per scan ({cloud_s / sweeps * 1e3:.1f} of it the cloud), "
          f"{rays / (total - cloud_s) / 1e6:.2f} M rays/s, {points / sweeps:.0f} returns per scan, "
          f"{total / seconds * 100:.1f} % of one core at rate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--model", default="vlp16")
    parser.add_argument("--frames", type=int, default=100, help="fisheye frames")
    parser.add_argument("which", nargs="*", default=["cast", "lidar", "fisheye"])
    args = parser.parse_args()
    scene = scene_200()
    if "cast" in args.which:
        bench_cast(scene)
    if "lidar" in args.which:
        bench_lidar(scene, args.model, args.seconds)
    if "fisheye" in args.which:
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_camera import bench_fisheye

        bench_fisheye(args.frames)


if __name__ == "__main__":
    main()

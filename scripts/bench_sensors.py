#!/usr/bin/env python3
"""Benchmark: one 20 ms step of the full noisy sensor suite for 1, 10 and 100 vehicles.

Suite per vehicle: AHARS (accelerometer, gyroscope, orientation estimator, altimeter) at 50 Hz, GPS
(shared space segment + receiver) at 5 Hz, camera with person classifier at 1 Hz over a
search-and-rescue area with persons and terrain. Vehicles hover at 25 m spread over the area, so
every camera frame is a full 28 x 21 grid. The cost is averaged over whole seconds (50 ticks), so it
includes the GPS and camera updates in proportion.

Usage: ./qrsim exec -- python scripts/bench_sensors.py [--seconds 4]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.sensors.ahars import Ahars
from qrsim_ros.core.sensors.camera import CameraWithClassifier
from qrsim_ros.core.sensors.gps import GpsReceiver, GpsSpaceSegment
from qrsim_ros.core.vehicles.pelican import expand_state
from qrsim_ros.core.world.area import BoxWithPersonsArea, PersonsAreaParams


def hover_states(n: int, half_width_m: float) -> np.ndarray:
    g = np.random.default_rng(5)
    pos = np.column_stack([g.uniform(-0.8, 0.8, (n, 2)) * half_width_m, np.full(n, -25.0)])
    return expand_state(np.column_stack([pos, np.zeros((n, 3))]))


def suite_cost_s(n: int, seconds: int) -> tuple[float, dict[str, float]]:
    streams = RandomStreams(11)
    area_params = PersonsAreaParams()
    area = BoxWithPersonsArea(n, area_params, streams)
    area.reset()
    x = hover_states(n, area_params.limits_ned[1])
    accel = np.tile([0.0, 0.0, -9.81], (n, 1))
    valid = np.ones(n, bool)
    ahars = Ahars(n, streams=streams)
    space = GpsSpaceSegment(streams=streams)
    gps = GpsReceiver(n, space, streams=streams)
    camera = CameraWithClassifier(n, streams=streams)
    space.reset()
    ahars.reset(x)
    gps.reset(x)
    camera.reset(x)
    parts = {"ahars": 0.0, "gps": 0.0, "camera": 0.0}
    ticks = seconds * round(1.0 / BASE_DT_S)
    for k in range(1, ticks + 1):
        t0 = time.perf_counter()
        ahars.step(k, x, accel)
        t1 = time.perf_counter()
        space.step(k)
        gps.step(k, x)
        t2 = time.perf_counter()
        camera.step(k, x, valid, area.persons_position_ned, area.terrain_class_at)
        t3 = time.perf_counter()
        parts["ahars"] += t1 - t0
        parts["gps"] += t2 - t1
        parts["camera"] += t3 - t2
    per_tick = {name: v / ticks for name, v in parts.items()}
    return sum(per_tick.values()), per_tick


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=4, help="simulated seconds per measurement")
    args = parser.parse_args()
    print("cost of one 20 ms step [us]")
    print(f"{'N':>4} {'us/step':>9} {'x one vehicle':>14} {'ahars':>8} {'gps':>8} {'camera':>8}")
    base = None
    for n in (1, 10, 100):
        total, parts = suite_cost_s(n, args.seconds)
        base = base or total
        print(f"{n:4d} {total * 1e6:9.0f} {total / base:14.1f} {parts['ahars'] * 1e6:8.0f} "
              f"{parts['gps'] * 1e6:8.0f} {parts['camera'] * 1e6:8.0f}")


if __name__ == "__main__":
    main()

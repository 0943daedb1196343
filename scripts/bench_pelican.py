#!/usr/bin/env python3
"""Benchmark: cost of one Pelican step, one fleet of N vs N fleets of one; prints real-time factors.

Usage: ./qrsim exec -- python scripts/bench_pelican.py [--steps 500] [--noise]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qrsim_ros.core.pelican import DT_S, HOVER_THROTTLE, PelicanFleet, PelicanParams, default_state_limits


def fleet_of(n: int, noise: bool) -> PelicanFleet:
    params = PelicanParams(
        state_limits=default_state_limits([-1e5, 1e5, -1e5, 1e5, -1e4, 0]),
        dyn_noise=np.full(6, 0.2 if noise else 0.0),
    )
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(1).spawn(n)]
    fleet = PelicanFleet(n, params, rngs)
    start = np.zeros((n, 6))
    start[:, 0] = 10.0 * np.arange(n)
    start[:, 2] = -100.0
    fleet.set_state(start)
    return fleet


def time_steps(fleets: list[PelicanFleet], steps: int) -> float:
    controls = [np.tile([0.01, -0.01, HOVER_THROTTLE, 0.1, 12.0], (f.num_vehicles, 1)) for f in fleets]
    t0 = time.perf_counter()
    for _ in range(steps):
        for f, u in zip(fleets, controls, strict=True):
            f.step(u)
    return (time.perf_counter() - t0) / steps


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--noise", action="store_true", help="with dynamic noise (one stream per vehicle)")
    args = parser.parse_args()
    print(f"{'N':>5} {'fleet of N [us/step]':>21} {'N fleets of 1 [us/step]':>24} {'speed-up':>9} "
          f"{'RTF fleet':>10} {'us/vehicle':>11}")
    for n in (1, 10, 100, 1000):
        vec = time_steps([fleet_of(n, args.noise)], args.steps)
        single_steps = max(1, args.steps // max(1, n // 10))
        single = time_steps([fleet_of(1, args.noise) for _ in range(n)], single_steps)
        print(f"{n:5d} {vec * 1e6:21.1f} {single * 1e6:24.1f} {single / vec:9.1f} "
              f"{DT_S / vec:10.0f} {vec * 1e6 / n:11.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: cost of one Pelican step, one fleet of N vs N fleets of one; prints real-time factors.

With ``--components`` it also times, per update, the other per-vehicle models that run every tick or
every few ticks: Dryden turbulence (every 20 ms tick), AHARS (every tick) and the GPS receiver with
its space segment (every 0.2 s). Each figure is the best of five rounds (the machine may be shared).
The first line says whether the kernels are compiled (numba) or plain Python (``QRSIM_DISABLE_JIT=1``
or numba missing) and how long importing them took (compilation on the first run, the on-disk cache
afterwards).

Usage: ./qrsim exec -- python scripts/bench_pelican.py [--steps 500] [--noise] [--components]
"""

from __future__ import annotations

import time

T_IMPORT0 = time.perf_counter()

import numpy as np  # noqa: E402
from benchlib import (  # noqa: E402
    bench_parser,
    best_of_five,
    best_step_time,
    parse_args,
    pelican_controls,
    pelican_fleet,
)

from qrsim_ros.core.vehicles.pelican import BASE_DT_S, STATE_VELOCITY_FRD, PelicanFleet, expand_state  # noqa: E402
from qrsim_ros.core.world.turbulence import DrydenTurbulence  # noqa: E402

T_IMPORT1 = time.perf_counter()


def time_steps(fleets: list[PelicanFleet], steps: int) -> float:
    """Best mean time [s] of one step of every fleet in ``fleets``."""
    controls = [pelican_controls(f.num_vehicles) for f in fleets]

    def step_all() -> None:
        for f, u in zip(fleets, controls, strict=True):
            f.step(u)

    return best_step_time(step_all, steps)


def hover_states(n: int) -> np.ndarray:
    x = expand_state(np.column_stack([10.0 * np.arange(n), np.zeros(n), np.full(n, -25.0), np.zeros((n, 3))]))
    x[:, STATE_VELOCITY_FRD] = [3.0, 0.0, 0.0]  # some airspeed (forward) for the turbulence
    return x


def components() -> None:
    """Per-update cost of turbulence, AHARS and GPS for 1, 10 and 100 vehicles."""
    from qrsim_ros.core.common.rng import RandomStreams
    from qrsim_ros.core.sensors.ahars import Ahars
    from qrsim_ros.core.sensors.gps import GpsReceiver, GpsSpaceSegment

    print(f"\n{'N':>5} {'turbulence [us/tick]':>21} {'AHARS [us/tick]':>16} {'GPS [us/update]':>16}")
    for n in (1, 10, 100):
        x = hover_states(n)
        turb = DrydenTurbulence(n, streams=RandomStreams(3))
        turb.reset(x)
        t_turb = best_of_five(lambda turb=turb, x=x: turb.step(1, x), 400)
        ahars = Ahars(n, streams=RandomStreams(3))
        ahars.reset(x)
        accel = np.tile([0.0, 0.0, -9.81], (n, 1))
        t_ahars = best_of_five(lambda ahars=ahars, x=x, accel=accel: ahars.step(1, x, accel), 400)
        streams = RandomStreams(4)
        space = GpsSpaceSegment(streams=streams)
        gps = GpsReceiver(n, space, streams=streams)
        space.reset()
        gps.reset(x)

        def gps_update(space: GpsSpaceSegment = space, gps: GpsReceiver = gps, x: np.ndarray = x,
                       tick: list[int] = [0]) -> None:  # noqa: B006 (the tick counter of this closure)
            tick[0] += space.ticks
            space.step(tick[0])
            gps.step(tick[0], x)

        t_gps = best_of_five(gps_update, max(5, 100 // n))
        print(f"{n:5d} {t_turb * 1e6:21.1f} {t_ahars * 1e6:16.1f} {t_gps * 1e6:16.1f}")


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--noise", action="store_true", help="with dynamic noise (one stream per vehicle)")
    parser.add_argument("--components", action="store_true", help="also time turbulence, AHARS and GPS")
    args = parse_args(parser, T_IMPORT1 - T_IMPORT0)
    print(f"{'N':>5} {'fleet of N [us/step]':>21} {'N fleets of 1 [us/step]':>24} {'speed-up':>9} "
          f"{'RTF fleet':>10} {'us/vehicle':>11}")
    for n in (1, 10, 100, 1000):
        vec = time_steps([pelican_fleet(n, args.noise)], args.steps)
        single_steps = max(5, args.steps // max(1, n // 10))
        single = time_steps([pelican_fleet(1, args.noise) for _ in range(n)], single_steps)
        print(f"{n:5d} {vec * 1e6:21.1f} {single * 1e6:24.1f} {single / vec:9.1f} "
              f"{BASE_DT_S / vec:10.0f} {vec * 1e6 / n:11.2f}")
    if args.components:
        components()


if __name__ == "__main__":
    main()

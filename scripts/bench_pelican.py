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

import argparse
import time
from collections.abc import Callable

T_IMPORT0 = time.perf_counter()

import numpy as np  # noqa: E402

from qrsim_ros.core.common.jit import JIT_ENABLED  # noqa: E402
from qrsim_ros.core.vehicles.pelican import (  # noqa: E402
    BASE_DT_S,
    HOVER_THROTTLE,
    STATE_DOWN,
    STATE_NORTH,
    STATE_VELOCITY_FRD,
    PelicanFleet,
    PelicanParams,
    default_state_limits,
    expand_state,
)
from qrsim_ros.core.world.turbulence import DrydenTurbulence  # noqa: E402

T_IMPORT1 = time.perf_counter()


def fleet_of(n: int, noise: bool) -> PelicanFleet:
    params = PelicanParams(
        state_limits=default_state_limits([-1e5, 1e5, -1e5, 1e5, -1e4, 0]),
        dyn_noise=np.full(6, 0.2 if noise else 0.0),
    )
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(1).spawn(n)]
    fleet = PelicanFleet(n, params, rngs)
    start = np.zeros((n, 6))
    start[:, STATE_NORTH] = 10.0 * np.arange(n)
    start[:, STATE_DOWN] = -100.0
    fleet.set_state(start)
    return fleet


def time_steps(fleets: list[PelicanFleet], steps: int) -> float:
    controls = [np.tile([0.01, -0.01, HOVER_THROTTLE, 0.1, 12.0], (f.num_vehicles, 1)) for f in fleets]
    best = np.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(max(1, steps // 5)):
            for f, u in zip(fleets, controls, strict=True):
                f.step(u)
        best = min(best, (time.perf_counter() - t0) / max(1, steps // 5))
    return best


def best_of_five(func: Callable[[], object], calls: int) -> float:
    """Best mean time of one call [s] over five rounds of ``calls`` calls."""
    best = np.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            func()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--noise", action="store_true", help="with dynamic noise (one stream per vehicle)")
    parser.add_argument("--components", action="store_true", help="also time turbulence, AHARS and GPS")
    args = parser.parse_args()
    mode = "numba-compiled kernels" if JIT_ENABLED else "plain-Python kernels (no JIT)"
    print(f"{mode}; importing numpy, numba and the kernels took {T_IMPORT1 - T_IMPORT0:.2f} s")
    print(f"{'N':>5} {'fleet of N [us/step]':>21} {'N fleets of 1 [us/step]':>24} {'speed-up':>9} "
          f"{'RTF fleet':>10} {'us/vehicle':>11}")
    for n in (1, 10, 100, 1000):
        vec = time_steps([fleet_of(n, args.noise)], args.steps)
        single_steps = max(5, args.steps // max(1, n // 10))
        single = time_steps([fleet_of(1, args.noise) for _ in range(n)], single_steps)
        print(f"{n:5d} {vec * 1e6:21.1f} {single * 1e6:24.1f} {single / vec:9.1f} "
              f"{BASE_DT_S / vec:10.0f} {vec * 1e6 / n:11.2f}")
    if args.components:
        components()


if __name__ == "__main__":
    main()

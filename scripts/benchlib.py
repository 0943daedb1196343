"""What the micro-benchmarks of the vehicle models share (bench_pelican, bench_rotor, bench_battery).

Timing: the best of five rounds (the machine may be shared), each a mean over its calls. Fleets: the
Pelican's test flight (vehicles 10 m apart along north at 100 m altitude, state limits wide enough that
no vehicle leaves them, one seeded noise generator per vehicle, the same slightly off-hover controls).

Imported by the scripts from their own directory (``from benchlib import ...``), after their import
clock starts: importing it imports numpy and the Pelican's kernels.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from qrsim_ros.core.common.jit import JIT_ENABLED
from qrsim_ros.core.vehicles.pelican import (
    HOVER_THROTTLE,
    STATE_DOWN,
    STATE_NORTH,
    PelicanFleet,
    PelicanParams,
    default_state_limits,
)

#: State limits of the benchmark fleets: +-100 km horizontally, 10 km up to the ground [m, NED].
WIDE_LIMITS = default_state_limits([-1e5, 1e5, -1e5, 1e5, -1e4, 0])


def best_of_five(func: Callable[[], object], calls: int) -> float:
    """Best mean time of one call [s] over five rounds of ``calls`` calls."""
    best = np.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            func()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def best_step_time(step: Callable[[], object], steps: int) -> float:
    """Best mean time of one ``step()`` call [s]: ``best_of_five`` with ``steps`` // 5 calls a round."""
    return best_of_five(step, max(1, steps // 5))


def start_states(n: int) -> np.ndarray:
    """Initial states (n, 6) [m, rad] of a benchmark fleet: 10 m apart along north, 100 m up, level."""
    start = np.zeros((n, 6))
    start[:, STATE_NORTH] = 10.0 * np.arange(n)
    start[:, STATE_DOWN] = -100.0
    return start


def noise_generators(n: int) -> list[np.random.Generator]:
    """One seeded generator per vehicle (the fleet's dynamic-noise streams), the same on every run."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(1).spawn(n)]


def pelican_fleet(n: int, noise: bool = False) -> PelicanFleet:
    """A fleet of n Pelicans at ``start_states`` with ``WIDE_LIMITS`` and ``noise_generators``; ``noise``:
    with dynamic noise (0.2 m/s^2, rad/s^2 on every axis), else none."""
    params = PelicanParams(state_limits=WIDE_LIMITS, dyn_noise=np.full(6, 0.2 if noise else 0.0))
    fleet = PelicanFleet(n, params, noise_generators(n))
    fleet.set_state(start_states(n))
    return fleet


def pelican_controls(n: int) -> np.ndarray:
    """SI controls (n, 5) near hover, with a little pitch, roll and yaw rate (the timed flight)."""
    return np.tile([0.01, -0.01, HOVER_THROTTLE, 0.1, 12.0], (n, 1))


def bench_parser(doc: str, steps: int = 500) -> argparse.ArgumentParser:
    """An argument parser that shows the script's docstring ``doc`` as it is, with ``--steps`` (default
    ``steps``)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=steps)
    return parser


def parse_args(parser: argparse.ArgumentParser, import_s: float) -> argparse.Namespace:
    """The parsed command line; then a line saying whether the kernels are compiled (numba) or plain
    Python and how long importing numpy, numba and them took, ``import_s`` [s]."""
    args = parser.parse_args()
    mode = "numba-compiled kernels" if JIT_ENABLED else "plain-Python kernels (no JIT)"
    print(f"{mode}; importing numpy, numba and the kernels took {import_s:.2f} s")
    return args

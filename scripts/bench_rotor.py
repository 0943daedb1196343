#!/usr/bin/env python3
"""Benchmark: cost of one tick of the rotor-level airframe (``RotorFleet``) next to the identified
Pelican (``PelicanFleet``) for fleets of 1, 10 and 100 (and 1000) vehicles, in us per step.

Measured as scripts/bench_pelican.py measures the Pelican: the best of five rounds of ``--steps``
steps (the machine may be shared), hovering vehicles 10 m apart, no dynamic noise. The rotor fleet is
timed with its default RK4 sub-steps (2 per tick for the named parameter sets), with wind and rotor
health passed as arrays (the fault path) and without.

Second table (the wiring): the fleet the front ends step (``Airframes``: for the rotor airframe
the onboard controller, ``rotor_control``, plus ``RotorFleet``) and one tick of the whole in-process
Simulator (keep_spot, every sensor and turbulence on, vehicles 20 m apart, attitude mode at hover),
``vehicle.airframe`` pelican against rotor, in us per tick (best of five rounds).

Usage: ./qrsim exec -- python scripts/bench_rotor.py [--steps 500] [--preset pelican] [--no-simulator]
"""

from __future__ import annotations

import argparse
import time

T_IMPORT0 = time.perf_counter()

import numpy as np  # noqa: E402
from bench_simulator import hover_actions, spread_vehicles  # noqa: E402

from qrsim_ros.core.common.jit import JIT_ENABLED  # noqa: E402
from qrsim_ros.core.engine.simulator import Simulator  # noqa: E402
from qrsim_ros.core.vehicles.airframes import Airframes  # noqa: E402
from qrsim_ros.core.vehicles.pelican import (  # noqa: E402
    BASE_DT_S,
    HOVER_THROTTLE,
    STATE_DOWN,
    STATE_NORTH,
    PelicanFleet,
    PelicanParams,
    default_state_limits,
)
from qrsim_ros.core.vehicles.rotor import RotorFleet  # noqa: E402
from qrsim_ros.core.vehicles.rotor_params import PRESETS, rotor_preset  # noqa: E402

T_IMPORT1 = time.perf_counter()

LIMITS = default_state_limits([-1e5, 1e5, -1e5, 1e5, -1e4, 0])


def start_states(n: int) -> np.ndarray:
    start = np.zeros((n, 6))
    start[:, STATE_NORTH] = 10.0 * np.arange(n)
    start[:, STATE_DOWN] = -100.0
    return start


def best_step_time(step: object, steps: int) -> float:
    """Best mean time of one ``step()`` call [s] over five rounds."""
    best = np.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(max(1, steps // 5)):
            step()  # type: ignore[operator]
        best = min(best, (time.perf_counter() - t0) / max(1, steps // 5))
    return best


def pelican_time(n: int, steps: int) -> float:
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(1).spawn(n)]
    fleet = PelicanFleet(n, PelicanParams(state_limits=LIMITS), rngs)
    fleet.set_state(start_states(n))
    u = np.tile([0.01, -0.01, HOVER_THROTTLE, 0.1, 12.0], (n, 1))
    return best_step_time(lambda: fleet.step(u), steps)


def rotor_time(n: int, steps: int, preset: str, with_inputs: bool) -> tuple[float, int]:
    params = rotor_preset(preset)
    fleet = RotorFleet(n, params, state_limits=LIMITS)
    fleet.set_state(start_states(n))
    cmd = np.full((n, 4), params.hover_omega_rads)
    cmd[:, 0] *= 1.0001  # a little yaw and roll, as the Pelican's controls
    if with_inputs:
        wind = np.tile([2.0, -1.0, 0.0], (n, 1))
        health = np.ones((n, 4))
        return best_step_time(lambda: fleet.step(cmd, wind, health), steps), fleet.substeps
    return best_step_time(lambda: fleet.step(cmd), steps), fleet.substeps


def airframes_time(n: int, steps: int, airframe: str) -> float:
    """One ``Airframes.step`` with Pelican control rows [s] (the controller included for rotor)."""
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(1).spawn(n)]
    fleet = Airframes([airframe] * n, PelicanParams(state_limits=LIMITS), rngs)
    fleet.set_state(start_states(n))
    u = np.tile([0.01, -0.01, HOVER_THROTTLE, 0.1, 12.0], (n, 1))
    wind = np.tile([2.0, -1.0, 0.0], (n, 1))
    return best_step_time(lambda: fleet.step(u, wind), steps)


def simulator_time(n: int, steps: int, airframe: str) -> float:
    """One tick of the whole Simulator (keep_spot, noisy, n vehicles) [s]."""
    overrides = spread_vehicles(n)
    overrides["vehicle"]["airframe"] = airframe
    sim = Simulator.from_scenario("keep_spot", {"seed": 1, **overrides})
    a = hover_actions(sim)
    sim.step(a)  # warm-up

    def tick() -> None:
        if sim.done:
            sim.reset()
        sim.step(a)

    return best_step_time(tick, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--preset", default="pelican", choices=sorted(PRESETS))
    parser.add_argument("--no-simulator", action="store_true", help="skip the Airframes/Simulator table")
    args = parser.parse_args()
    mode = "numba-compiled kernels" if JIT_ENABLED else "plain-Python kernels (no JIT)"
    print(f"{mode}; importing numpy, numba and the kernels took {T_IMPORT1 - T_IMPORT0:.2f} s")
    print(f"{'N':>5} {'Pelican [us/step]':>18} {'rotor [us/step]':>16} {'rotor+wind+health':>18} "
          f"{'rotor/Pelican':>14} {'RTF rotor':>10} {'substeps':>9}")
    for n in (1, 10, 100, 1000):
        pel = pelican_time(n, args.steps)
        rot, substeps = rotor_time(n, args.steps, args.preset, with_inputs=False)
        rot_in, _ = rotor_time(n, args.steps, args.preset, with_inputs=True)
        print(f"{n:5d} {pel * 1e6:18.1f} {rot * 1e6:16.1f} {rot_in * 1e6:18.1f} {rot / pel:14.2f} "
              f"{BASE_DT_S / rot:10.0f} {substeps:9d}")
    if args.no_simulator:
        return
    print("\nper tick [us]: the fleet the front ends step (Airframes) and the whole Simulator (keep_spot)")
    print(f"{'N':>5} {'Airframes pelican':>18} {'Airframes rotor':>16} {'Simulator pelican':>18} "
          f"{'Simulator rotor':>16} {'rotor/pelican':>14}")
    for n in (1, 10, 100):
        steps = args.steps if n < 100 else max(50, args.steps // 5)
        fp, fr = airframes_time(n, args.steps, "pelican"), airframes_time(n, args.steps, "rotor")
        sp, sr = simulator_time(n, steps, "pelican"), simulator_time(n, steps, "rotor")
        print(f"{n:5d} {fp * 1e6:18.1f} {fr * 1e6:16.1f} {sp * 1e6:18.1f} {sr * 1e6:16.1f} {sr / sp:14.2f}")


if __name__ == "__main__":
    main()

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

import time

T_IMPORT0 = time.perf_counter()

import numpy as np  # noqa: E402
from bench_simulator import hover_actions, spread_vehicles  # noqa: E402
from benchlib import (  # noqa: E402
    WIDE_LIMITS,
    bench_parser,
    best_step_time,
    noise_generators,
    parse_args,
    pelican_controls,
    pelican_fleet,
    start_states,
)

from qrsim_ros.core.engine.simulator import Simulator  # noqa: E402
from qrsim_ros.core.vehicles.airframes import Airframes  # noqa: E402
from qrsim_ros.core.vehicles.pelican import BASE_DT_S, PelicanParams  # noqa: E402
from qrsim_ros.core.vehicles.rotor import RotorFleet  # noqa: E402
from qrsim_ros.core.vehicles.rotor_params import PRESETS, rotor_preset  # noqa: E402

T_IMPORT1 = time.perf_counter()


def pelican_time(n: int, steps: int) -> float:
    fleet = pelican_fleet(n)
    u = pelican_controls(n)
    return best_step_time(lambda: fleet.step(u), steps)


def rotor_time(n: int, steps: int, preset: str, with_inputs: bool) -> tuple[float, int]:
    params = rotor_preset(preset)
    fleet = RotorFleet(n, params, state_limits=WIDE_LIMITS)
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
    fleet = Airframes([airframe] * n, PelicanParams(state_limits=WIDE_LIMITS), noise_generators(n))
    fleet.set_state(start_states(n))
    u = pelican_controls(n)
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


def airframe_table(steps: int, preset: str) -> None:
    """The first table: one step of a PelicanFleet and of a RotorFleet (with and without wind and
    health arrays) [us], for 1 to 1000 vehicles."""
    print(f"{'N':>5} {'Pelican [us/step]':>18} {'rotor [us/step]':>16} {'rotor+wind+health':>18} "
          f"{'rotor/Pelican':>14} {'RTF rotor':>10} {'substeps':>9}")
    for n in (1, 10, 100, 1000):
        pel = pelican_time(n, steps)
        rot, substeps = rotor_time(n, steps, preset, with_inputs=False)
        rot_in, _ = rotor_time(n, steps, preset, with_inputs=True)
        print(f"{n:5d} {pel * 1e6:18.1f} {rot * 1e6:16.1f} {rot_in * 1e6:18.1f} {rot / pel:14.2f} "
              f"{BASE_DT_S / rot:10.0f} {substeps:9d}")


def wiring_table(steps: int) -> None:
    """The second table: one tick of Airframes and of the whole Simulator, pelican against rotor [us],
    for 1 to 100 vehicles."""
    print("\nper tick [us]: the fleet the front ends step (Airframes) and the whole Simulator (keep_spot)")
    print(f"{'N':>5} {'Airframes pelican':>18} {'Airframes rotor':>16} {'Simulator pelican':>18} "
          f"{'Simulator rotor':>16} {'rotor/pelican':>14}")
    for n in (1, 10, 100):
        sim_steps = steps if n < 100 else max(50, steps // 5)
        fp, fr = airframes_time(n, steps, "pelican"), airframes_time(n, steps, "rotor")
        sp, sr = simulator_time(n, sim_steps, "pelican"), simulator_time(n, sim_steps, "rotor")
        print(f"{n:5d} {fp * 1e6:18.1f} {fr * 1e6:16.1f} {sp * 1e6:18.1f} {sr * 1e6:16.1f} {sr / sp:14.2f}")


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--preset", default="pelican", choices=sorted(PRESETS))
    parser.add_argument("--no-simulator", action="store_true", help="skip the Airframes/Simulator table")
    args = parse_args(parser, T_IMPORT1 - T_IMPORT0)
    airframe_table(args.steps, args.preset)
    if not args.no_simulator:
        wiring_table(args.steps)


if __name__ == "__main__":
    main()

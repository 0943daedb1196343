#!/usr/bin/env python3
"""Benchmark: real-time factor (simulated s per wall s) of the in-process Simulator.

Cases (issue targets on a 2-core machine): keep spot with one fully noisy vehicle (>= 200x);
10 and 100 noisy vehicles (100: >= 5x); search and rescue 2A with its camera at 1 Hz (>= 50x);
plume 3B. Each case is built, reset, warmed up for one task step (JIT compilation, caches), then
timed over whole task steps with hover/zero actions.

``--battery on|off|both`` (default both): the scenario's battery model on (the default of every
scenario), off (``vehicle.battery.on: false``, QRSim's open loop), or both. With both, the two
Simulators are built side by side and timed in alternating chunks of 0.5 simulated seconds; the fastest
chunk of each counts (a shared machine's load spikes only make chunks slower), and the battery's extra
cost per tick is printed (target: <= 10 %).

``--faults idle|active`` times faults the same way instead (battery on in both): the scenario without a
``faults:`` list against the same scenario with ``FAULTS[...]`` on every vehicle: ``idle``, three faults
that never fire here (a repeating probabilistic GPS outage at 1e-9 per minute, a rotor degradation at
t = 1e6 s, a cell failure below 1 V), so only the schedule's per-tick trials run; ``active``, four
faults active from the start-up step on (a rotor degradation, a GPS degradation with sigma x 2 and a
bias, a gyro bias step and an altimeter offset), so every hook acts each tick (target: <= 10 %).

Usage: ./qrsim exec -- python scripts/bench_simulator.py [--seconds 20] [--battery both] [--repeats 3]
       ./qrsim exec -- python scripts/bench_simulator.py --faults active [--seconds 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qrsim_ros.core.config.loader import merge
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.vehicles.pelican import HOVER_THROTTLE


def hover_actions(sim: Simulator) -> np.ndarray:
    spec = sim.action_spec
    a = np.zeros((len(spec["vehicles"]), spec["width"]))
    for r, mode in enumerate(spec["modes"]):
        if mode == "attitude":
            a[r, :5] = [0.0, 0.0, HOVER_THROTTLE, 0.0, 12.0]
    return a


def spread_vehicles(n: int) -> dict:
    """Keep-spot vehicles on a grid 20 m apart inside a large area (open-loop hover drifts)."""
    side = int(np.ceil(np.sqrt(n)))
    states = [[20.0 * (i % side), 20.0 * (i // side), -20.0, 0.0, 0.0, 0.0] for i in range(n)]
    half = 20.0 * side + 200.0
    return {"num_vehicles": n, "area": {"limits_ned": [-half, half, -half, half, -80.0, 0.0]},
            "vehicle": {"initial_states": states}}


def rtf(name: str, overrides: dict, seconds: float) -> tuple[float, float, int, float]:
    """Real-time factor, wall seconds, episode resets and wall microseconds per 20 ms tick."""
    sim = Simulator.from_scenario(name, {"seed": 1, **overrides})
    a = hover_actions(sim)
    sim.step(a)  # warm-up
    steps = max(1, round(seconds / sim.scenario.task.dt_s))
    resets = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        if sim.done:
            sim.reset()
            resets += 1
        sim.step(a)
    wall = time.perf_counter() - t0
    ticks = steps * sim.ticks_per_task_step
    return steps * sim.scenario.task.dt_s / wall, wall, resets, wall / ticks * 1e6


#: ``--faults``: the ``faults:`` list of each variant (see the module docstring).
FAULTS = {
    "idle": [
        {"kind": "gps_outage", "vehicles": "all", "duration_s": 3.0, "repeat": True,
         "trigger": {"probabilistic": {"probability": 1e-9, "period_s": 60.0}}},
        {"kind": "rotor_degradation", "vehicles": "all", "rotor": 0, "factor": 0.9,
         "trigger": {"at_time_s": 1e6}},
        {"kind": "battery_cell_failure", "vehicles": "all",
         "trigger": {"condition": {"battery_below_v": 1.0}}},
    ],
    "active": [
        {"kind": "rotor_degradation", "vehicles": "all", "rotor": 0, "factor": 0.95,
         "trigger": {"at_time_s": 0.0}},
        {"kind": "gps_degradation", "vehicles": "all", "sigma_factor": 2.0, "bias_ned_m": [0.5, 0.0, 0.0],
         "trigger": {"at_time_s": 0.0}},
        {"kind": "imu_bias_step", "vehicles": "all", "gyro_bias_radps": [0.01, 0.0, 0.0],
         "trigger": {"at_time_s": 0.0}},
        {"kind": "altimeter_offset", "vehicles": "all", "offset_m": 0.5, "trigger": {"at_time_s": 0.0}},
    ],
}


def benchmark_cases() -> list[tuple[str, str, dict]]:
    """(label, scenario, overrides) of the cases every table here times (bench_fault_hooks.py too)."""
    long = {"task": {"duration_steps": 10**6}}
    return [
        ("keep spot, 1 noisy vehicle", "keep_spot", {**long, **spread_vehicles(1)}),
        ("keep spot, 10 noisy vehicles", "keep_spot", {**long, **spread_vehicles(10)}),
        ("keep spot, 100 noisy vehicles", "keep_spot", {**long, **spread_vehicles(100)}),
        ("search and rescue 2A", "search_rescue_2a", {}),
        ("plume 3B", "plume_3b", {}),
    ]


def paired(name: str, overrides: dict, seconds: float, chunk_s: float = 0.5,
           variant: dict | None = None, clock: str = "cpu") -> tuple[float, float]:
    """Fastest microseconds per tick with and without ``variant`` (overrides on top; default: the
    battery on against off), timed in alternating chunks on ``clock``: "cpu" (this thread's CPU time,
    which other work on the machine barely moves) or "wall"."""
    now = time.thread_time if clock == "cpu" else time.perf_counter
    if variant is None:
        settings = {on: {"vehicle": {"battery": {"on": on}}} for on in (True, False)}
    else:
        settings = {True: variant, False: {}}
    sims = {on: Simulator.from_scenario(name, merge({"seed": 1, **overrides}, extra))
            for on, extra in settings.items()}
    best = {True: float("inf"), False: float("inf")}
    actions = {on: hover_actions(sim) for on, sim in sims.items()}
    for on, sim in sims.items():
        sim.step(actions[on])  # warm-up
    steps = max(1, round(chunk_s / sims[True].scenario.task.dt_s))
    for _ in range(max(1, round(seconds / chunk_s))):
        for on, sim in sims.items():
            t0 = now()
            for _ in range(steps):
                if sim.done:
                    sim.reset()
                sim.step(actions[on])
            us = (now() - t0) / (steps * sim.ticks_per_task_step) * 1e6
            best[on] = min(best[on], us)
    return best[True], best[False]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="simulated seconds per case")
    parser.add_argument("--battery", choices=("on", "off", "both"), default="both",
                        help="the battery model on, off, or both (interleaved, with the extra cost)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case and setting (the best counts)")
    parser.add_argument("--faults", choices=tuple(FAULTS), default=None,
                        help="time faults (idle or active, see the docstring) against none instead")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="what the paired comparisons (--battery both, --faults) time: this thread's CPU "
                             "time (default; robust to other load) or wall time")
    args = parser.parse_args()
    settings = ("on", "off") if args.battery == "both" else (args.battery,)
    cases = benchmark_cases()
    if args.faults is not None:
        print(f"{'case':<32} {'us/tick on':>11} {'us/tick off':>12} {'extra':>7}   "
              f"(faults {args.faults}; fastest 0.5 s chunk, {args.clock} time)")
        for label, name, overrides in cases:
            on_us, off_us = paired(name, overrides, args.seconds, variant={"faults": FAULTS[args.faults]},
                                    clock=args.clock)
            print(f"{label:<32} {on_us:11.1f} {off_us:12.1f} {100 * (on_us / off_us - 1):6.1f}%")
        return
    if args.battery == "both":
        print(f"{'case':<32} {'us/tick on':>11} {'us/tick off':>12} {'extra':>7}   "
              f"(fastest 0.5 s chunk, {args.clock} time)")
        for label, name, overrides in cases:
            on_us, off_us = paired(name, overrides, args.seconds, clock=args.clock)
            print(f"{label:<32} {on_us:11.1f} {off_us:12.1f} {100 * (on_us / off_us - 1):6.1f}%")
        return
    print(f"{'case':<32} {'battery':>7} {'real-time factor':>17} {'us/tick':>9} {'wall [s]':>9} "
          f"{'episode resets':>15}")
    for label, name, overrides in cases:
        best: dict[str, tuple[float, float, int, float]] = {}
        for _ in range(max(1, args.repeats)):
            for on in settings:
                result = rtf(name, merge(overrides, {"vehicle": {"battery": {"on": on == "on"}}}),
                             args.seconds)
                if on not in best or result[3] < best[on][3]:
                    best[on] = result
        for on in settings:
            factor, wall, resets, us = best[on]
            print(f"{label:<32} {on:>7} {factor:17.1f} {us:9.1f} {wall:9.2f} {resets:15d}")
        if len(best) == 2:
            extra = best["on"][3] / best["off"][3] - 1.0
            print(f"{label:<32} {'extra':>7} {'':17} {100 * extra:8.1f}%")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmark: in-process cost per vehicle of the team search as the team grows.

For each N, ``Simulator.from_scenario("team_search", num_vehicles=N)`` steps with zero-velocity actions
(the scenario's vehicles fly velocity set points: zero is a hover) and every vehicle broadcasts one
16-byte packet per task step (``Simulator.send`` with destination -1, the paper's status update) and
drains its inbox. The vehicles start on the base's grid 4 m apart, so every pair is within radio range
and needs its line-of-sight check: the radio's worst case. The same run without the broadcasts gives
their share (sending, delivering, draining). Timed on this thread's CPU clock (other load on the machine
barely moves it), best of ``--repeats`` chunks of ``--seconds`` simulated seconds, after one warm-up
task step.

Prints a Markdown table: microseconds per 20 ms tick and per vehicle-tick, with and without broadcasts,
the broadcasts' extra cost per delivered packet (N (N - 1) deliveries per task step: the one quadratic
term, the traffic itself) and the real-time factor the CPU time allows.

Usage: ./qrsim exec -- python scripts/bench_team_tick.py [--vehicles 1 5 10 20 50] [--seconds 4]
         [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from qrsim_ros.core.comms.params import BROADCAST
from qrsim_ros.core.engine.simulator import Simulator


def zero_actions(sim: Simulator) -> np.ndarray:
    """Zero set points (velocity mode: hover where you are)."""
    spec = sim.action_spec
    return np.zeros((len(spec["vehicles"]), spec["width"]))


def time_team(n: int, seconds: float, repeats: int, broadcast: bool) -> tuple[float, float, int]:
    """Best CPU microseconds per tick of ``n`` vehicles over ``repeats`` chunks of ``seconds``, the tick
    [s] and the ticks per task step."""
    sim = Simulator.from_scenario("team_search", {"seed": 1, "num_vehicles": n,
                                                 "task": {"duration_steps": 10**6}})
    actions = zero_actions(sim)
    payload = bytes(16)

    def task_step() -> None:
        if broadcast:
            for i in range(n):
                sim.send(i, BROADCAST, payload)
        sim.step(actions)
        if broadcast:
            for i in range(n):
                sim.receive(i)

    task_step()  # warm-up (JIT compilation, caches, the radio's first tick)
    steps = max(1, round(seconds / sim.scenario.task.dt_s))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        for _ in range(steps):
            task_step()
        best = min(best, (time.thread_time() - t0) / (steps * sim.ticks_per_task_step) * 1e6)
    return best, sim.scenario.task.dt_s / sim.ticks_per_task_step, sim.ticks_per_task_step


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vehicles", type=int, nargs="+", default=[1, 5, 10, 20, 50])
    ap.add_argument("--seconds", type=float, default=4.0, help="simulated seconds per timed chunk")
    ap.add_argument("--repeats", type=int, default=3, help="chunks per case (the fastest counts)")
    args = ap.parse_args()
    la = os.getloadavg()
    print(f"load average before: {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}"
          f"  ({os.cpu_count()} CPUs; this thread's CPU time, best of {args.repeats} x {args.seconds:g} s)\n")
    print("| N | µs/tick | µs/vehicle-tick | µs/tick, no broadcasts | µs/vehicle-tick, no broadcasts "
          "| broadcasts' share | µs per delivered packet | real-time factor (CPU) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.vehicles:
        with_bc, tick_s, ticks = time_team(n, args.seconds, args.repeats, True)
        without, _, _ = time_team(n, args.seconds, args.repeats, False)
        extra = max(0.0, with_bc - without)
        # every broadcast reaches the N - 1 others (all in range on the base grid): N (N - 1) deliveries
        per_delivery = f"{extra * ticks / (n * (n - 1)):.1f}" if n > 1 else "-"
        print(f"| {n} | {with_bc:,.0f} | {with_bc / n:,.0f} | {without:,.0f} | {without / n:,.0f} "
              f"| {100 * extra / with_bc:.0f} % | {per_delivery} | {tick_s * 1e6 / with_bc:.1f} |",
              flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

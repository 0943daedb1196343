#!/usr/bin/env python3
"""Benchmark: the CPU cost of the MAVLink adapter per vehicle, in process (``qrsim run --mavlink``).

For N vehicles of ``px4_sitl`` (on their base, N = 1, 10, 50 by default), two Simulators with the onboard
autopilots are built side by side: one with ``SimulatorMavlink`` at PX4's default stream rates (every
link sending to loopback ports nobody listens on, as before a client connects; unpaced), one without a
link. They are timed in alternating chunks of one simulated second, the fastest chunk of each counting
(a shared machine's load spikes only make chunks slower). Printed per N: wall time per simulated second
with and without the adapter, the adapter's CPU per vehicle [ms per simulated s, i.e. the fraction of a
core x 1000], the messages and UDP datagrams sent per simulated second, and the largest real-time factor
the run could be paced at (1 / wall per simulated s with the adapter).

Usage: ./qrsim exec -- python scripts/bench_mavlink.py [--vehicles 1 10 50] [--seconds 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.mavlink.simulator import SimulatorMavlink
from qrsim_ros.mavlink.vehicles import MavlinkPorts

#: Ports far from PX4 SITL's, so that a running SITL or simulator is not disturbed.
BENCH_PORTS = MavlinkPorts(api_local=34580, api_remote=34540, gcs_local=38570, gcs_remote=34550)


def simulator(n: int) -> Simulator:
    # task steps of one tick's multiple of 0.2 s keep the chunks short; 10 m apart, 50 fit the base
    return Simulator.from_scenario("px4_sitl", {"num_vehicles": n, "seed": 1, "task": {"dt_s": 0.2}})


def chunk_s(sim: Simulator, actions: np.ndarray, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        sim.step(actions)
    return time.perf_counter() - t0


def bench(n: int, seconds: float) -> dict[str, float]:
    with_link, without = simulator(n), simulator(n)
    link = SimulatorMavlink(with_link, BENCH_PORTS, real_time_factor=0)
    links = [lk for per_vehicle in link.vehicles.links for lk in per_vehicle.values()]

    def sent() -> tuple[int, int]:
        return (sum(lk.counters.sent for lk in links), sum(lk.counters.datagrams_sent for lk in links))

    actions = np.full((n, with_link.action_spec["width"]), np.nan)
    steps = round(1.0 / with_link.scenario.task.dt_s)  # one simulated second a chunk
    for sim in (with_link, without):  # warm-up: JIT kernels, caches
        chunk_s(sim, actions, steps)
    messages0, datagrams0 = sent()
    best_with = best_without = np.inf
    chunks = max(1, round(seconds))
    for _ in range(chunks):
        best_with = min(best_with, chunk_s(with_link, actions, steps))
        best_without = min(best_without, chunk_s(without, actions, steps))
    messages, datagrams = sent()
    link.close()
    return {"with_s": best_with, "without_s": best_without,
            "adapter_ms_per_vehicle": 1e3 * (best_with - best_without) / n,
            "messages_per_s": (messages - messages0) / chunks,
            "datagrams_per_s": (datagrams - datagrams0) / chunks, "max_rtf": 1.0 / best_with}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vehicles", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--seconds", type=float, default=10.0, help="simulated seconds timed per case")
    args = parser.parse_args()
    print("| vehicles | wall per sim s, with adapter [s] | without [s] | adapter CPU per vehicle "
          "[ms per sim s] | messages per sim s | datagrams per sim s | largest real-time factor |")
    print("|---|---|---|---|---|---|---|")
    for n in args.vehicles:
        r = bench(n, args.seconds)
        print(f"| {n} | {r['with_s']:.4f} | {r['without_s']:.4f} | {r['adapter_ms_per_vehicle']:.2f} | "
              f"{r['messages_per_s']:.0f} | {r['datagrams_per_s']:.0f} | {r['max_rtf']:.2f} |")


if __name__ == "__main__":
    main()

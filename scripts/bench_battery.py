#!/usr/bin/env python3
"""Benchmark: cost of one battery step (``BatteryBank.step``) and of the power model, for 1/10/100 vehicles.

Each figure is the best of five rounds (the machine may be shared). The first line says whether the
kernels are compiled (numba) or plain Python (``QRSIM_DISABLE_JIT=1`` or numba missing).

Usage: ./qrsim exec -- python scripts/bench_battery.py [--steps 20000]
"""

from __future__ import annotations

import argparse

import numpy as np
from benchlib import best_of_five

from qrsim_ros.core.common.jit import JIT_ENABLED
from qrsim_ros.core.vehicles.battery import BatteryBank, BatteryParams
from qrsim_ros.core.vehicles.power import momentum_theory_power, rotor_power


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000, help="steps per round")
    args = parser.parse_args()
    calls = max(1, args.steps // 5)
    print(f"kernels: {'numba' if JIT_ENABLED else 'plain Python'}")
    print(f"{'N':>4} {'lipo step':>11} {'linear step':>12} {'P momentum':>11} {'P rotors':>9}  [us per call]")
    for n in (1, 10, 100):
        thrust = np.full(n, 16.48)
        omega = np.full((n, 4), 450.0)
        charging = np.zeros(n, np.bool_)
        power = momentum_theory_power(thrust)
        # small steps so no pack runs empty inside the timing (empty packs take a shorter path)
        lipo, linear = BatteryBank(n), BatteryBank(n, BatteryParams(model="linear"))
        t_lipo = best_of_five(lambda: lipo.step(power, 1e-6, charging), calls)  # noqa: B023
        t_lin = best_of_five(lambda: linear.step(power, 1e-6, charging), calls)  # noqa: B023
        t_pm = best_of_five(lambda: momentum_theory_power(thrust), calls)  # noqa: B023
        t_pr = best_of_five(lambda: rotor_power(omega, 1.5e-7, 0.8, 10.0), calls)  # noqa: B023
        print(f"{n:>4} {t_lipo * 1e6:>11.2f} {t_lin * 1e6:>12.2f} {t_pm * 1e6:>11.2f} {t_pr * 1e6:>9.2f}")


if __name__ == "__main__":
    main()

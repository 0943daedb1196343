"""``qrsim demo``: a short open-loop Pelican flight through the core, with a trajectory summary.

The flight is a fixed sequence of raw controls (spec 2.1): hover, pitch forward, roll right, yaw,
climb and settle. It exercises the identified model only (no sensors, no wind), so it runs
anywhere the core runs and shows what the model does with QRSim's native inputs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from qrsim_ros.cli import CliError, report, subcommand_parser
from qrsim_ros.cli.commands import HELP_LINES
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.vehicles.pelican import (
    HOVER_THROTTLE,
    STATE_DOWN,
    STATE_EULER,
    STATE_HEADING,
    STATE_NORTH,
    STATE_NORTH_EAST,
    STATE_POSITION_NED,
    STATE_THRUST,
    STATE_VELOCITY_FRD,
    PelicanFleet,
    PelicanParams,
    default_state_limits,
)

PROG = "qrsim demo"
#: (duration [s], what, [pitch rad, roll rad, throttle, yaw_rate rad/s, battery V])
FLIGHT_PLAN: tuple[tuple[float, str, tuple[float, float, float, float, float]], ...] = (
    (2.0, "hover", (0.0, 0.0, HOVER_THROTTLE, 0.0, 12.0)),
    (3.0, "pitch forward", (-0.15, 0.0, HOVER_THROTTLE + 0.01, 0.0, 12.0)),
    (3.0, "roll right", (0.0, 0.15, HOVER_THROTTLE + 0.01, 0.0, 12.0)),
    (3.0, "yaw clockwise", (0.0, 0.0, HOVER_THROTTLE, 1.0, 12.0)),
    (3.0, "climb", (0.0, 0.0, HOVER_THROTTLE + 0.05, 0.0, 12.0)),
    (6.0, "level, settle", (0.0, 0.0, HOVER_THROTTLE, 0.0, 12.0)),
)


def build_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``demo`` subcommand."""
    p = subcommand_parser(subparsers, "demo", HELP_LINES["demo"], __doc__)
    p.add_argument("--vehicles", type=int, default=1, help="fly this many identical Pelicans (default 1)")
    p.set_defaults(func=run)
    return p


def fly(num_vehicles: int = 1) -> tuple[np.ndarray, np.ndarray, list[str], PelicanFleet]:
    """Fly FLIGHT_PLAN; return times (K,), states of vehicle 0 (K, 13), phase per step, the fleet."""
    fleet = PelicanFleet(
        num_vehicles, PelicanParams(state_limits=default_state_limits([-500, 500, -500, 500, -200, 0]))
    )
    start = np.zeros((num_vehicles, 6))
    start[:, STATE_NORTH] = 5.0 * np.arange(num_vehicles)  # 5 m apart: no collisions
    start[:, STATE_DOWN] = -10.0
    fleet.set_state(start)
    times, states, phases = [0.0], [fleet.state[0]], ["start"]
    for duration_s, what, controls in FLIGHT_PLAN:
        u = np.tile(controls, (num_vehicles, 1))
        for _ in range(round(duration_s / BASE_DT_S)):
            fleet.step(u)
            times.append(times[-1] + BASE_DT_S)
            states.append(fleet.state[0])
            phases.append(what)
    return np.array(times), np.array(states), phases, fleet


def run(args: argparse.Namespace) -> int:
    """Fly, print one line per second and a summary."""
    if args.vehicles < 1:
        return report(PROG, CliError(f"--vehicles must be >= 1, got {args.vehicles}"))
    wall0 = time.perf_counter()
    t, x, phases, fleet = fly(args.vehicles)
    wall_s = time.perf_counter() - wall0
    print("open-loop flight of a Pelican (NED position, ZYX Euler angles; heights are -pz)")
    print(f"{'t[s]':>6} {'phase':<14} {'north':>8} {'east':>8} {'height':>7} "
          f"{'roll°':>7} {'pitch°':>7} {'yaw°':>7} {'speed':>6} {'thrust':>7}")
    per_s = round(1.0 / BASE_DT_S)
    for k in range(0, len(t), per_s):
        s = x[k]
        north, east, down = s[STATE_POSITION_NED]
        roll, pitch, yaw = np.degrees(s[STATE_EULER])
        print(f"{t[k]:6.1f} {phases[k]:<14} {north:8.2f} {east:8.2f} {-down:7.2f} "
              f"{roll:7.2f} {pitch:7.2f} {yaw:7.2f} "
              f"{np.linalg.norm(s[STATE_VELOCITY_FRD]):6.2f} {s[STATE_THRUST]:7.2f}")
    path_m = float(np.sum(np.linalg.norm(np.diff(x[:, STATE_POSITION_NED], axis=0), axis=1)))
    speeds = np.linalg.norm(x[:, STATE_VELOCITY_FRD], axis=1)
    sim_s = float(t[-1])
    north_m, east_m = x[-1, STATE_NORTH_EAST]
    print(
        f"summary: {sim_s:.1f} s simulated in {wall_s:.3f} s wall "
        f"({sim_s / wall_s:.0f}x real time, {args.vehicles} vehicle(s)); "
        f"path {path_m:.1f} m, max speed {speeds.max():.2f} m/s, "
        f"final position N {north_m:.2f} E {east_m:.2f} height {-x[-1, STATE_DOWN]:.2f} m, "
        f"heading {np.degrees(x[-1, STATE_HEADING]):.1f}°, all valid: {bool(fleet.valid.all())}"
    )
    return 0

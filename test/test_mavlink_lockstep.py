"""A lockstep run of the MAVLink graph flies as in process: the same seed, the same flight.

``qrsim launch px4_sitl --mavlink`` replaces the flight controller with the ``mavlink_bridge`` node, which
steps every agent vehicle's onboard autopilot at the place of the tick where the in-process Simulator
steps it (``core.onboard.flight``). Two vehicles placed 10 m up start armed in Hold, as PX4 would after an
air start; their autopilots hold position on the *estimated* state (QRSim's correlated GPS, the AHARS)
through turbulence (W6 = 2 m/s) and noisy dynamics, so the ground truth depends on every part of the
bridge's tick: intake, autopilot, velocity controllers, the disarmed-motor rule. No MAVLink client
connects: when a datagram lands is not a tick of the run, so a commanded flight cannot be compared
tick by tick (MAVSDK flies the graph in test_mavlink_graph instead).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosenv import require_ros, scenario_file
from test_mavlink_graph import free_instance_offset

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import produce  # the golden producer's bag reader

pytestmark = [pytest.mark.graph, pytest.mark.timeout(400)]

VEHICLES, SEED = 2, 5
STEPS = 6  # task steps of 1 s
START_Z_NED_M = -10.0
#: [m, rad, m/s, rad/s]: the GPS geodesy round trip's last bits through 6 s of closed loop (as the
#: example autopilot's lockstep test)
TOLERANCE = 1e-6


def air_start(data: dict[str, Any]) -> None:
    data["task"]["start_z_ned_m"] = START_Z_NED_M
    data["vehicle"]["turbulence"] = {"on": True, "w6_mps": 2.0, "direction_rad": None}


def graph_states(tmp_path: Path, scenario: Path) -> dict[int, np.ndarray]:
    """Every tick's true states (N, 13) of the launched MAVLink graph's first episode, from its bag."""
    argv = [str(scenario), "--mavlink", "--num-vehicles", str(VEHICLES), "--seed", str(SEED),
            "--no-autopilot", "--lockstep", "--real-time-factor", "0", "--duration", str(STEPS),
            "--param", f"mavlink_bridge:mavlink_instance_offset={free_instance_offset(VEHICLES)}"]
    states, out = produce.launched_states(tmp_path, argv)
    assert "started mavlink_bridge" in out and "started flight_controller" not in out, out[-5000:]
    return states


def in_process_states(scenario: Path) -> tuple[dict[int, np.ndarray], list[str], list[bool]]:
    """The true states (N, 13) after every task step of the in-process Simulator, whose onboard autopilots
    replace the (zero) actions, and the autopilots' modes and armed flags at the end."""
    from qrsim_ros.core.config.scenario import run_overrides
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.core.onboard.modes import FlightMode

    sim = Simulator.from_scenario(str(scenario), run_overrides(seed=SEED, num_vehicles=VEHICLES))
    assert sim.onboard is not None
    states = {0: sim.true_state()}
    for _ in range(STEPS):
        sim.step(np.zeros((VEHICLES, 3)))
        states[sim.tick] = sim.true_state()
    return states, [FlightMode(m).name for m in sim.onboard.mode], sim.onboard.armed.tolist()


def test_a_lockstep_mavlink_graph_holds_as_the_simulator_does(tmp_path: Path) -> None:
    require_ros()
    scenario = scenario_file(tmp_path, "px4_sitl", "px4_sitl_air", air_start)
    want, modes, armed = in_process_states(scenario)
    got = graph_states(tmp_path, scenario)
    produce.assert_same_flight(got, want, STEPS * 50, TOLERANCE)
    # the autopilots held the vehicles up (disarmed, they would have fallen), wandering on the estimate
    assert modes == ["HOLD"] * VEHICLES and all(armed), (modes, armed)
    z_ned = want[STEPS * 50][:, 2]
    assert np.all(np.abs(z_ned - START_Z_NED_M) < 2.0), z_ned
    wander = np.linalg.norm(want[STEPS * 50][:, 0:3] - want[0][:, 0:3], axis=1)
    assert np.all(wander > 1e-3), wander

"""A lockstep run with the example autopilot flies as in process: the same seed, the same flight.

In lockstep the plan makes the autopilot a lockstep input (``example_autopilot:lockstep``, the flight
controller's ``await_task_setpoints``): it answers task step k from the inputs of tick k only
(``ros.step_inputs``) and its set point flies every tick of the step. So the graph's ground truth is the
in-process Simulator's with the same policy, to the lockstep agreement's tolerance (the estimated
position crosses the topics as GPS latitude/longitude, whose geodesy round trip changes the last bits).
Search and rescue 2C with two vehicles: the search pattern's lanes from the first step, camera frames at
1 Hz into its evidence map.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from rosenv import require_ros

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import produce  # the golden producer's bag reader

pytestmark = pytest.mark.graph

SCENARIO, VARIANT, VEHICLES, SEED = "search_rescue", "2c", 2, 2
STEPS = 8  # task steps of 1 s
#: [m, rad, m/s, rad/s]: the GPS geodesy round trip's last bits, through 8 s of closed loop
TOLERANCE = 1e-6


def graph_states(tmp_path: Path) -> dict[int, np.ndarray]:
    """Every tick's true states (N, 13) of the launched lockstep graph's first episode, from its bag."""
    argv = [SCENARIO, "--variant", VARIANT, "--num-vehicles", str(VEHICLES), "--seed", str(SEED),
            "--lockstep", "--real-time-factor", "0", "--duration", str(STEPS)]
    return produce.launched_states(tmp_path, argv)[0]


def in_process_states() -> dict[int, np.ndarray]:
    """The true states (N, 13) after every task step of the in-process Simulator with the same policy."""
    from qrsim_ros.core.config.scenario import run_overrides
    from qrsim_ros.core.engine.simulator import Simulator
    from qrsim_ros.policies import make_factory
    from qrsim_ros.policies.base import SimulatorView, instantiate

    sim = Simulator.from_scenario(f"{SCENARIO}_{VARIANT}", run_overrides(seed=SEED, num_vehicles=VEHICLES))
    view = SimulatorView(sim)
    policy = instantiate(make_factory("auto", sim.scenario.task.type), view)
    states = {0: sim.true_state()}
    for _ in range(STEPS):
        sim.step(policy(view))
        states[sim.tick] = sim.true_state()
    return states


@pytest.mark.timeout(400)
def test_a_lockstep_run_with_the_example_autopilot_flies_as_in_process(tmp_path: Path) -> None:
    require_ros()
    got = graph_states(tmp_path)
    want = in_process_states()
    produce.assert_same_flight(got, want, STEPS * 50, TOLERANCE)
    # the vehicles flew their lanes (not a hover that any autopilot would match)
    moved = np.linalg.norm(want[STEPS * 50][:, 0:2] - want[0][:, 0:2], axis=1)
    assert np.all(moved > 5.0), moved

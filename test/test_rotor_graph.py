"""The rotor airframe over the ROS graph: vehicle_dynamics flies a mixed fleet (one vehicle on
the rotor-level airframe, one on the identified Pelican) in lockstep with wind_field over real DDS, and
its ground truth equals the in-process Simulator's for the same scenario file, seed and commands.

The scenario is keep_spot_x10 (noisy dynamics, Dryden turbulence) with ``vehicle.airframe: [rotor,
pelican]``, written to a file that both the nodes (parameter ``scenario``) and the Simulator load: the
wiring goes through ``build_fleet`` in both front ends, nothing of it is specific to the nodes. The run
machinery (processes, free DDS domain, commands before the start, no sleeps as sync) is
test_lockstep_agreement's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rosenv import free_domain, require_ros, scenario_file
from test_lockstep_agreement import ACTIONS, TOLERANCE, episode_steps, max_errors, run_nodes, simulate

pytestmark = pytest.mark.graph


def mixed_scenario(tmp_path: Path) -> Path:
    """keep_spot_x10 with vehicle 0 on the rotor airframe and vehicle 1 on the Pelican."""
    return scenario_file(tmp_path, "keep_spot_x10", "keep_spot_x10_rotor",
                         vehicle={"airframe": ["rotor", "pelican"]})


def test_vehicle_dynamics_flies_the_rotor_airframe_as_the_simulator(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    require_ros()
    scenario = str(mixed_scenario(tmp_path))
    ros, rate = run_nodes(tmp_path, monkeypatch, scenario, ACTIONS, free_domain(), 3.0)
    assert episode_steps(ros) == [150]
    ref = simulate(scenario, ACTIONS, [150])
    err = max_errors(ros, ref)
    print(f"\nrotor + pelican lockstep vs Simulator over 150 ticks: max abs errors {err}; {rate:.0f} ticks/s")
    assert all(e <= TOLERANCE for e in err.values()), err
    # not vacuous: both vehicles moved, and vehicle 0 is not flown as a Pelican would be
    moved = np.abs(ref[(1, 150)][:, 0:3] - ref[(1, 0)][:, 0:3]).max(axis=1)
    assert np.all(moved > 0.1), moved
    pelican_ref = simulate("keep_spot_x10", ACTIONS, [150])
    assert np.abs(pelican_ref[(1, 150)][0] - ref[(1, 150)][0]).max() > 1e-3
    np.testing.assert_array_equal(pelican_ref[(1, 150)][1], ref[(1, 150)][1])  # vehicle 1 is the Pelican

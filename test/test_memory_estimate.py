"""The memory a scenario needs is estimated before anything is allocated, and what the machine cannot give
is refused in one line (qrsim_ros/core/engine/memory.py); the terrain no longer grows with its area.

The refusals run ``qrsim run`` as a user would, in a child process whose address space is limited with
``RLIMIT_AS`` (as ``ulimit -v`` does): a machine with less memory, for real. Before the estimate, a
fisheye of 8192 x 8192 pixels ran to an ArrayMemoryError after 11.5 GB, and 10,000 search-and-rescue
vehicles to a MemoryError in the terrain's 8.94 GiB of uniforms.
"""

from __future__ import annotations

import math
import resource
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.memory import available_bytes, check_memory, estimate
from qrsim_ros.core.world.terrain import PourTerrain

#: The child's address-space limit: a machine with a few GB to give.
ADDRESS_SPACE_BYTES = 8_000_000_000
FISHEYE_8192 = ("--set", "vehicle.sensors.fisheye.width_px=8192",
                "--set", "vehicle.sensors.fisheye.height_px=8192")


def _limited_run(*argv: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``qrsim run ARGV`` with the address space limited; the child's peak RSS [bytes] with it."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run([sys.executable, "-m", "qrsim_ros.cli.main", "run", *argv, "--steps", "2",
                           "--policy", "hover", "--no-progress"],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return proc, (peak_kib if peak_kib > before else 0) * 1024.0


@pytest.mark.parametrize(("argv", "largest"), [
    (("search_rescue_scene", *FISHEYE_8192), "fisheye of 2 vehicles 14.8 GB"),
    (("search_rescue_2a", "--set", "num_vehicles=10000"), "camera classifier windows (19,200 per frame) of "
                                                           "10000 vehicles 67.2 GB"),
])
def test_a_scenario_the_machine_cannot_hold_is_refused_in_one_line(argv: tuple[str, ...],
                                                                   largest: str) -> None:
    proc, peak = _limited_run(*argv)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout == "" and proc.stderr.count("\n") == 1
    assert largest in proc.stderr and "the address-space limit (ulimit -v)" in proc.stderr
    assert peak < 1e9  # refused before any scenario-sized allocation


def test_the_estimate_adds_the_measured_costs_of_what_the_scenario_flies() -> None:
    # the figures from the costs in memory.py and registry.py times the sizes the scenario asks for
    scene = load_scenario("search_rescue_scene", {"vehicle": {"sensors": {"fisheye": {"width_px": 1000,
                                                                                      "height_px": 500}}}})
    parts = dict(estimate(scene))
    assert parts["fisheye of 2 vehicles"] == 2 * 110.0 * 1000 * 500
    assert parts["lidar of 2 vehicles"] == 2 * 40.0 * 16 * 1808  # VLP-16 at 10 Hz: 16 x 1808 rays a sweep
    windows = round(2 * 640 / 8) * round(2 * 480 / 8)  # the classifier's grid at its cap
    assert parts[f"camera classifier windows ({windows:,} per frame) of 2 vehicles"] == 2 * windows * 350.0
    hover = dict(estimate(load_scenario("keep_spot")))
    assert set(hover) == {"the process", "the state of 1 vehicle"}


def test_the_check_compares_with_what_is_available() -> None:
    sc = load_scenario("search_rescue_2a", {"num_vehicles": 1000})
    total = sum(b for _, b in estimate(sc))
    assert check_memory(sc, available=(total + 1.0, "test")) == estimate(sc)
    with pytest.raises(ConfigError, match=r"needs about 7\.1 GB in process .* more than the 7\.1 GB this "
                                          r"machine can give now \(test\)"):
        check_memory(sc, available=(total - 1e7, "test"))
    room = available_bytes()
    assert room is not None and room[0] > 0 and (room[1] == "MemAvailable" or "limit" in room[1])


def test_the_launch_plan_refuses_it_too() -> None:
    code = ("import resource; "
            f"resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE_BYTES // 2},) * 2); "
            "from qrsim_ros import launch_plan as lp\n"
            "try:\n"
            "    lp.resolve_scenario('search_rescue_2a', num_vehicles=1000)\n"
            "except lp.PlanError as exc:\n"
            "    print(exc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("scenario 'search_rescue_2a': needs about 7.1 GB in process (camera "
                                  "classifier windows (19,200 per frame) of 1000 vehicles 6.7 GB")


def test_the_terrain_of_a_large_area_stays_small() -> None:
    # 1,000 search-and-rescue vehicles' area: 7,746 m square, 6.0e7 cells and 1.2e8 uniforms per pour
    d = math.sqrt(200 * 25 * 3 * 1000)
    tracemalloc.start()
    try:
        terrain = PourTerrain([-d, d, -d, d, -80, 0], [0.2, 0.05], np.random.default_rng(4))
        terrain.reset()
        classes = terrain.class_at(np.array([[0.0, 0.0], [d - 1, -d + 1]]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert terrain.rows * terrain.cols > 5.9e7 and classes.shape == (2,)
    assert peak < 20e6, f"pouring the terrain took {peak / 1e6:.0f} MB"

"""Time one retrieve_simplified mission in process: prints µs per 20 ms tick (not a test)."""
import time

from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.policies.episode import run_episode

sim = Simulator.from_scenario("retrieve_simplified", {"seed": 5})
run_episode(sim, "mission")  # warm-up (numba)
sim = Simulator.from_scenario("retrieve_simplified", {"seed": 5})
t0 = time.perf_counter()
r = run_episode(sim, "mission")
wall = time.perf_counter() - t0
print(f"{sim.tick} ticks, {wall:.2f} s wall, {wall / sim.tick * 1e6:.0f} us/tick, outcome {r.outcome}, "
      f"sim {r.sim_time_s:.1f} s")

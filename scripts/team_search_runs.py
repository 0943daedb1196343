"""Persons found, time, messages and vehicles lost of ``--policy team-search`` on config/team_search.yaml in
process, for a few team sizes (docs/TEAMS.md, "Team search").

Run: ./qrsim exec -- python scripts/team_search_runs.py --vehicles 1 4 10 --seed 1 --duration-s 300
"""

from __future__ import annotations

import argparse
import time

from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.policies import SimulatorView, make_policy
from qrsim_ros.policies.team_search import unwrap


def run(n: int, seed: int, duration_s: float, policy: str) -> dict[str, object]:
    """One episode of ``duration_s`` simulated seconds; the result's fields."""
    steps = round(duration_s / 0.2)
    sim = Simulator.from_scenario("team_search", {"num_vehicles": n, "seed": seed,
                                                  "task": {"duration_steps": steps}})
    sim.reset()
    view = SimulatorView(sim)
    pol = make_policy(policy, view)
    team = unwrap(pol)
    wall0 = time.perf_counter()
    first_found_s = None
    while not sim.done:
        sim.step(pol(view))
        if first_found_s is None and sim.area.found.any():
            first_found_s = sim.time
    return {"vehicles": n, "found": int(sim.area.found.sum()), "persons": int(sim.area.num_persons),
            "first_found_s": first_found_s, "sim_s": round(sim.time, 1), "outcome": sim.done_reason,
            "sent": int(sim.comms.sends.sum()), "delivered": int(sim.comms.delivered.sum()),
            "malformed": team.malformed_messages, "lost": int((~sim.valid).sum()),
            "reasons": sorted({r for r in sim.fleet.invalid_reason if r}),
            "lanes_done": f"{len(team.lanes_done())}/{len(team.lanes)}",
            "returned": sum(a.state in ("H", "L", "D") for a in team.agents),
            "wall_s": round(time.perf_counter() - wall0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vehicles", type=int, nargs="+", default=[1, 4, 10])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration-s", type=float, default=300.0)
    ap.add_argument("--policy", default="team-search")
    a = ap.parse_args()
    for n in a.vehicles:
        print(run(n, a.seed, a.duration_s, a.policy), flush=True)


if __name__ == "__main__":
    main()

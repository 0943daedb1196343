"""One episode of a scenario flown by a policy, in process (used by ``qrsim run`` and ``qrsim batch``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from qrsim_ros.core.engine.simulator import ActionError, Simulator
from qrsim_ros.policies import is_team, make_factory
from qrsim_ros.policies.base import (
    PolicyError,
    PolicyFactory,
    SimulatorView,
    check_actions,
    instantiate,
)

#: ``on_step(sim, reward)``: called after every task step.
StepCallback = Callable[[Simulator, float], None]


@dataclass(frozen=True)
class EpisodeResult:
    """Outcome of one episode. ``outcome`` is the simulator's ``done_reason`` ('time_limit',
    'invalid_vehicle', 'all_persons_found'); persons counts are None outside search and rescue;
    ``vehicles_lost``: vehicles invalid at the end; ``messages_sent``: the radio's sends (None without
    one), as the referee's TaskStatus scores a team search."""

    seed: int
    steps: int
    sim_time_s: float
    total_reward: float
    outcome: str
    persons_found: int | None
    persons_total: int | None
    wall_s: float
    vehicles_lost: int = 0
    messages_sent: int | None = None


def persons_counts(sim: Simulator) -> tuple[int | None, int | None]:
    """(found, total) persons of a search-and-rescue scenario, else (None, None)."""
    if sim.scenario.task.type != "search_rescue":
        return None, None
    return int(sim.area.found.sum()), int(sim.area.num_persons)


def run_episode(
    sim: Simulator,
    policy_spec: str,
    *,
    factory: PolicyFactory | None = None,
    on_step: StepCallback | None = None,
) -> EpisodeResult:
    """Fly the episode ``sim`` is at the start of (a Simulator just built, or just ``reset``): build the
    policy named by ``policy_spec`` (``qrsim_ros.policies.make_factory``, or the given ``factory``, which
    ``policy_spec`` then only names in messages) and step until the episode is done.

    Nothing is reset or reseeded here: a Simulator built from a scenario with seed s flies the episode of
    ``reset(seed=s)``. Raises ValueError if ``sim`` has already stepped, PolicyError when the policy
    cannot be built, raises, or returns malformed actions.
    """
    if sim.step_count != 0:
        raise ValueError(f"run_episode: the simulator is at step {sim.step_count}, not at the start of an "
                         "episode (build it, or reset() it, first)")
    if factory is None:
        factory = make_factory(policy_spec, sim.scenario.task.type, team=is_team(sim.scenario))
    view = SimulatorView(sim)
    wall0 = time.perf_counter()
    try:
        policy = instantiate(factory, view)
    except PolicyError:
        raise
    except Exception as exc:
        raise PolicyError(f"policy {policy_spec!r} failed to start: {type(exc).__name__}: {exc}") from exc
    while not sim.done:
        try:
            actions = check_actions(policy(view), view, f"policy {policy_spec!r}")
            reward = sim.step(actions)
        except (ActionError, PolicyError) as exc:
            raise PolicyError(f"step {sim.step_count + 1}: {exc}") from None
        except Exception as exc:  # a user policy's bug: one clear line, the traceback chained
            raise PolicyError(f"policy {policy_spec!r} failed at step {sim.step_count + 1}: "
                              f"{type(exc).__name__}: {exc}") from exc
        if on_step is not None:
            on_step(sim, reward)
    found, total = persons_counts(sim)
    return EpisodeResult(
        seed=int(sim.seed_entropy), steps=int(sim.step_count), sim_time_s=float(sim.time),
        total_reward=float(sim.total_reward), outcome=sim.done_reason, persons_found=found,
        persons_total=total, wall_s=time.perf_counter() - wall0,
        vehicles_lost=int((~np.asarray(sim.valid, bool)).sum()),
        messages_sent=None if sim.comms is None else int(sim.comms.sends.sum()),
    )

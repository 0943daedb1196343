"""Baseline policies for the scenarios, and how policies are named and built (see ``base``).

A policy is ``policy(view) -> actions``, built per episode by ``factory(view)``, where ``view`` is an
``AutopilotView`` (estimated states, camera observations, plume readings; no true states).

Built-in names (``qrsim run --policy NAME``):

- ``hover``: hold position (``simple.Hover``).
- ``random``: uniform actions within the action space, from the policy's own seeded stream.
- ``search-pattern``: lawn-mower search with descend-and-hover confirmation (search and rescue).
- ``pursuit``: the cats' rule of QRSim's cats-and-mouse example.
- ``random-search``: the random search of QRSim's search-and-rescue / plume examples.
- ``mission``: ireland_2016's 17-mode search-and-retrieve guidance (retrieve scenarios).
- ``team-search``: the team's lane-by-lane split with progress shared over the radio, guarded
  (``team_search.TeamSearch``, siegemund_2011 chapter 5; needs ``comms.on``; docs/TEAMS.md);
  ``team-formation``: the same in leader-follower mode.
- ``auto``: the task's baseline (search-pattern, pursuit, random-search for plume, else hover; for a team
  with a radio and a take-off base, ``is_team``: team-search).
- ``guarded-NAME``: any of these (or ``guarded-MODULE:FUNC``) with obstacle guarding on the scene range
  finders (``guarded.guarded``, AURIS section 4.2; docs/TEAMS.md), e.g. ``guarded-search-pattern``.

Anything else of the form ``MODULE:FUNC`` or ``path/to/file.py:FUNC`` is loaded (``base.resolve_factory``).
"""

from __future__ import annotations

from typing import Any

from qrsim_ros.policies.base import (
    AutopilotView,
    Policy,
    PolicyError,
    PolicyFactory,
    SimulatorView,
    action_bounds,
    instantiate,
    mode_bounds,
    resolve_factory,
)
from qrsim_ros.policies.guarded import Guarded, guarded
from qrsim_ros.policies.mission import Mission, mission
from qrsim_ros.policies.pursuit import Pursuit, pursuit
from qrsim_ros.policies.random_search import RandomSearch, random_search
from qrsim_ros.policies.search_pattern import SearchPattern, SearchPatternParams, search_pattern
from qrsim_ros.policies.simple import Hover, RandomActions, hover, random_actions
from qrsim_ros.policies.team_search import TeamSearch, TeamSearchParams, team_formation, team_search

BUILTIN_POLICIES: dict[str, PolicyFactory] = {
    "hover": hover,
    "random": random_actions,
    "search-pattern": search_pattern,
    "pursuit": pursuit,
    "random-search": random_search,
    "mission": mission,
    "team-search": team_search,
    "team-formation": team_formation,
}

#: Prefix of a guarded policy's name: ``guarded-search-pattern``.
GUARDED_PREFIX = "guarded-"

#: The baseline ``auto`` picks per task type.
TASK_BASELINES = {"search_rescue": "search-pattern", "cats_mouse": "pursuit", "plume": "random-search",
                  "retrieve": "mission"}


def policy_names() -> list[str]:
    """Names accepted by ``make_factory`` besides MODULE:FUNC."""
    return [*BUILTIN_POLICIES, "auto", f"{GUARDED_PREFIX}NAME"]


def is_team(scenario: Any) -> bool:
    """Whether a scenario is a team search (a radio and a take-off base, ``config/team_search.yaml``):
    its ``auto`` policy is ``team-search`` (the task's single-vehicle baseline flies the team into itself)."""
    return _team(bool(scenario.comms.on), scenario.task)


def _team(has_radio: bool, task: Any) -> bool:
    return has_radio and task.placement == "base"


def make_factory(spec: str, task_type: str | None = None, *, team: bool = False) -> PolicyFactory:
    """The factory named by ``spec`` (``auto`` resolves with ``task_type``, or to ``team-search`` for a
    ``team`` scenario, ``is_team``; ``guarded-NAME`` wraps NAME's factory in ``guarded``); PolicyError if
    unknown."""
    if spec.strip().startswith(GUARDED_PREFIX):
        return guarded(make_factory(spec.strip()[len(GUARDED_PREFIX):], task_type, team=team))
    if spec.strip() == "auto":
        spec = "team-search" if team else TASK_BASELINES.get(task_type or "", "hover")
    return resolve_factory(spec, BUILTIN_POLICIES, ("auto",))


def make_policy(spec: str, view: AutopilotView) -> Policy:
    """Build the policy named by ``spec`` for the episode ``view`` shows."""
    team = _team(bool(view.has_radio), view.task)  # ``is_team`` from what the view shows
    return instantiate(make_factory(spec, view.task.type, team=team), view)


__all__ = [
    "BUILTIN_POLICIES",
    "GUARDED_PREFIX",
    "TASK_BASELINES",
    "AutopilotView",
    "Guarded",
    "Hover",
    "Mission",
    "Policy",
    "PolicyError",
    "PolicyFactory",
    "Pursuit",
    "RandomActions",
    "RandomSearch",
    "SearchPattern",
    "SearchPatternParams",
    "SimulatorView",
    "TeamSearch",
    "TeamSearchParams",
    "action_bounds",
    "guarded",
    "hover",
    "is_team",
    "make_factory",
    "make_policy",
    "mode_bounds",
    "policy_names",
    "pursuit",
    "random_actions",
    "random_search",
    "search_pattern",
    "team_formation",
    "team_search",
]

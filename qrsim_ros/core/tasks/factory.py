"""The task object of a scenario's task type (every task module below; the engine and nodes call it)."""

from __future__ import annotations

from qrsim_ros.core.tasks.retrieve import RetrieveTask
from qrsim_ros.core.tasks.rules import (
    CatsMouseTask,
    GenericTask,
    PlumeTask,
    SearchRescueTask,
    Task,
    TaskWorld,
)


def make_task(sim: TaskWorld) -> Task:
    """The task object for the scenario's task type."""
    kind = sim.scenario.task.type
    if kind in ("keep_spot", "keep_spot_x10", "goto_waypoint", "keep_velocity"):
        return GenericTask(sim)
    if kind == "cats_mouse":
        return CatsMouseTask(sim)
    if kind == "search_rescue":
        return SearchRescueTask(sim)
    if kind == "plume":
        return PlumeTask(sim)
    if kind == "retrieve":
        return RetrieveTask(sim)
    raise ValueError(f"unknown task type {kind!r}")

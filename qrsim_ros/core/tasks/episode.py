"""One episode of a scenario's task: the task rules applied to the world's state, the task-step counter,
the rewards and the termination (spec section 5).

The one place where episodes are counted and scored, used by the in-process ``Simulator`` and by the
ROS ``referee`` alike. The owner feeds it the ground truth in the Simulator's order:

    episode = Episode(scenario, area)           # once
    episode.begin(x0, valid)                    # every episode start, after placement and world reset
    episode.observe(x_k, valid_k)               # every 20 ms tick, on the tick's ground truth
    episode.on_tick(controls)                   #   ... with the controls flown in that tick
    reward = episode.end_step()                 # after every task step's last tick

Frames and units as in the core: NED positions [m], controls in QRSim's native units.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.validation import ticks_per_update
from qrsim_ros.core.tasks.factory import make_task
from qrsim_ros.core.tasks.rules import PlumeTask, Task, TaskContext

if TYPE_CHECKING:
    from qrsim_ros.core.config.scenario import Scenario
    from qrsim_ros.core.world.area import BoxArea


class Episode:
    """The task of ``scenario`` over ``area`` (see the module docstring).

    Public state: ``step_count`` (task steps completed), ``last_reward``, ``total_reward``, ``done`` and
    ``done_reason`` ('' while running), ``plume_reward`` (the last evaluated plume estimate, or None);
    ``context`` is what the task reads (true states, validity, area, plume reference samples).
    """

    def __init__(self, scenario: Scenario, area: BoxArea | None) -> None:
        self.scenario = scenario
        self.context = TaskContext(scenario, area)
        self.task: Task = make_task(self.context)
        self.ticks_per_task_step = ticks_per_update("task.dt_s", scenario.task.dt_s)
        self._clear(0)

    def _clear(self, step_count: int) -> None:
        self.step_count = step_count
        self.context.step_count = step_count
        self.last_reward = 0.0
        self.total_reward = 0.0
        self.done = False
        self.done_reason = ""
        self.plume_reward: float | None = None

    def set_plume_reference(self, samples: ArrayLike) -> None:
        """The reference samples (K, M) a plume task's estimates are scored against (per episode)."""
        self.context.plume_reference_samples = np.asarray(samples, float)

    def begin(self, x: ArrayLike, valid: ArrayLike, tick: int = 0) -> None:
        """Start an episode on the initial states ``x`` (N, 13) and validity (N,). ``tick`` > 0: joined
        late, at that tick (the steps already flown count as done, without rewards)."""
        self._clear(int(tick) // self.ticks_per_task_step)
        self.observe(x, valid)
        self.task.reset()

    def observe(self, x: ArrayLike, valid: ArrayLike) -> None:
        """The ground truth of the current tick: true states (N, 13) and validity (N,)."""
        self.context.x_true = x  # type: ignore[assignment]
        self.context.valid_flags = valid  # type: ignore[assignment]

    def on_tick(self, controls: ArrayLike) -> None:
        """The controls (N, 5) flown in the tick just observed (running costs); nothing once done."""
        if not self.done:
            self.task.on_tick(controls)  # type: ignore[arg-type]

    def end_step(self, step: int | None = None) -> float:
        """Close task step ``step`` (default: the next one) and return its reward; sets ``done`` and
        ``done_reason``. Steps skipped over (``step`` > ``step_count`` + 1) earn nothing."""
        self.step_count = self.step_count + 1 if step is None else int(step)
        self.context.step_count = self.step_count
        last = self.step_count >= self.scenario.task.duration_steps
        reward = self.task.step_reward(last)
        self.last_reward = reward
        self.total_reward += reward
        self.done_reason = self.task.done_reason()
        self.done = bool(self.done_reason)
        return reward

    def evaluate_plume(self, estimates: ArrayLike) -> float:
        """Plume tasks: the reward of estimates (K, M) at the reference locations (0 is perfect)."""
        if not isinstance(self.task, PlumeTask):
            raise RuntimeError("only plume tasks take concentration estimates")
        self.plume_reward = self.task.evaluate(np.asarray(estimates, float))
        return self.plume_reward

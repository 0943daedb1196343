"""vehicle_dynamics' clock: when tick 0 goes out, when each next step is integrated, and the end.

Stepping never blocks the executor: step k+1 is integrated in whichever callback completes its inputs (a
wind or command message, a progress report, or the wall-clock timer) as ``LockstepGate`` allows, paced
by ``Pace`` (``real_time_factor``), at most ``BURST_S`` of wall time at a time. After
``lockstep_timeout_s`` of wall time without a step the missing inputs are named in a warning ("waiting
for uav2/wind@t=1.24, uav1/cmd/attitude@t=1.24") and the tick's outputs are published again (for nodes
that joined late or lost them; consumers treat a repeated tick as a repeat; once the tick has waited
``RENEW_AFTER_S`` the late inputs' subscriptions are also made again: ``ros.renewable_inputs``), or,
when only consumers are behind, their progress is read again; then the clock waits on
(``lockstep_on_timeout: wait``) or steps with the held inputs (``continue``).

Tick 0 is first published once ``start_subscribers`` ground-truth consumers matched and every
ground-truth writer matched each subscription the graph lists for its topic (a reader that the writer has
not matched yet would lose tick 0: discovery is asymmetric, and under load a recorder lost the first two
ticks of odometry and /tf that way), each at most ``start_timeout_s``, and, in lockstep, every awaited
input has a publisher and the ground truth a subscriber. At ``duration_s`` (all episodes) the clock
stops; in lockstep it first waits (at most ``DRAIN_TIMEOUT_S``) for every consumer to handle the last
tick; then the node finishes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.ros.lockstep import LockstepGate
from qrsim_ros.ros.names import FIRST_EPISODE
from qrsim_ros.ros.node import Warn

#: Wall-clock budget of one free-running burst of steps before the executor gets control back [s].
BURST_S = 0.01
#: Longest wall time the clock waits at duration_s for the ground-truth consumers to handle the last tick [s].
DRAIN_TIMEOUT_S = 10.0


class Pace:
    """Steps at ``real_time_factor`` of the wall clock (0: as fast as the inputs allow)."""

    #: behind by more than this many periods (and 0.1 s): re-anchor rather than catch up in a burst
    FAR_BEHIND_PERIODS = 5

    def __init__(self, real_time_factor: float) -> None:
        self.period_s = BASE_DT_S / real_time_factor if real_time_factor > 0 else 0.0
        self._wall = 0.0
        self._step = 0

    def anchor(self, steps: int) -> None:
        """Step ``steps + 1`` is due one period from now."""
        self._wall, self._step = time.monotonic(), steps

    def due(self, steps: int, now: float) -> bool:
        """Whether step ``steps + 1`` is due at the wall time ``now`` (re-anchors when far behind)."""
        if self.period_s <= 0:
            return True
        due = self._wall + (steps + 1 - self._step) * self.period_s
        if now < due:
            return False
        if now - due > max(0.1, self.FAR_BEHIND_PERIODS * self.period_s):
            self._wall, self._step = now - self.period_s, steps
        return True


@dataclass
class ClockHooks:
    """What the clock asks of its node."""

    valid: Callable[[], np.ndarray]  # (N,) bool: the vehicles whose inputs are awaited
    integrate: Callable[[int], None]  # integrate the step to tick k
    publish: Callable[[], None]  # publish the current tick's outputs
    start_subscribers: Callable[[], int]  # ground-truth consumers matched (the start gate)
    start_unmatched: Callable[[], list[str]]  # ground-truth topics whose writer has not matched a reader
    start_missing: Callable[[], list[str]]  # lockstep start: inputs without a publisher, ...
    starting: Callable[[], None]  # tick 0 is about to go out
    renew_inputs: Callable[[float], None]  # the tick's inputs are late (wall s since it went out): renew
    finish: Callable[[], None]  # duration_s reached and drained: end the node


class TickScheduler:
    """The simulation clock of vehicle_dynamics (see the module docstring): ``k`` (the tick of the
    published ground truth), ``steps`` (integrated since start, all episodes) and ``episode``."""

    def __init__(self, node: Node, params: Any, gate: LockstepGate, hooks: ClockHooks, warn: Warn) -> None:
        self.params = params
        self.gate = gate
        self.hooks = hooks
        self._warn = warn
        self._log = node.get_logger()
        self.k = 0
        self.steps = 0
        self.episode = FIRST_EPISODE - 1
        self.started = False
        self.stopping = False
        self.lockstep_timeouts = 0  # waits longer than lockstep_timeout_s
        self._started_wall = 0.0
        self._draining_since: float | None = None  # duration_s reached, waiting for the consumers
        self._pace = Pace(params.real_time_factor)
        self._wait_since = time.monotonic()
        self._tick_out = self._wait_since  # when the current tick first went out (re-sends do not count)
        self._max_steps = math.floor(params.duration_s / BASE_DT_S + 1e-9) if params.duration_s > 0 else 0
        # wall-clock timer: pacing (a quarter of a tick's period: steps late by at most that), lockstep
        # timeouts, free-running bursts
        free_s = 0.01 if params.lockstep else 0.001
        timer_s = min(max(self._pace.period_s / 4, 0.001), 0.05) if params.real_time_factor > 0 else free_s
        wall = Clock(clock_type=ClockType.STEADY_TIME)
        self._timer = node.create_timer(timer_s, self._on_timer, clock=wall)

    def new_episode(self) -> None:
        """Tick 0 of the next episode (its outputs go out with ``restart``, once started)."""
        self.episode += 1
        self.k = 0

    def restart(self) -> None:
        """After a reset: publish tick 0 again and pace from now (when started)."""
        if self.started:
            self.hooks.publish()
            self._anchor_pace()

    def on_input(self) -> None:
        """An awaited input arrived: step as far as the inputs and the pace allow."""
        self.try_advance()

    def on_progress(self) -> None:
        """A consumer reported progress."""
        if self._draining_since is not None:
            self._try_finish()
        elif self.started and not self.stopping:
            self.try_advance()

    def ready(self) -> bool:
        return self.gate.ready(self.k, self.episode, self.hooks.valid())

    def try_advance(self) -> None:
        """Integrate as many steps as the inputs and the pace allow (a bounded burst)."""
        if not self.started or self.stopping:
            return
        burst_end = time.monotonic() + BURST_S
        while self.ready():
            now = time.monotonic()
            if not self._pace.due(self.steps, now):
                return
            self._step()
            if self.stopping or now > burst_end:
                return

    def _step(self) -> None:
        self.hooks.integrate(self.k + 1)
        self.k += 1
        self.steps += 1
        self.hooks.publish()
        self._wait_since = self._tick_out = time.monotonic()
        if self._max_steps and self.steps >= self._max_steps:
            self._begin_finish()

    def _anchor_pace(self) -> None:
        self._pace.anchor(self.steps)
        self._wait_since = self._tick_out = time.monotonic()

    def _on_timer(self) -> None:
        if self._draining_since is not None:
            self._try_finish()
            return
        if self.stopping:
            return
        if not self.started:
            self._try_start()
            return
        self.try_advance()
        if self.stopping or self.ready():
            return
        waited = time.monotonic() - self._wait_since
        if waited < self.params.lockstep_timeout_s:
            return
        valid = self.hooks.valid()
        missing = self.gate.missing(self.k, self.episode, valid)
        self.lockstep_timeouts += 1
        if (self.params.lockstep and self.params.lockstep_on_timeout == "continue"
                and not self.gate.awaiting_first_commands(valid)):
            self._log.warning(f"lockstep: no {', '.join(missing)} after {waited:.1f} s: stepping on with the "
                              "held inputs")
            self._step()
            self.try_advance()
            return
        if self._draining_since is not None:
            return
        inputs_late = bool(self.gate.missing(self.k, self.episode, valid, consumers=False))
        self._log.warning(f"waiting for {', '.join(missing)} ({waited:.1f} s)"
                          + (f"; tick {self.k} re-sent" if inputs_late else "; progress reports read again"))
        if inputs_late:  # an input may be lost: send the tick again (a slow consumer has it queued)
            self.hooks.renew_inputs(time.monotonic() - self._tick_out)  # ... or its subscription deaf
            self.hooks.publish()
        else:
            self.gate.resubscribe_progress()
        self._wait_since = time.monotonic()

    def _try_start(self) -> None:
        waited = time.monotonic() - self._wait_since
        matched = self.hooks.start_subscribers()
        p = self.params
        short = matched < p.start_subscribers
        if short and waited < p.start_timeout_s:
            return
        if short:
            self._warn("start", f"starting with {matched} of {p.start_subscribers} subscribers of the "
                                f"ground truth (/sim/vehicle_status) after {waited:.1f} s")
        unmatched = self.hooks.start_unmatched()
        if unmatched and waited < p.start_timeout_s:
            return
        if unmatched:
            more = f" and {len(unmatched) - 3} more" if len(unmatched) > 3 else ""
            self._warn("start", f"starting before the writers of {', '.join(unmatched[:3])}{more} matched "
                                f"every subscriber the graph lists, after {waited:.1f} s")
        if p.lockstep:
            missing = self.hooks.start_missing()
            waited = time.monotonic() - self._wait_since
            if missing and not (p.lockstep_on_timeout == "continue" and waited >= p.lockstep_timeout_s):
                if waited >= p.lockstep_timeout_s:
                    self._warn("start", f"lockstep start: waiting for {', '.join(missing)}")
                return
        self.hooks.starting()
        self.started = True
        self._started_wall = time.monotonic()
        self._log.info(f"started: tick 0 published after {time.monotonic() - self._wait_since:.2f} s")
        self.hooks.publish()
        self._anchor_pace()
        self.try_advance()

    def _begin_finish(self) -> None:
        """duration_s reached: stop stepping; in lockstep, first wait for every consumer to handle the
        last tick (at most DRAIN_TIMEOUT_S of wall time), then finish."""
        self.stopping = True
        self._draining_since = self._wait_since = time.monotonic()
        self._try_finish()

    def _try_finish(self) -> None:
        lagging = self.gate.lagging(self.k, 0, self.episode)
        now = time.monotonic()
        waited = now - (self._draining_since or 0.0)
        if lagging and waited < DRAIN_TIMEOUT_S:
            if now - self._wait_since >= self.params.lockstep_timeout_s:  # (as a lockstep wait)
                self.gate.resubscribe_progress()
                self._wait_since = now
            return
        if lagging:
            self._log.warning(f"duration_s reached: stopping without {', '.join(lagging)} after "
                              f"{waited:.1f} s (they had not handled the last tick)")
        self._draining_since = None
        self.stopping = True
        self._timer.cancel()
        wall_s = time.monotonic() - self._started_wall
        self._log.info(f"duration_s={self.params.duration_s:g} reached: {self.steps} steps in {wall_s:.2f} s "
                       f"of wall time since tick 0 ({self.steps / wall_s:.0f} ticks/s); shutdown")
        self.hooks.finish()

"""Gymnasium environments over the in-process ``Simulator``, one class per task family (docs/GYM.md).

Every environment steps one task step per ``step(action)`` (``task.dt_s``: 1 s for search and rescue,
plume and cats-and-mouse, 20 ms for the generic tasks) and ends the episode when the simulator does.

Action space: ``Box(low, high, shape=(rows, width), float32)``, one row per agent-controlled vehicle with
its control mode's physical limits (``policies.base.mode_bounds``): velocity / velocity_height
``[vn, ve(, vd)]`` (NED, m/s): vn, ve in +-3 sqrt(2) = +-4.24, vd in +-3 (the velocity loops clamp each
body component at 3 m/s: the NED bounding box of what they follow); attitude
``[pitch, roll, throttle, yaw_rate, battery]`` within the Pelican's input limits; waypoint
``[n, e, d, heading]`` within the area and [-pi, pi]. Columns beyond a row's mode (mixed modes) have
low = high = 0. Actions are clipped to the box before they are applied.

Observation space: a ``Dict`` (all Box float32 unless noted):

- ``estimated_state`` (N, 20): every vehicle's estimated state eX (spec 2.1: GPS position NED [m],
  attitude [rad], 0 0 0, gyro [rad/s], 0, accelerometer [m/s^2], altimeter height [m], GPS velocity
  north/east [m/s], vertical speed [m/s]); the rows of invalid vehicles (NaN in the simulator) are
  replaced by the sentinel ``INVALID_SENTINEL`` = 0 and flagged in ``valid``.
- ``valid`` (N,): ``MultiBinary``, 1 while the vehicle is valid.
- ``time_s`` (1,): simulated time since reset [s], in [0, duration].
- search and rescue adds ``camera_max_llkd`` (N,): the largest window llkd of each vehicle's latest frame
  (0 without a frame), ``camera_max_llkd_ne`` (N, 2): the ground position (north, east [m]) of that
  window (0 without a frame), ``camera_valid`` (N,) ``MultiBinary``: the vehicle has a frame,
  ``persons_found`` (1,) and ``num_persons`` (1,) (in [0, the largest number of persons]).
- plume adds ``plume_reading`` (N,): each vehicle's latest plume-sensor concentration (0 if invalid).
- cats and mouse: the mouse is the last row of ``estimated_state`` (not agent-controlled).

Reward: the task's reward of the step (``Simulator.step``). ``terminated`` when the episode ends on
``invalid_vehicle`` or ``all_persons_found``; ``truncated`` on ``time_limit``. Plume: the mapping
reward needs concentration estimates at ``info["plume_locations"]``: pass them to
``env.unwrapped.submit_plume_estimates(estimates)``.

``reset(seed=s)``: gym seed s -> simulator seed s + 1 (the simulator reads seed 0 as "from the clock"):
all random streams rebuilt, so the episode is reproducible. ``reset()`` without a seed continues the
streams (a new, different episode). ``info``: ``done_reason`` ('' while running), ``true_state`` (N, 13)
true states (for analysis only, not an observation), ``step``, ``total_reward``, ``sim_seed``;
search and rescue adds ``persons_found``; plume adds ``plume_locations`` (M, 3) at reset.

``env.unwrapped.sim`` is the Simulator, ``env.unwrapped.view`` an ``AutopilotView`` of it: the baseline
policies run on it (``qrsim_ros.policies.make_policy("search-pattern", env.unwrapped.view)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.tasks.rules import DONE_TIME_LIMIT
from qrsim_ros.core.vehicles.estimated_state import ESTIMATED_STATE_SIZE
from qrsim_ros.policies.base import SimulatorView, action_bounds

#: Value of the estimated-state entries of invalid vehicles (NaN in the simulator) in observations.
INVALID_SENTINEL = 0.0

Obs = dict[str, np.ndarray]


def _box(shape: tuple[int, ...], low: float = -np.inf, high: float = np.inf) -> spaces.Box:
    return spaces.Box(low=low, high=high, shape=shape, dtype=np.float32)


class QRSimEnv(gym.Env[Obs, np.ndarray]):
    """Base environment: a scenario of one of ``task_types`` (see the module docstring).

    scenario: a scenario name (config/NAME.yaml) or YAML path; None = ``default_scenario``.
    overrides: scenario overrides (same keys as the YAML, e.g. ``{"task": {"duration_steps": 50}}``).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    task_types: ClassVar[tuple[str, ...]] = ()
    default_scenario: ClassVar[str] = ""

    def __init__(self, scenario: str | None = None, overrides: Mapping[str, Any] | None = None,
                 render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"render_mode={render_mode!r}: these environments do not render")
        self.render_mode = None
        name = scenario or self.default_scenario
        self.sim = Simulator.from_scenario(name, overrides)
        kind = self.sim.scenario.task.type
        if self.task_types and kind not in self.task_types:
            raise ValueError(f"{type(self).__name__} needs a scenario of task type "
                             f"{' or '.join(self.task_types)}; {name!r} is {kind!r}")
        self.view = SimulatorView(self.sim)
        spec = self.sim.action_spec
        sc = self.sim.scenario
        low, high = action_bounds(spec, sc.area_limits_ned, sc.vehicle.rotor_params())
        self._action_low, self._action_high = low, high
        self.action_space = spaces.Box(low=low.astype(np.float32), high=high.astype(np.float32),
                                       dtype=np.float32)
        self.observation_space = spaces.Dict(self._observation_spaces())
        self._sim_seed: int | None = None

    # --- spaces and observations (extended by the task families) ---------------------------------------
    def _observation_spaces(self) -> dict[str, spaces.Space[Any]]:
        n = self.sim.num_vehicles
        return {
            "estimated_state": _box((n, ESTIMATED_STATE_SIZE)),
            "valid": spaces.MultiBinary(n),
            "time_s": _box((1,), 0.0, self.sim.scenario.task.duration_steps * self.sim.scenario.task.dt_s),
        }

    def _observation(self) -> Obs:
        ex = self.sim.estimated_state()
        valid = np.all(np.isfinite(ex), axis=1) & self.sim.valid
        ex[~np.isfinite(ex)] = INVALID_SENTINEL
        return {
            "estimated_state": ex.astype(np.float32),
            "valid": valid.astype(np.int8),
            "time_s": np.array([self.sim.time], np.float32),
        }

    def _info(self) -> dict[str, Any]:
        return {
            "done_reason": self.sim.done_reason,
            "true_state": np.array(self.sim.true_state(), float),
            "step": int(self.sim.step_count),
            "total_reward": float(self.sim.total_reward),
            "sim_seed": int(self.sim.seed_entropy),
        }

    # --- gymnasium API ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Obs, dict]:
        """New episode; ``seed`` s reseeds the simulator with s + 1 (see the module docstring)."""
        super().reset(seed=seed)
        if seed is not None:
            if seed < 0:
                raise ValueError(f"seed must be >= 0, got {seed}")
            self._sim_seed = int(seed) + 1
            self.sim.reset(seed=self._sim_seed)
        else:
            self.sim.reset()
        return self._observation(), self._info()

    def step(self, action: np.ndarray) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if self.sim.done:
            raise RuntimeError("the episode is over; call reset()")
        a = np.asarray(action, dtype=float).reshape(self._action_low.shape)
        a = np.clip(a, self._action_low, self._action_high)
        reward = float(self.sim.step(a))
        reason = self.sim.done_reason
        truncated = reason == DONE_TIME_LIMIT
        terminated = bool(reason) and not truncated
        return self._observation(), reward, terminated, truncated, self._info()

    def close(self) -> None:
        """Nothing to release (the simulator lives in this process)."""


class SearchRescueEnv(QRSimEnv):
    """Search and rescue 2A-2D (``scenario`` search_rescue_2a .. search_rescue_2d)."""

    task_types = ("search_rescue",)
    default_scenario = "search_rescue_2a"

    def _observation_spaces(self) -> dict[str, spaces.Space[Any]]:
        n = self.sim.num_vehicles
        area = self.sim.scenario.area
        fixed = area.persons_ned is not None
        max_persons = float(len(area.persons_ned) if fixed else area.num_persons_range[1])
        return {
            **super()._observation_spaces(),
            "camera_max_llkd": _box((n,)),
            "camera_max_llkd_ne": _box((n, 2)),
            "camera_valid": spaces.MultiBinary(n),
            "persons_found": _box((1,), 0.0, max_persons),
            "num_persons": _box((1,), 0.0, max_persons),
        }

    def _observation(self) -> Obs:
        obs = super()._observation()
        n = self.sim.num_vehicles
        best, where, has = np.zeros(n), np.zeros((n, 2)), np.zeros(n, np.int8)
        for i, frame in enumerate(self.view.camera_observations()):
            if frame is None or frame.empty:
                continue
            llkd = frame.llkd
            if not np.any(np.isfinite(llkd)):
                continue
            k = int(np.nanargmax(llkd))
            best[i], where[i], has[i] = llkd[k], frame.cg[k, 0:2], 1
        obs["camera_max_llkd"] = best.astype(np.float32)
        obs["camera_max_llkd_ne"] = where.astype(np.float32)
        obs["camera_valid"] = has
        obs["persons_found"] = np.array([self.sim.area.found.sum()], np.float32)
        obs["num_persons"] = np.array([self.sim.area.num_persons], np.float32)
        return obs

    def _info(self) -> dict[str, Any]:
        return {**super()._info(), "persons_found": int(self.sim.area.found.sum())}


class PlumeEnv(QRSimEnv):
    """Plume mapping 3A-3G (``scenario`` plume_3a .. plume_3g)."""

    task_types = ("plume",)
    default_scenario = "plume_3a"

    def _observation_spaces(self) -> dict[str, spaces.Space[Any]]:
        return {**super()._observation_spaces(), "plume_reading": _box((self.sim.num_vehicles,))}

    def _observation(self) -> Obs:
        obs = super()._observation()
        reading = self.sim.plume_readings()
        reading[~np.isfinite(reading)] = INVALID_SENTINEL
        obs["plume_reading"] = reading.astype(np.float32)
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Obs, dict]:
        obs, info = super().reset(seed=seed, options=options)
        info["plume_locations"] = np.array(self.sim.plume_locations, float)
        info["samples_per_location"] = int(self.sim.scenario.task.samples_per_location)
        return obs, info

    def submit_plume_estimates(self, estimates: np.ndarray) -> float:
        """The mapping reward of concentration estimates (K, M) at ``info["plume_locations"]``."""
        return self.sim.submit_plume_estimates(estimates)


class CatsMouseEnv(QRSimEnv):
    """Cats and mouse 1A-1C (``scenario`` cats_mouse_1a .. cats_mouse_1c): actions for the cats only."""

    task_types = ("cats_mouse",)
    default_scenario = "cats_mouse_1a"


class GenericEnv(QRSimEnv):
    """keep_spot, keep_spot_x10, goto_waypoint, keep_velocity (20 ms steps, attitude actions)."""

    task_types = ("keep_spot", "keep_spot_x10", "goto_waypoint", "keep_velocity")
    default_scenario = "keep_spot"

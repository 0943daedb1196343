"""The in-process simulator: every model of a scenario stepped in one process, seeded and fast.

    from qrsim_ros.core.engine.simulator import Simulator
    sim = Simulator.from_scenario("search_rescue_2a", overrides={"seed": 3})
    sim.reset()                        # or sim.reset(seed=7): reseed (Gymnasium semantics)
    while not sim.done:
        sim.step(actions)              # one row per agent-controlled vehicle (see ``action_spec``)
    sim.total_reward, sim.done_reason, sim.time

Order within each 20 ms tick (spec 1.4 and 11): time advances; the GPS space segment, the area
(persons found, plume puffs) update; every vehicle's controller computes its controls from its
*estimated* state at 50 Hz while the agent's action is held for the task step; turbulence updates
and the air velocity is formed; all vehicles are integrated together (collisions checked on the new
positions); then the sensors update (AHARS, GPS, camera, plume sensor) and the estimated states are
assembled. Components gate themselves on integer tick counters (no floating-point modulo).

``reset()`` continues every random stream; ``reset(seed=s)`` rebuilds all streams from ``s``: two runs
with the same seed and actions are bit-identical. Seed 0 means "from the clock" (as QRSim).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import BASE_DT_S, ticks_per_update
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import CONTROL_MODES, Scenario, load_scenario
from qrsim_ros.core.engine.builders import (  # noqa: F401 (PLUME_WIND_HEIGHT_M: re-exported)
    PLUME_WIND_HEIGHT_M,
    ContinuingStreams,
    build_fleet,
    build_scenario_plume,
    plume_wind,
)
from qrsim_ros.core.sensors.ahars import Ahars
from qrsim_ros.core.sensors.camera import CameraObservation, CameraWithClassifier
from qrsim_ros.core.sensors.gps import GpsReceiver, GpsSpaceSegment
from qrsim_ros.core.sensors.plume_sensor import PlumeSensor
from qrsim_ros.core.tasks.rules import PLACEMENT_STREAM, PlumeTask, Task, initial_placement, make_task
from qrsim_ros.core.vehicles.controllers import VelocityHeightPID, VelocityPID, WaypointPID
from qrsim_ros.core.vehicles.pelican import CONTROL_LIMITS, PelicanInputError
from qrsim_ros.core.world.area import BoxArea, BoxWithPersonsArea
from qrsim_ros.core.world.plume import GaussianDispersionPlume, GaussianPlume, GaussianPuffPlume
from qrsim_ros.core.world.turbulence import DrydenTurbulence
from qrsim_ros.core.world.wind import MeanWind

Array = NDArray[np.float64]

#: Width of the estimated state eX (spec 2.1).
ESTIMATED_STATE_SIZE = 20


class ActionError(ValueError):
    """The actions given to ``Simulator.step`` are malformed or out of range."""


class Simulator:
    """A scenario's models stepped together in one process (see the module docstring)."""

    dt_s = BASE_DT_S

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.num_vehicles = scenario.num_vehicles
        self.ticks_per_task_step = ticks_per_update("task.dt_s", scenario.task.dt_s)
        self._build(RandomStreams(scenario.seed))
        self.reset()

    @classmethod
    def from_scenario(
        cls, name_or_yaml_path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None
    ) -> Simulator:
        """Load config/<name>.yaml (or a YAML path), apply ``overrides`` (same keys), build."""
        return cls(load_scenario(name_or_yaml_path, overrides))

    # --- construction ---------------------------------------------------------------------------
    def _build(self, streams: RandomStreams) -> None:
        sc, n = self.scenario, self.num_vehicles
        v = sc.vehicle
        self.streams = streams
        self.seed_entropy = streams.entropy
        limits = sc.area_limits_ned
        # environment (shared)
        self.gps_space = GpsSpaceSegment(sc.gps, streams)
        self.wind = MeanWind.from_params(sc.wind, streams)
        if sc.area.type == "box_with_persons":
            self.area: BoxArea = BoxWithPersonsArea(n, sc.persons_area_params(), streams)
        else:
            self.area = BoxArea(limits, sc.origin)
        self.plume: GaussianPlume | GaussianDispersionPlume | GaussianPuffPlume | None = None
        self.plume_locations = np.zeros((0, 3))
        self.plume_reference_samples = np.zeros((0, 0))
        # vehicles
        self.fleet = build_fleet(sc, streams)
        self.turbulence = DrydenTurbulence(n, v.turbulence, streams)
        self.ahars = Ahars(n, v.ahars, streams)
        self.gps = GpsReceiver(n, self.gps_space, v.gps_receiver, streams, origin=sc.origin)
        uses_camera = v.camera.on and sc.task.type == "search_rescue"
        camera = replace(v.camera, person_size_m=sc.area.person_size_m)
        self.camera = CameraWithClassifier(n, camera, streams) if uses_camera else None
        self.plume_sensor = PlumeSensor(n, v.plume_sensor, streams) if sc.task.type == "plume" else None
        self.task: Task = make_task(self)
        # per-vehicle control: one controller per mode, over the vehicles in that mode
        modes = sc.control_modes()
        self.control_modes = modes
        self._mode_rows = {
            m: np.array([i for i, mm in enumerate(modes) if mm == m], int) for m in CONTROL_MODES
        }
        agent_rows = self.task.agent_vehicles
        agent_modes = [modes[i] for i in agent_rows]
        self._action_width = max(len(CONTROL_MODES[m]) for m in agent_modes)
        self._action_rows_by_mode = {
            m: np.array([r for r, mm in enumerate(agent_modes) if mm == m], int)
            for m in dict.fromkeys(agent_modes)
        }
        self._controllers = {
            "velocity": VelocityPID(max(1, len(self._mode_rows["velocity"]))),
            "velocity_height": VelocityHeightPID(max(1, len(self._mode_rows["velocity_height"]))),
            "waypoint": WaypointPID(max(1, len(self._mode_rows["waypoint"]))),
        }
        self._task_rng = streams.get(PLACEMENT_STREAM)
        self._plume_rng = ContinuingStreams(streams)
        self._ex = np.full((n, ESTIMATED_STATE_SIZE), np.nan)

    # --- episode control --------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Start a new episode. ``seed``: rebuild every random stream from it (0 = from the clock)."""
        if seed is not None:
            self.scenario = replace(self.scenario, seed=int(seed))
            self._build(RandomStreams(int(seed)))
        sc = self.scenario
        self.tick = 0
        self.step_count = 0
        self.total_reward = 0.0
        self.last_reward = 0.0
        self.done = False
        self.done_reason = ""
        self.plume_reward: float | None = None
        # environment in creation order: GPS space segment, wind, area (spec 1.3)
        self.gps_space.reset(0)
        self.wind.reset()
        self.area.reset()
        if isinstance(self.area, BoxWithPersonsArea) and sc.area.persons_ned is not None:
            self.area.set_persons(np.asarray(sc.area.persons_ned, float))
        if sc.task.type == "plume":
            self._reset_plume()
        # vehicles (the task's placement, shared with the vehicle_dynamics node)
        x0, self._headings = initial_placement(self.task, self._task_rng)
        try:
            self.fleet.set_state(x0)
        except PelicanInputError as exc:
            where = "vehicle.initial_states" if sc.vehicle.initial_states is not None else "initial state"
            raise ScenarioError(f"{sc.source}: {where}: {exc}") from None
        x = self.fleet.state
        self.turbulence.reset(x)
        self.ahars.reset(x)
        self.gps.reset(x)
        if self.camera is not None:
            self.camera.reset(x)
        if self.plume_sensor is not None:
            self.plume_sensor.reset(x, concentration=self.plume.concentration, t_s=0.0)
        for c in self._controllers.values():
            c.reset()
        self._assemble_estimated_state()
        self.task.reset()

    def _reset_plume(self) -> None:
        # one builder shared with the plume_field node (and the referee): same streams, same plume
        world = build_scenario_plume(self.scenario, *plume_wind(self.wind), self._plume_rng)
        self.plume = world.plume
        self.plume_locations = world.locations_ned
        self.plume_reference_samples = world.reference_samples

    # --- stepping ---------------------------------------------------------------------------------
    @property
    def action_spec(self) -> dict[str, Any]:
        """Rows (agent-controlled vehicles), their control modes and the action columns of each."""
        rows = self.task.agent_vehicles
        modes = [self.control_modes[i] for i in rows]
        width = max(len(CONTROL_MODES[m]) for m in modes)
        return {"vehicles": rows.tolist(), "modes": modes, "width": width,
                "columns": {m: CONTROL_MODES[m] for m in dict.fromkeys(modes)}}

    def step(self, actions: ArrayLike) -> float:
        """Advance one task step with ``actions`` held; returns the step's reward.

        ``actions`` has one row per agent-controlled vehicle (``action_spec``); each row's first
        columns are its mode's inputs (attitude: pitch, roll [rad], throttle [0..1], yaw rate [rad/s],
        battery [V]; velocity: NED m/s; velocity_height: north/east m/s; waypoint: NED m + heading
        rad); extra columns are ignored. Rows of invalid vehicles are ignored.
        """
        if self.done:
            raise RuntimeError("the episode is over (done); call reset()")
        targets = self._parse_actions(actions)
        n_ticks = self.ticks_per_task_step
        for _ in range(n_ticks):
            self._tick(targets)
        self.step_count += 1
        last = self.step_count >= self.scenario.task.duration_steps
        reward = self.task.step_reward(last)
        self.last_reward = reward
        self.total_reward += reward
        self.done_reason = self.task.done_reason()
        self.done = bool(self.done_reason)
        return reward

    def _parse_actions(self, actions: ArrayLike) -> Array:
        rows = self.task.agent_vehicles
        spec_width = self._action_width
        try:
            a = np.atleast_2d(np.asarray(actions, dtype=float))
        except (TypeError, ValueError):
            raise ActionError(f"actions must be numeric with {len(rows)} rows") from None
        if a.ndim != 2 or a.shape[0] != len(rows) or a.shape[1] < spec_width:
            raise ActionError(f"actions must have shape ({len(rows)}, {spec_width}) "
                              f"(one row per agent-controlled vehicle), got {a.shape}")
        full = np.full((self.num_vehicles, 5), np.nan)
        live = self.fleet.valid[rows]
        for mode, action_rows in self._action_rows_by_mode.items():
            width = len(CONTROL_MODES[mode])
            block = a[action_rows, :width]
            check = live[action_rows]
            bad_rows = check & ~np.all(np.isfinite(block), axis=1)
            if bad_rows.any():
                r = int(action_rows[np.argmax(bad_rows)])
                raise ActionError(
                    f"action row {r} (vehicle {rows[r]}) is not finite: {a[r, :width].tolist()}")
            if mode == "attitude":
                lo, hi = CONTROL_LIMITS[:, 0], CONTROL_LIMITS[:, 1]
                out = check[:, None] & ((block < lo) | (block > hi))
                if out.any():
                    rr, j = np.argwhere(out)[0]
                    r = int(action_rows[rr])
                    raise ActionError(f"action row {r} (vehicle {rows[r]}): {CONTROL_MODES['attitude'][j]}="
                                      f"{float(block[rr, j])!r} outside [{lo[j]}, {hi[j]}]")
            full[rows[action_rows], :width] = block
        return full

    def _tick(self, targets: Array) -> None:
        self.tick += 1
        k = self.tick
        x = self.fleet.state
        valid = self.fleet.valid
        self.gps_space.step(k)
        self.area.step(k, x, valid)
        if self.plume is not None:
            self.plume.step(k)
        controls = self._controls(targets)
        self.turbulence.step(k, x, active=valid)
        wind_body = self.wind.velocity_body(x) + self.turbulence.velocity_body
        self.fleet.step(controls, wind_body)
        x = self.fleet.state
        valid = self.fleet.valid
        self.ahars.step(k, x, self.fleet.accel_body)
        self.gps.step(k, x)
        if self.camera is not None and isinstance(self.area, BoxWithPersonsArea):
            self.camera.step(k, x, valid, self.area.persons_position_ned, self.area.terrain_class_at)
        if self.plume_sensor is not None:
            self.plume_sensor.step(k, x, self.plume.concentration, t_s=k * self.dt_s)
        self._assemble_estimated_state()
        self.task.on_tick(controls)

    def _controls(self, targets: Array) -> Array:
        """Controls (N, 5) for this tick: raw rows pass through, the others go through their PID."""
        n = self.num_vehicles
        u = np.zeros((n, 5))
        u[:, 2] = 0.59
        u[:, 4] = 12.0
        ex = self._ex
        for i, a in self.task.environment_actions(ex).items():
            targets[i, : a.size] = a
        invalid = ~self.fleet.valid
        for mode, rows in self._mode_rows.items():
            if rows.size == 0:
                continue
            t = targets[rows]
            if mode == "attitude":
                u[rows] = np.where(invalid[rows, None], u[rows], t)
                continue
            t = np.where(invalid[rows, None], 0.0, t)  # invalid vehicles: zero targets, as QRSim
            e = ex[rows]
            c = self._controllers[mode]
            if mode == "velocity":
                u[rows] = c.compute_from_estimated_state(e, t[:, 0:3], self._headings[rows])
            elif mode == "velocity_height":
                z = np.full(rows.size, self.scenario.task.flight_z_ned_m)
                u[rows] = c.compute_from_estimated_state(e, t[:, 0:2], z, self._headings[rows])
            else:
                u[rows] = c.compute_from_estimated_state(e, t[:, 0:3], t[:, 3])
        return u

    def _assemble_estimated_state(self) -> None:
        """eX (spec 2.1): GPS position | orientation | 0 0 0 | gyro | 0 | accel | height | GPS vel n e |
        vertical speed; NaN for invalid vehicles."""
        ex = self._ex
        ex[:, 0:3] = self.gps.position_ned
        ex[:, 3:6] = self.ahars.orientation
        ex[:, 6:9] = 0.0
        ex[:, 9:12] = self.ahars.angular_velocity
        ex[:, 12] = 0.0
        ex[:, 13:16] = self.ahars.acceleration
        ex[:, 16] = self.ahars.height_m
        ex[:, 17:19] = self.gps.velocity_ned[:, 0:2]
        ex[:, 19] = self.ahars.vertical_speed_mps
        ex[~self.fleet.valid] = np.nan

    # --- accessors ----------------------------------------------------------------------------------
    @property
    def time(self) -> float:
        """Simulated time since the last reset [s]."""
        return self.tick * self.dt_s

    @property
    def valid(self) -> NDArray[np.bool_]:
        """Per-vehicle validity (N,)."""
        return self.fleet.valid

    def true_state(self) -> Array:
        """True states X (N, 13): NED position, ZYX Euler angles, body velocity, body rates, thrust."""
        return self.fleet.state

    def estimated_state(self) -> Array:
        """Estimated states eX (N, 20) (spec 2.1); NaN rows for invalid vehicles."""
        return self._ex.copy()

    def reward(self) -> float:
        """Reward of the last task step (0 before the first)."""
        return self.last_reward

    def camera_observations(self) -> list[CameraObservation | None]:
        """The latest camera observation of every vehicle (search and rescue), None before the first."""
        return list(self.camera.observations) if self.camera is not None else [None] * self.num_vehicles

    def plume_readings(self) -> Array:
        """The latest plume-sensor reading of every vehicle (N,); NaN when there is no plume sensor."""
        if self.plume_sensor is None:
            return np.full(self.num_vehicles, np.nan)
        return self.plume_sensor.concentration.copy()

    def submit_plume_estimates(self, estimates: ArrayLike) -> float:
        """Plume tasks: the reward of estimates (K, M) at ``plume_locations`` (0 is perfect)."""
        if not isinstance(self.task, PlumeTask):
            raise RuntimeError("only plume tasks take concentration estimates")
        self.plume_reward = self.task.evaluate(np.asarray(estimates, float))
        return self.plume_reward

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
assembled; the radio (``comms``, docs/COMMS.md) steps last, on the tick's true positions. Components gate
themselves on integer tick counters (no floating-point modulo).
The scenario's faults (``faults:``, docs/FAULTS.md) step first in each tick, right after time advances
(``core.engine.faults.FaultEffects``): a fault that starts at tick k acts on that tick's controls,
dynamics and readings; ``reset`` runs their start-up step (a failed self test: invalid from t = 0).

A new Simulator is at the start of its first episode, built from ``scenario.seed``: the same as
``reset(seed=scenario.seed)``, so ``Simulator(scenario with seed s)`` and ``reset(seed=s)`` fly the same
episode. ``reset()`` (seed None: no reseeding, not a seed value) continues every random stream;
``reset(seed=s)`` rebuilds all streams from ``s``: two runs with the same seed and actions are
bit-identical. Seed 0 means "from the clock" (as QRSim). The front ends' seed values (-1: the scenario
file's, 0: the clock, drawn once) are resolved before the core with
``qrsim_ros.core.config.scenario.resolve_seed``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.jit import F8_2D_IN, njit
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.comms import Inboxes, Packet
from qrsim_ros.core.comms.radio import Radio
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import CONTROL_MODES, Scenario, load_scenario
from qrsim_ros.core.engine.builders import (
    build_ahars,
    build_camera,
    build_comms,
    build_fleet,
    build_gps,
    build_mean_wind,
    build_plume_sensor,
    build_registered_sensor,
    build_turbulence,
    step_registered_sensor,
)
from qrsim_ros.core.engine.faults import FaultEffects, FaultLogEntry, FaultModels
from qrsim_ros.core.engine.memory import check_memory
from qrsim_ros.core.engine.plant import Plant, PlantInputs
from qrsim_ros.core.engine.world import ScenarioWorld
from qrsim_ros.core.faults import ActiveFault, FaultEvents
from qrsim_ros.core.onboard.autopilot import OnboardAutopilot
from qrsim_ros.core.onboard.flight import onboard_controls, onboard_targets
from qrsim_ros.core.onboard.link import OnboardLink
from qrsim_ros.core.sensors.camera import CameraObservation
from qrsim_ros.core.sensors.registry import SensorModel
from qrsim_ros.core.tasks.episode import Episode
from qrsim_ros.core.tasks.rules import PLACEMENT_STREAM, Task, initial_placement
from qrsim_ros.core.vehicles.emergency_land import emergency_failsafe
from qrsim_ros.core.vehicles.energy import FleetEnergy
from qrsim_ros.core.vehicles.estimated_state import assemble_estimated_state, empty_estimated_state
from qrsim_ros.core.vehicles.fleet_control import (
    LOW_LEVEL_MODES,
    TARGET_WIDTH,
    FleetControl,
    any_true,
    hold_given,
)
from qrsim_ros.core.vehicles.pelican import (
    CONTROL_LIMITS,
    STATE_POSITION_NED,
    PelicanInputError,
)
from qrsim_ros.core.vehicles.rotor_control import low_level_bounds
from qrsim_ros.core.world.area import BoxArea

Array = NDArray[np.float64]


def _as_slice(index: NDArray[np.int_]) -> slice | NDArray[np.int_]:
    """``index`` as the slice it equals when it is one ascending run (i, i+1, ...), else itself."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return index


@njit(f"int64({F8_2D_IN}, Array(boolean, 1, 'A', readonly=True))", writable_twins=True)
def _first_non_finite_row(block, check):
    """The first row of ``block`` (M, W) with ``check`` true that has a non-finite value without being all
    NaN (all NaN: no new set point), or -1."""
    for i in range(block.shape[0]):
        if not check[i]:
            continue
        finite = True
        silent = True
        for j in range(block.shape[1]):
            v = block[i, j]
            if not np.isfinite(v):
                finite = False
            if not np.isnan(v):
                silent = False
        if not finite and not silent:
            return i
    return -1


class ActionError(ValueError):
    """The actions given to ``Simulator.step`` are malformed or out of range."""


class Simulator:
    """A scenario's models stepped together in one process (see the module docstring)."""

    dt_s = BASE_DT_S

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.num_vehicles = scenario.num_vehicles
        try:  # before any scenario-sized allocation
            check_memory(scenario)
        except ConfigError as exc:
            raise ScenarioError(f"{scenario.source}: {exc}") from None
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
        self.streams = streams
        self.seed_entropy = streams.entropy
        # environment (shared): GPS space segment, wind, then the area and plume of every episode
        self.gps_space, self.gps = build_gps(sc, streams)
        self.wind = build_mean_wind(sc, streams)
        self.world = ScenarioWorld(sc, streams, wind=self.wind)
        # vehicles and their sensors
        self.fleet = build_fleet(sc, streams)
        self.turbulence = build_turbulence(sc, streams)
        self.ahars = build_ahars(sc, streams)
        self.camera = build_camera(sc, streams)
        self.plume_sensor = build_plume_sensor(sc, streams)
        #: the vehicles' radio (``comms``, docs/COMMS.md; None: off) and what each vehicle received
        self.comms = build_comms(sc, streams, self.world.scene)
        self._inboxes = Inboxes(n)
        #: registered sensor models the scenario lists (``vehicle.sensors``), by name
        self.sensors = {name: build_registered_sensor(sc, name, streams, self.world.scene)
                        for name in sc.vehicle.sensors}
        # the task's episode and the vehicles' control modes
        self.episode = Episode(sc, self.world.area)
        v = sc.vehicle
        #: every vehicle's battery (``vehicle.battery``; off: QRSim's open loop)
        self.battery = FleetEnergy(n, v.battery, sc.bases)
        self.fleet_control = FleetControl(sc.control_modes(), sc.task.flight_z_ned_m, v.command_timeout_s,
                                          v.failsafe, v.failsafe_land_rate_m_s, v.battery, sc.bases)
        self.control_modes = list(self.fleet_control.modes)
        # the limits an action row of a directly flown mode is checked against (attitude, rotor-level)
        self._direct_bounds = {"attitude": (CONTROL_LIMITS[:, 0], CONTROL_LIMITS[:, 1])}
        if any(m in LOW_LEVEL_MODES for m in self.control_modes):
            rotor = v.rotor_params()
            self._direct_bounds.update({m: low_level_bounds(m, rotor) for m in LOW_LEVEL_MODES})
        agent_rows = self._agent_rows = self.task.agent_vehicles  # fixed for the task
        agent_modes = [self.control_modes[i] for i in agent_rows]
        self._action_width = max(len(CONTROL_MODES[m]) for m in agent_modes)
        rows_by_mode = {
            m: np.array([r for r, mm in enumerate(agent_modes) if mm == m], int)
            for m in dict.fromkeys(agent_modes)
        }
        # per mode: its action rows and their vehicles as slices where they are one run (a view, no
        # gather, in the per-step parsing), else index arrays
        self._action_blocks = [
            (m, len(CONTROL_MODES[m]), _as_slice(r), _as_slice(np.asarray(agent_rows)[r]))
            for m, r in rows_by_mode.items()
        ]
        #: every agent vehicle's onboard autopilot (``mavlink.on``; docs/MAVLINK.md), its vehicles (the
        #: agent's rows) and what talks to it (``onboard_link``, a front end's; None: no link)
        self.onboard: OnboardAutopilot | None = None
        self.onboard_vehicles = np.asarray(agent_rows, int)
        if sc.mavlink.on:  # kept by a reseeding reset: its parameters and missions are the vehicles'
            self.onboard = getattr(self, "_onboard_kept", None) or OnboardAutopilot(
                len(agent_rows), self.dt_s, sc.mavlink.parameter_table(len(agent_rows)))
            self._onboard_kept = self.onboard
        self.onboard_link: OnboardLink | None = getattr(self, "onboard_link", None)
        self._task_rng = streams.get(PLACEMENT_STREAM)
        self._ex = empty_estimated_state(n)
        # still air (no mean wind, no turbulence): every tick's air velocity is zero, made once (read-only)
        self._still_air = np.zeros((n, 3)) if self.scenario.still_air else None
        if self._still_air is not None:
            self._still_air.flags.writeable = False
        self._held = np.full((n, TARGET_WIDTH), np.nan)  # every vehicle's latest set point (NaN: none)
        self._issued_s = np.full(n, np.nan)  # when it was issued [s] (the time of the tick's state)
        # the scenario's faults on the models built above (a battery if another component built one)
        self.faults = FaultEffects(sc.faults, n, streams, FaultModels(
            fleet=self.fleet, gps=self.gps, ahars=self.ahars, battery=getattr(self, "battery", None)),
            ticks_per_task_step=self.ticks_per_task_step, dt_s=self.dt_s,
            rotor_loss_failsafe=sc.vehicle.rotor_loss_failsafe)
        #: the vehicles' physics, stepped once per tick (``core.engine.plant``)
        self.plant = Plant(self.fleet, self.battery, self.faults, self.world.scene, self.dt_s)
        self._targets = self._held  # the set points of the step being flown (``_plant_inputs``)

    # --- episode control --------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Start a new episode. ``seed`` None: continue every random stream (the next episode of the
        same streams); an integer >= 0: rebuild every random stream from it (0 = from the clock)."""
        if seed is not None:
            self.scenario = replace(self.scenario, seed=int(seed))
            self._build(RandomStreams(int(seed)))
        sc = self.scenario
        self.tick = 0
        # environment in creation order: GPS space segment, wind, area and plume (spec 1.3)
        self.gps_space.reset(0)
        self.wind.reset()
        self.world.new_episode()
        self.episode.set_plume_reference(self.world.plume_reference_samples)
        # vehicles (the task's placement, shared with the vehicle_dynamics node)
        x0, self._headings = initial_placement(self.task, self._task_rng)
        bases = self.task.charging_bases()
        if bases is not None:  # a task that places its landing site per episode (retrieve)
            self.battery.set_bases(bases)
        try:
            self.fleet.set_state(x0)
        except PelicanInputError as exc:
            where = "vehicle.initial_states" if sc.vehicle.initial_states is not None else "initial state"
            raise ScenarioError(f"{sc.source}: {where}: {exc}") from None
        self.faults.begin_episode()  # the start-up step: a failed self test disarms before anything moves
        x = self.fleet.state
        self.turbulence.reset(x)
        self.ahars.reset(x)
        self.gps.reset(x)
        if self.camera is not None:
            self.camera.reset(x)
        if self.plume_sensor is not None:
            self.plume_sensor.reset(x, concentration=self.plume.concentration, t_s=0.0)
        for model in self.sensors.values():
            model.reset(x)
        self.fleet_control.reset()
        self.battery.reset()
        if self.comms is not None:
            self.comms.reset()
        self._inboxes.clear()
        self._held[:] = np.nan
        self._issued_s[:] = np.nan
        self._assemble_estimated_state()
        if self.onboard is not None:  # a vehicle placed in the air starts armed, holding where it is
            rows = self.onboard_vehicles
            self.onboard.reset(in_air=~self.fleet.on_ground(x)[rows])
            self.onboard.observe(0.0, self._ex[rows], self.fleet.valid[rows])
        self.episode.begin(x, self.fleet.valid)

    # --- stepping ---------------------------------------------------------------------------------
    @property
    def action_spec(self) -> dict[str, Any]:
        """Rows (agent-controlled vehicles), their control modes and the action columns of each."""
        rows = self._agent_rows
        modes = [self.control_modes[i] for i in rows]
        width = max(len(CONTROL_MODES[m]) for m in modes)
        return {"vehicles": rows.tolist(), "modes": modes, "width": width,
                "columns": {m: CONTROL_MODES[m] for m in dict.fromkeys(modes)}}

    @property
    def action_rows(self) -> int:
        """How many rows an action has (``action_spec``'s vehicles)."""
        return len(self._agent_rows)

    def step(self, actions: ArrayLike) -> float:
        """Advance one task step with ``actions`` held; returns the step's reward.

        ``actions`` has one row per agent-controlled vehicle (``action_spec``); each row's first
        columns are its mode's inputs (attitude: pitch, roll [rad], throttle [0..1], yaw rate [rad/s],
        battery [V]; velocity: NED m/s; velocity_height: north/east m/s; waypoint: NED m + heading
        rad); extra columns are ignored. Rows of invalid vehicles are ignored.

        A row of NaN means "no new set point this step" (an autopilot that fell silent): the vehicle
        keeps its last set point, which expires ``vehicle.command_timeout_s`` after the last tick it
        was given for; then the vehicle flies ``vehicle.failsafe`` (``failsafe``) until a row comes
        again. A set point given in a step counts as issued at every tick of that step.
        """
        if self.done:
            raise RuntimeError("the episode is over (done); call reset()")
        targets = self._parse_actions(actions)
        for _ in range(self.ticks_per_task_step):
            self._tick(targets)
        return self.episode.end_step()

    def _parse_actions(self, actions: ArrayLike) -> Array:
        rows = self._agent_rows
        spec_width = self._action_width
        try:
            a = np.atleast_2d(np.asarray(actions, dtype=float))
        except (TypeError, ValueError):
            raise ActionError(f"actions must be numeric with {len(rows)} rows") from None
        if a.ndim != 2 or a.shape[0] != len(rows) or a.shape[1] < spec_width:
            raise ActionError(f"actions must have shape ({len(rows)}, {spec_width}) "
                              f"(one row per agent-controlled vehicle), got {a.shape}")
        full = np.full((self.num_vehicles, TARGET_WIDTH), np.nan)
        live = self.fleet.valid[rows]
        for mode, width, action_rows, vehicle_rows in self._action_blocks:
            block = a[action_rows, :width]
            check = live[action_rows]
            bad = _first_non_finite_row(block, check)  # of a live vehicle; all NaN: no new set point
            if bad >= 0:
                r = int(np.arange(len(rows))[action_rows][bad])
                raise ActionError(
                    f"action row {r} (vehicle {rows[r]}) is not finite: {a[r, :width].tolist()}")
            if mode in self._direct_bounds:  # flown as given: checked against the input's limits
                silent = np.all(np.isnan(block), axis=1)  # no new set point (see ``step``)
                lo, hi = self._direct_bounds[mode]
                out = check[:, None] & ~silent[:, None] & ((block < lo) | (block > hi))
                if out.any():
                    rr, j = np.argwhere(out)[0]
                    r = int(np.arange(len(rows))[action_rows][rr])
                    raise ActionError(f"action row {r} (vehicle {rows[r]}): {CONTROL_MODES[mode][j]}="
                                      f"{float(block[rr, j])!r} outside [{lo[j]}, {hi[j]}]")
            full[vehicle_rows, :width] = block
        return full

    def _tick(self, targets: Array) -> None:
        self.tick = k = self.tick + 1
        faults = self.faults
        self._targets = targets
        x, valid, accel_body = self.plant.tick(k, self._plant_inputs)
        plume = self.world.plume
        x, valid = x.copy(), valid.copy()  # the episode keeps them (``observe``)
        self.episode.observe(x, valid)
        self.ahars.step(k, x, accel_body)
        self.gps.step(k, x)
        persons = self.world.persons_area
        if self.camera is not None and persons is not None:
            self.camera.step(k, x, faults.sensor_valid("camera_classifier", valid),
                             persons.persons_position_ned, persons.terrain_class_at)
        if self.plume_sensor is not None and plume is not None:
            self.plume_sensor.step(k, x, plume.concentration, t_s=k * self.dt_s)
        for name, model in self.sensors.items():
            step_registered_sensor(name, model, k, x, faults.sensor_valid(name, valid), self.fleet.accel_body)
        self._assemble_estimated_state(valid)
        if self.comms is not None:  # on the moved true positions; a comm_loss fault silences a vehicle
            position_ned = x[:, STATE_POSITION_NED]
            self._inboxes.put(self.comms.step(k, k * self.dt_s, position_ned, valid, faults.links_lost))
        self.episode.on_tick(self.plant.inputs.controls)
        if self.onboard_link is not None:
            self.onboard_link.send(k * self.dt_s, self._ex[self.onboard_vehicles])

    def _plant_inputs(self, events: FaultEvents) -> PlantInputs:
        """The tick's inputs to the plant, once its faults are known (``Plant.tick``): the environment
        steps to the tick on the states it starts from, then the controls of every vehicle's mode (from
        the step's set points) and the air velocity it flies in."""
        k = self.tick
        if events.started:
            self.episode.task.on_fault_started(events.started)
        fleet = self.fleet
        x, valid, _ = fleet.views()  # until the fleet moves (no copies: the readers below keep none)
        self.gps_space.step(k)
        self.area.step(k, x, valid)
        plume = self.world.plume
        if plume is not None:
            plume.step(k)
        controls = self._controls(self._targets, valid)
        landed = self.fleet_control.landed
        if any_true(landed) and (landed & valid).any():  # failsafe land touched down: motors off for good
            fleet.disarm(np.flatnonzero(landed & valid))
            valid = fleet.views()[1]
        self.turbulence.step(k, x, active=valid)
        if self._still_air is not None:
            wind_body = self._still_air
        else:
            wind_body = self.wind.velocity_body(x) + self.turbulence.velocity_body
        rates_thrust, motors = self.fleet_control.low_level_inputs(self._held, valid)  # rotor-level modes
        return PlantInputs(controls, wind_body, rates_thrust, motors)

    def _controls(self, targets: Array, valid: NDArray[np.bool_]) -> Array:
        """Controls (N, 5) for this tick: the task's own vehicles (the mouse) get the task's actions, then
        every vehicle goes through its mode (``FleetControl``) with its latest set point, issued at the
        time of the state the controls start from (t_(k-1), as the graph's flight_controller stamps);
        ``valid``: the fleet's validity now."""
        for i, a in self.task.environment_actions(self._ex).items():
            targets[i, : a.size] = a
        targets = self.faults.drop_commands(targets)  # comm_loss when issued: no new set point arrives
        now_s = (self.tick - 1) * self.dt_s
        onboard = None
        if self.onboard is not None:  # the autopilots' set points in place of the agent's
            onboard = onboard_targets(self.onboard, self.onboard_link, self.onboard_vehicles, now_s, self._ex,
                                      valid, targets, self._headings)
        hold_given(targets, now_s, self._held, self._issued_s)
        if self.battery.low:
            b = self.battery
            self.fleet_control.update_battery(b.percentage, b.drain_per_s, self._ex, valid)
        controls = self.fleet_control.controls(self._held, self._ex, valid, self._headings, now_s,
                                               self._issued_s)
        if onboard is not None:
            onboard_controls(onboard, self.onboard_vehicles, controls)
        return controls

    def _assemble_estimated_state(self, valid: NDArray[np.bool_] | None = None) -> None:
        """eX (spec 2.1) from the sensors' latest values; NaN rows for invalid vehicles (``valid``: the
        fleet's validity now, when the caller has it)."""
        euler, rates, accel, height, vertical_speed = self.ahars.outputs_view()
        gps = self.gps
        assemble_estimated_state(self._ex, self.fleet.valid if valid is None else valid, gps.position_ned,
                                 euler, rates, accel, height, gps.velocity_ned, vertical_speed)

    # --- accessors ----------------------------------------------------------------------------------
    @property
    def time(self) -> float:
        """Simulated time since the last reset [s]."""
        return self.tick * self.dt_s

    @property
    def valid(self) -> NDArray[np.bool_]:
        """Per-vehicle validity (N,)."""
        return self.fleet.valid

    @property
    def failsafe(self) -> list[str]:
        """Per vehicle: the failsafe its last tick flew ('' = its set point; 'hold', 'land', 'level', and
        for a low battery 'return', 'battery_land'; 'emergency_land' after a rotor loss with
        ``vehicle.rotor_loss_failsafe: emergency_land``, also once landed)."""
        return emergency_failsafe(self.fleet_control.failsafe, self.fleet)

    def true_state(self) -> Array:
        """True states X (N, 13): NED position, ZYX Euler angles, body velocity, body rates, thrust."""
        return self.fleet.state

    def estimated_state(self) -> Array:
        """Estimated states eX (N, 20) (spec 2.1); NaN rows for invalid vehicles."""
        return self._ex.copy()

    def reward(self) -> float:
        """Reward of the last task step (0 before the first)."""
        return self.episode.last_reward

    # the episode's state (``Episode``) and the world's (``ScenarioWorld``), read-only
    task: Task = property(lambda self: self.episode.task)  # type: ignore[assignment]
    ticks_per_task_step: int = property(  # type: ignore[assignment]
        lambda self: self.episode.ticks_per_task_step)
    step_count: int = property(lambda self: self.episode.step_count)  # type: ignore[assignment]
    last_reward: float = property(lambda self: self.episode.last_reward)  # type: ignore[assignment]
    total_reward: float = property(lambda self: self.episode.total_reward)  # type: ignore[assignment]
    done: bool = property(lambda self: self.episode.done)  # type: ignore[assignment]
    done_reason: str = property(lambda self: self.episode.done_reason)  # type: ignore[assignment]
    plume_reward: float | None = property(lambda self: self.episode.plume_reward)  # type: ignore[assignment]
    area: BoxArea = property(lambda self: self.world.area)  # type: ignore[assignment]
    plume = property(lambda self: self.world.plume)
    plume_locations: Array = property(lambda self: self.world.plume_locations_ned)  # type: ignore[assignment]
    plume_reference_samples: Array = property(  # type: ignore[assignment]
        lambda self: self.world.plume_reference_samples)

    # --- faults (docs/FAULTS.md) ------------------------------------------------------------------------
    def inject_fault(self, fault: Mapping[str, Any]) -> str:
        """Add a fault at run time (a ``faults:`` item; without a trigger it starts at the next tick);
        returns its id. It is dropped at the next ``reset``."""
        return self.faults.inject(fault, self.time)

    def clear_fault(self, fault_id: str | None = None, *, kind: str | None = None,
                    vehicle: int | None = None) -> list[ActiveFault]:
        """End the active faults of id ``fault_id`` (or of ``kind``; only on ``vehicle`` if given) at the
        next tick; returns the activations that will end."""
        return self.faults.clear(fault_id, kind=kind, vehicle=vehicle)

    @property
    def active_faults(self) -> list[ActiveFault]:
        """Every fault active now, by fault then vehicle."""
        return self.faults.active

    def fault_log(self, since_tick: int = 0) -> list[FaultLogEntry]:
        """The episode's fault starts and ends (tick, event, fault, note) at ticks >= ``since_tick``: the
        latest ``fault_log_entries`` (limits table) of them; ``fault_log_folded`` counts the older ones."""
        return [e for e in self.faults.log if e.tick >= since_tick]

    @property
    def fault_log_folded(self) -> int:
        """How many of the episode's oldest fault starts and ends the log let go (``fault_log``)."""
        return self.faults.log_folded

    def camera_observations(self) -> list[CameraObservation | None]:
        """The latest camera observation of every vehicle (search and rescue), None before the first."""
        return list(self.camera.observations) if self.camera is not None else [None] * self.num_vehicles

    def sensor(self, name: str) -> SensorModel:
        """The registered sensor model ``name`` (``vehicle.sensors.<name>`` of the scenario)."""
        if name not in self.sensors:
            raise KeyError(f"scenario {self.scenario.name!r} has no sensor {name!r} "
                           f"(vehicle.sensors lists: {', '.join(self.sensors) or 'none'})")
        return self.sensors[name]

    # --- the radio (docs/COMMS.md) ------------------------------------------------------------------------
    def send(self, vehicle: int, destination: int, payload: bytes, mode: str | None = None) -> int:
        """Vehicle ``vehicle`` sends ``payload`` to ``destination`` (a vehicle index or
        ``core.comms.BROADCAST``) now; ``mode``: ``datagram``, ``reliable`` or None (``comms.mode``).
        Returns the sender's sequence number; the packet is decided at the ticks that follow
        (``Radio.send``). RuntimeError when the scenario's radio is off (``comms.on``)."""
        return self._radio().send(vehicle, destination, payload, mode)

    def receive(self, vehicle: int) -> list[Packet]:
        """The packets ``vehicle`` received since its last ``receive`` (its inbox is emptied), in delivery
        order. RuntimeError when the scenario's radio is off."""
        self._radio()
        return self._inboxes.drain(vehicle)

    def _radio(self) -> Radio:
        if self.comms is None:
            raise RuntimeError(f"scenario {self.scenario.name!r} has no radio: set comms.on: true")
        return self.comms

    def plume_readings(self) -> Array:
        """The latest plume-sensor reading of every vehicle (N,); NaN when there is no plume sensor."""
        if self.plume_sensor is None:
            return np.full(self.num_vehicles, np.nan)
        return self.plume_sensor.concentration.copy()

    def submit_plume_estimates(self, estimates: ArrayLike) -> float:
        """Plume tasks: the reward of estimates (K, M) at ``plume_locations`` (0 is perfect)."""
        return self.episode.evaluate_plume(estimates)

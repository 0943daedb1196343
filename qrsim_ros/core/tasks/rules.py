"""Task rules: initial placement, the agent's action space, rewards and termination (spec section 5).

A task object is owned by the ``Simulator``; it reads the simulator's state (true and estimated
states, the area, the plume) and never steps anything itself. Rewards are per task step, so the sum
over an episode equals QRSim's ``reward()`` at the end of it (the generic tasks' running control cost
is accumulated per 20 ms tick and their terminal distance term is added on the last step).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.config.scenario import base_grid_ne
from qrsim_ros.core.tasks.kl import plume_kl_reward, plume_mse_reward
from qrsim_ros.core.vehicles.estimated_state import NORTH_EAST
from qrsim_ros.core.vehicles.pelican import (
    STATE_DOWN,
    STATE_EAST,
    STATE_HEADING,
    STATE_NORTH,
    STATE_NORTH_EAST,
    STATE_POSITION_NED,
    STATE_VELOCITY_FRD,
)

if TYPE_CHECKING:
    from qrsim_ros.core.config.scenario import Scenario
    from qrsim_ros.core.faults.schedule import ActiveFault
    from qrsim_ros.core.vehicles.energy import ChargingBase
    from qrsim_ros.core.world.area import BoxArea

Array = NDArray[np.float64]

PENALTY = 1000.0  #: reward -PENALTY whenever any vehicle is invalid (spec 5.1)
CONTROL_COST_WEIGHTS = np.array([2 / np.pi, 2 / np.pi, 0.5, 1.0])  #: R of the generic tasks (spec 5.2)
CONTROL_COST_OFFSET = np.array([0.0, 0.0, 0.59, 0.0])  #: QRSim's u offset of the control cost (spec 5.2)
MAX_MOUSE_SPEED_MPS = 3.0  #: VelocityHeightPID's maxv; the mouse flies at mouse_speed_factor x this

DONE_TIME_LIMIT = "time_limit"
DONE_INVALID_VEHICLE = "invalid_vehicle"
DONE_ALL_PERSONS_FOUND = "all_persons_found"
#: Name of the random stream the task placement draws from (one stream, continued across episodes).
PLACEMENT_STREAM = "task.placement"


#: Vehicles scattered at random start at least this many collision distances apart (QRSim's uniform draw
#: could place two closer than the collision distance: both invalid at the first tick).
START_SEPARATION_COLLISION_DISTANCES = 2.0
_PLACEMENT_TRIES = 100


def scattered_start_states(scenario: Scenario, z_ned_m: float, rng: np.random.Generator) -> Array:
    """Initial states (N, 6) scattered uniformly over the middle 90 % of the area's north and east extent
    at NED height ``z_ned_m`` (spec 5.3, 5.4); a vehicle drawn closer than
    ``START_SEPARATION_COLLISION_DISTANCES`` x ``vehicle.collision_distance_m`` to one placed before it is
    drawn again from the same stream (draws that need no redraw are QRSim's, number for number)."""
    n = scenario.num_vehicles
    lim = np.asarray(scenario.area_limits_ned)
    centre = 0.5 * (lim[[0, 2]] + lim[[1, 3]])
    extent = 0.9 * (lim[[1, 3]] - lim[[0, 2]])
    x = np.zeros((n, 6))
    for axis, column in enumerate((STATE_NORTH, STATE_EAST)):
        x[:, column] = centre[axis] + (rng.random(n) - 0.5) * extent[axis]
    x[:, STATE_DOWN] = z_ned_m
    separation_m = START_SEPARATION_COLLISION_DISTANCES * scenario.vehicle.collision_distance_m
    for i in range(1, n):
        tries = 0
        while np.any(np.hypot(*(x[:i, STATE_NORTH_EAST] - x[i, STATE_NORTH_EAST]).T) < separation_m):
            if tries == _PLACEMENT_TRIES:
                raise ValueError(f"could not place vehicle {i + 1} of {n} at least {separation_m:g} m "
                                 f"from the others in {_PLACEMENT_TRIES} tries: area_limits_ned too small "
                                 "for num_vehicles")
            x[i, STATE_NORTH_EAST] = centre + (rng.random(2) - 0.5) * extent
            tries += 1
    return x


class TaskWorld(Protocol):
    """What a task reads of the world it scores: the ``Simulator`` in process, a ``TaskContext`` kept up to
    date from the ground truth in the ROS referee and flight controller."""

    scenario: Scenario
    num_vehicles: int
    dt_s: float
    step_count: int
    plume_reference_samples: Array

    @property
    def area(self) -> BoxArea | None: ...

    @property
    def valid(self) -> NDArray[np.bool_]: ...

    def true_state(self) -> Array: ...


class Task:
    """Base task: no reward, the scenario's initial states, time-limit termination."""

    def __init__(self, sim: TaskWorld) -> None:
        self.sim = sim
        self.params = sim.scenario.task
        self.num_vehicles = sim.num_vehicles

    # --- placement ------------------------------------------------------------------------------
    def initial_states(self, rng: np.random.Generator) -> Array:
        """Initial states (N, 6|12|13) of every vehicle at reset (QRSim ``task.reset``)."""
        x = np.zeros((self.num_vehicles, 6))
        x[:, STATE_DOWN] = self.params.start_z_ned_m
        return x

    def initial_headings(self) -> Array:
        """Heading each vehicle's velocity controller holds [rad]."""
        return np.zeros(self.num_vehicles)

    def charging_bases(self) -> tuple[ChargingBase, ...] | None:
        """This episode's charging bases, after ``initial_states``; None: the scenario's ``bases``."""
        return None

    # --- actions --------------------------------------------------------------------------------
    @property
    def agent_vehicles(self) -> NDArray[np.int_]:
        """Indices of the vehicles the agent commands (one action row each)."""
        return np.arange(self.num_vehicles)

    def environment_actions(self, ex: Array) -> dict[int, Array]:
        """Actions of vehicles the task itself flies (the mouse), by vehicle index."""
        return {}

    # --- reward ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Per-episode state, after the vehicles were placed and the environment reset."""

    def on_tick(self, controls: Array) -> None:
        """Called every 20 ms with the controls applied (for running costs)."""

    def on_fault_started(self, faults: tuple[ActiveFault, ...]) -> None:
        """Faults that started at this tick (a task whose world they change: the retrieve grasper)."""

    def step_reward(self, last_step: bool) -> float:
        """Reward of the task step just completed."""
        return -PENALTY if not self.sim.valid.all() else 0.0

    def done_reason(self) -> str:
        """Why the episode is over after this step, or '' if it goes on."""
        if self.params.stop_on_invalid and not self.sim.valid.all():
            return DONE_INVALID_VEHICLE
        if self.sim.step_count >= self.params.duration_steps:
            return DONE_TIME_LIMIT
        return ""


class GenericTask(Task):
    """keep_spot, keep_spot_x10, goto_waypoint, keep_velocity (spec 5.2).

    Reward: QRSim's running control cost ``-sum((R (U[:4] - u0))^2) DT`` per 20 ms tick (when
    ``control_cost``), keep_velocity's ``-|v_ned - v_target|^2 DT`` per tick, and on the last step the
    terminal ``-|p - target|^2`` (goto_waypoint: the waypoint; keep_spot(_x10): each vehicle's start;
    summed over vehicles: QRSim's keep_spot_x10 column-minus-row bug is fixed).
    """

    def __init__(self, sim: TaskWorld) -> None:
        super().__init__(sim)
        self._accumulated = 0.0
        self._start_positions = np.zeros((self.num_vehicles, 3))

    def initial_states(self, rng: np.random.Generator) -> Array:
        x = super().initial_states(rng)
        if self.params.type == "keep_spot_x10":
            x[:, STATE_NORTH] = -100.0 + 20.0 * np.arange(1, self.num_vehicles + 1)
        return x

    def reset(self) -> None:
        self._accumulated = 0.0
        self._start_positions = self.sim.true_state()[:, STATE_POSITION_NED].copy()

    def on_tick(self, controls: Array) -> None:
        dt = self.sim.dt_s
        valid = self.sim.valid
        if self.params.control_cost:
            u = (controls[valid, 0:4] - CONTROL_COST_OFFSET) * CONTROL_COST_WEIGHTS
            self._accumulated -= float(np.sum(u * u)) * dt
        if self.params.type == "keep_velocity":
            x = self.sim.true_state()[valid]
            v_ned = body_to_ned(dcm_from_state(x), x[:, STATE_VELOCITY_FRD])
            e = v_ned - np.asarray(self.params.target_velocity_ned)
            self._accumulated -= float(np.sum(e * e)) * dt

    def step_reward(self, last_step: bool) -> float:
        if not self.sim.valid.all():
            self._accumulated = 0.0
            return -PENALTY
        r, self._accumulated = self._accumulated, 0.0
        if last_step and self.params.type != "keep_velocity":
            p = self.sim.true_state()[:, STATE_POSITION_NED]
            target = (np.asarray(self.params.waypoint_ned)[None, :] if self.params.type == "goto_waypoint"
                      else self._start_positions)
            r -= float(np.sum((p - target) ** 2))
        return r


class CatsMouseTask(Task):
    """Cats and mouse (spec 5.5): the last vehicle is the mouse, flown by the task's escape rule.

    Reward per step: ``-sum_i d_2D(cat_i, mouse)^2`` over all cats, as QRSim's documentation states
    (the original sums only cat 1 and uses a clipped 3-D distance: spec 10.1).
    """

    def __init__(self, sim: TaskWorld) -> None:
        super().__init__(sim)
        if self.num_vehicles < 2:
            raise ValueError("cats_mouse needs at least one cat and the mouse (num_vehicles >= 2)")

    @property
    def mouse(self) -> int:
        return self.num_vehicles - 1

    @property
    def agent_vehicles(self) -> NDArray[np.int_]:
        return np.arange(self.num_vehicles - 1)

    def initial_states(self, rng: np.random.Generator) -> Array:
        p = self.params
        x = np.zeros((self.num_vehicles, 6))
        z = p.flight_z_ned_m
        x[self.mouse, STATE_DOWN] = z
        lo, hi = p.cat_mouse_distance_range_m
        placed: list[Array] = []
        for i in range(self.num_vehicles - 1):
            for _ in range(100):
                angle = 2 * math.pi * rng.random()
                d = lo + rng.random() * (hi - lo)
                pos = np.array([d * math.cos(angle), d * math.sin(angle), z])
                if all(np.linalg.norm(pos - q) >= p.min_inter_cat_distance_m for q in placed):
                    break
            else:
                raise ValueError(f"could not place cat {i + 1} at least {p.min_inter_cat_distance_m} m from "
                                 "the others in 100 tries (task.min_inter_cat_distance_m too large)")
            placed.append(pos)
            x[i, STATE_POSITION_NED] = pos
        return x

    def environment_actions(self, ex: Array) -> dict[int, Array]:
        """The mouse flees: v = sum_i (m - c_i)/|m - c_i|^2 over cats with a finite estimate."""
        m = ex[self.mouse, NORTH_EAST]
        cats = ex[: self.mouse, NORTH_EAST]
        cats = cats[np.all(np.isfinite(cats), axis=1)]
        v = np.zeros(2)
        if np.all(np.isfinite(m)) and len(cats):
            diff = m - cats
            d2 = np.maximum(np.sum(diff * diff, axis=1), 1e-9)
            v = np.sum(diff / d2[:, None], axis=0)
        norm = float(np.linalg.norm(v))
        speed = self.params.mouse_speed_factor * MAX_MOUSE_SPEED_MPS
        return {self.mouse: v / norm * speed if norm > 0 else np.zeros(2)}

    def step_reward(self, last_step: bool) -> float:
        if not self.sim.valid.all():
            return -PENALTY
        x = self.sim.true_state()
        d = x[: self.mouse, STATE_NORTH_EAST] - x[self.mouse, STATE_NORTH_EAST]
        return -float(np.sum(d * d))


class SearchRescueTask(Task):
    """Search and rescue (spec 5.3): find the persons; one action row (NED velocity) per vehicle.

    Reward per step: -1000 if any vehicle is invalid, else the number of persons found during the
    step, or -1/duration_steps if none; with ``task.stop_on_invalid: false`` (a team search that goes on
    without its lost vehicles) the persons term every step and -1000 once per vehicle, at the step it is
    lost. Initial positions and headings are seeded (QRSim used the
    unseeded global generator: spec 10.3).
    """

    def __init__(self, sim: TaskWorld) -> None:
        super().__init__(sim)
        self._headings = np.zeros(self.num_vehicles)
        self._lost = 0  # vehicles invalid so far this episode (stop_on_invalid: false)

    def initial_states(self, rng: np.random.Generator) -> Array:
        sc = self.sim.scenario
        self._lost = 0  # a new episode: no vehicle lost yet
        if self.params.placement == "base":  # a team at its base (no draws: nothing is random)
            x = np.zeros((self.num_vehicles, 6))
            base = sc.bases[0].position_ned_m
            x[:, STATE_NORTH_EAST] = base_grid_ne(base, self.num_vehicles, self.params.base_spacing_m)
            x[:, STATE_DOWN] = self.params.start_z_ned_m
            self._headings = np.zeros(self.num_vehicles)
            return x
        self._headings = math.pi * rng.random(self.num_vehicles)
        x = scattered_start_states(sc, self.params.start_z_ned_m, rng)
        x[:, STATE_HEADING] = self._headings
        return x

    def initial_headings(self) -> Array:
        return self._headings.copy()

    def step_reward(self, last_step: bool) -> float:
        found = self.sim.area.persons_just_found()
        valid = self.sim.valid
        if self.params.stop_on_invalid and not valid.all():
            return -PENALTY
        n = int(found.any(axis=0).sum())
        reward = float(n) if n > 0 else -1.0 / self.params.duration_steps
        if not self.params.stop_on_invalid:  # a team goes on: the penalty once per vehicle, when it is lost
            lost = int(valid.size - np.count_nonzero(valid))
            reward -= PENALTY * (lost - self._lost)
            self._lost = lost
        return reward

    def done_reason(self) -> str:
        reason = super().done_reason()
        if reason == DONE_INVALID_VEHICLE:
            return reason
        area = self.sim.area
        if self.params.stop_when_all_found and area.num_persons > 0 and bool(area.found.all()):
            return DONE_ALL_PERSONS_FOUND
        return reason


class PlumeTask(Task):
    """Plume mapping (spec 5.4): fly, then submit concentration estimates at the reference locations.

    Step reward: -1000 while any vehicle is invalid, else 0. ``evaluate(estimates)`` gives the task
    reward of a K x M estimate: -sum of squared errors (static plumes) or -KL(reference || estimate)
    (puff plumes); a perfect estimate of a static plume scores 0.
    """

    def initial_states(self, rng: np.random.Generator) -> Array:
        return scattered_start_states(self.sim.scenario, self.params.start_z_ned_m, rng)

    def evaluate(self, estimates: Array) -> float:
        """Task reward of estimates (K, M) at the reference locations."""
        ref = self.sim.plume_reference_samples
        est = np.asarray(estimates, float)
        if est.shape != ref.shape:
            raise ValueError(f"plume estimates must have shape {ref.shape} (K samples x M locations), "
                             f"got {est.shape}")
        if not self.sim.valid.all():
            return -PENALTY
        if self.sim.scenario.plume.type == "gaussian_puff":
            if not np.all(np.isfinite(est)):
                return -PENALTY
            return plume_kl_reward(ref, est)
        return plume_mse_reward(ref, est)


# --- running the rules without a Simulator (the ROS referee and flight controller) -------------------

class TaskContext:
    """The part of a ``Simulator`` a ``Task`` reads, so the task rules run without one (ROS nodes).

    Tasks read ``scenario``, ``num_vehicles``, ``dt_s``, ``valid``, ``true_state()``, ``area``,
    ``step_count`` and ``plume_reference_samples``. The owner keeps ``x_true`` (N, 13) true states
    (NED, ZYX Euler angles, FRD body velocity and rates, thrust), ``valid_flags`` (N,) and
    ``step_count`` up to date as its ground truth arrives and calls the task in the Simulator's order:
    ``initial_placement`` and ``reset()`` at an episode start, ``on_tick(controls)`` after every 20 ms
    tick, ``step_reward`` / ``done_reason`` after every task step.

        ctx = TaskContext(scenario, area)
        task = make_task(ctx)
    """

    dt_s = BASE_DT_S

    def __init__(self, scenario: Scenario, area: BoxArea | None = None) -> None:
        self.scenario = scenario
        self.num_vehicles = scenario.num_vehicles
        self.area = area
        self.step_count = 0
        self.x_true = np.full((self.num_vehicles, 13), np.nan)
        self.valid_flags = np.ones(self.num_vehicles, bool)
        self.plume_reference_samples = np.zeros((0, 0))

    valid = copy_of("valid_flags", "Per-vehicle validity (N,) (a copy, as ``Simulator.valid``).")

    def true_state(self) -> Array:
        """True states X (N, 13)."""
        return self.x_true


def initial_placement(task: Task, rng: np.random.Generator) -> tuple[Array | list[list[float]], Array]:
    """An episode's initial states and held headings exactly as ``Simulator.reset`` derives them.

    ``task.initial_states(rng)`` (one episode's draws from the ``task.placement`` stream; made even when
    the scenario lists ``vehicle.initial_states``, so the stream stays aligned with the Simulator's),
    replaced by the listed states if any. Headings: what the velocity controllers hold,
    ``task.initial_headings()``, or the listed states' yaw [rad].
    """
    x0 = task.initial_states(rng)
    listed = task.sim.scenario.vehicle.initial_states
    if listed is None:
        return x0, task.initial_headings()
    return [list(row) for row in listed], np.array([float(row[STATE_HEADING]) for row in listed])


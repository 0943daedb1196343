"""The search-and-retrieve task (ireland_2016 sections 3, 4.7-4.8, 6): the world the mission flies in and
the referee that scores it.

The task owns what the vehicle does not: the landing site (the charging base), the drop site, the targets
(``core.world.targets``: resting, tethered to the grasper, falling), the grasper's state, and the
self-test draws of the Initialise mode (the system fault, section 4.8.2: probability P_s per visit, from
a generator seeded by one draw of the placement stream per episode). The actuator and grasper faults
come through the scenario's ``faults:`` list (``rotor_loss`` and ``grasper_release`` with probabilistic
triggers); a started ``grasper_release`` reaches the task through ``on_fault_started`` and drops what
the grasper holds.

Per episode, from the ``task.placement`` stream in this order: the landing site (north, east) and heading
unless fixed, the drop site unless fixed, then every target's (north, east) (section 4.8.1: uniform in
x in [-1.9, 1.9], y in [-3.4, 3.4]; the drop site in [-1.5, 1.5] x [-3, 3]).

The autopilot reports its mode and whether its mission is over (``report_mission``; the graph's
``uavN/mission/mode``). The referee ends the episode when the mission is over or the vehicle is lost, and
scores it (``OUTCOMES``):

- ``success``: the mission reported complete, it landed at the base and every target rests in the drop
  zone;
- ``actuator_fault``: an emergency landing after a rotor loss (or the vehicle lost after one);
- ``system_fault``: the self-test failed and the guidance aborts (``guidance.system_fault: abort``);
- ``target_unreachable``: the mission ended with a target left that rests inside the drop zone (placed
  there, or dropped there in transport: the tracking ignores it, section 6.2.1);
- ``target_lost``: a target was grasped, dropped outside the zone and not found again (or the mission
  counted a target the world does not have in the zone);
- ``end_of_search_path``: targets never found by the end of the search path (corners, section 6.2.1);
- ``time_limit``: the mission's T_max or the episode's duration ran out;
- ``crash``: the vehicle was lost without an actuator fault.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.config.retrieve import RetrieveParams
from qrsim_ros.core.mission.modes import (
    MISSION_ACTUATOR_FAULT,
    MISSION_COMPLETE,
    MISSION_ENDS,
    MISSION_SYSTEM_FAULT,
    MISSION_TIME_LIMIT,
)
from qrsim_ros.core.sensors.target_camera import TargetCamera
from qrsim_ros.core.tasks.rules import DONE_TIME_LIMIT, Task, TaskWorld
from qrsim_ros.core.vehicles.energy import ChargingBase
from qrsim_ros.core.vehicles.pelican import (
    STATE_DOWN,
    STATE_HEADING,
    STATE_NORTH_EAST,
    STATE_POSITION_NED,
    STATE_ROLL_PITCH,
)
from qrsim_ros.core.world.targets import RESTING, TETHERED, Targets, grasper_point

if TYPE_CHECKING:
    from qrsim_ros.core.faults.schedule import ActiveFault

Array = NDArray[np.float64]

OUTCOMES = ("success", "actuator_fault", "system_fault", "target_unreachable", "target_lost",
            "end_of_search_path", "time_limit", "crash")


@dataclass
class MissionLog:
    """One vehicle's reported modes: (mode, entered at [s], the fault that caused the entry or '')."""

    entries: list[tuple[str, float, str]] = field(default_factory=list)
    distance_m: dict[str, float] = field(default_factory=dict)

    def segments(self, end_s: float) -> list[tuple[str, float, str]]:
        """(mode, time spent [s], event) in order, the last one closed at ``end_s``."""
        out = []
        for i, (mode, since, event) in enumerate(self.entries):
            until = self.entries[i + 1][1] if i + 1 < len(self.entries) else end_s
            out.append((mode, max(until - since, 0.0), event))
        return out


class RetrieveTask(Task):
    """The retrieve world and referee (module docstring). Vehicle 0 flies the mission; the task places
    every vehicle at the landing site row by row only for vehicle 0 (the paper has one UAV)."""

    def __init__(self, sim: TaskWorld) -> None:
        super().__init__(sim)
        params = sim.scenario.retrieve
        if params is None:
            raise ValueError("a retrieve task needs a 'retrieve' section")
        self.retrieve: RetrieveParams = params
        self.targets = Targets(params.targets, np.zeros((0, 3)))
        self._camera = TargetCamera(params.camera)
        self.landing_site_ne = np.zeros(2)
        self.drop_site_ne = np.zeros(2)
        self.heading_rad = 0.0
        self._self_test_rng = np.random.default_rng(0)  # re-seeded from the placement stream per episode
        self._clear_episode()

    def _clear_episode(self) -> None:
        n = self.num_vehicles
        self.grasper_closed = np.zeros(n, bool)
        self._grasper_command = np.zeros(n, bool)
        self.mode = ["idle"] * n
        self.mission_over = [""] * n
        self.logs = [MissionLog() for _ in range(n)]
        self.faults_seen: dict[str, int] = {"system": 0, "actuator": 0, "grasper": 0}
        self.grasper_drops = 0  # grasper faults that dropped a carried target
        self.ever_grasped = np.zeros(self.targets.count, bool)
        #: released somewhere other than the drop site (a grasper fault in transport, a low-battery return)
        self.dropped_away = np.zeros(self.targets.count, bool)
        self.outcome = ""
        self.end_time_s: float | None = None
        self._last_position = None
        self._pending_event = [""] * n

    # --- placement --------------------------------------------------------------------------------
    def initial_states(self, rng: np.random.Generator) -> Array:
        p = self.retrieve
        box = p.placement_box_ne_m
        site = p.landing_site_ne_m
        if site is None:
            site = (rng.uniform(box[0], box[1]), rng.uniform(box[2], box[3]))
        heading = p.heading_rad if p.heading_rad is not None else rng.uniform(-math.pi, math.pi)
        drop = p.drop_site_ne_m
        if drop is None:
            d = p.drop_box_ne_m
            drop = (rng.uniform(d[0], d[1]), rng.uniform(d[2], d[3]))
        m = p.num_targets
        north = rng.uniform(box[0], box[1], m)
        east = rng.uniform(box[2], box[3], m)
        self.landing_site_ne = np.array(site, float)
        self.drop_site_ne = np.array(drop, float)
        self.heading_rad = float(heading)
        self.targets.reset(np.column_stack([north, east, np.full(m, -p.targets.radius_m)]))
        # the episode's self-test draws: a child of the placement stream (one draw from it per episode)
        self._self_test_rng = np.random.default_rng(int(rng.integers(2**63)))
        x = np.zeros((self.num_vehicles, 6))
        x[:, STATE_NORTH_EAST] = self.landing_site_ne
        x[:, STATE_DOWN] = -p.guidance.quad_radius_m  # resting on the floor (section 4.8.1: z_0 = -R_A)
        x[:, STATE_HEADING] = heading
        return x

    def initial_headings(self) -> Array:
        return np.full(self.num_vehicles, self.heading_rad)

    def charging_bases(self) -> tuple[ChargingBase, ...]:
        """The landing site is the charging base (section 5.1.1: the UAV recharges idle there)."""
        return (ChargingBase((float(self.landing_site_ne[0]), float(self.landing_site_ne[1]), 0.0),
                             self.retrieve.base_radius_m),)

    # --- the episode --------------------------------------------------------------------------------
    def reset(self) -> None:
        self._clear_episode()
        self._last_position = self.sim.true_state()[:, STATE_POSITION_NED].tolist()
        for i in range(self.num_vehicles):
            self.logs[i].entries.append(("idle", 0.0, ""))

    def self_test(self, vehicle: int) -> bool:
        """The Initialise self-diagnosis of ``vehicle``: True = systems okay (one draw per call)."""
        failed = bool(self._self_test_rng.random() < self.retrieve.self_test_failure_probability)
        if failed:
            self.faults_seen["system"] += 1
            self._pending_event[vehicle] = "system"
        return not failed

    def command_grasper(self, vehicle: int, closed: bool) -> None:
        """The autopilot's grasper command; applied at the next tick."""
        self._grasper_command[vehicle] = bool(closed)

    def holding(self, vehicle: int) -> bool:
        """The grasper's report: it holds a target."""
        return self.targets.carried_by(vehicle) is not None

    def report_mission(self, vehicle: int, mode: str, mission_over: str, time_s: float,
                       height_command_z_ned_m: float = math.nan) -> None:
        """The autopilot's mode and end-of-mission report (``uavN/mission/mode``). The mode's height
        command (``height_command_z_ned_m``, NED [m]) is carried for the figures (the graph's bag) and
        not kept here: the task scores the modes and the end, not the set points."""
        if mission_over and mission_over not in MISSION_ENDS:
            raise ValueError(f"unknown mission end {mission_over!r} (one of {', '.join(MISSION_ENDS)})")
        if mode != self.mode[vehicle]:
            self.logs[vehicle].entries.append((mode, float(time_s), self._pending_event[vehicle]))
            self._pending_event[vehicle] = ""
            self.mode[vehicle] = mode
        self.mission_over[vehicle] = mission_over

    def on_fault_started(self, faults: tuple[ActiveFault, ...]) -> None:
        """Faults that started this tick: a grasper fault drops what the grasper holds; the others are
        counted (the mission's fault columns)."""
        for f in faults:
            if f.kind == "grasper_release":
                self.faults_seen["grasper"] += 1
                if self._release(f.vehicle):
                    self.grasper_drops += 1
                    self._pending_event[f.vehicle] = "grasper"
                self.grasper_closed[f.vehicle] = False
                self._grasper_command[f.vehicle] = False
            elif f.kind in ("rotor_loss", "motor_stuck", "rotor_degradation"):
                self.faults_seen["actuator"] += 1
                self._pending_event[f.vehicle] = "actuator"

    def on_tick(self, controls: Array) -> None:
        x = self.sim.true_state()
        closed = self.grasper_closed.tolist()
        for i, (command, live) in enumerate(zip(self._grasper_command.tolist(), self.sim.valid.tolist(),
                                                strict=True)):
            want = command and live
            if want == closed[i]:
                continue
            if want:
                self._try_grasp(i, x)
            else:
                self._release(i)
            self.grasper_closed[i] = want
        self.targets.step(x, self.sim.dt_s)
        position = x[:, STATE_POSITION_NED].tolist()
        if self._last_position is not None:
            # the distance flown, as np.linalg.norm sums it ((dx^2 + dy^2) + dz^2), in Python floats: a few
            # numpy calls per tick cost more than this on a few vehicles
            for i, (p, q) in enumerate(zip(position, self._last_position, strict=True)):
                dx, dy, dz = p[0] - q[0], p[1] - q[1], p[2] - q[2]
                d = self.logs[i].distance_m
                d[self.mode[i]] = d.get(self.mode[i], 0.0) + math.sqrt(dx * dx + dy * dy + dz * dz)
        self._last_position = position

    def _release(self, vehicle: int) -> list[int]:
        released = self.targets.release_all(vehicle)
        if self.mode[vehicle] not in ("drop", "descend_to_drop"):
            self.dropped_away[released] = True
        return released

    def _try_grasp(self, vehicle: int, x: Array) -> None:
        """Close the grasper: it takes the resting target whose top is nearest its point, if within
        ``grasp_tolerance_m`` (section 5.1.7's predicate, checked on the world's truth)."""
        t = self.targets
        if t.count == 0:
            return
        g, _ = grasper_point(x[vehicle:vehicle + 1], t.params.grasper_position_m)
        top = t.position_ned_m - np.array([0.0, 0.0, t.params.radius_m])
        d = np.linalg.norm(top - g[0], axis=1)
        d[t.phase != RESTING] = np.inf
        k = int(np.argmin(d))
        if d[k] <= self.retrieve.grasp_tolerance_m:
            t.tether(k, vehicle, x)
            self.ever_grasped[k] = True
            self.dropped_away[k] = False

    # --- what the vehicle's camera sees -----------------------------------------------------------------
    def camera_centroids_px(self, vehicle: int) -> Array:
        """Image points (K, 2) [x right, y up] of the targets the gimballed downward camera of ``vehicle``
        sees (eq. 12-14; the gimbal holds roll and pitch at 0, section 4.5.3; tethered targets are not
        reported). One point per target: its centre (the colour mask's centroid, eq. 27)."""
        t = self.targets
        if t.count == 0:
            return np.zeros((0, 2))
        x = self.sim.true_state()[vehicle:vehicle + 1].copy()
        x[:, STATE_ROLL_PITCH] = 0.0  # the gimbal
        return self._camera.seen_px(x, t.position_ned_m[t.phase != TETHERED])

    # --- the referee ------------------------------------------------------------------------------------
    def in_drop_zone(self) -> NDArray[np.bool_]:
        """Which targets rest inside the drop zone (Table 3: radius R_ds)."""
        return self.targets.inside(self.drop_site_ne, self.retrieve.drop_radius_m)

    def step_reward(self, last_step: bool) -> float:
        return 0.0

    def done_reason(self) -> str:
        if self.outcome:
            return self.outcome
        t = self.sim.step_count * self.params.dt_s
        valid = self.sim.valid
        over = self.mission_over[0]
        if not valid[0]:
            outcome = "actuator_fault" if self.faults_seen["actuator"] else "crash"
        elif over:
            outcome = self._score(over)
        elif self.sim.step_count >= self.params.duration_steps:
            outcome = DONE_TIME_LIMIT
        else:
            return ""
        self.outcome = outcome
        self.end_time_s = t
        return outcome

    def _score(self, over: str) -> str:
        if over == MISSION_ACTUATOR_FAULT:
            return "actuator_fault"
        if over == MISSION_SYSTEM_FAULT:
            return "system_fault"
        if over == MISSION_TIME_LIMIT:
            return "time_limit"
        placed = self.in_drop_zone()
        if over == MISSION_COMPLETE:
            x = self.sim.true_state()[0]
            off_base_ne = x[STATE_NORTH_EAST] - self.landing_site_ne
            at_base = float(np.hypot(*off_base_ne)) <= self.retrieve.base_radius_m
            if placed.all() and at_base:
                return "success"
            return "target_lost"
        # the search path ended with targets left (section 6.2.1's causes)
        if (placed & (~self.ever_grasped | self.dropped_away)).any():
            return "target_unreachable"  # in the zone but never deposited: the tracking ignores it
        if (~placed & self.dropped_away).any():
            return "target_lost"
        return "end_of_search_path"

    def mission_record(self, end_s: float) -> dict[str, Any]:
        """The episode's mission columns (results.csv): fault flags, targets, mode path."""
        segments = self.logs[0].segments(end_s)
        path = ";".join(f"{m}@{t!r}" + (f"!{e}" if e else "") for m, t, e in segments)
        return {
            "mission_time_s": float(end_s),
            "fault_system": int(self.faults_seen["system"] > 0),
            "fault_actuator": int(self.faults_seen["actuator"] > 0),
            "fault_grasper": int(self.grasper_drops > 0),
            "system_faults": int(self.faults_seen["system"]),
            "targets_total": int(self.targets.count),
            "targets_in_drop_zone": int(self.in_drop_zone().sum()),
            "distance_m": float(sum(self.logs[0].distance_m.values())),
            "mode_path": path,
            "mode_distances": ";".join(f"{m}={d!r}" for m, d in sorted(self.logs[0].distance_m.items())),
        }

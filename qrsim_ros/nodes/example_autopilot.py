"""example_autopilot: a baseline autopilot that flies a scenario through the public topics only.

It reads what a real autopilot could read -- ``uavN/imu/data``, ``uavN/gps/fix``, ``uavN/gps/vel``,
``uavN/altimeter``, ``uavN/camera/detections`` (search and rescue), ``uavN/plume/concentration``
(plume), ``uavN/range/<beam>`` (the scene range finders, for the ``guarded-NAME`` policies), with a
radio (``comms.on``) ``uavN/comms/rx`` and ``uavN/battery`` (the ``team-search`` policy) and
``/referee/status`` -- and writes set points: ``uavN/cmd/velocity`` (velocity modes,
frame ``map``), ``uavN/cmd/pose`` (waypoint mode) or ``uavN/cmd/attitude`` (attitude mode), and the
packets the policy sends on ``uavN/comms/tx`` (stamped with the step's time, published before the
step's set points; docs/TEAMS.md).

The planning is not written here: the node runs the in-process baselines of ``qrsim_ros.policies``
(parameter ``policy``, default ``auto``) on a ``TopicView``, an ``AutopilotView`` look-alike filled
from the topics. With ``auto``, search and rescue flies ``policies.search_pattern.SearchPattern``:
a lawn-mower over the area's central part with lanes spaced by the camera footprint, an evidence map
of the classifier's llkd, and descend-and-hover over high-llkd points until the referee counts the
person found; cats and mouse flies ``Pursuit`` and plume mapping ``RandomSearch``.

Cadence: the policy is asked for new set points whenever the referee publishes a task step
(``/referee/status``), as the in-process runner calls it once per task step; the set points are held
by the flight controller in between. Set points expire (``vehicle.command_timeout_s``, 0.5 s of
simulated time by default, as PX4's offboard mode wants >= 2 Hz), so the latest ones are re-sent every
``SETPOINT_PERIOD_TICKS`` ticks of ``/clock``, stamped with its time: the stream that tells the
simulator the autopilot is alive. When this node dies, the vehicles fly their failsafe.
Pace: after every ``/referee/status`` it handled (answered, or not: the policy still waiting for its
sensors, the episode done) the node reports on ``/sim/tick_progress`` (``TaskStatus.episode`` and a
tick). In lockstep, vehicle_dynamics runs at most ``lockstep_window_ticks`` (W, 25) ahead of the
reported tick (the plan counts the node in ``lockstep_consumers`` and gives it vehicle_dynamics' W).
The set points are held until the next ones arrive, and expire T ticks after their stamp (T:
``vehicle.command_timeout_s`` in ticks, 25), so the clock must not pass a stamp + T before the next
set points (a step's answer or a re-send) are out. After handling a status or re-sending at tick j the
node reports j + T - W, never the next step's tick or later, and at least the next reporting event's
tick - W (the next step, or the next re-send while set points are held), so the clock always reaches it
(``progress_tick``; the next step - 1 when nothing is held, nothing expires or W is 0). With S = 10
ticks per step and T = W = 25 (team_search) the clock waits at k + 25 for the answer to step k + 10,
however slow the policy (50 vehicles); reporting k + 9 let it reach k + 34 and the held set points
expired every step (measured: 632 failsafe onsets in 10 s at 50 vehicles). With QRSim's 1 s search
steps the re-sends every 10 ticks carry the clock: reporting k + 25 after step k let it run past the
re-sends still queued behind the policy's first answer, and the first set points expired at 0.52 s in
every vehicle, at a different tick from run to run.
A new episode (the status' step goes back to 0) rebuilds the
policy; once the status says ``done`` the vehicles are told to stop (zero velocity) and the node
waits for the next episode.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped
from sensor_msgs.msg import BatteryState, Imu, NavSatFix, PointCloud2, Range

from qrsim_ros.core.common.frames import Array, enu_to_ned, euler_ned_frd_to_quaternion_enu_flu, ned_to_enu
from qrsim_ros.core.common.limits import LOCKSTEP_WINDOW_TICKS
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ticks_per_update
from qrsim_ros.core.comms import BROADCAST, MODES, Inboxes, Packet
from qrsim_ros.core.comms.packets import vehicle_index
from qrsim_ros.core.config.scenario import CONTROL_MODES
from qrsim_ros.core.sensors.scene_range_finders import BEAM_AXES, BeamReadings
from qrsim_ros.core.tasks.factory import make_task
from qrsim_ros.core.tasks.rules import TaskContext
from qrsim_ros.core.vehicles.estimated_state import EAST, HEADING, HEIGHT, NORTH, hold_pose
from qrsim_ros.core.vehicles.fleet_control import LOW_LEVEL_MODES
from qrsim_ros.core.vehicles.pelican import HOVER_CONTROL
from qrsim_ros.core.vehicles.rotor_control import hover_low_level
from qrsim_ros.msg import (
    Altitude,
    AttitudeCommand,
    CommsPacket,
    Concentration,
    MotorCommand,
    RatesThrustCommand,
    TaskStatus,
    TickProgress,
)
from qrsim_ros.policies import is_team, make_factory, policy_names
from qrsim_ros.policies.base import PolicyError, ScenarioFacts, check_actions, instantiate
from qrsim_ros.ros.comms_messages import packet_of_message, tx_message
from qrsim_ros.ros.estimated_state import EstimatedStateAssembler
from qrsim_ros.ros.from_messages import cloud_points
from qrsim_ros.ros.latest_samples import LatestSamples
from qrsim_ros.ros.names import MAP_FRAME, TICK_PROGRESS_TOPIC, base_link_frd_frame, vehicle_namespace
from qrsim_ros.ros.node import ParameterError, ScenarioNode, run_node
from qrsim_ros.ros.parameters import (
    SCENARIO_PARAMETERS,
    Param,
    ParamTable,
    limited,
)
from qrsim_ros.ros.qos import QOS_CLOCK, QOS_LATCHED_STREAM, QOS_RELIABLE, QOS_TICK_PROGRESS
from qrsim_ros.ros.sensor_ticks import ALT, FIX, IMU, VEL
from qrsim_ros.ros.stamps import seconds_of_stamp, tick_of_stamp

#: Set points are re-sent every this many ticks of /clock (0.2 s: 5 Hz, well inside a 0.5 s timeout).
SETPOINT_PERIOD_TICKS = 10
#: The estimated-state columns the policies plan from (north, east, heading, height): the policy is built
#: once they are finite for every valid vehicle.
PLANNING_COLUMNS = [NORTH, EAST, HEADING, HEIGHT]


@dataclass(frozen=True)
class CameraFrame:
    """One ``camera/detections`` frame as the policies read a ``CameraObservation``: window ground
    centres (nf2, nf1, 3) NED [m] and their llkd (nf2, nf1); ``t_s`` the frame's time."""

    t_s: float
    centres_ned: Array
    llkd_grid: Array

    @property
    def empty(self) -> bool:
        return self.llkd_grid.size == 0


class TopicView(ScenarioFacts):
    """The ``policies.base.AutopilotView`` of a running graph: what ``SimulatorView`` offers in process,
    filled from the public topics (the static facts from the scenario: ``ScenarioFacts``)."""

    def __init__(self, scenario: Any) -> None:
        self.scenario = scenario
        n = scenario.num_vehicles
        self.num_vehicles = n
        self.control_modes = tuple(scenario.control_modes())
        task = make_task(TaskContext(scenario))
        rows = [int(i) for i in task.agent_vehicles]
        modes = [self.control_modes[i] for i in rows]
        self.action_spec = {"vehicles": rows, "modes": modes,
                            "width": max(len(CONTROL_MODES[m]) for m in modes),
                            "columns": {m: CONTROL_MODES[m] for m in dict.fromkeys(modes)}}
        self.action_rows = len(rows)
        self.seed_entropy = RandomStreams(scenario.seed).entropy
        self.assembler = EstimatedStateAssembler(n, scenario.origin)
        self.valid = np.ones(n, bool)
        self.frames: list[CameraFrame | None] = [None] * n
        self.concentration = np.full(n, np.nan)
        self.plume_locations = np.zeros((0, 3))
        rf = scenario.vehicle.sensors.get("range_finders")
        #: the scene range finders' beams and their latest readings (N, B) [m] (uavN/range/<beam>)
        self.range_params = dict(rf.beams) if rf is not None else {}
        self.ranges = np.full((n, len(self.range_params)), np.nan)
        self.time_s = 0.0
        self.step_count = 0
        #: the radio (``comms.on``): packets heard on uavN/comms/rx until ``receive``, and the packets the
        #: policy sent this step, published on uavN/comms/tx by the node before the set points
        self.has_radio = bool(scenario.comms.on)
        self.inboxes = Inboxes(n)
        self.outbox: list[tuple[int, int, bytes, str | None]] = []
        self._sequence = [0] * n
        #: the battery's charge left and voltage per vehicle (uavN/battery ``percentage``, ``voltage`` [V];
        #: NaN before the first)
        self.charge = np.full(n, np.nan)
        self.voltage_v = np.full(n, np.nan)
        #: what each vehicle's onboard failsafe flies, as far as this view is told ('' until then)
        self.failsafes = [""] * n
        self._retrieve: Any = None  # the retrieve devices, where a node serves them

    # observations
    def estimated_state(self) -> Array:
        return self.assembler.estimated_state(self.valid)

    def camera_observations(self) -> list[CameraFrame | None]:
        return list(self.frames)

    def plume_readings(self) -> Array:
        return self.concentration.copy()

    @property
    def range_finder_beams(self) -> tuple[str, ...]:
        return tuple(self.range_params)

    def range_finder_readings(self, beams: tuple[str, ...] | None = None) -> BeamReadings:
        """As ``AutopilotView.range_finder_readings``, from the latest ``uavN/range/<beam>`` messages."""
        names = self.range_finder_beams if beams is None else tuple(beams)
        fitted = list(self.range_params)
        unknown = [b for b in names if b not in self.range_params]
        if not self.range_params or unknown:
            raise PolicyError(f"scenario {self.scenario_name!r}: range-finder beam(s) "
                              f"{', '.join(unknown or names) or 'any'} not fitted "
                              f"(vehicle.sensors.range_finders: {', '.join(fitted) or 'none'})")
        cols = [fitted.index(b) for b in names]
        return BeamReadings(names, np.array([BEAM_AXES[b] for b in names], float).reshape(-1, 3),
                            self.ranges[:, cols].copy(),
                            np.array([self.range_params[b].max_range_m for b in names], float))

    def battery_percentage(self) -> Array:
        """As ``AutopilotView.battery_percentage``, from the latest ``uavN/battery`` messages."""
        return self.charge.copy()

    def battery_voltage_v(self) -> Array:
        """As ``AutopilotView.battery_voltage_v``, from the latest ``uavN/battery`` messages."""
        return self.voltage_v.copy()

    @property
    def failsafe(self) -> list[str]:
        """As ``AutopilotView.failsafe``, as far as this view is told (the mission autopilot reads them)."""
        return list(self.failsafes)

    @property
    def retrieve(self) -> Any:
        """As ``AutopilotView.retrieve``: the retrieve devices over the topics (``mission_autopilot``'s
        ``RetrieveLink``); ``PolicyError`` where no node serves them."""
        if self._retrieve is None:
            raise PolicyError(f"scenario {self.scenario_name!r}: no retrieve devices here (the retrieve task "
                              "is flown by mission_autopilot)")
        return self._retrieve

    def send(self, vehicle: int, destination: int, payload: bytes, mode: str | None = None) -> int:
        """As ``AutopilotView.send``: the packet goes out on ``uavN/comms/tx`` stamped with this step's
        time, before the step's set points. Returns the view's own count of the vehicle's sends (the
        radio numbers the packets itself)."""
        if not self.has_radio:
            raise PolicyError(f"scenario {self.scenario_name!r} has no radio (comms.on: false)")
        vehicle_index("vehicle", vehicle, self.num_vehicles)
        if destination != BROADCAST:
            vehicle_index("destination", destination, self.num_vehicles)
        if mode is not None and mode not in MODES:
            raise PolicyError(f"send: mode {mode!r} is not one of {', '.join(MODES)}")
        self.outbox.append((int(vehicle), int(destination), bytes(payload), mode))
        seq = self._sequence[vehicle]
        self._sequence[vehicle] += 1
        return seq

    def receive(self, vehicle: int) -> list[Packet]:
        """As ``AutopilotView.receive``: the packets heard on ``uavN/comms/rx`` since the last call (sent_s
        NaN: the rx message carries the delivery time only)."""
        if not self.has_radio:
            raise PolicyError(f"scenario {self.scenario_name!r} has no radio (comms.on: false)")
        return self.inboxes.drain(vehicle)

    def set_range(self, i: int, beam: str, range_m: float) -> None:
        """Store vehicle ``i``'s reading of ``beam`` [m] (a sensor_msgs/Range's ``range``)."""
        self.ranges[i, list(self.range_params).index(beam)] = range_m

    def new_episode(self, t_s: float) -> None:
        """A new episode started at simulated time ``t_s``: forget camera frames taken after it (the old
        episode's). Sensor values are kept: the new episode's first ones may already be in."""
        self.frames = [f if f is not None and f.t_s <= t_s else None for f in self.frames]
        self.valid[:] = True
        self.inboxes.clear()
        self.outbox.clear()
        self._sequence = [0] * self.num_vehicles

    def ready(self) -> bool:
        """Whether the episode's policy can be built (besides every sensor having reported)."""
        return True

    def policy_built(self) -> None:
        """The episode's policy was just built from this view."""


def progress_tick(tick: int, next_step_tick: int, next_resend_tick: int | None, window_ticks: int,
                  command_timeout_s: float) -> int:
    """The tick to report on /sim/tick_progress once the node handled ``tick`` (a task step's status, or a
    re-send of the held set points; module docstring, "Pace"): before ``next_step_tick`` (whose set points
    are not out yet); with set points held (``next_resend_tick``: the tick of their next re-send) no
    further than they stay fresh with the clock ``window_ticks`` ahead (``tick`` + T - W, T the
    ``command_timeout_s`` in ticks, 0: never expire), but always far enough that the clock reaches the
    next event that reports (the next step or re-send), whose status or /clock the node waits for."""
    last = next_step_tick - 1
    if next_resend_tick is None or window_ticks <= 0 or command_timeout_s <= 0:
        return last
    fresh = tick + math.floor(command_timeout_s / BASE_DT_S + 1e-9) - window_ticks
    return max(min(next_step_tick, next_resend_tick) - window_ticks, min(last, fresh))


#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "example_autopilot", *SCENARIO_PARAMETERS,
    Param("policy", "auto",
          "baseline policy: " + ", ".join(policy_names()) + " or MODULE:FUNC (qrsim_ros.policies)"),
    limited("lockstep_window_ticks", LOCKSTEP_WINDOW_TICKS,
            "vehicle_dynamics' lockstep window (the launch plan passes its value): the progress reports keep "
            "the clock within vehicle.command_timeout_s of the held set points [ticks]"),
)


class ExampleAutopilotNode(ScenarioNode):
    """Runs a baseline policy on the public topics (see the module docstring)."""

    def __init__(self, name: str = "example_autopilot", parameters: ParamTable = PARAMETERS) -> None:
        super().__init__(name, parameters)
        p, sc = self.params, self.scenario
        spec = p.policy
        try:
            self.factory = make_factory(spec, sc.task.type, team=is_team(sc))
        except PolicyError as exc:
            raise ParameterError(f"parameter 'policy'={spec!r}: {exc}") from None
        self.policy_spec = spec
        self.view = self.make_view()
        self.policy: Any = None
        self.episode_done = False
        self.steps_flown = 0
        n = sc.num_vehicles
        a = self.view.assembler
        # Without an on_sensor hook (a subclass's) the estimate's sensors and the range beams are read on
        # demand: their latest samples are taken when a task step is answered (5 Hz), serialized (the
        # assembler deserializes them when the policy reads eX), instead of every 50 Hz / 10 Hz message
        # going through the executor (LatestSamples).
        on_demand = type(self).on_sensor is ExampleAutopilotNode.on_sensor
        self.latest = LatestSamples(self, accept=self.from_this_run)
        for i in range(n):
            ns = vehicle_namespace(i)
            for msg_type, topic, store, kind in ((Imu, "imu/data", a.set_imu, IMU),
                                                 (Altitude, "altimeter", a.set_altitude, ALT),
                                                 (NavSatFix, "gps/fix", a.set_gps_fix, FIX),
                                                 (TwistStamped, "gps/vel", a.set_gps_velocity, VEL)):
                if on_demand:
                    self.latest.add(msg_type, f"{ns}/{topic}", partial(store, i), raw=True)
                else:
                    self.create_subscription(msg_type, f"{ns}/{topic}",
                                             partial(self._on_estimate, store, kind, i), QOS_RELIABLE)
            if sc.task.type == "search_rescue":
                self.create_subscription(PointCloud2, f"{ns}/camera/detections",
                                         lambda m, i=i: self._on_detections(i, m), QOS_RELIABLE)
            if sc.task.type == "plume":
                self.create_subscription(Concentration, f"{ns}/plume/concentration",
                                         lambda m, i=i: self._on_concentration(i, m), QOS_RELIABLE)
            if self.view.has_radio:  # the team policies talk
                self.create_subscription(CommsPacket, f"{ns}/comms/rx",
                                         lambda m, i=i: self._on_rx(i, m), QOS_RELIABLE)
            if self.view.has_radio and sc.vehicle.battery.on:  # the team policies' energy rule
                self.create_subscription(BatteryState, f"{ns}/battery",
                                         lambda m, i=i: self._on_charge(i, m), QOS_RELIABLE)
            for beam in self.view.range_params:  # the guarded policies read them
                self.latest.add(Range, f"{ns}/range/{beam}",
                                lambda m, i=i, b=beam: self.view.set_range(i, b, m.range))
        self._pubs: dict[int, Any] = {}
        self._tx = ({i: self.create_publisher(CommsPacket, f"{vehicle_namespace(i)}/comms/tx", QOS_RELIABLE)
                     for i in range(n)} if self.view.has_radio else {})
        modes = set(self.view.action_spec["modes"]) & set(LOW_LEVEL_MODES)
        self._low_level_hover = {m: hover_low_level(m, sc.vehicle.rotor_params()) for m in modes}
        for i, mode in zip(self.view.action_spec["vehicles"], self.view.action_spec["modes"], strict=True):
            ns = vehicle_namespace(i)
            if mode == "waypoint":
                self._pubs[i] = self.create_publisher(PoseStamped, f"{ns}/cmd/pose", QOS_RELIABLE)
            elif mode == "attitude":
                self._pubs[i] = self.create_publisher(AttitudeCommand, f"{ns}/cmd/attitude", QOS_RELIABLE)
            elif mode == "rates_thrust":
                self._pubs[i] = self.create_publisher(RatesThrustCommand, f"{ns}/cmd/rates_thrust",
                                                      QOS_RELIABLE)
            elif mode == "motors":
                self._pubs[i] = self.create_publisher(MotorCommand, f"{ns}/cmd/motors", QOS_RELIABLE)
            else:
                self._pubs[i] = self.create_publisher(TwistStamped, f"{ns}/cmd/velocity", QOS_RELIABLE)
        # latched: a subscription matched after the referee's first status still gets it (the window
        # waits for this node's first report)
        self.create_subscription(TaskStatus, "/referee/status", self._on_status, QOS_LATCHED_STREAM)
        self._ticks_per_step = ticks_per_update("task.dt_s", sc.task.dt_s)
        self._progress_pub = self.create_publisher(TickProgress, TICK_PROGRESS_TOPIC, QOS_TICK_PROGRESS)
        self._reported: tuple[int, int] | None = None
        self._episode = 0
        self._next_step_tick: int | None = None  # of the status after the last one handled
        self._resend_clock: Any = None  # the latest /clock of a re-send tick (``_on_clock``)
        from rosgraph_msgs.msg import Clock as ClockMsg

        self._held: dict[int, Any] = {}  # the latest set point message per vehicle, re-sent on /clock
        #: publish a NaN set point for a NaN action row (a lockstep mission: every step is answered)
        self.publish_silence = False
        self.create_subscription(ClockMsg, "/clock", self._on_clock, QOS_CLOCK)
        self._last_step: int | None = None
        self.get_logger().info(f"{name}: policy {spec!r} for {sc.task.type!r}, vehicles "
                               f"{[vehicle_namespace(i) for i in self.view.action_spec['vehicles']]}")

    def destroy_node(self) -> None:
        latest = getattr(self, "latest", None)  # (None: __init__ failed before it)
        try:
            if latest is not None:
                latest.destroy()
        finally:
            super().destroy_node()

    def make_view(self) -> TopicView:
        """The view the policies read (a subclass adds its task's devices)."""
        return TopicView(self.scenario)

    # --- observations ---------------------------------------------------------------------------------
    def _on_estimate(self, store: Any, kind: str, i: int, msg: Any) -> None:
        store(i, msg)
        self.on_sensor(kind, i, msg.header.stamp)

    def on_sensor(self, kind: str, i: int, stamp: Any) -> None:
        """A sensor message (a ``sensor_ticks`` kind) of vehicle ``i`` was stored (a hook; a subclass that
        overrides it gets the sensors deserialized as they arrive, see ``__init__``)."""

    def _on_detections(self, i: int, msg: PointCloud2) -> None:
        try:
            pts = cloud_points(msg)
        except ValueError as exc:
            self.get_logger().warning(f"{vehicle_namespace(i)}/camera/detections: {exc}",
                                      throttle_duration_sec=5.0)
            return
        xyz = np.stack([pts["x"], pts["y"], pts["z"]], axis=-1).astype(float)
        self.view.frames[i] = CameraFrame(seconds_of_stamp(msg.header.stamp), enu_to_ned(xyz),
                                          pts["llkd"].astype(float))

    def _on_concentration(self, i: int, msg: Concentration) -> None:
        self.view.concentration[i] = msg.concentration

    def _on_charge(self, i: int, msg: BatteryState) -> None:
        self.view.charge[i] = msg.percentage
        self.view.voltage_v[i] = msg.voltage

    def _on_rx(self, i: int, msg: CommsPacket) -> None:
        """A packet the radio delivered to vehicle ``i``: into its inbox until the policy reads it."""
        self.view.inboxes.put([packet_of_message(msg, i)])

    def _publish_packets(self, status: TaskStatus) -> None:
        """The packets the policy sent this step on ``uavN/comms/tx``, stamped with the step's time (before
        the step's set points: the radio sends them at that tick)."""
        view = self.view
        for vehicle, dst, payload, mode in view.outbox:
            self._tx[vehicle].publish(tx_message(status.header.stamp, vehicle, dst, payload, mode))
        view.outbox.clear()

    # --- one task step ----------------------------------------------------------------------------------
    def _on_status(self, msg: TaskStatus) -> None:
        if self.foreign_run(msg.run_id, "/referee/status"):
            return
        self._answer(msg)
        self.step_progress(msg)

    def step_progress(self, status: TaskStatus) -> None:
        """Report on /sim/tick_progress the ticks this node is done with once it handled ``status``
        (``progress_tick``)."""
        k = tick_of_stamp(status.header.stamp)
        if k is not None:
            self._episode, self._next_step_tick = int(status.episode), k + self._ticks_per_step
            self._report_progress(k)
            late = self._resend_clock
            if late is not None and (j := tick_of_stamp(late)) is not None and (
                    0 < j - k < self.params.lockstep_window_ticks):
                self._resend(late, j)  # a re-send tick passed while the status waited

    def _report_progress(self, k: int) -> None:
        """Report progress after tick ``k``'s status or re-send (``progress_tick``)."""
        if self._next_step_tick is None:
            return  # no status handled yet: the clock's window covers the start
        resend = (k // SETPOINT_PERIOD_TICKS + 1) * SETPOINT_PERIOD_TICKS if self._held else None
        self.report_done(self._episode, progress_tick(k, self._next_step_tick, resend,
                                                      self.params.lockstep_window_ticks,
                                                      self.scenario.vehicle.command_timeout_s))

    def report_done(self, episode: int, tick: int) -> None:
        """Publish on /sim/tick_progress that this node is done with ``tick`` of ``episode`` (once)."""
        if (episode, tick) == self._reported or tick < 0:
            return
        self._reported = (episode, tick)
        self._progress_pub.publish(TickProgress(node=self.get_fully_qualified_name(), episode=episode,
                                                tick=tick))

    def _answer(self, msg: TaskStatus) -> None:
        """The policy's set points (and packets) for the task step of ``msg``."""
        view = self.view
        self.latest.take()
        if len(msg.vehicle_valid) == view.num_vehicles:
            view.valid[:] = np.asarray(msg.vehicle_valid, bool)
        new_episode = self._last_step is None or msg.step < self._last_step or (
            msg.step == 0 and self._last_step != 0)
        self._last_step = int(msg.step)
        view.time_s, view.step_count = float(msg.time), int(msg.step)
        if new_episode:
            self._held.clear()
            self.policy = None
            self.episode_done = False
            view.new_episode(float(msg.time))
        if msg.done:
            if not self.episode_done:
                self.episode_done = True
                self.get_logger().info(f"episode done ({msg.done_reason}): {msg.persons_found}/"
                                       f"{msg.persons_total} persons, reward {msg.cumulative_reward:.4g}")
                self._publish(np.zeros((len(view.action_spec["vehicles"]), view.action_spec["width"])),
                              msg, stop=True)
            return
        try:
            if self.policy is None:
                rows = np.asarray(view.action_spec["vehicles"], int)
                ex = view.estimated_state()[rows]
                if not np.all(np.isfinite(ex[view.valid[rows]][:, PLANNING_COLUMNS])) or not view.ready():
                    return  # the policies plan from the estimated states: wait for every sensor
                self.policy = instantiate(self.factory, view)
                view.policy_built()
            actions = self.policy(view)
            actions = check_actions(actions, view, f"policy {self.policy_spec!r}")
        except Exception as exc:  # a policy must never take the node down
            self.get_logger().error(f"policy {self.policy_spec!r} failed at step {msg.step}: "
                                    f"{type(exc).__name__}: {exc}", throttle_duration_sec=5.0)
            self.view.outbox.clear()
            return
        self._publish_packets(msg)
        self._publish(actions, msg)
        self.steps_flown += 1

    def _publish(self, actions: Array, status: TaskStatus, stop: bool = False) -> None:
        spec = self.view.action_spec
        ex = self.view.estimated_state()
        for r, (i, mode) in enumerate(zip(spec["vehicles"], spec["modes"], strict=True)):
            a = np.asarray(actions[r], float)
            pub = self._pubs[i]
            if mode == "waypoint":
                msg = PoseStamped()
                if stop:  # hold where it is
                    a = hold_pose(ex[i])[0]
                    if not np.all(np.isfinite(a)):
                        continue
                p = ned_to_enu(a[0:3])
                q = euler_ned_frd_to_quaternion_enu_flu(0.0, 0.0, a[3])
                msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(c) for c in p)
                o = msg.pose.orientation
                o.x, o.y, o.z, o.w = (float(c) for c in q)
                msg.header.frame_id = MAP_FRAME
            elif mode == "attitude":
                msg = AttitudeCommand()
                u = a[0:5] if not stop else HOVER_CONTROL
                msg.pitch, msg.roll, msg.throttle, msg.yaw_rate, msg.battery_voltage = (float(c) for c in u)
                msg.header.frame_id = base_link_frd_frame(i)
            elif mode in self._low_level_hover:  # the rotor airframe's lower-level inputs (FRD)
                c4 = a[0:4] if not stop else self._low_level_hover[mode]
                if mode == "rates_thrust":
                    msg = RatesThrustCommand()
                    msg.roll_rate_radps, msg.pitch_rate_radps, msg.yaw_rate_radps, msg.thrust_n = (
                        float(c) for c in c4)
                else:
                    msg = MotorCommand(normalised=[float(c) for c in c4])
                msg.header.frame_id = base_link_frd_frame(i)
            else:
                v = np.zeros(3)
                v[0 : 3 if mode == "velocity" else 2] = a[0 : 3 if mode == "velocity" else 2]
                e = ned_to_enu(v)
                msg = TwistStamped()
                msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = (float(c) for c in e)
                msg.header.frame_id = MAP_FRAME
            msg.header.stamp = status.header.stamp
            if all(math.isfinite(c) for c in np.ravel(a)):
                pub.publish(msg)
                self._held[i] = msg
            else:  # no set point (a NaN row): fall silent, so the last one expires as in process
                self._held.pop(i, None)
                if self.publish_silence:  # ... saying so explicitly (the flight controller waits for it)
                    pub.publish(msg)

    def _on_clock(self, msg: Any) -> None:
        """Re-send the held set points, stamped now, every ``SETPOINT_PERIOD_TICKS`` ticks; a /clock at or
        past the next step's tick (its status not handled yet: the executor's callbacks take no order), or
        before the first status, is served once that status is, with the step's own set points (for at
        most a window of ticks past the step: the clock goes no further in lockstep)."""
        k = tick_of_stamp(msg.clock)
        if k is None or k % SETPOINT_PERIOD_TICKS:
            return
        self._resend_clock = msg.clock
        step = self._next_step_tick
        if step is None or 0 <= k - step < self.params.lockstep_window_ticks:
            return  # (before the first status nothing is held)
        self._resend(msg.clock, k)

    def _resend(self, stamp: Any, k: int) -> None:
        """The held set points again, stamped ``stamp`` (tick ``k``), and the progress that follows."""
        if not self._held:
            return
        for i, sp in self._held.items():
            sp.header.stamp = stamp
            self._pubs[i].publish(sp)
        self._report_progress(k)  # in lockstep the clock waits for the next re-send, so none comes late


def main(argv: list[str] | None = None) -> int:
    return run_node(ExampleAutopilotNode, argv)


if __name__ == "__main__":
    sys.exit(main())

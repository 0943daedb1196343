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
(parameter ``policy``, default ``auto``) on a ``ros.topic_view.TopicView``, an ``AutopilotView``
filled from the topics. With ``auto``, search and rescue flies ``policies.search_pattern.SearchPattern``:
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
Lockstep (parameter ``lockstep``, set by the plan in a lockstep run): the node answers task step k only
once every input of tick k is in (``ros.step_inputs``: the vehicle status of t_k, each valid vehicle's
latest IMU, altimeter and GPS samples, its camera frame or plume reading of t_k when one is due, its
battery on battery ticks), reads exactly those, and answers every step: a NaN set point where the policy
has none. The IMU, altimeter, GPS and battery samples are taken on demand, as outside lockstep: each try
at the step takes the latest sample of those still missing and reads its tick; the progress reports of
the nodes (``/sim/tick_progress``, sent after a tick's samples) and a 2 ms wall-clock retry say when to
try again. The radio's packets are taken, serialised, when the step is answered. It re-sends nothing:
with the flight controller's ``await_task_setpoints`` a step's set point flies every tick of its step, as
in process. Its progress is then the tick before the next step it must answer (no further than the
/clock seen), and the run is the in-process one: the same seed flies the same, run after run.
A new episode (the status' step goes back to 0) rebuilds the
policy; once the status says ``done`` the vehicles are told to stop (zero velocity) and the node
waits for the next episode.
"""

from __future__ import annotations

import math
import sys
from functools import partial
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import BatteryState, Imu, NavSatFix, PointCloud2, Range

from qrsim_ros.core.common.frames import Array, enu_to_ned, euler_ned_frd_to_quaternion_enu_flu, ned_to_enu
from qrsim_ros.core.common.limits import LOCKSTEP_WINDOW_TICKS
from qrsim_ros.core.common.ticks import BASE_DT_S, tick_of_ns
from qrsim_ros.core.common.validation import ticks_per_update
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
    VehicleStatus,
)
from qrsim_ros.policies import is_team, make_factory, policy_names
from qrsim_ros.policies.base import PolicyError, check_actions, instantiate
from qrsim_ros.ros.cdr import header_stamp_ns
from qrsim_ros.ros.comms_messages import packet_of_bytes, tx_message
from qrsim_ros.ros.from_messages import cloud_points, listed_faults
from qrsim_ros.ros.latest_samples import LatestSamples
from qrsim_ros.ros.names import MAP_FRAME, TICK_PROGRESS_TOPIC, base_link_frd_frame, vehicle_namespace
from qrsim_ros.ros.node import ParameterError, ScenarioNode, run_node
from qrsim_ros.ros.parameters import (
    SCENARIO_PARAMETERS,
    Param,
    ParamTable,
    limit_range,
    limited,
)
from qrsim_ros.ros.qos import QOS_CLOCK, QOS_LATCHED_STREAM, QOS_RELIABLE, QOS_TICK_PROGRESS
from qrsim_ros.ros.sensor_ticks import ALT, BATTERY_EVERY_N_TICKS, FIX, IMU, VEL
from qrsim_ros.ros.stamps import seconds_of_stamp, tick_of_stamp
from qrsim_ros.ros.step_inputs import BATTERY, CAMERA, PLUME, StepInputs
from qrsim_ros.ros.topic_view import CameraFrame, TopicView

#: Set points are re-sent every this many ticks of /clock (0.2 s: 5 Hz, well inside a 0.5 s timeout).
SETPOINT_PERIOD_TICKS = 10
#: Lockstep: the awaited inputs whose samples are taken on demand (``waiting_for``): the estimate's
#: sensors and the battery.
ON_DEMAND_KINDS = (IMU, ALT, FIX, VEL, BATTERY)
#: Lockstep: wall seconds between two looks for samples a waiting step still misses (a sample that came
#: after its node's progress report; rare, so a look costs next to nothing).
RETRY_S = 0.002
#: The estimated-state columns the policies plan from (north, east, heading, height): the policy is built
#: once they are finite for every valid vehicle.
PLANNING_COLUMNS = [NORTH, EAST, HEADING, HEIGHT]


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


#: ``lockstep`` (module docstring, "Lockstep"; the mission autopilot's too).
LOCKSTEP = Param("lockstep", False,
                 "answer a task step only once every input of its tick is in, and answer every step (module "
                 "docstring, 'Lockstep'): with the flight controller's await_task_setpoints, the in-process "
                 "run (the plan sets both in lockstep)")
#: ``battery_every_n_ticks``: when the battery messages come (the mission autopilot's too).
BATTERY_TICKS = Param("battery_every_n_ticks", BATTERY_EVERY_N_TICKS,
                      "lockstep: the uavN/battery messages are awaited on the ticks that are multiples of "
                      "this; must equal vehicle_dynamics' parameter of that name (0: not awaited)",
                      **limit_range("battery_every_n_ticks"))

#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "example_autopilot", *SCENARIO_PARAMETERS,
    Param("policy", "auto",
          "baseline policy: " + ", ".join(policy_names()) + " or MODULE:FUNC (qrsim_ros.policies)"),
    LOCKSTEP, BATTERY_TICKS,
    limited("lockstep_window_ticks", LOCKSTEP_WINDOW_TICKS,
            "vehicle_dynamics' lockstep window (the launch plan passes its value): the progress reports keep "
            "the clock within vehicle.command_timeout_s of the held set points [ticks]"),
)


class ExampleAutopilotNode(ScenarioNode):
    """Runs a baseline policy on the public topics (see the module docstring)."""

    #: Whether the node reads ``uavN/battery`` besides lockstep runs and radio policies (the mission's
    #: low-battery return) and /sim/vehicle_status (the onboard failsafes).
    READS_BATTERY = False
    READS_VEHICLE_STATUS = False
    #: Whether the node's progress is always the tick before the next step it must answer (a mission,
    #: whose window is one tick), not only in lockstep.
    PACED_BY_ANSWERS = False

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
        self._lockstep = bool(p.lockstep)
        #: lockstep: the inputs each step waits for (``ros.step_inputs``)
        self._inputs = StepInputs(sc, p.battery_every_n_ticks) if self._lockstep else None
        # The estimate's sensors, the battery and the range beams are read on demand: their latest
        # samples are taken when a task step is answered (5 Hz; the estimate's serialized: the assembler
        # deserializes them when the policy reads eX), and so is every packet the radio delivered,
        # instead of each 50 Hz / 10 Hz message going through the executor (LatestSamples). In lockstep
        # the estimate's and the battery's samples are awaited inputs: a step's attempt takes those
        # still missing and reads their ticks (``waiting_for``); the sensor nodes' progress reports say
        # when to try again (``_on_progress``).
        battery = sc.vehicle.battery.on and (self._lockstep or self.view.has_radio or self.READS_BATTERY)
        self.latest = LatestSamples(self, accept=self.from_this_run)
        for i in range(n):
            ns = vehicle_namespace(i)
            for msg_type, topic, store, kind in ((Imu, "imu/data", a.set_imu, IMU),
                                                 (Altitude, "altimeter", a.set_altitude, ALT),
                                                 (NavSatFix, "gps/fix", a.set_gps_fix, FIX),
                                                 (TwistStamped, "gps/vel", a.set_gps_velocity, VEL)):
                taken = partial(self._on_estimate, store, kind, i) if self._lockstep else partial(store, i)
                self.latest.add(msg_type, f"{ns}/{topic}", taken, raw=True, key=(kind, i))
            if sc.task.type == "search_rescue":
                self.create_subscription(PointCloud2, f"{ns}/camera/detections",
                                         lambda m, i=i: self._on_detections(i, m), QOS_RELIABLE)
            if sc.task.type == "plume":
                self.create_subscription(Concentration, f"{ns}/plume/concentration",
                                         lambda m, i=i: self._on_concentration(i, m), QOS_RELIABLE)
            if self.view.has_radio:  # the team policies talk: every packet, taken when a step is answered
                self.latest.add(CommsPacket, f"{ns}/comms/rx", partial(self._on_rx, i), raw=True, every=True)
            if battery:  # the team policies' energy rule, the mission's return, a lockstep input
                self.latest.add(BatteryState, f"{ns}/battery", partial(self._on_charge, i), key=(BATTERY, i))
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
        self.create_subscription(ClockMsg, "/clock", self._on_clock, QOS_CLOCK)
        self._last_step: int | None = None
        # progress by the steps answered (lockstep, a mission): the step waiting for its inputs, the last
        # step answered and published, the latest /clock tick seen
        self._by_answers = self._lockstep or self.PACED_BY_ANSWERS
        self._pending: TaskStatus | None = None
        self._answered_tick = -1
        self._published_tick = -1
        self._clock_tick = -1
        if self._lockstep or self.READS_VEHICLE_STATUS:
            self.create_subscription(VehicleStatus, "/sim/vehicle_status", self._on_vehicle_status,
                                     QOS_RELIABLE)
        if self._lockstep:  # the nodes report a tick once they published its samples: look again then
            self.create_subscription(TickProgress, TICK_PROGRESS_TOPIC, self._on_progress, QOS_TICK_PROGRESS)
            # ... and, should a sample come after its node's report (two writers: DDS keeps no order
            # between them), every RETRY_S of wall time while a step waits for samples on demand
            steady = Clock(clock_type=ClockType.STEADY_TIME)
            self._retry = self.create_timer(RETRY_S, self._try_answer, clock=steady, autostart=False)
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
    def _on_estimate(self, store: Any, kind: str, i: int, raw: bytes) -> None:
        """Lockstep: a sample taken on demand (``waiting_for``, which then looks at the step's inputs)."""
        store(i, raw)
        assert self._inputs is not None
        self._inputs.arrived(kind, i, tick_of_ns(header_stamp_ns(raw)))

    def _arrived(self, key: str, i: int, k: int | None) -> None:
        """Lockstep: vehicle ``i``'s ``key`` input (``step_inputs``) of tick ``k`` is in (None: off the
        tick grid)."""
        if self._inputs is not None:
            self._inputs.arrived(key, i, k)
            self._try_answer()

    def _on_vehicle_status(self, msg: VehicleStatus) -> None:
        if self.foreign_run(msg.run_id, "/sim/vehicle_status") or len(msg.failsafe) != self.num_vehicles:
            return
        self.view.failsafes = list(msg.failsafe)
        if self._inputs is not None:
            self._inputs.vehicle_status(msg.tick, msg.valid, listed_faults(msg))
        if int(msg.episode) != self._episode:  # a new episode: ticks restart at 0
            self._episode = int(msg.episode)
            self._answered_tick = self._clock_tick = -1
        self._try_answer()

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
        self._arrived(CAMERA, i, tick_of_stamp(msg.header.stamp))

    def _on_concentration(self, i: int, msg: Concentration) -> None:
        self.view.concentration[i] = msg.concentration
        self._arrived(PLUME, i, tick_of_stamp(msg.header.stamp))

    def _on_charge(self, i: int, msg: BatteryState) -> None:
        """Vehicle ``i``'s latest battery state, taken on demand (in lockstep an awaited input)."""
        self.view.charge[i] = msg.percentage
        self.view.voltage_v[i] = msg.voltage
        if self._inputs is not None:
            self._inputs.arrived(BATTERY, i, tick_of_stamp(msg.header.stamp))

    def _on_rx(self, i: int, raw: bytes) -> None:
        """A packet the radio delivered to vehicle ``i`` (serialised): into its inbox until the policy reads
        it."""
        try:
            self.view.inboxes.put([packet_of_bytes(raw, i)])
        except ValueError as exc:
            self.get_logger().warning(f"{vehicle_namespace(i)}/comms/rx: {exc}", throttle_duration_sec=5.0)

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
        if not self._by_answers:
            self._answer(msg)
            self.step_progress(msg)
            return
        self._pending = msg
        self._try_answer()

    def waiting_for(self, k: int, status: TaskStatus) -> str | None:
        """The first input of tick k not in yet (lockstep; ``step_inputs``), or None. The samples read on
        demand that are still missing are taken first."""
        inputs = self._inputs
        if inputs is None or status.done:
            return None
        missing = inputs.missing(k)
        if missing is not None and inputs.status_tick == k:
            if self.latest.take(inputs.missing_keys(k, ON_DEMAND_KINDS)):
                missing = inputs.missing(k)
            if missing is not None and self._retry.is_canceled():
                self._retry.reset()
        return missing

    def _on_progress(self, _msg: TickProgress) -> None:
        if self._pending is not None:
            self._try_answer()

    def _try_answer(self) -> None:
        """Answer the pending task step once its inputs are in (lockstep) and report the progress."""
        msg = self._pending
        if msg is None:
            return
        k = tick_of_stamp(msg.header.stamp)
        if k is not None and self.waiting_for(k, msg) is not None:
            return
        self._pending = None
        if self._lockstep:
            self._retry.cancel()
        self._answer(msg)
        if k is None:
            return
        if self._lockstep and self._published_tick != k:  # no set point this step: say so
            spec = self.view.action_spec
            self._publish(np.full((len(spec["vehicles"]), spec["width"]), np.nan), msg)
        self.step_answered(msg)
        self._answered_tick = k
        self._clock_tick = max(self._clock_tick, k)
        self._report_answered()

    def step_answered(self, status: TaskStatus) -> None:
        """The task step of ``status`` was answered (a hook)."""

    def _report_answered(self) -> None:
        """Progress by the steps answered: up to the tick before the next step this node must answer, no
        further than the /clock seen."""
        if self._answered_tick >= 0:
            self.report_done(self._episode,
                             min(self._clock_tick, self._answered_tick + self._ticks_per_step - 1))

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
        k = tick_of_stamp(status.header.stamp)
        self._published_tick = -1 if k is None else k
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
                if self._lockstep and mode in ("velocity", "velocity_height"):
                    pub.publish(msg)  # ... saying so explicitly (the flight controller awaits every step's)

    def _on_clock(self, msg: Any) -> None:
        """Progress by the steps answered: the /clock seen. Otherwise: re-send the held set points, stamped
        now, every ``SETPOINT_PERIOD_TICKS`` ticks; a /clock at or
        past the next step's tick (its status not handled yet: the executor's callbacks take no order), or
        before the first status, is served once that status is, with the step's own set points (for at
        most a window of ticks past the step: the clock goes no further in lockstep)."""
        k = tick_of_stamp(msg.clock)
        if self._by_answers:  # every step answered, nothing re-sent (module docstring, "Lockstep")
            if k is not None:
                self._clock_tick = k
                self._report_answered()
            return
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

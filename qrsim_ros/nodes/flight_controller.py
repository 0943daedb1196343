"""flight_controller: QRSim's PID flight controllers for the vehicles flown by velocity or pose set points.

For every vehicle whose scenario control mode is ``velocity``, ``velocity_height`` or ``waypoint``
(``Scenario.control_modes()``) the node turns the latest set point into ``cmd/attitude`` at 50 Hz,
exactly as ``Simulator._controls``: one core controller per mode (``VelocityPID``,
``VelocityHeightPID``, ``WaypointPID``) over the vehicles in that mode, fed with the estimated state
eX assembled from the sensors' outputs only (``estimated_state.EstimatedStateAssembler``).

Topics (per controlled vehicle, relative names ``uavN/...``, and the fleet topics of ``ros.fleet_topics``):
  in   ``/sim/fleet/imu``, ``/sim/fleet/altimeter``, ``/sim/fleet/gps`` (qrsim_ros/FleetSamples, one
       message per sensor and update tick, from the sensor nodes): the values ``imu/data``,
       ``altimeter``, ``gps/fix`` and ``gps/vel`` carry, of every vehicle: the estimated state;
       ``cmd/velocity`` (geometry_msgs/TwistStamped): ``velocity`` / ``velocity_height`` set point,
       frame ``map`` (ENU world velocity) or ``uavN/base_link`` (FLU body velocity, turned into the
       world with the estimated heading when received); ``velocity_height`` uses east/north only and
       flies at ``task.flight_z_ned_m``;
       ``cmd/pose`` (geometry_msgs/PoseStamped, frame ``map``): ``waypoint`` set point (position and
       heading = the yaw of the orientation);
       ``/sim/vehicle_status`` (qrsim_ros/VehicleStatus, every tick): episode, tick and validity --
       invalid vehicles get NaN rows in eX and zero targets, as in the Simulator, and their sensors
       are not waited for; ``/sim/episode`` (std_msgs/UInt32, latched): the episode counter at
       start-up. A new episode resets the PIDs, the set points and the held sensor values. The
       status's ``faults``: a vehicle whose link is lost (comm_loss) at tick k keeps the set point it
       held at tick k-1 (what arrived since is dropped, as the Simulator's ``drop_commands``).
  out  ``/sim/fleet/attitude_command`` (qrsim_ros/FleetAttitudeCommand) stamped t_k: every controlled
       vehicle's command, for vehicle_dynamics; ``cmd/attitude`` (qrsim_ros/AttitudeCommand), the same
       command, frame ``uavN/base_link_frd``, built only while the topic has a reader (a bag, a user);
       ``/diagnostics``: counters of rejected set points, late/skipped/re-sent ticks and sensor
       and vehicle-status subscriptions made again (``inputs_renewed``: a tick waited over
       ``RENEW_AFTER_S`` for one, ``qrsim_ros.ros.renewable_inputs``).

Set points expire (``FleetControl``, as in the Simulator): a set point's stamp is when it was issued;
one stamped ahead of the latest tick seen by more than one tick (0.02 s), or older than the scenario's
``vehicle.command_timeout_s``, is rejected (counted: ``setpoint_rejected_stamp``); once the held one is
older than ``command_timeout_s`` at the tick computed, the vehicle flies ``vehicle.failsafe`` (hold,
land, level) until a fresh one comes. Each cmd/attitude carries the failsafe flown, ``disarm`` (landed)
and the vehicle's counts of rejected and clamped set points; vehicle_dynamics reports them in
/sim/vehicle_status. Clamped velocity set points (beyond the controller's 3 m/s per body axis) are
counted once each and warned about (throttled).

Lockstep (docs/NODE_GRAPH.md step 5): inputs are buffered by tick (``stamps.tick_of_stamp``; a stamp off the
tick grid is counted and dropped); tick k is computed once every input due at k has arrived: the vehicle
status of t_k, then (while a controlled vehicle is valid) the fleet IMU and altimeter messages on their update
ticks (50 Hz) and the fleet GPS message on GPS ticks (5 Hz), and in cats and mouse the mouse's
``cmd/velocity`` stamped t_k from the referee (awaited every tick, as the Simulator recomputes the mouse's
escape every tick), and with ``await_task_setpoints`` (a lockstep run with an autopilot) on every task-step
tick the ``cmd/velocity`` stamped t_k of every valid velocity-controlled vehicle (a non-finite one says "no
new set point this step"), so a step's set point flies from the step's first tick and counts as issued at
every tick of its step (it expires only after a step without one), as in process. The sensors of all vehicles
of a tick are converted together (one rotation, one projection call); a fleet message whose columns or rows do
not fit is dropped and counted (``fleet_rejected``). Set points of the other vehicles are held (the latest
valid one). If a later tick completes first (free-running dynamics, a lost message), the older ticks are
applied to the held sensor values and skipped (counted); when vehicle_dynamics re-sends a tick already
answered (lockstep timeout), the commands of that tick are published again. ``use_vehicle_status: false`` runs
without vehicle_dynamics (every vehicle valid; /clock triggers ticks on which no sensor is due).

Held heading: the velocity controllers hold each vehicle's heading of the episode start, as the
Simulator (``task.initial_headings()``, or the listed ``vehicle.initial_states``' yaw). It is computed
here with the same core function from the same seeded ``task.placement`` stream as vehicle_dynamics'
placement (``tasks.initial_placement``), one draw per episode -- the ground truth is not read. This
needs a concrete scenario seed shared by every node (seed 0, "from the clock", cannot agree).
Before its first set point a vehicle hovers: zero velocity, or (waypoint) its estimated position and
heading at the episode's first controlled tick.
"""

from __future__ import annotations

import math
import sys
from functools import partial
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.clock import Clock, ClockType
from std_msgs.msg import UInt32

from qrsim_ros.core.common.frames import enu_to_ned, quaternion_enu_flu_to_euler_ned_frd
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ticks_per_update
from qrsim_ros.core.engine.faults import FaultEffects, FaultModels
from qrsim_ros.core.tasks.factory import make_task
from qrsim_ros.core.tasks.rules import PLACEMENT_STREAM, TaskContext, initial_placement
from qrsim_ros.core.vehicles.controllers import MAX_SPEED_MPS
from qrsim_ros.core.vehicles.estimated_state import HEADING, hold_pose
from qrsim_ros.core.vehicles.fleet_control import CONTROLLED_MODES, TARGET_WIDTH, FleetControl
from qrsim_ros.msg import AttitudeCommand, FleetAttitudeCommand, FleetSamples, VehicleStatus
from qrsim_ros.ros.estimated_state import EstimatedStateAssembler
from qrsim_ros.ros.fault_follower import FaultFollower
from qrsim_ros.ros.fleet_topics import (
    ALTIMETER_COLUMNS,
    FLEET_ALTIMETER_TOPIC,
    FLEET_ATTITUDE_COMMAND_TOPIC,
    FLEET_GPS_TOPIC,
    FLEET_IMU_TOPIC,
    GPS_COLUMNS,
    IMU_COLUMNS,
    FleetMessageError,
    listened,
    read_samples,
)
from qrsim_ros.ros.names import (
    FIRST_EPISODE,  # the episode number of the launch's placement
    MAP_FRAME,
    base_link_frame,
    base_link_frd_frame,
    vehicle_namespace,
)
from qrsim_ros.ros.node import Counters, ScenarioNode, run_node
from qrsim_ros.ros.parameters import SCENARIO_PARAMETERS, Param, ParamTable
from qrsim_ros.ros.qos import QOS_CLOCK, QOS_LATCHED, QOS_RELIABLE
from qrsim_ros.ros.renewable_inputs import RenewableInputs
from qrsim_ros.ros.sensor_ticks import ALT, FIX, IMU, VEL, SensorSchedule
from qrsim_ros.ros.stamps import seconds_of_stamp, stamp_from_tick, tick_of_stamp
from qrsim_ros.ros.to_messages import float64_array, uint32_array

#: Keys of the buffered inputs of a tick (besides the fleet sensor messages IMU, ALT and GPS): the mouse's
#: escape command, a mission's task-step set point, /clock and the vehicle status.
MOUSE, SETPOINT, CLOCK, STATUS = "mouse", "setpoint", "clock", "status"
#: The GPS's fleet message (its fix and velocity, due together: the schedule's FIX and VEL).
GPS = "gps"
#: The fleet sensor messages: key -> (topic, columns, the assembler's kind).
FLEET_SENSORS = {IMU: (FLEET_IMU_TOPIC, IMU_COLUMNS, "imu"),
                 ALT: (FLEET_ALTIMETER_TOPIC, ALTIMETER_COLUMNS, "alt"),
                 GPS: (FLEET_GPS_TOPIC, GPS_COLUMNS, "gps")}
#: The schedule's sensors (``SensorSchedule.due``) -> the fleet message bringing them.
FLEET_OF = {IMU: IMU, ALT: ALT, FIX: GPS, VEL: GPS}


#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "flight_controller", *SCENARIO_PARAMETERS,
    Param("max_pending_ticks", 50, "ticks whose inputs are buffered while incomplete; older ones are skipped",
          lo=1, hi=100000),
    Param("report_period_s", 2.0,
          "wall-clock period of the 'waiting for inputs' report and of /diagnostics [s]", lo=0.1, hi=3600.0),
    Param("use_vehicle_status", True,
          "await /sim/vehicle_status of every tick: its validity flags say whose sensors to wait for "
          "(false: every vehicle is valid, for runs without vehicle_dynamics)"),
    Param("await_task_setpoints", False,
          "lockstep runs with an autopilot: on every task-step tick wait for the cmd/velocity set point "
          "stamped with that tick of each valid velocity-controlled vehicle (a non-finite one: no new set "
          "point this step), as the Simulator flies a step's action from the step's first tick and through "
          "the step (docs/LAUNCH.md)"),
)


class _TickInputs:
    """The inputs of one tick received so far, and those still missing (None: not known yet, the
    tick's vehicle status has not arrived)."""

    __slots__ = ("missing", "msgs")

    def __init__(self) -> None:
        self.msgs: dict[tuple[str, int], Any] = {}
        self.missing: set[tuple[str, int]] | None = None


class FlightControllerNode(ScenarioNode):
    """Velocity / waypoint PIDs of every vehicle under a controller (see the module docstring)."""

    def __init__(self, name: str = "flight_controller", parameters: ParamTable = PARAMETERS) -> None:
        super().__init__(name, parameters)
        sc = self.scenario
        n = self.num_vehicles
        self._valid = np.ones(n, bool)
        v = sc.vehicle
        self.fleet_control = FleetControl(sc.control_modes(), sc.task.flight_z_ned_m, v.command_timeout_s,
                                          v.failsafe, v.failsafe_land_rate_m_s)
        self.setpoints_rejected = np.zeros(n, np.int64)  # per vehicle, since start
        # comm_loss: the links of the tick's /sim/vehicle_status (vehicle_dynamics owns the schedule)
        self.faults = FaultEffects.follower(n, FaultModels())
        self._fault_follower = FaultFollower(self.faults)
        self._clamped_seen = np.zeros(n, np.int64)
        self._onsets_seen = np.zeros(n, np.int64)
        modes = self.modes = self.fleet_control.modes
        self.controlled = self.fleet_control.controlled.tolist()
        self.mouse = n - 1 if sc.task.type == "cats_mouse" and modes[n - 1] in CONTROLLED_MODES else None
        # when each sensor is due (sensor nodes publish on their update ticks)
        self._sensors = SensorSchedule(sc)
        # a mission's vehicles: their set point of every task step is awaited (await_task_setpoints)
        self._step_ticks = ticks_per_update("task.dt_s", sc.task.dt_s)
        self._stepped = ([i for i in self.controlled if modes[i] in ("velocity", "velocity_height")
                          and i != self.mouse] if self.params.await_task_setpoints else [])
        self._clock_trigger = False
        self._clock_trigger = bool(self.controlled) and not self.params.use_vehicle_status and any(
            not self._due_inputs(k) for k in range(1, self._sensors.period_ticks + 1))
        # placement (held headings), from the scenario seed's task.placement stream
        if sc.seed == 0:
            self.get_logger().warning(
                "scenario seed 0 (from the clock): the held headings cannot match vehicle_dynamics' "
                "placement; give every node the same concrete seed")
        self._task = make_task(TaskContext(sc))
        self._placement_rng = RandomStreams(sc.seed).get(PLACEMENT_STREAM)
        self._episode = FIRST_EPISODE - 1  # the episode whose placement was drawn last
        self._headings = np.zeros(n)
        self.assembler = EstimatedStateAssembler(n, sc.origin)
        self.counters = Counters(self, ["setpoint_rejected_non_finite", "setpoint_rejected_frame",
                                        "setpoint_rejected_mode", "setpoint_rejected_no_attitude",
                                        "setpoint_rejected_stamp", "setpoints_clamped", "failsafe_onsets",
                                        "late_inputs", "skipped_ticks", "ticks_resent", "status_rejected",
                                        "fleet_rejected", "inputs_renewed"],
                                self.params.report_period_s)
        self.ticks_computed = 0
        self._start_episode(FIRST_EPISODE)
        self._await_tick0 = False  # at start-up the first tick seen is taken as it is (joined late)
        self._episode_known = False

        self._cmd_pubs: dict[int, Any] = {}
        # the attitude commands of the vehicles under a controller: one message per tick to vehicle_dynamics
        self._controlled_rows = np.array(self.controlled, np.intp)
        self._fleet_cmd = FleetAttitudeCommand()
        self._fleet_cmd_pub = self.create_publisher(FleetAttitudeCommand, FLEET_ATTITUDE_COMMAND_TOPIC,
                                                    QOS_RELIABLE)
        self._inputs = RenewableInputs(self)  # the tick inputs' subscriptions, made again if one goes deaf
        if self.controlled:  # the fleet's sensors: one message per sensor and tick (ros.fleet_topics)
            for kind, (topic, _, _) in FLEET_SENSORS.items():
                self._inputs.create((kind, -1), FleetSamples, topic, partial(self._on_sensor, kind),
                                    QOS_RELIABLE)
        for i in self.controlled:
            ns = vehicle_namespace(i)
            sub = partial(self.create_subscription, qos_profile=QOS_RELIABLE)
            sub(TwistStamped, f"{ns}/cmd/velocity", partial(self._on_velocity_setpoint, i))
            sub(PoseStamped, f"{ns}/cmd/pose", partial(self._on_pose_setpoint, i))
            self._cmd_pubs[i] = self.create_publisher(AttitudeCommand, f"{ns}/cmd/attitude", QOS_RELIABLE)
        self._cmd_pub_list = [self._cmd_pubs.get(i) for i in range(n)]
        self.create_subscription(UInt32, "/sim/episode", self._on_episode, QOS_LATCHED)
        if self.params.use_vehicle_status and self.controlled:  # a tick input too: renewable like a sensor
            self._inputs.create((STATUS, -1), VehicleStatus, "/sim/vehicle_status", self._on_status,
                                QOS_RELIABLE)
        if self._clock_trigger:
            from rosgraph_msgs.msg import Clock as ClockMsg

            self.create_subscription(ClockMsg, "/clock", self._on_clock, QOS_CLOCK)
        self._waiting: tuple[int, float] | None = None  # (the oldest incomplete tick, since) [wall s]
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(self.params.report_period_s, self._report_waiting, clock=self._wall)
        summary = ", ".join(f"{vehicle_namespace(i)}:{modes[i]}" for i in self.controlled) or "none"
        self.get_logger().info(f"scenario {sc.name!r}: controlling {summary}"
                               + (f"; the mouse {vehicle_namespace(self.mouse)} follows the referee"
                                  if self.mouse is not None else ""))

    # --- episodes -----------------------------------------------------------------------------------
    def _start_episode(self, episode: int) -> None:
        """Reset PIDs, set points, buffers and sensor values; draw placements up to ``episode``."""
        while self._episode < episode:
            self._draw_placement()
            self._episode += 1
        self.fleet_control.reset()
        self.assembler.clear()
        n = self.num_vehicles
        self._velocity_sp = np.zeros((n, 3))  # NED [m/s]
        self._waypoint_sp = np.full((n, 4), np.nan)  # NED [m] + heading [rad]; NaN = hold the start
        self._sp_stamp_s = np.full(n, np.nan)  # when each held set point was issued [s]; NaN: none yet
        # await_task_setpoints: the vehicles whose held set point is their current step's answer
        self._step_given = np.zeros(n, bool)
        self._link_held: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # last tick's set points
        self._pending: dict[int, _TickInputs] = {}
        self._valid = np.ones(n, bool)
        self._last_tick = -1
        self._last_cmds: list[tuple[Any, Any]] = []  # the last tick's commands (re-sent with it)
        self._max_tick_seen = -1
        self._await_tick0 = True

    def _draw_placement(self) -> None:
        """The next episode's placement (``tasks.initial_placement``: one draw of the placement stream):
        its initial states and the headings the velocity controllers hold."""
        self._initial_states, self._headings = initial_placement(self._task, self._placement_rng)

    def _on_episode(self, msg: UInt32) -> None:
        self._episode_seen(int(msg.data))

    def _episode_seen(self, episode: int) -> None:
        """The episode counter of vehicle_dynamics (/sim/episode, /sim/vehicle_status)."""
        if not self._episode_known:
            # the first counter seen at start-up: catch up with the placement draws, keep the inputs
            self._episode_known = True
            while self._episode < episode:
                self._draw_placement()
                self._episode += 1
            return
        if episode > self._episode:
            self.get_logger().info(f"episode {episode}: controllers reset")
            self._start_episode(episode)

    def _check_new_episode(self, k: int) -> bool:
        """Track the tick sequence; returns False for an input to drop (stale: from before a reset)."""
        if k == 0 and self._max_tick_seen > 0:
            # tick 0 again before /sim/episode said so: the next episode
            self._start_episode(self._episode + 1)
        if self._await_tick0:
            if k != 0:
                return False
            self._await_tick0 = False
        self._max_tick_seen = max(self._max_tick_seen, k)
        return True

    # --- inputs ---------------------------------------------------------------------------------------
    def _on_sensor(self, kind: str, msg: FleetSamples) -> None:
        topic, columns, _ = FLEET_SENSORS[kind]
        if self.foreign_run(msg.run_id, topic):
            return
        try:
            rows = read_samples(msg, topic, columns, self.num_vehicles)
        except FleetMessageError as exc:
            self.counters.count("fleet_rejected")
            self.get_logger().warning(f"{exc}: ignored", throttle_duration_sec=self.params.report_period_s)
            return
        self._buffer(kind, -1, rows, tick_of_stamp(msg.header.stamp))

    def _on_clock(self, msg: Any) -> None:
        self._buffer(CLOCK, -1, msg, tick_of_stamp(msg.clock))

    def _on_status(self, msg: VehicleStatus) -> None:
        if self.foreign_run(msg.run_id, "/sim/vehicle_status"):
            return
        if len(msg.valid) != self.num_vehicles:
            self.counters.count("status_rejected")
            self.get_logger().warning(f"/sim/vehicle_status lists {len(msg.valid)} vehicles, the scenario "
                                      f"{self.num_vehicles}: ignored",
                                      throttle_duration_sec=self.params.report_period_s)
            return
        self._episode_seen(int(msg.episode))
        self._buffer(STATUS, -1, msg, int(msg.tick))
        self._status_accepted(msg)

    def _status_accepted(self, msg: VehicleStatus) -> None:
        """A /sim/vehicle_status of this run, for this fleet: what a subclass reads besides the tick."""

    def _buffer(self, kind: str, i: int, msg: Any, k: int | None) -> None:
        if k is None:
            self.counters.count("stamps_off_grid")
            return
        if not self._check_new_episode(k) or k <= self._last_tick:
            if k == self._last_tick and self._last_cmds and (kind, i) == self._resend_trigger(k):
                # vehicle_dynamics re-sent tick k (lockstep timeout): it may have missed our command
                for pub, cmd in self._last_cmds:
                    pub.publish(cmd)
                self.counters.count("ticks_resent")
                return
            self.counters.count("late_inputs")
            return
        entry = self._pending.get(k)
        if entry is None:
            entry = self._pending[k] = _TickInputs()
        elif entry.missing and (kind, i) in entry.msgs and (kind, i) == self._resend_trigger(k):
            # tick k re-sent before it was complete here: name what it still lacks (a lockstep stall's cause)
            lacking = ", ".join(key + (f" of {vehicle_namespace(j)}" if j >= 0 else "")
                                for key, j in sorted(entry.missing))
            self.get_logger().warning(f"tick {k} re-sent; still waiting for {lacking}",
                                      throttle_duration_sec=self.params.report_period_s)
        entry.msgs[(kind, i)] = msg
        if entry.missing is None:
            if kind == STATUS or not self.params.use_vehicle_status:  # now the tick's due inputs are known
                entry.missing = set(self._due_inputs(k, self._valid_at(k))) - entry.msgs.keys()
        else:
            entry.missing.discard((kind, i))
        if entry.missing is not None and not entry.missing:
            self._process_through(k)
        elif len(self._pending) > self.params.max_pending_ticks:
            self._process_through(min(self._pending), compute=False)

    def _due_inputs(self, k: int, valid: np.ndarray | None = None) -> list[tuple[str, int]]:
        """The inputs tick k waits for: the sensors due at k of the valid controlled vehicles, the
        mouse's command (cats and mouse), the vehicle status (``use_vehicle_status``); /clock when
        nothing else would come."""
        keys: list[tuple[str, int]] = [(STATUS, -1)] if self.params.use_vehicle_status else []
        if any(valid is None or valid[i] for i in self.controlled):
            keys += [(kind, -1) for kind in dict.fromkeys(FLEET_OF[due] for due in self._sensors.due(k))]
        if self.mouse is not None:
            keys.append((MOUSE, self.mouse))
        if k % self._step_ticks == 0:
            keys += [(SETPOINT, i) for i in self._stepped if valid is None or valid[i]]
        if not keys and self._clock_trigger:
            keys.append((CLOCK, -1))
        return keys

    def _valid_at(self, k: int) -> np.ndarray | None:
        """Validity at tick k: from its vehicle status (None while it has not arrived)."""
        if not self.params.use_vehicle_status:
            return np.ones(self.num_vehicles, bool)
        entry = self._pending.get(k)
        status = entry.msgs.get((STATUS, -1)) if entry is not None else None
        return None if status is None else np.asarray(status.valid, bool)

    def _resend_trigger(self, k: int) -> tuple[str, int]:
        """The input whose second arrival for an already computed tick means the tick was re-sent."""
        if self.params.use_vehicle_status:
            return (STATUS, -1)
        return self._due_inputs(k)[0] if self._due_inputs(k) else (CLOCK, -1)

    def _on_velocity_setpoint(self, i: int, msg: TwistStamped) -> None:
        if i in self._stepped:
            k = tick_of_stamp(msg.header.stamp)
            lin = msg.twist.linear
            if k is not None and k % self._step_ticks == 0 and not all(
                    math.isfinite(c) for c in (lin.x, lin.y, lin.z)):
                self._buffer(SETPOINT, i, None, k)  # the step's answer: no new set point
                return
        v_ned = self._valid_velocity(i, msg)
        if v_ned is None:
            return
        t_s = self._fresh_stamp(i, "cmd/velocity", msg)
        if t_s is None:
            return
        if i == self.mouse:  # the referee's escape command of tick k: awaited, buffered by tick
            self._buffer(MOUSE, i, (v_ned, t_s), tick_of_stamp(msg.header.stamp))
        elif i in self._stepped and (k := tick_of_stamp(msg.header.stamp)) is not None and (
                k % self._step_ticks == 0):  # a task step's set point: awaited, buffered by tick
            self._buffer(SETPOINT, i, (v_ned, t_s), k)
        else:
            self._velocity_sp[i] = v_ned
            self._sp_stamp_s[i] = t_s

    def _fresh_stamp(self, i: int, topic: str, msg: Any) -> float | None:
        """The set point's stamp [s], or None (rejected, counted, warned): ahead of the latest tick seen
        by more than one tick, or older than ``command_timeout_s``."""
        t_s = seconds_of_stamp(msg.header.stamp)
        now_s = max(self._max_tick_seen, 0) * BASE_DT_S
        ns = vehicle_namespace(i)
        if t_s > now_s + BASE_DT_S + 1e-9:
            return self._reject("stamp", f"{ns}/{topic} rejected: stamp {t_s:.3f} s is ahead of the "
                                f"simulated time {now_s:.3f} s (stamp set points with the /clock time: "
                                "use_sim_time)", i)
        timeout_s = self.fleet_control.command_timeout_s
        if timeout_s > 0 and now_s - t_s > timeout_s + 1e-9:
            return self._reject("stamp", f"{ns}/{topic} rejected: stale, stamp {t_s:.3f} s is more than "
                                f"vehicle.command_timeout_s={timeout_s:g} s before the simulated time "
                                f"{now_s:.3f} s", i)
        return t_s

    def _valid_velocity(self, i: int, msg: TwistStamped) -> np.ndarray | None:
        """The set point as an NED velocity [m/s], or None (rejected, counted, warned)."""
        ns = vehicle_namespace(i)
        if self.modes[i] not in ("velocity", "velocity_height"):
            return self._reject("mode", f"{ns}/cmd/velocity ignored: {ns} is in {self.modes[i]} mode "
                                "(send cmd/pose)", i)
        lin = msg.twist.linear
        v = np.array([lin.x, lin.y, lin.z], float)
        if not np.all(np.isfinite(v)):
            return self._reject("non_finite", f"{ns}/cmd/velocity rejected: non-finite {v.tolist()}", i)
        frame = msg.header.frame_id
        if frame == MAP_FRAME:
            return enu_to_ned(v)
        if frame == base_link_frame(i):
            # FLU body velocity -> world with the estimated heading (the tilt is left out: it comes from
            # the velocity loop itself and would turn a horizontal command into a climb or sink)
            psi = self.assembler.estimated_state()[i, HEADING]
            if not np.isfinite(psi):
                return self._reject("no_attitude", f"{ns}/cmd/velocity in {frame} rejected: no attitude "
                                    "estimate yet (imu/data)", i)
            c, s = math.cos(psi), math.sin(psi)
            fwd, right, down = v[0], -v[1], -v[2]  # FLU -> FRD
            return np.array([c * fwd - s * right, s * fwd + c * right, down])
        return self._reject("frame", f"{ns}/cmd/velocity rejected: frame_id {frame!r} must be "
                            f"{MAP_FRAME!r} or {base_link_frame(i)!r}", i)

    def _on_pose_setpoint(self, i: int, msg: PoseStamped) -> None:
        ns = vehicle_namespace(i)
        if self.modes[i] != "waypoint":
            self._reject("mode", f"{ns}/cmd/pose ignored: {ns} is in {self.modes[i]} mode "
                         "(send cmd/velocity)", i)
            return
        if msg.header.frame_id != MAP_FRAME:
            self._reject("frame", f"{ns}/cmd/pose rejected: frame_id {msg.header.frame_id!r} must be "
                         f"{MAP_FRAME!r}", i)
            return
        p, o = msg.pose.position, msg.pose.orientation
        pos = np.array([p.x, p.y, p.z], float)
        q = np.array([o.x, o.y, o.z, o.w], float)
        psi = float(quaternion_enu_flu_to_euler_ned_frd(q)[2])
        if not (np.all(np.isfinite(pos)) and math.isfinite(psi)):
            self._reject("non_finite", f"{ns}/cmd/pose rejected: position {pos.tolist()} or orientation "
                         f"{q.tolist()} not finite (or a zero quaternion)", i)
            return
        t_s = self._fresh_stamp(i, "cmd/pose", msg)
        if t_s is None:
            return
        self._waypoint_sp[i, 0:3] = enu_to_ned(pos)
        self._waypoint_sp[i, 3] = psi
        self._sp_stamp_s[i] = t_s

    def _reject(self, reason: str, text: str, i: int) -> None:
        self.setpoints_rejected[i] += 1
        count = self.counters.count(f"setpoint_rejected_{reason}")
        self.get_logger().warning(f"{text} ({count} rejected for this reason)",
                                  throttle_duration_sec=self.params.report_period_s)
        return None

    # --- the control step -------------------------------------------------------------------------------
    def _process_through(self, k: int, compute: bool = True) -> None:
        """Apply the buffered inputs of ticks <= k in order; compute and publish tick k."""
        for j in sorted(t for t in self._pending if t <= k):
            self._apply(self._pending.pop(j).msgs)
            if j < k or not compute:
                self.counters.count("skipped_ticks")
        self._last_tick = max(self._last_tick, k)
        if compute:
            self._compute_and_publish(k)

    def _apply(self, msgs: dict[tuple[str, int], Any]) -> None:
        """One tick's inputs into the held values (the sensors of all vehicles converted together)."""
        for (kind, i), msg in msgs.items():
            if kind in FLEET_SENSORS:
                self.assembler.update_fleet(FLEET_SENSORS[kind][2], *msg)
            elif kind in (MOUSE, SETPOINT):
                if msg is not None:  # (None: a step answered with no new set point)
                    self._velocity_sp[i], self._sp_stamp_s[i] = msg  # already validated, NED
                if kind == SETPOINT:
                    self._step_given[i] = msg is not None
            elif kind == STATUS:
                self._valid = np.asarray(msg.valid, bool)
                if msg.faults_listed:  # else the last listed set holds
                    self._fault_follower.update(msg.faults)

    def controls(self, ex: np.ndarray, now_s: float | None = None) -> np.ndarray:
        """Controls (N, 5) ``[pitch, roll, throttle, yaw_rate, battery]`` for this tick from eX (N, 20):
        the held set points through ``FleetControl`` (rows of vehicles not under a controller are not
        published); ``now_s``: the tick's simulated time [s] (None: nothing expires)."""
        # a waypoint vehicle without a set point holds its position and heading of the episode start
        hold = np.isnan(self._waypoint_sp[:, 0]) & (np.asarray(self.modes) == "waypoint")
        if hold.any():
            start = hold_pose(ex)
            ok = hold & np.all(np.isfinite(start), axis=1)
            self._waypoint_sp[ok] = start[ok]
        targets = np.full((self.num_vehicles, TARGET_WIDTH), np.nan)
        targets[:, 0:3] = self._velocity_sp
        waypoint = self.fleet_control.rows["waypoint"]
        targets[waypoint, 0:4] = self._waypoint_sp[waypoint]
        return self.fleet_control.controls(targets, ex, self._valid, self._headings, now_s, self._sp_stamp_s)

    def _drop_lost_setpoints(self) -> None:
        """comm_loss: a vehicle without a link at this tick keeps the set point it held at the last tick
        (what arrived since is dropped; the held one expires after command_timeout_s as any other), as the
        Simulator's ``drop_commands`` for the set points issued at this tick's time."""
        lost = self.faults.links_lost
        if lost is not None and self._link_held is not None:
            velocity, waypoint, stamp_s = self._link_held
            self._velocity_sp[lost] = velocity[lost]
            self._waypoint_sp[lost] = waypoint[lost]
            self._sp_stamp_s[lost] = stamp_s[lost]

    def _compute_and_publish(self, k: int) -> None:
        if self._stepped:  # a step's set point counts as issued at every tick of its step, as in process
            self._sp_stamp_s[self._step_given] = k * BASE_DT_S
        self._drop_lost_setpoints()
        u = self.controls(self.assembler.estimated_state(self._valid), k * BASE_DT_S)
        self._link_held = (self._velocity_sp.copy(), self._waypoint_sp.copy(), self._sp_stamp_s.copy())
        fc = self.fleet_control
        self._report_failsafe(k)
        failsafe = fc.failsafe
        stamp = stamp_from_tick(k)
        rows = self._controlled_rows
        cmd = self._fleet_cmd
        cmd.header.stamp = stamp
        cmd.run_id = self.params.run_id
        cmd.vehicles = uint32_array(rows)
        u_rows = u[rows]
        cmd.pitch, cmd.roll, cmd.throttle, cmd.yaw_rate, cmd.battery_voltage = (
            float64_array(u_rows[:, c]) for c in range(5))
        cmd.failsafe = [failsafe[i] for i in self.controlled]
        cmd.disarm = fc.landed[rows].tolist()
        cmd.setpoints_rejected = uint32_array(self.setpoints_rejected[rows])
        cmd.setpoints_clamped = uint32_array(fc.setpoints_clamped[rows])
        self._last_cmds = [(self._fleet_cmd_pub, cmd)] if rows.size else []
        # uavN/cmd/attitude, the same command, for its readers (a bag, ros2 topic echo)
        for j in listened(self._cmd_pub_list, rows).tolist():
            i = self.controlled[j]
            msg = AttitudeCommand()
            msg.header.stamp = stamp
            msg.header.frame_id = base_link_frd_frame(i)
            msg.pitch, msg.roll, msg.throttle, msg.yaw_rate, msg.battery_voltage = u_rows[j].tolist()
            msg.failsafe, msg.disarm = failsafe[i], bool(fc.landed[i])
            msg.setpoints_rejected = int(self.setpoints_rejected[i])
            msg.setpoints_clamped = int(fc.setpoints_clamped[i])
            self._last_cmds.append((self._cmd_pubs[i], msg))
        for pub, msg in self._last_cmds:
            pub.publish(msg)
        self.ticks_computed += 1

    def _report_failsafe(self, k: int) -> None:
        """Count and warn (throttled) about the clamps and failsafe onsets of this tick."""
        fc = self.fleet_control
        for name, values, seen in (("setpoints_clamped", fc.setpoints_clamped, self._clamped_seen),
                                   ("failsafe_onsets", fc.failsafe_onsets, self._onsets_seen)):
            new = np.flatnonzero(values != seen)
            if not new.size:
                continue
            self.counters.count(name, int((values - seen).sum()))
            seen[:] = values
            who = ", ".join(vehicle_namespace(int(i)) for i in new)
            period_s = self.params.report_period_s
            # two calls: rclpy throttles per call site, and clamps must not silence an onset
            if name == "setpoints_clamped":
                self.get_logger().warning(f"{who}: velocity set point clamped to the controller's "
                                          f"{MAX_SPEED_MPS:g} m/s per body axis ({int(values.sum())} "
                                          "clamped so far)", throttle_duration_sec=period_s)
            else:
                self.get_logger().warning(f"{who}: no set point for more than vehicle.command_timeout_s="
                                          f"{fc.command_timeout_s:g} s at t = {k * BASE_DT_S:.2f} s: "
                                          f"failsafe {fc.failsafe_mode!r} until the next",
                                          throttle_duration_sec=period_s)

    def _report_waiting(self) -> None:
        """Say which inputs the oldest incomplete tick still waits for (lockstep debugging); once it has
        waited long, make the missing sensors' subscriptions again (``RenewableInputs``)."""
        if not self._pending:
            self._waiting = None
            self._inputs.wait_ended()
            return
        now = self._wall.now().nanoseconds * 1e-9
        k = min(self._pending)
        if self._waiting is None or self._waiting[0] != k:  # a new oldest tick: its wait starts now
            self._waiting = (k, now)
            self._inputs.wait_ended()
            return
        waited = now - self._waiting[1]
        entry = self._pending[k]
        missing = sorted(entry.missing) if entry.missing is not None else [(STATUS, -1)]
        names = ", ".join(f"{vehicle_namespace(i)}/{kind}" if i >= 0 else FLEET_SENSORS.get(kind, (kind,))[0]
                          for kind, i in missing)
        self.get_logger().warning(f"tick {k} (t = {k * BASE_DT_S:.2f} s) still waits for: "
                                  f"{names or 'nothing'} after {waited:.1f} s")
        renewed = self._inputs.wait_went_on(waited, missing)
        if renewed:
            self.counters.count("inputs_renewed", len(renewed))
            self.get_logger().warning(f"tick {k}: subscribed again to {', '.join(renewed)}")


def main(argv: list[str] | None = None) -> int:
    return run_node(FlightControllerNode, argv)


if __name__ == "__main__":
    sys.exit(main())

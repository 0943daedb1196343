"""referee: the task's rules over the ROS graph -- rewards, persons found, termination, the mouse.

The node runs the core's task (``tasks.make_task`` on a ``tasks.TaskContext``) and area
(``BoxWithPersonsArea`` with the Simulator's named streams, reset once per episode) on the ground
truth, in the Simulator's order (docs/NODE_GRAPH.md step 4), so its rewards equal
``Simulator.step``'s for the same trajectory:

- on the ground truth of tick k (``uavN/ground_truth/odom`` of every vehicle, ``GroundTruthSync``) and
  the validity of tick k (``/sim/vehicle_status``, qrsim_ros/VehicleStatus from vehicle_dynamics):
  the task's per-tick term (``on_tick``: generic tasks' control cost, with the attitude commands
  the vehicles flew, ``uavN/cmd/attitude``); on task-step ticks (k a multiple of task.dt_s / 0.02)
  the step's reward, the cumulative reward and the done reason, published on ``/referee/status``
  (qrsim_ros/TaskStatus, latched); then the area's found rule with tick k+1 on the states of t_k
  (the Simulator does it at the start of tick k+1);
- cats and mouse: the mouse's escape (``CatsMouseTask.environment_actions``) from the cats' estimated
  positions of t_k (``uavN/gps/fix``, held between GPS ticks, NaN for invalid vehicles, as the
  Simulator's eX), published on ``uav<N>/cmd/velocity`` (frame ``map``) stamped t_k, every tick;
- episodes: a new episode number on ``/sim/vehicle_status`` resets the area (new terrain and persons),
  the plume and the task, continuing the random streams (one draw per episode, as
  ``Simulator.reset()``; the task's placement too, as vehicle_dynamics draws it); ``/referee/status`` is
  published at the reset (step 0);
- retrieve: the task is the mission's world (targets, grasper, self-test); the referee serves its devices
  to mission_autopilot (``ros.retrieve_referee``: ``/referee/mission``, ``uavN/camera/target_centroids``,
  ``uavN/grasper/holding`` and ``/command``, ``uavN/mission/mode``, ``uavN/self_test``; docs/RETRIEVE.md),
  steps it every tick and hands it the faults that start at each tick.

Services: ``/referee/reset`` (std_srvs/Trigger) calls ``/vehicle_dynamics/reset`` and answers with
its result; ``/plume/get_locations`` and ``/plume/submit_estimates`` (plume tasks: the reference
locations in ``map`` and the task's reward of submitted estimates; other tasks answer empty / not
accepted). Latched topics: ``/area/terrain`` (nav_msgs/OccupancyGrid of terrain classes 0..K, one
cell per metre, layout of ``terrain.GridGeometry``) and ``/referee/markers``
(visualization_msgs/MarkerArray, at most once per ``marker_period_s`` of simulated time and only when
something changed: search and rescue: the persons, red until found then green; cats and mouse: the
vehicles' labels and a sphere on the mouse; keep spot / goto waypoint: the targets).

Visualisation: ``ros.referee_display.RefereeDisplay`` (the URDF on ``uavN/robot_description``, the
paths ``uavN/ground_truth/path``, ``/viz/task_status``, the cats' and mouse's labels and the targets on
``/referee/markers``, ``/viz/terrain``; at most once per period and only when changed).

After ``done`` the task is frozen (no further rewards or finds) and the final status is repeated on
every task step until the next reset.
"""

from __future__ import annotations

import array
import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import Point, TwistStamped
from nav_msgs.msg import OccupancyGrid
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import NavSatFix
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from qrsim_ros.core.common.frames import Array, ned_to_enu
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ticks_per_update
from qrsim_ros.core.engine.world import ScenarioWorld
from qrsim_ros.core.tasks.episode import Episode
from qrsim_ros.core.tasks.retrieve import RetrieveTask
from qrsim_ros.core.tasks.rules import (
    PLACEMENT_STREAM,
    CatsMouseTask,
    GenericTask,
    PlumeTask,
    initial_placement,
)
from qrsim_ros.core.vehicles.pelican import CONTROL_LIMITS, HOVER_CONTROL
from qrsim_ros.core.world.area import BoxArea, BoxWithPersonsArea
from qrsim_ros.msg import AttitudeCommand, CommsPacket, TaskStatus, VehicleStatus
from qrsim_ros.ros import markers as viz
from qrsim_ros.ros.estimated_state import EstimatedStateAssembler
from qrsim_ros.ros.from_messages import listed_faults
from qrsim_ros.ros.ground_truth import GROUND_TRUTH_SOURCE, GroundTruthSync, Outgoing
from qrsim_ros.ros.names import (
    FIRST_EPISODE,  # the episode number of the launch's placement
    MAP_FRAME,
    base_link_frame,
    base_link_frd_frame,
    vehicle_namespace,
)
from qrsim_ros.ros.node import Counters, ScenarioNode, run_node
from qrsim_ros.ros.parameters import SCENARIO_PARAMETERS, Param, ParamTable
from qrsim_ros.ros.qos import QOS_LATCHED, QOS_RELIABLE
from qrsim_ros.ros.referee_display import RefereeDisplay
from qrsim_ros.ros.retrieve_referee import RetrieveReferee
from qrsim_ros.ros.stamps import stamp_from_tick, tick_of_stamp
from qrsim_ros.srv import GetPlumeLocations, SubmitPlumeEstimates

#: Height of the person markers [m].
PERSON_MARKER_HEIGHT_M = viz.PERSON_MARKER_HEIGHT_M
#: Ticks of ground truth / status / GPS buffered while waiting for their partners.
MAX_PENDING_TICKS = 100


#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "referee", *SCENARIO_PARAMETERS,
    Param("reset_timeout_s", 10.0, "how long /referee/reset waits for /vehicle_dynamics/reset [s, wall]",
          lo=0.1, hi=600.0),
    Param("marker_period_s", 1.0, "least simulated time between two /referee/markers [s]", lo=0.0, hi=3600.0),
    Param("viz_period_s", viz.VIZ_PERIOD_S,
          "least simulated time between two /viz/task_status (0: no task status, paths or labels) [s]",
          lo=0.0, hi=3600.0),
    Param("path_period_s", viz.PATH_PERIOD_S,
          "least simulated time between two poses (and messages) of uavN/ground_truth/path [s]",
          lo=0.02, hi=3600.0),
    Param("path_max_poses", viz.PATH_MAX_POSES,
          "poses kept in each uavN/ground_truth/path (the oldest go first)", lo=1, hi=1_000_000),
    Param("robot_description_file", "",
          "URDF published on uavN/robot_description (empty: the package's urdf/pelican.urdf)"),
    GROUND_TRUTH_SOURCE,
    Param("exit_when_done", False, "end the node (exit status 0) 1 s after the episode is done: how the "
          "launch files end the run (launch argument keep_alive:=true keeps it running)"),
    Param("await_grasper_commands", False,
          "retrieve, lockstep mission runs: step the tick after a task step only once every vehicle's "
          "uavN/grasper/command of that step is in, as the Simulator applies a step's grasper command "
          "from its first tick (docs/RETRIEVE.md)"),
)


class RefereeNode(ScenarioNode):
    """The task's rules, the persons area and the mouse (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("referee", PARAMETERS)
        p, sc = self.params, self.scenario
        n = self.num_vehicles
        if sc.seed == 0:
            self.get_logger().warning("scenario seed 0 (from the clock): persons and plume cannot match the "
                                      "other nodes'; give every node the same concrete seed")
        # the world (area, persons, plume) and the task's episode, as in the Simulator
        streams = RandomStreams(sc.seed)
        self.world = ScenarioWorld(sc, streams)
        self.area: BoxArea = self.world.area
        self.episode = Episode(sc, self.area)
        self.task = self.episode.task
        # the task's own placement (landing and drop sites, targets), drawn as vehicle_dynamics draws it
        self._placement_rng = streams.get(PLACEMENT_STREAM)
        self.ticks_per_task_step = self.episode.ticks_per_task_step
        self.tick = 0
        self.counters = Counters(self, ["status_rejected", "commands_rejected", "ticks_dropped",
                                        "task_steps_missed", "modes_rejected", "modes_late"])
        self.counters.sim_time_s = 0.0  # stamped with the ground truth's time (see _on_ground_truth)
        self._names = [vehicle_namespace(i) for i in range(n)]
        self._episode = FIRST_EPISODE - 1  # episode whose area/plume were drawn last
        self._joined = False
        self._exit_timer: Any = None
        #: run_node ends the node with this status once set (exit_when_done)
        self.exit_status: int | None = None

        # inputs
        self._gt: dict[int, Array] = {}
        self._status: dict[int, VehicleStatus] = {}
        self._fixes: dict[int, dict[int, NavSatFix]] = {}
        # the status comes with the fleet's ground truth (or on its own topic for 'odometry')
        self.sync = GroundTruthSync(self, n, self._on_ground_truth, source=p.ground_truth_source,
                                    on_status=self._on_status)
        self._uses_controls = isinstance(self.task, GenericTask) and sc.task.control_cost
        self._controls_latest = np.tile(HOVER_CONTROL, (n, 1))
        self._controls_by_tick: list[dict[int, Array]] = [{} for _ in range(n)]
        if self._uses_controls:
            for i in range(n):
                self.create_subscription(AttitudeCommand, f"{self._names[i]}/cmd/attitude",
                                         lambda m, i=i: self._on_attitude(i, m), QOS_RELIABLE)
        self.mouse: int | None = None
        self._last_mouse: TwistStamped | None = None
        if isinstance(self.task, CatsMouseTask):
            self.mouse = self.task.mouse
            self._gps_ticks = ticks_per_update("gps_receiver.dt_s", sc.vehicle.gps_receiver.dt_s)
            self.positions = EstimatedStateAssembler(n, sc.origin)
            for i in range(n):
                self.create_subscription(NavSatFix, f"{self._names[i]}/gps/fix",
                                         lambda m, i=i: self._on_fix(i, m), QOS_RELIABLE)
            self._mouse_pub = self.create_publisher(TwistStamped, f"{self._names[self.mouse]}/cmd/velocity",
                                                    QOS_RELIABLE)
        # the team's radio traffic, scored as messages sent (the comms node delivers them)
        self._messages_sent = 0
        if sc.comms.on:
            for i in range(n):
                self.create_subscription(CommsPacket, f"{self._names[i]}/comms/tx", self._on_tx, QOS_RELIABLE)
        # outputs
        self._status_pub = self.create_publisher(TaskStatus, "/referee/status", QOS_LATCHED)
        self._terrain_pub = self.create_publisher(OccupancyGrid, "/area/terrain", QOS_LATCHED)
        self._markers_pub = self.create_publisher(MarkerArray, "/referee/markers", QOS_LATCHED)
        #: the retrieve mission's devices (briefing, camera, grasper, self-test, modes) on topics
        self.retrieve = (RetrieveReferee(self, self.task, self._markers_pub, self._on_grasper_command)
                         if isinstance(self.task, RetrieveTask) else None)
        #: a tick waiting for the grasper commands of the task step before it (await_grasper_commands)
        self._awaiting_grasper: int | None = None
        self._steps_ticks = self._uses_controls or self.retrieve is not None  # the task's per-tick term
        self._last_markers: tuple[Any, ...] | None = None
        self._markers_tick = -(10**9)
        self._markers_due = False
        self.display = RefereeDisplay(self, sc, self.params, self._names, self.mouse, self._markers_pub)
        # the launch's first episode drawn now, before tick 0 (the same draws as at its first tick): the
        # terrain of a search area takes about a second, which a free-running clock does not wait for
        self._draw_episodes(FIRST_EPISODE)
        if self.world.scene is not None:  # the 3-D scene's ground and obstacles, once (they never change)
            self._scene_pub = self.create_publisher(MarkerArray, "/scene/markers", QOS_LATCHED)
            self._scene_pub.publish(viz.scene_markers(self.world.scene, MAP_FRAME, stamp_from_tick(0)))
        # services
        # The reset service awaits the dynamics' answer: a callback group is busy while its callback
        # runs (an awaiting coroutine included), so the service, and the client with its timeout
        # timer, get groups of their own and the ground truth keeps flowing meanwhile.
        self._reset_group = MutuallyExclusiveCallbackGroup()
        self._client_group = MutuallyExclusiveCallbackGroup()
        self._dynamics_reset = self.create_client(Trigger, "/vehicle_dynamics/reset",
                                                  callback_group=self._client_group)
        self.create_service(Trigger, "/referee/reset", self._on_reset, callback_group=self._reset_group)
        self.create_service(GetPlumeLocations, "/plume/get_locations", self._on_get_locations)
        self.create_service(SubmitPlumeEstimates, "/plume/submit_estimates", self._on_submit_estimates)
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self.get_logger().info(f"referee: scenario {sc.name!r}, task {sc.task.type!r}, {n} vehicles, "
                               f"task step {sc.task.dt_s} s x {sc.task.duration_steps}")

    # --- episode state --------------------------------------------------------------------------------
    # the episode's state (core ``Episode``)
    step_count = property(lambda self: self.episode.step_count)
    last_reward = property(lambda self: self.episode.last_reward)
    total_reward = property(lambda self: self.episode.total_reward)
    done = property(lambda self: self.episode.done)
    done_reason = property(lambda self: self.episode.done_reason)
    plume_reward = property(lambda self: self.episode.plume_reward)
    plume_locations_ned = property(lambda self: self.world.plume_locations_ned)

    def _draw_episodes(self, episode: int) -> None:
        """Draw the areas (and plumes) and task placements of the episodes up to ``episode``, in order."""
        while self._episode < episode:
            self.world.new_episode()
            initial_placement(self.task, self._placement_rng)
            self._episode += 1

    def _new_episode(self, episode: int, k: int, x: Array, valid: Array) -> None:
        """Draw the area (and plume) of ``episode`` (continuing the streams), reset the task on x."""
        if k != 0:
            self.get_logger().warning(f"joined episode {episode} at tick {k} (started after "
                                      "vehicle_dynamics?): rewards and finds count from here")
        self._draw_episodes(episode)
        self.episode.set_plume_reference(self.world.plume_reference_samples)
        self.tick = k
        self.episode.begin(x, valid, tick=k)  # joined late: the steps already flown count
        self._controls_latest[:] = HOVER_CONTROL
        for hist in self._controls_by_tick:
            hist.clear()
        if self.mouse is not None:
            self.positions.clear()
        self._markers_due = True
        self._markers_tick = -(10**9)  # tick numbers restart: publish the new episode's markers at once
        self.display.new_episode(x, self.tick)

    # --- inputs -----------------------------------------------------------------------------------------
    def _on_ground_truth(self, k: int, x: Array, accel: Array | None, present: np.ndarray,
                         reset: bool) -> Outgoing:
        if reset:  # a new episode's tick 0: whatever is buffered belongs to the old one
            self._gt = {t: v for t, v in self._gt.items() if t <= k}
            self._messages_sent = 0
        self.counters.sim_time_s = self.sync.counters.sim_time_s  # stamped like the ground truth
        self._gt[k] = x
        self._try(k)
        return []

    def _on_tx(self, msg: CommsPacket) -> None:
        self._messages_sent += 1

    def _on_status(self, msg: VehicleStatus) -> None:
        if len(msg.valid) != self.num_vehicles:
            self.counters.count("status_rejected")
            self.get_logger().warning(f"/sim/vehicle_status with {len(msg.valid)} vehicles, expected "
                                      f"{self.num_vehicles}: ignored", throttle_duration_sec=5.0)
            return
        k = int(msg.tick)
        repeat = self._joined and int(msg.episode) == self._episode and k == self.tick
        if repeat and self._last_mouse is not None:
            # vehicle_dynamics re-sent tick k (a lockstep input is late): the mouse's command may be it
            self._mouse_pub.publish(self._last_mouse)
            return
        if int(msg.episode) != self._episode and self._joined:
            # a new episode: buffered ticks of the old one are stale
            self._status = {t: s for t, s in self._status.items() if t <= k and s.episode == msg.episode}
            self._fixes = {t: f for t, f in self._fixes.items() if t <= k}
        self._status[k] = msg
        self._try(k)

    def _on_fix(self, i: int, msg: NavSatFix) -> None:
        k = tick_of_stamp(msg.header.stamp)
        if k is None:
            self.counters.count("stamps_off_grid")
            return
        self._fixes.setdefault(k, {})[i] = msg
        self._try(k)

    def _on_attitude(self, i: int, msg: AttitudeCommand) -> None:
        u = np.array([msg.pitch, msg.roll, msg.throttle, msg.yaw_rate, msg.battery_voltage], float)
        frame = msg.header.frame_id
        if frame == base_link_frame(i):  # FLU: pitch and yaw rate change sign
            u[0], u[3] = -u[0], -u[3]
        elif frame not in ("", base_link_frd_frame(i)):
            self.counters.count("commands_rejected")
            return
        if not np.all(np.isfinite(u)):
            self.counters.count("commands_rejected")
            return
        u = np.clip(u, CONTROL_LIMITS[:, 0], CONTROL_LIMITS[:, 1])  # as vehicle_dynamics clamps
        self._controls_latest[i] = u
        k = tick_of_stamp(msg.header.stamp)
        if k is None:  # not on the tick grid: only the latest command counts
            return
        hist = self._controls_by_tick[i]
        hist[k] = u
        while len(hist) > MAX_PENDING_TICKS:
            del hist[min(hist)]

    def _try(self, k: int) -> None:
        """Process tick k once its ground truth, status (and, for the mouse, GPS fixes) are in."""
        if k not in self._gt or k not in self._status:
            self._trim()
            return
        status = self._status[k]
        valid = np.asarray(status.valid, bool)
        if self.mouse is not None and k % self._gps_ticks == 0:
            fixes = self._fixes.get(k, {})
            if not all(i in fixes for i in np.flatnonzero(valid)):
                return
        if self._awaiting_grasper is not None and k > self._awaiting_grasper:
            return  # in order: an earlier tick waits for the grasper commands
        if self._grasper_due(k, status):
            self._awaiting_grasper = k
            return
        self._awaiting_grasper = None
        x = self._gt.pop(k)
        del self._status[k]
        stale = [t for t in self._gt if t < k]
        for old in stale:
            del self._gt[old]
        if stale:
            self.counters.count("ticks_dropped", len(stale))
            self.get_logger().warning(f"ticks {stale} had no vehicle status (or GPS fixes) when tick {k} "
                                      "completed: not refereed", throttle_duration_sec=5.0)
        for old in [t for t in self._status if t < k]:
            del self._status[old]
        self._step(k, status, x, valid)

    def _grasper_due(self, k: int, status: VehicleStatus) -> bool:
        """Tick k follows a task step whose grasper commands (await_grasper_commands) are not all in."""
        step = k - 1
        return (self.params.await_grasper_commands and self.retrieve is not None and not self.done
                and self._joined and int(status.episode) == self._episode and step % self.ticks_per_task_step
                == 0 and step >= 0 and not self.retrieve.commands_in(step))

    def _on_grasper_command(self) -> None:
        """A grasper command came in: the waiting tick, and any complete one after it, may go on."""
        if self._awaiting_grasper is None:
            return
        waiting, self._awaiting_grasper = self._awaiting_grasper, None
        for k in sorted(t for t in self._gt if t >= waiting and t in self._status):
            if k not in self._gt:  # (processed, or dropped as stale, by an earlier call)
                continue
            self._try(k)
            if self._awaiting_grasper is not None:
                return

    def _trim(self) -> None:
        for buf in (self._gt, self._status, self._fixes):
            while len(buf) > MAX_PENDING_TICKS:
                del buf[min(buf)]
                self.counters.count("ticks_dropped")

    # --- the task ---------------------------------------------------------------------------------------
    def _step(self, k: int, status: VehicleStatus, x: Array, valid: Array) -> None:
        """Tick k of the Simulator's order: the faults that started at k, the task terms of the step that
        ended at t_k, then the area with tick k+1 on x_k, then the mouse's command of t_k."""
        episode = int(status.episode)
        if episode != self._episode or not self._joined:
            self._joined = True
            self._new_episode(episode, k, x, valid)
            if self.retrieve is not None:
                self.retrieve.new_episode(episode, k, listed_faults(status))
                self.retrieve.publish_devices(k)
            self._publish_status(k)
            self._publish_terrain(k)  # after the status the autopilots answer (big at 100 vehicles)
        else:
            if k <= self.tick:  # a tick of this episode already refereed (re-sent): nothing new
                return
            self.tick = k
            if self.retrieve is not None:
                self.retrieve.apply_modes(k)
                if not self.done:
                    self.retrieve.faults_of_tick(listed_faults(status))
            self.episode.observe(x, valid)
            if not self.done and self._steps_ticks:
                controls = (self._applied_controls(k, np.asarray(status.command_fresh, bool))
                            if self._uses_controls else self._controls_latest)
                self.episode.on_tick(controls)
            if k % self.ticks_per_task_step == 0:
                if self.done:  # frozen: the final status again, with no reward of its own
                    self.episode.last_reward = 0.0
                else:
                    self._task_step(k)
                    if self.retrieve is not None:
                        self.retrieve.publish_devices(k)
                self._publish_status(k)
        persons = isinstance(self.area, BoxWithPersonsArea)
        if persons and not self.done and self.area.step(k + 1, x, valid):
            self._markers_due = True
        if self._markers_due and (k - self._markers_tick) * BASE_DT_S >= self.params.marker_period_s:
            self._publish_markers(k)
        if self.mouse is not None:
            self._publish_mouse(k, valid)
        self.display.on_tick(k, x, valid)

    def _applied_controls(self, k: int, fresh: Array) -> Array:
        """The controls flown in the step t_(k-1) -> t_k: the command stamped t_(k-1) if received, else
        the latest; hover where vehicle_dynamics reports the command expired."""
        u = self._controls_latest.copy()
        for i, hist in enumerate(self._controls_by_tick):
            if k - 1 in hist:
                u[i] = hist[k - 1]
        if fresh.shape == (self.num_vehicles,):
            u[~fresh] = HOVER_CONTROL
        return u

    def _task_step(self, k: int) -> None:
        """One task step (``Simulator.step`` after its ticks): reward, cumulative reward, done. The step
        number is the tick's (k / ticks per step), so it stays on the simulated time even if a step's
        tick was lost."""
        step = k // self.ticks_per_task_step
        if step != self.step_count + 1:
            self.counters.count("task_steps_missed", max(0, step - self.step_count - 1))
            self.get_logger().warning(f"task step {step} follows step {self.step_count}: the ground truth of "
                                      "the steps between was not refereed", throttle_duration_sec=5.0)
        self.episode.end_step(step)
        if self.done:
            self.get_logger().info(f"episode {self._episode} done ({self.done_reason}) after "
                                   f"{self.step_count} steps: cumulative reward {self.total_reward:.6g}")
            if self.retrieve is not None:
                self.retrieve.log_record(k)

    def _exit_done(self) -> None:
        self.get_logger().info("the episode is done: exiting (exit_when_done)")
        self.exit_status = 0

    def _publish_status(self, k: int) -> None:
        msg = TaskStatus()
        msg.header.stamp = stamp_from_tick(k)
        msg.header.frame_id = MAP_FRAME
        msg.run_id = self.run_id
        msg.scenario = self.scenario.name
        msg.episode = self._episode
        msg.step = self.step_count
        msg.time = k * BASE_DT_S
        msg.reward = float(self.last_reward)
        msg.cumulative_reward = float(self.total_reward)
        if isinstance(self.area, BoxWithPersonsArea):
            msg.persons_found = int(self.area.found.sum())
            msg.persons_total = self.area.num_persons
        msg.vehicle_names = list(self._names)
        msg.vehicle_valid = [bool(v) for v in self.episode.context.valid_flags]
        msg.vehicles_lost = sum(not v for v in msg.vehicle_valid)
        msg.messages_sent = self._messages_sent
        msg.done = self.done
        msg.done_reason = self.done_reason
        self._status_pub.publish(msg)
        if self.done and self.params.exit_when_done and self._exit_timer is None:
            # a moment for the final (latched) status to reach its subscribers, then run_node returns 0
            self._exit_timer = self.create_timer(1.0, self._exit_done,
                                                 clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.display.last_status = msg

    # --- cats and mouse ---------------------------------------------------------------------------------
    def _publish_mouse(self, k: int, valid: Array) -> None:
        for i, fix in self._fixes.pop(k, {}).items():
            self.positions.set_gps_fix(i, fix)
        for old in [t for t in self._fixes if t < k]:
            del self._fixes[old]
        ex = self.positions.estimated_state(valid)
        assert isinstance(self.task, CatsMouseTask) and self.mouse is not None
        v_ne = self.task.environment_actions(ex)[self.mouse]
        msg = TwistStamped()
        msg.header.stamp = stamp_from_tick(k)
        msg.header.frame_id = MAP_FRAME
        v = ned_to_enu(np.array([v_ne[0], v_ne[1], 0.0]))
        msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = (float(c) for c in v)
        self._mouse_pub.publish(msg)
        self._last_mouse = msg

    # --- area presentation ------------------------------------------------------------------------------
    def _publish_terrain(self, k: int) -> None:
        if not isinstance(self.area, BoxWithPersonsArea):
            return
        terrain = self.area.terrain
        geo = terrain.geometry
        msg = OccupancyGrid()
        msg.header.stamp = stamp_from_tick(k)
        msg.header.frame_id = MAP_FRAME
        msg.info.map_load_time = msg.header.stamp
        msg.info.resolution = float(geo.cell_size_m)
        msg.info.width = int(geo.cols)
        msg.info.height = int(geo.rows)
        msg.info.origin.position.x = float(geo.ymin_m)  # east
        msg.info.origin.position.y = float(geo.xmin_m)  # north
        msg.info.origin.position.z = float(-self.area.ground_z_m)
        msg.info.origin.orientation.w = 1.0
        msg.data = array.array("b", terrain.grid.astype(np.int8).tobytes())  # a buffer, not a list of cells
        self._terrain_pub.publish(msg)
        self.display.publish_terrain(msg, terrain.num_classes - 1)

    def _publish_markers(self, k: int) -> None:
        if not isinstance(self.area, BoxWithPersonsArea):
            self._markers_due = False
            return
        found = self.area.found
        centres = self.area.persons_position_ned
        key = (self._episode, tuple(found.tolist()), centres.tobytes())
        self._markers_due = False
        if key == self._last_markers:
            return
        self._last_markers = key
        self._markers_tick = k
        stamp = stamp_from_tick(k)
        self._markers_pub.publish(viz.persons_markers(centres, found, self.area.person_size_m, MAP_FRAME,
                                                      stamp))

    # --- services -----------------------------------------------------------------------------------
    async def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        if not self._dynamics_reset.service_is_ready():
            response.success = False
            response.message = "/vehicle_dynamics/reset is not available"
            return response
        future = self._dynamics_reset.call_async(Trigger.Request())
        timer = self.create_timer(self.params.reset_timeout_s, future.cancel, clock=self._wall,
                                  callback_group=self._client_group)
        try:
            result = await future
        finally:
            self.destroy_timer(timer)
        if result is None:
            response.success = False
            response.message = (f"/vehicle_dynamics/reset did not answer within "
                                f"{self.params.reset_timeout_s} s")
        else:
            response.success = bool(result.success)
            response.message = result.message
        self.get_logger().info(f"reset requested: {response.success} {response.message}")
        return response

    def _on_get_locations(self, request: GetPlumeLocations.Request,
                          response: GetPlumeLocations.Response) -> GetPlumeLocations.Response:
        if isinstance(self.task, PlumeTask):
            enu = ned_to_enu(self.plume_locations_ned).reshape(-1, 3)
            response.locations = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in enu]
            response.samples_per_location = int(self.scenario.task.samples_per_location)
        return response

    def _on_submit_estimates(self, request: SubmitPlumeEstimates.Request,
                             response: SubmitPlumeEstimates.Response) -> SubmitPlumeEstimates.Response:
        if not isinstance(self.task, PlumeTask):
            response.accepted = False
            response.message = f"task {self.scenario.task.type!r} takes no plume estimates"
            return response
        k_expected = int(self.scenario.task.samples_per_location)
        m = len(self.plume_locations_ned)
        samples = np.asarray(request.samples, float)
        if request.samples_per_location != k_expected or samples.size != k_expected * m:
            response.accepted = False
            response.message = (f"expected samples_per_location={k_expected} and {k_expected} x {m} = "
                                f"{k_expected * m} samples, got {request.samples_per_location} and "
                                f"{samples.size}")
            return response
        try:
            reward = self.episode.evaluate_plume(samples.reshape(k_expected, m))
        except ValueError as exc:
            response.accepted = False
            response.message = str(exc)
            return response
        response.accepted = True
        response.reward = float(reward)
        self.get_logger().info(f"plume estimates: reward {reward:.6g}")
        return response


def main(argv: list[str] | None = None) -> int:
    return run_node(RefereeNode, argv)


if __name__ == "__main__":
    sys.exit(main())

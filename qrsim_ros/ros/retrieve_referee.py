"""The referee's side of the retrieve mission in the node graph (docs/RETRIEVE.md, "In the node graph").

In process the ``RetrieveTask`` is both the world the mission flies in and what the mission's vehicle
senses of it (``AutopilotView.retrieve``). In the graph the referee owns the task, so it also serves the
vehicle's retrieve devices over topics; ``ros.retrieve_link.RetrieveLink`` is the autopilot's end:

- ``/referee/mission`` (qrsim_ros/MissionBriefing, latched): the episode's landing site and drop site
  (map ENU), published at every episode start, after the task's placement;
- ``uavN/camera/target_centroids`` (qrsim_ros/ImagePoints) and ``uavN/grasper/holding``
  (qrsim_ros/GrasperState): the downward camera's target centroids and the grasper's report, on every
  task-step tick, stamped t_k (before ``/referee/status`` of that step);
- ``uavN/grasper/command`` (qrsim_ros/GrasperCommand): the autopilot's grasper command of every task step
  it answers, applied at the next tick the referee steps (as ``RetrieveTask.command_grasper`` in process).
  In a lockstep mission run (the referee's ``await_grasper_commands``) the referee steps the tick after a
  task step only once every vehicle's command of that step, and the mode reports it names, are in
  (``commands_in``);
- ``uavN/mission/mode`` (qrsim_ros/MissionMode): the mode log and the mission's end, which scores the
  episode (``RetrieveTask.report_mission``). A report stamped t_j is held until the referee steps tick
  j + 1 (``apply_modes``), so the distance of the ticks after task step j is booked under it whenever it
  arrives, as in process; in a lockstep mission run the tick after a task step also waits for the mode
  report that step's grasper command names (``mode_sequence``). A message whose mode number, end or
  height command (non-finite) is bad is ignored with a warning;
- service ``uavN/self_test`` (std_srvs/Trigger): the Initialise self-diagnosis, one draw of the episode's
  self-test stream per call (success = systems okay; ``RetrieveTask.self_test``);
- ``/referee/markers`` (RViz): the landing site, the drop zone and the targets (``markers.retrieve_markers``),
  on task-step ticks when they changed.

Faults: ``/sim/vehicle_status`` carries the faults active at each tick; the ones not active at the tick
before started at this tick and go to ``RetrieveTask.on_fault_started`` (a grasper fault drops what the
grasper holds), before the tick's ground truth is stepped, as in the Simulator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import Point
from std_srvs.srv import Trigger

from qrsim_ros.core.common.frames import ned_to_enu
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.mission.modes import MISSION_ENDS, mode_number
from qrsim_ros.core.tasks.retrieve import RetrieveTask
from qrsim_ros.core.world.targets import TETHERED
from qrsim_ros.msg import GrasperCommand, GrasperState, ImagePoints, MissionBriefing, MissionMode
from qrsim_ros.ros import markers as viz
from qrsim_ros.ros.from_messages import active_faults_of
from qrsim_ros.ros.names import MAP_FRAME, base_link_frd_frame, vehicle_namespace
from qrsim_ros.ros.qos import QOS_LATCHED, QOS_LATCHED_STREAM, QOS_RELIABLE
from qrsim_ros.ros.stamps import seconds_of_stamp, stamp_from_tick, tick_of_stamp

#: Topics and service of the retrieve devices (relative names; ``uavN/`` + these per vehicle).
BRIEFING_TOPIC = "/referee/mission"
CENTROIDS_TOPIC = "camera/target_centroids"
HOLDING_TOPIC = "grasper/holding"
GRASPER_COMMAND_TOPIC = "grasper/command"
MODE_TOPIC = "mission/mode"
SELF_TEST_SERVICE = "self_test"


def _fault_key(fault: Any) -> tuple[str, int, float]:
    """An active fault's identity (ActiveFault message): its id, vehicle and start time."""
    return fault.id, int(fault.vehicle), float(fault.since_s)


def _point_enu(ne: Sequence[float]) -> Point:
    e = ned_to_enu(np.array([float(ne[0]), float(ne[1]), 0.0]))
    return Point(x=float(e[0]), y=float(e[1]), z=float(e[2]))


class RetrieveReferee:
    """The retrieve task's topics and service on the referee ``node`` (module docstring); ``on_command()``
    is called after every grasper command or mode report received (a tick waiting for it may go on)."""

    def __init__(self, node: Any, task: RetrieveTask, markers_pub: Any,
                 on_command: Callable[[], None] | None = None) -> None:
        self.node = node
        self.task = task
        self._on_command_cb = on_command
        self._markers_pub = markers_pub
        self._markers_key: tuple[Any, ...] | None = None
        n = task.num_vehicles
        self._names = [vehicle_namespace(i) for i in range(n)]
        self._briefing_pub = node.create_publisher(MissionBriefing, BRIEFING_TOPIC, QOS_LATCHED)
        self._centroid_pubs = [node.create_publisher(ImagePoints, f"{ns}/{CENTROIDS_TOPIC}", QOS_RELIABLE)
                               for ns in self._names]
        self._holding_pubs = [node.create_publisher(GrasperState, f"{ns}/{HOLDING_TOPIC}", QOS_RELIABLE)
                              for ns in self._names]
        self._command_tick = [-1] * n  # the task step of each vehicle's latest grasper command
        self._mode_sequence_named = [0] * n  # the mode report each vehicle's latest grasper command names
        self._mode_sequence_in = [0] * n  # the highest mode report sequence received per vehicle
        #: mode reports held until their tick is stepped: (tick of the stamp, vehicle, message)
        self._modes_held: list[tuple[int, int, MissionMode]] = []
        for i, ns in enumerate(self._names):
            node.create_subscription(GrasperCommand, f"{ns}/{GRASPER_COMMAND_TOPIC}",
                                     lambda m, i=i: self._on_grasper_command(i, m), QOS_LATCHED)
            node.create_subscription(MissionMode, f"{ns}/{MODE_TOPIC}",
                                     lambda m, i=i: self._on_mode(i, m), QOS_LATCHED_STREAM)
            node.create_service(Trigger, f"{ns}/{SELF_TEST_SERVICE}",
                                lambda req, resp, i=i: self._on_self_test(i, resp))
        #: the faults active at the last tick stepped (None: unknown, after joining between listings)
        self._active: set[tuple[str, int, float]] | None = set()

    # --- the referee's calls ----------------------------------------------------------------------------
    def new_episode(self, episode: int, k: int, faults: Sequence[Any] | None) -> None:
        """After the task's placement and reset, on the episode's first tick k (its ActiveFault messages:
        faults active from the start did not start during a tick; None: not listed, as when joining an
        episode between listings): brief the mission."""
        self._active = None if faults is None else {_fault_key(f) for f in faults}
        self._markers_key = None
        self._command_tick = [-1] * len(self._names)
        # reports stamped before the episode's first tick belong to the episode before
        self._modes_held = [held for held in self._modes_held if held[0] >= k]
        t = self.task
        msg = MissionBriefing()
        msg.header.stamp = stamp_from_tick(k)
        msg.header.frame_id = MAP_FRAME
        msg.run_id = self.node.run_id
        msg.episode = int(episode)
        msg.landing_site = _point_enu(t.landing_site_ne)
        msg.drop_site = _point_enu(t.drop_site_ne)
        msg.drop_radius_m = float(t.retrieve.drop_radius_m)
        msg.num_targets = int(t.retrieve.num_targets)
        self._briefing_pub.publish(msg)
        targets = ", ".join(f"({p[0]:.4f}, {p[1]:.4f})" for p in t.targets.position_ned_m)
        base, drop = t.landing_site_ne, t.drop_site_ne
        self.node.get_logger().info(
            f"episode {episode}: landing site ({base[0]:.4f}, {base[1]:.4f}), drop site "
            f"({drop[0]:.4f}, {drop[1]:.4f}), targets {targets} (north, east; m)")

    def faults_of_tick(self, faults: Sequence[Any] | None) -> None:
        """The ActiveFault messages of a tick's vehicle status (None: not listed, unchanged): those that
        started at this tick go to the task (before the tick's ground truth is stepped)."""
        if faults is None:
            return
        known = self._active
        self._active = {_fault_key(f) for f in faults}
        if known is None:  # the first listing after joining mid-episode: nothing known to have started
            return
        new = [f for f in faults if _fault_key(f) not in known]
        if new:
            self.task.on_fault_started(tuple(active_faults_of(new)))

    def publish_devices(self, k: int) -> None:
        """The camera's target centroids and the grasper's report of every vehicle at task-step tick k."""
        stamp = stamp_from_tick(k)
        for i in range(self.task.num_vehicles):
            c = self.task.camera_centroids_px(i)
            pts = ImagePoints(x_px=[float(v) for v in c[:, 0]], y_px=[float(v) for v in c[:, 1]])
            pts.header.stamp = stamp
            pts.header.frame_id = base_link_frd_frame(i)
            self._centroid_pubs[i].publish(pts)
            held = GrasperState(holding=self.task.holding(i))
            held.header.stamp = stamp
            self._holding_pubs[i].publish(held)
        self._publish_markers(stamp)

    def _publish_markers(self, stamp: Any) -> None:
        t = self.task
        targets = t.targets
        carried, deposited = targets.phase == TETHERED, t.in_drop_zone()
        key = viz.content_key(targets.position_ned_m, carried, deposited, t.landing_site_ne, t.drop_site_ne)
        if key == self._markers_key:
            return
        self._markers_key = key
        r = t.retrieve
        sites = [(t.landing_site_ne, r.base_radius_m, viz.BASE_COLOUR),
                 (t.drop_site_ne, r.drop_radius_m, viz.DROP_ZONE_COLOUR)]
        self._markers_pub.publish(viz.retrieve_markers(targets.position_ned_m, carried, deposited,
                                                       targets.params.radius_m, sites, MAP_FRAME, stamp))

    def log_record(self, k: int) -> None:
        """The episode's mission record (results.csv's columns, floats in full) at its last tick k."""
        record = self.task.mission_record(k * BASE_DT_S)
        self.node.get_logger().info("mission record: " + ", ".join(f"{key}={value!r}"
                                                                    for key, value in record.items()))

    def commands_in(self, k: int) -> bool:
        """Every vehicle's grasper command of task step k (or a later one) has arrived, and the mode
        reports those commands name."""
        modes_in = zip(self._mode_sequence_in, self._mode_sequence_named, strict=True)
        return min(self._command_tick) >= k and all(got >= named for got, named in modes_in)

    def apply_modes(self, k: int) -> None:
        """Before tick k is stepped: the held mode reports stamped before t_k go to the task, in stamp order
        (the ticks from k on fly in those modes)."""
        due = [held for held in self._modes_held if held[0] < k]
        if not due:
            return
        self._modes_held = [held for held in self._modes_held if held[0] >= k]
        for tick, i, msg in sorted(due, key=lambda held: (held[0], held[1], held[2].sequence)):
            self._report(i, msg, tick * BASE_DT_S)

    # --- the autopilot's messages ----------------------------------------------------------------------
    def _on_grasper_command(self, i: int, msg: GrasperCommand) -> None:
        k = tick_of_stamp(msg.header.stamp)
        if k is None:
            self.node.counters.count("stamps_off_grid")
            return
        self.task.command_grasper(i, bool(msg.closed))
        self._command_tick[i] = k
        self._mode_sequence_named[i] = int(msg.mode_sequence)
        if self._on_command_cb is not None:
            self._on_command_cb()

    def _on_mode(self, i: int, msg: MissionMode) -> None:
        where = f"{self._names[i]}/{MODE_TOPIC}"
        if self.node.foreign_run(msg.run_id, where):
            return
        try:
            number = mode_number(msg.mode)
            if number != msg.number:
                raise ValueError(f"mode {msg.mode!r} is number {number}, not {msg.number}")
            if msg.mission_over and msg.mission_over not in MISSION_ENDS:
                raise ValueError(f"unknown mission end {msg.mission_over!r} "
                                 f"(one of {', '.join(MISSION_ENDS)})")
            if not math.isfinite(msg.height_command_z_ned_m):
                raise ValueError(f"height_command_z_ned_m is not finite ({msg.height_command_z_ned_m})")
        except (KeyError, ValueError) as exc:
            self.node.counters.count("modes_rejected")
            self.node.get_logger().warning(f"{where}: {exc.args[0]}: ignored", throttle_duration_sec=5.0)
            return
        self._mode_sequence_in[i] = max(self._mode_sequence_in[i], int(msg.sequence))
        k = tick_of_stamp(msg.header.stamp)  # on the tick grid: t_k as the Simulator computes it
        if k is None or k < self.node.tick:  # off the grid, or after its tick: it counts from now
            if k is not None:
                self.node.counters.count("modes_late")
            self._report(i, msg, seconds_of_stamp(msg.header.stamp) if k is None else k * BASE_DT_S)
        else:
            self._modes_held.append((k, i, msg))
        if self._on_command_cb is not None:
            self._on_command_cb()

    def _report(self, i: int, msg: MissionMode, t_s: float) -> None:
        self.task.report_mission(i, msg.mode, msg.mission_over, t_s, float(msg.height_command_z_ned_m))

    def _on_self_test(self, i: int, response: Trigger.Response) -> Trigger.Response:
        response.success = self.task.self_test(i)
        response.message = "systems okay" if response.success else "self-test failed (system fault)"
        return response

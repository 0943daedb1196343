"""The autopilot's end of the retrieve mission's devices in the node graph (docs/RETRIEVE.md, "In the node
graph"): what ``policies.mission.RetrieveDevices`` asks for, over the referee's topics
(``ros.retrieve_referee``):

- the briefing ``/referee/mission`` (landing and drop sites, per episode);
- ``uavN/camera/target_centroids`` and ``uavN/grasper/holding``: the latest received (``devices_tick``:
  the task step they are of);
- ``uavN/grasper/command``: the commanded state of every vehicle, published (latched) for every task step
  answered (``end_step``), so the referee knows the step's command is in;
- ``uavN/mission/mode``: the mode, the mission's end and the mode's height command
  (``MissionGuidance.height_command_z_ned_m``), published (latched) when one of them changes;
- ``uavN/self_test``: an asynchronous service call per Initialise visit, sent as the mission reports
  that it entered Initialise, so that the answer is usually in by the next period, when the guidance
  asks for it, as in process. ``self_test`` answers None until the referee's answer is in (the guidance
  holds Initialise's hover and asks again next period); each answer is one draw of the episode's
  self-test stream, as one in-process call. ``answers_pending()``: a call is out (a lockstep mission waits
  for its answer before it answers a task step, so the guidance never sees "not yet").
"""

from __future__ import annotations

from typing import Any

import numpy as np
from std_srvs.srv import Trigger

from qrsim_ros.core.common.frames import Array, enu_to_ned
from qrsim_ros.core.config.retrieve import RetrieveParams
from qrsim_ros.core.mission.modes import mode_number
from qrsim_ros.msg import GrasperCommand, GrasperState, ImagePoints, MissionBriefing, MissionMode
from qrsim_ros.ros.names import vehicle_namespace
from qrsim_ros.ros.qos import QOS_LATCHED, QOS_LATCHED_STREAM, QOS_RELIABLE
from qrsim_ros.ros.retrieve_referee import (
    BRIEFING_TOPIC,
    CENTROIDS_TOPIC,
    GRASPER_COMMAND_TOPIC,
    HOLDING_TOPIC,
    MODE_TOPIC,
    SELF_TEST_SERVICE,
)
from qrsim_ros.ros.stamps import stamp_from_seconds, tick_of_stamp


class RetrieveLink:
    """``RetrieveDevices`` over the topics of a running graph, on the autopilot ``node`` (module docstring).

    ``ready()``: a briefing for an episode no policy was built for has arrived (its sites and a new
    episode's device state are then loaded); ``briefing_used()``: the episode's policy was built from it.
    ``on_input()`` is called after every device message and self-test answer."""

    def __init__(self, node: Any, retrieve: RetrieveParams, num_vehicles: int,
                 on_input: Any = None) -> None:
        self.node = node
        self._on_input = on_input or (lambda: None)
        self.retrieve = retrieve
        self.landing_site_ne = np.full(2, np.nan)
        self.drop_site_ne = np.full(2, np.nan)
        self._briefing: MissionBriefing | None = None
        self._briefed_episode: int | None = None  # the episode whose briefing the current policy flies
        self._centroids = [np.zeros((0, 2)) for _ in range(num_vehicles)]
        self._holding = [False] * num_vehicles
        self._centroids_tick = [-1] * num_vehicles  # the tick of the latest centroids / holding received
        self._holding_tick = [-1] * num_vehicles
        self._grasper_closed = [False] * num_vehicles
        self._mode_sent: list[tuple[str, str, float] | None] = [None] * num_vehicles
        self._mode_sequence = [0] * num_vehicles  # the MissionMode reports published per vehicle (this run)
        self._tests: list[Any] = [None] * num_vehicles  # the pending self-test call per vehicle
        node.create_subscription(MissionBriefing, BRIEFING_TOPIC, self._on_briefing, QOS_LATCHED)
        self._grasper_pubs, self._mode_pubs, self._clients = [], [], []
        for i in range(num_vehicles):
            ns = vehicle_namespace(i)
            node.create_subscription(ImagePoints, f"{ns}/{CENTROIDS_TOPIC}",
                                     lambda m, i=i: self._on_centroids(i, m), QOS_RELIABLE)
            node.create_subscription(GrasperState, f"{ns}/{HOLDING_TOPIC}",
                                     lambda m, i=i: self._on_holding(i, m), QOS_RELIABLE)
            self._grasper_pubs.append(node.create_publisher(GrasperCommand, f"{ns}/{GRASPER_COMMAND_TOPIC}",
                                                            QOS_LATCHED))
            self._mode_pubs.append(node.create_publisher(MissionMode, f"{ns}/{MODE_TOPIC}",
                                                         QOS_LATCHED_STREAM))
            self._clients.append(node.create_client(Trigger, f"{ns}/{SELF_TEST_SERVICE}"))

    # --- episodes -------------------------------------------------------------------------------------
    def ready(self) -> bool:
        """A briefing for a new episode is in: load its sites and a new episode's device state."""
        if not self.briefing_new():
            return False
        b = self._briefing
        assert b is not None
        for site, p in ((self.landing_site_ne, b.landing_site), (self.drop_site_ne, b.drop_site)):
            site[:] = enu_to_ned(np.array([p.x, p.y, p.z]))[0:2]
        n = len(self._tests)
        self._tests = [None] * n
        self._grasper_closed = [False] * n
        self._mode_sent = [None] * n
        return True

    def briefing_used(self) -> None:
        """The episode's policy was built from the briefing ``ready()`` loaded."""
        assert self._briefing is not None
        self._briefed_episode = int(self._briefing.episode)

    def _on_briefing(self, msg: MissionBriefing) -> None:
        if self.node.foreign_run(msg.run_id, BRIEFING_TOPIC):
            return
        self._briefing = msg
        self._on_input()

    def briefing_new(self) -> bool:
        """A briefing for an episode no policy was built for has arrived (as ``ready()``, without loading)."""
        return self._briefing is not None and self._briefing.episode != self._briefed_episode

    def devices_tick(self, vehicle: int) -> int:
        """The tick of the latest camera centroids and grasper report both received for ``vehicle``."""
        return min(self._centroids_tick[vehicle], self._holding_tick[vehicle])

    def answers_pending(self) -> bool:
        """A self-test call is out, its answer not in yet."""
        return any(t is not None and not t.done() for t in self._tests)

    def _on_holding(self, i: int, msg: GrasperState) -> None:
        self._holding[i] = bool(msg.holding)
        self._holding_tick[i] = _tick_or_none(msg.header.stamp)
        self._on_input()

    def _on_centroids(self, i: int, msg: ImagePoints) -> None:
        if len(msg.x_px) != len(msg.y_px):
            self.node.get_logger().warning(f"{vehicle_namespace(i)}/{CENTROIDS_TOPIC}: x_px and y_px differ "
                                           "in length: ignored", throttle_duration_sec=5.0)
            return
        self._centroids[i] = np.column_stack([np.asarray(msg.x_px, float), np.asarray(msg.y_px, float)])
        self._centroids_tick[i] = _tick_or_none(msg.header.stamp)
        self._on_input()

    # --- RetrieveDevices ------------------------------------------------------------------------------
    def _request_self_test(self, vehicle: int) -> None:
        client = self._clients[vehicle]
        if client.service_is_ready():
            self._tests[vehicle] = client.call_async(Trigger.Request())
            self._tests[vehicle].add_done_callback(lambda _future: self._on_input())
        else:
            self.node.get_logger().warning(
                f"{vehicle_namespace(vehicle)}/{SELF_TEST_SERVICE} is not available (is the referee "
                "running?)", throttle_duration_sec=5.0)

    def self_test(self, vehicle: int) -> bool | None:
        pending = self._tests[vehicle]
        if pending is None:
            self._request_self_test(vehicle)
            return None
        if not pending.done():
            return None
        self._tests[vehicle] = None
        result = pending.result()
        return None if result is None else bool(result.success)

    def camera_centroids_px(self, vehicle: int) -> Array:
        return self._centroids[vehicle].copy()

    def holding(self, vehicle: int) -> bool:
        return self._holding[vehicle]

    def command_grasper(self, vehicle: int, closed: bool) -> None:
        self._grasper_closed[vehicle] = bool(closed)

    def end_step(self, stamp: Any) -> None:
        """The task step stamped ``stamp`` is answered: every vehicle's grasper command of it."""
        for pub, closed, sequence in zip(self._grasper_pubs, self._grasper_closed, self._mode_sequence,
                                         strict=True):
            msg = GrasperCommand(closed=closed, mode_sequence=sequence)
            msg.header.stamp = stamp
            pub.publish(msg)

    def report_mission(self, vehicle: int, mode: str, mission_over: str, time_s: float,
                       height_command_z_ned_m: float) -> None:
        sent = (mode, mission_over, float(height_command_z_ned_m))
        if self._mode_sent[vehicle] == sent:
            return
        if mode == "initialise" and self._tests[vehicle] is None:
            self._request_self_test(vehicle)  # the answer for the guidance's next period
        self._mode_sequence[vehicle] += 1
        msg = MissionMode(run_id=self.node.run_id, sequence=self._mode_sequence[vehicle], mode=mode,
                          number=mode_number(mode), mission_over=mission_over, height_command_z_ned_m=sent[2])
        msg.header.stamp = stamp_from_seconds(time_s)
        self._mode_pubs[vehicle].publish(msg)
        self._mode_sent[vehicle] = sent
        self.node.get_logger().info(
            f"{vehicle_namespace(vehicle)}: mode {mode} ({msg.number}) at t={time_s:.1f} s"
            + (f", mission over: {mission_over}" if mission_over else ""))


def _tick_or_none(stamp: Any) -> int:
    """The tick of a device message's stamp (-1 off the tick grid: never counts as the step's)."""
    k = tick_of_stamp(stamp)
    return -1 if k is None else k

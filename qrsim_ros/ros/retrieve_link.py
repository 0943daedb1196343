"""The autopilot's end of the retrieve mission's devices in the node graph (docs/RETRIEVE.md, "In the node
graph"): what ``policies.mission.RetrieveDevices`` asks for, over the referee's topics
(``ros.retrieve_referee``):

- the briefing ``/referee/mission`` (landing and drop sites, per episode);
- ``uavN/camera/target_centroids`` and ``uavN/grasper/holding``: the latest received;
- ``uavN/grasper/command`` and ``uavN/mission/mode``: published (latched) when they change;
- ``uavN/self_test``: an asynchronous service call per Initialise visit, sent as the mission reports
  that it entered Initialise, so that the answer is usually in by the next period, when the guidance
  asks for it, as in process. ``self_test`` answers None until the referee's answer is in (the guidance
  holds Initialise's hover and asks again next period); each answer is one draw of the episode's
  self-test stream, as one in-process call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from qrsim_ros.core.common.frames import Array, enu_to_ned
from qrsim_ros.core.config.retrieve import RetrieveParams
from qrsim_ros.core.mission.modes import mode_number
from qrsim_ros.msg import ImagePoints, MissionBriefing, MissionMode
from qrsim_ros.ros.names import vehicle_namespace
from qrsim_ros.ros.qos import QOS_LATCHED, QOS_RELIABLE
from qrsim_ros.ros.retrieve_referee import (
    BRIEFING_TOPIC,
    CENTROIDS_TOPIC,
    GRASPER_COMMAND_TOPIC,
    HOLDING_TOPIC,
    MODE_TOPIC,
    SELF_TEST_SERVICE,
)
from qrsim_ros.ros.stamps import stamp_from_seconds


class RetrieveLink:
    """``RetrieveDevices`` over the topics of a running graph, on the autopilot ``node`` (module docstring).

    ``ready()``: a briefing for an episode no policy was built for has arrived (its sites and a new
    episode's device state are then loaded); ``briefing_used()``: the episode's policy was built from it."""

    def __init__(self, node: Any, retrieve: RetrieveParams, num_vehicles: int) -> None:
        self.node = node
        self.retrieve = retrieve
        self.landing_site_ne = np.full(2, np.nan)
        self.drop_site_ne = np.full(2, np.nan)
        self._briefing: MissionBriefing | None = None
        self._briefed_episode: int | None = None  # the episode whose briefing the current policy flies
        self._centroids = [np.zeros((0, 2)) for _ in range(num_vehicles)]
        self._holding = [False] * num_vehicles
        self._grasper_sent: list[bool | None] = [None] * num_vehicles
        self._mode_sent: list[tuple[str, str] | None] = [None] * num_vehicles
        self._tests: list[Any] = [None] * num_vehicles  # the pending self-test call per vehicle
        node.create_subscription(MissionBriefing, BRIEFING_TOPIC, self._on_briefing, QOS_LATCHED)
        self._grasper_pubs, self._mode_pubs, self._clients = [], [], []
        for i in range(num_vehicles):
            ns = vehicle_namespace(i)
            node.create_subscription(ImagePoints, f"{ns}/{CENTROIDS_TOPIC}",
                                     lambda m, i=i: self._on_centroids(i, m), QOS_RELIABLE)
            node.create_subscription(Bool, f"{ns}/{HOLDING_TOPIC}",
                                     lambda m, i=i: self._holding.__setitem__(i, bool(m.data)),
                                     QOS_RELIABLE)
            self._grasper_pubs.append(node.create_publisher(Bool, f"{ns}/{GRASPER_COMMAND_TOPIC}",
                                                            QOS_LATCHED))
            self._mode_pubs.append(node.create_publisher(MissionMode, f"{ns}/{MODE_TOPIC}", QOS_LATCHED))
            self._clients.append(node.create_client(Trigger, f"{ns}/{SELF_TEST_SERVICE}"))

    # --- episodes -------------------------------------------------------------------------------------
    def ready(self) -> bool:
        """A briefing for a new episode is in: load its sites and a new episode's device state."""
        b = self._briefing
        if b is None or b.episode == self._briefed_episode:
            return False
        for site, p in ((self.landing_site_ne, b.landing_site), (self.drop_site_ne, b.drop_site)):
            site[:] = enu_to_ned(np.array([p.x, p.y, p.z]))[0:2]
        n = len(self._tests)
        self._tests = [None] * n
        self._grasper_sent = [None] * n
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

    def _on_centroids(self, i: int, msg: ImagePoints) -> None:
        if len(msg.x_px) != len(msg.y_px):
            self.node.get_logger().warning(f"{vehicle_namespace(i)}/{CENTROIDS_TOPIC}: x_px and y_px differ "
                                           "in length: ignored", throttle_duration_sec=5.0)
            return
        self._centroids[i] = np.column_stack([np.asarray(msg.x_px, float), np.asarray(msg.y_px, float)])

    # --- RetrieveDevices ------------------------------------------------------------------------------
    def _request_self_test(self, vehicle: int) -> None:
        client = self._clients[vehicle]
        if client.service_is_ready():
            self._tests[vehicle] = client.call_async(Trigger.Request())
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
        if self._grasper_sent[vehicle] != closed:
            self._grasper_pubs[vehicle].publish(Bool(data=bool(closed)))
            self._grasper_sent[vehicle] = closed

    def report_mission(self, vehicle: int, mode: str, mission_over: str, time_s: float) -> None:
        if self._mode_sent[vehicle] == (mode, mission_over):
            return
        if mode == "initialise" and self._tests[vehicle] is None:
            self._request_self_test(vehicle)  # the answer for the guidance's next period
        msg = MissionMode(run_id=self.node.run_id, mode=mode, number=mode_number(mode),
                          mission_over=mission_over)
        msg.header.stamp = stamp_from_seconds(time_s)
        self._mode_pubs[vehicle].publish(msg)
        self._mode_sent[vehicle] = (mode, mission_over)
        self.node.get_logger().info(
            f"{vehicle_namespace(vehicle)}: mode {mode} ({msg.number}) at t={time_s:.1f} s"
            + (f", mission over: {mission_over}" if mission_over else ""))

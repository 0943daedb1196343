"""mission_autopilot: ireland_2016's 17-mode search-and-retrieve mission flown over the node graph.

The mission is the in-process ``--policy mission`` (``policies.mission.Mission`` on
``core.mission.guidance``), run as ``example_autopilot`` runs its baselines: once per task step
(``/referee/status``), on a view filled from topics, commanding ``uavN/cmd/velocity`` through the
flight_controller. What the mission reads besides the estimated state (``uavN/imu/data``,
``uavN/gps/fix``, ``uavN/gps/vel``, ``uavN/altimeter``):

- ``uavN/battery`` (sensor_msgs/BatteryState): the pack's voltage (the low-battery return, V_th);
- ``/sim/vehicle_status``: the onboard failsafe each vehicle flies; ``emergency_land`` after a rotor loss
  is the detected actuator fault (section 5.2.2: the flight controller's report, as PX4's vehicle
  status tells an offboard computer);
- the retrieve devices the referee serves (``ros.retrieve_link``): the briefing ``/referee/mission``, the
  downward camera's ``uavN/camera/target_centroids``, ``uavN/grasper/holding``, ``uavN/grasper/command``
  and the ``uavN/self_test`` service.

It publishes its mode on ``uavN/mission/mode`` (qrsim_ros/MissionMode: name and Figure 5's number, and
the mission's end; latched, on change). A new episode's policy is built once its briefing is in.
Parameters: the scenario's (``SCENARIO_PARAMETERS``) and ``policy`` (default ``mission``).

Pace: the node reports its progress on ``/sim/tick_progress`` like the simulator's own ground-truth
consumers: the ticks it is done with, i.e. up to the tick before the next task step it has not answered
yet (and no further than the /clock it has seen). In lockstep, vehicle_dynamics then runs at most its
``lockstep_window_ticks`` ahead of the mission (the plan sets 1 for a mission run: the simulation waits
for the answer to every task step), so a loaded machine slows the run down instead of letting set
points arrive late or go stale (docs/RETRIEVE.md).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from sensor_msgs.msg import BatteryState

from qrsim_ros.core.common.validation import ticks_per_update
from qrsim_ros.msg import TaskStatus, TickProgress, VehicleStatus
from qrsim_ros.nodes.example_autopilot import ExampleAutopilotNode, TopicView
from qrsim_ros.policies import policy_names
from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC, vehicle_namespace
from qrsim_ros.ros.node import ParameterError, run_node
from qrsim_ros.ros.parameters import SCENARIO_PARAMETERS, Param, ParamTable
from qrsim_ros.ros.qos import QOS_RELIABLE, QOS_TICK_PROGRESS
from qrsim_ros.ros.retrieve_link import RetrieveLink
from qrsim_ros.ros.stamps import tick_of_stamp

#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "mission_autopilot", *SCENARIO_PARAMETERS,
    Param("policy", "mission",
          "the mission policy: mission (ireland_2016's guidance), or " + ", ".join(policy_names())
          + " or MODULE:FUNC (qrsim_ros.policies) for one that flies the same devices"),
)


class MissionTopicView(TopicView):
    """``TopicView`` with what the mission reads: battery voltages, onboard failsafes and the retrieve
    devices (``retrieve``, a ``RetrieveLink``)."""

    def __init__(self, scenario: Any, retrieve: RetrieveLink) -> None:
        super().__init__(scenario)
        self.retrieve = retrieve
        self.voltage_v = np.full(self.num_vehicles, np.nan)
        self.failsafes = [""] * self.num_vehicles

    def battery_voltage_v(self) -> np.ndarray:
        return self.voltage_v.copy()

    @property
    def failsafe(self) -> list[str]:
        return list(self.failsafes)

    def ready(self) -> bool:
        return self.retrieve.ready()

    def policy_built(self) -> None:
        self.retrieve.briefing_used()


class MissionAutopilotNode(ExampleAutopilotNode):
    """The retrieve mission over the graph (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("mission_autopilot", PARAMETERS)
        for i in range(self.num_vehicles):
            self.create_subscription(BatteryState, f"{vehicle_namespace(i)}/battery",
                                     lambda m, i=i: self.view.voltage_v.__setitem__(i, m.voltage),
                                     QOS_RELIABLE)
        self.create_subscription(VehicleStatus, "/sim/vehicle_status", self._on_vehicle_status, QOS_RELIABLE)
        # the lockstep window's view of this node (module docstring, "Pace")
        self._ticks_per_step = ticks_per_update("task.dt_s", self.scenario.task.dt_s)
        self._progress_pub = self.create_publisher(TickProgress, TICK_PROGRESS_TOPIC, QOS_TICK_PROGRESS)
        self._episode = 0  # the simulator's episode (/sim/vehicle_status)
        self._answered_tick = -1  # the tick of the last task step answered
        self._clock_tick = -1  # the latest /clock tick seen
        self._reported: tuple[int, int] | None = None

    def make_view(self) -> MissionTopicView:
        sc = self.scenario
        if sc.retrieve is None:
            raise ParameterError(f"parameter 'scenario'={sc.name!r}: mission_autopilot flies retrieve "
                                 f"scenarios, not task.type={sc.task.type!r}")
        return MissionTopicView(sc, RetrieveLink(self, sc.retrieve, sc.num_vehicles))

    def _on_vehicle_status(self, msg: VehicleStatus) -> None:
        if self.foreign_run(msg.run_id, "/sim/vehicle_status") or len(msg.failsafe) != self.num_vehicles:
            return
        self.view.failsafes = list(msg.failsafe)
        if int(msg.episode) != self._episode:  # a new episode: ticks restart at 0
            self._episode = int(msg.episode)
            self._answered_tick = self._clock_tick = -1

    def _on_status(self, msg: TaskStatus) -> None:
        super()._on_status(msg)
        k = tick_of_stamp(msg.header.stamp)
        iso = self.run_isolation
        if k is not None and (iso is None or msg.run_id == iso.run_id):  # (another run's: counted above)
            self._answered_tick = k
            self._clock_tick = max(self._clock_tick, k)
            self._report_progress()

    def _on_clock(self, msg: Any) -> None:
        super()._on_clock(msg)
        k = tick_of_stamp(msg.clock)
        if k is not None:
            self._clock_tick = k
            self._report_progress()

    def _report_progress(self) -> None:
        """The ticks this node is done with: up to the tick before the next task step it must answer."""
        if self._answered_tick < 0:
            return
        done = min(self._clock_tick, self._answered_tick + self._ticks_per_step - 1)
        if self._reported == (self._episode, done) or done < 0:
            return
        self._reported = (self._episode, done)
        self._progress_pub.publish(TickProgress(node=self.get_fully_qualified_name(), episode=self._episode,
                                                tick=done))


def main(argv: list[str] | None = None) -> int:
    return run_node(MissionAutopilotNode, argv)


if __name__ == "__main__":
    sys.exit(main())

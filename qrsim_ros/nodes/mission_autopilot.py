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

It publishes its mode on ``uavN/mission/mode`` (qrsim_ros/MissionMode: name and Figure 5's number, the
mission's end and the mode's height command, Figure 9's dashed line; latched, on change). A new
episode's policy is built once its briefing is in. Parameters: the scenario's (``SCENARIO_PARAMETERS``) and
``policy`` (default ``mission``).

Pace: the node reports its progress on ``/sim/tick_progress`` like the simulator's own ground-truth
consumers: the ticks it is done with, i.e. up to the tick before the next task step it has not answered
yet (and no further than the /clock it has seen). In lockstep, vehicle_dynamics then runs at most its
``lockstep_window_ticks`` ahead of the mission (the plan sets 1 for a mission run: the simulation waits
for the answer to every task step), so a loaded machine slows the run down instead of letting set
points arrive late or go stale (docs/RETRIEVE.md).

Lockstep (parameter ``lockstep``, set by the plan in a lockstep run): the node answers task step k only
once every input of tick k is in -- those of ``example_autopilot`` (``ros.step_inputs``: the vehicle
status of t_k, each valid vehicle's latest IMU, altimeter and GPS messages, its battery on battery
ticks), the referee's camera centroids and grasper report of t_k, the briefing at a new episode and
the answer of a self-test call that is out -- and it answers every step: a NaN set point where the
mission has none, and every vehicle's grasper command. With the flight controller's
``await_task_setpoints`` and the referee's ``await_grasper_commands`` the run is then the in-process
one, bit for bit (test_retrieve_graph).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from qrsim_ros.msg import TaskStatus
from qrsim_ros.nodes.example_autopilot import BATTERY_TICKS, LOCKSTEP, ExampleAutopilotNode
from qrsim_ros.policies import policy_names
from qrsim_ros.ros.names import vehicle_namespace
from qrsim_ros.ros.node import ParameterError, run_node
from qrsim_ros.ros.parameters import SCENARIO_PARAMETERS, Param, ParamTable
from qrsim_ros.ros.retrieve_link import RetrieveLink
from qrsim_ros.ros.topic_view import TopicView

#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "mission_autopilot", *SCENARIO_PARAMETERS,
    Param("policy", "mission",
          "the mission policy: mission (ireland_2016's guidance), or " + ", ".join(policy_names())
          + " or MODULE:FUNC (qrsim_ros.policies) for one that flies the same devices"),
    LOCKSTEP, BATTERY_TICKS,
)


class MissionTopicView(TopicView):
    """``TopicView`` with the retrieve devices (``retrieve``, a ``RetrieveLink``); the node fills the battery
    voltages and the onboard failsafes."""

    def __init__(self, scenario: Any, retrieve: RetrieveLink) -> None:
        super().__init__(scenario)
        self._retrieve = retrieve

    def ready(self) -> bool:
        return self.retrieve.ready()

    def policy_built(self) -> None:
        self.retrieve.briefing_used()


class MissionAutopilotNode(ExampleAutopilotNode):
    """The retrieve mission over the graph (see the module docstring)."""

    READS_BATTERY = True  # the low-battery return (V_th)
    READS_VEHICLE_STATUS = True  # the onboard failsafes
    PACED_BY_ANSWERS = True  # a one-tick window (module docstring, "Pace")

    def __init__(self) -> None:
        super().__init__("mission_autopilot", PARAMETERS)

    def make_view(self) -> MissionTopicView:
        sc = self.scenario
        if sc.retrieve is None:
            raise ParameterError(f"parameter 'scenario'={sc.name!r}: mission_autopilot flies retrieve "
                                 f"scenarios, not task.type={sc.task.type!r}")
        return MissionTopicView(sc, RetrieveLink(self, sc.retrieve, sc.num_vehicles, self._try_answer))

    def waiting_for(self, k: int, status: TaskStatus) -> str | None:
        """The first input of tick k not in yet (lockstep): the estimate's (``ExampleAutopilotNode``),
        then the retrieve devices'."""
        missing = super().waiting_for(k, status)
        if missing is not None or not self._lockstep or status.done:
            return missing
        link = self.view.retrieve
        if status.step == 0 and not link.briefing_new():
            return "/referee/mission"
        if link.answers_pending():
            return "the self-test answer"
        assert self._inputs is not None
        for i in np.flatnonzero(self._inputs.valid):
            if link.devices_tick(int(i)) != k:
                return f"{vehicle_namespace(int(i))}'s camera centroids and grasper report"
        return None

    def step_answered(self, status: TaskStatus) -> None:
        self.view.retrieve.end_step(status.header.stamp)


def main(argv: list[str] | None = None) -> int:
    return run_node(MissionAutopilotNode, argv)


if __name__ == "__main__":
    sys.exit(main())

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
once every input of tick k is in -- the vehicle status of t_k, each valid vehicle's latest IMU,
altimeter and GPS messages (``sensor_ticks``), its battery on battery ticks, the referee's camera
centroids and grasper report of t_k, the briefing at a new episode and the answer of a self-test call
that is out -- and it answers every step: a NaN set point where the mission has none, and every
vehicle's grasper command. With the flight controller's ``await_task_setpoints`` and the referee's
``await_grasper_commands`` the run is then the in-process one, bit for bit (test_retrieve_graph).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from sensor_msgs.msg import BatteryState

from qrsim_ros.msg import TaskStatus, VehicleStatus
from qrsim_ros.nodes.example_autopilot import ExampleAutopilotNode, TopicView
from qrsim_ros.policies import policy_names
from qrsim_ros.ros.names import vehicle_namespace
from qrsim_ros.ros.node import ParameterError, run_node
from qrsim_ros.ros.parameters import SCENARIO_PARAMETERS, Param, ParamTable, limit_range
from qrsim_ros.ros.qos import QOS_RELIABLE
from qrsim_ros.ros.retrieve_link import RetrieveLink
from qrsim_ros.ros.sensor_ticks import ALT, BATTERY_EVERY_N_TICKS, FIX, IMU, VEL, SensorSchedule
from qrsim_ros.ros.stamps import tick_of_stamp

#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "mission_autopilot", *SCENARIO_PARAMETERS,
    Param("policy", "mission",
          "the mission policy: mission (ireland_2016's guidance), or " + ", ".join(policy_names())
          + " or MODULE:FUNC (qrsim_ros.policies) for one that flies the same devices"),
    Param("lockstep", False,
          "answer a task step only once every input of its tick is in, and answer every step (module "
          "docstring, 'Lockstep'): with the flight controller's await_task_setpoints and the referee's "
          "await_grasper_commands, bit-identical to in process (the plan sets all three in lockstep)"),
    Param("battery_every_n_ticks", BATTERY_EVERY_N_TICKS,
          "lockstep: the uavN/battery messages are awaited on the ticks that are multiples of this; must "
          "equal vehicle_dynamics' parameter of that name (0: not awaited)",
          **limit_range("battery_every_n_ticks")),
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

    def __init__(self) -> None:
        super().__init__("mission_autopilot", PARAMETERS)
        n = self.num_vehicles
        # lockstep: the tick of each awaited input's latest message (module docstring)
        self._lockstep = bool(self.params.lockstep)
        self.publish_silence = self._lockstep
        self._sensors = SensorSchedule(self.scenario)
        self._battery_ticks = (self.params.battery_every_n_ticks if self.scenario.vehicle.battery.on else 0)
        self._input_tick: dict[tuple[str, int], int] = {}
        self._status_tick = -1  # of the latest /sim/vehicle_status
        self._status_valid = np.ones(n, bool)
        self._pending: TaskStatus | None = None  # the task step waiting for its inputs
        self._published_tick = -1  # the tick of the last step a set point was published for
        for i in range(n):
            self.create_subscription(BatteryState, f"{vehicle_namespace(i)}/battery",
                                     lambda m, i=i: self._on_battery(i, m), QOS_RELIABLE)
        self.create_subscription(VehicleStatus, "/sim/vehicle_status", self._on_vehicle_status, QOS_RELIABLE)
        # the lockstep window's view of this node (module docstring, "Pace")
        self._episode = 0  # the simulator's episode (/sim/vehicle_status)
        self._answered_tick = -1  # the tick of the last task step answered
        self._clock_tick = -1  # the latest /clock tick seen

    def make_view(self) -> MissionTopicView:
        sc = self.scenario
        if sc.retrieve is None:
            raise ParameterError(f"parameter 'scenario'={sc.name!r}: mission_autopilot flies retrieve "
                                 f"scenarios, not task.type={sc.task.type!r}")
        return MissionTopicView(sc, RetrieveLink(self, sc.retrieve, sc.num_vehicles, self._try_answer))

    def _on_vehicle_status(self, msg: VehicleStatus) -> None:
        if self.foreign_run(msg.run_id, "/sim/vehicle_status") or len(msg.failsafe) != self.num_vehicles:
            return
        self.view.failsafes = list(msg.failsafe)
        self._status_tick = int(msg.tick)
        self._status_valid = np.asarray(msg.valid, bool)
        if int(msg.episode) != self._episode:  # a new episode: ticks restart at 0
            self._episode = int(msg.episode)
            self._answered_tick = self._clock_tick = -1
        self._try_answer()

    def _on_battery(self, i: int, msg: BatteryState) -> None:
        self.view.voltage_v[i] = msg.voltage
        self._input_tick[("battery", i)] = _tick(msg.header.stamp)
        self._try_answer()

    def on_sensor(self, kind: str, i: int, stamp: Any) -> None:
        self._input_tick[(kind, i)] = _tick(stamp)
        self._try_answer()

    # --- task steps ---------------------------------------------------------------------------------------
    def _on_status(self, msg: TaskStatus) -> None:
        if self.foreign_run(msg.run_id, "/referee/status"):
            return
        self._pending = msg
        self._try_answer()

    def _waiting_for(self, k: int, status: TaskStatus) -> str | None:
        """The first input of tick k not in yet (lockstep), or None."""
        if not self._lockstep or status.done:
            return None
        if self._status_tick != k:
            return "/sim/vehicle_status"
        link = self.view.retrieve
        if status.step == 0 and not link.briefing_new():
            return "/referee/mission"
        if link.answers_pending():
            return "the self-test answer"
        battery = self._battery_ticks and k % self._battery_ticks == 0
        for i in self.view.action_spec["vehicles"]:
            if not self._status_valid[i]:
                continue
            for kind in (IMU, ALT, FIX, VEL):
                if self._input_tick.get((kind, i)) != self._sensors.latest(kind, k):
                    return f"{vehicle_namespace(i)} {kind}"
            if battery and self._input_tick.get(("battery", i)) != k:
                return f"{vehicle_namespace(i)}/battery"
            if link.devices_tick(i) != k:
                return f"{vehicle_namespace(i)}'s camera centroids and grasper report"
        return None

    def _try_answer(self) -> None:
        msg = self._pending
        if msg is None:
            return
        k = tick_of_stamp(msg.header.stamp)
        if k is not None and self._waiting_for(k, msg) is not None:
            return
        self._pending = None
        super()._on_status(msg)
        if k is None:
            return
        if self._lockstep and self._published_tick != k:  # no set point this step: say so
            spec = self.view.action_spec
            self._publish(np.full((len(spec["vehicles"]), spec["width"]), np.nan), msg)
        self.view.retrieve.end_step(msg.header.stamp)
        self._answered_tick = k
        self._clock_tick = max(self._clock_tick, k)
        self._report_progress()

    def step_progress(self, status: TaskStatus) -> None:
        """(Reported by ``_report_progress`` instead: after the step's inputs and answer, never past the
        /clock seen.)"""

    def _publish(self, actions: np.ndarray, status: TaskStatus, stop: bool = False) -> None:
        super()._publish(actions, status, stop)
        k = tick_of_stamp(status.header.stamp)
        self._published_tick = -1 if k is None else k

    def _on_clock(self, msg: Any) -> None:
        if not self._lockstep:  # (in lockstep every step is answered: nothing to re-send)
            super()._on_clock(msg)
        k = tick_of_stamp(msg.clock)
        if k is not None:
            self._clock_tick = k
            self._report_progress()

    def _report_progress(self) -> None:
        """The ticks this node is done with: up to the tick before the next task step it must answer."""
        if self._answered_tick >= 0:
            self.report_done(self._episode,
                             min(self._clock_tick, self._answered_tick + self._ticks_per_step - 1))


def _tick(stamp: Any) -> int:
    """The tick of an input's stamp (-1 off the tick grid: never the awaited one)."""
    k = tick_of_stamp(stamp)
    return -1 if k is None else k


def main(argv: list[str] | None = None) -> int:
    return run_node(MissionAutopilotNode, argv)


if __name__ == "__main__":
    sys.exit(main())

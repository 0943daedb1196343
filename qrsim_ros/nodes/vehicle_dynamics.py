"""vehicle_dynamics: integrates every vehicle of the scenario, owns ``/clock``, publishes the ground truth.

The core's plant (``core.engine.plant.Plant``: the fleet built by ``build_fleet``, its batteries, the
scenario's faults and the scene's solid obstacles, as the Simulator's, from the same random streams) is
stepped at DT = 0.02 s; vehicles are placed at every episode start by the task rules
(``tasks.initial_placement`` on the ``task.placement`` stream), as ``Simulator.reset``. The node is the
I/O around it (docs/NODE_GRAPH.md):

- in: ``uavN/cmd/attitude``, ``uavN/cmd/rates_thrust``, ``uavN/cmd/motors`` (checked, converted and held:
  ``ros.command_intake``; flown while fresh, else hover or the scenario's failsafe:
  ``ros.command_failsafe``); the attitude commands of the vehicles flown through the flight controller
  (control mode velocity, velocity_height, waypoint) come on ``/sim/fleet/attitude_command`` instead, one
  message per tick for all of them (their ``uavN/cmd/attitude`` is not read: it is the controller's copy
  for readers); the air velocity of every vehicle on ``/sim/fleet/wind`` from wind_field, one message per
  tick (``ros.wind_intake``; not read in still air: the scenario's mean wind and turbulence both off).
  In lockstep, ``/sim/tick_progress`` of the ground-truth consumers.
- out: ``/clock``, the ground truth, ``/sim/vehicle_status``, ``/tf``, ``/tf_static``, ``/sim/episode``,
  ``/sim/faults`` and ``uavN/battery`` (``ros.fleet_outputs``); ``/diagnostics`` every wall second,
  stamped with the simulated time: the input counters summed over vehicles (commands_rejected,
  commands_clamped, command_timeouts, wind_rejected), lockstep_timeouts (waits longer than
  lockstep_timeout_s), inputs_renewed (input subscriptions made again: ``ros.renewable_inputs``),
  progress_resubscriptions, and started, episode, tick, steps, tick_period_s,
  tick_rate_hz, real_time_factor (measured since the last array), real_time_factor_target, lockstep.
- srv: ``~/reset`` (std_srvs/Trigger: new placement, episode + 1, tick 0 published again);
  ``/sim/inject_fault`` (qrsim_ros/InjectFault: one ``faults:`` item as YAML) and ``/sim/clear_fault``
  (qrsim_ros/ClearFault: by id or kind, on one vehicle or all): act at the next tick, as
  ``Simulator.inject_fault`` / ``clear_fault``; a bad request answers success=false and a message.

Faults (docs/FAULTS.md): the tick's active faults travel with its ``/sim/vehicle_status``, from which the
sensor nodes apply the sensor faults at the same tick. comm_loss: a command received for a tick without
a link is ignored (the held one stays and expires after ``command_timeout_s``); vehicles flown through
the flight_controller are not held here (it drops their set points itself).

Stepping (``ros.tick_scheduler``, never blocking the executor): step k+1 is integrated in whichever
callback completes its inputs, as lockstep allows (``ros.lockstep``), paced by ``real_time_factor``; late
inputs are named in a warning after ``lockstep_timeout_s`` and the tick re-sent. ``duration_s`` > 0: after
that much simulated time (all episodes) the node waits for the consumers to handle the last tick
(lockstep), then at most FINAL_ACK_S for its last messages to be acknowledged, and ends (status 0).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import numpy as np
from std_srvs.srv import Trigger

from qrsim_ros.core.common.frames import dcm_from_state, ned_to_body
from qrsim_ros.core.common.limits import LOCKSTEP_WINDOW_TICKS
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S, TICK_NS
from qrsim_ros.core.common.validation import ticks_per_update
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.engine.builders import build_fleet, build_scene
from qrsim_ros.core.engine.faults import FaultEffects, FaultModels
from qrsim_ros.core.engine.plant import Plant, PlantInputs
from qrsim_ros.core.faults import FaultEvents
from qrsim_ros.core.tasks.factory import make_task
from qrsim_ros.core.tasks.rules import PLACEMENT_STREAM, TaskContext, initial_placement
from qrsim_ros.core.vehicles.airframes import ROTOR
from qrsim_ros.core.vehicles.energy import FleetEnergy
from qrsim_ros.core.vehicles.fleet_control import CONTROLLED_MODES
from qrsim_ros.core.vehicles.pelican import PelicanInputError
from qrsim_ros.msg import (
    AttitudeCommand,
    FleetAttitudeCommand,
    FleetSamples,
    MotorCommand,
    RatesThrustCommand,
)
from qrsim_ros.ros.command_failsafe import CommandFailsafe
from qrsim_ros.ros.command_intake import COMMAND_TOPICS, MOTORS, RATES_THRUST, CommandIntake, HeldCommands
from qrsim_ros.ros.fault_services import FaultServices
from qrsim_ros.ros.fleet_outputs import FleetOutputs
from qrsim_ros.ros.fleet_topics import (
    FLEET_ATTITUDE_COMMAND_TOPIC,
    FLEET_WIND_TOPIC,
    WIND_COLUMNS,
    FleetMessageError,
    read_samples,
)
from qrsim_ros.ros.lockstep import LockstepGate
from qrsim_ros.ros.names import vehicle_namespace
from qrsim_ros.ros.node import Counters, ParameterError, ScenarioNode, ThrottledWarnings, run_node
from qrsim_ros.ros.parameters import SCENARIO_PARAMETERS, Param, ParamTable, limit_range, limited
from qrsim_ros.ros.qos import QOS_RELIABLE
from qrsim_ros.ros.renewable_inputs import RenewableInputs
from qrsim_ros.ros.sensor_ticks import BATTERY_EVERY_N_TICKS
from qrsim_ros.ros.stamps import stamp_ns
from qrsim_ros.ros.tick_scheduler import ClockHooks, TickScheduler
from qrsim_ros.ros.wind_intake import WindIntake

#: Longest the final acknowledgements are waited for at ``duration_s`` [s].
FINAL_ACK_S = 2.0
#: The keys of the flight_controller's commands and wind_field's winds among the renewable inputs.
FLEET_COMMAND, FLEET_WIND = ("fleet/attitude_command", -1), ("fleet/wind", -1)
#: The counters on /diagnostics (summed over vehicles; per vehicle they are in /sim/vehicle_status).
DIAGNOSTIC_COUNTERS = ("commands_rejected", "commands_clamped", "command_timeouts", "wind_rejected",
                       "lockstep_timeouts", "inputs_renewed")


#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "vehicle_dynamics", *SCENARIO_PARAMETERS,
    Param("real_time_factor", 1.0,
          "simulated seconds per wall-clock second (1.0: real time; 0: as fast as the inputs allow)",
          **limit_range("real_time_factor")),
    Param("lockstep", False,
          "step k+1 only after the wind (and flight_controller commands) stamped t_k arrived"),
    Param("lockstep_timeout_s", 1.0,
          "wall-clock seconds to wait for a lockstep input before warning and re-sending the tick [s]",
          **limit_range("lockstep_timeout_s")),
    limited("lockstep_window_ticks", LOCKSTEP_WINDOW_TICKS,
            "lockstep: how many ticks the clock may run ahead of the slowest ground-truth consumer (its "
            "/sim/tick_progress); at duration_s every consumer handles the last tick before the node "
            "stops; 0: consumers do not hold the clock [ticks]"),
    limited("lockstep_consumers", 0,
            "lockstep: the ground-truth consumers the window waits for until each has reported once (the "
            "launch plan's count); 0: only those that have reported"),
    Param("lockstep_on_timeout", "wait",
          "after lockstep_timeout_s: 'wait' on, or 'continue' with the held inputs",
          choices=("wait", "continue")),
    Param("command_timeout_s", -1.0,
          "simulated seconds a cmd/attitude is held before the vehicle flies its failsafe "
          "(0: held forever; -1: the scenario's vehicle.command_timeout_s) [s]",
          **limit_range("command_timeout_s")),
    Param("duration_s", 0.0,
          "simulated seconds to run (over all episodes) before shutting down (0: forever) [s]",
          **limit_range("duration_s")),
    Param("wait_for_commands", False,
          "hold the clock at tick 0 until every vehicle has received a valid command (cmd/attitude; on "
          "a rotor-airframe vehicle also cmd/rates_thrust or cmd/motors)"),
    Param("start_subscribers", 0,
          "publish tick 0 only once /sim/vehicle_status (the fleet's ground truth) has this many matched "
          "subscriptions (the launchers set it to the number of ground-truth consumers they start), "
          "so no node misses the first ticks while DDS discovery completes; with a run_id only "
          "subscriptions of nodes that announced this run count",
          **limit_range("start_subscribers")),
    Param("start_timeout_s", 30.0, "longest wall time to wait for start_subscribers [s]",
          **limit_range("start_timeout_s")),
    Param("tf_every_n_ticks", 1, "publish /tf every n ticks (0: never)", **limit_range("tf_every_n_ticks")),
    Param("battery", "scenario",
          "the battery model: 'scenario' (the scenario's vehicle.battery) or 'off' (QRSim's open loop, as "
          "vehicle.battery.on=false)", choices=("scenario", "off")),
    Param("battery_every_n_ticks", BATTERY_EVERY_N_TICKS,
          "publish uavN/battery every n ticks (5: every 0.1 s of simulated time; 0: never; nothing with "
          "the scenario's battery off)", **limit_range("battery_every_n_ticks")),
)




class VehicleDynamicsNode(ScenarioNode):
    """The fleet's integrator and the simulation clock (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("vehicle_dynamics", PARAMETERS)
        p, sc = self.params, self.scenario
        n = self.num_vehicles
        self.names = [vehicle_namespace(i) for i in range(n)]
        self.exit_status: int | None = None  # set at duration_s (``_finish``)
        streams = RandomStreams(sc.seed)
        self.seed_entropy = streams.entropy
        self.fleet = build_fleet(sc, streams)
        self.scene = build_scene(sc, streams)  # the 3-D scene's solid obstacles (None: QRSim's open area)
        self._task = make_task(TaskContext(sc))  # placement reads the scenario
        self._placement_rng = streams.get(PLACEMENT_STREAM)
        self.controlled = np.array([m in CONTROLLED_MODES for m in sc.control_modes()], bool)
        warn = ThrottledWarnings(self)
        timeout_s = p.command_timeout_s if p.command_timeout_s >= 0 else sc.vehicle.command_timeout_s
        is_rotor = np.array([a == ROTOR for a in self.fleet.airframes], bool)
        rotor = self.fleet.rotor.params if self.fleet.rotor is not None else None
        self.commands = CommandIntake(self.names, is_rotor, rotor, timeout_s, warn)
        battery = sc.vehicle.battery if p.battery == "scenario" else replace(sc.vehicle.battery, on=False)
        self.command_failsafe = CommandFailsafe(self.names, sc, battery, timeout_s, warn)
        self.still_air = sc.still_air  # the wind is neither read nor awaited (the air velocity stays 0)
        self.wind = WindIntake(self.names, p.lockstep, warn)
        self.energy = FleetEnergy(n, battery, sc.bases)  # every vehicle's battery, as Simulator.battery
        # the scenario's faults on the fleet and its batteries (as Simulator.faults; docs/FAULTS.md)
        self.faults = FaultEffects(sc.faults, n, streams, FaultModels(fleet=self.fleet, battery=self.energy),
                                   ticks_per_task_step=ticks_per_update("task.dt_s", sc.task.dt_s),
                                   dt_s=BASE_DT_S, rotor_loss_failsafe=sc.vehicle.rotor_loss_failsafe,
                                   log_entries=0)  # never read here: /sim/faults carries every change
        self.plant = Plant(self.fleet, self.energy, self.faults, self.scene, BASE_DT_S)
        self._link_held: HeldCommands | None = None  # comm_loss: the held commands of the last step
        self.outputs = FleetOutputs(self, sc, run_id=p.run_id, tf_every_n_ticks=p.tf_every_n_ticks,
                                    battery_every_n_ticks=p.battery_every_n_ticks, fleet=self.fleet,
                                    energy=self.energy, faults=self.faults, commands=self.commands,
                                    failsafe=self.command_failsafe, wind=self.wind)
        self.lockstep = LockstepGate(self, p, self.names, self.controlled, self.still_air, self.commands,
                                     self.wind, lambda: self.clock.on_progress())
        self.clock = TickScheduler(self, p, self.lockstep, ClockHooks(
            valid=lambda: self.fleet.valid, integrate=self._integrate,
            publish=lambda: self.outputs.publish_tick(self.clock.k, self.clock.episode),
            start_subscribers=self.start_gate_count,
            start_unmatched=lambda: self.outputs.unmatched_readers(self), start_missing=self._graph_missing,
            starting=self._starting, renew_inputs=self._renew_late_inputs, finish=self._finish), warn)
        self._place()

        # inputs (the lockstep ones made again if one goes deaf)
        self._inputs = RenewableInputs(self)
        if self.controlled.any():  # the flight_controller's commands: one message per tick
            self._inputs.create(FLEET_COMMAND, FleetAttitudeCommand, FLEET_ATTITUDE_COMMAND_TOPIC,
                                self._on_fleet_command, QOS_RELIABLE)
        if not self.still_air:  # wind_field's air velocities: one message per tick
            self._inputs.create(FLEET_WIND, FleetSamples, FLEET_WIND_TOPIC, self._on_wind, QOS_RELIABLE)
        for i, ns in enumerate(self.names):
            if not self.controlled[i]:
                self._inputs.create(("cmd/attitude", i), AttitudeCommand, f"{ns}/cmd/attitude",
                                    lambda m, i=i: self._on_command(i, m), QOS_RELIABLE)
        # the rotor airframe's lower-level inputs (every vehicle: a Pelican one rejects and counts them)
        for kind, msg_type in ((RATES_THRUST, RatesThrustCommand), (MOTORS, MotorCommand)):
            for i, ns in enumerate(self.names):
                self.create_subscription(msg_type, f"{ns}/{COMMAND_TOPICS[kind]}",
                                         lambda m, i=i, kind=kind: self._on_low_level(i, kind, m),
                                         QOS_RELIABLE)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.fault_services = FaultServices(self, self.faults, self.names, lambda: self.clock.k * BASE_DT_S,
                                            lambda: self.clock.stopping)
        self.outputs.publish_episode(self.clock.episode)

        # /diagnostics every second: the input counters, lockstep waits and the pace measured
        self._diag_mark = (time.monotonic(), 0)
        self.diagnostics = Counters(self, DIAGNOSTIC_COUNTERS, info=self._diagnostic_info)
        self.diagnostics.sim_time_s = 0.0  # stamped with simulated time (tick 0 before it runs)
        if self.run_isolation is not None:  # stamped with the tick's time, as the diagnostics
            self.run_isolation.counters.stamp_source = self.diagnostics
        under = [self.names[i] for i in np.flatnonzero(self.controlled)]
        self.get_logger().info(
            f"scenario {sc.name!r}: {n} vehicles, seed entropy {self.seed_entropy}, "
            f"real_time_factor {p.real_time_factor:g}, lockstep {'on' if p.lockstep else 'off'}"
            + (f" (awaiting cmd/attitude of {', '.join(under)})" if p.lockstep and under else "")
            + ("; still air (no mean wind, no turbulence): /sim/fleet/wind is not read"
               if self.still_air else ""))

    # --- episodes -------------------------------------------------------------------------------------
    def _place(self) -> None:
        """A new episode: the task's placement (one draw of the placement stream), tick 0."""
        x0, _ = initial_placement(self._task, self._placement_rng)
        bases = self._task.charging_bases()
        if bases is not None:  # a task that places its landing site per episode (retrieve), as the Simulator
            self.energy.set_bases(bases)
        try:
            self.fleet.set_state(x0)
        except PelicanInputError as exc:
            raise ParameterError(f"parameter 'scenario'={self.scenario.source!r}: initial state: {exc}"
                                 ) from None
        self.faults.begin_episode()  # the start-up step: a failed self test disarms before anything moves
        self.outputs.faults_due = True
        self._link_held = None
        self.clock.new_episode()
        for part in (self.wind, self.commands, self.lockstep, self.command_failsafe):
            part.restart_episode()
        self.energy.reset()

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        if self.clock.stopping:
            response.success, response.message = False, "shutting down (duration_s reached)"
            return response
        try:
            self._place()
        except (ParameterError, ScenarioError) as exc:
            response.success, response.message = False, str(exc)
            return response
        self.outputs.publish_episode(self.clock.episode)
        self.clock.restart()
        self.get_logger().info(f"reset: episode {self.clock.episode}")
        response.success, response.message = True, f"episode {self.clock.episode}"
        return response

    # --- inputs ---------------------------------------------------------------------------------------
    def _on_command(self, i: int, msg: AttitudeCommand) -> None:
        t_ns = stamp_ns(msg.header.stamp)
        awaited = self.lockstep.awaits_command(i, t_ns, self.clock.k)
        self.commands.attitude(i, msg, t_ns, self.clock.k * TICK_NS)
        if awaited or self.params.wait_for_commands:
            self.clock.on_input()

    def _on_fleet_command(self, msg: FleetAttitudeCommand) -> None:
        if self.foreign_run(msg.run_id, FLEET_ATTITUDE_COMMAND_TOPIC):
            return
        t_ns = stamp_ns(msg.header.stamp)
        k = self.clock.k
        vehicles = self.commands.fleet_attitude(msg, t_ns, k * TICK_NS, self.controlled)
        awaited = [self.lockstep.awaits_command(i, t_ns, k) for i in vehicles]
        if any(awaited) or self.params.wait_for_commands:
            self.clock.on_input()

    def _on_low_level(self, i: int, kind: int, msg: RatesThrustCommand | MotorCommand) -> None:
        self.commands.low_level(i, kind, msg, stamp_ns(msg.header.stamp), self.clock.k * TICK_NS)
        if self.params.wait_for_commands:
            self.clock.on_input()

    def _on_wind(self, msg: FleetSamples) -> None:
        if self.foreign_run(msg.run_id, FLEET_WIND_TOPIC):
            return
        try:
            vehicles, winds = read_samples(msg, FLEET_WIND_TOPIC, WIND_COLUMNS, self.num_vehicles)
        except FleetMessageError as exc:
            self.wind.wind_rejected += 1
            self.get_logger().warning(f"{exc}: ignored", throttle_duration_sec=5.0)
            return
        if self.wind.receive_fleet(vehicles, winds, stamp_ns(msg.header.stamp), self.clock.k):
            self.clock.on_input()

    # --- the start gate -----------------------------------------------------------------------------------
    def _graph_missing(self) -> list[str]:
        """Lockstep start: inputs without a publisher, and whether the ground truth has a subscriber."""
        awaited = [] if self.still_air else [(FLEET_WIND, FLEET_WIND_TOPIC)]
        if self.controlled.any():
            awaited.append((FLEET_COMMAND, FLEET_ATTITUDE_COMMAND_TOPIC))
        missing = [f"a publisher of {topic}" for key, topic in awaited
                   if self._inputs[key].get_publisher_count() < 1]
        if self.outputs.status_pub.get_subscription_count() < 1:
            missing.append("a subscriber of /sim/vehicle_status")
        return missing

    def start_gate_count(self) -> int:
        """Subscribers of /sim/vehicle_status that count for the start gate: the matched ones; in a run
        (``run_id``) only those of nodes that announced this run (a user's own subscriber, or another
        run's, cannot open the gate early)."""
        status_pub = self.outputs.status_pub
        matched = status_pub.get_subscription_count()
        if self.run_isolation is None:
            return matched
        return min(matched, self.run_isolation.member_subscriptions(status_pub.topic_name))

    # --- stepping ---------------------------------------------------------------------------------------
    def _integrate(self, k: int) -> None:
        """Integrate the step to tick ``k`` with the held inputs (``Plant.tick``)."""
        self.plant.tick(k, self._plant_inputs)
        self._inputs.wait_ended()

    def _renew_late_inputs(self, waited_s: float) -> None:
        """The tick's lockstep inputs are late (``waited_s`` wall seconds since it went out): past
        ``RENEW_AFTER_S`` their subscriptions are made again (a deaf reader, as the flight controller's)."""
        late = list(dict.fromkeys(FLEET_COMMAND if topic == "cmd/attitude" else FLEET_WIND
                                  for topic, _ in self.lockstep.late_inputs(self.clock.k, self.fleet.valid)))
        renewed = self._inputs.wait_went_on(waited_s, late)
        if renewed:
            self.diagnostics.count("inputs_renewed", len(renewed))
            self.get_logger().warning(f"tick {self.clock.k}: subscribed again to {', '.join(renewed)}")

    def _plant_inputs(self, events: FaultEvents) -> PlantInputs:
        """Step k+1's inputs to the plant, once its faults are known (``Plant.tick``): the held commands
        (or the failsafe's controls) and the wind of tick k in body FRD."""
        if events:
            self.outputs.faults_due = True
        self._hold_lost_links()
        x = self.fleet.state  # the tick's start (before a failsafe touch-down disarms)
        u = self.command_failsafe.controls(self.commands.held, self.fleet, self.energy, self.clock.k)
        wind_body = ned_to_body(dcm_from_state(x), self.wind.wind_ned)  # NaN rows only for frozen vehicles
        fly_low_level = self.command_failsafe.flies_low_level(self.fleet)
        rates_thrust, motors = self.commands.low_level_inputs(fly_low_level)
        return PlantInputs(u, wind_body, rates_thrust, motors)

    def _hold_lost_links(self) -> None:
        """comm_loss: the vehicles whose link was down when this step's commands were sent (t_k, as the
        Simulator's ``drop_commands``) keep the commands held at the last step (what arrived since is
        ignored: it expires after command_timeout_s as any held command); the others' are kept for the
        next tick's check. Vehicles flown by the onboard flight_controller are not held here: their
        cmd/attitude is onboard, and the flight_controller drops their set points itself."""
        lost = self.faults.links_lost_at_issue
        if lost is not None and self._link_held is not None:
            lost = lost & ~self.controlled
            if lost.any():
                self.commands.held.restore(self._link_held, lost)
        self._link_held = self.commands.held.copy()

    def _diagnostic_info(self) -> dict[str, object]:
        """/diagnostics (``Counters``): the counters over all vehicles, stamped with the simulated time,
        and the pace since the last publication (ticks per wall second, the real-time factor achieved)."""
        d, c = self.diagnostics, self.clock
        for name, owner in (("commands_rejected", self.commands), ("commands_clamped", self.commands),
                            ("command_timeouts", self.command_failsafe), ("wind_rejected", self.wind)):
            d.values[name] = int(getattr(owner, name).sum())
        d.values["lockstep_timeouts"] = c.lockstep_timeouts
        d.values["progress_resubscriptions"] = self.lockstep.progress_resubscriptions
        d.sim_time_s = c.k * BASE_DT_S
        now = time.monotonic()
        wall_s, steps = now - self._diag_mark[0], c.steps - self._diag_mark[1]
        self._diag_mark = (now, c.steps)
        rate_hz = steps / wall_s if wall_s > 0 else 0.0
        p = self.params
        return {"started": c.started, "episode": c.episode, "tick": c.k, "steps": c.steps,
                "tick_period_s": BASE_DT_S, "tick_rate_hz": f"{rate_hz:.1f}",
                "real_time_factor": f"{rate_hz * BASE_DT_S:.3f}",
                "real_time_factor_target": p.real_time_factor, "lockstep": p.lockstep}

    def _starting(self) -> None:
        """Tick 0 is about to go out: the ground truth is built for whoever is matched now (logged)."""
        self.outputs.check_listeners()
        self.get_logger().info(f"tick 0 goes to the matched readers: {self.outputs.reader_counts()}"
                               + ("" if self.outputs.listened else " (odometry, accel and /tf not built)"))

    def _finish(self) -> None:
        """duration_s reached: let the last messages be acknowledged, then end the run with status 0
        (``exit_status``: the spin of ``run_node``, or of every node of a single-process run, stops and
        the other nodes' readers get their acknowledgements too before anything is destroyed)."""
        self.outputs.wait_for_acks(time.monotonic() + FINAL_ACK_S)
        self.exit_status = 0


def main(argv: list[str] | None = None) -> int:
    return run_node(VehicleDynamicsNode, argv)


if __name__ == "__main__":
    sys.exit(main())

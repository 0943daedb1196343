"""vehicle_dynamics: integrates every Pelican of the scenario, owns ``/clock``, publishes the ground truth.

The core's ``PelicanFleet`` (built by ``fleet.build_fleet``, as the Simulator: its parameters and
dynamic-noise streams) is stepped at DT = 0.02 s; vehicles are placed at every episode start by the
task rules (``tasks.initial_placement`` on the ``task.placement`` stream), as ``Simulator.reset``.

Topics (vehicle topics relative, ``uavN/...``; docs/NODE_GRAPH.md):
  out  ``/clock`` (rosgraph_msgs/Clock) t_k after step k (0 after a reset);
       ``uavN/ground_truth/odom`` (nav_msgs/Odometry, ``map`` -> ``uavN/base_link``, twist in the child
       frame) and ``uavN/ground_truth/accel`` (geometry_msgs/AccelStamped, body specific force in FLU,
       +9.81 on z at hover) stamped t_k, every tick (``conversions``);
       ``/tf`` (tf2_msgs/TFMessage, ``map`` -> ``uavN/base_link`` of every vehicle in one message, every
       ``tf_every_n_ticks`` ticks) and ``/tf_static`` (latched: ``map`` -> ``map_ned``, ``uavN/base_link``
       -> ``uavN/base_link_frd`` and -> ``uavN/camera_optical`` per the camera mounting);
       ``/sim/vehicle_status`` (qrsim_ros/VehicleStatus) every tick: validity, reasons, input counters
       and the whole fleet's exact state and specific force (the simulator's nodes read only this);
       ``uavN/battery`` (sensor_msgs/BatteryState, ``uavN/base_link``) every ``battery_every_n_ticks``
       ticks (0.1 s of simulated time by default) while the scenario's battery is on (``FleetEnergy``,
       stepped here as in the Simulator; docs/ENERGY.md);
       ``/sim/episode`` (std_msgs/UInt32, latched): 1 for the episode started at launch, +1 per reset;
       ``/sim/faults`` (qrsim_ros/ActiveFaults, latched, the last 100 changes kept for late joiners):
       the active faults of the scenario's ``faults:`` and the injected ones, published at tick 0 and
       at every tick the active set changes (stamped with that tick's time; docs/FAULTS.md "Graph");
       ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, ``ros.node.Counters``) every wall second,
       stamped with the simulated time: the input counters summed over vehicles (commands_rejected,
       commands_clamped, command_timeouts, wind_rejected), lockstep_timeouts (waits longer than
       lockstep_timeout_s), progress_resubscriptions (the consumers' latched progress reports read
       again from a new subscription after such a wait for them alone), and started, episode, tick,
       steps, tick_period_s, tick_rate_hz and real_time_factor (measured since the last array),
       real_time_factor_target, lockstep.
       Per tick the ground truth goes out first (odometry, accel, status), then /clock and /tf: the
       lockstep loop waits on what wind_field and the sensor nodes compute from the ground truth.
       Odometry, accel and /tf are only built while someone subscribes to one of them (RViz, a
       recorder, a user's node; re-checked whenever a subscription matches or leaves): the simulator's
       own nodes read the status.
  in   ``uavN/cmd/attitude`` (qrsim_ros/AttitudeCommand): frame ``uavN/base_link_frd`` or empty (FRD,
       QRSim native) or ``uavN/base_link`` (FLU: pitch and yaw rate negated). Non-finite values, a
       wrong frame_id, a stamp older than the held command's, older than ``command_timeout_s`` or ahead
       of the simulated time are rejected; values outside QRSim's limits are clamped; each with a
       throttled warning and a per-vehicle counter (VehicleStatus). The latest valid command is held;
       once it is older than ``command_timeout_s`` (simulated time, by its stamp; default the scenario's
       ``vehicle.command_timeout_s``) the vehicle flies the scenario's ``vehicle.failsafe`` until a new one
       arrives (counted): ``FleetControl``'s hold / land / level, computed here on the exact state (the
       ground truth in the eX layout: this node has no estimated state; the in-process Simulator uses
       its estimated state). Before its first command a vehicle hovers level. The flight_controller's
       commands carry its own failsafe, ``disarm`` and set-point counters (AttitudeCommand), reported in
       the status; a command with ``disarm`` (touched down in ``land``) disarms the vehicle: frozen,
       invalid until the next episode.
       ``uavN/cmd/rates_thrust`` (qrsim_ros/RatesThrustCommand: FRD body rates [rad/s] and collective
       thrust [N]) and ``uavN/cmd/motors`` (qrsim_ros/MotorCommand: 4 normalised motor commands in
       [0, 1]): the rotor airframe's lower-level inputs (``Airframes.step(rates_thrust=, motors=)``,
       docs/ROTOR.md), validated as cmd/attitude (frame, non-finite, stamps, clamps, the same counters,
       expiry -> failsafe). The latest valid command of the three kinds is the one held and flown (the
       stamp rules compare against it, whatever its kind). On a Pelican vehicle (no rotors) they are
       rejected and counted. In lockstep they are not awaited (as cmd/attitude of an attitude-mode
       vehicle); a vehicle flown through the flight_controller gets its cmd/attitude every tick, which
       wins over them.
       ``uavN/wind`` (geometry_msgs/Vector3Stamped, ``map``, ENU air velocity from wind_field) stamped
       t_k: the air velocity for the step t_k -> t_k+1, rotated into the body frame with the exact state.
       Non-finite or not in ``map``: rejected (counted), the held wind stays. In lockstep a second,
       different wind for the same tick (a second wind_field in the domain) is counted and ignored. In
       still air (the scenario's mean wind and turbulence both off) it is not subscribed to: the air
       velocity is zero, as in the Simulator, and lockstep does not wait for it.
  srv  ``~/reset`` (std_srvs/Trigger): new placement, episode + 1, tick 0 published again.
       ``/sim/inject_fault`` (qrsim_ros/InjectFault: one ``faults:`` item as YAML) and ``/sim/clear_fault``
       (qrsim_ros/ClearFault: by id or kind, on one vehicle or all): act at the next tick, as
       ``Simulator.inject_fault`` / ``clear_fault``; a bad request answers success=false and a message.

Faults (docs/FAULTS.md): this node owns the scenario's fault schedule (``FaultEffects``, built as the
Simulator's: the same scenario, the same ``fault.<id>`` random streams), steps it first in every tick
(start-up step at every episode start) and applies the fleet's effects: rotor faults and stuck motors
(thrust fault, rotor health, yaw disturbance), self-test failure (disarmed at the start), battery cell
failure (its ``FleetEnergy``) and comm_loss (a vehicle's cmd/attitude, cmd/rates_thrust or cmd/motors
received for a tick without a link is ignored: the held command stays and expires after
``command_timeout_s``). The tick's active faults travel with its ``/sim/vehicle_status`` (``faults``), from
which the sensor nodes apply the sensor faults at the same tick (``FaultEffects.apply_active``).

Stepping (never blocks the executor): step k+1 is integrated in whichever callback completes its
inputs (a wind or command message, or the wall-clock timer), paced by ``real_time_factor``:
- ``lockstep: true``: step k+1 waits for the wind of t_k of every valid vehicle (not in still air) and,
  for valid vehicles flown through the flight_controller (scenario control mode other than
  ``attitude``), their ``cmd/attitude`` stamped t_k. After ``lockstep_timeout_s`` of wall time the
  missing inputs are named in a warning ("waiting for uav2/wind@t=1.24, uav1/cmd/attitude@t=1.24") and
  the tick's outputs are published again (for nodes that joined late or lost them; consumers treat a
  repeated tick as a repeat); then it waits on (``wait``) or steps with the held inputs (``continue``).
  Tick 0 is first published once every awaited input has a publisher and the odometry has a
  subscriber. The clock also runs at most ``lockstep_window_ticks`` ahead of the slowest ground-truth
  consumer (their ``/sim/tick_progress``; the plan's ``lockstep_consumers`` must each have reported),
  and at ``duration_s`` the node waits (at most DRAIN_TIMEOUT_S) for all of them to handle the last tick.
- ``lockstep: false``: nothing is awaited; the latest inputs are held.
``wait_for_commands: true`` holds the clock at tick 0 until every vehicle has a valid command (a
deterministic start for tests and batch runs whose commands are published before the start).
``duration_s`` > 0: after that much simulated time (all episodes) the node waits (at most 2 s) for its
last messages to be acknowledged and shuts the process down (exit status 0).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np
import rclpy
from geometry_msgs.msg import AccelStamped, Vector3Stamped
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.duration import Duration
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import BatteryState
from std_msgs.msg import UInt32
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage

from qrsim_ros.core.common.frames import dcm_from_state, enu_to_ned, ned_to_body
from qrsim_ros.core.common.limits import LOCKSTEP_WINDOW_TICKS
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S, TICK_NS
from qrsim_ros.core.common.validation import ConfigError, ticks_per_update
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.engine.builders import build_fleet, build_scene
from qrsim_ros.core.engine.faults import FaultEffects, FaultModels
from qrsim_ros.core.engine.plant import Plant, PlantInputs
from qrsim_ros.core.faults import FaultEvents
from qrsim_ros.core.tasks.factory import make_task
from qrsim_ros.core.tasks.rules import PLACEMENT_STREAM, TaskContext, initial_placement
from qrsim_ros.core.vehicles.airframes import ROTOR
from qrsim_ros.core.vehicles.emergency_land import emergency_failsafe
from qrsim_ros.core.vehicles.energy import FleetEnergy
from qrsim_ros.core.vehicles.estimated_state import exact_estimated_state
from qrsim_ros.core.vehicles.fleet_control import CONTROLLED_MODES, FleetControl
from qrsim_ros.core.vehicles.pelican import CONTROL_LIMITS, HOVER_CONTROL, PelicanInputError
from qrsim_ros.core.vehicles.rotor_control import RATE_LIMITS_RADPS, low_level_bounds
from qrsim_ros.msg import (
    ActiveFaults,
    AttitudeCommand,
    MotorCommand,
    RatesThrustCommand,
    TickProgress,
    VehicleStatus,
)
from qrsim_ros.ros.from_messages import fault_request
from qrsim_ros.ros.names import (
    MAP_FRAME,
    TICK_PROGRESS_TOPIC,
    base_link_frame,
    base_link_frd_frame,
    vehicle_namespace,
)
from qrsim_ros.ros.node import Counters, ParameterError, ScenarioNode, run_node
from qrsim_ros.ros.parameters import (
    SCENARIO_PARAMETERS,
    Param,
    ParamTable,
    limit_range,
    limited,
)
from qrsim_ros.ros.qos import QOS_CLOCK, QOS_LATCHED, QOS_LATCHED_STREAM, QOS_RELIABLE, QOS_TICK_PROGRESS
from qrsim_ros.ros.sensor_ticks import BATTERY_EVERY_N_TICKS
from qrsim_ros.ros.stamps import stamp_from_tick, stamp_ns
from qrsim_ros.ros.to_messages import (
    accel_message,
    active_fault_messages,
    active_faults_message,
    battery_state_message,
    fill_battery_state,
    fill_ground_truth,
    float64_array,
    odometry_message,
    static_transforms,
    transform,
)
from qrsim_ros.srv import ClearFault, InjectFault

#: What a vehicle's held command is (``_cmd_kind``): its topic under ``uavN/``.
ATTITUDE, RATES_THRUST, MOTORS = 0, 1, 2
COMMAND_TOPICS = ("cmd/attitude", "cmd/rates_thrust", "cmd/motors")
#: The episode number of the episode started at launch (the count of placements drawn).
FIRST_EPISODE = 1
#: /tf as tf2_ros' broadcasters publish it.
QOS_TF = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: /sim/vehicle_status, the fleet's ground truth: a writer history for the readers' bursts of ticks.
QOS_FLEET = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: Seconds between two warnings of the same kind.
WARN_PERIOD_S = 2.0
#: Wall-clock budget of one free-running burst of steps before the executor gets control back [s].
BURST_S = 0.01
#: Longest the final acknowledgements are waited for at ``duration_s`` [s].
FINAL_ACK_S = 2.0
#: Longest wall time the node waits at duration_s for the ground-truth consumers to handle the last tick [s].
DRAIN_TIMEOUT_S = 10.0
#: The counters on /diagnostics (summed over vehicles; per vehicle they are in /sim/vehicle_status).
DIAGNOSTIC_COUNTERS = ("commands_rejected", "commands_clamped", "command_timeouts", "wind_rejected",
                       "lockstep_timeouts")


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
        streams = RandomStreams(sc.seed)
        self.seed_entropy = streams.entropy
        self.fleet = build_fleet(sc, streams)
        #: the 3-D scene's solid obstacles (None: QRSim's open area)
        self.scene = build_scene(sc, streams)
        self._task = make_task(TaskContext(sc))  # placement reads the scenario
        self._placement_rng = streams.get(PLACEMENT_STREAM)
        self.controlled = np.array([m in CONTROLLED_MODES for m in sc.control_modes()], bool)

        # held inputs
        self._cmd = np.tile(HOVER_CONTROL, (n, 1))  # SI controls, FRD, clamped
        self._cmd_ns = np.full(n, -1, np.int64)  # stamp of the held command [ns]; -1: none yet
        self._cmd_seen_ns = np.full(n, -1, np.int64)  # lockstep: stamp of the last command of t_k seen
        self._has_cmd = np.zeros(n, bool)
        self._cmd_failsafe = [""] * n  # what the flight_controller's held command says (AttitudeCommand)
        self._cmd_disarm = np.zeros(n, bool)
        # the held command's kind (ATTITUDE, RATES_THRUST, MOTORS) and a lower-level one's values (FRD
        # [p, q, r] rad/s + thrust N, or the 4 normalised motor commands), clamped
        self._cmd_kind = np.zeros(n, np.int8)
        self._low = np.full((n, 4), np.nan)
        self._is_rotor = np.array([a == ROTOR for a in self.fleet.airframes], bool)
        rp = self.fleet.rotor.params if self.fleet.rotor is not None else None
        #: cmd/rates_thrust's and cmd/motors' limits (the Simulator's, ``rotor_control.low_level_bounds``)
        self._low_bounds = {kind: low_level_bounds(mode, rp) for kind, mode in
                            ((RATES_THRUST, "rates_thrust"), (MOTORS, "motors"))} if rp is not None else {}
        self._timeout_s = p.command_timeout_s if p.command_timeout_s >= 0 else sc.vehicle.command_timeout_s
        # the failsafe of an expired cmd/attitude (every vehicle taken as attitude mode, on the exact state)
        battery = sc.vehicle.battery if p.battery == "scenario" else replace(sc.vehicle.battery, on=False)
        self._failsafe_control = FleetControl(["attitude"] * n, sc.task.flight_z_ned_m, self._timeout_s,
                                              sc.vehicle.failsafe, sc.vehicle.failsafe_land_rate_m_s,
                                              battery, sc.bases)
        #: every vehicle's battery, stepped with the fleet (as ``Simulator.battery``)
        self.energy = FleetEnergy(n, battery, sc.bases)
        #: the scenario's faults on the fleet and its batteries (as ``Simulator.faults``; docs/FAULTS.md)
        self.faults = FaultEffects(sc.faults, n, streams, FaultModels(fleet=self.fleet, battery=self.energy),
                                   ticks_per_task_step=ticks_per_update("task.dt_s", sc.task.dt_s),
                                   dt_s=BASE_DT_S, rotor_loss_failsafe=sc.vehicle.rotor_loss_failsafe)
        #: the vehicles' physics, stepped once per tick as in the Simulator (``core.engine.plant``)
        self.plant = Plant(self.fleet, self.energy, self.faults, self.scene, BASE_DT_S)
        self._faults_changed = True  # /sim/faults is due (published with the next tick)
        self._fault_msgs: list[Any] = []  # the active set as ActiveFault messages (/sim/vehicle_status)
        self._link_held: tuple[Any, ...] | None = None  # comm_loss: the held commands of the last step
        self.failsafe = [""] * n  # what the last step flew
        self.failsafe_onsets = np.zeros(n, np.int64)
        self.setpoints_rejected = np.zeros(n, np.int64)
        self.setpoints_clamped = np.zeros(n, np.int64)
        self._fresh = np.zeros(n, bool)  # the last step flew the held command (not the hover fallback)
        self._wind_ned = np.zeros((n, 3))
        self._wind_tick = np.full(n, -1, np.int64)
        self._wind_rx = np.full((n, 3), np.nan)  # the wind of _wind_tick as received (ENU), lockstep
        # counters (since start)
        self.commands_rejected = np.zeros(n, np.int64)
        self.commands_clamped = np.zeros(n, np.int64)
        self.command_timeouts = np.zeros(n, np.int64)
        self.wind_rejected = np.zeros(n, np.int64)
        self._last_warning: dict[str, float] = {}

        # time
        self._k = 0  # tick of the published ground truth
        self.steps = 0  # steps integrated since start (all episodes)
        self.episode = FIRST_EPISODE - 1
        self._started = False
        self._started_wall = 0.0
        self._stopping = False
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self._period_s = BASE_DT_S / p.real_time_factor if p.real_time_factor > 0 else 0.0
        self._pace_wall = 0.0
        self._pace_step = 0
        self._wait_since = time.monotonic()
        self._max_steps = (math.floor(p.duration_s / BASE_DT_S + 1e-9) if p.duration_s > 0 else 0)

        self._place()

        # publishers
        self._clock_pub = self.create_publisher(ClockMsg, "/clock", QOS_CLOCK)
        # odometry, accel and /tf are built only while someone subscribes: a (un)match re-checks
        matched = PublisherEventCallbacks(matched=lambda _info: self._check_listeners())
        self._odom_pubs = [self.create_publisher(Odometry, f"{ns}/ground_truth/odom", QOS_RELIABLE,
                                                 event_callbacks=matched) for ns in self.names]
        self._accel_pubs = [self.create_publisher(AccelStamped, f"{ns}/ground_truth/accel", QOS_RELIABLE,
                                                  event_callbacks=matched) for ns in self.names]
        self._tf_pub = self.create_publisher(TFMessage, "/tf", QOS_TF, event_callbacks=matched)
        self._tf_static_pub = self.create_publisher(TFMessage, "/tf_static", QOS_LATCHED)
        # deeper than the other outputs: it carries the ground truth every simulator node steps on
        self._status_pub = self.create_publisher(VehicleStatus, "/sim/vehicle_status", QOS_FLEET)
        self._episode_pub = self.create_publisher(UInt32, "/sim/episode", QOS_LATCHED)
        # every change matters (a fault log): a depth-1 writer replaced a change not yet delivered to a
        # reader that lagged (seen under load: the set of tick 15 lost to tick 25's); a late joiner gets
        # the last changes, the latest last
        self._faults_pub = self.create_publisher(ActiveFaults, "/sim/faults", QOS_LATCHED_STREAM)
        bat = sc.vehicle.battery
        self._battery_pubs = [self.create_publisher(BatteryState, f"{ns}/battery", QOS_RELIABLE)
                              for ns in self.names] if self.energy.on and p.battery_every_n_ticks else []
        self._battery_msgs = [battery_state_message(i, bat.cells, bat.capacity_ah, bat.model)
                              for i in range(len(self._battery_pubs))]
        self._clock_msg = ClockMsg()
        self._odom_msgs = [odometry_message(i) for i in range(n)]
        self._accel_msgs = [accel_message(i) for i in range(n)]
        zero = stamp_from_tick(0)
        self._tf_msg = TFMessage(transforms=[transform(MAP_FRAME, base_link_frame(i), np.zeros(3),
                                                       [0.0, 0.0, 0.0, 1.0], zero) for i in range(n)])
        self._status_msg = VehicleStatus(names=list(self.names), run_id=p.run_id)
        self._status_msg.header.frame_id = MAP_FRAME

        # inputs
        self._frd_frames = [base_link_frd_frame(i) for i in range(n)]
        self._flu_frames = [base_link_frame(i) for i in range(n)]
        self._cmd_subs = [self.create_subscription(AttitudeCommand, f"{ns}/cmd/attitude",
                                                   lambda m, i=i: self._on_command(i, m), QOS_RELIABLE)
                          for i, ns in enumerate(self.names)]
        # the rotor airframe's lower-level inputs (every vehicle: a Pelican one rejects and counts them)
        self._rates_subs = [self.create_subscription(RatesThrustCommand, f"{ns}/cmd/rates_thrust",
                                                     lambda m, i=i: self._on_low_level(i, RATES_THRUST, m),
                                                     QOS_RELIABLE) for i, ns in enumerate(self.names)]
        self._motor_subs = [self.create_subscription(MotorCommand, f"{ns}/cmd/motors",
                                                     lambda m, i=i: self._on_low_level(i, MOTORS, m),
                                                     QOS_RELIABLE) for i, ns in enumerate(self.names)]
        #: ``Scenario.still_air``: uavN/wind is neither read nor awaited (the air velocity stays zero;
        #: wind_field then publishes it only to other readers)
        self.still_air = sc.still_air
        self._wind_subs = [] if self.still_air else [
            self.create_subscription(Vector3Stamped, f"{ns}/wind", lambda m, i=i: self._on_wind(i, m),
                                     QOS_RELIABLE) for i, ns in enumerate(self.names)]
        # lockstep: the ground-truth consumers' progress, node -> (episode, tick) of the last tick handled
        self._progress: dict[str, tuple[int, int]] = {}
        self._progress_sub = (self.create_subscription(TickProgress, TICK_PROGRESS_TOPIC, self._on_progress,
                                                       QOS_TICK_PROGRESS)
                              if p.lockstep and p.lockstep_window_ticks > 0 else None)
        self.progress_resubscriptions = 0
        self._draining_since: float | None = None  # duration_s reached, waiting for the consumers
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(InjectFault, "/sim/inject_fault", self._on_inject_fault)
        self.create_service(ClearFault, "/sim/clear_fault", self._on_clear_fault)

        static = static_transforms(n, sc.vehicle.camera.r_body_rad, zero)
        self._tf_static_pub.publish(TFMessage(transforms=static))
        self._episode_pub.publish(UInt32(data=self.episode))
        # wall-clock timer: pacing (a quarter of a tick's period: steps late by at most that), lockstep
        # timeouts, free-running bursts
        free_s = 0.01 if p.lockstep else 0.001
        timer_s = min(max(self._period_s / 4, 0.001), 0.05) if p.real_time_factor > 0 else free_s
        self._gt_listened = True  # until the first check
        self._timer = self.create_timer(timer_s, self._on_timer, clock=self._wall)
        # /diagnostics every second: the input counters, lockstep waits and the pace measured
        self.lockstep_timeouts = 0
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
            + ("; still air (no mean wind, no turbulence): uavN/wind is not read" if self.still_air else ""))

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
        self._faults_changed = True
        self._link_held = None
        self.episode += 1
        self._k = 0
        self._wind_tick[:] = -1
        self._cmd_seen_ns[:] = -1
        # a held command stays, as if given at the episode start (stamps restart from 0)
        self._cmd_ns[self._has_cmd] = 0
        self._cmd_disarm[:] = False
        self._failsafe_control.reset()
        self.energy.reset()
        self.failsafe = [""] * self.num_vehicles

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        if self._stopping:
            response.success, response.message = False, "shutting down (duration_s reached)"
            return response
        try:
            self._place()
        except (ParameterError, ScenarioError) as exc:
            response.success, response.message = False, str(exc)
            return response
        self._episode_pub.publish(UInt32(data=self.episode))
        if self._started:
            self._publish_tick()
            self._anchor_pace()
        self.get_logger().info(f"reset: episode {self.episode}")
        response.success, response.message = True, f"episode {self.episode}"
        return response

    # --- inputs ---------------------------------------------------------------------------------------
    def _warn(self, key: str, text: str) -> None:
        now = time.monotonic()
        if now - self._last_warning.get(key, -math.inf) >= WARN_PERIOD_S:
            self._last_warning[key] = now
            self.get_logger().warning(text)

    def _reject_command(self, i: int, why: str, kind: int = ATTITUDE) -> None:
        self.commands_rejected[i] += 1
        self._warn(f"cmd{i}.{kind}", f"{self.names[i]}/{COMMAND_TOPICS[kind]} rejected: {why} "
                                     f"({self.commands_rejected[i]} rejected so far; the held command stays)")

    def _command_frame(self, i: int, frame_id: str, kind: int) -> bool | None:
        """Whether a command's frame_id is FLU (``uavN/base_link``), FRD (``uavN/base_link_frd`` or
        empty: False), or None (rejected and counted)."""
        frame = frame_id.lstrip("/")
        if frame in ("", self._frd_frames[i]):
            return False
        if frame == self._flu_frames[i]:
            return True
        self._reject_command(i, f"frame_id {frame!r} must be {self._frd_frames[i]!r} (or empty: FRD) "
                                f"or {self._flu_frames[i]!r} (FLU)", kind)
        return None

    def _stamp_problem(self, i: int, t_ns: int, now_ns: int) -> str:
        """Why a command stamped ``t_ns`` cannot be held at the tick ``now_ns`` ('' if it can): older
        than the held command (of any kind), ahead of the simulated time, or stale."""
        if t_ns < self._cmd_ns[i]:
            return (f"stamp {t_ns * 1e-9:.3f} s is older than the held command's "
                    f"({self._cmd_ns[i] * 1e-9:.3f} s)")
        if t_ns > now_ns + TICK_NS:
            return (f"stamp {t_ns * 1e-9:.3f} s is ahead of the simulated time {now_ns * 1e-9:.3f} s "
                    "(stamp commands with the /clock time: use_sim_time)")
        if self._timeout_s > 0 and (now_ns - t_ns) * 1e-9 > self._timeout_s:
            return (f"stale: stamp {t_ns * 1e-9:.3f} s is more than command_timeout_s={self._timeout_s:g} s "
                    f"before the simulated time {now_ns * 1e-9:.3f} s")
        return ""

    def _on_command(self, i: int, msg: AttitudeCommand) -> None:
        t_ns = stamp_ns(msg.header.stamp)
        now_ns = self._k * TICK_NS
        awaited = self.params.lockstep and self.controlled[i] and t_ns == now_ns
        if awaited:  # the flight_controller's command of t_k came: a rejected one leaves the held one
            self._cmd_seen_ns[i] = t_ns
        self._accept_command(i, msg, t_ns, now_ns)
        if awaited or self.params.wait_for_commands:
            self._try_advance()

    def _accept_command(self, i: int, msg: AttitudeCommand, t_ns: int, now_ns: int) -> None:
        """Validate a command and hold it (or count and warn)."""
        flu = self._command_frame(i, msg.header.frame_id, ATTITUDE)
        if flu is None:
            return
        u = np.array([msg.pitch, msg.roll, msg.throttle, msg.yaw_rate, msg.battery_voltage], float)
        if not np.all(np.isfinite(u)):
            self._reject_command(i, "non-finite values (pitch, roll, throttle, yaw_rate, battery) "
                                    f"{u.tolist()}")
            return
        problem = self._stamp_problem(i, t_ns, now_ns)
        if problem:
            self._reject_command(i, problem)
            return
        if flu:  # FLU pitch and yaw rate have the opposite sign of QRSim's (AttitudeCommand.msg)
            u[0], u[3] = -u[0], -u[3]
        clamped = np.clip(u, CONTROL_LIMITS[:, 0], CONTROL_LIMITS[:, 1])
        if np.any(clamped != u):
            self.commands_clamped[i] += 1
            self._warn(f"clamp{i}", f"{self.names[i]}/cmd/attitude clamped into QRSim's limits (|roll|, "
                                    f"|pitch| <= 0.9 rad, |yaw_rate| <= 4.5 rad/s, throttle 0..1, battery "
                                    f"9..12 V): {u.tolist()} -> {clamped.tolist()} (FRD; "
                                    f"{self.commands_clamped[i]} clamped so far)")
        self._cmd[i] = clamped
        self._cmd_kind[i] = ATTITUDE
        self._cmd_ns[i] = t_ns
        self._has_cmd[i] = True
        self._cmd_failsafe[i] = msg.failsafe
        self._cmd_disarm[i] = msg.disarm
        self.setpoints_rejected[i] = msg.setpoints_rejected
        self.setpoints_clamped[i] = msg.setpoints_clamped

    def _on_low_level(self, i: int, kind: int, msg: RatesThrustCommand | MotorCommand) -> None:
        self._accept_low_level(i, kind, msg, stamp_ns(msg.header.stamp), self._k * TICK_NS)
        if self.params.wait_for_commands:
            self._try_advance()

    def _accept_low_level(self, i: int, kind: int, msg: RatesThrustCommand | MotorCommand, t_ns: int,
                          now_ns: int) -> None:
        """Validate a cmd/rates_thrust or cmd/motors (as ``_accept_command``) and hold it."""
        if not self._is_rotor[i]:
            self._reject_command(i, f"{self.names[i]} flies the identified Pelican airframe, which has no "
                                    "rotor-level input (only vehicle.airframe 'rotor' takes it)", kind)
            return
        flu = self._command_frame(i, msg.header.frame_id, kind)
        if flu is None:
            return
        if kind == RATES_THRUST:
            v = np.array([msg.roll_rate_radps, msg.pitch_rate_radps, msg.yaw_rate_radps, msg.thrust_n], float)
            names = "(roll_rate, pitch_rate, yaw_rate, thrust)"
            lo, hi = self._low_bounds[kind]
            limits = (f"|roll_rate|, |pitch_rate| <= {RATE_LIMITS_RADPS[0]:.3f} rad/s, |yaw_rate| <= "
                      f"{RATE_LIMITS_RADPS[2]:g} rad/s, thrust 0..{hi[3]:.2f} N")
        else:
            v = np.asarray(msg.normalised, float)
            names, limits = "normalised", "each in [0, 1]"
            lo, hi = self._low_bounds[kind]
            if v.shape != (4,):
                self._reject_command(i, f"{v.size} normalised values, not 4 (one per rotor)", kind)
                return
        if not np.all(np.isfinite(v)):
            self._reject_command(i, f"non-finite values {names} {v.tolist()}", kind)
            return
        problem = self._stamp_problem(i, t_ns, now_ns)
        if problem:
            self._reject_command(i, problem, kind)
            return
        if flu and kind == RATES_THRUST:  # FLU q and r have the opposite sign of FRD's
            v[1], v[2] = -v[1], -v[2]
        clamped = np.clip(v, lo, hi)
        if np.any(clamped != v):
            self.commands_clamped[i] += 1
            self._warn(f"clamp{i}.{kind}", f"{self.names[i]}/{COMMAND_TOPICS[kind]} clamped ({limits}): "
                                           f"{v.tolist()} -> {clamped.tolist()} (FRD; "
                                           f"{self.commands_clamped[i]} clamped so far)")
        self._low[i] = clamped
        self._cmd_kind[i] = kind
        self._cmd[i] = HOVER_CONTROL  # the control row under it (overridden while the command is fresh)
        self._cmd_ns[i] = t_ns
        self._has_cmd[i] = True
        self._cmd_failsafe[i] = ""  # the flight_controller's fields are cmd/attitude's
        self._cmd_disarm[i] = False

    def _low_level_inputs(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``Airframes.step``'s rates_thrust and motors (N, 4) of this step: the held lower-level
        commands of the valid vehicles that fly them fresh and are in no failsafe (NaN rows elsewhere);
        None when no vehicle flies one."""
        fly = self._fresh & self.fleet.valid & (self._failsafe_control.failsafe_code == 0)
        out: list[np.ndarray | None] = []
        for kind in (RATES_THRUST, MOTORS):
            rows = fly & (self._cmd_kind == kind)
            out.append(np.where(rows[:, None], self._low, np.nan) if rows.any() else None)
        return out[0], out[1]

    def _on_wind(self, i: int, msg: Vector3Stamped) -> None:
        v = msg.vector
        w = np.array([v.x, v.y, v.z], float)
        if msg.header.frame_id.lstrip("/") != MAP_FRAME or not np.all(np.isfinite(w)):
            self.wind_rejected[i] += 1
            self._warn(f"wind{i}", f"{self.names[i]}/wind rejected: frame_id {msg.header.frame_id!r} "
                                   f"(must be {MAP_FRAME!r}), vector {w.tolist()} "
                                   f"({self.wind_rejected[i]} so far)")
            w = None
        t_ns = stamp_ns(msg.header.stamp)
        k, rest = divmod(t_ns, TICK_NS)
        if self.params.lockstep:
            if k == self._wind_tick[i] and not rest:
                if w is not None and not np.array_equal(w, self._wind_rx[i]):  # not a plain repeat
                    self.wind_rejected[i] += 1
                    self._warn(f"wind2{i}", f"{self.names[i]}/wind: two different winds stamped "
                                            f"{t_ns * 1e-9:.2f} s (is a second wind_field running in this "
                                            "ROS domain?); the first is kept")
                return
            if rest or k != self._k:
                return  # an older tick (or from before a reset): already used
            if w is not None:
                self._wind_ned[i] = enu_to_ned(w)
                self._wind_rx[i] = w
            self._wind_tick[i] = k  # arrived (a rejected wind leaves the held one)
            self._try_advance()
        elif w is not None and k >= self._wind_tick[i]:
            self._wind_ned[i] = enu_to_ned(w)
            self._wind_tick[i] = k

    def _ready(self) -> bool:
        valid = self.fleet.valid
        if self.params.wait_for_commands and not self._has_cmd[valid].all():
            return False
        if not self.params.lockstep:
            return True
        if not self.still_air and np.any(valid & (self._wind_tick != self._k)):
            return False
        awaited = valid & self.controlled
        if np.any(awaited & (self._cmd_seen_ns != self._k * TICK_NS)):
            return False
        return not self._lagging(self._k + 1, self.params.lockstep_window_ticks)

    # --- lockstep window ----------------------------------------------------------------------------------
    def _on_progress(self, msg: TickProgress) -> None:
        self._progress[msg.node] = (int(msg.episode), int(msg.tick))
        if self._draining_since is not None:
            self._try_finish()
        elif self._started and not self._stopping:
            self._try_advance()

    def _lagging(self, tick: int, window: int) -> list[str]:
        """Ground-truth consumers more than ``window`` ticks behind ``tick`` of this episode (one of an
        older episode is behind; the planned ones that have not reported yet count once ``tick`` is past
        the window). Empty when the window is off."""
        p = self.params
        if not p.lockstep or p.lockstep_window_ticks <= 0:
            return []
        oldest = tick - window
        behind = [f"{node}@t={tick * BASE_DT_S:.2f}" for node, (episode, tick) in self._progress.items()
                  if episode < self.episode or (episode == self.episode and tick < oldest)]
        unheard = p.lockstep_consumers - len(self._progress)
        if unheard > 0 and oldest >= 0:
            behind.append(f"{unheard} more ground-truth consumer{'s' * (unheard > 1)} (none reported yet)")
        return behind

    def _missing_inputs(self, consumers: bool = True) -> list[str]:
        """What step k+1 waits for: lockstep inputs of tick k, first commands, and (``consumers``) the
        ground-truth consumers behind the lockstep window."""
        valid = self.fleet.valid
        t = f"@t={self._k * BASE_DT_S:.2f}"
        missing: list[str] = []
        if self.params.lockstep:
            if not self.still_air:
                no_wind = valid & (self._wind_tick != self._k)
                missing += [f"{self.names[i]}/wind{t}" for i in np.flatnonzero(no_wind)]
            late = valid & self.controlled & (self._cmd_seen_ns != self._k * TICK_NS)
            missing += [f"{self.names[i]}/cmd/attitude{t}" for i in np.flatnonzero(late)]
            if consumers:
                missing += [f"the consumer {who} (window {self.params.lockstep_window_ticks} ticks)"
                            for who in self._lagging(self._k + 1, self.params.lockstep_window_ticks)]
        if self.params.wait_for_commands:
            missing += [f"{self.names[i]}/cmd/attitude (a first command)" if not self._is_rotor[i] else
                        f"{self.names[i]}/cmd/attitude, cmd/rates_thrust or cmd/motors (a first command)"
                        for i in np.flatnonzero(valid & ~self._has_cmd)]
        return missing

    # --- stepping ---------------------------------------------------------------------------------------
    def _anchor_pace(self) -> None:
        self._pace_wall = time.monotonic()
        self._pace_step = self.steps
        self._wait_since = self._pace_wall

    def _on_timer(self) -> None:
        if self._draining_since is not None:
            self._try_finish()
            return
        if self._stopping:
            return
        if not self._started:
            self._try_start()
            return
        self._try_advance()
        if self._stopping or self._ready():
            return
        waited = time.monotonic() - self._wait_since
        if waited < self.params.lockstep_timeout_s:
            return
        missing = self._missing_inputs()
        self.lockstep_timeouts += 1
        awaiting_first = self.params.wait_for_commands and not self._has_cmd[self.fleet.valid].all()
        if self.params.lockstep and self.params.lockstep_on_timeout == "continue" and not awaiting_first:
            self.get_logger().warning(f"lockstep: no {', '.join(missing)} after {waited:.1f} s: "
                                      "stepping on with the held inputs")
            self._step()
            self._try_advance()
            return
        if self._draining_since is not None:
            return
        inputs_late = bool(self._missing_inputs(consumers=False))
        self.get_logger().warning(f"waiting for {', '.join(missing)} ({waited:.1f} s)"
                                  + (f"; tick {self._k} re-sent" if inputs_late else
                                     "; progress reports read again"))
        if inputs_late:  # an input may be lost: send the tick again (a slow consumer has it queued)
            self._publish_tick()
        else:
            self._resubscribe_progress()
        self._wait_since = time.monotonic()

    def _resubscribe_progress(self) -> None:
        """Read the consumers' progress reports again from a new subscription: they are latched (the last
        ones of each consumer), so it gets the latest at once. A CI run under load waited 8 minutes for two
        consumers whose reports of later ticks had been sent and were still latched (a probe read them):
        this node's subscription no longer delivered them. A slow consumer is only re-read, not hurried."""
        if self._progress_sub is None:
            return
        self.destroy_subscription(self._progress_sub)
        self._progress_sub = self.create_subscription(TickProgress, TICK_PROGRESS_TOPIC, self._on_progress,
                                                      QOS_TICK_PROGRESS)
        self.progress_resubscriptions += 1

    def _diagnostic_info(self) -> dict[str, object]:
        """/diagnostics (``Counters``): the counters over all vehicles, stamped with the simulated time,
        and the pace since the last publication (ticks per wall second, the real-time factor achieved)."""
        d = self.diagnostics
        for name in DIAGNOSTIC_COUNTERS[:-1]:
            d.values[name] = int(getattr(self, name).sum())
        d.values["lockstep_timeouts"] = self.lockstep_timeouts
        d.values["progress_resubscriptions"] = self.progress_resubscriptions
        d.sim_time_s = self._k * BASE_DT_S
        now = time.monotonic()
        wall_s, steps = now - self._diag_mark[0], self.steps - self._diag_mark[1]
        self._diag_mark = (now, self.steps)
        rate_hz = steps / wall_s if wall_s > 0 else 0.0
        p = self.params
        return {"started": self._started, "episode": self.episode, "tick": self._k, "steps": self.steps,
                "tick_period_s": BASE_DT_S, "tick_rate_hz": f"{rate_hz:.1f}",
                "real_time_factor": f"{rate_hz * BASE_DT_S:.3f}",
                "real_time_factor_target": p.real_time_factor, "lockstep": p.lockstep}

    def _graph_missing(self) -> list[str]:
        """Lockstep start: inputs without a publisher, and whether the ground truth has a subscriber."""
        missing = [f"a publisher of {self.names[i]}/wind" for i, sub in enumerate(self._wind_subs)
                   if sub.get_publisher_count() < 1]
        missing += [f"a publisher of {self.names[i]}/cmd/attitude" for i in np.flatnonzero(self.controlled)
                    if self._cmd_subs[i].get_publisher_count() < 1]
        if self._status_pub.get_subscription_count() < 1:
            missing.append("a subscriber of /sim/vehicle_status")
        return missing

    def start_gate_count(self) -> int:
        """Subscribers of /sim/vehicle_status that count for the start gate: the matched ones; in a run
        (``run_id``) only those of nodes that announced this run (a user's own subscriber, or another
        run's, cannot open the gate early)."""
        matched = self._status_pub.get_subscription_count()
        if self.run_isolation is None:
            return matched
        return min(matched, self.run_isolation.member_subscriptions(self._status_pub.topic_name))

    def _try_start(self) -> None:
        waited = time.monotonic() - self._wait_since
        matched = self.start_gate_count()
        p = self.params
        short = matched < p.start_subscribers
        if short and waited < p.start_timeout_s:
            return
        if short:
            self._warn("start", f"starting with {matched} of {p.start_subscribers} subscribers of the "
                                f"ground truth (/sim/vehicle_status) after {waited:.1f} s")
        if p.lockstep:
            missing = self._graph_missing()
            waited = time.monotonic() - self._wait_since
            if missing and not (p.lockstep_on_timeout == "continue" and waited >= p.lockstep_timeout_s):
                if waited >= p.lockstep_timeout_s:
                    self._warn("start", f"lockstep start: waiting for {', '.join(missing)}")
                return
        self._check_listeners()
        self._started = True
        self._started_wall = time.monotonic()
        self.get_logger().info(f"started: tick 0 published after {time.monotonic() - self._wait_since:.2f} s")
        self._publish_tick()
        self._anchor_pace()
        self._try_advance()

    def _try_advance(self) -> None:
        """Integrate as many steps as the inputs and the pace allow (a bounded burst)."""
        if not self._started or self._stopping:
            return
        burst_end = time.monotonic() + BURST_S
        while self._ready():
            now = time.monotonic()
            if self._period_s > 0:
                due = self._pace_wall + (self.steps + 1 - self._pace_step) * self._period_s
                if now < due:
                    return
                if now - due > max(0.1, 5 * self._period_s):  # far behind: do not catch up in a burst
                    self._pace_wall, self._pace_step = now - self._period_s, self.steps
            self._step()
            if self._stopping or now > burst_end:
                return

    def _controls(self) -> np.ndarray:
        """The controls (N, 5) of this step: the held commands, hover before the first, the failsafe
        where the held one expired; disarms the vehicles whose command says so."""
        fresh = self._has_cmd.copy()
        timeout_s = self._timeout_s
        valid = self.fleet.valid
        if timeout_s > 0:
            age_s = (self._k * TICK_NS - self._cmd_ns) * 1e-9
            fresh &= age_s <= timeout_s
        expired = self._fresh & ~fresh & valid
        fc = self._failsafe_control
        if fc.home_pending:  # (fc.controls runs only in a failsafe here)
            fc.record_home(exact_estimated_state(self.fleet.state, self.fleet.accel_body), valid)
        if self.energy.low:
            ex = exact_estimated_state(self.fleet.state, self.fleet.accel_body)
            fc.update_battery(self.energy.percentage, self.energy.drain_per_s, ex, valid)
        if expired.any():
            self.command_timeouts[expired] += 1
            names = ", ".join(self.names[i] for i in np.flatnonzero(expired))
            self._warn("timeout", f"{names}: no command (cmd/attitude, cmd/rates_thrust, cmd/motors) for "
                                  f"more than command_timeout_s={timeout_s:g} s (simulated): failsafe "
                                  f"{fc.failsafe_mode!r} until the next")
        self._fresh = fresh
        u = np.where(fresh[:, None], self._cmd, HOVER_CONTROL)
        if (self._has_cmd & ~fresh & valid).any() or fc.failsafe_code.any():
            ex = exact_estimated_state(self.fleet.state, self.fleet.accel_body)
            issued_s = np.where(self._has_cmd, self._cmd_ns * 1e-9, np.nan)
            u = fc.controls(np.where(self._has_cmd[:, None], self._cmd, np.nan), ex, valid,
                            np.zeros(self.num_vehicles), self._k * BASE_DT_S, issued_s)
        emergency = bool((self.fleet.emergency_land_rotor >= 0).any())
        if any(self._cmd_failsafe) or any(self.failsafe) or fc.failsafe_code.any() or emergency:
            own = fc.failsafe
            failsafe = emergency_failsafe([own[i] or (self._cmd_failsafe[i] if fresh[i] else "")
                                           for i in range(self.num_vehicles)], self.fleet)
            for i, (old, new) in enumerate(zip(self.failsafe, failsafe, strict=True)):
                if new and not old:
                    self.failsafe_onsets[i] += 1
            self.failsafe = failsafe
        disarm = valid & ((fresh & self._cmd_disarm) | fc.landed)
        if disarm.any():  # touched down in the land failsafe: motors off for good (this episode)
            self.fleet.disarm(np.flatnonzero(disarm))
        return u

    def _step(self) -> None:
        """Integrate step k+1 with the held inputs and publish its ground truth."""
        self.plant.tick(self._k + 1, self._plant_inputs)
        self._k += 1
        self.steps += 1
        self._publish_tick()
        self._wait_since = time.monotonic()
        if self._max_steps and self.steps >= self._max_steps:
            self._begin_finish()

    def _plant_inputs(self, events: FaultEvents) -> PlantInputs:
        """Step k+1's inputs to the plant, once its faults are known (``Plant.tick``): the held commands
        (or the failsafe's controls) and the wind of tick k in body FRD."""
        if events:
            self._faults_changed = True
        self._hold_lost_links()
        x = self.fleet.state  # the tick's start (before a failsafe touch-down disarms)
        u = self._controls()
        wind_body = ned_to_body(dcm_from_state(x), self._wind_ned)  # NaN rows only for frozen vehicles
        rates_thrust, motors = self._low_level_inputs()
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
                cmd, cmd_ns, has_cmd, failsafe, disarm, low, kind = self._link_held
                self._cmd[lost] = cmd[lost]
                self._low[lost] = low[lost]  # the rotor-level commands too (cmd/rates_thrust, cmd/motors)
                self._cmd_kind[lost] = kind[lost]
                self._cmd_ns[lost] = cmd_ns[lost]
                self._has_cmd[lost] = has_cmd[lost]
                self._cmd_disarm[lost] = disarm[lost]
                for i in np.flatnonzero(lost):
                    self._cmd_failsafe[i] = failsafe[i]
        self._link_held = (self._cmd.copy(), self._cmd_ns.copy(), self._has_cmd.copy(),
                           list(self._cmd_failsafe), self._cmd_disarm.copy(), self._low.copy(),
                           self._cmd_kind.copy())

    def _on_inject_fault(self, request: InjectFault.Request, response: InjectFault.Response
                         ) -> InjectFault.Response:
        """/sim/inject_fault: one ``faults:`` item (YAML) added to the schedule, acting from the next tick."""
        response.success, response.id = False, ""
        if self._stopping:
            response.message = "shutting down (duration_s reached)"
            return response
        item = fault_request(request.fault_yaml)
        if isinstance(item, str):
            response.message = item
            return response
        try:
            fault_id = self.faults.inject(item, self._k * BASE_DT_S)
        except (ConfigError, ValueError, TypeError, KeyError) as exc:  # the checker's message, by key path
            response.message = str(exc)
            return response
        response.success, response.id = True, fault_id
        response.message = (f"fault {fault_id!r} added at t={self._k * BASE_DT_S:.2f} s "
                            "(acts from the next tick)")
        self.get_logger().info(f"/sim/inject_fault: {response.message}")
        return response

    def _on_clear_fault(self, request: ClearFault.Request, response: ClearFault.Response
                        ) -> ClearFault.Response:
        """/sim/clear_fault: end the active faults of an id or a kind (on one vehicle, or all with -1) at
        the next tick."""
        response.success = False
        fault_id, kind = request.id.strip() or None, request.kind.strip() or None
        vehicle = None if request.vehicle == -1 else int(request.vehicle)
        try:
            cleared = self.faults.clear(fault_id, kind=kind, vehicle=vehicle)
        except ValueError as exc:
            response.message = str(exc)
            return response
        what = f"id={fault_id!r}" if fault_id is not None else f"kind={kind!r}"
        where = "" if vehicle is None else f" on vehicle {vehicle}"
        if not cleared:
            response.message = f"no active fault with {what}{where} (nothing to clear)"
            return response
        response.success = True
        response.message = ("ending at the next tick: "
                            + ", ".join(f"{f.id} ({f.kind}) on {self.names[f.vehicle]}" for f in cleared))
        self.get_logger().info(f"/sim/clear_fault: {response.message}")
        return response

    def _check_listeners(self) -> None:
        """Whether anyone subscribes to the per-vehicle ground truth or /tf (at the start and on every
        match event): the simulator's own nodes read /sim/vehicle_status, so without RViz, a recorder
        or a user's node these messages need not be built at all."""
        self._gt_listened = any(p.get_subscription_count() for p in (*self._odom_pubs, *self._accel_pubs,
                                                                      self._tf_pub))

    def _publish_tick(self) -> None:
        """Odometry, specific force, vehicle status, /clock and /tf of the current tick (what the
        lockstep loop waits on first: see the module docstring)."""
        k = self._k
        stamp = stamp_from_tick(k)
        if self._gt_listened:
            with_tf = bool(self.params.tf_every_n_ticks) and k % self.params.tf_every_n_ticks == 0
            fill_ground_truth(self._odom_msgs, self._accel_msgs,
                              self._tf_msg.transforms if with_tf else None,
                              self.fleet.state, self.fleet.accel_body, stamp)
            for pub, msg in zip(self._odom_pubs, self._odom_msgs, strict=True):
                pub.publish(msg)
            for pub, msg in zip(self._accel_pubs, self._accel_msgs, strict=True):
                pub.publish(msg)
        else:
            with_tf = False
        self._publish_status(stamp)
        if self._faults_changed:  # latched: the active set as of this tick
            self._faults_changed = False
            self._faults_pub.publish(active_faults_message(self.faults.active, stamp, self.params.run_id,
                                                           self.episode))
        if self._battery_pubs and k % self.params.battery_every_n_ticks == 0:
            self._publish_battery(stamp)
        self._clock_msg.clock = stamp
        self._clock_pub.publish(self._clock_msg)
        if with_tf:
            self._tf_pub.publish(self._tf_msg)

    def _publish_status(self, stamp: Any) -> None:
        k = self._k
        s = self._status_msg
        s.header.stamp = stamp
        s.episode, s.tick = self.episode, k
        s.valid = self.fleet.valid.tolist()
        s.invalid_reason = self.fleet.invalid_reason
        s.command_fresh = self._fresh.tolist()
        s.commands_rejected = self.commands_rejected.tolist()
        s.commands_clamped = self.commands_clamped.tolist()
        s.command_timeouts = self.command_timeouts.tolist()
        s.wind_rejected = self.wind_rejected.tolist()
        s.failsafe = list(self.failsafe)
        s.setpoints_rejected = self.setpoints_rejected.tolist()
        s.setpoints_clamped = self.setpoints_clamped.tolist()
        s.failsafe_onsets = self.failsafe_onsets.tolist()
        if self._faults_changed:  # the list is rebuilt only when the active set changed
            self._fault_msgs = active_fault_messages(self.faults.active)
        s.faults = self._fault_msgs
        s.state = float64_array(self.fleet.state)
        s.specific_force = float64_array(self.fleet.accel_body)
        self._status_pub.publish(s)

    def _publish_battery(self, stamp: Any) -> None:
        """uavN/battery of every vehicle (``FleetEnergy``'s values at the end of the tick)."""
        e = self.energy
        volts, amps, pct = e.voltage_v, e.current_a, e.percentage
        charging, empty = e.charging, e.empty
        for i, (pub, msg) in enumerate(zip(self._battery_pubs, self._battery_msgs, strict=True)):
            fill_battery_state(msg, volts[i], amps[i], pct[i], bool(charging[i]), bool(empty[i]), stamp)
            pub.publish(msg)

    def _begin_finish(self) -> None:
        """duration_s reached: stop stepping; in lockstep, first wait for every consumer to handle the
        last tick (at most DRAIN_TIMEOUT_S of wall time), then finish."""
        self._stopping = True
        self._draining_since = self._wait_since = time.monotonic()
        self._try_finish()

    def _try_finish(self) -> None:
        lagging = self._lagging(self._k, 0)
        now = time.monotonic()
        waited = now - (self._draining_since or 0.0)
        if lagging and waited < DRAIN_TIMEOUT_S:
            if now - self._wait_since >= self.params.lockstep_timeout_s:  # (as a lockstep wait)
                self._resubscribe_progress()
                self._wait_since = now
            return
        if lagging:
            self.get_logger().warning(f"duration_s reached: stopping without {', '.join(lagging)} after "
                                      f"{waited:.1f} s (they had not handled the last tick)")
        self._draining_since = None
        self._finish()

    def _finish(self) -> None:
        """Stop, let the last messages be acknowledged, shut the process down."""
        self._stopping = True
        self._timer.cancel()
        wall_s = time.monotonic() - self._started_wall
        rate = self.steps / wall_s
        self.get_logger().info(f"duration_s={self.params.duration_s:g} reached: {self.steps} steps in "
                               f"{wall_s:.2f} s of wall time since tick 0 ({rate:.0f} ticks/s); shutdown")
        deadline = time.monotonic() + FINAL_ACK_S
        for pub in [self._clock_pub, self._status_pub, self._faults_pub, self._tf_pub, *self._odom_pubs,
                    *self._accel_pubs, *self._battery_pubs]:
            left = deadline - time.monotonic()
            if left <= 0 or not pub.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9))):
                break
        rclpy.try_shutdown()


def main(argv: list[str] | None = None) -> int:
    return run_node(VehicleDynamicsNode, argv)


if __name__ == "__main__":
    sys.exit(main())

"""vehicle_dynamics' outputs of a tick: the ground truth, the fleet's status, the clock, /tf, the faults
and the batteries (docs/NODE_GRAPH.md).

- ``/clock`` (rosgraph_msgs/Clock): t_k after step k (0 after a reset).
- ``uavN/ground_truth/odom`` (nav_msgs/Odometry, ``map`` -> ``uavN/base_link``, twist in the child frame)
  and ``uavN/ground_truth/accel`` (geometry_msgs/AccelStamped, body specific force in FLU, +9.81 on z at
  hover), stamped t_k, every tick; ``/tf`` (``map`` -> ``uavN/base_link`` of every vehicle in one message,
  every ``tf_every_n_ticks`` ticks). These three are only built while someone subscribes to one of them
  (RViz, a recorder, a user's node; re-checked whenever a subscription matches or leaves): the
  simulator's own nodes read the status.
- ``/tf_static`` (latched): ``map`` -> ``map_ned``, ``uavN/base_link`` -> ``uavN/base_link_frd`` and ->
  ``uavN/camera_optical`` per the camera mounting.
- ``/sim/vehicle_status`` (qrsim_ros/VehicleStatus) every tick: validity, reasons, input counters, the
  tick's active faults and the whole fleet's exact state and specific force.
- ``uavN/battery`` (sensor_msgs/BatteryState) every ``battery_every_n_ticks`` ticks while the
  scenario's battery is on.
- ``/sim/episode`` (std_msgs/UInt32, latched): 1 for the episode started at launch, +1 per reset.
- ``/sim/faults`` (qrsim_ros/ActiveFaults, latched, the last 100 changes kept for late joiners): the
  active set at tick 0 and at every tick it changes.

Per tick the ground truth goes out first (odometry, accel, status), then /clock and /tf: the lockstep
loop waits on what wind_field and the sensor nodes compute from the ground truth.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from geometry_msgs.msg import AccelStamped
from nav_msgs.msg import Odometry
from rclpy.duration import Duration
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import BatteryState
from std_msgs.msg import UInt32
from tf2_msgs.msg import TFMessage

from qrsim_ros.core.config.scenario import Scenario
from qrsim_ros.core.engine.faults import FaultEffects
from qrsim_ros.core.vehicles.airframes import Airframes
from qrsim_ros.core.vehicles.energy import FleetEnergy
from qrsim_ros.msg import ActiveFaults, VehicleStatus
from qrsim_ros.ros.command_failsafe import CommandFailsafe
from qrsim_ros.ros.command_intake import CommandIntake
from qrsim_ros.ros.names import MAP_FRAME, VEHICLE_STATUS_TOPIC, base_link_frame, vehicle_namespace
from qrsim_ros.ros.qos import (
    QOS_CLOCK,
    QOS_LATCHED,
    QOS_LATCHED_STREAM,
    QOS_RELIABLE,
    unmatched_subscriptions,
)
from qrsim_ros.ros.stamps import stamp_from_tick
from qrsim_ros.ros.to_messages import (
    accel_message,
    active_fault_messages,
    active_faults_message,
    battery_state_message,
    fill_battery_state,
    fill_ground_truth,
    float32_array,
    float64_array,
    odometry_message,
    static_transforms,
    transform,
)
from qrsim_ros.ros.wind_intake import WindIntake

#: /tf as tf2_ros' broadcasters publish it.
QOS_TF = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: /sim/vehicle_status, the fleet's ground truth: a writer history for the readers' bursts of ticks.
QOS_FLEET = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: /sim/vehicle_status lists the active faults at least this often [ticks] (and whenever they change).
FAULTS_LISTED_EVERY_TICKS = 50


class FleetOutputs:
    """The publishers of vehicle_dynamics and what each tick sends (see the module docstring).

    It reads the fleet, its batteries and faults, and the node's input counters (``commands``,
    ``failsafe``, ``wind``) when a tick goes out.
    """

    def __init__(self, node: Node, scenario: Scenario, *, run_id: str, tf_every_n_ticks: int,
                 battery_every_n_ticks: int, fleet: Airframes, energy: FleetEnergy, faults: FaultEffects,
                 commands: CommandIntake, failsafe: CommandFailsafe, wind: WindIntake) -> None:
        n = scenario.num_vehicles
        names = [vehicle_namespace(i) for i in range(n)]
        self.fleet, self.energy, self.faults = fleet, energy, faults
        self.commands, self.failsafe, self.wind = commands, failsafe, wind
        self.run_id = run_id
        self.tf_every_n_ticks = tf_every_n_ticks
        self.battery_every_n_ticks = battery_every_n_ticks
        self.faults_due = True  # /sim/faults goes out with the next tick
        self._fault_msgs: list[Any] = []  # the active set as ActiveFault messages (/sim/vehicle_status)
        self.clock_pub = node.create_publisher(ClockMsg, "/clock", QOS_CLOCK)
        # odometry, accel and /tf are built only while someone subscribes: a (un)match re-checks
        matched = PublisherEventCallbacks(matched=lambda _info: self.check_listeners())
        self._odom_pubs = [node.create_publisher(Odometry, f"{ns}/ground_truth/odom", QOS_RELIABLE,
                                                 event_callbacks=matched) for ns in names]
        self._accel_pubs = [node.create_publisher(AccelStamped, f"{ns}/ground_truth/accel", QOS_RELIABLE,
                                                  event_callbacks=matched) for ns in names]
        self._tf_pub = node.create_publisher(TFMessage, "/tf", QOS_TF, event_callbacks=matched)
        self._tf_static_pub = node.create_publisher(TFMessage, "/tf_static", QOS_LATCHED)
        # deeper than the other outputs: it carries the ground truth every simulator node steps on
        self.status_pub = node.create_publisher(VehicleStatus, VEHICLE_STATUS_TOPIC, QOS_FLEET)
        self._episode_pub = node.create_publisher(UInt32, "/sim/episode", QOS_LATCHED)
        # every change matters (a fault log): a depth-1 writer replaced a change not yet delivered to a
        # reader that lagged (seen under load: the set of tick 15 lost to tick 25's); a late joiner gets
        # the last changes, the latest last
        self._faults_pub = node.create_publisher(ActiveFaults, "/sim/faults", QOS_LATCHED_STREAM)
        bat = scenario.vehicle.battery
        self._battery_pubs = [node.create_publisher(BatteryState, f"{ns}/battery", QOS_RELIABLE)
                              for ns in names] if energy.on and battery_every_n_ticks else []
        self._battery_msgs = [battery_state_message(i, bat.cells, bat.capacity_ah, bat.model)
                              for i in range(len(self._battery_pubs))]
        self._clock_msg = ClockMsg()
        self._odom_msgs = [odometry_message(i) for i in range(n)]
        self._accel_msgs = [accel_message(i) for i in range(n)]
        zero = stamp_from_tick(0)
        self._tf_msg = TFMessage(transforms=[transform(MAP_FRAME, base_link_frame(i), np.zeros(3),
                                                       [0.0, 0.0, 0.0, 1.0], zero) for i in range(n)])
        self._status_msg = VehicleStatus(names=names, run_id=run_id)
        self._status_msg.header.frame_id = MAP_FRAME
        static = static_transforms(n, scenario.vehicle.camera.r_body_rad, zero)
        self._tf_static_pub.publish(TFMessage(transforms=static))
        self.listened = True  # someone subscribes to odometry, accel or /tf (until the first check)

    def check_listeners(self) -> None:
        """Whether anyone subscribes to the per-vehicle ground truth or /tf (at the start and on every
        match event): the simulator's own nodes read /sim/vehicle_status, so without RViz, a recorder
        or a user's node these messages need not be built at all."""
        self.listened = any(p.get_subscription_count() for p in (*self._odom_pubs, *self._accel_pubs,
                                                                 self._tf_pub))

    def reader_counts(self) -> str:
        """The matched readers of each ground-truth writer, e.g. ``/clock 3, /tf 2, ...`` (the start line
        names who tick 0 goes to)."""
        pubs = (self.clock_pub, self.status_pub, self._tf_pub, *self._odom_pubs, *self._accel_pubs)
        return ", ".join(f"{p.topic_name} {p.get_subscription_count()}" for p in pubs)

    def unmatched_readers(self, node: Node) -> list[str]:
        """The ground-truth topics (clock, odometry, specific force, /tf, vehicle status, battery) whose
        writer has not matched every subscription the graph lists for it (``qos.unmatched_subscriptions``):
        a reader still missing there would lose tick 0."""
        pubs = (self.clock_pub, *self._odom_pubs, *self._accel_pubs, self._tf_pub, self.status_pub,
                *self._battery_pubs)
        return [p.topic_name for p in pubs if unmatched_subscriptions(node, p)]

    def publish_episode(self, episode: int) -> None:
        self._episode_pub.publish(UInt32(data=episode))

    def publish_tick(self, k: int, episode: int) -> None:
        """Odometry, specific force, vehicle status, /clock and /tf of tick ``k`` (in that order)."""
        stamp = stamp_from_tick(k)
        with_tf = False
        if self.listened:
            with_tf = bool(self.tf_every_n_ticks) and k % self.tf_every_n_ticks == 0
            fill_ground_truth(self._odom_msgs, self._accel_msgs, self._tf_msg.transforms if with_tf else None,
                              self.fleet.state, self.fleet.accel_body, stamp)
            for pub, msg in zip(self._odom_pubs, self._odom_msgs, strict=True):
                pub.publish(msg)
            for pub, msg in zip(self._accel_pubs, self._accel_msgs, strict=True):
                pub.publish(msg)
        self._publish_status(stamp, k, episode)
        if self.faults_due:  # latched: the active set as of this tick
            self.faults_due = False
            self._faults_pub.publish(active_faults_message(self.faults.active, stamp, self.run_id, episode))
        if self._battery_pubs and k % self.battery_every_n_ticks == 0:
            self._publish_battery(stamp)
        self._clock_msg.clock = stamp
        self.clock_pub.publish(self._clock_msg)
        if with_tf:
            self._tf_pub.publish(self._tf_msg)

    def wait_for_acks(self, deadline: float) -> None:
        """Let the last messages be acknowledged, until the monotonic time ``deadline`` at most."""
        for pub in [self.clock_pub, self.status_pub, self._faults_pub, self._tf_pub, *self._odom_pubs,
                    *self._accel_pubs, *self._battery_pubs]:
            left = deadline - time.monotonic()
            if left <= 0 or not pub.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9))):
                return

    def _publish_status(self, stamp: Any, k: int, episode: int) -> None:
        s, cmd, fs = self._status_msg, self.commands, self.failsafe
        s.header.stamp = stamp
        s.episode, s.tick = episode, k
        s.valid = self.fleet.valid.tolist()
        s.invalid_reason = self.fleet.invalid_reason
        s.command_fresh = fs.fresh.tolist()
        s.commands_rejected = cmd.commands_rejected.tolist()
        s.commands_clamped = cmd.commands_clamped.tolist()
        s.command_timeouts = fs.command_timeouts.tolist()
        s.wind_rejected = self.wind.wind_rejected.tolist()
        s.failsafe = list(fs.failsafe)
        s.setpoints_rejected = cmd.setpoints_rejected.tolist()
        s.setpoints_clamped = cmd.setpoints_clamped.tolist()
        s.failsafe_onsets = fs.failsafe_onsets.tolist()
        if self.faults_due:  # the list is rebuilt only when the active set changed
            self._fault_msgs = active_fault_messages(self.faults.active)
        # listed when it changed, on the episode's first tick and once a second (a late reader catches
        # up): 2,000 active faults in every tick's status cost each reader more than the tick
        s.faults_listed = self.faults_due or k % FAULTS_LISTED_EVERY_TICKS == 0
        s.faults = self._fault_msgs if s.faults_listed else []
        if self.energy.bank is not None:  # the battery is on
            volts, charge, _empty = self.energy.bank.readings_view()
            s.battery_fraction = float32_array(charge)
            s.battery_voltage_v = float32_array(volts)
        s.state = float64_array(self.fleet.state)
        s.specific_force = float64_array(self.fleet.accel_body)
        self.status_pub.publish(s)

    def _publish_battery(self, stamp: Any) -> None:
        """uavN/battery of every vehicle (``FleetEnergy``'s values at the end of the tick)."""
        e = self.energy
        volts, amps, pct = e.voltage_v, e.current_a, e.percentage
        charging, empty = e.charging, e.empty
        for i, (pub, msg) in enumerate(zip(self._battery_pubs, self._battery_msgs, strict=True)):
            fill_battery_state(msg, volts[i], amps[i], pct[i], bool(charging[i]), bool(empty[i]), stamp)
            pub.publish(msg)

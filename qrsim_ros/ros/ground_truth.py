"""Ground truth in, per tick and for the whole fleet: what every node stepping a model on it shares.

``GroundTruthSync`` subscribes ``uavN/ground_truth/odom`` (and ``uavN/ground_truth/accel``, and
``/sim/vehicle_status``) of every vehicle, converts each message once into the core's state layout
and calls the node's handler once per tick with the whole fleet (NODE_GRAPH.md "Per tick k", step 3):

- x (N, 13): NED position [m], ZYX Euler angles [rad] (yaw wrapped to (-pi, pi]), FRD body velocity
  [m/s], FRD body rates [rad/s], thrust (not in Odometry: 0, no sensor reads it);
- accel (N, 3): FRD specific force [m/s^2] (the core's ``a``), for the IMU node;
- present (N,): the vehicle's ground truth of this tick arrived and is finite (publish for it);
- valid (N,): present and valid according to ``/sim/vehicle_status`` of the tick (awaited with the
  ground truth when someone publishes it; without a status publisher valid = present).

Episodes: a tick whose ``/sim/vehicle_status`` carries another episode counter than the last tick
handled, or a tick lower than the last one (tick 0 after ``/vehicle_dynamics/reset``), starts a new
episode: the handler is called with ``reset=True`` and re-initialises its models from that ground
truth (spin-ups continue the random streams, as ``Simulator.reset()``). The first ground truth a node
ever gets is a reset too. A tick that repeats the last one in the same episode (vehicle_dynamics
publishes a tick again when lockstep inputs are late) is not stepped again: the outputs of that tick
are published again, except on latched (transient local) topics: their history already holds the
message for every reader, and a second copy would read as a second one (a second episode start on
``/plume/markers``). The counter is taken from the per-tick status rather than the latched
``/sim/episode``, so it cannot arrive out of order with the ground truth it belongs to.

Ticks advance by one: after the first tick a node handles, a tick is taken only if it is the last one
again (a repeat), the next one, or tick 0 of the next episode (the reset vehicle_dynamics announces
with its episode counter; without a status, a restart at tick 0). Anything else (a forged or stray
``/sim/vehicle_status`` with tick 50,000,000, a tick of an older episode) is rejected before the node's
handler or ``on_status`` sees it, counted (``ticks_rejected``) and logged (throttled). A genuine gap (a
tick lost in a queue overflow, a node that missed a reset's tick 0) shows as a rejected tick that the
next tick continues: that next tick is taken (the gap counted as ``ticks_skipped``). A
``/sim/vehicle_status`` of another run (its ``run_id``) is ignored and counted (``run_identity``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from rclpy.node import Node

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S, TICK_NS
from qrsim_ros.core.engine.faults import FaultEffects, FaultModels
from qrsim_ros.core.vehicles.pelican import STATE_KINEMATIC
from qrsim_ros.ros.fault_follower import FaultFollower
from qrsim_ros.ros.from_messages import (
    RAW_ODOM_WIDTH,
    fleet_arrays,
    listed_faults,
    raw_odometry,
    specific_force_from_accel,
    states_from_raw_odometry,
)
from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC, VEHICLE_STATUS_TOPIC, vehicle_namespace
from qrsim_ros.ros.node import Counters, ScenarioNode
from qrsim_ros.ros.parameters import (
    SCENARIO_PARAMETERS,
    Param,
    ParamTable,
)
from qrsim_ros.ros.qos import QOS_GROUND_TRUTH, QOS_RELIABLE, QOS_TICK_PROGRESS

#: Where a node takes the ground truth from: the fleet's state in /sim/vehicle_status (one message per
#: tick), or the per-vehicle odometry and accel topics (any other source of ground truth).
GROUND_TRUTH_SOURCES = ("fleet", "odometry")

#: Ticks kept waiting for missing vehicles before the oldest is dropped.
MAX_PENDING_TICKS = 100


#: The counters every sensor node publishes on /diagnostics.
COUNTER_NAMES = ("ground_truth_rejected", "ticks_dropped", "ticks_skipped", "ticks_incomplete",
                 "model_errors", "ticks_rejected")


BoolArray = NDArray[np.bool_]


#: A tick's /sim/vehicle_status as kept: (arrival number, episode, valid (N,), its ActiveFault messages).
_Status = tuple[int, int, "BoolArray", Sequence[Any]]

#: (publisher, message) pairs a handler wants published for a tick.
Outgoing = list[tuple[Any, Any]]


#: handler(k, x (N, 13), accel (N, 3) or None, present (N,), valid (N,), reset) -> messages to publish.
TickHandler = Callable[[int, Array, "Array | None", BoolArray, BoolArray, bool], Outgoing]


@dataclass
class _Tick:
    raw: Array  # (N, 13) raw odometry rows
    accel: Array
    has_odom: BoolArray
    has_accel: BoolArray
    done: BoolArray = field(init=False)

    def __post_init__(self) -> None:
        self.done = np.zeros(self.has_odom.shape, bool)


class GroundTruthSync:
    """Assembles the ground truth of all vehicles per tick and hands it to ``handler`` (see module doc).

    A tick is handled as soon as every vehicle's odometry (and accel, ``with_accel``; and the fleet
    status, ``with_status``, if anyone publishes it) of that tick has arrived. If a vehicle stays
    silent, the tick is handled once every vehicle that did report it has reported a later tick; the
    silent vehicle is not ``present`` and keeps its last state (as the Simulator freezes an invalid
    vehicle). Malformed stamps (not a multiple of 0.02 s) are dropped. Exceptions raised by the core
    models (an input they reject) are logged; the node keeps running and re-initialises from the next
    ground truth if a reset failed. Each of these is counted (``counters``, on /diagnostics).
    """

    def __init__(self, node: Node, num_vehicles: int, handler: TickHandler, *, with_accel: bool = False,
                 with_status: bool = False, source: str = "odometry",
                 on_status: Callable[[Any], None] | None = None,
                 on_faults: Callable[[Sequence[Any]], object] | None = None,
                 on_repeat: Callable[[int, Outgoing], Outgoing] | None = None) -> None:
        from geometry_msgs.msg import AccelStamped
        from nav_msgs.msg import Odometry

        from qrsim_ros.msg import VehicleStatus

        if source not in GROUND_TRUTH_SOURCES:
            raise ValueError(f"ground truth source {source!r} is not one of {GROUND_TRUTH_SOURCES}")
        self.node = node
        self.source = source
        self.on_status = on_status
        self.on_faults = on_faults  # a tick's listed ActiveFault messages, before the handler (FaultFollower)
        # the outputs of a repeated tick (vehicle_dynamics re-sent it): by default the first answer's
        self.on_repeat = on_repeat
        self.num_vehicles = n = int(num_vehicles)
        self.handler = handler
        # handlers written before ``valid`` was added take (k, x, accel, present, reset)
        self._handler_takes_valid = len(inspect.signature(handler).parameters) >= 6
        self.with_accel = with_accel
        self.with_status = with_status
        self.counters = Counters(node, COUNTER_NAMES)
        self.counters.sim_time_s = 0.0  # until the first tick: the node's time is its input's
        if getattr(node, "run_isolation", None) is not None:  # its run counters: stamped the same way
            node.run_isolation.counters.stamp_source = self.counters
        self._pending: dict[int, _Tick] = {}
        self._last_tick: int | None = None
        self._episode: int | None = None  # episode of the last tick handled (when the status told it)
        self._rejected: tuple[int, int | None] | None = None  # (tick, episode) of the last tick rejected
        self._latest = np.full(n, -1, dtype=np.int64)  # latest tick each vehicle completed
        # /sim/vehicle_status by tick: (arrival number, episode, valid, ActiveFault messages); kept apart
        # from the ground truth entries so that a status never creates, completes or purges a tick
        self._statuses: dict[int, _Status] = {}
        self._status_count = 0
        self._last_status_tick = -1  # tick of the status that arrived last
        self._state = np.zeros((n, 13))  # last known state of every vehicle
        self._accel = np.zeros((n, 3))
        self._valid = np.ones(n, bool)  # last known validity
        self._last_out: Outgoing = []
        self.ticks_handled = 0
        self.resets = 0
        from qrsim_ros.msg import TickProgress

        # the last tick handled, for vehicle_dynamics' lockstep window and its drain at duration_s
        self._progress_pub = node.create_publisher(TickProgress, TICK_PROGRESS_TOPIC, QOS_TICK_PROGRESS)
        self._progress_msg = TickProgress(node=node.get_fully_qualified_name())
        self.subscriptions = []
        if source == "fleet":
            self.subscriptions.append(node.create_subscription(
                VehicleStatus, VEHICLE_STATUS_TOPIC, self._on_fleet, QOS_GROUND_TRUTH))
            return
        for i in range(n):
            ns = vehicle_namespace(i)
            self.subscriptions.append(node.create_subscription(
                Odometry, f"{ns}/ground_truth/odom", lambda m, i=i: self._on_odom(i, m), QOS_GROUND_TRUTH))
            if with_accel:
                self.subscriptions.append(node.create_subscription(
                    AccelStamped, f"{ns}/ground_truth/accel", lambda m, i=i: self._on_accel(i, m),
                    QOS_GROUND_TRUTH))
        if with_status or on_status is not None:
            self.subscriptions.append(node.create_subscription(
                VehicleStatus, VEHICLE_STATUS_TOPIC, self._on_status if with_status else on_status,
                QOS_GROUND_TRUTH))

    @property
    def last_tick(self) -> int | None:
        return self._last_tick

    def _warn(self, counter: str, text: str, n: int = 1) -> None:
        total = self.counters.count(counter, n)
        self.node.get_logger().warning(f"{text} ({counter}: {total})", throttle_duration_sec=5.0)

    # --- messages -----------------------------------------------------------------------------------
    def _tick_of(self, stamp: Any) -> int | None:
        ns = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
        if ns < 0 or ns % TICK_NS:
            self._warn("ground_truth_rejected",
                       f"ground truth stamped {ns * 1e-9:.9f} s is not a multiple of {BASE_DT_S} s: dropped")
            return None
        k = ns // TICK_NS
        if self._last_tick is not None and k > self._last_tick + MAX_PENDING_TICKS:
            # far ahead (forged): never waited for, nor taken as a vehicle's progress
            self._warn("ticks_rejected", f"ground truth of tick {k} rejected: the last tick handled is "
                       f"{self._last_tick}")
            return None
        if self._last_tick is not None and k < self._last_tick:
            # a new episode: ticks of the old one still waiting are stale
            for old in [t for t in self._pending if t > k]:
                del self._pending[old]
        return k

    def _entry(self, k: int) -> _Tick:
        t = self._pending.get(k)
        if t is None:
            n = self.num_vehicles
            t = _Tick(np.zeros((n, RAW_ODOM_WIDTH)), np.zeros((n, 3)), np.zeros(n, bool), np.zeros(n, bool))
            self._pending[k] = t
            while len(self._pending) > MAX_PENDING_TICKS:
                oldest = min(self._pending)
                del self._pending[oldest]
                self._warn("ticks_dropped", f"tick {oldest} dropped: too many ticks waiting")
        return t

    def _on_odom(self, i: int, msg: Any) -> None:
        k = self._tick_of(msg.header.stamp)
        if k is None:
            return
        t = self._entry(k)
        t.raw[i] = raw_odometry(msg)  # converted with the whole fleet's (one quaternion batch per tick)
        t.has_odom[i] = True
        self._arrived(k, t, i)

    def _on_accel(self, i: int, msg: Any) -> None:
        k = self._tick_of(msg.header.stamp)
        if k is None:
            return
        t = self._entry(k)
        t.accel[i] = specific_force_from_accel(msg)
        t.has_accel[i] = True
        self._arrived(k, t, i)

    def _foreign(self, msg: Any) -> bool:
        """A status of another run (its run_id): ignored, counted by the node's run isolation."""
        foreign_run = getattr(self.node, "foreign_run", None)
        return foreign_run is not None and foreign_run(msg.run_id, VEHICLE_STATUS_TOPIC)

    def _on_fleet(self, msg: Any) -> None:
        """Fleet source: the whole tick in one /sim/vehicle_status (state, specific force, validity)."""
        if self._foreign(msg):
            return
        ns = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
        arrays = fleet_arrays(msg, self.num_vehicles)
        if isinstance(arrays, str) or len(msg.valid) != self.num_vehicles or ns < 0 or ns % TICK_NS:
            n = self.num_vehicles
            why = arrays if isinstance(arrays, str) else (
                f"lists {len(msg.valid)} vehicles, not {n}" if len(msg.valid) != n
                else f"is stamped {ns * 1e-9:.9f} s, not a multiple of {BASE_DT_S} s")
            self._warn("ground_truth_rejected", f"{VEHICLE_STATUS_TOPIC} {why}: dropped (ground_truth_source "
                       "'fleet' needs vehicle_dynamics' status; 'odometry' reads uavN/ground_truth/*)")
            return
        if not self._admit(ns // TICK_NS, int(msg.episode)):
            return
        if self.on_status is not None:  # only a well-formed tick that follows the last one
            self.on_status(msg)
        x, accel = arrays
        self._status_count += 1
        status = (self._status_count, int(msg.episode), np.array(msg.valid, bool), listed_faults(msg))
        self._handle_arrays(ns // TICK_NS, x, accel, np.ones(self.num_vehicles, bool), status, admitted=True)

    def _on_status(self, msg: Any) -> None:
        if self._foreign(msg):
            return
        if self.on_status is not None:
            self.on_status(msg)
        if len(msg.valid) != self.num_vehicles:
            self._warn("ground_truth_rejected",
                       f"{VEHICLE_STATUS_TOPIC} lists {len(msg.valid)} vehicles, not {self.num_vehicles}")
            return
        ns = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
        if ns < 0 or ns % TICK_NS:
            self._warn("ground_truth_rejected", f"{VEHICLE_STATUS_TOPIC} stamped {ns * 1e-9:.9f} s: dropped")
            return
        self._status_count += 1
        self._last_status_tick = ns // TICK_NS
        self._statuses[ns // TICK_NS] = (self._status_count, int(msg.episode), np.array(msg.valid, bool),
                                         listed_faults(msg))
        while len(self._statuses) > 2 * MAX_PENDING_TICKS:
            del self._statuses[next(iter(self._statuses))]  # the oldest arrival
        self._flush()

    def _arrived(self, k: int, t: _Tick, i: int) -> None:
        if not t.has_odom[i] or (self.with_accel and not t.has_accel[i]):
            return
        t.done[i] = True
        if self._last_tick is None or k >= self._last_tick:
            self._latest[i] = max(self._latest[i], k)
        else:  # new episode: the per-vehicle progress restarts
            self._latest[i] = k
        self._flush()

    def _status_ready(self, k: int) -> bool:
        """Whether tick k can be handled as far as the fleet status goes: its status is there, or none
        is expected (none received so far: the subscription may still be matching; a later tick's
        status came first, so this one was lost; no publisher)."""
        if (not self.with_status or k in self._statuses or not self._status_count
                or self._last_status_tick > k):
            return True
        return self.node.count_publishers(VEHICLE_STATUS_TOPIC) == 0

    def _flush(self) -> None:
        while self._pending:
            k = min(self._pending)
            t = self._pending[k]
            if t.done.all():
                if not self._status_ready(k):
                    return
            elif t.done.any() and np.all(self._latest[t.done] > k):
                missing = ", ".join(vehicle_namespace(int(i)) for i in np.flatnonzero(~t.done))
                self._warn("ticks_incomplete", f"tick {k}: no ground truth from {missing}; last state held")
            elif not t.done.any() and any(p > k and self._pending[p].done.any() for p in self._pending):
                del self._pending[k]
                self._warn("ticks_dropped", f"tick {k} dropped: no vehicle's ground truth complete")
                continue
            else:
                return
            del self._pending[k]
            self._handle(k, t)

    # --- handling -----------------------------------------------------------------------------------
    def _handle(self, k: int, t: _Tick) -> None:
        self._handle_arrays(k, states_from_raw_odometry(t.raw), t.accel, t.done, self._statuses.pop(k, None))

    def _admit(self, k: int, episode: int | None) -> bool:
        """Whether tick k (of ``episode``, None if unknown) may be handled: the first tick, a repeat, the
        next tick, tick 0 of the next episode; or the tick after a rejected one (a gap resynchronised).
        Otherwise counted, logged and False (see the module docstring)."""
        last = self._last_tick
        if last is None:
            ok = True
        elif episode is not None and self._episode is not None and episode != self._episode:
            ok = k == 0 and episode > self._episode  # the reset vehicle_dynamics announced
        else:
            ok = k in (last, last + 1) or (k == 0 and episode is None)  # no status: a restart is a reset
        if ok or self._rejected == (k - 1, episode):
            self._rejected = None
            return True
        self._rejected = (k, episode)
        ep = f" of episode {episode}" if episode is not None else ""
        self._warn("ticks_rejected", f"tick {k}{ep} rejected: the last tick handled is {last} of episode "
                   f"{self._episode} (ticks advance by one, or restart at 0 with the next episode)")
        return False

    def _handle_arrays(self, k: int, x: Array, accel_in: Array, done: BoolArray,
                       status: _Status | None, admitted: bool = False) -> None:
        """Step the handler on tick k: states x (N, 13), specific forces (N, 3), which vehicles reported
        (done) and the tick's (arrival number, episode, valid, faults) status if known; ``admitted``:
        ``_admit`` already said yes."""
        if not admitted and not self._admit(k, status[1] if status is not None else None):
            return
        self.counters.sim_time_s = k * BASE_DT_S  # the node's time is its input's
        finite = np.all(np.isfinite(x[:, STATE_KINEMATIC]), axis=1)
        if self.with_accel:
            finite &= np.all(np.isfinite(accel_in), axis=1)
        present = done & finite
        bad = done & ~finite
        if bad.any():
            names = ", ".join(vehicle_namespace(int(i)) for i in np.flatnonzero(bad))
            self._warn("ground_truth_rejected", f"tick {k}: non-finite ground truth of {names}: held",
                       int(bad.sum()))
        self._state[present] = x[present]
        self._accel[present] = accel_in[present]
        episode = None
        if status is not None:
            _, episode, self._valid, faults = status
            if self.on_faults is not None and faults is not None:  # None: the last listed set holds
                self.on_faults(faults)
        valid = present & self._valid
        last = self._last_tick
        new_episode = episode is not None and self._episode is not None and episode != self._episode
        if last is not None and k == last and not new_episode:
            # the same tick again: its outputs again, no second model step
            again = self._last_out if self.on_repeat is None else self.on_repeat(k, self._last_out)
            self._publish([(pub, msg) for pub, msg in again if not _latched(pub)])
            self._report_progress(k)
            return
        reset = last is None or k < last or new_episode
        if reset:
            valid = present.copy()  # every vehicle is placed (valid) at an episode start
        elif k > last + 1:
            self._warn("ticks_skipped", f"ticks {last + 1}..{k - 1} never arrived; stepping on to tick {k}",
                       k - last - 1)
        accel = self._accel.copy() if self.with_accel else None
        try:
            if self._handler_takes_valid:
                out = self.handler(k, self._state.copy(), accel, present, valid, reset)
            else:
                out = self.handler(k, self._state.copy(), accel, present, reset)  # type: ignore[call-arg]
        except (ValueError, RuntimeError, ArithmeticError) as exc:
            self._warn("model_errors", f"tick {k}: {'reset' if reset else 'step'} failed: {exc}")
            if reset:
                self._last_tick = None  # try again from the next ground truth
            return
        self._last_tick = k
        if episode is not None or reset:  # a reset without its status: the episode is not known yet
            self._episode = episode
        # statuses of ticks that will not be handled: older ticks of this episode; at a reset, every
        # status that arrived before this tick's (the old episode's)
        first_new = status[0] if reset and status is not None else None
        for old in [j for j, v in self._statuses.items()
                    if (j < k and not reset) or (first_new is not None and v[0] < first_new)]:
            del self._statuses[old]
        self.ticks_handled += 1
        self.resets += int(reset)
        self._last_out = out
        self._publish(out)
        self._report_progress(k)

    def _report_progress(self, k: int) -> None:
        """Tell vehicle_dynamics that tick k is handled (its outputs are published)."""
        msg = self._progress_msg
        msg.episode = int(self._episode or 0)
        msg.tick = int(k)
        self._publish([(self._progress_pub, msg)])

    def _publish(self, out: Outgoing) -> None:
        for pub, msg in out:
            try:
                pub.publish(msg)
            except Exception as exc:  # rclpy raises RCLError (not exported) for a full reliable queue
                self.node.get_logger().error(f"publishing on {pub.topic_name} failed: {exc}",
                                             throttle_duration_sec=5.0)


#: The ``ground_truth_source`` parameter of a node fed by ``GroundTruthSync`` (a row of its ParamTable).
GROUND_TRUTH_SOURCE = Param(
    "ground_truth_source", GROUND_TRUTH_SOURCES[0],
    "'fleet': the whole fleet's ground truth in /sim/vehicle_status, one message per tick "
    "(vehicle_dynamics); 'odometry': uavN/ground_truth/odom (+ accel) per vehicle, with "
    "/sim/vehicle_status for validity when someone publishes it", choices=GROUND_TRUTH_SOURCES)


#: The parameters every ground-truth node has: the scenario's and where the ground truth comes from.
GROUND_TRUTH_NODE_PARAMETERS = ParamTable("ground_truth_node", *SCENARIO_PARAMETERS, GROUND_TRUTH_SOURCE)


class GroundTruthNode(ScenarioNode):
    """Base of the nodes that step core models on the fleet's per-tick ground truth (wind_field, the
    sensors, the generic sensor node): the scenario (``scenario``, ``seed``, ``num_vehicles``), the
    Simulator's named streams, per-vehicle publishers and the ``GroundTruthSync`` wiring.

    Parameters: one table (``GROUND_TRUTH_NODE_PARAMETERS`` extended by the node's own rows), declared in
    one call, read as ``self.params``. A subclass builds its models from ``self.scenario`` and
    ``self.streams``, creates its publishers
    (``per_vehicle_publishers``), then calls ``follow_ground_truth`` and implements ``on_tick`` (the
    ``TickHandler`` of ``GroundTruthSync``: called once per tick with the whole fleet).
    """

    def __init__(self, name: str, parameters: ParamTable | None = None) -> None:
        super().__init__(name, parameters or GROUND_TRUTH_NODE_PARAMETERS)
        self.streams = RandomStreams(self.scenario.seed)

    def per_vehicle_publishers(self, msg_type: Any, topic: str, qos: Any = QOS_RELIABLE) -> list[Any]:
        """One publisher of ``msg_type`` on ``uavN/<topic>`` per vehicle."""
        return [self.create_publisher(msg_type, f"{vehicle_namespace(i)}/{topic}", qos)
                for i in range(self.num_vehicles)]

    def follow_ground_truth(self, summary: str, *, with_accel: bool = False,
                            fault_models: FaultModels | None = None) -> None:
        """Start stepping on the ground truth (with the specific force if ``with_accel``); log ``summary``.

        ``self.faults`` (``FaultEffects.follower``) follows the active faults of the ticks'
        /sim/vehicle_status and applies them to ``fault_models`` (the sensor models this node owns) before
        each tick's ``on_tick``; ``self.faults.sensor_valid`` tells which vehicles' sensor is off."""
        self.faults = FaultEffects.follower(self.num_vehicles, fault_models or FaultModels())
        self.sync = GroundTruthSync(self, self.num_vehicles, self.on_tick, with_accel=with_accel,
                                    with_status=True, source=self.params.ground_truth_source,
                                    on_faults=FaultFollower(self.faults).update,
                                    on_repeat=self.on_repeated_tick)
        self.get_logger().info(f"{self.get_name()}: {self.num_vehicles} vehicles, scenario "
                               f"{self.scenario.name!r}, seed entropy {self.streams.entropy}; {summary}")

    def on_tick(self, k: int, x: Array, accel: Array | None, present: BoolArray, valid: BoolArray,
                reset: bool) -> Outgoing:
        """Tick k of the ground truth (see ``TickHandler``); the messages to publish."""
        raise NotImplementedError

    def on_repeated_tick(self, k: int, first: Outgoing) -> Outgoing:
        """The messages to publish when tick k, handled last, arrives again (vehicle_dynamics re-sends a
        tick whose answers it misses): those of the first time (``first``), unless a node builds some only
        for readers matched at the time (it then builds them again for the readers matched now)."""
        return first


def _latched(publisher: Any) -> bool:
    """Whether ``publisher`` keeps its last message for late readers (transient local durability)."""
    from rclpy.qos import DurabilityPolicy

    return publisher.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL

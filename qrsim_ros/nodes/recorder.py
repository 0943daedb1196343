"""The ``recorder`` node: every topic of the running graph into a rosbag2 bag (metadata.yaml + MCAP).

Started by ``qrsim launch ... --record [DIR]`` and the launch files' ``record`` argument (launch plan
parameter ``output_dir``), or alone: ``recorder --ros-args -p output_dir:=bags/run1 -p use_sim_time:=true``.

- Topics: discovered from the graph (``get_topic_names_and_types``, polled every
  ``discovery_period_s`` of wall time while it changes, backing off to twice a second), so every topic
  the scenario publishes is recorded whichever nodes run (sensors, referee, markers,
  robot_description, an external autopilot's commands...), except the ones matching ``exclude`` (a
  regular expression; default ``/parameter_events``) and hidden ones. A topic is subscribed once it
  has a publisher: its offered QoS profiles and its type hash (``RIHS01_...``, from the publisher) go
  into the bag. In a launched run the clock owner waits for the recorder's ground-truth subscription
  before tick 0 (the plan counts it in ``start_subscribers``), so the recording starts with the first
  tick.
- Subscriptions are raw (``raw=True``): the CDR bytes are written as received, never deserialised, with
  QoS compatible with every publisher (reliable and transient local where all publishers offer it,
  so latched messages published before the recorder joined, like /tf_static, are recorded), history
  ``queue_depth``. One callback per message on an EventsExecutor: nothing else happens per message.
- Timestamps: with ``use_sim_time`` (the launchers set it) the bag time of a message is the simulated
  time of the latest /clock the recorder received (/clock itself: its own time), 0 before the first
  /clock. If /clock goes back (an episode reset), the time keeps counting from where it was (offset by
  the previous episode's length), so bag times never go back. Without ``use_sim_time``: system time.
- Files: ``qrsim_ros.bag.writer.SplitBagWriter``: a new MCAP file every ``split_period_s`` of wall time,
  metadata.yaml rewritten after each, so a SIGKILL leaves a bag readable up to the last completed
  split; SIGINT/SIGTERM finish it completely. On SIGINT/SIGTERM the recorder first drains what it has
  received (until nothing arrived for 0.1 s, at most ``drain_timeout_s``), then closes the bag; a
  second signal stops it at once (the bag is still closed).
- A failed write (a full disk) logs one line naming the bag and the free space left, keeps the bag's
  completed files (readable, listed in metadata.yaml) and ends the recorder with exit status
  ``ExitStatus.RECORDER_FAILED`` (3): the launchers go on without it unless the recording is required
  (``qrsim launch --record-required``, launch argument ``record_required``).

Parameters: ``output_dir`` (the bag directory; must not exist or be empty), ``split_period_s``,
``compression`` (``zstd`` MCAP chunk compression or ``none``), ``exclude``, ``queue_depth``,
``discovery_period_s``, ``drain_timeout_s``; ``scenario``, ``seed``, ``num_vehicles`` are only written
to the bag's ``custom_data`` (the scenario is not loaded).
"""

from __future__ import annotations

import re
import signal
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from rclpy.clock import Clock, ClockType
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from qrsim_ros.bag.gaps import StampGaps, missing_summary
from qrsim_ros.bag.topics import (
    bag_qos,
    clock_ns,
    compatible,
    ensure_type,
    left_out,
    starts_with_header,
    subscription_policy,
)
from qrsim_ros.bag.types import private_typestore
from qrsim_ros.bag.writer import COMPRESSIONS, BagWriteError, BagWriterError, SplitBagWriter
from qrsim_ros.ros.cdr import header_stamp_ns
from qrsim_ros.ros.message_types import message_class
from qrsim_ros.ros.names import VEHICLE_STATUS_TOPIC
from qrsim_ros.ros.node import Counters, ParameterError, run_node
from qrsim_ros.ros.parameters import RUN_ID, Param, ParamTable, declare_parameters, limited
from qrsim_ros.ros.run_identity import RUN_COUNTERS, RunMemberNode
from qrsim_ros.supervision.exits import ExitStatus

#: Wall seconds between housekeeping passes (split check, discovery, drain).
HOUSEKEEPING_S = 0.1
#: Longest wall time between two looks at an unchanging graph [s].
MAX_DISCOVERY_S = 0.5
#: A drain ends once nothing arrived during this long [s].
DRAIN_IDLE_S = 0.1
CLOCK_TOPIC = "/clock"
#: Topics not recorded by default: ROS's parameter events, the lockstep progress reports (one per node per
#: tick) and the fleet topics (the simulator's internal traffic: the per-vehicle topics recorded hold it).
DEFAULT_EXCLUDE = "^/(parameter_events|sim/tick_progress|sim/fleet/.*)$"
#: The clock owner's start gate counts subscriptions of /sim/vehicle_status: that one is created last in
#: a discovery pass, after every other topic discovered with it (/clock, /tf, uavN/ground_truth/odom...).
#: DDS announces a participant's readers in creation order, so by the time the gate sees this one
#: matched it has matched the others, and tick 0 reaches the bag on every topic. (Sorted by name,
#: /sim/vehicle_status came before /uavN/...: a CI run lost uav1's first 28 odometry ticks.) That orders
#: the publishers' side only: a reader drops the samples of a writer it has not discovered itself yet, so
#: the gate subscription also waits until every other subscription has matched each publisher the graph
#: lists for its topic with a QoS it can match (a CI run lost the first 9 ticks of /clock and odometry;
#: a publisher it cannot match, which ``_check_publishers`` warns of, is not waited for), for at most
#: ``GATE_MATCH_WAIT_S`` of wall time: under heavy load matching took over 5 s (a run lost the first 8
#: ticks of /tf), and the cap stays below the clock owner's default ``start_timeout_s`` (30 s).
_GATE_TOPIC = "/sim/vehicle_status"
GATE_MATCH_WAIT_S = 20.0


#: The node's parameters (declared in one call at start-up).
PARAMETERS = ParamTable(
    "recorder",
    Param("output_dir", "", "bag directory to create (must not exist or be empty)"),
    Param("split_period_s", 5.0,
          "wall seconds per MCAP file: a SIGKILL loses at most the file being written [s]",
          lo=0.05, hi=86400.0),
    Param("compression", "zstd", "MCAP chunk compression", choices=COMPRESSIONS),
    Param("exclude", DEFAULT_EXCLUDE,
          "regular expression of topics not to record (empty: record everything)"),
    Param("queue_depth", 1000, "history depth of every subscription (messages held while busy)",
          lo=1, hi=1_000_000),
    Param("discovery_period_s", 0.1, "wall seconds between two looks at the graph for new topics [s]",
          lo=0.01, hi=60.0),
    Param("drain_timeout_s", 5.0,
          "longest wall time spent taking pending messages after SIGINT/SIGTERM before the bag is closed [s]",
          lo=0.0, hi=60.0),
    Param("report_progress", False,
          "report each /sim/vehicle_status written on /sim/tick_progress, so that a lockstep clock waits "
          "for the recorder (its window and its last tick; the launch plan sets it in lockstep)"),
    Param("scenario", "", "scenario of the run (written to the bag's custom_data)"),
    limited("seed", -1, "seed of the run (custom_data)"),
    limited("num_vehicles", 0, "vehicles of the run (custom_data)"),
    RUN_ID,
)


class RecorderNode(RunMemberNode):
    """Records every discovered topic, serialized, to a SIGKILL-safe rosbag2 bag (module docstring)."""

    NODE_NAME = "recorder"

    def __init__(self) -> None:
        super().__init__(self.NODE_NAME)
        p = self.params = declare_parameters(self, PARAMETERS)
        # a member of the run: counted by the start gate; other runs' messages are not recorded
        self.join_run(p.run_id, partial(Counters, self, RUN_COUNTERS))
        output_dir, exclude, scenario = p.output_dir, p.exclude, p.scenario
        if not str(output_dir).strip():
            raise ParameterError("parameter 'output_dir' is empty: give the bag directory to create")
        try:
            self._exclude = re.compile(exclude) if exclude else None
        except re.error as exc:
            raise ParameterError(f"parameter 'exclude'={exclude!r} is not a regular expression: "
                                 f"{exc}") from None
        self.use_sim_time = bool(self.get_parameter("use_sim_time").value)

        self._store = private_typestore()
        custom = {"qrsim_ros.time": "sim" if self.use_sim_time else "system"}
        if scenario:
            custom.update({"qrsim_ros.scenario": scenario, "qrsim_ros.seed": str(p.seed),
                           "qrsim_ros.num_vehicles": str(p.num_vehicles)})
        try:
            self.writer = SplitBagWriter(output_dir, self._store, compression=p.compression,
                                         split_period_s=p.split_period_s, custom_data=custom)
        except (BagWriterError, OSError) as exc:
            raise ParameterError(f"parameter 'output_dir'={output_dir!r}: {exc}") from None

        self._clock_gaps = ClockGaps()
        self._stamp_gaps: dict[str, StampGaps] = {}  # per topic whose first field is a std_msgs/Header
        # Bag time [ns]: the latest /clock (+ the lengths of earlier episodes).
        self._now_ns = 0
        self._last_clock_ns = -1
        self._offset_ns = 0
        self._received = 0
        self._subs: dict[str, Any] = {}
        self._policy: dict[str, tuple[bool, bool]] = {}
        self._ignored: set[str] = set()
        self._warned: set[str] = set()
        self._next_discovery = 0.0
        self._discovery_wait_s = self.params.discovery_period_s
        self._publisher_counts: dict[str, int] = {}
        self._closed = False
        self._started_wall = time.monotonic()
        #: set when the node should end (run_node stops spinning and returns it): the bag failed
        self.exit_status: int | None = None

        self._stop: tuple[int, Any] | None = None
        self._stop_wall = 0.0
        self._received_at_check = -1
        self._forward: dict[int, Any] = {}
        self._gate_wait_since: float | None = None  # when the gate subscription first waited [monotonic s]
        self._install_signal_handlers()
        self._progress = LockstepReport(self) if p.report_progress else None

        self._discover()
        self._timer = self.create_timer(HOUSEKEEPING_S, self._housekeeping,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(f"recording to {self.writer.path} ({p.compression}, a new file every "
                               f"{p.split_period_s:g} s, {'sim' if self.use_sim_time else 'system'} time)")

    # --- discovery ------------------------------------------------------------------------------------

    def _discover(self) -> bool:
        """Subscribe to the new topics that have publishers; True if the graph changed (new topics or
        publisher counts), so that the next look comes soon."""
        changed = False
        new = []
        for name, types in self.get_topic_names_and_types():
            if name in self._subs:
                count = self.count_publishers(name)
                if count != self._publisher_counts.get(name):
                    self._publisher_counts[name] = count
                    changed = True
                    self._check_publishers(name)
                continue
            if name in self._ignored:
                continue
            if self._left_out(name):
                self._ignored.add(name)
                continue
            if len(types) != 1:
                self._warn_once(name, f"not recording {name}: published with several types {types}")
                continue
            if self.count_publishers(name):  # a topic with subscribers only has nothing to record yet
                new.append((name, types[0]))
        new.sort(key=lambda item: item[0] == _GATE_TOPIC)
        for name, msgtype in new:
            if name == _GATE_TOPIC and not self._others_matched():
                changed = True  # look again soon
                continue
            infos = self.get_publishers_info_by_topic(name)
            if infos:
                self._subscribe(name, msgtype, infos)
                self._publisher_counts[name] = len(infos)
                changed = True
                if name == _GATE_TOPIC:
                    self._log_gate()
        return changed

    def _others_matched(self) -> bool:
        """Whether every subscription has matched as many publishers as the graph lists for its topic with
        a QoS it can match (see ``_GATE_TOPIC``), or ``GATE_MATCH_WAIT_S`` of wall time have passed since
        the first ask."""
        now = time.monotonic()
        if self._gate_wait_since is None:
            self._gate_wait_since = now
        if now - self._gate_wait_since >= GATE_MATCH_WAIT_S:
            return True
        return not self._gate_publishers_unsubscribed() and all(
            sub.get_publisher_count() >= self._matchable_publishers(name) for name, sub in self._subs.items())

    def _log_gate(self) -> None:
        """One line when the gate subscription is made: how many of the others had matched what the graph
        lists, and after how long (a bag missing its first ticks is read against it)."""
        waited = time.monotonic() - (self._gate_wait_since or time.monotonic())
        short = [name for name, sub in self._subs.items() if name != _GATE_TOPIC
                 and sub.get_publisher_count() < self._matchable_publishers(name)]
        self.get_logger().info(f"subscribed {_GATE_TOPIC} after {waited:.2f} s, with {len(self._subs) - 1} "
                               f"other topics" + (f" ({len(short)} not matched: {', '.join(short[:3])})"
                                                  if short else ", each matched to its publishers"))

    def _gate_publishers_unsubscribed(self) -> list[str]:
        """Topics of the gate topic's publisher nodes (the clock owner) that have no subscription yet and
        are not left out: a topic the discovery passes list only after the gate subscription would lose
        the first ticks (a flake hunt lost tick 0 of one vehicle's odometry that way)."""
        from rclpy._rclpy_pybind11 import NodeNameNonExistentError

        missing = []
        for info in self.get_publishers_info_by_topic(_GATE_TOPIC):
            if not info.node_namespace.startswith("/"):  # the node's name not discovered yet: look again
                missing.append(f"(the topics of {_GATE_TOPIC}'s publisher)")
                continue
            try:
                topics = self.get_publisher_names_and_types_by_node(info.node_name, info.node_namespace)
            except NodeNameNonExistentError:  # the node left the graph meanwhile
                continue
            missing += [name for name, types in topics
                        if name != _GATE_TOPIC and name not in self._subs and name not in self._ignored
                        and not self._left_out(name) and len(types) == 1]
        return missing

    def _left_out(self, name: str) -> bool:
        """Whether ``name`` is excluded by the ``exclude`` pattern or hidden (a part starting with ``_``,
        left out as ``ros2 bag record --all`` leaves it out)."""
        return left_out(name, self._exclude)

    def _matchable_publishers(self, name: str) -> int:
        """Publishers of ``name`` in the graph whose QoS the recorder's subscription matches."""
        reliable, transient_local = self._policy[name]
        return sum(compatible(bag_qos(info.qos_profile), reliable, transient_local)
                   for info in self.get_publishers_info_by_topic(name))

    def _subscribe(self, name: str, msgtype: str, infos: list[Any]) -> None:
        cls = message_class(msgtype)
        if cls is None or not ensure_type(self._store, msgtype):
            self._warn_once(name, f"not recording {name}: message type {msgtype} is unknown here")
            self._ignored.add(name)
            return
        offered = [bag_qos(info.qos_profile) for info in infos]
        type_hash = _hash_text(infos[0].topic_type_hash) or None
        own = self._store.hash_rihs01(msgtype)
        if type_hash is not None and type_hash != own:
            # The bag keeps the running type's hash (the truth about the data); readers that check
            # definitions against hashes (rosbags' AnyReader) will refuse the bag until both agree.
            self.get_logger().warning(f"{name}: the publisher's {msgtype} hash {type_hash} differs from the "
                                      f"installed definition written to the bag ({own}): the nodes run "
                                      "another build of this type (rebuild and restart them)")
        try:
            topic_id = self.writer.add_topic(name, msgtype, offered_qos=offered, type_hash=type_hash)
        except BagWriterError as exc:
            self._warn_once(name, f"not recording {name}: {exc}")
            self._ignored.add(name)
            return
        reliable, transient_local = subscription_policy(offered)
        qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=self.params.queue_depth,
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if transient_local else DurabilityPolicy.VOLATILE)
        gaps = None
        if name != CLOCK_TOPIC and starts_with_header(self._store, msgtype):
            gaps = self._stamp_gaps[name] = StampGaps()
        callback = self._clock_callback(topic_id) if name == CLOCK_TOPIC else self._callback(topic_id, gaps)
        if name == VEHICLE_STATUS_TOPIC and self._progress is not None:
            callback = self._progress.after(callback)
        self._subs[name] = self.create_subscription(cls, name, callback, qos, raw=True)
        self._policy[name] = (reliable, transient_local)
        self.get_logger().debug(f"recording {name} ({msgtype})")

    def _check_publishers(self, name: str) -> None:
        """Warn once if a later publisher cannot match the subscription made for the first ones."""
        if name in self._warned:
            return
        reliable, transient_local = self._policy[name]
        for info in self.get_publishers_info_by_topic(name):
            if not compatible(bag_qos(info.qos_profile), reliable, transient_local):
                self._warn_once(name, f"{name}: publisher {info.node_namespace}/{info.node_name} offers a "
                                      "QoS the recorder's subscription does not match: its messages are not "
                                      "recorded")
                return

    def _warn_once(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.get_logger().warning(text)

    # --- messages -------------------------------------------------------------------------------------

    def _callback(self, topic_id: int, gaps: StampGaps | None = None) -> Callable[[bytes], None]:
        """Write each message with its log time; ``gaps``: count its header stamp (``bag.gaps``)."""
        write = self.writer.write
        now = None if self.use_sim_time else self.get_clock().now

        def on_message(data: bytes) -> None:
            self._received += 1
            if gaps is not None:
                gaps.count(header_stamp_ns(data))
            try:
                write(topic_id, self._now_ns if now is None else now().nanoseconds, data)
            except BagWriterError as exc:
                self._failed(exc)

        return on_message

    def _clock_callback(self, topic_id: int) -> Callable[[bytes], None]:
        write = self.writer.write
        if not self.use_sim_time:
            return self._callback(topic_id)

        def on_clock(data: bytes) -> None:
            self._received += 1
            t_ns = clock_ns(data)
            last = self._last_clock_ns
            if t_ns < last:  # the clock restarted: an episode reset
                self._offset_ns += last
                self._clock_gaps.episode_end()
            elif t_ns > last >= 0:
                self._clock_gaps.step(t_ns - last)
            if t_ns != last:  # a tick re-sent by the lockstep loop is the same tick
                self._clock_gaps.count(t_ns)
            self._last_clock_ns = t_ns
            self._now_ns = max(self._now_ns, self._offset_ns + t_ns)
            try:
                write(topic_id, self._now_ns, data)
            except BagWriterError as exc:
                self._failed(exc)

        return on_clock

    # --- housekeeping and stopping ----------------------------------------------------------------------

    def _housekeeping(self) -> None:
        if self._closed:
            return
        now = time.monotonic()
        try:
            if self.writer.maybe_split():
                self.get_logger().debug(f"split closed in {time.monotonic() - now:.3f} s")
        except BagWriterError as exc:
            self._failed(exc)
            return
        if self._stop is not None:
            idle = self._received == self._received_at_check
            self._received_at_check = self._received
            waited = now - self._stop_wall
            if (idle and waited >= DRAIN_IDLE_S) or waited >= self.params.drain_timeout_s:
                self._forward_stop()
            return
        if now >= self._next_discovery:
            # Look often while the graph changes, then back off (up to MAX_DISCOVERY_S): a pass queries
            # the publishers of every topic.
            changed = self._discover()
            self._discovery_wait_s = (self.params.discovery_period_s if changed
                                      else min(2 * self._discovery_wait_s, MAX_DISCOVERY_S))
            self._next_discovery = now + self._discovery_wait_s

    def _install_signal_handlers(self) -> None:
        """Defer the process's SIGINT/SIGTERM handling (run_node's) until the pending messages are taken."""
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._forward[sig] = signal.getsignal(sig)
                signal.signal(sig, self._on_signal)
        except ValueError:  # not the main thread: no draining, the owner's handlers stay
            self._forward.clear()

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._stop is None:
            self._stop = (signum, frame)
            self._stop_wall = time.monotonic()
            self._received_at_check = self._received
            return
        self._forward_stop()  # a second signal: stop now

    def _forward_stop(self) -> None:
        signum, frame = self._stop or (signal.SIGTERM, None)
        handlers, self._forward = self._forward, {}
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        handler = handlers.get(signum)
        if callable(handler):
            handler(signum, frame)
        elif handlers:
            signal.raise_signal(signum)

    def _failed(self, exc: BagWriterError) -> None:
        """The bag cannot be written (a full disk): one line, stop recording, end the node with
        ExitStatus.RECORDER_FAILED (the bag keeps its completed files)."""
        if self._closed:
            return
        self._closed = True  # later messages hit a closed writer and are dropped here
        self._leave_lockstep()
        self.get_logger().error(str(exc))
        self.exit_status = int(ExitStatus.RECORDER_FAILED)

    def close_bag(self) -> None:
        """Finish the bag (last split and metadata) and log what it holds. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._leave_lockstep()
        missing, ticks = self._clock_gaps.missing()
        others = missing_summary(self._stamp_gaps)
        if missing or others:
            # a gap in /clock or in a periodic topic's stamps: the recorder fell behind (an overloaded
            # machine), or, for a topic, its publisher paused (a fault silencing a sensor)
            self.writer.custom_data["qrsim_ros.missing_clock_ticks"] = str(missing)
            parts = [f"the bag misses {missing} of {ticks} /clock ticks"] if missing else []
            if others:
                parts.append(others)
            self.get_logger().warning("; ".join(parts) + ": the recorder fell behind (overloaded machine?)"
                                      + ("" if missing else " or their publishers paused"))
        try:
            self.writer.close()
        except BagWriteError as exc:  # the last split did not fit
            self.get_logger().error(str(exc))
            self.exit_status = int(ExitStatus.RECORDER_FAILED)
            return
        topics = len(self.writer.topics)
        size_mb = self.writer.size_bytes() / 1e6
        wall = time.monotonic() - self._started_wall
        self.get_logger().info(f"bag {self.writer.path}: {self.writer.message_count} messages on {topics} "
                               f"topics, {size_mb:.2f} MB in {len(self.writer.files)} file(s), "
                               f"{wall:.1f} s of wall time, {time.process_time():.1f} s of CPU")

    def _leave_lockstep(self) -> None:
        if self._progress is not None:
            self._progress.leave()

    def close_outputs(self) -> None:
        """``run_node``'s step before the DDS teardown: the bag is finished while the stop deadline for the
        node's own work runs (the teardown gets the longer one)."""
        self.close_bag()

    def destroy_node(self) -> None:
        try:
            self.close_bag()
        finally:
            super().destroy_node()


class LockstepReport:
    """The recorder as a lockstep consumer (``report_progress``): after each /sim/vehicle_status it
    wrote, its (episode, tick) on /sim/tick_progress, as the ground-truth consumers report theirs; so a
    lockstep clock runs at most its window ahead of the bag and, at ``duration_s``, waits for the bag to
    hold the last tick (a recorder starved of CPU had lost a run's last 53 of 101 ticks: the writers
    had left before it took them). On leaving (the bag closed or failed) it reports a tick that is never
    behind, so the clock does not wait for a recorder that is gone."""

    def __init__(self, node: Any) -> None:
        from qrsim_ros.msg import TickProgress, VehicleStatus
        from qrsim_ros.ros.names import TICK_PROGRESS_TOPIC
        from qrsim_ros.ros.qos import QOS_TICK_PROGRESS

        self._status_type = VehicleStatus
        self._msg = TickProgress(node=node.get_fully_qualified_name())
        self._pub = node.create_publisher(TickProgress, TICK_PROGRESS_TOPIC, QOS_TICK_PROGRESS)
        self._left = False

    def after(self, write: Callable[[bytes], None]) -> Callable[[bytes], None]:
        """``write`` (a raw /sim/vehicle_status callback), then the report of what it wrote."""
        from rclpy.serialization import deserialize_message

        def write_and_report(data: bytes) -> None:
            write(data)
            if self._left:
                return
            status = deserialize_message(data, self._status_type)
            self._msg.episode, self._msg.tick = int(status.episode), int(status.tick)
            self._pub.publish(self._msg)

        return write_and_report

    def leave(self) -> None:
        if self._left:
            return
        self._left = True
        self._msg.episode, self._msg.tick = LEFT_EPISODE, LEFT_TICK
        self._pub.publish(self._msg)


#: The report of a consumer that has left: never behind any tick (TickProgress's uint32 and uint64 maxima).
LEFT_EPISODE, LEFT_TICK = 2**32 - 1, 2**64 - 1


class ClockGaps:
    """Counts /clock ticks that never arrived: per episode, (last - first) / step + 1 expected, where
    the step is the smallest clock increment seen (the simulator's tick)."""

    def __init__(self) -> None:
        self._step_ns = 0
        self._done_expected = 0
        self._done_received = 0
        self._first_ns = -1
        self._last_ns = -1
        self._received = 0

    def step(self, dt_ns: int) -> None:
        if self._step_ns == 0 or dt_ns < self._step_ns:
            self._step_ns = dt_ns

    def count(self, t_ns: int) -> None:
        if self._first_ns < 0:
            self._first_ns = t_ns
        self._last_ns = max(self._last_ns, t_ns)
        self._received += 1

    def episode_end(self) -> None:
        self._done_expected += self._expected()
        self._done_received += self._received
        self._first_ns = self._last_ns = -1
        self._received = 0

    def _expected(self) -> int:
        if self._received == 0:
            return 0
        if self._step_ns == 0:
            return self._received
        return max(self._received, round((self._last_ns - self._first_ns) / self._step_ns) + 1)

    def missing(self) -> tuple[int, int]:
        """(ticks missing, ticks expected) over every episode so far."""
        expected = self._done_expected + self._expected()
        return expected - self._done_received - self._received, expected


def _hash_text(type_hash: Any) -> str:
    """``RIHS01_<hex>`` of rclpy's TypeHash; '' for none or the all-zero (unknown) hash."""
    text = str(type_hash) if type_hash is not None else ""
    if not text.startswith("RIHS01_") or set(text[7:]) <= {"0"}:
        return ""
    return text


def main(argv: list[str] | None = None) -> int:
    return run_node(RecorderNode, argv, events_executor=True)


if __name__ == "__main__":
    sys.exit(main())

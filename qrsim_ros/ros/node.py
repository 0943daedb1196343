"""What every qrsim_ros node shares: the scenario parameters, the /diagnostics counters and ``run_node``
(init, spin, clean shutdown on SIGINT/SIGTERM). Parameters are declared from a table
(``qrsim_ros.ros.parameters``: ``ParamTable``, ``declare_parameters``; ``ParameterError`` is re-exported
here).

Nodes are thin: they declare parameters, load the scenario (the same YAML the in-process Simulator
uses), convert messages at the boundary with ``qrsim_ros.core.common.frames`` and call the core models.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import MethodType
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from qrsim_ros.core.common.jit import load_kernels_reachable_from
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.ros.native_exit import NativeExitTimer
from qrsim_ros.ros.parameters import (
    ParameterError,
    ParamTable,
    declare_parameters,
    scenario_from_parameters,
)
from qrsim_ros.ros.qos import QOS_RELIABLE
from qrsim_ros.ros.run_identity import RUN_COUNTERS, RunMemberNode
from qrsim_ros.ros.stamps import stamp_from_seconds
from qrsim_ros.supervision.exits import ExitStatus


def run_node(factory: Callable[[], Node], argv: Sequence[str] | None = None, *,
             events_executor: bool = True, exit_process: bool = True) -> int:
    """Create the node, spin it until SIGINT/SIGTERM or shutdown, clean up; return the exit status.

    A bad parameter (ParameterError/ConfigError at construction) prints one line and returns 1 (with
    ``exit_process``: ends the process with status 1 at once, without DDS teardown). A node
    may end itself by setting an ``exit_status`` attribute (an int): the spin stops and that is the
    status (the recorder's full disk, the referee's ``exit_when_done``). Once a stop was requested the
    process ends within ``STOP_DEADLINE_S``: if the clean-up hangs (DDS under load), a watchdog prints
    one line naming the step it is stuck in and ends the process (status ``ExitStatus.STOP_DEADLINE``). Once
    the node's own work is complete (the spin ended, ``close_outputs`` ran if the node has one: the
    recorder's bag), only DDS teardown is left: it gets ``TEARDOWN_DEADLINE_S`` from the stop request,
    after which the process ends with the node's own status and a warning.

    ``exit_process`` (the default; every node executable): once everything is cleaned up (the node
    destroyed, rclpy shut down, the context and with it the DDS participant deleted, so its shared
    memory is released), end the process at once with the status (``os._exit`` after flushing stdout and
    stderr) instead of returning. That skips the interpreter's finalisation, where the DDS library's
    static destructors ran (about 0.5 s per idle node, seconds under load, and where a node stopping was
    seen to hang). False: return the status (in-process callers).
    ``events_executor``: spin on ``rclpy.experimental.EventsExecutor`` (when available; the default)
    instead of the SingleThreadedExecutor: about 5x the callback throughput, which is what bounds a
    node that takes a message per vehicle per tick.
    """
    # Our own SIGINT/SIGTERM handlers only set a flag; the loop below notices it within 0.1 s and then
    # destroys the node before shutting rclpy down. (rclpy's handlers shut the context down while the
    # executor may be taking a message, which sometimes ended a node with an error while stopping.)
    rclpy.init(args=list(argv) if argv is not None else sys.argv,
               signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    watchdog = StopWatchdog()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()
        watchdog.start(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    unwatch = _watch_signals(stop, watchdog)
    node: Node | None = None
    half_built = False
    executor: Any = None
    status = 0
    try:
        node = factory()
        # now, not in the first tick (a node's stop and lockstep clock); a stop request ends it early
        watchdog.step = "loading the numba kernels"
        load_kernels_reachable_from(node, stop=stop.is_set)
        watchdog.step = "spinning"
        events = _events_executor_class() if events_executor else None
        executor = events() if events is not None else SingleThreadedExecutor()
        executor.add_node(node)
        # spin_once with a timeout: EventsExecutor.spin() (Kilted wheels) neither runs timers nor
        # returns on shutdown; the loop also lets the stop flag be seen.
        while not stop.is_set() and rclpy.ok() and getattr(node, "exit_status", None) is None:
            executor.spin_once(timeout_sec=0.1)
    except (ParameterError, ConfigError) as exc:
        rejected = node is None  # the constructor raised
        if rejected:  # its half-built node is destroyed below, not collected
            node = _half_built_node(exc)
            half_built = node is not None
        name = node.get_name() if node is not None else getattr(factory, "__name__", "node")
        print(f"[{name}] error: {exc}", file=sys.stderr)
        status = 1
        if rejected and exit_process:
            # Nothing of the node's is left to save, so no DDS teardown is risked: destroying a
            # participant created a moment ago, while the graph's other processes were still
            # discovering it, once died of SIGSEGV in CI instead of ending with status 1.
            # Peers drop its endpoints at the lease's end (shared-memory files, under a user's own
            # Fast DDS profile, are removed by the next launcher: ``cli.leftovers``).
            _exit_now(status)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        watchdog.start("the end of the spin")  # the clean-up below gets STOP_DEADLINE_S, whatever ended it
        # the executor lets go of the node before it is destroyed (the EventsExecutor still holds
        # its entities otherwise)
        if executor is not None:
            if node is not None:
                watchdog.step = "removing the node from the executor"
                _cleanup(executor.remove_node, node)
            watchdog.step = "shutting the executor down"
            _cleanup(executor.shutdown, 1.0)
        if node is not None and not half_built:
            close_outputs = getattr(node, "close_outputs", None)  # (the recorder's bag)
            if callable(close_outputs):
                watchdog.step = "closing the node's outputs"
                _cleanup(close_outputs)
            watchdog.step = "waiting for the readers' acknowledgements"
            _cleanup(wait_for_readers, [node], ACK_WAIT_S)
        # the node's work is complete (or it never started: a bad parameter's status is known): what is
        # left is DDS teardown, given TEARDOWN_DEADLINE_S
        watchdog.teardown(_final_status(status, node))
        if node is not None:
            watchdog.step = "destroying the node"
            # a half-built node gets rclpy's own destroy_node: a subclass's may rely on what it never built
            _cleanup(MethodType(Node.destroy_node, node) if half_built else node.destroy_node)
        watchdog.step = "shutting rclpy down"
        rclpy.try_shutdown()
        watchdog.step = "deleting the DDS participant"
        _cleanup(rclpy.get_default_context().destroy)
        watchdog.cancel()
        unwatch()
        # The process is ending: a SIGINT/SIGTERM arriving now (a launcher stopping everything) must not
        # kill it while the interpreter finalises (it resets Python-handled signals to the default),
        # which would replace the status below with the signal's (a recorder's "bag not written" was
        # lost that way). Ignored signals stay ignored.
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                signal.signal(sig, signal.SIG_IGN)
    status = _final_status(status, node)
    if exit_process:
        _exit_now(status)
    return status


def _exit_now(status: int) -> None:
    """End the process with ``status`` at once (``os._exit``) after flushing stdout and stderr: no
    interpreter finalisation (see ``run_node``)."""
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def wait_for_readers(nodes: Sequence[Node], timeout_s: float) -> bool:
    """Wait (at most ``timeout_s`` of wall time in all) until every reliable reader matched with the
    ``nodes``' publishers has acknowledged every sample sent to it; True if all did.

    A reader that lost a sample (a full receive queue under load) holds the samples after it
    until the writer repairs the gap; if the writer left first, the reader discards them, so a short
    run's bag kept a topic's first sweeps and nothing after. A node waits for this before it leaves:
    a reader that is stopping or gone stops counting (it is unmatched), a hung one costs the timeout."""
    from rclpy.duration import Duration

    deadline = time.monotonic() + timeout_s
    for publisher in [p for node in nodes for p in node.publishers]:
        left_ns = max(int((deadline - time.monotonic()) * 1e9), 0)  # 0: a look without waiting
        if not publisher.wait_for_all_acked(Duration(nanoseconds=left_ns)):
            return False
    return True


def _half_built_node(exc: BaseException) -> Node | None:
    """The node whose constructor raised ``exc`` (the ``self`` of a constructor frame in its traceback),
    or None (for in-process callers; a node process ends at once). Left to the garbage collector, its
    rcl entities would be freed in no particular order while DDS threads still serve them: a node
    rejecting a bad parameter was seen to die of SIGSEGV in a Fast DDS thread as the exception was
    cleared; destroyed like any node (``destroy_node``), it does not."""
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Node) and frame.f_code.co_name == "__init__":
            return candidate
    return None


def _final_status(status: int, node: Node | None) -> int:
    """The process's exit status: ``status`` (the run's), or else the node's own ``exit_status``."""
    own = getattr(node, "exit_status", None)
    return own if status == 0 and isinstance(own, int) else status


#: Wall seconds a stopping node waits for its readers to acknowledge what it published (part of
#: STOP_DEADLINE_S; ``wait_for_readers``).
ACK_WAIT_S = 1.0
#: Wall seconds a node has to finish stopping once asked (SIGINT/SIGTERM) before the watchdog ends it.
STOP_DEADLINE_S = 3.0
#: Wall seconds from the stop request a node gets once its own work is complete and only the DDS
#: teardown is left (destroying its entities, then the participant): each entity's removal is announced
#: to every peer, which took over 3 s for the recorder's 459 subscriptions with 20 vehicles on a loaded
#: machine, and an rmw node's destruction was seen to block for 9 s beside CPU-bound processes. Past it
#: the node ends with its own status and a warning (peers then drop its endpoints at the lease's end).
#: With the C-level fallback's extra second, below ros2 launch's sigterm_timeout (5 s): a stop never
#: needs SIGTERM.
TEARDOWN_DEADLINE_S = 3.8


def _watch_signals(stop: threading.Event, watchdog: StopWatchdog) -> Callable[[], None]:
    """Start the stop watchdog on SIGINT/SIGTERM from a thread of its own, woken through
    ``signal.set_wakeup_fd``: the interpreter's C-level handler writes the signal number to a pipe at
    once, while a Python handler runs only when the main thread returns to Python. A main thread
    blocked inside native code (a wait in the executor that never returned was seen once in many
    thousands of node stops) would otherwise leave the node stoppable only by SIGKILL, with no clue
    where it hung; now the watchdog ends it within STOP_DEADLINE_S and prints every thread's stack.
    Returns the function that undoes it."""
    import os

    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    stops = {int(signal.SIGINT), int(signal.SIGTERM)}

    def watch() -> None:
        while True:
            try:
                data = os.read(read_fd, 16)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum in stops:
                    stop.set()
                    watchdog.start(signal.Signals(signum).name)

    threading.Thread(target=watch, name="qrsim-signal-watch", daemon=True).start()

    def undo() -> None:
        with contextlib.suppress(ValueError):  # not the main thread
            signal.set_wakeup_fd(previous)
        os.close(write_fd)  # the watcher's read returns empty and the thread ends

    return undo


class StopWatchdog:
    """Ends the process ``STOP_DEADLINE_S`` after ``start`` unless ``cancel`` came first: the guarantee
    that a node stops within seconds of SIGINT even if a clean-up step blocks (in DDS, under load). It
    prints one line naming the step (``step``) and the Python stacks (to find the cause), then
    ``os._exit``: the launcher sees ExitStatus.STOP_DEADLINE, a failure it names."""

    def __init__(self, deadline_s: float = STOP_DEADLINE_S, teardown_deadline_s: float = TEARDOWN_DEADLINE_S,
                 *, owner: str = "the node") -> None:
        self.deadline_s = deadline_s
        self.owner = owner  # whose work is complete, in the teardown warning
        self.teardown_deadline_s = max(teardown_deadline_s, deadline_s)
        self.step = "spinning"
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._started_at: float | None = None
        self._why = ""
        self._teardown_status: int | None = None
        self._native_exit = NativeExitTimer()

    def start(self, why: str) -> None:
        """Start the countdown (once; later calls do nothing). Called from the signal handler and from
        the signal-watch thread: a non-blocking lock, never waited for (a handler may interrupt the main
        thread anywhere). A C-level fallback (``faulthandler.dump_traceback_later``, which needs no
        interpreter lock) ends the process one second later if even the timer thread cannot run."""
        if self._timer is not None or not self._lock.acquire(blocking=False):
            return
        self._started_at, self._why = time.monotonic(), why
        self._arm(self.deadline_s)

    def _arm(self, seconds: float) -> None:
        import faulthandler

        timer = threading.Timer(seconds, self._expire, args=(self._why,))
        timer.daemon = True
        self._timer = timer
        timer.start()
        # C-level fallbacks for a main thread blocked in native code with the interpreter lock held (the
        # timer above cannot run then): the stacks, then _exit with the status this timer would have used
        status = ExitStatus.STOP_DEADLINE if self._teardown_status is None else self._teardown_status
        if self._native_exit.arm(seconds + 1.0, status):
            faulthandler.dump_traceback_later(seconds + 0.9, file=sys.stderr, exit=False)
        else:  # no POSIX timers here: faulthandler's own exit, status 1
            faulthandler.dump_traceback_later(seconds + 1.0, file=sys.stderr, exit=True)

    def teardown(self, status: int) -> None:
        """The node's own work is done (``status``: what it exits with): from now on only DDS teardown is
        left, which gets ``teardown_deadline_s`` from the stop request; if that runs out the process ends
        with ``status`` and a warning (not ExitStatus.STOP_DEADLINE: nothing of the node's was lost)."""
        self._teardown_status = status
        if self._timer is None or self._started_at is None:
            return
        self._timer.cancel()
        left = self.teardown_deadline_s - (time.monotonic() - self._started_at)
        self._arm(max(left, 0.0))

    def cancel(self) -> None:
        if self._timer is not None:
            import faulthandler

            self._timer.cancel()
            self._native_exit.cancel()
            faulthandler.cancel_dump_traceback_later()

    def _expire(self, why: str) -> None:
        import faulthandler
        import os

        if self._teardown_status is not None:
            print(f"warning: still not stopped {self.teardown_deadline_s:g} s after {why} (stuck "
                  f"{self.step}, DDS teardown; {self.owner}'s work is complete): exiting now",
                  file=sys.stderr, flush=True)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            os._exit(self._teardown_status)
        print(f"error: still not stopped {self.deadline_s:g} s after {why} (stuck {self.step}): exiting now",
              file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        os._exit(ExitStatus.STOP_DEADLINE)


def _cleanup(step: Callable[..., Any], *args: Any) -> None:
    """One shutdown step; an error there is reported in one line and does not fail a node that is
    stopping anyway."""
    try:
        step(*args)
    except Exception as exc:  # rclpy raises several types while a context goes down
        print(f"warning: while stopping: {step.__qualname__}: {exc!r}", file=sys.stderr)


class Counters:
    """Named event counters of a node (rejected set points, late or missing inputs, ...), published
    as one ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics`` (status name = the node's name,
    one KeyValue per counter) at most once per ``period_s`` of wall time, and only when changed.

    ``info``: called before each publication; returns more key/values that change all the time (rates,
    settings; after the counters in the message) and may update ``values`` itself. With it, the array
    goes out every ``period_s``.
    """

    def __init__(self, node: Node, names: Sequence[str], period_s: float = 1.0, *,
                 name: str | None = None,
                 info: Callable[[], Mapping[str, object]] | None = None) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.clock import Clock, ClockType

        self.info = info
        self.values: dict[str, int] = dict.fromkeys(names, 0)
        #: simulated time [s] to stamp with (set by nodes that run on their input's ticks rather than
        #: on /clock); None: the node's clock
        self.sim_time_s: float | None = None
        #: another Counters of the node whose ``sim_time_s`` stamps this one's too (e.g. the run counters
        #: follow the ground-truth counters of a node that runs on its input's ticks)
        self.stamp_source: Counters | None = None
        self._node = node
        self._name = name  # the status name (None: the node's fully qualified name)
        self._pub = node.create_publisher(DiagnosticArray, "/diagnostics", QOS_RELIABLE)
        self._changed = True
        self._timer = node.create_timer(period_s, self.publish_if_changed,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))

    def count(self, name: str, n: int = 1) -> int:
        """Add ``n`` to counter ``name``; returns the new value."""
        self.values[name] = self.values.get(name, 0) + n
        self._changed = True
        return self.values[name]

    def publish_if_changed(self) -> None:
        extra = self.info() if self.info is not None else {}
        if not self._changed and not extra:
            return
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

        self._changed = False
        bad = any(self.values.values())
        status = DiagnosticStatus(
            level=DiagnosticStatus.WARN if bad else DiagnosticStatus.OK,
            name=self._name or self._node.get_fully_qualified_name(), hardware_id="qrsim_ros",
            message="inputs rejected or missed" if bad else "ok",
            values=[KeyValue(key=k, value=str(v)) for k, v in (*self.values.items(), *extra.items())])
        msg = DiagnosticArray(status=[status])
        sim_time_s = self.sim_time_s if self.stamp_source is None else self.stamp_source.sim_time_s
        msg.header.stamp = (self._node.get_clock().now().to_msg() if sim_time_s is None
                            else stamp_from_seconds(sim_time_s))
        self._pub.publish(msg)


#: A throttled warning: ``warn(key, text)`` logs ``text`` unless one of the same ``key`` was logged less
#: than a period ago (``ThrottledWarnings``).
Warn = Callable[[str, str], None]


class ThrottledWarnings:
    """A node's warnings, each kind (``key``) at most once per ``period_s`` of wall time: a stream of bad
    inputs is one line every few seconds, with its running count in the text."""

    def __init__(self, node: Node, period_s: float = 2.0) -> None:
        self._logger = node.get_logger()
        self._period_s = period_s
        self._last: dict[str, float] = {}

    def __call__(self, key: str, text: str) -> None:
        now = time.monotonic()
        if now - self._last.get(key, -float("inf")) >= self._period_s:
            self._last[key] = now
            self._logger.warning(text)


def _events_executor_class() -> Callable[[], Any] | None:
    """rclpy.experimental.EventsExecutor, or None when this rclpy has none."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        return None
    return EventsExecutor


class ScenarioNode(RunMemberNode):
    """Base of the simulator's nodes: the node's parameter table (``parameters.ParamTable``, starting with
    ``SCENARIO_PARAMETERS``) declared in one call and read as ``self.params``, the scenario it names
    (``self.scenario``, ``self.num_vehicles``) and its run (``run_id``: announced on /sim/run_members,
    other runs' messages ignored and counted, ``run_identity``). Raises ParameterError on a bad value or
    scenario."""

    def __init__(self, name: str, parameters: ParamTable) -> None:
        super().__init__(name)
        self.params = declare_parameters(self, parameters)
        self.join_run(self.params.run_id, partial(Counters, self, RUN_COUNTERS))
        self.scenario = scenario_from_parameters(self.params)
        self.num_vehicles = self.scenario.num_vehicles

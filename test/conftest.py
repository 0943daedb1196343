"""Shared pytest fixtures and the tier guard.

The repository root is put on ``sys.path`` so ``import qrsim_ros`` works whichever way pytest is
started (``python3 -m pytest`` from the root also does this).

Two tiers (docs/TESTING.md): a test that launches a node graph, starts a ROS node process or creates a
DDS participant carries the ``graph`` marker (set once per module where the whole file is graph tests);
every other test is the fast tier (``./qrsim test``). The guard below makes the marker true, not a
convention: a test without it that initialises an rclpy context, or starts a ROS node executable, a
test program, ``ros2`` or ``qrsim play``, fails at once with a line saying so, and every process it
starts gets an RMW implementation that does not exist (rcl then exits with status 102 naming it), so
a ROS process started any other way cannot start DDS either. A ``graph`` test that started no process
and no rclpy context fails too: it belongs to the fast tier.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

#: QRSim's recorded flight logs and GPS data, kept outside the repository (never copied into it).
QRSIM_DATA_DIR = REPO_ROOT.parent / "shared" / "data" / "qrsim"


@pytest.fixture(scope="session")
def qrsim_data_dir() -> Path:
    """Directory of the QRSim data files (``../shared/data/qrsim`` next to the repository)."""
    if not QRSIM_DATA_DIR.is_dir():
        pytest.skip(f"QRSim data directory not found: {QRSIM_DATA_DIR} (the flight logs are not in the repo)")
    return QRSIM_DATA_DIR


@pytest.fixture
def rclpy_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An rclpy context of this test's own, in a free ROS domain (skips without ROS)."""
    from rosenv import free_domain, require_ros

    require_ros()
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path / "ros_log"))
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=free_domain(), signal_handler_options=SignalHandlerOptions.NO)
    yield context
    context.try_shutdown()


# --- the tier guard ------------------------------------------------------------------------------------

#: The marker of the graph tier.
GRAPH = "graph"
#: RMW implementation given to every process a fast-tier test starts: rcl refuses it (exit 102, naming
#: it), so no process started outside the graph tier can create a DDS participant.
NO_DDS_RMW = "rmw_none_in_the_fast_tier_mark_the_test_graph"
_NODE_DIR = REPO_ROOT / "install" / "qrsim_ros" / "lib" / "qrsim_ros"
_PROGRAMS_DIR = REPO_ROOT / "test" / "programs"


class TierError(AssertionError):
    """A fast-tier test did what only a graph test may do."""


class _Tier:
    """What the running test is and what it started."""

    item: pytest.Item | None = None
    graph: bool = False
    started: list[str] = []  # noqa: RUF012 (the running test's, reset for each)
    violation: str | None = None

    @classmethod
    def refuse(cls, message: str) -> TierError:
        cls.violation = cls.violation or message  # kept: a test that catches the error still fails
        return TierError(message)


def _ros_command(argv: list[str]) -> str | None:
    """Why ``argv`` is a ROS process (a node executable, a test program, ros2, ``qrsim play``), or None.
    ``qrsim launch`` is not named here: it may refuse its arguments before starting anything (the fast
    tier checks that); the nodes it would start meet the RMW that does not exist."""
    words = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in argv]
    for i, word in enumerate(words):
        path = Path(word)
        if path.parent == _NODE_DIR and path.name != "qrsim":
            return f"the node executable {path.name}"
        if path.parent == _PROGRAMS_DIR:
            return f"the test program {path.name}"
        if path.name == "ros2" and i == 0:
            return "the ros2 command line"
        if word.startswith("qrsim_ros.nodes.") and i > 0 and words[i - 1] == "-m":
            return f"the node module {word}"
        if word == "play" and i > 0 and Path(words[i - 1]).name in {"qrsim", "qrsim_ros.cli.main"}:
            return "qrsim play"
    return None


_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self: subprocess.Popen, args: Any, *rest: Any, **kwargs: Any) -> None:
    if _Tier.item is not None:
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        _Tier.started.append(" ".join(str(a) for a in argv)[:200])
        if not _Tier.graph:
            why = _ros_command(argv)
            if why is not None:
                self._child_created = False  # (Popen.__del__ reads it)
                raise _Tier.refuse(f"{_Tier.item.nodeid} starts {why} but is not marked graph: mark it "
                                   f"pytest.mark.{GRAPH} (docs/TESTING.md)")
            env = dict(os.environ if kwargs.get("env") is None else kwargs["env"])
            env["RMW_IMPLEMENTATION"] = NO_DDS_RMW
            kwargs["env"] = env
    _popen_init(self, args, *rest, **kwargs)


def _guard_rclpy() -> None:
    try:
        from rclpy.context import Context
    except ImportError:  # no ROS in this interpreter: nothing to guard
        return
    context_init = Context.init

    def guarded_init(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _Tier.item is not None:
            _Tier.started.append("an rclpy context")
            if not _Tier.graph:
                raise _Tier.refuse(f"{_Tier.item.nodeid} initialises an rclpy context (a DDS participant) "
                                   f"but is not marked graph: mark it pytest.mark.{GRAPH} (docs/TESTING.md)")
        return context_init(self, *args, **kwargs)

    Context.init = guarded_init


def pytest_configure(config: pytest.Config) -> None:
    _HardStop.stderr = os.fdopen(os.dup(sys.__stderr__.fileno()), "w", buffering=1)
    subprocess.Popen.__init__ = _guarded_popen_init  # type: ignore[method-assign]
    _guard_rclpy()
    _fix_clock_entropy()


class _ClockEntropy:
    """Seed 0 ("from the clock") in this process: an entropy fixed by the test being run (its id) and the
    number of draws in it so far, so that a clock-seeded test (most shipped scenarios are) runs the same
    every time and a failure reruns as it failed; each test, and each draw in it, still gets its own."""

    key = "session"
    draws = 0

    @classmethod
    def start(cls, nodeid: str) -> None:
        cls.key, cls.draws = nodeid, 0

    @classmethod
    def draw(cls) -> int:
        cls.draws += 1
        return (zlib.crc32(cls.key.encode("utf-8")) << 32) | cls.draws


def _fix_clock_entropy() -> None:
    from qrsim_ros.core.common import rng

    rng.clock_entropy = _ClockEntropy.draw


#: Seconds past a test's budget after which the process ends with every thread's stack: pytest-timeout's
#: signal method fails a test only when its main thread runs Python; one blocked in native code (DDS)
#: would otherwise hang the run until CI's own limit.
HARD_STOP_AFTER_BUDGET_S = 60.0


def budget_s(item: pytest.Item) -> float:
    """The test's wall-clock budget: its ``timeout`` marker, else the ini default (pytest-timeout)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
        if value is not None:
            return float(value)
    return float(item.config.getini("timeout") or 0)


class _HardStop:
    """Ends the test run with every thread's stack once a test outlives its budget by
    ``HARD_STOP_AFTER_BUDGET_S``: a timer thread names the test first; faulthandler's own thread (no
    interpreter lock needed) is the fallback 10 s later."""

    timer: threading.Timer | None = None
    stderr: Any = None  # the real stderr, not pytest's capture of fd 2 (set at configure)

    @classmethod
    def arm(cls, item: pytest.Item, seconds: float) -> None:
        import faulthandler

        out = cls.stderr

        def expire() -> None:
            out.write(f"\n{item.nodeid}: still running {seconds:g} s after it started, past its budget "
                      "(blocked in native code?): ending the test run; every thread's stack:\n")
            out.flush()
            faulthandler.dump_traceback(file=out, all_threads=True)
            out.flush()
            os._exit(3)

        cls.timer = threading.Timer(seconds, expire)
        cls.timer.daemon = True
        cls.timer.start()
        faulthandler.dump_traceback_later(seconds + 10.0, exit=True, file=out)

    @classmethod
    def cancel(cls) -> None:
        import faulthandler

        if cls.timer is not None:
            cls.timer.cancel()
            cls.timer = None
            faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    _Tier.item, _Tier.graph, _Tier.started = item, item.get_closest_marker(GRAPH) is not None, []
    _Tier.violation = None
    _ClockEntropy.start(item.nodeid)
    budget = budget_s(item)
    if budget > 0:
        _HardStop.arm(item, budget + HARD_STOP_AFTER_BUDGET_S)
    try:
        return (yield)
    finally:
        _Tier.item = None
        _HardStop.cancel()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed phase's report gets the native backtrace of any program the test started that died of a
    native crash (``rosenv.crash_reports``: gdb on its core file)."""
    from rosenv import crash_reports, forget_ended

    report = yield
    if report.failed:
        text = crash_reports()
        if text:
            report.sections.append(("native crash", text))
    if report.when == "teardown":
        forget_ended()
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    result = yield
    if _Tier.violation is not None:
        raise TierError(_Tier.violation)
    if _Tier.graph and not _Tier.started and not _shares_a_graph(item):
        raise TierError(f"{item.nodeid} is marked graph but started no process and no rclpy context: "
                        "it belongs to the fast tier (remove the marker)")
    return result


def _shares_a_graph(item: pytest.Item) -> bool:
    """Whether the test reads a graph that a wider-scoped fixture launched before it (one decorated with
    ``rosenv.launches_graph``)."""
    fixture_info = getattr(item, "_fixtureinfo", None)
    if fixture_info is None:
        return False
    for name in fixture_info.names_closure:
        defs = fixture_info.name2fixturedefs.get(name, ())
        if any(d.scope in ("module", "session", "package", "class")
               and getattr(d.func, "launches_graph", False) for d in defs):
            return True
    return False


"""Lifecycle under faults: honest exit statuses, every node stopping
within seconds of SIGINT (under CPU load too), a full disk while recording, and the leftovers of killed
runs removed by the next start.

Pure tests (the verdict table, the record-directory check, the bag writer on a full file system, the
leftovers of killed helper processes) need no ROS. The launcher tests start real node processes over
real DDS, each on a free domain (``rosenv.free_domain``) with its own ROS_LOG_DIR. Small full file
systems are real: a 3 MB tmpfs mounted for the test (skipped where mounting is not allowed).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rosenv import (
    REPO_ROOT,
    TestProcess,
    assert_children_gone,
    free_domain,
    interrupt,
    require_ros,
    ros_env,
    run_launch,
    wait_until,
)

from qrsim_ros import launch_plan as lp
from qrsim_ros import launch_setup as ls
from qrsim_ros.cli import leftovers
from qrsim_ros.launch_plan import PlanError
from qrsim_ros.supervision.exits import ExitStatus, classify_exit, normal_end_processes

# --- helpers -------------------------------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "3m", read_only: bool = False) -> Iterator[Path]:
    """A real small file system at ``path`` (tmpfs of ``size``); skips the test if it cannot be mounted."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True,
                         text=True, check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip()}): needs root in a container that "
                    "allows mounts")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def summary(out: str) -> str:
    found = [line for line in out.splitlines() if line.startswith("Summary: ")]
    assert len(found) == 1, out
    return found[0]


def require_launcher() -> None:
    require_ros()
    from qrsim_ros.cli.launch import find_executable

    if find_executable(lp.NodeSpec("vehicle_dynamics", "vehicle_dynamics")) is None:
        pytest.skip("node executables not installed (run ./qrsim exec -- true)")


CLOCK_RUNNING = re.compile(r"\[vehicle_dynamics\] .*started: tick 0 published")

# --- the verdict on a process's end (pure) -------------------------------------------------------------


def test_an_exit_nobody_asked_for_is_a_failure_that_ends_the_run() -> None:
    # the bug: a SIGTERM from outside is caught by the node, which exits 0; that was "stopped cleanly"
    v = classify_exit("wind_field", 0, requested=False)
    assert v.ends_run and v.failure and "wind_field stopped before it was asked to" in v.reason
    v = classify_exit("wind_field", -signal.SIGTERM, requested=False)
    assert v.failure and "killed by SIGTERM" in v.reason
    assert classify_exit("imu", 1, requested=False).reason == "node imu died (exit status 1)"
    # the normal ends: the clock owner (duration), the referee (end of the episode), a user closing RViz
    for name in ("vehicle_dynamics", "referee", "single_process", "rviz2"):
        v = classify_exit(name, 0, requested=False)
        assert v.ends_run and not v.failure, name
    assert classify_exit("rviz2", -signal.SIGSEGV, requested=False).failure
    # status 0 is their normal end only where the plan gives them one (the soak found vehicle_dynamics
    # and the referee SIGTERMed from outside reported "finished", exit 0, in a run without --duration)
    from qrsim_ros.launch_plan import plan
    from qrsim_ros.launch_setup import end_with_episode

    specs = plan("keep_spot", seed=3, autopilot=False)
    for name in ("vehicle_dynamics", "referee"):
        v = classify_exit(name, 0, requested=False, normal_end=normal_end_processes(specs))
        assert v.ends_run and v.failure and "stopped before it was asked to" in v.reason, (name, v)
    timed = end_with_episode(plan("keep_spot", seed=3, autopilot=False, duration_s=5.0))
    assert set(normal_end_processes(timed)) == {"vehicle_dynamics", "referee", "single_process"}
    # asked to stop: the signal's statuses are clean, anything else is not
    for rc in (0, -signal.SIGINT, -signal.SIGTERM, 130, 143):
        assert not classify_exit("imu", rc, requested=True).failure
    v = classify_exit("imu", 4, requested=True)
    assert v.failure and not v.ends_run and v.reason == "imu (exit status 4 while stopping)"


def test_a_recorder_that_cannot_write_ends_the_run_only_when_required() -> None:
    status = ExitStatus.RECORDER_FAILED
    assert status == 3  # docs/LAUNCH.md's table of exit statuses
    go_on = classify_exit("recorder", status, requested=False)
    assert go_on.failure and not go_on.ends_run
    stop = classify_exit("recorder", status, requested=False, record_required=True)
    assert stop.failure and stop.ends_run
    assert classify_exit("recorder", 1, requested=False).ends_run  # a crash is a crash
    # the last file did not fit while stopping: still the recording's failure, not an error in stopping
    late = classify_exit("recorder", status, requested=True)
    assert late.failure and not late.ends_run and "could not write the bag" in late.reason


def test_supervision_arguments_and_the_end_of_the_episode() -> None:
    assert ls.parse_supervision({}) == {"keep_alive": False, "record_required": False}
    assert ls.parse_supervision({"keep_alive": "True", "record_required": "1"}) == {
        "keep_alive": True, "record_required": True}
    with pytest.raises(PlanError, match="keep_alive='maybe' must be true or false"):
        ls.parse_supervision({"keep_alive": "maybe"})
    specs = lp.plan("keep_spot", seed=3)
    ended = {s.name: s for s in ls.end_with_episode(specs)}
    assert ended["referee"].parameters["exit_when_done"] is True
    assert all("exit_when_done" not in s.parameters for s in specs)  # the plan itself is unchanged
    kept = {s.name: s for s in ls.end_with_episode(specs, keep_alive=True)}
    assert "exit_when_done" not in kept["referee"].parameters
    # a missing rviz2 is named with what needs it; qrsim_ros nodes are not third-party
    rviz = lp.plan("keep_spot", seed=3, use_rviz=True)
    missing = ls.missing_third_party(rviz, lambda spec: False)
    assert len(missing) == 1 and missing[0].startswith("rviz2 (package rviz2; use_rviz:=true needs")
    assert ls.missing_third_party(rviz, lambda spec: True) == []


def test_the_launch_description_wires_the_supervision() -> None:
    """launch/launch_ros are not installable here: check the description's source uses the documented
    API the way intended (the behaviour itself needs a ROS 2 distribution)."""
    import ast

    source = (REPO_ROOT / "qrsim_ros" / "launch_description.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for needed in ("RegisterEventHandler", "OnProcessExit", "exits.classify_exit",
                   "exits.normal_end_processes", "launch_setup.parse_supervision",
                   "launch_setup.end_with_episode", "launch_setup.missing_third_party",
                   "launch_setup.check_record_dir", "Shutdown"):
        assert needed in calls, needed
    assert "launch_setup.SUPERVISION_ARGUMENTS" in source


# --- the record directory, checked before anything starts (pure) --------------------------------------


def test_record_dir_check(tmp_path: Path) -> None:
    ls.check_record_dir(tmp_path / "new" / "bag")  # a new directory under a writable one: fine
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(PlanError, match="exists and is not an empty directory"):
        ls.check_record_dir(tmp_path / "full")
    (tmp_path / "file").write_text("x")
    with pytest.raises(PlanError, match="is not a directory"):
        ls.check_record_dir(tmp_path / "file" / "bag")
    with pytest.raises(PlanError, match=r"only [\d.]+ MB free on the file system of .* needed"):
        ls.check_record_dir(tmp_path / "bag", min_free_bytes=10**18)
    with tmpfs(tmp_path / "ro", size="1m", read_only=True) as ro, \
            pytest.raises(PlanError, match=f"directory {ro} is not writable"):
        ls.check_record_dir(ro / "bag")


# --- the bag writer on a full disk (pure, a real 3 MB tmpfs) -------------------------------------------


def test_full_disk_keeps_a_readable_bag_up_to_its_last_complete_file(tmp_path: Path) -> None:
    from rosbags.highlevel import AnyReader

    from qrsim_ros.bag.types import typestore
    from qrsim_ros.bag.writer import BagWriteError, SplitBagWriter

    wall = [0.0]
    with tmpfs(tmp_path / "disk", size="3m") as disk:
        bag = disk / "bag"
        w = SplitBagWriter(bag, typestore(), compression="none", split_period_s=1.0,
                           wall_clock=lambda: wall[0])
        topic = w.add_topic("/blob", "std_msgs/msg/String")
        payload = os.urandom(100_000)  # incompressible; a CDR string: length prefix + bytes + NUL
        cdr = b"\x00\x01\x00\x00" + (len(payload) + 1).to_bytes(4, "little") + payload + b"\x00"
        with pytest.raises(BagWriteError) as err:
            for i in range(1000):
                w.write(topic, i * 1_000_000, cdr)
                wall[0] += 0.25  # a new file every 4 messages
                w.maybe_split()
        text = str(err.value)
        assert "\n" not in text and str(bag) in text, text
        assert re.search(r"\(\d+\.\d\d MB free on its file system\)", text), text
        assert "No space left on device" in text
        kept = int(re.search(r"(\d+) complete file\(s\), (\d+) messages", text).group(2))
        assert kept >= 8  # 3 MB hold several complete 400 kB files
        assert not (bag / ".partial").exists()  # the half-written file is gone (its space freed)
        with AnyReader([bag]) as reader:
            assert sum(1 for _ in reader.messages()) == kept == reader.message_count
        with pytest.raises(Exception, match="closed"):
            w.write(topic, 0, cdr)


# --- leftovers of killed processes (pure; real processes killed with SIGKILL) ---------------------------

_HOLD_TEMPDIR = """
import signal, sys
from qrsim_ros.cli.leftovers import LockedTempDir
d = LockedTempDir(parent=sys.argv[1])
print(d.path, flush=True)
signal.pause()  # until killed
"""


def test_a_killed_owners_scratch_directory_is_removed_a_live_ones_is_not(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_TEMPDIR, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    dead = Path(proc.stdout.readline().strip())
    live = leftovers.LockedTempDir(parent=tmp_path)
    try:
        assert leftovers.remove_stale_tempdirs(parent=tmp_path) == []  # both owners alive
        proc.kill()
        proc.wait()
        assert dead.is_dir()  # SIGKILL: no clean-up of its own
        assert leftovers.remove_stale_tempdirs(parent=tmp_path) == [dead]
        assert not dead.exists() and live.path.is_dir()
    finally:
        live.cleanup()
        interrupt(proc, 1)


def test_a_killed_replays_temporary_is_removed_by_the_next_replay(tmp_path: Path) -> None:
    """``qrsim replay`` writes OUT through a hidden temporary; SIGKILL it mid-write, run it again."""
    rows = 120_000
    inputs = tmp_path / "in.csv"
    inputs.write_text("pitch,roll,throttle,yaw_rate,battery\n" + "0,0,0.59,0,12\n" * rows)
    out = tmp_path / "out.csv"
    cmd = [sys.executable, "-m", "qrsim_ros.cli.replay", "--inputs", str(inputs), "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tmps: list[Path] = []

    def half_written() -> bool:
        tmps[:] = list(tmp_path.glob(".out.csv.*.tmp"))
        return proc.poll() is not None or (bool(tmps) and tmps[0].stat().st_size > 2_000_000)

    wait_until(half_written, 120, "the replay's temporary output to pass 2 MB", poll_s=0.002)
    assert proc.poll() is None and tmps, "the replay ended before its output was half written"
    proc.kill()
    proc.wait()
    assert tmps[0].exists() and not out.exists()
    # a live writer's temporary (locked) must survive the clean-up
    import fcntl

    live = tmp_path / ".out.csv.live.tmp"
    with open(live, "w") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        inputs.write_text("pitch,roll,throttle,yaw_rate,battery\n" + "0,0,0.59,0,12\n" * 10)
        res = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
        assert res.returncode == 0, res.stderr
        assert not tmps[0].exists() and live.exists()
    assert len(out.read_text().splitlines()) == 12  # header + 11 states


_DDS_NODE = """
import signal, rclpy
rclpy.init()
node = rclpy.create_node("shm_probe")
pub = node.create_publisher(__import__("std_msgs.msg").msg.String, "/shm_probe", 10)
print("up", flush=True)
signal.pause()  # until killed
"""


def _owned_segments(pid: int) -> set[str]:
    """The Fast DDS segments a process owns: the ``_el`` lock files it holds open, and their segments
    (it also maps other processes' segments, which it does not own)."""
    names = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.path.basename(os.readlink(f"/proc/{pid}/fd/{fd}"))
                if re.fullmatch(r"fastdds_[0-9a-z]{16}_el", target):
                    names |= {target, target[:-3]}
    return names


@pytest.mark.graph
def test_shared_memory_of_a_killed_dds_process_is_removed_a_live_ones_is_not(tmp_path: Path) -> None:
    require_ros()
    # Fast DDS's default transports (shared memory and UDP), as a user's own DDS process would have them:
    # the project's profile uses loopback UDP only and leaves no segments
    env = {k: v for k, v in ros_env(tmp_path, free_domain()).items() if k != "FASTDDS_DEFAULT_PROFILES_FILE"}
    env.update(FASTDDS_BUILTIN_TRANSPORTS="DEFAULT", ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    procs = [subprocess.Popen([sys.executable, "-c", _DDS_NODE], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "up"
        killed, alive = procs
        # the segments are mapped by the transport's own threads, after "up"
        wait_until(lambda: all(_owned_segments(p.pid) for p in procs), 30, "a Fast DDS segment of each")
        segments = _owned_segments(killed.pid)
        alive_files = _owned_segments(alive.pid)
        killed.kill()
        killed.wait()
        assert all(os.path.exists(f"/dev/shm/{f}") for f in segments)  # SIGKILL leaves them
        removed = leftovers.remove_stale_shm(min_age_s=0.0)
        assert segments <= set(removed)
        assert not any(os.path.exists(f"/dev/shm/{f}") for f in segments)
        assert alive_files and all(os.path.exists(f"/dev/shm/{f}") for f in alive_files)
    finally:
        for p in procs:
            interrupt(p, 10)


# --- the launcher: real graphs ----------------------------------------------------------------------------

SMALL = ["keep_spot", "--no-autopilot", "--seed", "3"]


@pytest.mark.graph
def test_sigterm_to_a_node_from_outside_is_a_failure(tmp_path: Path) -> None:
    require_launcher()

    def terminate_wind_field(run: TestProcess) -> None:
        os.kill(run.child_pids()["wind_field"], signal.SIGTERM)

    rc, out = run_launch(tmp_path, SMALL, on_line=CLOCK_RUNNING, action=terminate_wind_field)
    assert rc == 1, out  # was 0 with "All 6 processes stopped cleanly"
    s = summary(out)
    assert "stopped: node wind_field stopped before it was asked to (exit status 0)" in s, s
    assert "Died: wind_field" in s and "stopped cleanly" not in s
    assert_children_gone(out)


@pytest.mark.graph
def test_a_killed_launchers_scratch_directory_is_removed_by_the_next_launch(tmp_path: Path) -> None:
    require_launcher()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {"TMPDIR": str(scratch)}

    def kill_launcher(run: TestProcess) -> None:
        run.proc.kill()  # its children get SIGTERM (pdeathsig) and stop; its scratch directory stays

    run_launch(tmp_path, SMALL, on_line=r"started referee", action=kill_launcher, extra_env=env)
    left = list(scratch.glob("qrsim_launch_*"))
    assert len(left) == 1 and (left[0] / "referee.yaml").is_file()
    rc, out = run_launch(tmp_path, [*SMALL, "--duration", "0.2", "--real-time-factor", "0"], extra_env=env)
    assert rc == 0, out
    assert re.search(r"removed leftovers of killed runs: 1 scratch directory", out), out
    assert list(scratch.glob("qrsim_launch_*")) == []  # the old one and this run's own


@pytest.mark.graph
def test_an_unwritable_record_directory_is_refused_before_anything_starts(tmp_path: Path) -> None:
    require_launcher()
    with tmpfs(tmp_path / "ro", size="1m", read_only=True) as ro:
        rc, out = run_launch(tmp_path, [*SMALL, "--record", str(ro / "bag")])
    assert rc == 2, out
    assert out.strip() == f"qrsim launch: --record {ro / 'bag'}: directory {ro} is not writable", out


def _full_disk_run(tmp_path: Path, extra: list[str]) -> tuple[int, str, Path]:
    disk = tmp_path / "disk"
    with tmpfs(disk, size="3m"):
        # Another 1.3 MB file shares the disk: the bag of one vehicle fills the rest after about 12 of the
        # 15 simulated seconds (uncompressed, a file every 0.2 s of wall time; the episode lasts 20 s).
        (disk / "other").write_bytes(os.urandom(1_300_000))
        bag = disk / "bag"
        # paced (4x real time), so that the recorder keeps up and the bytes per simulated second are known
        rc, out = run_launch(tmp_path, [*SMALL, "--record", str(bag), "--duration", "15",
                                        "--real-time-factor", "4", "--param", "recorder:compression=none",
                                        "--param", "recorder:split_period_s=0.2", *extra])
        from rosbags.highlevel import AnyReader

        with AnyReader([bag]) as reader:
            read = sum(1 for _ in reader.messages())
            assert read > 0 and read == reader.message_count
        print(f"full disk: {read} messages readable; " + "".join(
            line for line in out.splitlines(keepends=True) if "[recorder]" in line and "ERROR" in line))
        return rc, out, bag


@pytest.mark.graph
@pytest.mark.timeout(300)
def test_a_full_disk_stops_the_recorder_not_the_simulation(tmp_path: Path) -> None:
    require_launcher()
    rc, out, bag = _full_disk_run(tmp_path, [])
    errors = [line for line in out.splitlines() if line.startswith("[recorder]") and "ERROR" in line]
    assert len(errors) == 1, out  # one line, no traceback
    assert str(bag) in errors[0] and re.search(r"[\d.]+ MB free on its file system", errors[0]), errors[0]
    assert "Traceback" not in out
    s = summary(out)
    assert rc == 3, out
    assert "--duration 15 s reached" in s and "Recording failed" in s, s  # the simulation went on


@pytest.mark.graph
@pytest.mark.timeout(300)
def test_a_full_disk_with_record_required_stops_the_run(tmp_path: Path) -> None:
    require_launcher()
    rc, out, _ = _full_disk_run(tmp_path, ["--record-required"])
    assert rc == 1, out
    s = summary(out)
    assert "stopped: the recorder could not write the bag (record required)" in s, s
    assert "--duration 15 s reached" not in s


_BURN = "import time\nwhile True:\n    sum(range(10000))\n"


@pytest.mark.graph
@pytest.mark.timeout(600)
def test_every_node_stops_within_5_s_of_sigint_under_cpu_load(tmp_path: Path) -> None:
    """3 start/stop cycles of a small graph beside two CPU-burning processes (this machine has 2 cores):
    every node exits within 5 s of the launcher's SIGINT (none needs SIGTERM or SIGKILL). (Three, not
    five: the launch tests that assert "stopped cleanly" check the same stop in every flake hunt round,
    which runs the graph tier beside CPU burners.)"""
    require_launcher()
    burners = [subprocess.Popen([sys.executable, "-c", _BURN]) for _ in range(2)]
    worst: list[float] = []
    try:
        for cycle in range(3):
            (tmp_path / f"c{cycle}").mkdir()
            # Ctrl-C once the clock runs
            rc, out = run_launch(tmp_path / f"c{cycle}", ["keep_spot", "--seed", "3"], on_line=CLOCK_RUNNING)
            assert rc == 0, out
            m = re.search(r"(\d+) processes stopped after SIGINT; slowest (\S+) in ([\d.]+) s", out)
            assert m, out
            worst.append(float(m.group(3)))
            assert float(m.group(3)) < 5.0, out
            assert "sending SIGTERM" not in out and "Needed SIGKILL" not in out, out
            assert_children_gone(out)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    print(f"stop times under load (worst node per cycle): {', '.join(f'{w:.2f}' for w in worst)} s")


def run_stuck(program: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run a stuck-node ``program`` that prints ``time.monotonic()`` as its stop begins; returns its result
    and the seconds from that stop to its exit (the interpreter's start and imports, slow under load,
    are not part of a stop)."""
    res = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30,
                         check=False)
    ended = time.monotonic()
    first = res.stdout.split("\n", 1)[0]
    assert first, (res.returncode, res.stdout, res.stderr)
    return res, ended - float(first)


_STUCK = """
import time
from qrsim_ros.ros.node import StopWatchdog
w = StopWatchdog(deadline_s=0.5)
w.step = "destroying the node"
print(time.monotonic(), flush=True)  # the stop begins (the parent times the exit from here)
w.start("SIGINT")
time.sleep(60)  # a clean-up step that never returns
"""


@pytest.mark.graph
def test_a_node_stuck_while_stopping_is_ended_by_its_watchdog() -> None:
    require_ros()
    res, elapsed = run_stuck(_STUCK)
    from qrsim_ros.ros.node import STOP_DEADLINE_S

    assert res.returncode == ExitStatus.STOP_DEADLINE and 0.5 <= elapsed < 5.0, (res.returncode, elapsed)
    first = res.stderr.splitlines()[0]
    assert first == "error: still not stopped 0.5 s after SIGINT (stuck destroying the node): exiting now"
    assert "time.sleep" in res.stderr or "<string>" in res.stderr  # the stack, to find the cause
    assert STOP_DEADLINE_S + 1.0 < 5.0  # a stuck node still ends within the 5 s a launcher allows


_STUCK_IN_TEARDOWN = """
import time
from qrsim_ros.ros.node import StopWatchdog
w = StopWatchdog(deadline_s=0.3, teardown_deadline_s=1.5)
print(time.monotonic(), flush=True)
w.start("SIGINT")
w.teardown(3)  # the node's work is done: it would exit with status 3
w.step = "destroying the node"
time.sleep(60)  # DDS teardown that never returns
"""


@pytest.mark.graph
def test_a_node_stuck_in_dds_teardown_gets_the_longer_deadline_and_keeps_its_status() -> None:
    require_ros()
    from qrsim_ros.ros.node import STOP_DEADLINE_S, TEARDOWN_DEADLINE_S

    res, elapsed = run_stuck(_STUCK_IN_TEARDOWN)
    assert res.returncode == 3 and 1.5 <= elapsed < 5.0, (res.returncode, elapsed, res.stderr)
    assert res.stderr.splitlines()[0] == (
        "warning: still not stopped 1.5 s after SIGINT (stuck destroying the node, DDS teardown; the node's "
        "work is complete): exiting now")
    # longer than the node's own deadline, and ended (with the C-level fallback's second) before ros2
    # launch's SIGTERM (sigterm_timeout = 5 s)
    assert STOP_DEADLINE_S < TEARDOWN_DEADLINE_S and TEARDOWN_DEADLINE_S + 1.0 < 5.0


_LAUNCHER_STUCK_CLOSING_ITS_LISTENER = """
import time
from qrsim_ros.cli import launch

class StuckListener:
    def close(self):
        time.sleep(60)  # a DDS teardown that never returns

launch.LISTENER_CLOSE_DEADLINE_S = 0.5
print(time.monotonic(), flush=True)
launch.close_listener(StuckListener(), 3)
"""


@pytest.mark.graph
def test_a_launcher_stuck_closing_its_listener_ends_with_the_runs_status_and_its_stacks() -> None:
    """The idle flake hunt once saw ``qrsim launch`` print that every node had stopped and then neither
    summarise nor exit: the last step, the status listener's DDS teardown, now has a deadline (after the
    summary), past which the launcher ends with the run's own status, a warning and every stack."""
    require_ros()
    res, elapsed = run_stuck(_LAUNCHER_STUCK_CLOSING_ITS_LISTENER)
    assert res.returncode == 3 and 0.5 <= elapsed < 5.0, (res.returncode, elapsed, res.stderr)
    assert res.stderr.splitlines()[0] == (
        "warning: still not stopped 0.5 s after the run's end (stuck closing the status listener, DDS "
        "teardown; the launcher's work is complete): exiting now"), res.stderr
    assert re.search(r"line \d+ in close\n.*line \d+ in close_listener", res.stderr, re.DOTALL), res.stderr


_BAD_PARAMETER_STUCK_IN_TEARDOWN = """
import time
import rclpy
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.ros.node import run_node

def factory():
    print(time.monotonic(), flush=True)  # the stop begins: the node's construction fails now
    raise ConfigError("parameter 'output_dir'=x: not an empty directory")

rclpy.try_shutdown = lambda: time.sleep(60)  # DDS teardown that never returns
run_node(factory, [])
"""


@pytest.mark.graph
def test_a_node_with_a_bad_parameter_ends_at_once_without_dds_teardown() -> None:
    """A node whose construction fails (a bad parameter) ends with status 1 at once: no DDS teardown is
    attempted (here it would never return), so none can hang it into the stop watchdog's 4 (a flake-hunt
    round under load: the recorder's bad output_dir test got 4) or crash it (a CI run: SIGSEGV)."""
    require_ros()
    from qrsim_ros.ros.node import TEARDOWN_DEADLINE_S

    res, elapsed = run_stuck(_BAD_PARAMETER_STUCK_IN_TEARDOWN)
    assert res.returncode == 1 and elapsed < TEARDOWN_DEADLINE_S, (res.returncode, elapsed, res.stderr)
    assert "error: parameter 'output_dir'=x: not an empty directory" in res.stderr
    assert "still not stopped" not in res.stderr, res.stderr


_STUCK_IN_TEARDOWN_HOLDING_THE_GIL = """
import ctypes, time
from qrsim_ros.ros.node import StopWatchdog
w = StopWatchdog(deadline_s=0.3, teardown_deadline_s=1.5)
print(time.monotonic(), flush=True)
w.start("SIGINT")
w.teardown(3)
w.step = "destroying the node"
ctypes.PyDLL(None).sleep(60)  # a native call that keeps the interpreter lock (PyDLL does not release it)
"""


@pytest.mark.graph
def test_a_node_stuck_in_teardown_holding_the_interpreter_lock_still_keeps_its_status() -> None:
    """The watchdog's Python timer cannot run while a native call holds the interpreter lock (a CI run:
    rclpy's destroy_node in a DDS teardown, over 9 s). faulthandler's fallback could only exit with 1;
    the native exit timer ends the process with the node's own status, after the threads' stacks."""
    require_ros()
    from qrsim_ros.ros.native_exit import NativeExitTimer

    if not NativeExitTimer().available:
        pytest.skip("no POSIX timers (timer_create) in this C library")
    res, elapsed = run_stuck(_STUCK_IN_TEARDOWN_HOLDING_THE_GIL)
    assert res.returncode == 3 and 2.5 <= elapsed < 5.0, (res.returncode, elapsed, res.stderr)
    assert "most recent call first" in res.stderr and "<string>" in res.stderr, res.stderr
    assert "warning: still not stopped" not in res.stderr  # the Python timer never ran


def test_port_segments_left_without_their_locks_are_removed_unless_mapped(tmp_path: Path) -> None:
    """The 10-minute soak found ``fastdds_port<N>`` segments (and their ``sem.*_mutex``) of SIGKILLed
    nodes with no lock file left: the lock-based rule never removed them."""
    import mmap

    old = time.time() - 60.0
    for port in (17001, 17003, 17005):
        for name in (f"fastdds_port{port}", f"sem.fastdds_port{port}_mutex"):
            (tmp_path / name).write_bytes(b"\0" * 4096)
            os.utime(tmp_path / name, (old, old))
    os.utime(tmp_path / "fastdds_port17003", None)  # young: perhaps being created
    with open(tmp_path / "fastdds_port17005", "r+b") as f, mmap.mmap(f.fileno(), 4096):  # a live user
        removed = leftovers.remove_stale_shm(tmp_path, min_age_s=5.0)
        assert sorted(removed) == ["fastdds_port17001", "sem.fastdds_port17001_mutex"]
    assert (tmp_path / "fastdds_port17003").exists() and (tmp_path / "fastdds_port17005").exists()
    assert not (tmp_path / "fastdds_port17001").exists()


_BLOCKED_IN_NATIVE_CODE = """
import ctypes, sys
from rclpy.node import Node
from qrsim_ros.ros.node import run_node

libc = ctypes.CDLL(None)
mutex = ctypes.create_string_buffer(64)  # zeroed: a default (non-recursive) pthread mutex


class Stuck(Node):
    def __init__(self):
        super().__init__("stuck")
        self.create_timer(0.05, self.block)

    def block(self):
        print("blocking", flush=True)
        libc.pthread_mutex_lock(mutex)
        libc.pthread_mutex_lock(mutex)  # deadlock in C: signals do not interrupt it, the GIL is free


sys.exit(run_node(Stuck, []))
"""


@pytest.mark.graph
def test_a_node_blocked_in_native_code_is_still_ended_by_its_watchdog(tmp_path: Path) -> None:
    """A main thread stuck in native code never runs Python's signal handlers. Before the signal-watch
    thread (set_wakeup_fd) such a node could be stopped only by SIGKILL; now SIGTERM ends it within the
    watchdog's deadline, with every thread's stack printed."""
    require_ros()
    from rosenv import free_domain, ros_env

    from qrsim_ros.ros.node import STOP_DEADLINE_S

    env = ros_env(tmp_path, free_domain())
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKED_IN_NATIVE_CODE], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "blocking"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read() if proc.stderr is not None else ""
    assert status == ExitStatus.STOP_DEADLINE and elapsed < STOP_DEADLINE_S + 2.0, (status, elapsed, err)
    assert "still not stopped 3 s after SIGTERM (stuck spinning)" in err, err
    assert "in block" in err  # the stuck callback's frame, to find the cause

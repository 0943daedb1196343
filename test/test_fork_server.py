"""qrsim launch's fork server (qrsim_ros.supervision.fork_server): each child runs its program as
``python PROGRAM ARGS`` would, in a session of its own, with its own environment and output; its exit
status reaches the launcher as subprocess.Popen's would; nothing outlives the server.

Plain Python programs, no ROS: the launcher's use of it is covered by every graph test that launches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qrsim_ros.supervision.fork_server import ForkServer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")

PROGRAM = """
import os, sys, time
print("argv", sys.argv[1:], flush=True)
print("env", os.environ.get("FORK_TEST_VALUE"), os.environ.get("FORK_TEST_SERVER_ONLY"), flush=True)
print("session", os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid(), flush=True)
print("preloaded", "colorsys" in sys.modules, flush=True)
print("on stderr", file=sys.stderr, flush=True)
print("path0", sys.path[0], flush=True)
mode = sys.argv[1]
if mode == "exit":
    sys.exit(int(sys.argv[2]))
if mode == "raise":
    raise RuntimeError("boom in the child")
if mode == "sleep":
    print("sleeping", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def server(tmp_path: Path):
    env = {**os.environ, "FORK_TEST_SERVER_ONLY": "server"}
    fs = ForkServer.start(("colorsys",), env)
    assert fs is not None
    fs.wait_ready(30.0)
    yield fs
    fs.close()


def _program(tmp_path: Path) -> str:
    path = tmp_path / "bin" / "program.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(PROGRAM, encoding="utf-8")
    return str(path)


def _ended(pid: int) -> bool:
    """Gone, or a zombie not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _lines(proc) -> list[str]:
    return proc.stdout.read().decode().splitlines()


def test_a_child_runs_its_program_with_its_arguments_environment_and_output(server, tmp_path: Path) -> None:
    program = _program(tmp_path)
    env = {**os.environ, "FORK_TEST_VALUE": "child"}
    env.pop("FORK_TEST_SERVER_ONLY", None)
    proc = server.spawn([program, "exit", "3"], env)
    lines = _lines(proc)
    assert proc.wait(10.0) == 3
    assert "argv ['exit', '3']" in lines
    assert "env child None" in lines  # the request's environment, not the server's
    assert "session True True" in lines  # a session and process group of its own
    assert "preloaded True" in lines  # what the server imported comes with the fork
    assert "on stderr" in lines  # stderr goes with stdout
    assert f"path0 {Path(program).resolve().parent}" in lines  # as ``python PROGRAM``


def test_exit_statuses_read_as_popen_returncodes(server, tmp_path: Path) -> None:
    program = _program(tmp_path)
    ok = server.spawn([program, "done"], dict(os.environ))
    _lines(ok)
    assert ok.wait(10.0) == 0
    failed = server.spawn([program, "raise"], dict(os.environ))
    out = "\n".join(_lines(failed))
    assert failed.wait(10.0) == 1 and "RuntimeError: boom in the child" in out
    sleeper = server.spawn([program, "sleep"], dict(os.environ))
    assert sleeper.stdout.readline().decode().startswith("argv")
    assert sleeper.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(0.05)
    sleeper.send_signal(signal.SIGTERM)
    assert sleeper.wait(10.0) == -signal.SIGTERM


def test_the_command_line_reads_as_the_programs(server, tmp_path: Path) -> None:
    pytest.importorskip("setproctitle", reason="setproctitle names the child process")
    program = _program(tmp_path)
    proc = server.spawn([program, "sleep", "--ros-args", "-r", "__node:=probe"], dict(os.environ))
    try:
        while "sleeping" not in proc.stdout.readline().decode():
            pass
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
        assert cmdline[:2] == [sys.executable.encode(), program.encode()]
        assert b"__node:=probe" in cmdline
    finally:
        proc.kill()
        proc.wait(10.0)


def test_children_end_with_the_server(tmp_path: Path) -> None:
    fs = ForkServer.start((), dict(os.environ))
    assert fs is not None
    fs.wait_ready(30.0)
    proc = fs.spawn([_program(tmp_path), "sleep"], dict(os.environ))
    while "sleeping" not in proc.stdout.readline().decode():
        pass
    os.kill(fs._proc.pid, signal.SIGKILL)  # the launcher's own close is gentler: this is the worst case
    assert proc.wait(10.0) == -signal.SIGTERM  # reported as the server's reader sees it gone
    deadline = time.monotonic() + 10.0
    while not _ended(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling a process's end: there is no event for another's child
    assert _ended(proc.pid)
    fs.close()


def test_a_bad_request_is_answered_and_the_server_goes_on(server, tmp_path: Path) -> None:
    from qrsim_ros.supervision.fork_server import _send

    with server._lock, server._answered:
        server._answers.clear()
        _send(server._sock, {"nonsense": 1})
        assert server._answered.wait_for(lambda: bool(server._answers), timeout=10.0)
        answer = server._answers.pop(0)
    assert "not a spawn request" in answer["error"]
    proc = server.spawn([_program(tmp_path), "exit", "0"], dict(os.environ))
    _lines(proc)
    assert proc.wait(10.0) == 0


def test_a_server_that_ended_says_so_when_asked_whether_it_is_ready() -> None:
    fs = ForkServer.start((), dict(os.environ))
    assert fs is not None
    os.kill(fs._proc.pid, signal.SIGKILL)  # before or after its imports: either way it has ended
    with pytest.raises(OSError, match="ended"):
        fs.wait_ready(30.0)
    fs.close()

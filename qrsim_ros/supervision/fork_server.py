"""A fork server: node processes that start without importing the Python stack again.

Every node of a graph is a Python process that imports the same stack before it does anything of its
own (rclpy, numpy, numba, pyproj, the scenario and parameter modules: about 0.4 s of CPU each; ten
of them are most of a graph's start on two cores). ``qrsim launch`` starts one fork server first: it
imports that stack once (``--preload``) and then forks one child per node it is asked for. Each child
is still its own process, ROS node and DDS participant (it calls ``rclpy.init`` itself, after the fork:
nothing of rclpy is initialised in the server), in a new session (its own process group), with the
environment, arguments and standard output it was given, and runs the node executable as ``python
EXECUTABLE ARGS`` would (``runpy``, as ``__main__``).

Protocol (a Unix socket pair; one JSON object per message, a request carries its child's stdout as
an ``SCM_RIGHTS`` file descriptor): the server sends ``{"ready": pid}`` once its imports are done;
``{"spawn": [executable, args...], "env": {...}}`` is answered with ``{"pid": pid}`` (or ``{"error":
text}``); whenever a child ends the server sends ``{"exit": pid, "returncode": rc}`` (``rc`` as
``subprocess.Popen.returncode``: negative for a signal). The server ends when the socket closes; its
children get SIGTERM when it dies (``PR_SET_PDEATHSIG``), as it gets SIGTERM when its launcher dies.

A child's command line (``ps``, ``/proc/PID/cmdline``) reads as the program's would, ``python PROGRAM
ARGS`` (setproctitle), though as one string: its arguments are separated by spaces, not NUL bytes.
Linux only (``fork``, ``prctl``); the launcher starts each node as a program where there is no server
or it fails.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from qrsim_ros.supervision import process_group

#: Largest message (a request's environment and arguments) [bytes].
MAX_MESSAGE = 1 << 20
#: Wall seconds the launcher waits for the server's imports before it starts nodes as programs.
READY_TIMEOUT_S = 60.0
_PR_SET_PDEATHSIG = 1


def _send(sock: socket.socket, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode()
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"fork server message of {len(data)} bytes exceeds {MAX_MESSAGE}")
    socket.send_fds(sock, [data], list(fds))


def _receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message and its file descriptors; (None, []) once the peer closed the socket."""
    data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 4)
    if not data:
        return None, list(fds)
    return json.loads(data), list(fds)


# --- the launcher's side --------------------------------------------------------------------------------

class ForkedProcess:
    """A node the fork server started: what the launcher uses of ``subprocess.Popen`` (``pid``,
    ``stdout``, ``returncode``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``). Its exit
    status comes from the server, which is its parent."""

    def __init__(self, pid: int, stdout: Any) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _set_returncode(self, returncode: int) -> None:
        self.returncode = returncode
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The launcher's handle of a fork server (see the module docstring): ``start``, then ``spawn`` per
    node, ``close`` at the end."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self._proc = proc
        self._sock = sock
        self._lock = threading.Lock()  # one request at a time
        self._children: dict[int, ForkedProcess] = {}
        self._early_exits: dict[int, int] = {}  # exits reported before the spawn's answer was read
        self._answers: list[dict[str, Any]] = []
        self._answered = threading.Condition()
        self._ready = threading.Event()
        self.ready_pid: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True, name="fork-server")
        self._reader.start()

    @classmethod
    def start(cls, preload: Sequence[str], env: Mapping[str, str]) -> ForkServer | None:
        """A fork server that imports ``preload`` (module names), run by this Python with ``env``; None
        where there is none (not Linux)."""
        if not sys.platform.startswith("linux"):
            return None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # -P: the current directory stays off sys.path (each child puts its program's there)
            argv = [sys.executable, "-P", "-m", __name__, "--fd", str(theirs.fileno()),
                    *(arg for name in preload for arg in ("--preload", name))]
            proc = process_group.start(argv, die_with_parent=True, pass_fds=(theirs.fileno(),),
                                       env=dict(env))
        finally:
            theirs.close()
        return cls(proc, ours)

    def _read(self) -> None:
        while True:
            try:
                message, fds = _receive(self._sock)
            except (OSError, ValueError):
                message, fds = None, []
            for fd in fds:
                os.close(fd)
            if message is None:
                break
            if "ready" in message:
                self.ready_pid = int(message["ready"])
                self._ready.set()
            elif "exit" in message:
                pid, rc = int(message["exit"]), int(message["returncode"])
                with self._answered:
                    child = self._children.get(pid)
                    if child is None:
                        self._early_exits[pid] = rc
                if child is not None:
                    child._set_returncode(rc)
            else:
                with self._answered:
                    self._answers.append(message)
                    self._answered.notify_all()
        # the server is gone: its children were killed with it (PR_SET_PDEATHSIG)
        self._ready.set()
        with self._answered:
            self._answers.append({"error": "the fork server ended"})
            self._answered.notify_all()
            orphans = [c for c in self._children.values() if c.returncode is None]
        for child in orphans:
            child._set_returncode(-signal.SIGTERM)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once the server has finished its imports; OSError saying why if it ended first or took
        longer than ``timeout_s``."""
        if not self._ready.wait(timeout_s):
            raise OSError(f"not ready after {timeout_s:g} s of imports")
        if self.ready_pid is None or self._proc.poll() is not None:
            raise OSError(f"it ended (exit status {self._proc.poll()}) before it was ready")

    def spawn(self, argv: Sequence[str], env: Mapping[str, str]) -> ForkedProcess:
        """Run ``argv`` (a Python program and its arguments) in a child of the server with ``env``; its
        stdout and stderr are the returned process's ``stdout`` (bytes). OSError if the server cannot."""
        read_end, write_end = os.pipe()
        try:
            with self._lock, self._answered:
                self._answers.clear()
                _send(self._sock, {"spawn": list(argv), "env": dict(env)}, [write_end])
                if not self._answered.wait_for(lambda: bool(self._answers), timeout=READY_TIMEOUT_S):
                    raise OSError("the fork server did not answer")
                answer = self._answers.pop(0)
                if "pid" not in answer:
                    raise OSError(str(answer.get("error", answer)))
                child = ForkedProcess(int(answer["pid"]), os.fdopen(read_end, "rb"))
                self._children[child.pid] = child
                early = self._early_exits.pop(child.pid, None)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(read_end)
            raise
        finally:
            os.close(write_end)
        if early is not None:
            child._set_returncode(early)
        return child

    def close(self, timeout_s: float = 5.0) -> None:
        """End the server (SIGTERM: its children, stopped before, would get SIGTERM too) and reap it."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with contextlib.suppress(OSError):
            self._proc.terminate()
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process_group.kill_group(self._proc)
        self._reader.join(timeout=timeout_s)


# --- the server ---------------------------------------------------------------------------------------

def _set_parent_death_signal(sig: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _run_child(argv: list[str], env: dict[str, str], stdout_fd: int, server_pid: int) -> int:
    """In the forked child: become the program ``argv`` (see the module docstring); its exit status."""
    os.setsid()
    _set_parent_death_signal(signal.SIGTERM)
    # ps and /proc/PID/cmdline: the node's command line (before the environment changes: setproctitle
    # finds the argument area through the original environment's place)
    with contextlib.suppress(ImportError):
        import setproctitle

        setproctitle.setproctitle(shlex.join([sys.executable, *argv]))
    if os.getppid() != server_pid:  # the server died between the fork and the prctl
        return 1
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(stdout_fd, 1)
    os.dup2(stdout_fd, 2)
    os.close(devnull)
    os.close(stdout_fd)
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.realpath(argv[0])))  # as ``python PROGRAM`` has it
    import runpy

    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def _exit_child(status: int) -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status & 0xFF)


def serve(sock: socket.socket) -> int:
    """The server's loop: fork a child per request, report every child's exit, end when ``sock`` closes."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # (the wakeup fd is what counts)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher stops the children, then closes the socket
    _send(sock, {"ready": os.getpid()})
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        _report_exits(sock)
        if sock not in readable:
            continue
        try:
            message, fds = _receive(sock)
        except (OSError, ValueError):
            return 0
        if message is None:
            return 0
        if "spawn" not in message or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            _send(sock, {"error": f"not a spawn request with one file descriptor: {sorted(message)}"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                signal.set_wakeup_fd(-1)
                sock.close()
                os.close(wake_r)
                os.close(wake_w)
                status = _run_child([str(a) for a in message["spawn"]],
                                    {str(k): str(v) for k, v in message["env"].items()}, fds[0], server_pid)
            except BaseException:  # the child must never return into the server's loop
                import traceback

                traceback.print_exc()
            _exit_child(status)
        os.close(fds[0])
        _send(sock, {"pid": pid})


def _report_exits(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        with contextlib.suppress(OSError):
            _send(sock, {"exit": pid, "returncode": os.waitstatus_to_exitcode(status)})


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="fork_server", description="qrsim launch's fork server (internal)")
    ap.add_argument("--fd", type=int, required=True, help="the launcher's socket")
    ap.add_argument("--preload", action="append", default=[], help="a module to import before forking")
    args = ap.parse_args(argv)
    sock = socket.socket(fileno=args.fd)
    for name in args.preload:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a child imports it again and reports it under its own name
            print(f"fork server: preloading {name} failed: {exc}", file=sys.stderr)
    return serve(sock)


if __name__ == "__main__":
    sys.exit(main())

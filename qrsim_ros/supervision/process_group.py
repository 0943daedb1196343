"""Child processes in their own process group: started, stopped by escalating signals, always reaped.

Every launcher of the simulator starts its children with ``start`` (a new session, so a Ctrl-C at the
terminal reaches only the launcher, which then stops them in its order), stops them with ``stop``
(SIGINT, then SIGTERM, then SIGKILL, each after its budget of wall time; before the SIGKILL a SIGUSR1,
on which a node executable prints every thread's stack) and, when it gives up on one, ends whatever is
left of its group with ``kill_group``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

#: The stop escalation: each signal and the wall seconds the processes get to exit after it.
STOP_STEPS: tuple[tuple[signal.Signals, float], ...] = (
    (signal.SIGINT, 10.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))
#: How often a waiting ``stop`` looks at its processes [s] (the ``idle`` callback's budget).
POLL_S = 0.05
#: Before a SIGKILL, ``stop`` sends SIGUSR1 and waits this long [s]: a node executable prints every
#: thread's stack on it (faulthandler), so a process killed for hanging says where it hung.
STACKS_BEFORE_KILL_S = 1.0


def start(argv: Sequence[str], *, die_with_parent: bool = False, **popen: Any) -> subprocess.Popen[Any]:
    """``argv`` in a new session (its own process group), stdin from /dev/null; ``popen``: more
    ``subprocess.Popen`` arguments (stdout, env, cwd, text, ...).

    ``die_with_parent``: the child gets SIGTERM if this process dies, even by SIGKILL, so nothing is
    orphaned (``setpriv --pdeathsig TERM``, util-linux, which sets it and execs the program in place:
    the same pid; where there is no setpriv, as without it). A parent that dies before setpriv has set the
    signal (the first milliseconds of the child) leaves the child running.
    """
    popen.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen([*(_pdeathsig_prefix() if die_with_parent else []), *argv],
                            start_new_session=True, **popen)


def _pdeathsig_prefix() -> list[str]:
    if not sys.platform.startswith("linux"):
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


def stop(procs: Sequence[subprocess.Popen[Any]],
         steps: Sequence[tuple[signal.Signals, float]] = STOP_STEPS, *,
         idle: Callable[[float], None] = time.sleep,
         interrupted: Callable[[], bool] = lambda: False,
         on_escalate: Callable[[signal.Signals, list[subprocess.Popen[Any]]], None] | None = None,
         ) -> dict[int, float]:
    """Stop ``procs``: send each step's signal to those still running and wait up to its budget for
    them to exit, until none runs or the steps are done.

    ``idle(POLL_S)`` is called while waiting (a launcher spins its listener there); ``interrupted()``
    true ends a step's wait early (the launcher got another Ctrl-C: escalate at once);
    ``on_escalate(sig, running)`` is told of every step after the first. Returns pid -> wall seconds
    from the first signal to its exit, for the processes that were running and exited.
    """
    running = [p for p in procs if p.poll() is None]
    exited_s: dict[int, float] = {}
    t0 = time.monotonic()
    for n, (sig, budget_s) in enumerate(steps):
        if not running:
            break
        if n and on_escalate is not None:
            on_escalate(sig, running)
        if sig == signal.SIGKILL:
            running = _ask_for_stacks(running, idle, exited_s, t0)
        for p in running:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(sig)
        deadline = time.monotonic() + budget_s
        while running and time.monotonic() < deadline and not interrupted():
            idle(POLL_S)
            now = time.monotonic()
            for p in running:
                if p.poll() is not None:
                    exited_s[p.pid] = now - t0
            running = [p for p in running if p.pid not in exited_s]
    return exited_s


def _ask_for_stacks(running: list[subprocess.Popen[Any]], idle: Callable[[float], None],
                    exited_s: dict[int, float], t0: float) -> list[subprocess.Popen[Any]]:
    """SIGUSR1 to ``running`` and ``STACKS_BEFORE_KILL_S`` for their stack dumps; those still running."""
    for p in running:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + STACKS_BEFORE_KILL_S
    while time.monotonic() < deadline:
        idle(POLL_S)
    now = time.monotonic()
    for p in running:
        if p.poll() is not None:
            exited_s[p.pid] = now - t0
    return [p for p in running if p.pid not in exited_s]


def kill_group(proc: subprocess.Popen[Any], reap_s: float = 30.0) -> None:
    """SIGKILL what is left of ``proc``'s process group (``proc`` and the descendants that stayed in
    it) and reap ``proc``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=reap_s)

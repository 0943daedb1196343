"""The stop escalation of child processes (qrsim_ros.supervision.process_group): a child that ignores
SIGINT and SIGTERM is asked for its stacks (SIGUSR1) before the SIGKILL, and is reaped; a child started
``die_with_parent`` ends when its parent is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from rosenv import process_ended, wait_until

from qrsim_ros.supervision import process_group

#: A hung child: ignores SIGINT and SIGTERM, prints its stacks on SIGUSR1 (as the node executables), and
#: says when it is ready.
_HUNG = """
import faulthandler, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
faulthandler.register(signal.SIGUSR1, all_threads=True)
print("ready", flush=True)
def stuck_here():
    time.sleep(600)
stuck_here()
"""


def test_a_hung_child_prints_its_stacks_before_it_is_killed() -> None:
    proc = process_group.start([sys.executable, "-c", _HUNG], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        escalated: list[signal.Signals] = []
        steps = ((signal.SIGINT, 0.2), (signal.SIGTERM, 0.2), (signal.SIGKILL, 5.0))
        exited = process_group.stop([proc], steps, on_escalate=lambda sig, _running: escalated.append(sig))
        assert escalated == [signal.SIGTERM, signal.SIGKILL]
        assert proc.pid in exited and proc.returncode == -signal.SIGKILL
        _, err = proc.communicate(timeout=10)
        assert "most recent call first" in err and "stuck_here" in err, err
    finally:
        process_group.kill_group(proc)


#: A parent that starts a sleeping child with die_with_parent, prints the child's pid and waits.
_PARENT = """
import subprocess, sys, time
from qrsim_ros.supervision import process_group
child = process_group.start([sys.executable, "-c", "import time; time.sleep(600)"], die_with_parent=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def test_a_child_started_die_with_parent_ends_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        # setpriv sets the parent-death signal, then runs the program in its place: a parent killed before
        # that (a loaded machine, CI) leaves nothing to signal the child, so wait until the program runs
        wait_until(lambda: os.path.basename(os.readlink(f"/proc/{child}/exe")) != "setpriv", 10,
                   "setpriv running the child program")
        assert not process_ended(child)
        parent.kill()
        parent.wait(timeout=10)
        wait_until(lambda: process_ended(child), 10, f"child {child} to end after its parent's SIGKILL")
    finally:
        if parent.poll() is None:
            parent.kill()

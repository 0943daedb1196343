"""The stop escalation of child processes (qrsim_ros.supervision.process_group): a child that ignores
SIGINT and SIGTERM is asked for its stacks (SIGUSR1) before the SIGKILL, and is reaped."""

from __future__ import annotations

import signal
import subprocess
import sys

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

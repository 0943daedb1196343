"""The test harness's reading of a native crash: a program started by a test that dies of SIGSEGV in a
thread without Python code leaves a core file in the test's directory, and the failure report gets gdb's
stack of the crashing thread (``rosenv.native_backtrace``), which faulthandler's Python stacks lack."""

from __future__ import annotations

import resource
import shutil
import signal
import sys
from pathlib import Path

import pytest
from rosenv import TestProcess, crash_reports, forget_ended

NATIVE_THREAD_CRASH = """
import ctypes, threading
t = threading.Thread(target=ctypes.string_at, args=(0,), name="reads-null")
t.start()
t.join()
"""


@pytest.mark.skipif(shutil.which("gdb") is None or shutil.which("prlimit") is None
                    or resource.getrlimit(resource.RLIMIT_CORE)[1] == 0,
                    reason="needs gdb, prlimit and a non-zero hard core-file limit")
def test_a_crash_in_a_thread_is_reported_with_its_native_stack(tmp_path: Path) -> None:
    with TestProcess([sys.executable, "-c", NATIVE_THREAD_CRASH], {}, tmp_path) as proc:
        rc = proc.wait(60)
    assert rc == -signal.SIGSEGV, proc.output
    text = crash_reports()
    assert "killed by SIGSEGV" in text, text
    assert "string_at" in text, text  # the crashing thread's frame, named by gdb from the core
    current = next(ln for ln in text.splitlines() if ln.startswith("* "))  # gdb's crashing thread
    assert f"(LWP {proc.proc.pid})" not in current, text  # the thread, not the main one
    assert "start_thread" in text, text  # its stack from the thread's start
    assert proc.native_backtraces() == "", "a crash is reported once"
    forget_ended()
    assert crash_reports() == ""


def test_a_crash_named_by_the_launcher_without_a_core_file_says_so(tmp_path: Path) -> None:
    line = "Summary: stopped: node imu died (killed by SIGSEGV)."
    with TestProcess([sys.executable, "-c", f"print({line!r})"], {}, tmp_path) as proc:
        assert proc.wait(60) == 0
    text = proc.native_backtraces()
    assert text.startswith("killed by SIGSEGV: no core file in " + str(tmp_path)), text

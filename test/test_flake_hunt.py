"""scripts/flake_hunt.py's report reading: a JUnit XML round becomes per-test counts, worst durations and
the failure's message and report tail (no test run here: the script's rounds are the graph tier)."""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

from rosenv import REPO_ROOT, process_ended, wait_until


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("flake_hunt", REPO_ROOT / "scripts" / "flake_hunt.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_round_report_gives_counts_worst_times_and_the_failure_tail(tmp_path: Path) -> None:
    hunt = _load()
    long_output = "\n".join(f"line {i}" for i in range(200))
    report = tmp_path / "round.xml"
    report.write_text(f"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="test.test_a" name="test_ok" time="2.5"/>
  <testcase classname="test.test_a" name="test_bad" time="7.0">
    <failure message="AssertionError: rates differ&#10;second line">{long_output}</failure></testcase>
  <testcase classname="test.test_b" name="test_skip" time="0.1"><skipped message="no ROS"/></testcase>
</testsuite></testsuites>""")
    records = defaultdict(hunt.Record)
    hunt.read_report(report, records, 1)
    hunt.read_report(report, records, 2)
    ok, bad, skip = records["test.test_a::test_ok"], records["test.test_a::test_bad"], records[
        "test.test_b::test_skip"]
    assert (ok.passed, ok.failed, ok.worst_s) == (2, 0, 2.5)
    assert (bad.passed, bad.failed, bad.worst_s) == (0, 2, 7.0)
    assert (skip.skipped, skip.passed) == (2, 0)
    assert bad.messages == ["round 1: AssertionError: rates differ", "round 2: AssertionError: rates differ"]
    tail = bad.details[0].splitlines()
    assert tail[0] == "round 1:" and tail[-1] == "line 199" and len(tail) == hunt.DETAIL_LINES + 1


def test_a_hunt_stopped_by_sigterm_prints_its_complete_rounds(tmp_path: Path, monkeypatch, capsys) -> None:
    """SIGTERM during round 2: round 1's report is kept and printed, the round in progress does not
    count, and the exit status says the hunt did not finish."""
    import os
    import signal

    hunt = _load()

    def fake_round(tier: str, report: Path, extra: list[str]) -> tuple[int, float]:
        if report.name == "round2.xml":
            os.kill(os.getpid(), signal.SIGTERM)  # the hunt stopped by hand
        report.write_text('<testsuites><testsuite><testcase classname="test.test_a" name="test_ok" '
                          'time="1.5"/></testsuite></testsuites>')
        return 0, 1.0

    monkeypatch.setattr(hunt, "run_round", fake_round)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        rc = hunt.main(["-R", "3", "--reports", str(tmp_path / "reports")])
    finally:
        signal.signal(signal.SIGTERM, previous)
    out = capsys.readouterr().out
    assert rc == 1
    assert "round 1/3: exit 0" in out and "stopped by hand after 1 complete round(s)" in out
    assert "round 2/3" not in out and "1 tests, 0 failures in 1 rounds" in out
    assert (tmp_path / "reports" / "round1.xml").is_file()


#: A round that starts a program which ignores SIGINT (as a hung node might), writes its pid and waits.
_FAKE_QRSIM = """#!{python}
import signal, subprocess, sys
code = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", code])
open("grandchild.pid", "w").write(str(child.pid))
child.wait()
"""


def test_a_stopped_round_leaves_no_process_behind(tmp_path: Path, monkeypatch) -> None:
    """Stopping the hunt during a round stops the round's whole process group: SIGINT, then SIGKILL to
    what ignored it (a grandchild of the round, as pytest's workers and their nodes are)."""
    import os
    import signal
    import sys
    import threading
    import time

    hunt = _load()
    fake = tmp_path / "qrsim"
    fake.write_text(_FAKE_QRSIM.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setattr(hunt, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(hunt, "ROUND_STOP_S", 1.0)
    pid_file = tmp_path / "grandchild.pid"

    def stop_when_started() -> None:
        deadline = time.monotonic() + 30
        while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.01)  # a file another process writes: polled
        os.kill(os.getpid(), signal.SIGTERM)  # the hunt stopped by hand

    threading.Thread(target=stop_when_started, daemon=True).start()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        rc = hunt.main(["-R", "1", "--reports", str(tmp_path / "reports")])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert rc == 1
    grandchild = int(pid_file.read_text())
    wait_until(lambda: process_ended(grandchild), 10, f"the round's grandchild {grandchild} to end")

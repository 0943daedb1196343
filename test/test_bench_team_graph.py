"""Smoke test of scripts/bench_team_graph.py's pure parts: the process tree from /proc, the clean-up of
every process it saw, and the tables (no timings are asserted; the benchmark itself is a script)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import ModuleType

import pytest
from rosenv import REPO_ROOT, wait_until


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    path = REPO_ROOT / "scripts" / "bench_team_graph.py"
    spec = importlib.util.spec_from_file_location("bench_team_graph_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_team_graph_script"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def alive(bench: ModuleType, pid: int, start_ticks: int) -> bool:
    """``pid`` is still the process that started at ``start_ticks`` and not a zombie (awaiting its reaper)."""
    st = bench.read_stat(pid)
    if st is None or st[2] != start_ticks:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_stop_ends_the_launcher_and_every_process_seen(bench: ModuleType) -> None:
    # a "launcher" that ignores SIGINT and has a child of its own (as a node would be)
    code = ("import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()']); signal.pause()")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        seen: dict[int, object] = {}

        def both_seen() -> bool:
            for pid, (_cpu, start) in bench.descendants(proc.pid).items():
                seen[pid] = bench.Proc(str(pid), start)
            return len(seen) >= 2

        wait_until(both_seen, 20, "the launcher and its child in /proc")
        assert proc.pid in seen and len(seen) == 2
        bench.stop(proc, seen, timeout_s=0.5)
        assert proc.poll() is not None
        wait_until(lambda: not [pid for pid, p in seen.items() if alive(bench, pid, p.start_ticks)], 10,
                   "every process seen to end", detail=lambda: str(seen))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_tables(bench: ModuleType) -> None:
    lock = bench.RunResult(5, "lockstep", rtf=0.9, sim_s=5.0, wall_s=40.0, window_s=5.5)
    lock.procs[1] = bench.Proc("vehicle_dynamics", 1, cpu_s=3.0, cpu_at_tick0_s=1.0, cpu_at_end_s=2.5,
                               peak_rss_mb=260.0, peak_pss_mb=150.0)
    lock.procs[2] = bench.Proc("launcher", 2, cpu_s=4.0, cpu_at_tick0_s=1.0, peak_rss_mb=320.0,
                               peak_pss_mb=300.0)
    free = bench.RunResult(5, "free", rtf=3.0, sim_s=5.0, wall_s=3.0, window_s=0.3,
                           commands="failsafe onsets 5")
    bag = bench.RunResult(5, "lockstep + bag", rtf=0.8, sim_s=5.0, messages=10000, window_s=6.0)
    real = bench.RunResult(5, "realtime", rtf=1.0, sim_s=5.0, wall_s=5.0, commands="set points rejected 3")
    text = bench.node_table(lock)
    assert "| vehicle_dynamics | 1.50 |" in text and "| launcher | 3.00 |" in text
    assert "too short, no CPU figures" in bench.node_table(free)
    table = bench.summary_table({5: {"free": free, "lockstep": lock, "bag": bag, "realtime": real}})
    row = table.splitlines()[-1]
    assert row.startswith("| 5 | 3.00 (autopilot behind) | 0.90 | 1.00 (set points rejected 3) | n/a "
                          "| 0.90 |")
    assert "| 2,000 | 1,600 |" in row and "vehicle_dynamics (100 %)" in row  # the launcher is no bottleneck

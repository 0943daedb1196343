"""Tests of the Dask engine of ``qrsim batch`` (qrsim_ros/batch/engine_dask.py): the same results as in
process for every engine and worker count, a real ``dask scheduler`` and two ``dask worker`` processes
on loopback (free ports), a worker killed mid-batch, no worker process left after a batch or Ctrl-C, and
unusable --scheduler addresses."""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from test_cli_run_batch import failing_policy_file, qrsim  # the CLI tests' helpers

from qrsim_ros.batch import engine_dask, jobs
from qrsim_ros.core.config.scenario import load_scenario

distributed = pytest.importorskip("distributed",
                                  reason="Dask distributed is not installed (env/requirements.txt)")

#: keep_spot episodes long enough that a worker is busy when it is killed (about 0.1-0.5 s each here)
LONG_STEPS = 1500
START_TIMEOUT_S = 60.0


REPO_ROOT = Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    """This environment with this checkout's qrsim_ros first on the path: what a worker needs."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def dask_command() -> str:
    """The ``dask`` command of this interpreter's environment (skip if distributed has none)."""
    exe = Path(sys.executable).parent / "dask"
    if not exe.is_file():
        found = shutil.which("dask")
        if found is None:
            pytest.skip("the dask command is not installed (env/requirements.txt: distributed)")
        return found
    return str(exe)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LineWatcher:
    """Drains a process's pipe in a thread (so it never blocks) and lets a test await a line."""

    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self._thread.start()

    def _drain(self, stream) -> None:  # type: ignore[no-untyped-def]
        for raw in iter(stream.readline, b""):
            with self._cond:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._cond.notify_all()
        stream.close()

    def wait_for(self, pattern: str, timeout_s: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        regex = re.compile(pattern)
        with self._cond:
            while True:
                for line in self.lines:
                    if (m := regex.search(line)) is not None:
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or (not self._thread.is_alive() and not self._cond.wait(0)):
                    raise AssertionError(f"no line matching {pattern!r}; got: {self.lines[-20:]}")
                self._cond.wait(left)


@dataclass
class Cluster:
    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A ``dask scheduler`` on a free loopback port and two ``dask worker`` processes (no nanny: killing
    one kills the worker), all started here and stopped afterwards."""
    exe = dask_command()
    scheduler = subprocess.Popen([exe, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path,
                                 env=child_env())
    cluster = Cluster("", scheduler)
    try:
        watcher = LineWatcher(scheduler.stderr)
        cluster.address = watcher.wait_for(r"Scheduler at:\s+(tcp://127\.0\.0\.1:\d+)",
                                           START_TIMEOUT_S).group(1)
        for name in ("wA", "wB"):
            log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
            cluster.workers.append(subprocess.Popen(
                [exe, "worker", cluster.address, "--name", name, "--nthreads", "1", "--no-nanny",
                 "--no-dashboard", "--host", "127.0.0.1", "--local-directory", str(tmp_path)],
                stdout=log, stderr=log, cwd=tmp_path, env=child_env()))
            log.close()
        with distributed.Client(cluster.address, timeout=START_TIMEOUT_S) as client:
            client.wait_for_workers(2, timeout=START_TIMEOUT_S)
        yield cluster
    finally:
        for proc in [*cluster.workers, scheduler]:
            _stop(proc)


def still_running(pids: set[int], timeout_s: float = 30.0) -> list[int]:
    """The processes of ``pids`` that have not exited within ``timeout_s`` (a zombie waiting to be reaped
    has exited): each one's exit awaited through a pidfd, which becomes readable when it ends."""
    deadline = time.monotonic() + timeout_s
    alive = []
    for pid in sorted(pids):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:  # already gone and reaped
            continue
        try:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                alive.append(pid)
        finally:
            os.close(fd)
    return alive


def test_results_are_the_same_for_every_engine_and_worker_count(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    runs: dict[str, Path] = {}
    for key, args, engine in (("in_process", ["--workers", "1"], "1 worker(s) (in process)"),
                              ("dask_2", ["--workers", "2"], "2 worker(s) (dask LocalCluster)"),
                              ("mp_2", ["--workers", "2", "--engine", "multiprocessing"],
                               "2 worker(s) (multiprocessing pool)")):
        runs[key] = tmp_path / key
        rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "5", "--steps", "30", "--seed", "3",
                             "--report", str(runs[key]), "--no-progress", *args)
        assert rc == 0, err
        assert f"5 episodes (seeds 3..7) on {engine} in " in out
    for name in ("results.csv", "summary.json"):
        data = {k: (d / name).read_bytes() for k, d in runs.items()}
        assert data["in_process"] == data["dask_2"] == data["mp_2"], name
    assert len((runs["dask_2"] / "results.csv").read_text().splitlines()) == 6


def _config_values(keys: list[str]) -> dict[str, object]:
    """Run on a worker: its Dask configuration's values of ``keys``."""
    import dask

    return {key: dask.config.get(key) for key in keys}


def test_dask_local_cluster_leaves_no_worker_process(capsys: pytest.CaptureFixture[str]) -> None:
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    seen: set[int] = set()
    with engine_dask.local_client(2) as client:
        # the worker processes (multiprocessing's resource tracker, if this started it, lives as long
        # as this process by design: it is no worker)
        seen = {p.pid for p in me.children(recursive=True)
                if p.pid not in before and "resource_tracker" not in " ".join(p.cmdline())}
        assert engine_dask.worker_count(client) == 2
        # the workers run with the quiet settings (no profiler taking the GIL every 10 ms, ...)
        settings = client.run(_config_values, list(engine_dask.QUIET_WORKERS))
        assert list(settings.values()) == [engine_dask.QUIET_WORKERS] * 2, settings
        sc = load_scenario("keep_spot", {"task": {"duration_steps": 20}})
        records = engine_dask.run_dask(client, jobs.make_jobs(sc, "auto", [7, 8, 9]))
    assert [r["seed"] for r in records] == [7, 8, 9]
    assert len(seen) == 2  # the two worker processes
    assert still_running(seen) == []


def test_an_external_cluster_gives_the_local_results(dask_cluster: Cluster, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    reports = {"local": tmp_path / "local", "cluster": tmp_path / "cluster"}
    rc, _, err = qrsim(capsys, "batch", "keep_spot", "--runs", "6", "--steps", "40", "--seed", "11",
                       "--workers", "1", "--report", str(reports["local"]), "--no-progress")
    assert rc == 0, err
    rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "6", "--steps", "40", "--seed", "11",
                         "--scheduler", dask_cluster.address, "--report", str(reports["cluster"]),
                         "--no-progress")
    assert rc == 0, err
    assert f"6 episodes (seeds 11..16) on 2 worker(s) (dask scheduler {dask_cluster.address})" in out
    for name in ("results.csv", "summary.json"):
        assert (reports["local"] / name).read_bytes() == (reports["cluster"] / name).read_bytes()


@pytest.mark.timeout(300)  # two batches and a cluster
def test_a_worker_killed_mid_batch_loses_no_episode(dask_cluster: Cluster, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """As a user runs it: ``qrsim batch --scheduler`` in its own process against the external cluster, one
    ``dask worker`` killed (SIGKILL) when the first episode is back; results.csv is byte-identical to the
    in-process run of the same seeds."""
    # 8 episodes of 600 steps (about 0.6 s of CPU each): 7 are in flight or queued when the first is back
    batch = ["batch", "keep_spot", "--runs", "8", "--steps", "600", "--seed", "21"]
    rc, _, err = qrsim(capsys, *batch, "--workers", "1", "--out", str(tmp_path / "local.csv"),
                       "--no-progress")
    assert rc == 0, err
    victim = dask_cluster.workers[0]
    proc = subprocess.Popen([sys.executable, "-m", "qrsim_ros.cli.batch", *batch[1:], "--scheduler",
                             dask_cluster.address, "--out", str(tmp_path / "cluster.csv")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=child_env())
    try:
        err_lines, out_lines = LineWatcher(proc.stderr), LineWatcher(proc.stdout)
        err_lines.wait_for(r"^qrsim batch: 1/8 ", 120.0)  # the batch is under way on both workers
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        rc = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert victim.returncode == -signal.SIGKILL
    assert rc == 0, err_lines.lines
    out_lines.wait_for(rf"^keep_spot, policy auto: 8 episodes .* \(dask scheduler {dask_cluster.address}\)",
                       5.0)
    with distributed.Client(dask_cluster.address, timeout=START_TIMEOUT_S) as client:
        assert engine_dask.worker_count(client) == 1  # the scheduler lost wA; wB ran the rest
    assert (tmp_path / "cluster.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()


def default_sigint() -> None:
    """In the child before exec: SIGINT handled as on a terminal even if this test runs where it is
    ignored (a background job of a non-interactive shell): Python leaves an inherited ignored SIGINT
    ignored, and then Ctrl-C would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("interrupt", [False, True])
def test_the_command_stops_every_process_it_started(tmp_path: Path, interrupt: bool) -> None:
    # qrsim batch in its own session (as a terminal's foreground job); Ctrl-C is SIGINT to the group
    runs = "12"
    proc = subprocess.Popen([sys.executable, "-m", "qrsim_ros.cli.batch", "keep_spot", "--runs", runs,
                             "--workers", "2", "--steps", str(LONG_STEPS), "--seed", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            env=child_env(), start_new_session=True, preexec_fn=default_sigint)
    try:
        err = LineWatcher(proc.stderr)
        out = LineWatcher(proc.stdout)
        err.wait_for(rf"^qrsim batch: \d+/{runs} ", 120.0)  # episodes are coming back from the workers
        started = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)}
        assert len(started) >= 2
        if interrupt:
            os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if interrupt:
        assert rc == 130, (out.lines, err.lines)
        err.wait_for(r"^qrsim batch: interrupted; the workers are stopped", 5.0)
        assert not any(line.startswith("results:") for line in out.lines)
    else:
        assert rc == 0, err.lines
        out.wait_for(rf"^keep_spot, policy auto: {runs} episodes .* \(dask LocalCluster\)", 5.0)
    assert still_running(started) == []


@pytest.mark.parametrize(("address", "message"), [
    ("http://127.0.0.1:8786", "the scheme must be one of tcp://, tls://, got http://"),
    ("127.0.0.1:8786", "expected tcp://HOST:PORT"),
    ("tcp://127.0.0.1", "with a host and a port 1..65535"),
    ("tcp://127.0.0.1:99999", "not a scheduler address"),
    ("tcp://:8786", "with a host and a port"),
])
def test_a_malformed_scheduler_address_exits_2(capsys: pytest.CaptureFixture[str], address: str,
                                               message: str) -> None:
    rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "2", "--scheduler", address)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and message in err
    assert err.startswith(f"qrsim batch: --scheduler {address!r}: ")


def test_an_unreachable_scheduler_exits_2_within_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    t0 = time.monotonic()
    rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "2", "--steps", "3", "--scheduler", address,
                         "--connect-timeout", "2", "--no-progress")
    elapsed = time.monotonic() - t0
    assert rc == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"qrsim batch: --scheduler {address}: no Dask scheduler answered within 2 s")
    assert elapsed < 20.0


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "multiprocessing"], "--scheduler needs --engine dask"),
    (["--workers", "2"], "--workers is for local engines"),
    (["--connect-timeout", "0"], "--connect-timeout must be > 0"),
])
def test_scheduler_argument_conflicts_exit_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                             message: str) -> None:
    rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "2", "--scheduler", "tcp://127.0.0.1:1",
                         *args)
    assert rc == 2 and out == "" and err.count("\n") == 1 and message in err


def test_a_scheduler_without_workers_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    exe = dask_command()
    scheduler = subprocess.Popen([exe, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path,
                                 env=child_env())
    try:
        watcher = LineWatcher(scheduler.stderr)
        address = watcher.wait_for(r"Scheduler at:\s+(tcp://\S+)", START_TIMEOUT_S).group(1)
        rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "2", "--scheduler", address,
                             "--connect-timeout", "1", "--no-progress")
    finally:
        _stop(scheduler)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert f"--scheduler {address}: the scheduler has no worker" in err and f"dask worker {address}" in err


def test_a_policy_failing_on_a_worker_exits_1_with_one_line(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    # the policy is resolved on the worker; its error comes back through Dask as the same PolicyError
    rc, out, err = qrsim(capsys, "batch", "search_rescue_2a", "--runs", "2", "--workers", "2", "--steps", "5",
                         "--policy", f"{failing_policy_file(tmp_path)}:make", "--no-progress")
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("qrsim batch: ")
    assert "failed at step 3: KeyError: 'boom'" in err


def test_without_dask_installed_the_dask_engine_exits_2(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "distributed" else real(name, *a))
    rc, out, err = qrsim(capsys, "batch", "keep_spot", "--runs", "2", "--workers", "2")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "--engine dask needs Dask distributed: pip install 'dask[distributed]'" in err
    rc, _, err = qrsim(capsys, "batch", "keep_spot", "--runs", "2", "--workers", "1", "--steps", "2",
                       "--no-progress")
    assert rc == 0, err  # in process needs no Dask

"""The Dask distributed batch engine: a LocalCluster of worker processes on this machine (loopback
only, no dashboard), or an existing scheduler (``dask scheduler`` / ``dask worker`` on other machines).

Each episode is one task carrying its whole job (the validated scenario included, as the multiprocessing
pool's jobs do), so a worker needs nothing but an importable ``qrsim_ros`` of the same version. A worker
that dies mid-batch loses nothing: the scheduler runs its tasks again elsewhere, and the same job gives
the same record. Results are collected by episode index as they complete (``as_completed``).
"""

from __future__ import annotations

import logging
import signal
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from qrsim_ros.batch.jobs import Collector, EpisodeJob, OnDone, Record, run_job

if TYPE_CHECKING:  # distributed itself is imported when a client is made (it takes ~1 s)
    from distributed import Client

#: How long to wait for an existing scheduler to answer and to have a worker [s].
DEFAULT_CONNECT_TIMEOUT_S = 10.0
#: Dask settings of the LocalCluster. An episode is CPU-bound Python in the worker's one task thread, and
#: every periodic job of the worker's event loop takes the GIL from it: the statistical profiler (a stack
#: sample every 10 ms), the event-loop watchdog's tick (20 ms), the memory monitor (0.1 s) and the
#: system monitor (0.5 s). Here they run rarely or not at all, and work stealing (the scheduler moving
#: queued tasks between workers every 0.1 s) is off: the tasks are alike and the queue is shared out as
#: workers free up. The same keys work for ``dask worker`` on a cluster as ``DASK_*`` variables
#: (docs/BATCH.md).
QUIET_WORKERS: dict[str, object] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.scheduler.work-stealing": False,
}
SCHEMES = ("tcp", "tls")


def check_scheduler_address(address: str) -> str:
    """``address`` if it is ``tcp://HOST:PORT`` (or ``tls://``); ValueError saying what is wrong."""
    what = f"--scheduler {address!r}"
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{what}: not a scheduler address ({exc}); expected tcp://HOST:PORT") from None
    if parts.scheme not in SCHEMES:
        raise ValueError(f"{what}: the scheme must be one of {', '.join(s + '://' for s in SCHEMES)}, got "
                         f"{(parts.scheme + '://') if parts.scheme else 'none'}; expected tcp://HOST:PORT")
    if not parts.hostname or port is None or port == 0 or parts.path not in ("", "/") or parts.query:
        raise ValueError(f"{what}: expected tcp://HOST:PORT with a host and a port 1..65535")
    return address


def _import_probe() -> str:
    """Run on every worker of an existing cluster: qrsim_ros is importable there (this function's module
    is, or the worker cannot even unpickle it); the version it has."""
    from importlib.metadata import PackageNotFoundError, version

    import qrsim_ros.batch.jobs  # noqa: F401  (what every task unpickles)
    try:
        return version("qrsim_ros")
    except PackageNotFoundError:  # a source checkout on the path
        return "source"


def _check_workers(client: Client, address: str, timeout_s: float) -> int:
    """Wait (at most ``timeout_s``) for a worker; check every worker can import qrsim_ros; their count."""
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except TimeoutError:
        raise ConnectionError(f"--scheduler {address}: the scheduler has no worker (none joined within "
                              f"{timeout_s:g} s; start them with 'dask worker {address}')") from None
    try:
        client.run(_import_probe)
    except Exception as exc:  # a worker without qrsim_ros cannot unpickle the probe
        raise ConnectionError(f"--scheduler {address}: a worker cannot import qrsim_ros "
                              f"({type(exc).__name__}: {exc}); every worker needs the same qrsim_ros "
                              "install as this machine") from None
    return len(client.scheduler_info()["workers"])


@contextmanager
def _sigint_ignored_by_children() -> Iterator[None]:
    """While the worker processes start, ignore SIGINT here: they inherit that (Python leaves an ignored
    SIGINT ignored), so a terminal's Ctrl-C, sent to the whole process group, reaches only this process,
    which then closes the cluster in order (no tracebacks from every worker). Only from the main thread
    (the only one that may set signal handlers); elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def local_client(workers: int) -> Iterator[Client]:
    """A LocalCluster of ``workers`` single-threaded worker processes on 127.0.0.1 (no dashboard),
    configured by ``QUIET_WORKERS``, and a client of it; both closed on the way out, Ctrl-C included
    (no worker process outlives it)."""
    import dask
    from distributed import Client, LocalCluster

    # the nannies hand this configuration to the worker processes they start (distributed is imported
    # first: defaults it loads inside a config.set block would be dropped when the block ends)
    with dask.config.set(QUIET_WORKERS):
        with _sigint_ignored_by_children():
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None, silence_logs=logging.ERROR)
        with cluster, Client(cluster) as client:
            yield client


@contextmanager
def remote_client(address: str, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> Iterator[Client]:
    """A client of the existing scheduler at ``address`` with at least one worker that imports
    qrsim_ros. ValueError for a malformed address, ConnectionError (one line naming the address) when no
    scheduler answers or no usable worker is there within ``timeout_s``."""
    from distributed import Client

    check_scheduler_address(address)
    try:
        client = Client(address, timeout=timeout_s)
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(f"--scheduler {address}: no Dask scheduler answered within {timeout_s:g} s "
                              f"({type(exc).__name__}: {' '.join(str(exc).split())})") from None
    try:
        _check_workers(client, address, timeout_s)
        yield client
    finally:
        client.close()


def worker_count(client: Client) -> int:
    return len(client.scheduler_info()["workers"])


def run_dask(client: Client, jobs: Sequence[EpisodeJob], on_done: OnDone | None = None) -> list[Record]:
    """Every job as one task on ``client``'s cluster; records in episode order. Tasks still pending when
    this returns early (an error, Ctrl-C) are cancelled, so a shared cluster stops working on them."""
    from distributed import as_completed

    batch = uuid.uuid4().hex[:12]  # keys unique to this batch on a shared scheduler
    futures = [client.submit(run_job, job, key=f"qrsim-episode-{batch}-{job.index}") for job in jobs]
    collector = Collector(len(jobs), on_done)
    try:
        for _, record in as_completed(futures, with_results=True):
            collector.add(record)
    finally:
        if collector.done < len(jobs):
            client.cancel(futures)
    return collector.records()

"""What a killed run leaves behind, found and removed by the next start (pure Python, no rclpy).

Every temporary thing qrsim's commands make is marked with an advisory lock (``flock``) that its owner
holds while it lives; the kernel drops the lock when the owner dies, even by SIGKILL. So "stale" is
decided by the lock alone: a leftover whose lock can be taken has no living owner, and one whose lock is
held belongs to a live run and is never touched (no pid guessing, no pid reuse problem).

- ``qrsim launch``'s scratch directory ``$TMPDIR/qrsim_launch_*`` (parameter files, the single process's
  plan): locked through ``<dir>/.lock`` (``LockedTempDir``).
- Atomic outputs' hidden temporaries ``.<name>.*.tmp`` next to the output (``qrsim run/batch/replay
  --out``): the temporary file itself is locked while it is written.
- Fast DDS's shared-memory files in /dev/shm of DDS processes that were killed: Fast DDS marks a live
  segment or port with a locked ``_el``/``_sl`` file beside it (the rule of Fast DDS's own
  ``fastdds shm clean``); unlocked ones of this user, older than a few seconds, are removed with the
  segment, port and mutex files they guard.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

#: Prefix of ``qrsim launch``'s scratch directories (in the temporary directory).
LAUNCH_TMP_PREFIX = "qrsim_launch_"
#: The lock file inside a scratch directory.
LOCK_NAME = ".lock"
#: Shared-memory lock files younger than this are left alone: their owner may be starting [s].
SHM_MIN_AGE_S = 5.0
#: Fast DDS's shared-memory lock files: segments ``<p>_<16 hex>_el`` and ports ``<p>_port<N>_el|_sl``
#: (``<p>``: ``fastdds`` in Fast DDS 3, ``fastrtps`` before).
_SHM_SEGMENT_LOCK = re.compile(r"^(fastdds|fastrtps)_[0-9a-z]{16}_(el|sl)$")
_SHM_PORT_LOCK = re.compile(r"^(fastdds|fastrtps)_port\d{1,5}_(el|sl)$")
_SHM_PORT = re.compile(r"^(fastdds|fastrtps)_port\d{1,5}$")


def is_locked(path: str | os.PathLike[str]) -> bool:
    """True if some process holds an flock on ``path`` (shared or exclusive); False if nobody does or
    the file is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (also drops the lock we may just have taken)
    return False


class LockedTempDir:
    """A scratch directory ``<parent>/<prefix>XXXX`` with ``.lock`` inside, flock-ed for this object's
    life: a later ``remove_stale_tempdirs`` leaves it alone while this process lives. The lock's file
    descriptor is not inherited by child processes (O_CLOEXEC), so it dies with this process."""

    def __init__(self, prefix: str = LAUNCH_TMP_PREFIX, parent: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        self._fd: int | None = os.open(self.path / LOCK_NAME, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def cleanup(self) -> None:
        """Remove the directory and release the lock. Idempotent."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def remove_stale_tempdirs(prefix: str = LAUNCH_TMP_PREFIX,
                          parent: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove ``<parent>/<prefix>*`` directories of this user whose ``.lock`` nobody holds (their
    launcher died, SIGKILL included); returns those removed. Directories without a lock file (made by an
    older version) are left alone: their owner cannot be told."""
    root = Path(parent if parent is not None else tempfile.gettempdir())
    removed = []
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return []
    for d in candidates:
        lock = d / LOCK_NAME
        with contextlib.suppress(OSError):
            if d.is_symlink() or not d.is_dir() or d.stat().st_uid != os.getuid() or not lock.is_file():
                continue
            if not is_locked(lock):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
    return removed


def temporary_prefix(path: str | os.PathLike[str]) -> str:
    """The name prefix of ``path``'s atomic-output temporaries (``.<name>.``; they end in ``.tmp``)."""
    return f".{os.path.basename(os.fspath(path))}."


def remove_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the hidden temporaries ``.<name>.*.tmp`` beside output ``path`` that no writer holds locked
    (a killed ``qrsim replay``'s 41 MB, say); returns those removed. A live writer's stays."""
    target = Path(os.path.abspath(os.fspath(path)))
    prefix = temporary_prefix(target)
    removed = []
    try:
        candidates = [p for p in target.parent.iterdir()
                      if p.name.startswith(prefix) and p.name.endswith(".tmp")]
    except OSError:
        return []
    for p in candidates:
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink() and p.stat().st_uid == os.getuid() and not is_locked(p):
                p.unlink()
                removed.append(p)
    return removed


def remove_stale_shm(shm_dir: str | os.PathLike[str] = "/dev/shm", min_age_s: float = SHM_MIN_AGE_S,
                     now: float | None = None) -> list[str]:
    """Remove Fast DDS shared-memory files of dead processes (this user's, lock files older than
    ``min_age_s``, not locked by anyone); returns the names removed. Live participants' files, of any
    run, hold their locks and stay."""
    root = Path(shm_dir)
    try:
        names = os.listdir(root)
    except OSError:
        return []
    now = time.time() if now is None else now
    removed: list[str] = []
    for name in sorted(names):
        segment = _SHM_SEGMENT_LOCK.match(name)
        port = _SHM_PORT_LOCK.match(name)
        if not (segment or port):
            continue
        lock = root / name
        try:
            st = lock.stat()
        except OSError:
            continue
        if st.st_uid != os.getuid() or now - st.st_mtime < min_age_s or is_locked(lock):
            continue
        base = name[:-3]
        guarded = [base, name]
        if port:
            guarded.append(f"sem.{base}_mutex")
            # a port's other lock file: if it is held, the port is in use after all
            other = f"{base}_{'sl' if name.endswith('_el') else 'el'}"
            if is_locked(root / other):
                continue
        for f in guarded:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(root / f)
                removed.append(f)
    removed += _remove_orphan_ports(root, names, now, min_age_s)
    return removed


def _remove_orphan_ports(root: Path, names: list[str], now: float, min_age_s: float) -> list[str]:
    """Port segments left without their lock files (``fastdds_port<N>`` and its ``sem.*_mutex``; the
    10-minute soak found them after a SIGKILLed node): removed when old enough, this user's and mapped
    by no live process."""
    present = set(names)
    candidates = [n for n in names if _SHM_PORT.match(n) and f"{n}_el" not in present
                  and f"{n}_sl" not in present]
    if not candidates:
        return []
    mapped = shm_in_use(root)
    removed: list[str] = []
    for name in candidates:
        try:
            st = (root / name).stat()
        except OSError:
            continue
        if st.st_uid != os.getuid() or now - st.st_mtime < min_age_s or name in mapped:
            continue
        for f in (name, f"sem.{name}_mutex"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(root / f)
                removed.append(f)
    return removed


def shm_in_use(root: str | os.PathLike[str] = "/dev/shm") -> set[str]:
    """Names of the files in ``root`` that some live process maps or holds open (``/proc/<pid>/maps``
    and ``/proc/<pid>/fd``)."""
    names: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        names |= files_used_by(int(pid), root)
    return names


def files_used_by(pid: int, root: str | os.PathLike[str] = "/dev/shm") -> set[str]:
    """Names of the files in ``root`` that process ``pid`` maps or holds open (none once it is gone or
    not ours to read)."""
    prefix = f"{os.fspath(root).rstrip('/')}/"
    names: set[str] = set()
    with contextlib.suppress(OSError), open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            i = line.find(prefix)
            if i >= 0:
                names.add(line[i + len(prefix):].strip().removesuffix(" (deleted)"))
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(prefix):
                    names.add(target[len(prefix):])
    return names

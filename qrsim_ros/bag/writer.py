"""A rosbag2 bag writer that survives SIGKILL: metadata.yaml (version 9) plus MCAP files split in time.

``SplitBagWriter`` writes already serialized (CDR) messages with rosbags' MCAP storage writer
(``rosbags.rosbag2.storage_mcap.McapWriter``, zstd-compressed chunks by default), one file per split,
in the layout ``ros2 bag`` (rosbag2_storage_mcap) and Foxglove read::

    <bag>/metadata.yaml            rosbag2 metadata, version 9, lists the *completed* splits only
    <bag>/<bag>_0.mcap, _1 ...     complete MCAP files (summary, index, statistics)
    <bag>/.partial/<bag>_N/        the split being written (moved next to the others when complete)

Why splits: an MCAP file is only readable (by rosbags, and by indexed readers) once its footer is
written, and rosbags' readers need a metadata.yaml naming every file. So a split is closed every
``split_period_s`` of wall time (and at ``close()``): its summary is written, the file is renamed into
the bag directory (an atomic rename: a file of the bag is always complete) and metadata.yaml is
rewritten through a temporary file and a rename. A process killed with SIGKILL therefore leaves a bag
that ``rosbags.highlevel.AnyReader`` reads without any repair, holding everything up to the last
completed split (at most ``split_period_s`` of wall time is lost); SIGINT/SIGTERM -> ``close()`` keeps
everything. A write that fails (a full disk: ENOSPC, or any other OSError) abandons the split being
written, keeps the completed ones (still listed in metadata.yaml, so the bag reads up to its last complete
file) and raises ``BagWriteError``: one line naming the bag and the free space left. No rclpy here: the
``recorder`` node feeds this class.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rosbags.interfaces import (
    Connection,
    ConnectionExtRosbag2,
    MessageDefinition,
    MessageDefinitionFormat,
    Qos,
)
from rosbags.rosbag2.enums import CompressionMode
from rosbags.rosbag2.metadata import dump_qos_v9
from rosbags.rosbag2.storage_mcap import McapWriter
from rosbags.typesys.store import Typestore

from qrsim_ros.bag.topics import message_definition

#: rosbag2 metadata version written (Jazzy/Kilted).
METADATA_VERSION = 9
#: Folder (inside the bag) of the split being written.
PARTIAL_DIR = ".partial"
#: ``ros_distro`` written to metadata.yaml: the ROS 2 wheels this environment runs.
ROS_DISTRO = "kilted"
#: Compressions ``SplitBagWriter`` takes: MCAP chunk compression (zstd) or none.
COMPRESSIONS = ("zstd", "none")


class BagWriterError(RuntimeError):
    """The bag cannot be written (output directory not empty, unknown message type, ...)."""


class BagWriteError(BagWriterError):
    """Writing failed (disk full, I/O error): the bag is closed and keeps its completed files."""


@dataclass
class _Topic:
    """One recorded topic: its rosbags connection and message counts (whole bag, current split)."""

    connection: Connection
    type_hash: str
    count: int = 0  # in completed splits
    split_count: int = 0  # in the split being written


@dataclass
class _SplitInfo:
    path: str
    start_ns: int
    end_ns: int
    count: int


@dataclass
class _OpenSplit:
    index: int
    directory: Path
    storage: McapWriter
    opened_wall: float
    start_ns: int = 2**63 - 1
    end_ns: int = 0
    count: int = 0
    types: set[str] = field(default_factory=set)


class SplitBagWriter:
    """Write serialized messages to a rosbag2 bag of time-split MCAP files (see the module docstring).

    ``path``: the bag directory (created; it must not exist or be empty). ``typestore``: rosbags types
    used for the message definitions (schemas) written to the MCAP files, normally
    ``qrsim_ros.bag.types.typestore()``. ``compression``: ``zstd`` (MCAP chunk compression, about 3x
    smaller) or ``none``. ``split_period_s``: wall seconds after which the split being written is closed
    (SIGKILL loses at most that much). ``custom_data``: string pairs for metadata.yaml's ``custom_data``.
    ``wall_clock``: seconds of a monotonic clock (injectable for tests).

    Use ``add_topic`` once per topic, then ``write(topic_id, timestamp_ns, cdr_bytes)``; call
    ``maybe_split()`` regularly (it closes the split when it is old enough) and ``close()`` at the end.
    Not thread-safe: call it from one thread.
    """

    def __init__(self, path: str | os.PathLike[str], typestore: Typestore, *, compression: str = "zstd",
                 split_period_s: float = 5.0, custom_data: Mapping[str, str] | None = None,
                 wall_clock: Callable[[], float] = time.monotonic) -> None:
        if compression not in COMPRESSIONS:
            raise BagWriterError(f"compression={compression!r}: one of {', '.join(COMPRESSIONS)}")
        if not split_period_s > 0:
            raise BagWriterError(f"split_period_s={split_period_s!r} must be > 0 [s]")
        self.path = Path(path).resolve()
        if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise BagWriterError(f"{self.path} exists and is not an empty directory: not overwriting a bag")
        self.typestore = typestore
        self.compression = compression
        self.split_period_s = float(split_period_s)
        self.custom_data = {str(k): str(v) for k, v in (custom_data or {}).items()}
        self._wall = wall_clock
        self._topics: list[_Topic] = []
        self._by_name: dict[str, int] = {}
        self._splits: list[_SplitInfo] = []
        self._open: _OpenSplit | None = None
        self._closed = False
        self.path.mkdir(parents=True, exist_ok=True)
        # An empty but valid bag from the start: a run killed before its first split still reads.
        self._write_metadata()

    # --- topics ---------------------------------------------------------------------------------------

    @property
    def topics(self) -> dict[str, str]:
        """Recorded topic -> message type."""
        return {t.connection.topic: t.connection.msgtype for t in self._topics}

    def topic_id(self, topic: str) -> int | None:
        return self._by_name.get(topic)

    def add_topic(self, topic: str, msgtype: str, *, offered_qos: Sequence[Qos] = (),
                  type_hash: str | None = None) -> int:
        """Register a topic; returns the id ``write`` takes.

        ``msgtype`` like ``nav_msgs/msg/Odometry`` (must be in the typestore); its definition (the MCAP
        schema) is the installed ``.msg`` files' text, as rosbag2 writes it (``topics.message_definition``).
        ``offered_qos``: the publishers' QoS profiles (rosbag2's ``offered_qos_profiles``, used by
        ``ros2 bag play`` to republish latched topics latched); ``type_hash``: the running type's
        ``RIHS01_...`` hash (default: the typestore's). Raises BagWriterError for a duplicate topic or an
        unknown type.
        """
        self._check_open()
        if topic in self._by_name:
            raise BagWriterError(f"topic {topic!r} is already recorded")
        try:
            msgdef = message_definition(self.typestore, msgtype)
            own_hash = self.typestore.hash_rihs01(msgtype)
        except Exception as exc:  # rosbags raises several types for an unknown type
            raise BagWriterError(f"topic {topic!r}: message type {msgtype!r} is not in the typestore "
                                 f"({exc})") from None
        digest = type_hash or own_hash
        connection = Connection(
            id=len(self._topics) + 1, topic=topic, msgtype=msgtype,
            msgdef=MessageDefinition(MessageDefinitionFormat.MSG, msgdef), digest=digest, msgcount=0,
            ext=ConnectionExtRosbag2(serialization_format="cdr", offered_qos_profiles=list(offered_qos)),
            owner=self)
        self._topics.append(_Topic(connection, digest))
        self._by_name[topic] = len(self._topics) - 1
        if self._open is not None:
            self._register(self._open, self._topics[-1])
        return len(self._topics) - 1

    # --- messages -------------------------------------------------------------------------------------

    def write(self, topic_id: int, timestamp_ns: int, data: bytes | memoryview) -> None:
        """Append one serialized message (CDR, as received) with its bag timestamp [ns]."""
        split = self._open
        try:
            if split is None:
                self._check_open()
                split = self._open = self._open_split()
            split.storage.write(self._topics[topic_id].connection, timestamp_ns, data)
        except OSError as exc:
            raise self._give_up(exc) from None
        topic = self._topics[topic_id]
        topic.split_count += 1
        split.count += 1
        if timestamp_ns < split.start_ns:
            split.start_ns = timestamp_ns
        if timestamp_ns > split.end_ns:
            split.end_ns = timestamp_ns

    def maybe_split(self) -> bool:
        """Close the split being written if it is ``split_period_s`` old; True if it did."""
        split = self._open
        if split is None or self._wall() - split.opened_wall < self.split_period_s:
            return False
        try:
            self._close_split()
        except OSError as exc:
            raise self._give_up(exc) from None
        return True

    def close(self) -> None:
        """Finish the split being written and the metadata: the bag is complete. Idempotent."""
        if self._closed:
            return
        try:
            if self._open is not None:
                self._close_split()
            self._write_metadata()
        except OSError as exc:
            raise self._give_up(exc) from None
        shutil.rmtree(self.path / PARTIAL_DIR, ignore_errors=True)
        self._closed = True

    # --- summary --------------------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        """Messages written so far (completed splits and the one being written)."""
        return sum(t.count + t.split_count for t in self._topics)

    @property
    def files(self) -> list[str]:
        """The completed split files (names relative to the bag directory)."""
        return [s.path for s in self._splits]

    def size_bytes(self) -> int:
        """Bytes of the completed split files."""
        return sum((self.path / s.path).stat().st_size for s in self._splits)

    # --- internals ------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise BagWriterError(f"bag {self.path} is closed")

    def _give_up(self, exc: OSError) -> BagWriteError:
        """After a failed write: drop the split being written (its file has no footer and would not
        read), keep the completed ones listed in metadata.yaml, close the bag; the error to raise."""
        free = _free_bytes(self.path)
        split, self._open = self._open, None
        if split is not None:
            with contextlib.suppress(Exception):  # the file's buffers cannot be flushed: let them go
                split.storage.bio.close()
        shutil.rmtree(self.path / PARTIAL_DIR, ignore_errors=True)  # frees the space it took
        with contextlib.suppress(OSError):
            self._write_metadata()  # a split moved in but not yet listed gets listed
        with contextlib.suppress(OSError):
            (self.path / "metadata.yaml.tmp").unlink(missing_ok=True)
        self._closed = True
        free_text = f"{free / 1e6:.2f} MB free" if free is not None else "free space unknown"
        kept = sum(t.count for t in self._topics)
        return BagWriteError(
            f"bag {self.path}: {exc.strerror or exc} ({free_text} on its file system): recording stopped; "
            f"the bag keeps its {len(self._splits)} complete file(s), {kept} messages")

    def _split_name(self, index: int) -> str:
        return f"{self.path.name}_{index}"

    def _open_split(self) -> _OpenSplit:
        index = len(self._splits)
        directory = self.path / PARTIAL_DIR / self._split_name(index)
        directory.mkdir(parents=True, exist_ok=True)
        mode = CompressionMode.STORAGE if self.compression == "zstd" else CompressionMode.NONE
        # McapWriter writes <directory>/<directory name>.mcap: renamed into the bag when complete.
        split = _OpenSplit(index, directory, McapWriter(directory, mode), self._wall())
        for topic in self._topics:
            self._register(split, topic)
        return split

    def _register(self, split: _OpenSplit, topic: _Topic) -> None:
        """Schema (once per type and file) and channel of a topic in the split's MCAP file."""
        conn = topic.connection
        if conn.msgtype not in split.types:
            split.storage.add_msgtype(conn)
            split.types.add(conn.msgtype)
        split.storage.add_connection(conn, _qos_text(conn))

    def _close_split(self) -> None:
        """Finish the split's file, move it into the bag, then list it in metadata.yaml (in this order:
        the bag never names a file that is not complete)."""
        split = self._open
        assert split is not None
        name = f"{self._split_name(split.index)}.mcap"
        info = _SplitInfo(name, split.start_ns, split.end_ns, split.count)
        # The file's own copy of the bag metadata, as rosbag2_storage_mcap writes one.
        split.storage.close(METADATA_VERSION, dump_yaml(self._metadata(info)))
        os.replace(split.storage.path, self.path / name)
        self._open = None  # (only now: a failure above leaves it to _give_up to drop)
        shutil.rmtree(split.directory, ignore_errors=True)
        for topic in self._topics:
            topic.count += topic.split_count
            topic.split_count = 0
        self._splits.append(info)
        self._write_metadata()

    def _metadata(self, closing: _SplitInfo | None = None) -> dict[str, Any]:
        """The bag's metadata (rosbag2 v9): the completed splits, plus ``closing`` if given."""
        splits = [*self._splits, closing] if closing is not None else self._splits
        counted = [s for s in splits if s.count]
        start = min((s.start_ns for s in counted), default=0)
        end = max((s.end_ns for s in counted), default=0)
        return {
            "version": METADATA_VERSION,
            "storage_identifier": "mcap",
            "relative_file_paths": [s.path for s in splits],
            "duration": {"nanoseconds": end - start},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": sum(s.count for s in splits),
            "topics_with_message_count": [
                {"topic_metadata": {
                    "name": t.connection.topic,
                    "type": t.connection.msgtype,
                    "serialization_format": "cdr",
                    "offered_qos_profiles": dump_qos_v9(_offered(t.connection)),
                    "type_description_hash": t.type_hash,
                }, "message_count": t.count + (t.split_count if closing is not None else 0)}
                for t in self._topics],
            "compression_format": "",
            "compression_mode": "",
            "files": [{"path": s.path, "starting_time": {"nanoseconds_since_epoch": s.start_ns},
                       "duration": {"nanoseconds": s.end_ns - s.start_ns}, "message_count": s.count}
                      for s in splits],
            "custom_data": dict(self.custom_data) or None,
            "ros_distro": ROS_DISTRO,
        }

    def _write_metadata(self) -> None:
        """metadata.yaml through a temporary file and an atomic rename (never half written)."""
        text = dump_yaml({"rosbag2_bagfile_information": self._metadata()})
        tmp = self.path / "metadata.yaml.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.path / "metadata.yaml")


#: libyaml's emitter where PyYAML has it (its wheels do): the metadata grows with the splits and is written
#: at each, and a bag closed under CPU load took over 3 s in the pure-Python emitter (the stop deadline).
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_yaml(value: Any) -> str:
    """``value`` as block YAML in key order (what ``yaml.safe_dump(value, sort_keys=False)`` writes)."""
    return yaml.dump(value, Dumper=_YAML_DUMPER, sort_keys=False)


def _free_bytes(path: Path) -> int | None:
    """Bytes available to this user on the file system of ``path`` (None if unknown)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _offered(conn: Connection) -> list[Qos]:
    ext = conn.ext
    assert isinstance(ext, ConnectionExtRosbag2)
    return list(ext.offered_qos_profiles)


def _qos_text(conn: Connection) -> str:
    """The channel's ``offered_qos_profiles`` metadata as rosbag2 (v9) writes it: a YAML list."""
    dumped = dump_qos_v9(_offered(conn))
    return yaml.safe_dump(dumped, sort_keys=False).strip() if dumped else ""

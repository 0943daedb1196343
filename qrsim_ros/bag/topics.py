"""What the recorder needs to know about a discovered topic, without rclpy: QoS, types and clock bytes.

- ``bag_qos``: a publisher's QoS profile as discovered (rclpy's ``TopicEndpointInfo.qos_profile``) ->
  rosbags' ``Qos`` for the bag's ``offered_qos_profiles``.
- ``subscription_policy``: the reliability and durability a recorder subscribes with so that it is
  compatible with every offered profile (as rosbag2's recorder adapts to the offers): reliable only if
  every publisher is reliable, transient local only if every publisher is (then the samples published
  before the recorder joined, e.g. /tf_static, still arrive).
- ``ensure_type``: make a message type known to a rosbags typestore, from the ``.msg`` files of the
  installed packages (AMENT_PREFIX_PATH) when the store does not have it.
- ``clock_ns``: the time of a serialized rosgraph_msgs/Clock (CDR) without deserialising it.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.typesys import get_types_from_msg
from rosbags.typesys.store import Typestore

#: rmw's "infinite" duration, INT64_MAX ns, as rosbag2 (v9) writes it: sec 9223372036, nsec 854775807.
_NS_PER_S = 1_000_000_000
_CLOCK = struct.Struct("<iI")
_CLOCK_BE = struct.Struct(">iI")


def _time(duration: Any) -> QosTime:
    ns = int(getattr(duration, "nanoseconds", duration))
    return QosTime(ns // _NS_PER_S, ns % _NS_PER_S)


def _enum(cls: Any, value: Any, unknown: Any) -> Any:
    try:
        return cls(int(getattr(value, "value", value)))
    except (ValueError, TypeError):
        return unknown


def bag_qos(profile: Any) -> Qos:
    """rosbags ``Qos`` of an rclpy ``QoSProfile`` (the enum values are rmw's in both)."""
    return Qos(
        history=_enum(QosHistory, profile.history, QosHistory.UNKNOWN),
        depth=int(profile.depth),
        reliability=_enum(QosReliability, profile.reliability, QosReliability.UNKNOWN),
        durability=_enum(QosDurability, profile.durability, QosDurability.UNKNOWN),
        deadline=_time(profile.deadline),
        lifespan=_time(profile.lifespan),
        liveliness=_enum(QosLiveliness, profile.liveliness, QosLiveliness.UNKNOWN),
        liveliness_lease_duration=_time(profile.liveliness_lease_duration),
        avoid_ros_namespace_conventions=bool(profile.avoid_ros_namespace_conventions),
    )


def subscription_policy(offered: Sequence[Qos]) -> tuple[bool, bool]:
    """(reliable, transient_local) of a subscription compatible with every offered profile."""
    if not offered:
        return True, False
    reliable = all(q.reliability == QosReliability.RELIABLE for q in offered)
    transient_local = all(q.durability == QosDurability.TRANSIENT_LOCAL for q in offered)
    return reliable, transient_local


def compatible(offered: Qos, reliable: bool, transient_local: bool) -> bool:
    """Whether a publisher offering ``offered`` matches a subscription with these policies."""
    if reliable and offered.reliability != QosReliability.RELIABLE:
        return False
    return not (transient_local and offered.durability != QosDurability.TRANSIENT_LOCAL)


def clock_ns(data: bytes | memoryview) -> int:
    """Nanoseconds of a CDR-serialized rosgraph_msgs/Clock (4-byte encapsulation header, then
    builtin_interfaces/Time: int32 sec, uint32 nanosec; byte order from the header)."""
    sec, nanosec = (_CLOCK if data[1] == 1 else _CLOCK_BE).unpack_from(data, 4)
    return sec * _NS_PER_S + nanosec


def left_out(name: str, exclude: re.Pattern[str] | None) -> bool:
    """Whether topic ``name`` is matched by ``exclude`` or hidden (a part starting with ``_``, left out as
    ``ros2 bag record --all`` leaves it out): not recorded, not served."""
    return ((exclude is not None and exclude.search(name) is not None)
            or any(part.startswith("_") for part in name.split("/")))


def starts_with_header(store: Typestore, msgtype: str) -> bool:
    """Whether ``msgtype`` (in ``store``) begins with a ``std_msgs/Header`` field named ``header``: its
    serialised stamp is then at a fixed place (``ros.cdr.header_stamp_ns``)."""
    fields = store.fielddefs[msgtype][1]
    return bool(fields) and fields[0][0] == "header" and fields[0][1][1] == "std_msgs/msg/Header"


def split_type(msgtype: str) -> tuple[str, str, str]:
    """``pkg/msg/Name`` -> (pkg, msg, Name); ValueError for anything else."""
    parts = msgtype.split("/")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"not a message type name: {msgtype!r}")
    return parts[0], parts[1], parts[2]


def ensure_type(store: Typestore, msgtype: str, prefixes: Iterable[str] | None = None) -> bool:
    """Whether ``msgtype`` is in ``store``, registering it (and the types it uses) from an installed
    package's ``share/<pkg>/msg/<Name>.msg`` (under AMENT_PREFIX_PATH) when it is not."""
    if msgtype in store.fielddefs:
        return True
    if prefixes is None:
        prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes = list(prefixes)
    pending = [msgtype]
    found: dict[str, Any] = {}
    while pending:
        name = pending.pop()
        if name in store.fielddefs or name in found:
            continue
        try:
            pkg, kind, base = split_type(name)
        except ValueError:
            return False
        path = next((p for prefix in prefixes
                     if (p := Path(prefix) / "share" / pkg / kind / f"{base}.msg").is_file()), None)
        if path is None:
            return False
        types = get_types_from_msg(path.read_text(encoding="utf-8"), name)
        found.update(types)
        # Field types the new definition refers to (pkg/msg/Name) must be known too.
        text = repr(types[name])
        pending += [t for t in re.findall(r"'([A-Za-z]\w*/msg/[A-Za-z]\w*)'", text) if t != name]
    store.register(found)
    return msgtype in store.fielddefs


def _referenced_type(field_type: tuple[Any, Any]) -> str | None:
    """The message type a typestore field refers to (``pkg/msg/Name``; through arrays and sequences)."""
    _, detail = field_type
    if isinstance(detail, str):
        return detail
    if isinstance(detail, tuple) and detail and isinstance(detail[0], tuple):
        return _referenced_type(detail[0])
    return None


def _dependencies(store: Typestore, msgtype: str) -> list[str]:
    """Message types ``msgtype``'s fields use, recursively, depth first, each once."""
    out: list[str] = []

    def visit(name: str) -> None:
        for _, field_type in store.fielddefs[name][1]:
            ref = _referenced_type(field_type)
            if ref is not None and ref != msgtype and ref not in out:
                out.append(ref)
                visit(ref)

    visit(msgtype)
    return out


def message_definition(store: Typestore, msgtype: str, prefixes: Iterable[str] | None = None) -> str:
    """The ``ros2msg`` definition of ``msgtype`` as rosbag2 writes it into a bag: the installed ``.msg``
    file, then each type it uses after a line of 80 ``=`` and ``MSG: pkg/Name``. Falls back to
    rosbags' generated text when a file is missing (that text loses the quotes of empty string
    constants, which rosbags itself then cannot parse back: the installed files are preferred)."""
    if prefixes is None:
        prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes = list(prefixes)
    parts = []
    for i, name in enumerate([msgtype, *_dependencies(store, msgtype)]):
        pkg, kind, base = split_type(name)
        path = next((p for prefix in prefixes
                     if (p := Path(prefix) / "share" / pkg / kind / f"{base}.msg").is_file()), None)
        if path is None:
            return store.generate_msgdef(msgtype, ros_version=2)[0]
        text = path.read_text(encoding="utf-8").rstrip("\n") + "\n"
        parts.append(text if i == 0 else f"{'=' * 80}\nMSG: {pkg}/{base}\n{text}")
    return "".join(parts)

"""The rosbags type store that knows the ROS 2 standard messages and qrsim_ros's own (msg/ and srv/).

Bags are written and read with ``rosbags``; its stock Kilted store has the standard types (including
tf2_msgs) and this module adds the package's interface definitions, read from the installed share
directory or, when running from the source tree, from the repository's msg/ folder.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

PACKAGE = "qrsim_ros"


def msg_directory() -> Path:
    """Folder holding qrsim_ros's ``*.msg`` files: the source tree's msg/, else the installed share/msg/."""
    source = Path(__file__).resolve().parents[2] / "msg"
    if source.is_dir():
        return source
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        installed = Path(prefix) / "share" / PACKAGE / "msg"
        if prefix and installed.is_dir():
            return installed
    raise FileNotFoundError(f"cannot find the {PACKAGE} msg/ folder (source tree or AMENT_PREFIX_PATH)")


@functools.cache
def typestore() -> Typestore:
    """Kilted's standard types plus every ``qrsim_ros/msg/*`` type (cached; treat as read-only)."""
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for path in sorted(msg_directory().glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(encoding="utf-8"), f"{PACKAGE}/msg/{path.stem}"))
    store.register(types)
    return store


def private_typestore() -> Typestore:
    """A new store with the same types as ``typestore()`` that the caller may extend (not cached)."""
    return typestore.__wrapped__()

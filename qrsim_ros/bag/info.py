"""A one-line description of a rosbag2 bag from its metadata.yaml (for the launcher's summary).

Reads only metadata.yaml (PyYAML), so it costs nothing and works while a recorder is still writing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from qrsim_ros.core.config.loader import load_yaml


def bag_metadata(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``rosbag2_bagfile_information`` of the bag at ``path``, or None if there is none (yet)."""
    try:
        text = (Path(path) / "metadata.yaml").read_text(encoding="utf-8")
        info = load_yaml(text)["rosbag2_bagfile_information"]  # size- and alias-limited
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None
    return info if isinstance(info, dict) else None


def describe_bag(path: str | os.PathLike[str]) -> str:
    """E.g. ``12345 messages on 41 topics, 3.20 MB in 2 files, 20.00 s`` or ``no bag was written``."""
    info = bag_metadata(path)
    if info is None:
        return "no bag was written"
    files = [Path(path) / str(f) for f in info.get("relative_file_paths") or []]
    size_mb = sum(f.stat().st_size for f in files if f.is_file()) / 1e6
    topics = len(info.get("topics_with_message_count") or [])
    duration_s = int(info.get("duration", {}).get("nanoseconds", 0)) / 1e9
    return (f"{info.get('message_count', 0)} messages on {topics} topics, {size_mb:.2f} MB in "
            f"{len(files)} file{'s' * (len(files) != 1)}, {duration_s:.2f} s")

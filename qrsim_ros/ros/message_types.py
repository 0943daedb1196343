"""The generated Python class of a message type named as the graph names it (``pkg/msg/Name``)."""

from __future__ import annotations

import importlib


def message_class(msgtype: str) -> type | None:
    """The generated Python class of ``pkg/msg/Name`` (None if it is not installed)."""
    parts = msgtype.split("/")
    if len(parts) != 3:
        return None
    try:
        return getattr(importlib.import_module(f"{parts[0]}.{parts[1]}"), parts[2])
    except (ImportError, AttributeError):
        return None

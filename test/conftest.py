"""Shared pytest fixtures.

The repository root is put on ``sys.path`` so ``import qrsim_ros`` works whichever way pytest is
started (``python3 -m pytest`` from the root also does this).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

#: QRSim's recorded flight logs and GPS data, kept outside the repository (never copied into it).
QRSIM_DATA_DIR = REPO_ROOT.parent / "shared" / "data" / "qrsim"


@pytest.fixture(scope="session")
def qrsim_data_dir() -> Path:
    """Directory of the QRSim data files (``../shared/data/qrsim`` next to the repository)."""
    if not QRSIM_DATA_DIR.is_dir():
        pytest.skip(f"QRSim data directory not found: {QRSIM_DATA_DIR} (the flight logs are not in the repo)")
    return QRSIM_DATA_DIR


@pytest.fixture
def rclpy_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An rclpy context of this test's own, in a free ROS domain (skips without ROS)."""
    from rosenv import free_domain, require_ros

    require_ros()
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path / "ros_log"))
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=free_domain(), signal_handler_options=SignalHandlerOptions.NO)
    yield context
    context.try_shutdown()

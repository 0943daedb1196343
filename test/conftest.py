"""Shared pytest fixtures.

The repository root is put on ``sys.path`` so ``import qrsim_ros`` works whichever way pytest is
started (``python3 -m pytest`` from the root also does this).
"""

from __future__ import annotations

import sys
from pathlib import Path

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

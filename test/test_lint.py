"""The code base stays ruff-clean (config in ruff.toml) and the core never imports rclpy."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from rosenv import REPO_ROOT


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed in this environment (./qrsim test installs it)")
    result = subprocess.run([ruff, "check", "--no-cache", "."], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_core_is_ros_free() -> None:
    pattern = re.compile(r"^\s*(import rclpy|from rclpy)", re.MULTILINE)
    offenders = [str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "qrsim_ros" / "core").rglob("*.py")
                 if pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == []

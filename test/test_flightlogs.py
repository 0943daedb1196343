"""Replays of QRSim's recorded Pelican flight logs through the model (spec 8.3 items 1-3).

The replay code lives in ``scripts/flightlog_mse.py`` (one implementation, also used to quote the
figures); run ``pytest -s`` to see the measured MSEs.

Values measured by the clean-room port (spec 8.3) and by this port:
  thrust       0.98175 N^2
  rotation     [0.000656 0.000835 0.01755 0.02478 0.01872 0.02867]   ([phi theta psi p q r])
  translation  [3.736 2.389 1.547 5.606 3.193 12.631]               ([vx vy vz ax ay az], NED)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "flightlog_mse.py"


@pytest.fixture(scope="module")
def replay() -> ModuleType:
    spec = importlib.util.spec_from_file_location("flightlog_mse", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_thrust_replay(replay: ModuleType, qrsim_data_dir: Path) -> None:
    """Thrust from logged throttle and battery; original criterion MSE < 1 N^2 (margin is thin)."""
    mse, sim, logged = replay.thrust_replay(qrsim_data_dir)
    print(f"\nthrust replay MSE [N^2]: {mse:.6f}")
    assert sim.shape == logged.shape == (1978,)
    assert mse < 1.0
    assert abs(mse - 0.9817) < 5e-3


def test_rotation_replay(replay: ModuleType, qrsim_data_dir: Path) -> None:
    """Attitude and rates from logged attitude commands at fixed throttle 0.615, 11 V."""
    mse, sim, _ = replay.rotation_replay(qrsim_data_dir)
    print(f"\nrotation replay MSE [phi theta psi p q r]: {np.array2string(mse, precision=6)}")
    assert sim.shape == (5301, 6)
    assert np.all(mse < [0.001, 0.001, 0.02, 0.03, 0.02, 0.03])
    # the reference port's values, to 1 % (guards against a silently changed column mapping)
    np.testing.assert_allclose(mse, replay.ROTATION_MSE_REFERENCE, rtol=1e-2)


def test_translation_replay(replay: ModuleType, qrsim_data_dir: Path) -> None:
    """NED velocity and acceleration from an outdoor flight (shift 25 steps, 8000 steps)."""
    mse, sim, _ = replay.translation_replay(qrsim_data_dir)
    print(f"\ntranslation replay MSE [vx vy vz ax ay az]: {np.array2string(mse, precision=4)}")
    assert sim.shape == (8000, 6)
    assert np.all(mse < 15.0)
    np.testing.assert_allclose(mse, replay.TRANSLATION_MSE_REFERENCE, rtol=1e-2)

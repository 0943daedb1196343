"""The architecture is enforced, not only described: the import contracts of .importlinter hold.

The contracts (layers of the package and of the core, a pure core, no import circles between sibling
modules) are checked by import-linter over the source tree. A second test plants a forbidden import in a
copy of the tree and checks the contracts catch it, so a contract that silently matches nothing fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from rosenv import REPO_ROOT


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed in this environment (./qrsim test installs it)")
    env = dict(os.environ)
    # only this tree's qrsim_ros (not the colcon install's copy, nor another checkout's)
    env["PYTHONPATH"] = str(root)
    return subprocess.run([exe, "--config", str(root / ".importlinter"), "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_import_contracts_are_kept() -> None:
    result = _lint_imports(REPO_ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout or "broken" not in result.stdout.split("Contracts:")[-1]


@pytest.mark.parametrize(("module", "planted", "contract"), [
    ("core/common/frames.py", "import rclpy  # noqa", "The core imports nothing of ROS"),
    ("core/vehicles/pelican.py", "from qrsim_ros.core.engine import simulator  # noqa", "Inside the core"),
    ("core/sensors/gps.py", "from qrsim_ros.core.tasks import rules  # noqa", "Inside the core"),
    ("core/tasks/kl.py", "from qrsim_ros.core.tasks import rules  # noqa", "No import circles"),
    ("launch_plan.py", "from qrsim_ros.cli import launch  # noqa", "Front ends call down"),
    ("ros/names.py", "from qrsim_ros.nodes import imu  # noqa", "Front ends call down"),
    ("ros/stamps.py", "from qrsim_ros.ros import node  # noqa", "No import circles"),
    ("core/common/intervals.py", "import stormpy  # noqa", "The core imports nothing of ROS"),
    ("verification/formats.py", "from qrsim_ros.cli import verify  # noqa", "Front ends call down"),
])
def test_contracts_catch_a_planted_violation(tmp_path: Path, module: str, planted: str,
                                             contract: str) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    shutil.copytree(REPO_ROOT / "qrsim_ros", root / "qrsim_ros",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    shutil.copy(REPO_ROOT / ".importlinter", root / ".importlinter")
    target = root / "qrsim_ros" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{planted}\n", encoding="utf-8")
    result = _lint_imports(root)
    assert result.returncode != 0, f"planting {planted!r} in {module} broke no contract"
    broken = result.stdout.split("Broken contracts")[-1]
    assert contract in broken, broken[-3000:]


def test_nodes_holds_node_modules_only() -> None:
    """Every module of qrsim_ros.nodes is one executable: a ``main`` and the node class it runs."""
    import ast

    for path in sorted((REPO_ROOT / "qrsim_ros" / "nodes").glob("*.py")):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        nodes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
                 and any(getattr(b, "id", getattr(b, "attr", "")).endswith("Node") for b in n.bases)]
        assert "main" in functions, f"{path.name}: no main()"
        assert len(nodes) == 1, f"{path.name}: node classes {nodes}"
        assert nodes[0].endswith("Node"), f"{path.name}: {nodes[0]} (node classes are named *Node)"


def test_every_registered_sensor_has_an_installed_executable() -> None:
    """`ros2 run qrsim_ros <name>` and the launch plan find every registered sensor's node."""
    from qrsim_ros.core.sensors.registry import SENSORS

    lib = REPO_ROOT / "install" / "qrsim_ros" / "lib" / "qrsim_ros"
    if not lib.is_dir():
        pytest.skip("no colcon install in this tree (./qrsim test builds it)")
    for name in SENSORS:
        exe = lib / name
        assert exe.is_file() and os.access(exe, os.X_OK), f"{exe} missing or not executable"
        assert "qrsim_ros.nodes.sensor" in exe.read_text(encoding="utf-8"), exe

"""The ``qrsim`` subcommands and their lines in ``qrsim --help``, in that order.

The top-level parser lists them from here without importing any subcommand module, so ``qrsim
--version``, ``qrsim help`` and a mistyped command cost none of the subcommands' imports (Dask,
matplotlib, numba, rclpy); a subcommand's module is imported only when that subcommand runs.
"""

from __future__ import annotations

#: NAME of ``qrsim NAME`` -> its line in ``qrsim --help`` (its module: ``qrsim_ros.cli.NAME``).
HELP_LINES: dict[str, str] = {
    "demo": "fly a Pelican open loop through the core model and print a trajectory summary",
    "replay": "replay logged controls through the Pelican model and write the trajectory as CSV",
    "run": "fly one episode of a scenario with a policy (in process)",
    "batch": "many seeded episodes on Dask or local processes, with outcome statistics",
    "launch": "start a scenario's ROS 2 node graph (embedded launcher)",
    "plot": "render PNG figures of a recorded run from its bag or a retrieve run's CSV",
    "play": "serve a recorded bag on a Foxglove WebSocket at its own pace (watch it as a live run)",
    "verify": "model-check a batch's abstract mission model beside its Monte Carlo results",
}


def module_name(name: str) -> str:
    """The module of subcommand ``name``."""
    return f"qrsim_ros.cli.{name}"

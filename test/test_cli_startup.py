"""The ``qrsim`` entry point answers ``--version``, ``help`` and usage errors without importing what the
subcommands run (docs/ARCHITECTURE.md, the qrsim command's start-up): each case runs in a fresh
interpreter, and the modules it imported are read from ``sys.modules`` there. What that costs in time
is printed by scripts/bench_startup.py, not asserted here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: What only a subcommand's run needs: numerics, model kernels, the ROS client, Dask, plotting, geodesy.
HEAVY = ("numpy", "scipy", "numba", "pyproj", "rclpy", "dask", "distributed", "matplotlib", "yaml")

PROBE = """
import io, json, sys
from contextlib import redirect_stderr, redirect_stdout
from qrsim_ros.cli.main import main
out, err = io.StringIO(), io.StringIO()
with redirect_stdout(out), redirect_stderr(err):
    try:
        status = main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        status = exc.code
heavy = json.loads(sys.argv[2])
print(json.dumps({"status": status, "out": out.getvalue(), "err": err.getvalue(),
                  "imported": sorted(m for m in heavy if m in sys.modules)}))
"""


def _probe(argv: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)],
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("argv", [["--version"], ["help"], ["--help"], [], ["bogus"]],
                         ids=["version", "help", "dash-help", "nothing", "unknown-command"])
def test_the_entry_point_alone_imports_no_subcommand(argv: list[str]) -> None:
    got = _probe(argv)
    assert got["imported"] == []
    text = got["out"] + got["err"]
    if argv == ["--version"]:
        assert got["status"] == 0 and got["out"].startswith("qrsim_ros ")
    elif argv == ["bogus"]:
        assert got["status"] == 2 and "invalid choice: 'bogus'" in got["err"]
    else:  # every subcommand listed with its help line, though none was imported
        from qrsim_ros.cli.commands import HELP_LINES

        assert got["status"] == 0
        for name, line in HELP_LINES.items():
            assert name in text and line.split()[0] in text


def test_a_usage_error_of_batch_imports_neither_dask_nor_plotting() -> None:
    got = _probe(["batch", "keep_spot", "--bogus"])
    assert got["status"] == 2 and "unrecognized arguments: --bogus" in got["err"]
    assert not {"dask", "distributed", "matplotlib", "rclpy"} & set(got["imported"])


def test_a_usage_error_of_launch_imports_neither_rclpy_nor_dask() -> None:
    got = _probe(["launch", "keep_spot", "--bogus"])
    assert got["status"] == 2 and "unrecognized arguments: --bogus" in got["err"]
    assert not {"rclpy", "dask", "distributed", "matplotlib"} & set(got["imported"])


def test_every_subcommand_keeps_the_help_line_of_the_table() -> None:
    """The lines ``qrsim --help`` shows without importing a subcommand are the ones it registers."""
    import argparse

    from qrsim_ros.cli import main as cli_main
    from qrsim_ros.cli.commands import HELP_LINES

    parser = cli_main.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    shown = {a.dest: a.help for a in sub._choices_actions}
    assert shown == HELP_LINES
    assert list(sub.choices) == list(HELP_LINES)
    assert all(sub.choices[name]._actions for name in HELP_LINES)  # each with its own arguments
    light = cli_main.build_parser(())
    (light_sub,) = [a for a in light._actions if isinstance(a, argparse._SubParsersAction)]
    assert {a.dest: a.help for a in light_sub._choices_actions} == HELP_LINES

"""Hostile input: YAML alias bombs and oversized files, huge values in error messages, one
table of limits (``core.common.limits``) shared by the launch plan, the command line, the scenario and
the node parameter ranges, ``qrsim batch --workers`` capped at the CPU count, outputs that would
overwrite an input refused.

Pure Python (no ROS graph): runs without the test lock.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import Any

import pytest

from qrsim_ros import launch_plan as lp
from qrsim_ros.core.common.limits import LIMITS, MAX_GRAPH_VEHICLES, Limit, markdown_table
from qrsim_ros.core.common.validation import SHORT_VALUE_CHARS, ConfigError, shorten
from qrsim_ros.core.config.loader import MAX_YAML_BYTES, ScenarioError, YamlLimitError, load_yaml
from qrsim_ros.core.config.scenario import load_scenario

REPO_ROOT = Path(__file__).resolve().parents[1]


def alias_bomb(levels: int = 9) -> str:
    """The "billion laughs": 9 levels of 9 aliases each, ~9**9 strings once expanded, ~1 KB of text."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _scenario_with(tmp_path: Path, extra: str, name: str = "hostile.yaml") -> Path:
    """keep_spot.yaml with ``extra`` YAML appended (a new top-level key or anchors)."""
    path = tmp_path / name
    path.write_text((REPO_ROOT / "config" / "keep_spot.yaml").read_text() + "\n" + extra, encoding="utf-8")
    return path


def _one_line_error(exc_info: Any) -> str:
    text = str(exc_info.value)
    assert "\n" not in text, text
    assert len(text) < 600, text[:1000]
    return text


# --- YAML: alias bombs, size, shortened values ---------------------------------------------------------

def test_an_alias_bomb_in_a_scenario_description_is_refused_at_once(tmp_path: Path) -> None:
    # The bomb's anchors live under ``x-bomb`` (an unknown key would be reported too, but the bomb must
    # be stopped before anything walks it) and the description is an alias of its top level.
    bomb = "x-bomb:\n" + "".join(f"  {line}\n" for line in alias_bomb().splitlines())
    path = _scenario_with(tmp_path, bomb + "description: *i\n")
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    elapsed_s = time.perf_counter() - t0
    text = _one_line_error(info)
    assert elapsed_s < 0.5, f"took {elapsed_s:.2f} s"
    assert str(path) in text and "refused" in text and "aliases expanded" in text


def test_an_alias_bomb_as_the_description_value_itself(tmp_path: Path) -> None:
    # the whole bomb as the description's value: composed, refused at the level that passes the limit
    inline = alias_bomb().replace("\n", "\n  ")
    path = _scenario_with(tmp_path, "description:\n  " + inline)
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert time.perf_counter() - t0 < 0.5
    assert "refused" in _one_line_error(info)


def test_a_file_larger_than_the_limit_is_refused_without_parsing(tmp_path: Path) -> None:
    path = _scenario_with(tmp_path, "# " + "x" * (2 * MAX_YAML_BYTES) + "\n")
    assert path.stat().st_size > 2_000_000
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert time.perf_counter() - t0 < 0.5
    text = _one_line_error(info)
    assert f"larger than {MAX_YAML_BYTES} bytes" in text and str(path) in text


def test_ordinary_anchors_aliases_and_merge_keys_still_work(tmp_path: Path) -> None:
    data = load_yaml("base: &b {x: 1, y: [1, 2]}\nother:\n  <<: *b\n  z: 3\nboth: [*b, *b]\non: yes\n")
    assert data == {"base": {"x": 1, "y": [1, 2]}, "other": {"x": 1, "y": [1, 2], "z": 3},
                    "both": [{"x": 1, "y": [1, 2]}] * 2, "on": "yes"}  # YAML 1.2: yes is a string
    # in a scenario: an anchor and its alias
    anchored = tmp_path / "anchored.yaml"
    text = (REPO_ROOT / "config" / "keep_spot.yaml").read_text(encoding="utf-8")
    anchored.write_text(text + "\ndescription: &d hover here\nname: *d\n", encoding="utf-8")
    assert load_scenario(anchored).name == "hover here"


def test_exponents_without_a_dot_are_numbers_as_in_yaml_1_2() -> None:
    # as yaml-cpp reads the nodes' parameters: a launcher that read '1e9' as a string would check a
    # different value than the node gets
    assert load_yaml("[1e9, -2E-3, +5e0, 1.0e3, 1_000, 0x10, e9, 1e]") == [1e9, -2e-3, 5.0, 1e3, 1000, 16,
                                                                        "e9", "1e"]


def test_the_node_limit_counts_aliases_not_text() -> None:
    # eight levels (~4.3e7 expanded) is refused like nine; three levels (~800 values) is fine
    with pytest.raises(YamlLimitError, match="aliases expanded"):
        load_yaml(alias_bomb(8))
    assert len(load_yaml(alias_bomb(3))["c"]) == 9
    # many values without aliases are read whole (a file within the size limit holds < 1e6 nodes)
    numbers = "[" + ",".join(["1"] * 120_000) + "]"
    assert len(load_yaml(numbers)) == 120_000


def test_shorten_cuts_any_value_quickly() -> None:
    import yaml

    huge = yaml.safe_load(alias_bomb())["i"]  # PyYAML shares the aliased lists: cheap to build
    t0 = time.perf_counter()
    text = shorten(huge)
    assert time.perf_counter() - t0 < 0.05
    assert len(text) <= SHORT_VALUE_CHARS and text.startswith("[[[")
    assert shorten("x" * 10_000).endswith("'") and len(shorten("x" * 10_000)) <= SHORT_VALUE_CHARS
    assert shorten([1, 2, 3]) == "[1, 2, 3]" and shorten("small") == "'small'"
    long = shorten(list(range(1000)), 20)
    assert len(long) == 20 and long.endswith("…")


def test_a_huge_wrong_value_gives_a_short_message(tmp_path: Path) -> None:
    path = _scenario_with(tmp_path, "description: [" + ", ".join(["lol"] * 20000) + "]\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    text = _one_line_error(info)
    assert "description: expected a string" in text and len(text) < len(str(path)) + 200


def test_command_line_yaml_values_are_limited_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from qrsim_ros.cli.main import main

    bomb = "{" + alias_bomb().strip().replace("\n", ", ") + "}"
    for argv in (["run", "keep_spot", "--set", f"description={bomb}"],
                 ["launch", "keep_spot", "--param", f"imu:x={bomb}"]):
        t0 = time.perf_counter()
        rc = main(argv)
        err = capsys.readouterr().err
        assert time.perf_counter() - t0 < 2.0, argv[0]
        assert rc == 2 and err.count("\n") == 1, err
        assert "aliases expanded" in err and len(err) < 400, err


# --- one table of limits ---------------------------------------------------------------------------------

def _node_table(executable: str) -> Any:
    """The ParamTable a planned node declares (its module's PARAMETERS, else the ground-truth nodes')."""
    from qrsim_ros.ros.ground_truth import GROUND_TRUTH_NODE_PARAMETERS

    try:
        module = importlib.import_module(f"qrsim_ros.nodes.{executable}")
    except ModuleNotFoundError:  # a registered sensor's generated executable (nodes/sensor.py)
        return GROUND_TRUTH_NODE_PARAMETERS
    return getattr(module, "PARAMETERS", GROUND_TRUTH_NODE_PARAMETERS)


def _planned_node_rows() -> list[tuple[str, str]]:
    """(executable, parameter) for every planned node parameter that has a row in the table."""
    pairs: set[tuple[str, str]] = set()
    for scenario in ("search_rescue", "plume", "cats_mouse", "keep_spot"):
        specs = lp.plan(scenario, record=str(Path("/tmp/qrsim_hostile_never_written")), lockstep=True,
                        real_time_factor=0.0, duration_s=1.0)
        for spec in specs:
            if spec.module is None:
                continue
            table = _node_table(spec.executable)
            pairs.update((spec.executable, name) for name in table.names if name in LIMITS)
    return sorted(pairs)


PLANNED = _planned_node_rows()


def test_the_plan_covers_the_bounded_values() -> None:
    names = {name for _, name in PLANNED}
    assert {"num_vehicles", "seed", "real_time_factor", "duration_s", "lockstep_timeout_s",
            "command_timeout_s", "start_subscribers", "start_timeout_s", "tf_every_n_ticks"} <= names
    assert len({exe for exe, _ in PLANNED}) >= 10


@pytest.mark.parametrize(("executable", "name"), PLANNED)
def test_every_node_accepts_the_whole_range_the_launcher_accepts(executable: str, name: str) -> None:
    from qrsim_ros.ros.parameters import ParameterError, descriptor

    limit, param = LIMITS[name], _node_table(executable)[name]
    middle = (limit.lo + limit.hi) // 2 if limit.integer else (limit.lo + limit.hi) / 2
    for inside in (limit.lo, limit.hi, middle):
        value = param.type(inside)
        assert limit.contains(value)
        param.check(value)  # the node's own rule
    # and the node's declared ROS range is the table's, exactly (a wider one would hide launcher bugs)
    d = descriptor(param)
    ranges = d.integer_range if param.type is int else d.floating_point_range
    assert (ranges[0].from_value, ranges[0].to_value) == (limit.lo, limit.hi)
    # just outside: both refuse
    step = 1 if limit.integer else max(1e-3, abs(limit.hi) * 1e-6)
    for outside in (limit.lo - step, limit.hi + step):
        assert not limit.contains(param.type(outside))
        with pytest.raises(ParameterError):
            param.check(param.type(outside))


@pytest.mark.parametrize("limit", list(LIMITS.values()), ids=list(LIMITS))
def test_every_row_has_a_unit_or_a_reason_and_a_sound_range(limit: Limit) -> None:
    assert limit.lo < limit.hi and limit.reason
    assert limit.contains(limit.lo) and limit.contains(limit.hi)
    assert not limit.contains(True) and not limit.contains(float("nan"))
    with pytest.raises(ConfigError) as info:
        limit.check(limit.hi + 1)
    assert limit.name in _one_line_error(info)
    assert f"`{limit.name}`" in markdown_table()


def test_the_readme_prints_the_table() -> None:
    doc = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert markdown_table() in doc, "README.md's limits table is out of date: python -m " \
        "qrsim_ros.core.common.limits prints it"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"num_vehicles": 1001}, "num_vehicles=1001 must be an integer in [0, 1000]"),
    ({"num_vehicles": 10000}, "num_vehicles=10000 must be an integer in [0, 1000]"),
    ({"real_time_factor": 1e9}, "real_time_factor=1000000000.0 must be a number in [0, 10000]"),
    ({"duration_s": 1e12}, "duration_s=1000000000000.0 must be a number in [0, 1000000000] s"),
    ({"node_parameters": {"vehicle_dynamics": {"lockstep_timeout_s": 0.0}}},
     "vehicle_dynamics:lockstep_timeout_s=0.0 must be a number in [0.001, 3600] s"),
    ({"node_parameters": {"imu": {"seed": -5}}}, "imu:seed=-5 must be an integer in [-1, 2147483647]"),
    ({"node_parameters": {"vehicle_dynamics": {"tf_every_n_ticks": "x" * 500}}},
     "vehicle_dynamics:tf_every_n_ticks='xxxxx"),
])
def test_the_launcher_refuses_what_the_nodes_would(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(lp.PlanError) as info:
        lp.plan("keep_spot", **kwargs)
    text = _one_line_error(info)
    assert message in text and len(text) < 300


def test_a_scenario_file_with_more_vehicles_than_a_graph_takes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text((REPO_ROOT / "config" / "keep_spot.yaml").read_text() + "\nnum_vehicles: 1500\n",
                    encoding="utf-8")
    assert load_scenario(path).num_vehicles == 1500  # in process: fine (up to 10000)
    with pytest.raises(lp.PlanError) as info:
        lp.plan(str(path))
    assert f"exceeds the node graph's maximum {MAX_GRAPH_VEHICLES}" in _one_line_error(info)


@pytest.mark.parametrize(("argv", "message"), [
    (["--num-vehicles", "5000"], "--num-vehicles 5000 must be an integer in [0, 1000]"),
    (["--real-time-factor", "1e9"], "--real-time-factor 1000000000.0 must be a number in [0, 10000]"),
    (["--param", "vehicle_dynamics:real_time_factor=1e9"],
     "vehicle_dynamics:real_time_factor=1000000000.0 must be"),
])
def test_qrsim_launch_refuses_out_of_range_values_with_one_line(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    from qrsim_ros.cli.main import main

    rc = main(["launch", "keep_spot", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and message in err, err


def test_the_scenario_takes_its_vehicle_range_from_the_table(tmp_path: Path) -> None:
    path = _scenario_with(tmp_path, "num_vehicles: 10001\n")
    with pytest.raises(ScenarioError, match=r"num_vehicles=10001 must be an integer in \[1, 10000\]"):
        load_scenario(path)


def test_domain_ids_are_in_the_table() -> None:
    assert LIMITS["domain_id"].contains(0) and LIMITS["domain_id"].contains(232)
    assert not LIMITS["domain_id"].contains(233)



# --- qrsim batch --workers, outputs over inputs -----------------------------------------------------------

def test_batch_caps_workers_at_the_usable_cpus(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from qrsim_ros.cli import batch
    from qrsim_ros.cli.main import main

    started: list[int] = []
    real = batch.run_jobs
    monkeypatch.setattr(batch, "usable_cpus", lambda: 2)
    monkeypatch.setattr(batch, "run_jobs", lambda *a, **k: started.append(a[2]) or real(*a, **k))
    t0 = time.perf_counter()
    rc = main(["batch", "keep_spot", "--runs", "2", "--workers", "100000", "--steps", "3", "--no-progress",
               "--engine", "multiprocessing"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert started == [2] and "on 2 worker(s)" in out
    assert err.count("\n") == 1 and "--workers 100000 capped at the 2 CPU(s)" in err
    assert time.perf_counter() - t0 < 60


def test_usable_cpus_is_the_affinity() -> None:
    from qrsim_ros.cli.batch import usable_cpus

    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert usable_cpus() == expected >= 1


def _replay_inputs(path: Path) -> str:
    rows = ["pitch,roll,throttle,yaw_rate,battery"] + ["0,0,0.59004353928,0,12"] * 5
    text = "\n".join(rows) + "\n"
    path.write_text(text, encoding="utf-8")
    return text


@pytest.mark.parametrize("alias", ["same", "relative", "symlink", "hardlink"])
def test_replay_refuses_to_write_over_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch, alias: str) -> None:
    from qrsim_ros.cli.main import main

    log = tmp_path / "log.csv"
    text = _replay_inputs(log)
    monkeypatch.chdir(tmp_path)
    out = {"same": str(log), "relative": "./sub/../log.csv", "symlink": "link.csv",
           "hardlink": "hard.csv"}[alias]
    (tmp_path / "sub").mkdir()
    if alias == "symlink":
        (tmp_path / "link.csv").symlink_to(log)
    if alias == "hardlink":
        os.link(log, tmp_path / "hard.csv")
    rc = main(["replay", "--inputs", str(log), "--out", out])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "refusing to write the output over the input --inputs" in err
    assert log.read_text(encoding="utf-8") == text  # untouched
    assert not list(tmp_path.glob(".*.tmp"))


def test_replay_to_another_file_still_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from qrsim_ros.cli.main import main

    log = tmp_path / "log.csv"
    _replay_inputs(log)
    rc = main(["replay", "--inputs", str(log), "--out", str(tmp_path / "out.csv")])
    assert rc == 0, capsys.readouterr().err
    assert (tmp_path / "out.csv").read_text().count("\n") >= 5


@pytest.mark.parametrize("command", ["run", "batch"])
def test_run_and_batch_refuse_to_write_over_the_scenario_or_policy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    from qrsim_ros.cli.main import main

    scenario = tmp_path / "mine.yaml"
    text = (REPO_ROOT / "config" / "keep_spot.yaml").read_text(encoding="utf-8")
    scenario.write_text(text, encoding="utf-8")
    (tmp_path / "link.yaml").symlink_to(scenario)
    extra = ["--runs", "1", "--workers", "1"] if command == "batch" else []
    rc = main([command, str(scenario), "--steps", "2", "--no-progress", *extra, "--out",
               str(tmp_path / "link.yaml")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "over the input scenario" in err, err
    assert scenario.read_text(encoding="utf-8") == text
    policy = tmp_path / "hover.py"
    policy.write_text("import numpy as np\ndef make(view):\n    return lambda v: None\n", encoding="utf-8")
    rc = main([command, str(scenario), "--steps", "2", "--no-progress", *extra, "--policy",
               f"{policy}:make", "--out", str(policy)])
    err = capsys.readouterr().err
    assert rc == 2 and "over the input --policy" in err, err


def test_a_battery_of_a_million_cells_is_refused_and_the_largest_pack_flies() -> None:
    """The pack's cell count comes from the limits table: 1,000,000 cells (which reported 3.98 MV) is
    refused in one line naming the key and the range; the largest allowed pack steps to a voltage of
    its cells (24 of them, each between its cut-off and full charge)."""
    from qrsim_ros.core.engine.simulator import Simulator

    limit = LIMITS["battery_cells"]
    with pytest.raises(ScenarioError) as refused:
        load_scenario("keep_spot", {"vehicle": {"battery": {"cells": 1_000_000}}})
    text = str(refused.value)
    assert "\n" not in text and "battery.cells=1000000" in text and limit.allowed() in text
    sc = load_scenario("keep_spot", {"vehicle": {"battery": {"cells": int(limit.hi)}}})
    sim = Simulator(sc)
    sim.reset()
    volts = float(sim.battery.bank.voltage_v[0])
    pack = sc.vehicle.battery.pack
    assert int(limit.hi) * pack.cutoff_v_per_cell < volts < int(limit.hi) * pack.ocv[-1, 1]

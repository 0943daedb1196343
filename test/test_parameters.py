"""Node parameter tables (qrsim_ros.ros.parameters): the rules without rclpy, the descriptors over DDS.

- Without rclpy: a table validates a dict of values by the rules every node applies at start-up (ranges,
  choices, integers taken by float parameters, values of another type rejected), each rejection one
  line naming the parameter, its value and what is allowed; the node tables themselves are sound.
- With rclpy in this process: ``declare_parameters`` on a node with overrides returns the typed struct,
  and rejects what rclpy rejects (wrong type, out of range) in the table's words.
- Real node processes over DDS (free ROS_DOMAIN_IDs): what ``ros2 param describe`` shows
  (rcl_interfaces DescribeParameters) is every row of the node's table: its description, range or
  choices and read-only flag; a bad ``-p`` value ends the process with status 1 and one line.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rosenv import ask, free_domain, node_output_lines, python, require_ros, ros_env

from qrsim_ros.ros.parameters import (
    SCENARIO_PARAMETERS,
    Param,
    ParameterError,
    ParamTable,
    scenario_from_parameters,
)

#: The nodes whose parameters are one table (``PARAMETERS`` in the node module).
TABLE_NODES = ("vehicle_dynamics", "flight_controller", "referee", "example_autopilot", "recorder")

NUMBER = Param("gain", 1.5, "a gain [-]", lo=0.0, hi=10.0)
COUNT = Param("count", 3, "a count", lo=1, hi=5)
FLAG = Param("flag", False, "a switch")
MODE = Param("mode", "wait", "what to do", choices=("wait", "continue"))
TEXT = Param("label", "", "free text")
TABLE = ParamTable("demo_node", NUMBER, COUNT, FLAG, MODE, TEXT)


def _error(param_or_table: Param | ParamTable, value: Any) -> str:
    with pytest.raises(ParameterError) as info:
        if isinstance(param_or_table, Param):
            param_or_table.check(value)
        else:
            param_or_table.validate(value)
    text = str(info.value)
    assert "\n" not in text
    return text


# --- the rules, without rclpy ------------------------------------------------------------------------

def test_values_of_the_right_type_pass_and_floats_take_integers() -> None:
    assert NUMBER.check(2) == 2.0 and type(NUMBER.check(2)) is float
    assert NUMBER.check(0.0) == 0.0 and NUMBER.check(10) == 10.0  # the range is closed
    assert COUNT.check(1) == 1 and COUNT.check(5) == 5
    assert FLAG.check(True) is True
    assert MODE.check("continue") == "continue"
    assert TEXT.check("anything") == "anything"


@pytest.mark.parametrize(("param", "value", "message"), [
    (NUMBER, "abc", "parameter 'gain'='abc' must be a number"),
    (NUMBER, True, "parameter 'gain'=True must be a number"),
    (NUMBER, -0.5, "parameter 'gain'=-0.5 outside [0.0, 10.0]"),
    (NUMBER, 11, "parameter 'gain'=11.0 outside [0.0, 10.0]"),
    (NUMBER, math.nan, "parameter 'gain'=nan outside [0.0, 10.0]"),
    (COUNT, 2.0, "parameter 'count'=2.0 must be an integer"),
    (COUNT, "2", "parameter 'count'='2' must be an integer"),
    (COUNT, False, "parameter 'count'=False must be an integer"),
    (COUNT, 0, "parameter 'count'=0 outside [1, 5]"),
    (COUNT, 6, "parameter 'count'=6 outside [1, 5]"),
    (FLAG, 1, "parameter 'flag'=1 must be true or false"),
    (FLAG, "true", "parameter 'flag'='true' must be true or false"),
    (MODE, "stop", "parameter 'mode'='stop' must be one of wait, continue"),
    (MODE, 1, "parameter 'mode'=1 must be a string"),
    (TEXT, 1.0, "parameter 'label'=1.0 must be a string"),
])
def test_bad_values_are_one_line_naming_the_parameter_and_what_is_allowed(param: Param, value: Any,
                                                                         message: str) -> None:
    assert _error(param, value) == message


def test_a_table_validates_a_dict_into_a_frozen_typed_struct() -> None:
    p = TABLE.validate({"gain": 3, "mode": "continue"})
    assert p == TABLE.struct(gain=3.0, count=3, flag=False, mode="continue", label="")
    assert type(p.gain) is float and type(p).__name__ == "DemoNodeParameters"
    assert [f.type for f in dataclasses.fields(p)] == [float, int, bool, str, str]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.gain = 4.0  # type: ignore[misc]
    assert TABLE.defaults() == TABLE.validate({})
    assert TABLE.names == ("gain", "count", "flag", "mode", "label") and len(TABLE) == 5
    assert TABLE["count"] is COUNT and "mode" in TABLE and "nope" not in TABLE
    # the first bad value in table order is reported
    assert _error(TABLE, {"label": 2, "count": 9}) == "parameter 'count'=9 outside [1, 5]"
    assert _error(TABLE, {"gian": 2.0}) == ("unknown parameter(s) of demo_node: gian "
                                            "(known: gain, count, flag, mode, label)")
    assert TABLE.validate({"gian": 2.0}, ignore_unknown=True) == TABLE.defaults()


def test_tables_extend_tables() -> None:
    both = ParamTable("x", *SCENARIO_PARAMETERS, COUNT)
    assert both.names == ("scenario", "seed", "num_vehicles", "mavlink", "run_id", "count")
    assert both.defaults().seed == -1


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Param("x", 20, "d", lo=0, hi=10), "'x'=20 outside"),
    (lambda: Param("x", "a", "d", choices=("b",)), "'x'='a' must be one of b"),
    (lambda: Param("x", 1, "d", choices=("1",)), "choices need a string parameter"),
    (lambda: Param("x", True, "d", lo=0, hi=1), "a range needs a number parameter"),
    (lambda: Param("x", 1.0, "d", lo=0.0), "give both lo and hi"),
    (lambda: Param("x", [1], "d"), "is not a bool, int, float or str"),
    (lambda: Param("x", 1, ""), "has no description"),
    (lambda: Param("a.b", 1, "d"), "is not an identifier"),
    (lambda: ParamTable("t", COUNT, FLAG, COUNT), "repeated count"),
])
def test_a_wrong_table_fails_where_it_is_written(make: Any, message: str) -> None:
    with pytest.raises((TypeError, ParameterError), match=message.replace("[", r"\[")):
        make()


def test_the_node_tables() -> None:
    """Each converted node has one table: its defaults pass their own rules, every row is described,
    the simulation nodes start with the scenario rows."""
    for name in TABLE_NODES:
        table = importlib.import_module(f"qrsim_ros.nodes.{name}").PARAMETERS
        assert isinstance(table, ParamTable) and table.name == name
        assert table.validate({}) == table.defaults()
        assert all(p.description and p.read_only for p in table)
        if name != "recorder":
            assert table.params[:len(SCENARIO_PARAMETERS)] == SCENARIO_PARAMETERS.params, name
    referee = importlib.import_module("qrsim_ros.nodes.referee").PARAMETERS
    assert referee["ground_truth_source"].choices == ("fleet", "odometry")


def test_the_scenario_rows_load_the_scenario() -> None:
    sc = scenario_from_parameters(SCENARIO_PARAMETERS.validate(
        {"scenario": "keep_spot", "seed": 7, "num_vehicles": 2}))
    assert (sc.name, sc.seed, sc.num_vehicles) == ("keep_spot", 7, 2)
    keep = scenario_from_parameters(SCENARIO_PARAMETERS.validate({"scenario": "keep_spot"}))
    assert keep.seed == scenario_from_parameters(SCENARIO_PARAMETERS.validate(
        {"scenario": "keep_spot", "seed": -1})).seed
    with pytest.raises(ParameterError, match=r"^parameter 'scenario'='no_such_scenario': "):
        scenario_from_parameters(SCENARIO_PARAMETERS.validate({"scenario": "no_such_scenario"}))
    assert _error(SCENARIO_PARAMETERS, {"seed": -2}) == "parameter 'seed'=-2 outside [-1, 2147483647]"


# --- with rclpy, in this process ---------------------------------------------------------------------

def test_descriptors() -> None:
    require_ros()
    from rcl_interfaces.msg import ParameterDescriptor

    from qrsim_ros.ros.parameters import descriptor

    d = descriptor(NUMBER)
    assert isinstance(d, ParameterDescriptor)
    assert (d.description, d.read_only, d.dynamic_typing) == ("a gain [-]", True, True)
    assert [(r.from_value, r.to_value, r.step) for r in d.floating_point_range] == [(0.0, 10.0, 0.0)]
    assert not d.integer_range and not d.additional_constraints
    d = descriptor(COUNT)
    assert [(r.from_value, r.to_value, r.step) for r in d.integer_range] == [(1, 5, 0)]
    assert not d.dynamic_typing and not d.floating_point_range
    d = descriptor(MODE)
    assert d.additional_constraints == "one of: wait, continue" and not d.dynamic_typing
    assert not descriptor(Param("w", 1, "writable", read_only=False)).read_only


@pytest.mark.graph
@pytest.mark.parametrize(("overrides", "expected"), [
    ({}, {}),
    ({"gain": 2, "count": 5, "flag": True, "mode": "continue", "label": "x"},
     {"gain": 2.0, "count": 5, "flag": True, "mode": "continue", "label": "x"}),
    ({"gain": 2.5}, {"gain": 2.5}),
    ({"gain": "abc"}, "parameter 'gain'='abc' must be a number"),
    ({"gain": 12.0}, "parameter 'gain'=12.0 outside [0.0, 10.0]"),
    ({"gain": 12}, "parameter 'gain'=12.0 outside [0.0, 10.0]"),
    ({"count": 9}, "parameter 'count'=9 outside [1, 5]"),  # rclpy's range check rejects it first
    ({"count": "abc"}, "parameter 'count'='abc' must be an integer"),  # and rclpy's type check this
    ({"count": 2.0}, "parameter 'count'=2.0 must be an integer"),
    ({"flag": 1}, "parameter 'flag'=1 must be true or false"),
    ({"mode": "stop"}, "parameter 'mode'='stop' must be one of wait, continue"),
    ({"label": 3}, "parameter 'label'=3 must be a string"),
])
def test_declare_parameters_on_a_node(rclpy_context: Any, overrides: dict[str, Any],
                                      expected: dict[str, Any] | str) -> None:
    import rclpy
    from rclpy.parameter import Parameter

    from qrsim_ros.ros.parameters import declare_parameters

    node = rclpy.create_node("param_table_test", context=rclpy_context,
                             parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
    try:
        if isinstance(expected, str):
            with pytest.raises(ParameterError) as info:
                declare_parameters(node, TABLE)
            assert str(info.value) == expected
        else:
            p = declare_parameters(node, TABLE)
            assert p == TABLE.validate(expected)
            for row in TABLE:
                desc = node.describe_parameter(row.name)
                assert desc.description == row.description and desc.read_only
    finally:
        node.destroy_node()


# --- real node processes over DDS --------------------------------------------------------------------

def _start(module: str, params: dict[str, Any], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    args = [python(), "-m", f"qrsim_ros.nodes.{module}", "--ros-args"]
    for key, value in params.items():
        args += ["-p", f"{key}:={str(value).lower() if isinstance(value, bool) else value}"]
    with open(log, "w") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent,
                                start_new_session=True)


@pytest.mark.graph
def test_ros2_param_describe_shows_every_row_of_the_tables(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Each node process answers DescribeParameters (``ros2 param describe``) for every row of its table
    with the row's description, type, range or choices and read-only flag; GetParameters gives the
    values it was started with."""
    require_ros()
    from rcl_interfaces.msg import ParameterType
    from rcl_interfaces.srv import DescribeParameters, GetParameters
    from test_node_dynamics import Probe

    domain = free_domain()
    env = ros_env(tmp_path, domain)
    common = {"scenario": "keep_spot", "seed": 5, "num_vehicles": 2}
    started = {
        "vehicle_dynamics": {**common, "real_time_factor": 1, "lockstep_on_timeout": "continue"},
        "flight_controller": {**common, "max_pending_ticks": 7},
        "referee": {**common, "ground_truth_source": "odometry"},
        "example_autopilot": {**common, "policy": "hover"},
        "recorder": {"output_dir": str(tmp_path / "bag"), "compression": "none"},
    }
    procs = {name: _start(name, params, env, tmp_path / f"{name}.log") for name, params in started.items()}
    probe = Probe(tmp_path, domain, monkeypatch)
    kinds = {bool: ParameterType.PARAMETER_BOOL, int: ParameterType.PARAMETER_INTEGER,
             float: ParameterType.PARAMETER_DOUBLE, str: ParameterType.PARAMETER_STRING}
    try:
        for name, params in started.items():
            table: ParamTable = importlib.import_module(f"qrsim_ros.nodes.{name}").PARAMETERS
            describe = probe.node.create_client(DescribeParameters, f"/{name}/describe_parameters")
            answer = ask(describe, DescribeParameters.Request(names=list(table.names)),
                         f"{name} describe_parameters")
            assert [d.name for d in answer.descriptors] == list(table.names), name
            for row, d in zip(table, answer.descriptors, strict=True):
                where = f"{name}.{row.name}"
                assert d.description == row.description, where
                assert d.read_only is True, where
                assert d.dynamic_typing is (row.type is float), where
                value = params.get(row.name, row.default)
                assert d.type == kinds[type(value) if row.type is float else row.type], where
                ranges = [(r.from_value, r.to_value) for r in (*d.integer_range, *d.floating_point_range)]
                assert ranges == ([] if row.lo is None else [(row.lo, row.hi)]), where
                if row.lo is not None:
                    assert bool(d.integer_range) is (row.type is int), where
                assert d.additional_constraints == ("one of: " + ", ".join(row.choices) if row.choices
                                                    else ""), where
            get = probe.node.create_client(GetParameters, f"/{name}/get_parameters")
            values = ask(get, GetParameters.Request(names=list(params)), f"{name} get_parameters")
            fields = {1: "bool_value", 2: "integer_value", 3: "double_value", 4: "string_value"}
            got = {k: getattr(v, fields[v.type]) for k, v in zip(params, values.values, strict=True)}
            assert got == params, name
            assert procs[name].poll() is None, (tmp_path / f"{name}.log").read_text()
    finally:
        probe.close()
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGINT)  # the node's own session
        codes = {name: p.wait(timeout=30) for name, p in procs.items()}
    assert codes == dict.fromkeys(started, 0), {n: (tmp_path / f"{n}.log").read_text()[-2000:] for n in procs}


@pytest.mark.graph
@pytest.mark.parametrize(("node", "params", "line"), [
    ("referee", {"path_max_poses": 0}, "parameter 'path_max_poses'=0 outside [1, 1000000]"),
    ("referee", {"marker_period_s": "often"}, "parameter 'marker_period_s'='often' must be a number"),
    ("referee", {"ground_truth_source": "gps"},
     "parameter 'ground_truth_source'='gps' must be one of fleet, odometry"),
    ("flight_controller", {"max_pending_ticks": "many"},
     "parameter 'max_pending_ticks'='many' must be an integer"),
    ("flight_controller", {"use_vehicle_status": 1},
     "parameter 'use_vehicle_status'=1 must be true or false"),
    ("vehicle_dynamics", {"real_time_factor": 20000},
     "parameter 'real_time_factor'=20000.0 outside [0.0, 10000.0]"),
    ("recorder", {"output_dir": "x", "queue_depth": 2.5}, "parameter 'queue_depth'=2.5 must be an integer"),
])
def test_a_bad_value_exits_1_with_one_line_naming_the_parameter(tmp_path: Path, node: str,
                                                                params: dict[str, Any], line: str) -> None:
    require_ros()
    env = ros_env(tmp_path)  # a free domain
    log = tmp_path / "node.log"
    proc = _start(node, {"scenario": "keep_spot", **params} if node != "recorder" else params, env, log)
    try:
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    lines = node_output_lines(log.read_text())
    assert code == 1, lines
    assert len(lines) == 1 and lines[0].endswith(f"error: {line}"), lines
